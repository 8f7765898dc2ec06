"""The checking half of ``pytest --hloref``: one recorded execution in, one outcome out.

The test's process (``hloref.pytest_plugin``) records each XLA execution as a
:class:`Job` (the lowered module's StableHLO bytecode the first time its executable
runs, the inputs, the outputs XLA returned) and hands it to a :class:`Checker`,
which normally runs in a background process (``hloref.pytest_worker``) while the
test goes on. The checker converts the module to HLO text (``hloref.jax.
hlo_text_from_bytecode``: jaxlib only, no jax), parses it once per executable, skips
what cannot be checked, evaluates each distinct (module text, inputs) once, judges
hloref's value against XLA's under the shared verdict (``check_values``), writes a
reproducer for a mismatch, and answers an :class:`Outcome`, which the plugin tallies
and turns into the test's failure. The skips, their order and their reasons are the
ones the plugin made when it checked in the test's process.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Job", "Outcome", "Checker", "failure_part", "first_line"]


@dataclass
class Job:
    """One execution to check. ``tag``: the executable's number in the session;
    ``bytecode``: its StableHLO bytecode (sent with the executable's first job, and
    again after the checker restarts); ``inputs``: the kept arguments as host values
    (``None`` with ``input_error``); ``outputs``: XLA's outputs (``None`` with
    ``output_error``); ``kept``: how many arguments the executable keeps."""

    id: int
    tag: int
    name: str
    nodeid: str
    kept: int
    devices: int = 1
    bytecode: bytes | None = None
    inputs: list | None = None
    input_error: tuple | None = None  # (category, reason): the inputs could not be read
    outputs: list | None = None
    output_error: tuple | None = None
    names: list | None = None
    want_inputs: bool = False  # send the inputs back (the memory audit wants them)


@dataclass
class Outcome:
    """``kind``: ``skip`` (``category`` unsupported/over/other, ``reason``), ``repeat``
    or ``verdict`` (``verdict`` and what the summary counts: ``known_gap``,
    ``undetermined``, ``message``; for a mismatch ``failure`` (the test's failure text
    for it), ``reproducer``, ``known_difference``). ``tag_skip``: every execution of
    this executable is skipped for the same reason; ``seen``: these inputs were
    checked (or are being), so an identical execution is a repeat."""

    id: int
    kind: str
    category: str = ""
    reason: str = ""
    verdict: str = ""
    function: str = ""
    known_gap: str | None = None
    undetermined: str | None = None
    message: str = ""
    failure: str = ""
    reproducer: str | None = None
    known_difference: str | None = None
    tag_skip: bool = False
    seen: bool = False
    inputs: list | None = None
    mlir_needed: bool = False
    seconds: float = 0.0


class _Prepared:
    """One executable's module: its HLO text, hloref's parse and print, and what makes
    every execution of it a skip."""

    __slots__ = ("text", "key", "module", "error", "unsupported", "max_elements", "printed",
                 "manual", "params")

    def __init__(self, bytecode: bytes):
        self.module = self.error = self.unsupported = self.printed = None
        self.max_elements, self.manual, self.params = 0, False, []
        try:
            from hloref.jax import hlo_text_from_bytecode
            self.text = hlo_text_from_bytecode(bytecode)
        except Exception as exc:  # noqa: BLE001
            self.text, self.key = None, None
            self.error = f"cannot convert the lowered module to HLO text: {exc}"
            return
        self.key = hashlib.sha256(self.text.encode()).digest()

    def parse(self, cache: dict) -> None:
        """Parse (once per distinct text in the session: ``cache``)."""
        if self.text is None:
            return
        hit = cache.get(self.key)
        if hit is None:
            hit = cache[self.key] = _parsed(self.text)
        self.module, self.error, self.max_elements, self.unsupported, self.printed, \
            self.manual, self.params = hit


def _parsed(text: str) -> tuple:
    try:
        import hloref
        module = hloref.parse(text)
    except Exception as exc:  # noqa: BLE001 - a parser gap: skipped, with its reason
        return None, f"hloref cannot parse the module: {type(exc).__name__}: {exc}", 0, None, \
            None, False, []
    from hloref._manual import is_manual
    from hloref.printer import module_to_text
    from hloref.shapes import TokenShape
    biggest, unsupported = _scan(module)
    params = [p for p in module.entry.parameters if not isinstance(p.shape, TokenShape)]
    return module, None, biggest, unsupported, module_to_text(module), is_manual(module), params


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


class _LazyWorker:
    """One xla ``OracleWorker`` for the checker, started when a mismatch needs it."""

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


class Checker:
    """Checks jobs one after the other; keeps the executables' modules and the
    (module text, inputs) pairs already checked for the session."""

    def __init__(self, *, max_elements: int, out_dir: str, blame: bool = True):
        self.max_elements = max_elements
        self.out_dir = out_dir
        self.blame = blame
        self._tags: dict[int, _Prepared] = {}
        self._parsed: dict[bytes, tuple] = {}
        self._seen: set[bytes] = set()
        self._worker = _LazyWorker()

    def close(self) -> None:
        self._worker.close()

    def handle(self, job: Job) -> Outcome:
        t0 = time.process_time()
        try:
            out = self._handle(job)
        except Exception as exc:  # noqa: BLE001 - never break the test for our sake
            out = Outcome(job.id, "skip", "other",
                          f"hloref plugin error: {type(exc).__name__}: {exc}")
        out.seconds = time.process_time() - t0
        return out

    def _tag(self, job: Job) -> _Prepared:
        tag = self._tags.get(job.tag)
        if tag is None:
            if job.bytecode is None:
                raise RuntimeError(f"executable {job.tag} arrived without its module")
            tag = self._tags[job.tag] = _Prepared(job.bytecode)
            tag.parse(self._parsed)
        return tag

    def _tag_skip(self, job: Job, tag: _Prepared) -> tuple | None:
        if tag.error is not None:
            return "unsupported", tag.error.splitlines()[0][:200]
        if tag.unsupported is not None:
            return "unsupported", tag.unsupported
        if tag.max_elements > self.max_elements:
            return "over", "over --hloref-max-elements"
        if job.devices > 1 and not tag.manual:
            return "unsupported", "runs on several devices, partitioned by XLA (not a shard_map)"
        if job.kept != len(tag.params):
            return "other", f"{job.kept} arguments for {len(tag.params)} parameters"
        return None

    def _handle(self, job: Job) -> Outcome:
        tag = self._tag(job)
        skip = self._tag_skip(job, tag)
        if skip is not None:
            return Outcome(job.id, "skip", *skip, tag_skip=True)
        if job.input_error is not None:
            return Outcome(job.id, "skip", *job.input_error)
        try:
            inputs = _inputs(job.inputs, tag.params)
        except Exception as exc:  # noqa: BLE001
            reason = getattr(exc, "reason", None)
            if type(exc).__name__ == "HloUnsupportedError":
                return Outcome(job.id, "skip", "unsupported", f"{reason or exc}"[:200])
            return Outcome(job.id, "skip", "other", "hloref plugin error before execution: "
                           f"{type(exc).__name__}: {exc}")
        if inputs is None:
            # bytes other than 0/1 viewed as bool (random bits, e.g. jax's own
            # rand_fullrange): not pred values; XLA passes the byte through a convert
            return Outcome(job.id, "skip", "other", "pred inputs holding bytes other than 0 and 1")
        h = hashlib.sha256(tag.key)
        for arr in inputs:
            h.update(f"{arr.dtype.str}{arr.shape}".encode())
            h.update(memoryview(np.ascontiguousarray(arr).reshape(-1).view(np.uint8)))
        digest = h.digest()
        if digest in self._seen:
            return Outcome(job.id, "repeat", seen=True)
        self._seen.add(digest)
        if job.output_error is not None:
            return Outcome(job.id, "skip", *job.output_error, seen=True)
        out = self._verdict(job, tag, inputs)
        out.seen = True
        if job.want_inputs:
            out.inputs = inputs
        return out

    def _verdict(self, job: Job, tag: _Prepared, inputs: list) -> Outcome:
        from hloref._frontend import check_values
        from hloref.jax import result_with_tokens
        from hloref.shapes import TupleShape
        module, flat = tag.module, job.outputs
        try:
            if isinstance(module.entry.root.shape, TupleShape):
                value = tuple(result_with_tokens(module, flat))
            else:
                value = flat[0]
        except (StopIteration, IndexError):
            return Outcome(job.id, "skip", "other", "outputs do not fit the module's result")
        names = job.names or [f"out[{i}]" for i in range(len(flat))]
        try:
            if job.devices > 1:
                from hloref.jax import check_devices
                report = check_devices(module, inputs, value, devices=job.devices, names=names,
                                       text=tag.text, function=job.name)
            else:
                report = check_values(module, inputs, value, oracle="xla", names=names,
                                      text=tag.text, worker=self._worker, blame=self.blame,
                                      printed=tag.printed)
        except Exception as exc:  # noqa: BLE001
            if type(exc).__name__ == "HloUnsupportedError":
                return Outcome(job.id, "skip", "unsupported",
                               f"{getattr(exc, 'reason', None) or exc}"[:200])
            return Outcome(job.id, "skip", "other",
                           f"hloref plugin error: {type(exc).__name__}: {exc}")
        report.function = job.name
        out = Outcome(job.id, "verdict", verdict=report.verdict, function=job.name,
                      known_gap=report.known_gap, undetermined=report.undetermined,
                      message=first_line(report.message),
                      known_difference=getattr(report, "known_difference", None))
        if report.verdict in ("match", "known-gap", "undetermined", "unsupported", "error"):
            return out
        try:
            from hloref._frontend import write_reproducer
            write_reproducer(self.out_dir, f"{job.nodeid}-{job.name}", report,
                             meta={"test": job.nodeid, "computation": job.name})
        except Exception as exc:  # noqa: BLE001 - the report still stands
            report.message = (report.message + "\n" if report.message else "") + \
                f"(could not write a reproducer: {exc})"
        out.reproducer = report.reproducer
        out.failure = failure_part(report)
        return out


def _inputs(values: list, params: list) -> list | None:
    """The inputs as the module's parameters type them (``hloref.jax.to_numpy``'s
    conversion of host values); ``None`` when a pred input holds other bytes."""
    from hloref.shapes import ArrayShape
    out = []
    for x, p in zip(values, params):
        dtype = p.shape.element_type.dtype if isinstance(p.shape, ArrayShape) else None
        if isinstance(x, np.ndarray):
            arr = x if dtype is None or x.dtype == dtype else x.astype(dtype)
        else:  # a Python scalar the test passed
            arr = np.array(x, dtype=dtype) if dtype is not None else np.array(x)
        if arr.dtype == np.bool_ and arr.size and arr.view(np.uint8).max() > 1:
            return None
        out.append(arr)
    return out


def first_line(text: str) -> str:
    return (text or "").strip().splitlines()[0][:200] if (text or "").strip() else "(no message)"


def _show(value, limit: int = 8) -> str:
    arr = np.asarray(value)
    if arr.dtype.kind not in "biufc":
        arr = arr.astype(np.float64)
    with np.printoptions(threshold=limit, edgeitems=3, precision=8, linewidth=100):
        return f"{arr.dtype.name}{list(arr.shape)} " + np.array2string(arr, separator=", ")


def failure_part(r) -> str:
    """A mismatching report as the test's failure shows it: the summary, then hloref's
    and XLA's value of each output outside the envelope."""
    parts = [r.summary()]
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
