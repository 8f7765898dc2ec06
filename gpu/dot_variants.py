"""``scaled-dot`` on the GPU (mirrors ``evaluator/dot_variants.py``).

Each operand is dequantized on the device into an f64 buffer, ``x * scale`` with the
scale broadcast in blocks (block size per dimension = operand size / scale size; a
rank-0 scale is 1), exact in f64 for the fp8/fp4 operands and e8m0/fp8 scales of
block-scaled formats; then ``dot`` (f64 accumulation, one rounding to the result
type), as the CPU does. ``ragged-dot`` still runs on the CPU.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from hloref.errors import HloEvalError
from hloref.types import F64

from .device import LOAD, DArray, empty, type_class, type_params
from .dot import dot
from .elementwise import launch
from .registry import GpuFallback, gpu_op
from .shape_ops import int_tuple, row_major_strides

OP_FAMILY = True

_REAL = ("f32", "f64", "narrow")


@functools.cache  # one kernel per (operand, scale) type class
def _dequant_kernel(xcls, scls):
    lx, ls = LOAD[xcls], LOAD[scls]

    @cuda.jit
    def k(x, s, out, n, dims, blocks, sstrides, px, ps):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            rem = i
            off = 0
            for d in range(len(dims) - 1, -1, -1):
                q = rem // dims[d]
                off += ((rem - q * dims[d]) // blocks[d]) * sstrides[d]
                rem = q
            out[i] = np.float64(lx(x[i], px)) * np.float64(ls(s[off], ps))
            i += step

    return k


def dequantize(x: DArray, scale: DArray, opcode: str) -> DArray:
    """``x * scale`` (the scale broadcast in blocks) as an f64 device array."""
    xcls, scls = type_class(x.et), type_class(scale.et)
    if xcls not in _REAL or scls not in _REAL:
        raise GpuFallback(f"{opcode} of {x.et.name} scaled by {scale.et.name}")
    if scale.ndim not in (0, x.ndim):
        raise HloEvalError(f"{opcode}: scale of rank {scale.ndim} for an operand of rank "
                           f"{x.ndim}")
    sdims = scale.shape if scale.ndim else (1,) * x.ndim
    for n, m in zip(x.shape, sdims):
        if m == 0 or n % m:
            raise HloEvalError(f"{opcode}: operand dimension {n} is not a multiple of the "
                               f"scale's {m}")
    out = empty(x.shape, F64)
    blocks = [n // m for n, m in zip(x.shape, sdims)]
    sst = row_major_strides(sdims) if scale.ndim else (0,) * x.ndim
    launch(_dequant_kernel(xcls, scls), out.size, x.data, scale.data, out.data, out.size,
           int_tuple(x.shape), int_tuple(blocks), int_tuple(sst) if x.ndim else (0,),
           type_params(x.et), type_params(scale.et))
    return out


@gpu_op("scaled-dot")
def scaled_dot(lhs, rhs, lhs_scale, rhs_scale, *, shape, lhs_batch_dims=(), rhs_batch_dims=(),
               lhs_contracting_dims=(), rhs_contracting_dims=()):
    if type_class(shape.element_type) not in _REAL:
        raise GpuFallback(f"scaled-dot with a {shape.element_type.name} result")
    a = dequantize(lhs, lhs_scale, "scaled-dot")
    b = dequantize(rhs, rhs_scale, "scaled-dot")
    return dot(a, b, shape=shape, lhs_batch_dims=lhs_batch_dims, rhs_batch_dims=rhs_batch_dims,
               lhs_contracting_dims=lhs_contracting_dims,
               rhs_contracting_dims=rhs_contracting_dims)
