"""Shape and data-movement ops: broadcast, reshape, transpose, slice, concatenate,
pad, reverse, copy, bitcast, iota, tuple, get-tuple-element (operation_semantics
§Broadcast, §Reshape, §Transpose, §Slice, §Concatenate, §Pad, §Rev, §Iota); shuffle
(upstream XLA's shuffle expander)."""

from __future__ import annotations

import numpy as np

from hloref.errors import HloEvalError, HloUnsupportedError
from hloref.shapes import ArrayShape

from .numeric import contiguous, finish, from_float64
from .registry import op


@op("broadcast")
def broadcast(x, *, shape, dimensions=()):
    """``result[i] = x[i[dimensions[0]], i[dimensions[1]], ...]``."""
    dims = tuple(dimensions)
    if x.ndim != len(dims):
        raise HloEvalError(f"broadcast: operand rank {x.ndim} but {len(dims)} dimensions")
    order = np.argsort(dims, kind="stable")
    x = np.transpose(x, order)
    sorted_dims = [dims[i] for i in order]
    expanded = [1] * len(shape.dims)
    for k, d in enumerate(sorted_dims):
        expanded[d] = x.shape[k]
    return contiguous(np.broadcast_to(x.reshape(expanded), shape.dims))


@op("reshape")
def reshape(x, *, shape, inferred_dimension=None):
    return x.reshape(shape.dims)


@op("dynamic-reshape")
def dynamic_reshape(x, *sizes, shape):
    dims = tuple(int(s) for s in sizes)
    return x.reshape(dims)


@op("transpose")
def transpose(x, *, shape, dimensions):
    """``result.dims[i] = x.dims[dimensions[i]]``."""
    return contiguous(np.transpose(x, tuple(dimensions)))


@op("slice")
def slice_(x, *, shape, slice):
    index = tuple(np.s_[d.start:d.limit:d.stride] for d in slice)
    return contiguous(x[index])


@op("concatenate")
def concatenate(*xs, shape, dimensions):
    (dim,) = tuple(dimensions)
    return np.concatenate(xs, axis=dim)


@op("pad")
def pad(x, value, *, shape, padding):
    """``result[lo + i * (interior + 1)] = x[i]`` per dimension; negative ``lo``/``hi`` crop."""
    # 1. interior padding plus the non-negative parts of the edge padding
    full = []
    place = []
    for d, p in zip(x.shape, padding):
        inner = d + max(d - 1, 0) * p.interior
        lo, hi = max(p.low, 0), max(p.high, 0)
        full.append(lo + inner + hi)
        place.append(np.s_[lo:lo + inner:p.interior + 1] if d else np.s_[lo:lo])
    out = np.full(full, value, dtype=x.dtype)
    out[tuple(place)] = x
    # 2. negative edge padding crops
    crop = tuple(np.s_[max(-p.low, 0):n - max(-p.high, 0)] for p, n in zip(padding, full))
    out = out[crop]
    if out.shape != tuple(shape.dims):
        raise HloEvalError(f"pad produced {out.shape}, expected {tuple(shape.dims)}")
    return contiguous(out)


@op("reverse")
def reverse(x, *, shape, dimensions):
    return contiguous(np.flip(x, axis=tuple(dimensions))) if dimensions else x.copy()


@op("copy")
def copy(x, *, shape):
    return _deep_copy(x)


def _deep_copy(value):
    if isinstance(value, tuple):
        return tuple(_deep_copy(v) for v in value)
    if isinstance(value, np.ndarray):
        return value.copy()
    return value


def _physical(x: np.ndarray, shape: ArrayShape) -> np.ndarray:
    """The elements of ``x`` in memory order of ``shape``'s layout (flat)."""
    major_to_minor = tuple(reversed(shape.minor_to_major()))
    return contiguous(np.transpose(x, major_to_minor)).ravel()


def _logical(flat: np.ndarray, shape: ArrayShape) -> np.ndarray:
    major_to_minor = tuple(reversed(shape.minor_to_major()))
    physical_dims = [shape.dims[d] for d in major_to_minor]
    arr = flat.reshape(physical_dims)
    inverse = np.argsort(major_to_minor)
    return contiguous(np.transpose(arr, inverse))


def packed_bits(shape: ArrayShape) -> int:
    """``n`` of an ``E(n)`` layout that packs sub-byte elements (0: one element a byte)."""
    n = shape.layout.element_size_bits if shape.layout is not None else 0
    if n and n < 8:
        if n not in (1, 2, 4):
            raise HloEvalError(f"bitcast: E({n}) packing is not 1, 2 or 4 bits")
        if shape.element_type.bits > n:
            raise HloEvalError(f"bitcast: E({n}) is narrower than {shape.element_type.name}")
        return n
    return 0


def pack_bits(flat: np.ndarray, bits: int) -> np.ndarray:
    """Pack ``bits``-wide elements (their low bits) into bytes as XLA does
    (``xla/util.h`` ``PackIntN``): element ``j`` of a byte sits at bit
    ``bits * (8 / bits - j - 1)``, so the first element takes the most significant
    bits; a partial last byte is zero-filled at the bottom."""
    per = 8 // bits
    raw = flat.view(np.uint8).astype(np.uint8) & np.uint8((1 << bits) - 1)
    padded = np.zeros(-(-raw.size // per) * per, np.uint8)
    padded[:raw.size] = raw
    shifts = (bits * (per - 1 - np.arange(per))).astype(np.uint8)
    return np.bitwise_or.reduce(padded.reshape(-1, per) << shifts, axis=1).astype(np.uint8)


def unpack_bits(data: np.ndarray, bits: int, count: int, dtype) -> np.ndarray:
    """Inverse of ``pack_bits``: ``count`` elements of ``dtype`` (a one-byte numpy or
    ml_dtypes type storing its value in the low bits) from packed bytes."""
    per = 8 // bits
    shifts = (bits * (per - 1 - np.arange(per))).astype(np.uint8)
    raw = ((data.reshape(-1, 1) >> shifts) & np.uint8((1 << bits) - 1)).astype(np.uint8).ravel()
    return contiguous(raw[:count]).view(dtype)


@op("bitcast")
def bitcast(x, *, shape, operand_shapes):
    """Reinterpret the operand's memory (in its layout) as the result shape (in its layout).

    An ``E(n)`` layout (``s4[8]{0:E(4)}``) packs ``8/n`` sub-byte elements a byte
    (``pack_bits``); the memory is then the packed bytes."""
    operand_shape = operand_shapes[0]
    flat = _physical(x, operand_shape)
    in_bits, out_bits = packed_bits(operand_shape), packed_bits(shape)
    if in_bits or out_bits:
        data = pack_bits(flat, in_bits) if in_bits else contiguous(flat).view(np.uint8).ravel()
        if out_bits:
            need = -(-shape.size * out_bits // 8)
            if data.size != need:
                raise HloEvalError(f"bitcast of {data.size} bytes to {shape.size} elements "
                                   f"packed {out_bits} bits each ({need} bytes)")
            flat = unpack_bits(data, out_bits, shape.size, shape.element_type.dtype)
        else:
            itemsize = shape.element_type.dtype.itemsize
            if data.size != shape.size * itemsize:
                raise HloEvalError(f"bitcast of {data.size} bytes to {shape.size} elements "
                                   f"of {itemsize} bytes")
            flat = data.view(shape.element_type.dtype)
        return _logical(flat, shape)
    if x.dtype != shape.element_type.dtype:
        if x.dtype.itemsize != shape.element_type.dtype.itemsize:
            raise HloEvalError("bitcast between element types of different widths")
        flat = flat.view(shape.element_type.dtype)
    if flat.size != shape.size:
        raise HloEvalError(f"bitcast of {flat.size} elements to {shape.size}")
    return _logical(flat, shape)


@op("iota")
def iota(*, shape, iota_dimension):
    et = shape.element_type
    if shape.size == 0:  # f32[1000000000000,0]: no elements, no line of n values either
        return np.empty(shape.dims, et.dtype)
    n = shape.dims[iota_dimension]
    line = np.arange(n, dtype=np.float64 if et.is_float or et.is_complex else np.int64)
    expand = [1] * len(shape.dims)
    expand[iota_dimension] = n
    values = np.broadcast_to(line.reshape(expand), shape.dims)
    if et.is_float or et.is_complex:
        return contiguous(from_float64(values, et))
    return contiguous(finish(values, et))


@op("tuple")
def tuple_(*xs, shape):
    return tuple(xs)


@op("get-tuple-element")
def get_tuple_element(x, *, shape, index):
    return x[index]


def shuffle_indices(indices, dims, dimensions) -> np.ndarray:
    """shuffle's permute ``indices`` (a literal attribute) as int64 (unsigned values past
    int64 saturate), broadcast to ``dims + (len(dimensions),)``: one coordinate per
    shuffled dimension for every result element."""
    idx = np.asarray(indices.value)
    if idx.dtype.kind == "u":
        idx = np.minimum(idx, np.iinfo(np.int64).max)
    idx = idx.astype(np.int64)
    if idx.ndim == len(dims):
        idx = idx[..., None]
    return np.broadcast_to(idx, tuple(dims) + (len(dimensions),))


@op("shuffle")
def shuffle(x, *, shape, dimensions, mode, shifts=(), indices=None):
    """Moves elements along ``dimensions`` (upstream ``shuffle_expander.cc`` and
    ``xla/shuffle.cc``; not in operation_semantics yet).

    ``mode=rotate``: a left rotation by ``shifts[k]`` along ``dimensions[k]``,
    ``result[..., i, ...] = x[..., (i + shifts[k]) mod n, ...]``.
    ``mode=permute``: ``result[i] = x[j]`` where ``j[dimensions[k]] = indices[i][k]`` and
    ``j[d] = i[d]`` for the other dimensions; ``indices`` dims of size 1 are shared
    and the coordinate dimension may be left out for one shuffled dimension. The
    expansion is an elementwise ``gather``, so out-of-range coordinates clamp."""
    mode = str(mode)
    if mode == "rotate":
        out = x
        for d, s in zip(dimensions, shifts):
            n = x.shape[d]
            if n:
                out = np.take(out, (np.arange(n) + int(s) % n) % n, axis=d)
        return contiguous(np.array(out, copy=True))
    if mode == "permute":
        idx = shuffle_indices(indices, x.shape, dimensions)
        coords = list(np.indices(x.shape, sparse=True))
        for k, d in enumerate(dimensions):
            coords[d] = np.clip(idx[..., k], 0, max(x.shape[d] - 1, 0))
        return contiguous(x[tuple(coords)])
    raise HloUnsupportedError("shuffle", "cpu", f"mode={mode}: hloref evaluates the rotate and "
                              "permute modes only (the HLO text form of this mode was not in the "
                              "upstream sources hloref was written from)")

