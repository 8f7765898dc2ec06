"""Shape and data-movement ops on the GPU (mirrors ``evaluator/shape_ops.py``).

broadcast, transpose, slice, reverse and copy are one affine gather kernel
(``out[i] = src[base + sum_d digit_d(i) * stride_d]``, strides 0 for broadcast
dimensions and negative for reversed ones); concatenate is one affine scatter per
operand; pad and iota have their own kernels. All move storage bits unchanged, so
they serve every element type (narrow floats, complex, sub-byte ints). reshape is free
(the same flat buffer with a new shape). shuffle is one gather kernel (rotate: shifted
coordinates; permute: clamped coordinates from its indices attribute). bitcast is the
CPU's reinterpretation of memory: the operand gathered into its layout's memory order,
the storage viewed as the result type (same width) or packed/unpacked for ``E(n)``
layouts of sub-byte types, then gathered back from the result's layout.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from hloref.errors import HloEvalError, HloUnsupportedError
from hloref.evaluator.shape_ops import get_tuple_element, packed_bits, shuffle_indices, tuple_

from .device import STORE, DArray, empty, storage_dtype, type_class, type_params
from .elementwise import launch
from .registry import GpuFallback, gpu_op


def row_major_strides(dims) -> tuple[int, ...]:
    strides = [0] * len(dims)
    s = 1
    for d in range(len(dims) - 1, -1, -1):
        strides[d] = s
        s *= int(dims[d])
    return tuple(strides)


def int_tuple(values) -> tuple[int, ...]:
    """A non-empty int tuple for kernel arguments (rank 0 gets one dummy dimension)."""
    values = tuple(int(v) for v in values)
    return values if values else (1,)


_t = int_tuple


@cuda.jit(device=True)
def strided_offset(i, dims, strides, base):
    """``base`` plus the row-major digits of ``i`` over ``dims`` times ``strides``."""
    off = base
    for d in range(len(dims) - 1, -1, -1):
        q = i // dims[d]
        off += (i - q * dims[d]) * strides[d]
        i = q
    return off


@cuda.jit(device=True)
def strided_offsets2(i, dims, sa, sb, a, b):
    """``strided_offset`` into two arrays at once: ``(a, b)`` plus the row-major digits
    of ``i`` over ``dims`` times ``sa`` and ``sb``."""
    for d in range(len(dims) - 1, -1, -1):
        q = i // dims[d]
        digit = i - q * dims[d]
        a += digit * sa[d]
        b += digit * sb[d]
        i = q
    return a, b


@cuda.jit(device=True)
def dilated_index(q, dil, size):
    """The element at position ``q`` of a line of ``size`` elements dilated by ``dil``
    (``dil - 1`` holes between neighbours), or -1 before it, on a hole or past it."""
    if q < 0 or q % dil != 0:
        return np.int64(-1)
    idx = q // dil
    if idx >= size:
        return np.int64(-1)
    return idx


@cuda.jit
def _gather(src, out, n, dims, strides, base):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < n:
        out[i] = src[strided_offset(i, dims, strides, base)]
        i += step


@cuda.jit
def _scatter(src, out, n, dims, strides, base):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < n:
        out[strided_offset(i, dims, strides, base)] = src[i]
        i += step


def gather(x: DArray, out_dims, strides, base=0, et=None) -> DArray:
    out = empty(out_dims, et or x.et)
    dims = tuple(out_dims)
    st = tuple(strides)
    if not dims:
        dims, st = (1,), (0,)
    launch(_gather, out.size, x.data, out.data, out.size, _t(dims), _t(st) if st else (0,),
           int(base))
    return out


@gpu_op("broadcast")
def broadcast(x, *, shape, dimensions=()):
    dims = tuple(dimensions)
    if x.ndim != len(dims):
        raise HloEvalError(f"broadcast: operand rank {x.ndim} but {len(dims)} dimensions")
    xs = row_major_strides(x.shape)
    strides = [0] * len(shape.dims)
    for k, d in enumerate(dims):
        strides[d] = xs[k] if x.shape[k] != 1 else 0
    return gather(x, shape.dims, strides)


@gpu_op("reshape")
def reshape(x, *, shape, **_):
    return x.reshape(shape.dims)


@gpu_op("transpose")
def transpose(x, *, shape, dimensions):
    xs = row_major_strides(x.shape)
    return gather(x, [x.shape[p] for p in dimensions], [xs[p] for p in dimensions])


@gpu_op("slice")
def slice_(x, *, shape, slice):
    xs = row_major_strides(x.shape)
    base = sum(d.start * s for d, s in zip(slice, xs))
    return gather(x, shape.dims, [d.stride * s for d, s in zip(slice, xs)], base)


@gpu_op("reverse")
def reverse(x, *, shape, dimensions):
    xs = list(row_major_strides(x.shape))
    base = 0
    for d in dimensions:
        base += (x.shape[d] - 1) * xs[d] if x.shape[d] else 0
        xs[d] = -xs[d]
    return gather(x, x.shape, xs, base)


def _deep_copy(value):
    if isinstance(value, tuple):
        return tuple(_deep_copy(v) for v in value)
    if isinstance(value, DArray):
        return gather(value, value.shape, row_major_strides(value.shape))
    return value


@gpu_op("copy")
def copy(x, *, shape):
    return _deep_copy(x)


@gpu_op("concatenate")
def concatenate(*xs, shape, dimensions):
    (dim,) = tuple(dimensions)
    out = empty(shape.dims, xs[0].et)
    os = row_major_strides(shape.dims)
    offset = 0
    for x in xs:
        if x.size:
            launch(_scatter, x.size, x.data, out.data, x.size, _t(x.shape),
                   _t(os) if os else (0,), offset * os[dim])
        offset += x.shape[dim]
    return out


@cuda.jit
def _pad(src, pv, out, n, dims, lo, step_, in_dims, in_strides):
    i = cuda.grid(1)
    gstep = cuda.gridsize(1)
    while i < n:
        rem = i
        off = 0
        inside = True
        for d in range(len(dims) - 1, -1, -1):
            q = rem // dims[d]
            k = rem - q * dims[d] - lo[d]
            rem = q
            idx = dilated_index(k, step_[d], in_dims[d])
            if idx < 0:
                inside = False
            else:
                off += idx * in_strides[d]
        if inside:
            out[i] = src[off]
        else:
            out[i] = pv[0]
        i += gstep


def place(x: DArray, pv, dims, lo, step) -> DArray:
    """A new ``dims`` array holding ``x``'s element ``k`` at ``lo + k * step`` in each
    dimension (negative ``lo`` crops) and ``pv[0]`` (a one-element device array)
    everywhere else: pad's kernel, and the dynamic path's embedding of valid parts."""
    out = empty(dims, x.et)
    launch(_pad, out.size, x.data, pv, out.data, out.size, _t(dims), _t(lo), _t(step),
           _t(x.shape), _t(row_major_strides(x.shape)))
    return out


@gpu_op("pad")
def pad(x, value, *, shape, padding):
    if x.ndim == 0:
        return gather(x, (), ())
    return place(x, value.data, shape.dims, [p.low for p in padding],
                 [p.interior + 1 for p in padding])


@functools.cache  # one compiled kernel per type class
def _iota_kernel(cls):
    store = STORE[cls]
    as_float = cls in ("f32", "f64", "narrow")

    @cuda.jit
    def k(out, n, stride, size, sp):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            v = (i // stride) % size
            if as_float:
                out[i] = store(np.float64(v), sp)
            else:
                out[i] = store(np.int64(v), sp)
            i += step

    return k


@gpu_op("iota")
def iota(*, shape, iota_dimension):
    et = shape.element_type
    if et.is_complex:  # the real iota in the part type, imaginary part 0
        from hloref.shapes import ArrayShape
        from hloref.types import F32, F64
        from .convert import real_to_complex
        part = F32 if et.name == "c64" else F64
        return real_to_complex(iota(shape=ArrayShape(part, tuple(shape.dims)),
                                    iota_dimension=iota_dimension), et)
    cls = type_class(et)
    if cls not in STORE or cls == "raw":
        raise GpuFallback(f"iota of {et.name} has no GPU kernel")
    out = empty(shape.dims, et)
    stride = row_major_strides(shape.dims)[iota_dimension]
    launch(_iota_kernel(cls), out.size, out.data, out.size, stride,
           max(int(shape.dims[iota_dimension]), 1), type_params(et))
    return out


def _physical(x: DArray, shp) -> DArray:
    """``x``'s elements in the memory order of ``shp``'s layout (flat; a device copy
    unless the layout is row-major)."""
    major_to_minor = tuple(reversed(shp.minor_to_major()))
    if major_to_minor == tuple(range(x.ndim)):
        return x.reshape((x.size,))
    xs = row_major_strides(x.shape)
    flat = gather(x, [x.shape[d] for d in major_to_minor], [xs[d] for d in major_to_minor])
    return flat.reshape((x.size,))


def _logical(flat: DArray, shp) -> DArray:
    """The inverse of :func:`_physical`: flat memory in ``shp``'s layout, as ``shp``."""
    major_to_minor = tuple(reversed(shp.minor_to_major()))
    if major_to_minor == tuple(range(len(shp.dims))):
        return flat.reshape(shp.dims)
    pst = row_major_strides([shp.dims[d] for d in major_to_minor])
    strides = [0] * len(shp.dims)
    for k, d in enumerate(major_to_minor):
        strides[d] = pst[k]
    return gather(flat, shp.dims, strides)


@cuda.jit
def _pack_kernel(src, out, n, count, bits):
    """XLA's ``PackIntN``: byte ``i`` holds elements ``i * per + j`` (their low bits) at
    bit ``bits * (per - j - 1)``; a partial last byte is zero-filled at the bottom."""
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    per = 8 // bits
    mask = (1 << bits) - 1
    while i < n:
        v = 0
        for j in range(per):
            e = i * per + j
            if e < count:
                v |= (int(src[e]) & mask) << (bits * (per - 1 - j))
        out[i] = v
        i += step


@cuda.jit
def _unpack_kernel(data, out, count, bits):
    j = cuda.grid(1)
    step = cuda.gridsize(1)
    per = 8 // bits
    mask = (1 << bits) - 1
    while j < count:
        out[j] = (int(data[j // per]) >> (bits * (per - 1 - j % per))) & mask
        j += step


@gpu_op("bitcast")
def bitcast(x, *, shape, operand_shapes):
    """Reinterpret the operand's memory (in its layout) as the result shape (in its
    layout), as the CPU does: layouts by strided device copies, element types by viewing
    the storage, ``E(n)`` packing of sub-byte types by the pack/unpack kernels."""
    src = operand_shapes[0]
    et = shape.element_type
    flat = _physical(x, src)
    in_bits, out_bits = packed_bits(src), packed_bits(shape)
    if in_bits or out_bits:
        if in_bits:
            data = cuda.device_array(max(-(-flat.size // (8 // in_bits)), 0), dtype=np.uint8)
            launch(_pack_kernel, data.size, flat.data, data, data.size, flat.size, in_bits)
        else:
            data = flat.data.view(np.uint8)
        if out_bits:
            need = -(-shape.size * out_bits // 8)
            if data.size != need:
                raise HloEvalError(f"bitcast of {data.size} bytes to {shape.size} elements "
                                   f"packed {out_bits} bits each ({need} bytes)")
            out = empty((shape.size,), et)
            launch(_unpack_kernel, shape.size, data, out.data, shape.size, out_bits)
            return _logical(out, shape)
        itemsize = et.dtype.itemsize
        if data.size != shape.size * itemsize:
            raise HloEvalError(f"bitcast of {data.size} bytes to {shape.size} elements "
                               f"of {itemsize} bytes")
        return _logical(DArray(data.view(storage_dtype(et)), (shape.size,), et), shape)
    if x.et.dtype != et.dtype:
        if x.et.dtype.itemsize != et.dtype.itemsize:
            raise HloEvalError("bitcast between element types of different widths")
        flat = DArray(flat.data.view(storage_dtype(et)), flat.shape, et)
    if flat.size != shape.size:
        raise HloEvalError(f"bitcast of {flat.size} elements to {shape.size}")
    return _logical(flat, shape)


# the CPU's (they hold whatever holds the arrays)
gpu_op("tuple")(tuple_)
gpu_op("get-tuple-element")(get_tuple_element)


@cuda.jit
def _shuffle_kernel(src, out, n, dims, shift, sel, idx, k):
    """``out[i] = src[j]``: ``j``'s coordinate along dimension ``d`` is ``(i_d + shift_d)
    mod n_d`` (rotate; shift 0 elsewhere) or, where ``sel[d] >= 0``, the clamped
    coordinate ``idx[i, sel[d]]`` (permute)."""
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    rank = len(dims)
    while i < n:
        rem = i
        j = 0
        stride = 1
        for r in range(rank):
            d = rank - 1 - r
            c = rem % dims[d]
            rem //= dims[d]
            if sel[d] >= 0:
                c = idx[i * k + sel[d]]
                c = 0 if c < 0 else (dims[d] - 1 if c > dims[d] - 1 else c)
            else:
                c = (c + shift[d]) % dims[d]
            j += c * stride
            stride *= dims[d]
        out[i] = src[j]
        i += step


@gpu_op("shuffle")
def shuffle(x, *, shape, dimensions, mode, shifts=(), indices=None):
    """``shuffle`` (the CPU's ``evaluator/shape_ops.py`` fixes the semantics): one
    gather kernel moving storage bits. The permute indices are an attribute (a literal),
    broadcast on the host to ``x.shape + (len(dimensions),)`` and sent once."""
    mode = str(mode)
    dims = tuple(int(d) for d in x.shape)
    rank = len(dims)
    shift = [0] * rank
    sel = [-1] * rank
    k = 1
    table = np.zeros(1, np.int64)
    if mode == "rotate":
        for d, s in zip(dimensions, shifts):
            shift[d] = int(s) % dims[d] if dims[d] else 0
    elif mode == "permute":
        k = len(dimensions)
        table = np.ascontiguousarray(shuffle_indices(indices, dims, dimensions)).reshape(-1)
        for j, d in enumerate(dimensions):
            sel[d] = j
    else:
        raise HloUnsupportedError("shuffle", "gpu", f"mode={mode}: hloref evaluates the rotate "
                                  "and permute modes only")
    out = empty(dims, x.et)
    if out.size:
        launch(_shuffle_kernel, out.size, x.data, out.data, out.size, int_tuple(dims),
               int_tuple(shift) if rank else (0,), int_tuple(sel) if rank else (-1,),
               cuda.to_device(table if table.size else np.zeros(1, np.int64)), max(k, 1))
    return out


@gpu_op("dynamic-reshape")
def dynamic_reshape(x, *sizes, shape):
    """The operand with the dimensions given (the interpreter's ``dynamic_step`` lays
    out its valid elements, ``gpu/dynamic.py``; this runs only for a value without
    runtime sizes)."""
    dims = tuple(int(s.to_host() if isinstance(s, DArray) else np.asarray(s)) for s in sizes)
    return x.reshape(dims)
