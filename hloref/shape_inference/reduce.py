"""Shape rules of reduce, and the reducer signature check shared with the other
accumulating ops (reduce-window, select-and-scatter, scatter, all-reduce)."""

from __future__ import annotations

from typing import Sequence

from ..shapes import ArrayShape, Shape, TupleShape
from ..types import ElementType
from .common import (ShapeError, as_array, check_dims_in_range, infer, int_list, make_array,
                     program_shape, required, same_shape, shape_str,
                     tuple_or_single)


def check_reducer(prog, inits: Sequence[ArrayShape], inputs: Sequence[ArrayShape], op: str,
                   what: str = "to_apply") -> list[ElementType]:
    """XLA's reducer check (fp precision ignored); returns the accumulator types."""
    n = len(inits)
    if prog is None:
        return [i.element_type for i in inits]
    params, result = prog
    if len(params) != 2 * n:
        raise ShapeError(f"{op}: {what} must take {2 * n} parameters, takes {len(params)}")
    accs = list(result.elements) if isinstance(result, TupleShape) else [result]
    if len(accs) != n or (n > 1 and not isinstance(result, TupleShape)):
        raise ShapeError(f"{op}: {what} must return {'a scalar' if n == 1 else f'a tuple of {n} scalars'}"
                         f", returns {shape_str(result)}")
    for i in range(n):
        acc = accs[i]
        if not (isinstance(acc, ArrayShape) and acc.dims == ()):
            raise ShapeError(f"{op}: {what} must return scalars, returns {shape_str(result)}")
        if not same_shape(acc, params[i]):
            raise ShapeError(f"{op}: {what} parameter {i} {shape_str(params[i])} differs from its "
                             f"result {shape_str(acc)}")
        if not same_shape(acc, inits[i], ignore_fp_precision=True):
            raise ShapeError(f"{op}: {what} accumulator {shape_str(acc)} differs from init value "
                             f"{i} {shape_str(inits[i])}")
        elem = make_array(inputs[i].element_type, ())
        if not same_shape(elem, params[n + i], ignore_fp_precision=True):
            raise ShapeError(f"{op}: {what} parameter {n + i} {shape_str(params[n + i])} differs from "
                             f"input {i}'s element type {inputs[i].element_type.name}")
    return [a.element_type for a in accs]


def split_inputs_inits(operands: Sequence[Shape], op: str):
    if len(operands) < 2 or len(operands) % 2:
        raise ShapeError(f"{op}: expects N inputs and N init values (an even number >= 2 of "
                         f"operands), got {len(operands)}")
    n = len(operands) // 2
    inputs = [as_array(o, f"{op} input {i}") for i, o in enumerate(operands[:n])]
    inits = [as_array(o, f"{op} init value {i}") for i, o in enumerate(operands[n:])]
    for i, s in enumerate(inits):
        if s.dims:
            raise ShapeError(f"{op}: init value {i} must be a scalar, got {shape_str(s)}")
    for i, s in enumerate(inputs):
        if s.dims != inputs[0].dims:
            raise ShapeError(f"{op}: input {i} dims {list(s.dims)} differ from input 0 "
                             f"{list(inputs[0].dims)}")
    return inputs, inits


@infer("reduce")
def infer_reduce(*operands: Shape, dimensions=None, to_apply=None, **_):
    """``reduce(in..., init...)``: removes ``dimensions``; tuple result when N > 1."""
    inputs, inits = split_inputs_inits(operands, "reduce")
    dims = int_list(required(dimensions, "dimensions"), "dimensions")
    check_dims_in_range(dims, inputs[0].rank, "reduce dimensions")
    ets = check_reducer(program_shape(to_apply), inits, inputs, "reduce")
    kept = [d for i, d in enumerate(inputs[0].dims) if i not in dims]
    return tuple_or_single([make_array(et, kept) for et in ets])
