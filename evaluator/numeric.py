"""Element-type behaviour in one place: compute types, wrap-around, rounding back.

Every op family goes through these helpers instead of branching on dtype itself.
The rules (see ``docs/semantics.md``):

* integers compute in int64 (signed) or uint64 (unsigned) and wrap to their width
  (two's complement), as XLA's HloEvaluator does;
* f32, f64 and complex compute in their own type for arithmetic;
* floats narrower than f32 (f16, bf16, every f8, f4e2m1fn, f8e8m0fnu) are decoded
  exactly to f32, computed, and rounded once to nearest even into their own type;
* transcendental functions of f32 and narrower floats are computed in f64 and rounded
  once (nearly always the correctly rounded result); f64 uses the host libm.
"""

from __future__ import annotations

import numpy as np

from hloref.types import ElementType, from_dtype

from . import narrow

__all__ = [
    "element_type_of", "compute_array", "finish", "wrap_int", "int_compute_dtype",
    "to_float64", "from_float64", "float_compute", "float_compute_f64", "as_type", "contiguous",
]


def element_type_of(x: np.ndarray) -> ElementType:
    return from_dtype(x.dtype)


def int_compute_dtype(et: ElementType) -> np.dtype:
    return np.dtype(np.int64) if et.kind == "sint" else np.dtype(np.uint64)


def wrap_int(values: np.ndarray, et: ElementType) -> np.ndarray:
    """int64/uint64 ``values`` wrapped to ``et``'s width, as an array of ``et``'s dtype."""
    values = np.asarray(values)
    if et.kind == "pred":
        return values != 0
    if et.bits >= 8:
        return values.astype(et.dtype, copy=False) if values.dtype != et.dtype else values
    mask = (1 << et.bits) - 1
    u = values.astype(np.int64, copy=False) & mask
    if et.kind == "sint":
        sign = 1 << (et.bits - 1)
        u = np.where(u >= sign, u - (1 << et.bits), u)
    return u.astype(et.dtype)


def compute_array(x: np.ndarray) -> np.ndarray:
    """``x`` in the type arithmetic runs in: int64/uint64, f32 (for narrow floats), or itself."""
    et = element_type_of(x)
    if et.is_integer:
        return x.astype(int_compute_dtype(et), copy=False)
    if et.is_narrow_float:
        # exact widening; ml_dtypes' cast is C code and equals narrow.decode bit for bit
        # (tests/test_narrow.py checks every pattern of every type)
        return x.astype(np.float32)
    return x


def finish(values: np.ndarray, et: ElementType) -> np.ndarray:
    """Round or wrap computed ``values`` into element type ``et`` (once)."""
    values = np.asarray(values)
    if et.is_integer or et.is_pred:
        return wrap_int(values, et)
    if et.is_narrow_float:
        if values.dtype == np.float32:
            # f32 sources: ml_dtypes' cast rounds exactly as narrow.encode (tests/test_narrow.py
            # checks both agree on every f32 pattern class), and is several times faster
            with np.errstate(over="ignore", invalid="ignore"):
                return values.astype(et.dtype)
        return narrow.from_float(values, et)  # f64: one rounding (ml_dtypes would round twice)
    if values.dtype == et.dtype:
        return values
    with np.errstate(over="ignore", invalid="ignore"):  # f64 -> f32 overflow is inf, by design
        return values.astype(et.dtype)


def to_float64(x: np.ndarray) -> np.ndarray:
    """Exact f64 value of a float array of any width (complex: c128)."""
    et = element_type_of(x)
    if et.is_narrow_float:
        return narrow.to_f64(x)
    if et.is_complex:
        return x.astype(np.complex128, copy=False)
    return x.astype(np.float64, copy=False)


def from_float64(values: np.ndarray, et: ElementType) -> np.ndarray:
    """Round f64 (or c128) ``values`` once into float/complex type ``et``."""
    if et.is_narrow_float:
        return narrow.from_float(values, et)
    return values.astype(et.dtype)


def float_compute(fn, *xs: np.ndarray, et: ElementType) -> np.ndarray:
    """Apply an arithmetic ``fn`` in the compute type of float ``et`` and round once."""
    with np.errstate(all="ignore"):
        return finish(fn(*(compute_array(x) for x in xs)), et)


def float_compute_f64(fn, *xs: np.ndarray, et: ElementType) -> np.ndarray:
    """Apply a transcendental ``fn``: in f64 (c128) for types up to f32 (c64), round once."""
    with np.errstate(all="ignore"):
        if et.dtype in (np.dtype(np.float64), np.dtype(np.complex128)):
            return np.asarray(fn(*xs)).astype(et.dtype, copy=False)
        return from_float64(np.asarray(fn(*(to_float64(x) for x in xs))), et)


def as_type(values, et: ElementType) -> np.ndarray:
    """A Python/numpy value as an array of ``et`` (exact for values of that type)."""
    arr = np.asarray(values)
    if arr.dtype == et.dtype:
        return arr
    if et.is_narrow_float:
        return narrow.from_float(arr.astype(np.float64), et)
    return arr.astype(et.dtype)


def contiguous(x: np.ndarray) -> np.ndarray:
    """``x`` in C order (copied only if needed); unlike ``np.ascontiguousarray`` keeps 0-d."""
    x = np.asarray(x)
    return x if x.flags.c_contiguous else x.copy(order="C")
