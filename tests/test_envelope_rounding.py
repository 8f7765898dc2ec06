"""Random rounding of f32 results (fuzz/rounding.py), checked against numpy: the f64
result of the op (exact for add, subtract and multiply of f32 values) and
``np.nextafter`` give each element's two candidates."""

import numpy as np
import pytest

from hloref.fuzz.rounding import random_rounding
from hloref.types import from_dtype

F32 = from_dtype(np.dtype(np.float32))
SPECIALS = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.1754942e-38,
                     3.4028235e38, -3.4028235e38, 1.0, -2.0, 0.5], np.float32)


def _operands(seed: int, n: int = 4000):
    rng = np.random.default_rng(seed)

    def one():
        x = (rng.standard_normal(n) * 10.0 ** rng.integers(-44, 38, n)).astype(np.float32)
        pick = rng.integers(0, n, n // 8)
        x[pick] = SPECIALS[rng.integers(0, len(SPECIALS), len(pick))]
        return x.reshape(40, n // 40)
    return one(), one()


OPS = [np.add, np.subtract, np.multiply, np.divide, np.sqrt]


@pytest.mark.parametrize("fn", OPS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("mode", [None, 1.0, -1.0])
def test_random_rounding_takes_a_neighbour_on_the_exact_side(fn, mode):
    a, b = _operands(7)
    b = b.T.copy().T  # a non-C-order operand
    operands = [a] if fn is np.sqrt else [a, b]
    with np.errstate(all="ignore"):
        value = fn(*operands).astype(np.float32)  # correctly rounded f32 (f64 first)
        exact = fn(*[o.astype(np.float64) for o in operands])
    out = random_rounding(np.random.default_rng(3), fn, operands, value, F32, mode)
    assert out.dtype == np.float32 and out.shape == value.shape
    v = value.astype(np.float64)
    with np.errstate(all="ignore"):
        inexact = (exact != v) & ~np.isnan(v)
        towards = np.nextafter(value, np.where(exact > v, np.float32(np.inf),
                                               np.float32(-np.inf)))
    moved = ~((out == value) | (np.isnan(out) & np.isnan(value)))
    assert np.array_equal(out[moved], towards[moved])
    assert not np.any(moved & ~inexact)  # exact results, NaN and infinities stay
    if mode is None:  # about half of the inexact elements move
        frac = moved.sum() / inexact.sum()
        assert 0.4 < frac < 0.6
    else:  # directed: every inexact element whose exact value lies that way moves
        side = (exact > v) if mode > 0 else (exact < v)
        assert np.array_equal(moved, inexact & side)


def test_random_rounding_draws_as_numpy_does():
    """The same generator state gives the same elements moved as numpy's expression of
    CESTAC rounding (one f32 draw per element, moved where below 1/2)."""
    a, b = _operands(11)
    with np.errstate(all="ignore"):
        exact = a.astype(np.float64) * b
        value = exact.astype(np.float32)
    out = random_rounding(np.random.default_rng(5), np.multiply, [a, b], value, F32)
    draws = np.random.default_rng(5).random(value.shape, dtype=np.float32)
    with np.errstate(all="ignore"):
        expect = np.where((exact != value) & (draws < 0.5),
                          np.nextafter(value, np.where(exact > value, np.float32(np.inf),
                                                       np.float32(-np.inf))), value)
    assert out.tobytes() == expect.tobytes() or \
        np.array_equal(out, expect, equal_nan=True)
