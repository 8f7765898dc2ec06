"""``dot`` with general dimension numbers on the GPU (mirrors ``evaluator/dot.py``).

One thread per output element (batch dims, lhs free dims, rhs free dims), looping over
the contracting dimensions in row-major order:

* float results: operands taken exactly in f64 (narrow floats decoded), products
  summed in f64, the sum rounded once to the result type. The CPU sums with BLAS
  ``dgemm`` (blocked order) and a GPU may fuse multiply-adds: both are f64
  accumulations in different orders, covered by the comparison policy's
  accumulation bound;
* integer results: operands of another type converted (wrapped) to the result type on
  the device, as the CPU does (``s8 x s8 -> s32`` matmuls), products summed in
  int64/uint64 with wrap-around, wrapped to the result width;
* pred results: OR of ANDs;
* integer or pred operands of a float result are converted to the result type first;
* complex results (``_complex_kernel``): operands as c128 parts (c64 parts and real
  float operands read exactly, integer or pred operands rounded to the result type
  first, as the CPU's ``astype``), products ``(ar br - ai bi, ar bi + ai br)`` summed in
  f64 parts, rounded once: the CPU sums in c128 in another order (the accumulation
  bound covers it).
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from hloref.evaluator.dot import integer_result_in_f32

from .device import LOAD, STORE, empty, type_class, type_params
from .convert import convert_array
from .elementwise import element_kind, launch
from .registry import GpuFallback, gpu_op
from .shape_ops import int_tuple as _t, row_major_strides, strided_offsets2


@cuda.jit(device=True)
def _fma_f(acc, a, b):
    return acc + np.float64(a) * np.float64(b)


@cuda.jit(device=True)
def _fma_i(acc, a, b):
    return acc + a * b


@cuda.jit(device=True)
def _fma_p(acc, a, b):
    return acc | (a & b)


@cuda.jit(device=True)
def _zero_f(x):
    return np.float64(0.0)


@cuda.jit(device=True)
def _zero_s(x):
    return np.int64(0)


@cuda.jit(device=True)
def _zero_u(x):
    return np.uint64(0)


@functools.cache  # one element reader per type class
def reader(cls):
    """``read(array, i, p)``: the compute value of element ``i`` (complex: the f64 parts
    of the interleaved storage, as a pair)."""
    if cls == "complex":
        @cuda.jit(device=True)
        def read(arr, i, p):
            return np.float64(arr[2 * i]), np.float64(arr[2 * i + 1])
    else:
        load = LOAD[cls]

        @cuda.jit(device=True)
        def read(arr, i, p):
            return load(arr[i], p)
    return read


@functools.cache  # one element writer per type class
def writer(cls):
    if cls == "complex":
        @cuda.jit(device=True)
        def write(arr, i, v, p):
            arr[2 * i] = v[0]
            arr[2 * i + 1] = v[1]
    else:
        store = STORE[cls]

        @cuda.jit(device=True)
        def write(arr, i, v, p):
            arr[i] = store(v, p)
    return write


@cuda.jit(device=True)
def fma_complex(acc, a, b):
    """Complex multiply-add in f64 parts (the CPU: c128 products and sums)."""
    return (acc[0] + (a[0] * b[0] - a[1] * b[1]), acc[1] + (a[0] * b[1] + a[1] * b[0]))


@cuda.jit(device=True)
def zero_complex(x):
    return np.float64(0.0), np.float64(0.0)


@cuda.jit(device=True)
def add_complex(a, b):
    return a[0] + b[0], a[1] + b[1]


def storage(x):
    """The flat storage a kernel reads with :func:`reader`: complex values as their
    interleaved parts."""
    from .complex_elementwise import parts
    return parts(x) if x.et.is_complex else x.data


@functools.cache  # one compiled kernel per combination
def _kernel(fma, zero, ca, cb, co):
    la, lb, store = LOAD[ca], LOAD[cb], STORE[co]

    @cuda.jit
    def k(a, b, out, n, odims, oa, ob, kdims, ka, kb, total, pa, pb, po):
        o = cuda.grid(1)
        step = cuda.gridsize(1)
        while o < n:
            base_a, base_b = strided_offsets2(o, odims, oa, ob, 0, 0)
            acc = zero(0)
            for r in range(total):
                offa, offb = strided_offsets2(r, kdims, ka, kb, base_a, base_b)
                acc = fma(acc, la(a[offa], pa), lb(b[offb], pb))
            out[o] = store(acc, po)
            o += step

    return k


@cuda.jit
def _complex_kernel(a, b, out, n, odims, oa, ob, kdims, ka, kb, total):
    """The real kernel's index walk over complex parts: ``a``, ``b``, ``out`` are the
    flat (real, imaginary) part arrays."""
    o = cuda.grid(1)
    step = cuda.gridsize(1)
    while o < n:
        base_a, base_b = strided_offsets2(o, odims, oa, ob, 0, 0)
        re = np.float64(0.0)
        im = np.float64(0.0)
        for r in range(total):
            offa, offb = strided_offsets2(r, kdims, ka, kb, base_a, base_b)
            ar = np.float64(a[2 * offa])
            ai = np.float64(a[2 * offa + 1])
            br = np.float64(b[2 * offb])
            bi = np.float64(b[2 * offb + 1])
            re += ar * br - ai * bi
            im += ar * bi + ai * br
        out[2 * o] = re
        out[2 * o + 1] = im
        o += step


def complex_operand(x, et):
    """A dot operand of complex result ``et`` as a complex device array: complex as is,
    real floats exactly (c128), integers and pred rounded to ``et`` (the CPU's astype)."""
    from hloref.types import C128
    from .convert import real_to_complex
    kind = element_kind(x.et)
    if kind == "complex":
        return x
    if kind == "float":
        return real_to_complex(x, C128)
    if kind in ("sint", "uint", "pred"):
        return real_to_complex(x, et)
    raise GpuFallback(f"dot of {x.et.name} to {et.name} has no GPU kernel")


#: XLA's float-operand, integer-result rewrite (evaluator/dot.py), on device arrays.
on_device_integer_result_in_f32 = integer_result_in_f32(lambda x: x.et, convert_array)


def accumulation(opcode: str, lhs, rhs, et, *, pred: bool = True):
    """``(lhs, rhs, multiply-add, zero)`` of a dot-like ``opcode`` with result type ``et``:
    the operands as the CPU takes them (integer or pred operands of another type than an
    integer or pred result, and integer/pred operands of a float result, converted to
    ``et`` on the device; float operands are read exactly), and the accumulation's device
    functions. Raises GpuFallback for the combinations without a kernel."""
    kind = element_kind(et)
    real = ("float", "sint", "uint", "pred")
    if element_kind(lhs.et) not in real or element_kind(rhs.et) not in real:
        raise GpuFallback(f"{opcode} of {lhs.et.name} and {rhs.et.name} has no GPU kernel")
    if kind == "float":
        lhs, rhs = (x if element_kind(x.et) == "float" else convert_array(x, et) for x in (lhs, rhs))
        return lhs, rhs, _fma_f, _zero_f
    if kind in ("sint", "uint") or (kind == "pred" and pred):
        lhs, rhs = (x if x.et == et else convert_array(x, et) for x in (lhs, rhs))
        if kind == "pred":
            return lhs, rhs, _fma_p, _zero_s
        return lhs, rhs, _fma_i, (_zero_s if kind == "sint" else _zero_u)
    raise GpuFallback(f"{opcode} with a {et.name} result has no GPU kernel")


@gpu_op("dot")
@on_device_integer_result_in_f32
def dot(lhs, rhs, *, shape, lhs_batch_dims=(), rhs_batch_dims=(), lhs_contracting_dims=(),
        rhs_contracting_dims=(), **_):
    et = shape.element_type
    cplx = et.is_complex
    if cplx:
        if et.name not in ("c64", "c128"):
            raise GpuFallback(f"dot to {et.name} has no GPU kernel")
        lhs, rhs = complex_operand(lhs, et), complex_operand(rhs, et)
    else:
        lhs, rhs, fma, zero = accumulation("dot", lhs, rhs, et)
    lb, rb = list(lhs_batch_dims), list(rhs_batch_dims)
    lc, rc = list(lhs_contracting_dims), list(rhs_contracting_dims)
    ls, rs = row_major_strides(lhs.shape), row_major_strides(rhs.shape)
    lfree = [d for d in range(lhs.ndim) if d not in lb and d not in lc]
    rfree = [d for d in range(rhs.ndim) if d not in rb and d not in rc]
    odims = [lhs.shape[d] for d in lb] + [lhs.shape[d] for d in lfree] + [rhs.shape[d] for d in rfree]
    oa = [ls[d] for d in lb] + [ls[d] for d in lfree] + [0] * len(rfree)
    ob = [rs[d] for d in rb] + [0] * len(lfree) + [rs[d] for d in rfree]
    kdims = [lhs.shape[d] for d in lc]
    total = 1
    for d in kdims:
        total *= d
    out = empty(shape.dims, et)
    if tuple(out.shape) != tuple(odims):
        from hloref.errors import HloEvalError
        raise HloEvalError(f"dot computed dimensions {odims}, the instruction says {list(out.shape)}")
    if cplx:
        from .complex_elementwise import parts
        launch(_complex_kernel, out.size, parts(lhs), parts(rhs), parts(out), out.size,
               _t(odims), _t(oa) if oa else (0,), _t(ob) if ob else (0,), _t(kdims),
               _t(ls[d] for d in lc) if lc else (0,), _t(rs[d] for d in rc) if rc else (0,),
               total)
        return out
    k = _kernel(fma, zero, type_class(lhs.et), type_class(rhs.et), type_class(et))
    launch(k, out.size, lhs.data, rhs.data, out.data, out.size, _t(odims),
           _t(oa) if oa else (0,), _t(ob) if ob else (0,), _t(kdims),
           _t(ls[d] for d in lc) if lc else (0,), _t(rs[d] for d in rc) if rc else (0,),
           total, type_params(lhs.et), type_params(rhs.et), type_params(et))
    return out
