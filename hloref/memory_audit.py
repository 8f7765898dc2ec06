"""The memory audit of one optimized module: liveness and peak, XLA's figures beside
hloref's, the buffer-assignment check and the evaluation through the assignment.

``audit(module, assignment=..., xla_stats=..., args=...)`` runs what its inputs allow
and returns a :class:`MemoryAudit`, whose ``findings`` are what the command line reports
with exit status 1: an assignment rule broken (``hloref.assignment_check``), a value
changed by the assignment (``hloref.memory_arena``), a figure difference no named cause
explains (``hloref.memory_report``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .assignment_check import AssignmentCheck, check_assignment
from .buffer_assignment import BufferAssignment
from .errors import HloError
from .ir import Module
from .liveness import Liveness, analyze
from .memory_arena import ArenaResult, evaluate_through_assignment
from .memory_report import FigureRow, compare_figures, figures_from_stats
from .memory_sizes import HOST_MEMORY_SPACE

__all__ = ["MemoryAudit", "audit"]


@dataclass
class MemoryAudit:
    module: str
    liveness: Liveness
    rows: list[FigureRow] = field(default_factory=list)
    host_rows: list[FigureRow] = field(default_factory=list)
    check: AssignmentCheck | None = None
    arena: ArenaResult | None = None
    #: why the evaluation through the assignment could not run (hloref's own limits)
    arena_error: str = ""
    seconds: dict = field(default_factory=dict)

    @property
    def peak(self) -> int:
        return self.liveness.peak(0)[0]

    @property
    def peak_instruction(self) -> str:
        return self.liveness.peak_instruction(0)

    @property
    def host_peak(self) -> int:
        return self.liveness.peak(HOST_MEMORY_SPACE)[0]

    @property
    def findings(self) -> list[str]:
        out = [f"figure {r.finding}" for r in self.rows + self.host_rows if r.finding]
        if self.check is not None:
            out += [f"assignment {c}" for c in self.check.collisions]
        if self.arena is not None and not self.arena.ok:
            out.append(f"evaluation {self.arena.message}")
        return out

    @property
    def ok(self) -> bool:
        return not self.findings

    def as_dict(self) -> dict:
        lv = self.liveness
        return {
            "module": self.module,
            "peak": self.peak, "peak_instruction": self.peak_instruction,
            "peak_time": lv.peak(0)[1], "host_peak": self.host_peak,
            "instructions": len(lv.timeline),
            "figures": [r.as_dict() for r in self.rows],
            "host_figures": [r.as_dict() for r in self.host_rows],
            "assignment": None if self.check is None else {
                "checked_values": self.check.checked_values,
                "unmodelled": self.check.unmodelled,
                "collisions": [{"rule": c.rule, "message": c.message, "values": list(c.values),
                                "allocation": c.allocation} for c in self.check.collisions]},
            "evaluation": None if self.arena is None else {
                "ok": self.arena.ok, "first_changed": self.arena.first_changed,
                "collided": list(self.arena.collided) if self.arena.collided else None,
                "message": self.arena.message, "compared": self.arena.compared,
                "unplaced": self.arena.unplaced},
            "evaluation_error": self.arena_error or None,
            "findings": self.findings, "seconds": self.seconds,
        }

    def summary(self) -> str:
        lv = self.liveness
        lines = [f"module {self.module}: {len(lv.timeline)} instructions in the schedule, "
                 f"{len(lv.buffers)} buffers",
                 f"peak {self.peak} bytes at %{self.peak_instruction} (time "
                 f"{lv.peak(0)[1]})" + (f"; host peak {self.host_peak} bytes"
                                        if self.host_peak else "")]
        for label, rows in (("device", self.rows), ("host", self.host_rows)):
            if not rows:
                continue
            lines.append(f"{label:8s} {'hloref':>12s} {'xla':>12s}  causes")
            for r in rows:
                parts = [f"{name} {b:+d}" for name, b in r.causes]
                if r.unexplained:
                    parts.append(f"UNEXPLAINED {r.unexplained:+d}")
                causes = "; ".join(parts)
                xla = "-" if r.xla is None else str(r.xla)
                lines.append(f"  {r.figure:8s} {r.hloref:12d} {xla:>12s}  {causes}")
        if self.check is not None:
            lines.append(f"assignment: {self.check.checked_values} values checked, "
                         f"{len(self.check.collisions)} collision(s)")
        if self.arena_error:
            lines.append(f"evaluation through the assignment not run: {self.arena_error}")
        if self.arena is not None:
            lines.append("evaluation through the assignment: " + (
                f"{self.arena.compared} values unchanged" if self.arena.ok
                else self.arena.message))
        for finding in self.findings:
            lines.append(f"FINDING {finding}")
        return "\n".join(lines)


def audit(module: Module, *, assignment: BufferAssignment | None = None, xla_stats=None,
          args: list | None = None) -> MemoryAudit:
    """Audit ``module`` (optimized and scheduled). ``assignment``: XLA's buffer
    assignment for it; ``xla_stats``: ``memory_analysis()``'s figures (a
    ``CompiledMemoryStats`` or a dict of its fields; without them the assignment's
    totals stand in, and there is no XLA peak); ``args``: inputs for the evaluation
    through the assignment (none: no evaluation)."""
    seconds = {}
    t0 = time.perf_counter()
    lv = analyze(module)
    seconds["liveness"] = time.perf_counter() - t0
    result = MemoryAudit(module.name, lv, seconds=seconds)
    if xla_stats is not None:
        device, host = figures_from_stats(xla_stats), figures_from_stats(xla_stats, host=True)
    elif assignment is not None:
        device, host = assignment.figures(), assignment.figures(host=True)
        device.pop("constant")
        host.pop("constant")
    else:
        device = host = None
    t0 = time.perf_counter()
    if device is not None:
        result.rows = compare_figures(lv, device, assignment)
        if any(host.values()) or lv.peak(HOST_MEMORY_SPACE)[0]:
            result.host_rows = compare_figures(lv, host, assignment, host=True)
    if assignment is not None:
        result.check = check_assignment(lv, assignment)
    seconds["check"] = time.perf_counter() - t0
    if assignment is not None and args is not None:
        t0 = time.perf_counter()
        try:
            result.arena = evaluate_through_assignment(module, assignment, list(args), lv=lv)
        except HloError as exc:  # an op hloref cannot evaluate: the static checks stand
            result.arena_error = f"{type(exc).__name__}: {exc}".splitlines()[0]
        seconds["evaluation"] = time.perf_counter() - t0
    return result
