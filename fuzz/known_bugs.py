"""Known XLA:CPU bugs that campaigns keep rediscovering, recognised by the module's
structure (what constant folding evaluates, which types a reduce or a fused convert chain
has) and hloref's own values: a crash or a mismatch that is a variant of a finding
already stored under ``findings/`` is counted as known instead of filed again per type
or shape. ``hloref replay`` of the stored finding still says whether the bug reproduces.

Each class is a ``KnownClass`` record of :data:`RECORDS` (``fuzz/known_record.py``);
``fuzz/known_classes.py`` checks every record. The predicates that other records share
(a folded popcnt, a complex divide by a folded zero, a flushed f8e8m0fnu, a crashing
2-bit sort) are public here.
"""

from __future__ import annotations

import numpy as np

from hloref.op_properties import opcodes_with

from .compare import differs, infinity_became_nan
from .folding import evaluate_all, folded, free_values, operand_values
from .known_record import SIGNATURE, Case, KnownClass
from .stage_table import component_of

__all__ = ["RECORDS", "folded_popcnt_s4", "complex_divide_by_folded_zero",
           "folded_least_e8m0_flushed", "sort_2bit_crash"]

_TWO_BIT = ("s2", "u2")
#: ops that only move, copy or drop elements (values pass through unchanged)
_MOVES_ELEMENTS = opcodes_with("moves-elements")
#: s4 arithmetic XLA:CPU leaves unwrapped (op property ``s4-arithmetic``)
_S4_ARITHMETIC = opcodes_with("s4-arithmetic")
_F8 = ("f8e4m3fn", "f8e4m3fnuz", "f8e5m2", "f8e5m2fnuz", "f8e4m3", "f8e3m4", "f8e4m3b11fnuz")
#: opcode prefixes (``str.startswith``) of the ops property ``e8m0-moves`` names
_E8M0_MOVES = tuple(sorted(opcodes_with("e8m0-moves")))


def _type_name(instr) -> str:
    return getattr(getattr(instr.shape, "element_type", None), "name", "")


def _any(case: Case, test) -> bool:
    return any(test(i) for _, i in case.instructions())


def _folded(case: Case, keep) -> dict:
    """``{(computation, name): instruction}`` that ``keep`` accepts and constant folding
    evaluates (one fixpoint per case)."""
    free = case.shared("free", lambda: free_values(case.module))
    return folded(case.module, keep, free)


def _values(case: Case, instrs: dict, with_result=frozenset()) -> dict:
    """hloref's operand values (and result, for keys in ``with_result``) of ``instrs``,
    from the report's entry values or one evaluation shared by the case's predicates."""
    return operand_values(case.module, case.args or [], instrs,
                          getattr(case.report, "entry_values", None) or case.values or None,
                          with_result=with_result,
                          observed=lambda: case.shared(
                              "observed", lambda: evaluate_all(case.module, case.args or [])))


# ---------------------------------------------------------------- crashes


def _concatenate_2bit(case: Case) -> bool:
    return "SIGABRT" in case.message and _any(
        case, lambda i: i.opcode == "concatenate" and _type_name(i) in _TWO_BIT)


def sort_2bit_crash(case: Case) -> bool:
    """A SIGABRT or SIGSEGV from a module sorting s2/u2 values: a variadic sort of such
    keys corrupts the heap ("malloc(): unaligned fastbin chunk detected", or SIGSEGV by
    the run: a campaign, seed 31)."""
    return case.verdict == "crash" and ("SIGABRT" in case.message or
                                        "SIGSEGV" in case.message) and _any(
        case, lambda i: i.opcode == "sort" and any(_type_name(o) in _TWO_BIT
                                                  for o in i.operands))


def _bf16_to_pred(case: Case) -> bool:
    tail = case.stderr_tail
    return "SIGABRT" in case.message and ("Cannot select" in tail or "X86ISD::CMPP" in tail) \
        and _any(case, lambda i: i.opcode == "convert" and _type_name(i) == "pred" and
                 bool(i.operands) and _type_name(i.operands[0]) == "bf16")


def _simplifier_check(case: Case) -> bool:
    return "SIGABRT" in case.message and "Window dimensions do not match" in \
        case.stderr_tail and _any(case, lambda i: i.opcode == "convolution")


def _divide_by_folded_zero(case: Case) -> bool:
    """A SIGFPE from an integer ``divide``/``remainder`` whose operands depend on no
    parameter (constant folding evaluates it on the host) and whose divisor holds a zero
    in hloref's evaluation (INT_MIN / -1 folds fine: checked)."""
    if "SIGFPE" not in case.message:
        return False
    divisions = _folded(case, _integer_binary(("divide", "remainder")))
    return any(np.any(np.asarray(v[1]) == 0) for v in _values(case, divisions).values())


# ---------------------------------------------------------------- folders and passes


def _round_f8e3m4(case: Case) -> bool:
    return bool(_folded(case, lambda i: i.opcode in ("round-nearest-afz", "round-nearest-even")
                        and _type_name(i) == "f8e3m4"))


def _convolution_saturates(case: Case) -> bool:
    return bool(_folded(case, lambda i: i.opcode == "convolution" and getattr(
        getattr(i.shape, "element_type", None), "is_integer", False))) and \
        _saturated_only(case.report)


def _pred_times(case: Case) -> bool:
    return _pred_products(case.module) and _zeroed_only(case.report)


def _abs_of_square(case: Case) -> bool:
    return _signed_abs_of_square(case.module) and _negated_only(case.report)


def _exp_quotient(case: Case) -> bool:
    return _exp_quotients(case.module) and _nan_where_differs(case.report, 0)


def folded_popcnt_s4(case: Case) -> bool:
    """A folded ``popcnt`` of s2/s4: the folder counts the sign-extended storage byte."""
    return bool(_folded(case, lambda i: i.opcode == "popcnt" and _type_name(i) in ("s2", "s4")))


def _reduce_2bit(case: Case) -> bool:
    """A ``reduce`` of s2/u2 values, where no instruction alone is the culprit or the
    culprit is that reduce."""
    return (case.culprit is None or case.culprit.opcode == "reduce") and _any(
        case, lambda i: i.opcode == "reduce" and any(_type_name(o) in _TWO_BIT
                                                    for o in i.operands))


def complex_divide_by_folded_zero(case: Case) -> bool:
    """A complex ``divide`` by a zero where every element XLA gets wrong is hloref's
    infinity (C99 Annex G; XLA:CPU's divide alone too) as NaN: the simplifier's
    ``z * (1 / 0)`` of a constant zero divisor (a campaign, seed 79)."""
    if case.module is None or case.verdict != "mismatch":
        return False
    divides = {(c.name, i.name): i for c, i in case.instructions()
               if i.opcode == "divide" and getattr(getattr(i.shape, "element_type", None),
                                                   "is_complex", False)}
    if not divides or not _infinities_became_nan(case.report):
        return False
    return any(np.any(np.asarray(v[1]) == 0) for v in _values(case, divides).values())


def _s4_wraps(case: Case) -> bool:
    s4 = _s4_to_wider(case.module)
    for key, values in _values(case, s4).items():
        ufunc = getattr(np, s4[key].opcode)  # np.add, np.subtract, np.multiply
        wide = ufunc(*(np.asarray(v).astype(np.int64) for v in values))
        if np.any((wide < -8) | (wide > 7)):
            return True
    return False


def _power_of_minus_one(case: Case) -> bool:
    powers = _folded(case, _integer_binary(("power",)))
    for key, values in _values(case, powers).items():
        if not powers[key].shape.element_type.is_signed_integer:
            continue
        lhs, rhs = np.broadcast_arrays(*(np.asarray(v) for v in values))
        if np.any((rhs.astype(np.int64) < 0) & (lhs.astype(np.int64) == -1)):
            return True
    return False


def _folded_e8m0(case: Case) -> dict:
    return _folded(case, lambda i: _type_name(i) == "f8e8m0fnu" and
                   not i.opcode.startswith(_E8M0_MOVES))


def _e8m0_nan_from_none(case: Case) -> bool:
    """A folded f8e8m0fnu instruction whose value hloref finds NaN from operands without
    one: zero and negative values, which f8e8m0fnu cannot hold (the folder gives 2^-127
    for 0 and drops a sign)."""
    e8m0 = _folded_e8m0(case)
    for values in _values(case, e8m0, with_result=set(e8m0)).values():
        *operands, result = values
        if _has_nan(result) and not any(_has_nan(o) for o in operands):
            return True
    return False


def folded_least_e8m0_flushed(case: Case) -> bool:
    """A folded f8e8m0fnu instruction reading 2^-127 (an f32 subnormal the folder
    flushes) where every element XLA gets wrong is NaN: the flushed zero has no f8e8m0fnu
    value (ceil(2^-127) folds to NaN)."""
    if case.module is None or case.verdict != "mismatch":
        return False
    e8m0 = _folded_e8m0(case)
    return any(any(_holds_least_e8m0(o) for o in values[:-1])
               for values in _values(case, e8m0, with_result=set(e8m0)).values()) and \
        _nan_where_differs(case.report, 1)


def _clz_negative(case: Case) -> bool:
    clz = _folded(case, lambda i: i.opcode == "count-leading-zeros" and
                  i.shape.element_type.is_signed_integer)
    return any(np.any(np.asarray(v[0]).astype(np.int64) < 0)
               for v in _values(case, clz).values())


def _f4_infinity(case: Case) -> bool:
    f4 = _folded(case, lambda i: i.opcode in ("convert", "atanh") and
                 _type_name(i) == "f4e2m1fn")
    for key, values in _values(case, f4).items():
        x = _as_f64(values[0])
        if x is not None and np.any(np.isinf(x) if f4[key].opcode == "convert"
                                    else np.abs(x) == 1):
            return True
    return False


def _int_f8_unsigned_nan(case: Case) -> bool:
    chains = _int_f8_unsigned(case.module)
    return any(_has_nan(v[0]) for v in _values(case, chains, with_result=set(chains)).values())


def _arcs_of_integers(case: Case) -> bool:
    arcs = {(c.name, i.name): i for c, i in case.instructions()
            if i.opcode in ("asin", "acos") and i.operands and i.operands[0].opcode == "convert"
            and getattr(getattr(i.operands[0].operands[0].shape, "element_type", None),
                        "is_integer", False)}
    return any(_has_nan(v[-1]) for v in _values(case, arcs, with_result=set(arcs)).values())


def _arcs_f8e3m4(case: Case) -> bool:
    arcs = _folded(case, lambda i: i.opcode in ("asin", "acos") and _type_name(i) == "f8e3m4")
    return any(_has_nan(v[-1]) for v in _values(case, arcs, with_result=set(arcs)).values())


def _atan2_zero_zero(case: Case) -> bool:
    atan2 = _folded(case, lambda i: i.opcode == "atan2")
    for values in _values(case, atan2).values():
        y, x = np.broadcast_arrays(*(_as_f64(v) for v in values))
        if np.any((y == 0) & (x == 0)):
            return True
    return False


def _needs_module(predicate):
    """``predicate`` where the case has a module, else False."""
    def test(case: Case) -> bool:
        return case.module is not None and predicate(case)
    test.__doc__ = predicate.__doc__
    return test


_XLA = "xla-cpu-jaxlib-0.10.2"
_STABLEHLO = component_of("stablehlo")
_UP = f"findings/known-upstream/{_XLA}"
_CRASH = frozenset({"crash"})

#: The known classes recognised by module structure (each measured on XLA:CPU, jaxlib
#: 0.10.2); ``component`` and ``upstream`` are the stored finding's ``finding.json``
#: attribution and ``upstream.json`` thread.
RECORDS: tuple[KnownClass, ...] = tuple(
    KnownClass(name, "xla-difference", component, reason, _needs_module(predicate),
               finding=finding, upstream=upstream, verdicts=verdicts, specificity=SIGNATURE)
    for name, component, finding, upstream, verdicts, predicate, reason in [
        ("int-divide-by-constant-zero",
         component_of("stablehlo", "FoldDivOpPattern"),
         f"{_UP}/divide-u2-constant-zero-sigfpe",
         "https://github.com/openxla/stablehlo/pull/2971", _CRASH, _divide_by_folded_zero,
         "XLA:CPU (jaxlib 0.10.2) dies with SIGFPE when an integer divide or remainder whose "
         "operands constant folding evaluates has a zero divisor, in every integer type; "
         "XLA's semantics give x / 0 = -1 (all bits set), x % 0 = x"),
        ("concatenate-2bit-aborts",
         component_of("emitter"),
         f"findings/{_XLA}/concatenate-s2-aborts", None, _CRASH, _concatenate_2bit,
         "XLA:CPU (jaxlib 0.10.2) aborts (SIGABRT in IrArray::EmitArrayElementAddress) "
         "compiling a concatenate of s2 or u2 arrays (u2 checked too; s4, u4, s8 run)"),
        ("bf16-to-pred-cannot-select", "LLVM pass `SelectionDAGISel`",
         f"findings/{_XLA}/convert-bf16-to-pred-and-u16-llvm-cannot-select", None, _CRASH,
         _bf16_to_pred,
         "XLA:CPU (jaxlib 0.10.2, an AVX-512 host) aborts compiling a fusion that converts "
         "bf16 to pred and to a 16-bit integer (LLVM: Cannot select v16f32 X86ISD::CMPP)"),
        ("convolution-simplifier-check", "XLA HLO pass `algsimp`",
         f"findings/{_XLA}/convolution-lhs-dilate-simplifier-check-failure", None, _CRASH,
         _simplifier_check,
         "XLA:CPU (jaxlib 0.10.2) aborts compiling some valid convolutions with lhs_dilate: "
         "the algebraic simplifier's rewrite fails its own check (Window dimensions do not "
         "match RHS shape)"),
        ("round-f8e3m4-folding",
         _STABLEHLO,
         f"{_UP}/round-nearest-afz-f8e3m4-constant-folding",
         "https://github.com/llvm/llvm-project/issues/224353", frozenset({"mismatch"}),
         _round_f8e3m4,
         "XLA's constant folder (jaxlib 0.10.2) rounds every f8e3m4 value to NaN in "
         "round-nearest-afz and round-nearest-even (APFloat::roundToIntegral)"),
        ("convolution-int-folding-saturates", "XLA HLO pass `constant_folding`",
         f"findings/{_XLA}/convolution-u16-constant-folding-saturates", None,
         frozenset({"mismatch"}), _convolution_saturates,
         "XLA's constant folder (jaxlib 0.10.2) saturates an integer convolution's "
         "overflowing sums where the run-time code wraps (every element XLA gets wrong is "
         "the type's largest or smallest value)"),
        ("multiply-by-converted-pred", "XLA HLO pass `algsimp`", None,
         "https://github.com/jax-ml/jax/issues/12233", frozenset({"mismatch"}), _pred_times,
         "XLA's algebraic simplifier rewrites multiply(convert(p), x) of a pred p into "
         "select(p, x, 0): where p is false XLA:CPU gives +0 for a NaN, an infinite or a "
         "negative x (IEEE: NaN, NaN, -0); reported upstream (open)"),
        ("signed-square-assumed-nonnegative", "XLA HLO pass `algsimp`", None,
         "https://github.com/openxla/xla/issues/41784", frozenset({"mismatch"}),
         _abs_of_square,
         "XLA's algebraic simplifier takes a signed integer multiply(x, x) for non-negative "
         "and drops abs(x * x), so where x * x wraps to a negative value XLA:CPU returns it "
         "(jnp.abs(x * x) of int32 -1805746537: -847446767; wrapping semantics: 847446767). "
         "XLA's maintainers treat signed overflow as undefined (closed unmerged): not "
         "reported"),
        ("exp-quotient-rewrite", "XLA HLO pass `algsimp`", None, None,
         frozenset({"mismatch"}), _exp_quotient,
         "XLA's algebraic simplifier rewrites exp(A)/exp(B) into exp(A - B) "
         "(algebraic_simplifier.cc, on purpose): where exp overflows or underflows in both "
         "(inf/inf, 0/0: NaN by IEEE, hloref) XLA:CPU returns exp(A - B), e.g. 1 for "
         "exp(x)/exp(x) at x = 1.7e269"),
        ("reduce-2bit", "LLVM pass `ipsccp`", f"findings/{_XLA}/reduce-s2-maximum-of-broadcast",
         None, frozenset({"mismatch"}), _reduce_2bit,
         "XLA:CPU (jaxlib 0.10.2) reduces s2 values wrongly (a maximum of a broadcast "
         "scalar, a variadic minimum/maximum seen)"),
        ("s4-arithmetic-does-not-wrap", "XLA HLO pass `float-normalization-s4`",
         f"{_UP}/s4-add-does-not-wrap", "https://github.com/openxla/xla/issues/47315",
         frozenset({"mismatch"}), _s4_wraps,
         "XLA:CPU (jaxlib 0.10.2) returns unwrapped s4 sums and products when the result is "
         "converted to a wider type, directly or through ops that only move elements "
         "(multiply seen too)"),
        ("int-power-negative-folding", "XLA HLO pass `constant_folding`", None, None,
         frozenset({"mismatch"}), _power_of_minus_one,
         "XLA's constant folder (HloEvaluator) gives 0 for an integer power of -1 with a "
         "negative exponent; XLA:CPU's run-time code gives -1 or 1 by the exponent's parity, "
         "as hloref does (XLA's docs leave negative integer exponents undefined)"),
        ("f8e8m0fnu-constant-folding",
         _STABLEHLO,
         f"findings/{_XLA}/convert-f8e8m0fnu-negative-constant-folding", None,
         frozenset({"mismatch"}), _e8m0_nan_from_none,
         "XLA's constant folder (jaxlib 0.10.2) converts zero and negative values to "
         "f8e8m0fnu as 2^-127 and |x| (iota, convert, cosine seen), where f8e8m0fnu has "
         "neither and XLA:CPU's run-time code and ml_dtypes give NaN"),
        ("clz-negative-constant-folding", "XLA HLO pass `constant_folding`",
         f"{_UP}/clz-s8-constant-folding",
         "https://github.com/ROCm/xla/commit/1f2fd546c499b15ab1aae58eec4bdf5750c38381",
         frozenset({"mismatch"}), _clz_negative,
         "XLA's constant folder (jaxlib 0.10.2) gives a negative count-leading-zeros for "
         "negative values (s8 -3 -> -56, s32 -2 -> -32); the run-time code gives 0"),
        ("f4e2m1fn-infinity-folding",
         "the HLO↔StableHLO translation (hlo_to_stablehlo and back, with the MHLO folders "
         "it applies)", f"findings/{_XLA}/atanh-f4e2m1fn-constant-folding", None,
         frozenset({"mismatch"}), _f4_infinity,
         "XLA's constant folder (jaxlib 0.10.2) turns an infinity into f4e2m1fn 0 (a convert "
         "of inf, atanh of ±1), where the run-time code and ml_dtypes saturate to ±6"),
        ("convert-int-f8-unsigned-nan",
         component_of("emitter"),
         f"{_UP}/convert-int-f8-unsigned-fused-nan-saturates",
         "https://github.com/ROCm/xla/commit/b5af9f0a9ef7dca4f73d5db51b39e628e0f6db53",
         frozenset({"mismatch"}), _int_f8_unsigned_nan,
         "XLA:CPU (jaxlib 0.10.2) turns the NaN of an integer converted to an f8 type into "
         "the unsigned maximum when it fuses that convert with one to u32/u64 (each alone: "
         "NaN, then 0); into 6 with one to f4e2m1fn, where the NaN's zero is due"),
        ("asin-acos-of-integer-never-nan",
         component_of("emitter"),
         f"{_UP}/asin-acos-of-integer-never-nan",
         "https://github.com/llvm/llvm-project/pull/213812", frozenset({"mismatch"}),
         _arcs_of_integers,
         "XLA:CPU (jaxlib 0.10.2) takes asin/acos of a converted integer for never NaN: "
         "isnan gives false and sign 0 outside [-1, 1] (LLVM's KnownFPClass)"),
        ("acos-asin-f8e3m4-known-operand-inf", "LLVM pass `instcombine`",
         f"{_UP}/acos-f8e3m4-iota-out-of-domain-inf",
         "https://github.com/llvm/llvm-project/pull/213812", frozenset({"mismatch"}),
         _arcs_f8e3m4,
         "XLA:CPU (jaxlib 0.10.2) gives inf for acos/asin of f8e3m4 values outside [-1, 1] "
         "known when the kernel is compiled (an iota), NaN when they are a parameter"),
        ("atan2-zero-zero-folding",
         component_of("emitter"),
         f"{_UP}/atan2-iota-zero-zero-nan", "https://github.com/jax-ml/jax/issues/38681",
         frozenset({"mismatch"}), _atan2_zero_zero,
         "XLA:CPU (jaxlib 0.10.2) gives NaN for atan2(+0, +0) of operands it folds or fuses "
         "from constants (iota, subtract(x, x) of a folded compare), where parameters give "
         "+0 (MLIR's math.atan2 folder)"),
    ])


# ---------------------------------------------------------------- helpers

def _pred_products(module) -> bool:
    """Whether a float ``multiply`` reads a ``convert`` of a pred value."""
    for c in module.computations.values():
        for i in c.instructions:
            if i.opcode == "multiply" and getattr(getattr(i.shape, "element_type", None),
                                                  "is_float", False) and any(
                    o.opcode == "convert" and o.operands and
                    _type_name(o.operands[0]) == "pred" for o in i.operands):
                return True
    return False


def _signed_abs_of_square(module) -> bool:
    """Whether a signed integer ``abs`` reads a ``multiply`` of an operand by itself."""
    for c in module.computations.values():
        for i in c.instructions:
            if i.opcode == "abs" and getattr(getattr(i.shape, "element_type", None),
                                             "is_signed_integer", False) and \
                    i.operands and i.operands[0].opcode == "multiply" and \
                    len(i.operands[0].operands) == 2 and \
                    i.operands[0].operands[0] is i.operands[0].operands[1]:
                return True
    return False


def _exp_quotients(module) -> bool:
    """Whether a float ``divide`` reads an ``exponential`` as each operand."""
    return any(i.opcode == "divide" and len(i.operands) == 2 and
               all(o.opcode == "exponential" for o in i.operands)
               for c in module.computations.values() for i in c.instructions)


def _nan_where_differs(report, side: int) -> bool:
    """Whether every element where the oracle's float result differs from hloref's is a
    NaN on one side (``side``: 0 hloref's, 1 the oracle's), and some element differs."""
    seen = False
    for pair in _result_pairs(report):
        if any(x.dtype.kind in "cbiu" for x in pair):
            return False
        ev, av = (_as_f64(x) for x in pair)
        if ev is None or av is None or ev.shape != av.shape:
            return False
        with np.errstate(all="ignore"):
            differ = ~((ev == av) | (np.isnan(ev) & np.isnan(av)))
        if np.any(differ & ~np.isnan((ev, av)[side])):
            return False
        seen = seen or bool(np.any(differ))
    return seen


def _holds_least_e8m0(x) -> bool:
    """Whether an f8e8m0fnu value holds 2^-127 (bits 0), a subnormal as f32."""
    a = np.asarray(x)
    return a.dtype.name == "float8_e8m0fnu" and bool(np.any(a.view(np.uint8) == 0))


def _negated_only(report) -> bool:
    """Whether every element where the oracle's integer result differs from hloref's is
    its negation (in the type: wrapping), and some element differs."""
    seen = False
    for e, a in _result_pairs(report):
        if e.shape != a.shape or e.dtype != a.dtype or e.dtype.kind not in "iu":
            return False
        differ = e != a
        if np.any(differ & (a != (-e.astype(np.int64)).astype(e.dtype))):
            return False
        seen = seen or bool(np.any(differ))
    return seen


def _infinities_became_nan(report) -> bool:
    """``compare.infinity_became_nan`` over the result's leaves: each leaf that differs
    does so only there, and some leaf differs."""
    pairs = [(e, a) for e, a in _result_pairs(report) if np.any(differs(e, a))]
    return bool(pairs) and all(infinity_became_nan(e, a) for e, a in pairs)


def _result_pairs(report) -> list:
    """hloref's and the oracle's result arrays of ``report``, leaf by leaf."""
    from .compare import leaves

    def arrays(value):
        return [np.asarray(leaf) for _, leaf in leaves(value) if isinstance(leaf, np.ndarray)]

    return list(zip(arrays(getattr(report, "expected", None)),
                    arrays(getattr(report, "actual", None))))


def _zeroed_only(report) -> bool:
    """Whether every element where the oracle's float result differs from hloref's is a
    zero on the oracle's side where hloref has NaN, an infinity or the other zero."""
    seen = False
    for e, a in _result_pairs(report):
        if e.shape != a.shape:
            return False
        if e.dtype.kind == "c" or a.dtype.kind == "c":
            if not np.array_equal(e, a, equal_nan=True):
                return False
            continue
        ev, av = _as_f64(e), _as_f64(a)
        if ev is None or av is None:
            if not np.array_equal(e, a):
                return False
            continue
        with np.errstate(all="ignore"):
            same = (ev == av) & (np.signbit(ev) == np.signbit(av)) | (np.isnan(ev) & np.isnan(av))
            zeroed = (av == 0) & (np.isnan(ev) | np.isinf(ev) | (ev == 0))
        if np.any(~same & ~zeroed):
            return False
        seen = seen or bool(np.any(~same))
    return seen


def _saturated_only(report) -> bool:
    """Whether every element where the oracle's integer result differs from hloref's is
    the type's largest or smallest value (and one does)."""
    seen = False
    for e, a in _result_pairs(report):
        if e.shape != a.shape or e.dtype != a.dtype:
            return False
        if not np.array_equal(e, a):
            if e.dtype.kind not in "iu":
                return False
            info = np.iinfo(a.dtype)
            bad = e != a
            if not np.all((a[bad] == info.max) | (a[bad] == info.min)):
                return False
            seen = True
    return seen


def _as_f64(x):
    try:
        return np.asarray(x).astype(np.float64)
    except (TypeError, ValueError):
        return None


def _has_nan(x) -> bool:
    wide = _as_f64(x)
    return wide is not None and bool(np.any(np.isnan(wide)))


def _integer_binary(opcodes):
    def keep(instr):
        et = getattr(instr.shape, "element_type", None)
        return instr.opcode in opcodes and et is not None and et.is_integer and \
            len(instr.operands) == 2
    return keep


def _s4_to_wider(module) -> dict:
    """``{(computation, name): instruction}`` of the s4 ``add``/``subtract``/``multiply``
    that a ``convert`` reads, directly or through ops that only move elements (XLA's
    float-normalization-s4 keeps those unwrapped; a campaign, seed 71, met it through a
    broadcast)."""
    out = {}
    for c in module.computations.values():
        for u in c.instructions:
            if u.opcode != "convert" or not u.operands:
                continue
            i = u.operands[0]
            while i.opcode in _MOVES_ELEMENTS and i.operands:
                i = i.operands[0]
            if i.opcode in _S4_ARITHMETIC and _type_name(i) == "s4":
                out[(c.name, i.name)] = i
    return out


def _int_f8_unsigned(module) -> dict:
    """``{(computation, name): instruction}`` of the converts to u32/u64 (and to f4e2m1fn:
    6 where the f8 value is NaN, a campaign, seed 53) whose operand is an f8 value
    converted from an integer, through ops that only move elements (XLA:CPU fuses the
    pair: a campaign, seed 0, met it through reshape, slice, reshape)."""
    out = {}
    for c in module.computations.values():
        for i in c.instructions:
            if i.opcode != "convert" or _type_name(i) not in ("u32", "u64", "f4e2m1fn") or \
                    not i.operands:
                continue
            f8 = i.operands[0]
            while f8.opcode in _MOVES_ELEMENTS and f8.operands:
                f8 = f8.operands[0]
            if f8.opcode == "convert" and _type_name(f8) in _F8 and f8.operands and \
                    getattr(getattr(f8.operands[0].shape, "element_type", None),
                            "is_integer", False):
                out[(c.name, i.name)] = i
    return out


