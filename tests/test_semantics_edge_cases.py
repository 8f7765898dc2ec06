"""Edge cases derived by hand from the semantics (HLO_SURFACE §3.3, §4, §6).

Each test asserts hloref's value against hand-derived values and then asks XLA:CPU:
``_xla_agrees`` asserts agreement; a recorded difference (KNOWN_DIFFERENCES) asserts
XLA's observed value instead, so a change in either side is noticed.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("jax")

from hlo_builders import (KNOWN_DIFFERENCES, all_bit_patterns, binary_module, module,  # noqa: E402
                          product_pairs, run_hloref, run_xla, unary_module)


def _bits(a):
    a = np.asarray(a)
    return a.view(f"u{a.dtype.itemsize}") if a.dtype.kind in "fcV" or a.dtype.itemsize in (2,) \
        and a.dtype.kind not in "iu" else a


def _check(text, args, want, *, xla_same=True):
    ours = run_hloref(text, *args)
    np.testing.assert_array_equal(_bits(ours), _bits(np.asarray(want, ours.dtype)))
    theirs = run_xla(text, *args)
    if xla_same:
        np.testing.assert_array_equal(_bits(theirs), _bits(ours))
    return ours, theirs


@pytest.mark.parametrize("t,lo,hi", [("s8", -128, 127), ("s32", -2**31, 2**31 - 1),
                                     ("s64", -2**63, 2**63 - 1)])
def test_signed_division_edge_cases(t, lo, hi):
    dt = np.dtype(t.replace("s", "int"))
    a = np.array([7, -7, lo, lo, 5, 0, 7, -7, lo], dt)
    b = np.array([0, 0, -1, 0, 0, 0, -2, 2, -1], dt)
    _check(binary_module("divide", t, a.shape), (a, b), [-1, -1, lo, -1, -1, -1, -3, -3, lo])
    _check(binary_module("remainder", t, a.shape), (a, b), [7, -7, 0, lo, 5, 0, 1, -1, 0])


def test_unsigned_division_by_zero():
    a = np.array([7, 0, 255], np.uint8)
    b = np.zeros(3, np.uint8)
    _check(binary_module("divide", "u8", a.shape), (a, b), [255, 255, 255])
    _check(binary_module("remainder", "u8", a.shape), (a, b), a)


def test_shifts_out_of_range_and_negative_amounts():
    a = np.array([1, -8, 100, -1, 3, -128], np.int8)
    n = np.array([8, 9, 127, -1, -128, 7], np.int8)
    _check(binary_module("shift-left", "s8", a.shape), (a, n), [0, 0, 0, 0, 0, 0])
    _check(binary_module("shift-right-logical", "s8", a.shape), (a, n), [0, 0, 0, 0, 0, 1])
    _check(binary_module("shift-right-arithmetic", "s8", a.shape), (a, n), [0, -1, 0, -1, 0, -1])
    u = np.array([1, 255, 128], np.uint8)
    k = np.array([8, 200, 7], np.uint8)
    _check(binary_module("shift-right-arithmetic", "u8", u.shape), (u, k), [0, 255, 255])


def test_integer_power_negative_exponents():
    b = np.array([2, -1, -1, 1, 0, -2, 3, 5], np.int32)
    e = np.array([-1, -3, -2, -5, -1, -1, 0, 2], np.int32)
    # negative exponent: 0 except base 1 (1) and base -1 (+-1 by parity); x^0 = 1
    _check(binary_module("power", "s32", b.shape), (b, e), [0, -1, 1, 1, 0, 0, 1, 25])


def test_integer_power_large_exponents_known_difference():
    assert any(d[0] == "power" for d in KNOWN_DIFFERENCES)
    b = np.array([0, 25, 3, 2, -1], np.int64)
    e = np.array([64, 455, 100, 70, 65], np.int64)
    want = [pow(int(x), int(y), 2**64) for x, y in zip(b, e)]
    want = [w - 2**64 if w >= 2**63 else w for w in want]
    ours, theirs = _check(binary_module("power", "s64", b.shape), (b, e), want, xla_same=False)
    # XLA:CPU only uses the exponent's low 6 bits
    xla_like = [pow(int(x), int(y) & 63, 2**64) for x, y in zip(b, e)]
    xla_like = [w - 2**64 if w >= 2**63 else w for w in xla_like]
    np.testing.assert_array_equal(theirs, np.array(xla_like, np.int64))


def test_float_to_int_convert_nan_saturation_truncation():
    x = np.array([np.nan, -np.nan, np.inf, -np.inf, 1e10, -1e10, 2.9, -2.9, 127.5, -128.9, 0.5],
                 np.float32)
    _check(unary_module("convert", "f32", x.shape, "s8"), (x,),
           [0, 0, 127, -128, 127, -128, 2, -2, 127, -128, 0])
    _check(unary_module("convert", "f32", x.shape, "u8"), (x,),
           [0, 0, 255, 0, 255, 0, 2, 0, 127, 0, 0])
    _check(unary_module("convert", "f32", x.shape, "s32"), (x,),
           [0, 0, 2**31 - 1, -2**31, 2**31 - 1, -2**31, 2, -2, 127, -128, 0])


@pytest.mark.parametrize("t,want", [
    # 1e10, -1e10, inf, -inf, nan, -0 (HLO_SURFACE §2.3), then 449 (above e4m3fn's 448)
    ("f8e5m2", [np.inf, -np.inf, np.inf, -np.inf, np.nan, -0.0]),
    ("f8e4m3fn", [np.nan, -np.nan, np.nan, -np.nan, np.nan, -0.0]),  # NaN keeps the sign
    ("f8e4m3fnuz", [np.nan, np.nan, np.nan, np.nan, np.nan, 0.0]),
    ("f4e2m1fn", [6.0, -6.0, 6.0, -6.0, -0.0, -0.0]),
])
def test_convert_to_narrow_float_overflow(t, want):
    x = np.array([1e10, -1e10, np.inf, -np.inf, np.nan, -0.0], np.float32)
    dt = getattr(ml_dtypes, {"f8e5m2": "float8_e5m2", "f8e4m3fn": "float8_e4m3fn",
                             "f8e4m3fnuz": "float8_e4m3fnuz", "f4e2m1fn": "float4_e2m1fn"}[t])
    ours = run_hloref(unary_module("convert", "f32", x.shape, t), x)
    expect = np.array(want, np.float32).astype(dt)
    np.testing.assert_array_equal(ours.view(np.uint8), expect.view(np.uint8))
    theirs = run_xla(unary_module("convert", "f32", x.shape, t), x)
    np.testing.assert_array_equal(theirs.view(np.uint8), ours.view(np.uint8))


def test_totalorder_nan_and_zeros():
    order = np.array([-np.nan, -np.inf, -1.0, -0.0, 0.0, 1.0, np.inf, np.nan], np.float32)
    order[0] = np.float32(np.nan) * -1 if not np.signbit(order[0]) else order[0]
    assert np.signbit(order[0]) and not np.signbit(order[7])
    x, y = product_pairs(order, order)
    text = binary_module("compare", "f32", x.shape, "pred", "direction=LT, type=TOTALORDER")
    i, j = np.meshgrid(range(8), range(8), indexing="ij")
    _check(text, (x, y), (i < j).ravel())
    text = binary_module("compare", "f32", x.shape, "pred", "direction=EQ, type=TOTALORDER")
    _check(text, (x, y), (i == j).ravel())


def test_totalorder_fnuz_nan_sorts_first():
    v = all_bit_patterns("f8e4m3fnuz")
    x, y = product_pairs(v, v)
    ours, _ = _check(binary_module("compare", "f8e4m3fnuz", x.shape, "pred",
                                   "direction=LT, type=TOTALORDER"), (x, y), None, xla_same=True) \
        if False else (None, None)
    text = binary_module("compare", "f8e4m3fnuz", x.shape, "pred", "direction=LT, type=TOTALORDER")
    ours = run_hloref(text, x, y).reshape(256, 256)
    assert ours[0x80].sum() == 255 and ours[:, 0x80].sum() == 0  # NaN below everything
    np.testing.assert_array_equal(run_xla(text, x, y).reshape(256, 256), ours)


def test_max_min_nan_and_signed_zeros():
    x = np.array([-0.0, 0.0, -0.0, np.nan, 1.0, np.nan], np.float32)
    y = np.array([0.0, -0.0, -0.0, 1.0, np.nan, np.nan], np.float32)
    _check(binary_module("maximum", "f32", x.shape), (x, y), [0.0, 0.0, -0.0, np.nan, np.nan, np.nan])
    _check(binary_module("minimum", "f32", x.shape), (x, y), [-0.0, -0.0, -0.0, np.nan, np.nan, np.nan])


def test_sign_and_rounding_ties():
    x = np.array([-0.0, 0.0, np.nan, -2.5, 2.5, 0.5, -0.5, 1.5, -3.0], np.float32)
    _check(unary_module("sign", "f32", x.shape), (x,), [-0.0, 0.0, np.nan, -1, 1, 1, -1, 1, -1])
    _check(unary_module("round-nearest-afz", "f32", x.shape), (x,),
           [-0.0, 0.0, np.nan, -3, 3, 1, -1, 2, -3])
    _check(unary_module("round-nearest-even", "f32", x.shape), (x,),
           [-0.0, 0.0, np.nan, -2, 2, 0, -0.0, 2, -3])


def test_popcnt_s4_known_difference():
    x = np.arange(-8, 8).astype(ml_dtypes.int4)
    text = unary_module("popcnt", "s4", x.shape)
    want = [bin(int(v) & 0xF).count("1") for v in x.tolist()]
    ours = run_hloref(text, x)
    assert [int(v) for v in ours.tolist()] == want
    theirs = run_xla(text, x)  # XLA:CPU counts the sign-extended byte (KNOWN_DIFFERENCES)
    want_xla = [bin(int(v) & 0xFF).count("1") for v in x.tolist()]
    assert [int(v) & 0xF for v in theirs.tolist()] == [w & 0xF for w in want_xla]


@pytest.mark.parametrize("t", ["s1", "u1"])
def test_one_bit_integers_by_hand(t):
    """The oracle refuses s1/u1: two's complement on one bit by hand."""
    dt = ml_dtypes.int1 if t == "s1" else ml_dtypes.uint1
    vals = [-1, 0] if t == "s1" else [0, 1]
    x, y = product_pairs(np.array(vals).astype(dt), np.array(vals).astype(dt))
    xi, yi = [int(v) for v in x.tolist()], [int(v) for v in y.tolist()]
    wrap = (lambda v: ((v + 1) % 2) - 1) if t == "s1" else (lambda v: v % 2)  # noqa: E731
    cases = {"add": [wrap(a + b) for a, b in zip(xi, yi)],
             "multiply": [wrap(a * b) for a, b in zip(xi, yi)],
             "xor": [wrap(a ^ b) for a, b in zip(xi, yi)],
             "maximum": [max(a, b) for a, b in zip(xi, yi)]}
    for opcode, want in cases.items():
        ours = run_hloref(binary_module(opcode, t, x.shape), x, y)
        assert [int(v) for v in ours.tolist()] == want, opcode
    ours = run_hloref(unary_module("negate", t, x.shape), x)
    assert [int(v) for v in ours.tolist()] == [wrap(-a) for a in xi]
    ours = run_hloref(unary_module("convert", t, x.shape, "s32"), x)
    assert ours.tolist() == xi
    text = module(f"  x = s32[4] parameter(0)\n  ROOT r = {t}[4] convert(x)")
    ours = run_hloref(text, np.array([0, 1, 2, 3], np.int32))
    assert [int(v) for v in ours.tolist()] == [wrap(v) for v in (0, 1, 2, 3)]


def _same_complex(x, y):
    """Equal part by part, signed zeros told apart, any NaN equal to any NaN."""
    for p, q in ((x.real, y.real), (x.imag, y.imag)):
        nan = np.isnan(p)
        np.testing.assert_array_equal(nan, np.isnan(q))
        np.testing.assert_array_equal(p[~nan], q[~nan])
        np.testing.assert_array_equal(np.signbit(p[~nan]), np.signbit(q[~nan]))


_INF, _NAN = np.inf, np.nan
# (dividend, divisor, quotient by C99 Annex G's _Cdivd, which XLA's EmitComplexDivide
# follows: the naive quotient where it is not NaN in both parts, else the recovery:
# zero divisor -> inf·copysign(1, re b)·a; infinite dividend over finite divisor ->
# inf·(a'·conj(b)) with a' the unit signs of a's infinite parts; finite over infinite ->
# 0·(a·conj(b')).)
_COMPLEX_DIVISION = [
    (1 + 1j, complex(_NAN, _INF), complex(0.0, -0.0)),
    (complex(_INF, 1), 1 + 1j, complex(_INF, -_INF)),
    (complex(_INF, _NAN), 1 + 1j, complex(_INF, -_INF)),
    (complex(_NAN, _INF), 1 + 1j, complex(_INF, _INF)),
    (complex(1, _INF), 1 + 1j, complex(_INF, _INF)),
    (complex(_INF, _INF), 1 + 1j, complex(_INF, _NAN)),   # Smith's quotient: not both NaN
    (1 + 1j, 0j, complex(_INF, _INF)),
    (complex(1, _NAN), 0j, complex(_INF, _NAN)),
    (complex(-_INF, 2), complex(0.0, -0.0), complex(-_INF, _INF)),
    (complex(1, _INF), complex(_INF, _INF), complex(_NAN, _NAN)),
    (1 + 2j, 3 + 4j, 0.44 + 0.08j),
]


@pytest.mark.parametrize("t,dt", [("c64", np.complex64), ("c128", np.complex128)])
def test_complex_division_special_values(t, dt):
    a = np.array([c[0] for c in _COMPLEX_DIVISION], dt)
    b = np.array([c[1] for c in _COMPLEX_DIVISION], dt)
    want = np.array([c[2] for c in _COMPLEX_DIVISION], dt)
    text = binary_module("divide", t, a.shape)
    ours = run_hloref(text, a, b)
    finite = np.isfinite(want.real) & np.isfinite(want.imag)
    np.testing.assert_allclose(ours[finite], want[finite], rtol=1e-6)
    _same_complex(ours[~finite], want[~finite])
    _same_complex(ours, run_xla(text, a, b))


def test_complex_expm1_log1p_with_infinite_parts():
    # expm1(inf + i) = exp(inf)(cos 1 + i sin 1) - 1 = (inf, inf); expm1(-inf + i) = -1 + 0i;
    # log1p(i·inf) = (inf, pi/2); an infinite imaginary part must not make the real NaN.
    z = np.array([complex(_INF, 1), complex(-_INF, 1), complex(_INF, -2), complex(0, 1e-8)],
                 np.complex64)
    ours = run_hloref(unary_module("exponential-minus-one", "c64", z.shape), z)
    _same_complex(ours[:3], np.array([complex(_INF, _INF), complex(-1, 0), complex(-_INF, -_INF)],
                                     np.complex64))
    _same_complex(ours, run_xla(unary_module("exponential-minus-one", "c64", z.shape), z))
    w = np.array([complex(0, _INF), complex(_INF, 1), complex(-_INF, 1)], np.complex64)
    ours = run_hloref(unary_module("log-plus-one", "c64", w.shape), w)
    np.testing.assert_allclose(ours.imag, [np.pi / 2, 0.0, np.pi], rtol=1e-7)
    assert np.all(np.isposinf(ours.real))
    _same_complex(ours, run_xla(unary_module("log-plus-one", "c64", w.shape), w))
