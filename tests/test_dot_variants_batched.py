"""ragged-dot with per-batch ``group_sizes`` (rank > 1, StableHLO ragged_dot modes 1
and 2: ``group_sizes [b, g]``), against loops written by hand from the definition.
XLA:CPU does not run ragged-dot."""

from __future__ import annotations

import numpy as np
import pytest

import hloref
from hloref.errors import HloUnsupportedError


def _reference_mode1(lhs, rhs, gs):
    # lhs [b, m, k], rhs [g, b, k, n], gs [b, g] -> [b, m, n]
    bsz, m, _ = lhs.shape
    out = np.zeros((bsz, m, rhs.shape[-1]))
    for bi in range(bsz):
        start = 0
        for gi in range(gs.shape[1]):
            for r in range(start, min(start + gs[bi, gi], m)):
                out[bi, r] = lhs[bi, r].astype(np.float64) @ rhs[gi, bi].astype(np.float64)
            start += gs[bi, gi]
    return out


def _reference_mode2(lhs, rhs, gs):
    # lhs [b, m, k], rhs [b, k, n], gs [b, g] -> [g, b, m, n]
    bsz, m, k = lhs.shape
    out = np.zeros((gs.shape[1], bsz, m, rhs.shape[-1]))
    for bi in range(bsz):
        start = 0
        for gi in range(gs.shape[1]):
            ks = range(start, min(start + gs[bi, gi], k))
            for kk in ks:
                out[gi, bi] += np.outer(lhs[bi, :, kk], rhs[bi, kk]).astype(np.float64)
            start += gs[bi, gi]
    return out


@pytest.mark.parametrize("gs", [[[2, 3, 1], [0, 6, 0]], [[1, 1, 1], [4, 0, 1]], [[6, 0, 0], [0, 0, 0]]])
def test_mode1_per_batch(gs):
    rng = np.random.default_rng(1)
    lhs = rng.integers(-3, 4, (2, 6, 4)).astype(np.float32)
    rhs = rng.integers(-3, 4, (3, 2, 4, 5)).astype(np.float32)
    gs = np.array(gs, np.int32)
    text = """HloModule m
ENTRY e {
  a = f32[2,6,4] parameter(0)
  b = f32[3,2,4,5] parameter(1)
  g = s32[2,3] parameter(2)
  ROOT r = f32[2,6,5] ragged-dot(a, b, g), lhs_batch_dims={0}, rhs_batch_dims={1}, lhs_contracting_dims={2}, rhs_contracting_dims={2}, lhs_ragged_dims={1}, rhs_group_dims={0}
}
"""
    got = hloref.evaluate(text, lhs, rhs, gs)
    np.testing.assert_array_equal(got, _reference_mode1(lhs, rhs, gs))


@pytest.mark.parametrize("gs", [[[1, 2], [4, 0]], [[0, 3], [2, 1]]])
def test_mode2_per_batch(gs):
    rng = np.random.default_rng(2)
    lhs = rng.integers(-3, 4, (2, 3, 4)).astype(np.float32)
    rhs = rng.integers(-3, 4, (2, 4, 5)).astype(np.float32)
    gs = np.array(gs, np.int32)
    text = """HloModule m
ENTRY e {
  a = f32[2,3,4] parameter(0)
  b = f32[2,4,5] parameter(1)
  g = s32[2,2] parameter(2)
  ROOT r = f32[2,2,3,5] ragged-dot(a, b, g), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}, lhs_ragged_dims={2}
}
"""
    got = hloref.evaluate(text, lhs, rhs, gs)
    np.testing.assert_array_equal(got, _reference_mode2(lhs, rhs, gs))


def test_batch_dim_not_first_in_lhs():
    # lhs [m, b, k] with the batch dim at 1: group_sizes [b, g] still index the batch
    rng = np.random.default_rng(3)
    lhs = rng.integers(-3, 4, (6, 2, 4)).astype(np.float32)
    rhs = rng.integers(-3, 4, (3, 2, 4, 5)).astype(np.float32)
    gs = np.array([[2, 3, 1], [0, 5, 1]], np.int32)
    text = """HloModule m
ENTRY e {
  a = f32[6,2,4] parameter(0)
  b = f32[3,2,4,5] parameter(1)
  g = s32[2,3] parameter(2)
  ROOT r = f32[2,6,5] ragged-dot(a, b, g), lhs_batch_dims={1}, rhs_batch_dims={1}, lhs_contracting_dims={2}, rhs_contracting_dims={2}, lhs_ragged_dims={0}, rhs_group_dims={0}
}
"""
    got = hloref.evaluate(text, lhs, rhs, gs)
    want = _reference_mode1(np.transpose(lhs, (1, 0, 2)), rhs, gs)
    np.testing.assert_array_equal(got, want)


def test_group_sizes_not_matching_batch_is_refused():
    text = """HloModule m
ENTRY e {
  a = f32[2,6,4] parameter(0)
  b = f32[3,2,4,5] parameter(1)
  g = s32[6,3] parameter(2)
  ROOT r = f32[2,6,5] ragged-dot(a, b, g), lhs_batch_dims={0}, rhs_batch_dims={1}, lhs_contracting_dims={2}, rhs_contracting_dims={2}, lhs_ragged_dims={1}, rhs_group_dims={0}
}
"""
    with pytest.raises(HloUnsupportedError):
        hloref.evaluate(text, np.zeros((2, 6, 4), np.float32), np.zeros((3, 2, 4, 5), np.float32),
                        np.ones((6, 3), np.int32))
