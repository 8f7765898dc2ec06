"""A failed memory audit as a finding: what failed, its root key, its report section.

A campaign with ``--memory-audit`` (``fuzz/memory_campaign.py``) audits what XLA:CPU
compiled a generated program to (``hloref.memory_audit``). A failed audit is one
:class:`MemoryFailure`, of one of four kinds:

* ``collision``: two values live at once share bytes (``live-overlap``), a result is
  written in place over an operand by an op that cannot do that (``illegal-in-place``),
  the positions of one buffer sit apart (``split-buffer``), or a value is written
  into a read-only allocation: a caller's argument no output aliases, a constant
  (``read-only``);
* ``slice``: a value's slice is too small for its shape (``too-small``) or lies outside
  its allocation (``out-of-bounds``);
* ``arena``: evaluated through the assignment, a value changed (``value-changed``: the
  overwritten value and the one that overwrote it are named);
* ``figure``: a figure of ``memory_analysis()`` differs from hloref's by bytes no named
  cause explains, or a cause has an impossible sign (the rule is the figure's name).

"Fails the same way" (the reduction's predicate) is the same kind and rule. The stage is
XLA's buffer assignment (``fuzz/stage_table.py``: ``buffer-assignment``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field

__all__ = ["MemoryFailure", "failure_of", "memory_root_key", "memory_attribution",
           "memory_report_lines", "COLLISION_RULES", "SLICE_RULES"]

COLLISION_RULES = frozenset({"live-overlap", "illegal-in-place", "split-buffer", "read-only"})
SLICE_RULES = frozenset({"too-small", "out-of-bounds"})


@dataclass
class MemoryFailure:
    kind: str
    rule: str
    message: str
    #: the values at fault, XLA's names (a collision: the pair)
    values: list = field(default_factory=list)
    allocation: int | None = None
    #: every finding of the audit, as ``MemoryAudit.findings`` words them
    findings: list = field(default_factory=list)

    def same_way(self, other: "MemoryFailure | None") -> bool:
        return other is not None and (other.kind, other.rule) == (self.kind, self.rule)

    def as_dict(self) -> dict:
        return asdict(self)


def failure_of(audit) -> MemoryFailure | None:
    """The first failure of a ``MemoryAudit`` (assignment rules, then the evaluation
    through the assignment, then the figures); ``None`` when it checks out."""
    everything = list(audit.findings)
    if audit.check is not None:
        for c in audit.check.collisions:
            kind = "collision" if c.rule in COLLISION_RULES else "slice"
            return MemoryFailure(kind, c.rule, c.message, list(c.values), c.allocation,
                                 everything)
    if audit.arena is not None and not audit.arena.ok:
        return MemoryFailure("arena", "value-changed", audit.arena.message,
                             list(audit.arena.collided or ()), None, everything)
    for row in audit.rows + audit.host_rows:
        if row.finding:
            return MemoryFailure("figure", row.figure, row.finding, [], None, everything)
    return None


def memory_root_key(failure: MemoryFailure, module) -> str:
    """Findings with this key share a root cause: the same stage, kind and rule, and the
    same operation pattern of the reduced program (as value findings' root keys)."""
    from .findings import module_opcodes
    basis = ["buffer-assignment", failure.kind, failure.rule, module_opcodes(module)]
    return hashlib.sha256(json.dumps(basis).encode()).hexdigest()[:12]


def memory_attribution(failure: MemoryFailure, stats: dict) -> dict:
    """The attribution record of a memory finding (the shape ``fuzz/filing.py`` reads)."""
    from .stage_table import component_of, stage
    steps = [["memory audit", f"{failure.kind} / {failure.rule}: {failure.message}"]]
    steps += [["audit finding", f] for f in failure.findings[1:6]]
    if stats:
        steps.append(["memory_analysis()", ", ".join(f"{k}={v}" for k, v in sorted(stats.items())
                                                     if v)])
    return {"stage": "buffer-assignment", "component": component_of("buffer-assignment"),
            "repository": stage("buffer-assignment").repository, "pass": None,
            "confirmed": None, "confirmation": "the memory audit of XLA:CPU's optimized module "
            "and buffer assignment (hloref memory)", "steps": steps, "fatal": None,
            "signal": None, "backtrace": []}


def memory_report_lines(meta: dict) -> list[str]:
    """The report's section for a memory finding (in place of Expected / Actual)."""
    m = meta.get("memory") or {}
    lines = ["## What the memory audit found", "",
             f"- kind: `{m.get('kind')}`, rule: `{m.get('rule')}`",
             f"- {m.get('message')}"]
    if m.get("values"):
        lines.append("- values at fault (XLA's names, in `buffer-assignment.txt`): "
                     + ", ".join(f"`{v}`" for v in m["values"]))
    if m.get("allocation") is not None:
        lines.append(f"- allocation {m['allocation']}")
    for f in (m.get("findings") or [])[1:10]:
        lines.append(f"- also: {f}")
    if m.get("planted"):
        lines.append("- PLANTED: the assignment was corrupted by a test hook before the audit")
    lines += ["", "The optimized module and the buffer assignment the audit read are "
              "`optimized.hlo` and `buffer-assignment.txt` beside this report; "
              "`hloref memory optimized.hlo --buffer-assignment buffer-assignment.txt` "
              "audits them again.", ""]
    return lines
