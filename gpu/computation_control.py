"""Device forms of the ops that pass values along, call, loop, choose and wait
(``gpu/computation_emitter.py`` registers them): tuples, get-tuple-element, copy,
opt-barrier, add-dependency and domain (the operand), tokens (after-all), nested
``call``/``fusion`` (inlined), ``conditional`` (every branch computed, the selected one
kept; branches with a loop become an if/elif block, so an unselected branch's loop never
runs), ``while`` (a loop in the device function over the state's scalars), and on a
one-device module replica-id, partition-id, the synchronous collectives (the one
participant's value) and the asynchronous wrappers (async-start/update/done of a
wrapped op or computation, copy-start/done, and the dedicated all-reduce, all-gather and
collective-permute pairs).

A ``while`` is bounded by the same ``Limits.max_while_iterations`` as the CPU's (the
limit of the evaluation that compiles it, ``gpu/computation.py:LOOP_RUN``): a thread
whose loop reaches it stops the loop and records it, as does one whose loop state comes
back bit for bit unchanged while the condition holds (a pure computation then never
ends; the CPU proves that from the parts its condition reads). A ``while`` that reads
the rng state is not declared endless when its loop state comes back unchanged (a later
read may change it). On one device a collective's reducer is never called (the CPU's
group of one), so it may hold anything.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from numba import cuda

from hloref.opcodes import ALONE_IDENTITY, FORWARDS
from hloref.shapes import TupleShape

from .computation_emitter import (LOOP_STATUS_TOP, ONE_ELEMENT, VALUES, WHOLE, form)
from .computation_values import (TOKEN, Unsupported, VecType, flatten, rebuild, scalar_type,
                                 storage_constant)

__all__ = ["ControlForms"]


class ControlForms:
    """The emitter's forms of structure, control flow, collectives and async pairs."""

    @form("tuple", stage=VALUES)
    def tuple_(self, instr, ops, op_types):
        return list(ops), list(op_types)

    @form("get-tuple-element", stage=VALUES)
    def get_tuple_element(self, instr, ops, op_types):
        k = int(instr.attrs.get("index"))
        return ops[0][k], op_types[0][k]

    @form(*sorted(FORWARDS), stage=VALUES)
    def forward(self, instr, ops, op_types):
        return ops[0], op_types[0]  # add-dependency: the value, its token dropped

    @form("after-all", stage=WHOLE)
    def after_all(self, instr, ops, op_types):
        return "0", TOKEN  # a token: no value, only an order the device does not need

    @form("call", "fusion", stage=WHOLE, small_arrays=True)
    def call(self, instr, ops, op_types):
        (callee,) = instr.called_computation_names()
        outer = self.call_path
        self.call_path = outer + (id(instr),)
        try:
            return self.emit(self.module.computations[callee], ops, op_types)
        finally:
            self.call_path = outer

    @form("replica-id", "partition-id", stage=ONE_ELEMENT)
    def device_id(self, instr, ops, op_types):
        et = scalar_type(instr.shape)
        k = self.device[0] if instr.opcode == "replica-id" else self.device[1]
        return self.bind("C", storage_constant(np.full(1, k), et)), et

    @form("conditional", stage=WHOLE, small_arrays=True)
    def conditional(self, instr, ops, op_types):
        """Every branch computed (scalar computations have no effects, and an unselected
        branch's value is dropped), then the selected one: a pred selector picks the
        true or the false branch; an s32 index picks its branch, any index outside
        [0, N) the last one (the CPU's ``run_conditional``). Branches holding a loop or
        (serial mode) a state site: the selected one only (``conditional_blocks``)."""
        attrs = instr.attrs
        branches = attrs.get("branch_computations")
        if branches is not None:
            names = [str(c) for c in branches]
        else:
            names = [str(attrs.get("true_computation")), str(attrs.get("false_computation"))]
        sel, args, arg_types = ops[0], ops[1:], op_types[1:]
        if len(args) != len(names) or isinstance(op_types[0], (list, VecType)):
            raise Unsupported("conditional operands")
        loops, sites = len(self.loops), self.state_count
        start = len(self.lines)
        results = [self.emit(self.module.computations[n], [a], [t])
                   for n, a, t in zip(names, args, arg_types)]
        rtype = results[0][1]
        if any(t != rtype for _, t in results):
            raise Unsupported("conditional branches of different types")
        # no loop of an unselected branch runs, and no state site of one counts
        if (len(self.loops) > loops or self.state_count > sites) and len(names) > 1:
            del self.lines[start:]
            del self.loops[loops:]
            return self.conditional_blocks(names, sel, args, arg_types, branches is None), rtype
        if branches is None:
            return self.choose(f"{sel} != 0", results[0][0], results[1][0]), rtype
        value = results[-1][0]
        for k in range(len(results) - 2, -1, -1):
            value = self.choose(f"{sel} == {k}", results[k][0], value)
        return value, rtype

    def conditional_blocks(self, names, sel, args, arg_types, pred_selector):
        """The selected branch only, in an if/elif block (the CPU's choice of branch);
        each branch assigns the same result names."""
        n = len(names)
        conds = [f"{sel} != 0", None] if pred_selector else \
            [f"{sel} == {k}" for k in range(n - 1)] + [None]
        result = None
        for k, (name, a, t) in enumerate(zip(names, args, arg_types)):
            self.statement(f"if {conds[k]}:" if k == 0 else
                           (f"elif {conds[k]}:" if conds[k] is not None else "else:"))
            outer = self.indent
            self.indent += "    "
            value, vtype = self.emit(self.module.computations[name], [a], [t])
            leaves, types = flatten(value, vtype)
            if TOKEN in types:
                raise Unsupported("conditional with a token result")
            if result is None:
                result = [self.fresh() for _ in leaves]
            for r, v, lt in zip(result, leaves, types):
                self.statement(f"{r} = {self.normal(v, lt)}")
            self.indent = outer
        return rebuild(result, vtype)

    @form("while", stage=WHOLE, small_arrays=True)
    def while_loop(self, instr, ops, op_types):
        """``while cond(state): state = body(state)`` as a loop over the state's scalars,
        at most ``limit`` body runs; a thread past it, or whose state comes back bit for
        bit unchanged with the condition holding, writes its code to ``loop_status`` and
        leaves the loop (the interpreter raises the error after the evaluation)."""
        attrs = instr.attrs
        cond = self.module.computations[str(attrs.get("condition"))]
        body = self.module.computations[str(attrs.get("body"))]
        stype = op_types[0]
        leaves, types = flatten(ops[0], stype)  # small arrays: one variable per element
        k = len(self.loops)
        draws, sites = self.rng_sites, self.state_count
        self.loops.append((instr.name, (self.limit, cond.name, body.name)))
        if "LOOP_STATUS" not in self.ns:
            self.ns["LOOP_STATUS"] = cuda.to_device(np.zeros(1, np.int64))
            self.ns["cuda"] = cuda
        if TOKEN in types:
            raise Unsupported("while with a token in its state")
        state = [self.line(self.normal(v, t)) for v, t in zip(leaves, types)]
        count = self.line("0")
        self.statement("while True:")
        outer = self.indent
        self.indent += "    "
        pred, ptype = self.emit(cond, [rebuild(state, stype)], [stype])
        if isinstance(ptype, list) or not ptype.is_pred:
            raise Unsupported("while condition result")
        self.statement(f"if {pred} == 0:")
        self.statement("    break")
        self.statement(f"if {count} >= {self.limit}:")
        self.statement(f"    cuda.atomic.max(LOOP_STATUS, 0, {LOOP_STATUS_TOP - (2 * k + 1)})")
        self.statement("    break")
        new, ntype = self.emit(body, [rebuild(state, stype)], [stype])
        if ntype != stype:
            raise Unsupported("while body result type")
        new = [self.line(self.normal(v, t)) for v, t in zip(flatten(new, ntype)[0], types)]
        same = " and ".join(self.same_bits(a, b, t) for a, b, t in zip(new, state, types))
        # a loop that draws or reads the rng state may change its state later
        if same and self.rng_sites == draws and self.state_count == sites:
            self.statement(f"if {same}:")
            self.statement(f"    cuda.atomic.max(LOOP_STATUS, 0, {LOOP_STATUS_TOP - (2 * k + 2)})")
            self.statement("    break")
        for a, b in zip(state, new):
            self.statement(f"{a} = {b}")
        self.statement(f"{count} = {count} + 1")
        self.indent = outer
        return rebuild(state, stype), stype

    def one_device(self, instr, op, ops, op_types):
        """Collectives of a module on one device (``replica_count x num_partitions ==
        1``): the one participant's value, as the CPU's collectives give it (the
        catalogue's ``alone-identity`` group: all-reduce, all-gather, reduce-scatter,
        all-to-all, collective-broadcast: the operands;
        collective-permute: ``permute_one_device``). On several devices each call would
        be a rendezvous: the CPU's, in its order (a map body's or a reduce reducer's are
        unrolled over the devices: ``gpu/computation_devices.py``)."""
        if self.device[2] != 1:
            raise Unsupported(f"{op} on several devices")
        if any(isinstance(t, list) for t in op_types):
            raise Unsupported(f"{op} of a tuple")
        if op == "collective-permute":
            return self.permute_one_device(instr, ops, op_types)
        return (list(ops), list(op_types)) if len(ops) > 1 else (ops[0], op_types[0])

    def permute_one_device(self, instr, ops, op_types):
        """collective-permute on one device: the operand when the pairs hold ``{0,0}``,
        else zeros."""
        if len(ops) != 1 or instr.attrs.get("slice_sizes") is not None:
            raise Unsupported("collective-permute with several operands")
        pairs = [tuple(int(v) for v in pr) for pr in instr.attrs.get("source_target_pairs")]
        if any(pr != (0, 0) for pr in pairs):
            raise Unsupported("collective-permute naming another device")
        if (0, 0) in pairs:
            return ops[0], op_types[0]
        return self.bind("C", storage_constant(np.zeros(1), op_types[0])), op_types[0]

    @form(*sorted(ALONE_IDENTITY), stage=ONE_ELEMENT)
    def collective(self, instr, ops, op_types):
        """A collective of the catalogue's ``alone-identity`` group: its operands."""
        return self.one_device(instr, instr.opcode, ops, op_types)

    @form("collective-permute", stage=ONE_ELEMENT)
    def collective_permute(self, instr, ops, op_types):
        return self.one_device(instr, instr.opcode, ops, op_types)

    # The CPU's asynchronous pairs: ``async-start`` computes the wrapped op (a sugared
    # ``X-start``) or its called computation at once and gives ``((operands...), result,
    # context zeros...)``; ``async-update`` passes it on, ``async-done`` takes the result;
    # ``copy-start`` gives ``(copy, source[, context])``, ``copy-done`` the copy. The
    # dedicated collective pairs of a one-device module: ``all-reduce-start`` gives the
    # value and ``all-reduce-done`` passes it; ``all-gather-start`` gives ``(operand,
    # value)``, ``collective-permute-start`` ``(operand, value, u32 context zeros...)``,
    # and their ``-done`` takes the value.

    @form("async-update", "all-reduce-done", stage=ONE_ELEMENT)
    def async_pass(self, instr, ops, op_types):
        return ops[0], op_types[0]

    @form("async-done", "all-gather-done", "collective-permute-done", stage=ONE_ELEMENT)
    def async_done(self, instr, ops, op_types):
        return ops[0][1], op_types[0][1]

    @form("copy-done", stage=ONE_ELEMENT)
    def copy_done(self, instr, ops, op_types):
        return ops[0][0], op_types[0][0]

    @form("all-reduce-start", stage=ONE_ELEMENT)
    def all_reduce_start(self, instr, ops, op_types):
        return self.one_device(instr, "all-reduce", ops, op_types)

    def async_contexts(self, instr):
        """The context values of a ``-start``'s tuple (its elements after the second):
        zeros of their types."""
        shape = instr.shape
        if not isinstance(shape, TupleShape) or len(shape.elements) < 2:
            raise Unsupported(f"{instr.opcode} shape")
        contexts, ctypes = [], []
        for s in shape.elements[2:]:
            et = scalar_type(s, rank0=False)
            contexts.append(self.bind("C", storage_constant(np.zeros(1), et)))
            ctypes.append(et)
        return contexts, ctypes

    @form("all-gather-start", "collective-permute-start", stage=ONE_ELEMENT)
    def collective_start(self, instr, ops, op_types):
        op = instr.opcode
        contexts, ctypes = self.async_contexts(instr)
        if len(ops) != 1 or (op == "all-gather-start" and ctypes) or \
                any(t.name != "u32" for t in ctypes):
            raise Unsupported(f"{op} operands")
        value, vtype = self.one_device(instr, op[:-len("-start")], ops, op_types)
        return [ops[0], value] + contexts, [op_types[0], vtype] + ctypes

    @form("copy-start", stage=ONE_ELEMENT)
    def copy_start(self, instr, ops, op_types):
        contexts, ctypes = self.async_contexts(instr)
        if isinstance(op_types[0], list):
            raise Unsupported("copy-start of a tuple")
        return [ops[0], ops[0]] + contexts[:1], [op_types[0], op_types[0]] + ctypes[:1]

    @form("async-start", stage=ONE_ELEMENT)
    def async_start(self, instr, ops, op_types):
        contexts, ctypes = self.async_contexts(instr)
        if instr.async_wrapped_opcode:
            inner = dataclasses.replace(instr, opcode=instr.async_wrapped_opcode,
                                        shape=instr.shape.elements[1], async_wrapped_opcode=None)
            value, vtype = self.instruction(inner, ops, op_types)
        else:
            calls = instr.attrs.get("calls")
            if calls is None:
                raise Unsupported("async-start without a computation")
            value, vtype = self.emit(self.module.computations[str(calls)], ops, op_types)
        return [list(ops), value] + contexts, [list(op_types), vtype] + ctypes
