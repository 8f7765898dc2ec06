"""How far one rounded value may move: the element-level part of the envelope's runs.

``random_rounding`` is CESTAC random rounding (the neighbour on the exact result's
other side, or a directed neighbour); ``uniform`` a uniform error within a budget;
``flush_subnormals`` XLA:CPU's DAZ. The helpers say what a value's float type is and
how far apart its neighbours are (``float_type``, ``ulp_at``, ``is_narrow``).

The f32 add, subtract, multiply, divide and sqrt of ``random_rounding`` run as one
Numba loop (``_round_f32``): the same f64 reference result, the same comparison and the
same random draws as the numpy expression it replaced (``_random_rounding_numpy``, kept
for the other types), element for element, in one pass instead of a dozen temporaries.
"""

from __future__ import annotations

import math

import ml_dtypes
import numba
import numpy as np

from hloref.types import ElementType, from_dtype

from .compare import smallest_normal, ulp_of
from .rounding_kernels import has_subnormal, uniform_real

__all__ = ["float_type", "is_narrow", "ulp_at", "eps_of", "part_type", "to_f64", "magnitude",
           "ulp_of_value", "flush_subnormals", "random_rounding", "uniform"]


def float_type(value) -> ElementType | None:
    if not isinstance(value, np.ndarray):
        return None
    try:
        et = from_dtype(value.dtype)
    except Exception:  # noqa: BLE001 - not an HLO element type
        return None
    return et if (et.is_float or et.is_complex) else None


def eps_of(et: ElementType) -> float:
    if et.is_complex:
        return 2.0 ** -(23 if et.name == "c64" else 52)
    return 2.0 ** -et.float_format.mantissa_bits


def part_type(et: ElementType) -> ElementType:
    return from_dtype(np.float32 if et.name == "c64" else np.float64) if et.is_complex else et


def is_narrow(et: ElementType) -> bool:
    return et.is_float and et.bits <= 16


def ulp_at(value: np.ndarray, et: ElementType) -> np.ndarray:
    """The spacing of ``et`` at each element's magnitude (f64; complex: at |z|)."""
    if value.dtype in (np.float32, np.float64):
        with np.errstate(all="ignore"):
            return np.spacing(np.abs(np.where(np.isfinite(value), value, 0))).astype(np.float64)
    mag = np.abs(value.astype(np.complex128)) if et.is_complex else value.astype(np.float64)
    return ulp_of(np.nan_to_num(mag, nan=0.0, posinf=0.0, neginf=0.0), part_type(et))


def ulp_of_value(x):
    """The spacing of ``x``'s float (or complex part) type at each element; 0 for others."""
    et = float_type(x)
    return ulp_at(x, et) if et is not None else np.zeros(np.shape(x))


def to_f64(x: np.ndarray) -> np.ndarray:
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


def magnitude(x):
    """``|x|`` in ``x``'s type, leaf by leaf (integers and predicates as they are)."""
    if isinstance(x, tuple):
        return tuple(magnitude(v) for v in x)
    if not isinstance(x, np.ndarray) or x.dtype.kind in "biu" or x.dtype == np.bool_:
        return x
    if x.dtype.kind == "c":
        return np.abs(x).astype(x.dtype)
    with np.errstate(all="ignore"):
        return np.abs(x.astype(np.float64)).astype(x.dtype)


#: The smallest normal of each type whose subnormals are subnormal in f32 or f64
#: (f16's and the f8s' are normal f32 values when XLA:CPU computes them: not flushed).
_DAZ_TINY = {np.dtype(dt): smallest_normal(from_dtype(np.dtype(dt)))
             for dt in (np.float32, np.float64, ml_dtypes.bfloat16, np.complex64, np.complex128)}


def flush_subnormals(x):
    """``x`` with its subnormal elements (parts) replaced by a zero of the same sign,
    or ``x`` itself (the same object) when it has none."""
    tiny = _DAZ_TINY.get(getattr(x, "dtype", None))
    if tiny is None or x.size == 0:
        return x
    if x.dtype.kind == "c":
        re, im = x.real.copy(), x.imag.copy()
        fre, fim = flush_subnormals(re), flush_subnormals(im)
        if fre is re and fim is im:
            return x
        out = np.empty_like(x)
        out.real, out.imag = fre, fim
        return out
    if has_subnormal(x) is False:
        return x
    mag = np.abs(x.astype(np.float64) if x.dtype == ml_dtypes.bfloat16 else x)
    sub = (mag < tiny) & (mag > 0)
    if not sub.any():
        return x
    zeros = np.where(np.signbit(x.astype(np.float64) if x.dtype == ml_dtypes.bfloat16 else x),
                     -0.0, 0.0).astype(x.dtype)
    return np.where(sub, zeros, x)


# ---------------------------------------------------------------- random rounding

#: The f32 ops ``_round_f32`` computes (its ``op`` argument), by the numpy function the
#: perturber passes.
_F32_KERNEL_OPS = {np.add: 0, np.subtract: 1, np.multiply: 2, np.divide: 3, np.sqrt: 4}


@numba.njit(cache=True, error_model="numpy")
def _exact_f64(op, x, y):
    if op == 0:
        return x + y
    if op == 1:
        return x - y
    if op == 2:
        return x * y
    if op == 3:
        return x / y
    return math.sqrt(x) if x >= 0 else np.nan


@numba.njit(cache=True, error_model="numpy")
def _round_f32(op, a, b, value, draws, mode, out):
    """Random rounding of an f32 result, flat arrays: ``out`` (a copy of ``value``)
    takes the neighbour of ``value`` on the side of the f64 result of ``op`` (0 add,
    1 subtract, 2 multiply, 3 divide, 4 sqrt of ``a``) where that differs from
    ``value`` and the element flips: ``draws < 0.5`` (``mode`` 0), or the side is up
    (``mode`` > 0) or down (< 0); a NaN stays. The neighbour is ``nextafter`` by the
    bits: one step of the magnitude away from or towards zero (from a zero, the
    smallest subnormal of the side). Returns how many elements flipped."""
    bits = value.view(np.int32)
    out_bits = out.view(np.int32)
    flipped = 0
    for i in range(value.size):
        exact = _exact_f64(op, np.float64(a[i]), np.float64(b[i]))
        y = np.float64(value[i])
        up = exact > y
        if mode == 0:
            flip = (exact != y) & (draws[i] < 0.5) & (y == y)
        else:
            flip = (exact != y) & (up == (mode > 0)) & (y == y)
        v = bits[i]
        away = up != (v < 0)
        step = np.int32(1) if away else np.int32(-1)
        from_zero = np.int32(1) if up else np.int32(-2147483647)
        moved = from_zero if (v & np.int32(0x7FFFFFFF)) == 0 else v + step
        out_bits[i] = moved if flip else v
        flipped += flip
    return flipped


def random_rounding(rng, fn, operands, value, et, mode=None):
    """CESTAC random rounding: where the exact result of ``fn`` on ``operands`` is not
    representable, take the neighbour of ``value`` on the exact result's other side
    with probability 1/2 (``mode`` None; ``rng`` draws one f32 per element) or in the
    direction of ``mode`` (+1 up, -1 down). An exact result, a NaN or an infinity stays
    as it is; ``value`` itself is returned when nothing moves."""
    op = _F32_KERNEL_OPS.get(fn)
    if op is not None and value.dtype == np.float32 and \
            len(operands) == (1 if op == 4 else 2) and \
            all(isinstance(o, np.ndarray) and o.dtype == np.float32 and o.shape == value.shape
                for o in operands):
        draws = rng.random(value.shape, dtype=np.float32) if mode is None else \
            np.zeros(1, np.float32)
        a = np.ascontiguousarray(operands[0]).reshape(-1)
        b = np.ascontiguousarray(operands[-1]).reshape(-1)
        out = np.empty(value.shape, np.float32)  # every element written
        moved = _round_f32(op, a, b, np.ascontiguousarray(value).reshape(-1),
                           draws.reshape(-1), 0.0 if mode is None else float(mode),
                           out.reshape(-1))
        return out if moved else value
    return _random_rounding_numpy(rng, fn, operands, value, et, mode)


def _random_rounding_numpy(rng, fn, operands, value, et, mode=None):
    """``random_rounding`` for any type: the exact result in f64 (longdouble for f64)."""
    native = value.dtype in (np.float32, np.float64)
    wide_t = np.longdouble if et.bits > 32 else np.float64
    with np.errstate(all="ignore"):
        exact = fn(*[np.asarray(o).astype(wide_t) for o in operands])
        y = value.astype(wide_t)
        up = exact > y
        flip = exact != y  # NaN: nextafter keeps it NaN
        if mode is None:
            flip &= rng.random(value.shape, dtype=np.float32) < 0.5
        else:  # directed rounding: towards +inf (mode > 0) or -inf
            flip &= up == (mode > 0)
        if not flip.any():
            return value
        out = np.array(value, copy=True)
        v, u = value[flip], up[flip]
        if native:
            inf = value.dtype.type(np.inf)
            other = np.nextafter(v, np.where(u, inf, -inf))
        else:
            step = ulp_at(v, et) * np.where(u, 1.0, -1.0)
            other = (v.astype(np.float64) + step).astype(value.dtype)
            other = np.where(np.isfinite(other.astype(np.float64)), other, v)
        out[flip] = other
    return out


def uniform(rng, value, half_width, mode=None, out_dtype=None):
    """``value`` plus a uniform random error in [-half_width, half_width] (or, in a
    systematic ``mode``, that fraction of the half-width everywhere)."""
    if half_width is None or not isinstance(value, np.ndarray):
        return value
    et = float_type(value)
    if et is None:
        return value
    hw = np.asarray(half_width, np.float64)
    w = np.broadcast_to(hw, value.shape)
    with np.errstate(all="ignore"):
        if et.is_complex:
            z = value.astype(np.complex128)
            if mode is None:
                out = z + rng.uniform(-1, 1, value.shape) * w + \
                    1j * rng.uniform(-1, 1, value.shape) * w
            else:
                out = z + mode * w * (1 + 1j) / math.sqrt(2)
            out = np.where(np.isfinite(z), out, z)
        else:
            r = rng.uniform(-1, 1, value.shape) if mode is None else None
            big = float(ml_dtypes.finfo(value.dtype).max)
            fast = uniform_real(value, r, mode, hw, big) if out_dtype is None else None
            if fast is not None:
                return fast
            x = value.astype(np.float64)
            if r is None:
                r = np.full(value.shape, mode)
            out = x + r * w
            unbounded = (w >= big) & np.isfinite(x)
            if unbounded.any():  # no correct bits: anywhere in the finite range
                out = np.where(unbounded, np.where(r < 0, -big, big), out)
            out = np.where(np.isfinite(x), out, x)  # inf and NaN are not rounding
        if out_dtype is not None:
            return out.astype(out_dtype)
        cast = out.astype(value.dtype)
        keep = ~np.isfinite(to_f64(cast)) & np.isfinite(to_f64(value))
    return np.where(keep, value, cast) if np.any(keep) else cast
