"""Oracles in worker processes: XLA aborting, crashing or hanging is a verdict, not our death.

``OracleWorker(oracle)`` owns one child process that imports the oracle once and
runs jobs sent over a pipe. A job that kills the child (``abort()``, a segfault)
comes back as ``OracleResult(kind="crash")`` with the signal and the last lines
the child wrote to stderr; one that runs past its time limit is killed and comes
back as ``kind="timeout"``. The worker restarts its child on the next job, so a
campaign goes on. Workers are reused across modules: XLA's start-up is paid once.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field

__all__ = ["OracleResult", "OracleWorker", "ORACLES", "Channel", "serve", "child_main"]

ORACLES = ("xla", "tf")


@dataclass
class OracleResult:
    """``kind``: ok, error (the oracle rejected the module), unsupported, crash, timeout."""

    kind: str
    value: object = None
    message: str = ""
    optimized_hlo: str | None = None
    signal: str | None = None
    stderr_tail: str = ""
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.kind == "ok"


class Channel:
    """Length-prefixed pickles over a pair of pipe file descriptors."""

    def __init__(self, rfd: int, wfd: int):
        self.rfd = rfd
        self.wfd = wfd

    def send(self, obj) -> None:
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        view = memoryview(struct.pack("<Q", len(data)) + data)
        while view:
            n = os.write(self.wfd, view)
            view = view[n:]

    def _read(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = os.read(self.rfd, min(n, 1 << 20))
            if not chunk:
                raise EOFError
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def recv(self):
        (length,) = struct.unpack("<Q", self._read(8))
        return pickle.loads(self._read(length))

    def poll(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.rfd], [], [], timeout)
        return bool(ready)


_Channel = Channel  # the name ci/conformance.py imports (until it uses serve())


def serve(ready, answer, glue=lambda message: ("error", message)) -> None:
    """The child side of a worker process: stdin and stdout become a :class:`Channel`
    (stdout moved aside to stderr first, so that stray prints from XLA/TF never enter
    the protocol), ``ready`` is sent, then every job read is answered with
    ``answer(job)``'s reply until the parent closes the pipe or sends ``None``. An
    exception from ``answer`` or in sending its reply (a bug in the glue) is answered
    ``glue(message)`` and the loop goes on. The oracle workers' loop
    (:func:`child_main`), for any worker that speaks this protocol."""
    rfd = os.dup(0)
    wfd = os.dup(1)
    os.dup2(2, 1)
    conn = Channel(rfd, wfd)
    conn.send(ready)
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        try:
            conn.send(answer(job))
        except Exception as exc:
            conn.send(glue(f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}"))


def child_main(oracle: str) -> None:
    """The worker process (``python -m hloref.fuzz.worker_main ORACLE``); jobs on stdin,
    answers on stdout (which nothing else may write to: it is moved aside first)."""
    if oracle == "xla":
        from hloref.fuzz.oracles import xla as backend
    elif oracle == "tf":
        from hloref.fuzz.oracles import tf as backend
    else:
        raise SystemExit(f"unknown oracle {oracle}")
    from hloref.fuzz.oracles.errors import OracleError, OracleUnsupported

    def answer(job):
        kind, payload = job
        try:
            if kind == "abort":  # test hook: behave like XLA hitting a CHECK failure
                os.write(2, b"F0000 00:00:00 hloref test hook: worker told to abort\n")
                os.abort()
            if kind == "sleep":  # test hook: hang
                time.sleep(payload)
                return ("ok", (None, None, (0.0, 0.0)))
            text, args, debug_options, want_optimized = payload
            t0 = time.perf_counter()
            exe = backend.compile_hlo(text, debug_options=debug_options)
            t1 = time.perf_counter()
            value = exe.run(*args)
            t2 = time.perf_counter()
            optimized = exe.optimized_hlo() if want_optimized else None
            return ("ok", (value, optimized, (t1 - t0, t2 - t1)))
        except OracleUnsupported as exc:
            return ("unsupported", str(exc))
        except OracleError as exc:
            return ("error", str(exc))

    serve(("ready", None), answer)  # a bug in the oracle glue: an error verdict


class OracleWorker:
    """One oracle child process, restarted after a crash or a timeout."""

    def __init__(self, oracle: str = "xla", *, timeout: float = 120.0, start_timeout: float = 180.0):
        if oracle not in ORACLES:
            raise ValueError(f"unknown oracle {oracle!r}; expected one of {', '.join(ORACLES)}")
        self.oracle = oracle
        self.timeout = timeout
        self.start_timeout = start_timeout
        self._proc = None
        self._conn = None
        self._stderr_path = None
        self.jobs = 0
        self.crashes = 0
        #: time spent on jobs (round trips), and the parts measured inside the child
        self.seconds = 0.0
        self.compile_seconds = 0.0
        self.run_seconds = 0.0

    # -- lifecycle ----------------------------------------------------------------------
    def _start(self) -> None:
        fd, self._stderr_path = tempfile.mkstemp(prefix=f"hloref-{self.oracle}-", suffix=".stderr")
        stderr = os.fdopen(fd, "wb")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "hloref.fuzz.worker_main", self.oracle],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, close_fds=True)
        stderr.close()
        self._conn = Channel(self._proc.stdout.fileno(), self._proc.stdin.fileno())
        if not self._conn.poll(self.start_timeout):
            self._kill()
            raise RuntimeError(f"the {self.oracle} oracle worker did not start in "
                               f"{self.start_timeout:.0f} s")
        try:
            self._conn.recv()
        except EOFError:
            tail = self._stderr_tail()
            self._kill()
            raise RuntimeError(f"the {self.oracle} oracle worker died while starting:\n{tail}") from None

    def _alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _kill(self) -> None:
        if self._alive():
            self._proc.kill()
        if self._proc is not None:
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:  # pragma: no cover
                pass
            for f in (self._proc.stdin, self._proc.stdout):
                try:
                    f.close()
                except OSError:
                    pass
        self._proc = None
        self._conn = None

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.send(None)
            except (BrokenPipeError, OSError):
                pass
        if self._proc is not None:
            try:
                self._proc.wait(2)
            except subprocess.TimeoutExpired:
                pass
        self._kill()
        if self._stderr_path and os.path.exists(self._stderr_path):
            os.unlink(self._stderr_path)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _stderr_tail(self, lines: int = 20) -> str:
        try:
            with open(self._stderr_path, "rb") as f:
                data = f.read()[-8000:]
        except (OSError, TypeError):
            return ""
        return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])

    # -- jobs ---------------------------------------------------------------------------
    def _submit(self, job, timeout: float | None) -> OracleResult:
        start = time.perf_counter()  # a restart of the child counts as the job's time
        if not self._alive():
            self._start()
        limit = self.timeout if timeout is None else timeout
        self.jobs += 1
        try:
            self._conn.send(job)
        except (BrokenPipeError, OSError):
            return self._died(start)
        if not self._conn.poll(limit):
            tail = self._stderr_tail()
            self._kill()
            self.seconds += time.perf_counter() - start
            return OracleResult("timeout", message=f"the {self.oracle} oracle did not answer in "
                                f"{limit:g} s", stderr_tail=tail, seconds=time.perf_counter() - start)
        try:
            kind, payload = self._conn.recv()
        except (EOFError, OSError):
            return self._died(start)
        seconds = time.perf_counter() - start
        self.seconds += seconds
        if kind == "ok":
            value, optimized, (compile_s, run_s) = payload
            self.compile_seconds += compile_s
            self.run_seconds += run_s
            return OracleResult("ok", value=value, optimized_hlo=optimized, seconds=seconds,
                                extra={"compile_seconds": compile_s, "run_seconds": run_s})
        return OracleResult(kind, message=payload, seconds=seconds)

    def _died(self, start) -> OracleResult:
        try:
            code = self._proc.wait(5)
        except subprocess.TimeoutExpired:  # pragma: no cover
            code = None
        tail = self._stderr_tail()
        self._kill()
        self.crashes += 1
        sig = None
        if code is not None and code < 0:
            try:
                sig = signal.Signals(-code).name
            except ValueError:
                sig = f"signal {-code}"
        self.seconds += time.perf_counter() - start
        message = f"the {self.oracle} oracle process died" + (f" with {sig}" if sig else
                                                             f" with exit status {code}")
        return OracleResult("crash", message=message, signal=sig, stderr_tail=tail,
                            seconds=time.perf_counter() - start)

    def run(self, text: str, args, *, debug_options: dict | None = None,
            optimized: bool = False, timeout: float | None = None) -> OracleResult:
        """Compile and run ``text`` on ``args`` in the child."""
        return self._submit(("run", (text, list(args), debug_options, optimized)), timeout)

    def abort_for_test(self) -> OracleResult:
        """Make the child call ``abort()`` (tests of the crash path)."""
        return self._submit(("abort", None), None)

    def hang_for_test(self, seconds: float, timeout: float) -> OracleResult:
        return self._submit(("sleep", seconds), timeout)

