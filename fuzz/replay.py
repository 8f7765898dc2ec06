"""``hloref replay``: re-run stored findings and say which still reproduce.

A value finding (mismatch, crash, timeout...) is judged again by ``diff`` under the
envelope, with the compile options it was found with (and, for narrow floats on the XLA
oracle, once more without excess precision). A memory finding (verdict ``memory``,
``fuzz/memory_finding.py``) has its program audited again (``memory_campaign.
replay_memory``): it reproduces when the audit of what XLA:CPU compiles now fails the
same way (same kind and rule); the result says how it fails now, or that it checks out.
"""

from __future__ import annotations

import json
import os

from .findings import host_cpu_flags, load_program, missing_cpu_flags, upstream_status
from .known_classes import FILED
from .property import known_difference

__all__ = ["replay", "has_narrow_float", "classify"]


def replay(paths, *, worker_factory=None, timeout: float = 60.0,
           memory_corrupt=None) -> list[dict]:
    """Re-run stored findings; each result says whether it still reproduces.
    ``memory_corrupt``: the test hook of ``CampaignOptions.memory_corrupt``, applied to
    the assignments a memory finding's audit reads again."""
    from .differential import diff
    from .memory_campaign import replay_memory
    dirs = []
    for p in paths:
        if os.path.isfile(os.path.join(p, "finding.json")):
            dirs.append(p)
        elif os.path.isdir(p):
            dirs.extend(os.path.join(p, n) for n in sorted(os.listdir(p))
                        if os.path.isfile(os.path.join(p, n, "finding.json")))
    workers: dict = {}
    results = []
    have = host_cpu_flags()
    try:
        for d in dirs:
            with open(os.path.join(d, "finding.json"), encoding="utf-8") as f:
                meta = json.load(f)
            oracle = meta.get("oracle", "xla")
            if oracle not in workers:
                if worker_factory is not None:
                    workers[oracle] = worker_factory(oracle)
                else:
                    from .workers import OracleWorker
                    workers[oracle] = OracleWorker(oracle, timeout=timeout)
            strict = memory = None
            try:
                module, values = load_program(d)
                if meta.get("verdict") == "memory":
                    memory = replay_memory(module, values, meta, workers[oracle],
                                           timeout=timeout, corrupt=memory_corrupt)
                    results.append(_result(d, meta, memory["verdict"], memory["reproduces"],
                                           memory["message"], None, None,
                                           memory["classification"], have, memory))
                    continue
                r = diff(module, values, oracle=oracle, worker=workers[oracle], timeout=timeout,
                         debug_options=meta.get("debug_options") or None)
                verdict = r.verdict
                known = known_difference(r) if verdict == "mismatch" else \
                    (r.known_gap if verdict == "known-gap" else None)
                # a known difference that is itself a filed finding (known_bugs.FILED)
                # does not stop the stored finding from reproducing
                reproduces = verdict == meta.get("verdict") and (not known or known in FILED)
                message = r.summary().splitlines()[0]
                if oracle == "xla" and has_narrow_float(module):
                    # XLA's contract without excess precision: every narrow rounding kept
                    s = diff(module, values, oracle=oracle, worker=workers[oracle],
                             timeout=timeout, localize=False,
                             debug_options={"xla_allow_excess_precision": False})
                    strict = s.verdict
            except Exception as exc:  # noqa: BLE001
                verdict, reproduces, message = "error", False, f"{type(exc).__name__}: {exc}"
                known = None
            results.append(_result(d, meta, verdict, reproduces, message, known, strict,
                                   classify(verdict, known, strict), have, memory))
    finally:
        for w in workers.values():
            w.close()
    return results


def _result(d, meta, verdict, reproduces, message, known, strict, classification, have,
            memory) -> dict:
    """One replayed finding, as ``replay`` returns it (``memory``: what the audit found
    now, for a memory finding)."""
    upstream = (upstream_status(d) or {}).get("status")
    return {"path": d, "stored_verdict": meta.get("verdict"), "verdict": verdict,
            "root_key": meta.get("root_key"), "upstream": upstream,
            "stage": (meta.get("attribution") or {}).get("stage"),
            "reproduces": reproduces, "known_difference": known,
            "verdict_without_excess_precision": strict, "classification": classification,
            "host_lacks": missing_cpu_flags(meta, have), "message": message,
            "memory": memory}


def has_narrow_float(module) -> bool:
    from hloref.shapes import ArrayShape, flatten_shape
    return any(isinstance(sh, ArrayShape) and sh.element_type.is_float and sh.element_type.bits <= 16
               for _, i in module.instructions() for sh in flatten_shape(i.shape))


def classify(verdict: str, known, strict) -> str:
    """What a replayed finding is now, under the envelope."""
    if known and known not in FILED:
        return f"known difference ({known})"
    if verdict in ("mismatch", "crash", "timeout"):
        filed = f" (the filed class {known})" if known else ""
        return "bug under XLA's default options" + filed + (
            "" if strict is None else f" (without excess precision: {strict})")
    if strict in ("mismatch", "crash", "timeout"):
        return ("inside the envelope with excess precision; a bug only with "
                "xla_allow_excess_precision=false")
    return "not a bug: inside the envelope" + (
        "" if strict is None else " with and without excess precision")
