"""``scaled-dot`` on the GPU (mirrors ``evaluator/dot_variants.py``).

Each operand is dequantized on the device into an f64 buffer, ``x * scale`` with the
scale broadcast in blocks (block size per dimension = operand size / scale size; a
rank-0 scale is 1), exact in f64 for the fp8/fp4 operands and e8m0/fp8 scales of
block-scaled formats; then ``dot`` (f64 accumulation, one rounding to the result
type), as the CPU does.

``ragged-dot``: one thread per result element, reading the group sizes on the device
(prefix sums per thread); group sizes of rank > 1 (``[b..., x..., g]``, one partition
per index of the leading lhs dims, the CPU's ``ragged_group_prefix``) pick their row from
the output index (and, for a ragged contracting dim, the contracting index):

* ragged non-contracting dimension: the element's row ``m`` takes, for every group
  ``g`` whose interval ``[start_g, start_g + size_g)`` holds it, the dot with
  ``rhs[g]`` (the group dimension), summed over those groups in order (rows in no
  group give 0);
* ragged contracting dimension: result ``[g, ...]`` sums only the contracting
  indices in group ``g``;
* ragged batch dimension: a plain ``dot``.
Operands convert and accumulate as ``dot`` (f64 for float results, wrapping integers,
f64 parts for complex results).
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from hloref.errors import HloEvalError, HloUnsupportedError
from hloref.evaluator.dot_variants import ragged_group_prefix
from hloref.types import F64

from .device import LOAD, DArray, empty, type_class, type_params
from .dot import (add_complex, on_device_integer_result_in_f32, complex_operand, dot, fma_complex, reader, storage, writer,
                  zero_complex)
from .elementwise import add
from .elementwise import launch
from .registry import GpuFallback, gpu_op
from .shape_ops import int_tuple, row_major_strides, strided_offsets2


_REAL = ("f32", "f64", "narrow", "sint", "uint", "pred")


@functools.cache  # one kernel per (operand, scale) type class
def _dequant_kernel(xcls, scls):
    lx, ls = LOAD[xcls], LOAD[scls]

    @cuda.jit
    def k(x, s, out, n, dims, blocks, sstrides, px, ps):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            rem = i
            off = 0
            for d in range(len(dims) - 1, -1, -1):
                q = rem // dims[d]
                off += ((rem - q * dims[d]) // blocks[d]) * sstrides[d]
                rem = q
            out[i] = np.float64(lx(x[i], px)) * np.float64(ls(s[off], ps))
            i += step

    return k


def dequantize(x: DArray, scale: DArray, opcode: str) -> DArray:
    """``x * scale`` (the scale broadcast in blocks) as an f64 device array; a rank-0
    scale is 1 (the CPU's rule): ``x`` exactly in f64. Integer and pred operands and
    scales are their values in f64, as the CPU's ``to_float64``."""
    xcls, scls = type_class(x.et), type_class(scale.et)
    if xcls not in _REAL or scls not in _REAL:
        raise GpuFallback(f"{opcode} of {x.et.name} scaled by {scale.et.name}")
    if scale.ndim not in (0, x.ndim):
        raise HloEvalError(f"{opcode}: scale of rank {scale.ndim} for an operand of rank "
                           f"{x.ndim}")
    if scale.ndim == 0:  # the CPU ignores a rank-0 scale's value
        from .convert import convert_array
        return convert_array(x, F64)
    sdims = scale.shape if scale.ndim else (1,) * x.ndim
    for n, m in zip(x.shape, sdims):
        if m == 0 or n % m:
            raise HloEvalError(f"{opcode}: operand dimension {n} is not a multiple of the "
                               f"scale's {m}")
    out = empty(x.shape, F64)
    blocks = [n // m for n, m in zip(x.shape, sdims)]
    sst = row_major_strides(sdims) if scale.ndim else (0,) * x.ndim
    launch(_dequant_kernel(xcls, scls), out.size, x.data, scale.data, out.data, out.size,
           int_tuple(x.shape), int_tuple(blocks), int_tuple(sst) if x.ndim else (0,),
           type_params(x.et), type_params(scale.et))
    return out


@gpu_op("scaled-dot")
@on_device_integer_result_in_f32
def scaled_dot(lhs, rhs, lhs_scale, rhs_scale, *, shape, lhs_batch_dims=(), rhs_batch_dims=(),
               lhs_contracting_dims=(), rhs_contracting_dims=()):
    a = dequantize(lhs, lhs_scale, "scaled-dot")
    b = dequantize(rhs, rhs_scale, "scaled-dot")
    return dot(a, b, shape=shape, lhs_batch_dims=lhs_batch_dims, rhs_batch_dims=rhs_batch_dims,
               lhs_contracting_dims=lhs_contracting_dims,
               rhs_contracting_dims=rhs_contracting_dims)


# ----------------------------------------------------------------- ragged-dot

@cuda.jit(device=True)
def _ragged_offsets(i, dims, sa, sb, sg, rpos, a, b, g):
    """``strided_offsets2`` that also advances ``g`` by ``sg`` (the row of the group sizes)
    and gives the digit of dimension ``rpos`` (the ragged one):
    ``(a, b, g, digit)``."""
    at = 0
    for d in range(len(dims) - 1, -1, -1):
        q = i // dims[d]
        digit = i - q * dims[d]
        if d == rpos:
            at = digit
        a += digit * sa[d]
        b += digit * sb[d]
        g += digit * sg[d]
        i = q
    return a, b, g, at


@functools.cache  # one kernel per (multiply-add, zero, sum, type classes, group-size class)
def _ragged_kernel(fma, zero, plus, ca, cb, co, cg):
    from .indexing import index_loader
    la, lb, store, lg = reader(ca), reader(cb), writer(co), index_loader(cg)

    @cuda.jit
    def k(a, b, out, n, odims, oa, ob, kdims, ka, kb, total, pa, pb, po, gs, ngroups, pg,
          contracting, rpos, gstride, lead, gmo, gmk):
        """``gmo``/``gmk``: per output / contracting dimension, its multiplier into the row
        of ``group_sizes`` (rank > 1: one partition per index of the leading dims)."""
        o = cuda.grid(1)
        step = cuda.gridsize(1)
        while o < n:
            g_out = o // lead  # the leading group index (contracting mode)
            base_a, base_b, row_o, m = _ragged_offsets(o % lead, odims, oa, ob, gmo, rpos,
                                                       0, 0, 0)
            result = zero(0)
            if contracting:
                for r in range(total):
                    offa, offb, row, kr = _ragged_offsets(r, kdims, ka, kb, gmk, rpos, base_a,
                                                          base_b, row_o)
                    start = np.int64(0)
                    for g in range(g_out):
                        start += lg(gs[row * ngroups + g], pg)
                    size = lg(gs[row * ngroups + g_out], pg)
                    if start <= kr and kr < start + size:
                        result = fma(result, la(a, offa, pa), lb(b, offb, pb))
            else:
                start = np.int64(0)
                for g in range(ngroups):
                    size = lg(gs[row_o * ngroups + g], pg)
                    if start <= m and m < start + size:
                        acc = zero(0)
                        for r in range(total):
                            offa, offb = strided_offsets2(r, kdims, ka, kb, base_a,
                                                          base_b + g * gstride)
                            acc = fma(acc, la(a, offa, pa), lb(b, offb, pb))
                        result = plus(result, acc)
                    start += size
            store(out, o, result, po)
            o += step

    return k


@gpu_op("ragged-dot")
@on_device_integer_result_in_f32
def ragged_dot(lhs, rhs, group_sizes, *, shape, lhs_batch_dims=(), rhs_batch_dims=(),
               lhs_contracting_dims=(), rhs_contracting_dims=(), lhs_ragged_dims=(),
               rhs_group_dims=()):
    from .dot import accumulation
    (ragged,) = tuple(lhs_ragged_dims)
    et = shape.element_type
    gcls = type_class(group_sizes.et)
    if gcls not in ("sint", "uint"):
        raise HloEvalError(f"ragged-dot: group sizes must be integers, got {group_sizes.et.name}")
    lb, rb = list(lhs_batch_dims), list(rhs_batch_dims)
    lc, rc = list(lhs_contracting_dims), list(rhs_contracting_dims)
    lead_dims = ragged_group_prefix(lhs.ndim, ragged, lb, lc) if group_sizes.ndim > 1 else ()
    if group_sizes.ndim > 1:  # per-batch group sizes [b..., x..., g]: the CPU's check
        want_g = tuple(lhs.shape[d] for d in lead_dims)
        if tuple(group_sizes.shape[:-1]) != want_g:
            raise HloUnsupportedError("ragged-dot", "gpu", f"group_sizes of shape "
                                      f"{list(group_sizes.shape)}: expected {list(want_g)} + "
                                      f"[groups] (lhs dims {list(lead_dims)}, then the groups)")
    if ragged in lb:  # the groups only partition the batch
        return dot(lhs, rhs, shape=shape, lhs_batch_dims=lb, rhs_batch_dims=rb,
                   lhs_contracting_dims=lc, rhs_contracting_dims=rc)
    if et.is_complex:
        if et.name not in ("c64", "c128"):
            raise GpuFallback(f"ragged-dot to {et.name} has no GPU kernel")
        a, b = complex_operand(lhs, et), complex_operand(rhs, et)
        fma, zero, plus = fma_complex, zero_complex, add_complex
    else:
        a, b, fma, zero = accumulation("ragged-dot", lhs, rhs, et)
        plus = add
    ls, rs = row_major_strides(lhs.shape), row_major_strides(rhs.shape)
    lfree = [d for d in range(lhs.ndim) if d not in lb and d not in lc]
    contracting = ragged in lc
    gdims = () if contracting else tuple(rhs_group_dims)
    if not contracting and len(gdims) != 1:
        raise HloEvalError("ragged-dot with a ragged non-contracting dimension needs one "
                           "rhs_group_dims")
    rfree = [d for d in range(rhs.ndim) if d not in rb and d not in rc and d not in gdims]
    odims = [lhs.shape[d] for d in lb] + [lhs.shape[d] for d in lfree] + \
        [rhs.shape[d] for d in rfree]
    oa = [ls[d] for d in lb] + [ls[d] for d in lfree] + [0] * len(rfree)
    ob = [rs[d] for d in rb] + [0] * len(lfree) + [rs[d] for d in rfree]
    kdims = [lhs.shape[d] for d in lc]
    ngroups = group_sizes.shape[-1]
    # each leading dim's multiplier into the flat row of group_sizes[..., :]
    gstrides = row_major_strides(group_sizes.shape[:-1])
    gmo = [0] * len(odims)
    gmk = [0] * len(kdims)
    for d, gst in zip(lead_dims, gstrides):
        if d in lc:
            gmk[lc.index(d)] = gst
        else:  # a batch or non-contracting lhs dim: an output dim
            gmo[lb.index(d) if d in lb else len(lb) + lfree.index(d)] = gst
    want = ([ngroups] if contracting else []) + odims
    if list(shape.dims) != want:
        raise HloEvalError(f"ragged-dot computed dimensions {want}, the instruction says "
                           f"{list(shape.dims)}")
    rpos = lc.index(ragged) if contracting else len(lb) + lfree.index(ragged)
    lead = max(int(np.prod(odims, dtype=np.int64)), 1)
    total = int(np.prod(kdims, dtype=np.int64))
    out = empty(shape.dims, et)
    kern = _ragged_kernel(fma, zero, plus, type_class(a.et), type_class(b.et), type_class(et),
                          gcls)
    launch(kern, out.size, storage(a), storage(b), storage(out), out.size, int_tuple(odims),
           int_tuple(oa) if oa else (0,), int_tuple(ob) if ob else (0,), int_tuple(kdims),
           int_tuple(ls[d] for d in lc) if lc else (0,),
           int_tuple(rs[d] for d in rc) if rc else (0,), total, type_params(a.et),
           type_params(b.et), type_params(et), group_sizes.data, ngroups,
           type_params(group_sizes.et), contracting, rpos,
           rs[gdims[0]] if gdims else 0, lead, int_tuple(gmo) if gmo else (0,),
           int_tuple(gmk) if gmk else (0,))
    return out
