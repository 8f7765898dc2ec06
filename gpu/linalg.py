"""``batch-norm-inference`` on the GPU (mirrors ``evaluator/linalg.py``, whose docstring
fixes the formula): one thread per element computes, in f64,
``(x - mean_c) * (scale_c / sqrt(variance_c + eps)) + offset_c`` for its feature ``c``
and rounds once to the element type, with ``epsilon`` as XLA holds it (the text value
rounded to f32, then to the element type). The same operations in the same order as
the CPU, so the results are bit-exact (``sqrt`` is correctly rounded on both).

``batch-norm-training`` and ``batch-norm-grad``: one thread per feature sums its
elements in f64 (two passes for the mean and the biased variance, as the CPU), then one
thread per element applies the CPU's formula in f64 and rounds once. The CPU sums with
numpy's pairwise summation, these kernels sequentially: both in f64, so results agree
after rounding except in rare near-ties (the accumulation bound covers them).
``fft``: numpy.fft's passes in its order, each a direct DFT in f64 parts (below).
``cholesky`` and ``triangular-solve``: one thread per batch matrix, the CPU's
algorithms in f64 parts (below). Complex batch norm (unverified modules only: the
verifier takes real floats) runs the same formulas in c128 scalars, as the CPU.

(Over 600 lines on purpose: it mirrors ``evaluator/linalg.py`` file for file, and the
device kernels of these four families (real and complex batch norm, fft's passes, the
two per-matrix solvers) are longer than their numpy counterparts.)
"""

from __future__ import annotations

import cmath
import functools
import math

import numpy as np
from numba import cuda

from hloref.errors import HloEvalError
from hloref.evaluator.linalg import check_square, fft_axes, transpose_mode, xla_epsilon

from .complex_elementwise import parts, smith
from .device import LOAD, SIMULATOR, STORE, empty, type_class, type_params
from .elementwise import launch
from .registry import GpuFallback, gpu_op

OP_FAMILY = True

_sqrt = np.sqrt if SIMULATOR else math.sqrt


@cuda.jit(device=True)
def _normalized(x, mean, var, scale, offset, eps):
    """Batch norm's ``(x - mean) * (scale / sqrt(var + eps)) + offset`` in f64, as the
    CPU orders it."""
    inv = 1.0 / _sqrt(var + eps)
    return (x - mean) * (inv * scale) + offset


@functools.cache  # one kernel per (operand class, parameter class)
def _inference_kernel(cx, cp):
    lx, lp, store = LOAD[cx], LOAD[cp], STORE[cx]

    @cuda.jit
    def k(x, scale, offset, mean, var, out, n, inner, features, eps, px, pp):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            c = (i // inner) % features
            y = _normalized(np.float64(lx(x[i], px)), np.float64(lp(mean[c], pp)),
                            np.float64(lp(var[c], pp)), np.float64(lp(scale[c], pp)),
                            np.float64(lp(offset[c], pp)), eps)
            out[i] = store(y, px)
            i += step

    return k


@gpu_op("batch-norm-inference")
def batch_norm_inference(x, scale, offset, mean, variance, *, shape, epsilon, feature_index):
    et = shape.element_type
    fi = int(feature_index)
    if not 0 <= fi < x.ndim:
        raise HloEvalError(f"feature_index={fi} out of range for a rank-{x.ndim} operand")
    if x.et.is_complex:
        return _complex_inference(x, scale, offset, mean, variance, et, epsilon, fi)
    cx, cp = type_class(x.et), type_class(scale.et)
    if cx not in ("f32", "f64", "narrow") or cp not in ("f32", "f64", "narrow") or x.et != et:
        raise GpuFallback(f"batch-norm-inference of {x.et.name} has no GPU kernel")
    if any(v.et != scale.et for v in (offset, mean, variance)):
        raise GpuFallback("batch-norm-inference parameters of different types")
    out = empty(x.shape, et)
    inner = int(np.prod(x.shape[fi + 1:], dtype=np.int64))
    launch(_inference_kernel(cx, cp), out.size, x.data, scale.data, offset.data, mean.data,
           variance.data, out.data, out.size, max(inner, 1), x.shape[fi],
           xla_epsilon(epsilon, et), type_params(x.et), type_params(scale.et))
    return out


# ----------------------------------------------------------------- training and grad

class _Features:
    """Element ``i`` of the operand lies in feature ``(i // inner) % features``; feature
    ``c``'s ``count`` elements are ``o * features * inner + c * inner + j``."""

    def __init__(self, x, fi):
        if not 0 <= fi < x.ndim:
            raise HloEvalError(f"feature_index={fi} out of range for a rank-{x.ndim} operand")
        self.features = x.shape[fi]
        self.inner = max(int(np.prod(x.shape[fi + 1:], dtype=np.int64)), 1)
        self.outer = int(np.prod(x.shape[:fi], dtype=np.int64))
        self.count = self.outer * int(np.prod(x.shape[fi + 1:], dtype=np.int64))


@functools.cache
def _moments_kernel(cx):
    lx = LOAD[cx]

    @cuda.jit
    def k(x, mean, var, features, inner, outer, count, px):
        c = cuda.grid(1)
        step = cuda.gridsize(1)
        while c < features:
            total = np.float64(0.0)
            for o in range(outer):
                for j in range(inner):
                    total += np.float64(lx(x[(o * features + c) * inner + j], px))
            m = total / np.float64(count) if count > 0 else np.float64(np.nan)
            sq = np.float64(0.0)
            for o in range(outer):
                for j in range(inner):
                    d = np.float64(lx(x[(o * features + c) * inner + j], px)) - m
                    sq += d * d
            mean[c] = m
            var[c] = sq / np.float64(count) if count > 0 else np.float64(np.nan)
            c += step

    return k


@functools.cache
def _normalize_kernel(cx, cp):
    lx, lp, store = LOAD[cx], LOAD[cp], STORE[cx]

    @cuda.jit
    def k(x, scale, offset, mean, var, out, n, inner, features, eps, px, pp):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            c = (i // inner) % features
            y = _normalized(np.float64(lx(x[i], px)), mean[c], var[c],
                            np.float64(lp(scale[c], pp)), np.float64(lp(offset[c], pp)), eps)
            out[i] = store(y, px)
            i += step

    return k


@functools.cache
def _round_kernel(cls):
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


def _rounded(values, n, et):
    out = empty((n,), et)
    launch(_round_kernel(type_class(et)), n, values, out.data, n, type_params(et), 1)
    return out


def _check_types(opname, x, et, params):
    cx = type_class(x.et)
    cp = type_class(params[0].et)
    if cx not in ("f32", "f64", "narrow") or cp not in ("f32", "f64", "narrow") or x.et != et \
            or any(v.et != params[0].et for v in params):
        raise GpuFallback(f"{opname} of {x.et.name} has no GPU kernel")
    return cx, cp


@gpu_op("batch-norm-training")
def batch_norm_training(x, scale, offset, *, shape, epsilon, feature_index):
    et = shape.elements[0].element_type
    if x.et.is_complex:
        return _complex_training(x, scale, offset, et, epsilon, int(feature_index))
    cx, cp = _check_types("batch-norm-training", x, et, (scale, offset))
    f = _Features(x, int(feature_index))
    mean = cuda.device_array(max(f.features, 1), dtype=np.float64)
    var = cuda.device_array(max(f.features, 1), dtype=np.float64)
    launch(_moments_kernel(cx), f.features, x.data, mean, var, f.features, f.inner, f.outer,
           f.count, type_params(x.et))
    y = empty(x.shape, et)
    launch(_normalize_kernel(cx, cp), y.size, x.data, scale.data, offset.data, mean, var,
           y.data, y.size, f.inner, max(f.features, 1), xla_epsilon(epsilon, et),
           type_params(x.et), type_params(scale.et))
    return y, _rounded(mean, f.features, et), _rounded(var, f.features, et)


@functools.cache
def _grad_sums_kernel(cx, cp):
    lx, lp = LOAD[cx], LOAD[cp]

    @cuda.jit
    def k(x, dy, mean, sum_dy, sum_dy_c, features, inner, outer, px, pp):
        c = cuda.grid(1)
        step = cuda.gridsize(1)
        while c < features:
            m = np.float64(lp(mean[c], pp))
            s1 = np.float64(0.0)
            s2 = np.float64(0.0)
            for o in range(outer):
                for j in range(inner):
                    at = (o * features + c) * inner + j
                    g = np.float64(lx(dy[at], px))
                    s1 += g
                    s2 += g * (np.float64(lx(x[at], px)) - m)
            sum_dy[c] = s1
            sum_dy_c[c] = s2
            c += step

    return k


@functools.cache
def _grad_kernel(cx, cp):
    lx, lp, store = LOAD[cx], LOAD[cp], STORE[cx]

    @cuda.jit
    def k(x, dy, scale, mean, var, sum_dy, sum_dy_c, out, n, inner, features, count, eps,
          px, pp):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            c = (i // inner) % features
            var_eps = np.float64(lp(var[c], pp)) + eps
            inv = 1.0 / _sqrt(var_eps)
            if count > 0:
                factor = np.float64(lp(scale[c], pp)) * inv / np.float64(count)
            else:
                factor = inv * np.float64(np.nan)
            centred = np.float64(lx(x[i], px)) - np.float64(lp(mean[c], pp))
            g = factor * (np.float64(count) * np.float64(lx(dy[i], px)) - sum_dy[c]
                          - centred * (sum_dy_c[c] / var_eps))
            out[i] = store(g, px)
            i += step

    return k


@functools.cache
def _grad_scale_kernel(cls, cp):
    store, lp = STORE[cls], LOAD[cp]

    @cuda.jit
    def k(sum_dy, sum_dy_c, var, gscale, goffset, features, eps, p, pp):
        c = cuda.grid(1)
        step = cuda.gridsize(1)
        while c < features:
            inv = 1.0 / _sqrt(np.float64(lp(var[c], pp)) + eps)
            gscale[c] = store(sum_dy_c[c] * inv, p)
            goffset[c] = store(sum_dy[c], p)
            c += step

    return k


@gpu_op("batch-norm-grad")
def batch_norm_grad(x, scale, mean, variance, dy, *, shape, epsilon, feature_index):
    et = shape.elements[0].element_type
    if x.et.is_complex:
        if dy.shape != x.shape:
            raise HloEvalError("batch-norm-grad: grad_output must have the operand's shape")
        return _complex_grad(x, scale, mean, variance, dy, et, epsilon, int(feature_index))
    cx, cp = _check_types("batch-norm-grad", x, et, (scale, mean, variance))
    if dy.et != x.et or dy.shape != x.shape:
        raise GpuFallback("batch-norm-grad whose grad_output differs from the operand")
    f = _Features(x, int(feature_index))
    sum_dy = cuda.device_array(max(f.features, 1), dtype=np.float64)
    sum_dy_c = cuda.device_array(max(f.features, 1), dtype=np.float64)
    launch(_grad_sums_kernel(cx, cp), f.features, x.data, dy.data, mean.data, sum_dy, sum_dy_c,
           f.features, f.inner, f.outer, type_params(x.et), type_params(scale.et))
    eps = xla_epsilon(epsilon, et)
    gx = empty(x.shape, et)
    launch(_grad_kernel(cx, cp), gx.size, x.data, dy.data, scale.data, mean.data, variance.data,
           sum_dy, sum_dy_c, gx.data, gx.size, f.inner, max(f.features, 1), f.count, eps,
           type_params(x.et), type_params(scale.et))
    gscale, goffset = empty((f.features,), et), empty((f.features,), et)
    launch(_grad_scale_kernel(type_class(et), cp), f.features, sum_dy, sum_dy_c, variance.data,
           gscale.data, goffset.data, f.features, eps, type_params(et), type_params(scale.et))
    return gx, gscale, goffset


# ----------------------------------------------------------------- complex batch norm
#
# The verifier takes real floats only; an unverified module with complex operands runs
# the CPU's formulas in c128 (numpy's complex arithmetic), so here in complex f64 scalars
# read from and written to interleaved parts, rounded once to the element type.

_csqrt = np.sqrt if SIMULATOR else cmath.sqrt


@cuda.jit(device=True)
def _cget(a, i):
    return complex(np.float64(a[2 * i]), np.float64(a[2 * i + 1]))


@cuda.jit(device=True)
def _cput(a, i, z):
    a[2 * i] = z.real
    a[2 * i + 1] = z.imag


@cuda.jit
def _c_moments(x, mean, var, features, inner, outer, count):
    """Per feature: the mean and the biased variance ``mean((x - mean)^2)`` in c128
    (``mean``/``var``: c128 parts), NaN when the feature has no elements."""
    c = cuda.grid(1)
    step = cuda.gridsize(1)
    while c < features:
        total = complex(0.0, 0.0)
        for o in range(outer):
            for j in range(inner):
                total += _cget(x, (o * features + c) * inner + j)
        if count > 0:
            m = complex(total.real / count, total.imag / count)
        else:
            m = complex(np.nan, np.nan)
        sq = complex(0.0, 0.0)
        for o in range(outer):
            for j in range(inner):
                d = _cget(x, (o * features + c) * inner + j) - m
                sq += d * d
        _cput(mean, c, m)
        if count > 0:
            _cput(var, c, complex(sq.real / count, sq.imag / count))
        else:
            _cput(var, c, complex(np.nan, np.nan))
        c += step


@cuda.jit
def _c_normalize(x, scale, offset, mean, var, out, n, inner, features, eps):
    """``(x - mean_c) * (scale_c / sqrt(var_c + eps)) + offset_c`` in c128."""
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < n:
        c = (i // inner) % features
        inv = 1.0 / _csqrt(_cget(var, c) + eps)
        y = (_cget(x, i) - _cget(mean, c)) * (inv * _cget(scale, c)) + _cget(offset, c)
        _cput(out, i, y)
        i += step


@cuda.jit
def _c_grad_sums(x, dy, mean, sum_dy, sum_dy_c, features, inner, outer):
    c = cuda.grid(1)
    step = cuda.gridsize(1)
    while c < features:
        m = _cget(mean, c)
        s1 = complex(0.0, 0.0)
        s2 = complex(0.0, 0.0)
        for o in range(outer):
            for j in range(inner):
                at = (o * features + c) * inner + j
                g = _cget(dy, at)
                s1 += g
                s2 += g * (_cget(x, at) - m)
        _cput(sum_dy, c, s1)
        _cput(sum_dy_c, c, s2)
        c += step


@cuda.jit
def _c_grad(x, dy, scale, mean, var, sum_dy, sum_dy_c, out, n, inner, features, count, eps):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < n:
        c = (i // inner) % features
        var_eps = _cget(var, c) + eps
        inv = 1.0 / _csqrt(var_eps)
        if count > 0:
            f = _cget(scale, c) * inv
            factor = complex(f.real / count, f.imag / count)
        else:
            factor = inv * np.nan
        centred = _cget(x, i) - _cget(mean, c)
        g = factor * (count * _cget(dy, i) - _cget(sum_dy, c)
                      - centred * (_cget(sum_dy_c, c) / var_eps))
        _cput(out, i, g)
        i += step


@cuda.jit
def _c_grad_scale(sum_dy, sum_dy_c, var, gscale, goffset, features, eps):
    c = cuda.grid(1)
    step = cuda.gridsize(1)
    while c < features:
        inv = 1.0 / _csqrt(_cget(var, c) + eps)
        _cput(gscale, c, _cget(sum_dy_c, c) * inv)
        _cput(goffset, c, _cget(sum_dy, c))
        c += step


@cuda.jit
def _c_round(src, dst, n):
    """Parts ``src`` (f64) stored into ``dst`` (the element type's parts): one rounding."""
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < n:
        dst[i] = src[i]
        i += step


def _c_check(opname, x, et, params):
    """Complex batch norm: one element type throughout (what the CPU's formulas assume;
    mixed types are the safety net's)."""
    if x.et != et or any(v.et != et for v in params) or et.name not in ("c64", "c128"):
        raise GpuFallback(f"{opname} of mixed complex types has no GPU kernel")


def _c_eps(epsilon) -> float:
    """epsilon as the CPU takes it for complex types: the text value rounded to f32."""
    return float(np.array([float(epsilon)], np.float64).astype(np.float32)[0])


def _c_wide(n):
    """A c128 work vector of ``n`` elements (interleaved f64 parts)."""
    return cuda.device_array(2 * max(n, 1), dtype=np.float64)


def _c_rounded(wide, n, et):
    out = empty((n,), et)
    launch(_c_round, 2 * n, wide, parts(out), 2 * n)
    return out


def _complex_inference(x, scale, offset, mean, variance, et, epsilon, fi):
    _c_check("batch-norm-inference", x, et, (scale, offset, mean, variance))
    f = _Features(x, fi)
    out = empty(x.shape, et)
    launch(_c_normalize, out.size, parts(x), parts(scale), parts(offset), parts(mean),
           parts(variance), parts(out), out.size, f.inner, max(f.features, 1), _c_eps(epsilon))
    return out


def _complex_training(x, scale, offset, et, epsilon, fi):
    _c_check("batch-norm-training", x, et, (scale, offset))
    f = _Features(x, fi)
    mean, var = _c_wide(f.features), _c_wide(f.features)
    launch(_c_moments, f.features, parts(x), mean, var, f.features, f.inner, f.outer, f.count)
    y = empty(x.shape, et)
    launch(_c_normalize, y.size, parts(x), parts(scale), parts(offset), mean, var, parts(y),
           y.size, f.inner, max(f.features, 1), _c_eps(epsilon))
    return y, _c_rounded(mean, f.features, et), _c_rounded(var, f.features, et)


def _complex_grad(x, scale, mean, variance, dy, et, epsilon, fi):
    _c_check("batch-norm-grad", x, et, (scale, mean, variance, dy))
    f = _Features(x, fi)
    sum_dy, sum_dy_c = _c_wide(f.features), _c_wide(f.features)
    launch(_c_grad_sums, f.features, parts(x), parts(dy), parts(mean), sum_dy, sum_dy_c,
           f.features, f.inner, f.outer)
    eps = _c_eps(epsilon)
    gx = empty(x.shape, et)
    launch(_c_grad, gx.size, parts(x), parts(dy), parts(scale), parts(mean), parts(variance),
           sum_dy, sum_dy_c, parts(gx), gx.size, f.inner, max(f.features, 1), f.count, eps)
    gscale, goffset = _c_wide(f.features), _c_wide(f.features)
    launch(_c_grad_scale, f.features, sum_dy, sum_dy_c, parts(variance), gscale, goffset,
           f.features, eps)
    return gx, _c_rounded(gscale, f.features, et), _c_rounded(goffset, f.features, et)


# ----------------------------------------------------------------- fft
#
# numpy.fft's passes in its order (last axis first), each a direct DFT on the device in
# f64 parts: one thread per output element sums its whole line, the twiddle of
# ``j * k`` taken mod ``n`` first (``cos``/``sin`` of an angle below 2 pi), so the result
# differs from pocketfft's by rounding only (n terms in f64: far inside the envelope
# after rounding to c64/f32; about n ulps of sum |x| in c128/f64). Work buffers hold
# interleaved (real, imaginary) f64 parts; the result is rounded once at the end.

_TWO_PI = 2.0 * math.pi


@functools.cache
def _real_to_parts_kernel(cx):
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
def _widen_parts_kernel(x, out, n):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < n:
        out[i] = np.float64(x[i])
        i += step


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


@functools.cache
def _parts_out_kernel(narrow_to_f32):
    @cuda.jit
    def k(src, out, n):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            out[i] = np.float32(src[i]) if narrow_to_f32 else src[i]
            i += step

    return k


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
                launch(_parts_out_kernel(et.name == "c64"), flat.size,
                       cuda.to_device(np.zeros(flat.size, np.float64)), flat, flat.size)
            else:
                launch(_round_kernel(type_class(et)), out.size,
                       cuda.to_device(np.zeros(out.size, np.float64)), out.data, out.size,
                       type_params(et), 1)
        return out
    buf = cuda.device_array(2 * x.size, dtype=np.float64)
    if x.et.is_complex:
        src = parts(x)
        launch(_widen_parts_kernel, src.size, src, buf, src.size)
    else:
        launch(_real_to_parts_kernel(cx), x.size, x.data, buf, x.size, type_params(x.et))
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
        launch(_round_kernel(type_class(et)), n, real, out.data, n, type_params(et), 1)
        return out
    if cur != dims:
        raise HloEvalError(f"fft result has dims {list(cur)}, the instruction says "
                           f"{list(dims)}")
    if not et.is_complex:
        raise HloEvalError(f"{kind} gives a complex result, the instruction says {et.name}")
    flat = parts(out)
    launch(_parts_out_kernel(et.name == "c64"), flat.size, buf, flat, flat.size)
    return out


# ----------------------------------------------------------------- cholesky, triangular-solve
#
# One thread per batch matrix, in f64 parts (real types keep their imaginary parts 0 and
# never read them), the CPU's algorithms step by step: the same operations in the same
# order except that sums run sequentially (numpy's einsum/sum may pair terms), so
# results agree after rounding to the element type up to the envelope's accumulation
# freedom.


def _wide_parts(x):
    """``x``'s exact values as interleaved f64 (real, imaginary) parts on the device."""
    buf = cuda.device_array(max(2 * x.size, 1), dtype=np.float64)
    if x.et.is_complex:
        src = parts(x)
        launch(_widen_parts_kernel, src.size, src, buf, src.size)
    else:
        launch(_real_to_parts_kernel(type_class(x.et)), x.size, x.data, buf, x.size,
               type_params(x.et))
    return buf


def _rounded_parts(buf, out):
    """Round the f64 parts ``buf`` once into ``out`` (complex: both parts; real: the real)."""
    if out.et.is_complex:
        flat = parts(out)
        launch(_parts_out_kernel(out.et.name == "c64"), flat.size, buf, flat, flat.size)
    else:
        launch(_round_kernel(type_class(out.et)), out.size, buf, out.data, out.size,
               type_params(out.et), 2)
    return out


def _linalg_types(opname, et, *operands):
    for v in operands:
        c = type_class(v.et)
        if c not in ("f32", "f64", "narrow", "complex") or \
                (c == "complex" and v.et.name not in ("c64", "c128")):
            raise GpuFallback(f"{opname} of {v.et.name} has no GPU kernel")
    if type_class(et) not in ("f32", "f64", "narrow", "complex"):
        raise GpuFallback(f"{opname} to {et.name} has no GPU kernel")


#: CholeskyExpander's block size: blocks of one column take only the real root.
_BLOCK = 128


@functools.cache
def _cholesky_kernel(cplx):
    @cuda.jit
    def k(a, out, batch, n, low):
        b = cuda.grid(1)
        step = cuda.gridsize(1)
        nan = np.float64(np.nan)
        while b < batch:
            base = 2 * b * n * n
            for t in range(2 * n * n):
                out[base + t] = 0.0
            error = False
            for j in range(n):
                # L[i, k] lives at out[(i, k)] for lower, at out[(k, i)] for upper
                d = a[base + 2 * (j * n + j)]
                for kk in range(j):
                    at = base + 2 * ((j * n + kk) if low else (kk * n + j))
                    d -= out[at] * out[at] + (out[at + 1] * out[at + 1] if cplx else 0.0)
                root = _sqrt(d)
                if root != root:
                    error = True
                dj = base + 2 * (j * n + j)
                if j == n - 1 and n % _BLOCK == 1:
                    out[dj] = root
                    out[dj + 1] = 0.0
                else:
                    out[dj] = d / root
                    out[dj + 1] = a[dj + 1] / root if cplx else 0.0
                for i in range(j + 1, n):
                    src = base + 2 * ((i * n + j) if low else (j * n + i))
                    br = a[src]
                    bi = a[src + 1] if cplx else 0.0
                    for kk in range(j):
                        li = base + 2 * ((i * n + kk) if low else (kk * n + i))
                        lj = base + 2 * ((j * n + kk) if low else (kk * n + j))
                        if cplx:  # L[i, k] * conj(L[j, k])
                            br -= out[li] * out[lj] + out[li + 1] * out[lj + 1]
                            bi -= out[li + 1] * out[lj] - out[li] * out[lj + 1]
                        else:
                            br -= out[li] * out[lj]
                    out[src] = br / root
                    out[src + 1] = bi / root if cplx else 0.0
            if error:
                for t in range(n * n):
                    out[base + 2 * t] = nan
                    out[base + 2 * t + 1] = 0.0
            b += step

    return k


@gpu_op("cholesky")
def cholesky(a, *, shape, lower=True):
    et = shape.element_type
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise HloEvalError(f"cholesky needs batched square matrices, got {list(a.shape)}")
    _linalg_types("cholesky", et, a)
    n = a.shape[-1]
    out = empty(tuple(shape.dims), et)
    if out.size != a.size:
        raise HloEvalError(f"cholesky result {list(shape.dims)} differs from the operand "
                           f"{list(a.shape)}")
    low = True if lower is None else bool(lower)
    batch = a.size // (n * n) if n else 0
    buf = cuda.device_array(max(2 * a.size, 1), dtype=np.float64)
    if a.size:
        launch(_cholesky_kernel(a.et.is_complex), batch, _wide_parts(a), buf, batch, n, low)
    return _rounded_parts(buf, out)


@cuda.jit(device=True)
def _tri_entry(a, base, n, r, c, low, unit, trans, adjoint):
    """Entry (r, c) of op(T): the read triangle of ``a`` (unit diagonal substituted)."""
    if trans:
        r, c = c, r
    if r == c and unit:
        return 1.0, 0.0
    if r == c or (low and c < r) or (not low and c > r):
        at = base + 2 * (r * n + c)
        return a[at], (-a[at + 1] if adjoint else a[at + 1])
    return 0.0, 0.0


@functools.cache
def _triangular_solve_kernel(cplx):
    @cuda.jit
    def k(a, bm, inv, out, batch, n, rows, cols, left, low, unit, trans, adjoint):
        b = cuda.grid(1)
        step = cuda.gridsize(1)
        m_lower = low != trans
        while b < batch:
            ab = 2 * b * n * n
            # inverse of op(T) by substitution on the identity (XLA:CPU's one block)
            for s in range(n):
                i = s if m_lower else n - 1 - s
                dr, di = _tri_entry(a, ab, n, i, i, low, unit, trans, adjoint)
                for kk in range(n):
                    accr = 1.0 if i == kk else 0.0
                    acci = 0.0
                    lo = 0 if m_lower else i + 1
                    hi = i if m_lower else n
                    for j in range(lo, hi):
                        mr, mi = _tri_entry(a, ab, n, i, j, low, unit, trans, adjoint)
                        at = ab + 2 * (j * n + kk)
                        xr = inv[at]
                        xi = inv[at + 1]
                        if cplx:
                            accr -= mr * xr - mi * xi
                            acci -= mr * xi + mi * xr
                        else:
                            accr -= mr * xr
                    at = ab + 2 * (i * n + kk)
                    if cplx:
                        qr, qi = smith(accr, acci, dr, di)
                    else:
                        qr = accr / dr
                        qi = 0.0
                    inv[at] = qr
                    inv[at + 1] = qi
            # x = inv b (left) or b inv (right), every term summed (no zero skipping)
            bb = 2 * b * rows * cols
            for i in range(rows):
                for kk in range(cols):
                    sr = 0.0
                    si = 0.0
                    for j in range(n):
                        if left:
                            p = ab + 2 * (i * n + j)
                            q = bb + 2 * (j * cols + kk)
                        else:
                            p = bb + 2 * (i * cols + j)
                            q = ab + 2 * (j * n + kk)
                        src = inv if left else bm
                        oth = bm if left else inv
                        if cplx:
                            sr += src[p] * oth[q] - src[p + 1] * oth[q + 1]
                            si += src[p] * oth[q + 1] + src[p + 1] * oth[q]
                        else:
                            sr += src[p] * oth[q]
                    out[bb + 2 * (i * cols + kk)] = sr
                    out[bb + 2 * (i * cols + kk) + 1] = si
            b += step

    return k


@gpu_op("triangular-solve")
def triangular_solve(a, b, *, shape, left_side=False, lower=False, unit_diagonal=False,
                     transpose_a="NO_TRANSPOSE"):
    et = shape.element_type
    check_square(a.shape)
    trans = transpose_mode(transpose_a)
    n = a.shape[-1]
    if b.ndim < 2 or b.shape[:-2] != a.shape[:-2]:
        raise HloEvalError(f"triangular-solve batch dims differ: {list(a.shape)} vs "
                           f"{list(b.shape)}")
    _linalg_types("triangular-solve", et, a, b)
    out = empty(tuple(shape.dims), et)
    if out.size != b.size:
        raise HloEvalError(f"triangular-solve result {list(shape.dims)} differs from b "
                           f"{list(b.shape)}")
    buf = cuda.device_array(max(2 * b.size, 1), dtype=np.float64)
    if a.size == 0 or b.size == 0:
        launch(_widen_parts_kernel, 2 * b.size, cuda.to_device(np.zeros(max(2 * b.size, 1))),
               buf, 2 * b.size)
        return _rounded_parts(buf, out)
    batch = a.size // (n * n)
    left = bool(left_side)
    rows, cols = b.shape[-2], b.shape[-1]
    if (rows if left else cols) != n:
        raise HloEvalError(f"triangular-solve: b {list(b.shape)} does not fit a {n}x{n} "
                           f"matrix on the {'left' if left else 'right'}")
    inv = cuda.device_array(2 * a.size, dtype=np.float64)
    cplx = a.et.is_complex or b.et.is_complex
    launch(_triangular_solve_kernel(cplx), batch, _wide_parts(a), _wide_parts(b), inv, buf,
           batch, n, rows, cols, left, bool(lower), bool(unit_diagonal), trans != "NO_TRANSPOSE",
           trans == "ADJOINT")
    return _rounded_parts(buf, out)
