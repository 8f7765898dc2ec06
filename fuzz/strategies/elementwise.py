"""Makers of elementwise ops: the unary and binary tables (opcode -> the kinds of
element type it takes), compare, select, clamp."""

from __future__ import annotations

from hypothesis import strategies as st

from hloref.attrs import Enum
from hloref.types import ELEMENT_TYPES

from .builder import Builder

#: Unary opcodes -> the kinds of element type they take (letters of ``fcsup``).
UNARY = {
    **{op: "f" for op in ("floor", "ceil", "round-nearest-afz", "round-nearest-even",
                          "is-finite", "erf")},
    **{op: "fc" for op in ("cosine", "sine", "tan", "exponential", "exponential-minus-one",
                           "log", "log-plus-one", "logistic", "rsqrt", "sqrt",
                           "tanh", "atan")},
    "cbrt": "f",  # XLA's shape inference refuses complex cbrt
    # complex forms: UNIMPLEMENTED on XLA:CPU (jaxlib 0.10.2), real operands only
    **{op: "f" for op in ("acos", "acosh", "asin", "asinh", "atanh", "cosh", "sinh")},
    "real": "fc", "imag": "fc", "abs": "fcs", "sign": "fcs", "negate": "fcsu",
    "count-leading-zeros": "su", "popcnt": "su", "not": "psu", "copy": "fcsup",
}
#: Binary opcodes -> the kinds of element type they take.
BINARY = {
    "add": "fcsu", "subtract": "fcsu", "multiply": "fcsup", "divide": "fcsu",
    "remainder": "fsu", "power": "fcsu", "atan2": "fc", "maximum": "fcsup",
    "minimum": "fcsup", "and": "psu", "or": "psu", "xor": "psu", "shift-left": "su",
    "shift-right-arithmetic": "su", "shift-right-logical": "su", "complex": "f",
}


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
