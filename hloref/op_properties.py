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
[sequential-callers] their called computations run in sequence, in the caller's context, and
| get buffers of their own (XLA's call graph calls this context kControlFlow; HloLiveRange
| follows it): the memory audit (hloref/liveness.py, hloref/memory_arena.py) walks into
| them; with fusion, they are also the ops the interpreter passes runtime sizes into
| (evaluator/dynamic.py CONTROL_OPCODES)
while conditional call

[value-forwarding] the result is operand 0's value: no buffer of its own (XLA's
| HloDataflowAnalysis defines no value at them, it forwards the operand's); the memory
| audit (hloref/liveness.py) aliases them. Typed "optimization-barrier" (no such opcode)
| in liveness.py before, so opt-barrier got a buffer of its own there
bitcast domain add-dependency opt-barrier

[zero-byte-buffers] the memory audit (hloref/liveness.py) counts their buffers as 0 bytes:
| a token has none; replica-id and partition-id as in XLA's buffer assignments the audit
| was checked against (hloref/assignment_check.py, commit 08e1693; the reason was not
| written down there)
after-all partition-id replica-id

[buffer-views] in-place analysis (hloref/liveness.py inplace_pairs) looks through them to
| the instruction whose buffer an operand is: their result is a view of operand 0's buffer
bitcast get-tuple-element reshape

[reducer-vectorized] besides the elementwise group (less reducer-scalar-only), the ops a
| reducer, comparator or combiner may hold and still run on whole arrays at once
| (evaluator/reduce.py VECTORIZABLE): they only pass the scalars through, which works the
| same on arrays
parameter constant tuple get-tuple-element opt-barrier

[reducer-scalar-only] elementwise, but a reducer holding them is evaluated one scalar at a
| time (the vectorized path was never checked with them: the exclusion dates from the
| first evaluator commit e6a159f, without a reason; both evaluator functions take arrays)
reduce-precision stochastic-convert

[declared-shape] shape inference takes their whole result shape from the declaration and
| checks no constraint (hloref/shape_inference/declared.py); the verifier skips them
parameter constant custom-call bitcast infeed outfeed recv recv-done send send-done
async-start async-update async-done all-reduce-start all-reduce-done all-gather-start
all-gather-done collective-permute-start collective-permute-done copy-start copy-done
ragged-all-to-all ragged-dot scaled-dot scan

[free-part] the part of the result shape their operands leave free, which shape inference
| fills from the declared result shape (the keyword of the shape_inference rule; XLA's
| ShapeInference takes it as an argument: InferConvertShape's new element type,
| InferDotOpShape's preferred element type, InferBroadcastShape's dimensions, ...); the
| declared-shape ops take the whole "shape"
convert=result_element_type bitcast-convert=result_element_type
stochastic-convert=result_element_type dot=result_element_type
convolution=result_element_type
broadcast=result_dims reshape=result_dims dynamic-reshape=result_dims rng=result_dims
iota=shape rng-bit-generator=output_shape
all-gather=shard_count reduce-scatter=shard_count

[complex-to-component] on a complex operand the result is the component float type (XLA's
| ShapeInference::InferUnaryOpShape; gpu/complex_elementwise.py TO_REAL implements them)
abs real imag

[replica-groups-checked] the verifier checks their replica groups before shape inference
| (XLA's CheckReplicaGroups, hloref/verifier.py replica_groups); all-gather and
| reduce-scatter have theirs checked with their shard count, all-to-all with its split
| count
all-reduce all-reduce-start all-gather-start ragged-all-to-all

[global-device-ids-mode] XLA's GetCollectiveOpGroupMode(instr) reads their
| use_global_device_ids (the other collectives pass nullopt); the verifier's group mode
| and the GPU's participants (gpu/computation_devices.py) follow it. collective-reduce
| takes the attribute too but is newer than the pinned XLA
all-reduce all-reduce-start all-gather all-gather-start reduce-scatter

[rendezvous] devices meet at them: a computation holding one qualifies for the GPU's
| several-device path (gpu/computation_devices.py), which refuses the ones not
| gpu-device-collectives (they run on the CPU)
all-reduce all-gather reduce-scatter all-to-all collective-permute collective-broadcast
all-reduce-start all-reduce-done all-gather-start all-gather-done collective-permute-start
collective-permute-done collective-reduce ragged-all-to-all send recv send-done recv-done

[gpu-device-collectives] the collectives the GPU's several-device path
| (gpu/computation_devices.py) runs, dedicated async pairs included
all-reduce all-gather reduce-scatter all-to-all collective-permute collective-broadcast
all-reduce-start all-reduce-done all-gather-start all-gather-done collective-permute-start
collective-permute-done

[impure] the value does not depend on the operands alone (draws, host transfers,
| collectives, device ids, custom calls) or the op calls other computations: a while
| condition free of them is a function of the loop state (evaluator/control.py, which
| proves a loop cannot end). Not the side-effecting group: the *-done ops depend on their
| start operand only; collective-broadcast, collective-reduce and ragged-all-to-all are
| missing here (a gap, kept as found)
rng rng-get-and-update-state infeed recv recv-done custom-call call fusion while
conditional all-reduce all-reduce-start all-gather all-gather-start collective-permute
collective-permute-start all-to-all reduce-scatter partition-id replica-id
async-start async-done send send-done outfeed

[scalar-value-kept] on an integer scalar, the result holds the operand's value: ci/
| conformance_workers.py reads a set-dimension-size's size operand through them to the
| parameter it comes from
convert reshape copy bitcast
"""

#: Properties the verdict wing reads: comparison, known classes, reduction, strategies,
#: mutations, the user-program translations.
_VERDICT = """
"""

#: Properties the envelope (``fuzz/perturb.py`` and its parts) reads.
_ENVELOPE = """
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
