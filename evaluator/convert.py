"""``convert`` (operation_semantics §ConvertElementType).

* float → float: exact widening, or one round-to-nearest-even from the exact value
  with the target's overflow/NaN/-0 rules (narrow targets through ``narrow``);
* float → int: NaN → 0, out-of-range values saturate, the rest truncate toward 0
  (XLA's ``literal.cc`` convention);
* int → float: round to nearest even once, also for 64-bit values above 2^53;
* int → int: two's-complement wrap; anything → pred: x != 0; pred → 1/0;
* complex → real drops the imaginary part; real → complex has imaginary 0.
"""

from __future__ import annotations

import numpy as np

from hloref.types import ElementType

from .numeric import element_type_of, from_float64, int_compute_dtype, to_float64, wrap_int
from .registry import op


def _int_to_float64_sticky(x: np.ndarray) -> np.ndarray:
    """int64/uint64 → f64 that rounds once more correctly to any ≤ 51-bit target.

    Values that need more than 53 bits are rounded to odd (the dropped bits are
    folded into the last kept bit), so the later rounding to the target is the
    correct single rounding of the integer."""
    negative = x < 0 if x.dtype == np.int64 else np.zeros(x.shape, bool)
    mag = np.where(negative, (-(x.astype(np.int64))).view(np.uint64) if x.dtype == np.int64 else 0,
                   x.view(np.uint64) if x.dtype == np.int64 else x).astype(np.uint64)
    big = mag >= np.uint64(1 << 53)
    if not np.any(big):
        return np.where(negative, -mag.astype(np.float64), mag.astype(np.float64))
    out = mag.astype(np.float64)
    m = mag[big]
    length = np.floor(np.log2(m.astype(np.float64))).astype(np.int64) + 1
    # float64 log2 can be one off near powers of two: fix the bit length exactly.
    length = np.where((m >> np.minimum(length, 63).astype(np.uint64)) != 0, length + 1, length)
    length = np.where((m >> np.maximum(length - 1, 0).astype(np.uint64)) == 0, length - 1, length)
    shift = (length - 53).astype(np.uint64)
    kept = m >> shift
    dropped = m & ((np.uint64(1) << shift) - np.uint64(1))
    kept = kept | (dropped != 0).astype(np.uint64)
    out[big] = np.ldexp(kept.astype(np.float64), shift.astype(np.int64))
    return np.where(negative, -out, out)


def _float_to_int(values: np.ndarray, et: ElementType) -> np.ndarray:
    """f64 values → integer type: NaN → 0, saturate, truncate toward zero."""
    lo, hi = et.min_value, et.max_value
    t = np.trunc(np.where(np.isnan(values), 0.0, values))
    too_low = t <= float(lo)
    too_high = t >= float(hi)
    safe = np.where(too_low | too_high, 0.0, t)
    dt = int_compute_dtype(et)
    out = safe.astype(dt)
    out = np.where(too_low, dt.type(lo), out)
    out = np.where(too_high, dt.type(hi), out)
    return wrap_int(out.astype(dt), et)


def convert_array(x: np.ndarray, et: ElementType) -> np.ndarray:
    src = element_type_of(x)
    if src == et:
        return x.copy()
    with np.errstate(all="ignore"):
        if et.is_pred:
            if src.is_float and src.is_narrow_float:
                return to_float64(x) != 0
            return x != 0
        if src.is_pred:
            return wrap_int(x.astype(np.int64), et) if et.is_integer else \
                from_float64(x.astype(np.float64), et) if et.is_float else x.astype(et.dtype)
        if src.is_complex:
            if et.is_complex:
                return x.astype(et.dtype)
            x = np.real(x)
            src = element_type_of(x)
        if et.is_complex:
            return to_float64(x).astype(et.dtype) if src.is_float else x.astype(et.dtype)
        if src.is_integer:
            wide = x.astype(int_compute_dtype(src))
            if et.is_integer:
                return wrap_int(wide if et.kind == src.kind or src.bits < 64 else
                                wide.view(int_compute_dtype(et)), et)
            if et.dtype in (np.dtype(np.float32), np.dtype(np.float64)):
                return wide.astype(et.dtype)  # numpy rounds int64 → f32/f64 once
            return from_float64(_int_to_float64_sticky(wide), et)
        # src is a float
        if et.is_integer:
            return _float_to_int(to_float64(x), et)
        if et.dtype == np.float64 or (et.dtype == np.float32 and src.dtype == np.float64):
            return x.astype(et.dtype)
        return from_float64(to_float64(x), et)


@op("convert")
def convert(x, *, shape):
    return convert_array(x, shape.element_type)
