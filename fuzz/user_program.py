"""A plain JAX (or TensorFlow) program that hits a finding, or why there is none.

``user_program(module, inputs, api="jax")`` translates the entry computation op by op into
the calls a user of that API writes (``jax.lax`` under ``jax.jit``: fuzz/user_jax.py;
``tf`` / ``tf.raw_ops`` under ``tf.function(jit_compile=True)``: fuzz/user_tf.py) and
returns a :class:`UserProgram`: ``code`` (a short self-contained script: imports, the
function, the inputs as literals, ``result = f(...)``, ``print(result)``) or ``None``, and
``reason``: why the API cannot write the module (the op or element type), or, with code,
which ops the API lowers to other HLO instructions than the module's (so XLA never sees
the module's op); ``None`` when the code is an exact transcription.

``confirm(program, expected=..., actual=...)`` runs the code in a fresh process
(:func:`.standalone.run_script`: hloref cannot be imported there) and says whether it
reproduces the finding: the program's result equals XLA's ``actual`` bit for bit and
differs from ``expected`` (the scripts' comparison: NaN equals NaN, a float's sign counts),
or, for a crash finding (``actual`` the signal's name, e.g. ``"SIGABRT"``, or ``"crash"``
for any), the process dies that way. It also reads the HLO the API handed XLA (jax:
``f.lower(...).as_text(dialect="hlo")``; TF: ``experimental_get_compiler_ir(...)(stage=
"hlo")``) and names the module's ops missing from it.
"""

from __future__ import annotations

import inspect
import json
import re
from dataclasses import dataclass

import numpy as np

from hloref.op_properties import opcodes_with

from .standalone import first_difference, report_results, run_script, value_differs
from .user_translate import Unexpressible

__all__ = ["UserProgram", "user_program", "confirm", "run_program", "hlo_opcodes", "APIS"]

APIS = ("jax", "tf")

#: Opcodes left out when comparing the module's ops with the HLO the API made: the
#: plumbing, and what forwards a value unchanged (an API adds or drops copies, reshapes
#: and bitcasts of its own).
_PLUMBING = opcodes_with("plumbing") | opcodes_with("same-shape-forward")


@dataclass(frozen=True)
class UserProgram:
    """A user-API program for a module: ``code`` or ``None``, and ``reason`` (see the
    module docstring)."""
    api: str
    code: str | None
    reason: str | None = None


def user_program(module, inputs: list, *, api: str = "jax") -> UserProgram:
    """Translate ``module`` (an hloref Module or HLO text) run on ``inputs`` (one value per
    entry parameter) into a program of ``api`` (``"jax"`` or ``"tf"``)."""
    import hloref
    if isinstance(module, str):
        module = hloref.parse(module)
    if api == "jax":
        from .user_jax import JaxTranslator as translator
    elif api == "tf":
        from .user_tf import TfTranslator as translator
    else:
        raise ValueError(f"user_program: api must be one of {', '.join(APIS)}, got {api!r}")
    t = translator(module, inputs)
    try:
        code = t.code()
    except Unexpressible as e:
        return UserProgram(api, None, str(e))
    return UserProgram(api, code, "; ".join(t.notes) or None)


def _harness(api: str) -> tuple[str, str]:
    """Lines put before the program's ``result = f(ARGS)`` line (ARGS filled in) and after
    its end: print the HLO the API hands XLA, then the result leaves (``@leaf``)."""
    helpers = "\n\n".join(inspect.getsource(fn) for fn in
                          (value_differs, first_difference, report_results))
    if api == "jax":
        hlo = 'f.lower(ARGS).as_text(dialect="hlo")'
        leaves = "[np.asarray(x) for x in jax.tree.leaves(result)]"
    else:
        hlo = 'f.experimental_get_compiler_ir(ARGS)(stage="hlo")'
        leaves = "[np.asarray(x.numpy()) for x in tf.nest.flatten(result)]"
    before = (f"import json\ntry:\n    print('@hlo', json.dumps({hlo}), flush=True)\n"
              f"except Exception:  # the call below says what is wrong\n    pass\n")
    after = f"\n\n{helpers}\n\nreport_results({leaves}, None)\n"
    return before, after


_CALL_RE = re.compile(r"^result = f\((.*)\)$", re.M)


def hlo_opcodes(text: str) -> set[str]:
    """The opcodes of the instructions in HLO text (``name = shape opcode(...)`` lines)."""
    ops = set()
    for line in text.splitlines():
        m = re.match(r"\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*(.*)$", line)
        if not m or line.lstrip().startswith("HloModule"):
            continue
        rest = m.group(1)
        if rest.startswith("("):  # a tuple shape: skip to its closing parenthesis
            depth = 0
            for k, ch in enumerate(rest):
                depth += ch == "("
                depth -= ch == ")"
                if depth == 0:
                    rest = rest[k + 1:]
                    break
        else:
            rest = rest.split(" ", 1)[1] if " " in rest else ""
        op = re.match(r"\s*([a-z][a-z0-9\-]*)\(", rest)
        if op:
            ops.add(op.group(1))
    return ops


def _last_error(run) -> str:
    """The exception line of a failed run's stderr (the last line that names an error)."""
    lines = [ln.strip() for ln in run.stderr_tail.strip().splitlines() if ln.strip()]
    for line in reversed(lines):
        m = re.match(r"^(?:[\w.]+\.)?(\w*(?:Error|Exception)): (.+)$", line)
        if m and m.group(2) != "in user code:":
            return f"{m.group(1)}: {m.group(2)}"[:300]
    return lines[-1][:300] if lines else ""


def _module_opcodes(code_module) -> set[str]:
    return {i.opcode for _, i in code_module.instructions()}


def run_program(program: UserProgram, *, timeout: float = 120.0):
    """Run ``program.code`` as :func:`.standalone.run_script` does, with lines added that
    print the HLO the API hands XLA (``@hlo``) and the result leaves (``@leaf``): the
    :class:`.standalone.ScriptRun` (``values``: the result leaves)."""
    if program.code is None:
        raise ValueError(f"run_program: no code ({program.reason})")
    m = _CALL_RE.search(program.code)
    if m is None:
        raise ValueError("run_program: the program has no `result = f(...)` line")
    before, after = _harness(program.api)
    code = (program.code[:m.start()] + before.replace("ARGS", m.group(1))
            + program.code[m.start():] + after)
    return run_script(code, timeout=timeout)


def confirm(program: UserProgram, *, expected, actual, timeout: float = 120.0,
            module=None, part=None) -> dict:
    """Run ``program`` and say whether it reproduces the finding.

    ``expected``: the result leaves the semantics give (a value or a list of leaves);
    ``actual``: XLA's result leaves, or for a crash finding the signal's name
    (``"SIGABRT"``) or ``"crash"``. ``module`` (text or Module), when given, is compared
    with the HLO the API made. ``part`` (leaves -> leaves), when given, picks what is
    compared with ``actual`` bit for bit (a finding whose value is partly
    nondeterministic). Returns ``{"reproduces", "value", "message", "signal",
    "missing_ops"}``."""
    if program.code is None:
        return {"reproduces": False, "value": None, "message": program.reason, "signal": None,
                "missing_ops": None}
    run = run_program(program, timeout=timeout)
    missing = None
    hlo = [json.loads(line[5:]) for line in run.stdout.splitlines() if line.startswith("@hlo ")]
    if module is not None and hlo:
        import hloref
        mod = hloref.parse(module) if isinstance(module, str) else module
        missing = sorted(_module_opcodes(mod) - _PLUMBING - hlo_opcodes(hlo[0]))
    result = {"value": run.values or None, "signal": run.signal, "missing_ops": missing}
    where = (f" (the HLO {program.api} hands XLA has no {', '.join(missing)})" if missing
             else "")
    if isinstance(actual, str):
        ok = run.signal is not None and actual in ("crash", run.signal)
        if run.signal:
            message = f"the process died with {run.signal}"
        elif run.timed_out:
            message = "the program timed out"
        elif run.returncode:
            message = f"the program failed (exit {run.returncode}): {_last_error(run)}"
        else:
            message = "the program ran without crashing"
        result.update(reproduces=ok, message=message + where)
        return result
    if run.timed_out or run.returncode != 0:
        how = "timed out" if run.timed_out else run.signal or f"exit {run.returncode}"
        result.update(reproduces=False, message=f"the program failed ({how}): "
                      f"{_last_error(run)}{where}")
        return result
    want = [np.asarray(x) for x in (expected if isinstance(expected, (list, tuple))
                                    else [expected])]
    got_actual = [np.asarray(x) for x in (actual if isinstance(actual, (list, tuple))
                                          else [actual])]
    same = [(v.dtype, v.shape) for v in run.values] == [(a.dtype, a.shape) for a in got_actual]
    if same:
        pick = part or (lambda leaves: leaves)
        same = [v.tobytes() for v in pick(run.values)] == [a.tobytes() for a in pick(got_actual)]
    wrong = first_difference(run.values, want)
    if same and wrong:
        message = f"reproduces: the same value as XLA's, and {wrong}"
    elif same:
        message = "the program gives XLA's value, which equals the expected value"
    elif wrong:
        message = (f"differs from the expected value ({wrong}) but not as the finding: "
                   f"{first_difference(run.values, got_actual)}")
    else:
        message = "the program gives the expected value: it does not hit the bug"
    result.update(reproduces=bool(same and wrong), message=message + where)
    return result
