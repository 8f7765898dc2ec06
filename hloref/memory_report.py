"""hloref's memory figures beside XLA's, every difference split into named causes.

XLA's figures are ``memory_analysis()``'s (``CompiledMemoryStats``) or, equivalently
(checked on every realistic program), the totals of its buffer assignment
(``BufferAssignment.figures``). The rows:

* ``argument``, ``alias``, ``constant``: hloref's buffers against XLA's allocations;
  no cause is expected, any difference is a finding.
* ``output``: a live-out allocation may be larger than the output it returns, because
  buffer assignment put a larger temporary in it earlier (``live-out allocation holds
  a larger temporary``).
* ``temp``: hloref's is the most temporary bytes live at once; XLA's the size of its
  temp allocation. Causes: temporaries XLA placed in live-out (or donated parameter)
  allocations (``temporaries in live-out allocations``, which lowers XLA's figure), and
  the packing of the rest (``packing fragmentation and alignment``, which raises it; it
  must not be negative: a temp allocation smaller than what is live in it at once is
  an unsafe assignment).
* ``peak``: hloref's peak is everything live at once under the schedule. XLA:CPU's
  ``peak_memory_in_bytes`` is ``ComputePeakMemory`` (``xla/service/buffer_assignment.cc``)
  on the executable's ``BufferAssignmentProto``: the largest buffer of every parameter,
  constant and live-out allocation, plus a replay of the proto's heap-simulator traces,
  the only place temporaries appear. jaxlib 0.10.2's XLA:CPU proto has no traces
  (``heap_simulator_traces`` = 0 in XLA's figures, ``fuzz/memory_proto.py``), so
  temporaries do not count (``XLA:CPU's peak leaves out temporaries``: applied only
  when the proto has no traces); outputs count before they are defined (``outputs not
  yet defined at hloref's peak``) and at their allocation's size. XLA's peak must also
  equal ``ComputePeakMemory`` replayed on its own proto (``recounted_peak_in_bytes``).
* ``total``: the bytes of all of XLA's allocations against hloref's peak; XLA's may not
  be smaller (``packing fragmentation and alignment``).

A row whose ``unexplained`` bytes are not zero, or whose named cause has the wrong sign,
is a finding.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .buffer_assignment import BufferAssignment
from .liveness import Liveness
from .memory_sizes import HOST_MEMORY_SPACE

__all__ = ["FigureRow", "compare_figures", "XLA_FIELDS", "figures_from_stats", "IN_PLACE",
           "PEAK_WITHOUT_TEMPS"]

#: the cause of bytes counted twice by hloref and once by XLA
IN_PLACE = "results written in place over an operand's last read"

#: the cause of XLA:CPU's peak below hloref's: ComputePeakMemory replays heap-simulator
#: traces, and XLA:CPU's BufferAssignmentProto carries none (see the module docstring)
PEAK_WITHOUT_TEMPS = "XLA:CPU's peak leaves out temporaries"

#: memory_analysis() field of each figure (device; ``host_`` + it for the host).
XLA_FIELDS = {"argument": "argument_size_in_bytes", "output": "output_size_in_bytes",
              "alias": "alias_size_in_bytes", "temp": "temp_size_in_bytes"}


@dataclass
class FigureRow:
    figure: str
    hloref: int
    xla: int | None
    #: (cause, bytes): xla = hloref + sum of the causes + unexplained
    causes: list[tuple[str, int]] = field(default_factory=list)
    unexplained: int = 0
    finding: str = ""

    @property
    def difference(self) -> int | None:
        return None if self.xla is None else self.xla - self.hloref

    def as_dict(self) -> dict:
        return {"figure": self.figure, "hloref": self.hloref, "xla": self.xla,
                "difference": self.difference, "causes": dict(self.causes),
                "unexplained": self.unexplained, "finding": self.finding}


def figures_from_stats(stats, host: bool = False) -> dict[str, int]:
    """XLA's figures from a ``CompiledMemoryStats`` (or a dict of its fields)."""
    get = (lambda k: stats.get(k)) if isinstance(stats, dict) else \
        (lambda k: getattr(stats, k, None))
    prefix = "host_" if host else ""
    out = {name: get(prefix + f) for name, f in XLA_FIELDS.items()}
    if not host:
        out["peak"] = get("peak_memory_in_bytes")
        out["heap_simulator_traces"] = get("heap_simulator_traces")
        out["recounted_peak"] = get("recounted_peak_in_bytes")
    return {k: int(v) for k, v in out.items() if v is not None}


def _slices(lv: Liveness, assignment: BufferAssignment):
    """{buffer id: allocation} for the buffers the assignment places."""
    position_buffer = lv.position_buffer
    allocs = {}
    for alloc, value in assignment.values():
        bid = position_buffer.get((value.instruction, value.index))
        if bid is not None and not alloc.is_thread_local:
            allocs.setdefault(bid, alloc)
    return allocs


def _byte_slices(lv: Liveness, assignment: BufferAssignment) -> dict[int, tuple[int, int, int]]:
    """{buffer id: (allocation, first byte, end byte)}."""
    position_buffer = lv.position_buffer
    out = {}
    for alloc, value in assignment.values():
        bid = position_buffer.get((value.instruction, value.index))
        if bid is not None and not alloc.is_thread_local:
            out.setdefault(bid, (alloc.index, value.offset, value.offset + value.size))
    return out


def _occupancy(lv: Liveness, buffers, slices) -> tuple[int, int]:
    """(most bytes of ``buffers`` live at once, most bytes they occupy at once in XLA's
    placement): a result written in place over an operand read for the last time counts
    twice in the first, once in the second."""
    events: dict[int, list] = {}
    for b in buffers:
        for lo, hi in b.intervals():
            for t in (lo, hi):
                events.setdefault(t, [])
            events[lo].append(b)
    times = sorted(events)
    best_sum = best_union = 0
    for t in times:
        live = [b for b in buffers if any(lo <= t <= hi for lo, hi in b.intervals())]
        best_sum = max(best_sum, sum(b.size for b in live))
        ranges: dict[int, list] = {}
        for b in live:
            alloc, lo, hi = slices[b.id]
            ranges.setdefault(alloc, []).append((lo, lo + b.size if hi - lo >= b.size else hi))
        union = 0
        for spans in ranges.values():
            spans.sort()
            start, end = spans[0]
            for lo, hi in spans[1:]:
                if lo > end:
                    union += end - start
                    start, end = lo, hi
                else:
                    end = max(end, hi)
            union += end - start
        best_union = max(best_union, union)
    return best_sum, best_union


def _row(figure, mine, xla, causes=(), check_sign=()) -> FigureRow:
    row = FigureRow(figure, mine, xla, [c for c in causes if c[1]])
    if xla is None:
        return row
    row.unexplained = xla - mine - sum(b for _, b in causes)
    if row.unexplained:
        row.finding = f"{figure}: {row.unexplained:+d} bytes that no cause explains"
    for name, sign in check_sign:
        amount = dict(causes).get(name, 0)
        if amount * sign < 0:
            row.finding = f"{figure}: {name} is {amount:+d} bytes (impossible for a safe " \
                          "assignment)"
    return row


def compare_figures(lv: Liveness, xla: dict[str, int], assignment: BufferAssignment | None,
                    *, host: bool = False) -> list[FigureRow]:
    """One :class:`FigureRow` per figure XLA reports (``xla`` as from
    ``figures_from_stats``; ``constant`` and ``total`` need the assignment)."""
    space = HOST_MEMORY_SPACE if host else 0
    mine = lv.figures(space)
    rows = [_row("argument", mine["argument"], xla.get("argument")),
            _row("alias", mine["alias"], xla.get("alias"))]
    placed = _slices(lv, assignment) if assignment is not None else None
    slices = _byte_slices(lv, assignment) if assignment is not None else None
    spaced = [b for b in lv.buffers if b.space == space and b.size]
    if placed is None:
        for name in ("output", "temp"):
            rows.append(_row(name, mine[name], xla.get(name)))
    else:
        live_out = {a.index: a for a in assignment.allocations
                    if a.is_live_out and (a.color == 5) == host}
        held: dict[int, int] = {}
        for b in spaced:
            a = placed.get(b.id)
            if b.is_output and a is not None and a.index in live_out:
                held[a.index] = held.get(a.index, 0) + b.size
        extra = sum(a.size - held.get(i, 0) for i, a in live_out.items())
        rows.append(_row("output", mine["output"], xla.get("output"),
                         [("live-out allocation holds a larger temporary", extra)],
                         [("live-out allocation holds a larger temporary", +1)]))
        in_temp = [b for b in spaced if b.kind == "temp" and placed.get(b.id) is not None
                   and placed[b.id].is_temp]
        summed, occupied = _occupancy(lv, in_temp, slices)
        moved = summed - mine["temp"]
        inplace = occupied - summed
        frag = (xla.get("temp", 0) - occupied) if "temp" in xla else 0
        rows.append(_row("temp", mine["temp"], xla.get("temp"),
                         [("temporaries in live-out allocations", moved),
                          (IN_PLACE, inplace),
                          ("packing fragmentation and alignment", frag)],
                         [("packing fragmentation and alignment", +1)]))
        figs = assignment.figures(host)
        rows.append(_row("constant", mine["constant"], figs["constant"]))
        total = sum(a.size for a in assignment.allocations
                    if not a.is_thread_local and (a.color == 5) == host)
        summed, occupied = _occupancy(lv, [b for b in spaced if b.id in placed], slices)
        rows.append(_row("total", mine["peak"], total,
                         [(IN_PLACE, occupied - summed),
                          ("packing fragmentation and alignment", total - occupied)],
                         [("packing fragmentation and alignment", +1)]))
    if not host and "peak" in xla:
        t = mine["peak_time"]
        temp_at_peak = lv.series(("temp",), space)[t] if lv.end else 0
        outputs = [b for b in spaced if b.is_output and not b.is_argument]
        undefined = sum(b.size for b in outputs
                        if not any(lo <= t <= hi for lo, hi in b.intervals()))
        # temporaries leave XLA's peak only where its proto has no heap-simulator traces
        traces = xla.get("heap_simulator_traces")
        causes = [(PEAK_WITHOUT_TEMPS, -temp_at_peak if not traces else 0),
                  ("outputs not yet defined at hloref's peak", undefined)]
        if placed is not None:
            causes.append(("live-out allocation holds a larger temporary",
                           rows[2].causes[0][1] if rows[2].causes else 0))
        row = _row("peak", mine["peak"], xla["peak"], causes)
        recount = xla.get("recounted_peak")
        if recount is not None and recount != xla["peak"]:
            row.finding = (f"peak: peak_memory_in_bytes {xla['peak']} is not ComputePeakMemory "
                           f"on XLA's own buffer-assignment proto ({recount})")
        rows.append(row)
    return rows
