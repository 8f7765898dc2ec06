"""Where ``pytest --hloref`` checks: a background process, or the test's own process.

:class:`CheckerProcess` owns one child (``python -m hloref.pytest_worker CONFIG``)
that runs a ``hloref.pytest_checker.Checker``: the test's process sends it jobs
over a pipe and goes on with the test; a reader thread receives the outcomes and
hands them to ``on_outcome`` as they come. On a machine with two cores, hloref's
evaluation runs beside jax's tracing, compiling and the test's own numpy reference;
the plugin waits for a test's outcomes when its body returns. A child that dies
(a crash in a kernel, the memory killer) answers every job it held with a skip that
says so, and the next job starts a new one. :class:`InlineChecker` checks in the
caller's thread instead (``--hloref-inline``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading

__all__ = ["CheckerProcess", "InlineChecker", "main"]


class InlineChecker:
    """The checker in this process: each job is checked when it is submitted."""

    def __init__(self, config: dict, on_outcome):
        from hloref.pytest_checker import Checker
        self._checker = Checker(**config)
        self._on_outcome = on_outcome
        self._sent: set[int] = set()
        self.cpu_seconds = 0.0
        self.process_cpu_seconds = 0.0

    def start(self) -> None:
        pass

    def submit(self, job, bytecode: bytes) -> None:
        if job.tag not in self._sent:
            self._sent.add(job.tag)
            job.bytecode = bytecode
        out = self._checker.handle(job)
        self.cpu_seconds += out.seconds
        self._on_outcome(out)

    def close(self) -> None:
        self._checker.close()


class CheckerProcess:
    """The checker in a child process (started again after it died: ``starts``; each
    executable's module goes to each child with the first job that needs it)."""

    def __init__(self, config: dict, on_outcome):
        self._config = config
        self._on_outcome = on_outcome
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()  # one job at a time into the pipe
        self._proc = None
        self._conn = None
        self._stderr_path = None
        self._outstanding: dict[int, object] = {}
        self._sent: set[int] = set()
        self.starts = 0
        self.cpu_seconds = 0.0
        self.process_cpu_seconds = 0.0  # the children's whole CPU time, start and end too
        self._reader = None

    def start(self) -> None:
        with self._lock:
            if self._proc is None:
                self._start()

    def _start(self) -> None:
        from multiprocessing.connection import Connection
        if self._stderr_path and os.path.exists(self._stderr_path):
            os.unlink(self._stderr_path)  # the previous child's
        fd, self._stderr_path = tempfile.mkstemp(prefix="hloref-pytest-", suffix=".stderr")
        env = dict(os.environ)
        # one core's worth of work beside the test: no BLAS threads spinning on the other
        env.setdefault("OPENBLAS_NUM_THREADS", "1")
        with os.fdopen(fd, "wb") as stderr:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "hloref.pytest_worker", json.dumps(self._config)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, close_fds=True,
                env=env)
        # multiprocessing's framing, not hloref.fuzz.workers.Channel: importing hloref.fuzz
        # would cost the test's process seconds it does not otherwise spend
        self._conn = (Connection(os.dup(self._proc.stdout.fileno()), writable=False),
                      Connection(os.dup(self._proc.stdin.fileno()), readable=False))
        self._sent = set()
        self.starts += 1
        self._reader = threading.Thread(target=self._read, args=(self._proc, self._conn[0]),
                                        daemon=True, name="hloref-outcomes")
        self._reader.start()

    def submit(self, job, bytecode: bytes) -> None:
        """Send ``job`` (with ``bytecode``, its executable's module, unless this child
        has it)."""
        with self._lock:
            if self._proc is None:
                self._start()
            if job.tag not in self._sent:
                self._sent.add(job.tag)
                job.bytecode = bytecode
            self._outstanding[job.id] = job
            proc, conn = self._proc, self._conn
        try:
            with self._send_lock:
                conn[1].send(job)
        except OSError:  # the child is gone before reading it
            with self._lock:
                lost = self._outstanding.pop(job.id, None)
            if lost is not None:
                self._answer_lost([lost], proc)

    def _read(self, proc, conn) -> None:
        try:
            conn.recv()  # ready
            while True:
                out = conn.recv()
                if isinstance(out, dict):  # the child's farewell: its CPU time
                    self.process_cpu_seconds += out.get("cpu", 0.0)
                    continue
                with self._lock:
                    self._outstanding.pop(out.id, None)
                    self.cpu_seconds += out.seconds
                self._on_outcome(out)
        except (EOFError, OSError):
            pass
        conn.close()
        proc.wait()
        self._died(proc)

    def _died(self, proc) -> None:
        with self._lock:
            if self._proc is not proc:
                return
            lost, self._outstanding = list(self._outstanding.values()), {}
            self._proc = self._conn = None
        self._answer_lost(lost, proc)

    def _answer_lost(self, lost: list, proc) -> None:
        if not lost:
            return
        from hloref.pytest_checker import Outcome
        reason = f"hloref's checking process died (exit code {proc.returncode})"
        tail = _tail(self._stderr_path)
        if tail:
            reason += f": {tail}"
        for job in lost:
            self._on_outcome(Outcome(job.id, "skip", "other", reason[:200]))

    def close(self) -> None:
        with self._lock:
            proc, conn, reader = self._proc, self._conn, self._reader
            self._proc = self._conn = None
        if proc is None:
            return
        try:
            with self._send_lock:
                conn[1].send(None)
                conn[1].close()
            proc.stdin.close()
            proc.wait(30)
            reader.join(5)
        except Exception:  # noqa: BLE001
            proc.kill()
        if self._stderr_path and os.path.exists(self._stderr_path):
            os.unlink(self._stderr_path)


def _tail(path: str | None) -> str:
    try:
        with open(path, "rb") as f:
            lines = f.read()[-4000:].decode("utf-8", "replace").strip().splitlines()
    except (OSError, TypeError):
        return ""
    return lines[-1].strip() if lines else ""


def main(argv: list[str]) -> None:
    """The child: check each job read from stdin, answer its outcome on stdout (moved
    aside to stderr first, so that nothing else writes into the answers)."""
    from multiprocessing.connection import Connection
    jobs, answers = Connection(os.dup(0), writable=False), Connection(os.dup(1), readable=False)
    os.dup2(2, 1)
    from hloref.pytest_checker import Checker
    checker = Checker(**json.loads(argv[0]))
    answers.send("ready")
    try:
        while True:
            try:
                job = jobs.recv()
            except EOFError:
                break
            if job is None:
                break
            answers.send(checker.handle(job))
    finally:
        checker.close()
        import resource
        cpu = sum(getattr(resource.getrusage(who), f) for who in (
            resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN) for f in ("ru_utime", "ru_stime"))
        try:
            answers.send({"cpu": cpu})
        except OSError:
            pass
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)  # nothing to tear down that the test's process would wait for


if __name__ == "__main__":
    main(sys.argv[1:])
