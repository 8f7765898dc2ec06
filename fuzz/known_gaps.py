"""Known semantic gaps: places where XLA's result is implementation-defined and differs
from hloref's on purpose (docs/semantics.md, "Known differences"), each a ``KnownClass``
record of :data:`RECORDS` whose predicate tells whether it applies to a case. A mismatch
explained by one of these is reported as ``known-gap``, never as a miscompilation. The
reducer classes, where the text determines no single value, are ``undetermined``
records.
"""

from __future__ import annotations

import numpy as np

from hloref.op_properties import opcodes_with, values_of
from hloref.types import from_dtype

from .known_record import OPERATION, SIGNATURE, Case, KnownClass
from .reducers import acts_as_identity, reorder_checkable, reorder_free
from .window_order import same_under_another_order

__all__ = ["RECORDS", "tf_nan_to_nanless", "non_identity_inits", "non_associative_reducers"]





# ---------------------------------------------------------------- the predicates


def _tf_fast_min_max(case: Case) -> bool:
    if case.oracle != "tf" or not any(i.opcode in opcodes_with("tf-fast-min-max")
                                      for _, i in case.instructions()):
        return False
    return any(isinstance(v, np.ndarray) and v.dtype.kind not in "biu" and
               v.dtype != np.bool_ and v.size and
               bool(np.isnan(v.astype(np.complex128)).any()) for v in case.values.values())


def _tf_transcendental(case: Case) -> bool:
    return case.oracle == "tf" and any(
        i.opcode in opcodes_with("tf-inaccurate-transcendental") and
        getattr(getattr(i.shape, "element_type", None), "name", "") in ("f32", "f64")
        for _, i in case.instructions())


def _tf_nanless(case: Case) -> bool:
    return case.oracle == "tf" and tf_nan_to_nanless(case.module, case.values)


def _nan_sign(case: Case) -> bool:
    return case.module is not None and _nan_read_by_bits(case.module, case.values)


def _batch_norm(case: Case) -> bool:
    return any(i.opcode.startswith("batch-norm-") and _batch_norm_rearranged(c, i, case.values)
               for c, i in case.instructions())


#: the dot algorithms XLA:CPU computes as written
_FULL_PRECISION = ("unset", "dot_f32_f32_f32", "dot_f64_f64_f64", "dot_any_f8_any_f8_f32",
                   "dot_any_f8_any_f8_f32_fast_accum")


def _dot_algorithm(case: Case) -> bool:
    return any(i.opcode == "dot" and str(i.attrs.get("algorithm", "unset")) not in _FULL_PRECISION
               for _, i in case.instructions())


def _nonfinite_or_unknown(v) -> bool:
    return v is None or (v.dtype.kind in "fcV" and not np.all(np.isfinite(
        v.astype(np.complex128 if v.dtype.kind == "c" else np.float64))))


def _convolutions(case: Case):
    """``(computation, convolution, window, kernel value or None)`` of the module."""
    for comp, instr in case.instructions():
        if instr.opcode == "convolution":
            kernel = case.values.get((comp.name, instr.operands[1].name)) \
                if len(instr.operands) > 1 else None
            yield comp, instr, instr.attrs.get("window"), kernel


def _conv_dilation(case: Case) -> bool:
    return any(window is not None and any(d.base_dilation > 1 for d in window.dims) and
               _nonfinite_or_unknown(kernel) for _, _, window, kernel in _convolutions(case))


def _conv_groups(case: Case) -> bool:
    for comp, instr, _, _ in _convolutions(case):
        groups = max(int(instr.attrs.get("feature_group_count") or 1),
                     int(instr.attrs.get("batch_group_count") or 1))
        if groups > 1 and any(_nonfinite_or_unknown(case.values.get((comp.name, o.name)))
                              for o in instr.operands[:2]):
            return True
    return False


def _conv_padding(case: Case) -> bool:
    return any(window is not None and any(d.padding_low > 0 or d.padding_high > 0
                                          for d in window.dims) and
               _nonfinite_or_unknown(kernel) for _, _, window, kernel in _convolutions(case))


def _reductions(module):
    """``(computation, instruction, reducer)`` for every ``reduce``/``reduce-window`` of
    ``module`` whose reducer computation is in it."""
    for comp in module.computations.values():
        for instr in comp.instructions:
            called = instr.attrs.get("to_apply") if instr.opcode in ("reduce", "reduce-window") \
                else None
            if called is not None and str(called) in module.computations:
                yield comp, instr, module.computations[str(called)]


def non_associative_reducers(module) -> list:
    """The ``reduce``/``reduce-window`` instructions of ``module`` whose reducer (single
    or variadic) is not associative (``_maybe_non_associative``)."""
    from hloref.evaluator.reduce import simple_reducer
    return [instr for _, instr, reducer in _reductions(module)
            if simple_reducer(reducer) is None and _maybe_non_associative(module, reducer)]


def non_identity_inits(module, values: dict) -> list:
    """The ``reduce``/``reduce-window`` instructions whose init value (a constant, or
    hloref's value) is not the reducer's identity: by the table for a single-op reducer,
    by evaluating it for a written scalar one (``reducers.acts_as_identity``: a
    ``logaddexp`` reducer started from 0)."""
    from hloref.evaluator.reduce import simple_reducer
    out = []
    for comp, instr, reducer in _reductions(module):
        kind = simple_reducer(reducer)
        if kind is None and not reorder_checkable(reducer):
            continue
        n = len(instr.operands) // 2
        for init in instr.operands[n:]:
            value = init.literal if init.opcode == "constant" else \
                values.get((comp.name, init.name))
            if value is None:
                continue
            wrong = not _is_identity(kind, value) if kind is not None else \
                not acts_as_identity(module, reducer, value)
            if wrong:
                out.append(instr)
                break
    return out


def _non_associative(case: Case) -> bool:
    return case.module is not None and bool(non_associative_reducers(case.module))


def _non_identity_init(case: Case) -> bool:
    return case.module is not None and bool(non_identity_inits(case.module, case.values))


def _reducers_detail(case: Case) -> str:
    names = [f"%{i.name}" for i in non_associative_reducers(case.module)]
    return "the order of reduction decides the value of " + ", ".join(names)


def _inits_detail(case: Case) -> str:
    names = [f"%{i.name}" for i in non_identity_inits(case.module, case.values)]
    return "where the init enters the schedule decides the value of " + ", ".join(names)


def _select_and_scatter_ties(case: Case) -> bool:
    """The entry's root is a select-and-scatter, the culprit, whose oracle value (alone,
    and in the whole module) is hloref's under another order of the window walk. Only
    the root: a tie at an inner instruction would hide what came after it."""
    inner, module = case.culprit, case.module
    root = module.entry.root if module is not None and module.entry is not None else None
    if inner is None or root is None or inner.opcode != "select-and-scatter" or \
            inner.computation != module.entry.name or inner.name != root.name:
        return False
    whole, alone = np.asarray(case.actual), np.asarray(inner.actual)
    if whole.shape != alone.shape or whole.tobytes() != alone.tobytes():
        return False
    return same_under_another_order(inner)


_TF = "TensorFlow 2.21's bundled XLA:CPU (the tf oracle)"
_SPEC = "the semantics (implementation-defined)"

#: The gaps: XLA's answer is implementation-defined and differs from hloref's on purpose.
RECORDS: tuple[KnownClass, ...] = (
    KnownClass(
        "reduce-non-identity-init", "undetermined", _SPEC,
        "reduce/reduce-window whose init value is not the reducer's identity: XLA:CPU starts "
        "every partial accumulator from it (or skips it for an empty dimension list); hloref "
        "applies it once. The docs require an identity; StableHLO leaves its position in the "
        "schedule implementation-defined.", _non_identity_init, specificity=OPERATION,
        detail=_inits_detail),
    KnownClass(
        "non-associative-reducer", "undetermined", _SPEC,
        "a reducer that is not associative: the order of reduction is implementation-defined "
        "(XLA folds left to right, hloref pairs neighbours).", _non_associative,
        specificity=OPERATION, detail=_reducers_detail),
    KnownClass(
        "conv-dilation-holes-nonfinite", "gap", "XLA:CPU with LLVM's optimizations",
        "convolution with base dilation (lhs_dilate > 1) and inf/NaN kernel values: the spec "
        "defines the holes as zeros (0 * inf = NaN, hloref); XLA:CPU at its default LLVM "
        "optimization level skips those taps (at xla_backend_optimization_level=0 it gives "
        "the spec's NaN, so the skip comes from LLVM's optimizations). Edge padding: see "
        "conv-padding-nonfinite.", _conv_dilation, specificity=SIGNATURE),
    KnownClass(
        "conv-padding-nonfinite", "gap", "XLA:CPU's convolution",
        "convolution with edge padding (pad=lo_hi > 0) and inf/NaN kernel values: the spec "
        "pads the input with zeros and multiplies them by the kernel (0 * inf = NaN, "
        "hloref); XLA:CPU (f32, f16 and f8 alike, both oracles) skips the taps that fall in "
        "the padding, so an output window that lies wholly or partly in the padding sums "
        "only the real taps (0.0 for an all-padding window).", _conv_padding,
        specificity=OPERATION),
    KnownClass(
        "conv-groups-nonfinite", "gap", "XLA HLO pass `convolution-group-converter`",
        "grouped convolution (feature_group_count or batch_group_count > 1) with an inf/NaN "
        "input or kernel element: the spec keeps the groups apart (hloref); XLA:CPU's "
        "convolution-group-converter rewrites it as one convolution whose kernel is "
        "expanded with zeros for the other groups, so 0 * inf = NaN reaches the other "
        "groups' outputs (a campaign, seed 89: an f64 -inf in group 0 made two outputs of "
        "group 1 NaN).", _conv_groups, specificity=SIGNATURE),
    KnownClass(
        "dot-algorithm-ignored-by-xla-cpu", "gap", "XLA:CPU's dot emitter",
        "dot with a reduced-precision algorithm= (dot_bf16_bf16_f32*, dot_tf32*, dot_f16*): "
        "hloref computes what the algorithm computes (operands split into bf16/TF32/f16 "
        "parts); XLA:CPU ignores the algorithm and computes a full-precision f32 dot.",
        _dot_algorithm, specificity=SIGNATURE),
    KnownClass(
        "tf-fast-min-max", "gap", _TF,
        "the tf oracle (TensorFlow 2.21's older XLA) computes maximum/minimum/clamp (and "
        "max/min reducers) with fast min/max that does not propagate NaN; hloref and "
        "jaxlib's XLA:CPU propagate it (IEEE-754 maximum/minimum).", _tf_fast_min_max,
        specificity=SIGNATURE),
    KnownClass(
        "tf-nan-to-nanless-type", "gap", _TF,
        "the tf oracle (TensorFlow 2.21's older XLA) converts a NaN/inf intermediate "
        "(asin/acos/atanh/log/sqrt outside their domain) into a type that cannot hold it "
        "(f4e2m1fn: no NaN, no inf) as a bit pattern of its own (-3.0, 2.0); the value is "
        "implementation-defined; hloref and jaxlib's XLA:CPU give 0.", _tf_nanless,
        specificity=SIGNATURE),
    KnownClass(
        "tf-transcendental-accuracy", "gap", _TF,
        "the tf oracle (TensorFlow 2.21's older XLA) computes f32/f64 cbrt and cosh less "
        "accurately than the ULP budget: cbrt 3 ULP (f32) and 30 ULP (f64) where jaxlib "
        "0.10.2's XLA is within 1.1 ULP on the same inputs; cosh 15 ULP (f32, x = 64) and 13 "
        "ULP (f64, x = 355.3), the same values jaxlib's own cosh expansion (jnp.cosh) gives: "
        "exp(|x| - log 2) amplifies the argument's rounding by |x|/2 ULP; sinh likewise (19 "
        "ULP at x = -49, f32). jaxlib's XLA:CPU rejects an HLO cosh/sinh on f16/f32/f64, so "
        "only the tf oracle runs them.", _tf_transcendental, specificity=SIGNATURE),
    KnownClass(
        "batch-norm-rearranged", "gap", "XLA HLO pass `batchnorm_expander`",
        "batch-norm-* with an inf/NaN scale, offset, mean or variance, or where XLA's "
        "rearranged products overflow: hloref evaluates the documented (x - mean) * scale / "
        "sqrt(variance + epsilon) + offset; XLA's batchnorm_expander (both oracles) computes "
        "x * (scale * rsqrt(...)) + (offset - mean * scale * rsqrt(...)), which turns inf - "
        "inf into NaN where the documented formula gives ±inf (mean = scale = offset = "
        "-inf), and overflows when x and mean are both near 1e27 though x - mean is 0.",
        _batch_norm, specificity=SIGNATURE),
    KnownClass(
        "select-and-scatter-ties", "gap", _SPEC,
        "select-and-scatter whose select is not strict (GE, LE) with tied values in a "
        "window: the order in which a window is walked is implementation-defined (StableHLO "
        "folds it with a reduce), so which tied element receives the source value is too; "
        "hloref walks row-major, XLA:CPU other dimension orders (checked per finding: the "
        "oracle's value is hloref's under a permuted walk, fuzz/window_order.py).",
        _select_and_scatter_ties, specificity=SIGNATURE),
    KnownClass(
        "nan-sign-payload", "gap", "IEEE 754 (unspecified) as LLVM implements it",
        "a NaN read by its bits (bitcast-convert from a float type) or by its sign (compare "
        "with type=TOTALORDER, also as a sort's comparator): IEEE 754 leaves the sign and "
        "payload of a NaN produced by an invalid operation unspecified, and XLA:CPU's differ "
        "from hloref's (e.g. log-plus-one of -5e31: 0xFFFFFFFF against the default "
        "0xFFC00000; acos of bf16 -1.4e21: +NaN against -NaN).", _nan_sign,
        specificity=SIGNATURE),
)


# ---------------------------------------------------------------- helpers


def _batch_norm_rearranged(comp, instr, values: dict) -> bool:
    """Whether XLA's rearranged batch norm can differ from the documented formula: a
    non-finite scale/offset/mean/variance, or |x| * |scale| / sqrt(variance + epsilon)
    (or the same with the mean) beyond the element type's range. Unknown values count."""
    params = instr.operands[1:4] if instr.opcode == "batch-norm-grad" else instr.operands[1:]
    arrays = [values.get((comp.name, o.name)) for o in [instr.operands[0], *params]]
    if any(not isinstance(v, np.ndarray) for v in arrays):
        return True
    wide = [v.astype(np.float64) for v in arrays]
    if any(w.size and not np.all(np.isfinite(w)) for w in wide[1:]):
        return True
    if instr.opcode != "batch-norm-inference":
        return False
    x, scale, _, mean, variance = wide
    fi = int(instr.attrs.get("feature_index", 0))
    eps = float(instr.attrs.get("epsilon", 0.0))
    shape = [1] * x.ndim
    shape[fi] = -1
    with np.errstate(all="ignore"):
        factor = np.abs(scale) / np.sqrt(np.abs(variance) + eps)
        finite_x = np.where(np.isfinite(x), np.abs(x), 0.0)  # inf x: both forms give inf
        big = max(float(np.nanmax(finite_x * factor.reshape(shape), initial=0)),
                  float(np.nanmax(np.abs(mean) * factor, initial=0)))
    limit = float(np.finfo(np.float32).max) if arrays[0].dtype.itemsize <= 4 else \
        float(np.finfo(np.float64).max)
    return big > limit / 2



def _is_identity(kind: str, value: np.ndarray) -> bool:
    v = np.asarray(value)
    et = from_dtype(v.dtype)
    if values_of("reducer-identity").get(kind) == "0":
        if et.is_complex:  # both parts (a float cast would drop the imaginary one)
            return bool(np.all(v.astype(np.complex128) == 0))
        return bool(np.all(v.astype(np.float64) == 0)) if et.is_float else bool(np.all(v == 0))
    if kind in ("multiply",):
        return bool(np.all(v.astype(np.complex128) == 1))
    if kind == "and":
        return bool(np.all(v)) if et.is_pred else bool(np.all(v.astype(np.int64) & ((1 << et.bits) - 1) == (1 << et.bits) - 1)) \
            if et.bits < 64 else bool(np.all(v.view(np.uint64) == np.uint64(0xFFFFFFFFFFFFFFFF)))
    if kind == "maximum":
        if et.name == "f8e8m0fnu":  # no sign, no zero: its least value 2^-127 is below all
            return bool(np.all(v.astype(np.float64) == 2.0 ** -127))
        if et.is_float:
            return bool(np.all(v.astype(np.float64) == -np.inf)) or \
                (not et.float_format.has_inf and bool(np.all(v == np.asarray(-np.inf).astype(v.dtype))))
        return bool(np.all(v == (et.min_value if et.is_integer else False)))
    if kind == "minimum":
        if et.is_float:
            return bool(np.all(v.astype(np.float64) == np.inf))
        return bool(np.all(v == (et.max_value if et.is_integer else True)))
    return False



_DOMAIN_LIMITED = {
    "asin": lambda x: np.abs(x) > 1, "acos": lambda x: np.abs(x) > 1,
    "atanh": lambda x: np.abs(x) >= 1, "log": lambda x: x <= 0, "sqrt": lambda x: x < 0,
    "rsqrt": lambda x: x <= 0, "log-plus-one": lambda x: x <= -1, "acosh": lambda x: x < 1,
}


def _nan_into_nanless(comp, instr, values: dict, unknown: bool = True) -> bool:
    """Whether ``instr`` is a domain-limited op whose result type has neither NaN nor inf
    (f4e2m1fn) and got an operand outside its domain (hloref's operand values; an
    operand whose value is not known counts as outside when ``unknown``): a NaN went
    into a type that cannot hold it."""
    et = getattr(instr.shape, "element_type", None)
    test = _DOMAIN_LIMITED.get(instr.opcode)
    if test is None or et is None or not et.is_float or et.float_format.has_inf \
            or et.name not in ("f4e2m1fn",):
        return False
    operand = instr.operands[0]
    value = operand.literal if operand.opcode == "constant" else \
        values.get((comp.name, operand.name))
    if value is None:
        return unknown
    return bool(np.any(test(np.asarray(value).astype(np.float64))))


def tf_nan_to_nanless(module, values: dict) -> bool:
    """A domain-limited op whose result type has neither NaN nor inf got an operand
    outside its domain (hloref's operand values)."""
    return any(_nan_into_nanless(comp, instr, values)
               for comp in module.computations.values() for instr in comp.instructions)


def _nan_read_by_bits(module, values: dict) -> bool:
    """A bitcast-convert of a float operand, a TOTALORDER compare, or a sort whose
    comparator compares with TOTALORDER, whose operand holds a NaN in hloref's
    evaluation (its sign and payload are then seen); or a bitcast-convert of an f4e2m1fn
    value a domain-limited op computed out of its domain (f4e2m1fn has no NaN: the NaN
    becomes a zero with a sign taken from the NaN's, ml_dtypes +NaN -> -0)."""
    def total(i) -> bool:
        return i.opcode == "compare" and str(i.attrs.get("type", "")).upper() == "TOTALORDER"

    for comp in module.computations.values():
        for instr in comp.instructions:
            if instr.opcode == "bitcast-convert":
                reads = instr.operands[:1]
                if reads and _nan_into_nanless(comp, reads[0], values, unknown=False):
                    return True  # the NaN became a zero whose sign is the NaN's
            elif total(instr):
                reads = instr.operands
            elif instr.opcode == "sort" and str(instr.attrs.get("to_apply")) in \
                    module.computations and any(total(i) for i in module.computations[
                        str(instr.attrs.get("to_apply"))].instructions):
                reads = instr.operands
            else:
                continue
            for o in reads:
                v = values.get((comp.name, o.name))
                if not isinstance(v, np.ndarray) or v.size == 0:
                    continue
                et = getattr(getattr(o, "shape", None), "element_type", None)
                if et is None or not (et.is_float or et.is_complex):
                    continue
                with np.errstate(all="ignore"):
                    if np.isnan(v.astype(np.complex128)).any():
                        return True
    return False


def _maybe_non_associative(module, computation) -> bool:
    """A reducer that evaluating shows is not associative and commutative up to rounding
    (``fuzz/reducers.py``: ``max(acc, 0) + x`` is not, nor is a sum rounded to bf16 at
    every step; ``logaddexp``, which subtracts, is). A reducer that cannot be evaluated
    on samples (variadic, complex) counts when it holds an op that is not associative,
    a ``convert`` or a ``reduce-precision``."""
    if reorder_checkable(computation):
        return not reorder_free(module, computation)
    return any(i.opcode in opcodes_with("not-associative")
               for i in computation.instructions) and not reorder_free(module, computation)
