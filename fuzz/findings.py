"""Findings on disk: deduplication keys, atomic writes, reduction, replay.

A finding is a directory ``OUT/<verdict>-<opcode>-<key>/`` holding ``module.hlo``,
``inputs.npz``, ``expected.npz``, ``actual.npz``, ``report.md`` and ``finding.json``,
written atomically (``report.write_finding``). Two keys deduplicate findings:

* ``pre_key`` (cheap, before reduction): oracle, verdict, the culprit's opcode and
  operand types (or the module's opcodes and types for crashes); a campaign claims
  it once (``claim``: an exclusive create under ``OUT/.seen/``), so the same failure
  is not reduced again;
* ``signature`` (after reduction): the blamed pass, the reduced module's opcodes and
  element types, the verdict; its hash ``signature_key`` names the directory, so a
  second reduction landing on the same signature writes nothing.

Before reduction a finding is kept as ``OUT/pending/<key>`` (``write_pending``), so a
killed campaign loses none. ``replay`` re-runs stored findings and says which still
reproduce (``hloref replay``). A finding seen only on some processors names the CPU flags
of the host it was found on (``finding.json``: ``host_cpu_flags``, as ``/proc/cpuinfo``
spells them); replay on a host that lacks one says so (``host_lacks``) instead of
taking a miss for a fix.
"""

from __future__ import annotations

import hashlib
import json
import os

from hloref.op_properties import opcodes_with

from .known_classes import FILED
from .property import known_difference, leaves

__all__ = ["signature", "signature_key", "pre_key", "claim", "write_pending", "load_program",
           "replay", "finding_dirs", "module_opcodes", "module_types",
           "has_narrow_float", "classify", "upstream_status", "host_cpu_flags", "missing_cpu_flags"]

#: Opcodes left out of a signature: they only move values.
_STRUCTURAL = opcodes_with("plumbing")


def finding_dirs(out_dir: str) -> list[str]:
    """Names of the finding directories in a campaign's ``out_dir``."""
    if not os.path.isdir(out_dir):
        return []
    return sorted(n for n in os.listdir(out_dir) if not n.startswith(".")
                  and os.path.isfile(os.path.join(out_dir, n, "finding.json")))


def module_types(module) -> list[str]:
    from hloref.shapes import ArrayShape, flatten_shape
    types = set()
    for _, instr in module.instructions():
        for s in flatten_shape(instr.shape):
            if isinstance(s, ArrayShape):
                types.add(s.element_type.name)
    return sorted(types)


def module_opcodes(module) -> list[str]:
    return sorted({i.opcode for _, i in module.instructions() if i.opcode not in _STRUCTURAL})


def signature(module, verdict: str, blamed_pass: str | None) -> dict:
    """The deduplication key of a (reduced) finding."""
    return {"blamed_pass": blamed_pass, "opcodes": module_opcodes(module),
            "element_types": module_types(module), "verdict": verdict}


def signature_key(sig: dict) -> str:
    return hashlib.sha256(json.dumps(sig, sort_keys=True).encode()).hexdigest()[:12]


def pre_key(report, module, oracle) -> str:
    """Cheap key before reduction: verdict, culprit opcode and its types (or the
    module's opcodes for crashes), so duplicates are not reduced again."""
    c = report.culprit.innermost() if report.culprit else None
    if c is not None:
        types = sorted({x.dtype.name for o in c.operands for x in leaves(o)})
        basis = [oracle, report.verdict, c.opcode, types]
    else:
        basis = [oracle, report.verdict, module_opcodes(module), module_types(module)]
    return hashlib.sha256(json.dumps(basis).encode()).hexdigest()[:12]


def claim(path: str) -> bool:
    """Create ``path`` exclusively (atomic across processes); False if it exists."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def write_pending(out_dir: str, key: str, module, args, meta: dict) -> str:
    from hloref.cli_common import flatten_value, write_npz

    from .report import publish_directory

    def fill(tmp):
        with open(os.path.join(tmp, "module.hlo"), "w", encoding="utf-8") as f:
            f.write(module.to_text())
        write_npz(os.path.join(tmp, "inputs.npz"), flatten_value(tuple(args)))
        with open(os.path.join(tmp, "meta.json"), "w", encoding="utf-8") as f:
            json.dump(meta, f, default=str)
    final = os.path.join(out_dir, "pending", key)
    publish_directory(final, fill, prefix=".pending-", replace=False)
    return final


def upstream_status(directory: str) -> dict | None:
    """A finding's ``upstream.json`` (trackers searched, threads, status), if it has one."""
    path = os.path.join(directory, "upstream.json")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def load_program(directory: str):
    import hloref
    from hloref.api import coerce_argument
    from hloref.cli_common import read_npz, unflatten_arguments
    with open(os.path.join(directory, "module.hlo"), encoding="utf-8") as f:
        module = hloref.parse(f.read())
    arrays = read_npz(os.path.join(directory, "inputs.npz"))
    params = module.entry.parameters
    values = unflatten_arguments(arrays, [p.shape for p in params])
    values = [coerce_argument(v, p.shape, f"argument {i}") for i, (v, p) in
              enumerate(zip(values, params))]
    return module, values


def host_cpu_flags(path: str = "/proc/cpuinfo") -> frozenset | None:
    """This host's CPU flags (Linux's ``/proc/cpuinfo``), or None where unreadable."""
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return None


def missing_cpu_flags(meta: dict, have: frozenset | None) -> list[str]:
    """The ``host_cpu_flags`` a finding names that this host lacks (all of them when
    the host's flags are unknown)."""
    need = list(meta.get("host_cpu_flags") or ())
    return need if have is None else [f for f in need if f not in have]


def replay(paths, *, worker_factory=None, timeout: float = 60.0) -> list[dict]:
    """Re-run stored findings; each result says whether it still reproduces."""
    from .differential import diff
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
            strict = None
            try:
                module, values = load_program(d)
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
            upstream = (upstream_status(d) or {}).get("status")
            results.append({"path": d, "stored_verdict": meta.get("verdict"), "verdict": verdict,
                            "root_key": meta.get("root_key"), "upstream": upstream,
                            "stage": (meta.get("attribution") or {}).get("stage"),
                            "reproduces": reproduces, "known_difference": known,
                            "verdict_without_excess_precision": strict,
                            "classification": classify(verdict, known, strict),
                            "host_lacks": missing_cpu_flags(meta, have),
                            "message": message})
    finally:
        for w in workers.values():
            w.close()
    return results


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


