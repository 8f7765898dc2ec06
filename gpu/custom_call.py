"""``custom-call`` on the GPU (mirrors ``evaluator/custom_call.py``).

Targets with a device version:

* the annotation targets XLA treats as identities (``Sharding``, ``MoveToHost``...: every
  target the CPU registry maps to the same identity function as ``Sharding``): the
  operand itself;
* ``__op$block_scaled_dot`` (lhs, rhs, lhs_scale, rhs_scale[, global_scale]): operands
  dequantized on the device in f64 (``dot_variants.dequantize``, scales broadcast in
  blocks along the last dimension), contracted on their last dimensions with leading
  dimensions as batch, times the global scale in f64, rounded once (the CPU's order of
  operations; the sum is f64 in another order than the CPU's einsum);
* ``TopK``: ``topk`` with ``largest=true`` (integers narrower than 64 bits, pred, floats).

Every other target (vendor libraries, LAPACK...) runs its CPU version: the visible
fallback (counted in the report, ``fallback=False`` refuses it).
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from hloref.errors import HloEvalError
from hloref.evaluator.custom_call import CUSTOM_CALLS
from hloref.shapes import ArrayShape
from hloref.types import F64

from .device import type_class
from .dot import dot
from .dot_variants import dequantize
from .elementwise import apply
from .registry import GpuFallback, gpu_op
from .sort import topk


def _is_identity(target: str) -> bool:
    fn = CUSTOM_CALLS.get(target)
    return fn is not None and fn is CUSTOM_CALLS.get("Sharding")


@cuda.jit(device=True)
def _times(a, b):
    return np.float64(a) * np.float64(b)


def _block_scaled_dot(operands, shape):
    if len(operands) not in (4, 5):
        raise HloEvalError("__op$block_scaled_dot takes lhs, rhs, lhs_scale, rhs_scale"
                           "[, global_scale]")
    if not isinstance(shape, ArrayShape) or type_class(shape.element_type) not in (
            "f32", "f64", "narrow"):
        raise GpuFallback(f"__op$block_scaled_dot with a {shape!r} result")
    lhs, rhs, ls, rs = operands[:4]
    for x, s in ((lhs, ls), (rhs, rs)):
        if s.ndim != x.ndim or any(a != b for a, b in zip(s.shape[:-1], x.shape[:-1])):
            raise HloEvalError(f"__op$block_scaled_dot: scale {list(s.shape)} for operand "
                               f"{list(x.shape)} (scales block the last dimension only)")
    a = dequantize(lhs, ls, "__op$block_scaled_dot")
    b = dequantize(rhs, rs, "__op$block_scaled_dot")
    rank = lhs.ndim
    batch = tuple(range(rank - 2)) if rank > 2 else ()
    dims = dict(lhs_batch_dims=batch, rhs_batch_dims=batch, lhs_contracting_dims=(rank - 1,),
                rhs_contracting_dims=(rank - 1,))
    if len(operands) == 4:
        return dot(a, b, shape=shape, **dims)
    wide = dot(a, b, shape=ArrayShape(F64, tuple(shape.dims)), **dims)
    g = operands[4]
    if g.size != 1:
        raise HloEvalError(f"__op$block_scaled_dot: the global scale has {g.size} elements")
    return apply(_times, (wide, g), shape.element_type, out_shape=tuple(shape.dims))


@gpu_op("custom-call", note="targets other than identities, __op$block_scaled_dot and TopK: "
                            "cpu fallback")
def custom_call(*operands, shape, custom_call_target):
    target = str(custom_call_target)
    if _is_identity(target):
        if len(operands) == 1:
            value = operands[0]
            if isinstance(shape, ArrayShape) and tuple(value.shape) != tuple(shape.dims):
                raise GpuFallback(f"{target} changes the shape")  # the CPU explains why
            return value
        return tuple(operands)
    if target == "__op$block_scaled_dot":
        return _block_scaled_dot(operands, shape)
    if target == "TopK":
        (x,) = operands
        if type_class(x.et) not in ("f32", "f64", "narrow", "pred") and not (
                type_class(x.et) in ("sint", "uint") and x.et.bits < 64):
            raise GpuFallback(f"TopK of {x.et.name}")
        values, idx = topk(x, shape=shape, k=shape.elements[0].dims[-1], largest=True)
        return values, idx
    raise GpuFallback(f"custom_call_target \"{target}\" has no GPU version")
