"""Sorts with general comparators (not ``compare(p0, p1)``) checked against XLA:CPU:
XLA's own TOTALORDER-by-bits comparator with an iota tie-break
(spmd_partitioner_test.cc:14961, stable_sort_expander_test.cc:126), which the
evaluator runs on whole arrays (``bitcast-convert`` of scalars is elementwise) and
sorts by a guessed order it verifies (``evaluator/sort._guessed_order``), and a
comparator no guess fits (by magnitude), which falls back to the merge sort."""

from __future__ import annotations

import numpy as np
import pytest

import hloref
from hloref.fuzz.workers import OracleWorker

GREATER_BY_BITS = """HloModule m
greater {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ia = s32[] parameter(2)
  ib = s32[] parameter(3)
  za = s32[] bitcast-convert(a)
  zero = s32[] constant(0)
  na = pred[] compare(za, zero), direction=LT
  big = u32[] constant(2147483647)
  ua = u32[] bitcast-convert(a)
  fa = u32[] subtract(big, ua)
  sa = s32[] bitcast-convert(fa)
  ka = s32[] select(na, sa, za)
  zb = s32[] bitcast-convert(b)
  nb = pred[] compare(zb, zero), direction=LT
  ub = u32[] bitcast-convert(b)
  fb = u32[] subtract(big, ub)
  sb = s32[] bitcast-convert(fb)
  kb = s32[] select(nb, sb, zb)
  gt = pred[] compare(ka, kb), direction=GT
  lt = pred[] compare(kb, ka), direction=GT
  tie = pred[] compare(gt, lt), direction=EQ
  by_index = pred[] compare(ia, ib), direction=LT
  ROOT r = pred[] select(tie, by_index, gt)
}
ENTRY e {
  x = f32[3,4000] parameter(0)
  i = s32[3,4000] iota(), iota_dimension=1
  ROOT s = (f32[3,4000], s32[3,4000]) sort(x, i), dimensions={1}, is_stable=true, to_apply=greater
}
"""

BY_MAGNITUDE = """HloModule m
less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ia = s32[] parameter(2)
  ib = s32[] parameter(3)
  ma = f32[] abs(a)
  mb = f32[] abs(b)
  ROOT lt = pred[] compare(ma, mb), direction=LT
}
ENTRY e {
  x = f32[2,300] parameter(0)
  i = s32[2,300] iota(), iota_dimension=1
  ROOT s = (f32[2,300], s32[2,300]) sort(x, i), dimensions={1}, is_stable=true, to_apply=less
}
"""


@pytest.fixture(scope="module")
def xla():
    with OracleWorker("xla") as w:
        yield w


def _inputs(shape, nan=True):
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    x[:, ::7] = x[:, 1:2]          # ties, broken by the index operand
    x[0, 5], x[0, 9] = -0.0, 0.0   # -0 and +0 are distinct in the bits' order
    if nan:
        x[1, 11] = np.nan
    return x


def test_bits_comparator_with_iota_tie_break_matches_xla(xla, monkeypatch):
    from hloref.evaluator import sort

    def slow(*_):
        raise AssertionError("the guessed order should have verified")

    # the verified guess, not the (log2 n)^2 merge sort or the per-comparison Python
    # sort (the spmd_partitioner_test.cc sorts of 4M elements timed out at 150 s)
    monkeypatch.setattr(sort, "_merge_sort_vectorized", slow)
    monkeypatch.setattr(sort, "_python_sort", slow)
    x = _inputs((3, 4000))
    ours = hloref.evaluate(GREATER_BY_BITS, x)
    res = xla.run(GREATER_BY_BITS, [x])
    assert res.ok, res.message
    theirs = res.value
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a.view(np.uint32) if a.dtype == np.float32 else a,
                                      b.view(np.uint32) if b.dtype == np.float32 else b)
    # by hand: descending in the bits' total order (+NaN first, +0 before -0), ties by
    # index: a stable argsort of the negated order keys
    bits = x.view(np.int32).astype(np.int64)
    flipped = (np.int64(0x7FFFFFFF) - (bits & 0xFFFFFFFF)) % 2**32
    keys = np.where(bits < 0, np.where(flipped >= 2**31, flipped - 2**32, flipped), bits)
    order = np.argsort(-keys, axis=1, kind="stable")
    np.testing.assert_array_equal(ours[1], order.astype(np.int32))


def test_a_comparator_no_guessed_order_fits_falls_back_and_matches_xla(xla):
    x = _inputs((2, 300), nan=False)  # |NaN| < y is no strict weak order
    ours = hloref.evaluate(BY_MAGNITUDE, x)
    res = xla.run(BY_MAGNITUDE, [x])
    assert res.ok, res.message
    theirs = res.value
    np.testing.assert_array_equal(ours[1], theirs[1])
    # by hand: a stable sort by |x|
    np.testing.assert_array_equal(ours[1], np.argsort(np.abs(x), axis=1, kind="stable"))
