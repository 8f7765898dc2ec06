"""Shape rules of sort and topk."""

from __future__ import annotations

from ..shapes import ArrayShape, Shape, TupleShape
from ..types import PRED, S32
from .common import (ShapeError, arrays_of_equal_dims, as_array, check_dims_in_range, infer,
                     int_list, make_array, program_shape, required, same_shape, shape_str,
                     tuple_or_single)


@infer("sort")
def infer_sort(*operands: Shape, dimensions=None, to_apply=None, is_stable=None, **_):
    """``sort``: arrays of equal dims; comparator takes 2N scalars, returns pred[]."""
    arrs = arrays_of_equal_dims(operands, "sort")
    dims = int_list(required(dimensions, "dimensions"), "dimensions")
    if len(dims) != 1:
        raise ShapeError(f"sort: dimensions must have one entry, got {list(dims)}")
    check_dims_in_range(dims, arrs[0].rank, "sort dimensions")
    prog = program_shape(required(to_apply, "to_apply"))
    if prog is not None:
        params, r = prog
        if len(params) != 2 * len(arrs):
            raise ShapeError(f"sort: comparator must take {2 * len(arrs)} parameters, takes "
                             f"{len(params)}")
        for k, p in enumerate(params):
            want = make_array(arrs[k // 2].element_type, ())
            if not same_shape(p, want):
                raise ShapeError(f"sort: comparator parameter {k} must be {shape_str(want)}, got "
                                 f"{shape_str(p)}")
        if not (isinstance(r, ArrayShape) and r.dims == () and r.element_type == PRED):
            raise ShapeError(f"sort: comparator must return pred[], returns {shape_str(r)}")
    return tuple_or_single([make_array(a.element_type, a.dims) for a in arrs])


@infer("topk")
def infer_topk(operand: Shape, *, k=None, largest=None, **_):
    """``topk``: rank >= 1, 0 <= k <= last dim; (values[..., k], s32[..., k])."""
    a = as_array(operand, "topk operand")
    kk = int(required(k, "k"))
    if a.rank < 1:
        raise ShapeError("topk: operand must have rank >= 1")
    if not 0 <= kk <= a.dims[-1]:
        raise ShapeError(f"topk: k={kk} must be within [0, {a.dims[-1]}] (the last dimension)")
    dims = a.dims[:-1] + (kk,)
    return TupleShape((make_array(a.element_type, dims), make_array(S32, dims)))
