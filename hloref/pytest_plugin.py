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
import os
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pytest

from hloref.errors import HloUnsupportedError

__all__ = ["HlorefSession", "HlorefMismatch"]

MARKER = "no_hloref"
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
            memory=config.getoption("hloref_memory", False))
        config.pluginmanager.register(session, "hloref-session")
        session.install()


class HlorefMismatch(AssertionError):
    """A JAX computation the test executed disagrees with hloref."""


# ---------------------------------------------------------------- per computation


class _Tag:
    """Attached to an executable at compile time: the StableHLO module jax lowered.
    Converted to HLO text and parsed by hloref on first use."""

    __slots__ = ("stablehlo", "name", "text", "key", "module", "error", "max_elements",
                 "unsupported", "lock", "printed", "mlir")

    def __init__(self, stablehlo, name):
        self.stablehlo = stablehlo
        self.name = name
        self.text = None
        self.key = None
        self.module = None
        self.error = None
        self.unsupported = None
        self.max_elements = 0
        self.printed = None  # hloref's print of the module (what diff hands the oracle)
        self.mlir = None  # the StableHLO text, kept for the memory audit
        self.lock = threading.Lock()

    def prepare(self, keep_mlir: bool = False) -> None:
        with self.lock:
            if self.text is not None or self.error is not None:
                return
            try:
                from hloref.jax import hlo_text
                text = hlo_text(self.stablehlo)
                if keep_mlir:
                    self.mlir = str(self.stablehlo)
            except Exception as exc:  # noqa: BLE001
                self.error = f"cannot convert the lowered module to HLO text: {exc}"
                return
            finally:
                self.stablehlo = None  # the text is all we need from now on
            self.text = text
            self.key = hashlib.sha256(text.encode()).digest()
            try:
                import hloref
                self.module = hloref.parse(text)
            except Exception as exc:  # noqa: BLE001 - a parser gap: skipped, with its reason
                self.error = f"hloref cannot parse the module: {type(exc).__name__}: {exc}"
                return
            self.max_elements, self.unsupported = _scan(self.module)
            from hloref.printer import module_to_text
            self.printed = module_to_text(self.module)


def _scan(module):
    """The largest array anywhere in the module, and the first opcode hloref lacks."""
    from hloref import supported_opcodes
    from hloref.shapes import flatten_shape
    ops = supported_opcodes("cpu")
    biggest = 0
    unsupported = None
    for _comp, instr in module.instructions():
        for s in flatten_shape(instr.shape):
            dims = getattr(s, "dims", None)
            if dims is not None:
                n = 1
                for d in dims:
                    n *= max(int(d), 0)
                biggest = max(biggest, n)
        if unsupported is None and instr.opcode not in ops:
            unsupported = f"opcode {instr.opcode}"
    return biggest, unsupported


@dataclass
class _Pending:
    tag: _Tag
    inputs: list
    digest: bytes
    started: float
    out_tree: object = None
    devices: int = 1


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
    hloref_seconds: float = 0.0
    unsupported_reasons: Counter = field(default_factory=Counter)
    gaps: Counter = field(default_factory=Counter)  # known-gap verdicts by record name
    causes: Counter = field(default_factory=Counter)  # undetermined verdicts by record name
    skip_reasons: Counter = field(default_factory=Counter)
    mismatches: list = field(default_factory=list)  # (nodeid, computation, reproducer)


class _LazyWorker:
    """One xla ``OracleWorker`` for the session, started when a mismatch needs it."""

    def __init__(self):
        self._worker = None

    def run(self, *args, **kwargs):
        if self._worker is None:
            from hloref.fuzz.workers import OracleWorker
            self._worker = OracleWorker("xla", timeout=120)
        return self._worker.run(*args, **kwargs)

    def close(self):
        if self._worker is not None:
            self._worker.close()
            self._worker = None


class HlorefSession:
    """The plugin's state for one pytest run with ``--hloref``."""

    def __init__(self, *, max_elements: int = DEFAULT_MAX_ELEMENTS, out_dir: str = ".hloref",
                 blame: bool = True, memory: bool = False):
        self.max_elements = max_elements
        self.out_dir = out_dir
        self.blame = blame
        self.stats = Stats()
        self._lock = threading.RLock()
        self._seen: set = set()
        self._item = None
        self._reports: list = []
        self._local = threading.local()
        self._patches: list = []
        self._worker = _LazyWorker()
        self._t_start = time.perf_counter()
        self.installed = False
        from hloref.pytest_memory import MemoryAuditor
        self.memory = MemoryAuditor() if memory else None
        self._memory_findings: list[str] = []

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
            a["keepalive"] = (a.get("keepalive"), _Tag(a["hlo"], a.get("name", "")))
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

    def uninstall(self) -> None:
        for owner, name, old, _new in reversed(self._patches):
            setattr(owner, name, old)
        self._patches = []
        if self.installed:
            import jax
            jax.clear_caches()
        self.installed = False
        self._worker.close()

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

    def _skip(self, reason: str, *, unsupported: bool = False, over: bool = False) -> None:
        with self._lock:
            if unsupported:
                self.stats.unsupported += 1
                self.stats.unsupported_reasons[reason] += 1
            elif over:
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
            except HloUnsupportedError as exc:
                pending = None
                self._skip(f"{exc.reason if hasattr(exc, 'reason') else exc}"[:200],
                           unsupported=True)
            except Exception as exc:  # noqa: BLE001 - never break the test for our sake
                pending = None
                self._skip(f"hloref plugin error before execution: {type(exc).__name__}: {exc}")
            spent = time.perf_counter() - t0
            try:
                out = orig_call(er, *args)
            except BaseException:
                if pending is not None:  # not executed: a later call may check these inputs
                    with self._lock:
                        self._seen.discard(pending.digest)
                raise
            t1 = time.perf_counter()
            if pending is not None:
                try:
                    self._after(pending, out)
                except HloUnsupportedError as exc:
                    self._skip(f"{exc.reason if hasattr(exc, 'reason') else exc}"[:200],
                               unsupported=True)
                except Exception as exc:  # noqa: BLE001
                    self._skip(f"hloref plugin error: {type(exc).__name__}: {exc}")
            spent += time.perf_counter() - t1
            with self._lock:
                self.stats.hloref_seconds += spent
            return out
        finally:
            self._local.busy = False

    def _before(self, er, args):
        with self._lock:
            self.stats.executions += 1
        keep = er.keepalive
        tag = keep[1] if isinstance(keep, tuple) and len(keep) == 2 and \
            isinstance(keep[1], _Tag) else None
        if tag is None:
            self._skip("executable not lowered through jit (no module attached)")
            return None
        if er.ordered_effects or er.has_unordered_effects or er.has_host_callbacks:
            self._skip("side effects or host callbacks", unsupported=True)
            return None
        if er.mut is not None:
            self._skip("mutable array references", unsupported=True)
            return None
        tag.prepare(keep_mlir=self.memory is not None)
        if tag.error is not None:
            self._skip(tag.error.splitlines()[0][:200], unsupported=True)
            return None
        if tag.unsupported is not None:
            self._skip(tag.unsupported, unsupported=True)
            return None
        if tag.max_elements > self.max_elements:
            self._skip("over --hloref-max-elements", over=True)
            return None
        devices = len(er._local_devices)
        if devices > 1:
            from hloref._manual import is_manual
            if not is_manual(tag.module):
                self._skip("runs on several devices, partitioned by XLA (not a shard_map)",
                           unsupported=True)
                return None
        from hloref.jax import to_numpy
        from hloref.shapes import ArrayShape, TokenShape
        params = [p for p in tag.module.entry.parameters if not isinstance(p.shape, TokenShape)]
        kept = [x for i, x in enumerate(args) if i in er.kept_var_idx]
        if len(kept) != len(params):
            self._skip(f"{len(kept)} arguments for {len(params)} parameters")
            return None
        inputs = []
        h = hashlib.sha256(tag.key)
        for x, p in zip(kept, params):
            dtype = p.shape.element_type.dtype if isinstance(p.shape, ArrayShape) else None
            arr = to_numpy(x, dtype)
            if arr.dtype == np.bool_ and arr.size and arr.view(np.uint8).max() > 1:
                # bytes other than 0/1 viewed as bool (random bits, e.g. jax's own
                # rand_fullrange): not pred values; XLA passes the byte through a convert
                self._skip("pred inputs holding bytes other than 0 and 1")
                return None
            inputs.append(arr)
            h.update(f"{arr.dtype.str}{arr.shape}".encode())
            h.update(memoryview(np.ascontiguousarray(arr).reshape(-1).view(np.uint8)))
        digest = h.digest()
        with self._lock:
            if digest in self._seen:
                self.stats.repeats += 1
                return None
            self._seen.add(digest)
        trees = self._trees()
        return _Pending(tag, inputs, digest, time.perf_counter(), trees[-1] if trees else None,
                        devices)

    def _after(self, pending: _Pending, out) -> None:
        from hloref.jax import to_numpy
        from hloref.shapes import TupleShape
        from hloref._frontend import check_values
        from hloref.jax import result_with_tokens
        module = pending.tag.module
        flat = [to_numpy(o) for o in out]
        try:
            if isinstance(module.entry.root.shape, TupleShape):
                value = tuple(result_with_tokens(module, flat))
            else:
                value = flat[0]
        except (StopIteration, IndexError):
            self._skip("outputs do not fit the module's result")
            return
        item = self._item
        names = [f"out[{i}]" for i in range(len(flat))]
        tree = pending.out_tree
        if tree is not None and getattr(tree, "num_leaves", -1) == len(flat):
            try:
                from hloref.jax import output_names
                names = output_names(tree)
            except Exception:  # noqa: BLE001 - positional names then
                pass
        if pending.devices > 1:
            from hloref.jax import check_devices
            report = check_devices(module, pending.inputs, value, devices=pending.devices,
                                   names=names, text=pending.tag.text,
                                   function=pending.tag.name)
        else:
            report = check_values(module, pending.inputs, value, oracle="xla", names=names,
                                  text=pending.tag.text, worker=self._worker, blame=self.blame,
                                  printed=pending.tag.printed)
        report.function = pending.tag.name
        self._tally(report, item)
        if self.memory is not None and pending.devices == 1:
            found = self.memory.audit(pending.tag.mlir, pending.inputs, pending.tag.name,
                                      item.nodeid if item is not None else "?")
            with self._lock:
                self._memory_findings.extend(found)

    def _tally(self, report, item) -> None:
        v = report.verdict
        with self._lock:
            if v in ("match", "known-gap"):
                self.stats.checked += 1
                self.stats.matched += 1
                if v == "known-gap":
                    self.stats.known_gaps += 1
                    self.stats.gaps[report.known_gap or "?"] += 1
                return
            if v == "undetermined":  # no single right value: not a mismatch
                self.stats.checked += 1
                self.stats.undetermined += 1
                self.stats.causes[report.undetermined or "?"] += 1
                return
            if v == "unsupported":
                self.stats.unsupported += 1
                self.stats.unsupported_reasons[_first_line(report.message)] += 1
                return
            if v == "error":
                self.stats.other_skips += 1
                self.stats.skip_reasons[_first_line(report.message)] += 1
                return
            self.stats.checked += 1
            self.stats.mismatched += 1
        nodeid = item.nodeid if item is not None else "?"
        try:
            from hloref._frontend import write_reproducer
            write_reproducer(self.out_dir, f"{nodeid}-{report.function}", report,
                             meta={"test": nodeid, "computation": report.function})
        except Exception as exc:  # noqa: BLE001 - the report still stands
            report.message = (report.message + "\n" if report.message else "") + \
                f"(could not write a reproducer: {exc})"
        with self._lock:
            self.stats.mismatches.append((nodeid, report.function, report.reproducer,
                                          getattr(report, "known_difference", None)))
            self._reports.append(report)

    # -- pytest hooks ------------------------------------------------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item):
        if not self.installed or item.get_closest_marker(MARKER) is not None:
            return (yield)
        with self._lock:
            self._item = item
            self._reports = []
            self._memory_findings = []
        try:
            result = yield
        finally:
            with self._lock:
                self._item = None
                reports, self._reports = self._reports, []
                memory, self._memory_findings = self._memory_findings, []
        if reports or memory:
            text = _failure_text(reports) if reports else ""
            pytest.fail("\n".join([text] + memory).strip(), pytrace=False)
        return result

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
            f"hloref added {s.hloref_seconds:.2f} s to a session of {total:.2f} s",
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


def _first_line(text: str) -> str:
    return (text or "").strip().splitlines()[0][:200] if (text or "").strip() else "(no message)"


def _show(value, limit: int = 8) -> str:
    arr = np.asarray(value)
    if arr.dtype.kind not in "biufc":
        arr = arr.astype(np.float64)
    with np.printoptions(threshold=limit, edgeitems=3, precision=8, linewidth=100):
        return f"{arr.dtype.name}{list(arr.shape)} " + np.array2string(arr, separator=", ")


def _failure_text(reports) -> str:
    parts = [f"hloref: for {len(reports)} JAX computation(s) this test executed, XLA's value "
             "is not inside the numerical envelope around hloref's value (verdicts below)"]
    for r in reports:
        parts.append("")
        parts.append(r.summary())
        try:
            from hloref._frontend import flat_result
            import hloref
            module = hloref.parse(r.hlo_text)
            ours, xla = flat_result(module, r.expected), flat_result(module, r.actual)
            names = r.output_names or [f"out[{i}]" for i in range(len(ours))]
            for name, o, x in zip(names, ours, xla):
                if any(p == name or p.startswith(name + "[") for p in r.paths):
                    parts.append(f"{name} hloref: {_show(o)}")
                    parts.append(f"{name} XLA:    {_show(x)}")
        except Exception:  # noqa: BLE001 - the summary above says it all
            pass
    return "\n".join(parts)

