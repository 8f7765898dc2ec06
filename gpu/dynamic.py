"""Bounded dynamic shapes on the GPU (mirrors ``evaluator/dynamic.py``).

The size rules are the CPU's (``evaluator.dynamic.dynamic_step``): the runtime sizes
are host-side ints beside the device buffers (a few per value, as XLA keeps them), and
the data work runs on the device through :data:`DEVICE_ARRAYS`, whose methods are
those of ``evaluator.dynamic.HostArrays``: cutting a value's valid part (one gather
kernel), embedding a result at the origin of its bound with zero padding (pad's kernel,
``shape_ops.place``),
concatenating valid parts, repeating a size-1 dimension (a gather with stride 0). The
ops themselves are the GPU ops, given the valid parts. The only host reads are the
small values the sizes come from: a ``set-dimension-size`` size, ``dynamic-reshape``'s
dimensions, a ``dynamic-slice`` start on a dynamic dimension, and (as everywhere on
this backend) a while predicate or conditional selector.

``set-dimension-size`` and ``dynamic-reshape`` have GPU ops in their families' modules
(``gpu/indexing.py``, ``gpu/shape_ops.py``) so that the interpreter prepares them on
the device; the runtime sizes themselves are recorded by the interpreter's
``dynamic_step`` path.
"""

from __future__ import annotations

import numpy as np

from hloref.evaluator.dynamic import HostArrays

from .device import DArray, to_device
from .elementwise import zeros
from .shape_ops import concatenate, gather, place, row_major_strides

__all__ = ["DeviceArrays", "DEVICE_ARRAYS"]


class _Dims:
    """The ``shape`` argument of a GPU op that reads only ``dims``."""

    __slots__ = ("dims",)

    def __init__(self, dims):
        self.dims = tuple(int(d) for d in dims)


class DeviceArrays(HostArrays):
    """``HostArrays``' operations on device arrays (``DArray``), as device kernels."""

    @staticmethod
    def valid_part(x: DArray, sizes) -> DArray:
        if sizes is None or tuple(int(s) for s in sizes) == x.shape:
            return x
        return gather(x, [int(s) for s in sizes], row_major_strides(x.shape))

    @staticmethod
    def embed(valid: DArray, dims) -> DArray:
        dims = tuple(int(d) for d in dims)
        if valid.shape == dims:
            return valid
        # at the same coordinates, 0 (all storage bits zero) past the valid extents
        return place(valid, zeros((1,), valid.et).data, tuple(dims), (0,) * len(dims),
                     (1,) * len(dims))

    @staticmethod
    def concatenate(parts, axis) -> DArray:
        dims = list(parts[0].shape)
        dims[axis] = sum(p.shape[axis] for p in parts)
        return concatenate(*parts, shape=_Dims(dims), dimensions=(axis,))

    @staticmethod
    def repeat_first(x: DArray, axis) -> DArray:
        strides = list(row_major_strides(x.shape))
        strides[axis] = 0
        return gather(x, x.shape, strides)

    @staticmethod
    def zeros(dims, et) -> DArray:
        return zeros(tuple(dims), et)

    @staticmethod
    def reshape(x: DArray, dims) -> DArray:
        return x.reshape(tuple(dims))  # free: valid parts are compact

    @staticmethod
    def compact(x: DArray) -> DArray:
        return x

    @staticmethod
    def to_host(x):
        return x.to_host() if isinstance(x, DArray) else np.asarray(x)

    @staticmethod
    def from_host(x):
        return to_device(x)


#: the GPU interpreter's arrays (``Interpreter.arrays``)
DEVICE_ARRAYS = DeviceArrays()
