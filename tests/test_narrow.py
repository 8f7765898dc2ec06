"""Narrow-float conversion kernels (``hloref.evaluator.narrow``) against ml_dtypes.

The oracle is always ml_dtypes 0.6 (numpy for float16) or an exact rational /
round-to-odd reference built on top of it, never the kernels themselves.
"""

from __future__ import annotations

from bisect import bisect_left
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from hloref.evaluator import narrow as N
from hloref.evaluator.narrow import cast_float, decode, encode, from_float, to_f32, to_f64
from hloref.types import ARRAY_TYPES, element_type

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

NARROW = [t for t in ARRAY_TYPES if t.is_narrow_float]
IDS = [t.name for t in NARROW]
F16 = element_type("f16")
E8M0 = element_type("f8e8m0fnu")

U32 = np.uint32


def patterns(t) -> np.ndarray:
    n = 16 if t.name == "f4e2m1fn" else 1 << t.storage_bits
    return np.arange(n, dtype=np.uint64).astype(t.bits_dtype)


def ml_encode(x: np.ndarray, t) -> np.ndarray:
    """ml_dtypes' (numpy's for f16) cast, as bit patterns."""
    return np.asarray(x).astype(t.dtype).view(t.bits_dtype)


def f32(bits) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint64).astype(U32).view(np.float32)


def assert_same_bits(got, ref, t, src):
    """Bit-for-bit equality. For f16 NaN results only NaN-ness and sign are compared:
    numpy's float16 NaN payloads come from its software cast here but may come from
    hardware conversions (which quieten signalling NaNs) on other CPUs."""
    got = np.asarray(got)
    ref = np.asarray(ref)
    assert got.dtype == ref.dtype and got.shape == ref.shape
    bad = got != ref
    if t.name == "f16" and bad.any():
        gn = np.isnan(got.view(np.float16))
        rn = np.isnan(ref.view(np.float16))
        bad &= ~(gn & rn & ((got >> 15) == (ref >> 15)))
    if bad.any():
        idx = np.flatnonzero(bad)[:8]
        s = np.asarray(src).reshape(-1)
        sb = s.view(np.uint64 if s.dtype == np.float64 else U32)
        rows = [(hex(int(sb[i])), float(s[i]), hex(int(ref.reshape(-1)[i])),
                 hex(int(got.reshape(-1)[i]))) for i in idx]
        pytest.fail(f"{t.name}: {int(bad.sum())} mismatches (src bits, value, ref, got): {rows}")


# ---------------------------------------------------------------------------
# Decode
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("t", NARROW, ids=IDS)
def test_decode_every_pattern(t):
    bits = patterns(t)
    ref = bits.view(t.dtype).astype(np.float32).view(U32)
    got = decode(bits, t)
    assert got.dtype == np.float32
    assert_same_bits(got.view(U32), ref, element_type("f32"), bits)  # exact, NaN payloads too
    # Small calls run the kernel itself (16-bit types use a table for large arrays).
    small = np.concatenate([decode(bits[i:i + 1000], t) for i in range(0, bits.size, 1000)])
    np.testing.assert_array_equal(small.view(U32), ref)


@pytest.mark.parametrize("t", NARROW, ids=IDS)
def test_to_f32_to_f64_every_pattern(t):
    x = patterns(t).view(t.dtype)
    np.testing.assert_array_equal(to_f32(x).view(U32), x.astype(np.float32).view(U32))
    r64 = x.astype(np.float64)
    g64 = to_f64(x)
    assert g64.dtype == np.float64
    nan = np.isnan(r64)
    np.testing.assert_array_equal(np.isnan(g64), nan)
    np.testing.assert_array_equal(np.signbit(g64), np.signbit(r64))
    np.testing.assert_array_equal(g64[~nan].view(np.uint64), r64[~nan].view(np.uint64))


# ---------------------------------------------------------------------------
# Encode from float32
# ---------------------------------------------------------------------------

def _finite_values(t) -> np.ndarray:
    """Sorted distinct finite values of t (as float64, from ml_dtypes), -0 dropped."""
    v = patterns(t).view(t.dtype).astype(np.float64)
    v = v[np.isfinite(v)]
    return np.unique(v)


def _values_and_midpoints(t) -> np.ndarray:
    v = _finite_values(t)
    mids = (v[1:] + v[:-1]) / 2  # exact: narrow values have <= 12 significant bits
    pos = v[v > 0]
    top, below = pos[-1], pos[-2]
    extra = [top + (top - below) / 2, top + (top - below), 2 * top, top * 1.25,
             pos[0] / 2, pos[0] / 4, pos[0] * 0.75, pos[0] * 1.5]
    pts = np.concatenate([v, mids, extra, -np.asarray(extra)])
    pts = pts[np.abs(pts) < 3.4e38]
    x = pts.astype(np.float32)
    assert np.array_equal(x.astype(np.float64), pts)  # all exact in f32
    return x


def _neighbourhood(x: np.ndarray, k: int) -> np.ndarray:
    """Every f32 pattern within k ulps (same sign) of each element of x."""
    b = x.view(U32).astype(np.int64)
    off = np.arange(-k, k + 1, dtype=np.int64)
    nb = (b[:, None] + off[None, :]).reshape(-1)
    sign = b[:, None].repeat(off.size, 1).reshape(-1) & 0x80000000
    nb = nb[(nb & 0x80000000) == sign]  # don't wrap across the sign
    return nb.astype(U32).view(np.float32)


SPECIALS = f32([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001,
                0xFF800001, 0x7FBFFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 0x7FC00001, 0x7F802000,
                0x7F801FFF, 0x7F7FFFFF, 0xFF7FFFFF, 0x00800000, 0x80800000, 0x007FFFFF,
                0x00000001, 0x80000001, 0x00400000, 0x00400001, 0x3F800000, 0xBF800000])


@pytest.mark.parametrize("t", NARROW, ids=IDS)
def test_encode_f32_values_midpoints_and_neighbours(t):
    x = _values_and_midpoints(t)
    x = np.concatenate([_neighbourhood(x, 1), SPECIALS])
    got = encode(x, t)
    assert got.dtype == t.bits_dtype
    assert_same_bits(got, ml_encode(x, t), t, x)
    # via_f32 is the identity for f32 sources
    np.testing.assert_array_equal(encode(x, t, via_f32=True), got)


@pytest.mark.parametrize("t", NARROW, ids=IDS)
def test_encode_f32_boundary_classes(t):
    v = _finite_values(t)
    pos = v[v > 0]
    if t.float_format.mantissa_bits:
        min_normal = 2.0 ** (1 - t.float_format.bias)
    else:
        min_normal = pos[0]
    keys = np.array([pos[0], pos[0] / 2, pos[0] * 1.5, pos[1], min_normal,
                     min_normal - pos[0] / 2 if t.float_format.mantissa_bits else min_normal,
                     pos[-1], pos[-1] + (pos[-1] - pos[-2]) / 2, pos[-1] * 2, 1.0, 1.5, 3.0])
    keys = keys[keys < 3.4e38].astype(np.float32)
    keys = np.concatenate([keys, -keys])
    x = [_neighbourhood(keys, 2048)]
    # around 0, inf and the NaN range, both signs
    for base in (0, 0x7F800000 - (1 << 15), 0x7FFFFFFF - (1 << 15), 0x7FC00000 - (1 << 12)):
        r = np.arange(base, base + (1 << 16), dtype=np.uint64)
        x += [f32(r), f32(r | 0x80000000)]
    # a sample of all f32 subnormals (every 5th pattern), both signs
    sub = np.arange(1, 1 << 23, 5, dtype=np.uint64)
    x += [f32(sub), f32(sub | 0x80000000)]
    x = np.concatenate(x)
    assert_same_bits(encode(x, t), ml_encode(x, t), t, x)


@pytest.mark.parametrize("t", NARROW, ids=IDS)
def test_encode_f32_random_patterns(t):
    rng = np.random.default_rng(1000 + t.enum)
    x = rng.integers(0, 1 << 32, size=1 << 24, dtype=np.uint64).astype(U32).view(np.float32)
    assert_same_bits(encode(x, t), ml_encode(x, t), t, x)


def test_encode_f32_random_in_range_small_calls():
    """Values in each type's range, in small calls (serial kernel) and one large call."""
    rng = np.random.default_rng(7)
    for t in NARROW:
        top = float(_finite_values(t)[-1])
        x = (rng.standard_normal(1 << 16) * rng.choice([1e-3, 1, top / 4], 1 << 16)).astype(np.float32)
        ref = ml_encode(x, t)
        got = np.concatenate([encode(x[i:i + 4096], t) for i in range(0, x.size, 4096)])
        assert_same_bits(got, ref, t, x)


def test_encode_parallel_kernel_matches():
    """Arrays above PARALLEL_THRESHOLD go through the prange kernel (f32 and f64)."""
    rng = np.random.default_rng(8)
    x = rng.integers(0, 1 << 32, size=(N.PARALLEL_THRESHOLD or 1 << 20) + 3,
                     dtype=np.uint64).astype(U32).view(np.float32)
    for t in (element_type("bf16"), element_type("f8e4m3fn")):
        assert_same_bits(encode(x, t), ml_encode(x, t), t, x)
        x64 = x.astype(np.float64)
        assert_same_bits(encode(x64, t), ml_encode(x, t), t, x)


def test_documented_special_cases():
    """Spot values from HLO_SURFACE.md §2.3 and the module docstring (ml_dtypes' rules)."""
    def enc(name, vals):
        return [int(b) for b in encode(np.array(vals, np.float32), element_type(name))]

    vals = [1e10, -1e10, np.inf, -np.inf, np.nan, -0.0]
    assert enc("f8e5m2", vals) == [0x7C, 0xFC, 0x7C, 0xFC, 0x7E, 0x80]
    assert enc("f8e4m3fn", vals) == [0x7F, 0xFF, 0x7F, 0xFF, 0x7F, 0x80]
    for name in ("f8e4m3fnuz", "f8e5m2fnuz", "f8e4m3b11fnuz"):
        assert enc(name, vals + [-1e-30]) == [0x80] * 5 + [0x00, 0x00]
    assert enc("f4e2m1fn", vals + [-np.nan, 5.0, 5.5]) == [0x7, 0xF, 0x7, 0xF, 0x8, 0x8, 0x0, 0x6, 0x7]
    assert enc("f8e8m0fnu", vals + [0.0, 1.5, 3.0, 6.0, 1.4, 1e-45, 2.0 ** -127]) == \
        [0xA0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x80, 0x81, 0x82, 0x7F, 0x00, 0x00]
    assert enc("bf16", [np.nan, -np.nan]) == [0x7FC0, 0xFFC0]
    # f16 NaN payloads (numpy's software rule): truncated, kept non-zero, not quietened.
    assert [int(b) for b in encode(f32([0x7F800001, 0xFFFFFFFF, 0x7FC00001]), F16)] == \
        [0x7C01, 0xFFFF, 0x7E00]


# ---------------------------------------------------------------------------
# Encode from float64
# ---------------------------------------------------------------------------

def _f64_inputs(t, n_random: int, seed: int) -> np.ndarray:
    """Random f64 patterns, random values across t's exponent range, and f64 values a
    few f64 ulps (or a few f32 ulps' worth of tiny offsets) around t's values and
    midpoints, where rounding through f32 first changes the result."""
    rng = np.random.default_rng(seed)
    parts = [rng.integers(0, 1 << 63, size=n_random, dtype=np.uint64).view(np.float64)
             * rng.choice([1.0, -1.0], n_random)]
    fmt = t.float_format
    lo, hi = -fmt.bias - fmt.mantissa_bits - 3, (1 << fmt.exponent_bits) - fmt.bias + 2
    e = rng.integers(lo, hi, size=n_random)
    m = 1 + rng.random(n_random)
    parts.append(np.ldexp(m, e) * rng.choice([1.0, -1.0], n_random))
    base = _values_and_midpoints(t).astype(np.float64)
    base = base[base != 0]
    for rel in (2.0 ** -52, 2.0 ** -40, 2.0 ** -30, 2.0 ** -25, 2.0 ** -24):
        parts += [base * (1 + rel), base * (1 - rel), base * (1 + rel / 2), base * (1 - rel / 2)]
    parts.append(np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e300, -1e300,
                           5e-324, -5e-324, 2.0 ** -1022, 1.7976931348623157e308]))
    return np.concatenate(parts)


def _round_to_odd_f32(x: np.ndarray) -> np.ndarray:
    """f64 -> f32 rounding to odd. RNE(round_to_odd_24(x)) is the correctly rounded RNE
    result for any target with at most 22 significant bits (all narrow types)."""
    y = x.astype(np.float32)
    fin = np.isfinite(x)
    over = fin & (np.abs(y.astype(np.float64)) > np.abs(x))
    y[over] = np.nextafter(y[over], np.float32(0))
    inexact = fin & (y.astype(np.float64) != x)
    y.view(U32)[inexact] |= 1
    return y


def _e8m0_reference(x: np.ndarray) -> np.ndarray:
    """Direct f64 -> f8e8m0fnu with ml_dtypes' rule: 2**k*(1+f) -> 2**(k+1) iff f >= 1/2;
    <= 0, NaN and inf -> 0xFF; saturate below 2**-127; NaN above 2**127."""
    out = np.full(x.shape, 0xFF, np.int64)
    pos = (x > 0) & np.isfinite(x)
    m, e = np.frexp(x[pos])
    field = (e - 1) + (2 * m >= 1.5) + 127
    out[pos] = np.where(field > 254, 0xFF, np.maximum(field, 0))
    return out.astype(np.uint8)


def _direct_reference(x: np.ndarray, t) -> np.ndarray:
    if t.name == "f16":
        return ml_encode(x, t)  # numpy rounds f64 -> f16 directly
    if t.name == "f8e8m0fnu":
        return _e8m0_reference(x)
    return ml_encode(_round_to_odd_f32(x), t)


@pytest.mark.parametrize("t", NARROW, ids=IDS)
def test_encode_f64_via_f32_matches_ml_dtypes(t):
    x = _f64_inputs(t, 1 << 20, 2000 + t.enum)
    assert_same_bits(encode(x, t, via_f32=True), ml_encode(x, t), t, x)
    assert_same_bits(from_float(x, t, via_f32=True).view(t.bits_dtype), ml_encode(x, t), t, x)


@pytest.mark.parametrize("t", NARROW, ids=IDS)
def test_encode_f64_direct_is_correctly_rounded(t):
    x = _f64_inputs(t, 1 << 20, 3000 + t.enum)
    assert_same_bits(encode(x, t), _direct_reference(x, t), t, x)


def test_ml_dtypes_rounds_f64_through_f32():
    """The double rounding documented in the module docstring: every ml_dtypes type,
    not numpy's float16."""
    for t in NARROW:
        if t.name == "f8e8m0fnu":
            x, direct = 1.5 - 2.0 ** -40, 1.0
        else:
            m = t.float_format.mantissa_bits
            x, direct = 1 + 2.0 ** -(m + 1) + 2.0 ** -40, 1 + 2.0 ** -m
        ml = float(np.array([x]).astype(t.dtype).astype(np.float64)[0])
        ours = float(from_float(np.array([x]), t).astype(np.float64)[0])
        assert ours == direct, t
        assert (ml == direct) == (t.name == "f16"), t
        assert float(from_float(np.array([x]), t, via_f32=True).astype(np.float64)[0]) == ml


def _fraction_reference(x: float, t, table) -> int:
    """Nearest value of t by exact rational arithmetic (finite, non-NaN x)."""
    vals, bits, ovf_pos, ovf_neg = table
    fmt = t.float_format
    if fmt.nan_style == "e8m0" and not x > 0:
        return 0xFF
    neg = x < 0 or (x == 0 and np.signbit(x))
    a = abs(Fraction(x)) if np.isfinite(x) else None
    sign = (1 << (fmt.exponent_bits + fmt.mantissa_bits)) if (neg and fmt.signed) else 0
    ovf = ovf_neg if neg else ovf_pos
    if a is None:
        return ovf
    top = vals[-1]
    if a > top:
        # the step past max is max - previous (ieee/fn/fnuz/none); e8m0: next power of two
        nxt = top * 2 if fmt.nan_style == "e8m0" else 2 * top - vals[-2]
        mid = (top + nxt) / 2
        odd_max = bits[-1] & 1 or fmt.nan_style == "e8m0"
        if a > mid or (a == mid and odd_max):
            return ovf
        r = bits[-1]
    else:
        i = bisect_left(vals, a)
        if vals[i] == a:
            r = bits[i]
        elif i == 0:  # only e8m0 has no zero: saturate up to the smallest value
            r = bits[0]
        else:
            lo, hi = vals[i - 1], vals[i]
            if a - lo < hi - a:
                r = bits[i - 1]
            elif a - lo > hi - a:
                r = bits[i]
            elif fmt.nan_style == "e8m0":
                r = bits[i]  # ties up
            else:
                r = bits[i] if bits[i] % 2 == 0 else bits[i - 1]
    if r == 0 and fmt.nan_style == "fnuz":
        return 0
    return sign | r


def _fraction_table(t):
    p = patterns(t)
    v = p.view(t.dtype).astype(np.float64)
    sign_bit = 1 << (t.float_format.exponent_bits + t.float_format.mantissa_bits)
    keep = np.isfinite(v) & (v >= 0)
    if t.float_format.signed:
        keep &= (p.astype(np.int64) & sign_bit) == 0
    order = np.argsort(v[keep], kind="stable")
    vals = [Fraction(float(f)) for f in v[keep][order]]
    bits = [int(b) for b in p[keep][order]]
    ovf = ml_encode(np.array([np.inf, -np.inf], np.float32), t)
    return vals, bits, int(ovf[0]), int(ovf[1])


@pytest.mark.parametrize("t", NARROW, ids=IDS)
def test_encode_f64_fraction_reference_sample(t):
    rng = np.random.default_rng(4000 + t.enum)
    x = _f64_inputs(t, 600, 5000 + t.enum)
    x = x[~np.isnan(x)]
    x = rng.choice(x, size=min(3000, x.size), replace=False)
    table = _fraction_table(t)
    ref = np.array([_fraction_reference(float(v), t, table) for v in x], dtype=t.bits_dtype)
    assert_same_bits(encode(x, t), ref, t, x)
    # and the f32 path: for f32-exact inputs the rational reference equals ml_dtypes
    x32 = x.astype(np.float32)
    ok = np.isfinite(x32) & (x32.astype(np.float64) == x)
    if t.name == "f8e8m0fnu":  # ml_dtypes' f32-subnormal quirk (see module docstring)
        ok &= ~((np.abs(x) > 2.0 ** -127) & (np.abs(x) < 2.0 ** -126))
    assert_same_bits(ml_encode(x32[ok], t), ref[ok], t, x32[ok])


def test_e8m0_f32_subnormal_quirk():
    x = f32([0x00400000, 0x00400001, 0x00500000, 0x005FFFFF, 0x00600000, 0x007FFFFF, 0x1])
    ref = ml_encode(x, E8M0)
    assert [int(b) for b in ref] == [0, 1, 1, 1, 1, 1, 0]
    np.testing.assert_array_equal(encode(x, E8M0), ref)
    # f64 sources in (2**-127, 2**-126) use the regular rule
    y = np.array([2.0 ** -127 * 1.25, 2.0 ** -127 * 1.5])
    assert [int(b) for b in encode(y, E8M0)] == [0, 1]
    np.testing.assert_array_equal(encode(y, E8M0, via_f32=True), ml_encode(y, E8M0))


# ---------------------------------------------------------------------------
# Array wrappers: shapes, strides, empty arrays, cast_float
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("t", NARROW, ids=IDS)
def test_from_float_to_f32_shapes(t):
    rng = np.random.default_rng(9)
    base = (rng.standard_normal((4, 6, 10)) * 4).astype(np.float32)
    for x in (base, base[:, ::2, ::-3], base.transpose(2, 0, 1), base[1, 2, 3],
              np.zeros((0, 3), np.float32), np.zeros((2, 0, 4), np.float64),
              np.asfortranarray(base), base.astype(">f4")):
        y = from_float(x, t)
        assert y.dtype == t.dtype and y.shape == x.shape
        np.testing.assert_array_equal(y.view(t.bits_dtype), np.asarray(x).astype(t.dtype).view(t.bits_dtype))
        z = to_f32(y)
        assert z.dtype == np.float32 and z.shape == x.shape
        np.testing.assert_array_equal(z.view(U32), y.astype(np.float32).view(U32))
        # round trip of already-representable values is exact
        np.testing.assert_array_equal(from_float(z, t).view(t.bits_dtype), y.view(t.bits_dtype))
        w = to_f64(y[..., ::-1] if y.ndim else y)
        assert w.dtype == np.float64
        # decode of strided bit views
        bits = y.view(t.bits_dtype)
        d = decode(bits.T, t)
        np.testing.assert_array_equal(d.view(U32), y.T.astype(np.float32).view(U32))


def test_decode_large_strided_16bit():
    t = element_type("bf16")
    bits = np.arange(1 << 16, dtype=np.uint16).reshape(256, 256)[:, ::3]
    np.testing.assert_array_equal(decode(bits, t).view(U32),
                                  bits.view(t.dtype).astype(np.float32).view(U32))


@pytest.mark.parametrize("dst", NARROW + [element_type("f32"), element_type("f64")],
                         ids=IDS + ["f32", "f64"])
def test_cast_float_narrow_to_any(dst):
    for src in NARROW:
        x = patterns(src).view(src.dtype)
        y = cast_float(x, dst)
        assert y.dtype == dst.dtype
        ref = x.astype(np.float32).astype(dst.dtype)
        if dst.is_narrow_float:
            assert_same_bits(y.view(dst.bits_dtype), ref.view(dst.bits_dtype), dst,
                             x.astype(np.float32))
        else:
            nan = np.isnan(ref)
            np.testing.assert_array_equal(np.isnan(y), nan)
            np.testing.assert_array_equal(y[~nan], ref[~nan])


def test_cast_float_wide_sources():
    x = np.array([[1.0, 1 + 2.0 ** -8 + 2.0 ** -40], [np.nan, -3.75]])
    bf16 = element_type("bf16")
    assert cast_float(x, bf16)[0, 1] == ml_dtypes.bfloat16(1 + 2.0 ** -7)
    assert cast_float(x, bf16, via_f32=True)[0, 1] == ml_dtypes.bfloat16(1.0)
    np.testing.assert_array_equal(cast_float(x.astype(np.float32), element_type("f64")),
                                  x.astype(np.float32).astype(np.float64))
    assert cast_float(x[:0], bf16).shape == (0, 2)
