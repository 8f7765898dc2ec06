"""``pytest --hloref``: cross-check every jitted JAX computation a test executes.

Registered through the ``pytest11`` entry point, so it is there after ``pip install
hloref``; without ``--hloref`` it only registers the ``no_hloref`` marker and imports
nothing else.

With ``--hloref``, every XLA execution that jax dispatches while a test's body runs
(``jax.jit`` calls, eagerly applied primitives, ``Lowered.compile()`` executables) is
recorded: the module jax lowered (before XLA's optimizations, as ``as_text(dialect=
"hlo")`` prints it), the inputs, and the outputs XLA returned to the test. hloref
evaluates the module on the same inputs and the two values meet under the shared
verdict (``hloref.fuzz.diff``); XLA is not run a second time, except to localise a
mismatch (isolation, pass blame) in a worker process. A test whose computation
mismatches fails with the report and the path of a reproducer directory that
``hloref replay`` reads.

The checking runs in a background process (``hloref.pytest_worker``, running
``hloref.pytest_checker``): the test's process reads each execution's inputs and
outputs, sends them there with the module's StableHLO bytecode, and goes on with the
test; when the test's body returns, it waits for the verdicts of that test's
executions, so a mismatch fails the test that executed it. On two cores hloref's
work overlaps jax's. ``--hloref-inline`` checks in the test's process instead.

Options: ``--hloref-memory`` (also audit each computation's memory:
``hloref.pytest_memory``), ``--hloref-max-elements N`` (skip a computation with an array of more than N
elements anywhere in it; counted), ``--hloref-out DIR`` (reproducers; default
``.hloref-reproducers`` under the rootdir), ``--hloref-no-blame`` (no pass blame for
mismatches). ``@pytest.mark.no_hloref`` excludes a test.

The same computation on the same input values is evaluated once (a jitted step in a
loop with unchanging inputs costs one evaluation); each distinct input is checked.

How executions are seen (jax 0.10.2): ``UnloadedMeshExecutable.from_hlo`` is wrapped
to attach the lowered StableHLO module to the executable it builds (in the
``keepalive`` that ``ExecuteReplicated`` holds), ``ExecuteReplicated.__call__`` is
wrapped to record inputs and outputs, and jax's C++ fast path, which would execute
without Python, is turned off (``pjit._get_fastpath_data``,
``MeshExecutable.create_cpp_call``), so every execution goes through the wrapper.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pytest

from hloref.errors import HloUnsupportedError

__all__ = ["HlorefSession", "HlorefMismatch"]

MARKER = "no_hloref"
_SERIALS = itertools.count()  # executables' numbers, unique in the process (nested sessions)
DEFAULT_MAX_ELEMENTS = 1 << 22


def pytest_addoption(parser):
    group = parser.getgroup("hloref", "cross-check JAX computations with hloref")
    group.addoption("--hloref", action="store_true", default=False,
                    help="evaluate every jitted JAX computation a test executes with hloref and "
                         "compare with what XLA returned; a mismatch fails the test")
    group.addoption("--hloref-max-elements", type=int, default=DEFAULT_MAX_ELEMENTS,
                    metavar="N",
                    help="skip (and count) computations with an array of more than N elements "
                         f"(default {DEFAULT_MAX_ELEMENTS})")
    group.addoption("--hloref-out", metavar="DIR", default=None,
                    help="where reproducers of mismatches are written (default: "
                         ".hloref-reproducers under the rootdir)")
    group.addoption("--hloref-no-blame", action="store_true", default=False,
                    help="do not look for the XLA pass that changed the answer of a mismatch")
    group.addoption("--hloref-inline", action="store_true", default=False,
                    help="check each execution in the test's process when it returns, instead "
                         "of in a background process beside the test")
    group.addoption("--hloref-memory", action="store_true", default=False,
                    help="also audit each computation's memory (hloref.pytest_memory): "
                         "XLA's figures and buffer assignment against hloref's liveness")


def pytest_configure(config):
    config.addinivalue_line("markers", f"{MARKER}: do not cross-check this test's JAX "
                                       "computations with hloref (pytest --hloref)")
    if config.getoption("hloref", False):
        session = HlorefSession(
            max_elements=config.getoption("hloref_max_elements"),
            out_dir=config.getoption("hloref_out") or str(config.rootpath / ".hloref-reproducers"),
            blame=not config.getoption("hloref_no_blame"),
            memory=config.getoption("hloref_memory", False),
            inline=config.getoption("hloref_inline", False))
        config.pluginmanager.register(session, "hloref-session")
        session.install()


class HlorefMismatch(AssertionError):
    """A JAX computation the test executed disagrees with hloref."""


# ---------------------------------------------------------------- per computation


class _Tag:
    """Attached to an executable at compile time: the StableHLO module jax lowered.
    Serialized to bytecode for the checker on first use; ``skip`` is set once the
    checker has said why every execution of it is skipped."""

    __slots__ = ("stablehlo", "name", "serial", "bytecode", "mlir", "skip")

    def __init__(self, stablehlo, name, serial):
        self.stablehlo = stablehlo
        self.name = name
        self.serial = serial
        self.bytecode = None
        self.mlir = None  # the StableHLO text, kept for the memory audit
        self.skip = None  # (category, reason)

    def serialize(self, keep_mlir: bool = False) -> None:
        if self.bytecode is not None or self.skip is not None:
            return
        try:
            from jax._src.interpreters import mlir
            self.bytecode = mlir.module_to_bytecode(self.stablehlo)
            if keep_mlir:
                self.mlir = str(self.stablehlo)
        except Exception as exc:  # noqa: BLE001
            self.skip = ("unsupported", f"cannot convert the lowered module to HLO text: "
                                        f"{exc}".splitlines()[0][:200])
        finally:
            self.stablehlo = None  # the bytecode is all we need from now on


@dataclass
class _Record:
    """What the session keeps of a job until its outcome arrives."""

    nodeid: str
    tag: _Tag
    digest: bytes | None
    devices: int


@dataclass
class Stats:
    executions: int = 0  # executions seen while tests ran
    checked: int = 0  # distinct (computation, inputs) evaluated to a verdict
    matched: int = 0
    known_gaps: int = 0
    undetermined: int = 0  # the module and inputs determine no single value
    mismatched: int = 0
    repeats: int = 0  # executions of an already checked computation on the same inputs
    unsupported: int = 0
    over_limit: int = 0
    other_skips: int = 0
    hloref_seconds: float = 0.0  # on the tests' critical path: recording and waiting
    unsupported_reasons: Counter = field(default_factory=Counter)
    gaps: Counter = field(default_factory=Counter)  # known-gap verdicts by record name
    causes: Counter = field(default_factory=Counter)  # undetermined verdicts by record name
    skip_reasons: Counter = field(default_factory=Counter)
    mismatches: list = field(default_factory=list)  # (nodeid, computation, reproducer, known)


class HlorefSession:
    """The plugin's state for one pytest run with ``--hloref``. ``inline``: check in
    this process when each execution returns, instead of in the background process."""

    def __init__(self, *, max_elements: int = DEFAULT_MAX_ELEMENTS, out_dir: str = ".hloref",
                 blame: bool = True, memory: bool = False, inline: bool = False):
        self.max_elements = max_elements
        self.out_dir = out_dir
        self.blame = blame
        self.stats = Stats()
        self._lock = threading.RLock()
        self._done = threading.Condition(self._lock)
        self._seen: set = set()
        self._item = None
        self._local = threading.local()
        self._patches: list = []
        self._ids = itertools.count()
        self._records: dict[int, _Record] = {}
        self._open: Counter = Counter()  # outcomes each test still waits for
        self._failures: dict[str, list] = {}
        self._audits: dict[str, list] = {}
        from hloref.pytest_worker import CheckerProcess, InlineChecker
        config = {"max_elements": max_elements, "out_dir": out_dir, "blame": blame}
        self.checker = (InlineChecker if inline else CheckerProcess)(config, self._outcome)
        self._t_start = time.perf_counter()
        self.installed = False
        from hloref.pytest_memory import MemoryAuditor
        self.memory = MemoryAuditor() if memory else None

    # -- hooking into jax --------------------------------------------------------------
    def install(self) -> None:
        try:
            import jax
            from jax._src import pjit
            from jax._src.interpreters import pxla
        except ImportError:  # no jax: nothing to check
            return
        import inspect
        session = self
        orig_from_hlo = pxla.UnloadedMeshExecutable.__dict__["from_hlo"].__func__
        sig = inspect.signature(orig_from_hlo)

        def from_hlo(*args, **kwargs):
            bound = sig.bind(*args, **kwargs)
            a = bound.arguments
            a["keepalive"] = (a.get("keepalive"), _Tag(a["hlo"], a.get("name", ""),
                                                       next(_SERIALS)))
            return orig_from_hlo(*bound.args, **bound.kwargs)

        orig_call = pxla.ExecuteReplicated.__call__

        def call(self_, *args):
            return session._execute(orig_call, self_, args)

        orig_run = pjit._run_python_pjit

        def run_python_pjit(p, *args, **kwargs):
            # the output pytree of this jit call, for naming outputs (out['logits'])
            stack = session._trees()
            stack.append(getattr(p, "out_tree", None))
            try:
                return orig_run(p, *args, **kwargs)
            finally:
                stack.pop()

        orig_fast = pjit._get_fastpath_data
        orig_cpp = pxla.MeshExecutable.create_cpp_call
        self._patches = [
            (pxla.UnloadedMeshExecutable, "from_hlo", staticmethod(orig_from_hlo),
             staticmethod(from_hlo)),
            (pxla.ExecuteReplicated, "__call__", orig_call, call),
            (pjit, "_get_fastpath_data", orig_fast, lambda *a, **k: None),
            (pjit, "_run_python_pjit", orig_run, run_python_pjit),
            (pxla.MeshExecutable, "create_cpp_call", orig_cpp, lambda self_, params: None),
        ]
        for owner, name, _old, new in self._patches:
            setattr(owner, name, new)
        jax.clear_caches()  # executables compiled (and fast paths cached) before now
        self.installed = True
        self.checker.start()  # its imports overlap the collection

    def uninstall(self) -> None:
        for owner, name, old, _new in reversed(self._patches):
            setattr(owner, name, old)
        self._patches = []
        # executables compiled meanwhile stay cached (without the C++ fast path) and keep
        # their tags: harmless, and clearing jax's caches costs the session's end a gc
        self.installed = False
        self.checker.close()

    # -- recording ---------------------------------------------------------------------
    def _trees(self) -> list:
        stack = getattr(self._local, "trees", None)
        if stack is None:
            stack = self._local.trees = []
        return stack

    def _active(self) -> bool:
        if self._item is None or getattr(self._local, "busy", False):
            return False
        from hloref.jax import is_suspended
        return not is_suspended()

    def _skip(self, category: str, reason: str) -> None:
        with self._lock:
            if category == "unsupported":
                self.stats.unsupported += 1
                self.stats.unsupported_reasons[reason] += 1
            elif category == "over":
                self.stats.over_limit += 1
            else:
                self.stats.other_skips += 1
                self.stats.skip_reasons[reason] += 1

    def _execute(self, orig_call, er, args):
        if not self._active():
            return orig_call(er, *args)
        self._local.busy = True
        try:
            t0 = time.perf_counter()
            try:
                pending = self._before(er, args)
            except Exception as exc:  # noqa: BLE001 - never break the test for our sake
                pending = None
                self._skip("other", "hloref plugin error before execution: "
                                    f"{type(exc).__name__}: {exc}")
            spent = time.perf_counter() - t0
            out = orig_call(er, *args)  # raising: nothing to check (the job is dropped)
            t1 = time.perf_counter()
            if pending is not None:
                try:
                    self._after(pending, out)
                except Exception as exc:  # noqa: BLE001
                    self._skip("other", f"hloref plugin error: {type(exc).__name__}: {exc}")
            spent += time.perf_counter() - t1
            with self._lock:
                self.stats.hloref_seconds += spent
            return out
        finally:
            self._local.busy = False

    def _before(self, er, args):
        """The job for this execution, with its inputs (read before XLA runs: donated
        buffers are gone after), or ``None`` when it is not checked (counted here, or
        sent already when the checker must say why)."""
        with self._lock:
            self.stats.executions += 1
        keep = er.keepalive
        tag = keep[1] if isinstance(keep, tuple) and len(keep) == 2 and \
            isinstance(keep[1], _Tag) else None
        if tag is None:
            self._skip("other", "executable not lowered through jit (no module attached)")
            return None
        if er.ordered_effects or er.has_unordered_effects or er.has_host_callbacks:
            self._skip("unsupported", "side effects or host callbacks")
            return None
        if er.mut is not None:
            self._skip("unsupported", "mutable array references")
            return None
        tag.serialize(keep_mlir=self.memory is not None)
        if tag.skip is not None:
            self._skip(*tag.skip)
            return None
        from hloref.pytest_checker import Job
        kept = [x for i, x in enumerate(args) if i in er.kept_var_idx]
        trees = self._trees()
        job = Job(next(self._ids), tag.serial, tag.name, self._item.nodeid, len(kept),
                  len(er._local_devices), want_inputs=self.memory is not None)
        tree = trees[-1] if trees else None
        try:
            job.inputs = [_host(x) for x in kept]
        except HloUnsupportedError as exc:
            job.input_error = ("unsupported", f"{getattr(exc, 'reason', None) or exc}"[:200])
            self._submit(job, tag, None)  # the checker says which skip comes first
            return None
        digest = _digest(tag.serial, job.inputs)
        with self._lock:
            if digest in self._seen:
                self.stats.repeats += 1
                return None
        return job, tag, digest, tree

    def _after(self, pending, out) -> None:
        job, tag, digest, tree = pending
        from hloref.jax import to_numpy
        try:
            job.outputs = [to_numpy(o) for o in out]
        except HloUnsupportedError as exc:
            job.output_error = ("unsupported", f"{getattr(exc, 'reason', None) or exc}"[:200])
        except Exception as exc:  # noqa: BLE001
            job.output_error = ("other", f"hloref plugin error: {type(exc).__name__}: {exc}")
        if job.outputs is not None and tree is not None and \
                getattr(tree, "num_leaves", -1) == len(job.outputs):
            try:
                from hloref.jax import output_names
                job.names = output_names(tree)
            except Exception:  # noqa: BLE001 - positional names then
                pass
        self._submit(job, tag, digest)

    def _submit(self, job, tag: _Tag, digest) -> None:
        with self._lock:
            self._records[job.id] = _Record(job.nodeid, tag, digest, job.devices)
            self._open[job.nodeid] += 1
        self.checker.submit(job, tag.bytecode)

    # -- outcomes ----------------------------------------------------------------------
    def _outcome(self, out) -> None:
        """An outcome from the checker (its reader thread, or inline)."""
        with self._lock:
            rec = self._records.pop(out.id, None)
            if rec is None:
                return
            if out.seen and rec.digest is not None:
                self._seen.add(rec.digest)
            if out.tag_skip:
                rec.tag.skip = (out.category, out.reason)
            if out.kind == "skip":
                self._skip(out.category, out.reason)
            elif out.kind == "repeat":
                self.stats.repeats += 1
            else:
                self._tally(out, rec)
            self._open[rec.nodeid] -= 1
            if self._open[rec.nodeid] <= 0:
                del self._open[rec.nodeid]
            self._done.notify_all()

    def _tally(self, out, rec: _Record) -> None:
        s, v = self.stats, out.verdict
        if self.memory is not None and rec.devices == 1:
            self._audits.setdefault(rec.nodeid, []).append((rec.tag, out.inputs, out.function))
        if v in ("match", "known-gap"):
            s.checked += 1
            s.matched += 1
            if v == "known-gap":
                s.known_gaps += 1
                s.gaps[out.known_gap or "?"] += 1
        elif v == "undetermined":  # no single right value: not a mismatch
            s.checked += 1
            s.undetermined += 1
            s.causes[out.undetermined or "?"] += 1
        elif v == "unsupported":
            s.unsupported += 1
            s.unsupported_reasons[out.message] += 1
        elif v == "error":
            s.other_skips += 1
            s.skip_reasons[out.message] += 1
        else:
            s.checked += 1
            s.mismatched += 1
            s.mismatches.append((rec.nodeid, out.function, out.reproducer, out.known_difference))
            self._failures.setdefault(rec.nodeid, []).append(out.failure)

    def _collect(self, nodeid: str) -> tuple[list, list]:
        """Wait for the outcomes of ``nodeid``'s executions; its failure texts and memory
        findings."""
        with self._done:
            self._done.wait_for(lambda: self._open.get(nodeid, 0) <= 0)
            failures = self._failures.pop(nodeid, [])
            audits = self._audits.pop(nodeid, [])
        memory = []
        for tag, inputs, name in audits:
            memory.extend(self.memory.audit(tag.mlir, inputs or [], name, nodeid))
        return failures, memory

    # -- pytest hooks ------------------------------------------------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item):
        if not self.installed or item.get_closest_marker(MARKER) is not None:
            return (yield)
        with self._lock:
            self._item = item
        try:
            result = yield
        finally:
            with self._lock:
                self._item = None
            t0 = time.perf_counter()
            failures, memory = self._collect(item.nodeid)  # the verdicts of its executions
            with self._lock:
                self.stats.hloref_seconds += time.perf_counter() - t0
        if failures or memory:
            text = _failure_text(failures) if failures else ""
            pytest.fail("\n".join([text] + memory).strip(), pytrace=False)
        return result

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session):
        self.checker.close()  # every test has its verdicts; the summary gets its CPU time

    def pytest_terminal_summary(self, terminalreporter):
        terminalreporter.write_sep("=", "hloref")
        for line in self.summary_lines():
            terminalreporter.write_line(line)
        if self.memory is not None:
            for line in self.memory.summary_lines():
                terminalreporter.write_line(line)

    def pytest_unconfigure(self, config):
        self.uninstall()
        if self.memory is not None:
            self.memory.close()

    def summary_lines(self) -> list[str]:
        s = self.stats
        total = time.perf_counter() - self._t_start
        lines = [
            f"hloref: {s.checked} computations checked: {s.matched} matched"
            + (f" ({s.known_gaps} within documented semantic gaps)" if s.known_gaps else "")
            + (f", {s.undetermined} undetermined" if s.undetermined else "")
            + f", {s.mismatched} mismatched; {s.unsupported} skipped as unsupported, "
            f"{s.over_limit} skipped over --hloref-max-elements={self.max_elements}, "
            f"{s.other_skips} other skips; {s.repeats} repeated executions on the same inputs "
            f"not re-evaluated ({s.executions} executions seen)",
            f"hloref added {s.hloref_seconds:.2f} s to a session of {total:.2f} s (recording "
            f"and waiting for verdicts); the checker used {self.checker.cpu_seconds:.2f} CPU s"
            + (f" ({self.checker.process_cpu_seconds:.2f} s with its start and end)"
               if self.checker.process_cpu_seconds else ""),
        ]
        for gap, n in s.gaps.most_common():
            lines.append(f"  known gap ({n}): {gap}")
        for cause, n in s.causes.most_common():
            lines.append(f"  undetermined ({n}): {cause}")
        for reason, n in s.unsupported_reasons.most_common(8):
            lines.append(f"  unsupported ({n}): {reason}")
        for reason, n in s.skip_reasons.most_common(8):
            lines.append(f"  skipped ({n}): {reason}")
        for nodeid, fn, path, known in s.mismatches:
            lines.append(f"  MISMATCH {nodeid}: {fn}" + (f" -> {path}" if path else "")
                         + (f" (a known XLA:CPU difference: {known})" if known else ""))
        return lines


def _host(x):
    """A host copy of an argument (``hloref.jax.to_numpy`` without the parameter's dtype,
    which the checker applies); a Python scalar as it is."""
    if isinstance(x, (bool, int, float, complex, np.generic)):
        return x
    from hloref.jax import to_numpy
    return to_numpy(x)


def _digest(serial: int, inputs: list) -> bytes:
    """The executable and its inputs' bytes: equal digests are the same computation on
    the same values (the checker's own test, on the HLO text, finds more repeats)."""
    h = hashlib.sha256(str(serial).encode())
    for x in inputs:
        arr = np.asarray(x)
        h.update(f"{type(x).__name__}{arr.dtype.str}{arr.shape}".encode())
        h.update(memoryview(np.ascontiguousarray(arr).reshape(-1).view(np.uint8)))
    return h.digest()


def _failure_text(failures: list[str]) -> str:
    parts = [f"hloref: for {len(failures)} JAX computation(s) this test executed, XLA's value "
             "is not inside the numerical envelope around hloref's value (verdicts below)"]
    for f in failures:
        parts.append("")
        parts.append(f)
    return "\n".join(parts)
