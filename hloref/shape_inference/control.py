"""Shape rules of tuples, calls and control flow: tuple, get-tuple-element, call,
fusion, while, conditional, after-all, add-dependency, map."""

from __future__ import annotations

from typing import Sequence

from ..shapes import ArrayShape, Shape, TokenShape, TupleShape
from ..types import PRED, S32
from .common import (ShapeError, arrays_of_equal_dims, as_array, infer, int_list, make_array,
                     program_shape, required, same_shape, shape_str)


@infer("tuple")
def infer_tuple(*operands: Shape, **_):
    """``tuple``: the tuple of the operand shapes."""
    return TupleShape(tuple(operands))


@infer("get-tuple-element")
def infer_get_tuple_element(operand: Shape, *, index=None, **_):
    """``get-tuple-element``: 0 <= index < tuple size."""
    if not isinstance(operand, TupleShape):
        raise ShapeError(f"get-tuple-element: operand must be a tuple, got {shape_str(operand)}")
    i = int(required(index, "index"))
    if not 0 <= i < len(operand.elements):
        raise ShapeError(f"get-tuple-element: index {i} out of range for a tuple of "
                         f"{len(operand.elements)} elements {shape_str(operand)}")
    return operand.elements[i]


def _check_call_params(prog, operands: Sequence[Shape], op: str, what: str) -> None:
    params, _ = prog
    if len(params) != len(operands):
        raise ShapeError(f"{op}: {what} takes {len(params)} parameters but {len(operands)} "
                         "operands are passed")
    for i, (p, o) in enumerate(zip(params, operands)):
        if not same_shape(p, o):
            raise ShapeError(f"{op}: {what} parameter {i} has shape {shape_str(p)}, operand is "
                             f"{shape_str(o)}")


@infer("call")
def infer_call(*operands: Shape, to_apply=None, **_):
    """``call``: operands match the callee's parameters; result is its root shape."""
    prog = program_shape(required(to_apply, "to_apply"))
    if prog is None:
        raise ShapeError("call: the callee's program shape is needed to infer the result")
    _check_call_params(prog, operands, "call", "to_apply")
    return prog[1]


@infer("fusion")
def infer_fusion(*operands: Shape, calls=None, kind=None, **_):
    """``fusion``: operands match the fused computation's parameters; its root shape."""
    prog = program_shape(required(calls, "calls"))
    if prog is None:
        raise ShapeError("fusion: the fused computation's program shape is needed")
    if kind is not None and str(kind) not in ("kLoop", "kInput", "kOutput", "kCustom"):
        raise ShapeError(f"fusion: kind={kind} is not one of kLoop, kInput, kOutput, kCustom")
    # XLA's HandleFusion: parameter i matches operand i; operands past the last
    # parameter are allowed ("Fused parameter count (%d) is greater than the number of
    # operands" is the only count error)
    if len(prog[0]) > len(operands):
        raise ShapeError(f"fusion: the fused computation takes {len(prog[0])} parameters, more "
                         f"than the {len(operands)} operands passed")
    _check_call_params(prog, operands[:len(prog[0])], "fusion", "calls")
    return prog[1]


@infer("while")
def infer_while(init: Shape, *, condition=None, body=None, **_):
    """``while``: condition (init) -> pred[], body (init) -> init; result init's shape."""
    cond = program_shape(required(condition, "condition"))
    bod = program_shape(required(body, "body"))
    if cond is not None:
        _check_call_params(cond, [init], "while", "condition")
        r = cond[1]
        if not (isinstance(r, ArrayShape) and r.element_type == PRED and r.dims == ()):
            raise ShapeError(f"while: condition must return pred[], returns {shape_str(r)}")
    if bod is not None:
        _check_call_params(bod, [init], "while", "body")
        if not same_shape(bod[1], init):
            raise ShapeError(f"while: body returns {shape_str(bod[1])}, expected the init shape "
                             f"{shape_str(init)}")
    return init


@infer("conditional")
def infer_conditional(index: Shape, *branch_operands: Shape, true_computation=None,
                      false_computation=None, branch_computations=None, **_):
    """``conditional``: pred[] with true/false computations or s32[] with
    ``branch_computations``; branch i takes operand i+1; all roots agree."""
    p = as_array(index, "conditional branch index")
    if p.dims or p.element_type not in (PRED, S32):
        raise ShapeError(f"conditional: branch index must be pred[] or s32[], got {shape_str(p)}")
    if p.element_type == PRED:
        if true_computation is None or false_computation is None:
            raise ShapeError("conditional: a pred index needs true_computation and false_computation")
        branches = [true_computation, false_computation]
    else:
        if branch_computations is None:
            raise ShapeError("conditional: an s32 index needs branch_computations")
        branches = list(branch_computations)
    if len(branches) < 1:
        raise ShapeError("conditional: needs at least one branch")
    if len(branch_operands) != len(branches):
        raise ShapeError(f"conditional: {len(branches)} branches but {len(branch_operands)} branch "
                         "operands")
    result = None
    for i, (b, o) in enumerate(zip(branches, branch_operands)):
        prog = program_shape(b)
        if prog is None:
            continue
        _check_call_params(prog, [o], "conditional", f"branch {i}")
        if result is None:
            result = prog[1]
        elif not same_shape(result, prog[1]):
            raise ShapeError(f"conditional: branch {i} returns {shape_str(prog[1])}, branch 0 "
                             f"returns {shape_str(result)}")
    if result is None:
        raise ShapeError("conditional: the branches' program shapes are needed")
    return result


@infer("after-all")
def infer_after_all(*operands: Shape, **_):
    """``after-all``: a token, whatever its operands (XLA's ``HandleAfterAll`` checks
    only the result; ``xla/tests/token_hlo_test.cc`` runs after-all of an f32 to order
    side effects after a value)."""
    return TokenShape()


@infer("add-dependency")
def infer_add_dependency(operand: Shape, token: Shape, **_):
    """``add-dependency(data, token)``: the data's shape."""
    if not isinstance(token, TokenShape):
        raise ShapeError(f"add-dependency: operand 1 must be a token, got {shape_str(token)}")
    return operand


@infer("map")
def infer_map(*operands: Shape, to_apply=None, dimensions=None, **_):
    """``map``: arrays of equal dims; to_apply takes one scalar per operand and
    returns a scalar; result has the operands' dims and the scalar's type."""
    arrs = arrays_of_equal_dims(operands, "map")
    if dimensions is not None and list(int_list(dimensions, "dimensions")) != list(range(arrs[0].rank)):
        raise ShapeError(f"map: dimensions must be {{0..{arrs[0].rank - 1}}}, got {dimensions}")
    prog = program_shape(required(to_apply, "to_apply"))
    if prog is None:
        raise ShapeError("map: the to_apply program shape is needed")
    params, root = prog
    if len(params) != len(arrs):
        raise ShapeError(f"map: to_apply takes {len(params)} parameters, expected {len(arrs)}")
    for i, (p, a) in enumerate(zip(params, arrs)):
        if not (isinstance(p, ArrayShape) and p.dims == () and p.element_type == a.element_type):
            raise ShapeError(f"map: to_apply parameter {i} must be {a.element_type.name}[], got "
                             f"{shape_str(p)}")
    r = as_array(root, "map to_apply result")
    if r.dims:
        raise ShapeError(f"map: to_apply must return a scalar, returns {shape_str(r)}")
    return make_array(r.element_type, arrs[0].dims)
