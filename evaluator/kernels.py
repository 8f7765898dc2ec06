"""Numba CPU kernels for integer element functions whose XLA semantics numpy lacks.

Scalar element functions are plain ``@njit`` functions of scalars (integer and bit
arithmetic only), so the GPU backend can compile the same bodies for numba.cuda;
the array kernels are thin loops over flat arrays. Inputs are int64 (signed types)
or uint64 (unsigned types), already extended from the element type; results are
wrapped to the element width by ``numeric.wrap_int``.
"""

from __future__ import annotations

import math

import numba
import numpy as np

__all__ = ["sdiv", "srem", "udiv", "urem", "ipow", "clz", "popcnt", "mulhi_s64", "mulhi_u64",
           "divrem_array", "pow_array", "clz_array", "popcnt_array", "mulhi64_array"]

_INT64_MIN = np.int64(-(1 << 63))


@numba.njit(cache=True)
def sdiv(a, b):
    """Signed division truncating toward zero; x/0 = -1; INT_MIN/-1 = INT_MIN."""
    if b == 0:
        return np.int64(-1)
    if b == -1:
        return np.int64(0) - a  # wraps for INT64_MIN
    q = a // b
    if q < 0 and q * b != a:
        q += 1
    return q


@numba.njit(cache=True)
def srem(a, b):
    """Signed remainder with the dividend's sign; x%0 = x; INT_MIN%-1 = 0."""
    if b == 0:
        return a
    if b == -1:
        return np.int64(0)
    return a - sdiv(a, b) * b


@numba.njit(cache=True)
def udiv(a, b):
    if b == 0:
        return np.uint64(0xFFFFFFFFFFFFFFFF)
    return a // b


@numba.njit(cache=True)
def urem(a, b):
    if b == 0:
        return a
    return a % b


@numba.njit(cache=True)
def ipow(base, exponent, signed):
    """Integer power by squaring with wrap-around (computed in uint64).

    A negative exponent gives 0, except base 1 (gives 1) and base -1 (gives ±1 by
    the exponent's parity), as XLA:CPU computes it."""
    if signed and exponent < 0:
        if base == 1:
            return np.uint64(1)
        if base == -1:
            if (-exponent) % 2 == 1:
                return np.uint64(0xFFFFFFFFFFFFFFFF)
            return np.uint64(1)
        return np.uint64(0)
    result = np.uint64(1)
    b = np.uint64(base)
    e = np.uint64(exponent)
    while e != 0:
        if e & np.uint64(1):
            result = result * b
        b = b * b
        e = e >> np.uint64(1)
    return result


@numba.njit(cache=True)
def clz(value, bits):
    """Leading zeros of the low ``bits`` bits of ``value`` (uint64)."""
    count = 0
    bit = np.uint64(1) << np.uint64(bits - 1)
    for _ in range(bits):
        if value & bit:
            break
        count += 1
        bit = bit >> np.uint64(1)
    return count


@numba.njit(cache=True)
def popcnt(value):
    count = 0
    v = value
    while v != 0:
        v = v & (v - np.uint64(1))
        count += 1
    return count


@numba.njit(cache=True)
def mulhi_u64(a, b):
    mask = np.uint64(0xFFFFFFFF)
    s32 = np.uint64(32)
    a_lo = a & mask
    a_hi = a >> s32
    b_lo = b & mask
    b_hi = b >> s32
    lo_lo = a_lo * b_lo
    hi_lo = a_hi * b_lo
    lo_hi = a_lo * b_hi
    hi_hi = a_hi * b_hi
    cross = (lo_lo >> s32) + (hi_lo & mask) + lo_hi
    return hi_hi + (hi_lo >> s32) + (cross >> s32)


@numba.njit(cache=True)
def mulhi_s64(a, b):
    ua = np.uint64(a)
    ub = np.uint64(b)
    hi = mulhi_u64(ua, ub)
    # signed correction: subtract the other operand for each negative operand
    if a < 0:
        hi = hi - ub
    if b < 0:
        hi = hi - ua
    return np.int64(hi)


@numba.njit(cache=True)
def _divrem_signed(a, b, out, rem):
    for i in range(a.size):
        out[i] = srem(a[i], b[i]) if rem else sdiv(a[i], b[i])


@numba.njit(cache=True)
def _divrem_unsigned(a, b, out, rem):
    for i in range(a.size):
        out[i] = urem(a[i], b[i]) if rem else udiv(a[i], b[i])


def divrem_array(a: np.ndarray, b: np.ndarray, *, remainder: bool) -> np.ndarray:
    """Elementwise integer divide or remainder of equal-shape int64/uint64 arrays."""
    a = np.ascontiguousarray(a).ravel()
    b = np.ascontiguousarray(b).ravel()
    out = np.empty_like(a)
    if a.dtype == np.int64:
        _divrem_signed(a, b, out, remainder)
    else:
        _divrem_unsigned(a, b, out, remainder)
    return out


@numba.njit(cache=True)
def _pow_kernel(a, b, out, signed):
    for i in range(a.size):
        out[i] = ipow(a[i], b[i], signed)


def pow_array(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer power of equal-shape int64 or uint64 arrays; returns uint64 bits."""
    signed = a.dtype == np.int64
    a = np.ascontiguousarray(a).ravel().astype(np.int64, copy=False) if signed else \
        np.ascontiguousarray(a).ravel().view(np.int64)
    b = np.ascontiguousarray(b).ravel().astype(np.int64, copy=False) if signed else \
        np.ascontiguousarray(b).ravel().view(np.int64)
    out = np.empty(a.size, np.uint64)
    _pow_kernel(a, b, out, signed)
    return out


@numba.njit(cache=True)
def _clz_kernel(a, bits, out):
    for i in range(a.size):
        out[i] = clz(a[i], bits)


@numba.njit(cache=True)
def _popcnt_kernel(a, out):
    for i in range(a.size):
        out[i] = popcnt(a[i])


def clz_array(u: np.ndarray, bits: int) -> np.ndarray:
    """Leading zeros of each uint64 value's low ``bits`` bits (int64 result)."""
    u = np.ascontiguousarray(u).ravel()
    out = np.empty(u.size, np.int64)
    _clz_kernel(u, bits, out)
    return out


def popcnt_array(u: np.ndarray) -> np.ndarray:
    u = np.ascontiguousarray(u).ravel()
    out = np.empty(u.size, np.int64)
    _popcnt_kernel(u, out)
    return out


@numba.njit(cache=True)
def _mulhi_s_kernel(a, b, out):
    for i in range(a.size):
        out[i] = mulhi_s64(a[i], b[i])


@numba.njit(cache=True)
def _mulhi_u_kernel(a, b, out):
    for i in range(a.size):
        out[i] = mulhi_u64(a[i], b[i])


def mulhi64_array(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """High 64 bits of the 128-bit product of int64 (or uint64) arrays."""
    a = np.ascontiguousarray(a).ravel()
    b = np.ascontiguousarray(b).ravel()
    out = np.empty_like(a)
    if a.dtype == np.int64:
        _mulhi_s_kernel(a, b, out)
    else:
        _mulhi_u_kernel(a, b, out)
    return out


@numba.njit(cache=True)
def _sum_f64_3d(x, out):
    """out[o, i] = sum over r of x[o, r, i], accumulated in f64 in index order."""
    n_outer, n_red, n_inner = x.shape
    for o in range(n_outer):
        for i in range(n_inner):
            out[o, i] = 0.0
        for r in range(n_red):
            for i in range(n_inner):
                out[o, i] += x[o, r, i]


@numba.njit(cache=True, fastmath={"reassoc"})
def _sum_rows_f64(x, out):
    """out[o] = sum of x[o, :] in f64; reassociation lets LLVM keep several partial
    sums (SIMD), which changes only the order of exact-ish f64 additions."""
    n_outer, n_red = x.shape
    for o in range(n_outer):
        acc = 0.0
        for r in range(n_red):
            acc += np.float64(x[o, r])
        out[o] = acc


_F32_F64 = (np.dtype(np.float32), np.dtype(np.float64))


def sum_f64(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray | None:
    """f64 sum of an f32/f64 array over adjacent ``axes`` (None if not adjacent)."""
    if len(axes) != 1:  # (one axis, the common case, needs neither sorting nor a range)
        axes = tuple(sorted(axes))
        if not axes or axes != tuple(range(axes[0], axes[-1] + 1)):
            return None
    # dtype objects, not scalar types: ``x.dtype == np.float32`` converts the type first
    if not x.flags.c_contiguous or x.dtype not in _F32_F64:
        return None
    shape = x.shape
    first, last = axes[0], axes[-1]  # adjacent: the reduced block is shape[first:last + 1]
    outer = math.prod(shape[:first])  # math.prod: np.prod costs ~3 µs a call
    red = shape[first] if first == last else math.prod(shape[first:last + 1])
    inner = math.prod(shape[last + 1:])
    out = np.empty((outer, inner), np.float64)
    if inner == 1:
        _sum_rows_f64(x.reshape(outer, red), out.reshape(outer))
    else:
        _sum_f64_3d(x.reshape(outer, red, inner), out)
    return out.reshape(shape[:first] + shape[last + 1:])
