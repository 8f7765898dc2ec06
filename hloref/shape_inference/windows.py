"""Shape rules of the windowed reductions: reduce-window, select-and-scatter."""

from __future__ import annotations

from ..attrs import WindowDim
from ..shapes import ArrayShape, Shape
from ..types import PRED
from .common import (ShapeError, as_array, expect_same_type, infer, make_array, program_shape,
                     required, same_shape, shape_str, tuple_or_single,
                     window_dims, window_output_dim)
from .reduce import check_reducer, split_inputs_inits

@infer("reduce-window")
def infer_reduce_window(*operands: Shape, window=None, to_apply=None, **_):
    """``reduce-window(in..., init...)``: window over every dimension."""
    inputs, inits = split_inputs_inits(operands, "reduce-window")
    wdims = window_dims(window)
    rank = inputs[0].rank
    if window is None:
        wdims = tuple(WindowDim(1) for _ in range(rank))
    if len(wdims) != rank:
        raise ShapeError(f"reduce-window: window has {len(wdims)} dimensions, operand rank is {rank}")
    ets = check_reducer(program_shape(to_apply), inits, inputs, "reduce-window")
    out = [window_output_dim(d, w) for d, w in zip(inputs[0].dims, wdims)]
    return tuple_or_single([make_array(et, out) for et in ets])


@infer("select-and-scatter")
def infer_select_and_scatter(operand: Shape, source: Shape, init_value: Shape, *, window=None,
                             select=None, scatter=None, **_):
    """``select-and-scatter``: source has the windowed shape of operand; operand's shape."""
    a = as_array(operand, "select-and-scatter operand")
    s = as_array(source, "select-and-scatter source")
    i = as_array(init_value, "select-and-scatter init value")
    if i.dims:
        raise ShapeError(f"select-and-scatter: init value must be a scalar, got {shape_str(i)}")
    expect_same_type(s, i, "select-and-scatter", "source and init value")
    wdims = window_dims(window) if window is not None else tuple(WindowDim(1) for _ in a.dims)
    if len(wdims) != a.rank:
        raise ShapeError(f"select-and-scatter: window has {len(wdims)} dimensions, operand rank is "
                         f"{a.rank}")
    expect = tuple(window_output_dim(d, w) for d, w in zip(a.dims, wdims))
    if s.dims != expect:
        raise ShapeError(f"select-and-scatter: source dims {list(s.dims)} must equal the windowed "
                         f"operand dims {list(expect)}")
    sel = program_shape(required(select, "select"))
    if sel is not None:
        params, r = sel
        elem = make_array(a.element_type, ())
        if len(params) != 2 or not all(same_shape(p, elem) for p in params):
            raise ShapeError(f"select-and-scatter: select must take two {shape_str(elem)} parameters")
        if not (isinstance(r, ArrayShape) and r.dims == () and r.element_type == PRED):
            raise ShapeError(f"select-and-scatter: select must return pred[], returns {shape_str(r)}")
    check_reducer(program_shape(required(scatter, "scatter")), [i], [s], "select-and-scatter", "scatter")
    return make_array(a.element_type, a.dims)
