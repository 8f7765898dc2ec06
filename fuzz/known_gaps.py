"""Known semantic gaps: places where XLA's result is implementation-defined and
differs from hloref's on purpose (docs/semantics.md, "Known differences"), and the
test that tells whether one applies to a module. A mismatch explained by one of these
is reported as ``known-gap``, never as a miscompilation."""

from __future__ import annotations

import numpy as np

from hloref.opcodes import ACCUMULATING, EXPANDED
from hloref.types import from_dtype

from .compare import leaves as _paths_and_leaves
from .compare import differs, infinity_became_nan, largest_finite, smallest_normal, ulp_of
from .reducers import reorder_free
from .window_order import same_under_another_order

__all__ = ["KNOWN_GAPS", "known_gap", "tf_nan_to_nanless", "KNOWN_DIFFERENCES",
           "known_difference", "culprit_gap"]

#: Places where XLA:CPU's result is implementation-defined and differs from hloref's
#: on purpose (docs/semantics.md, "Known differences"). A mismatch explained by one of
#: these is reported as ``known-gap``, never as a miscompilation.
KNOWN_GAPS: dict[str, str] = {
    "reduce-non-identity-init": (
        "reduce/reduce-window whose init value is not the reducer's identity: XLA:CPU "
        "starts every partial accumulator from it (or skips it for an empty dimension list); "
        "hloref applies it once. The docs require an identity; StableHLO leaves its "
        "position in the schedule implementation-defined."),
    "conv-dilation-holes-nonfinite": (
        "convolution with base dilation (lhs_dilate > 1) and inf/NaN kernel values: the spec "
        "defines the holes as zeros (0 * inf = NaN, hloref); XLA:CPU at its default LLVM "
        "optimization level skips those taps (at xla_backend_optimization_level=0 it gives "
        "the spec's NaN, so the skip comes from LLVM's optimizations). Edge padding: see "
        "conv-padding-nonfinite."),
    "conv-padding-nonfinite": (
        "convolution with edge padding (pad=lo_hi > 0) and inf/NaN kernel values: the spec "
        "pads the input with zeros and multiplies them by the kernel (0 * inf = NaN, "
        "hloref); XLA:CPU (f32, f16 and f8 alike, both oracles) skips the taps that fall "
        "in the padding, so an output window that lies wholly or partly in the padding "
        "sums only the real taps (0.0 for an all-padding window)."),
    "conv-groups-nonfinite": (
        "grouped convolution (feature_group_count or batch_group_count > 1) with an inf/NaN "
        "input or kernel element: the spec keeps the groups apart (hloref); XLA:CPU's "
        "convolution-group-converter rewrites it as one convolution whose kernel is "
        "expanded with zeros for the other groups, so 0 * inf = NaN reaches the other "
        "groups' outputs (a campaign, seed 89: an f64 -inf in group 0 made two outputs of "
        "group 1 NaN)."),
    "dot-algorithm-ignored-by-xla-cpu": (
        "dot with a reduced-precision algorithm= (dot_bf16_bf16_f32*, dot_tf32*, dot_f16*): "
        "hloref computes what the algorithm computes (operands split into bf16/TF32/f16 "
        "parts); XLA:CPU ignores the algorithm and computes a full-precision f32 dot."),
    "tf-fast-min-max": (
        "the tf oracle (TensorFlow 2.21's older XLA) computes maximum/minimum/clamp (and "
        "max/min reducers) with fast min/max that does not propagate NaN; hloref and "
        "jaxlib's XLA:CPU propagate it (IEEE-754 maximum/minimum)."),
    "tf-nan-to-nanless-type": (
        "the tf oracle (TensorFlow 2.21's older XLA) converts a NaN/inf intermediate "
        "(asin/acos/atanh/log/sqrt outside their domain) into a type that cannot hold it "
        "(f4e2m1fn: no NaN, no inf) as a bit pattern of its own (-3.0, 2.0); the value is "
        "implementation-defined; hloref and jaxlib's XLA:CPU give 0."),
    "tf-transcendental-accuracy": (
        "the tf oracle (TensorFlow 2.21's older XLA) computes f32/f64 cbrt and cosh less "
        "accurately than the ULP budget: cbrt 3 ULP (f32) and 30 ULP (f64) where jaxlib "
        "0.10.2's XLA is within 1.1 ULP on the same inputs; cosh 15 ULP (f32, x = 64) and "
        "13 ULP (f64, x = 355.3), the same values jaxlib's own cosh expansion (jnp.cosh) "
        "gives: exp(|x| - log 2) amplifies the argument's rounding by |x|/2 ULP; sinh "
        "likewise (19 ULP at x = -49, f32). jaxlib's XLA:CPU rejects an HLO cosh/sinh "
        "on f16/f32/f64, so only the tf oracle runs them."),
    "non-associative-reducer": (
        "a reducer that is not associative: the order of reduction is implementation-defined "
        "(XLA folds left to right, hloref pairs neighbours)."),
    "batch-norm-rearranged": (
        "batch-norm-* with an inf/NaN scale, offset, mean or variance, or where XLA's "
        "rearranged products overflow: hloref evaluates the documented (x - mean) * scale / "
        "sqrt(variance + epsilon) + offset; XLA's batchnorm_expander (both oracles) computes "
        "x * (scale * rsqrt(...)) + (offset - mean * scale * rsqrt(...)), which turns "
        "inf - inf into NaN where the documented formula gives ±inf (mean = scale = offset "
        "= -inf), and overflows when x and mean are both near 1e27 though x - mean is 0."),
    "select-and-scatter-ties": (
        "select-and-scatter whose select is not strict (GE, LE) with tied values in a "
        "window: the order in which a window is walked is implementation-defined (StableHLO "
        "folds it with a reduce), so which tied element receives the source value is too; "
        "hloref walks row-major, XLA:CPU other dimension orders (checked per finding: the "
        "oracle's value is hloref's under a permuted walk, fuzz/window_order.py)."),
    "nan-sign-payload": (
        "a NaN read by its bits (bitcast-convert from a float type) or by its sign (compare "
        "with type=TOTALORDER, also as a sort's comparator): IEEE 754 leaves the sign and "
        "payload of a NaN produced by "
        "an invalid operation unspecified, and XLA:CPU's differ from hloref's (e.g. "
        "log-plus-one of -5e31: 0xFFFFFFFF against the default 0xFFC00000; acos of bf16 "
        "-1.4e21: +NaN against -NaN)."),
}

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


#: Complex functions with a branch cut and the test for an operand lying on it (zs:
#: the operands as c128 arrays of the result's shape). atan2(y, x) = -i log((x + iy) /
#: sqrt(x² + y²)) is on its cut where y = 0 and Re x < 0: the quotient is -1 there.
_BRANCH_CUTS = {
    "power": lambda zs: (zs[0].imag == 0) & (zs[0].real < 0),
    "log": lambda zs: (zs[0].imag == 0) & (zs[0].real < 0),
    "log-plus-one": lambda zs: (zs[0].imag == 0) & (zs[0].real < -1),
    "sqrt": lambda zs: (zs[0].imag == 0) & (zs[0].real < 0),
    "rsqrt": lambda zs: (zs[0].imag == 0) & (zs[0].real < 0),
    "asin": lambda zs: (zs[0].imag == 0) & (np.abs(zs[0].real) > 1),
    "acos": lambda zs: (zs[0].imag == 0) & (np.abs(zs[0].real) > 1),
    "atanh": lambda zs: (zs[0].imag == 0) & (np.abs(zs[0].real) > 1),
    "acosh": lambda zs: (zs[0].imag == 0) & (zs[0].real < 1),
    "asinh": lambda zs: (zs[0].real == 0) & (np.abs(zs[0].imag) > 1),
    "atan": lambda zs: (zs[0].real == 0) & (np.abs(zs[0].imag) > 1),
    "atan2": lambda zs: (zs[0] == 0) & (zs[1].real < 0),
}


def _off_cut_differs(culprit, arrays) -> bool:
    """Whether a complex op's operand lies exactly on its branch cut (``_BRANCH_CUTS``) at
    every element where the oracle differs from hloref, with the oracle's value hloref's
    on the other side of the cut, and some element differs: which side a value exactly
    on the cut takes depends on the sign of a zero inside XLA's expansion."""
    cut = _BRANCH_CUTS.get(culprit.opcode)
    if cut is None or not arrays or any(x.dtype.kind != "c" for x in arrays) or \
            (culprit.opcode == "atan2" and len(arrays) != 2):
        return False
    exp, act = list(_leaves(culprit.expected)), list(_leaves(culprit.actual))
    if len(exp) != 1 or len(act) != 1 or exp[0].shape != act[0].shape:
        return False
    on_cut = cut([np.broadcast_to(x.astype(np.complex128), exp[0].shape) for x in arrays])
    e, a = exp[0].astype(np.complex128), act[0].astype(np.complex128)
    # differing beyond the op's own budget (4 ULPs of |hloref's value|, 1 near zero);
    # elements off the cut that agree within it do not count (a campaign, seed 79:
    # atan2(0, 1 + i) is 0 in hloref, 6e-8 in XLA:CPU)
    with np.errstate(all="ignore"):
        near = np.abs(a - e) <= 4 * ulp_of(np.abs(e), from_dtype(exp[0].dtype))
    differ = (differs(e.real, a.real) | differs(e.imag, a.imag)) & ~near
    # the other side of the cut: the imaginary part's sign flipped (log: +-i pi) or,
    # for atan2, the real part's (+-pi); nothing else
    eps = float(np.finfo(np.real(exp[0]).dtype).eps)
    with np.errstate(all="ignore"):
        tol = 8 * eps * np.abs(e)
        side = (np.abs(a - np.conj(e)) <= tol) | (np.abs(a + np.conj(e)) <= tol)
    flips = differ & on_cut & side
    if bool(np.any(differ)) and bool(np.all(flips[differ])):
        return True
    # off-cut elements beyond 4 ULPs that the culprit's own verdict keeps inside its
    # budget (a campaign, seed 83: atan2(1/64, 3.6 + 14.2i) is 2.6e-4 - 1.0e-3i, XLA:CPU's
    # expansion 4.7e-8 off, within the verdict's bound): the elements the verdict counts
    # outside are exactly the flipped ones (a flip by 2 pi is always outside)
    count = getattr(getattr(culprit, "verdict", None), "count", None)
    return count is not None and int(count) > 0 and int(count) == int(np.count_nonzero(flips))


def _is_identity(kind: str, value: np.ndarray) -> bool:
    v = np.asarray(value)
    et = from_dtype(v.dtype)
    if kind in ("add", "or", "xor"):
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


def known_gap(module, values: dict, oracle: str = "xla") -> str | None:
    """The ``KNOWN_GAPS`` key that applies to ``module``, given hloref's value of every
    entry instruction (``values[(computation, name)]``), or None."""
    from hloref.evaluator.reduce import simple_reducer
    if oracle == "tf" and any(i.opcode in ("maximum", "minimum", "clamp")
                              for _, i in module.instructions()):
        nan_seen = any(isinstance(v, np.ndarray) and v.dtype.kind not in "biu" and
                       v.dtype != np.bool_ and v.size and
                       bool(np.isnan(v.astype(np.complex128)).any()) for v in values.values())
        if nan_seen:
            return "tf-fast-min-max"
    if oracle == "tf" and any(i.opcode in ("cbrt", "cosh", "sinh") and
                              getattr(getattr(i.shape, "element_type", None), "name", "")
                              in ("f32", "f64") for _, i in module.instructions()):
        return "tf-transcendental-accuracy"
    if oracle == "tf" and tf_nan_to_nanless(module, values):
        return "tf-nan-to-nanless-type"
    if _nan_read_by_bits(module, values):
        return "nan-sign-payload"
    for comp in module.computations.values():
        for instr in comp.instructions:
            if instr.opcode.startswith("batch-norm-") and _batch_norm_rearranged(
                    comp, instr, values):
                return "batch-norm-rearranged"
            algorithm = str(instr.attrs.get("algorithm", "unset"))
            if instr.opcode == "dot" and algorithm not in (
                    "unset", "dot_f32_f32_f32", "dot_f64_f64_f64", "dot_any_f8_any_f8_f32",
                    "dot_any_f8_any_f8_f32_fast_accum"):
                return "dot-algorithm-ignored-by-xla-cpu"
            if instr.opcode == "convolution":
                window = instr.attrs.get("window")
                kernel = values.get((comp.name, instr.operands[1].name)) \
                    if len(instr.operands) > 1 else None
                if window is not None and any(d.base_dilation > 1 for d in window.dims) and \
                        (kernel is None or (kernel.dtype.kind in "fc" and
                                            not np.all(np.isfinite(kernel.astype(np.complex128))))):
                    return "conv-dilation-holes-nonfinite"
                groups = max(int(instr.attrs.get("feature_group_count") or 1),
                             int(instr.attrs.get("batch_group_count") or 1))
                if groups > 1 and any(
                        v is None or (v.dtype.kind in "fcV" and not np.all(np.isfinite(
                            v.astype(np.complex128 if v.dtype.kind == "c" else np.float64))))
                        for v in (values.get((comp.name, o.name)) for o in instr.operands[:2])):
                    return "conv-groups-nonfinite"
                if window is not None and any(d.padding_low > 0 or d.padding_high > 0
                                              for d in window.dims) and \
                        (kernel is None or (kernel.dtype.kind in "fcV" and not np.all(np.isfinite(
                            kernel.astype(np.complex128 if kernel.dtype.kind == "c"
                                          else np.float64))))):
                    return "conv-padding-nonfinite"
                continue
            if instr.opcode not in ("reduce", "reduce-window"):
                continue
            n = len(instr.operands) // 2
            called = instr.attrs.get("to_apply")
            if called is None:
                continue
            kind = simple_reducer(module.computations[str(called)])
            if kind is None:
                # a variadic reducer too: (x1 - y1, ...) folds in an implementation-defined order
                if _maybe_non_associative(module, module.computations[str(called)]):
                    return "non-associative-reducer"
                if n == 1:
                    return None
                continue
            for init in instr.operands[n:]:
                value = init.literal if init.opcode == "constant" else values.get((comp.name, init.name))
                if value is not None and not _is_identity(kind, value):
                    return "reduce-non-identity-init"
    return None


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
    """A reducer holding an op that is not associative, unless evaluating it shows it is
    associative and commutative up to rounding all the same (``logaddexp`` subtracts,
    ``fuzz/reducers.py``)."""
    return any(i.opcode in ("subtract", "divide", "power", "remainder", "atan2")
               for i in computation.instructions) and not reorder_free(module, computation)


# ---------------------------------------------------------------- known XLA differences


def _leaves(value):
    """The arrays of a (nested tuple) value, depth first."""
    for _path, leaf in _paths_and_leaves(value):
        if isinstance(leaf, np.ndarray):
            yield leaf


#: Known differences of XLA:CPU (jaxlib 0.10.2) from the semantics, outside what the
#: envelope allows: XLA's bugs already known and its documented limitations. Unlike a
#: ``KNOWN_GAPS`` entry (implementation-defined: ``known-gap``, not a bug), a mismatch
#: they explain stays a mismatch; ``diff`` names the entry and campaigns count it
#: without reporting it again. ``tests/hlo_builders.py`` KNOWN_DIFFERENCES records how
#: the op tables treat the same cases.
KNOWN_DIFFERENCES = {
    "ftz": "XLA:CPU flushes subnormal inputs and results to zero (FTZ/DAZ at run time); "
           "hloref keeps them (the culprit's operands hold subnormals, or every differing "
           "element is a subnormal of hloref's that XLA holds as zero; f8e8m0fnu, computed "
           "in f32 where its least value 2^-127 is subnormal, has no zero: a flushed value "
           "is NaN there)",
    "ftz-f8e8m0fnu": "XLA:CPU converts positive f64 values below 2^-127 to f8e8m0fnu NaN "
                     "(measured on jaxlib 0.10.2 for 2^-127.4, 2^-128, 2^-140, 2^-149; from "
                     "f32 sources, and in ml_dtypes, the same values give 2^-127); hloref "
                     "rounds once to the nearest value, 2^-127 (f8e8m0fnu has no zero). The "
                     "mechanism is unverified: an f32 intermediate flushed to zero would "
                     "give it",
    "convolution-int-folding-saturates": "XLA's constant folder (jaxlib 0.10.2) saturates an "
                                         "integer convolution's overflowing sums where the "
                                         "run-time code wraps (findings/xla-cpu-jaxlib-0.10.2/"
                                         "convolution-s16-constant-folding-saturates)",
    "multiply-by-converted-pred": "XLA's algebraic simplifier rewrites multiply(convert(p), "
                                  "x) of a pred p into select(p, x, 0): where p is false "
                                  "XLA:CPU gives +0 for a NaN, an infinite or a negative x "
                                  "(IEEE: NaN, NaN, -0); reported upstream as "
                                  "jax-ml/jax#12233 (open)",
    "exp-quotient-rewrite": "XLA's algebraic simplifier rewrites exp(A)/exp(B) into "
                            "exp(A - B) (algebraic_simplifier.cc, on purpose): where exp "
                            "overflows or underflows in both (inf/inf, 0/0: NaN by IEEE, "
                            "hloref) XLA:CPU returns exp(A - B), e.g. 1 for "
                            "exp(x)/exp(x) at x = 1.7e269",
    "signed-square-assumed-nonnegative": "XLA's algebraic simplifier takes a signed integer "
                                         "multiply(x, x) for non-negative and drops abs(x * x), "
                                         "so where x * x wraps to a negative value XLA:CPU "
                                         "returns it (jnp.abs(x * x) of int32 -1805746537: "
                                         "-847446767; wrapping semantics: 847446767). XLA's "
                                         "maintainers treat signed overflow as undefined "
                                         "(openxla/xla#41784, closed unmerged): not reported",
    "acos-asin-f8e3m4-known-operand-inf": "XLA:CPU (jaxlib 0.10.2) gives inf for acos/asin "
                                          "of f8e3m4 values outside [-1, 1] known when the "
                                          "kernel is compiled (an iota), NaN when they are a "
                                          "parameter (findings/known-upstream/xla-cpu-jaxlib-0.10.2/"
                                          "acos-f8e3m4-iota-out-of-domain-inf)",
    "popcnt-s4": "XLA:CPU counts the 8 bits of the sign-extended storage byte of s4 (and "
                 "XLA's constant folder that of s2)",
    "int-power": "XLA:CPU's integer power looks at the low 6 bits of the exponent only",
    "int-power-negative-folding": "XLA's constant folder (HloEvaluator) gives 0 for an "
                                  "integer power of -1 with a negative exponent; XLA:CPU's "
                                  "run-time code gives -1 or 1 by the exponent's parity, as "
                                  "hloref does (XLA's docs leave negative integer exponents "
                                  "undefined)",
    "complex-special": "XLA:CPU's complex functions do not follow C99 Annex G for inf/NaN "
                       "components, operands exactly on a branch cut (either side), "
                       "zero bases of power (0^z: NaN, not 0), overflow "
                       "for huge magnitudes or results (z^z of a finite z "
                       "whose result overflows: NaN; z / 0 by a constant zero, which the "
                       "simplifier makes z * (1 / 0): NaN) and underflow for tiny ones (a component below "
                       "the square root of the smallest normal: its square flushes to "
                       "zero, atan2(z, z) of c64 z = 9e-23(1 + i) is NaN)",
    "int-divide-by-constant-zero": "XLA:CPU (jaxlib 0.10.2) dies with SIGFPE when an integer "
                                   "divide or remainder whose operands constant folding "
                                   "evaluates has a zero divisor, in every "
                                   "integer type (findings/known-upstream/xla-cpu-jaxlib-0.10.2/"
                                   "divide-u2-constant-zero-sigfpe); XLA's semantics give "
                                   "x / 0 = -1 (all bits set), x % 0 = x",
    "concatenate-2bit-aborts": "XLA:CPU (jaxlib 0.10.2) aborts (SIGABRT in "
                               "IrArray::EmitArrayElementAddress) compiling a concatenate of "
                               "s2 or u2 arrays (findings/xla-cpu-jaxlib-0.10.2/"
                               "concatenate-s2-aborts; u2 checked too; s4, u4, s8 run)",
    "convert-f4e2m1fn-to-int-saturates": "XLA:CPU (jaxlib 0.10.2) converts f4e2m1fn ±6 to "
                                         "an integer type's extreme values (s32/s64 stored "
                                         "as findings/xla-cpu-jaxlib-0.10.2/convert-f4e2m1fn-"
                                         "to-s64-saturates; u32 seen too)",
    "s4-arithmetic-does-not-wrap": "XLA:CPU (jaxlib 0.10.2) returns unwrapped s4 sums and "
                                   "products when the result is converted to a wider type "
                                   "(float-normalization-s4; findings/known-upstream/xla-cpu-jaxlib-0.10.2/"
                                   "s4-add-does-not-wrap; multiply seen too)",
    "bf16-to-pred-cannot-select": "XLA:CPU (jaxlib 0.10.2, an AVX-512 host) aborts compiling "
                                  "a fusion that converts bf16 to pred and to a 16-bit "
                                  "integer (LLVM: Cannot select v16f32 X86ISD::CMPP; "
                                  "findings/xla-cpu-jaxlib-0.10.2/convert-bf16-to-pred-and-"
                                  "u16-llvm-cannot-select)",
    "convolution-simplifier-check": "XLA:CPU (jaxlib 0.10.2) aborts compiling some valid "
                                    "convolutions with lhs_dilate: the algebraic "
                                    "simplifier's rewrite fails its own check (Window "
                                    "dimensions do not match RHS shape; findings/xla-cpu-"
                                    "jaxlib-0.10.2/convolution-lhs-dilate-simplifier-check-"
                                    "failure)",
    "sort-2bit": "XLA:CPU (jaxlib 0.10.2) sorts s2/u2 keys wrongly: rows that are not a "
                 "permutation of the input or not in the comparator's order "
                 "(findings/xla-cpu-jaxlib-0.10.2/sort-s2-not-a-permutation; u2 seen too)",
    "f8e8m0fnu-constant-folding": "XLA's constant folder (jaxlib 0.10.2) converts zero and "
                                  "negative values to f8e8m0fnu as 2^-127 and |x| (iota, "
                                  "convert, cosine seen), where f8e8m0fnu has neither and "
                                  "XLA:CPU's run-time code and ml_dtypes give NaN "
                                  "(findings/xla-cpu-jaxlib-0.10.2/convert-f8e8m0fnu-negative-"
                                  "constant-folding)",
    "clz-negative-constant-folding": "XLA's constant folder (jaxlib 0.10.2) gives a negative "
                                     "count-leading-zeros for negative values (s8 -3 -> -56, "
                                     "s32 -2 -> -32); the run-time code gives 0 "
                                     "(findings/known-upstream/xla-cpu-jaxlib-0.10.2/clz-s8-constant-folding)",
    "round-f8e3m4-folding": "XLA's constant folder (jaxlib 0.10.2) rounds every f8e3m4 "
                            "value to NaN in round-nearest-afz and round-nearest-even "
                            "(findings/known-upstream/xla-cpu-jaxlib-0.10.2/round-nearest-afz-f8e3m4-"
                            "constant-folding)",
    "asin-acos-of-integer-never-nan": "XLA:CPU (jaxlib 0.10.2) takes asin/acos of a "
                                      "converted integer for never NaN: isnan gives false "
                                      "and sign 0 outside [-1, 1] (findings/xla-cpu-jaxlib-"
                                      "0.10.2/asin-acos-of-integer-never-nan)",
    "atan2-zero-zero-folding": "XLA:CPU (jaxlib 0.10.2) gives NaN for atan2(+0, +0) of "
                               "operands it folds or fuses from constants (iota, "
                               "subtract(x, x) of a folded compare), where parameters give "
                               "+0 (findings/known-upstream/xla-cpu-jaxlib-0.10.2/atan2-iota-zero-zero-nan)",
    "f4e2m1fn-infinity-folding": "XLA's constant folder (jaxlib 0.10.2) turns an infinity "
                                 "into f4e2m1fn 0 (a convert of inf, atanh of ±1), where "
                                 "the run-time code and ml_dtypes saturate to ±6 "
                                 "(findings/xla-cpu-jaxlib-0.10.2/atanh-f4e2m1fn-constant-"
                                 "folding)",
    "reduce-2bit": "XLA:CPU (jaxlib 0.10.2) reduces s2 values wrongly (a maximum of a "
                   "broadcast scalar, a variadic minimum/maximum seen; "
                   "findings/xla-cpu-jaxlib-0.10.2/reduce-s2-maximum-of-broadcast)",
    "convert-int-f8-unsigned-nan": "XLA:CPU (jaxlib 0.10.2) turns the NaN of an integer "
                                   "converted to an f8 type into the unsigned maximum when "
                                   "it fuses that convert with one to u32/u64 (each alone: "
                                   "NaN, then 0; findings/known-upstream/xla-cpu-jaxlib-0.10.2/convert-int-"
                                   "f8-unsigned-fused-nan-saturates; into 6 with one to "
                                   "f4e2m1fn, where the NaN's zero is due)",
    "accumulation-overflow": "an accumulating op (dot, convolution, reduce; batch norm, "
                             "whose XLA expansion sums x², its gradient's "
                             "(x - mean)·Σ dy·(x - mean) terms, and inference's "
                             "x·t + (offset - mean·t), t = scale/sqrt(var + eps)) whose terms "
                             "overflow the element type: hloref accumulates in f64 and rounds "
                             "once (inf), XLA accumulates in the type (inf - inf = NaN); the "
                             "accumulation precision is implementation-defined",
    "log-plus-one-f64-band": "XLA:CPU's f64 log-plus-one is up to 128 ULP off for x in "
                             "(-0.4142, -0.2929) (its polynomial is used for |x| < sqrt2 - 1, "
                             "valid only for 1 + x >= 1/sqrt2; findings/xla-cpu-jaxlib-"
                             "0.10.2/log-plus-one-f64-15-ulp, reported upstream as "
                             "jax-ml/jax#39707); the c128 log that the StableHLO complex math "
                             "expander writes as log1p(|z|^2 - 1)/2 inherits it in its real "
                             "part for |z| in (0.7654, 0.8409), and the c128 log-plus-one, "
                             "log1p(2 Re z + |z|^2)/2, for |1 + z| there",
    "complex-normwise": "a complex result whose error is within the ULP budget of its "
                        "magnitude |z| but not of one tiny component (XLA:CPU's complex "
                        "functions are accurate normwise, the policy compares componentwise)",
}

#: ml_dtypes' integer types narrower than a byte (numpy kind "V", not "i"/"u")
_SUB_BYTE_INTS = ("int2", "int4", "uint2", "uint4")

#: Accumulations whose overflow XLA may turn into NaN: the catalogue's groups.
_ACCUMULATING = ACCUMULATING | EXPANDED


def _has_subnormal(value) -> bool:
    for leaf in _leaves(value):
        try:
            et = from_dtype(leaf.dtype)
        except KeyError:
            continue
        if not (et.is_float or et.is_complex) or leaf.size == 0:
            continue
        tiny = smallest_normal(et)
        for p in _parts(leaf, et):
            a = np.abs(p)
            if np.any((a > 0) & (a < tiny)):
                return True
    return False


def _parts(leaf, et) -> list[np.ndarray]:
    """A float leaf's values in f64, or a complex leaf's real and imaginary parts."""
    parts = [leaf] if et.is_float else [np.real(leaf), np.imag(leaf)]
    return [p.astype(np.float64) for p in parts]


def _flushed_only(expected, actual) -> bool:
    """Whether the elements where ``actual`` differs from ``expected`` are all, and only,
    subnormals of ``expected`` that ``actual`` holds as zero (FTZ of results). A
    subnormal in ``actual`` itself, or anywhere else, explains nothing: uninitialised
    memory read as floats is mostly subnormal (small integers' bit patterns)."""
    pairs = list(zip(_leaves(expected), _leaves(actual)))
    if not pairs:
        return False
    any_flushed = False
    for e, a in pairs:
        try:
            et = from_dtype(e.dtype)
        except KeyError:
            return False
        if e.shape != a.shape:
            return False
        if not (et.is_float or et.is_complex):
            if not np.array_equal(e, a):
                return False
            continue
        tiny = smallest_normal(et)
        for x, y in zip(_parts(e, et), _parts(a, et)):
            differ = differs(x, y)
            # f8e8m0fnu has no zero: a flushed value reads as its NaN
            zero = np.isnan(y) if et.name == "f8e8m0fnu" else (y == 0)
            flushed = (np.abs(x) > 0) & (np.abs(x) < tiny) & zero
            if np.any(differ & ~flushed):
                return False
            any_flushed = any_flushed or bool(np.any(differ & flushed))
    return any_flushed


def _products_bound(lhs: np.ndarray, rhs: np.ndarray) -> float:
    """A bound on every partial sum of a dot's or convolution's products, in any order:
    (terms) x max|lhs| x max|rhs| over the finite elements (a result element has fewer
    terms than the lhs has elements)."""
    with np.errstate(all="ignore"):
        tops = [float(np.max(np.abs(x), where=np.isfinite(x), initial=0.0))
                for x in (lhs.astype(np.float64), rhs.astype(np.float64))]
    return float(lhs.size) * tops[0] * tops[1]


def _squares_underflow(z: np.ndarray) -> bool:
    """Whether a nonzero part of a complex ``z`` is so small that its square is below the
    part type's smallest normal value (XLA's complex formulas square parts; FTZ makes
    such a square zero)."""
    parts = np.abs(np.concatenate([np.real(z).ravel(), np.imag(z).ravel()]).astype(np.float64))
    tiny = float(np.finfo(np.real(z).dtype).tiny)
    small = parts[(parts > 0) & np.isfinite(parts)]
    return bool(small.size) and float(small.min()) < np.sqrt(tiny)


def _squares_overflow(x: np.ndarray) -> bool:
    """Whether some x² (XLA's batch-norm expansion: E[x²] - E[x]²) overflows x's type."""
    top = largest_finite(x.dtype)
    if top is None:
        return False
    wide = x.astype(np.float64)
    finite = wide[np.isfinite(wide)]
    return bool(finite.size) and float(np.max(np.abs(finite))) >= np.sqrt(top)  # no f64 x² overflow


def _grad_terms_overflow(operands) -> bool:
    """Whether a term of XLA's batch-norm-grad expansion, computed in the operand's type,
    can overflow it: (x - mean) times the feature's sum of |dy·(x - mean)| over
    (variance + epsilon), bounded with the largest values of each operand (x, scale,
    mean, variance, dy); f16 gradients of values near 100 reach 65504 there."""
    top = largest_finite(operands[0].dtype) if len(operands) >= 5 else None
    if top is None:
        return False
    x, _scale, mean, var, dy = (np.asarray(o).astype(np.float64) for o in operands[:5])
    with np.errstate(all="ignore"):
        d = np.nanmax(np.abs(x), initial=0.0) + np.nanmax(np.abs(mean), initial=0.0)
        s = x.size * np.nanmax(np.abs(dy), initial=0.0) * d
        v = np.nanmin(np.abs(var), initial=np.inf)
        return bool(d * s / max(v, np.finfo(np.float64).tiny) >= top)


def _feature_index(culprit) -> int | None:
    """A batch-norm culprit's ``feature_index``, from its one-instruction module (the
    module's root), or None where that module is not at hand."""
    from hloref import parse
    from hloref.errors import HloError
    try:
        root = parse(getattr(culprit, "text", "") or "").entry.root
    except (HloError, AttributeError):
        return None
    return int(root.attrs["feature_index"]) if "feature_index" in root.attrs else None


def _inference_terms_overflow(operands, feature_index: int) -> bool:
    """Whether a term of XLA's batch-norm-inference expansion, computed in the operand's
    type, overflows it: x·t and mean·t with t = scale / sqrt(variance + epsilon) (the
    expansion adds x·t to offset - mean·t: +inf + -inf is NaN where hloref's single
    rounding gives an infinity or a finite value; a campaign, seed 71: f16 x = -22,
    mean = scale = -8136). epsilon is left out: it only shrinks t."""
    top = largest_finite(operands[0].dtype) if len(operands) >= 5 else None
    if top is None:
        return False
    x, scale, _offset, mean, var = (np.asarray(o).astype(np.float64) for o in operands[:5])
    with np.errstate(all="ignore"):
        t = np.abs(scale) / np.sqrt(np.abs(var))
        shape = [1] * x.ndim
        shape[feature_index] = -1
        terms = np.abs(x) * t.reshape(shape)
        big = max(np.nanmax(terms, initial=0.0), np.nanmax(np.abs(mean) * t, initial=0.0))
    return bool(big >= top)


def _could_overflow(opcode: str, operands, expected) -> bool:
    """Whether some order of a dot's or convolution's sums could leave the result type's
    finite range: every partial sum is at most (terms) x max|lhs| x max|rhs|, and the
    terms per result element are fewer than the lhs's elements. Below the largest
    finite value no order overflows, so a non-finite answer is no rounding effect (it
    was once the excuse for uninitialised memory). Other accumulating ops: assumed."""
    if opcode.startswith("batch-norm") and operands:
        return _squares_overflow(operands[0])
    if opcode not in ("dot", "convolution") or len(operands) < 2:
        return True
    lhs, rhs = operands[0], operands[1]
    if lhs.dtype.kind == "c" or rhs.dtype.kind == "c":
        return True
    leaves = list(_leaves(expected))
    if not leaves or leaves[0].dtype.kind in "biuc":
        return True
    top = largest_finite(leaves[0].dtype)
    if top is None:
        return True
    return _products_bound(lhs, rhs) >= top


def _flushed_to_e8m0_nan(arrays, expected, actual) -> bool:
    """An f64 -> f8e8m0fnu convert whose differing elements are all NaN on XLA's side
    from operands in (0, 2^-127)."""
    exp, act = list(_leaves(expected)), list(_leaves(actual))
    if len(arrays) != 1 or arrays[0].dtype != np.float64 or len(exp) != 1 or len(act) != 1 \
            or exp[0].dtype.name != "float8_e8m0fnu" or exp[0].shape != arrays[0].shape \
            or act[0].shape != arrays[0].shape:
        return False
    x = arrays[0]
    with np.errstate(all="ignore"):
        ev, av = exp[0].astype(np.float64), act[0].astype(np.float64)
        differ = differs(ev, av)
        flushed = (x > 0) & (x < 2.0 ** -127) & np.isnan(av)
    return bool(np.any(differ)) and bool(np.all(flushed[differ]))


def _infinity_meets_overflow(culprit, arrays) -> bool:
    """A sum (``reduce``/``reduce-window`` whose reducer is ``add``) holding an infinity,
    whose finite terms of the other sign could overflow the type on their own: summed
    first, in the type, they reach the other infinity and inf - inf = NaN, where hloref's
    f64 sum gives the infinity. Likewise a ``dot``/``convolution`` with a non-finite
    operand element (an infinity, or a NaN that other result elements read) whose finite
    products could overflow: computed in the type, such products are infinities, and two
    of opposite signs (or one beside the infinite operand's) give NaN, or the one that
    overflowed wins over a larger sum of the other sign that did not. Every differing
    element is NaN on one side and ±inf on the other, or opposite infinities (a campaign,
    seed 79: a convolution's (-1.7e37)(-9.1e35) is +inf in f32, where the exact sum,
    dominated by 3.4e38 x -9.1e35, is -inf)."""
    if not arrays or arrays[0].dtype.kind not in "fV":
        return False
    top = largest_finite(arrays[0].dtype)
    if top is None:
        return False
    # a sum rounds to infinity from top + ulp(top)/2 on (round to nearest)
    try:
        big = arrays[0].dtype.type(top)
        edge = top + 0.5 * (top - float(np.nextafter(big, arrays[0].dtype.type(0))))
    except Exception:  # noqa: BLE001 - ml_dtypes' narrow types: the largest finite value
        edge = top
    if culprit.opcode in ("dot", "convolution"):
        # products in the type: one of finite operands may overflow, and meet a product
        # holding the infinity (hloref's wider products stay finite)
        if len(arrays) < 2 or arrays[1].dtype.kind not in "fV":
            return False
        lhs, rhs = arrays[0].astype(np.float64), arrays[1].astype(np.float64)
        if np.all(np.isfinite(lhs)) and np.all(np.isfinite(rhs)) or \
                _products_bound(lhs, rhs) < edge:
            return False  # (all finite: the general accumulation-overflow rule's case)
    elif culprit.opcode in ("reduce", "reduce-window") and _adds(culprit):
        x = arrays[0].astype(np.float64)
        finite = np.isfinite(x)
        up = float(np.sum(np.where(finite & (x > 0), x, 0.0)))
        down = float(-np.sum(np.where(finite & (x < 0), x, 0.0)))
        if not ((np.any(x == np.inf) and down >= edge) or
                (np.any(x == -np.inf) and up >= edge)):
            return False
    else:
        return False
    pairs = list(zip(_leaves(culprit.expected), _leaves(culprit.actual)))
    if not pairs:
        return False
    for e, a in pairs:
        e, a = np.asarray(e, np.float64), np.asarray(a, np.float64)
        differ = differs(e, a)
        swapped = (np.isnan(e) & np.isinf(a)) | (np.isinf(e) & np.isnan(a)) | \
            (np.isinf(e) & np.isinf(a) & (e != a))
        if np.any(differ & ~swapped):
            return False
    return True


def _adds(culprit) -> bool:
    """Whether the isolated instruction's reducer is one ``add`` of its parameters."""
    from hloref import parse
    from hloref.evaluator.reduce import simple_reducer
    try:
        module = parse(culprit.text)
        instr = next(i for c in module.computations.values() for i in c.instructions
                     if i.name == culprit.name or i.opcode == culprit.opcode)
        comp = module.computations[str(instr.attrs.get("to_apply"))]
    except Exception:  # noqa: BLE001 - no reducer found: not this class
        return False
    return simple_reducer(comp) == "add"


def culprit_gap(report, module) -> str | None:
    """The ``KNOWN_GAPS`` key that a localized mismatch shows, or None: a select-and-scatter
    that is the entry's root, whose oracle value (alone, and in the whole module) is
    hloref's under another order of the window walk (``select-and-scatter-ties``). Only
    the root: a tie at an inner instruction would hide what came after it."""
    culprit = getattr(report, "culprit", None)
    inner = culprit.innermost() if culprit is not None else None
    root = module.entry.root if module is not None and module.entry is not None else None
    if inner is None or root is None or inner.opcode != "select-and-scatter" or \
            inner.computation != module.entry.name or inner.name != root.name:
        return None
    whole, alone = np.asarray(report.actual), np.asarray(inner.actual)
    if whole.shape != alone.shape or whole.tobytes() != alone.tobytes():
        return None
    return "select-and-scatter-ties" if same_under_another_order(inner) else None


def known_difference(report) -> str | None:
    """The ``KNOWN_DIFFERENCES`` key that explains a mismatch, or ``None``."""
    culprit = report.culprit.innermost() if getattr(report, "culprit", None) else None
    if culprit is None:
        # unlocalized: FTZ explains it only where every differing element is hloref's
        # subnormal flushed to zero by XLA (DAZ effects further on are the envelope's)
        return "ftz" if _flushed_only(report.expected, report.actual) else None
    ops = culprit.operands
    arrays = [x for o in ops for x in _leaves(o)]
    if culprit.opcode.startswith("batch-norm") and arrays and _squares_overflow(arrays[0]):
        return "accumulation-overflow"  # XLA's expansion sums x² in the type (inf - inf)
    if culprit.opcode == "batch-norm-inference" and len(arrays) >= 5 and \
            _feature_index(culprit) is not None and \
            _inference_terms_overflow(arrays, _feature_index(culprit)):
        return "accumulation-overflow"  # its x·t + (offset - mean·t) in the type
    if culprit.opcode == "batch-norm-grad" and _grad_terms_overflow(arrays) and any(
            not np.all(np.isfinite(np.asarray(a, np.float64))) for a in _leaves(culprit.actual)):
        return "accumulation-overflow"  # its (x - mean)·Σ dy(x - mean)/(var + eps) in the type
    if culprit.opcode == "sort" and any(x.dtype.name in ("int2", "uint2") for x in arrays):
        return "sort-2bit"
    if culprit.opcode == "convert" and arrays and arrays[0].dtype.name == "float4_e2m1fn" and \
            any(x.dtype.kind in "iu" or x.dtype.name in _SUB_BYTE_INTS
                for x in _leaves(culprit.expected)) and \
            np.any(np.abs(arrays[0].astype(np.float64)) == 6.0):
        return "convert-f4e2m1fn-to-int-saturates"
    if culprit.opcode == "popcnt" and arrays and arrays[0].dtype.name in ("int4", "int2"):
        return "popcnt-s4"
    if culprit.opcode == "power" and len(arrays) == 2 and arrays[1].dtype.kind in "iu":
        e = arrays[1].astype(np.int64)
        if np.any(e >= 64) or np.any(e < 0):
            return "int-power"
    if culprit.opcode in _ACCUMULATING and all(np.all(np.isfinite(x)) for x in arrays
                                                if x.dtype.kind in "fc" or x.dtype.kind == "V"):
        nonfinite = [x for x in list(_leaves(culprit.expected)) + list(_leaves(culprit.actual))
                     if x.dtype.kind not in "biu" and not np.all(np.isfinite(
                         x.astype(np.complex128) if x.dtype.kind == "c" else
                         x.astype(np.float64)))]
        if nonfinite and _could_overflow(culprit.opcode, arrays, culprit.expected):
            return "accumulation-overflow"
    if culprit.opcode == "convert" and _flushed_to_e8m0_nan(arrays, culprit.expected,
                                                            culprit.actual):
        return "ftz-f8e8m0fnu"
    if _infinity_meets_overflow(culprit, arrays):
        return "accumulation-overflow"
    if _complex_normwise_ok(culprit):
        return "complex-normwise"
    if _in_log1p_band(culprit.opcode, arrays, culprit.expected, culprit.actual):
        return "log-plus-one-f64-band"
    if _off_cut_differs(culprit, arrays):
        return "complex-special"  # an operand exactly on the branch cut: either side
    if culprit.opcode == "power" and arrays and arrays[0].dtype.kind == "c" and \
            np.any(arrays[0] == 0):
        return "complex-special"  # 0^z: exp(z·log 0) gives NaN in XLA, 0 by C99 G.6.3.1
    if any(x.dtype.kind == "c" for x in arrays):
        for x in arrays:
            if x.dtype.kind == "c" and x.size and (
                    not np.all(np.isfinite(x)) or np.max(np.abs(x)) > 1e15 or
                    _squares_underflow(x)):
                return "complex-special"
        if culprit.opcode in ("power", "exponential") and \
                infinity_became_nan(culprit.expected, culprit.actual):
            return "complex-special"  # a result that overflows (z^z, z = 78 + 122i): NaN
    # last: the more specific classes above name a mismatch better than subnormals do
    if any(_has_subnormal(o) for o in ops) or _flushed_only(culprit.expected, culprit.actual):
        return "ftz"  # DAZ of the culprit's operands, or its subnormal results flushed
    return None


#: where XLA:CPU's f64 log-plus-one is wrong: x in (-(sqrt2 - 1), 1/sqrt2 - 1), widened
#: by a little (measured on jaxlib 0.10.2: over 2 ULP from -0.41420 to -0.35110, 128 at most)
_LOG1P_BAND = (-0.41422, -0.29288)
_LOG1P_ULPS = 160  # the most that band's error reaches (128), with room
_LOG1P_BUDGET = 4  # what any element may be off by outside the band (the policy's 2, + 2)


def _in_log1p_band(opcode: str, operands, expected, actual) -> bool:
    """An f64 ``log-plus-one`` (or a c128 ``log``, whose real part is log1p(|z|² − 1)/2,
    or a c128 ``log-plus-one``, whose real part is log1p(2 Re z + |z|²)/2) whose
    differing elements all have their log1p argument in :data:`_LOG1P_BAND`, and differ
    there by at most :data:`_LOG1P_ULPS` ULP in that part alone."""
    if opcode not in ("log-plus-one", "log") or len(operands) != 1:
        return False
    x = np.asarray(operands[0])
    exp, act = list(_leaves(expected)), list(_leaves(actual))
    if x.dtype.name not in (("float64", "complex128") if opcode == "log-plus-one"
                            else ("complex128",)) or len(exp) != 1 or len(act) != 1 or \
            exp[0].shape != x.shape or act[0].shape != x.shape:
        return False
    e, a = exp[0], act[0]
    with np.errstate(all="ignore"):
        if x.dtype.kind == "c":  # the angle (atan2) must agree within its budget
            if np.any(np.abs(np.imag(e) - np.imag(a)) > 2 * np.spacing(np.abs(np.imag(e)))):
                return False
            # log |z|, log |1 + z|: half the log1p of these (a campaign, seed 89: c128
            # log1p(-0.2319 - 0.0793i), argument -0.4039, 63 ULP off in the real part)
            arg = np.abs(x) ** 2 - 1 if opcode == "log" else 2 * np.real(x) + np.abs(x) ** 2
            e, a = np.real(e), np.real(a)
        else:
            arg = x
        ulps = np.abs(e - a) / np.spacing(np.abs(e))
        # the elements off by more than the op's own budget (a few ULP anywhere)
        differ = differs(e, a) & ~(ulps <= _LOG1P_BUDGET)
        if not np.any(differ):
            return False
        inside = (arg > _LOG1P_BAND[0]) & (arg < _LOG1P_BAND[1])
    return bool(np.all(inside[differ]) and np.all(ulps[differ] <= _LOG1P_ULPS))


def _complex_normwise_ok(culprit) -> bool:
    """Complex results that agree within the budget measured against |z|."""
    from .compare import tolerance_for, ulp_of
    from hloref.types import from_dtype
    exp, act = list(_leaves(culprit.expected)), list(_leaves(culprit.actual))
    if not exp or len(exp) != len(act) or not any(e.dtype.kind == "c" for e in exp):
        return False
    for e, a in zip(exp, act):
        if e.dtype.kind != "c":
            continue
        et = from_dtype(e.dtype)
        comp = from_dtype(np.real(e).dtype)
        e128, a128 = e.astype(np.complex128), a.astype(np.complex128)
        if not (np.all(np.isfinite(e128)) and np.all(np.isfinite(a128))):
            return False
        tol = tolerance_for(et, culprit.opcode)
        allowed = (tol.ulps + 1) * ulp_of(np.abs(e128), comp)
        if np.any(np.abs(e128 - a128) > allowed):
            return False
    return True
