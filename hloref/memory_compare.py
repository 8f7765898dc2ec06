"""Memory as a regression check: the peak of one module against another's, and where the
difference comes from, per instruction.

``compare_peaks(before, after)`` puts the two peaks side by side and groups the bytes
live at each peak by the instruction that defined them (a buffer's first value); the
rows are the instructions whose bytes differ, largest change first. Instruction names
survive most passes, so a rename shows as one instruction leaving and one arriving.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .liveness import Liveness

__all__ = ["PeakComparison", "compare_peaks", "bytes_at_peak"]


@dataclass
class PeakComparison:
    before: int
    after: int
    before_at: str
    after_at: str
    #: (instruction, bytes live at the peak before, after), largest change first
    rows: list[tuple[str, int, int]] = field(default_factory=list)

    @property
    def delta(self) -> int:
        return self.after - self.before

    def summary(self, limit: int = 20) -> str:
        lines = [f"peak {self.before} -> {self.after} bytes ({self.delta:+d}); at "
                 f"%{self.before_at} -> %{self.after_at}"]
        for name, a, b in self.rows[:limit]:
            lines.append(f"  {b - a:+12d}  %{name}  ({a} -> {b})")
        if len(self.rows) > limit:
            lines.append(f"  ... {len(self.rows) - limit} more")
        return "\n".join(lines)

    def as_dict(self) -> dict:
        return {"before": self.before, "after": self.after, "delta": self.delta,
                "before_at": self.before_at, "after_at": self.after_at,
                "instructions": [{"instruction": n, "before": a, "after": b, "delta": b - a}
                                 for n, a, b in self.rows]}


def bytes_at_peak(lv: Liveness, space: int = 0) -> dict[str, int]:
    """{defining instruction: bytes live at the peak} for memory space ``space``."""
    t = lv.peak(space)[1]
    out: dict[str, int] = {}
    for buf in lv.live_at(t, space):
        name = buf.values[0].positions[0][0]
        out[name] = out.get(name, 0) + buf.size
    return out


def compare_peaks(before: Liveness, after: Liveness, space: int = 0) -> PeakComparison:
    a, b = bytes_at_peak(before, space), bytes_at_peak(after, space)
    rows = [(n, a.get(n, 0), b.get(n, 0)) for n in set(a) | set(b) if a.get(n, 0) != b.get(n, 0)]
    rows.sort(key=lambda r: (-abs(r[2] - r[1]), r[0]))
    return PeakComparison(before.peak(space)[0], after.peak(space)[0],
                          before.peak_instruction(space), after.peak_instruction(space), rows)
