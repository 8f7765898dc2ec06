"""Oracles in worker processes: XLA aborting, crashing or hanging is a verdict, not our death.

``OracleWorker(oracle)`` owns one child process that imports the oracle once and
runs jobs sent over a pipe. A job that kills the child (``abort()``, a segfault)
comes back as ``OracleResult(kind="crash")`` with the signal and the last lines
the child wrote to stderr; one that runs past its time limit is killed and comes
back as ``kind="timeout"``. The worker restarts its child on the next job, so a
campaign goes on. The XLA oracle's children are forked from a zygote that has
imported jax (``_Zygote``), so a restart costs a fork, not jax's import. Workers are
reused across modules: XLA's start-up is paid once.
"""

from __future__ import annotations

import os
import pickle
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field

__all__ = ["OracleResult", "OracleWorker", "ORACLES", "Channel", "serve", "child_main",
           "zygote_main", "shutdown_zygotes", "FATAL_LINE"]

ORACLES = ("xla", "tf")


#: A line of a dying child's stderr that says why: a failed CHECK (glog's "F1128 ...
#: file.cc:586] Check failed: ..."), an LLVM fatal error.
FATAL_LINE = re.compile(r"Check failed|RET_CHECK|LLVM ERROR|^F\d{4} |Fatal Python error|"
                        r"terminate called")


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
            if kind == "memory":  # the memory audit's compile (fuzz/memory_xla.py)
                from hloref.fuzz.memory_xla import compile_in_worker
                t0 = time.perf_counter()
                found = compile_in_worker(*payload)
                return ("ok", (found, None, (time.perf_counter() - t0, 0.0)))
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


def _fork_default(oracle: str) -> bool:
    return (oracle == "xla" and sys.platform.startswith("linux") and hasattr(socket, "send_fds")
            and os.environ.get("HLOREF_ORACLE_FORK", "1") != "0")


class _Forked:
    """A child forked by a :class:`_Zygote`, with what ``OracleWorker`` uses of a
    ``subprocess.Popen``: ``stdin``/``stdout`` (the parent's ends of its pipes),
    ``poll()``, ``wait(timeout)`` and ``kill()``. It is the zygote's child, so its exit
    status comes from the zygote."""

    def __init__(self, zygote: "_Zygote", pid: int, stdin, stdout):
        self.zygote, self.pid, self.stdin, self.stdout = zygote, pid, stdin, stdout
        self.returncode = None

    def poll(self):
        """``None`` while the child runs. Its stdout (our end of the pipe) turns
        readable when it dies (EOF) or when it answers; no job is pending when this is
        asked, so only then is the zygote asked (a round trip to another process,
        which a loaded machine makes slow)."""
        if self.returncode is None:
            ready, _, _ = select.select([self.stdout], [], [], 0)
            if ready:
                self.returncode = self._status(0.5)
        return self.returncode

    def wait(self, timeout=None):
        if self.returncode is None:
            self.returncode = self._status(3600.0 if timeout is None else timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired(f"oracle child {self.pid}", timeout)
        return self.returncode

    def _status(self, timeout: float):
        try:
            return self.zygote.status(self.pid, timeout)
        except Exception:  # noqa: BLE001 - the zygote is gone: the child cannot be asked
            self.kill()  # about; make sure it is dead (init reaps it) and say so
            return -signal.SIGKILL

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def shutdown_zygotes() -> None:
    """Close this process's zygotes (each exits once its children are reaped, so their
    CPU time reaches this process's ``RUSAGE_CHILDREN``); a later start makes a new one."""
    with _Zygote._lock:
        zygotes = list(_Zygote._instances.values())
        _Zygote._instances.clear()
    for z in zygotes:
        z.close()


class _Zygote:
    """A process that has imported an oracle's libraries (jax, jaxlib, numpy: about
    0.6 s of CPU) but started no backend and no thread, and forks oracle children on
    request (``python -m hloref.fuzz.worker_main --zygote ORACLE FD``): starting a
    child, e.g. after XLA aborted, costs a fork instead of a fresh interpreter. One per
    process and oracle, started on first use; requests go over a Unix socket (the
    child's pipe ends travel with ``SCM_RIGHTS``). Any failure of the zygote falls
    back to starting children the ordinary way."""

    _instances: dict = {}
    _lock = threading.Lock()

    def __init__(self, oracle: str):
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = dict(os.environ)
        env.setdefault("OPENBLAS_NUM_THREADS", "1")  # no BLAS thread pool to fork with
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "hloref.fuzz.worker_main", "--zygote", oracle,
                 str(child.fileno())], pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        finally:
            child.close()
        self.sock = parent
        self.sock.settimeout(180.0)
        self._io = threading.Lock()
        import atexit
        atexit.register(self.close)
        if self._call({"op": "hello"}).get("ok") is not True:
            raise RuntimeError("the oracle zygote did not start")

    def _call(self, request: dict, fds=()) -> dict:
        import json
        with self._io:
            socket.send_fds(self.sock, [json.dumps(request).encode()], list(fds))
            reply = self.sock.recv(65536)
        if not reply:
            raise EOFError("the oracle zygote is gone")
        return json.loads(reply)

    @classmethod
    def spawn(cls, oracle: str, stderr_fd: int) -> "_Forked | None":
        """A forked oracle child whose stderr is ``stderr_fd``; ``None`` when no zygote
        can do it (the caller starts the child the ordinary way)."""
        with cls._lock:
            for attempt in range(2):
                z = cls._instances.get(oracle)
                try:
                    if z is None:
                        z = cls._instances[oracle] = cls(oracle)
                    return z._fork(stderr_fd)
                except Exception:  # noqa: BLE001 - a dead or broken zygote: a new one once
                    cls._instances.pop(oracle, None)
                    if z is not None:
                        z.close()
            return None

    def _fork(self, stderr_fd: int) -> _Forked:
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        try:
            pid = self._call({"op": "fork"}, (in_r, out_w, stderr_fd))["pid"]
        except BaseException:
            for fd in (in_r, in_w, out_r, out_w):
                os.close(fd)
            raise
        os.close(in_r)
        os.close(out_w)
        return _Forked(self, pid, os.fdopen(in_w, "wb", buffering=0),
                       os.fdopen(out_r, "rb", buffering=0))

    def status(self, pid: int, timeout: float):
        """The child's exit code (``Popen.returncode``'s convention), or ``None`` while it
        runs after ``timeout`` seconds."""
        return self._call({"op": "wait", "pid": pid, "timeout": timeout})["code"]

    def close(self) -> None:
        try:
            self.sock.close()
            self.proc.wait(5)
        except Exception:  # noqa: BLE001
            try:
                self.proc.kill()
            except Exception:  # noqa: BLE001
                pass


def zygote_main(oracle: str, fd: int) -> None:
    """The zygote (``python -m hloref.fuzz.worker_main --zygote ORACLE FD``): import the
    oracle's libraries, then answer requests on the socket ``FD`` until it closes."""
    import json
    if oracle == "xla":  # what the oracle's _jax() imports, without making the backend
        # (which starts XLA's thread pools: a process with threads must not fork)
        import jax  # noqa: F401
        import jaxlib._jax  # noqa: F401
        import ml_dtypes  # noqa: F401
        import numpy  # noqa: F401
        from jax.extend import backend  # noqa: F401
        from jaxlib import xla_client  # noqa: F401

        import hloref.fuzz.oracles.xla  # noqa: F401
    from hloref.fuzz.oracles import errors  # noqa: F401
    sock = socket.socket(fileno=fd)
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(sock, 65536, 4)
        except OSError:
            return
        if not msg:
            return
        req = json.loads(msg)
        op = req.get("op")
        if op == "hello":
            sock.send(json.dumps({"ok": True}).encode())
        elif op == "fork":
            pid = os.fork()
            if pid == 0:  # the oracle child
                code = 0
                try:
                    sock.close()
                    for target, src in enumerate(fds):
                        os.dup2(src, target)
                    for src in fds:
                        if src > 2:
                            os.close(src)
                    signal.signal(signal.SIGINT, signal.SIG_DFL)
                    child_main(oracle)
                except SystemExit as exc:
                    code = exc.code if isinstance(exc.code, int) else 1
                except BaseException:  # noqa: BLE001
                    traceback.print_exc()
                    code = 1
                finally:
                    try:
                        sys.stderr.flush()
                    finally:
                        os._exit(code)
            for src in fds:
                os.close(src)
            sock.send(json.dumps({"pid": pid}).encode())
        elif op == "wait":
            pid, deadline = req["pid"], time.monotonic() + float(req.get("timeout") or 0.0)
            code = None
            while True:
                try:
                    done, status = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    code = -signal.SIGKILL  # already reaped: report it as gone
                    break
                if done:
                    code = os.waitstatus_to_exitcode(status)
                    break
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.005)
            sock.send(json.dumps({"code": code}).encode())
        else:
            sock.send(json.dumps({"error": f"unknown op {op!r}"}).encode())


class OracleWorker:
    """One oracle child process, restarted after a crash or a timeout."""

    def __init__(self, oracle: str = "xla", *, timeout: float = 120.0, start_timeout: float = 180.0,
                 fork: bool | None = None, debug_options: dict | None = None):
        if oracle not in ORACLES:
            raise ValueError(f"unknown oracle {oracle!r}; expected one of {', '.join(ORACLES)}")
        self.oracle = oracle
        self.timeout = timeout
        self.start_timeout = start_timeout
        self._proc = None
        self._conn = None
        self._stderr_path = None
        #: children are forked from a zygote that has imported the oracle (``_Zygote``):
        #: a restart after a crash costs milliseconds, not the oracle's import (default:
        #: the XLA oracle on Linux unless ``HLOREF_ORACLE_FORK=0``)
        self.fork = _fork_default(oracle) if fork is None else fork
        #: debug options every compile gets (a run's own ``debug_options`` win)
        self.debug_options = dict(debug_options or {})
        self.jobs = 0
        self.crashes = 0
        #: child processes started (the first one and every restart)
        self.starts = 0
        #: time spent on jobs (round trips), and the parts measured inside the child
        self.seconds = 0.0
        self.compile_seconds = 0.0
        self.run_seconds = 0.0

    # -- lifecycle ----------------------------------------------------------------------
    def _start(self) -> None:
        if self._stderr_path and os.path.exists(self._stderr_path):
            os.unlink(self._stderr_path)  # the previous child's; one file per worker
        fd, self._stderr_path = tempfile.mkstemp(prefix=f"hloref-{self.oracle}-", suffix=".stderr")
        stderr = os.fdopen(fd, "wb")
        try:
            self._proc = _Zygote.spawn(self.oracle, stderr.fileno()) if self.fork else None
            if self._proc is None:
                self._proc = subprocess.Popen(
                    [sys.executable, "-m", "hloref.fuzz.worker_main", self.oracle],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, close_fds=True)
        finally:
            stderr.close()
        self.starts += 1
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
        """The last ``lines`` lines of the child's stderr; when the line saying why it
        died (a failed CHECK, an LLVM error) is above them, behind a long stack trace,
        it is put first, followed by ``...``."""
        try:
            with open(self._stderr_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 65536))
                data = f.read()
        except (OSError, TypeError):
            return ""
        text = data.decode("utf-8", "replace").splitlines()
        tail = text[-lines:]
        causes = [i for i, line in enumerate(text) if FATAL_LINE.search(line)]
        if causes and causes[-1] < len(text) - lines:
            tail = [text[causes[-1]], "..."] + tail
        return "\n".join(tail)

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
        """Compile and run ``text`` on ``args`` in the child (with the worker's
        ``debug_options`` under the run's own)."""
        if self.debug_options:
            debug_options = {**self.debug_options, **(debug_options or {})}
        return self._submit(("run", (text, list(args), debug_options, optimized)), timeout)

    def memory(self, text: str, *, debug_options: dict | None = None, dialect: str = "hlo",
               timeout: float | None = None) -> OracleResult:
        """Compile ``text`` (HLO, or StableHLO with ``dialect="mlir"``) in the child with
        ``--xla_dump_to``; the result's ``value`` is ``{"optimized", "assignment",
        "stats"}`` (``fuzz/memory_xla.compile_in_worker``)."""
        if self.debug_options:
            debug_options = {**self.debug_options, **(debug_options or {})}
        return self._submit(("memory", (text, debug_options, dialect)), timeout)

    def abort_for_test(self) -> OracleResult:
        """Make the child call ``abort()`` (tests of the crash path)."""
        return self._submit(("abort", None), None)

    def hang_for_test(self, seconds: float, timeout: float) -> OracleResult:
        return self._submit(("sleep", seconds), timeout)

