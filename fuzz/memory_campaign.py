"""``hloref fuzz --memory-audit [--memory-audit-every N]``: the memory audit of generated
programs, and its failures as findings.

Every ``N``-th program a campaign generates (``N`` = 1: all) is compiled once more by
the campaign's XLA oracle worker, with ``--xla_dump_to`` (``OracleWorker.memory``: XLA
aborting kills the worker's child, never the campaign); the optimized module, XLA's
buffer assignment and ``memory_analysis()``'s figures are audited
(``hloref.memory_audit``), the module evaluated through the assignment on the program's
own inputs. A failed audit (``fuzz/memory_finding.py``: a collision, a slice too
small, a value changed through the arena, a figure no cause explains) is reduced while
the audit still fails the same way (same kind, same rule), deduplicated by root key
(``known_root_keys``, then the findings in ``--out``) and written in the archive's form:
``module.hlo``, ``inputs.npz``, ``expected.npz`` (hloref's value), ``finding.json``
(verdict ``memory``, stage ``buffer-assignment``), ``report.md`` (``filing.render``),
and the audited ``optimized.hlo`` and ``buffer-assignment.txt``.

``CampaignOptions.memory_corrupt`` is a test hook: ``corrupt(optimized_module,
assignment)`` may change the parsed assignment before the audit reads it (returning
True when it did), so that tests plant a bug in a real XLA:CPU assignment.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass

from .memory_finding import MemoryFailure, failure_of

__all__ = ["MemoryCheck", "audit_program", "CampaignMemoryAudit", "reduce_and_write_memory",
           "replay_memory", "memory_pre_key"]


@dataclass
class MemoryCheck:
    #: ok, finding, skipped
    status: str
    failure: MemoryFailure | None = None
    reason: str = ""
    audit: object = None
    #: what XLA produced: optimized, assignment (text), stats
    xla: dict | None = None
    planted: bool = False


def audit_program(module, args, worker, *, debug_options: dict | None = None, corrupt=None,
                  evaluate: bool = True, timeout: float | None = None) -> MemoryCheck:
    """Compile ``module`` in ``worker`` (an ``OracleWorker`` of the XLA oracle) and audit
    what XLA:CPU made of it; ``evaluate``: also run the module through the assignment on
    ``args``. A module XLA refuses, or one hloref cannot audit, is ``skipped``."""
    import hloref
    from hloref.buffer_assignment import parse_buffer_assignment
    from hloref.errors import HloError
    from hloref.memory_audit import audit
    r = worker.memory(module.to_text(), debug_options=debug_options, timeout=timeout)
    if not r.ok:
        return MemoryCheck("skipped", reason=f"XLA:CPU {r.kind}: "
                           + (r.message.splitlines()[0][:120] if r.message else ""))
    found = r.value
    try:
        optimized = hloref.parse(found["optimized"])
        assignment = parse_buffer_assignment(found["assignment"])
        planted = bool(corrupt(optimized, assignment)) if corrupt is not None else False
        inputs = list(args) if evaluate and len(args) == len(optimized.entry.parameters) \
            else None
        result = audit(optimized, assignment=assignment, xla_stats=found["stats"], args=inputs)
    except HloError as exc:  # hloref's own limits: no verdict on XLA
        return MemoryCheck("skipped", reason=f"hloref: {type(exc).__name__}: "
                           + str(exc).splitlines()[0][:120], xla=found)
    failure = failure_of(result)
    return MemoryCheck("finding" if failure else "ok", failure, audit=result, xla=found,
                       planted=planted)


def memory_pre_key(module, check: MemoryCheck) -> str:
    """The cheap key of a failed audit, before reduction (``OUT/.seen/<key>``): its kind,
    rule and the program's operations."""
    from .findings import module_opcodes
    f = check.failure
    basis = ["memory", f.kind, f.rule, module_opcodes(module)]
    return "memory-" + hashlib.sha256(json.dumps(basis).encode()).hexdigest()[:12]


class CampaignMemoryAudit:
    """One campaign worker's memory audits: which programs, the counts
    (``Stats.memory``: audited, ok, failed, findings, skipped, seconds, and
    ``skipped: <reason>``), the findings."""

    def __init__(self, runner):
        self.runner = runner
        self.every = max(1, int(runner.opts.memory_audit_every))
        self.seen = 0

    def check(self, items, infos) -> None:
        """Audit the due programs of ``items``; record a failure as a finding."""
        runner, stats = self.runner, self.runner.stats.memory
        from .campaign_options import xla_debug_options
        options = xla_debug_options(runner.opts, "xla") or None
        for (module, args), info in zip(items, infos):
            self.seen += 1
            if (self.seen - 1) % self.every:
                continue
            t0 = time.perf_counter()
            try:
                c = audit_program(module, args, runner.worker("xla"), debug_options=options,
                                  corrupt=runner.opts.memory_corrupt, timeout=runner.opts.timeout)
            except Exception as exc:  # noqa: BLE001 - a campaign never dies on one program
                c = MemoryCheck("skipped", reason=f"internal error: {type(exc).__name__}: {exc}")
            stats["seconds"] += time.perf_counter() - t0
            if c.status == "skipped":
                stats["skipped"] += 1
                stats[f"skipped: {c.reason}"[:160]] += 1
                continue
            stats["audited"] += 1
            if c.status == "ok":
                stats["ok"] += 1
                continue
            stats["failed"] += 1
            t0 = time.perf_counter()
            try:
                path = self.record(module, args, c, info)
            except Exception as exc:  # noqa: BLE001
                import sys
                print(f"hloref fuzz: could not record a memory finding: "
                      f"{type(exc).__name__}: {exc}", file=sys.stderr)
                path = None
            runner.stats.reduce_seconds += time.perf_counter() - t0
            if path:
                runner.stats.findings.append(path)
                stats["findings"] += 1

    def record(self, module, args, check: MemoryCheck, info) -> str | None:
        """Reduce and write a failed audit (once per cheap key); the new finding's
        directory, or None (a duplicate, known upstream)."""
        from .findings import claim
        runner = self.runner
        if not claim(os.path.join(runner.opts.out, ".seen", memory_pre_key(module, check))):
            runner.stats.duplicates += 1
            return None
        from .campaign_options import xla_debug_options
        path, new = reduce_and_write_memory(
            module, args, check, runner.worker("xla"), runner.opts.out, seed=info,
            debug_options=xla_debug_options(runner.opts, "xla") or None,
            corrupt=runner.opts.memory_corrupt, timeout=runner.opts.timeout)
        if path.startswith("known-upstream:"):
            runner.stats.known[path] += 1
            return None
        if not new:
            runner.stats.duplicates += 1
            return None
        return path


def reduce_and_write_memory(module, args, check: MemoryCheck, worker, out_dir: str, *,
                            seed=None, debug_options=None, corrupt=None,
                            timeout: float | None = None) -> tuple[str, bool]:
    """Reduce a program whose audit failed while the audit fails the same way, then
    deduplicate and write it (see the module docstring); ``(directory, new)``, or
    ``("known-upstream:<thread>", False)``."""
    import hloref

    from .archive import known_root_keys
    from .findings import signature, signature_key
    from .memory_finding import memory_root_key
    from .reduce import reduce_failure
    from .triage import add_variant, same_root
    want = check.failure

    def run(m, a, evaluate):
        return audit_program(m, a, worker, debug_options=debug_options, corrupt=corrupt,
                             evaluate=evaluate, timeout=timeout)

    def fails(m, a) -> bool:
        return want.same_way(run(m, a, want.kind == "arena").failure)

    try:
        small, small_args = reduce_failure(module, list(args), fails)
    except Exception:  # noqa: BLE001 - keep the unreduced program rather than lose it
        small, small_args = hloref.parse(module.to_text()), list(args)
    final = run(small, small_args, True)
    if not want.same_way(final.failure):  # the reduction lost it: keep the original
        small, small_args, final = hloref.parse(module.to_text()), list(args), check
    rkey = memory_root_key(final.failure, small)
    known = known_root_keys().get(rkey)
    if known is not None:
        return f"known-upstream:{known}", False
    variant = {"instructions": len(small.entry.instructions), "seed": seed}
    same = same_root(out_dir, rkey)
    if same is not None:
        add_variant(same, variant)
        return same, False
    sig = signature(small, f"memory-{final.failure.kind}-{final.failure.rule}", None)
    path = os.path.join(out_dir, f"memory-{final.failure.kind}-{signature_key(sig)}")
    if os.path.exists(path):
        return path, False
    _write(path, small, small_args, final, rkey, sig, seed, debug_options)
    return path, True


def _write(path, module, args, check: MemoryCheck, rkey, sig, seed, debug_options) -> None:
    from .filing import render
    from .findings import signature_key
    from .memory_finding import memory_attribution
    from .report import write_finding
    f = check.failure
    try:
        expected = hloref_value(module, args)
    except Exception:  # noqa: BLE001 - the value is context; the audit is the finding
        expected = ()
    what = (f"XLA:CPU's buffer assignment (or its memory figures) for this program fails "
            f"hloref's memory audit: {f.kind} ({f.rule}). {f.message}")
    meta = {"verdict": "memory", "oracle": "xla", "seed": seed, "debug_options": debug_options,
            "culprit": None, "blamed_pass": None, "blame_confirmed": None,
            "instructions": len(module.entry.instructions), "signature": sig,
            "signature_key": signature_key(sig), "root_key": rkey,
            "attribution": memory_attribution(f, (check.xla or {}).get("stats") or {}),
            "title": f"[XLA:CPU (jaxlib)] buffer assignment: {f.kind} ({f.rule}) on a "
                     f"{len(module.entry.instructions)}-instruction module",
            "what": what, "message": f.message,
            "memory": {**f.as_dict(), "planted": check.planted,
                       "audit": check.audit.as_dict() if check.audit is not None else None}}
    write_finding(path, module_text=module.to_text(), inputs=args, expected=expected,
                  actual=None, report_md="", meta=meta)
    for name, key in (("optimized.hlo", "optimized"), ("buffer-assignment.txt", "assignment")):
        with open(os.path.join(path, name), "w", encoding="utf-8") as out:
            out.write((check.xla or {}).get(key, ""))
    with open(os.path.join(path, "report.md"), "w", encoding="utf-8") as out:
        out.write(render(path, "github"))


def hloref_value(module, args):
    """hloref's value of ``module`` on ``args`` (the finding's ``expected.npz``)."""
    import hloref
    return hloref.evaluate(module, *args)


def replay_memory(module, args, meta: dict, worker, *, timeout: float | None = None,
                  corrupt=None) -> dict:
    """Audit a stored memory finding's program (``module``, ``args``; ``meta``: its
    ``finding.json``) again as the campaign did, with its compile options: ``verdict``
    (``memory`` when the audit fails, ``ok`` when it checks out, ``skipped`` when it
    cannot run), ``reproduces`` (it fails the same way: same kind and rule), ``message``,
    ``classification`` and, when it fails, ``kind``, ``rule`` and ``values`` now.
    ``corrupt``: the test hook of ``audit_program``."""
    stored = meta.get("memory") or {}
    want = MemoryFailure(str(stored.get("kind")), str(stored.get("rule")), "")
    was = f"stored: {want.kind} / {want.rule}" + (
        ", planted by a test hook" if stored.get("planted") else "")
    check = audit_program(module, list(args), worker, corrupt=corrupt, timeout=timeout,
                          debug_options=meta.get("debug_options") or None)
    if check.status == "skipped":
        return {"verdict": "skipped", "reproduces": False,
                "message": f"the audit did not run: {check.reason} ({was})",
                "classification": "not audited"}
    now = check.failure
    if now is None:
        return {"verdict": "ok", "reproduces": False,
                "message": f"the audit of XLA:CPU's assignment checks out now ({was})",
                "classification": "not a bug: the memory audit checks out"}
    same = want.same_way(now)
    how = "the same way" if same else "another way"
    return {"verdict": "memory", "reproduces": same, "kind": now.kind, "rule": now.rule,
            "values": list(now.values),
            "message": f"the audit fails {how}: {now.kind} / {now.rule}: {now.message} ({was})",
            "classification": f"XLA:CPU's buffer assignment fails the memory audit {how}"}
