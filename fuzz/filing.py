"""A finding as a maintainer files it: one report, rendered from the finding's records.

A finding directory (``fuzz/report.py`` writes it) holds the reduced module, the inputs,
hloref's value and the oracle's. ``refresh(directory)`` measures what a maintainer needs
and records it in ``finding.json``:

* ``attribution``: the stage of XLA's chain that is at fault and whose code it is
  (``fuzz/stages.py``), with the evidence table; for a crash the failed CHECK line and
  the native backtrace;
* ``reproducer``: ``repro.py``, a script that needs only jax/jaxlib (or TensorFlow), run
  once to confirm that it reproduces (``fuzz/standalone.py``);
* ``user_program``: a plain JAX (or TF) program that hits the bug, run to confirm
  (``fuzz/user_program.py``), or the reason the user API cannot reach it;
* ``root_key``: the root-cause key that deduplicates findings (``root_key``);
* the host's CPU.

``upstream.json`` beside it (written by whoever searched the trackers) gives the
upstream status. ``render(directory, fmt)`` turns the records into the report:
``github`` (an issue body), ``md`` or ``json``. ``hloref report DIR`` calls both.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform

import numpy as np

from hloref.op_properties import opcodes_with

__all__ = ["root_key", "refresh", "render", "load_values", "host_cpu", "FORMATS",
           "attribute_finding"]

FORMATS = ("github", "md", "json")

#: Opcodes left out of a root key's pattern: they only move values.
_MOVES = opcodes_with("plumbing")


def root_key(attribution: dict | None, module, culprit: str | None = None) -> str:
    """Findings with the same root cause share this key: the same failing stage and pass
    (or, for a crash, the same fatal line's place), the same culprit opcode and the same
    operation pattern; where the attribution measured the cause itself
    (``Attribution.cause``), the same stage and cause whatever the operations. Element
    types and shapes are variants of one finding."""
    a = attribution or {}
    fatal = (a.get("fatal") or "")
    # a CHECK's place (file:line] Check failed: ...) without the time stamp and thread
    place = fatal.split("]", 1)[0].split()[-1] if "]" in fatal else ""
    ops = sorted({i.opcode for _, i in module.instructions() if i.opcode not in _MOVES})
    basis = [a.get("stage"), _pass_family(a.get("pass")), place, culprit, ops]
    if a.get("cause"):
        # a measured cause names the fault itself (a parsed constant's -0 read as +0):
        # it separates two faults of one stage, and the operations around it are variants
        basis = [a.get("stage"), _pass_family(a.get("pass")), a["cause"]]
    return hashlib.sha256(json.dumps(basis).encode()).hexdigest()[:12]


def _pass_family(name: str | None) -> str | None:
    """A pass name without the element type some passes are instantiated for
    (``float-normalization-s4`` and ``-u4`` are one pass)."""
    if not name:
        return name
    from hloref.types import element_type
    head, _, tail = name.rpartition("-")
    try:
        element_type(tail)
    except (KeyError, ValueError):
        return name
    return head if head else name


def host_cpu() -> dict:
    """The host's CPU model and the instruction-set flags XLA:CPU's code depends on
    (``findings.host_cpu_flags`` reads them)."""
    from .findings import host_cpu_flags
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            model = next((line.partition(":")[2].strip() for line in f
                          if line.startswith("model name")), model)
    except OSError:
        pass
    flags = sorted(f for f in host_cpu_flags() or ()
                   if f.startswith(("avx", "sse4", "fma", "f16c", "amx", "bmi")))
    return {"model": model, "flags": flags}


def _meta(directory: str) -> dict:
    with open(os.path.join(directory, "finding.json"), encoding="utf-8") as f:
        return json.load(f)


def _result_types(module) -> list:
    from hloref.shapes import ArrayShape, flatten_shape
    return [s.element_type for s in flatten_shape(module.entry.root.shape)
            if isinstance(s, ArrayShape)]


def load_values(directory: str, name: str, module):
    """``expected`` or ``actual`` as arrays of the module's result types (None if absent)."""
    from hloref.cli_common import read_npz
    path = os.path.join(directory, f"{name}.npz")
    if not os.path.exists(path):
        return None
    arrays = read_npz(path)
    types = _result_types(module)
    out = []
    for a, t in zip(arrays, types):
        if t.dtype is not None and a.dtype != t.dtype and a.dtype.itemsize == t.dtype.itemsize:
            a = a.view(t.dtype)
        out.append(a)
    return tuple(out) if len(out) != 1 else out[0]


def refresh(directory: str, *, worker=None, attribution: bool = True, programs: bool = True,
            timeout: float = 180.0) -> dict:
    """Measure and record what the report needs (see the module docstring); rewrites
    ``finding.json``, ``report.md``, ``repro.py`` and ``user_program.py``."""
    from .findings import load_program
    meta = _meta(directory)
    module, args = load_program(directory)
    text = open(os.path.join(directory, "module.hlo"), encoding="utf-8").read()
    oracle = meta.get("oracle", "xla")
    options = meta.get("debug_options") or None
    expected = load_values(directory, "expected", module)
    actual = load_values(directory, "actual", module)
    if attribution and meta.get("verdict") in ("mismatch", "crash"):
        meta["attribution"] = attribute_finding(text, args, meta["verdict"], oracle, options,
                                                worker if oracle == "xla" else None, timeout)
    culprit = (meta.get("culprit") or {}).get("opcode")
    meta["root_key"] = root_key(meta.get("attribution"), module, culprit)
    meta["host_cpu"] = host_cpu()
    if programs:
        from .standalone import run_script, standalone_script
        script = standalone_script(text, args, oracle=oracle, debug_options=options,
                                   expected=expected, actual=actual)
        _write(directory, "repro.py", script)
        run = run_script(script, timeout=timeout)
        meta["reproducer"] = _reproduced(run, meta.get("verdict"), actual, "repro.py", oracle)
        meta["user_program"] = _user_program_record(directory, meta, module, args, oracle,
                                                    expected, actual, timeout)
    with open(os.path.join(directory, "finding.json"), "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=2, default=str)
    _write(directory, "report.md", render(directory, "github"))
    return meta


def _user_program_record(directory, meta, module, args, oracle, expected, actual, timeout):
    """The user-API program of a finding, run to confirm. A program written by hand
    (``"by_hand": true`` in its record: the translator's program cannot show the bug,
    e.g. a text round trip) is kept and run again: it reproduces when it exits 0 and its
    last line is ``MISMATCH``."""
    old = meta.get("user_program") or {}
    if old.get("by_hand") and old.get("file"):
        import subprocess
        import sys
        run = subprocess.run([sys.executable, old["file"]], cwd=directory, capture_output=True,
                             text=True, timeout=timeout)
        lines = run.stdout.strip().splitlines()
        return {**old, "reproduces": run.returncode == 0 and bool(lines)
                and lines[-1].startswith("MISMATCH")}
    from .user_program import confirm, user_program
    api = "tf" if oracle == "tf" else "jax"
    prog = user_program(module, args, api=api)
    record = {"api": api, "reason": prog.reason, "file": None, "reproduces": None}
    if prog.code is not None:
        _write(directory, "user_program.py", prog.code)
        record["file"] = "user_program.py"
        crashed = meta.get("verdict") == "crash"
        signal = (meta.get("attribution") or {}).get("signal") or "crash"
        result = confirm(prog, expected=expected, actual=signal if crashed else actual,
                         timeout=timeout, module=module)
        record["reproduces"] = bool(result.get("reproduces"))
        record["message"] = str(result.get("message", ""))[:500]
    return record


def _write(directory: str, name: str, text: str) -> None:
    tmp = os.path.join(directory, f".{name}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, os.path.join(directory, name))


def _reproduced(run, verdict, actual, name: str, oracle: str) -> dict:
    """Did the standalone script show what the finding says?"""
    need = "jax/jaxlib" if oracle == "xla" else "tensorflow"
    out = {"file": name, "command": f"python {name}", "needs": need,
           "returncode": run.returncode, "signal": run.signal}
    if verdict == "crash":
        out["reproduces"] = run.signal is not None or (run.returncode or 0) != 0
    else:
        # XLA's value is not the expected one (the script compares); whether it is also
        # the stored value bit for bit is said apart (a value read from uninitialised
        # memory differs from run to run)
        out["reproduces"] = run.verdict == "MISMATCH"
        out["same_value_as_stored"] = _same(run.values, actual)
    return out


def _same(got, want) -> bool:
    """Bit for bit, leaf by leaf (NaN equal to NaN of the same bits)."""
    if got is None or want is None:
        return False
    g = list(got) if isinstance(got, (tuple, list)) else [got]
    w = list(want) if isinstance(want, tuple) else [want]
    if len(g) != len(w):
        return False
    for a, b in zip(g, w):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype.itemsize != b.dtype.itemsize:
            return False
        if a.tobytes() != b.tobytes():
            return False
    return True


def attribute_finding(text: str, args, verdict: str, oracle: str, options: dict | None,
                      worker=None, timeout: float = 180.0) -> dict:
    """Stage attribution of a finding as a JSON record; a TensorFlow finding is first run
    on jaxlib's XLA: wrong there too, it is attributed along jaxlib's chain, else it is
    TensorFlow's XLA's own (stage ``tf-xla``)."""
    from .stages import attribute
    if oracle == "xla":
        return attribute(text, args, verdict=verdict, worker=worker, debug_options=options,
                         timeout=timeout).to_json()
    # TensorFlow's XLA: is the same module wrong on jaxlib's XLA too?
    from .differential import diff
    from .workers import OracleWorker
    with OracleWorker("xla", timeout=timeout) as w:
        import hloref
        r = diff(hloref.parse(text), args, oracle="xla", worker=w, localize=False,
                 debug_options=options)
        if r.verdict == verdict:
            a = attribute(text, args, verdict=verdict, worker=w, debug_options=options,
                          timeout=timeout).to_json()
            a["steps"].insert(0, ["jaxlib's XLA", f"the same module on jaxlib's XLA: {r.verdict}"])
            return a
    from .stage_table import component_of, stage
    return {"stage": "tf-xla", "component": component_of("tf-xla"),
            "repository": stage("tf-xla").repository, "pass": None,
            "confirmed": r.verdict == "match",
            "confirmation": f"jaxlib's XLA gives {r.verdict} on the same module",
            "steps": [["jaxlib's XLA", f"the same module on jaxlib's XLA: {r.verdict}"
                       + (f" ({r.message.splitlines()[0][:200]})" if r.message else "")]],
            "fatal": None, "signal": None, "backtrace": []}


# -- rendering ---------------------------------------------------------------------------


def _show(value) -> str:
    from .report import show_value
    return show_value(value)


def render(directory: str, fmt: str = "github") -> str:
    """The report of the finding in ``directory`` from its records."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    from .findings import upstream_status
    meta = _meta(directory)
    up = upstream_status(directory)
    if fmt == "json":
        return json.dumps({**meta, "upstream": up}, indent=2, default=str)
    from .findings import load_program
    module, args = load_program(directory)
    text = open(os.path.join(directory, "module.hlo"), encoding="utf-8").read().rstrip()
    a = dict(meta.get("attribution") or {})
    if a:  # whose code a stage is: from the stage table, as it is now
        from .stage_table import component_of, stage
        a["component"] = component_of(a.get("stage"), a.get("pass"))
        a["repository"] = stage(a["stage"]).repository if a.get("stage") else None
    oracle = meta.get("oracle", "xla")
    system = "XLA:CPU (jaxlib)" if oracle == "xla" else "TensorFlow's XLA:CPU"
    versions = meta.get("versions") or {}
    options = meta.get("debug_options") or {}
    title = meta.get("title") or _title(meta, a, module, system)
    fold = fmt == "github"
    lines = [f"# {title}", "",
             f"**Component:** {a.get('component', 'undetermined (not attributed)')}"
             + (f" — file at `{a['repository']}`" if a.get("repository") else ""),
             f"**Stage evidence:** {a.get('confirmation') or 'see the table below'}", ""]
    if up:
        threads = "; ".join(t.get("url", "") for t in up.get("threads", [])[:3])
        lines += [f"**Upstream:** {up.get('status')}" + (f" ({threads})" if threads else "")
                  + f", checked {up.get('checked', '2026-11-29')}", ""]
    else:
        lines += ["**Upstream:** not checked", ""]
    lines += ["## What happens", "", meta.get("what") or meta.get("message") or
              f"{system} returns a value outside what the HLO semantics allow "
              "(see Expected and Actual).", "",
              "## Reproducer (jax/jaxlib only)" if oracle == "xla" else
              "## Reproducer (TensorFlow only)", ""]
    rep = meta.get("reproducer") or {}
    if rep:
        state = "reproduces" if rep.get("reproduces") else "DID NOT reproduce when checked"
        lines += [f"`{rep.get('command')}` — needs only {rep.get('needs')}; {state} "
                  "on the versions below.", ""]
    repro = os.path.join(directory, "repro.py")
    if os.path.exists(repro):
        lines += _block(open(repro, encoding="utf-8").read(), "python", fold, "repro.py")
    lines += ["The module:", ""] + _block(text, "", False, None)
    up_prog = meta.get("user_program") or {}
    lines += ["## From the user API", ""]
    prog = os.path.join(directory, up_prog.get("file") or "user_program.py")
    if up_prog.get("file") and os.path.exists(prog):
        state = "reproduces the bug" if up_prog.get("reproduces") else (
            "does NOT reproduce it: " + "; ".join(x for x in (up_prog.get("message"),
                                                              up_prog.get("reason")) if x))
        lines += [f"A plain {up_prog.get('api', 'jax').upper()} program; run, it {state}.", ""]
        lines += _block(open(prog, encoding="utf-8").read(), "python", fold, up_prog["file"])
    else:
        lines += [f"Not reachable from the {up_prog.get('api', 'user').upper()} API: "
                  f"{up_prog.get('reason') or 'not checked'}", ""]
    if meta.get("verdict") == "memory":  # a failed memory audit: no Expected / Actual
        from .memory_finding import memory_report_lines
        lines += ["## Inputs", "", "```", _show(tuple(args)), "```", ""]
        lines += memory_report_lines(meta)
    else:
        lines += _values_lines(directory, meta, a, module, args, system, fold)
    if a.get("steps"):
        lines += ["## Where along XLA's chain (measured)", "",
                  "Each stage's output evaluated by hloref on the same inputs, against the "
                  "envelope of the HLO semantics:", "",
                  "| step | what hloref saw |", "|---|---|"]
        lines += [f"| {s} | {str(w).replace('|', '/')[:400]} |" for s, w in a["steps"]]
        lines.append("")
    host = meta.get("host_cpu") or {}
    lines += ["## Environment", "",
              "- versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()),
              "- debug options: " + (", ".join(f"{k}={v}" for k, v in sorted(options.items()))
                                     or "XLA's defaults"),
              f"- host CPU: {host.get('model', 'unknown')}; flags: "
              f"{' '.join(host.get('flags', [])) or 'unknown'}",
              "- found by: hloref" + (f" (seed `{meta['seed']}`)" if meta.get("seed") else "")
              + f"; root key `{meta.get('root_key')}`"]
    if meta.get("variants"):
        lines += ["", "## Variants (same root cause)", ""]
        lines += [f"- {v}" for v in meta["variants"]]
    return "\n".join(lines) + "\n"



def _values_lines(directory: str, meta: dict, a: dict, module, args, system: str,
                  fold: bool) -> list[str]:
    """Inputs, Expected and Actual of a value or crash finding."""
    lines: list[str] = []
    expected = load_values(directory, "expected", module)
    actual = load_values(directory, "actual", module)
    lines += ["## Inputs", "", "```", _show(tuple(args)), "```", "",
              "## Expected", "", "```", _show(expected), "```", "",
              meta.get("derivation") or _derivation(meta, a), "",
              f"## Actual ({system})", ""]
    if meta.get("verdict") == "crash" or actual is None:
        lines += ["The process dies" + (f" with {a.get('signal')}" if a.get("signal") else "")
                  + ":", "", "```", a.get("fatal") or meta.get("message") or "(no fatal line)",
                  "```", ""]
        if a.get("backtrace"):
            lines += _block("\n".join(a["backtrace"][:30]), "", fold, "native backtrace (gdb)")
    else:
        lines += ["```", _show(actual), "```", ""]
    return lines

def _title(meta: dict, a: dict, module, system: str) -> str:
    """``[system] component: crash / wrong result in `ops` (types)``."""
    from .findings import module_opcodes, module_types
    culprit = (meta.get("culprit") or {}).get("opcode")
    ops = [culprit] if culprit else module_opcodes(module)[:3]
    types = module_types(module)
    what = {"crash": "crash", "timeout": "hang"}.get(meta.get("verdict"), "wrong result")
    where = a.get("component") or "component undetermined"
    return (f"[{system}] {where}: {what} in {', '.join(f'`{o}`' for o in ops) or 'the module'}"
            f" ({', '.join(t for t in types if t != 'pred')[:40] or 'pred'})")


def _block(text: str, lang: str, fold: bool, summary: str | None) -> list[str]:
    body = [f"```{lang}", text.rstrip(), "```"]
    if fold and summary:
        return [f"<details><summary>{summary}</summary>", ""] + body + ["", "</details>", ""]
    return body + [""]


def _derivation(meta: dict, a: dict) -> str:
    stage = a.get("stage")
    lines = ["Derivation: hloref evaluates the module by the written HLO semantics "
             "(XLA's operation_semantics and the StableHLO spec; docs/semantics.md); XLA's "
             "value is judged against the envelope of values a correct implementation may "
             "return under the debug options above."]
    if stage in ("hlo-pass", "conversion", "import", "stablehlo", "parse"):
        lines.append(f"XLA's own module before the `{stage}` stage evaluates to the expected "
                     "value; its module after that stage does not (table below).")
    elif stage in ("emitter", "llvm"):
        lines.append("XLA's own optimized module evaluates to the expected value: the answer "
                     "changes in code generation (table below).")
    return " ".join(lines)
