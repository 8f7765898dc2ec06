"""Bytes a buffer of a shape takes in XLA's memory, from the shape and its layout.

The rules of ``ShapeUtil::ByteSizeOf(shape, pointer_size=8)`` (xla/shape_util.cc), as
XLA:CPU's buffer assignment sizes buffers (``CpuCompiler``'s size function):

* an array: its elements, each ``storage bits`` wide, with the layout's tiles padding
  the minor dimensions; a sub-byte type (s2, s4, u4, f4e2m1fn...) is packed only when the
  layout says so (``E(n)``: ``ceil(elements * n / 8)`` bytes), else one byte per element;
  a dynamic shape (``<=N`` dimensions) adds its size metadata, one s32 per dimension;
* a tuple: its index table, one pointer (8 bytes) per element; the elements are
  buffers of their own;
* a token or an opaque value: nothing.

``memory_space(shape)`` is the layout's ``S(n)``: 0 is device memory, 5
(``HOST_MEMORY_SPACE``) host memory, which ``memory_analysis()`` counts apart.
"""

from __future__ import annotations

from math import ceil, prod

from .shapes import ArrayShape, BufferShape, Shape, TupleShape

__all__ = ["POINTER_SIZE", "HOST_MEMORY_SPACE", "buffer_bytes", "memory_space",
           "element_bits", "subshape", "leaf_indices"]

#: Bytes of one entry of a tuple's index table (a pointer on a 64-bit host).
POINTER_SIZE = 8
#: ``S(5)``: XLA's host memory space (``Layout::kHostMemorySpace``).
HOST_MEMORY_SPACE = 5


def element_bits(shape: ArrayShape) -> int:
    """Bits one element occupies: ``E(n)`` when the layout packs it, else whole bytes."""
    layout = shape.layout
    if layout is not None and layout.element_size_bits:
        return layout.element_size_bits
    bits = shape.element_type.bits
    if shape.element_type.kind == "pred":
        return 8
    return max(8, -(-bits // 8) * 8)


def _padded_dims(shape: ArrayShape) -> list[int]:
    """Dimensions in physical (major-to-minor) order, the minor ones padded up to the
    first tile of the layout (``T(8,128)`` pads the two most minor dimensions)."""
    dims = [max(d, 0) for d in shape.dims]
    order = list(reversed(shape.minor_to_major()))
    physical = [dims[i] for i in order]
    layout = shape.layout
    if layout is not None and layout.tiles:
        tile = layout.tiles[0]
        for k, t in enumerate(reversed(tile)):
            pos = len(physical) - 1 - k
            if pos < 0 or t <= 0:
                continue
            physical[pos] = ceil(physical[pos] / t) * t
    return physical


def buffer_bytes(shape: Shape) -> int:
    """Bytes of the top-level buffer of ``shape`` (a tuple: its index table only)."""
    if isinstance(shape, BufferShape):
        shape = shape.inner
    if isinstance(shape, TupleShape):
        return POINTER_SIZE * len(shape.elements)
    if not isinstance(shape, ArrayShape) or shape.element_type.dtype is None:
        return 0
    elements = prod(_padded_dims(shape))
    size = ceil(elements * element_bits(shape) / 8)
    if not shape.is_static:
        size += 4 * shape.rank
    return size


def memory_space(shape: Shape) -> int:
    """The ``S(n)`` of an array shape's layout (0 when not given, and for tuples)."""
    if isinstance(shape, BufferShape):
        shape = shape.inner
    if isinstance(shape, ArrayShape) and shape.layout is not None:
        return shape.layout.memory_space
    return 0


def subshape(shape: Shape, index: tuple[int, ...]) -> Shape:
    """The shape at ``index`` (a ShapeIndex) inside ``shape``."""
    for i in index:
        if not isinstance(shape, TupleShape) or not 0 <= i < len(shape.elements):
            raise IndexError(f"shape index {{{','.join(map(str, index))}}} is not in {shape}")
        shape = shape.elements[i]
    return shape


def leaf_indices(shape: Shape, prefix: tuple[int, ...] = ()) -> list[tuple[int, ...]]:
    """Every shape index of ``shape`` in pre-order: a tuple's own index, then its
    elements' (XLA's ``ShapeUtil::ForEachSubshape`` order)."""
    out = [prefix]
    if isinstance(shape, TupleShape):
        for i, element in enumerate(shape.elements):
            out.extend(leaf_indices(element, prefix + (i,)))
    return out
