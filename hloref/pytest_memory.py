"""``pytest --hloref --hloref-memory``: the memory audit of every jitted computation a
test executes (``hloref.memory_audit``), beside the value check of ``pytest --hloref``.

Each distinct computation (its StableHLO text) is compiled once more by XLA:CPU in a
worker process kept for the session (``OracleWorker.memory``: XLA aborting ends the
worker's child, which the next computation restarts), and its optimized module, buffer assignment
and ``memory_analysis()`` figures are audited; the module is evaluated through the
assignment on the inputs of its first execution. A finding fails the test that executed
the computation. ``hloref/pytest_plugin.py`` owns the hooks and calls
``MemoryAuditor.audit`` after each checked execution.
"""

from __future__ import annotations

import hashlib
import threading
from collections import Counter
from dataclasses import dataclass, field

__all__ = ["MemoryAuditor", "MemoryStats"]


@dataclass
class MemoryStats:
    audited: int = 0
    ok: int = 0
    with_findings: int = 0
    skipped: int = 0
    skip_reasons: Counter = field(default_factory=Counter)
    findings: list = field(default_factory=list)  # (test, computation, finding)


class MemoryAuditor:
    def __init__(self):
        self.stats = MemoryStats()
        self._seen: set[bytes] = set()
        self._lock = threading.Lock()
        self._worker = None
        self._worker_lock = threading.Lock()

    def _compile(self, stablehlo_text: str) -> dict:
        """XLA:CPU's optimized module, assignment and figures (a RuntimeError when XLA
        refused, crashed or hung)."""
        from hloref.fuzz.workers import OracleWorker
        with self._worker_lock:
            if self._worker is None:
                self._worker = OracleWorker("xla", timeout=300.0)
            r = self._worker.memory(stablehlo_text, dialect="mlir")
        if not r.ok:
            raise RuntimeError(f"XLA:CPU {r.kind}: {r.message}")
        return r.value

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None

    def audit(self, stablehlo_text: str | None, inputs: list, name: str,
              test: str) -> list[str]:
        """The findings of the audit of this computation (``[]`` when it checks out, was
        audited before, or cannot be audited: counted as skipped, with the reason)."""
        if not stablehlo_text:
            return self._skip("no StableHLO text kept for the computation")
        key = hashlib.sha256(stablehlo_text.encode()).digest()
        with self._lock:
            if key in self._seen:
                return []
            self._seen.add(key)
        try:
            import hloref
            from .buffer_assignment import parse_buffer_assignment
            from .memory_audit import audit
            xla = self._compile(stablehlo_text)
            module = hloref.parse(xla["optimized"])
            assignment = parse_buffer_assignment(xla["assignment"])
            args = inputs if len(inputs) == len(module.entry.parameters) else None
            result = audit(module, assignment=assignment, xla_stats=xla["stats"], args=args)
        except Exception as exc:  # noqa: BLE001 - an audit we cannot make is a skip
            return self._skip(f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
                              if str(exc) else type(exc).__name__)
        with self._lock:
            self.stats.audited += 1
            if result.ok:
                self.stats.ok += 1
                return []
            self.stats.with_findings += 1
            for finding in result.findings:
                self.stats.findings.append((test, name, finding))
        return [f"memory audit of {name}: {f}" for f in result.findings]

    def _skip(self, reason: str) -> list[str]:
        with self._lock:
            self.stats.skipped += 1
            self.stats.skip_reasons[reason] += 1
        return []

    def summary_lines(self) -> list[str]:
        s = self.stats
        lines = [f"hloref memory: {s.audited} computations audited: {s.ok} checked out, "
                 f"{s.with_findings} with findings; {s.skipped} not audited"]
        for reason, n in s.skip_reasons.most_common(5):
            lines.append(f"  not audited ({n}): {reason}")
        for test, name, finding in s.findings[:20]:
            lines.append(f"  MEMORY {test}: {name}: {finding}")
        return lines
