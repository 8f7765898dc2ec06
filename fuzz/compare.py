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

from hloref.op_properties import values_of
from hloref.types import ElementType, from_dtype

__all__ = ["Verdict", "Tolerance", "compare_values", "tolerance_for", "accumulation_atol",
           "ulp_of", "part_format", "smallest_normal", "largest_finite", "leaves", "DTYPE_ULPS",
           "OPCODE_ULPS", "differs", "infinity_became_nan",
           "NARROW_OPCODE_ULPS"]

#: Default ULP budget per float type: one rounding of a result that the two sides
#: may compute in different intermediate precisions. f8e8m0fnu has none: its ULP is a
#: factor of 2 (a doubled MX block scale would pass as "one rounding"), and where two
#: correct computations of an f8e8m0fnu value may round to neighbours (an f32 value
#: near a rounding boundary, computed in another order or precision), the perturbed
#: runs of the envelope reach both; an op's own budget (``OPCODE_ULPS``) still applies.
DTYPE_ULPS: dict[str, float] = {
    "f64": 2, "f32": 2, "f16": 1, "bf16": 1, "f8e5m2": 1, "f8e4m3": 1, "f8e4m3fn": 1,
    "f8e4m3b11fnuz": 1, "f8e5m2fnuz": 1, "f8e4m3fnuz": 1, "f8e3m4": 1, "f4e2m1fn": 1,
    "f8e8m0fnu": 0, "c64": 2, "c128": 2,
}

#: Extra ULPs per opcode where XLA:CPU uses approximations (op property ``ulp-budget``,
#: with its sources). For floats of 16 bits or fewer XLA computes in f32 and rounds, so an
#: f32 budget shrinks below one of their ULPs: they get at most NARROW_OPCODE_ULPS (8 ULPs
#: of f4e2m1fn span its whole range: atanh(1) = 0 instead of 6 passed as "3 ULP").
OPCODE_ULPS: dict[str, float] = values_of("ulp-budget", int)


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
        return self.describe()

    def describe(self, ours: str = "hloref", theirs: str = "XLA") -> str:
        """``match``, or ``mismatch: `` and ``details``."""
        return "match" if self.ok else f"mismatch: {self.details(ours, theirs)}"

    def details(self, ours: str = "hloref", theirs: str = "XLA") -> str:
        """Where and by how much the values differ, naming ``expected`` as ``ours``
        and ``actual`` as ``theirs`` (``fuzz/vocabulary.py``)."""
        text = f"{'at output ' + str(self.leaf) + ': ' if self.leaf else ''}{self.message}"
        if self.first_index is not None:
            text += (f"; first at {list(self.first_index)}: {ours} {self.expected_at_first!r}, "
                     f"{theirs} {self.actual_at_first!r}; max ulp {self.max_ulp:g}, "
                     f"max abs {self.max_abs:g}, max rel {self.max_rel:g}")
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


def part_format(et: ElementType):
    """The float format of ``et`` (of its real and imaginary parts, for complex)."""
    if et.is_complex:
        return from_dtype(np.float32 if et.name == "c64" else np.float64).float_format
    return et.float_format


def ulp_of(values: np.ndarray, et: ElementType) -> np.ndarray:
    """Spacing of ``et``'s representable numbers at ``|values|`` (f64 array)."""
    fmt = part_format(et)
    a = np.abs(values.astype(np.float64))
    min_exp = 1 - fmt.bias
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.floor(np.log2(np.where(a > 0, a, 1.0)))
    e = np.maximum(np.where(np.isfinite(e), e, 0), min_exp)
    return np.exp2(e - fmt.mantissa_bits)


def smallest_normal(et: ElementType) -> float:
    """The smallest normal value of ``et`` (of its parts, for complex)."""
    fmt = part_format(et)
    return 2.0 ** (1 - fmt.bias)


def largest_finite(dtype) -> float | None:
    """The largest finite value of a float ``dtype`` (ml_dtypes' narrow ones too), else
    None (integers, complex)."""
    import ml_dtypes
    try:
        return float(ml_dtypes.finfo(dtype).max)
    except (ValueError, TypeError):
        return None


def accumulation_atol(n_terms: int, abs_sum: np.ndarray | float, et: ElementType) -> np.ndarray:
    """Bound on |difference| of two summation orders of ``n_terms`` terms whose absolute
    values sum to ``abs_sum``, accumulated in ``et`` (or wider): 2·n·eps·Σ|t|."""
    fmt = part_format(et) if (et.is_float or et.is_complex) else None
    eps = 2.0 ** -fmt.mantissa_bits if fmt else 0.0
    return 2.0 * max(n_terms, 1) * eps * np.asarray(abs_sum, np.float64)


def differs(expected, actual) -> np.ndarray:
    """Where two arrays of one shape hold different values, a NaN equal to any NaN (float,
    complex: either part NaN, and ml_dtypes' narrow floats, widened to f64)."""
    e, a = np.asarray(expected), np.asarray(actual)
    if e.dtype.kind == "V":  # ml_dtypes' narrow floats
        e, a = e.astype(np.float64), a.astype(np.float64)
    if e.dtype.kind not in "fc":
        return e != a
    with np.errstate(invalid="ignore"):
        return ~((e == a) | (np.isnan(e) & np.isnan(a)))


def infinity_became_nan(expected, actual) -> bool:
    """Whether every element where the complex ``actual`` differs from ``expected`` is an
    infinity there (a part infinite, C99 Annex G) and a NaN in ``actual``, and some
    element does (XLA's complex formulas that lose an overflow or a division by zero)."""
    e, a = np.asarray(expected), np.asarray(actual)
    if e.dtype.kind != "c" or a.dtype.kind != "c" or e.shape != a.shape:
        return False
    bad = differs(e, a)
    lost = (np.isinf(e.real) | np.isinf(e.imag)) & np.isnan(a)
    return bool(np.any(bad)) and not bool(np.any(bad & ~lost))


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
            return Verdict("mismatch", f"dtypes differ: {a.dtype} judged, {e.dtype} expected",
                           leaf=path)
        if a.shape != e.shape:
            return Verdict("mismatch", f"shapes differ: {a.shape} judged, {e.shape} expected",
                           leaf=path)
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
    NaN in either component equals NaN in either component; an infinity matches only
    an infinity, and (C99 G.3) a value with an infinite part is an infinity whatever
    its other part: (inf, NaN) and (inf, -inf) are the same complex infinity."""
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
        tiny = smallest_normal(part)
        diff = np.where((np.abs(a128) < tiny) & (magnitude < tiny), 0.0, diff)
    finite = ~(a_nan | e_nan | a_inf | e_inf)
    bad = ~(a_inf & e_inf) & (
        (a_nan ^ e_nan) | ((a_inf | e_inf) & ~(a_nan | e_nan) & (a128 != e128)) |
        (finite & (diff > allowed)))
    if not np.any(bad):
        return Verdict("match")
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    with np.errstate(all="ignore"):
        ulps = np.where(finite, diff / ulp_of(magnitude, part), np.inf)
        rel = np.where(finite, diff / np.maximum(magnitude, np.finfo(np.float64).tiny), np.inf)
    return Verdict(
        "mismatch", f"{int(bad.sum())} of {bad.size} {et.name} elements outside {tol.ulps:g} ulp "
        f"of the expected magnitude", max_ulp=float(np.max(ulps[bad])),
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
        tiny = smallest_normal(et)
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
