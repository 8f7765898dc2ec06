"""Shape rules of the elementwise ops: unary and binary arithmetic, compare, select, clamp."""

from __future__ import annotations

from typing import Callable

from ..op_properties import opcodes_with
from ..opcodes import BINARY, CATALOGUE, UNARY
from ..shapes import Shape
from ..types import ELEMENT_TYPES, PRED
from .common import (KIND_WORDS, ShapeError, as_array, complex_component, expect_kind,
                     expect_same_type, infer, make_array, shape_str)


#: unary opcodes whose result on a complex operand is the component float type
_TO_COMPONENT = opcodes_with("complex-to-component")

#: unary opcode → allowed operand element kinds (from the op catalogue)
_UNARY_KINDS: dict[str, str] = {op: CATALOGUE[op].kinds for op in sorted(UNARY)}
UNARY_OPCODES = UNARY
UNARY_KINDS = dict(_UNARY_KINDS)  # public copy (hloref ops' type table)


def _make_unary(opcode: str) -> Callable[..., Shape]:
    kinds = _UNARY_KINDS[opcode]

    def infer(operand: Shape, **_attrs) -> Shape:
        a = as_array(operand, f"{opcode} operand")
        expect_kind(a.element_type, kinds, opcode)
        if opcode == "is-finite":
            return make_array(PRED, a.dims)
        if opcode in _TO_COMPONENT and a.element_type.is_complex:
            return make_array(complex_component(a.element_type), a.dims)
        return make_array(a.element_type, a.dims)

    infer.__name__ = "infer_" + opcode.replace("-", "_")
    infer.__doc__ = (f"``{opcode}``: one array operand ({'/'.join(KIND_WORDS[k] for k in kinds)}); "
                     "same shape" + (", pred result" if opcode == "is-finite" else "")
                     + (" (complex → component float type)" if opcode in _TO_COMPONENT
                        else "") + ".")
    return infer


#: binary opcode → allowed operand element kinds (from the op catalogue)
_BINARY_KINDS: dict[str, str] = {op: CATALOGUE[op].kinds for op in sorted(BINARY)}
BINARY_OPCODES = BINARY
BINARY_KINDS = dict(_BINARY_KINDS)  # public copy (hloref ops' type table)


def _make_binary(opcode: str) -> Callable[..., Shape]:
    kinds = _BINARY_KINDS[opcode]

    def infer(lhs: Shape, rhs: Shape, **_attrs) -> Shape:
        a = as_array(lhs, f"{opcode} lhs")
        b = as_array(rhs, f"{opcode} rhs")
        if a.dims != b.dims:
            raise ShapeError(f"{opcode}: operand dimensions differ: {shape_str(a)} vs {shape_str(b)} "
                             "(HLO has no implicit broadcasting)")
        expect_same_type(a, b, opcode, "operand")
        expect_kind(a.element_type, kinds, opcode)
        if opcode == "complex":
            if a.element_type.name not in ("f32", "f64"):
                raise ShapeError(f"complex: operands must be f32 or f64, got {a.element_type.name}")
            return make_array(ELEMENT_TYPES["c64" if a.element_type.name == "f32" else "c128"], a.dims)
        return make_array(a.element_type, a.dims)

    infer.__name__ = "infer_" + opcode.replace("-", "_")
    infer.__doc__ = f"``{opcode}``: two arrays of equal shape and element type; same shape."
    return infer


for _opcode in UNARY_OPCODES:
    globals()["infer_" + _opcode.replace("-", "_")] = infer(_opcode)(_make_unary(_opcode))
for _opcode in BINARY_OPCODES:
    globals()["infer_" + _opcode.replace("-", "_")] = infer(_opcode)(_make_binary(_opcode))
del _opcode


COMPARE_DIRECTIONS = ("EQ", "NE", "GE", "GT", "LE", "LT")
COMPARE_TYPES = ("FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED")


@infer("compare")
def infer_compare(lhs: Shape, rhs: Shape, *, direction=None, type=None, **_):
    """``compare``: equal shapes and types; ``direction`` required; pred result."""
    a = as_array(lhs, "compare lhs")
    b = as_array(rhs, "compare rhs")
    if a.dims != b.dims:
        raise ShapeError(f"compare: operand dimensions differ: {shape_str(a)} vs {shape_str(b)}")
    expect_same_type(a, b, "compare", "operand")
    if direction is None:
        raise ShapeError("compare: missing required attribute direction")
    if str(direction) not in COMPARE_DIRECTIONS:
        raise ShapeError(f"compare: direction={direction} is not one of {', '.join(COMPARE_DIRECTIONS)}")
    if type is not None and str(type) not in COMPARE_TYPES:
        raise ShapeError(f"compare: type={type} is not one of {', '.join(COMPARE_TYPES)}")
    if type is not None:
        # XLA's CheckElementwiseInstruction: FLOAT or TOTALORDER for floating point,
        # else Comparison::DefaultComparisonType of the operands' type
        kind = a.element_type.kind
        allowed = (("FLOAT", "TOTALORDER") if kind == "float" else ("FLOAT",) if kind == "complex"
                   else ("SIGNED",) if kind == "sint" else ("UNSIGNED",))
        if str(type) not in allowed:
            raise ShapeError(f"compare: type={type} does not fit {a.element_type.name} operands; "
                             f"expected type={' or '.join(allowed)}")
    return make_array(PRED, a.dims)


@infer("select")
def infer_select(pred: Shape, on_true: Shape, on_false: Shape, **_):
    """``select``: pred with the dims of on_true, or a scalar pred (current XLA's
    ``InferSelectShape`` accepts it again); on_true/on_false equal shapes."""
    p = as_array(pred, "select predicate")
    t = as_array(on_true, "select on_true")
    f = as_array(on_false, "select on_false")
    if p.element_type != PRED:
        raise ShapeError(f"select: predicate element type must be pred, got {p.element_type.name}")
    if t.dims != f.dims or t.element_type != f.element_type:
        raise ShapeError(f"select: on_true and on_false shapes differ: {shape_str(t)} vs {shape_str(f)}")
    if p.dims and p.dims != t.dims:
        raise ShapeError(f"select: predicate dimensions {list(p.dims)} must be scalar or equal "
                         f"the operands' {list(t.dims)}")
    return make_array(t.element_type, t.dims)


@infer("clamp")
def infer_clamp(min: Shape, operand: Shape, max: Shape, **_):
    """``clamp(min, operand, max)``: min/max scalars or the operand's shape; same type."""
    x = as_array(operand, "clamp operand")
    for name, s in (("min", min), ("max", max)):
        b = as_array(s, f"clamp {name}")
        expect_same_type(b, x, "clamp", f"{name} and operand")
        if b.dims != () and b.dims != x.dims:
            raise ShapeError(f"clamp: {name} must be a scalar or have the operand's dimensions "
                             f"{list(x.dims)}, got {shape_str(b)}")
    return make_array(x.element_type, x.dims)
