"""Findings on disk: deduplication keys, atomic writes, reduction.

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
killed campaign loses none. ``fuzz/replay.py`` re-runs stored findings (``hloref
replay``). A finding seen only on some processors names the CPU flags of the host it was
found on (``finding.json``: ``host_cpu_flags``, as ``/proc/cpuinfo`` spells them);
replay on a host that lacks one says so (``host_lacks``) instead of taking a miss for a
fix.
"""

from __future__ import annotations

import hashlib
import json
import os

from hloref.op_properties import opcodes_with

from .property import leaves

__all__ = ["signature", "signature_key", "pre_key", "claim", "write_pending", "load_program",
           "finding_dirs", "module_opcodes", "module_types", "upstream_status",
           "host_cpu_flags", "missing_cpu_flags"]

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
