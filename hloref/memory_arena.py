"""Evaluate a module *through* a buffer assignment: every value lives in its slice of a
byte arena, so an assignment that lets two live values share bytes changes the answer.

Each instruction of the entry and of the computations a ``while``, ``conditional`` or
``call`` runs reads its operands back from the arena (bytes in the layout's physical
order, so a ``bitcast`` reads the same bytes under its own shape), computes its result
with hloref's op, and writes the values it defines into their slices; an instruction
that only forwards values (``tuple``, ``get-tuple-element``, ``bitcast``) reads them
from the bytes, and a called computation's parameters read the caller's bytes. A loop's
body runs through the arena on every iteration.

``evaluate_through_assignment`` compares every value (in a loop, its last iteration's)
with an ordinary evaluation and names the first instruction, in the flattened schedule,
whose value changed and the two values that collided: the live value whose bytes were
overwritten and the value that overwrote them. Values with no byte image in the
assignment (tokens, packed sub-byte arrays, dynamic shapes) are carried beside the arena
and counted in ``ArenaResult.unplaced``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .assignment_check import AssignmentCheck, slices_by_buffer
from .buffer_assignment import BufferAssignment
from .ir import Module
from .liveness import SEQUENTIAL_CALLERS, Liveness, analyze
from .memory_sizes import element_bits, leaf_indices, subshape
from .shapes import ArrayShape, TupleShape

__all__ = ["ArenaResult", "evaluate_through_assignment"]


@dataclass
class ArenaResult:
    #: the first instruction whose value differs from the ordinary evaluation
    first_changed: str | None = None
    #: (overwritten value, overwriting value), XLA's value names
    collided: tuple[str, str] | None = None
    message: str = ""
    compared: int = 0
    unplaced: int = 0
    #: every overwrite of a live value: (time, overwritten, overwriting, allocation)
    clobbers: list[tuple[int, str, str, int]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.first_changed is None


def _perm(shape: ArrayShape) -> list[int]:
    return list(reversed(shape.minor_to_major()))


class _Arena:
    def __init__(self, lv: Liveness, assignment: BufferAssignment):
        self.lv = lv
        check = AssignmentCheck()
        self.slices = slices_by_buffer(lv, assignment, check)
        self.memory = {a.index: np.zeros(a.size, np.uint8) for a in assignment.allocations}
        #: allocation -> [(lo, hi, value id)] last written
        self.owners: dict[int, list[tuple[int, int, int]]] = {}
        #: values with no byte image, by value id (a position's when it has none)
        self.aside: dict[object, object] = {}
        self.clobbers: list[tuple[int, str, str, int]] = []
        self.unplaced: set = set()

    def place(self, key):
        vid = self.lv.position_value.get(key)
        if vid is None:
            return None, None
        return vid, self.slices.get(self.lv.values[vid].buffer)

    def write_leaf(self, key, shape, value, t: int) -> None:
        vid, where = self.place(key)
        if where is None or not isinstance(shape, ArrayShape) or not isinstance(
                value, np.ndarray) or not shape.is_static:
            self.aside[key if vid is None else vid] = value
            return
        alloc, offset, size, _ = where
        if element_bits(shape) < 8 * shape.dtype.itemsize:  # packed: no byte image here
            self.aside[vid] = value
            self.unplaced.add(key)
            return
        data = np.ascontiguousarray(np.transpose(value, _perm(shape))).view(np.uint8).ravel()
        # a slice too small for its value: the kernel writes past it, as here
        data = data[:len(self.memory[alloc]) - offset]
        self.aside.pop(vid, None)
        lo, hi = offset, offset + data.size
        owners = self.owners.setdefault(alloc, [])
        mine = self.lv.values[vid]
        kept = []
        for olo, ohi, other in owners:
            if ohi <= lo or olo >= hi:
                kept.append((olo, ohi, other))
                continue
            victim = self.lv.values[other]
            # live: defined by now and read later (in a loop, a value of the previous
            # iteration whose range starts after t is dead)
            if victim.buffer != mine.buffer and victim.start <= t < victim.end:
                self.clobbers.append((t, victim.name, mine.name, alloc))
            if olo < lo:
                kept.append((olo, lo, other))
            if ohi > hi:
                kept.append((hi, ohi, other))
        kept.append((lo, hi, vid))
        self.owners[alloc] = kept
        self.memory[alloc][lo:hi] = data

    def read_leaf(self, key, shape):
        vid, where = self.place(key)
        if (key if vid is None else vid) in self.aside:
            return self.aside[key if vid is None else vid]
        if where is None or not isinstance(shape, ArrayShape):
            return None
        alloc, offset, _, _ = where
        if offset >= len(self.memory[alloc]):
            return None
        perm = _perm(shape)
        physical = [max(shape.dims[i], 0) for i in perm]
        count = int(np.prod(physical)) if physical else 1
        raw = self.memory[alloc][offset:offset + count * shape.dtype.itemsize]
        if raw.size < count * shape.dtype.itemsize:  # past the allocation's end
            raw = np.concatenate([raw, np.zeros(count * shape.dtype.itemsize - raw.size,
                                                np.uint8)])
        flat = raw.view(shape.dtype)[:count].reshape(physical)
        return np.transpose(flat, np.argsort(perm)).copy()

    def write(self, name: str, shape, value, t: int, defined) -> None:
        for ix in leaf_indices(shape):
            sub = subshape(shape, ix)
            if isinstance(sub, TupleShape) or (name, ix) not in defined:
                continue
            self.write_leaf((name, ix), sub, _pick(value, ix), t)

    def read(self, name: str, shape, ix=()):
        sub = subshape(shape, ix)
        if isinstance(sub, TupleShape):
            return tuple(self.read(name, shape, ix + (i,)) for i in range(len(sub.elements)))
        value = self.read_leaf((name, ix), sub)
        return value


def _pick(value, index):
    for i in index:
        value = value[i]
    return value


def _same(a, b) -> bool:
    if isinstance(a, tuple) or isinstance(b, tuple):
        return (isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b)
                and all(_same(x, y) for x, y in zip(a, b)))
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return a.shape == b.shape and a.tobytes() == b.tobytes()
    return True


def evaluate_through_assignment(module: Module, assignment: BufferAssignment, args: list, *,
                                lv: Liveness | None = None) -> ArenaResult:
    """Run ``module`` on ``args`` with every value in its slice; see the module
    docstring. ``lv``: the module's liveness, if already computed."""
    from .evaluator.interpreter import Interpreter
    lv = lv or analyze(module)
    entry = module.entry
    reference: dict[str, object] = {}

    time = {name: t for t, name in enumerate(lv.timeline)}
    #: the computations with buffers: the entry and what while/conditional/call run
    sequential = {c.name for c in module.computations.values()
                  if any(i.name in time for i in c.instructions)}

    def observe(comp, instr, value):
        if comp.name in sequential:  # in a loop: the last iteration's value
            reference[instr.name] = value

    Interpreter(module, observer=observe).run(list(args))
    arena = _Arena(lv, assignment)
    defined = {key for v in lv.values for key in v.positions[:1]}
    everything = set(lv.position_value)
    seen: dict[str, object] = {}
    for p in entry.parameters:
        arena.write(p.name, p.shape, args[p.parameter_number], 0, defined)
        seen[p.name] = arena.read(p.name, p.shape)

    def hook(comp, instr, operands, value, recompute):
        if comp.name not in sequential:
            return value
        t = time.get(instr.name, 0)
        if instr.opcode in SEQUENTIAL_CALLERS:
            # the called computations ran through the arena already (this hook saw their
            # instructions), on operands read from it: their results go to the slices
            arena.write(instr.name, instr.shape, value, t, everything)
        elif any((instr.name, ix) in defined for ix in leaf_indices(instr.shape)):
            # a called computation's parameters hold the caller's bytes
            mine = [_fill(arena.read(o.name, o.shape), operand)
                    if o.name in seen or o.opcode == "parameter" else operand
                    for o, operand in zip(instr.operands, operands)]
            value = recompute(*mine) if instr.operands else value
            arena.write(instr.name, instr.shape, value, t, defined)
        out = arena.read(instr.name, instr.shape)
        out = _fill(out, value)
        seen[instr.name] = out
        return out

    Interpreter(module, perturb=hook).run(list(args))
    result = ArenaResult(clobbers=arena.clobbers, unplaced=len(arena.unplaced))
    for name in lv.timeline:
        if name not in seen or name not in reference:
            continue
        result.compared += 1
        if not _same(reference[name], seen[name]):
            result.first_changed = name
            break
    if result.first_changed is not None:
        instr = next(i for _, i in module.instructions() if i.name == result.first_changed)
        reads = {o.name for o in instr.operands} | {instr.name}
        events = [c for c in arena.clobbers if c[1].split("{")[0] in reads] or arena.clobbers
        if events:
            t, victim, writer, alloc = events[0]
            result.collided = (victim, writer)
            result.message = (f"%{result.first_changed} computes a different value through "
                              f"the assignment: {writer} overwrote {victim} (allocation "
                              f"{alloc}, at %{lv.timeline[t]}) while {victim} was live")
        else:
            result.message = (f"%{result.first_changed} computes a different value through "
                              "the assignment (no overwrite of a live value recorded)")
    return result


def _fill(read, value):
    """The arena's value, with the leaves it has no bytes for taken from ``value``."""
    if isinstance(read, tuple):
        return tuple(_fill(r, v) for r, v in zip(read, value))
    return value if read is None else read
