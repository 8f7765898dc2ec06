"""``exponential``, ``exponential-minus-one``, ``log``, ``log-plus-one``, ``logistic`` and
``tanh`` of f32 arrays, bit for bit as the f64 path but vectorised.

The reference rule (``numeric``): a transcendental of f32 is numpy's f64 function of the
widened value (for ``logistic``, ``logistic_f64``'s expression), rounded once to f32.
Here each element's f64 value is approximated by a branch-free kernel that LLVM
vectorises, and rounded to f32. As for the sine (``trig_f32``), rounding to nearest
changes only where the value crosses a midpoint between two f32 numbers, so the
approximation ``d`` rounds as the reference value does whenever ``d`` is farther from
every f32 midpoint than the two differ. An element is recomputed by the reference path
itself (its f64 function of the widened value, rounded) when ``d`` lies within
``GUARD`` f64 ulps of a midpoint, when ``|d|`` is below f32's smallest normal (subnormal
results round on another grid), or when ``x`` lies outside the op's ``DOMAIN`` (NaN
too). ``benchmarks/verify_trig_f32.py --op NAME`` compares the f32 results with the
reference path on all 2**32 inputs and measures the largest distance between ``d`` and
the reference f64 value where the kernel is used: it must stay below ``GUARD``
(docs/benchmarks.md).

The approximations (f64 throughout, errors in f64 ulps of the result):

* ``expm1(y) = 2**k·(q + 1) - 1`` with ``k = round(y/ln 2)``, ``r = y - k·ln 2`` by
  fdlibm's two-part ln 2 (``e_exp.c``: ``k·LN2_HI`` is exact), ``q = expm1(r)`` by its
  Taylor polynomial of degree 12 (``|r| <= 0.347``: truncation below 2**-51 of ``q``,
  a few ulps), summed as ``2**k·q + (2**k - 1)``; ``exp(y) = 2**k·(1 + q)``;
* ``log(u)`` as fdlibm's ``e_log.c`` (``u = 2**k·(1 + f)``, ``1 + f`` in
  ``[√2/2, √2)``, ``s = f/(2 + f)``, its ``Lg1..Lg7`` polynomial), in the one form
  ``k·ln2_hi - ((s·(f - R) - k·ln2_lo) - f)``; ``log1p(x) = log(u) + (x - (u - 1))/u``
  with ``u = 1 + x`` (the correction restores what the rounding of ``u`` lost);
* ``logistic`` as ``logistic_f64``: ``e = exp(-|x|)``, ``1/(1 + e)`` or ``e/(1 + e)``;
  ``tanh(x) = sign(x)·u/(u + 2)`` with ``u = expm1(2|x|)``.

Measured on all 2**32 inputs, the largest distance from the reference f64 value is 1
(``log``, ``log1p``) to 8 (``expm1``) f64 ulps, against ``GUARD`` = 4,096.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from .guarded_f32 import apply_guarded

__all__ = ["exp_f32", "expm1_f32", "log_f32", "log1p_f32", "logistic_f32", "tanh_f32",
           "logistic_f64", "approx_f64", "OPS", "DOMAIN", "GUARD"]

#: f64 ulps around an f32 midpoint inside which an element is recomputed by the reference
GUARD = 1 << 12
#: elements per block: its f64 values stay in the L1 cache
_BLOCK = 1024

#: kernel op codes
EXP, EXPM1, LOG, LOG1P, LOGISTIC, TANH = range(6)
_F32_MAX = float(np.finfo(np.float32).max)
_F32_TINY = float(np.finfo(np.float32).tiny)
#: op code -> (lowest, highest) input the kernel computes; the others go to the reference
DOMAIN = np.array([
    [-700.0, 700.0],  # EXP: 2**k stays a normal f64 (|k| <= 1010)
    [-700.0, 700.0],  # EXPM1
    [_F32_TINY, _F32_MAX],  # LOG: positive normal f32
    [float(np.nextafter(np.float32(-1), np.float32(0))), _F32_MAX],  # LOG1P: x > -1
    [-700.0, 700.0],  # LOGISTIC
    [-350.0, 350.0],  # TANH: 2|x| <= 700
])

_INV_LN2 = 1.44269504088896338700e+00
_SHIFT = 6755399441055744.0  # 1.5 * 2**52: adding it rounds to an integer (nearest even)
_LN2_HI = 6.93147180369123816490e-01  # fdlibm's: 32 significant bits, k·LN2_HI exact
_LN2_LO = 1.90821492927058770002e-10
#: 1/n! for n = 12, 11, ..., 2 (Horner order): expm1(r) = r + r²·(1/2 + r·(1/6 + ...))
_TAYLOR = tuple(1.0 / float(np.prod(np.arange(1, n + 1, dtype=np.float64)))
                for n in range(12, 1, -1))
_T12, _T11, _T10, _T9, _T8, _T7, _T6, _T5, _T4, _T3, _T2 = _TAYLOR
_LG1, _LG2, _LG3 = 6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01
_LG4, _LG5 = 2.222219843214978396e-01, 1.818357216161805012e-01
_LG6, _LG7 = 1.531383769920937332e-01, 1.479819860511658591e-01
#: bits of f32's smallest normal number as an f64 (2**-126), sign cleared
_TINY_BITS = np.int64(0x3810000000000000)
_ABS_MASK = np.int64(0x7FFFFFFFFFFFFFFF)
_LOW29 = np.int64((1 << 29) - 1)
_HALF29 = np.int64(1 << 28)


@intrinsic
def _as_float(typingctx, bits):
    """The f64 whose bit pattern is the int64 ``bits``."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())
    return types.float64(types.int64), codegen


@intrinsic
def _as_bits(typingctx, value):
    """The bit pattern of the f64 ``value`` as an int64."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))
    return types.int64(types.float64), codegen


@numba.njit(cache=True, inline="always", error_model="numpy")
def _expm1_parts(y):
    """``(q, 2**k)`` with ``exp(y) = 2**k·(1 + q)`` for ``|y| <= 700``."""
    kd = (y * _INV_LN2 + _SHIFT) - _SHIFT
    r = (y - kd * _LN2_HI) - kd * _LN2_LO
    p = _T11 + r * _T12
    p = _T10 + r * p
    p = _T9 + r * p
    p = _T8 + r * p
    p = _T7 + r * p
    p = _T6 + r * p
    p = _T5 + r * p
    p = _T4 + r * p
    p = _T3 + r * p
    p = _T2 + r * p
    q = r + (r * r) * p
    return q, _as_float((np.int64(kd) + 1023) << 52)


@numba.njit(cache=True, inline="always", error_model="numpy")
def _exp(y):
    q, scale = _expm1_parts(y)
    return scale * (1.0 + q)


@numba.njit(cache=True, inline="always", error_model="numpy")
def _expm1(y):
    q, scale = _expm1_parts(y)
    return scale * q + (scale - 1.0)


@numba.njit(cache=True, inline="always", error_model="numpy")
def _log(u):
    """log of a positive normal f64 ``u`` (fdlibm's ``e_log.c``, one branch-free form)."""
    hx = _as_bits(u)
    high = hx >> 32
    k = (high >> 20) - 1023
    high &= 0x000FFFFF
    i = (high + 0x95F64) & 0x100000  # 1 + f below √2: from [1, 2) to [√2/2, √2)
    f = _as_float(((high | (i ^ 0x3FF00000)) << 32) | (hx & 0xFFFFFFFF)) - 1.0
    dk = np.float64(k + (i >> 20))
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    t1 = w * (_LG2 + w * (_LG4 + w * _LG6))
    t2 = z * (_LG1 + w * (_LG3 + w * (_LG5 + w * _LG7)))
    r = t2 + t1
    return dk * _LN2_HI - ((s * (f - r) - dk * _LN2_LO) - f)


@numba.njit(cache=True, inline="always", error_model="numpy")
def _log1p(x):
    u = 1.0 + x
    return _log(u) + (x - (u - 1.0)) / u


@numba.njit(cache=True, inline="always", error_model="numpy")
def _logistic(x):
    e = _exp(-abs(x))
    return 1.0 / (1.0 + e) if x >= 0 else e / (1.0 + e)


@numba.njit(cache=True, inline="always", error_model="numpy")
def _tanh(x):
    u = _expm1(2.0 * abs(x))
    t = u / (u + 2.0)
    return t if x >= 0 else -t


@numba.njit(cache=True, inline="always", error_model="numpy")
def _clamp(xd, lo, hi):
    """``xd``, or ``lo`` where ``xd`` is outside ``[lo, hi]`` (or NaN)."""
    return xd if (xd >= lo) & (xd <= hi) else lo


@numba.njit(cache=True, inline="always", error_model="numpy")
def _approx(op, xd):
    """The f64 approximation of ``op`` at ``xd`` (in the op's domain)."""
    if op == EXP:
        return _exp(xd)
    if op == EXPM1:
        return _expm1(xd)
    if op == LOG:
        return _log(xd)
    if op == LOG1P:
        return _log1p(xd)
    if op == LOGISTIC:
        return _logistic(xd)
    return _tanh(xd)


@numba.njit(cache=True, inline="always", error_model="numpy")
def _leave(xd, lo, hi, d):
    """Whether the reference must decide: ``xd`` outside ``[lo, hi]`` (or NaN), or the
    f64 value ``d`` below f32's smallest normal or within ``GUARD`` ulps of an f32
    midpoint (the 29 low mantissa bits, which f32 drops, within ``GUARD`` of ``2**28``)."""
    b = _as_bits(d) & _ABS_MASK
    near = ((b + (GUARD - _HALF29)) & _LOW29) <= 2 * GUARD  # |low 29 bits - 2**28| <= GUARD
    return (xd < lo) | (xd > hi) | (xd != xd) | (b < _TINY_BITS) | near


@numba.njit(cache=True, inline="always", error_model="numpy")
def _put(d, xd, lo, hi, out, flag, j):
    """``out[j] = f32(d)``, ``flag[j]`` = whether to leave it (``_leave``), returned."""
    out[j] = np.float32(d)
    f = _leave(xd, lo, hi, d)
    flag[j] = f
    return f


@numba.njit(cache=True, nogil=True, error_model="numpy", fastmath={"contract"})
def _guarded(op, x, out, hard):
    """``out = f32(op(x))`` where the kernel decides; the indices it leaves to the
    reference go to ``hard``; returns how many. Per block: one loop (vectorised; one
    per op, the op's branch outside it) computes, rounds and flags; a rare second one
    lists the flagged elements. Inputs outside the domain are computed at its lowest
    point (and flagged)."""
    n = x.size
    lo, hi = DOMAIN[op, 0], DOMAIN[op, 1]
    flag = np.empty(_BLOCK, np.uint8)
    count = 0
    for start in range(0, n, _BLOCK):
        m = min(_BLOCK, n - start)
        xs = x[start:start + m]
        block = out[start:start + m]
        left = 0
        if op == EXP:
            for j in range(m):
                xd = np.float64(xs[j])
                left += _put(_exp(_clamp(xd, lo, hi)), xd, lo, hi, block, flag, j)
        elif op == EXPM1:
            for j in range(m):
                xd = np.float64(xs[j])
                left += _put(_expm1(_clamp(xd, lo, hi)), xd, lo, hi, block, flag, j)
        elif op == LOG:
            for j in range(m):
                xd = np.float64(xs[j])
                left += _put(_log(_clamp(xd, lo, hi)), xd, lo, hi, block, flag, j)
        elif op == LOG1P:
            for j in range(m):
                xd = np.float64(xs[j])
                left += _put(_log1p(_clamp(xd, lo, hi)), xd, lo, hi, block, flag, j)
        elif op == LOGISTIC:
            for j in range(m):
                xd = np.float64(xs[j])
                left += _put(_logistic(_clamp(xd, lo, hi)), xd, lo, hi, block, flag, j)
        else:
            for j in range(m):
                xd = np.float64(xs[j])
                left += _put(_tanh(_clamp(xd, lo, hi)), xd, lo, hi, block, flag, j)
        if left:
            for j in range(m):
                if flag[j]:
                    hard[count] = start + j
                    count += 1
    return count


@numba.njit(cache=True, nogil=True, error_model="numpy", fastmath={"contract"})
def _approx_all(op, x, out):
    lo, hi = DOMAIN[op, 0], DOMAIN[op, 1]
    for j in range(x.size):
        out[j] = _approx(op, _clamp(np.float64(x[j]), lo, hi))


def approx_f64(op: int, x: np.ndarray) -> np.ndarray:
    """The kernel's f64 values of f32 ``x`` before rounding (``benchmarks/verify_trig_f32.py``
    measures their distance from the reference's)."""
    out = np.empty(x.size, np.float64)
    _approx_all(op, np.ascontiguousarray(x).reshape(-1), out)
    return out


def logistic_f64(x: np.ndarray) -> np.ndarray:
    """The reference ``logistic`` of an f64 array: 1 / (1 + exp(-x)), written to avoid
    overflow for large |x|."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _apply(x: np.ndarray, op: int, reference) -> np.ndarray:
    return apply_guarded(x, lambda flat, out, hard: _guarded(op, flat, out, hard), reference)


#: public name -> (kernel op code, the reference f64 function)
OPS = {"exp_f32": (EXP, np.exp), "expm1_f32": (EXPM1, np.expm1), "log_f32": (LOG, np.log),
       "log1p_f32": (LOG1P, np.log1p), "logistic_f32": (LOGISTIC, logistic_f64),
       "tanh_f32": (TANH, np.tanh)}


def exp_f32(x: np.ndarray) -> np.ndarray:
    """``f32(np.exp(f64(x)))`` of an f32 array, bit for bit."""
    return _apply(x, EXP, np.exp)


def expm1_f32(x: np.ndarray) -> np.ndarray:
    """``f32(np.expm1(f64(x)))`` of an f32 array, bit for bit."""
    return _apply(x, EXPM1, np.expm1)


def log_f32(x: np.ndarray) -> np.ndarray:
    """``f32(np.log(f64(x)))`` of an f32 array, bit for bit."""
    return _apply(x, LOG, np.log)


def log1p_f32(x: np.ndarray) -> np.ndarray:
    """``f32(np.log1p(f64(x)))`` of an f32 array, bit for bit."""
    return _apply(x, LOG1P, np.log1p)


def logistic_f32(x: np.ndarray) -> np.ndarray:
    """``f32(logistic_f64(f64(x)))`` of an f32 array, bit for bit."""
    return _apply(x, LOGISTIC, logistic_f64)


def tanh_f32(x: np.ndarray) -> np.ndarray:
    """``f32(np.tanh(f64(x)))`` of an f32 array, bit for bit."""
    return _apply(x, TANH, np.tanh)
