"""Shape rules of the data-movement ops: broadcast, reshape, transpose, reverse, copy,
slice, concatenate, pad, iota."""

from __future__ import annotations

from math import prod

from ..attrs import PaddingDim, SliceDim
from ..geometry import padded_size, slice_output_size
from ..shapes import Shape
from .common import (ShapeError, as_array, check_dims_in_range, expect_same_type, infer, int_list,
                     make_array, required, shape_str)


@infer("broadcast")
def infer_broadcast(operand: Shape, *, dimensions=None, result_dims=None, **_):
    """``broadcast``: ``dimensions[i]`` is the result dim of operand dim ``i`` (distinct,
    sizes equal); ``result_dims`` are the result's dimensions."""
    a = as_array(operand, "broadcast operand")
    out = int_list(required(result_dims, "result_dims"), "result_dims")
    dims = int_list(dimensions, "dimensions")
    if dimensions is None and a.rank:
        raise ShapeError("broadcast: missing required attribute dimensions (operand is not a scalar)")
    if len(dims) != a.rank:
        raise ShapeError(f"broadcast: dimensions has {len(dims)} entries but the operand has rank "
                         f"{a.rank}")
    check_dims_in_range(dims, len(out), "broadcast dimensions")
    if len(set(dims)) != len(dims):
        raise ShapeError(f"broadcast: dimensions={{{','.join(map(str, dims))}}} names a result "
                         "dimension twice")
    for i, d in enumerate(dims):
        # (XLA's verifier does not require them increasing: a broadcast may transpose)
        if a.dims[i] != out[d]:
            raise ShapeError(f"broadcast: operand dimension {i} has size {a.dims[i]} but result "
                             f"dimension {d} has size {out[d]}")
    return make_array(a.element_type, out)


@infer("reshape")
def infer_reshape(operand: Shape, *, result_dims=None, inferred_dimension=None, **_):
    """``reshape``: same element count as ``result_dims``."""
    a = as_array(operand, "reshape operand")
    out = int_list(required(result_dims, "result_dims"), "result_dims")
    if any(d < 0 for d in a.dims + out):  # unbounded dynamic (``?``): count unknown
        return make_array(a.element_type, out)
    if prod(out) != prod(a.dims):
        raise ShapeError(f"reshape: element count differs: operand {shape_str(a)} has "
                         f"{prod(a.dims)}, result dims {list(out)} have {prod(out)}")
    if inferred_dimension is not None and not 0 <= int(inferred_dimension) < len(out):
        raise ShapeError(f"reshape: inferred_dimension={inferred_dimension} out of range")
    return make_array(a.element_type, out)


@infer("dynamic-reshape")
def infer_dynamic_reshape(operand: Shape, *dim_sizes: Shape, result_dims=None, **_):
    """``dynamic-reshape(operand, sizes...)``: one s32 scalar per result dimension."""
    a = as_array(operand, "dynamic-reshape operand")
    out = int_list(required(result_dims, "result_dims"), "result_dims")
    if len(dim_sizes) != len(out):
        raise ShapeError(f"dynamic-reshape: expected {len(out)} size operands, got {len(dim_sizes)}")
    for s in dim_sizes:
        s = as_array(s, "dynamic-reshape size")
        if s.dims or not s.element_type.is_integer:
            raise ShapeError(f"dynamic-reshape: sizes must be integer scalars, got {shape_str(s)}")
    return make_array(a.element_type, out)


@infer("transpose")
def infer_transpose(operand: Shape, *, dimensions=None, **_):
    """``transpose``: ``dimensions`` is a permutation; result dim i = operand dim perm[i]."""
    a = as_array(operand, "transpose operand")
    perm = int_list(required(dimensions, "dimensions"), "dimensions")
    if sorted(perm) != list(range(a.rank)):
        raise ShapeError(f"transpose: dimensions={{{','.join(map(str, perm))}}} is not a permutation "
                         f"of 0..{a.rank - 1}")
    return make_array(a.element_type, (a.dims[p] for p in perm))


@infer("reverse")
def infer_reverse(operand: Shape, *, dimensions=None, **_):
    """``reverse``: unique dimensions within rank; same shape."""
    a = as_array(operand, "reverse operand")
    check_dims_in_range(int_list(required(dimensions, "dimensions"), "dimensions"), a.rank, "reverse dimensions")
    return make_array(a.element_type, a.dims)


@infer("copy", "domain", "opt-barrier")
def infer_copy(operand: Shape, **_):
    """``copy``: any shape (tuples too), unchanged."""
    return operand


infer_domain = infer_copy
infer_opt_barrier = infer_copy


@infer("slice")
def infer_slice(operand: Shape, *, slice=None, **_):
    """``slice``: per dimension 0 <= start <= limit <= size, stride >= 1;
    result ceil((limit - start) / stride)."""
    a = as_array(operand, "slice operand")
    sl = tuple(required(slice, "slice"))
    if len(sl) != a.rank:
        raise ShapeError(f"slice: {len(sl)} slice dimensions for an operand of rank {a.rank}")
    out = []
    for i, s in enumerate(sl):
        if not isinstance(s, SliceDim):
            s = SliceDim(*s)
        if s.stride < 1:
            raise ShapeError(f"slice: dimension {i}: stride must be >= 1, got {s.stride}")
        if not 0 <= s.start <= s.limit <= a.dims[i]:
            raise ShapeError(f"slice: dimension {i}: [{s.start}:{s.limit}] is not within "
                             f"[0:{a.dims[i]}] with start <= limit")
        out.append(slice_output_size(s.start, s.limit, s.stride))
    return make_array(a.element_type, out)


@infer("concatenate")
def infer_concatenate(*operands: Shape, dimensions=None, **_):
    """``concatenate``: >= 1 arrays of equal rank/type, equal except in ``dimensions={d}``."""
    if not operands:
        raise ShapeError("concatenate: expects at least one operand")
    arrs = [as_array(o, f"concatenate operand {i}") for i, o in enumerate(operands)]
    dims = int_list(required(dimensions, "dimensions"), "dimensions")
    if len(dims) != 1:
        raise ShapeError(f"concatenate: dimensions must have exactly one entry, got {list(dims)}")
    d = dims[0]
    first = arrs[0]
    if not 0 <= d < first.rank:
        raise ShapeError(f"concatenate: dimension {d} out of range [0, {first.rank})")
    total = 0
    for i, a in enumerate(arrs):
        if a.rank != first.rank:
            raise ShapeError(f"concatenate: operand {i} has rank {a.rank}, operand 0 has rank {first.rank}")
        expect_same_type(first, a, "concatenate", f"operand 0 and operand {i}")
        for k in range(a.rank):
            if k != d and a.dims[k] != first.dims[k]:
                raise ShapeError(f"concatenate: operand {i} {shape_str(a)} differs from operand 0 "
                                 f"{shape_str(first)} in dimension {k} (only dimension {d} may differ)")
        total += a.dims[d]
    out = list(first.dims)
    out[d] = total
    return make_array(first.element_type, out)


@infer("pad")
def infer_pad(operand: Shape, padding_value: Shape, *, padding=None, **_):
    """``pad``: scalar padding value of the operand's type; per dimension
    result = low + high + d + max(d - 1, 0) * interior, interior >= 0, result >= 0."""
    a = as_array(operand, "pad operand")
    v = as_array(padding_value, "pad padding value")
    if v.dims:
        raise ShapeError(f"pad: padding value must be a scalar, got {shape_str(v)}")
    expect_same_type(a, v, "pad", "operand and padding value")
    cfg = tuple(required(padding, "padding"))
    if len(cfg) != a.rank:
        raise ShapeError(f"pad: padding has {len(cfg)} dimensions, operand has rank {a.rank}")
    out = []
    for i, p in enumerate(cfg):
        if not isinstance(p, PaddingDim):
            p = PaddingDim(*p)
        if p.interior < 0:
            raise ShapeError(f"pad: dimension {i}: interior padding must be >= 0, got {p.interior}")
        d = a.dims[i]
        r = padded_size(d, p.low, p.high, p.interior)
        if r < 0:
            raise ShapeError(f"pad: dimension {i}: padding {p.low}_{p.high}_{p.interior} of size {d} "
                             f"gives negative size {r}")
        out.append(r)
    return make_array(a.element_type, out)


@infer("iota")
def infer_iota(*, shape=None, iota_dimension=None, **_):
    """``iota``: declared array shape of rank >= 1, ``iota_dimension`` < rank."""
    s = as_array(required(shape, "shape"), "iota result")
    d = required(iota_dimension, "iota_dimension")
    if s.rank == 0:
        raise ShapeError("iota: result must have rank >= 1")
    if not 0 <= int(d) < s.rank:
        raise ShapeError(f"iota: iota_dimension={d} out of range [0, {s.rank})")
    if s.element_type.kind not in ("sint", "uint", "float", "complex"):
        # XLA's HandleIota: "Only support iota of integral, floating point or complex
        # primitive types"
        raise ShapeError(f"iota: element type must be integral, floating point or complex, got "
                         f"{s.element_type.name}")
    return s
