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
