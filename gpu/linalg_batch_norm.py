"""Batch norm on the GPU (mirrors the batch-norm ops of ``evaluator/linalg.py``, whose
docstring fixes the formula).

``batch-norm-inference``: one thread per element computes, in f64,
``(x - mean_c) * (scale_c / sqrt(variance_c + eps)) + offset_c`` for its feature ``c``
and rounds once to the element type, with ``epsilon`` as XLA holds it (the text value
rounded to f32, then to the element type). The same operations in the same order as
the CPU, so the results are bit-exact (``sqrt`` is correctly rounded on both).

``batch-norm-training`` and ``batch-norm-grad``: one thread per feature sums its
elements in f64 (two passes for the mean and the biased variance, as the CPU), then one
thread per element applies the CPU's formula in f64 and rounds once. The CPU sums with
numpy's pairwise summation, these kernels sequentially: both in f64, so results agree
after rounding except in rare near-ties (the accumulation bound covers them). Complex
batch norm (unverified modules only: the verifier takes real floats) runs the same
formulas in c128 scalars, as the CPU.
"""

from __future__ import annotations

import cmath
import functools
import math

import numpy as np
from numba import cuda

from hloref.errors import HloEvalError
from hloref.evaluator.linalg import xla_epsilon

from .complex_elementwise import parts
from .device import LOAD, SIMULATOR, STORE, empty, type_class, type_params
from .elementwise import launch
from .f64_buffers import round_kernel
from .registry import GpuFallback, gpu_op


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


def _rounded(values, n, et):
    out = empty((n,), et)
    launch(round_kernel(type_class(et)), n, values, out.data, n, type_params(et), 1)
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
