"""``convolution`` (operation_semantics §ConvWithGeneralPadding, StableHLO §convolution).

The input is base-dilated (``lhs_dilate``) and padded (negative padding crops),
the kernel is reversed where ``rhs_reversal`` says so and window-dilated
(``rhs_dilate``); each output element is the sum over the window and the input
features of its group. ``feature_group_count`` splits input features and output
features into groups; ``batch_group_count`` splits the batch and the output
features. Arithmetic follows ``dot``: float results accumulate in f64 (complex in
c128) and round once; integer results wrap in int64/uint64 (hloref's stated rule:
wrap-around like ``dot``, not the saturation of XLA's HloEvaluator).
"""

from __future__ import annotations

import itertools

import numpy as np

from hloref.attrs import Window, WindowDim
from hloref.errors import HloEvalError
from hloref.geometry import (dilate_pad_slices, tap_data_positions, window_positions,
                             window_span, window_tap_slice)

from .blas_threads import blas_call
from .dot import dot_operand, integer_result_in_f32
from .numeric import contiguous, element_type_of, finish, quiet
from .registry import op


#: the largest im2col buffer (every window position of every output, in bytes) the
#: convolution builds; past it, one GEMM per window position, summed into the result
PATCH_BYTES = 1 << 30


def _padded_channels_last(lhs: np.ndarray, et, dn, window: tuple[WindowDim, ...]) -> np.ndarray:
    """The input as (batch, spatial..., feature) in the compute type, base-dilated and
    padded with zeros (negative padding crops), built in one pass over the input."""
    order = (dn.input_batch_dimension,) + tuple(dn.input_spatial_dimensions) + \
        (dn.input_feature_dimension,)
    src = np.transpose(lhs, order)
    if et.is_narrow_float or not (element_type_of(lhs).dtype == et.dtype and et.dtype in
                                  (np.dtype(np.float32), np.dtype(np.float64))):
        src = dot_operand(src, et)  # exact widening / integer conversion as dot does it
        dtype = src.dtype
    else:
        dtype = np.dtype(np.float64)  # f32/f64: widened exactly while copying below
    out_shape, place, crop = [src.shape[0]], [slice(None)], [slice(None)]
    for axis, w in enumerate(window, start=1):
        extent, dst, kept = dilate_pad_slices(src.shape[axis], w.padding_low, w.padding_high,
                                              w.base_dilation)
        out_shape.append(extent)
        place.append(dst)
        crop.append(kept)
    out_shape.append(src.shape[-1])
    place.append(slice(None))
    crop.append(slice(None))
    out = np.zeros(out_shape, dtype)
    out[tuple(place)] = src[tuple(crop)]
    return out


def window_dims_of(window, rhs_dims, dn) -> tuple:
    """The convolution's window dimensions: ``window``'s, or without one the kernel's
    spatial sizes; one per spatial dimension of ``dim_labels`` ``dn``."""
    nsp = len(dn.input_spatial_dimensions)
    wdims = window.dims if isinstance(window, Window) else tuple(
        WindowDim(size=rhs_dims[d]) for d in dn.kernel_spatial_dimensions)
    if len(wdims) != nsp:
        raise HloEvalError(f"window has {len(wdims)} dimensions, dim_labels {nsp} spatial dimensions")
    return wdims


def check_groups(n: int, c: int, ci: int, o: int, g: int, bg: int) -> None:
    """Batch ``n``, input features ``c``, kernel input/output features ``ci``/``o`` fit
    ``feature_group_count`` ``g`` and ``batch_group_count`` ``bg``."""
    if c != ci * g or o % g or o % bg or n % bg:
        raise HloEvalError(f"convolution: input features {c}, kernel input features {ci}, "
                           f"output features {o}, batch {n} do not fit feature_group_count={g}, "
                           f"batch_group_count={bg}")


@op("convolution")
@integer_result_in_f32()
def convolution(lhs, rhs, *extra, shape, dim_labels, window=None, feature_group_count=1,
                batch_group_count=1, operand_precision=None, algorithm=None):
    if extra:
        raise HloEvalError("convolution with sparsity metadata operands is not supported")
    dn = dim_labels
    et = shape.element_type
    nsp = len(dn.input_spatial_dimensions)
    wdims = window_dims_of(window, rhs.shape, dn)
    # channels last: x (N, spatial..., C); w (spatial..., CI, O)
    x = _padded_channels_last(lhs, et, dn, wdims)
    w = np.transpose(dot_operand(rhs, et), tuple(dn.kernel_spatial_dimensions)
                     + (dn.kernel_input_feature_dimension, dn.kernel_output_feature_dimension))
    for axis, wd in enumerate(wdims):
        if wd.window_reversal:
            w = np.flip(w, axis=axis)
    n, c = x.shape[0], x.shape[-1]
    ci, o = w.shape[-2:]
    g, bg = feature_group_count, batch_group_count
    check_groups(n, c, ci, o, g, bg)
    out_spatial = []
    for axis, wd in enumerate(wdims):
        span = window_span(w.shape[axis], wd.window_dilation)
        out_spatial.append(window_positions(x.shape[1 + axis], span, wd.stride))
    out_spatial = tuple(out_spatial)
    nb = n // bg
    op_ = o // (g * bg)
    # groups: x (BG, N/BG, spatial..., G, CI); w (spatial..., CI, BG, G, O'). XLA allows
    # at most one of the two counts above 1; output features are ordered (BG, G, O').
    xg = x.reshape((bg, nb) + x.shape[1:-1] + (g, ci))
    kernel_positions = list(itertools.product(*(range(s) for s in w.shape[:nsp])))
    kk_count = len(kernel_positions)
    out_size = int(np.prod(out_spatial, dtype=np.int64))
    if out_size and kk_count and ci:
        # the (BG, N/BG, out..., G, CI) view of one window position, as (BG, G, N/BG, out..., CI)
        to_gemm = (0, 2 + nsp, 1) + tuple(range(2, 2 + nsp)) + (3 + nsp,)

        def tap(k):
            region = tuple(window_tap_slice(ki, os, wd.stride, wd.window_dilation)
                           for ki, wd, os in zip(k, wdims, out_spatial))
            return xg[(slice(None), slice(None)) + region].transpose(to_gemm)

        patch_bytes = bg * g * nb * out_size * kk_count * ci * x.dtype.itemsize
        if patch_bytes <= PATCH_BYTES:
            # im2col straight into GEMM layout: patches (BG, G, N/BG, out..., K, CI)
            patches = np.empty((bg, g, nb) + out_spatial + (kk_count, ci), x.dtype)
            for kk, k in enumerate(kernel_positions):
                patches[..., kk, :] = tap(k)
            lhs_m = patches.reshape(bg, g, nb * out_size, kk_count * ci)
            rhs_m = w.reshape((kk_count * ci, bg, g, op_)).transpose(1, 2, 0, 3)
            if bg * g == 1:
                prod = blas_call(quiet, np.matmul, lhs_m[0, 0], rhs_m[0, 0])[None, None]
            else:
                prod = blas_call(quiet, np.matmul, lhs_m, rhs_m)
        else:
            # the windows would not fit: one GEMM per window position, summed into the
            # result (the same products; the sum in the compute type in another order,
            # f64 for floats, exact for integers), each only over the outputs at which
            # that tap reads real input elements, not padding or dilation holes
            data = [dilate_pad_slices(lhs.shape[d], wd.padding_low, wd.padding_high,
                                      wd.base_dilation)[1]
                    for d, wd in zip(dn.input_spatial_dimensions, wdims)]
            wk = w.reshape((kk_count, ci, bg, g, op_))
            prod = np.zeros((bg, g, nb) + out_spatial + (op_,),
                            np.result_type(x.dtype, w.dtype))
            with np.errstate(all="ignore"):
                for kk, k in enumerate(kernel_positions):
                    hits = [tap_data_positions(ki, os, wd.stride, wd.window_dilation, dd)
                            for ki, os, wd, dd in zip(k, out_spatial, wdims, data)]
                    if not all(hits):
                        continue
                    reads = tuple(slice(ki * wd.window_dilation + r.start * wd.stride,
                                        ki * wd.window_dilation + (r[-1]) * wd.stride + 1,
                                        r.step * wd.stride)
                                  for ki, wd, r in zip(k, wdims, hits))
                    sub = tuple(len(r) for r in hits)
                    lhs_k = np.ascontiguousarray(
                        xg[(slice(None), slice(None)) + reads].transpose(to_gemm))
                    part = blas_call(np.matmul, lhs_k.reshape(bg, g, nb * int(np.prod(sub)), ci),
                                     wk[kk].transpose(1, 2, 0, 3))
                    writes = tuple(slice(r.start, r[-1] + 1, r.step) for r in hits)
                    prod[(slice(None),) * 3 + writes] += part.reshape((bg, g, nb) + sub + (op_,))
        # (BG, G, N/BG, out..., O') -> (N/BG, out..., BG, G, O')
        prod = prod.reshape((bg, g, nb) + out_spatial + (op_,))
        acc = prod.transpose((2,) + tuple(range(3, 3 + nsp)) + (0, 1, 3 + nsp))
    else:
        acc = np.zeros((nb,) + out_spatial + (bg, g, op_), np.result_type(x.dtype, w.dtype))
    result = acc.reshape((nb,) + out_spatial + (o,))  # copies only when it must
    # (batch, spatial..., feature) -> the output dimension order
    logical = (dn.output_batch_dimension,) + tuple(dn.output_spatial_dimensions) + \
        (dn.output_feature_dimension,)
    result = np.transpose(result, np.argsort(logical))
    if tuple(result.shape) != tuple(shape.dims):
        raise HloEvalError(f"convolution computed dimensions {list(result.shape)}, the "
                           f"instruction says {list(shape.dims)}")
    if et.dtype in (np.dtype(np.float32), np.dtype(np.float64)) and result.dtype.kind == "f":
        out = np.empty(result.shape, et.dtype)
        with np.errstate(over="ignore", invalid="ignore"):  # f64 -> f32 overflow is inf
            np.copyto(out, result, casting="unsafe")  # one rounding, one pass, C order
        return out
    return contiguous(finish(result, et))
