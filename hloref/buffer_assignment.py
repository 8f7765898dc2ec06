"""XLA's buffer assignment, read from its text dump (``*-buffer-assignment.txt``).

XLA writes it with ``--xla_dump_to`` beside the optimized module
(``BufferAssignment::ToString``)::

    BufferAssignment:
    allocation 0: size 8192, output shape is |f32[32,64]|, maybe-live-out:
     value: <59 wrapped_reduce-window @0> (size=256,offset=0): f32[32,2]{1,0}
    allocation 1: size 8192, parameter 0, shape |f32[32,64]| at ShapeIndex {}:
     value: <57 flat_0_.1 @0> (size=8192,offset=0): f32[32,64]{1,0}

A value is ``<id instruction[{shape index}][ (phi)] @color>``: the index is printed only
when the instruction's shape is a tuple, ``@color`` is the memory space. ``figures()``
totals the allocations as ``CompiledMemoryStats::PopulateBufferStatsFromAllocations``
does for ``memory_analysis()``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .errors import HloParseError

__all__ = ["Allocation", "AssignedValue", "BufferAssignment", "parse_buffer_assignment"]


@dataclass
class AssignedValue:
    id: int
    instruction: str
    index: tuple[int, ...]
    color: int
    size: int
    offset: int
    shape_text: str
    is_phi: bool = False
    line: int = 0

    @property
    def name(self) -> str:
        return self.instruction + ("{" + ",".join(map(str, self.index)) + "}"
                                   if self.index else "")


@dataclass
class Allocation:
    index: int
    size: int
    kinds: set[str] = field(default_factory=set)
    parameter: int | None = None
    parameter_index: tuple[int, ...] = ()
    color: int = 0
    values: list[AssignedValue] = field(default_factory=list)
    line: int = 0

    @property
    def is_parameter(self) -> bool:
        return self.parameter is not None

    @property
    def is_temp(self) -> bool:
        return "preallocated-temp" in self.kinds

    @property
    def is_live_out(self) -> bool:
        return "maybe-live-out" in self.kinds

    @property
    def is_constant(self) -> bool:
        return "constant" in self.kinds

    @property
    def is_thread_local(self) -> bool:
        return "thread-local" in self.kinds


@dataclass
class BufferAssignment:
    allocations: list[Allocation]
    source_name: str | None = None

    def values(self):
        for alloc in self.allocations:
            for value in alloc.values:
                yield alloc, value

    def figures(self, host: bool = False) -> dict[str, int]:
        """argument, output, alias, temp and constant bytes of device (or host, color 5)
        allocations: parameter allocations are arguments, live-out ones outputs, both
        aliases, preallocated temps temp; thread-local allocations count nowhere."""
        out = dict(argument=0, output=0, alias=0, temp=0, constant=0)
        for a in self.allocations:
            if (a.color == 5) != host or a.is_thread_local:
                continue
            if a.is_parameter:
                out["argument"] += a.size
            if a.is_live_out:
                out["output"] += a.size
            if a.is_parameter and a.is_live_out:
                out["alias"] += a.size
            if a.is_temp:
                out["temp"] += a.size
            if a.is_constant:
                out["constant"] += a.size
        return out


_ALLOC = re.compile(r"allocation (\d+): size (\d+)(.*):\s*$")
_PARAM = re.compile(r"parameter (\d+), shape \|.*?\| at ShapeIndex \{([\d,\s]*)\}")
_VALUE = re.compile(r"\s*value: <(\d+) ([^\s{>]+)(\{[\d,\s]*\})?( \(phi\))?(?: @(\d+))?> "
                    r"\(size=(\d+),offset=(\d+)\): (.*)$")
_KINDS = ("maybe-live-out", "constant", "thread-local", "preallocated-temp", "tuple",
          "output shape")


def parse_buffer_assignment(text: str, source_name: str | None = None) -> BufferAssignment:
    """Read the allocations and their values; everything after them (the totals, the used
    values, the heap-simulator traces some versions append) is skipped."""
    allocations: list[Allocation] = []
    started = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("BufferAssignment:"):
            started = True
            continue
        if not started or not line.strip():
            continue
        m = _ALLOC.match(line)
        if m:
            alloc = Allocation(int(m.group(1)), int(m.group(2)), line=number)
            rest = m.group(3)
            alloc.kinds = {k for k in _KINDS if k in rest}
            p = _PARAM.search(rest)
            if p:
                alloc.parameter = int(p.group(1))
                alloc.parameter_index = tuple(int(x) for x in p.group(2).replace(" ", "")
                                              .split(",") if x)
            allocations.append(alloc)
            continue
        if line.startswith(" value:"):
            v = _VALUE.match(line)
            if v is None or not allocations:
                raise HloParseError(f"not a buffer-assignment value line: {line.strip()!r}",
                                    line=number, column=1, filename=source_name)
            index = v.group(3) or "{}"
            value = AssignedValue(
                id=int(v.group(1)), instruction=v.group(2),
                index=tuple(int(x) for x in index.strip("{}").replace(" ", "").split(",") if x),
                color=int(v.group(5) or 0), size=int(v.group(6)), offset=int(v.group(7)),
                shape_text=v.group(8), is_phi=bool(v.group(4)), line=number)
            alloc = allocations[-1]
            alloc.values.append(value)
            alloc.color = value.color
            continue
        if allocations:  # the totals and the sections after the allocations
            break
    if not started:
        raise HloParseError("not a buffer assignment: no 'BufferAssignment:' line", line=1,
                            column=1, filename=source_name)
    return BufferAssignment(allocations, source_name)
