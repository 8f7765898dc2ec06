"""The reason tables of ci/conformance.py: why a module XLA:CPU runs does not get
XLA:CPU's answer from hloref, where the difference is understood (``reason_for``: the
text rules ``REASON_RULES``, the modules named one by one ``REASON_BY_LOCATION``, the
bf16/f16 text rule ``_NARROW``), and the texts jaxlib's parser accepts by a bug
(``XLA_PARSER_BUGS``)."""

from __future__ import annotations

import re

import numpy as np

from hloref.op_properties import values_of

from conformance_extract import parse_or_none
from conformance_layout import COLLECTIVES, devices_for

#: Why a module XLA:CPU runs does not get XLA:CPU's answer from hloref, where the
#: difference is understood (docs/semantics.md, "Conformance with XLA's test modules").
#: Rules on the module text / message first, then modules named one by one.
REASON_RULES = [
    ("elided", lambda r, t: "data is elided" in r.get("hloref_message", ""),
     "elided constant `{...}`: XLA fills it with garbage, the text holds no value"),
    ("rng", lambda r, t: re.search(r"\brng\(", t) is not None,
     "`rng` draws are implementation-defined"),
    ("seed", lambda r, t: 'custom_call_target="GetRngSeed"' in t,
     "`GetRngSeed` returns an implementation-defined seed (XLA:CPU another u64 per call, "
     "hloref its rng state; tests/test_custom_call_targets.py)"),
    ("devices", lambda r, t: COLLECTIVES.search(t) is not None and (
        "name device" in r.get("hloref_message", "") or "shape (" in r.get("compare_message", "")
        or "participant(s)" in r.get("hloref_message", "")
        or "source_target_pairs name" in r.get("hloref_message", "")
        or "reshape failed" in r.get("hloref_message", "")) and devices_for(t) is None,
     "collectives no device layout fits (of at most 16 devices, devices_for): the "
     "declared shapes or ids contradict each other on every layout (or need more "
     "devices), and XLA:CPU's value is not defined"),
    ("mismatched", lambda r, t: "mismatched collectives" in r.get("hloref_message", ""),
     "devices take different branches around collectives without a channel_id: which "
     "executions meet is not defined by the semantics (XLA:CPU pairs them in execution "
     "order); hloref pairs them by instruction (by channel where there is one) and "
     "reports the mismatch"),
    ("verifier", lambda r, t: r.get("hloref_eval") == "HloVerifyError",
     "hloref's verifier refuses the module by the XLA HloVerifier rule its message names "
     "(mixed-precision all-reduce, compare type=, a shard count against the replica "
     "groups: tests/test_verifier.py); jaxlib's StableHLO route to XLA:CPU drops what "
     "that rule checks, so XLA:CPU runs it"),
    ("memory", lambda r, t: "MemoryError" in r.get("hloref_message", ""),
     "hloref limitation: an intermediate does not fit in memory"),
    ("domain", lambda r, t: "set-dimension-size: size" in r.get("hloref_message", "") or
     "dynamic-reshape:" in r.get("hloref_message", ""),
     "seeded input outside the op's domain (a dynamic size above its bound): undefined; "
     "hloref raises an error"),
    ("algorithm", lambda r, t: r.get("verdict") == "mismatch" and "algorithm=dot_" in t,
     "XLA:CPU ignores `algorithm=` on dot (computes in f32); hloref rounds the operands "
     "as the algorithm says"),
    ("dynamic-result", lambda r, t: "shape (" in r.get("compare_message", "") and (
        "set-dimension-size" in t or "dynamic-reshape" in t),
     "a result whose runtime size is below its bound: hloref returns it cut to the runtime "
     "size, XLA:CPU (jaxlib) the padded bound"),
    ("unstable-sort", lambda r, t: r.get("verdict") == "mismatch" and re.search(r"\bsort\(", t)
     is not None and "is_stable=true" not in t,
     "`sort` without is_stable=true: the order of equal keys (and so of their values) is "
     "implementation-defined"),
    ("unsupported", lambda r, t: r.get("hloref_eval") == "HloUnsupportedError",
     "hloref limitation: an op or custom-call target hloref does not implement"),
    ("promised-indices", lambda r, t: r.get("verdict") == "mismatch" and re.search(
        r"\b(scatter|gather)\(", t) is not None and re.search(
        r"\b(unique_indices|indices_are_sorted)=true", t) is not None,
     "`unique_indices=true`/`indices_are_sorted=true` with seeded indices that are neither: "
     "implementation-defined (operation_semantics §Scatter, §Gather)"),
    ("non-terminating", lambda r, t: "does not terminate" in r.get("hloref_message", ""),
     "a `while` that never terminates (its body returns unchanged what its condition "
     "reads): no value by the written semantics; XLA's while-loop simplifier removes it "
     "and XLA:CPU returns a value; hloref reports the loop"),
    ("init-identity", lambda r, t: r.get("verdict") == "mismatch" and _init_not_identity(t),
     "reduce/reduce-window init value that is not the reducer's identity (a seeded random "
     "parameter, or e.g. 1 for add): implementation-defined; XLA:CPU folds the init in once "
     "per partial accumulator (or not at all), hloref exactly once"),
    ("fusion-parameter-output", lambda r, t: r.get("verdict") == "mismatch" and
     _fusion_returns_parameter(t),
     "XLA:CPU bug: a multi-output fusion returning one of its parameters in its root tuple "
     "returns garbage for its other outputs "
     "(findings/xla-cpu-jaxlib-0.10.2/fusion-parameter-output-garbage)"),
]
_NON_ASSOCIATIVE = ("reducer that is not associative (`a + 2|b|`): the order of "
                    "application is arbitrary, so the result is implementation-defined")
#: Texts jaxlib 0.10.2's parser accepts by a bug, which XLA's own test expects rejected
#: (as current XLA rejects them); hloref rejects them.
XLA_PARSER_BUGS = {
    "xla/hlo/parser/hlo_parser_test.cc:3556":
        "jaxlib 0.10.2's parser accepts `window={size=1x1 rhs_reversal=1}` by reading past "
        "the end of the rhs_reversal list; the test (WindowRhsReversalWrongSize) expects "
        "a rejection, as current XLA gives; hloref rejects it",
}
#: jaxlib's HLO -> StableHLO route drops the runtime size of a reshape's split dimension.
_SPLIT_RESHAPE = (
    "oracle route: jaxlib's HLO-to-StableHLO conversion drops the runtime size of a reshape "
    "that splits a dynamic dimension (inferred_dimension), so XLA:CPU reshapes the whole "
    "bound; hloref gives what XLA's own C++ test expects (dynamic_padder_test.cc "
    "OutputMinorDimensionReshape: [[2, 4], [10, 12]], where jaxlib gives [[6, 9], [24, 27]]; "
    "tests/test_dynamic_shapes.py checks the test's values)")

#: bf16 operands, integer result: jaxlib 0.10.2 rounds the f32 dot through bf16.
_BF16_TO_INT = (
    "XLA:CPU (jaxlib 0.10.2) rounds the f32 dot/convolution of bf16 operands to bf16 before "
    "converting it to the integer result (its optimized HLO: f32 dot, convert to bf16, "
    "convert to s32), so a sum such as 1.998 becomes 2; XLA's ConvolutionTypeCanonicalizer "
    "defines the op as the f32 result converted (convolution_type_canonicalizer.cc), as "
    "hloref computes (tests/test_ops_reduce_dot.py checks it against XLA:CPU where the "
    "bf16 rounding does not change the integer); not reported (which pass adds the bf16 "
    "rounding is unverified)")

REASON_BY_LOCATION = {
    "xla/tools/hlo_extractor_test.cc:350":
        "hloref limitation: dead code behind get-tuple-element(tuple(a, b), 1): XLA "
        "simplifies it to b and never runs a (an rng-bit-generator with an f32[4] state); "
        "hloref's dead-code pass keeps the whole tuple and refuses the state",
    "xla/service/cpu/cpu_instruction_fusion_test.cc:1341":
        "envelope false alarm: `x - max(x)` is -5.8e-9, not 0, at a row's maximum on "
        "XLA:CPU (the two uses of `multiply(dot, scale)` see differently rounded values); "
        "the envelope gives an instruction one value per run",
    "xla/service/while_loop_simplifier_test.cc:297":
        "hloref limitation: a loop of 2^31 + 43 iterations (42 counts down past the s32 "
        "wrap-around until it is >= 100) exceeds Limits.max_while_iterations; XLA:CPU's "
        "2147483647 is the written semantics' value (by hand)",
    "xla/service/elemental_ir_emitter_test.cc:236":
        "XLA:CPU bug: the c64 constant (nan + inf*i) divided by 1 + i gives (nan, nan); as "
        "parameters, and by C99 Annex G, (inf, inf) "
        "(findings/xla-cpu-jaxlib-0.10.2/divide-c64-constant-infinite-numerator)",
    "xla/service/instruction_fusion_test.cc:982": _NON_ASSOCIATIVE,
    "xla/service/instruction_fusion_test.cc:1004": _NON_ASSOCIATIVE,
    "xla/service/copy_insertion_test.cc:3030":
        "XLA:CPU bug: a scatter whose updates are its own operand is done in place and reads "
        "updates it has already overwritten",
    "xla/backends/gpu/transforms/scatter_slice_simplifier_test.cc:267":
        "XLA:CPU bug: a variadic scatter returns the first combiner result for both outputs "
        "and misplaces in-bounds updates",
    "xla/hlo/transforms/simplifiers/gather_simplifier_test.cc:180":
        "undefined: a gather from an empty operand whose result has elements (XLA:CPU "
        "returns zeros; hloref raises an error)",
    **{f"xla/service/dynamic_padder_test.cc:{line}": _SPLIT_RESHAPE for line in (1318, 1366, 1412)},
    **{f"xla/hlo/transforms/expanders/convolution_type_canonicalizer_test.cc:{line}": _BF16_TO_INT
       for line in (38, 59)},
    "xla/service/dynamic_padder_test.cc:2126":
        "XLA:CPU (jaxlib) folds get-dimension-size of a declared-static dimension to its "
        "bound; XLA's own test expects the runtime size 2, as hloref returns",
}

#: The identity of each simple reducer (op property ``reducer-identity``).
_IDENTITY = values_of("reducer-identity", float)


def _init_not_identity(text: str) -> bool:
    """Some reduce/reduce-window has an init value that is not its reducer's identity
    (a seeded random parameter, or a constant such as 1 for add)."""
    module = parse_or_none(text)
    if module is None:
        return False
    for _, instr in module.instructions():
        if instr.opcode not in ("reduce", "reduce-window"):
            continue
        n = len(instr.operands) // 2
        comp = module.computations.get(str(instr.attrs.get("to_apply")))
        kinds = _reducer_kinds(comp, n) if comp is not None else [None] * n
        for init, kind in zip(instr.operands[n:], kinds):
            if init.opcode == "parameter":
                return True
            if init.opcode == "constant" and kind in _IDENTITY and init.literal is not None:
                v = np.asarray(init.literal)
                ident = _IDENTITY[kind]
                if v.dtype.kind in "iu" and np.isinf(ident):
                    info = np.iinfo(v.dtype)
                    ident = info.min if ident < 0 else info.max
                if v.dtype == np.bool_:
                    ident = bool(ident) if kind in ("and", "multiply") else False
                if v.size == 1 and v.reshape(()).item() != ident:
                    return True
    return False


def _reducer_kinds(comp, n: int) -> list:
    """The opcode combining each of a reducer's ``n`` outputs, where output ``k`` is
    ``op(param k, param k + n)`` (``simple_reducer`` for one output); else None."""
    from hloref.evaluator.reduce import simple_reducer
    if n == 1:
        return [simple_reducer(comp)]
    root = comp.root
    if root is None or root.opcode != "tuple" or len(root.operands) != n:
        return [None] * n
    numbers = {id(p): p.parameter_number for p in comp.parameters}
    kinds = []
    for k, out in enumerate(root.operands):
        params = sorted(numbers.get(id(o), -1) for o in out.operands)
        kinds.append(out.opcode if len(out.operands) == 2 and params == [k, k + n] else None)
    return kinds


def _fusion_returns_parameter(text: str) -> bool:
    """A fusion whose fused computation returns one of its parameters in its root tuple."""
    module = parse_or_none(text)
    if module is None:
        return False
    for _, instr in module.instructions():
        if instr.opcode != "fusion":
            continue
        comp = module.computations.get(str(instr.attrs.get("calls")))
        root = comp.root if comp is not None else None
        if root is not None and root.opcode == "tuple" and any(
                o.opcode == "parameter" for o in root.operands):
            return True
    return False
#: Given by a text rule (bf16/f16 arrays and an accumulating op, a float mismatch), not
#: checked module by module: unverified for each module it names.
_NARROW = ("XLA:CPU keeps bf16/f16 intermediates in f32 (fusion, convert elimination); hloref "
           "rounds every instruction's result to its declared type (assigned by a text rule: "
           "unverified per module)")


def reason_for(r: dict, text: str) -> str | None:
    if r["where"] in REASON_BY_LOCATION:
        return REASON_BY_LOCATION[r["where"]]
    for _, rule, reason in REASON_RULES:
        if rule(r, text):
            return reason
    if r.get("verdict") == "mismatch" and re.search(r"\b(bf16|f16)\[", text) and \
            re.search(r"\b(dot|convolution|reduce|multiply)\(", text) and \
            "integer values differ" not in (r.get("compare_message") or ""):
        # an integer result is not a rounding of bf16 intermediates (it hid a real
        # difference once: convolution_type_canonicalizer_test.cc)
        return _NARROW
    return None
