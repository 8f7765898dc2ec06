"""Device forms of one-element arrays with runtime dimension sizes (``SizedType``),
registered with ``gpu/computation_emitter.py``.

Runtime dimension sizes, which the CPU's interpreter keeps in a side table beside the
values (``evaluator/dynamic.py``), exist here for one-element arrays (sizes 0 or 1: a
value ``(storage value, sizes)`` with one int or int64 local per dimension; the storage
value is the element, valid or padding, as the CPU keeps it): ``set-dimension-size`` and
``dynamic-reshape`` make them, ``get-dimension-size`` reads them, elementwise ops (the
catalogue's ``elementwise`` group) carry the smallest of their same-rank operands',
``reduce`` gives the init where a reduced dimension is empty. The CPU's errors on them (a
size outside its bound; a dynamic-reshape that cannot hold the valid elements) are
recorded like a loop's (``error_site``) and raised after the evaluation, naming the
instruction (the CPU's message also names the offending size, which the record does not
keep). Any other op given one, a size through a call, loop or conditional, or an array
of more elements with runtime sizes runs on the CPU.
"""

from __future__ import annotations

import numpy as np

from hloref.errors import HloEvalError
from hloref.opcodes import ELEMENTWISE

from .computation_emitter import FORMS, SIZED, SIZES, form
from .computation_values import (TOKEN, SizedType, Unsupported, VecType, holds_sized,
                                 result_shapes, scalar_type, storage_constant, tuple_leaves)

__all__ = ["SizeForms"]


class SizeForms:
    """The emitter's forms of values with runtime dimension sizes."""

    @form("set-dimension-size", "dynamic-reshape", stage=SIZES)
    def sized_op(self, instr, ops, op_types):
        """One-element arrays with runtime dimension sizes, by the CPU's rules
        (``evaluator/dynamic.py``; sizes 0 or 1 here, 0: the element is padding): the
        operands taken apart into their elements, sizes (None: static) and element
        types, then the op's form of stage ``SIZED``, else, for an elementwise op,
        ``sized_elementwise``; tuples and ``copy`` pass them (stage ``VALUES``). Any
        other op given one runs on the CPU."""
        op = instr.opcode
        plain, sizes, types = [], [], []
        for x, t in zip(ops, op_types):
            if isinstance(t, SizedType):
                plain.append(x[0])
                sizes.append(list(x[1]))
                types.append(t.et)
            elif isinstance(t, (list, VecType)) or t == TOKEN or holds_sized(t):
                raise Unsupported(f"{op} of a tuple with runtime sizes")
            else:
                plain.append(x)
                sizes.append(None)
                types.append(t)
        if op in FORMS[SIZED]:
            return FORMS[SIZED][op](self, instr, plain, sizes, types)
        return self.sized_elementwise(instr, plain, sizes, types)

    def size_operands(self, instr, plain, sizes, types):
        """The run-time sizes (int64 locals) that set-dimension-size and dynamic-reshape
        take as their operands after the first."""
        shape = instr.operands[0].shape
        if shape.size != 1 or any(s is not None for s in sizes[1:]) or \
                not all(t.is_integer for t in types[1:]):
            raise Unsupported(f"{instr.opcode} operands")
        i64 = self.bind("N", np.int64)
        return [self.line(f"{i64}({self.load(v, t)})") for v, t in zip(plain[1:], types[1:])]

    @form("set-dimension-size", stage=SIZED)
    def set_dimension_size(self, instr, plain, sizes, types):
        """Sets dimension ``d``'s size to the run-time ``n`` (outside ``[0, bound]``: the
        CPU's HloEvalError, recorded and raised after the evaluation)."""
        ns = self.size_operands(instr, plain, sizes, types)
        shape = instr.operands[0].shape
        (d,) = tuple(int(v) for v in instr.attrs.get("dimensions"))
        bound = shape.dims[d]
        self.record_if(f"{ns[0]} < 0 or {ns[0]} > {bound}", instr.name, HloEvalError(
            f"set-dimension-size: size outside [0, {bound}] for dimension {d}",
            instruction=instr.name))
        out = list(sizes[0] or shape.dims)
        out[d] = ns[0]
        return self.sized_value(plain[0], types[0], shape.dims, out)

    @form("dynamic-reshape", stage=SIZED)
    def dynamic_reshape(self, instr, plain, sizes, types):
        """Lays the valid elements (0 or 1) out in the run-time sizes (each in ``[0,
        bound]``, their product the valid count, else the CPU's errors), a zero where
        none is valid (the CPU embeds the valid part in zeros)."""
        ns = self.size_operands(instr, plain, sizes, types)
        i64 = self.bind("N", np.int64)
        x = plain[0]
        dims = tuple(instr.shape.dims)
        if instr.shape.size != 1 or len(ns) != len(dims):
            raise Unsupported("dynamic-reshape to more than one element")
        self.record_if(" or ".join(f"{n} < 0 or {n} > {b}" for n, b in zip(ns, dims)),
                       instr.name, HloEvalError(
                           f"dynamic-reshape: a size outside [0, bound] of {list(dims)}",
                           instruction=instr.name))
        count = " * ".join(str(v) for v in (sizes[0] or [1])) or "1"
        valid = self.line(f"{i64}({count})")
        prod = " * ".join(ns) or "1"
        self.record_if(f"{prod} != {valid}", instr.name, HloEvalError(
            "dynamic-reshape: the valid elements cannot take the dimensions",
            instruction=instr.name))
        zero = self.bind("C", storage_constant(np.zeros(1), types[0]))
        value = self.line(f"({x} if {valid} == 1 else {zero})")
        return self.sized_value(value, types[0], dims, ns)

    @form("get-dimension-size", stage=SIZED)
    def sized_get_dimension_size(self, instr, plain, sizes, types):
        """The run-time size of dimension ``d``."""
        (d,) = tuple(int(v) for v in instr.attrs.get("dimensions"))
        et = scalar_type(instr.shape)
        if sizes[0] is None or et.name != "s32":
            raise Unsupported("get-dimension-size")
        return self.line(self.store(f"{self.bind('N', np.int64)}({sizes[0][d]})", et)), et

    def sized_elementwise(self, instr, plain, sizes, types):
        """An elementwise op computes on the element; the result's size is the smallest
        of its same-rank operands'."""
        op = instr.opcode
        if op not in ELEMENTWISE:
            raise Unsupported(f"{op} of a value with runtime sizes")
        shapes = [o.shape for o in instr.operands]
        rank = len(instr.shape.dims)
        if op == "bitcast-convert" and shapes[0].rank != rank:
            raise Unsupported("bitcast-convert changing the rank of a sized value")
        merged = None
        for s, shape in zip(sizes, shapes):
            if s is None or shape.rank != rank:
                continue
            merged = list(s) if merged is None else [
                a if a is b else self.line(f"min({a}, {b})") for a, b in zip(merged, s)]
        value, et = self.instruction(instr, plain, types)
        if merged is None:
            return value, et
        return self.sized_value(value, et, instr.shape.dims, merged)

    @form("reduce", stage=SIZED)
    def sized_reduce(self, instr, xs_inits, sizes, types):
        """``reduce`` of one-element operands with runtime sizes: ``to_apply(init, x)`` when
        every reduced dimension has its element, else the init (the combiner is not
        called); kept dimensions keep their sizes."""
        n = len(xs_inits) // 2
        if len(xs_inits) != 2 * n or n == 0 or any(s is not None for s in sizes[n:]):
            raise Unsupported("reduce of sized inits")
        given = [s for s in sizes[:n] if s is not None]
        if any(any(a is not b for a, b in zip(s, given[0])) for s in given[1:]):
            raise Unsupported("reduce of operands with different runtime sizes")
        merged = given[0]
        dims = tuple(int(d) for d in instr.attrs.get("dimensions"))
        reduced = [str(merged[d]) for d in dims if not isinstance(merged[d], int)]
        if any(isinstance(merged[d], int) and merged[d] != 1 for d in dims):
            raise Unsupported("reduce of a zero-size dimension")
        (callee,) = instr.called_computation_names()
        xs, inits = xs_inits[:n], xs_inits[n:]
        rtypes = types[n:]
        result = [self.fresh() for _ in inits]
        cond = " and ".join(f"{r} == 1" for r in reduced) or "True"
        self.statement(f"if {cond}:")
        outer = self.indent
        self.indent += "    "
        value, vtype = self.emit(self.module.computations[callee], inits + xs,
                                 rtypes + types[:n])
        if tuple_leaves(vtype) != list(rtypes):
            raise Unsupported("reduce combiner type")
        for r, v, t in zip(result, tuple_leaves(value), rtypes):
            self.statement(f"{r} = {self.normal(v, t)}")
        self.indent = outer
        self.statement("else:")
        self.indent += "    "
        for r, v, t in zip(result, inits, rtypes):
            self.statement(f"{r} = {self.normal(v, t)}")
        self.indent = outer
        kept = [merged[k] for k in range(len(merged)) if k not in dims]
        leaves = result if n > 1 else result[:1]
        shapes = result_shapes(instr.shape)
        out = []
        for r, t, shape in zip(leaves, rtypes, shapes):
            out.append(self.sized_value(r, t, shape.dims, kept) if kept else (r, t))
        if n > 1:
            return [v for v, _ in out], [t for _, t in out]
        return out[0]

    def sized_value(self, value, et, dims, out):
        """``value`` of ``et`` with runtime sizes ``out`` (ints or int64 locals) in
        dimensions ``dims``; the full extent known at compile time: a static value."""
        if all(isinstance(v, int) and v == d for v, d in zip(out, dims)):
            return value, et
        return (value, tuple(out)), SizedType(et, dims)
