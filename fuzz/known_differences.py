"""Known differences of XLA:CPU (jaxlib 0.10.2) from the semantics that the culprit
shows: the one instruction outside its own envelope when run alone, its operand values
and its two results (``Case.culprit``). XLA's bugs already known and its documented
limitations, outside what the envelope allows: unlike a gap, a mismatch they explain
stays a mismatch; ``diff`` names the class and campaigns count it without reporting it
again. ``tests/hlo_builders.py`` KNOWN_DIFFERENCES records how the op tables treat the
same cases. Each class is a ``KnownClass`` record of :data:`RECORDS`.
"""

from __future__ import annotations

import numpy as np

from hloref.opcodes import ACCUMULATING, EXPANDED
from hloref.types import from_dtype

from .compare import differs, infinity_became_nan, largest_finite, smallest_normal, ulp_of
from .known_bugs import (complex_divide_by_folded_zero, folded_least_e8m0_flushed,
                         folded_popcnt_s4, sort_2bit_crash)
from .known_record import FLUSH, NUMERIC, OPERATION, SIGNATURE, Case, KnownClass, leaves_of
from .stage_table import component_of

__all__ = ["RECORDS"]

_leaves = leaves_of


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





# ---------------------------------------------------------------- the predicates


def _batch_norm_overflow(case: Case) -> bool:
    """A batch norm whose XLA expansion overflows in the type: the sum of x² (any of the
    three), inference's x·t + (offset - mean·t), the gradient's (x - mean)·Σ dy(x - mean)
    / (var + eps) where XLA's value is non-finite."""
    c, arrays = case.culprit, case.culprit_operands
    if c is None or not c.opcode.startswith("batch-norm") or not arrays:
        return False
    if _squares_overflow(arrays[0]):
        return True
    instr = case.culprit_instruction
    if c.opcode == "batch-norm-inference" and len(arrays) >= 5 and instr is not None and \
            "feature_index" in instr.attrs and \
            _inference_terms_overflow(arrays, int(instr.attrs["feature_index"])):
        return True
    return c.opcode == "batch-norm-grad" and _grad_terms_overflow(arrays) and any(
        not np.all(np.isfinite(np.asarray(a, np.float64))) for a in _leaves(c.actual))


def _accumulation_overflow(case: Case) -> bool:
    """An accumulating op whose terms overflow the element type: batch norm's expansion,
    a dot/convolution/reduce of finite operands with non-finite results some order of
    the sums reaches, or an infinity meeting finite terms that overflow
    (:func:`_infinity_meets_overflow`)."""
    c, arrays = case.culprit, case.culprit_operands
    if c is None:
        return False
    if _batch_norm_overflow(case):
        return True
    if c.opcode in _ACCUMULATING and all(np.all(np.isfinite(x)) for x in arrays
                                         if x.dtype.kind in "fc" or x.dtype.kind == "V"):
        nonfinite = [x for x in list(_leaves(c.expected)) + list(_leaves(c.actual))
                     if x.dtype.kind not in "biu" and not np.all(np.isfinite(
                         x.astype(np.complex128) if x.dtype.kind == "c" else
                         x.astype(np.float64)))]
        if nonfinite and _could_overflow(c.opcode, arrays, c.expected):
            return True
    return _infinity_meets_overflow(case, arrays)


def _sort_2bit(case: Case) -> bool:
    if case.verdict == "crash":
        return case.module is not None and sort_2bit_crash(case)
    c = case.culprit
    return c is not None and c.opcode == "sort" and any(
        x.dtype.name in ("int2", "uint2") for x in case.culprit_operands)


def _f4_to_int(case: Case) -> bool:
    c, arrays = case.culprit, case.culprit_operands
    return c is not None and c.opcode == "convert" and bool(arrays) and \
        arrays[0].dtype.name == "float4_e2m1fn" and \
        any(x.dtype.kind in "iu" or x.dtype.name in _SUB_BYTE_INTS for x in _leaves(c.expected)) \
        and bool(np.any(np.abs(arrays[0].astype(np.float64)) == 6.0))


def _popcnt_s4(case: Case) -> bool:
    c, arrays = case.culprit, case.culprit_operands
    if c is not None and c.opcode == "popcnt" and arrays and \
            arrays[0].dtype.name in ("int4", "int2"):
        return True
    return case.module is not None and folded_popcnt_s4(case)


def _int_power(case: Case) -> bool:
    c, arrays = case.culprit, case.culprit_operands
    if c is None or c.opcode != "power" or len(arrays) != 2 or arrays[1].dtype.kind not in "iu":
        return False
    e = arrays[1].astype(np.int64)
    return bool(np.any(e >= 64) or np.any(e < 0))


def _ftz_e8m0(case: Case) -> bool:
    c = case.culprit
    return c is not None and c.opcode == "convert" and \
        _flushed_to_e8m0_nan(case.culprit_operands, c.expected, c.actual)


def _complex_normwise(case: Case) -> bool:
    return case.culprit is not None and _complex_normwise_ok(case.culprit)


def _log1p_band(case: Case) -> bool:
    c = case.culprit
    return c is not None and _in_log1p_band(c.opcode, case.culprit_operands, c.expected, c.actual)


def _complex_special(case: Case) -> bool:
    """An operand exactly on a complex function's branch cut (either side); a zero base
    of a complex power (0^z: exp(z·log 0) gives NaN in XLA, 0 by C99 G.6.3.1); a complex
    operand that is non-finite, huge (> 1e15) or whose square underflows; a complex
    power/exponential whose overflowing result is NaN; a complex divide by a folded
    zero (:func:`known_bugs.complex_divide_by_folded_zero`)."""
    c, arrays = case.culprit, case.culprit_operands
    if c is None:
        return case.module is not None and complex_divide_by_folded_zero(case)
    if _off_cut_differs(c, arrays):
        return True
    if c.opcode == "power" and arrays and arrays[0].dtype.kind == "c" and np.any(arrays[0] == 0):
        return True
    if any(x.dtype.kind == "c" for x in arrays):
        for x in arrays:
            if x.dtype.kind == "c" and x.size and (
                    not np.all(np.isfinite(x)) or np.max(np.abs(x)) > 1e15 or
                    _squares_underflow(x)):
                return True
        if c.opcode in ("power", "exponential") and \
                infinity_became_nan(c.expected, c.actual):
            return True
    return case.module is not None and complex_divide_by_folded_zero(case)


def _ftz(case: Case) -> bool:
    """Unlocalized: every differing element is hloref's subnormal flushed to zero by XLA
    (DAZ effects further on are the envelope's). Localized: the culprit's operands hold
    subnormals, or its differing elements are flushed subnormals. Or a folded f8e8m0fnu
    reading 2^-127 (:func:`known_bugs.folded_least_e8m0_flushed`)."""
    c = case.culprit
    if c is None:
        flushed = _flushed_only(case.expected, case.actual)
    else:
        flushed = any(_has_subnormal(o) for o in c.operands) or _flushed_only(c.expected, c.actual)
    return flushed or (case.module is not None and folded_least_e8m0_flushed(case))


_XLA = "xla-cpu-jaxlib-0.10.2"
_EMITTERS = component_of("emitter")

#: The known differences the culprit shows (``component``/``upstream``: the stored
#: finding's ``finding.json`` attribution and ``upstream.json`` thread, where stored).
RECORDS: tuple[KnownClass, ...] = (
    KnownClass(
        "ftz", "xla-difference", "XLA:CPU runtime (the PjRt CPU client's FTZ/DAZ)",
        "XLA:CPU flushes subnormal inputs and results to zero (FTZ/DAZ at run time); hloref "
        "keeps them (the culprit's operands hold subnormals, or every differing element is a "
        "subnormal of hloref's that XLA holds as zero; f8e8m0fnu, computed in f32 where its "
        "least value 2^-127 is subnormal, has no zero: a flushed value is NaN there)",
        _ftz, specificity=FLUSH),
    KnownClass(
        "ftz-f8e8m0fnu", "xla-difference", _EMITTERS,
        "XLA:CPU converts positive f64 values below 2^-127 to f8e8m0fnu NaN (measured on "
        "jaxlib 0.10.2 for 2^-127.4, 2^-128, 2^-140, 2^-149; from f32 sources, and in "
        "ml_dtypes, the same values give 2^-127); hloref rounds once to the nearest value, "
        "2^-127 (f8e8m0fnu has no zero). The mechanism is unverified: an f32 intermediate "
        "flushed to zero would give it", _ftz_e8m0),
    KnownClass(
        "popcnt-s4", "xla-difference", _EMITTERS,
        "XLA:CPU counts the 8 bits of the sign-extended storage byte of s4 (and XLA's "
        "constant folder that of s2)", _popcnt_s4),
    KnownClass(
        "int-power", "xla-difference", _EMITTERS,
        "XLA:CPU's integer power looks at the low 6 bits of the exponent only", _int_power),
    KnownClass(
        "complex-special", "xla-difference", _EMITTERS,
        "XLA:CPU's complex functions do not follow C99 Annex G for inf/NaN components, "
        "operands exactly on a branch cut (either side), zero bases of power (0^z: NaN, not "
        "0), overflow for huge magnitudes or results (z^z of a finite z whose result "
        "overflows: NaN; z / 0 by a constant zero, which the simplifier makes z * (1 / 0): "
        "NaN) and underflow for tiny ones (a component below the square root of the "
        "smallest normal: its square flushes to zero, atan2(z, z) of c64 z = 9e-23(1 + i) "
        "is NaN)", _complex_special, specificity=NUMERIC),
    KnownClass(
        "sort-2bit", "xla-difference", "XLA:CPU runtime",
        "XLA:CPU (jaxlib 0.10.2) sorts s2/u2 keys wrongly: rows that are not a permutation "
        "of the input or not in the comparator's order (u2 seen too); a variadic sort of "
        "them corrupts the heap (SIGABRT or SIGSEGV)", _sort_2bit,
        finding=f"findings/{_XLA}/sort-s2-not-a-permutation",
        verdicts=frozenset({"mismatch", "crash"})),
    KnownClass(
        "convert-f4e2m1fn-to-int-saturates", "xla-difference", _EMITTERS,
        "XLA:CPU (jaxlib 0.10.2) converts f4e2m1fn ±6 to an integer type's extreme values "
        "(s32/s64; u32 seen too)", _f4_to_int,
        finding=f"findings/{_XLA}/convert-f4e2m1fn-to-s64-saturates"),
    KnownClass(
        "accumulation-overflow", "xla-difference",
        "XLA:CPU's accumulation in the element type (dot, convolution, reduce, "
        "batchnorm_expander)",
        "an accumulating op (dot, convolution, reduce; batch norm, whose XLA expansion sums "
        "x², its gradient's (x - mean)·Σ dy·(x - mean) terms, and inference's "
        "x·t + (offset - mean·t), t = scale/sqrt(var + eps)) whose terms overflow the "
        "element type: hloref accumulates in f64 and rounds once (inf), XLA accumulates in "
        "the type (inf - inf = NaN); the accumulation precision is implementation-defined",
        _accumulation_overflow, specificity=OPERATION),
    KnownClass(
        "log-plus-one-f64-band", "xla-difference", _EMITTERS,
        "XLA:CPU's f64 log-plus-one is up to 128 ULP off for x in (-0.4142, -0.2929) (its "
        "polynomial is used for |x| < sqrt2 - 1, valid only for 1 + x >= 1/sqrt2; also "
        "jax-ml/jax#39707); the c128 log that the StableHLO complex math expander writes as "
        "log1p(|z|^2 - 1)/2 inherits it in its real part for |z| in (0.7654, 0.8409), and "
        "the c128 log-plus-one, log1p(2 Re z + |z|^2)/2, for |1 + z| there", _log1p_band,
        finding=f"findings/known-upstream/{_XLA}/log-plus-one-f64-15-ulp",
        upstream="https://github.com/openxla/xla/pull/46765"),
    KnownClass(
        "complex-normwise", "xla-difference", _EMITTERS,
        "a complex result whose error is within the ULP budget of its magnitude |z| but not "
        "of one tiny component (XLA:CPU's complex functions are accurate normwise, the "
        "policy compares componentwise)", _complex_normwise, specificity=OPERATION),
)


# ---------------------------------------------------------------- helpers

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


def _infinity_meets_overflow(case: Case, arrays) -> bool:
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
    culprit = case.culprit
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
    elif culprit.opcode in ("reduce", "reduce-window") and _adds(case):
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


def _adds(case: Case) -> bool:
    """Whether the culprit's reducer is one ``add`` of its parameters."""
    from hloref.evaluator.reduce import simple_reducer
    instr, module = case.culprit_instruction, case.culprit_module
    called = instr.attrs.get("to_apply") if instr is not None else None
    if called is None or str(called) not in module.computations:
        return False
    return simple_reducer(module.computations[str(called)]) == "add"
