"""bitcast-convert, reduce-precision and stochastic-convert against XLA:CPU and by hand."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

pytest.importorskip("jax")
ml_dtypes = pytest.importorskip("ml_dtypes")

from hloref.api import evaluate  # noqa: E402
from hloref.errors import HloError  # noqa: E402
from hloref.fuzz.compare import Tolerance, compare_values  # noqa: E402
from hloref.fuzz.oracles.xla import run_hlo  # noqa: E402
from hloref.types import element_type  # noqa: E402

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                    suppress_health_check=list(HealthCheck))


def _random_bits(rng, et, shape):
    """Random elements of ``et`` drawn as uniformly random bit patterns."""
    if et.is_pred:
        return rng.integers(0, 2, shape).astype(bool)
    raw = rng.integers(0, 1 << min(et.bits, 63), shape, dtype=np.uint64)
    if et.bits == 64:
        raw |= rng.integers(0, 2, shape, dtype=np.uint64) << np.uint64(63)
    if et.bits < 8:
        return raw.astype(np.uint8).view(et.dtype)
    return raw.astype(et.bits_dtype).view(et.dtype)


# ---------------------------------------------------------------------------
# bitcast-convert
# ---------------------------------------------------------------------------

WIDTH_TYPES = ["s8", "u8", "s16", "f16", "bf16", "s32", "f32", "u32", "s64", "f64",
               "f8e4m3fn", "f8e5m2", "s4", "u4", "s2", "u2", "f4e2m1fn"]
PAIRS = [(a, b) for a, b in itertools.product(WIDTH_TYPES, WIDTH_TYPES)
         if max(element_type(a).bits, element_type(b).bits)
         % min(element_type(a).bits, element_type(b).bits) == 0]


def _bitcast_text(src, dst, dims):
    ib, ob = element_type(src).bits, element_type(dst).bits
    sdims = list(dims) + ([ob // ib] if ob > ib else [])
    ddims = list(dims) + ([ib // ob] if ib > ob else [])
    j = lambda d: ",".join(map(str, d))  # noqa: E731
    return (f"HloModule bc\nENTRY main {{\n  x = {src}[{j(sdims)}] parameter(0)\n"
            f"  ROOT r = {dst}[{j(ddims)}] bitcast-convert(x)\n}}\n"), tuple(sdims)


@pytest.mark.parametrize("src", WIDTH_TYPES)
def test_bitcast_convert_vs_xla(src):
    """Every destination width-compatible with ``src``, in one module (one compile)."""
    dsts = [b for a, b in PAIRS if a == src]
    rng = np.random.default_rng(WIDTH_TYPES.index(src))
    params, lines, args = [], [], []
    for i, dst in enumerate(dsts):
        text, sdims = _bitcast_text(src, dst, (3,))
        body = text.split("ENTRY main {\n")[1]
        p_line, r_line = body.splitlines()[:2]
        lines.append(p_line.replace(" x = ", f" x{i} = ").replace("parameter(0)", f"parameter({i})"))
        lines.append(r_line.replace("ROOT r = ", f"r{i} = ").replace("(x)", f"(x{i})"))
        params.append(r_line.split(" = ")[1].split(" bitcast")[0])
        args.append(_random_bits(rng, element_type(src), sdims))
    root = f"  ROOT t = ({', '.join(params)}) tuple({', '.join(f'r{i}' for i in range(len(dsts)))})"
    text = "HloModule bc\nENTRY main {\n" + "\n".join(lines) + "\n" + root + "\n}\n"
    xla = run_hlo(text, *args)
    ours = evaluate(text, *args)
    for dst, a, o in zip(dsts, xla, ours):
        # bit-exact, NaN payloads included (no arithmetic happens)
        et = element_type(dst)
        mask = (1 << et.bits) - 1
        np.testing.assert_array_equal(np.asarray(a).view(et.bits_dtype) & mask,
                                      o.view(et.bits_dtype) & mask, err_msg=f"{src}->{dst}")


def test_bitcast_convert_little_endian_by_hand():
    x = np.array(0x12345678, np.uint32)
    r = evaluate(_bitcast_text("u32", "u8", ())[0], x)
    np.testing.assert_array_equal(r, [0x78, 0x56, 0x34, 0x12])
    r = evaluate(_bitcast_text("u8", "u4", ())[0], np.array(0xAB, np.uint8))
    np.testing.assert_array_equal(r.astype(np.uint8), [0xB, 0xA])
    r = evaluate(_bitcast_text("s8", "s2", ())[0], np.array(0b11100100, np.uint8).view(np.int8))
    np.testing.assert_array_equal(r.astype(np.int8), [0, 1, -2, -1])
    r = evaluate(_bitcast_text("f32", "s32", ())[0], np.array(1.0, np.float32))
    assert r == 0x3F800000 and r.shape == ()
    r = evaluate(_bitcast_text("u8", "u32", ())[0], np.array([0x78, 0x56, 0x34, 0x12], np.uint8))
    assert r == 0x12345678 and r.shape == ()


@pytest.mark.parametrize("src,dst", [("c64", "f32"), ("c64", "s64"), ("f64", "c64")])
def test_bitcast_convert_complex_rejected(src, dst):
    text = (f"HloModule bc\nENTRY main {{\n  x = {src}[2] parameter(0)\n"
            f"  ROOT r = {dst}[2] bitcast-convert(x)\n}}\n")
    x = np.zeros(2, element_type(src).dtype)
    with pytest.raises(Exception):
        run_hlo(text, x)
    with pytest.raises(HloError):
        evaluate(text, x)


@pytest.mark.parametrize("t", ["c64", "c128"])
def test_bitcast_convert_complex_to_itself_vs_xla(t):
    # the one complex form XLA accepts (a campaign saw hloref refuse it)
    text = (f"HloModule bc\nENTRY main {{\n  x = {t}[3] parameter(0)\n"
            f"  ROOT r = {t}[3] bitcast-convert(x)\n}}\n")
    x = np.array([1 + 2j, -0.0 - 3.5j, np.nan + 1j], element_type(t).dtype)
    ours, theirs = evaluate(text, x), run_hlo(text, x)
    assert ours.tobytes() == x.tobytes() == theirs.tobytes()


@seed(11)
@SETTINGS
@given(shape=st.lists(st.integers(0, 3), max_size=3), vseed=st.integers(0, 2**16),
       pair=st.sampled_from([("s32", "f32"), ("f32", "u16"), ("u4", "s8"), ("f64", "s4"),
                             ("bf16", "f8e4m3fn"), ("u8", "f4e2m1fn"), ("s64", "bf16")]))
def test_bitcast_convert_shapes_vs_xla(shape, vseed, pair):
    src, dst = pair
    text, sdims = _bitcast_text(src, dst, shape)
    x = _random_bits(np.random.default_rng(vseed), element_type(src), sdims)
    xla, ours = run_hlo(text, x), evaluate(text, x)
    et = element_type(dst)
    mask = (1 << et.bits) - 1
    np.testing.assert_array_equal(np.asarray(xla).view(et.bits_dtype) & mask,
                                  ours.view(et.bits_dtype) & mask)


# ---------------------------------------------------------------------------
# reduce-precision
# ---------------------------------------------------------------------------

def _rp_text(ty, n, e, m):
    return (f"HloModule rp\nENTRY main {{\n  x = {ty}[{n}] parameter(0)\n"
            f"  ROOT r = {ty}[{n}] reduce-precision(x), exponent_bits={e}, mantissa_bits={m}\n}}\n")


def _rp_inputs(rng, dt, n=300):
    specials = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, 1.5, 2.5, 3.5, 65504.0,
                1e-5, 6e-8, 3e38, 1e-38, 1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -9]
    with np.errstate(over="ignore"):
        v = rng.standard_normal(n) * np.exp2(rng.integers(-40, 40, n))
        return np.concatenate([np.array(specials), v]).astype(dt)


def _rp_reference(x: np.ndarray, e: int, m: int) -> np.ndarray:
    """Exact reference from the definition, in Python floats (fractions of powers of 2):
    round |x| to m mantissa bits (RNE) in an unbounded exponent range, then +-inf above
    the largest reduced exponent, +-0 at or below the smallest (no subnormals)."""
    import math
    out = []
    emax = (1 << (e - 1)) - 1
    emin = 1 - emax
    for v in x.astype(np.float64):
        if math.isnan(v) or math.isinf(v) or v == 0:
            out.append(v)
            continue
        if e >= 8 and abs(v) < 2.0 ** -126:
            # exponent_bits >= f32's: no exponent step, so an f32 subnormal is rounded
            # on its own fixed grid (its bit pattern), not flushed
            quantum = 2.0 ** (-149 + max(23 - m, 0))
            out.append(math.copysign(round(abs(v) / quantum) * quantum, v))
            continue
        mant, ex = math.frexp(abs(v))  # |v| = mant * 2**ex, mant in [0.5, 1)
        scaled = mant * 2.0 ** (m + 1)
        r = round(scaled)  # Python rounds half to even, exact here
        q = math.ldexp(r, ex - m - 1)
        qm, qe = math.frexp(q)
        unbiased = qe - 1
        if e >= 8:
            pass  # no exponent step; overflow past f32's range is handled by the cast
        elif unbiased > emax:
            q = math.inf
        elif unbiased < emin:
            q = 0.0
        out.append(math.copysign(q, v))
    return np.array(out)


@seed(12)
@SETTINGS
@given(ty=st.sampled_from(["f32", "f64", "f16", "bf16", "f8e4m3fn", "f8e5m2"]),
       e=st.integers(1, 11), m=st.integers(0, 52), vseed=st.integers(0, 2**16))
def test_reduce_precision_vs_xla(ty, e, m, vseed):
    et = element_type(ty)
    x = _rp_inputs(np.random.default_rng(vseed), et.dtype)
    text = _rp_text(ty, x.size, e, m)
    xla, ours = run_hlo(text, x), evaluate(text, x)
    # exact except that XLA:CPU flushes subnormals (compare's ftz rule) and NaN payloads
    verdict = compare_values(xla, ours, tolerance=Tolerance(0, 0.0, True))
    assert verdict.ok, f"{ty} e={e} m={m}: {verdict}"


@pytest.mark.parametrize("e,m", [(1, 0), (2, 1), (3, 2), (4, 3), (5, 2), (5, 10), (8, 7),
                                 (6, 4), (8, 0), (7, 22)])
def test_reduce_precision_f32_exact_reference(e, m):
    rng = np.random.default_rng(e * 100 + m)
    x = _rp_inputs(rng, np.float32, 2000)
    ours = evaluate(_rp_text("f32", x.size, e, m), x)
    with np.errstate(over="ignore"):
        want = _rp_reference(x, e, m).astype(np.float32)
    nan = np.isnan(x)
    np.testing.assert_array_equal(np.isnan(ours), nan)
    np.testing.assert_array_equal(ours[~nan].view(np.uint32), want[~nan].view(np.uint32))
    # NaN inputs come back unchanged, payload and sign included
    np.testing.assert_array_equal(ours[nan].view(np.uint32), x[nan].view(np.uint32))


def test_reduce_precision_noop_at_full_width():
    rng = np.random.default_rng(3)
    for ty, e, m in [("f32", 8, 23), ("f32", 11, 52), ("f64", 11, 52), ("bf16", 8, 7),
                     ("f16", 5, 10), ("f16", 8, 23)]:
        x = _rp_inputs(rng, element_type(ty).dtype)
        ours = evaluate(_rp_text(ty, x.size, e, m), x)
        np.testing.assert_array_equal(ours.view(f"u{x.dtype.itemsize}"),
                                      x.view(f"u{x.dtype.itemsize}"))


# ---------------------------------------------------------------------------
# stochastic-convert
# ---------------------------------------------------------------------------

def _sc_text(src, dst, n):
    ub = element_type(src).bits
    return (f"HloModule sc\nENTRY main {{\n  x = {src}[{n}] parameter(0)\n"
            f"  r = u{ub}[{n}] parameter(1)\n"
            f"  ROOT c = {dst}[{n}] stochastic-convert(x, r)\n}}\n")


def _sc_reference(x, r, dst):
    """By hand from HloEvaluator's StochasticConvertOp, with Python integers."""
    import math
    et = element_type(dst)
    lo, hi = et.min_value, et.max_value
    src_dt = x.dtype
    with np.errstate(over="ignore"):
        f_lo = float(np.asarray(float(lo)).astype(src_dt).astype(np.float64))
        f_hi = float(np.asarray(float(hi)).astype(src_dt).astype(np.float64))
    width = x.dtype.itemsize * 8
    out = []
    for v, rr in zip(x.astype(np.float64), r.astype(object)):
        if math.isnan(v):
            out.append(0)
        elif v >= f_hi:
            out.append(hi)
        elif v <= f_lo:
            out.append(lo)
        else:
            a = abs(v)
            t = math.floor(a)
            fixed = math.floor(math.ldexp(a - t, width))
            if int(rr) < fixed:
                t += 1
            out.append(-t if math.copysign(1, v) < 0 else t)
    return np.array(out, dtype=et.dtype)


@seed(13)
@SETTINGS
@given(src=st.sampled_from(["f32", "f16", "bf16", "f64"]),
       dst=st.sampled_from(["s8", "s16", "s32", "s64"]), vseed=st.integers(0, 2**16))
def test_stochastic_convert_vs_xla_and_hand(src, dst, vseed):
    rng = np.random.default_rng(vseed)
    et = element_type(src)
    n = 64
    scale = {"s8": 200.0, "s16": 40000.0, "s32": 3e9, "s64": 1e19}[dst]
    v = rng.uniform(-scale, scale, n)
    v[:16] = rng.uniform(-4, 4, 16)
    v[16:24] = [np.nan, np.inf, -np.inf, -0.0, 0.5, -0.5, 127.5, -128.5]
    with np.errstate(over="ignore"):
        x = v.astype(et.dtype) if src in ("f32", "f64") else v.astype(np.float32).astype(et.dtype)
    r = rng.integers(0, 1 << min(et.bits, 63), n, dtype=np.uint64)
    r[:4] = [0, 1, (1 << et.bits) - 1, 1 << (et.bits - 1)]
    r = r.astype(np.dtype(f"u{et.bits // 8}"))
    text = _sc_text(src, dst, n)
    ours = evaluate(text, x, r)
    np.testing.assert_array_equal(ours, _sc_reference(x, r, dst))
    if src == "f64" and dst == "s64":
        return  # XLA:CPU's decomposition converts frac*2**64 via f64 -> u64 the same way
    xla = run_hlo(text, x, r)
    np.testing.assert_array_equal(xla, ours)


def test_stochastic_convert_by_hand():
    x = np.array([1.5, -1.5, 2.25, 2.25, np.nan, np.inf, -3e9, 0.75], np.float32)
    r = np.array([0x7FFFFFFF, 0x80000000, 0x3FFFFFFF, 0x40000000, 0, 0, 0, 0xC0000000 - 1],
                 np.uint32)
    ours = evaluate(_sc_text("f32", "s32", 8), x, r)
    np.testing.assert_array_equal(ours, [2, -1, 3, 2, 0, 2**31 - 1, -2**31, 1])
