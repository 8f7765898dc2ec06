"""rng-bit-generator and rng-get-and-update-state on the GPU backend (fallback disabled):
bit-exact with the cpu backend and with XLA:CPU, for every algorithm, state size, result
width and split dimension; counters that wrap."""

from __future__ import annotations

import numpy as np
import pytest

import hloref

from gpu_check import check

#: (algorithm, state words)
ALGORITHMS = [("rng_philox", 2), ("rng_philox", 3), ("rng_default", 2), ("rng_three_fry", 2)]
#: result element types and dimensions (an odd split dimension, an even one, a scalar)
RESULTS = [("u32", "[7]"), ("u64", "[5]"), ("s32", "[3,5]"), ("f32", "[2,3,4]"), ("u8", "[9]"),
           ("bf16", "[3,2]"), ("f64", "[3]"), ("s16", "[]"), ("s64", "[2,2]"),
           ("f8e4m3fn", "[5,3]")]
STATES = [[0x1234_5678_9ABC_DEF0, 7, 1], [3, 2 ** 64 - 3, 2 ** 64 - 1]]  # the second wraps


def rbg_module(alg, k, t, dims):
    return ("HloModule r\nENTRY e {\n  s = u64[%d] parameter(0)\n"
            "  ROOT r = (u64[%d], %s%s) rng-bit-generator(s), algorithm=%s\n}\n"
            % (k, k, t, dims, alg))


@pytest.mark.parametrize("alg,k", ALGORITHMS)
def test_rng_bit_generator(alg, k):
    for t, dims in RESULTS:
        for st in STATES:
            state = np.array(st[:k], np.uint64)
            check(rbg_module(alg, k, t, dims), state, xla="required")


def test_rng_bit_generator_bits_only_and_chained():
    # a result declared as the bits alone; two generators chained through the state
    text = ("HloModule r\nENTRY e {\n  s = u64[2] parameter(0)\n"
            "  ROOT r = u32[6] rng-bit-generator(s), algorithm=rng_three_fry\n}\n")
    check(text, np.array([5, 9], np.uint64), xla="required")
    chained = """HloModule c
ENTRY e {
  s = u64[3] parameter(0)
  a = (u64[3], u32[10]) rng-bit-generator(s), algorithm=rng_philox
  st2 = u64[3] get-tuple-element(a), index=0
  b = (u64[3], u32[10]) rng-bit-generator(st2), algorithm=rng_philox
  x = u32[10] get-tuple-element(a), index=1
  y = u32[10] get-tuple-element(b), index=1
  ROOT t = (u32[10], u32[10], u64[3]) tuple(x, y, st2)
}
"""
    out = check(chained, np.array([1, 2 ** 64 - 1, 0], np.uint64), xla="required")
    # 10 words use 3 counters: the low counter word wraps and carries into the high one
    assert out[2].tolist() == [1, 2, 1]


def test_rng_get_and_update_state():
    text = ("HloModule g\nENTRY e {\n  ROOT r = u64[2] rng-get-and-update-state(), delta=5\n}\n")
    out = hloref.evaluate(text, backend="gpu", fallback=False)
    assert out.tolist() == [0x7012395, 0]  # XLA:CPU's initial state


# ----------------------------------------------------------------- rng (hloref's own stream)
# Not comparable with XLA (its rng is its own generator): bit-exact with the cpu backend,
# and values derived by hand from evaluator/rng.py's written stream.

RNG_OP = """HloModule r
ENTRY e {{
  a = {t}[] constant({lo})
  b = {t}[] constant({hi})
  r1 = {t}[37] rng(a, b), distribution={d}
  r2 = {t}[2,3] rng(a, b), distribution={d}
  ROOT t = ({t}[37], {t}[2,3]) tuple(r1, r2)
}}
"""

#: (type, distribution, a, b): u64 [0, 2^63 + 1) rejects about half its draws, bf16
#: [1, 1 + 2^-7) rounds most values up to b (redrawn)
RNG_CASES = [
    ("s32", "rng_uniform", "-5", "1000000007"),
    ("u8", "rng_uniform", "3", "200"),
    ("u64", "rng_uniform", "0", str(2 ** 63 + 1)),
    ("s64", "rng_uniform", str(-2 ** 63), str(2 ** 63 - 1)),
    ("s16", "rng_uniform", "5", "5"),
    ("f32", "rng_uniform", "-1", "3"),
    ("bf16", "rng_uniform", "1", "1.0078125"),
    ("f64", "rng_uniform", "2", "2"),
    ("f32", "rng_normal", "1", "2"),
    ("f16", "rng_normal", "0", "1"),
]


def _stream_values(n, counter=0):
    """Values ``counter*2 ...`` of the stream as the docstring says: 64-bit draws, the
    Philox words (0, 1) and (2, 3) of each counter, low word first."""
    from hloref.evaluator.rng import RNG_KEY, philox4x32
    nv = (n + 1) // 2
    words = philox4x32(np.arange(counter, counter + nv, dtype=np.uint64),
                       np.zeros(nv, np.uint64), RNG_KEY).astype(np.uint64)
    return (words[:, 0::2] | (words[:, 1::2] << np.uint64(32))).reshape(-1)[:n]


@pytest.mark.parametrize("t,d,lo,hi", RNG_CASES)
def test_rng(t, d, lo, hi):
    out = check(RNG_OP.format(t=t, d=d, lo=lo, hi=hi), xla=False)
    for v in out:
        w = v.astype(np.float64) if d == "rng_uniform" and t[0] in "fb" else v
        if d == "rng_uniform":
            lo_v, hi_v = (type(w.reshape(-1)[0])(lo), type(w.reshape(-1)[0])(hi))
            assert np.all(w == lo_v) if not lo_v < hi_v else np.all((lo_v <= w) & (w < hi_v))
    if (t, d) == ("s32", "rng_uniform"):  # by hand: no rejections at this span
        bits = _stream_values(37)
        want = (-5 + (bits % np.uint64(1000000012)).astype(np.int64)).astype(np.int32)
        np.testing.assert_array_equal(out[0], want)
        # the second op continues the stream after the first's 19 counters
        want2 = (-5 + (_stream_values(6, 19) % np.uint64(1000000012)).astype(np.int64))
        np.testing.assert_array_equal(out[1].reshape(-1), want2.astype(np.int32))
