"""The evaluator's BLAS calls on a fixed number of OpenBLAS threads: one by default.

OpenBLAS splits a product of more than about 262,144 multiply-adds over its threads,
and the split changes the order of the sums: on 300 random shapes ``np.matmul`` on one
and on two threads differed in at least one bit on 248 (``docs/benchmarks.md``). A
reference value must not depend on the machine's core count, and on a shared machine
BLAS threads wait for each other (a 128x64 by 64x256 product: 78 ms instead of
0.04 ms). So every BLAS call of the evaluator (``dot``, ``convolution``, the
``custom-call`` targets, the LAPACK routines) runs inside :func:`blas_call`: the
OpenBLAS libraries loaded in the process (numpy's ``scipy_openblas64_``, scipy's
``scipy_openblas``, a system ``libopenblas``) are set to :func:`threads` threads for
the call and set back to what they were right after it, so the process's own setting
holds everywhere outside hloref's calls (the setting is the process's: while a call
runs, other threads' BLAS calls run on its count too). The switch reads each
library's count and, where it differs, sets it and sets it back: 0.7 µs a call with
the process on one thread, 1.1 µs on two, the lock included; nested and concurrent
calls (several threads evaluating at once) keep one setting until the last leaves.

``HLOREF_BLAS_THREADS`` (read once, at the first call) overrides the count: a whole
number >= 1, or ``0`` to leave the process's setting alone (results then depend on it,
as before). A BLAS other than OpenBLAS (MKL, Accelerate) is not switched.
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
import threading

from hloref.errors import HloEvalError

__all__ = ["blas_call", "threads", "configure", "process_threads", "set_process_threads", "ENV"]

ENV = "HLOREF_BLAS_THREADS"

#: (get, set) symbol names of OpenBLAS builds: numpy's and scipy's wheels (scipy-openblas,
#: 64- and 32-bit integers), numpy 1.x wheels, a system library
_SYMBOLS = (
    ("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
    ("scipy_openblas_get_num_threads", "scipy_openblas_set_num_threads"),
    ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
    ("openblas_get_num_threads", "openblas_set_num_threads"),
)


class _Library:
    """One loaded OpenBLAS: its thread-count getter and setter."""

    __slots__ = ("path", "get", "set")

    def __init__(self, path, get, set_):
        self.path, self.get, self.set = path, get, set_


_LOCK = threading.Lock()
#: the count hloref's calls use (0: leave the process's); ``None`` until first read
_threads: int | None = None
#: the libraries found, and ``len(sys.modules)`` when they were looked for: an import
#: (scipy.linalg, loaded by the first LAPACK custom call) may load another
_libraries: list = []
_scanned_at = -1
#: calls inside ``blas_call`` now (every thread); the libraries set for them, and the
#: (setter, count before) pairs to put back when the last one leaves
_depth = 0
_switched: set = set()
_restore: list = []


def _after_fork_in_child() -> None:
    """A fork inside a call leaves its count set and maybe the lock held; the child
    keeps the count it inherited (its own process setting) and starts unlocked."""
    global _LOCK, _depth
    _LOCK, _depth = threading.Lock(), 0
    _switched.clear()
    _restore.clear()


os.register_at_fork(after_in_child=_after_fork_in_child)


def threads() -> int:
    """The OpenBLAS thread count of hloref's BLAS calls (0: the process's own)."""
    global _threads
    if _threads is None:
        _threads = _from_environment()
    return _threads


def _from_environment() -> int:
    text = os.environ.get(ENV, "").strip()
    if not text:
        return 1
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise HloEvalError(f"{ENV}={text!r}: expected a whole number of BLAS threads, 1 or "
                           f"more, or 0 to leave the process's OpenBLAS setting alone")
    return n


def configure(n: int | None) -> None:
    """Set the count of hloref's BLAS calls (``None``: read ``HLOREF_BLAS_THREADS`` again)."""
    global _threads
    if n is not None and (type(n) is not int or n < 0):
        raise ValueError(f"BLAS threads: expected a whole number >= 0, got {n!r}")
    with _LOCK:
        _threads = n


def blas_call(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` with every loaded OpenBLAS on :func:`threads` threads."""
    global _depth
    n = _threads if _threads is not None else threads()
    if not n:
        return fn(*args, **kwargs)
    _LOCK.acquire()
    try:
        if not _depth or _scanned_at != len(sys.modules):
            _switch(n)
        _depth += 1
    finally:
        _LOCK.release()
    try:
        return fn(*args, **kwargs)
    finally:
        _LOCK.acquire()
        try:
            _depth -= 1
            if not _depth:
                for set_, before in _restore:
                    set_(before)
                _restore.clear()
                _switched.clear()
        finally:
            _LOCK.release()


def _switch(n: int) -> None:
    """Set every loaded library not yet set for the calls in progress to ``n`` threads,
    noting its count to restore (under ``_LOCK``)."""
    if _scanned_at != len(sys.modules):
        _scan()
    for lib in _libraries:
        if lib.path not in _switched:
            _switched.add(lib.path)
            before = lib.get()
            if before != n:
                lib.set(n)
                _restore.append((lib.set, before))


def _scan() -> None:
    """Find the OpenBLAS libraries loaded in the process (under ``_LOCK``)."""
    global _scanned_at
    _scanned_at = len(sys.modules)
    known = {lib.path for lib in _libraries}
    for path in _loaded_paths():
        if path in known:
            continue
        known.add(path)
        lib = _open(path)
        if lib is not None:
            _libraries.append(lib)


def _loaded_paths() -> list[str]:
    """Paths of loaded shared libraries whose file name names OpenBLAS: the process's
    memory map on Linux, else the library folders of numpy's and scipy's wheels."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        lines = None
    if lines is not None:
        paths = []
        for line in lines:
            fields = line.split(None, 5)
            if len(fields) == 6 and "openblas" in os.path.basename(fields[5]).lower() \
                    and fields[5] not in paths:
                paths.append(fields[5])
        return paths
    paths = []
    for name in ("numpy", "scipy"):
        module = sys.modules.get(name)
        if module is None or not getattr(module, "__file__", None):
            continue
        here = os.path.dirname(module.__file__)
        for folder in (here + ".libs", os.path.join(here, ".dylibs")):
            paths.extend(sorted(glob.glob(os.path.join(folder, "*openblas*"))))
    return paths


def _open(path: str) -> _Library | None:
    try:
        # already loaded (RTLD_NOLOAD): the same library, never a second copy
        handle = ctypes.CDLL(path, mode=getattr(os, "RTLD_NOLOAD", 0) | os.RTLD_LAZY)
    except OSError:
        return None
    for get_name, set_name in _SYMBOLS:
        try:
            get, set_ = getattr(handle, get_name), getattr(handle, set_name)
        except AttributeError:
            continue
        get.restype, get.argtypes = ctypes.c_int, ()
        set_.restype = None  # its one int argument converted by ctypes: twice as fast as argtypes
        return _Library(path, get, set_)
    return None


def process_threads() -> dict[str, int]:
    """Each loaded OpenBLAS library's thread count now (path → count)."""
    with _LOCK:
        _scan()
        return {lib.path: lib.get() for lib in _libraries}


def set_process_threads(n: int) -> None:
    """Set every loaded OpenBLAS library to ``n`` threads: the process-wide setting, as
    ``OPENBLAS_NUM_THREADS`` does at start-up (benchmarks and tests)."""
    with _LOCK:
        _scan()
        for lib in _libraries:
            lib.set(n)
