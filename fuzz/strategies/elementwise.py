"""Makers of elementwise ops: the unary and binary tables (opcode -> the kinds of
element type it takes), compare, select, clamp."""

from __future__ import annotations

from hypothesis import strategies as st

from hloref.attrs import Enum
from hloref.op_properties import has_property, opcodes_with, values_of
from hloref.opcodes import CATALOGUE, GROUPS
from hloref.types import ELEMENT_TYPES

from .builder import Builder


def _kinds(op: str) -> str:
    kinds = CATALOGUE[op].kinds
    return kinds.replace("c", "") if has_property(op, "generated-real-only") else kinds


def _generated(group: str) -> list[str]:
    """The ops of catalogue group ``group`` the generator draws: those op property
    ``generator-weight`` lists, in its order, then any other (at the default weight) but
    those of op property ``not-generated``."""
    listed = [op for op in values_of("generator-weight") if op in GROUPS[group]]
    return listed + sorted(GROUPS[group] - set(listed) - opcodes_with("not-generated"))


#: Unary opcodes -> the kinds of element type they take (letters of ``fcsup``): the
#: catalogue's unary ops and ``copy``, with their catalogue kinds, narrowed to real
#: operands for op property ``generated-real-only``.
UNARY = {op: _kinds(op) for op in _generated("unary") + ["copy"]}
#: Binary opcodes -> the kinds of element type they take.
BINARY = {op: _kinds(op) for op in _generated("binary")}


def make_unary(op):
    def make(b: Builder):
        x = b.operand(UNARY[op])
        return b.add(op, [x])
    return make


def make_binary(op):
    def make(b: Builder):
        kinds = BINARY[op]
        if op == "complex":
            x = b.operand(et=b.et(b.draw(st.sampled_from(["f32", "f64"]))))
        else:
            x = b.operand(kinds)
        y = b.operand(et=x.shape.element_type, dims=x.shape.dims)
        if b.draw(st.integers(0, 4)) == 0:
            y = x  # x op x: fan-out of one value
        return b.add(op, [x, y])
    return make


def make_compare(b: Builder):
    x = b.operand("fcsup")
    y = b.operand(et=x.shape.element_type, dims=x.shape.dims)
    et = x.shape.element_type
    dirs = ["EQ", "NE"] if et.is_complex else ["EQ", "NE", "LT", "LE", "GT", "GE"]
    attrs = {"direction": Enum(b.draw(st.sampled_from(dirs)))}
    if et.is_float and b.draw(st.booleans()):
        attrs["type"] = Enum("TOTALORDER")
    return b.add("compare", [x, y], attrs)


def make_select(b: Builder):
    x = b.operand("fcsup")
    y = b.operand(et=x.shape.element_type, dims=x.shape.dims)
    p = b.operand(et=ELEMENT_TYPES["pred"], dims=x.shape.dims)
    return b.add("select", [p, x, y])


def make_clamp(b: Builder):
    x = b.operand("fsu")
    scalar = b.draw(st.booleans())
    d = () if scalar else x.shape.dims
    lo = b.operand(et=x.shape.element_type, dims=d)
    hi = b.operand(et=x.shape.element_type, dims=d)
    return b.add("clamp", [lo, x, hi])
