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

from .dot import _operand
from .numeric import contiguous, finish
from .registry import op

OP_FAMILY = True


def _dilate_and_pad(x: np.ndarray, window: tuple[WindowDim, ...]) -> np.ndarray:
    """Base-dilate and pad the spatial dims (axes 2...) of ``x`` with zeros."""
    for axis, w in enumerate(window, start=2):
        n = x.shape[axis]
        inner = n + max(n - 1, 0) * (w.base_dilation - 1)
        lo, hi = max(w.padding_low, 0), max(w.padding_high, 0)
        shape = list(x.shape)
        shape[axis] = lo + inner + hi
        out = np.zeros(shape, x.dtype)
        place = [slice(None)] * x.ndim
        place[axis] = slice(lo, lo + inner, w.base_dilation)
        out[tuple(place)] = x
        crop = [slice(None)] * x.ndim
        crop[axis] = slice(max(-w.padding_low, 0), shape[axis] - max(-w.padding_high, 0))
        x = out[tuple(crop)]
    return x


@op("convolution")
def convolution(lhs, rhs, *extra, shape, dim_labels, window=None, feature_group_count=1,
                batch_group_count=1, operand_precision=None, algorithm=None):
    if extra:
        raise HloEvalError("convolution with sparsity metadata operands is not supported")
    dn = dim_labels
    et = shape.element_type
    nsp = len(dn.input_spatial_dimensions)
    wdims = window.dims if isinstance(window, Window) else tuple(
        WindowDim(size=rhs.shape[d]) for d in dn.kernel_spatial_dimensions)
    if len(wdims) != nsp:
        raise HloEvalError(f"window has {len(wdims)} dimensions, dim_labels {nsp} spatial dimensions")
    x = np.transpose(_operand(lhs, et), (dn.input_batch_dimension, dn.input_feature_dimension)
                     + tuple(dn.input_spatial_dimensions))
    w = np.transpose(_operand(rhs, et), (dn.kernel_output_feature_dimension,
                                        dn.kernel_input_feature_dimension)
                     + tuple(dn.kernel_spatial_dimensions))
    for axis, wd in enumerate(wdims, start=2):
        if wd.window_reversal:
            w = np.flip(w, axis=axis)
    x = _dilate_and_pad(x, wdims)
    n, c = x.shape[:2]
    o, ci = w.shape[:2]
    g, bg = feature_group_count, batch_group_count
    if c != ci * g or o % g or o % bg or n % bg:
        raise HloEvalError(f"convolution: input features {c}, kernel input features {ci}, "
                           f"output features {o}, batch {n} do not fit feature_group_count={g}, "
                           f"batch_group_count={bg}")
    out_spatial = []
    for axis, wd in enumerate(wdims, start=2):
        span = (w.shape[axis] - 1) * wd.window_dilation + 1
        size = x.shape[axis] - span
        out_spatial.append(size // wd.stride + 1 if size >= 0 else 0)
    # groups: x (BG, N/BG, G, C/G, ...), w (BG, G, O/(G*BG), C/G, ...)
    # groups: x (BG, N/BG, G, C/G, ...), w (BG, G, O/(G*BG), C/G, ...); XLA allows at
    # most one of the two counts above 1, so output features are (BG, G, O') ordered.
    xg = x.reshape((bg, n // bg, g, ci) + x.shape[2:])
    wg = w.reshape((bg, g, o // (g * bg), ci) + w.shape[2:])
    op_ = wg.shape[2]
    kernel_positions = list(itertools.product(*(range(s) for s in w.shape[2:])))
    out_size = int(np.prod(out_spatial, dtype=np.int64))
    if out_size and kernel_positions and ci:
        # im2col: patches (BG, G, N/BG * out, C/G * K) @ kernel (BG, G, C/G * K, O')
        patches = np.empty((bg, n // bg, g, ci, len(kernel_positions)) + tuple(out_spatial),
                           x.dtype)
        for kk, k in enumerate(kernel_positions):
            region = tuple(slice(ki * wd.window_dilation,
                                 ki * wd.window_dilation + (os - 1) * wd.stride + 1, wd.stride)
                           for ki, wd, os in zip(k, wdims, out_spatial))
            patches[:, :, :, :, kk] = xg[(slice(None),) * 4 + region]
        nsp = len(out_spatial)
        lhs = patches.transpose((0, 2, 1) + tuple(range(5, 5 + nsp)) + (3, 4)).reshape(
            bg, g, (n // bg) * out_size, ci * len(kernel_positions))
        rhs = wg.reshape(bg, g, op_, ci, len(kernel_positions)).transpose(0, 1, 3, 4, 2).reshape(
            bg, g, ci * len(kernel_positions), op_)
        with np.errstate(all="ignore"):
            if bg * g == 1:
                prod = np.matmul(lhs[0, 0], rhs[0, 0])[None, None]
            else:
                prod = np.matmul(lhs, rhs)
        # (BG, G, N/BG, out..., O') -> (BG, N/BG, G, O', out...)
        prod = prod.reshape((bg, g, n // bg) + tuple(out_spatial) + (op_,))
        acc = prod.transpose((0, 2, 1, 3 + nsp) + tuple(range(3, 3 + nsp)))
    else:
        acc = np.zeros((bg, n // bg, g, op_) + tuple(out_spatial), np.result_type(x.dtype, w.dtype))
    result = acc.transpose((1, 0, 2, 3) + tuple(range(4, acc.ndim)))  # (N/BG, BG, G, O', ...)
    result = result.reshape((n // bg, o) + tuple(out_spatial))
    out_order = (dn.output_batch_dimension, dn.output_feature_dimension) + tuple(dn.output_spatial_dimensions)
    result = np.transpose(result, np.argsort(out_order))
    if tuple(result.shape) != tuple(shape.dims):
        raise HloEvalError(f"convolution computed dimensions {list(result.shape)}, the "
                           f"instruction says {list(shape.dims)}")
    return contiguous(finish(result, et))

