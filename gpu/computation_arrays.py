"""Device forms of small array values (``VecType``: 2 to ``VEC_MAX`` elements, a
rng-bit-generator state or any array the computation builds), registered with
``gpu/computation_emitter.py``.

They are tuples of storage values at compile time, in row-major order. The CPU
evaluates them as numpy arrays; here they pass through everything that only moves
values: ``call``/``fusion`` parameters and results (inlined), tuples, copy, opt-barrier,
``while`` state (one loop variable per element; the endless-loop check compares every
element), ``conditional`` operands and branch results (chosen element by element, or
assigned in the if/elif block); constant and iota give their elements; broadcast,
concatenate, reshape, slice, transpose, reverse and bitcast (in the operand's and
result's layouts; another type of the same width element by element) move them by a
static index map, the CPU's numpy rule applied to element indices (``INDEX_MAPS``);
dynamic-slice and dynamic-update-slice pick each element among its few possible sources
by the clamped run-time starts; elementwise ops (select with a scalar pred, clamp with
scalar bounds) run element by element through the scalar path
(``ArrayForms.vec_elementwise``). A result of one element is that storage value.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from hloref.shapes import ArrayShape

from .computation_emitter import ELEMENT, SMALL_ARRAYS, form
from .computation_values import (TOKEN, Unsupported, VecType, any_type, flatten,
                                 storage_constant)

__all__ = ["ArrayForms", "INDEX_MAPS", "move_map"]

#: opcode -> its static index map ``fn(x, idx, instr, dims)``: ``x`` the first operand's
#: element indices in its dimensions, ``idx`` every operand's, ``dims`` the
#: ``dimensions`` attribute; returns the result's indices in the result's dimensions,
#: by the CPU's numpy rule of the op (``evaluator/shape_ops.py``)
INDEX_MAPS: dict = {}


def index_map(opcode):
    def register(fn):
        INDEX_MAPS[opcode] = fn
        return fn
    return register


@index_map("reshape")
def _reshape(x, idx, instr, dims):
    return x.reshape(instr.shape.dims)


@index_map("bitcast")
def _bitcast(x, idx, instr, dims):
    def physical(a, shape):
        order = tuple(reversed(shape.minor_to_major()))
        return np.transpose(a, order).reshape(-1), order
    for s in (instr.operands[0].shape, instr.shape):
        if s.layout is not None and 0 < s.layout.element_size_bits < 8:
            raise Unsupported("bitcast of a packed layout")
    flat, _ = physical(x, instr.operands[0].shape)
    order = tuple(reversed(instr.shape.minor_to_major()))
    return np.transpose(flat.reshape([instr.shape.dims[d] for d in order]), np.argsort(order))


@index_map("transpose")
def _transpose(x, idx, instr, dims):
    return np.transpose(x, dims)


@index_map("reverse")
def _reverse(x, idx, instr, dims):
    return np.flip(x, axis=dims) if dims else x


@index_map("slice")
def _slice(x, idx, instr, dims):
    return x[tuple(np.s_[d.start:d.limit:d.stride] for d in instr.attrs.get("slice"))]


@index_map("broadcast")
def _broadcast(x, idx, instr, dims):
    if x.ndim != len(dims):
        raise Unsupported("broadcast rank")
    order = np.argsort(dims, kind="stable")
    x = np.transpose(x, order)
    expanded = [1] * len(instr.shape.dims)
    for k, d in enumerate(dims[i] for i in order):
        expanded[d] = x.shape[k]
    return np.broadcast_to(x.reshape(expanded), instr.shape.dims)


@index_map("concatenate")
def _concatenate(x, idx, instr, dims):
    (dim,) = dims
    return np.concatenate(idx, axis=dim)


def move_map(instr, op):
    """For a static move of small arrays (``INDEX_MAPS``): the result's elements
    (row-major) as indices into the operands' elements concatenated (each row-major),
    by the CPU's numpy rule of the op (``evaluator/shape_ops.py``) applied to the
    indices; a result of other dimensions than the instruction's (the CPU's error), a
    packed sub-byte layout: unsupported."""
    shapes = [o.shape for o in instr.operands]
    idx, off = [], 0
    for s in shapes:
        idx.append(np.arange(off, off + s.size, dtype=np.int64).reshape(s.dims))
        off += s.size
    dims = tuple(int(d) for d in (instr.attrs.get("dimensions") or ()))
    try:
        out = INDEX_MAPS[op](idx[0], idx, instr, dims)
    except (ValueError, IndexError, TypeError) as e:  # the CPU's error
        raise Unsupported(f"{op}: {e}") from None
    if tuple(out.shape) != tuple(instr.shape.dims):
        raise Unsupported(f"{op} dimensions")
    return [int(i) for i in out.reshape(-1)]


class ArrayForms:
    """The emitter's forms of small array values."""

    @form("constant", stage=SMALL_ARRAYS)
    def small_constant(self, instr, ops, op_types, vec):
        """A constant of a small array: its elements."""
        return self.small_elements(instr, np.asarray(instr.literal).reshape(-1), vec)

    @form("iota", stage=SMALL_ARRAYS)
    def small_iota(self, instr, ops, op_types, vec):
        """An iota of a small array: the CPU's values."""
        from hloref.evaluator.shape_ops import iota
        flat = np.asarray(iota(shape=instr.shape,
                               iota_dimension=int(instr.attrs.get("iota_dimension"))))
        return self.small_elements(instr, flat.reshape(-1), vec)

    def small_elements(self, instr, flat, vec):
        if vec is None:
            raise Unsupported(f"{instr.opcode} of a small array")
        if flat.size != vec.n:
            raise Unsupported(f"{instr.opcode} size")
        return tuple(self.bind("C", storage_constant(flat[i:i + 1], vec.et))
                     for i in range(vec.n)), vec

    def small_result(self, instr, picked, et, vec):
        """The moved elements ``picked``: a result of one element is that storage value."""
        if len(picked) == 1:
            return picked[0], et
        if vec is None or len(picked) != vec.n:
            raise Unsupported(f"{instr.opcode} of a small array")
        return tuple(picked), vec

    def small_element_type(self, instr):
        et = any_type(instr.shape)
        if isinstance(et, list):
            raise Unsupported(f"{instr.opcode} to a tuple")
        return et.et if isinstance(et, VecType) else et

    @form(*INDEX_MAPS, stage=SMALL_ARRAYS)
    def small_move(self, instr, ops, op_types, vec):
        """The moves by their static index map (``move_map``: the CPU's numpy rule on
        element indices), a bitcast to another type of the same width then element by
        element."""
        op = instr.opcode
        et = self.small_element_type(instr)
        flat, ftypes = self.operand_elements(instr.operands, ops, op_types)
        picked = [flat[i] for i in move_map(instr, op)]
        src = ftypes[0]
        if any(t != src for t in ftypes):
            raise Unsupported(f"{op} of different element types")
        if src != et:  # a same-width bitcast: element by element
            if op != "bitcast":
                raise Unsupported(f"{op} changing the element type")
            picked = [self.bitcast_convert(x, src, et) for x in picked]
        return self.small_result(instr, picked, et, vec)

    @form("dynamic-slice", "dynamic-update-slice", stage=SMALL_ARRAYS)
    def small_dynamic_slice(self, instr, ops, op_types, vec):
        et = self.small_element_type(instr)
        picked = self.dynamic_slice(instr, instr.opcode, ops, op_types, et)
        return self.small_result(instr, picked, et, vec)

    def operand_elements(self, operands, ops, op_types):
        """The storage values of operand instructions ``operands`` (values ``ops``)
        concatenated (each row-major) and their element types; each operand's element
        count checked against its shape."""
        flat, types = [], []
        for o, x, t in zip(operands, ops, op_types):
            if isinstance(t, list) or not isinstance(o.shape, ArrayShape) or \
                    any(o.shape.dynamic) or TOKEN == t:
                raise Unsupported(f"{o.opcode} operands")
            names, ts = flatten(x, t)
            if len(names) != o.shape.size:
                raise Unsupported(f"{o.opcode} operand size")
            flat += names
            types += ts
        return flat, types

    def dynamic_slice(self, instr, op, ops, op_types, et):
        """dynamic-slice and dynamic-update-slice on small arrays, the CPU's rule: each
        start (a scalar, or one rank-1 array of them) clamped to ``[0, dim - size]``,
        computed at run time as the count of ``1..dim - size`` it reaches (no
        arithmetic on the index type); each result element picks, by the clamped
        starts' offset, its source among the few possible ones."""
        shape = instr.operands[0].shape
        nfix = 1 if op == "dynamic-slice" else 2
        (xs, xtypes) = self.operand_elements(instr.operands[:1], ops[:1], op_types[:1])
        if any(t != et for t in xtypes):
            raise Unsupported(f"{op} changing the element type")
        if op == "dynamic-slice":
            sizes = tuple(int(v) for v in instr.attrs.get("dynamic_slice_sizes"))
            upd = None
        else:
            ushape = instr.operands[1].shape
            upd, utypes = self.operand_elements(instr.operands[1:2], ops[1:2], op_types[1:2])
            if any(t != et for t in utypes) or not isinstance(ushape, ArrayShape):
                raise Unsupported(f"{op} changing the element type")
            sizes = tuple(ushape.dims)
        starts, stypes = [], []
        for x, t in zip(ops[nfix:], op_types[nfix:]):
            n, ts = flatten(x, t)
            starts += n
            stypes += ts
        dims = tuple(shape.dims)
        if len(starts) != len(dims) or len(sizes) != len(dims) or any(
                t == TOKEN or not t.is_integer for t in stypes) or any(
                s > d or s < 0 for s, d in zip(sizes, dims)):
            raise Unsupported(f"{op} starts")
        his = [d - s for d, s in zip(dims, sizes)]
        strides = [int(np.prod(dims[k + 1:])) for k in range(len(dims))]
        offset = []
        for x, t, hi, stride in zip(starts, stypes, his, strides):
            if hi == 0:
                continue
            v = self.load(x, t)
            clamped = "0"
            for k in range(1, hi + 1):
                clamped = f"({k} if {v} >= {k} else {clamped})"
            offset.append(f"{self.line(clamped)} * {stride}")
        o = self.line(" + ".join(offset)) if offset else None
        combos = list(itertools.product(*(range(h + 1) for h in his)))

        def pick(candidates):  # [(offset, value)]: the value of the run-time offset
            value = candidates[-1][1]
            for off, v in reversed(candidates[:-1]):
                value = f"({v} if {o} == {off} else {value})"
            return value if len(candidates) == 1 else self.line(value)

        out = []
        if op == "dynamic-slice":
            for j in np.ndindex(*sizes):
                base = sum(a * b for a, b in zip(j, strides))
                out.append(pick([(sum(k * b for k, b in zip(c, strides)),
                                  xs[base + sum(k * b for k, b in zip(c, strides))])
                                 for c in combos]))
            return out
        ustrides = [int(np.prod(sizes[k + 1:])) for k in range(len(sizes))]
        for p in np.ndindex(*dims):
            cands = []
            for c in combos:
                inside = all(k <= q < k + s for k, q, s in zip(c, p, sizes))
                v = upd[sum((q - k) * b for q, k, b in zip(p, c, ustrides))] if inside else \
                    xs[sum(q * b for q, b in zip(p, strides))]
                cands.append((sum(k * b for k, b in zip(c, strides)), v))
            out.append(pick(cands))
        return out

    def vec_elementwise(self, instr, ops, op_types, vec):
        """An elementwise op on small arrays: each element through the scalar path (the
        same instruction on one element); a one-element operand (select's scalar pred,
        clamp's scalar bounds) goes to every element."""
        n = vec.n if vec is not None else None
        for t in op_types:
            if isinstance(t, list) or t == TOKEN:
                raise Unsupported(f"{instr.opcode} of a tuple")
            if isinstance(t, VecType):
                if n is not None and t.n != n:
                    raise Unsupported(f"{instr.opcode} sizes")
                n = t.n
        if vec is None or vec.n != n:
            raise Unsupported(f"{instr.opcode} of a small array")
        inner = dataclasses.replace(instr, shape=ArrayShape(vec.et, ()))
        out = []
        for i in range(n):
            value, vtype = self.instruction(
                inner, [x[i] if isinstance(t, VecType) else x for x, t in zip(ops, op_types)],
                [t.et if isinstance(t, VecType) else t for t in op_types])
            if vtype != vec.et:
                raise Unsupported(f"{instr.opcode} element type")
            out.append(value)
        return tuple(out), vec

    @form(*INDEX_MAPS, "dynamic-slice", stage=ELEMENT)
    def element_move(self, instr, ops, op_types, et):
        """A move of a one-element array: the element in is the element out."""
        if op_types[0] != et:
            raise Unsupported(f"{instr.opcode} changing the element type")
        return ops[0]

    @form("dynamic-update-slice", stage=ELEMENT)
    def element_update(self, instr, ops, op_types, et):
        """dynamic-update-slice of one-element arrays: the update's element."""
        if op_types[0] != et:
            raise Unsupported(f"{instr.opcode} changing the element type")
        return ops[1]
