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
``cholesky`` and ``triangular-solve`` still run on the CPU.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numba import cuda

from hloref.errors import HloEvalError
from hloref.evaluator.numeric import from_float64, to_float64

from .device import LOAD, SIMULATOR, STORE, empty, type_class, type_params
from .elementwise import launch
from .registry import GpuFallback, gpu_op

OP_FAMILY = True

_sqrt = np.sqrt if SIMULATOR else math.sqrt


def xla_epsilon(epsilon, et) -> float:
    """``epsilon`` as XLA uses it: a C++ float, converted to the element type."""
    eps32 = np.array([float(epsilon)], np.float64).astype(np.float32).astype(np.float64)
    return float(to_float64(from_float64(eps32, et))[0])


@functools.cache  # one kernel per (operand class, parameter class)
def _inference_kernel(cx, cp):
    lx, lp, store = LOAD[cx], LOAD[cp], STORE[cx]

    @cuda.jit
    def k(x, scale, offset, mean, var, out, n, inner, features, eps, px, pp):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            c = (i // inner) % features
            inv = 1.0 / _sqrt(np.float64(lp(var[c], pp)) + eps)
            y = (np.float64(lx(x[i], px)) - np.float64(lp(mean[c], pp))) * \
                (inv * np.float64(lp(scale[c], pp))) + np.float64(lp(offset[c], pp))
            out[i] = store(y, px)
            i += step

    return k


@gpu_op("batch-norm-inference", note="complex: cpu fallback")
def batch_norm_inference(x, scale, offset, mean, variance, *, shape, epsilon, feature_index):
    et = shape.element_type
    fi = int(feature_index)
    if not 0 <= fi < x.ndim:
        raise HloEvalError(f"feature_index={fi} out of range for a rank-{x.ndim} operand")
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
            inv = 1.0 / _sqrt(var[c] + eps)
            y = (np.float64(lx(x[i], px)) - mean[c]) * (inv * np.float64(lp(scale[c], pp))) \
                + np.float64(lp(offset[c], pp))
            out[i] = store(y, px)
            i += step

    return k


@functools.cache
def _round_kernel(cls):
    store = STORE[cls]

    @cuda.jit
    def k(src, out, n, p):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            out[i] = store(src[i], p)
            i += step

    return k


def _rounded(values, n, et):
    out = empty((n,), et)
    launch(_round_kernel(type_class(et)), n, values, out.data, n, type_params(et))
    return out


def _check_types(opname, x, et, params):
    cx = type_class(x.et)
    cp = type_class(params[0].et)
    if cx not in ("f32", "f64", "narrow") or cp not in ("f32", "f64", "narrow") or x.et != et \
            or any(v.et != params[0].et for v in params):
        raise GpuFallback(f"{opname} of {x.et.name} has no GPU kernel")
    return cx, cp


@gpu_op("batch-norm-training", note="complex: cpu fallback")
def batch_norm_training(x, scale, offset, *, shape, epsilon, feature_index):
    et = shape.elements[0].element_type
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


@gpu_op("batch-norm-grad", note="complex: cpu fallback")
def batch_norm_grad(x, scale, mean, variance, dy, *, shape, epsilon, feature_index):
    et = shape.elements[0].element_type
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
