"""``reduce`` on the GPU (mirrors ``evaluator/reduce.py``).

A single-input reduce whose reducer is one commutative op of its two parameters
(``add``, ``multiply``, ``maximum``, ``minimum``, ``and``, ``or``, ``xor``;
``reduce.simple_reducer``) runs one GPU thread per output element, walking the reduced
elements in the CPU's order (row-major over ``dimensions`` as given), then combining
with the init value: float ``add``/``multiply`` accumulate in f64 and round once to
the result type; integers wrap in int64/uint64; ``maximum``/``minimum`` propagate NaN
and order -0 < +0. The CPU sums with numpy's pairwise summation, this kernel
sequentially: both in f64, so results agree after rounding except in rare near-ties
(the comparison policy's accumulation bound covers the difference). Variadic reduces,
other reducers and complex types run on the CPU.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from hloref.evaluator.reduce import simple_reducer
from hloref.shapes import TupleShape

from .device import LOAD, STORE, empty, type_class, type_params
from .elementwise import _add, _and_pred, _imax, _imin, _kind, _mul, _or_pred, _xor, fmax, fmin, launch
from .registry import GpuFallback, gpu_op
from .shape_ops import int_tuple as _t, row_major_strides

OP_FAMILY = True


@cuda.jit(device=True)
def _widen_f64(x):
    return np.float64(x)


@cuda.jit(device=True)
def _keep(x):
    return x


_OPS = {
    "float": {"add": (_add, _widen_f64), "multiply": (_mul, _widen_f64),
              "maximum": (fmax, _keep), "minimum": (fmin, _keep)},
    "int": {"add": (_add, _keep), "multiply": (_mul, _keep), "maximum": (_imax, _keep),
            "minimum": (_imin, _keep), "and": (_and_pred, _keep), "or": (_or_pred, _keep),
            "xor": (_xor, _keep)},
    "pred": {"add": (_or_pred, _keep), "multiply": (_and_pred, _keep),
             "maximum": (_or_pred, _keep), "minimum": (_and_pred, _keep),
             "and": (_and_pred, _keep), "or": (_or_pred, _keep), "xor": (_xor, _keep)},
}

def combiner(kind: str, et):
    """``(op, widen)``: the device function of the recognised reducer ``kind``
    (``reduce.simple_reducer``) on element type ``et``, and the widening applied to each
    value before it (float add/multiply accumulate in f64); ``GpuFallback`` if none."""
    k = _kind(et)
    table = _OPS.get("int" if k in ("sint", "uint") else k)
    if table is None or kind not in table:
        raise GpuFallback(f"{kind} of {et.name} has no GPU kernel")
    return table[kind]


@functools.cache  # one compiled kernel per combination
def _kernel(op, widen, cls):
    load, store = LOAD[cls], STORE[cls]

    @cuda.jit
    def k(x, init, out, n, kept_dims, kept_strides, red_dims, red_strides, total, p):
        o = cuda.grid(1)
        step = cuda.gridsize(1)
        while o < n:
            rem = o
            base = 0
            for d in range(len(kept_dims) - 1, -1, -1):
                q = rem // kept_dims[d]
                base += (rem - q * kept_dims[d]) * kept_strides[d]
                rem = q
            start = widen(load(init[0], p))
            if total == 0:
                out[o] = store(start, p)
            else:
                acc = widen(load(x[base], p))  # reduced index 0 is offset 0
                for r in range(1, total):
                    rem = r
                    off = base
                    for d in range(len(red_dims) - 1, -1, -1):
                        q = rem // red_dims[d]
                        off += (rem - q * red_dims[d]) * red_strides[d]
                        rem = q
                    acc = op(acc, widen(load(x[off], p)))
                out[o] = store(op(acc, start), p)
            o += step

    return k


@gpu_op("reduce", note="variadic reduces, other reducers, complex: cpu fallback")
def reduce(*operands, shape, dimensions, to_apply):
    if len(operands) != 2 or isinstance(shape, TupleShape):
        raise GpuFallback("variadic reduce")
    x, init = operands
    kind = simple_reducer(to_apply.computation)
    if kind is None:
        raise GpuFallback("the reducer is not a single commutative op of its parameters")
    et = shape.element_type
    if x.et != et:
        raise GpuFallback("reduce whose input and result types differ")
    op, widen = combiner(kind, et)
    dims = tuple(dimensions)
    kept = [d for d in range(x.ndim) if d not in dims]
    xs = row_major_strides(x.shape)
    out = empty(shape.dims, et)
    total = 1
    for d in dims:
        total *= x.shape[d]
    launch(_kernel(op, widen, type_class(et)), out.size, x.data, init.data, out.data, out.size,
           _t(x.shape[d] for d in kept), _t(xs[d] for d in kept) if kept else (0,),
           _t(x.shape[d] for d in dims), _t(xs[d] for d in dims) if dims else (0,),
           total, type_params(et))
    return out
