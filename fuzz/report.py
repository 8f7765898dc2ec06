"""Findings: the reproducer a maintainer can act on, written atomically.

A finding directory holds ``module.hlo`` (the reduced module), ``inputs.npz``
(hloref's npz convention), ``expected.npz`` (hloref's value), ``actual.npz`` (the
oracle's value, when it produced one), ``report.md`` (pasteable Markdown) and
``finding.json`` (machine-readable: verdict, culprit, blamed pass, seed, versions).
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import tempfile

import numpy as np

__all__ = ["versions", "markdown_report", "write_finding", "show_value", "publish_directory"]


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    import importlib.metadata as md
    for dist in ("hloref", "jax", "jaxlib", "tensorflow-cpu", "numpy", "ml_dtypes", "numba"):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            pass
    return out


def _leaves(value):
    if isinstance(value, tuple):
        for v in value:
            yield from _leaves(v)
    elif isinstance(value, np.ndarray):
        yield value


def show_value(value, limit: int = 16) -> str:
    """Each array leaf of ``value`` as ``dtype[shape] values`` (narrow floats as floats)."""
    parts = []
    for leaf in _leaves(value):
        shown = leaf.astype(np.float64) if leaf.dtype.kind not in "biufc" else leaf
        with np.printoptions(threshold=limit, edgeitems=4, precision=9):
            parts.append(f"{leaf.dtype.name}{list(leaf.shape)} {np.array2string(np.asarray(shown))}")
    return "\n".join(parts) if parts else "(no array values)"


def markdown_report(*, title: str, verdict: str, module_text: str, inputs: list, expected,
                    actual, summary: str, blamed_pass: str | None = None,
                    blame_confirmed: bool | None = None, seed: int | None = None,
                    oracle: str = "xla", extra: str = "",
                    debug_options: dict | None = None) -> str:
    v = versions()
    opts = ", ".join(f"{k}={val}" for k, val in sorted((debug_options or {}).items()))
    strict = " --no-excess-precision" if (debug_options or {}).get(
        "xla_allow_excess_precision") is False else ""
    lines = [f"# {title}", "",
             f"**Verdict:** {verdict} (hloref vs {oracle}; the oracle's result is judged "
             f"against the numerical envelope of the HLO semantics)", "",
             f"**Debug options:** {opts or 'XLA defaults (xla_allow_excess_precision=true)'}",
             "", f"**Reproduce:** `hloref diff module.hlo --inputs inputs.npz --oracle {oracle}"
             f"{strict}`", ""]
    if blamed_pass:
        conf = {True: "confirmed: with the pass disabled XLA agrees with the reference",
                False: "not confirmed: disabling the pass did not restore the reference value",
                None: "not checked"}[blame_confirmed]
        lines += [f"**First pass that changes the answer:** `{blamed_pass}` ({conf})", ""]
    lines += ["## Reproducer", "", "```", module_text.rstrip(), "```", "",
              "## Inputs", "", "```", show_value(tuple(inputs)), "```", "",
              "## Expected (hloref reference)", "", "```", show_value(expected), "```", "",
              f"## Actual ({oracle})", "", "```", show_value(actual), "```", "",
              "## Details", "", "```", summary.rstrip(), "```", ""]
    if extra:
        lines += [extra.rstrip(), ""]
    if seed is not None:
        lines += [f"Seed: `{seed}`", ""]
    lines += ["Versions: " + ", ".join(f"{k} {val}" for k, val in v.items()), ""]
    return "\n".join(lines)


def _save_npz(path: str, value) -> None:
    arrays = []
    for leaf in _leaves(value if isinstance(value, tuple) else (value,)):
        if leaf.dtype.type.__module__.startswith("ml_dtypes") or leaf.dtype.kind not in "biufc":
            leaf = leaf.view(np.dtype(f"u{leaf.dtype.itemsize}"))
        arrays.append(leaf)
    with open(path, "wb") as f:
        np.savez(f, *arrays)


def publish_directory(final: str, fill, *, prefix: str = ".finding-",
                      replace: bool = True) -> bool:
    """Build a directory with ``fill(tmp)`` beside ``final`` and rename it to ``final``
    in one step, so a reader sees all its files or none; a failure removes the partial
    directory. Where ``final`` exists it is replaced, or with ``replace=False`` kept
    and False returned (the campaign's writers: a finding, a finding the Ray driver
    received, a pending program)."""
    parent = os.path.dirname(os.path.abspath(final)) or "."
    os.makedirs(parent, exist_ok=True)
    if not replace and os.path.exists(final):
        return False
    tmp = tempfile.mkdtemp(prefix=prefix, dir=parent)
    try:
        fill(tmp)
        if os.path.exists(final):
            if not replace:
                shutil.rmtree(tmp, ignore_errors=True)
                return False
            shutil.rmtree(final)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return True


def write_finding(directory: str, *, module_text: str, inputs: list, expected, actual,
                  report_md: str, meta: dict) -> str:
    """Write a finding into ``directory`` atomically (all files appear at once)."""
    def fill(tmp):
        with open(os.path.join(tmp, "module.hlo"), "w", encoding="utf-8") as f:
            f.write(module_text)
        _save_npz(os.path.join(tmp, "inputs.npz"), tuple(inputs))
        _save_npz(os.path.join(tmp, "expected.npz"), expected)
        if actual is not None:
            _save_npz(os.path.join(tmp, "actual.npz"), actual)
        with open(os.path.join(tmp, "report.md"), "w", encoding="utf-8") as f:
            f.write(report_md)
        with open(os.path.join(tmp, "finding.json"), "w", encoding="utf-8") as f:
            json.dump({**meta, "versions": versions()}, f, indent=2, default=str)
    publish_directory(directory, fill)
    return directory
