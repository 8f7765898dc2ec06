"""Seeded random input values for a shape: what ``hloref run --seed N`` feeds a module."""

from __future__ import annotations

import numpy as np

from .shapes import ArrayShape, Shape, TokenShape, TupleShape
from .values import TOKEN_VALUE

__all__ = ["random_value"]


def random_value(shape: Shape, rng: np.random.Generator):
    """A value of ``shape``: floats ~ N(0, 1) rounded to the type (f8e8m0fnu: powers of
    two near 1, f4e2m1fn: its representable range), integers uniform in [-8, 8] clipped
    to the type's range, pred fair coin flips, complex with N(0, 1) parts."""
    if isinstance(shape, TupleShape):
        return tuple(random_value(s, rng) for s in shape.elements)
    if isinstance(shape, TokenShape):
        return TOKEN_VALUE
    if not isinstance(shape, ArrayShape):
        raise TypeError(f"cannot make random values of {shape}")
    et = shape.element_type
    dims = tuple(max(d, 0) for d in shape.dims)
    if et.is_pred:
        return rng.random(dims) < 0.5
    if et.is_integer:
        lo, hi = max(et.min_value, -8), min(et.max_value, 8)
        return rng.integers(lo, hi, size=dims, endpoint=True).astype(et.dtype)
    if et.is_complex:
        return (rng.standard_normal(dims) + 1j * rng.standard_normal(dims)).astype(et.dtype)
    values = rng.standard_normal(dims)
    if et.name == "f8e8m0fnu":
        values = np.exp2(np.round(values * 2))
    return values.astype(et.dtype)
