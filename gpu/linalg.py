"""``batch-norm-inference`` on the GPU (mirrors ``evaluator/linalg.py``, whose docstring
fixes the formula): one thread per element computes, in f64,
``(x - mean_c) * (scale_c / sqrt(variance_c + eps)) + offset_c`` for its feature ``c``
and rounds once to the element type, with ``epsilon`` as XLA holds it (the text value
rounded to f32, then to the element type). The same operations in the same order as
the CPU, so the results are bit-exact (``sqrt`` is correctly rounded on both).
``batch-norm-training``/``-grad`` (per-feature sums), ``cholesky`` and
``triangular-solve`` still run on the CPU.
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
