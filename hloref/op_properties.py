"""Op properties: what the rest of hloref knows about an opcode beyond its catalogue row,
written once, each with its reason.

``hloref/opcodes.py`` holds one row per opcode (arity, family, kinds, groups). The
properties here are the facts that used to be hand-typed sets of opcode names next to
the code that read them (the envelope's exact ops, the reducer's vectorizable
combiners, ULP budgets, the generator's deliberate narrowing, ...). Every such set is
derived from here: ``tests/test_opcode_literals.py`` fails on a collection of three or
more opcode names anywhere else.

Format of the tables below: a property starts with a line ``[name] reason`` (the
reason continues on following lines that start with ``|``); then lines of opcodes,
each either ``opcode`` or ``opcode=value`` (a property with values maps each opcode to
its value as text; ``value_of`` converts it). Lines starting with ``#`` are comments.
The tables are split by the part of hloref that reads them, so that each part's facts
sit together; a property name is unique across all of them.
"""

from __future__ import annotations

from dataclasses import dataclass

from hloref.opcodes import CATALOGUE

__all__ = ["Property", "PROPERTIES", "opcodes_with", "values_of", "has_property"]


@dataclass(frozen=True)
class Property:
    name: str
    reason: str
    values: dict[str, str]          # opcode -> value text ("" for a plain set)
    table: str                      # which table below states it

    @property
    def opcodes(self) -> frozenset[str]:
        return frozenset(self.values)


#: Properties the evaluator and the GPU backend read.
_EVALUATOR = """
"""

#: Properties the verdict wing reads: comparison, known classes, reduction, strategies,
#: mutations, the user-program translations.
_VERDICT = """
"""

#: Properties the envelope (``fuzz/perturb.py`` and its parts) reads.
_ENVELOPE = """
[envelope-exact] Results computed exactly from their operands, or moved unchanged: the
| envelope's runs never perturb them (data movement, selection, comparison, rounding
| to an integer, control flow and communication without arithmetic; the ops that a
| type makes inexact are ``e8m0-inexact`` and the complex ``abs``).
parameter constant tuple get-tuple-element bitcast reshape transpose broadcast slice
dynamic-slice dynamic-update-slice concatenate pad reverse copy copy-start copy-done
gather select clamp maximum minimum negate abs compare iota sort topk floor ceil
round-nearest-afz round-nearest-even sign is-finite real imag complex bitcast-convert
reduce-precision remainder while call fusion conditional async-start async-done
async-update opt-barrier domain after-all add-dependency get-dimension-size
set-dimension-size dynamic-reshape rng rng-bit-generator rng-get-and-update-state infeed
outfeed send send-done recv recv-done partition-id replica-id collective-permute
collective-permute-start collective-permute-done all-gather all-gather-start
all-gather-done all-to-all ragged-all-to-all shuffle select-and-scatter map
stochastic-convert

[e8m0-inexact] Exact in every type but f8e8m0fnu, which has neither zero nor sign: its
| f32 value there (0, a negative, a NaN's image) is not representable and XLA's float
| normalization may keep it under excess precision; the value is the numpy function
| that computes the op exactly in f64 (``round_afz``: half away from zero).
remainder=fmod negate=negative floor=floor ceil=ceil round-nearest-even=rint
round-nearest-afz=round_afz

[communicating] Accumulating collectives: evaluating one again is another rendezvous
| with the other devices, which only the devices whose run chose to recompute would
| join; each result element sums one term per participant.
all-reduce all-reduce-start reduce-scatter collective-reduce

[combiner-accumulating] Accumulations through a written combiner computation
| (``to_apply``): their order is free only when the combiner adds or multiplies.
reduce reduce-window scatter all-reduce all-reduce-start reduce-scatter collective-reduce

[f32-product-sum] Products summed in f32 when the operands are narrower (XLA:CPU and
| XLA:GPU both do): the accumulation budget uses f32's epsilon for narrow floats.
dot convolution ragged-dot scaled-dot

[arithmetic-user] Consumers that read a value through its numeric value, in f32 or
| wider, so a narrow operand kept unrounded in f32 means to them what excess precision
| means to XLA; bit-level and structural users get the rounded value. Float
| normalization computes a narrow reduce in f32 too, reading its inputs' f32 values
| where a convert pair was removed (an f8e8m0fnu acosh read by a convert and a min/max
| reduce: XLA's convert saw 6.93, the e8m0 value is 8; a campaign, seed 23).
add subtract multiply divide sqrt rsqrt cbrt exponential exponential-minus-one log
log-plus-one tanh logistic sine cosine tan atan2 power maximum minimum negate abs compare
convert dot convolution erf sinh cosh asin acos atan asinh acosh atanh reduce reduce-window

[random-rounded] Results an exact wider computation can check, randomly rounded where
| inexact (CESTAC); the value is the numpy function computing it in f64.
add=add subtract=subtract multiply=multiply divide=divide sqrt=sqrt

[narrow-math-f64] Transcendentals XLA computes in f32 for a narrow float and rounds
| (a few f32 ULPs, far below one narrow ULP: either neighbour of the exact value); the
| value is the numpy function of the f64 reference (``logistic``, ``rsqrt``: written
| out in ``perturb.py``).
exponential=exp exponential-minus-one=expm1 log=log log-plus-one=log1p tanh=tanh
logistic=logistic sine=sin cosine=cos tan=tan atan=arctan atan2=arctan2 cbrt=cbrt
rsqrt=rsqrt power=power sinh=sinh cosh=cosh asin=arcsin acos=arccos asinh=arcsinh
acosh=arccosh atanh=arctanh

[daz-reader] Arithmetic that XLA:CPU's DAZ bit lets read a subnormal operand as zero
| (data movement, control flow and accumulations are left out: the terms of a sum XLA
| may flush are in the accumulation budget, ``flushed_terms``).
add subtract multiply divide remainder power atan2 compare sign floor ceil
round-nearest-afz round-nearest-even maximum minimum clamp sqrt rsqrt cbrt log
log-plus-one exponential exponential-minus-one tanh logistic sine cosine tan atan erf
sinh cosh asin acos asinh acosh atanh convert

[program-control] Instructions whose called computations are program steps (perturbed
| like the entry's); the value is the attributes naming them. Computations applied by
| reduce, scatter, sort... are combiners, not steps; XLA:CPU runs a scan as a while
| loop (per-step arithmetic) and XLA's MapInliner inlines a map's computation into
| elementwise ops.
call=to_apply fusion=calls while=condition,body scan=to_apply map=to_apply
conditional=branch_computations,true_computation,false_computation async-start=calls

[pairwise-combiner] Combiners that are associative and commutative on their own pair of
| scalars (a reducer ``op(x_j, y_j)`` of one such op is reordered like a single one).
add multiply maximum minimum and or xor

[reordered-combiner] Combiners whose order of application is free and rounds: a sum's
| terms, a product's factors (XLA:CPU reassociates both; max/min/and/or/xor are exact).
add multiply

[complex-formula] Complex transcendentals XLA:CPU builds from real formulas
| (elementwise_ir_emitter): their error is bounded by the formula's, not a ULP budget.
sine cosine power atan2
"""


def _parse(table_name: str, text: str, out: dict[str, Property]) -> None:
    name = reason = None
    values: dict[str, str] = {}

    def close() -> None:
        if name is not None:
            out[name] = Property(name, " ".join(reason.split()), dict(values), table_name)

    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            close()
            end = line.index("]")
            name, reason, values = line[1:end], line[end + 1:], {}
            if name in out:
                raise ValueError(f"op property {name!r} is stated twice")
        elif line.startswith("|"):
            reason += " " + line[1:]
        else:
            if name is None:
                raise ValueError(f"{table_name}: opcodes before the first [property]: {line!r}")
            for word in line.split():
                opcode, _, value = word.partition("=")
                if opcode not in CATALOGUE:
                    raise ValueError(f"op property {name!r} names unknown opcode {opcode!r}")
                values[opcode] = value
    close()


PROPERTIES: dict[str, Property] = {}
for _table_name, _text in (("evaluator", _EVALUATOR), ("verdict", _VERDICT),
                           ("envelope", _ENVELOPE)):
    _parse(_table_name, _text, PROPERTIES)
del _table_name, _text


def opcodes_with(name: str) -> frozenset[str]:
    """The opcodes that have property ``name`` (KeyError for an unknown property)."""
    return PROPERTIES[name].opcodes


def has_property(opcode: str, name: str) -> bool:
    return opcode in PROPERTIES[name].values


def values_of(name: str, convert=str) -> dict[str, object]:
    """Opcode → value of property ``name``, each value passed through ``convert``."""
    return {op: convert(v) for op, v in PROPERTIES[name].values.items()}
