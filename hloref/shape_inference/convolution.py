"""Shape rule of convolution."""

from __future__ import annotations

from ..attrs import ConvDimensionNumbers, WindowDim
from ..shapes import Shape
from ..types import ElementType
from .common import (ShapeError, as_array, infer, make_array, required, window_dims,
                     window_output_dim)


@infer("convolution")
def infer_convolution(lhs: Shape, rhs: Shape, *extra: Shape, dim_labels=None, window=None,
                      feature_group_count=1, batch_group_count=1,
                      result_element_type: ElementType | None = None, **_):
    """``convolution``: XLA's rules for ``dim_labels``, window, feature/batch groups.
    Element type free: ``result_element_type`` or the lhs type."""
    a = as_array(lhs, "convolution lhs")
    k = as_array(rhs, "convolution rhs")
    dn = required(dim_labels, "dim_labels")
    if not isinstance(dn, ConvDimensionNumbers):
        raise ShapeError(f"convolution: dim_labels must be parsed dimension numbers, got {dn!r}")
    fgc, bgc = int(feature_group_count or 1), int(batch_group_count or 1)
    ns = len(dn.input_spatial_dimensions)
    if len(dn.kernel_spatial_dimensions) != ns or len(dn.output_spatial_dimensions) != ns:
        raise ShapeError("convolution: dim_labels parts have different numbers of spatial dims")
    if a.rank != ns + 2 or k.rank != ns + 2:
        raise ShapeError(f"convolution: lhs rank {a.rank} and rhs rank {k.rank} must both be "
                         f"{ns + 2} ({ns} spatial dims + 2)")
    for name, dims in (("input", (dn.input_batch_dimension, dn.input_feature_dimension,
                                  *dn.input_spatial_dimensions)),
                       ("kernel", (dn.kernel_input_feature_dimension,
                                   dn.kernel_output_feature_dimension,
                                   *dn.kernel_spatial_dimensions)),
                       ("output", (dn.output_batch_dimension, dn.output_feature_dimension,
                                   *dn.output_spatial_dimensions))):
        if sorted(dims) != list(range(ns + 2)):
            raise ShapeError(f"convolution: {name} dimension numbers {list(dims)} are not a "
                             f"permutation of 0..{ns + 1}")
    if fgc < 1 or bgc < 1:
        raise ShapeError(f"convolution: group counts must be >= 1 (feature_group_count={fgc}, "
                         f"batch_group_count={bgc})")
    if fgc > 1 and bgc > 1:
        raise ShapeError("convolution: feature_group_count and batch_group_count cannot both be > 1")
    in_f = a.dims[dn.input_feature_dimension]
    batch = a.dims[dn.input_batch_dimension]
    k_in = k.dims[dn.kernel_input_feature_dimension]
    k_out = k.dims[dn.kernel_output_feature_dimension]
    if in_f % fgc:
        raise ShapeError(f"convolution: input features {in_f} not divisible by "
                         f"feature_group_count={fgc}")
    if in_f // fgc != k_in:
        raise ShapeError(f"convolution: input features {in_f} / feature_group_count {fgc} = "
                         f"{in_f // fgc} must equal the kernel input features {k_in}")
    if k_out % fgc:
        raise ShapeError(f"convolution: kernel output features {k_out} not divisible by "
                         f"feature_group_count={fgc}")
    if batch % bgc:
        raise ShapeError(f"convolution: batch {batch} not divisible by batch_group_count={bgc}")
    if k_out % bgc:
        raise ShapeError(f"convolution: kernel output features {k_out} not divisible by "
                         f"batch_group_count={bgc}")
    wdims = window_dims(window)
    if window is None:
        wdims = tuple(WindowDim(k.dims[d]) for d in dn.kernel_spatial_dimensions)
    if len(wdims) != ns:
        raise ShapeError(f"convolution: window has {len(wdims)} dimensions, expected {ns}")
    out = [0] * (ns + 2)
    out[dn.output_batch_dimension] = batch // bgc
    out[dn.output_feature_dimension] = k_out
    for i in range(ns):
        ksz = k.dims[dn.kernel_spatial_dimensions[i]]
        if wdims[i].size != ksz:
            raise ShapeError(f"convolution: window size {wdims[i].size} of spatial dim {i} must equal "
                             f"the kernel's spatial size {ksz}")
        out[dn.output_spatial_dimensions[i]] = window_output_dim(
            a.dims[dn.input_spatial_dimensions[i]], wdims[i])
    return make_array(result_element_type or a.element_type, out)
