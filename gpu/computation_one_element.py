"""Device forms of the ops that call a computation or move elements, on one-element
arrays (every value here has one element), registered with
``gpu/computation_emitter.py``: map, reduce, reduce-window, sort, gather, scatter, pad,
top-k with k = 1, get-dimension-size of static dimensions, shuffle, scan of length 1 (one
call), select-and-scatter (one scatter call or the init; a ``select`` holding a loop or a
draw called where the CPU calls it: ``select_calls``).
"""

from __future__ import annotations

import numpy as np

from .computation_emitter import ONE_ELEMENT, form
from .computation_values import (Unsupported, scalar_type, storage_constant, tuple_leaves,
                                 value_type)

__all__ = ["OneElementForms", "select_calls", "window_covers_element"]


def window_covers_element(window, rank: int) -> bool:
    """Whether the window of output 0 of a reduce-window on a one-element operand holds
    the element: in every dimension some window position ``k * dilation - low`` (in
    base-dilated coordinates) is 0 (the element's position)."""
    if window is None:
        return True
    dims = list(window.dims) if hasattr(window, "dims") else list(window)
    for d in dims:
        size = int(getattr(d, "size", 1))
        dil = int(getattr(d, "window_dilation", 1) or 1)
        low = int(getattr(d, "padding_low", 0))
        if not any(k * dil - low == 0 for k in range(size)):
            return False
    return True


def select_calls(dims) -> int:
    """How many times the CPU's select-and-scatter calls a ``select`` that holds a loop or
    a draw (one it applies element by element) for a one-element operand whose window
    holds the element: the window's positions are visited in row-major order, the
    element (at position ``low`` in each dimension) becomes the choice, and each later
    position (padding: the candidate is a zero of the type) is put to
    ``select(element, 0)``; positions before the element are not (no choice yet)."""
    total, flat = 1, 0
    for d in dims:
        size, low = int(getattr(d, "size", 1)), int(getattr(d, "padding_low", 0))
        total *= size
        flat = flat * size + low
    return total - 1 - flat


class OneElementForms:
    """The emitter's forms of ops on one-element arrays that call or move."""

    def no_tuples(self, instr, op_types):
        if any(isinstance(t, list) for t in op_types):
            raise Unsupported(f"{instr.opcode} of a tuple")

    @form("map", stage=ONE_ELEMENT)
    def map(self, instr, ops, op_types):
        """``map`` applies its computation to the elements."""
        self.no_tuples(instr, op_types)
        (callee,) = instr.called_computation_names()
        return self.emit(self.module.computations[callee], ops, op_types)

    @form("sort", stage=ONE_ELEMENT)
    def sort(self, instr, ops, op_types):
        """``sort`` keeps its operands (the comparator is never called)."""
        self.no_tuples(instr, op_types)
        return (list(ops), list(op_types)) if len(ops) > 1 else (ops[0], op_types[0])

    @form("reduce", "reduce-window", stage=ONE_ELEMENT)
    def reduce(self, instr, ops, op_types):
        """``reduce`` combines the one element with the init value (``to_apply(init...,
        x...)``, whatever the dimensions); ``reduce-window`` does so when the window of
        the one output covers the element, else gives the init value."""
        op = instr.opcode
        self.no_tuples(instr, op_types)
        n = len(ops) // 2
        if len(ops) != 2 * n or n == 0:
            raise Unsupported(f"{op} operands")
        xs, inits = ops[:n], ops[n:]
        if op == "reduce-window" and not window_covers_element(instr.attrs.get("window"),
                                                               instr.operands[0].shape.rank):
            return (list(inits), op_types[n:]) if n > 1 else (inits[0], op_types[n])
        (callee,) = instr.called_computation_names()
        return self.emit(self.module.computations[callee], inits + xs,
                         op_types[n:] + op_types[:n])

    @form("gather", stage=ONE_ELEMENT)
    def gather(self, instr, ops, op_types):
        """``gather`` takes the one element (any start index is clamped to 0)."""
        self.no_tuples(instr, op_types)
        et = scalar_type(instr.shape, rank0=False)
        if op_types[0] != et:
            raise Unsupported("gather changing the element type")
        return ops[0], et

    @form("pad", stage=ONE_ELEMENT)
    def pad(self, instr, ops, op_types):
        """``pad`` gives the element when every low edge padding is 0 (the element sits at
        position ``low``), else the padding value."""
        self.no_tuples(instr, op_types)
        et = scalar_type(instr.shape, rank0=False)
        if op_types[0] != et or op_types[1] != et:
            raise Unsupported("pad changing the element type")
        padding = instr.attrs.get("padding")
        return (ops[0] if all(int(p.low) == 0 for p in padding) else ops[1]), et

    @form("get-dimension-size", stage=ONE_ELEMENT)
    def get_dimension_size(self, instr, ops, op_types):
        """``get-dimension-size`` is 1 (static dimensions only)."""
        self.no_tuples(instr, op_types)
        et = scalar_type(instr.shape, rank0=False)
        shape = instr.operands[0].shape
        if any(shape.dynamic) or not et.is_integer:
            raise Unsupported("get-dimension-size of a dynamic dimension")
        return self.bind("C", storage_constant(np.ones(1), et)), et

    @form("topk", stage=ONE_ELEMENT)
    def topk(self, instr, ops, op_types):
        """``topk`` with k = 1 of one element: the element and index 0."""
        if int(instr.attrs.get("k")) != 1 or len(ops) != 1:
            raise Unsupported("topk of more than one element")
        index = scalar_type(instr.shape.elements[1], rank0=False)
        return [ops[0], self.bind("C", storage_constant(np.zeros(1), index))], \
            [op_types[0], index]

    @form("scatter", stage=ONE_ELEMENT)
    def scatter(self, instr, ops, op_types):
        """A scatter of one-element arrays: the window (one element) fits only at start
        index 0, so the result is ``to_apply(operands..., updates...)`` where the one
        index is 0, else the operands (an out-of-bounds window is skipped); computed in
        an if/else block (an unused combiner's loop never runs)."""
        n = (len(ops) - 1) // 2
        if len(ops) != 2 * n + 1 or n == 0 or any(isinstance(t, list) for t in op_types):
            raise Unsupported("scatter operands")
        if tuple(instr.attrs.get("input_batching_dims") or ()):
            raise Unsupported("scatter with batching dimensions")
        xs, idx, upds = ops[:n], ops[n], ops[n + 1:]
        itype = op_types[n]
        if not itype.is_integer:
            raise Unsupported("scatter indices")
        (callee,) = instr.called_computation_names()
        comp = self.module.computations[callee]
        result = [self.fresh() for _ in xs]
        self.statement(f"if {self.load(idx, itype)} == 0:")
        outer = self.indent
        self.indent += "    "
        value, vtype = self.emit(comp, xs + upds, op_types[:n] + op_types[n + 1:])
        if tuple_leaves(vtype) != list(op_types[:n]):
            raise Unsupported("scatter combiner type")
        for r, v, t in zip(result, tuple_leaves(value), op_types[:n]):
            self.statement(f"{r} = {self.normal(v, t)}")
        self.indent = outer
        self.statement("else:")
        self.indent += "    "
        for r, v, t in zip(result, xs, op_types[:n]):
            self.statement(f"{r} = {self.normal(v, t)}")
        self.indent = outer
        return (result, list(op_types[:n])) if n > 1 else (result[0], op_types[0])

    @form("shuffle", stage=ONE_ELEMENT)
    def shuffle(self, instr, ops, op_types):
        """One element: rotate and permute (whose coordinates clamp) give the element."""
        et = scalar_type(instr.shape, rank0=False)
        if len(ops) != 1 or op_types[0] != et or str(instr.attrs.get("mode")) not in (
                "rotate", "permute"):
            raise Unsupported("shuffle")
        return ops[0], et

    @form("scan", stage=ONE_ELEMENT)
    def scan(self, instr, ops, op_types):
        """Along a dimension of length 1: one call ``to_apply(inputs..., carries...)``,
        whose results are the outputs (stacked: one element) and the final carries."""
        nc = int(instr.attrs.get("num_carries") or 0)
        if len(ops) - nc < 1 or nc < 0 or any(isinstance(t, list) for t in op_types):
            raise Unsupported("scan operands")
        (callee,) = instr.called_computation_names()
        value, vtype = self.emit(self.module.computations[str(callee)], ops, op_types)
        want = value_type(instr.shape, rank0=False)
        if isinstance(want, list) != isinstance(vtype, list) or (
                tuple_leaves(want) != tuple_leaves(vtype)):
            raise Unsupported("scan result types")
        return value, vtype

    @form("select-and-scatter", stage=ONE_ELEMENT)
    def select_and_scatter(self, instr, ops, op_types):
        """One operand element and one window: the window holds the element when some
        position ``k - low`` is 0 (no dilations), and then the result is
        ``scatter(init, source)`` (a single candidate: ``select``'s answers are never
        used), else ``init``. A ``select`` holding a loop or a draw is called as the CPU
        calls it (``select_calls``), its answers dropped: its loops run (and stop at the
        iteration limit, as the CPU's), its draws are made."""
        et = scalar_type(instr.shape, rank0=False)
        if len(ops) != 3 or any(isinstance(t, list) for t in op_types) or op_types[0] != et:
            raise Unsupported("select-and-scatter operands")
        window = instr.attrs.get("window")
        dims = list(window.dims) if window is not None and hasattr(window, "dims") else []
        if any(int(getattr(d, "base_dilation", 1) or 1) != 1 or
               int(getattr(d, "window_dilation", 1) or 1) != 1 for d in dims):
            raise Unsupported("select-and-scatter with dilations")
        select = self.module.computations[str(instr.attrs.get("select"))]
        probe = type(self)(self.module, self.limit, self.name + "/select", self.device,
                         self.serial)
        probe.emit(select, ["a", "b"], [et, et])
        covers = window_covers_element(window, instr.operands[0].shape.rank)
        calls = select_calls(dims) if covers else 0
        if (probe.loops or probe.rng_sites or probe.state_count) and calls:
            zero = self.bind("C", storage_constant(np.zeros(1), et))
            self.statement(f"for {self.fresh()} in range({calls}):")
            outer = self.indent
            self.indent += "    "
            self.emit(select, [ops[0], zero], [et, et])
            self.statement("pass")
            self.indent = outer
        _, source, init = ops
        if not covers:
            if op_types[2] != et:
                raise Unsupported("select-and-scatter init type")
            return init, et
        scatter = self.module.computations[str(instr.attrs.get("scatter"))]
        value, vtype = self.emit(scatter, [init, source], [op_types[2], op_types[1]])
        if vtype != et:
            raise Unsupported("select-and-scatter scatter type")
        return value, vtype
