"""Element-type behaviour in one place: compute types, wrap-around, rounding back.

Every op family goes through these helpers instead of branching on dtype itself.
The rules (see ``docs/semantics.md``):

* integers compute in int64 (signed) or uint64 (unsigned) and wrap to their width
  (two's complement), as XLA's HloEvaluator does;
* f32, f64 and complex compute in their own type for arithmetic;
* floats narrower than f32 (f16, bf16, every f8, f4e2m1fn, f8e8m0fnu) are decoded
  exactly to f32, computed, and rounded once to nearest even into their own type;
* transcendental functions of f32 and narrower floats are computed in f64 and rounded
  once (nearly always the correctly rounded result); f64 uses the host libm.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from hloref.types import ElementType, from_dtype

from . import narrow

__all__ = [
    "element_type_of", "compute_array", "finish", "wrap_int", "int_compute_dtype",
    "to_float64", "from_float64", "float_compute", "float_compute_f64", "as_type", "contiguous",
    "apply_ufunc", "in_chunks", "quiet", "THREADS", "THREAD_THRESHOLD", "scratch",
]

#: Worker threads for large elementwise ufunc calls (numpy releases the GIL inside a
#: ufunc loop, so chunks of one call run in parallel). ``HLOREF_THREADS=1`` turns it off.
THREADS: int = max(1, int(os.environ.get("HLOREF_THREADS", "0") or 0) or (os.cpu_count() or 1))
#: Calls on fewer elements than this run in the calling thread: below it the hand-off
#: (about 0.1 ms) costs more than the second core gains. Measured on the 2-core
#: development machine for f32 computed in f64: sin breaks even near 2**16 elements,
#: exp near 2**18; memory-bound arithmetic is never split.
THREAD_THRESHOLD: int = 1 << 17
#: ``threshold`` for calls that should never be split (memory-bound arithmetic).
UNTHREADED: int = 1 << 62

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _forget_pool_after_fork() -> None:
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()  # the parent's threads do not exist here


os.register_at_fork(after_in_child=_forget_pool_after_fork)


def _thread_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(THREADS, thread_name_prefix="hloref-ufunc")
        return _pool


def apply_ufunc(fn: np.ufunc, xs, compute_dtype, out_dtype, *, threshold: int | None = None):
    """``fn(*xs)`` computed in ``compute_dtype`` and cast (rounded once) into a new
    ``out_dtype`` array, without a full-size temporary in the compute type: numpy casts
    each buffer-sized block as it goes. Operands must have one shape. Large calls are
    split into contiguous chunks that run on a small thread pool."""
    xs = [contiguous(x) for x in xs]
    same = all(x.shape == xs[0].shape for x in xs)
    shape = xs[0].shape if same else np.broadcast_shapes(*(x.shape for x in xs))
    out = np.empty(shape, out_dtype)
    n = out.size
    limit = THREAD_THRESHOLD if threshold is None else threshold
    with np.errstate(all="ignore"):
        if THREADS < 2 or n < limit or not same:
            fn(*xs, out=out, dtype=compute_dtype, casting="unsafe")
            return out
        flat_out = out.reshape(-1)
        flat_xs = [x.reshape(-1) for x in xs]

        def run(lo, hi):
            with np.errstate(all="ignore"):
                fn(*(x[lo:hi] for x in flat_xs), out=flat_out[lo:hi],
                   dtype=compute_dtype, casting="unsafe")

        in_chunks(n, run)
    return out


def in_chunks(n: int, run) -> list:
    """``run(lo, hi)`` over ``THREADS`` contiguous chunks of ``range(n)``, the first in
    this thread, the others on the pool (for code that releases the GIL: numpy's ufunc
    loops, ``nogil`` Numba kernels); returns the results in chunk order."""
    step = -(-n // THREADS)
    futures = [_thread_pool().submit(run, lo, min(lo + step, n)) for lo in range(step, n, step)]
    first = run(0, min(step, n))
    return [first] + [future.result() for future in futures]



def element_type_of(x: np.ndarray) -> ElementType:
    return from_dtype(x.dtype)


def int_compute_dtype(et: ElementType) -> np.dtype:
    return np.dtype(np.int64) if et.kind == "sint" else np.dtype(np.uint64)


def wrap_int(values: np.ndarray, et: ElementType) -> np.ndarray:
    """int64/uint64 ``values`` wrapped to ``et``'s width, as an array of ``et``'s dtype."""
    values = np.asarray(values)
    if et.kind == "pred":
        return values != 0
    if et.bits >= 8:
        return values.astype(et.dtype, copy=False) if values.dtype != et.dtype else values
    mask = (1 << et.bits) - 1
    u = values.astype(np.int64, copy=False) & mask
    if et.kind == "sint":
        sign = 1 << (et.bits - 1)
        u = np.where(u >= sign, u - (1 << et.bits), u)
    return u.astype(et.dtype)


def compute_array(x: np.ndarray) -> np.ndarray:
    """``x`` in the type arithmetic runs in: int64/uint64, f32 (for narrow floats), or itself."""
    et = element_type_of(x)
    if et.is_integer:
        return x.astype(int_compute_dtype(et), copy=False)
    if et.is_narrow_float:
        # exact widening; ml_dtypes' cast is C code and equals narrow.decode bit for bit
        # (tests/test_narrow.py checks every pattern of every type)
        return x.astype(np.float32)
    return x


def finish(values: np.ndarray, et: ElementType) -> np.ndarray:
    """Round or wrap computed ``values`` into element type ``et`` (once)."""
    values = np.asarray(values)
    if et.is_integer or et.is_pred:
        return wrap_int(values, et)
    if et.is_narrow_float:
        if values.dtype == np.float32:
            # f32 sources: ml_dtypes' cast rounds exactly as narrow.encode (tests/test_narrow.py
            # checks both agree on every f32 pattern class), and is several times faster
            with np.errstate(over="ignore", invalid="ignore"):
                return values.astype(et.dtype)
        return narrow.from_float(values, et)  # f64: one rounding (ml_dtypes would round twice)
    if values.dtype == et.dtype:
        return values
    with np.errstate(over="ignore", invalid="ignore"):  # f64 -> f32 overflow is inf, by design
        return values.astype(et.dtype)


def to_float64(x: np.ndarray) -> np.ndarray:
    """Exact f64 value of a float array of any width (complex: c128)."""
    et = element_type_of(x)
    if et.is_narrow_float:
        return narrow.to_f64(x)
    if et.is_complex:
        return x.astype(np.complex128, copy=False)
    return x.astype(np.float64, copy=False)


def from_float64(values: np.ndarray, et: ElementType) -> np.ndarray:
    """Round f64 (or c128) ``values`` once into float/complex type ``et``."""
    if et.is_narrow_float:
        return narrow.from_float(values, et)
    return values.astype(et.dtype)


def float_compute(fn, *xs: np.ndarray, et: ElementType) -> np.ndarray:
    """Apply an arithmetic ``fn`` in the compute type of float ``et`` and round once."""
    dtype = et.dtype
    if isinstance(fn, np.ufunc) and dtype in _WIDE:
        same_type = same_layout = True
        shape = xs[0].shape
        for x in xs:  # a loop, not all(...): this is every f32/f64 arithmetic op's path
            if x.dtype is not dtype and x.dtype != dtype:
                same_type = False
                break
            if type(x) is not np.ndarray or x.shape != shape or not x.flags.c_contiguous:
                same_layout = False
        if same_type and same_layout:
            # the loop apply_ufunc would pick (every operand is already of the type) and
            # its C-order result, without its checks: about 5 µs less per call
            out = quiet(fn, *xs)
            return out if type(out) is np.ndarray else np.asarray(out)
        if same_type:
            # memory-bound: a second thread measured slower (f32 add of 2**20: 0.20 -> 0.32 ms)
            return apply_ufunc(fn, xs, dtype, dtype, threshold=UNTHREADED)
    with np.errstate(all="ignore"):
        return finish(fn(*(compute_array(x) for x in xs)), et)


try:  # numpy >= 2 keeps its error state in a context variable, which np.errstate sets
    from numpy._core.umath import _extobj_contextvar as _ERRSTATE, _make_extobj
except ImportError:  # numpy 1.x
    _ERRSTATE = _make_extobj = None


def quiet(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` with numpy's floating-point warnings off. What
    ``np.errstate(all="ignore")`` does on entry and exit (the state made from the
    caller's, the context variable set and reset), without the ``errstate`` object:
    about 0.4 µs a call instead of 0.6 (decorator) or 0.8 (``with`` block)."""
    if _ERRSTATE is None:
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)
    token = _ERRSTATE.set(_make_extobj(all="ignore"))
    try:
        return fn(*args, **kwargs)
    finally:
        _ERRSTATE.reset(token)


_WIDE = {np.dtype(np.float32): np.dtype(np.float64), np.dtype(np.float64): np.dtype(np.float64),
         np.dtype(np.complex64): np.dtype(np.complex128),
         np.dtype(np.complex128): np.dtype(np.complex128)}


def float_compute_f64(fn, *xs: np.ndarray, et: ElementType) -> np.ndarray:
    """Apply a transcendental ``fn``: in f64 (c128) for types up to f32 (c64), round once."""
    if isinstance(fn, np.ufunc) and all(x.dtype == et.dtype for x in xs):
        if et.is_narrow_float:  # exact f32 decode, f64 compute, one rounding from f64
            wide = apply_ufunc(fn, [compute_array(x) for x in xs], np.float64, np.float64)
            return narrow.from_float(wide, et)
        if et.dtype in _WIDE:
            return apply_ufunc(fn, xs, _WIDE[et.dtype], et.dtype)
    with np.errstate(all="ignore"):
        if et.dtype in (np.dtype(np.float64), np.dtype(np.complex128)):
            return np.asarray(fn(*xs)).astype(et.dtype, copy=False)
        return from_float64(np.asarray(fn(*(to_float64(x) for x in xs))), et)


def as_type(values, et: ElementType) -> np.ndarray:
    """A Python/numpy value as an array of ``et`` (exact for values of that type)."""
    arr = np.asarray(values)
    if arr.dtype == et.dtype:
        return arr
    if et.is_narrow_float:
        return narrow.from_float(arr.astype(np.float64), et)
    return arr.astype(et.dtype)


def contiguous(x: np.ndarray) -> np.ndarray:
    """``x`` in C order (copied only if needed); unlike ``np.ascontiguousarray`` keeps 0-d."""
    x = np.asarray(x)
    return x if x.flags.c_contiguous else x.copy(order="C")



#: Largest scratch buffer kept per thread and slot (bytes); bigger requests get a
#: fresh array each time (there the O(n^3) product dwarfs the page faults). Three
#: slots (dot's operands and product) keep at most 96 MiB per thread.
SCRATCH_MAX = 32 << 20
_scratch = threading.local()


def scratch(shape, dtype, slot: int) -> np.ndarray:
    """A reusable uninitialised C-order array for a temporary that dies before the op
    returns (BLAS operands and products). Freshly allocated multi-megabyte arrays
    cost a page fault per 4 KiB page on first touch; on the development machine (a
    VM) that made a 512x512 f64 dgemm with fresh operands 5.1 ms instead of 2.2 ms.
    One buffer per thread and ``slot``; never return a scratch array from an op."""
    dtype = np.dtype(dtype)
    n = dtype.itemsize
    for d in shape:
        n *= int(d)
    if n > SCRATCH_MAX:
        return np.empty(shape, dtype)
    buffers = getattr(_scratch, "buffers", None)
    if buffers is None:
        buffers = _scratch.buffers = {}
    buf = buffers.get(slot)
    if buf is None or buf.nbytes < n:
        buf = buffers[slot] = np.empty(max(n, 1 << 16), np.uint8)
    return buf[:n].view(dtype).reshape(shape)
