"""Shape rules of the ops with runtime indices or sizes: dynamic-slice,
dynamic-update-slice, get-dimension-size, set-dimension-size."""

from __future__ import annotations

from typing import Sequence

from ..shapes import ArrayShape, Shape
from ..types import S32
from .common import (ShapeError, as_array, check_dims_in_range, expect_same_type, infer, int_list,
                     make_array, required, shape_str)

def _check_scalar_indices(indices: Sequence[Shape], rank: int, op: str) -> None:
    """One integer scalar per operand dimension, all of one type; or XLA's legacy form
    (``shape_inference.cc``, ``InferDynamicSliceShape``, b/118437727), still parsed,
    verified and run by XLA (its DynamicIndexSplitter pass splits it): a single
    rank-1 integer array of ``rank`` start indices."""
    if indices and isinstance(indices[0], ArrayShape) and indices[0].rank == 1:
        if len(indices) != 1:
            raise ShapeError(f"{op}: a rank-1 start index array must be the only start index "
                             f"operand, got {len(indices)} start index operands")
        s = indices[0]
        if not s.element_type.is_integer or s.dims[0] != rank:
            raise ShapeError(f"{op}: start indices {shape_str(s)} must be an integer array of "
                             f"{rank} (the operand rank) elements")
        return
    if len(indices) != rank:
        raise ShapeError(f"{op}: expected {rank} scalar start indices (one per operand dimension), "
                         f"got {len(indices)}")
    first = None
    for i, s in enumerate(indices):
        s = as_array(s, f"{op} start index {i}")
        if s.dims or not s.element_type.is_integer:
            raise ShapeError(f"{op}: start index {i} must be an integer scalar, got {shape_str(s)}")
        if first is not None and s.element_type != first:
            raise ShapeError(f"{op}: start indices must all have the same type, got "
                             f"{first.name} and {s.element_type.name}")
        first = s.element_type


@infer("dynamic-slice")
def infer_dynamic_slice(operand: Shape, *start_indices: Shape, dynamic_slice_sizes=None, **_):
    """``dynamic-slice(operand, i0, ..., i{r-1})``: 0 <= size <= operand dim."""
    a = as_array(operand, "dynamic-slice operand")
    _check_scalar_indices(start_indices, a.rank, "dynamic-slice")
    sizes = int_list(required(dynamic_slice_sizes, "dynamic_slice_sizes"), "dynamic_slice_sizes")
    if len(sizes) != a.rank:
        raise ShapeError(f"dynamic-slice: dynamic_slice_sizes has {len(sizes)} entries, operand rank "
                         f"is {a.rank}")
    for i, (s, d) in enumerate(zip(sizes, a.dims)):
        if not 0 <= s <= d:
            raise ShapeError(f"dynamic-slice: slice size {s} of dimension {i} not in [0, {d}]")
    return make_array(a.element_type, sizes)


@infer("dynamic-update-slice")
def infer_dynamic_update_slice(operand: Shape, update: Shape, *start_indices: Shape, **_):
    """``dynamic-update-slice(operand, update, i0, ...)``: update fits in operand; operand's shape."""
    a = as_array(operand, "dynamic-update-slice operand")
    u = as_array(update, "dynamic-update-slice update")
    if u.rank != a.rank:
        raise ShapeError(f"dynamic-update-slice: update rank {u.rank} != operand rank {a.rank}")
    expect_same_type(a, u, "dynamic-update-slice", "operand and update")
    for i, (ud, od) in enumerate(zip(u.dims, a.dims)):
        if ud > od:
            raise ShapeError(f"dynamic-update-slice: update dimension {i} ({ud}) exceeds operand "
                             f"dimension ({od})")
    _check_scalar_indices(start_indices, a.rank, "dynamic-update-slice")
    return make_array(a.element_type, a.dims)


@infer("get-dimension-size")
def infer_get_dimension_size(operand: Shape, *, dimensions=None, **_):
    """``get-dimension-size``: ``dimensions={d}`` within rank; s32[] result."""
    a = as_array(operand, "get-dimension-size operand")
    dims = int_list(required(dimensions, "dimensions"), "dimensions")
    if len(dims) != 1:
        raise ShapeError(f"get-dimension-size: dimensions must have one entry, got {list(dims)}")
    check_dims_in_range(dims, a.rank, "get-dimension-size dimensions")
    return make_array(S32, ())


@infer("set-dimension-size")
def infer_set_dimension_size(operand: Shape, size: Shape, *, dimensions=None, **_):
    """``set-dimension-size(operand, s32[] size)``: operand's shape (that dim dynamic)."""
    a = as_array(operand, "set-dimension-size operand")
    s = as_array(size, "set-dimension-size size")
    if s.dims or s.element_type != S32:
        raise ShapeError(f"set-dimension-size: size must be s32[], got {shape_str(s)}")
    dims = int_list(required(dimensions, "dimensions"), "dimensions")
    if len(dims) != 1:
        raise ShapeError(f"set-dimension-size: dimensions must have one entry, got {list(dims)}")
    check_dims_in_range(dims, a.rank, "set-dimension-size dimensions")
    return make_array(a.element_type, a.dims)
