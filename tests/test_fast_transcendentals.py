"""The fast paths of the transcendentals give the reference rule's bits.

The rule (``docs/semantics.md``): a transcendental of f32 or a narrower float is the
f64 function (the host libm, through numpy) of the exactly widened operand, rounded
once to nearest even into the type. The oracle here computes exactly that with numpy
and ml_dtypes, independently of hloref's code: numpy's f64 ``sin``/``cos``/..., and a
rounding to the narrow type that picks, among the candidates next to ml_dtypes'
conversion, the nearest by exact f64 distance (ties to the even pattern).

``evaluator/trig_f32.py`` (f32 ``sine``/``cosine``) is checked on random bit patterns,
normal magnitudes, arguments next to multiples of π/2 and the special values, with
the elements it leaves to the libm present; ``evaluator/exp_log_f32.py`` (f32
``exponential``, ``exponential-minus-one``, ``log``, ``log-plus-one``, ``logistic``,
``tanh``) on random bit patterns, values across each op's domain, the ends of the
kernels' domains and the special values; ``evaluator/rsqrt_f32.py`` bit for bit, NaNs
included; ``evaluator/unary_tables.py`` (8- and 16-bit floats) on every bit pattern of
each type, through ``hloref.evaluate``. ``benchmarks/verify_trig_f32.py`` checks all
2**32 f32 inputs of the f32 kernels, and of f32 ``sqrt`` (f32's own square root: the
same bits as the rounded f64 one).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import hloref
from hloref.evaluator.trig_f32 import GUARD, REDUCE_LIMIT, approx_f64

OPS = {"sine": np.sin, "cosine": np.cos, "exponential": np.exp, "tanh": np.tanh,
       "log": np.log, "sqrt": np.sqrt}


def _module(opcode: str, ty: str, n: int) -> str:
    return f"""HloModule m
ENTRY e {{
  x = {ty}[{n}] parameter(0)
  ROOT r = {ty}[{n}] {opcode}(x)
}}"""


def _evaluate(opcode: str, ty: str, x: np.ndarray) -> np.ndarray:
    return np.asarray(hloref.evaluate(_module(opcode, ty, x.size), x))


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    nan = np.isnan(want.astype(np.float64))
    assert np.array_equal(np.isnan(got.astype(np.float64)), nan)
    u = f"u{want.dtype.itemsize}"
    bad = np.nonzero(got.view(u)[~nan] != want.view(u)[~nan])[0]
    assert bad.size == 0, f"{bad.size} results differ, first at {np.nonzero(~nan)[0][bad[0]]}"


def _f32_inputs() -> np.ndarray:
    rng = np.random.default_rng(32)
    bits = rng.integers(0, 1 << 32, 1 << 21, dtype=np.uint64).astype(np.uint32).view(np.float32)
    normal = rng.standard_normal(1 << 20).astype(np.float32)
    k = np.arange(-200_000, 200_000, dtype=np.float64)
    near_axes = (k * (np.pi / 2)).astype(np.float32)  # the f32 closest to k·π/2
    steps = np.concatenate([np.nextafter(near_axes, np.float32(np.inf)),
                            np.nextafter(near_axes, np.float32(-np.inf))])
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.1754942e-38,
                        REDUCE_LIMIT, np.nextafter(np.float32(REDUCE_LIMIT), np.float32(np.inf)),
                        3.4028235e38, -3.4028235e38], np.float32)
    return np.concatenate([bits, normal, normal * 1e4, near_axes, steps, special])


@pytest.mark.parametrize("opcode", ["sine", "cosine"])
def test_f32_sine_cosine_are_the_rounded_f64_libm_value(opcode):
    x = _f32_inputs()
    with np.errstate(all="ignore"):
        want = OPS[opcode](x.astype(np.float64)).astype(np.float32)
    # the inputs include elements the kernel leaves to the libm (near an f32 midpoint)
    approx = np.empty(x.size, np.float64)
    approx_f64(x, approx, 0 if opcode == "sine" else 1)
    low = approx.view(np.int64) & ((1 << 29) - 1)
    near_midpoint = np.abs(low - (1 << 28)) <= GUARD
    assert np.count_nonzero(near_midpoint & (np.abs(x) <= REDUCE_LIMIT)) >= 1
    _same_bits(_evaluate(opcode, "f32", x), want)
    # small arrays (one thread) and a strided operand
    _same_bits(_evaluate(opcode, "f32", x[:5]), want[:5])
    _same_bits(_evaluate(opcode, "f32", x[::3].copy()), want[::3])


def _round_to(values: np.ndarray, dtype) -> np.ndarray:
    """f64 ``values`` rounded once to nearest (ties to even) in the narrow ``dtype``: the
    nearest of ml_dtypes' conversion and its two neighbours, by exact f64 distance."""
    u = np.dtype(dtype).itemsize == 2 and np.uint16 or np.uint8
    first = values.astype(dtype)
    base = first.view(u).astype(np.int64)
    cands = [np.clip(base + d, 0, np.iinfo(u).max).astype(u) for d in (-1, 0, 1)]
    best = first.copy()
    with np.errstate(all="ignore"):
        finite = np.isfinite(first.astype(np.float64))  # overflow: ml_dtypes' inf or NaN
        best_err = np.abs(first.astype(np.float64) - values)
        for c in cands:
            cv = c.view(dtype)
            err = np.abs(cv.astype(np.float64) - values)
            better = (err < best_err) | ((err == best_err) & (c % 2 == 0) &
                                         (best.view(u) % 2 == 1))
            sign_ok = np.signbit(cv.astype(np.float64)) == np.signbit(values)
            take = better & sign_ok & np.isfinite(err) & finite
            best = np.where(take, cv, best)
            best_err = np.where(take, err, best_err)
    return best


@pytest.mark.parametrize("ty, dtype", [("bf16", ml_dtypes.bfloat16), ("f16", np.float16),
                                       ("f8e4m3fn", ml_dtypes.float8_e4m3fn),
                                       ("f8e5m2", ml_dtypes.float8_e5m2)])
@pytest.mark.parametrize("opcode", sorted(OPS))
def test_narrow_transcendentals_by_table_are_the_rounded_f64_value(ty, dtype, opcode):
    bits = 16 if np.dtype(dtype).itemsize == 2 else 8
    u = np.uint16 if bits == 16 else np.uint8
    patterns = np.arange(1 << bits, dtype=np.uint32).astype(u)
    x = np.tile(patterns, max(1, 8192 >> bits)).view(dtype)  # large enough for the table
    with np.errstate(all="ignore"):
        wide = OPS[opcode](x.astype(np.float64))
    want = _round_to(wide, dtype)
    _same_bits(_evaluate(opcode, ty, x), want)
    _same_bits(_evaluate(opcode, ty, x[:7]), want[:7])  # small: the table once built


def test_f32_sqrt_is_the_rounded_f64_square_root_bit_for_bit():
    """f32's own square root (the fast path) against the f64 one rounded, every bit of
    every result compared, NaNs (and their payloads and signs) included."""
    rng = np.random.default_rng(7)
    bits = np.concatenate([rng.integers(0, 1 << 32, 1 << 21, dtype=np.uint64).astype(np.uint32),
                           np.array([0x7F800001, 0xFF800001, 0x7FC00001, 0xFFFFFFFF, 0x80000000,
                                     0x00000001, 0x807FFFFF, 0x7F7FFFFF], np.uint32)])
    x = bits.view(np.float32)
    with np.errstate(all="ignore"):
        want = np.sqrt(x.astype(np.float64)).astype(np.float32)
    got = _evaluate("sqrt", "f32", x)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def _logistic64(x: np.ndarray) -> np.ndarray:
    """``logistic`` as hloref defines it in f64: 1 / (1 + exp(-x)), written with
    e = exp(-|x|) as 1/(1 + e) for x >= 0 and e/(1 + e) below (no overflow)."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


#: opcode -> (the f64 function of the rule, inputs in its domain from N(0, 1) values)
GUARDED = {"exponential": (np.exp, lambda v: v * 30),
           "exponential-minus-one": (np.expm1, lambda v: v * 30),
           "log": (np.log, lambda v: np.abs(v) * 1e3),
           "log-plus-one": (np.log1p, lambda v: np.abs(v) * 3 - 0.999),
           "logistic": (_logistic64, lambda v: v * 30),
           "tanh": (np.tanh, lambda v: v * 5)}


@pytest.mark.parametrize("opcode", sorted(GUARDED))
def test_f32_exp_log_family_is_the_rounded_f64_value(opcode):
    """``evaluator/exp_log_f32.py``'s kernels: random bit patterns, values in each op's
    domain, the ends of the domains and the special values, bit for bit (NaN payloads
    too); among them elements the kernel leaves to the reference (f64 value near an
    f32 midpoint, tiny results, outside the domain)."""
    fn, spread = GUARDED[opcode]
    rng = np.random.default_rng(64)
    bits = rng.integers(0, 1 << 32, 1 << 21, dtype=np.uint64).astype(np.uint32).view(np.float32)
    inside = spread(rng.standard_normal(1 << 21)).astype(np.float32)
    ends = np.array([700, -700, 350, -350, 88.72, -87.34, -103.9, -104, 1, -1, 0.5, 2],
                    np.float32)
    special = np.array([0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001,
                        0x7F800001, 0x00000001, 0x807FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF,
                        0xBF7FFFFF, 0x3F800001, 0x33800000, 0xB3800000], np.uint32)
    steps = np.concatenate([np.nextafter(ends, np.float32(np.inf)),
                            np.nextafter(ends, np.float32(-np.inf))])
    x = np.concatenate([bits, inside, ends, steps, special.view(np.float32)])
    with np.errstate(all="ignore"):
        wide = fn(x.astype(np.float64))
        want = wide.astype(np.float32)
    low = wide.view(np.int64) & ((1 << 29) - 1)
    in_domain = np.isfinite(wide) & (np.abs(wide) >= np.finfo(np.float32).tiny)
    assert np.count_nonzero((np.abs(low - (1 << 28)) <= 64) & in_domain) >= 1
    got = _evaluate(opcode, "f32", x)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    # small arrays (one thread) and a strided operand
    assert np.array_equal(_evaluate(opcode, "f32", x[-40:]).view(np.uint32),
                          want[-40:].view(np.uint32))
    assert np.array_equal(_evaluate(opcode, "f32", x[::3].copy()).view(np.uint32),
                          want[::3].view(np.uint32))


def test_f32_rsqrt_is_one_over_the_f64_square_root_rounded_bit_for_bit():
    """``evaluator/rsqrt_f32.py``: 1 / sqrt of the widened value in f64, rounded once,
    every bit of every result compared (NaNs from negative operands and NaN operands,
    infinities from zeros included)."""
    rng = np.random.default_rng(9)
    bits = np.concatenate([rng.integers(0, 1 << 32, 1 << 21, dtype=np.uint64).astype(np.uint32),
                           np.array([0x7F800001, 0xFF800001, 0x7FC00001, 0xFFFFFFFF, 0x80000000,
                                     0x00000000, 0x00000001, 0x807FFFFF, 0x7F7FFFFF,
                                     0x7F800000, 0xFF800000, 0xBF800000], np.uint32)])
    x = bits.view(np.float32)
    with np.errstate(all="ignore"):
        want = (1.0 / np.sqrt(x.astype(np.float64))).astype(np.float32)
    assert np.array_equal(_evaluate("rsqrt", "f32", x).view(np.uint32), want.view(np.uint32))
    assert np.array_equal(_evaluate("rsqrt", "f32", x[:9]).view(np.uint32),
                          want[:9].view(np.uint32))
