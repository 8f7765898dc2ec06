"""``convert`` on the GPU (mirrors ``evaluator/convert.py``), same rules as the CPU:

* float -> float: the exact value rounded once (narrow targets: ``encode_scalar`` from
  the exact f64 value; f32 targets: f64 -> f32 round-to-nearest-even);
* float -> int: NaN -> 0, out-of-range values saturate, the rest truncate toward 0;
* int -> f32/f64: one rounding (hardware int -> float conversion, RNE); int -> narrow
  float: through f64 rounded to odd above 2**53 (sticky bit), then one rounding;
* int -> int: two's-complement wrap; anything -> pred: x != 0; pred -> 1/0;
* complex: part by part between complex types; complex -> real drops the imaginary part;
  real -> complex has imaginary part 0 (the real value rounded once to the part type).
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from hloref.types import F32, F64

from . import complex_elementwise
from .device import DArray, empty, to_device, trunc64, type_class
from .elementwise import apply, element_kind, same
from .registry import GpuFallback, gpu_op


def _dfn(fn):
    return cuda.jit(device=True)(fn)


@_dfn
def _nonzero(x):
    return np.int64(1) if x != 0 else np.int64(0)


@_dfn
def _to_f64(x):
    return np.float64(x)


@_dfn
def _u64_sticky(m):
    """uint64 ``m`` -> f64, rounded to odd when it needs more than 53 bits."""
    if m < np.uint64(9007199254740992):  # 2**53
        return np.float64(m)
    length = 0
    t = m
    while t != np.uint64(0):
        t = t >> np.uint64(1)
        length += 1
    shift = length - 53
    kept = m >> np.uint64(shift)
    if (m & ((np.uint64(1) << np.uint64(shift)) - np.uint64(1))) != np.uint64(0):
        kept = kept | np.uint64(1)
    r = np.float64(kept)
    for _ in range(shift):
        r = r * 2.0
    return r


@_dfn
def _s64_sticky(v):
    if v < 0:
        return -_u64_sticky(np.uint64(0) - np.uint64(v))
    return _u64_sticky(np.uint64(v))


_FLOAT_TO_INT: dict = {}


def _float_to_int(et):
    fn = _FLOAT_TO_INT.get(et.name)
    if fn is not None:
        return fn
    lo, hi = float(et.min_value), float(et.max_value)
    ilo, ihi = et.min_value, et.max_value
    if et.kind == "sint":
        @_dfn
        def fn(x):
            t = trunc64(np.float64(x))
            if t != t:
                return np.int64(0)
            if t <= lo:
                return np.int64(ilo)
            if t >= hi:
                return np.int64(ihi)
            return np.int64(t)
    else:
        @_dfn
        def fn(x):
            t = trunc64(np.float64(x))
            if t != t:
                return np.uint64(0)
            if t <= lo:
                return np.uint64(ilo)
            if t >= hi:
                return np.uint64(ihi)
            return np.uint64(t)
    _FLOAT_TO_INT[et.name] = fn
    return fn


def convert_fn(src, et):
    """``(element function, input class, output class)`` converting ``src`` to ``et``."""
    src_kind, dst_kind = element_kind(src), element_kind(et)
    ok = ("sint", "uint", "pred", "float")
    if src_kind not in ok or dst_kind not in ok:
        raise GpuFallback(f"convert {src.name} -> {et.name} has no GPU kernel")
    if src == et:
        return same, "raw", "raw"
    fn = same  # int -> int (wrap on store), int -> f32/f64 (one rounding on store),
    # float -> float (exact value, one rounding on store), pred -> int
    if dst_kind == "pred":
        fn = _nonzero
    elif src_kind == "float" and dst_kind in ("sint", "uint"):
        fn = _float_to_int(et)
    elif src_kind in ("sint", "uint") and type_class(et) == "narrow":
        fn = _s64_sticky if src_kind == "sint" else _u64_sticky
    elif src_kind == "pred" and dst_kind == "float":
        fn = _to_f64
    return fn, type_class(src), type_class(et)


def convert_array(x: DArray, et) -> DArray:
    fn, cin, cout = convert_fn(x.et, et)
    return apply(fn, (x,), et, in_classes=(cin,), out_class=cout)


def _part_type(et):
    return F32 if et.name == "c64" else F64


def real_to_complex(x: DArray, et) -> DArray:
    """``x`` (real, pred or integer) as complex ``et``: the value rounded once to the
    part type, imaginary part 0 (the CPU's ``astype``)."""
    part = _part_type(et)
    re = convert_array(x, part) if x.et != part else x
    zero = to_device(np.zeros(1, part.dtype))
    return complex_elementwise.compose(re, zero, x.shape, et)


def complex_convert(x: DArray, et) -> DArray:
    """Conversions with a complex source or result, composed of device kernels: complex
    to complex part by part, complex to real through the real part (the imaginary part
    is dropped, as on the CPU), real to complex with imaginary part 0."""
    if x.et.is_complex and et.is_complex:
        src_part, dst_part = _part_type(x.et), _part_type(et)
        flat = DArray(complex_elementwise.parts(x), (2 * x.size,), src_part)
        wide = convert_array(flat, dst_part) if src_part != dst_part else flat
        out = empty(x.shape, et)
        if x.size:
            complex_elementwise.parts(out).copy_to_device(wide.data)
        return out
    if x.et.is_complex and et.is_pred:  # x != 0: either part nonzero
        zero = to_device(np.zeros(1, x.et.dtype))
        return complex_elementwise.compare("NE", x, zero, x.shape, et)
    if x.et.is_complex:
        re = complex_elementwise.unary("real", x, _part_type(x.et))
        return convert_array(re, et) if re.et != et else re
    return real_to_complex(x, et)


@gpu_op("convert")
def convert(x, *, shape):
    if x.et.is_complex or shape.element_type.is_complex:
        return complex_convert(x, shape.element_type)
    return convert_array(x, shape.element_type)
