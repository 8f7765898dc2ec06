"""The driver of the guarded f32 kernels (``trig_f32``, ``exp_log_f32``).

Such a kernel computes most elements of an f32 array and leaves a few (near an f32
midpoint, outside its domain, ...) to the reference path; the driver runs it over the
array, in contiguous chunks on the thread pool above ``THREAD_THRESHOLD`` elements, and
recomputes the elements it left as the reference path does: the reference f64 function
of the widened value, rounded once to f32.
"""

from __future__ import annotations

import numpy as np

from .numeric import THREAD_THRESHOLD, THREADS, in_chunks

__all__ = ["apply_guarded"]


def apply_guarded(x: np.ndarray, kernel, reference) -> np.ndarray:
    """The f32 results of f32 ``x``: ``kernel(flat, out, hard)`` writes them for the
    1-d ``flat`` into ``out`` and the indices of the elements it leaves into ``hard``,
    returning how many; those become ``f32(reference(f64(x)))``."""
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty(flat.size, np.float32)
    hard = np.empty(flat.size, np.int64)

    def run(lo, hi):
        count = kernel(flat[lo:hi], out[lo:hi], hard[lo:hi])
        return hard[lo:lo + count] + lo

    if flat.size < THREAD_THRESHOLD or THREADS < 2:
        left = [run(0, flat.size)]
    else:
        left = in_chunks(flat.size, run)
    idx = np.concatenate(left)
    if idx.size:
        with np.errstate(all="ignore"):
            out[idx] = reference(flat[idx].astype(np.float64)).astype(np.float32)
    return out.reshape(x.shape)
