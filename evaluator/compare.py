"""``compare``, ``select`` and ``clamp`` (operation_semantics §Comparison, §Select, §Clamp).

``compare`` honours ``direction`` and ``type``: FLOAT is the IEEE partial order
(NaN compares false except under NE), TOTALORDER orders
-NaN < -Inf < -finite < -0 < +0 < +finite < +Inf < +NaN by sign-magnitude of the
bits (types without -0: their single NaN, 0x80, sorts first, as a -NaN), SIGNED and
UNSIGNED compare integers. The default type follows the element type.
"""

from __future__ import annotations

import numpy as np

from hloref.errors import HloEvalError

from .elementwise import ieee_max_min, complex_max_min
from .numeric import compute_array, element_type_of, float_compute, int_compute_dtype
from .registry import op


_DIRECTIONS = {
    "EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
    "GT": np.greater, "GE": np.greater_equal,
}


def total_order_keys(x: np.ndarray) -> np.ndarray:
    """int64 keys whose integer order is the TOTALORDER of the float values ``x``."""
    et = element_type_of(x)
    fmt = et.float_format
    bits = x.view(np.dtype(f"u{x.dtype.itemsize}")).astype(np.uint64)
    if not fmt.signed:  # f8e8m0fnu: raw bits
        return bits.astype(np.int64)
    sign_bit = np.uint64(1) << np.uint64(et.bits - 1)
    magnitude = (bits & (sign_bit - np.uint64(1))).astype(np.int64)
    negative = (bits & sign_bit) != 0
    keys = np.where(negative, -magnitude - 1, magnitude)
    if fmt.nan_style == "fnuz":
        # the single NaN is the -0 pattern (0x80): it decodes as a negative NaN and sorts
        # first, like -NaN in IEEE types (XLA:CPU, checked against jaxlib 0.10.2)
        keys = np.where(negative & (magnitude == 0), np.int64(-(1 << 62)), keys)
    return keys


@op("compare")
def compare(a, b, *, shape, direction, type=None):
    direction = str(direction)
    if direction not in _DIRECTIONS:
        raise HloEvalError(f"unknown comparison direction {direction}")
    fn = _DIRECTIONS[direction]
    et = element_type_of(a)
    kind = str(type) if type is not None else None
    if et.is_complex:
        if direction not in ("EQ", "NE"):
            raise HloEvalError(f"compare direction {direction} is not defined on complex values")
        return fn(a, b)
    if et.is_float:
        if kind == "TOTALORDER":
            return fn(total_order_keys(a), total_order_keys(b))
        with np.errstate(invalid="ignore"):
            return fn(compute_array(a), compute_array(b))
    if et.is_pred:
        return fn(a.astype(np.uint8), b.astype(np.uint8))
    dt = int_compute_dtype(et)
    return fn(a.astype(dt), b.astype(dt))


@op("select")
def select(pred, on_true, on_false, *, shape):
    if isinstance(on_true, tuple):
        if pred.ndim != 0:
            raise HloEvalError("select of tuples needs a scalar predicate")
        return on_true if bool(pred) else on_false
    return np.where(pred, on_true, on_false).astype(on_true.dtype, copy=False)


@op("clamp")
def clamp(lo, x, hi, *, shape):
    et = element_type_of(x)
    if et.is_complex:
        return complex_max_min(False)(complex_max_min(True)(x, lo), hi)
    if et.is_float:
        mx, mn = ieee_max_min(True), ieee_max_min(False)
        return float_compute(lambda lo_, x_, hi_: mn(mx(x_, lo_), hi_), lo, x, hi, et=et)
    if et.is_pred:
        return np.logical_and(np.logical_or(x, lo), hi)
    dt = int_compute_dtype(et)
    out = np.minimum(np.maximum(x.astype(dt), lo.astype(dt)), hi.astype(dt))
    return np.broadcast_to(out, x.shape).astype(et.dtype)
