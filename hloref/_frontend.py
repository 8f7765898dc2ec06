"""What ``hloref.jax``, ``hloref.tf`` and the pytest plugin share.

A front end hands over an HLO module, the values of its parameters, and the value
the framework's own XLA already returned for them. ``check_values`` evaluates the
module with hloref and gives both values to ``hloref.fuzz.diff`` under the shared
verdict; the oracle's answer for the whole module is the value the framework
returned (no second XLA run). Only when the values differ does a real oracle worker
start, for isolation (the culprit) and pass blame.

Nothing here imports jax or TensorFlow.
"""

from __future__ import annotations

import dataclasses
import os
import re
import time
from dataclasses import dataclass, field

import numpy as np

__all__ = ["FrontendReport", "PrecomputedOracle", "check_values", "leaf_paths",
           "format_index", "write_reproducer", "flat_result", "frontend_report",
           "inputs_with_tokens"]


class PrecomputedOracle:
    """Stands in for an ``OracleWorker`` whose answer for one module is already known.

    ``run(text, ...)`` with the module's own text (and no debug options) returns the
    precomputed value; any other job (isolated instructions, pass dumps) goes to a real
    ``OracleWorker``, started on first use (or the ``worker`` given)."""

    def __init__(self, oracle: str, texts, value, *, worker=None, timeout: float = 120.0):
        self.oracle = oracle
        self._texts = {t for t in texts if t}
        self._value = value
        self._worker = worker
        self._own = worker is None
        self.timeout = timeout
        self.precomputed_runs = 0
        self.delegated_runs = 0

    @property
    def started(self) -> bool:
        """Whether a real oracle worker was needed (and created here)."""
        return self._worker is not None and self._own

    def worker(self):
        if self._worker is None:
            from hloref.fuzz.workers import OracleWorker
            self._worker = OracleWorker(self.oracle, timeout=self.timeout)
        return self._worker

    def run(self, text: str, args, *, debug_options: dict | None = None,
            optimized: bool = False, timeout: float | None = None):
        from hloref.fuzz.workers import OracleResult
        if text in self._texts and not debug_options and not optimized:
            self.precomputed_runs += 1
            return OracleResult("ok", value=self._value, seconds=0.0)
        self.delegated_runs += 1
        return self.worker().run(text, args, debug_options=debug_options, optimized=optimized,
                                 timeout=timeout)

    def close(self) -> None:
        if self._own and self._worker is not None:
            self._worker.close()
            self._worker = None


def _report_class():
    """``FrontendReport``: a ``DiffReport`` with the front end's view of the outputs."""
    global _FRONTEND_REPORT
    if _FRONTEND_REPORT is not None:
        return _FRONTEND_REPORT
    from hloref.fuzz.differential import DiffReport

    @dataclass
    class FrontendReport(DiffReport):  # noqa: F811 - the real class
        """A ``DiffReport`` (``verdict``, ``comparison``, ``culprit``...) plus what a
        JAX or TensorFlow user needs: ``mismatches`` (the pytree path of each output
        that differs, with its first differing element, e.g. ``out['logits'][3, 7]``,
        and that output's comparison), ``blamed_pass``/``blame_confirmed`` (as
        ``hloref diff --blame`` gives them), ``value`` (hloref's result, in the
        function's own structure), ``oracle_value`` (what the framework's XLA returned),
        ``hlo_text`` (the module that was checked), ``inputs`` (one array per
        parameter) and ``reproducer`` (a directory ``hloref replay`` reads, if written)."""

        mismatches: list = field(default_factory=list)
        blamed_pass: str | None = None
        blame_confirmed: bool | None = None
        value: object = None
        oracle_value: object = None
        hlo_text: str = ""
        inputs: list = field(default_factory=list)
        reproducer: str | None = None
        function: str = ""
        output_names: list = field(default_factory=list)

        @property
        def paths(self) -> list[str]:
            """The pytree path (with the first differing element) of each mismatching output."""
            return [p for p, _ in self.mismatches]

        def summary(self) -> str:
            lines = [super().summary()]
            if self.function:
                lines.insert(0, f"function: {self.function}")
            for path, verdict in self.mismatches:
                lines.append(f"{path}: {verdict.describe(theirs=self.oracle_label)}")
            if self.blamed_pass:
                conf = {True: "confirmed by disabling it", False: "not confirmed by disabling it",
                        None: "not confirmed"}[self.blame_confirmed]
                lines.append(f"first XLA pass that changes the answer: {self.blamed_pass} ({conf})")
            if self.reproducer:
                lines.append(f"reproducer: {self.reproducer} (hloref replay {self.reproducer})")
            return "\n".join(lines)

    _FRONTEND_REPORT = FrontendReport
    return FrontendReport


_FRONTEND_REPORT = None


def __getattr__(name):
    if name == "FrontendReport":
        return _report_class()
    raise AttributeError(name)


def frontend_report(report, **extra):
    """``report`` (a ``DiffReport``) as a ``FrontendReport``, with ``extra`` fields set."""
    cls = _report_class()
    values = {f.name: getattr(report, f.name) for f in dataclasses.fields(report)}
    values.update(extra)
    return cls(**values)


def flat_result(module, value) -> list:
    """hloref's (or an oracle's) value of ``module`` as the list of its result leaves:
    the elements of a tuple-shaped root, or the one array. Tokens are dropped."""
    from hloref.shapes import TupleShape
    from hloref.values import Token
    leaves = list(value) if isinstance(module.entry.root.shape, TupleShape) else [value]
    return [v for v in leaves if not isinstance(v, Token) and v is not None]


def format_index(path: str, index) -> str:
    """``out['logits']`` and ``(3, 7)`` → ``out['logits'][3, 7]``."""
    if index is None or len(index) == 0:
        return path
    return f"{path}[{', '.join(str(int(i)) for i in index)}]"


def leaf_paths(module, expected: list, actual: list, names: list[str]) -> list:
    """``(path, Verdict)`` for each result leaf whose values differ under the shared
    comparison (with the tolerance of the instruction that produced the leaf)."""
    from hloref.fuzz.compare import compare_values
    root = module.entry.root
    producers = list(root.operands) if root.opcode == "tuple" else [root]
    out = []
    for i, (e, a, name) in enumerate(zip(expected, actual, names)):
        opcode = producers[i].opcode if i < len(producers) else None
        try:
            v = compare_values(a, e, opcode=opcode)
        except Exception as exc:  # noqa: BLE001 - structure the policy cannot compare
            from hloref.fuzz.compare import Verdict
            v = Verdict("mismatch", f"cannot compare: {exc}")
        if not v.ok:
            out.append((format_index(name, v.first_index), v))
    return out


def _outside(module, report, inputs: list, names: list[str], limits=None) -> list:
    """``(path, EnvelopeVerdict)`` for each result leaf outside the module's numerical
    envelope (``hloref.fuzz.envelope``), each leaf judged on its own (the envelope
    ``diff`` sampled, when it did)."""
    from hloref.api import coerce_argument
    from hloref.fuzz.envelope import envelope_of
    from hloref.shapes import TupleShape
    env = getattr(report, "envelope_model", None)
    if env is None:
        args = [coerce_argument(a, p.shape, f"argument {i}")
                for i, (a, p) in enumerate(zip(inputs_with_tokens(module, inputs),
                                               module.entry.parameters))]
        env = envelope_of(module, args, getattr(report, "policy", None), limits=limits)
    tupled = isinstance(module.entry.root.shape, TupleShape)
    # result leaves are numbered among the non-token outputs (the names)
    arrays = [i for i, v in enumerate(env.nominal) if isinstance(v, np.ndarray)] \
        if tupled else [0]
    out = []
    for path, v in env.check_each(report.actual):
        if v.ok:
            continue
        k = arrays.index(path[0]) if tupled and path and path[0] in arrays else 0
        name = names[k] if k < len(names) else f"out[{k}]"
        out.append((format_index(name, v.index), v))
    return out


def inputs_with_tokens(module, inputs: list) -> list:
    """Insert ``None`` for token parameters (effects) the front end did not supply."""
    from hloref.shapes import TokenShape
    params = module.entry.parameters
    if len(inputs) == len(params):
        return list(inputs)
    it = iter(inputs)
    out = []
    for p in params:
        out.append(None if isinstance(p.shape, TokenShape) else next(it, None))
    return out


def check_values(module, inputs: list, oracle_value, *, oracle: str = "xla", names=None,
                 text: str | None = None, worker=None, limits=None, localize: bool = True,
                 blame: bool = True, timeout: float = 120.0, printed: str | None = None):
    """The shared verdict on ``module`` run on ``inputs``: hloref's value against
    ``oracle_value`` (the value the framework's XLA returned: an array, or a tuple of
    the result leaves for a tuple-shaped root). ``names``: the pytree path of each result
    leaf; ``text``: the module as the framework printed it (kept in the report and the
    reproducer); ``printed``: ``module_to_text(module)`` if the caller has it already.
    Returns a ``FrontendReport``."""
    from hloref.fuzz.differential import diff
    from hloref.printer import module_to_text
    t0 = time.perf_counter()
    printed = printed or module_to_text(module)
    pre = PrecomputedOracle(oracle, {printed, text}, oracle_value, worker=worker,
                            timeout=timeout)
    try:
        report = diff(module, inputs_with_tokens(module, inputs), oracle=oracle, worker=pre,
                      limits=limits, localize=localize, timeout=timeout)
        extra = {"hlo_text": text or printed, "inputs": list(inputs),
                 "output_names": list(names or [])}
        if report.verdict not in ("match", "known-gap", "undetermined") and report.expected is not None and \
                report.actual is not None:
            expected = flat_result(module, report.expected)
            actual = flat_result(module, report.actual)
            names = names or [f"out[{i}]" for i in range(len(expected))]
            try:
                extra["mismatches"] = _outside(module, report, inputs, names, limits) \
                    if getattr(report, "envelope", None) is not None else \
                    leaf_paths(module, expected, actual, names)
            except Exception:  # noqa: BLE001 - fall back to the plain policy per output
                extra["mismatches"] = leaf_paths(module, expected, actual, names)
            if not extra["mismatches"] and report.comparison is not None and \
                    not report.comparison.ok:
                leaf = report.comparison.leaf
                i = leaf[0] if leaf else 0
                extra["mismatches"] = [(format_index(names[i] if i < len(names) else "out",
                                                     report.comparison.first_index),
                                        report.comparison)]
            if blame and report.verdict == "mismatch" and oracle == "xla":
                try:
                    from hloref.fuzz.blame import blame as run_blame
                    b = run_blame(printed, inputs_with_tokens(module, inputs), pre)
                    extra["blamed_pass"], extra["blame_confirmed"] = b.pass_name, b.confirmed
                except Exception:  # noqa: BLE001 - blame is best effort, as in hloref diff
                    pass
        report = frontend_report(report, **extra)
        report.hloref_seconds = report.hloref_seconds or (time.perf_counter() - t0)
        return report
    finally:
        pre.close()


def _slug(text: str, limit: int = 80) -> str:
    s = re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_.")
    return s[:limit] or "computation"


def write_reproducer(out_dir: str, name: str, report, *, meta: dict | None = None) -> str:
    """Write ``report``'s module, inputs and both values as a finding directory that
    ``hloref replay`` reads (``module.hlo``, ``inputs.npz``, ``expected.npz``,
    ``actual.npz``, ``report.md``, ``finding.json``). Returns the directory."""
    from hloref.fuzz.report import markdown_report, write_finding
    import hashlib
    key = hashlib.sha256(report.hlo_text.encode() + b"\0" + b"".join(
        np.ascontiguousarray(a).tobytes() for a in report.inputs if isinstance(a, np.ndarray))
    ).hexdigest()[:10]
    path = os.path.join(out_dir, f"{_slug(name)}-{key}")
    culprit = report.culprit.innermost() if report.culprit else None
    title = (f"{report.oracle} {report.verdict} in `{culprit.opcode}`" if culprit else
             f"{report.oracle} {report.verdict} in {name}")
    md = markdown_report(title=title, verdict=report.verdict, module_text=report.hlo_text,
                         inputs=report.inputs, expected=report.expected, actual=report.actual,
                         summary=report.summary(), blamed_pass=report.blamed_pass,
                         blame_confirmed=report.blame_confirmed, oracle=report.oracle)
    info = {"verdict": report.verdict, "oracle": report.oracle,
            "culprit": culprit and {"opcode": culprit.opcode, "instruction": culprit.name},
            "blamed_pass": report.blamed_pass, "blame_confirmed": report.blame_confirmed,
            "message": report.message, "outputs": report.paths, **(meta or {})}
    write_finding(path, module_text=report.hlo_text, inputs=report.inputs,
                  expected=report.expected, actual=report.actual, report_md=md, meta=info)
    report.reproducer = path
    return path
