"""``compare``, ``select`` and ``clamp`` on the GPU (mirrors ``evaluator/compare.py``).

FLOAT comparisons run in the compute type (narrow floats decoded exactly to f32);
TOTALORDER compares sign-magnitude keys of the bit patterns, as the CPU's
``total_order_keys``; integers compare as int64/uint64. ``select`` moves the storage
bits unchanged (any element type, NaN payloads kept); a ``select`` of tuples reads its
scalar predicate to the host. Complex ``compare`` (EQ/NE) compares both parts;
complex ``clamp`` falls back to the CPU.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from hloref.errors import HloEvalError
from hloref.evaluator.narrow import STYLE_E8M0, STYLE_FNUZ

from . import complex_elementwise
from .device import LOAD, f32_bits, f64_bits, host_scalar, type_class
from .elementwise import apply, element_kind, fmax, fmin, imax, imin
from .registry import GpuFallback, gpu_op


def _dfn(fn):
    return cuda.jit(device=True)(fn)


@_dfn
def _key_f32(x, p):
    b = f32_bits(x)
    mag = b & np.int64(0x7FFFFFFF)
    return -mag - np.int64(1) if (b >> np.int64(31)) != 0 else mag


@_dfn
def _key_f64(x, p):
    b = f64_bits(x)
    mag = b & np.int64(0x7FFFFFFFFFFFFFFF)
    return -mag - np.int64(1) if b < 0 else mag


@_dfn
def _key_narrow(x, p):
    b = np.int64(x)
    if p[4] == STYLE_E8M0:  # unsigned format: the raw bits
        return b
    bits = p[0]
    mag = b & ((np.int64(1) << (bits - 1)) - np.int64(1))
    if ((b >> (bits - 1)) & np.int64(1)) == 0:
        return mag
    if p[4] == STYLE_FNUZ and mag == 0:  # the single NaN (the -0 pattern) sorts first
        return -(np.int64(1) << np.int64(62))
    return -mag - np.int64(1)


LOAD["key_f32"] = _key_f32
LOAD["key_f64"] = _key_f64
LOAD["key_narrow"] = _key_narrow


@_dfn
def _eq(a, b):
    return np.int64(1) if a == b else np.int64(0)


@_dfn
def _ne(a, b):
    return np.int64(1) if a != b else np.int64(0)


@_dfn
def _lt(a, b):
    return np.int64(1) if a < b else np.int64(0)


@_dfn
def _le(a, b):
    return np.int64(1) if a <= b else np.int64(0)


@_dfn
def _gt(a, b):
    return np.int64(1) if a > b else np.int64(0)


@_dfn
def _ge(a, b):
    return np.int64(1) if a >= b else np.int64(0)


_DIRECTIONS = {"EQ": _eq, "NE": _ne, "LT": _lt, "LE": _le, "GT": _gt, "GE": _ge}
#: comparison direction -> device function ``(a, b) -> 0/1``
DIRECTIONS = _DIRECTIONS


@gpu_op("compare")
def compare(a, b, *, shape, direction, type=None):
    direction = str(direction)
    if direction not in _DIRECTIONS:
        raise HloEvalError(f"unknown comparison direction {direction}")
    cls = type_class(a.et)
    if cls == "complex":
        if direction not in ("EQ", "NE"):
            raise HloEvalError(f"compare direction {direction} is not defined on complex values")
        out_shape = max((a.shape, b.shape), key=len)
        return complex_elementwise.compare(direction, a, b, out_shape, shape.element_type)
    if cls not in ("sint", "uint", "pred", "f32", "f64", "narrow"):
        raise GpuFallback(f"compare of {a.et.name} has no GPU kernel")
    classes = None
    if element_kind(a.et) == "float" and type is not None and str(type) == "TOTALORDER":
        classes = ("key_" + cls,) * 2
    return apply(_DIRECTIONS[direction], (a, b), shape.element_type, in_classes=classes)


@_dfn
def _select(p, a, b):
    return a if p != 0 else b


@gpu_op("select")
def select(pred, on_true, on_false, *, shape):
    if isinstance(on_true, tuple):
        if pred.ndim != 0:
            raise HloEvalError("select of tuples needs a scalar predicate")
        return on_true if bool(host_scalar(pred)) else on_false
    return apply(_select, (pred, on_true, on_false), on_true.et, out_shape=on_true.shape,
                 in_classes=("pred", "raw", "raw"), out_class="raw")


@_dfn
def _clamp_f(lo, x, hi):
    return fmin(fmax(x, lo), hi)


@_dfn
def _clamp_i(lo, x, hi):
    return imin(imax(x, lo), hi)


@_dfn
def _clamp_p(lo, x, hi):
    return (x | lo) & hi


def clamp_fn(et):
    """The device element function ``(lo, x, hi)`` of ``clamp`` on ``et``."""
    fn = {"float": _clamp_f, "sint": _clamp_i, "uint": _clamp_i, "pred": _clamp_p}.get(element_kind(et))
    if fn is None:
        raise GpuFallback(f"clamp of {et.name} has no GPU kernel")
    return fn


@gpu_op("clamp")
def clamp(lo, x, hi, *, shape):
    if x.et.is_complex:  # the CPU's min(max(x, lo), hi) in the lexicographic order
        from . import complex_elementwise
        if lo.et != x.et or hi.et != x.et:
            raise HloEvalError("clamp operands must have one element type")
        high = complex_elementwise.binary("maximum", x, lo, x.shape, x.et)
        return complex_elementwise.binary("minimum", high, hi, x.shape, x.et)
    return apply(clamp_fn(x.et), (lo, x, hi), x.et, out_shape=x.shape)
