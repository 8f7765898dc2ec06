"""``fft`` on the GPU (mirrors ``fft`` of ``evaluator/linalg.py``): numpy.fft's passes in
its order, each a direct DFT in f64 parts (below).
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda

from hloref.errors import HloEvalError
from hloref.evaluator.linalg import fft_axes

from .complex_elementwise import parts
from .device import empty, type_class, type_params
from .elementwise import launch
from .f64_buffers import parts_out_kernel, real_to_parts_kernel, round_kernel, widen_parts_kernel
from .registry import GpuFallback, gpu_op


# ----------------------------------------------------------------- fft
#
# numpy.fft's passes in its order (last axis first), each a direct DFT on the device in
# f64 parts: one thread per output element sums its whole line, the twiddle of
# ``j * k`` taken mod ``n`` first (``cos``/``sin`` of an angle below 2 pi), so the result
# differs from pocketfft's by rounding only (n terms in f64: far inside the envelope
# after rounding to c64/f32; about n ulps of sum |x| in c128/f64). Work buffers hold
# interleaved (real, imaginary) f64 parts; the result is rounded once at the end.

_TWO_PI = 2.0 * math.pi


@cuda.jit
def _dft_axis_kernel(src, dst, n, lin, lout, inner, nfft, sign, scale):
    """``dst[o, k, r] = scale * sum_{j < min(lin, nfft)} src[o, j, r] w^(sign j k)``."""
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    used = min(lin, nfft)
    while i < n:
        r = i % inner
        k = (i // inner) % lout
        o = i // (inner * lout)
        re = np.float64(0.0)
        im = np.float64(0.0)
        for j in range(used):
            at = 2 * ((o * lin + j) * inner + r)
            xr = src[at]
            xi = src[at + 1]
            theta = sign * _TWO_PI * np.float64((j * k) % nfft) / np.float64(nfft)
            c = math.cos(theta)
            s = math.sin(theta)
            re += xr * c - xi * s
            im += xr * s + xi * c
        dst[2 * i] = re * scale
        dst[2 * i + 1] = im * scale
        i += step


@cuda.jit
def _c2r_kernel(src, dst, n, lin, nfft):
    """numpy's ``irfft`` over the last axis: the Hermitian extension of the first
    ``nfft // 2 + 1`` bins (zeros past ``lin``), the imaginary parts of the
    self-conjugate bins ignored, scaled by ``1 / nfft``; real results in ``dst``."""
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    half = nfft // 2
    while i < n:
        j = i % nfft
        o = i // nfft
        base = 2 * o * lin
        total = src[base] if lin > 0 else np.float64(0.0)
        for k in range(1, min(lin, (nfft - 1) // 2 + 1)):
            theta = _TWO_PI * np.float64((j * k) % nfft) / np.float64(nfft)
            total += 2.0 * (src[base + 2 * k] * math.cos(theta)
                            - src[base + 2 * k + 1] * math.sin(theta))
        if nfft % 2 == 0 and half < lin and half > 0:
            v = src[base + 2 * half]
            total += v if j % 2 == 0 else -v
        dst[i] = total / np.float64(nfft)
        i += step


def _dft_pass(buf, dims, axis, nfft, sign, scale, lout=None):
    """One 1-D transform of the f64-parts buffer ``buf`` of ``dims`` along ``axis``."""
    lin = dims[axis]
    lout = nfft if lout is None else lout
    out_dims = dims[:axis] + (lout,) + dims[axis + 1:]
    inner = int(np.prod(dims[axis + 1:], dtype=np.int64))
    n = int(np.prod(out_dims, dtype=np.int64))
    dst = cuda.device_array(max(2 * n, 1), dtype=np.float64)
    launch(_dft_axis_kernel, n, buf, dst, n, lin, lout, max(inner, 1), nfft, float(sign),
           float(scale))
    return dst, out_dims


@gpu_op("fft")
def fft(x, *, shape, fft_type, fft_length):
    et = shape.element_type
    lengths, axes = fft_axes(x.ndim, fft_length)
    kind = str(fft_type).upper()
    if kind not in ("FFT", "IFFT", "RFFT", "IRFFT"):
        raise HloEvalError(f"unknown fft_type={fft_type}")
    if kind == "RFFT" and x.et.is_complex:
        raise HloEvalError("RFFT takes a real operand")
    cx = type_class(x.et)
    if cx not in ("f32", "f64", "narrow", "complex") or \
            (et.is_complex and et.name not in ("c64", "c128")):
        raise GpuFallback(f"fft of {x.et.name} to {et.name} has no GPU kernel")
    dims = tuple(shape.dims)
    out = empty(dims, et)
    if x.size == 0 or out.size == 0 or 0 in lengths:
        if out.size:  # zeros in every part of the result
            if et.is_complex:
                flat = parts(out)
                launch(parts_out_kernel(et.name == "c64"), flat.size,
                       cuda.to_device(np.zeros(flat.size, np.float64)), flat, flat.size)
            else:
                launch(round_kernel(type_class(et)), out.size,
                       cuda.to_device(np.zeros(out.size, np.float64)), out.data, out.size,
                       type_params(et), 1)
        return out
    buf = cuda.device_array(2 * x.size, dtype=np.float64)
    if x.et.is_complex:
        src = parts(x)
        launch(widen_parts_kernel, src.size, src, buf, src.size)
    else:
        launch(real_to_parts_kernel(cx), x.size, x.data, buf, x.size, type_params(x.et))
    cur = tuple(x.shape)
    if kind in ("FFT", "IFFT"):
        sign = -1.0 if kind == "FFT" else 1.0
        for ax in reversed(axes):
            nfft = cur[ax]
            buf, cur = _dft_pass(buf, cur, ax, nfft, sign, 1.0 if kind == "FFT" else 1.0 / nfft)
    elif kind == "RFFT":
        last = lengths[-1]
        buf, cur = _dft_pass(buf, cur, axes[-1], last, -1.0, 1.0, lout=last // 2 + 1)
        for ax, nfft in reversed(list(zip(axes[:-1], lengths[:-1]))):
            buf, cur = _dft_pass(buf, cur, ax, nfft, -1.0, 1.0)
    else:  # IRFFT
        for ax, nfft in reversed(list(zip(axes[:-1], lengths[:-1]))):
            buf, cur = _dft_pass(buf, cur, ax, nfft, 1.0, 1.0 / nfft)
        last = lengths[-1]
        n = int(np.prod(cur[:-1], dtype=np.int64)) * last
        real = cuda.device_array(max(n, 1), dtype=np.float64)
        launch(_c2r_kernel, n, buf, real, n, cur[-1], last)
        cur = cur[:-1] + (last,)
        if cur != dims:
            raise HloEvalError(f"fft result has dims {list(cur)}, the instruction says "
                               f"{list(dims)}")
        if et.is_complex:
            raise HloEvalError(f"IRFFT gives a real result, the instruction says {et.name}")
        launch(round_kernel(type_class(et)), n, real, out.data, n, type_params(et), 1)
        return out
    if cur != dims:
        raise HloEvalError(f"fft result has dims {list(cur)}, the instruction says "
                           f"{list(dims)}")
    if not et.is_complex:
        raise HloEvalError(f"{kind} gives a complex result, the instruction says {et.name}")
    flat = parts(out)
    launch(parts_out_kernel(et.name == "c64"), flat.size, buf, flat, flat.size)
    return out
