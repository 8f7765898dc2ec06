"""Window, convolution, slice and pad arithmetic, written once.

The functions take plain integers (or a ``WindowDim``) and do no validation: the
shape rules (``hloref.shape_inference``) check the attributes and then use these
to compute extents; the evaluator, the vendor custom calls and the GPU kernels use
them on verified IR (StableHLO's rule: geometry comes from the verified program,
never re-derived). Semantics: XLA's ``operation_semantics.md`` (Pad, Slice,
ConvWithGeneralPadding, ReduceWindow) and ``ShapeInference::InferWindowOutputShape``.
"""

from __future__ import annotations

from .attrs import WindowDim

__all__ = ["dilated_size", "padded_size", "window_span", "window_output_size",
           "slice_output_size"]


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


def window_output_size(size: int, wd: WindowDim) -> int:
    """Number of window positions of ``wd`` over a base dimension of ``size``: the
    base is dilated by ``base_dilation`` and padded, the window dilated by
    ``window_dilation`` and moved by ``stride``; 0 when the window does not fit."""
    padded = wd.padding_low + dilated_size(size, wd.base_dilation) + wd.padding_high
    span = window_span(wd.size, wd.window_dilation)
    if padded < span:
        return 0
    return (padded - span) // wd.stride + 1


def slice_output_size(start: int, limit: int, stride: int) -> int:
    """``slice``'s result extent: ceil((limit - start) / stride)."""
    return -(-(limit - start) // stride)
