"""Device functions of ops whose value on one-element operands is a scalar formula,
used by ``gpu/computation.py`` inside computations that ops call on every element."""

from __future__ import annotations

import math

import numpy as np
from numba import cuda


@cuda.jit(device=True)
def stochastic_round(v, r, scale, f_lo, f_hi, lo, hi):
    """stochastic-convert of f64 ``v`` (the operand's exact value) with random bits
    ``r`` (uint64), the CPU's rule: NaN 0; ``v >= f_hi`` (the result type's largest value
    as the operand type rounds it) the largest, ``v <= f_lo`` the smallest; else the
    magnitude's whole part, plus 1 when ``r`` is below its fraction as a fixed-point
    number of the operand's width (``floor(frac x 2^bits)``, ``scale = 2^bits``),
    with the operand's sign (int64, wrapped by the store)."""
    if v != v:
        return np.int64(0)
    if v >= f_hi:
        return np.int64(hi)
    if v <= f_lo:
        return np.int64(lo)
    neg = math.copysign(1.0, v) < 0
    mag = abs(v)
    whole = np.floor(mag)
    fixed = np.uint64(np.floor((mag - whole) * scale))
    t = np.int64(whole)
    if np.uint64(r) < fixed:
        t = t + np.int64(1)
    if neg:
        t = -t
    return t
