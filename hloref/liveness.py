"""Buffers and their live ranges in a scheduled module, from HLO semantics alone.

What XLA's ``HloAliasAnalysis`` and ``HloLiveRange`` compute, derived here independently
from the module text (not from XLA's live-range dump):

* **Positions, values and buffers.** Every (instruction, shape index) of a sequential
  computation is a *position*. A *value* is defined once and forwarded unchanged to other
  positions: a ``tuple``'s elements are its operands, a ``get-tuple-element`` its
  operand's element, a ``bitcast`` (and ``optimization-barrier``, ``domain``,
  ``add-dependency``) its operand, a ``call``'s callee parameters its operands and its
  result the callee's root, ``copy-done`` ``copy-start``'s destination. A *buffer* is the
  values that must hold the same bytes: a ``while``'s init, body and condition
  parameters, body root and result (one value each, XLA's phi values, per index); a
  ``conditional``'s branch roots and result; an in-place op and the operand it updates
  (``dynamic-update-slice``, ``scatter``, a fusion whose root updates a parameter, a
  custom-call's ``output_to_operand_aliasing``); a donated parameter and its output
  (the entry's ``input_output_alias``).
* **Schedule.** ``is_scheduled=true`` modules list each computation's instructions in
  schedule order. The timeline flattens it as ``HloLiveRange`` does: the computations a
  ``while``, ``conditional`` or ``call`` runs come, in order, just before that
  instruction. Fused, reducer and comparator computations get no buffers (XLA:CPU keeps
  their scalars thread-local).
* **Live range.** A value is live from its definition to its last use (a ``while``
  reads its init when the body starts, a ``conditional`` a branch's operand when that
  branch starts, a ``call``'s operands are read by the callee, a body root is read by the
  loop's back edge); the entry's parameters and constants (globals on XLA:CPU) are live
  for the whole program, its outputs from their definition to the end. At a time ``t``
  both the operands an instruction reads for the last time and its result are live. A
  buffer is live while any of its values is.

``analyze(module)`` returns a :class:`Liveness`: the buffers, the timeline, live bytes at
every time per memory space, the peak and the instruction where it occurs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .errors import HloEvalError
from .ir import Computation, Instruction, Module
from .memory_sizes import buffer_bytes, leaf_indices, memory_space, subshape
from .op_properties import opcodes_with

__all__ = ["Value", "Buffer", "Liveness", "analyze", "input_output_aliases", "inplace_pairs",
           "SEQUENTIAL_CALLERS"]

#: Opcodes whose called computations run in sequence (and so get buffers).
SEQUENTIAL_CALLERS = opcodes_with("sequential-callers")
_ALIAS_OPERAND0 = opcodes_with("value-forwarding")
_NO_BYTES = opcodes_with("zero-byte-buffers")
_VIEWS = opcodes_with("buffer-views")


@dataclass
class Value:
    """One value (XLA's ``HloValue``): the positions that forward it unchanged (a tuple's
    element, a get-tuple-element, a bitcast, a call's parameter and result), defined once
    and live from its definition to its last use."""

    id: int
    buffer: int
    #: (instruction name, shape index) of every position, the defining one first
    positions: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)
    start: int = 0
    end: int = 0

    @property
    def name(self) -> str:
        instr, index = self.positions[0]
        return instr + ("{" + ",".join(map(str, index)) + "}" if index else "")


@dataclass
class Buffer:
    """One buffer: values that must share bytes (a while's state, an in-place update,
    a donated argument and its output), its size and memory space."""

    id: int
    values: list[Value] = field(default_factory=list)
    size: int = 0
    space: int = 0
    is_argument: bool = False
    is_output: bool = False
    is_constant: bool = False

    @property
    def name(self) -> str:
        return self.values[0].name

    @property
    def positions(self) -> list[tuple[str, tuple[int, ...]]]:
        return [p for v in self.values for p in v.positions]

    @property
    def start(self) -> int:
        return min(v.start for v in self.values)

    @property
    def end(self) -> int:
        return max(v.end for v in self.values)

    def intervals(self) -> list[tuple[int, int]]:
        """The times its values are live, merged: ``[(start, end), ...]`` inclusive."""
        out: list[list[int]] = []
        for lo, hi in sorted((v.start, v.end) for v in self.values):
            if out and lo <= out[-1][1] + 1:
                out[-1][1] = max(out[-1][1], hi)
            else:
                out.append([lo, hi])
        return [tuple(x) for x in out]

    @property
    def kind(self) -> str:
        if self.is_argument and self.is_output:
            return "alias"
        if self.is_argument:
            return "argument"
        if self.is_output:
            return "output"
        if self.is_constant:
            return "constant"
        return "temp"


@dataclass
class Liveness:
    module: Module
    buffers: list[Buffer]
    values: list[Value]
    #: instruction names in flattened schedule order (time t = index)
    timeline: list[str]
    #: (instruction name, index) -> value id
    position_value: dict[tuple[str, tuple[int, ...]], int]
    #: live bytes at each time, per memory space
    live: dict[int, list[int]]

    @property
    def end(self) -> int:
        return len(self.timeline)

    @property
    def position_buffer(self) -> dict[tuple[str, tuple[int, ...]], int]:
        return {k: self.values[v].buffer for k, v in self.position_value.items()}

    def peak(self, space: int = 0) -> tuple[int, int]:
        """(peak live bytes, time of the first peak) in memory space ``space``."""
        series = self.live.get(space) or [0]
        best = max(series)
        return best, series.index(best)

    def peak_instruction(self, space: int = 0) -> str:
        t = self.peak(space)[1]
        return self.timeline[min(t, len(self.timeline) - 1)] if self.timeline else ""

    def buffer_at(self, instr: str, index: tuple[int, ...] = ()) -> Buffer:
        return self.buffers[self.values[self.position_value[(instr, index)]].buffer]

    def live_at(self, t: int, space: int = 0) -> list[Buffer]:
        return [b for b in self.buffers if b.space == space and b.size
                and any(lo <= t <= hi for lo, hi in b.intervals())]

    def series(self, kinds: tuple[str, ...], space: int = 0) -> list[int]:
        """Live bytes at each time of the buffers of ``kinds`` in ``space``."""
        out = [0] * (self.end + 1)
        for b in self.buffers:
            if b.space == space and b.size and b.kind in kinds:
                for lo, hi in b.intervals():
                    out[lo] += b.size
                    out[hi + 1] -= b.size
        total = 0
        for t in range(len(out)):
            total += out[t]
            out[t] = total
        return out[:-1] or [0]

    def figures(self, space: int = 0) -> dict[str, int]:
        """What ``memory_analysis()`` reports, from hloref's own buffers: argument, output,
        alias (both), constant and temp bytes (temp: the most temporaries live at once),
        peak (everything live at once) and the time of the peak."""
        mine = [b for b in self.buffers if b.space == space]
        peak, at = self.peak(space)
        return {
            "argument": sum(b.size for b in mine if b.is_argument),
            "output": sum(b.size for b in mine if b.is_output),
            "alias": sum(b.size for b in mine if b.is_argument and b.is_output),
            "constant": sum(b.size for b in mine if b.is_constant),
            "temp": max(self.series(("temp",), space)),
            "peak": peak,
            "peak_time": at,
        }


class _UnionFind:
    def __init__(self):
        self.parent: dict = {}

    def find(self, x):
        self.parent.setdefault(x, x)
        root = x
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[x] != root:
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a, b):
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


_ALIAS_ENTRY = re.compile(r"\{([\d,\s]*)\}\s*:\s*\(\s*(\d+)\s*,\s*\{([\d,\s]*)\}")


def _index(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.replace(" ", "").split(",") if x)


def input_output_aliases(module: Module) -> list[tuple[tuple[int, ...], int, tuple[int, ...]]]:
    """The entry's ``input_output_alias``: (output index, parameter number, parameter
    index) triples."""
    text = module.attrs.get("input_output_alias")
    if text is None:
        return []
    return [(_index(o), int(p), _index(i)) for o, p, i in _ALIAS_ENTRY.findall(str(text))]


def _through_views(instr: Instruction) -> Instruction:
    while instr.opcode in _VIEWS and instr.operands:
        instr = instr.operands[0]
    return instr


def inplace_pairs(module: Module, instr: Instruction) -> list[tuple[int, tuple, tuple]]:
    """(operand number, operand index, output index) for every operand ``instr`` updates
    in place (HloDataflowAnalysis::GetInPlaceInputOutputPairs)."""
    op = instr.opcode
    if op == "dynamic-update-slice":
        return [(0, (), ())]
    if op == "scatter":
        n = len(instr.operands) // 2
        return [(0, (), ())] if n == 1 else [(i, (), (i,)) for i in range(n)]
    if op == "custom-call" and "output_to_operand_aliasing" in instr.attrs:
        text = str(instr.attrs["output_to_operand_aliasing"])
        return [(int(p), _index(i), _index(o)) for o, p, i in _ALIAS_ENTRY.findall(text)]
    if op != "fusion":
        return []
    names = instr.called_computation_names()
    if not names:
        return []
    body = module.computation(names[0])
    root = body.root
    outputs = ([(r, (i,)) for i, r in enumerate(root.operands)] if root.opcode == "tuple"
               else [(root, ())])
    pairs = []
    for leaf, out_index in outputs:
        leaf = _through_views(leaf)
        if leaf.opcode == "dynamic-update-slice":
            targets = [leaf.operands[0]]
        elif leaf.opcode == "scatter":
            targets = leaf.operands[:len(leaf.operands) // 2]
        else:
            continue
        for target in targets:
            source = _through_views(target)
            if source.opcode == "parameter":
                pairs.append((source.parameter_number, (), out_index))
    return pairs


class _Builder:
    def __init__(self, module: Module):
        self.module = module
        self.uf = _UnionFind()  # buffers: positions that share bytes
        self.vf = _UnionFind()  # values: positions that forward one value
        self.timeline: list[str] = []
        self.time: dict[str, int] = {}
        self.defined: dict[tuple, int] = {}  # position -> time it is defined
        self.uses: dict[tuple, int] = {}  # position -> last time it is read
        self.shapes: dict[tuple, object] = {}
        self.constants: set = set()
        self.seen: set[str] = set()

    def positions(self, instr: Instruction) -> list[tuple]:
        return [(instr.name, ix) for ix in leaf_indices(instr.shape)]

    def alias_subtree(self, dst: Instruction, dst_index: tuple, src: Instruction,
                      src_index: tuple, forward: bool = True) -> None:
        """``dst`` at ``dst_index`` shares bytes with ``src`` at ``src_index`` (and the
        indices below); ``forward``: it is the same value, not a new one in those bytes."""
        shape = subshape(dst.shape, dst_index)
        for ix in leaf_indices(shape):
            if (src.name, src_index + ix) not in self.shapes:
                continue
            self.uf.union((src.name, src_index + ix), (dst.name, dst_index + ix))
            if forward:
                self.vf.union((src.name, src_index + ix), (dst.name, dst_index + ix))

    def use(self, instr: Instruction, index: tuple | None, t: int) -> None:
        """``t`` reads ``instr`` at ``index`` (None: every position)."""
        keys = self.positions(instr) if index is None else [(instr.name, index)]
        for key in keys:
            if self.uses.get(key, -1) < t:
                self.uses[key] = t

    def computation(self, comp: Computation, params: list[Instruction] | None,
                    forward: bool = True) -> None:
        if comp.name in self.seen:
            raise HloEvalError(f"computation {comp.name} is called from two places; the "
                               "memory audit needs a flattened call graph (as XLA leaves it)")
        self.seen.add(comp.name)
        for instr in comp.instructions:
            for key in self.positions(instr):
                self.shapes[key] = subshape(instr.shape, key[1])
        if params is not None:
            for p in comp.parameters:
                self.alias_subtree(p, (), params[p.parameter_number], (), forward)
        for instr in comp.instructions:
            self.instruction(instr)

    def instruction(self, instr: Instruction) -> None:
        op = instr.opcode
        if op in SEQUENTIAL_CALLERS:
            self.control(instr)
        t = len(self.timeline)
        self.timeline.append(instr.name)
        self.time[instr.name] = t
        for key in self.positions(instr):
            self.defined.setdefault(key, t)
        if op == "constant":
            self.constants.add((instr.name, ()))
        if op == "tuple":
            for i, operand in enumerate(instr.operands):
                self.alias_subtree(instr, (i,), operand, ())
                self.use(operand, (), t)
        elif op == "get-tuple-element":
            self.alias_subtree(instr, (), instr.operands[0], (int(instr.attrs["index"]),))
            self.use(instr.operands[0], (), t)
        elif op in _ALIAS_OPERAND0 and instr.operands:
            self.alias_subtree(instr, (), instr.operands[0], ())
            for operand in instr.operands[1:]:
                self.use(operand, None, t)
        elif op == "copy-start":
            self.alias_subtree(instr, (1,), instr.operands[0], ())
            self.use(instr.operands[0], None, t)
        elif op == "copy-done":
            self.alias_subtree(instr, (), instr.operands[0], (0,))
            self.use(instr.operands[0], None, t)
        elif op == "while":  # the init is read when the body starts (HloLiveRange)
            body = self.module.computation(str(instr.attrs["body"]))
            self.use(instr.operands[0], None, self.param_time(body, t))
        elif op == "call":  # the callee's parameters are its operands: read in there
            pass
        elif op == "conditional":  # a branch operand is read when its branch starts
            self.use(instr.operands[0], None, t)
            for k, name in enumerate(instr.called_computation_names()):
                if k + 1 < len(instr.operands):
                    self.use(instr.operands[k + 1], None,
                             self.param_time(self.module.computation(name), t))
        else:
            for operand in instr.operands:
                self.use(operand, None, t)
            for number, in_index, out_index in inplace_pairs(self.module, instr):
                if number < len(instr.operands):
                    self.alias_subtree(instr, out_index, instr.operands[number], in_index,
                                       forward=False)

    def param_time(self, comp: Computation, default: int) -> int:
        params = comp.parameters
        return self.time.get(params[0].name, default) if params else default

    def control(self, instr: Instruction) -> None:
        comps = [self.module.computation(n) for n in instr.called_computation_names()]
        if instr.opcode == "while":
            cond = self.module.computation(str(instr.attrs["condition"]))
            body = self.module.computation(str(instr.attrs["body"]))
            init = instr.operands[0]
            for ix in leaf_indices(instr.shape):
                self.shapes[(instr.name, ix)] = subshape(instr.shape, ix)
            self.alias_subtree(instr, (), init, (), forward=False)
            self.computation(cond, [init], forward=False)
            self.computation(body, [init], forward=False)
            self.alias_subtree(instr, (), body.root, (), forward=False)
            self.use(body.root, None, len(self.timeline))  # the back edge
        elif instr.opcode == "conditional":
            for ix in leaf_indices(instr.shape):
                self.shapes[(instr.name, ix)] = subshape(instr.shape, ix)
            for k, branch in enumerate(comps):
                self.computation(branch, [instr.operands[k + 1]])
                self.alias_subtree(instr, (), branch.root, (), forward=False)
                self.use(branch.root, None, len(self.timeline))
        else:  # call
            callee = comps[0]
            for ix in leaf_indices(instr.shape):
                self.shapes[(instr.name, ix)] = subshape(instr.shape, ix)
            self.computation(callee, list(instr.operands))
            self.alias_subtree(instr, (), callee.root, ())


def analyze(module: Module) -> Liveness:
    """Buffers, live ranges and live bytes of ``module`` under its schedule (the order of
    instructions in each computation)."""
    b = _Builder(module)
    entry = module.entry
    b.computation(entry, None)
    end = len(b.timeline) - 1
    for comp in _global_constant_computations(module, b.seen):
        for instr in comp.instructions:
            if instr.opcode == "constant":
                for key in b.positions(instr):
                    b.shapes[key] = subshape(instr.shape, key[1])
                    b.defined[key] = 0
                b.constants.add((instr.name, ()))
    for p in entry.parameters:
        for key in b.positions(p):
            b.uses[key] = end
    for key in b.positions(entry.root):
        b.uses[key] = end
    for out_index, number, in_index in input_output_aliases(module):
        params = entry.parameters
        if number < len(params):
            b.uf.union((entry.root.name, out_index), (params[number].name, in_index))
    opcodes = {i.name: i.opcode for _, i in module.instructions()}
    argument_keys = {k for p in entry.parameters for k in b.positions(p)}
    output_keys = set(b.positions(entry.root))
    value_groups: dict = {}
    for key in b.shapes:
        value_groups.setdefault(b.vf.find(key), []).append(key)
    buffer_of: dict = {}
    buffers: list[Buffer] = []
    values: list[Value] = []
    position_value: dict = {}
    for keys in value_groups.values():
        keys.sort(key=lambda k: (b.defined.get(k, 1 << 60), k[1]))
        root = b.uf.find(keys[0])
        if root not in buffer_of:
            shape = b.shapes[keys[0]]
            buf = Buffer(len(buffers), size=buffer_bytes(shape), space=memory_space(shape))
            if opcodes.get(keys[0][0]) in _NO_BYTES:
                buf.size = 0
            buffer_of[root] = buf
            buffers.append(buf)
        buf = buffer_of[root]
        value = Value(len(values), buf.id, keys)
        value.start = min(b.defined.get(k, end) for k in keys)
        value.end = max([value.start] + [b.uses.get(k, value.start) for k in keys])
        argument = any(k in argument_keys for k in keys)
        constant = any(k in b.constants for k in keys)
        output = any(k in output_keys for k in keys)
        if argument or constant:
            value.start = 0
        if argument or constant or output:
            value.end = end
        buf.is_argument |= argument
        buf.is_constant |= constant
        buf.is_output |= output
        buf.values.append(value)
        values.append(value)
        for k in keys:
            position_value[k] = value.id
    lv = Liveness(module, buffers, values, b.timeline, position_value, {})
    spaces = {buf.space for buf in buffers} | {0}
    lv.live = {space: lv.series(("argument", "output", "alias", "constant", "temp"), space)
               for space in spaces}
    return lv


def _global_constant_computations(module: Module, sequential: set[str]) -> list[Computation]:
    """Computations that are neither sequential nor a fusion's body (reducers, comparators
    and the like, even those a fused op calls): XLA:CPU allocates their constants as
    globals too (measured: a reduce-window reducer inside a fusion, cnn_train)."""
    fused = {str(i.attrs["calls"]) for _, i in module.instructions()
             if i.opcode == "fusion" and "calls" in i.attrs}
    return [c for c in module.computations.values()
            if c.name not in sequential and c.name not in fused]

