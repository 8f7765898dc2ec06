"""f64 working buffers of the GPU's linear algebra (``gpu/linalg_batch_norm.py``,
``gpu/linalg_fft.py``, ``gpu/linalg.py``): an operand's exact values widened to interleaved (real, imaginary)
f64 parts on the device, and f64 values rounded once back to an element type.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from .complex_elementwise import parts
from .device import LOAD, STORE, type_class, type_params
from .elementwise import launch

__all__ = ["round_kernel", "real_to_parts_kernel", "widen_parts_kernel", "parts_out_kernel",
           "wide_parts", "rounded_parts"]


@functools.cache
def round_kernel(cls):
    """``out[i]``: f64 ``src[stride * i]`` rounded once to the element type (stride 2:
    the real parts of interleaved parts)."""
    store = STORE[cls]

    @cuda.jit
    def k(src, out, n, p, stride):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            out[i] = store(src[stride * i], p)
            i += step

    return k


@functools.cache
def real_to_parts_kernel(cx):
    lx = LOAD[cx]

    @cuda.jit
    def k(x, out, n, px):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            out[2 * i] = np.float64(lx(x[i], px))
            out[2 * i + 1] = np.float64(0.0)
            i += step

    return k


@cuda.jit
def widen_parts_kernel(x, out, n):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < n:
        out[i] = np.float64(x[i])
        i += step


@functools.cache
def parts_out_kernel(narrow_to_f32):
    @cuda.jit
    def k(src, out, n):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            out[i] = np.float32(src[i]) if narrow_to_f32 else src[i]
            i += step

    return k


def wide_parts(x):
    """``x``'s exact values as interleaved f64 (real, imaginary) parts on the device."""
    buf = cuda.device_array(max(2 * x.size, 1), dtype=np.float64)
    if x.et.is_complex:
        src = parts(x)
        launch(widen_parts_kernel, src.size, src, buf, src.size)
    else:
        launch(real_to_parts_kernel(type_class(x.et)), x.size, x.data, buf, x.size,
               type_params(x.et))
    return buf


def rounded_parts(buf, out):
    """Round the f64 parts ``buf`` once into ``out`` (complex: both parts; real: the real)."""
    if out.et.is_complex:
        flat = parts(out)
        launch(parts_out_kernel(out.et.name == "c64"), flat.size, buf, flat, flat.size)
    else:
        launch(round_kernel(type_class(out.et)), out.size, buf, out.data, out.size,
               type_params(out.et), 2)
    return out
