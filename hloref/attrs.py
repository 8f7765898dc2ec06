"""Typed attribute values of HLO instructions.

The parser turns each known attribute into one of these (or a plain ``int``,
``bool``, ``str``, ``tuple``); the printer writes each back in XLA's syntax. An
attribute whose syntax hloref does not interpret (``metadata``, ``sharding``,
``backend_config``, ...) is kept as ``Raw`` text and printed verbatim.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "Raw", "ComputationRef", "WindowDim", "Window", "ConvDimensionNumbers", "SliceDim",
    "PaddingDim", "ReplicaGroups", "Enum", "LiteralAttr",
]


class Raw(str):
    """Attribute text kept verbatim (everything after ``name=``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Raw({str.__repr__(self)})"


class Enum(str):
    """An enum-valued attribute written bare (``direction=LT``, ``kind=kLoop``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Enum({str.__repr__(self)})"


class ComputationRef(str):
    """The name of a called computation (``to_apply=%add``), without the ``%``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"ComputationRef({str.__repr__(self)})"


@dataclass(frozen=True)
class WindowDim:
    size: int
    stride: int = 1
    padding_low: int = 0
    padding_high: int = 0
    window_dilation: int = 1  # rhs_dilate
    base_dilation: int = 1  # lhs_dilate
    window_reversal: bool = False


@dataclass(frozen=True)
class Window:
    """``window={size=3x3 stride=2x2 pad=0_1x1_1 lhs_dilate=1x1 rhs_dilate=2x2 rhs_reversal=0x1}``."""

    dims: tuple[WindowDim, ...]


@dataclass(frozen=True)
class ConvDimensionNumbers:
    """``dim_labels=b01f_01io->b01f``.

    ``input_spatial_dimensions[k]`` is the position of spatial dim ``k`` in the
    input shape, and likewise for the kernel and output. ``labels`` keeps the
    text so that ``?`` positions print back unchanged.
    """

    input_batch_dimension: int
    input_feature_dimension: int
    input_spatial_dimensions: tuple[int, ...]
    kernel_input_feature_dimension: int
    kernel_output_feature_dimension: int
    kernel_spatial_dimensions: tuple[int, ...]
    output_batch_dimension: int
    output_feature_dimension: int
    output_spatial_dimensions: tuple[int, ...]
    labels: str = ""


@dataclass(frozen=True)
class SliceDim:
    """One ``[start:limit:stride]`` of a ``slice=`` attribute."""

    start: int
    limit: int
    stride: int = 1


@dataclass(frozen=True)
class PaddingDim:
    """One ``lo_hi_interior`` of a ``padding=`` attribute."""

    low: int
    high: int
    interior: int = 0


@dataclass(frozen=True)
class ReplicaGroups:
    """``replica_groups=``: explicit groups (``{{0,1},{2,3}}``) or the iota form.

    ``groups`` is the explicit list of device-id lists when it could be derived
    (legacy and iota forms); ``text`` is the attribute as written, for printing.
    """

    groups: tuple[tuple[int, ...], ...] | None
    text: str


@dataclass(frozen=True, eq=False)
class LiteralAttr:
    """An attribute holding a shaped literal, ``indices=s32[3,1]{1,0} { {2}, {0}, {1} }``
    (``shuffle`` in permute mode): the shape as written (layout kept) and the value."""

    shape: object  # an ArrayShape
    value: object  # a numpy array of the shape's element type
