"""Check XLA's buffer assignment against hloref's own liveness (``hloref.liveness``).

Four rules, each broken rule a :class:`Collision` (a finding):

* ``out-of-bounds`` / ``too-small``: every value's slice lies inside its allocation and
  holds the value's shape (``hloref.memory_sizes.buffer_bytes``);
* ``split-buffer``: positions that must share bytes (a while's state, an in-place
  update's operand and result, a donated argument and its output) sit in one slice;
* ``live-overlap`` / ``illegal-in-place``: two buffers that are live at the same time
  share no byte, except an instruction's result written over an operand it reads for the
  last time, and only when the op reads that operand element by element at the result's
  own positions (an elementwise op, or a loop fusion whose parameter reaches the root
  through elementwise ops, and dynamic-update-slices over it, only: XLA's
  ``CanShareOperandBufferWithUser``).

* ``read-only``: an entry parameter's allocation that no output aliases, and a
  constant's, hold only that parameter (constant) and its aliases: the caller's
  argument and the program's constants are never written (XLA's
  ``BufferAllocation::is_readonly``).

Thread-local allocations (a reducer's scalars) are XLA:CPU's stack and are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .buffer_assignment import AssignedValue, BufferAssignment
from .ir import Instruction, Module
from .liveness import Buffer, Liveness
from .memory_sizes import buffer_bytes, subshape
from .opcodes import ELEMENTWISE

__all__ = ["Collision", "AssignmentCheck", "check_assignment", "reuses_in_place",
           "slices_by_buffer"]


@dataclass
class Collision:
    rule: str
    message: str
    #: the two values (XLA's names, ``instr{index}``) that collided, or the one at fault
    values: tuple[str, ...] = ()
    allocation: int | None = None
    time: int | None = None

    def __str__(self) -> str:
        return f"{self.rule}: {self.message}"


@dataclass
class AssignmentCheck:
    collisions: list[Collision] = field(default_factory=list)
    #: XLA values hloref has no position for (none expected outside thread-local code)
    unmodelled: list[str] = field(default_factory=list)
    checked_values: int = 0

    @property
    def ok(self) -> bool:
        return not self.collisions


def _instructions(module: Module) -> dict[str, Instruction]:
    return {i.name: i for _, i in module.instructions()}


def _reads_elementwise(module: Module, fusion: Instruction, operand_number: int) -> bool:
    """Whether a loop fusion reads operand ``operand_number`` only elementwise: every
    path from its parameter to the root goes through elementwise ops (and bitcasts of
    the same element count) only."""
    names = fusion.called_computation_names()
    if not names or str(fusion.attrs.get("kind", "kLoop")) not in ("kLoop", "kInput"):
        return False
    body = module.computation(names[0])
    params = [p for p in body.parameters if p.parameter_number == operand_number]
    if not params:
        return False
    users: dict[int, list[Instruction]] = {}
    for instr in body.instructions:
        for o in instr.operands:
            users.setdefault(id(o), []).append(instr)
    out_dims = fusion.shape.dims if hasattr(fusion.shape, "dims") else None
    stack = [params[0]]
    while stack:
        instr = stack.pop()
        for user in users.get(id(instr), []):
            # a dynamic-update-slice writing over this value (its operand 0, and nothing
            # else) keeps every element at its place or replaces it: still elementwise
            # (XLA's AreTransitiveUsesEffectivelyElementwise)
            dus = user.opcode == "dynamic-update-slice" and user.operands[0] is instr and \
                all(o is not instr for o in user.operands[1:])
            if user.opcode not in ELEMENTWISE and user.opcode != "bitcast" and not dus:
                return False
            if getattr(user.shape, "dims", None) != out_dims and user.opcode != "bitcast":
                return False
            stack.append(user)
    return True


def reuses_in_place(module: Module, instr: Instruction, operand: str,
                    out_index: tuple[int, ...] = ()) -> bool:
    """Whether ``instr`` may write its result at ``out_index`` over operand ``operand``'s
    bytes (XLA's ``CanShareOperandBufferWithUser``): an elementwise op, a loop fusion
    reading the operand elementwise, a ``sort`` (operand k becomes result k)."""
    numbers = [k for k, o in enumerate(instr.operands) if o.name == operand]
    if not numbers:
        return False
    try:
        out_shape = subshape(instr.shape, out_index)
    except IndexError:
        return False
    same_size = all(buffer_bytes(instr.operands[k].shape) == buffer_bytes(out_shape)
                    for k in numbers)
    if instr.opcode in ELEMENTWISE:
        return same_size
    if instr.opcode == "fusion":
        return same_size and all(_reads_elementwise(module, instr, k) for k in numbers)
    if instr.opcode == "sort":
        tupled = len(instr.operands) > 1
        return same_size and any(out_index == ((k,) if tupled else ()) for k in numbers)
    return False


def slices_by_buffer(lv: Liveness, assignment: BufferAssignment, check: AssignmentCheck):
    """{buffer id: (allocation, offset, size, value)}; records split buffers, values
    outside their allocation or too small for their shape in ``check``."""
    shapes = {(i.name, ix): subshape(i.shape, ix) for _, i in lv.module.instructions()
              for ix in _indices(i)}
    slices: dict[int, tuple] = {}
    for alloc, value in assignment.values():
        if alloc.is_thread_local:
            continue
        key = (value.instruction, value.index)
        bid = lv.position_buffer.get(key)
        if bid is None:
            check.unmodelled.append(value.name)
            continue
        check.checked_values += 1
        if value.offset < 0 or value.offset + value.size > alloc.size:
            check.collisions.append(Collision(
                "out-of-bounds", f"{value.name} at [{value.offset}, {value.offset + value.size})"
                f" lies outside allocation {alloc.index} of {alloc.size} bytes",
                (value.name,), alloc.index))
        need = buffer_bytes(shapes[key])
        if value.size < need:
            check.collisions.append(Collision(
                "too-small", f"{value.name} ({shapes[key]}) needs {need} bytes, its slice "
                f"in allocation {alloc.index} has {value.size}", (value.name,), alloc.index))
        here = (alloc.index, value.offset, value.size, value)
        there = slices.get(bid)
        if there is None:
            slices[bid] = here
        elif there[:2] != here[:2]:
            check.collisions.append(Collision(
                "split-buffer", f"{there[3].name} and {value.name} must share bytes (one "
                f"buffer: {lv.buffers[bid].name}) but sit at allocation {there[0]} offset "
                f"{there[1]} and allocation {alloc.index} offset {value.offset}",
                (there[3].name, value.name), alloc.index))
    return slices


def _indices(instr: Instruction):
    from .memory_sizes import leaf_indices
    return leaf_indices(instr.shape)


def check_assignment(lv: Liveness, assignment: BufferAssignment) -> AssignmentCheck:
    """Every rule of the module docstring, for ``assignment`` against ``lv``."""
    check = AssignmentCheck()
    slices = slices_by_buffer(lv, assignment, check)
    _read_only(lv, assignment, check)
    instrs = _instructions(lv.module)
    by_alloc: dict[int, list[tuple[int, int, Buffer, AssignedValue]]] = {}
    for bid, (alloc, offset, size, value) in slices.items():
        buf = lv.buffers[bid]
        if buf.size:
            by_alloc.setdefault(alloc, []).append((offset, offset + size, buf, value))
    for alloc, items in by_alloc.items():
        items.sort(key=lambda x: x[0])
        for i, first in enumerate(items):
            for second in items[i + 1:]:
                if second[0] >= first[1]:
                    break
                collision = _overlap(lv, instrs, alloc, first, second)
                if collision is not None:
                    check.collisions.append(collision)
    check.collisions.sort(key=lambda c: (c.time if c.time is not None else -1))
    return check


def _read_only(lv: Liveness, assignment: BufferAssignment, check: AssignmentCheck) -> None:
    """Records a value written into a read-only allocation (module docstring)."""
    for alloc in assignment.allocations:
        readonly = (alloc.is_parameter and not alloc.is_live_out) or alloc.is_constant
        if alloc.is_thread_local or not readonly:
            continue
        placed = [(v, lv.position_buffer.get((v.instruction, v.index))) for v in alloc.values]
        owners = [(v, b) for v, b in placed if b is not None and (
            lv.buffers[b].is_argument if alloc.is_parameter else lv.buffers[b].is_constant)]
        owned = {b for _, b in owners}
        for v, b in placed:
            if b is None or b in owned:
                continue
            owner = owners[0][0].name if owners else f"allocation {alloc.index}"
            what = "entry parameter" if alloc.is_parameter else "constant"
            check.collisions.append(Collision(
                "read-only", f"{v.name} is written into the {what} allocation {alloc.index} of "
                f"{owner}, which is read-only (no output aliases it)",
                (owner, v.name), alloc.index, lv.buffers[b].start))


def _overlap(lv: Liveness, instrs, alloc, first, second) -> Collision | None:
    """The first time two buffers sharing bytes hold live values at once, unless it is a
    legal in-place reuse."""
    lo, hi, a, xa = first
    lo2, hi2, b, xb = second
    for va in a.values:
        for vb in b.values:
            if va.end < vb.start or vb.end < va.start:
                continue
            if va.end == vb.start or vb.end == va.start:
                early, late = (va, vb) if va.end == vb.start else (vb, va)
                t = late.start
                writer = instrs.get(lv.timeline[t]) if t < len(lv.timeline) else None
                read = [n for n, _ in early.positions
                        if writer is not None and any(o.name == n for o in writer.operands)]
                written = [ix for n, ix in late.positions if n == writer.name] or [()]
                if read and early.end == late.start and (lo, hi) == (lo2, hi2) and any(
                        reuses_in_place(lv.module, writer, n, written[0]) for n in read):
                    continue
                if read and early.end == late.start:
                    return Collision(
                        "illegal-in-place", f"{writer.opcode} %{writer.name} writes {late.name} "
                        f"over {early.name}, which it reads, in allocation {alloc} (bytes "
                        f"[{max(lo, lo2)}, {min(hi, hi2)}) shared): {writer.opcode} cannot "
                        "compute in place there", (early.name, late.name), alloc, t)
            t = max(va.start, vb.start)
            return Collision(
                "live-overlap", f"{va.name} (live {va.start}-{va.end}) and {vb.name} (live "
                f"{vb.start}-{vb.end}) share bytes [{max(lo, lo2)}, {min(hi, hi2)}) of "
                f"allocation {alloc} while both are live (from "
                f"%{lv.timeline[min(t, len(lv.timeline) - 1)]})", (va.name, vb.name), alloc, t)
    return None
