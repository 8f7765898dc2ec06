"""Window, convolution, slice and pad arithmetic, written once.

The functions take plain integers (or a ``WindowDim``) and do no validation: the
shape rules (``hloref.shape_inference``) check the attributes and then use these
to compute extents; the evaluator, the vendor custom calls and the GPU kernels use
them on verified IR (StableHLO's rule: geometry comes from the verified program,
never re-derived). Semantics: XLA's ``operation_semantics.md`` (Pad, Slice,
ConvWithGeneralPadding, ReduceWindow) and ``ShapeInference::InferWindowOutputShape``.
"""

from __future__ import annotations

import math

from .attrs import WindowDim

__all__ = ["dilated_size", "padded_size", "window_span", "window_positions",
           "window_output_size", "slice_output_size", "dilate_pad_slices", "window_tap_slice",
           "tap_data_positions", "base_index"]


def dilated_size(size: int, dilation: int) -> int:
    """Extent of ``size`` elements with ``dilation - 1`` holes between neighbours."""
    return 0 if size == 0 else (size - 1) * dilation + 1


def padded_size(size: int, low: int, high: int, interior: int = 0) -> int:
    """``pad``'s result extent: low + high + size + max(size - 1, 0) * interior
    (negative low/high crop)."""
    return low + high + size + max(size - 1, 0) * interior


def window_span(size: int, window_dilation: int) -> int:
    """Extent a window of ``size`` taps covers with ``window_dilation``."""
    return dilated_size(size, window_dilation)


def window_positions(extent: int, span: int, stride: int) -> int:
    """Positions of a window covering ``span`` elements moved by ``stride`` over an
    (already dilated and padded) extent; 0 when it does not fit."""
    if extent < span:
        return 0
    return (extent - span) // stride + 1


def window_output_size(size: int, wd: WindowDim) -> int:
    """Number of window positions of ``wd`` over a base dimension of ``size``: the
    base is dilated by ``base_dilation`` and padded, the window dilated by
    ``window_dilation`` and moved by ``stride``; 0 when the window does not fit."""
    padded = wd.padding_low + dilated_size(size, wd.base_dilation) + wd.padding_high
    return window_positions(padded, window_span(wd.size, wd.window_dilation), wd.stride)


def slice_output_size(start: int, limit: int, stride: int) -> int:
    """``slice``'s result extent: ceil((limit - start) / stride)."""
    return -(-(limit - start) // stride)


def dilate_pad_slices(size: int, low: int, high: int,
                      dilation: int = 1) -> tuple[int, slice, slice]:
    """Where ``size`` elements land when base-dilated (``dilation - 1`` holes between
    neighbours) and padded by ``low``/``high`` (a negative amount crops).

    Returns ``(extent, dst, src)``: the padded extent (never negative), the slice of
    the padded frame the kept elements occupy, and the slice of the elements kept,
    so ``frame[dst] = x[src]`` builds the frame in one assignment."""
    inner = dilated_size(size, dilation)
    full = max(low, 0) + inner + max(high, 0)
    c0, c1 = max(-low, 0), full - max(-high, 0)  # crop the negative padding off
    extent = max(c1 - c0, 0)
    first = max(low, 0)
    # source positions first + i * dilation (i in [0, size)) that land in [c0, c1)
    i0 = 0 if first >= c0 else -(-(c0 - first) // dilation)
    i1 = min(size, (c1 - 1 - first) // dilation + 1) if c1 > first else 0
    i1 = max(i1, i0)
    if i1 == i0:
        return extent, slice(0, 0), slice(i0, i1)
    start = first + i0 * dilation - c0
    stop = start + (i1 - i0 - 1) * dilation + 1
    return extent, slice(start, stop, dilation), slice(i0, i1)


def window_tap_slice(tap: int, positions: int, stride: int, window_dilation: int) -> slice:
    """The frame elements that window tap ``tap`` (0-based offset inside the window)
    reads at each of ``positions`` window positions: ``tap * window_dilation +
    p * stride`` for ``p`` in ``[0, positions)``."""
    start = tap * window_dilation
    return slice(start, start + (positions - 1) * stride + 1, stride)


def tap_data_positions(tap: int, positions: int, stride: int, window_dilation: int,
                       data: slice) -> range:
    """The window positions ``p`` in ``[0, positions)`` at which tap ``tap`` reads a
    frame element of ``data`` (``dilate_pad_slices``'s ``dst``: where the real
    elements lie, ``data.step`` apart), not padding or a hole of the base dilation: an
    arithmetic progression, ``tap * window_dilation + p * stride`` in ``data``."""
    step = data.step or 1
    if data.stop <= data.start or positions <= 0:
        return range(0)
    c = tap * window_dilation
    lo = max(0, -(-(data.start - c) // stride))
    hi = min(positions - 1, (data.stop - 1 - c) // stride)
    period = step // math.gcd(stride, step)
    for p in range(lo, min(lo + period, hi + 1)):
        if (p * stride + c - data.start) % step == 0:
            return range(p, hi + 1, period)
    return range(0)


def base_index(position: int, tap: int, stride: int, window_dilation: int, padding_low: int,
               base_dilation: int, size: int) -> int:
    """The base element that window tap ``tap`` reads at window position ``position``,
    or -1 where it reads padding or a hole of the base dilation. Plain integer
    arithmetic, so Numba can compile it for the CPU and for CUDA kernels."""
    p = position * stride + tap * window_dilation - padding_low
    if p < 0 or p % base_dilation != 0:
        return -1
    index = p // base_dilation
    return index if index < size else -1
