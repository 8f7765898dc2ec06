"""A reducer whose input type differs from its accumulator's (``f(acc: f32, x: bf16)``,
what XLA's verifier calls mixed precision: XLA:CPU's pipeline rejects it, others allow
it) cannot combine two partial results, whose type is the accumulator's: the CPU
backend folds it from the left, output by output, as XLA's loop emitters do
(``evaluator.reduce.mixed_precision``), for reduce and reduce-window. Values by hand:
f32 sums near 2**24, where the pairwise tree and the left fold round differently."""

from __future__ import annotations

import ml_dtypes
import numpy as np

import hloref

REDUCE = """HloModule m
add { a = f32[] parameter(0)  b = bf16[] parameter(1)  c = f32[] convert(b)  ROOT s = f32[] add(a, c) }
ENTRY e {
  x = bf16[2,4] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[2] reduce(x, z), dimensions={1}, to_apply=add
}
"""

WINDOW = """HloModule m
add { a = f32[] parameter(0)  b = bf16[] parameter(1)  c = f32[] convert(b)  ROOT s = f32[] add(a, c) }
ENTRY e {
  x = bf16[6] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[4] reduce-window(x, z), window={size=4 pad=1_0}, to_apply=add
}
"""


def test_reduce_folds_from_the_left():
    """Row [2**24, 1, 1, 1]: 2**24 + 1 rounds back to 2**24 three times (ties to even),
    2**24 (the tree would give (2**24 + 1) + (1 + 1) = 2**24 + 2). Row [1, 1, 1, 2**24]:
    3 + 2**24 is a tie between 2**24 + 2 and 2**24 + 4, rounded to the even 2**24 + 4."""
    x = np.array([[2**24, 1, 1, 1], [1, 1, 1, 2**24]], ml_dtypes.bfloat16)
    out = hloref.evaluate(REDUCE, x)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, np.array([2**24, 2**24 + 4], np.float32))


def test_reduce_window_folds_from_the_left():
    """Windows of 4 with one padding position first over [1, e, e, e, e, e], e = 2**-8:
    the f32 partial sums are exact, 1 + 2e, 1 + 3e, 4e, 4e (the padding calls nothing).
    (A pairwise tree that stores partials in the input type rounds 1 + e to bf16's 1.)"""
    e = 2.0 ** -8
    x = np.array([1, e, e, e, e, e], ml_dtypes.bfloat16)
    out = hloref.evaluate(WINDOW, x)
    np.testing.assert_array_equal(out, np.array([1 + 2 * e, 1 + 3 * e, 4 * e, 4 * e], np.float32))
