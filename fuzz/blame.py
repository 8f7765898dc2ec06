"""Pass blame: which of XLA's HLO passes changed the module's answer?

XLA dumps the module after every pass that changed it
(``--xla_dump_to=DIR --xla_dump_hlo_pass_re=.*``: files
``module_NNNN.NAME.SSSS.PIPELINE.after_PASS.before_NEXT.txt``, plus
``before_optimizations`` and ``cpu_after_optimizations``). hloref evaluates each
snapshot on the same inputs; the first snapshot whose value differs from the
before-optimizations envelope (``fuzz/envelope.py``) names the pass. The
blame is confirmed by compiling again with that pass disabled
(``xla_disable_hlo_passes``) and checking that XLA's answer is then inside.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass, field

from .compare import Verdict, compare_values
from .envelope import EnvelopePolicy, EnvelopeVerdict

__all__ = ["Snapshot", "DumpModule", "read_dump", "SnapshotResult", "evaluate_snapshots",
           "BlameReport", "blame", "first_divergent", "pass_of"]

_SNAPSHOT = re.compile(r"^(module_\d+\.[^/]+?)\.(\d{4})\.(.+)\.txt$")
_NOT_HLO = ("buffer-assignment", "memory-usage-report", "live-range", "debug_options",
            "thunk_sequence", "ir-no-opt", "ir-with-opt", "obj-file")


@dataclass
class Snapshot:
    """The module after ``pass_name`` (``pipeline-start``: at the start of ``pipeline``),
    before ``next_pass``."""

    index: int
    pipeline: str
    pass_name: str
    path: str
    next_pass: str | None = None

    @property
    def label(self) -> str:
        return f"{self.index:04d} {self.pipeline}: after {self.pass_name}"


@dataclass
class DumpModule:
    prefix: str
    before: str | None = None
    after: str | None = None
    snapshots: list[Snapshot] = field(default_factory=list)


def _parse_label(rest: str) -> tuple[str, str, str | None]:
    """``PIPELINE.after_PASS.before_NEXT`` → (pipeline, pass, next pass)."""
    m = re.match(r"^(.*?)\.after_(.+?)(?:\.before_(.*))?$", rest)
    if m:
        return m.group(1), m.group(2), m.group(3)
    pipeline, _, label = rest.partition(".")
    return pipeline, label or rest, None


def read_dump(directory: str) -> dict[str, DumpModule]:
    """The HLO text files of an XLA dump directory, grouped per module, in pass order."""
    modules: dict[str, DumpModule] = {}
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".txt") or any(tag in name for tag in _NOT_HLO):
            continue
        path = os.path.join(directory, name)
        m = _SNAPSHOT.match(name)
        if m:
            prefix, index, rest = m.group(1), int(m.group(2)), m.group(3)
            pipeline, pass_name, next_pass = _parse_label(rest)
            modules.setdefault(prefix, DumpModule(prefix)).snapshots.append(
                Snapshot(index, pipeline, pass_name, path, next_pass))
            continue
        for suffix, attr in ((".before_optimizations.txt", "before"),
                             ("_after_optimizations.txt", "after")):
            if name.endswith(suffix):
                stem = name[: -len(suffix)]
                if attr == "after":
                    stem = stem.rsplit(".", 1)[0]  # module_N.name.cpu / .gpu
                setattr(modules.setdefault(stem, DumpModule(stem)), attr, path)
    for dm in modules.values():
        dm.snapshots.sort(key=lambda s: s.index)
    return modules


@dataclass
class SnapshotResult:
    """One snapshot's value against the before-optimizations envelope (``envelope``);
    ``verdict``, ``max_ulp`` and ``max_rel`` are the plain comparison, for reading."""

    label: str
    path: str
    status: str  # ok, unsupported, error
    verdict: Verdict | None = None
    message: str = ""
    max_ulp: float = 0.0
    max_rel: float = 0.0
    envelope: EnvelopeVerdict | None = None

    @property
    def inside(self) -> bool:
        return self.status == "ok" and self.envelope is not None and self.envelope.ok

    @property
    def position(self) -> float:
        """Distance from hloref's before-optimizations value in envelope half-widths:
        at most 1 inside, 1 + 2 x (envelope widths outside) beyond."""
        if self.envelope is None:
            return float("nan")
        if self.envelope.ok:
            return self.envelope.max_position
        return 1.0 + 2.0 * self.envelope.widths


def evaluate_snapshots(dm: DumpModule, args, *, limits=None,
                       policy: EnvelopePolicy | None = None,
                       reference=None) -> tuple[object, list[SnapshotResult]]:
    """Evaluate every snapshot (and ``after``) with hloref on ``args``; each judged
    against ``reference`` (default: the before-optimizations envelope). Returns the
    reference (``check.Reference``: nominal value and envelope) and the results."""
    import hloref

    from .check import Reference
    if reference is None:
        before_module = hloref.parse(open(dm.before, encoding="utf-8").read(), filename=dm.before)
        reference = Reference(before_module, args, policy, limits=limits)
    results = []
    entries = [(s.label, s.path) for s in dm.snapshots]
    if dm.after:
        entries.append(("after optimizations", dm.after))
    for label, path in entries:
        try:
            module = hloref.parse(open(path, encoding="utf-8").read(), filename=path)
            value = hloref.evaluate(module, *args, limits=limits)
        except hloref.HloUnsupportedError as exc:
            results.append(SnapshotResult(label, path, "unsupported", message=str(exc)))
            continue
        except hloref.HloError as exc:
            results.append(SnapshotResult(label, path, "error", message=str(exc)))
            continue
        verdict = compare_values(value, reference.nominal)
        results.append(SnapshotResult(label, path, "ok", verdict, max_ulp=verdict.max_ulp,
                                      max_rel=verdict.max_rel,
                                      envelope=reference.check(value)))
    return reference, results


def first_divergent(results: list[SnapshotResult]) -> SnapshotResult | None:
    """The first snapshot whose value is outside the before-optimizations envelope."""
    for r in results:
        if r.status == "ok" and not r.inside:
            return r
    return None


@dataclass
class BlameReport:
    pass_name: str | None
    snapshot: SnapshotResult | None
    results: list[SnapshotResult]
    confirmed: bool | None = None  # XLA agrees with hloref once the pass is disabled
    message: str = ""

    def table(self) -> str:
        lines = ["| snapshot | status | envelope position | max ulp vs before | max rel |",
                 "|---|---|---|---|---|"]
        for r in self.results:
            mark = " ← first divergence" if r is self.snapshot else ""
            status = r.status if r.status != "ok" else ("inside" if r.inside else "outside")
            lines.append(f"| {r.label}{mark} | {status} | {r.position:.3g} | {r.max_ulp:g} "
                         f"| {r.max_rel:g} |")
        return "\n".join(lines)


def blame(text: str, args, worker, *, keep_dump: str | None = None,
          policy: EnvelopePolicy | None = None) -> BlameReport:
    """Dump XLA's passes for ``text``, find the first pass that changes the answer, and
    confirm by disabling it. ``worker`` is an ``OracleWorker`` for the xla oracle."""
    directory = keep_dump or tempfile.mkdtemp(prefix="hloref-dump-")
    try:
        result = worker.run(text, args, debug_options={"xla_dump_to": directory,
                                                       "xla_dump_hlo_pass_re": ".*"})
        if not result.ok:
            return BlameReport(None, None, [], message=f"XLA {result.kind}: {result.message}")
        modules = read_dump(directory)
        candidates = [m for m in modules.values() if m.before and m.snapshots]
        if not candidates:
            return BlameReport(None, None, [], message="XLA's dump has no pass snapshots")
        dm = max(candidates, key=lambda m: len(m.snapshots))
        reference, results = evaluate_snapshots(dm, args, policy=policy)
        bad = first_divergent(results)
        report = BlameReport(bad and pass_of(bad, dm), bad, results)
        if bad is None:
            report.message = "no pass snapshot differs from the module before optimizations"
            return report
        if report.pass_name:
            again = worker.run(text, args, debug_options={"xla_disable_hlo_passes": report.pass_name})
            if again.ok:
                report.confirmed = reference.check(again.value).ok
        return report
    finally:
        if keep_dump is None:
            shutil.rmtree(directory, ignore_errors=True)


def pass_of(result: SnapshotResult, dm: DumpModule) -> str | None:
    """The pass that produced the snapshot: its ``after_`` pass, or, for a snapshot taken
    at a pipeline's start, the pass that ran first after the previous snapshot."""
    previous = None
    for s in dm.snapshots:
        if s.path == result.path:
            if s.pass_name != "pipeline-start":
                return s.pass_name
            return previous.next_pass if previous is not None and previous.next_pass \
                and previous.next_pass != "pipeline-end" else None
        previous = s
    return None

