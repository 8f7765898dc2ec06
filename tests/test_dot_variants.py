"""ragged-dot and scaled-dot against values derived by hand from the semantics.

XLA:CPU (jaxlib 0.10.2) runs neither opcode ("ragged-dot is not supported by XLA:CPU
ThunkEmitter"; scaled-dot does not convert to StableHLO), so the references are
numpy in f64, written from operation_semantics' definitions.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import hloref

from hlo_modules import MODULES
from ragged_dot_reference import ragged_contracting, ragged_non_contracting

RAGGED_NON_CONTRACTING = MODULES["ragged-dot-non-contracting"]

RAGGED_CONTRACTING = MODULES["ragged-dot-contracting"]

SCALED = """HloModule m
ENTRY e {
  a = f8e4m3fn[4,64] parameter(0)
  b = f8e4m3fn[64,8] parameter(1)
  sa = f8e8m0fnu[4,2] parameter(2)
  sb = f8e8m0fnu[2,8] parameter(3)
  ROOT r = f32[4,8] scaled-dot(a, b, sa, sb), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"""


@pytest.mark.parametrize("sizes", [[3, 2, 4], [0, 10, 0], [2, 2, 2]])
def test_ragged_dot_non_contracting(sizes):
    rng = np.random.default_rng(0)
    lhs = rng.standard_normal((10, 4)).astype(np.float32)
    rhs = rng.standard_normal((3, 4, 5)).astype(np.float32)
    got = hloref.evaluate(RAGGED_NON_CONTRACTING, lhs, rhs, np.array(sizes, np.int64))
    expected = ragged_non_contracting(lhs, rhs, sizes)
    np.testing.assert_allclose(got, expected.astype(np.float32), rtol=1e-6, atol=1e-6)


def test_ragged_dot_contracting():
    rng = np.random.default_rng(1)
    lhs = rng.standard_normal((6, 9)).astype(np.float32)
    rhs = rng.standard_normal((9, 5)).astype(np.float32)
    sizes = [2, 3, 3]  # the 9th contracting index is in no group
    got = hloref.evaluate(RAGGED_CONTRACTING, lhs, rhs, np.array(sizes, np.int32))
    expected = ragged_contracting(lhs, rhs, sizes)
    assert got.shape == (3, 6, 5)
    np.testing.assert_allclose(got, expected.astype(np.float32), rtol=1e-6, atol=1e-6)


def test_scaled_dot_block_scales():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((4, 64)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.standard_normal((64, 8)).astype(ml_dtypes.float8_e4m3fn)
    sa = np.exp2(rng.integers(-2, 3, (4, 2))).astype(ml_dtypes.float8_e8m0fnu)
    sb = np.exp2(rng.integers(-2, 3, (2, 8))).astype(ml_dtypes.float8_e8m0fnu)
    got = hloref.evaluate(SCALED, a, b, sa, sb)
    # blocks of 32 along the contracting dimension share one scale
    lhs = a.astype(np.float64) * np.repeat(sa.astype(np.float64), 32, axis=1)
    rhs = b.astype(np.float64) * np.repeat(sb.astype(np.float64), 32, axis=0)
    np.testing.assert_array_equal(got, (lhs @ rhs).astype(np.float32))
