"""``rsqrt`` of f32 arrays, bit for bit as the f64 path but in one pass.

The reference (``rsqrt_f64``, through ``numeric.float_compute_f64``) is
``1.0 / np.sqrt(x)`` on the widened f64 array, rounded once to f32: a widening, two
numpy calls on f64 temporaries and a rounding. The kernel does the same four IEEE
operations per element (f32 -> f64, the f64 square root, the f64 division of 1.0 by
it, f64 -> f32), each correctly rounded by the hardware, in one vectorised loop: the
same value by construction, NaN payloads included where the hardware propagates them
as numpy's loops do (``benchmarks/verify_trig_f32.py --op rsqrt`` checks all 2**32
inputs; docs/benchmarks.md).
"""

from __future__ import annotations

import numba
import numpy as np

from .numeric import THREAD_THRESHOLD, THREADS, in_chunks

__all__ = ["rsqrt_f32", "rsqrt_f64"]


def rsqrt_f64(x):
    """The reference ``rsqrt``: 1 / sqrt(x) (f64 or c128)."""
    return 1.0 / np.sqrt(x)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _rsqrt(x, out):
    for j in range(x.size):
        out[j] = np.float32(1.0 / np.sqrt(np.float64(x[j])))


def rsqrt_f32(x: np.ndarray) -> np.ndarray:
    """``f32(1 / sqrt(f64(x)))`` of an f32 array, bit for bit."""
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty(flat.size, np.float32)

    def run(lo, hi):
        _rsqrt(flat[lo:hi], out[lo:hi])

    if flat.size < THREAD_THRESHOLD or THREADS < 2:
        run(0, flat.size)
    else:
        in_chunks(flat.size, run)
    return out.reshape(x.shape)
