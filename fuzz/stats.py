"""Campaign statistics: counts and the time split, merged across workers, summarised.

``Stats`` is what one worker (a process, or a Ray actor running one unit of work)
counted; workers' stats are merged by the driver. The time split names where a
program's time goes: generation (Hypothesis drawing the module and its inputs),
hloref (evaluating it), the oracle's compile and run (measured inside the oracle
process), process hops (the rest of the oracle round trip: pickling, pipes,
restarting a crashed oracle), comparison (the envelope, localisation and the
known-difference check) and reduction of findings.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from collections import Counter
from dataclasses import dataclass, field

__all__ = ["Stats", "atomic_json", "aggregate", "progress_line", "make_summary", "reason",
           "write_junit", "format_summary", "TIME_PARTS"]

_COUNTERS = ("opcodes", "element_types", "outcomes", "verdicts", "known", "rejected", "memory")

#: The time split, in the order the summary prints it: (Stats field, label).
TIME_PARTS = (("generator_seconds", "generation"), ("hloref_seconds", "hloref"),
              ("compile_seconds", "XLA compile"), ("run_seconds", "XLA run"),
              ("compare_seconds", "comparison"), ("hop_seconds", "process hops"),
              ("reduce_seconds", "reduction"))


@dataclass
class Stats:
    programs: int = 0
    instructions: int = 0
    seconds: float = 0.0
    oracle_seconds: float = 0.0  # compile + run + hops
    hloref_seconds: float = 0.0
    generator_seconds: float = 0.0
    reduce_seconds: float = 0.0
    compile_seconds: float = 0.0
    run_seconds: float = 0.0
    hop_seconds: float = 0.0
    compare_seconds: float = 0.0
    #: oracle submissions of batched modules, and of programs alone
    batches: int = 0
    alone_runs: int = 0
    #: programs re-run alone because their part of a batch was not a match
    confirmations: int = 0
    #: of those, the ones that matched alone (a cross-program effect of the batch)
    batch_only: int = 0
    #: batches split because the batched module was rejected, crashed or hung
    batch_splits: int = 0
    #: programs drawn again (same module, same inputs) and skipped, not counted
    repeats: int = 0
    #: oracle child processes started (the first of each worker, and every restart
    #: after a crash or a timeout, reduction included)
    oracle_starts: int = 0
    opcodes: Counter = field(default_factory=Counter)
    element_types: Counter = field(default_factory=Counter)
    outcomes: Counter = field(default_factory=Counter)
    verdicts: Counter = field(default_factory=Counter)
    known: Counter = field(default_factory=Counter)
    rejected: Counter = field(default_factory=Counter)
    #: ``--memory-audit``: audited, ok, failed, findings, skipped, seconds
    memory: Counter = field(default_factory=Counter)
    findings: list = field(default_factory=list)  # directories written by this run
    duplicates: int = 0

    def add_program(self, module) -> None:
        from hloref.shapes import ArrayShape, flatten_shape
        self.programs += 1
        for _, instr in module.instructions():
            self.instructions += 1
            self.opcodes[instr.opcode] += 1
            for s in flatten_shape(instr.shape):
                if isinstance(s, ArrayShape):
                    self.element_types[s.element_type.name] += 1

    def to_json(self) -> dict:
        d = dataclasses.asdict(self)
        for k in _COUNTERS:
            d[k] = dict(getattr(self, k))
        return d

    @classmethod
    def from_json(cls, d: dict) -> "Stats":
        s = cls()
        for k, v in d.items():
            if k in _COUNTERS:
                setattr(s, k, Counter(v))
            elif hasattr(s, k):
                setattr(s, k, v)
        return s

    def merge(self, other: "Stats") -> None:
        """Add ``other``'s counts and times (not its wall-clock ``seconds``)."""
        for f in dataclasses.fields(self):
            if f.name in ("seconds", "findings") or f.name in _COUNTERS:
                continue
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))
        for k in _COUNTERS:
            getattr(self, k).update(getattr(other, k))
        self.findings.extend(f for f in other.findings if f not in self.findings)

    def busy_seconds(self) -> float:
        return sum(getattr(self, name) for name, _ in TIME_PARTS)


def atomic_json(path: str, data) -> None:
    """Write ``data`` as JSON to ``path`` atomically (a temporary file, then rename)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(os.path.abspath(path)))
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2, default=str)
    os.replace(tmp, path)


def aggregate(stats_dir: str, base: Stats) -> Stats:
    """``base`` plus every ``worker-*.json`` statistics file in ``stats_dir``."""
    total = Stats.from_json(base.to_json())
    if os.path.isdir(stats_dir):
        for name in sorted(os.listdir(stats_dir)):
            if name.startswith("worker-") and name.endswith(".json"):
                try:
                    with open(os.path.join(stats_dir, name), encoding="utf-8") as f:
                        s = Stats.from_json(json.load(f)["stats"])
                except (OSError, ValueError, KeyError):
                    continue
                total.merge(s)
    return total


def progress_line(s: Stats, elapsed: float, reachable: int) -> str:
    rate = s.programs / elapsed if elapsed > 0 else 0.0
    irate = s.instructions / elapsed if elapsed > 0 else 0.0
    return (f"[{elapsed:6.0f}s] programs {s.programs} ({rate:.2f}/s), instructions "
            f"{s.instructions} ({irate:.0f}/s), opcodes {len(s.opcodes)}/{reachable}, types "
            f"{len(s.element_types)}, findings {len(s.findings)} (+{s.duplicates} dup), "
            f"known {sum(s.known.values())}, rejected {sum(s.rejected.values())}")


def make_summary(run: Stats, totals: Stats, new_findings, all_findings, *, workers: int, seed,
                 oracles, out: str, reachable: int, extra: dict | None = None) -> dict:
    """The campaign summary (``--json-summary``): counts, rates, the time split, findings."""
    sec = max(run.seconds, 1e-9)
    busy = run.busy_seconds()
    findings = []
    for path in new_findings:
        try:
            with open(os.path.join(path, "finding.json"), encoding="utf-8") as f:
                meta = json.load(f)
        except (OSError, ValueError):
            meta = {}
        findings.append({"path": path, "verdict": meta.get("verdict"),
                         "culprit": meta.get("culprit"), "blamed_pass": meta.get("blamed_pass"),
                         "signature": meta.get("signature")})
    return {
        "programs": run.programs, "instructions": run.instructions, "seconds": run.seconds,
        "programs_per_second": run.programs / sec, "instructions_per_second": run.instructions / sec,
        "oracle_seconds": run.oracle_seconds, "hloref_seconds": run.hloref_seconds,
        "generator_seconds": run.generator_seconds, "reduce_seconds": run.reduce_seconds,
        "oracle_fraction": run.oracle_seconds / busy if busy else 0.0,
        "time_split": {label: getattr(run, name) for name, label in TIME_PARTS},
        "batching": {"batches": run.batches, "alone_runs": run.alone_runs,
                     "confirmations": run.confirmations, "batch_only": run.batch_only,
                     "batch_splits": run.batch_splits, "repeats_skipped": run.repeats,
                     "oracle_starts": run.oracle_starts},
        "opcodes_covered": sorted(run.opcodes), "opcode_counts": dict(run.opcodes),
        "opcodes_reachable": reachable,
        "element_types_covered": sorted(run.element_types),
        "outcomes": dict(run.outcomes), "verdicts": dict(run.verdicts),
        "known_differences": dict(run.known), "rejected": dict(run.rejected),
        "memory_audit": dict(run.memory),
        "duplicates": run.duplicates, "findings": findings, "new_findings": len(new_findings),
        "all_findings": all_findings, "workers": workers, "seed": seed,
        "oracles": list(oracles), "out": out,
        "totals": {"programs": totals.programs, "instructions": totals.instructions,
                   "seconds": totals.seconds},
        **(extra or {}),
    }


def write_junit(path: str, summary: dict) -> None:
    from xml.sax.saxutils import escape, quoteattr
    cases = [f'  <testcase classname="hloref.fuzz" name="campaign" time="{summary["seconds"]:.1f}"/>']
    for f in summary["findings"]:
        name = os.path.basename(f["path"])
        cases.append(f'  <testcase classname="hloref.fuzz.findings" name={quoteattr(name)}>'
                     f'<failure message={quoteattr(str(f.get("verdict")))}>'
                     f'{escape(json.dumps(f, default=str))}</failure></testcase>')
    text = (f'<?xml version="1.0" encoding="utf-8"?>\n<testsuite name="hloref-fuzz" '
            f'tests="{len(cases)}" failures="{len(summary["findings"])}" '
            f'time="{summary["seconds"]:.1f}">\n' + "\n".join(cases) + "\n</testsuite>\n")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def format_summary(summary: dict) -> str:
    s = summary
    split = s.get("time_split", {})
    busy = sum(split.values()) or 1.0
    lines = [
        f"programs: {s['programs']} in {s['seconds']:.1f} s ({s['programs_per_second']:.2f}/s), "
        f"instructions: {s['instructions']} ({s['instructions_per_second']:.0f}/s)",
        "time (summed over workers): " + ", ".join(
            f"{label} {sec:.1f} s ({sec / busy:.0%})" for label, sec in split.items()),
    ]
    b = s.get("batching")
    if b and b["batches"]:
        lines.append(f"batched oracle runs: {b['batches']} batches, {b['alone_runs']} runs alone, "
                     f"{b['confirmations']} confirmations alone ({b['batch_only']} only in the "
                     f"batch), {b['batch_splits']} batches split; "
                     f"{b.get('repeats_skipped', 0)} repeated programs skipped; "
                     f"{b.get('oracle_starts', 0)} oracle processes started")
    lines += [
        f"opcodes covered: {len(s['opcodes_covered'])} (of {s['opcodes_reachable']} reachable); "
        f"element types: {len(s['element_types_covered'])}: {' '.join(s['element_types_covered'])}",
        _outcomes_line(s),
    ]
    if s["known_differences"]:
        lines.append(f"known differences (not reported): {s['known_differences']}")
    if s["rejected"]:
        top = sorted(s["rejected"].items(), key=lambda kv: -kv[1])
        more = f"; {len(top) - 5} other reasons (--json-summary lists them)" if len(top) > 5 \
            else ""
        lines.append("rejected programs (expected, not bugs: the generator draws ops and types "
                     "the oracle or hloref does not implement): "
                     + "; ".join(f"{v}× {k}" for k, v in top[:5]) + more)
    m = s.get("memory_audit") or {}
    if m:
        why = sorted(((k, v) for k, v in m.items() if k.startswith("skipped: ")),
                     key=lambda kv: -kv[1])[:3]
        lines.append(f"memory audit: {m.get('audited', 0)} programs audited in "
                     f"{m.get('seconds', 0.0):.1f} s, {m.get('ok', 0)} checked out, "
                     f"{m.get('failed', 0)} failed ({m.get('findings', 0)} new findings), "
                     f"{m.get('skipped', 0)} not audited"
                     + ("".join(f"; {v}× {k[9:]}" for k, v in why)))
    if s.get("ray"):
        r = s["ray"]
        lines.append(f"ray: {r['actors']} workers at {r['address']}, {r['units']} units, "
                     f"{r['retried_units']} re-run after a worker died")
    lines.append(f"new findings: {s['new_findings']} (duplicates skipped: {s['duplicates']})")
    for f in s["findings"]:
        c = f.get("culprit") or {}
        lines.append(f"  {f['path']}: {f.get('verdict')} {c.get('opcode', '')} "
                     f"pass={f.get('blamed_pass')}")
    return "\n".join(lines)


def _outcomes_line(s: dict) -> str:
    """The outcome counts; with several oracles, each program counts once per oracle."""
    oracles = s.get("oracles") or []
    if len(oracles) > 1:
        return (f"outcomes (each program checked against each of the {len(oracles)} oracles, "
                f"{', '.join(oracles)}: {len(oracles)} outcomes per program, "
                f"{sum(s['outcomes'].values())} in all): {s['outcomes']}")
    return f"outcomes: {s['outcomes']}"


def reason(message: str, limit: int = 160) -> str:
    """A rejection reason as counted in the summary: the first line of ``message``, cut
    at a word boundary (with an ellipsis) when longer than ``limit`` characters."""
    line = (message or "").strip().splitlines()[0] if (message or "").strip() else ""
    if len(line) <= limit:
        return line
    cut = line[:limit].rsplit(" ", 1)[0].rstrip(",;:")
    return cut + " …"
