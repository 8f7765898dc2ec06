"""``sine`` and ``cosine`` of f32 arrays, bit for bit as the f64 libm path but vectorised.

The reference rule (``numeric``): a transcendental of f32 is computed in f64 (numpy's
``np.sin``/``np.cos`` on the widened value, the host libm) and rounded once to f32.
The libm's f64 sine runs one element at a time (about 10 ns each: 27× numpy's own f32
``sin`` at 1M elements). Here the same f64 value is approximated by a branch-free
kernel that LLVM vectorises:

* argument reduction by Cody and Waite with fdlibm's three 33-bit parts of π/2
  (``e_rem_pio2.c``): ``k·P1`` and ``k·P2`` are exact for ``|k| < 2**20``, so
  ``r = ((x - k·P1) - k·P2) - k·P3`` is accurate to a few f64 ulps;
* fdlibm's ``__kernel_sin``/``__kernel_cos`` polynomials on ``|r| <= π/4`` (error
  below one f64 ulp), the quadrant chosen by ``k mod 4``.

The f64 approximation ``d`` is then rounded to f32. Rounding to nearest changes only
where the value crosses a midpoint between two f32 numbers, so ``round(d)`` equals
``round(libm value)`` whenever ``d`` is farther from every f32 midpoint than both
errors together. An element is recomputed by the reference path itself (numpy's f64
``sin``/``cos`` of the widened value, rounded) when ``d`` lies within ``GUARD`` f64
ulps of a midpoint, when ``|d|`` is below f32's smallest normal (subnormal results
round on another grid), or when ``|x| > REDUCE_LIMIT`` or ``x`` is not finite. So the
result is that of the reference path provided the kernel and the libm differ by less
than ``GUARD`` ulps where the kernel is used; ``benchmarks/verify_trig_f32.py``
checks f32 inputs against the reference path, all 2**32 or (``--kernel-range``) the
2,466,250,754 the kernel computes: for sine and cosine all of these agree, the largest
kernel-libm distance 3 f64 ulps against a guard of 2**10 (docs/benchmarks.md);
``tests/test_fast_transcendentals.py`` checks samples and the recomputed cases.
"""

from __future__ import annotations

import numba
import numpy as np

from .guarded_f32 import apply_guarded

__all__ = ["sin_f32", "cos_f32", "approx_f64", "GUARD", "REDUCE_LIMIT"]

#: f64 ulps around an f32 midpoint inside which an element is recomputed by the libm
GUARD = 1 << 10
#: the kernel reduces ``|x| <= REDUCE_LIMIT`` (``|k| < 2**20``); larger inputs go to the libm
REDUCE_LIMIT = float(1 << 20)
#: elements per block: its f64 values stay in the L1 cache
_BLOCK = 1024

_INV_PIO2 = 6.36619772367581382433e-01
_SHIFT = 6755399441055744.0  # 1.5 * 2**52: adding it rounds to an integer (nearest even)
_P1 = 1.57079632673412561417e+00
_P2 = 6.07710050630396597660e-11
_P3 = 2.02226624871116645580e-21
_S1, _S2, _S3 = -1.66666666666666324348e-01, 8.33333333332248946124e-03, -1.98412698298579493134e-04
_S4, _S5, _S6 = 2.75573137070700676789e-06, -2.50507602534068634195e-08, 1.58969099521155010221e-10
_C1, _C2, _C3 = 4.16666666666666019037e-02, -1.38888888888741095749e-03, 2.48015872894767294178e-05
_C4, _C5, _C6 = -2.75573143513906633035e-07, 2.08757232129817482790e-09, -1.13596475577881948265e-11
#: bits of f32's smallest normal number as an f64 (2**-126), sign cleared
_TINY_BITS = np.int64(0x3810000000000000)
_ABS_MASK = np.int64(0x7FFFFFFFFFFFFFFF)
_LOW29 = np.int64((1 << 29) - 1)
_HALF29 = np.int64(1 << 28)


@numba.njit(cache=True, nogil=True)
def _sincos(x, out, hard, quadrant0):
    """``out = f32(sin(x + quadrant0·π/2))`` where the kernel decides; the indices it
    leaves to the libm go to ``hard``; returns how many. Per block, in loops LLVM
    vectorises: the f64 values, their rounding, the flags of the elements to leave
    (``_leave``) and their count; then (rarely) a scalar pass listing them."""
    n = x.size
    tmp = np.empty(_BLOCK, np.float64)
    bits = tmp.view(np.int64)
    flag = np.empty(_BLOCK, np.uint8)
    count = 0
    for start in range(0, n, _BLOCK):
        m = min(_BLOCK, n - start)
        xs = x[start:start + m]
        block = out[start:start + m]
        for j in range(m):
            tmp[j] = _approx(xs[j], quadrant0)
        for j in range(m):
            block[j] = np.float32(tmp[j])
        for j in range(m):
            flag[j] = _leave(xs[j], bits[j])
        left = 0
        for j in range(m):
            left += flag[j]
        if left:
            for j in range(m):
                if flag[j]:
                    hard[count] = start + j
                    count += 1
    return count


@numba.njit(cache=True, inline="always")
def _approx(x, quadrant0):
    """sin(x + quadrant0·π/2) in f64 for f32 ``|x| <= REDUCE_LIMIT`` (0 elsewhere).
    Both polynomials are fdlibm's (``k_sin.c``, ``k_cos.c``) in Horner form in
    ``z = r²``, the coefficients picked per element, so the loop has no branch:
    ``sin r = r·(1 + S1·z + … + S6·z⁶)``, ``cos r = 1 - z/2 + C1·z² + … + C6·z⁷``."""
    xd = np.float64(x)
    xd = xd if abs(xd) <= REDUCE_LIMIT else 0.0  # others (NaN too) are recomputed
    k = (xd * _INV_PIO2 + _SHIFT) - _SHIFT
    r = ((xd - k * _P1) - k * _P2) - k * _P3
    z = r * r
    q = np.int64(k) + quadrant0
    odd = (q & 1) == 1  # cos(r) in quadrants 1 and 3
    h = _C6 if odd else 0.0
    h = (_C5 if odd else _S6) + z * h
    h = (_C4 if odd else _S5) + z * h
    h = (_C3 if odd else _S4) + z * h
    h = (_C2 if odd else _S3) + z * h
    h = (_C1 if odd else _S2) + z * h
    h = (-0.5 if odd else _S1) + z * h
    h = 1.0 + z * h
    y = h if odd else r * h
    return -y if (q & 2) == 2 else y


@numba.njit(cache=True, nogil=True)
def approx_f64(x, out, quadrant0):
    """The kernel's f64 values before rounding (``benchmarks/verify_trig_f32.py``
    measures their distance from the libm's)."""
    for j in range(x.size):
        out[j] = _approx(x[j], quadrant0)


@numba.njit(cache=True, inline="always")
def _leave(x, bits):
    """Whether the libm must decide: ``x`` outside the reduced range (or not finite),
    or the f64 value (``bits``) below f32's smallest normal (subnormal results round on
    another grid) or within ``GUARD`` ulps of an f32 midpoint (the 29 low mantissa bits,
    which f32 drops, within ``GUARD`` of ``2**28``)."""
    b = bits & _ABS_MASK
    off = (b & _LOW29) - _HALF29
    return (abs(x) > REDUCE_LIMIT) | (x != x) | (b < _TINY_BITS) | \
        ((off <= GUARD) & (off >= -GUARD))


def _apply(x: np.ndarray, quadrant0: int, libm) -> np.ndarray:
    return apply_guarded(x, lambda flat, out, hard: _sincos(flat, out, hard, quadrant0), libm)


def sin_f32(x: np.ndarray) -> np.ndarray:
    """``f32(np.sin(f64(x)))`` of an f32 array, bit for bit."""
    return _apply(x, 0, np.sin)


def cos_f32(x: np.ndarray) -> np.ndarray:
    """``f32(np.cos(f64(x)))`` of an f32 array, bit for bit."""
    return _apply(x, 1, np.cos)
