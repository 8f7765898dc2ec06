"""Bit-level conversions on the GPU: ``bitcast-convert``, ``reduce-precision``,
``stochastic-convert`` (mirrors ``evaluator/bitwise_convert.py``, whose docstring fixes
the semantics).

* :func:`to_bits` / :func:`from_bits` give, per element type, device functions between a
  storage value and its logical bit pattern as uint64 (sub-byte types at their width,
  pred as 0/1); ``bitcast-convert`` is one kernel over the result elements joining or
  splitting those patterns (little-endian pieces along a new minor dimension), and
  ``gpu/rng.py`` uses ``from_bits`` for its results.
* ``reduce-precision`` runs the CPU's scalar function ``reduce_precision_scalar``
  (compiled for the device by ``device.device_fn``) on the bit pattern: f16/bf16/f32/f64
  on their own patterns, fp8/fp4 widened exactly to f16 (f8e8m0fnu: f32), reduced there
  and rounded back, as XLA:CPU does.
* ``stochastic-convert``: float to signed integer, element by element, in f64.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from hloref.errors import HloEvalError
from hloref.evaluator.bitwise_convert import (check_stochastic_convert, reduce_precision_bits_of,
                                              reduce_precision_scalar, stochastic_limits)
from hloref.types import F16, F32

from .device import (LOAD, SIMULATOR, STORE, bits_f32, device_fn, empty, f32_bits, f64_bits,
                     floor64, signbit, type_class, type_params)
from .elementwise import apply, launch
from .registry import gpu_op


if SIMULATOR:
    def _bits_f64(b):
        return np.int64(b).view(np.float64)
else:  # pragma: no cover - needs a GPU
    from numba.cuda import libdevice

    def _bits_f64(b):
        return libdevice.longlong_as_double(np.int64(b))

bits_f64 = cuda.jit(device=True)(_bits_f64)
_reduce = device_fn(reduce_precision_scalar)


def _mask(bits: int) -> int:
    return (1 << bits) - 1 if bits < 64 else 0xFFFFFFFFFFFFFFFF


@functools.cache  # one device function per element type
def to_bits(et):
    """Device function ``(storage value, params) -> uint64`` logical bit pattern of ``et``."""
    cls = type_class(et)
    mask = np.uint64(_mask(et.bits))
    if cls == "pred":
        @cuda.jit(device=True)
        def f(x, p):
            return np.uint64(1) if x != 0 else np.uint64(0)
    elif cls == "f32":
        @cuda.jit(device=True)
        def f(x, p):
            return np.uint64(f32_bits(x))
    elif cls == "f64":
        @cuda.jit(device=True)
        def f(x, p):
            return np.uint64(f64_bits(x))
    elif cls == "sint":
        @cuda.jit(device=True)
        def f(x, p):
            return np.uint64(np.int64(x)) & mask
    elif cls in ("uint", "narrow"):
        @cuda.jit(device=True)
        def f(x, p):
            return np.uint64(x) & mask
    else:
        raise HloEvalError(f"no bit pattern for {et.name} on the GPU")
    return f


@functools.cache  # one device function per element type
def from_bits(et):
    """Device function ``(uint64 pattern of et.bits bits, params) -> storage value``."""
    cls = type_class(et)
    mask = np.uint64(_mask(et.bits))
    store = STORE.get(cls)
    if cls == "pred":
        @cuda.jit(device=True)
        def f(u, p):
            return np.uint8(1) if u != np.uint64(0) else np.uint8(0)
    elif cls == "f32":
        @cuda.jit(device=True)
        def f(u, p):
            return bits_f32(np.int64(u & mask))
    elif cls == "f64":
        @cuda.jit(device=True)
        def f(u, p):
            return bits_f64(np.int64(u))
    elif cls == "sint":
        @cuda.jit(device=True)
        def f(u, p):
            return store(np.int64(u & mask), p)
    elif cls == "uint":
        @cuda.jit(device=True)
        def f(u, p):
            return store(u & mask, p)
    elif cls == "narrow":
        @cuda.jit(device=True)
        def f(u, p):
            return u & mask
    else:
        raise HloEvalError(f"no bit pattern for {et.name} on the GPU")
    return f


# ----------------------------------------------------------------- bitcast-convert

@functools.cache  # one kernel per (source type, result type)
def _bitcast_kernel(src, dst):
    get, put = to_bits(src), from_bits(dst)
    ib, ob = src.bits, dst.bits
    piece = np.uint64(_mask(ob))

    if ib >= ob:
        k_split = ib // ob

        @cuda.jit
        def k(x, out, n, ps, pd):
            i = cuda.grid(1)
            step = cuda.gridsize(1)
            while i < n:
                s = i // k_split
                j = i - s * k_split
                out[i] = put((get(x[s], ps) >> np.uint64(j * ob)) & piece, pd)
                i += step
    else:
        k_join = ob // ib

        @cuda.jit
        def k(x, out, n, ps, pd):
            i = cuda.grid(1)
            step = cuda.gridsize(1)
            while i < n:
                b = np.uint64(0)
                for j in range(k_join):
                    b = b | (get(x[i * k_join + j], ps) << np.uint64(j * ib))
                out[i] = put(b, pd)
                i += step

    return k


@gpu_op("bitcast-convert")
def bitcast_convert(x, *, shape):
    src, dst = x.et, shape.element_type
    if src.is_complex or dst.is_complex:
        if src != dst:
            raise HloEvalError(f"bitcast-convert between {src.name} and {dst.name}: XLA converts "
                               f"complex values only to the same complex type")
        out = empty(x.shape, x.et)
        if x.size:
            out.data.copy_to_device(x.data)
        return out
    ib, ob = src.bits, dst.bits
    if ib > ob and ib % ob or ib < ob and ob % ib:
        raise HloEvalError(f"bitcast-convert: {max(ib, ob)} bits is not a multiple of "
                           f"{min(ib, ob)}")
    if ib > ob:
        dims = tuple(x.shape) + (ib // ob,)
    elif ib < ob:
        k = ob // ib
        if x.ndim == 0 or x.shape[-1] != k:
            raise HloEvalError(f"bitcast-convert from {src.name} to {dst.name}: the minor "
                               f"dimension must be {k}, got {list(x.shape)}")
        dims = tuple(x.shape[:-1])
    else:
        dims = tuple(x.shape)
    if dims != tuple(shape.dims):
        raise HloEvalError(f"bitcast-convert computed dimensions {list(dims)}, the "
                           f"instruction says {list(shape.dims)}")
    out = empty(dims, dst)
    launch(_bitcast_kernel(src, dst), out.size, x.data, out.data, out.size, type_params(src),
           type_params(dst))
    return out


# ----------------------------------------------------------------- reduce-precision

_IEEE_NATIVE = {"f16", "bf16", "f32", "f64"}


@functools.cache  # one element function per (type, exponent bits, mantissa bits)
def reduce_precision_fn(et, de, dm):
    """The device element function ``storage -> storage`` of reduce-precision on ``et``."""
    fmt = et.float_format
    if et.name in _IEEE_NATIVE:
        get, put = to_bits(et), from_bits(et)
        width, se, sm = et.bits, fmt.exponent_bits, fmt.mantissa_bits
        p = type_params(et)

        @cuda.jit(device=True)
        def f(x):
            return put(_reduce(get(x, p), width, se, sm, min(de, se), min(dm, sm)), p)
        return f
    # fp8/fp4: widen exactly to f16 (f32 when the exponent does not fit), reduce, round back
    wide = F16 if fmt.exponent_bits <= 5 else F32
    wf = wide.float_format
    width, se, sm = wide.bits, wf.exponent_bits, wf.mantissa_bits
    p, pw = type_params(et), type_params(wide)
    load, store = LOAD["narrow"], STORE["narrow"]
    wide_get, wide_put = to_bits(wide), from_bits(wide)
    wide_load = LOAD[type_class(wide)]
    wide_store = STORE[type_class(wide)]

    @cuda.jit(device=True)
    def f(x):
        w = wide_store(load(x, p), pw)  # exact
        r = wide_put(_reduce(wide_get(w, pw), width, se, sm, min(de, se), min(dm, sm)), pw)
        return store(wide_load(r, pw), p)
    return f


@gpu_op("reduce-precision")
def reduce_precision(x, *, exponent_bits, mantissa_bits, shape=None):
    et = x.et
    de, dm = reduce_precision_bits_of(et, exponent_bits, mantissa_bits)
    return apply(reduce_precision_fn(et, de, dm), (x,), et, in_classes=("raw",),
                 out_class="raw")


# ----------------------------------------------------------------- stochastic-convert

@cuda.jit(device=True)
def stochastic_round(v, r, scale, f_lo, f_hi, lo, hi):
    """stochastic-convert of f64 ``v`` (the operand's exact value) with random bits ``r``
    (uint64), the CPU's rule: NaN 0; ``v >= f_hi`` (the result type's largest value as
    the operand type rounds it) the largest, ``v <= f_lo`` the smallest; else the
    magnitude's whole part, plus 1 when ``r`` is below its fraction as a fixed-point
    number of the operand's width (``floor(frac x 2^bits)``, ``scale = 2^bits``), with
    the operand's sign (int64, wrapped by the store). Also the one-element form inside
    computations (``gpu/computation.py``)."""
    if v != v:
        return np.int64(0)
    if v >= f_hi:
        return np.int64(hi)
    if v <= f_lo:
        return np.int64(lo)
    mag = abs(v)
    whole = floor64(mag)
    fixed = np.uint64(floor64((mag - whole) * scale))
    t = np.int64(whole)
    if np.uint64(r) < fixed:
        t += 1
    return -t if signbit(v) else t


@functools.cache  # one element function per (operand type, result type)
def _stochastic_fn(src, dst):
    lo, hi, f_lo, f_hi = stochastic_limits(src, dst)
    lo, hi, f_lo, f_hi = np.int64(lo), np.int64(hi), np.float64(f_lo), np.float64(f_hi)
    scale = np.float64(2.0 ** src.bits)

    @cuda.jit(device=True)
    def f(v, r):
        return stochastic_round(np.float64(v), r, scale, f_lo, f_hi, lo, hi)
    return f


@gpu_op("stochastic-convert")
def stochastic_convert(x, random, *, shape):
    src, dst, rt = x.et, shape.element_type, random.et
    check_stochastic_convert(src, rt, dst)
    return apply(_stochastic_fn(src, dst), (x, random), dst, out_shape=x.shape)
