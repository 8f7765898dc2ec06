"""The known-difference classifier (fuzz/known_gaps.py) on narrow types (2- and
4-bit integers, f4e2m1fn, f8e8m0fnu), XLA:CPU's inaccurate transcendental bands and
complex special values: hand-built reports against values derived by hand (mpmath) and
XLA:CPU's own results."""

from __future__ import annotations

from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest

from hloref.fuzz.known_classes import known_folding
from hloref.fuzz.known_classes import known_difference

from known_gaps_common import localized as _localized, worker, xla


@pytest.mark.parametrize("dtype,want", [
    (ml_dtypes.int2, "sort-2bit"), (ml_dtypes.uint2, "sort-2bit"), (np.int8, None),
])
def test_a_sort_of_2bit_keys_is_the_filed_sort_bug(dtype, want):
    """XLA:CPU's wrong sort of s2 keys (the stored finding) came back from a campaign as
    a u2 variant ([[2, 2, 1, 0]] sorted by GT came back [[2, 2, 0, 1]]): a sort culprit
    with 2-bit operands is the known difference; other types are not."""
    keys = np.array([[2, 0, 1, 2]]).astype(dtype)
    report = _localized("sort", [keys], np.array([[2, 2, 1, 0]]).astype(dtype),
                        np.array([[2, 2, 0, 1]]).astype(dtype))
    assert known_difference(report) == want


@pytest.mark.parametrize("dtype,value,want", [
    (np.uint32, 6.0, "convert-f4e2m1fn-to-int-saturates"),  # a campaign's u32 variant
    (np.int64, -6.0, "convert-f4e2m1fn-to-int-saturates"),  # the stored s64 finding
    (np.uint32, 4.0, None),                                 # 4 converts right
])
def test_a_saturating_f4e2m1fn_convert_is_the_filed_bug(dtype, value, want):
    """XLA:CPU converts f4e2m1fn ±6 to an integer type's extremes (u32: 6 -> 4294967295,
    seen in a 60 s campaign); ±6 is representable and converts to ±6 by hand."""
    x = np.array([value]).astype(ml_dtypes.float4_e2m1fn)
    report = _localized("convert", [x], np.array([value]).astype(dtype),
                        np.array([np.iinfo(dtype).max]).astype(dtype))
    assert known_difference(report) == want


@pytest.mark.parametrize("op,values,want,between", [
    ("multiply", [6, 2, 7], "s4-arithmetic-does-not-wrap", "r"),  # 36, 4, 49 leave s4
    ("add", [3, -4, 2], None, "r"),                               # 6, -8, 4 stay inside
    ("add", [2, 4, 1], "s4-arithmetic-does-not-wrap", "b"),       # 8 wraps; a broadcast
])
def test_s4_arithmetic_that_wraps_before_a_widening_convert(op, values, want, between):
    """XLA:CPU's float-normalization-s4 keeps s4 sums and products unwrapped when they are
    converted to s8 (the stored add finding; a campaign found multiply, and, seed 71, an
    add read through a broadcast): a mismatch of a module whose s4 arithmetic leaves
    [-8, 7] (by hand) is that difference."""
    text = f"""HloModule m
ENTRY e {{
  p = s4[3] parameter(0)
  r = s4[3] {op}(p, p)
  b = s4[3] broadcast(r), dimensions={{0}}
  ROOT c = s8[3] convert({between})
}}
"""
    report = SimpleNamespace(verdict="mismatch", culprit=None)
    assert known_folding(report, text, [np.array(values).astype(ml_dtypes.int4)]) == want


def test_sub_byte_results_of_the_saturating_f4_convert_and_a_complex_zero_power():
    """A campaign (seed 23): f4e2m1fn 6 converts to s4 7 on XLA:CPU (6 fits in s4: by
    hand 6), the filed saturating convert; and power(0, 2.6 + 5.3i) is NaN on XLA:CPU where
    C99's cpow(0, z) = cexp(z clog 0) = cexp(-inf - inf i) = 0 for Re z > 0 (G.6.3.1)."""
    six = np.array([6.0]).astype(ml_dtypes.float4_e2m1fn)
    report = _localized("convert", [six], np.array([6]).astype(ml_dtypes.int4),
                        np.array([7]).astype(ml_dtypes.int4))
    assert known_difference(report) == "convert-f4e2m1fn-to-int-saturates"
    zero, z = np.array([0j]), np.array([2.647863932 + 5.331354864j])
    report = _localized("power", [zero, z], np.array([0j]), np.array([complex(np.nan, np.nan)]))
    assert known_difference(report) == "complex-special"
    report = _localized("power", [np.array([1 + 0j]), z], np.array([1 + 0j]),
                        np.array([complex(np.nan, np.nan)]))
    assert known_difference(report) is None


def _ulps_off(value: float, ulps: int) -> float:
    return float(np.float64(value) + ulps * np.spacing(abs(np.float64(value))))


def _mp(fn: str, x: float) -> float:
    """``fn(x)`` by mpmath at 100 digits, rounded to f64."""
    import mpmath
    with mpmath.workdps(100):
        return float(getattr(mpmath, fn)(x))


@pytest.mark.parametrize("x,ulps,dtype,want", [
    (-0.374664685, 15, np.float64, "log-plus-one-f64-band"),   # the stored finding
    (-0.374664685, 128, np.float64, "log-plus-one-f64-band"),  # the band's worst
    (-0.374664685, 400, np.float64, None),                     # more than the band's error
    (-0.2, 15, np.float64, None),                              # outside the band
])
def test_f64_log1p_in_xla_cpus_inaccurate_band_is_the_filed_bug(x, ulps, dtype, want):
    exact = _mp("log1p", x)
    report = _localized("log-plus-one", [np.array([x], dtype)], np.array([exact], dtype),
                        np.array([_ulps_off(exact, ulps)], dtype))
    assert known_difference(report) == want


@pytest.mark.parametrize("r,real_ulps,imag_off,want", [
    (0.7676435096355178, 103, 0.0, "log-plus-one-f64-band"),  # |z|² - 1 = -0.41 (campaign)
    (0.7676435096355178, 103, 1e-12, None),                   # the angle wrong too
    (0.5, 103, 0.0, None),                                    # |z|² - 1 = -0.75: not the band
])
def test_c128_log_inherits_the_band_in_its_real_part(r, real_ulps, imag_off, want):
    exact = _mp("log", r)  # log(-r + 0i) = log r + i pi
    z = np.array([-r + 0j])
    e = np.array([complex(exact, np.pi)])
    a = np.array([complex(_ulps_off(exact, real_ulps), np.pi + imag_off)])
    assert known_difference(_localized("log", [z], e, a)) == want


@pytest.mark.parametrize("t,op,x,want", [
    ("f64", "log-plus-one", -0.374664685, "log-plus-one-f64-band"),
    ("f64", "log-plus-one", -0.2, None),
    ("c128", "log", complex(-0.7676435096355178, 0), "log-plus-one-f64-band"),
    ("c128", "log-plus-one", complex(-0.231937134, -0.079277963), "log-plus-one-f64-band"),
])
def test_xla_cpu_really_is_off_in_the_log1p_band(t, op, x, want, xla):
    """XLA:CPU (jaxlib 0.10.2): f64 log-plus-one of -0.374664685 is 15 ULP from mpmath's
    (the stored finding), c128 log of -0.7676435 103 ULP off in its real part, c128
    log-plus-one of -0.2319 - 0.0793i (2 Re z + |z|^2 = -0.404, a campaign, seed 89) off
    in its real part; the campaign's check calls them known. Outside the band (-0.2) XLA
    agrees: a match."""
    text = (f"HloModule m\n\nENTRY e {{\n  p = {t}[1] parameter(0)\n"
            f"  ROOT r = {t}[1] {op}(p)\n}}\n")
    value = np.array([x], np.float64 if t == "f64" else np.complex128)
    outcome = xla(text, [value])
    if want is None:
        assert outcome.verdict == "match"
    else:
        assert outcome.verdict == "mismatch"
        assert outcome.kind == "known" and outcome.known == want


@pytest.mark.parametrize("z,real_ulps,imag_off,want", [
    (complex(-0.231937134, -0.079277963), 63, 0.0, "log-plus-one-f64-band"),  # arg -0.404
    (complex(-0.231937134, -0.079277963), 63, 1e-12, None),   # the angle wrong too
    (complex(-0.1, -0.079277963), 63, 0.0, None),             # arg -0.19: not the band
])
def test_c128_log_plus_one_inherits_the_band_in_its_real_part(z, real_ulps, imag_off, want):
    """log1p(z) = log|1 + z| + i arg(1 + z); its real part is log1p(2 Re z + |z|^2)/2, by
    hand; mpmath gives both parts."""
    import mpmath
    with mpmath.workdps(100):
        w = mpmath.log(1 + mpmath.mpc(z.real, z.imag))
    exact = complex(float(w.real), float(w.imag))
    e = np.array([exact])
    a = np.array([complex(_ulps_off(exact.real, real_ulps), exact.imag + imag_off)])
    report = _localized("log-plus-one", [np.array([z])], e, a)
    assert known_difference(report) == want


@pytest.mark.parametrize("x,actual,want", [
    (2.0 ** -128, np.nan, "ftz-f8e8m0fnu"),   # XLA:CPU's NaN (measured)
    (2.7e-200, np.nan, "ftz-f8e8m0fnu"),      # the seed-0 campaign's finding
    (2.0 ** -126, np.nan, None),              # 2^-126 itself is a value of f8e8m0fnu
    (2.0 ** -128, 2.0 ** -126, None),         # another wrong value, not the NaN
])
def test_a_tiny_f64_converted_to_nan_f8e8m0fnu_is_the_known_difference(x, actual, want):
    """f8e8m0fnu holds 2^-127 ... 2^127 and NaN, no zero: the nearest value to a positive
    f64 below 2^-127 is 2^-127 (by hand; hloref), XLA:CPU gives NaN."""
    import ml_dtypes
    e8 = ml_dtypes.float8_e8m0fnu
    expected = np.array([max(x, 2.0 ** -127)]).astype(e8)
    report = _localized("convert", [np.array([x])], expected, np.array([actual]).astype(e8))
    assert known_difference(report) == want


def test_xla_cpu_really_converts_tiny_f64_to_nan_f8e8m0fnu(xla):
    """Measured: f64 2^-128 and 2^-140 give NaN on XLA:CPU, 2^-127 stays; the campaign's
    check calls the program known."""
    text = ("HloModule m\n\nENTRY e {\n  p = f64[3] parameter(0)\n"
            "  ROOT c = f8e8m0fnu[3] convert(p)\n}\n")
    x = np.array([2.0 ** -127, 2.0 ** -128, 2.0 ** -140])
    outcome = xla(text, [x])
    got = np.asarray(outcome.report.actual).astype(np.float64)
    assert got[0] == 2.0 ** -127 and np.isnan(got[1:]).all()
    assert outcome.kind == "known" and outcome.known == "ftz-f8e8m0fnu"


def test_the_log1p_band_class_allows_rounding_elsewhere_in_the_array():
    """A campaign (seed 31): f64[2,4,3] log-plus-one, one element in the band 123 ULP off
    and others 1 ULP off outside it (XLA:CPU's ordinary rounding): still the filed class;
    an element outside the band 20 ULP off is not."""
    x = np.array([-0.4136, 0.5, -0.9, 2.0])
    exact = np.array([_mp("log1p", v) for v in x])
    off = np.array([123, 1, -1, 0])
    a = exact + off * np.spacing(np.abs(exact))
    report = _localized("log-plus-one", [x], exact, a)
    assert known_difference(report) == "log-plus-one-f64-band"
    a[3] = exact[3] + 20 * np.spacing(abs(exact[3]))
    assert known_difference(_localized("log-plus-one", [x], exact, a)) is None


@pytest.mark.parametrize("a,want", [
    (8.955381e-23, "complex-special"),  # a^2 = 8e-45: below f32's smallest normal
    (1e-10, None),                       # a^2 = 1e-20: a normal f32
])
def test_a_complex_formula_whose_squares_underflow_is_the_special_values_difference(a, want):
    """A campaign (seed 0): c64 atan2(z, z) with z = a(1 + i). XLA's expansion divides
    by sqrt(x^2 + y^2); for a = 8.955e-23 the squares are below f32's smallest normal
    (1.18e-38), FTZ makes them zero and XLA:CPU gives NaN, where hloref gives
    atan2 = pi/4 (by hand: z/z = 1, so the angle of (x + iy) with x = y is pi/4)."""
    z = np.array([a * (1 + 1j)], np.complex64)
    assert (float(z.real[0]) ** 2 < float(np.finfo(np.float32).tiny)) == (want is not None)
    expected = np.array([np.pi / 4 + 0j], np.complex64)
    actual = np.array([complex(np.nan, np.nan)], np.complex64)
    assert known_difference(_localized("atan2", [z, z], expected, actual)) == want


@pytest.mark.parametrize("y,x,actual,want", [
    (0j, -5.5758824 + 14.647746j, np.pi + 0j, "complex-special"),  # on the cut: either side
    (0j, 5.5758824 + 14.647746j, np.pi + 0j, None),                # Re x > 0: off the cut
    (1e-3 + 0j, -5.5758824 + 14.647746j, np.pi + 0j, None),        # y != 0: off the cut
    (0j, -5.5758824 + 14.647746j, 3.0 + 0j, None),                 # on it, but no side's value
])
def test_a_complex_atan2_exactly_on_its_branch_cut_may_take_either_side(y, x, actual, want):
    """A campaign (seed 41): c64 atan2(0, -5.58 + 14.65i). atan2(y, x) = -i log((x + iy)
    / sqrt(x^2 + y^2)); with y = 0 the quotient is x / sqrt(x^2) = -1 when Re x < 0 (the
    principal sqrt(x^2) is -x there), so the log sits on its cut and the result is +pi or
    -pi by the sign of a zero inside the expansion: hloref -pi, XLA:CPU +pi. Off the cut
    the same difference is not this class."""
    z = np.complex128(x)
    if want:
        assert np.isclose(z / np.sqrt(z * z), -1)
    expected = np.array([-np.pi + 0j], np.complex64)
    report = _localized("atan2", [np.array([y], np.complex64), np.array([x], np.complex64)],
                        expected, np.array([actual], np.complex64))
    assert known_difference(report) == want


_F4_ACOS_BITS = """HloModule m

ENTRY e {
  x = f4e2m1fn[4] parameter(0)
  a = f4e2m1fn[4] acos(x)
  ROOT b = s4[4] bitcast-convert(a)
}
"""


@pytest.mark.parametrize("values,want", [
    ([3.0, 0.0, 1.5, -1.5], "nan-sign-payload"),  # acos(3), acos(+-1.5): NaN into f4e2m1fn
    ([1.0, 0.0, 0.5, -0.5], None),                 # all in acos's domain
    (None, None),                                   # the operand's value unknown: no excuse
])
def test_a_nan_made_an_f4e2m1fn_zero_read_by_its_bits_is_the_nan_sign_gap(values, want):
    """A campaign (seed 0, the #14 benchmark): acos of f4e2m1fn 3 and +-1.5 is NaN, which
    f4e2m1fn cannot hold: it becomes a zero with a sign taken from the NaN's (ml_dtypes:
    +NaN -> -0, bits 0x8; -NaN -> +0, checked below), and a bitcast to s4 shows it (0
    in hloref, -8 on XLA:CPU at -O0). The NaN's sign is unspecified, so is the zero's."""
    from hloref import parse
    from hloref.fuzz.known_classes import known_gap
    nans = np.array([np.nan, -np.nan], np.float32).astype(ml_dtypes.float4_e2m1fn)
    assert nans.view(np.uint8).tolist() == [8, 0]
    known = {} if values is None else \
        {("e", "x"): np.array(values).astype(ml_dtypes.float4_e2m1fn)}
    assert known_gap(parse(_F4_ACOS_BITS), known) == want


@pytest.mark.parametrize("base,actual,want", [
    (-2 + 0j, -1j * np.sqrt(2), "complex-special"),  # on the cut: the other side's value
    (-2 + 0j, 1.0 + 0j, None),                        # on the cut, but neither side's
    (2 + 0j, -np.sqrt(2) + 0j, None),                 # off the cut
])
def test_a_complex_power_exactly_on_its_branch_cut_may_take_either_side(base, actual, want):
    """power(z, 1/2) at z = -2 + 0i: the principal value is i sqrt(2) (hloref, numpy),
    the other side of the negative real axis -i sqrt(2); a two-operand op whose cut is
    on its first operand (the table's entries see every operand)."""
    z = np.array([base], np.complex128)
    w = np.array([0.5 + 0j], np.complex128)
    expected = np.power(z, w)
    if want:
        assert np.isclose(expected[0], 1j * np.sqrt(2))
    report = _localized("power", [z, w], expected, np.array([actual], np.complex128))
    assert known_difference(report) == want


@pytest.mark.parametrize("ours,want", [
    (complex(-np.inf, np.inf), "complex-special"),  # z^z overflows: infinite parts
    (complex(-3.2e37, 1.1e38), None),               # a finite result XLA got wrong
])
def test_a_complex_power_whose_result_overflows_is_a_complex_special_value(ours, want):
    """z^z for z = 77.76 + 122.31i (a campaign, seed 71): z log z = 264.1 + 686.8i by
    hand, |z^z| = e^264 overflows c64 (e^88.7 at most), so hloref gives infinite parts
    (C99 G.6.3.1: cexp of a huge real part) and XLA:CPU NaN, the complex-special class;
    a finite result XLA gets wrong is not excused."""
    z = np.array([77.76276 + 122.3119j], np.complex64)
    report = _localized("power", [z, z], np.array([ours], np.complex64),
                        np.array([complex(np.nan, np.nan)], np.complex64))
    assert known_difference(report) == want


@pytest.mark.parametrize("init,want", [
    ("(0, 1)", "reduce-non-identity-init"),  # 1i: not add's identity
    ("(1, 0)", "reduce-non-identity-init"),
    ("(0, 0)", None),                        # 0: the identity
])
def test_a_complex_reduce_init_is_the_identity_only_if_both_parts_are_zero(init, want):
    """A c64 add-reduce whose init is 0 + 1i applies a value that is not the identity, so
    where XLA:CPU folds it in (once per partial accumulator) is implementation-defined:
    the documented gap. The check used to cast the init to a real float, which drops the
    imaginary part, and took 0 + 1i for 0 (a ComplexWarning in a campaign, seed 79)."""
    from hloref import parse
    from hloref.fuzz.known_classes import known_gap
    text = f"""HloModule m
add {{
  a = c64[] parameter(0)
  b = c64[] parameter(1)
  ROOT s = c64[] add(a, b)
}}
ENTRY e {{
  x = c64[4] parameter(0)
  z = c64[] constant({init})
  ROOT r = c64[] reduce(x, z), dimensions={{0}}, to_apply=add
}}
"""
    module = parse(text)
    x = np.array([1 + 2j, 3, 4j, -1], np.complex64)
    assert known_gap(module, {("e", "x"): x}) == want


def test_complex_special_and_overflow_classes_of_a_campaign_seed_79():
    """Three findings of a campaign (seed 79), each a catalogued class once seen whole:

    * atan2(y = 0, x = -0.478 - 0.325i) is on atan2's cut (y = 0, Re x < 0): pi in
      hloref, -pi - 1.2e-7i in XLA:CPU; the off-cut elements where XLA:CPU is 6e-8 from
      hloref's 0 (within 4 ULPs) no longer hide the class;
    * c128 z / (0 + 0i) with a constant divisor: by C99 Annex G (and XLA:CPU's divide of
      a zero parameter) an infinity; the simplifier's z * (1 / 0) gives NaN;
    * a convolution whose product (-1.7e37)(-9.1e35) overflows f32 to +inf beside an
      infinite operand element, where the exact sum is -inf: opposite infinities."""
    y = np.array([0j, 0j], np.complex64)
    x = np.array([-0.47823247 - 0.3247416j, 1.0058099 + 1.0600473j], np.complex64)
    report = _localized("atan2", [y, x], np.array([np.pi + 0j, 0j], np.complex64),
                        np.array([-np.pi - 1.1920928e-07j, 6.2852756e-08 + 0j], np.complex64))
    assert known_difference(report) == "complex-special"
    far = _localized("atan2", [y, x], np.array([np.pi + 0j, 0j], np.complex64),
                     np.array([-np.pi + 0j, 0.5 + 0j], np.complex64))
    assert known_difference(far) is None  # 0.5 off the cut is no cut effect

    text = """HloModule m
ENTRY e {
  p = c128[2] parameter(0)
  z = c128[] constant((0, 0))
  b = c128[2] broadcast(z), dimensions={}
  ROOT d = c128[2] divide(p, b)
}
"""
    num = np.array([-9.13 + 17.17j, 28.0 - 25.0j])
    inf = np.array([complex(-np.inf, np.inf), complex(np.inf, -np.inf)])
    nan = np.full(2, complex(np.nan, np.nan))
    report = SimpleNamespace(verdict="mismatch", culprit=None, expected=inf, actual=nan)
    assert known_folding(report, text, [num]) == "complex-special"
    finite = SimpleNamespace(verdict="mismatch", culprit=None, expected=inf,
                             actual=np.array([1 + 1j, 2 + 2j]))
    assert known_folding(finite, text, [num]) is None

    lhs = np.array([[-np.inf, 3.4028235e38, -1.6718064e37]], np.float32)
    rhs = np.full((3, 1), -9.108927e35, np.float32)
    report = _localized("dot", [lhs, rhs], np.array([[-np.inf]], np.float32),
                        np.array([[np.inf]], np.float32))
    assert known_difference(report) == "accumulation-overflow"


@pytest.mark.parametrize("count, want", [(1, "complex-special"), (2, None)])
def test_atan2_cut_beside_an_off_cut_element_the_verdict_keeps_inside(count, want):
    """A campaign (seed 83): c64 atan2(y, x) with y = (0, 1/64), x = (-23.92 + 8.82i,
    3.60 + 14.16i). Element 0 is on the cut (y = 0, Re x < 0: x / sqrt(x^2) = -1 by hand,
    so the angle is +-pi): pi in hloref, -pi + 6e-8i in XLA:CPU. Element 1 is off the cut,
    2.6e-4 - 1.0e-3i, where XLA:CPU's expansion is 4.7e-8 away: beyond 4 ULPs of its
    magnitude, inside the culprit's verdict (which counts 1 element outside). The class
    holds when the verdict's count is the flipped elements alone, not when it also
    counts the off-cut one."""
    y = np.array([0j, 0.015625 + 0j], np.complex64)
    x = np.array([-23.919586 + 8.822664j, 3.5968428 + 14.158512j], np.complex64)
    report = _localized("atan2", [y, x],
                        np.array([np.pi + 0j, 2.6335768e-04 - 1.036673e-03j], np.complex64),
                        np.array([-np.pi + 5.9604645e-08j, 2.6339520e-04 - 1.0367024e-03j],
                                 np.complex64))
    report.culprit.verdict = SimpleNamespace(count=count)
    assert known_difference(report) == want
