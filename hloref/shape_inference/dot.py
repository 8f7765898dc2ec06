"""Shape rule of dot."""

from __future__ import annotations

from ..shapes import Shape
from ..types import ElementType
from .common import ShapeError, as_array, check_dims_in_range, infer, int_list, make_array


@infer("dot")
def infer_dot(lhs: Shape, rhs: Shape, *, lhs_batch_dims=(), rhs_batch_dims=(),
              lhs_contracting_dims=(), rhs_contracting_dims=(),
              result_element_type: ElementType | None = None, **_):
    """``dot``: result dims = batch dims, lhs free dims, rhs free dims. The element
    type is free (mixed types allowed): ``result_element_type`` or the lhs type."""
    a = as_array(lhs, "dot lhs")
    b = as_array(rhs, "dot rhs")
    lb, rb = int_list(lhs_batch_dims, "lhs_batch_dims"), int_list(rhs_batch_dims, "rhs_batch_dims")
    lc = int_list(lhs_contracting_dims, "lhs_contracting_dims")
    rc = int_list(rhs_contracting_dims, "rhs_contracting_dims")
    check_dims_in_range(lb, a.rank, "dot lhs_batch_dims")
    check_dims_in_range(rb, b.rank, "dot rhs_batch_dims")
    check_dims_in_range(lc, a.rank, "dot lhs_contracting_dims")
    check_dims_in_range(rc, b.rank, "dot rhs_contracting_dims")
    if set(lb) & set(lc) or set(rb) & set(rc):
        raise ShapeError("dot: a dimension is both batch and contracting")
    if len(lb) != len(rb):
        raise ShapeError(f"dot: lhs_batch_dims {list(lb)} and rhs_batch_dims {list(rb)} differ in "
                         "length")
    if len(lc) != len(rc):
        raise ShapeError(f"dot: lhs_contracting_dims {list(lc)} and rhs_contracting_dims {list(rc)} "
                         "differ in length")
    for x, y in zip(lb, rb):
        if a.dims[x] != b.dims[y]:
            raise ShapeError(f"dot: batch dimension sizes differ: lhs dim {x} is {a.dims[x]}, rhs "
                             f"dim {y} is {b.dims[y]}")
    for x, y in zip(lc, rc):
        if a.dims[x] != b.dims[y]:
            raise ShapeError(f"dot: contracting dimension sizes differ: lhs dim {x} is {a.dims[x]}, "
                             f"rhs dim {y} is {b.dims[y]}")
    out = [a.dims[d] for d in lb]
    out += [d for i, d in enumerate(a.dims) if i not in lb and i not in lc]
    out += [d for i, d in enumerate(b.dims) if i not in rb and i not in rc]
    return make_array(result_element_type or a.element_type, out)
