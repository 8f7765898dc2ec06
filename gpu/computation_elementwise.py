"""Device forms of the scalar and elementwise ops in a compiled computation (registered
with ``gpu/computation_emitter.py``).

Each instruction is computed as the elementwise kernels do: ``store(fn(load(a),
load(b)))`` with the operand and result types' load/store, so each step rounds or wraps
to its type exactly as the CPU's vectorised interpretation of the computation does.
Every op the CPU applies elementwise has a GPU element function of its types
(``elementwise.ELEMENT_TABLES``; the width-specialised shifts, mulhi, popcnt and
count-leading-zeros by ``elementwise.width_fn``; ``compare.DIRECTIONS``,
``convert.convert_fn``); complex instructions compute on the parts (``fn(a.real, a.imag,
b.real, b.imag) -> (re, im)``, ``complex_elementwise``'s part functions) and store both
parts rounded to the part type. Constants, iota (0), reduce-precision and same-width
bitcast-convert of one element are here too. The CPU's own errors (``subtract`` of pred,
complex compare other than EQ/NE...) have no device form.
"""

from __future__ import annotations

import numpy as np

from . import complex_elementwise
from .compare import DIRECTIONS, clamp_fn
from .computation_emitter import COMPLEX, ELEMENT, FORMS, SCALAR, form
from .computation_values import Unsupported, storage_constant
from .convert import convert_fn
from .device import type_class
from .elementwise import ELEMENT_TABLES, WIDTH_OPS, element_fn, width_fn, zero

__all__ = ["ElementwiseForms"]

#: the part functions of complex operands, by opcode
_COMPLEX_TABLES = ((complex_elementwise.BINARY, "binary"), (complex_elementwise.UNARY, "unary"),
                   (complex_elementwise.TO_REAL, "to_real"))


class ElementwiseForms:
    """The emitter's forms of one element: constants, elementwise arithmetic, complex."""

    @form("constant", stage=ELEMENT)
    def constant(self, instr, ops, op_types, et):
        return self.bind("C", storage_constant(instr.literal, et))

    @form("iota", stage=ELEMENT)
    def iota(self, instr, ops, op_types, et):
        return self.bind("C", storage_constant(np.zeros(1), et))

    @form("reduce-precision", stage=ELEMENT)
    def reduce_precision(self, instr, ops, op_types, et):
        from .bitwise_convert import reduce_precision_fn
        if not et.is_float:
            raise Unsupported("reduce-precision of a non-float")
        fn = self.bind("F", reduce_precision_fn(et, int(instr.attrs.get("exponent_bits")),
                                                int(instr.attrs.get("mantissa_bits"))))
        return self.line(f"{fn}({ops[0]})")

    @form("bitcast-convert", stage=ELEMENT)
    def bitcast_convert_form(self, instr, ops, op_types, et):
        return self.bitcast_convert(ops[0], op_types[0], et)

    @form("select", stage=ELEMENT)
    def select(self, instr, ops, op_types, et):
        p, a, b = ops
        return self.line(f"({a} if {p} != 0 else {b})")

    @form("compare", stage=SCALAR)
    def compare(self, instr, ops, op_types, et):
        src = op_types[0]
        direction = str(instr.attrs.get("direction"))
        if direction not in DIRECTIONS:
            raise Unsupported(direction)
        cls = type_class(src)
        if cls in ("f32", "f64", "narrow") and str(instr.attrs.get("type", "")) == "TOTALORDER":
            cls = "key_" + cls
        fn = self.bind("F", DIRECTIONS[direction])
        return self.line(self.store(
            f"{fn}({self.load(ops[0], src, cls)}, {self.load(ops[1], src, cls)})", et))

    @form("clamp", stage=SCALAR)
    def clamp(self, instr, ops, op_types, et):
        return self.apply(self.bind("F", clamp_fn(op_types[1])), ops, op_types, et)

    @form("convert", stage=SCALAR)
    def convert(self, instr, ops, op_types, et):
        fn, cin, cout = convert_fn(op_types[0], et)
        f = self.bind("F", fn)
        return self.line(self.store(f"{f}({self.load(ops[0], op_types[0], cin)})", et, cout))

    @form("real", stage=SCALAR)
    def real(self, instr, ops, op_types, et):
        return ops[0]

    @form("imag", stage=SCALAR)
    def imag(self, instr, ops, op_types, et):
        return self.apply(self.bind("F", zero), ops, op_types, et)

    def elementwise(self, instr, ops, op_types, et):
        """An op of the element function tables (``gpu/elementwise.py``)."""
        op = instr.opcode
        if op in WIDTH_OPS:
            fn = self.bind("F", width_fn(op, op_types[0]))
        elif op in ELEMENT_TABLES:
            fn = self.bind("F", element_fn(op, op_types[0]))
        else:
            raise Unsupported(op)
        return self.apply(fn, ops, op_types, et)

    def apply(self, fn, ops, op_types, et):
        """``store(fn(load(a), load(b)...))``: the bound function ``fn`` on the operands'
        compute values, stored as ``et``."""
        args = ", ".join(self.load(o, t) for o, t in zip(ops, op_types))
        return self.line(self.store(f"{fn}({args})", et))

    def complex_instruction(self, instr, ops, op_types, et):
        """Complex operands or result: ``complex_elementwise``'s part functions on the
        storage values' parts (a complex storage value is a complex scalar), else the
        op's form of stage ``COMPLEX``."""
        op, src = instr.opcode, op_types[0]
        if type_class(src) == "complex":
            for table, kind in _COMPLEX_TABLES:
                if op in table:
                    fn = self.bind("F", table[op])
                    args = ", ".join(p for x in ops for p in self.parts(x))
                    if kind == "to_real":
                        return self.line(self.store(f"{fn}({args})", et))
                    return self.store_complex(f"{fn}({args})", et)
        if op in FORMS[COMPLEX]:
            return FORMS[COMPLEX][op](self, instr, ops, op_types, et)
        raise Unsupported(f"{op} of {src.name}")

    @form("compare", stage=COMPLEX)
    def complex_compare(self, instr, ops, op_types, et):
        direction = str(instr.attrs.get("direction"))
        if direction not in complex_elementwise.COMPARE:
            raise Unsupported(f"compare {direction} of complex values")
        fn = self.bind("F", complex_elementwise.COMPARE[direction])
        a, b = ops
        return self.line(self.store(f"{fn}({', '.join(self.parts(a) + self.parts(b))})", et))

    @form("clamp", stage=COMPLEX)
    def complex_clamp(self, instr, ops, op_types, et):
        """The CPU's min(max(x, lo), hi) in the lexicographic order."""
        lo, x, hi = ops
        mx = self.bind("F", complex_elementwise.BINARY["maximum"])
        mn = self.bind("F", complex_elementwise.BINARY["minimum"])
        high = self.store_complex(f"{mx}({', '.join(self.parts(x) + self.parts(lo))})", et)
        return self.store_complex(f"{mn}({', '.join(self.parts(high) + self.parts(hi))})", et)

    @form("complex", stage=COMPLEX)
    def complex(self, instr, ops, op_types, et):
        a, b = ops
        ta, tb = op_types
        return self.store_complex(f"({self.load(a, ta)}, {self.load(b, tb)})", et)

    @form("convert", stage=COMPLEX)
    def complex_convert_form(self, instr, ops, op_types, et):
        return self.complex_convert(ops[0], op_types[0], et)
