"""The combiner table (``evaluator/combiners.py``): each identity is one by definition,
``op(identity, y) == y`` for every ``y`` tried (numpy's arithmetic as the oracle), and
the pred ufunc is the HLO op on bools (operation_semantics: pred add is or, multiply
is and, maximum is or, minimum is and)."""

from __future__ import annotations

import numpy as np
import pytest

from hloref.evaluator.combiners import COMBINERS, identity

INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


def _samples(dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    values = [info.min, info.min + 1, -1, 0, 1, 2, 7, info.max - 1, info.max]
    return np.array([v for v in values if info.min <= v <= info.max], dtype=dtype)


@pytest.mark.parametrize("kind", sorted(COMBINERS))
@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_integer_identity(kind, dtype):
    y = _samples(dtype)
    e = np.array(identity(kind, np.dtype(dtype)), dtype=dtype)
    np.testing.assert_array_equal(COMBINERS[kind].integer(e, y), y)
    np.testing.assert_array_equal(COMBINERS[kind].integer(y, e), y)


@pytest.mark.parametrize("kind", sorted(COMBINERS))
def test_pred_identity_and_ufunc(kind):
    by_hand = {"add": np.logical_or, "multiply": np.logical_and, "maximum": np.logical_or,
               "minimum": np.logical_and, "and": np.logical_and, "or": np.logical_or,
               "xor": np.logical_xor}
    a, b = np.array([False, False, True, True]), np.array([False, True, False, True])
    np.testing.assert_array_equal(COMBINERS[kind].pred(a, b), by_hand[kind](a, b))
    e = identity(kind, np.dtype(np.bool_))
    np.testing.assert_array_equal(COMBINERS[kind].pred(e, b), b)


@pytest.mark.parametrize("kind,op", [("add", np.add), ("multiply", np.multiply),
                                     ("maximum", np.maximum), ("minimum", np.minimum)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_identity_keeps_signed_zeros_and_infinities(kind, op, dtype):
    y = np.array([-0.0, 0.0, 1.5, -2.0, np.inf, -np.inf, np.finfo(dtype).tiny / 2], dtype=dtype)
    out = op(np.array(identity(kind, np.dtype(dtype)), dtype=dtype), y)
    np.testing.assert_array_equal(out, y)
    np.testing.assert_array_equal(np.signbit(out), np.signbit(y))


@pytest.mark.parametrize("kind", ["and", "or", "xor"])
def test_bitwise_combiners_have_no_float_identity(kind):
    assert identity(kind, np.dtype(np.float32)) is None
    assert identity(kind, np.dtype(np.complex64)) is None
