"""The comparison policy: when do hloref's value and an oracle's value agree?

One policy, shared by the tests, ``hloref diff`` and the fuzzer:

* integers and pred compare exactly; shapes and dtypes must match;
* floats compare by ULP distance in the element type, plus an absolute floor for
  values near zero; NaN equals NaN whatever its payload or sign; infinities must
  match exactly; ±0 are equal;
* subnormals: XLA:CPU flushes subnormal results (and inputs) to zero, so a
  subnormal on one side matches ±0 on the other (``ftz=True``, the default);
* per-opcode ULP budgets for functions XLA:CPU computes with its own polynomial
  approximations (``OPCODE_ULPS``, from ``xla/codegen/intrinsic/accuracy``);
* accumulations (``dot``, ``reduce``, ``convolution``) get an absolute bound from
  the reduction length and the magnitudes of the terms (``accumulation_atol``),
  since their summation order is implementation-defined.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hloref.types import ElementType, from_dtype

__all__ = ["Verdict", "Tolerance", "compare_values", "tolerance_for", "accumulation_atol",
           "ulp_of", "DTYPE_ULPS", "OPCODE_ULPS"]

#: Default ULP budget per float type: one rounding of a result that the two sides
#: may compute in different intermediate precisions.
DTYPE_ULPS: dict[str, float] = {
    "f64": 2, "f32": 2, "f16": 1, "bf16": 1, "f8e5m2": 1, "f8e4m3": 1, "f8e4m3fn": 1,
    "f8e4m3b11fnuz": 1, "f8e5m2fnuz": 1, "f8e4m3fnuz": 1, "f8e3m4": 1, "f4e2m1fn": 1,
    "f8e8m0fnu": 1, "c64": 2, "c128": 2,
}

#: Extra ULPs per opcode where XLA:CPU uses approximations: XLA's accuracy budgets
#: (HLO_SURFACE §4.8) plus one for our rounding, widened where XLA was measured
#: further off (erf f32: 4 ULP below 1; tanh f64: 6 ULP just above -1). For floats of
#: 16 bits or fewer XLA computes in f32 and rounds, so an f32 budget shrinks below one
#: of their ULPs: they get at most NARROW_OPCODE_ULPS (8 ULPs of f4e2m1fn span its
#: whole range: atanh(1) = 0 instead of 6 passed as "3 ULP").
OPCODE_ULPS: dict[str, float] = {
    "exponential": 7, "exponential-minus-one": 7, "log": 2, "log-plus-one": 2, "tanh": 8,
    "atan": 4, "atan2": 4, "erf": 5, "tan": 3, "sine": 2, "cosine": 2, "cbrt": 2, "rsqrt": 2,
    "sqrt": 1, "power": 8, "logistic": 8, "sinh": 8, "cosh": 8, "asin": 4, "acos": 4,
    "asinh": 8, "acosh": 8, "atanh": 8,
}


#: The most an opcode budget gives a float of 16 bits or fewer (see OPCODE_ULPS).
NARROW_OPCODE_ULPS = 2


@dataclass(frozen=True)
class Tolerance:
    ulps: float = 0
    atol: float = 0.0
    ftz: bool = True


@dataclass
class Verdict:
    """``kind`` is ``match`` or ``mismatch`` (oracle crashes are the caller's verdicts)."""

    kind: str
    message: str = ""
    max_ulp: float = 0.0
    max_abs: float = 0.0
    max_rel: float = 0.0
    count: int = 0
    first_index: tuple | None = None
    expected_at_first: object = None
    actual_at_first: object = None
    leaf: tuple = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return self.kind == "match"

    def __str__(self) -> str:
        if self.ok:
            return "match"
        text = f"mismatch{' at output ' + str(self.leaf) if self.leaf else ''}: {self.message}"
        if self.first_index is not None:
            text += (f"; {self.count} elements differ, first at {list(self.first_index)}: "
                     f"expected {self.expected_at_first!r}, got {self.actual_at_first!r}; "
                     f"max ulp {self.max_ulp:g}, max abs {self.max_abs:g}, max rel {self.max_rel:g}")
        return text


def tolerance_for(et: ElementType, opcode: str | None = None, *, atol: float = 0.0,
                  ftz: bool = True) -> Tolerance:
    if not (et.is_float or et.is_complex):
        return Tolerance(0, 0.0, ftz)
    ulps = DTYPE_ULPS.get(et.name, 2)
    if opcode in OPCODE_ULPS:
        extra = OPCODE_ULPS[opcode]
        if et.is_narrow_float:
            extra = min(extra, NARROW_OPCODE_ULPS)
        ulps = max(ulps, extra)
    return Tolerance(ulps, atol, ftz)


def _format(et: ElementType):
    if et.is_complex:
        return from_dtype(np.float32 if et.name == "c64" else np.float64).float_format
    return et.float_format


def ulp_of(values: np.ndarray, et: ElementType) -> np.ndarray:
    """Spacing of ``et``'s representable numbers at ``|values|`` (f64 array)."""
    fmt = _format(et)
    a = np.abs(values.astype(np.float64))
    min_exp = 1 - fmt.bias
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.floor(np.log2(np.where(a > 0, a, 1.0)))
    e = np.maximum(np.where(np.isfinite(e), e, 0), min_exp)
    return np.exp2(e - fmt.mantissa_bits)


def _smallest_normal(et: ElementType) -> float:
    fmt = _format(et)
    return 2.0 ** (1 - fmt.bias)


def accumulation_atol(n_terms: int, abs_sum: np.ndarray | float, et: ElementType) -> np.ndarray:
    """Bound on |difference| of two summation orders of ``n_terms`` terms whose absolute
    values sum to ``abs_sum``, accumulated in ``et`` (or wider): 2·n·eps·Σ|t|."""
    fmt = _format(et) if (et.is_float or et.is_complex) else None
    eps = 2.0 ** -fmt.mantissa_bits if fmt else 0.0
    return 2.0 * max(n_terms, 1) * eps * np.asarray(abs_sum, np.float64)


def leaves(value, path=()):
    """``(path, leaf)`` for each non-tuple leaf of a (nested) tuple value."""
    if isinstance(value, tuple):
        for i, v in enumerate(value):
            yield from leaves(v, path + (i,))
    else:
        yield path, value


_leaves = leaves  # the name the campaign and the tests know


def compare_values(actual, expected, *, opcode: str | None = None,
                   tolerance: Tolerance | None = None, atol=None) -> Verdict:
    """Compare ``actual`` (oracle) with ``expected`` (hloref) leaf by leaf."""
    a_leaves, e_leaves = list(_leaves(actual)), list(_leaves(expected))
    if [p for p, _ in a_leaves] != [p for p, _ in e_leaves]:
        return Verdict("mismatch", "the results have different tuple structure")
    for (path, a), (_, e) in zip(a_leaves, e_leaves):
        if not isinstance(e, np.ndarray):
            continue  # tokens
        a = np.asarray(a)
        if a.dtype != e.dtype:
            return Verdict("mismatch", f"dtype {a.dtype} vs expected {e.dtype}", leaf=path)
        if a.shape != e.shape:
            return Verdict("mismatch", f"shape {a.shape} vs expected {e.shape}", leaf=path)
        et = from_dtype(e.dtype)
        tol = tolerance or tolerance_for(et, opcode)
        leaf_atol = atol.get(path) if isinstance(atol, dict) else atol  # none for int leaves
        verdict = _compare_array(a, e, et, tol, leaf_atol)
        if not verdict.ok:
            verdict.leaf = path
            return verdict
    return Verdict("match")


def _compare_complex(a: np.ndarray, e: np.ndarray, et: ElementType, tol: Tolerance, atol) -> Verdict:
    """Complex values compare normwise: |actual - expected| within ULPs of |expected|
    (componentwise ULPs would punish a tiny imaginary part next to a large real one).
    NaN in either component equals NaN in either component; infinities must match."""
    part = from_dtype(np.real(e).dtype)
    a128, e128 = a.astype(np.complex128), e.astype(np.complex128)
    a_nan = np.isnan(a128.real) | np.isnan(a128.imag)
    e_nan = np.isnan(e128.real) | np.isnan(e128.imag)
    a_inf = np.isinf(a128.real) | np.isinf(a128.imag)
    e_inf = np.isinf(e128.real) | np.isinf(e128.imag)
    with np.errstate(all="ignore"):
        diff = np.abs(a128 - e128)
    magnitude = np.abs(e128)
    allowed = tol.ulps * ulp_of(magnitude, part) + tol.atol
    if atol is not None:
        allowed = allowed + np.asarray(atol, np.float64)
    if tol.ftz:
        tiny = _smallest_normal(part)
        diff = np.where((np.abs(a128) < tiny) & (magnitude < tiny), 0.0, diff)
    finite = ~(a_nan | e_nan | a_inf | e_inf)
    bad = (a_nan ^ e_nan) | ((a_inf | e_inf) & ~(a_nan | e_nan) & (a128 != e128)) | \
        (finite & (diff > allowed))
    if not np.any(bad):
        return Verdict("match")
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    with np.errstate(all="ignore"):
        ulps = np.where(finite, diff / ulp_of(magnitude, part), np.inf)
        rel = np.where(finite, diff / np.maximum(magnitude, np.finfo(np.float64).tiny), np.inf)
    return Verdict(
        "mismatch", f"{int(bad.sum())} of {bad.size} {et.name} elements outside {tol.ulps:g} ulp "
        f"of |expected|", max_ulp=float(np.max(ulps[bad])),
        max_abs=float(np.max(np.where(bad & finite, diff, 0))), max_rel=float(np.max(rel[bad])),
        count=int(bad.sum()), first_index=idx, expected_at_first=e[idx].item(),
        actual_at_first=a[idx].item())


def _compare_array(a: np.ndarray, e: np.ndarray, et: ElementType, tol: Tolerance, atol) -> Verdict:
    if not (et.is_float or et.is_complex):
        bad = a != e
        if np.any(bad):
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            return Verdict("mismatch", "integer values differ", count=int(bad.sum()),
                           first_index=idx, expected_at_first=e[idx].item(),
                           actual_at_first=a[idx].item())
        return Verdict("match")
    if et.is_complex:
        return _compare_complex(a, e, et, tol, atol)
    af = a.astype(np.float64)
    ef = e.astype(np.float64)
    both_nan = np.isnan(af) & np.isnan(ef)
    one_nan = np.isnan(af) ^ np.isnan(ef)
    inf_bad = (np.isinf(af) | np.isinf(ef)) & ~(af == ef) & ~one_nan
    with np.errstate(invalid="ignore"):
        diff = np.abs(af - ef)
    diff = np.where(both_nan | (af == ef), 0.0, diff)
    ulp = ulp_of(ef, et)
    allowed = tol.ulps * ulp + tol.atol
    if atol is not None:
        allowed = allowed + np.asarray(atol, np.float64)
    if tol.ftz:
        tiny = _smallest_normal(et)
        flushed = ((np.abs(ef) < tiny) & (np.abs(af) < tiny))
        diff = np.where(flushed, 0.0, diff)
    bad = one_nan | inf_bad | (np.nan_to_num(diff, nan=np.inf) > allowed)
    if not np.any(bad):
        return Verdict("match")
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    finite = ~(np.isnan(diff) | np.isinf(diff)) & bad
    with np.errstate(all="ignore"):
        ulps = np.where(finite, diff / ulp, np.inf)
        rel = np.where(finite, diff / np.maximum(np.abs(ef), np.finfo(np.float64).tiny), np.inf)
    return Verdict(
        "mismatch", f"{int(bad.sum())} of {bad.size} {et.name} elements outside "
        f"{tol.ulps:g} ulp" + (f" + atol {tol.atol:g}" if tol.atol else ""),
        max_ulp=float(np.max(ulps[bad])), max_abs=float(np.max(np.where(bad, diff, 0))),
        max_rel=float(np.max(rel[bad])), count=int(bad.sum()), first_index=idx,
        expected_at_first=e[idx].item(), actual_at_first=a[idx].item())


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
        "defines the holes as zeros (0 * inf = NaN, hloref); XLA:CPU skips those taps. Edge "
        "padding: see conv-padding-nonfinite."),
    "conv-padding-nonfinite": (
        "convolution with edge padding (pad=lo_hi > 0) and inf/NaN kernel values: the spec "
        "pads the input with zeros and multiplies them by the kernel (0 * inf = NaN, "
        "hloref); XLA:CPU (f32, f16 and f8 alike, both oracles) skips the taps that fall "
        "in the padding, so an output window that lies wholly or partly in the padding "
        "sums only the real taps (0.0 for an all-padding window)."),
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


#: Complex functions with a branch cut and the test for lying on it (z: c128 array).
_BRANCH_CUTS = {
    "power": lambda z: (z.imag == 0) & (z.real < 0),
    "log": lambda z: (z.imag == 0) & (z.real < 0),
    "log-plus-one": lambda z: (z.imag == 0) & (z.real < -1),
    "sqrt": lambda z: (z.imag == 0) & (z.real < 0),
    "rsqrt": lambda z: (z.imag == 0) & (z.real < 0),
    "asin": lambda z: (z.imag == 0) & (np.abs(z.real) > 1),
    "acos": lambda z: (z.imag == 0) & (np.abs(z.real) > 1),
    "atanh": lambda z: (z.imag == 0) & (np.abs(z.real) > 1),
    "acosh": lambda z: (z.imag == 0) & (z.real < 1),
    "asinh": lambda z: (z.real == 0) & (np.abs(z.imag) > 1),
    "atan": lambda z: (z.real == 0) & (np.abs(z.imag) > 1),
}


def _is_identity(kind: str, value: np.ndarray) -> bool:
    v = np.asarray(value)
    et = from_dtype(v.dtype)
    if kind in ("add", "or", "xor"):
        return bool(np.all(v.astype(np.float64) == 0)) if et.is_float or et.is_complex \
            else bool(np.all(v == 0))
    if kind in ("multiply",):
        return bool(np.all(v.astype(np.complex128) == 1))
    if kind == "and":
        return bool(np.all(v)) if et.is_pred else bool(np.all(v.astype(np.int64) & ((1 << et.bits) - 1) == (1 << et.bits) - 1)) \
            if et.bits < 64 else bool(np.all(v.view(np.uint64) == np.uint64(0xFFFFFFFFFFFFFFFF)))
    if kind == "maximum":
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
                if n == 1:
                    return "non-associative-reducer" if _maybe_non_associative(
                        module.computations[str(called)]) else None
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


def tf_nan_to_nanless(module, values: dict) -> bool:
    """A domain-limited op whose result type has neither NaN nor inf got an operand
    outside its domain (hloref's operand values)."""
    for comp in module.computations.values():
        for instr in comp.instructions:
            et = getattr(instr.shape, "element_type", None)
            test = _DOMAIN_LIMITED.get(instr.opcode)
            if test is None or et is None or not et.is_float or et.float_format.has_inf \
                    or et.name not in ("f4e2m1fn",):
                continue
            operand = instr.operands[0]
            value = operand.literal if operand.opcode == "constant" else \
                values.get((comp.name, operand.name))
            if value is None or np.any(test(np.asarray(value).astype(np.float64))):
                return True
    return False


def _maybe_non_associative(computation) -> bool:
    return any(i.opcode in ("subtract", "divide", "power", "remainder", "atan2")
               for i in computation.instructions)


# ---------------------------------------------------------------- expander error bounds
#
# XLA:CPU rewrites batch norm, cholesky and triangular-solve into elementwise ops,
# reductions and dots in the element type (batchnorm_expander, cholesky_expander,
# triangular_solve_expander); hloref evaluates the definitions in f64. The bounds
# below are first-order rounding-error bounds of the *expanded* formulas (Higham,
# "Accuracy and Stability of Numerical Algorithms", 2nd ed.), evaluated in f64 on the
# operands' magnitudes, so that an expansion's legitimate rounding is not a mismatch
# while anything larger still is. ``u`` is the type's epsilon (2^-mantissa_bits,
# twice the unit roundoff: one budget per side).

_LOCAL = 8.0  # roundings of the elementwise steps: rsqrt (2 ulp budget) + ~6 ops


def _eps(et: ElementType) -> float:
    return 2.0 ** -_format(et).mantissa_bits


def _flag(value, default=False) -> bool:
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("true", "1")


def _bn_epsilon(epsilon, et) -> float:
    return float(np.float32(float(epsilon)))


def batch_norm_atol(opcode: str, operands: list, *, epsilon, feature_index,
                    et: ElementType) -> list:
    """Absolute error bounds, one per output, for XLA's expansion of batch norm.

    Training: mean = Σx/N and var = E[x²] − E[x]², each an N-term sum (error ≤ N·u·Σ|t|,
    Higham (4.4)); so δmean ≤ 2N·u·E|x| and δvar ≤ 2N·u·E[x²] + 4N·u·|mean|·E|x| +
    4u·E[x²]: the cancellation in E[x²] − E[x]² makes δvar/var as large as
    ~6N·u·E[x²]/var. The normalized output y = (x − mean)·scale·rsqrt(var + ε) + offset
    then has δy ≤ |scale|·r·δmean + |x − mean|·|scale|·r·δvar/(var + ε) + 8u·(|x| +
    |mean|)·|scale|·r + 2u·|offset| (r = rsqrt(var + ε); δr/r ≤ δvar/(var + ε) while
    δvar ≤ (var + ε)/2). When δvar > (var + ε)/2 the expansion has no correct bits in
    the variance and the channel's y and var are unconstrained (atol = inf; a NaN on
    one side still mismatches). Inference: XLA computes x·ts + (offset − mean·ts) with
    ts = scale·rsqrt(var + ε): δy ≤ 8u·(|x| + |mean|)·|scale|·r + 2u·|offset| (the
    cancellation of x·ts against mean·ts). Grad: grad_offset = Σdy (2N·u·Σ|dy|),
    grad_scale = r·(Σdy·x − mean·Σdy) (4N·u·r·(Σ|dy·x| + |mean|·Σ|dy|)), and
    grad_operand propagates both plus local roundings."""
    u = _eps(et)
    f64 = [np.asarray(o).astype(np.float64) for o in operands]
    x = f64[0]
    fi = int(feature_index)
    axes = tuple(d for d in range(x.ndim) if d != fi)
    n = max(1, x.size // max(1, x.shape[fi])) if x.ndim else 1
    eps_v = _bn_epsilon(epsilon, et)

    def fv(v):
        shape = [1] * x.ndim
        shape[fi] = -1
        return np.asarray(v).reshape(shape)

    with np.errstate(all="ignore"):
        ax = np.abs(x)
        if opcode == "batch-norm-inference":
            scale, offset, mean, var = f64[1:5]
            r = 1.0 / np.sqrt(np.abs(var + eps_v))
            dy = _LOCAL * u * (ax + fv(np.abs(mean))) * fv(np.abs(scale) * r) + \
                2 * u * fv(np.abs(offset))
            return [dy]
        if opcode == "batch-norm-training":
            scale, offset = f64[1:3]
            mean = np.mean(x, axis=axes)
            ex2 = np.mean(x * x, axis=axes)
            eabs = np.mean(ax, axis=axes)
            var = np.mean((x - fv(mean)) ** 2, axis=axes)
            dmean = 2 * n * u * eabs
            dvar = 2 * n * u * ex2 + 4 * n * u * np.abs(mean) * eabs + 4 * u * ex2
            v = var + eps_v
            r = 1.0 / np.sqrt(v)
            lost = ~(dvar <= v / 2)
            rel = np.where(lost, np.inf, dvar / v)
            dy = fv(np.abs(scale) * r * dmean) + np.abs(x - fv(mean)) * fv(np.abs(scale) * r * rel) \
                + _LOCAL * u * (ax + fv(np.abs(mean))) * fv(np.abs(scale) * r) \
                + 2 * u * fv(np.abs(offset))
            return [np.nan_to_num(dy, nan=np.inf), dmean, np.where(lost, np.inf, dvar)]
        if opcode == "batch-norm-grad":
            scale, mean, var, g = f64[1:5]
            r = 1.0 / np.sqrt(np.abs(var + eps_v))
            ag = np.abs(g)
            centred = x - fv(mean)
            go = np.sum(g, axis=axes)
            gs = r * np.sum(g * centred, axis=axes)
            dgo = 2 * n * u * np.sum(ag, axis=axes)
            dgs = 4 * n * u * r * (np.sum(ag * ax, axis=axes) + np.abs(mean) * np.sum(ag, axis=axes))
            axm = ax + fv(np.abs(mean))
            dgx = fv(np.abs(scale) * r) * (fv(dgo / n) + axm * fv(r * dgs / n)) + \
                _LOCAL * u * fv(np.abs(scale) * r) * (ag + fv(np.abs(go) / n) +
                                                      axm * fv(r * np.abs(gs) / n))
            return [dgx, dgs + _LOCAL * u * np.abs(gs), dgo]
    return []


def _tri(m: np.ndarray, lower: bool, unit: bool) -> np.ndarray:
    t = np.tril(m) if lower else np.triu(m)
    if unit:
        idx = np.arange(m.shape[-1])
        t = t.copy()
        t[..., idx, idx] = 1
    return t


def _abs_inv(m: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        try:
            return np.abs(np.linalg.inv(m))
        except np.linalg.LinAlgError:
            return np.full(m.shape, np.inf)


def cholesky_atol(a: np.ndarray, result: np.ndarray, *, lower, et: ElementType) -> np.ndarray:
    """Bound for a cholesky computed by any column algorithm in the element type.

    Backward error (Higham Thm 10.3): L̂L̂ᵀ = A + ΔA, |ΔA| ≤ γ_{n+1}·|L̂||L̂ᵀ|. First-order
    forward perturbation (Higham §10.1, Sun 1991): ΔL = L·Φ(L⁻¹ΔA L⁻ᵀ), Φ = lower
    triangle with halved diagonal, so |ΔL| ≤ |L|·Φ(|L⁻¹|·|ΔA|·|L⁻ᵀ|): the factor's
    conditioning enters through |L⁻¹|. Doubled for the two implementations."""
    u = _eps(et)
    low = _flag(lower, True)
    L = np.asarray(result).astype(np.complex128 if et.is_complex else np.float64)
    if not low:
        L = np.conj(np.swapaxes(L, -1, -2))
    L = np.tril(L)
    n = L.shape[-1]
    with np.errstate(all="ignore"):
        aL = np.abs(L)
        dA = 2 * (n + 1) * u * (aL @ np.swapaxes(aL, -1, -2))
        iL = _abs_inv(L)
        E = iL @ dA @ np.swapaxes(iL, -1, -2)
        phi = np.tril(E) - 0.5 * np.eye(n) * E
        bound = aL @ phi
    bound = np.nan_to_num(bound, nan=np.inf)
    return bound if low else np.swapaxes(bound, -1, -2)


def triangular_solve_atol(a: np.ndarray, x: np.ndarray, *, left_side, lower, unit_diagonal,
                          transpose_a, et: ElementType) -> np.ndarray:
    """Bound for a triangular solve op(A)·X = B (or X·op(A) = B) by substitution or
    blocked inversion in the element type: backward error (A + ΔA)x̂ = b with
    |ΔA| ≤ γ_n·|A| (Higham Thm 8.5), so |x − x̂| ≤ γ_n·|A⁻¹|·|A|·|x̂| (Skeel's
    condition number, Higham (7.13)). The expander inverts diagonal blocks and
    multiplies (Higham §8.2/§14.2 give the same form with a constant ~n), so the
    budget is 4n·u·|op(A)⁻¹|·|op(A)|·|X|."""
    u = _eps(et)
    A = np.asarray(a).astype(np.complex128 if et.is_complex else np.float64)
    X = np.abs(np.asarray(x).astype(np.complex128 if et.is_complex else np.float64))
    M = _tri(A, _flag(lower), _flag(unit_diagonal))
    trans = str(transpose_a).strip().upper()
    if trans in ("TRANSPOSE", "ADJOINT"):
        M = np.swapaxes(M, -1, -2)
    n = M.shape[-1]
    with np.errstate(all="ignore"):
        aM, iM = np.abs(M), _abs_inv(M)
        if _flag(left_side):
            bound = 4 * n * u * (iM @ (aM @ X))
        else:
            bound = 4 * n * u * ((X @ aM) @ iM)
    return np.nan_to_num(bound, nan=np.inf)


#: Complex transcendentals XLA:CPU builds from real formulas (elementwise_ir_emitter).
COMPLEX_FORMULA_OPS = frozenset({"sine", "cosine", "power", "atan2"})


def complex_formula_atol(opcode: str, operands: list, et: ElementType):
    """Absolute error bound for complex ``opcode`` computed as XLA does, from real
    functions of the components, each within its own budget; the error is measured
    normwise, so what matters is the size of the real intermediates, not of |result|.

    * sine/cosine: sin(x+iy) = sin x·cosh y + i·cos x·sinh y with sinh y = (e^y − e^-y)/2
      (cosine alike): each component carries ~u·cosh y of absolute error whatever the
      result's size (cancellation in e^y − e^-y when |y| is small): 8u·cosh y.
    * power: x^y = exp(y·log x); log's absolute error ~u·|w| in w = y·log x (exp's
      condition number is |w|) becomes a relative error of the result: 4u·(1 + |w|)·|x^y|.
    * atan2(a, b) = −i·log((b + ia)/sqrt(a² + b²)): the log's imaginary part is an angle
      in [−π, π] with absolute error ~u·π, the real part ~u: 4u·π.
    """
    u = _eps(et)
    z = [np.asarray(o).astype(np.complex128) for o in operands]
    with np.errstate(all="ignore"):
        if opcode in ("sine", "cosine"):
            return 8 * u * np.cosh(z[0].imag)
        if opcode == "power":
            w = z[1] * np.log(z[0])
            return 4 * u * (1 + np.abs(w)) * np.abs(np.exp(w))
        if opcode == "atan2":
            return np.full(np.broadcast(z[0], z[1]).shape, 4 * u * np.pi)
    return None
