"""``convolution`` on the GPU (mirrors ``evaluator/convolution.py``).

One thread per output element; it walks the input features of its group and the
kernel window (row-major), mapping window position ``k`` of output position ``s`` to
base-dilated, padded input coordinate ``s * stride + k * window_dilation - padding_low``
(skipped where it falls on padding or between dilated elements), with kernel reversal,
``feature_group_count`` and ``batch_group_count`` as the CPU does. Arithmetic follows
``dot``: float results accumulate in f64 and round once (the CPU sums per window
offset with einsum: a different order, covered by the accumulation bound); integer
results wrap in int64/uint64; operands of another type than the result are converted
to it on the device first (``dot.accumulation``, the CPU's rule); pred results are the
OR of ANDs (the CPU's nonzero sum of 0/1 products). Complex results accumulate in f64
parts (the CPU: c128), real operands made complex first (``dot.complex_operand``).
"""

from __future__ import annotations

import functools

from numba import cuda

from hloref.errors import HloEvalError
from hloref.evaluator.convolution import check_groups, window_dims_of

from .device import empty, type_class, type_params
from .dot import (accumulation, on_device_integer_result_in_f32, complex_operand, fma_complex, reader, storage, writer,
                  zero_complex)
from .elementwise import launch
from .registry import GpuFallback, gpu_op
from .shape_ops import dilated_index, row_major_strides, strided_offset


@functools.cache  # one compiled kernel per combination
def _kernel(fma, zero, ca, cb, co):
    la, lb, store = reader(ca), reader(cb), writer(co)

    @cuda.jit
    def k(x, w, out, n, odims, ostr, xs_n, xs_c, xstr, xsize, ws_o, ws_i, wstr, wsize,
          stride, wdil, bdil, lo, rev, ci, oprime, g, nb, ks, pa, pb, po):
        o = cuda.grid(1)
        gstep = cuda.gridsize(1)
        nsp = len(xsize)
        while o < n:
            # canonical output index (batch, feature, spatial...) -> digits and out offset
            ooff = strided_offset(o, odims, ostr, 0)
            # spatial digits are recomputed below; batch and feature digits first
            sp_total = 1
            for d in range(nsp):
                sp_total *= odims[2 + d]
            f = (o // sp_total) % odims[1]
            nb_idx = o // (sp_total * odims[1])
            b_idx = f // (g * oprime)
            g_idx = (f // oprime) % g
            batch = b_idx * nb + nb_idx
            acc = zero(0)
            for r in range(ci * ks):
                cp = r // ks
                kr = r - cp * ks
                xoff = batch * xs_n + (g_idx * ci + cp) * xs_c
                woff = f * ws_o + cp * ws_i
                inside = True
                srem = o
                for d in range(nsp - 1, -1, -1):
                    kq = kr // wsize[d]
                    kd = kr - kq * wsize[d]
                    kr = kq
                    sq = srem // odims[2 + d]
                    sd = srem - sq * odims[2 + d]
                    srem = sq
                    idx = dilated_index(sd * stride[d] + kd * wdil[d] - lo[d], bdil[d],
                                        xsize[d])
                    if idx < 0:
                        inside = False
                    else:
                        xoff += idx * xstr[d]
                    kk = kd
                    if rev[d] != 0:
                        kk = wsize[d] - 1 - kd
                    woff += kk * wstr[d]
                if inside:
                    acc = fma(acc, la(x, xoff, pa), lb(w, woff, pb))
            store(out, ooff, acc, po)
            o += gstep

    return k


def _t(values, pad):
    values = tuple(int(v) for v in values)
    return values if values else (pad,)


@gpu_op("convolution")
@on_device_integer_result_in_f32
def convolution(lhs, rhs, *extra, shape, dim_labels, window=None, feature_group_count=1,
                batch_group_count=1, **_):
    if extra:
        raise GpuFallback("convolution with sparsity metadata operands")
    et = shape.element_type
    if et.is_complex:
        if et.name not in ("c64", "c128"):
            raise GpuFallback(f"convolution to {et.name} has no GPU kernel")
        lhs, rhs = complex_operand(lhs, et), complex_operand(rhs, et)
        fma, zero = fma_complex, zero_complex
    else:
        lhs, rhs, fma, zero = accumulation("convolution", lhs, rhs, et)
    dn = dim_labels
    wdims = window_dims_of(window, rhs.shape, dn)
    g, bg = feature_group_count, batch_group_count
    n, c = lhs.shape[dn.input_batch_dimension], lhs.shape[dn.input_feature_dimension]
    o = rhs.shape[dn.kernel_output_feature_dimension]
    ci = rhs.shape[dn.kernel_input_feature_dimension]
    check_groups(n, c, ci, o, g, bg)
    xst, wst = row_major_strides(lhs.shape), row_major_strides(rhs.shape)
    out = empty(shape.dims, et)
    ost = row_major_strides(shape.dims)
    out_order = (dn.output_batch_dimension, dn.output_feature_dimension) + tuple(dn.output_spatial_dimensions)
    odims = [shape.dims[d] for d in out_order]
    if odims[0] != n // bg or odims[1] != o:
        raise HloEvalError(f"convolution result dimensions {list(shape.dims)} do not fit the operands")
    ks = 1
    for d in dn.kernel_spatial_dimensions:
        ks *= rhs.shape[d]
    sp = [rhs.shape[d] for d in dn.kernel_spatial_dimensions]
    k = _kernel(fma, zero, type_class(lhs.et), type_class(rhs.et), type_class(et))
    launch(k, out.size, storage(lhs), storage(rhs), storage(out), out.size, tuple(odims),
           tuple(ost[d] for d in out_order),
           xst[dn.input_batch_dimension], xst[dn.input_feature_dimension],
           _t((xst[d] for d in dn.input_spatial_dimensions), 0),
           _t((lhs.shape[d] for d in dn.input_spatial_dimensions), 1),
           wst[dn.kernel_output_feature_dimension], wst[dn.kernel_input_feature_dimension],
           _t((wst[d] for d in dn.kernel_spatial_dimensions), 0), _t(sp, 1),
           _t((wd.stride for wd in wdims), 1), _t((wd.window_dilation for wd in wdims), 1),
           _t((wd.base_dilation for wd in wdims), 1), _t((wd.padding_low for wd in wdims), 0),
           _t((int(bool(wd.window_reversal)) for wd in wdims), 0),
           ci, o // (g * bg), g, n // bg, ks, type_params(lhs.et), type_params(rhs.et),
           type_params(et))
    return out
