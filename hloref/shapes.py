"""Shapes and layouts as HLO text writes them.

``ArrayShape`` (``f32[2,<=3]{1,0:T(8,128)}``), ``TupleShape`` (``(f32[], s32[2])``),
``TokenShape`` (``token[]``), ``OpaqueShape`` (``opaque[]``), ``BufferShape``
(``b(f32[4])``). Shapes are immutable and hashable; equality is structural and
includes the layout (use ``same_dims_and_type`` to ignore it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

import numpy as np

from .types import ElementType, element_type

__all__ = [
    "Layout", "Shape", "ArrayShape", "TupleShape", "TokenShape", "OpaqueShape", "BufferShape",
    "UNBOUNDED", "array_shape", "scalar", "shape_of_value", "flatten_shape", "byte_size",
    "ProgramShape", "shape_to_text", "layout_to_text",
]

#: Size recorded for an unbounded dynamic dimension (``?`` in text).
UNBOUNDED = -1


@dataclass(frozen=True)
class Layout:
    """``{minor_to_major : suffixes}``.

    ``tiles`` holds each ``T(...)`` tile as a tuple of ints, with ``-1`` for ``*``
    (a combined dimension). ``element_size_bits`` is ``E(n)`` (0: not given),
    ``memory_space`` is ``S(n)`` (0: not given). Suffixes an interpreter never
    needs (``D``, ``L``, ``#``, ``*``, ``SC``, ``P``, ``M``) are kept verbatim, in
    text order, in ``other`` as ``(letter, text inside the parentheses)`` pairs,
    so the printer can write them back.
    """

    minor_to_major: tuple[int, ...]
    tiles: tuple[tuple[int, ...], ...] = ()
    element_size_bits: int = 0
    memory_space: int = 0
    other: tuple[tuple[str, str], ...] = ()

    @property
    def is_default_order(self) -> bool:
        n = len(self.minor_to_major)
        return self.minor_to_major == tuple(range(n - 1, -1, -1))


class Shape:
    """Base class of all shapes."""

    is_array = False
    is_tuple = False
    is_token = False

    def to_text(self, *, layout: bool = True) -> str:  # pragma: no cover - overridden
        raise NotImplementedError

    def __str__(self) -> str:
        return self.to_text()


@dataclass(frozen=True)
class ArrayShape(Shape):
    element_type: ElementType
    dims: tuple[int, ...]
    #: ``True`` for dimensions written ``<=N`` (bounded dynamic) or ``?`` (unbounded).
    dynamic: tuple[bool, ...] = field(default=())
    layout: Layout | None = None

    is_array = True

    def __post_init__(self):
        if not self.dynamic:
            object.__setattr__(self, "dynamic", (False,) * len(self.dims))

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def size(self) -> int:
        """Number of elements (bounded dynamic dimensions count at their bound)."""
        return prod(max(d, 0) for d in self.dims)

    @property
    def dtype(self) -> np.dtype:
        return self.element_type.dtype

    @property
    def is_static(self) -> bool:
        return not any(self.dynamic)

    def with_layout(self, layout: Layout | None) -> "ArrayShape":
        return ArrayShape(self.element_type, self.dims, self.dynamic, layout)

    def with_dims(self, dims, element_type: ElementType | None = None) -> "ArrayShape":
        return ArrayShape(element_type or self.element_type, tuple(dims))

    def with_element_type(self, et: ElementType) -> "ArrayShape":
        return ArrayShape(et, self.dims, self.dynamic, self.layout)

    def same_dims_and_type(self, other: Shape) -> bool:
        return (isinstance(other, ArrayShape) and other.element_type == self.element_type
                and other.dims == self.dims)

    def minor_to_major(self) -> tuple[int, ...]:
        if self.layout is not None:
            return self.layout.minor_to_major
        return tuple(range(self.rank - 1, -1, -1))

    def to_text(self, *, layout: bool = True) -> str:
        return shape_to_text(self, layout=layout)


@dataclass(frozen=True)
class TupleShape(Shape):
    elements: tuple[Shape, ...]

    is_tuple = True

    def to_text(self, *, layout: bool = True) -> str:
        return shape_to_text(self, layout=layout)


@dataclass(frozen=True)
class TokenShape(Shape):
    is_token = True

    def to_text(self, *, layout: bool = True) -> str:
        return "token[]"


@dataclass(frozen=True)
class OpaqueShape(Shape):
    def to_text(self, *, layout: bool = True) -> str:
        return "opaque[]"


@dataclass(frozen=True)
class BufferShape(Shape):
    """``b(shape)``: a buffer of an array shape (new in XLA 2026)."""

    inner: ArrayShape

    def to_text(self, *, layout: bool = True) -> str:
        return f"b({self.inner.to_text(layout=layout)})"


def array_shape(type_name: str | ElementType, dims=()) -> ArrayShape:
    et = element_type(type_name) if isinstance(type_name, str) else type_name
    return ArrayShape(et, tuple(int(d) for d in dims))


def scalar(type_name: str | ElementType) -> ArrayShape:
    return array_shape(type_name, ())


def flatten_shape(shape: Shape) -> list[Shape]:
    """Leaves of a (possibly nested) tuple shape, in order."""
    if isinstance(shape, TupleShape):
        out: list[Shape] = []
        for e in shape.elements:
            out.extend(flatten_shape(e))
        return out
    return [shape]


def byte_size(shape: Shape) -> int:
    """Bytes the evaluator allocates for a value of this shape (numpy storage)."""
    if isinstance(shape, ArrayShape):
        return shape.size * shape.element_type.dtype.itemsize
    if isinstance(shape, TupleShape):
        return sum(byte_size(e) for e in shape.elements)
    return 0


def shape_of_value(value) -> Shape:
    """The shape (default layout) of an evaluator value: numpy array, tuple or token."""
    from .types import from_dtype
    if isinstance(value, tuple):
        return TupleShape(tuple(shape_of_value(v) for v in value))
    if isinstance(value, np.ndarray):
        return ArrayShape(from_dtype(value.dtype), tuple(value.shape))
    from .values import Token
    if isinstance(value, Token):
        return TokenShape()
    raise TypeError(f"not an HLO value: {type(value).__name__}")


@dataclass(frozen=True)
class ProgramShape:
    """``(shape, ...) -> shape``, e.g. ``entry_computation_layout``."""

    parameters: tuple[Shape, ...]
    result: Shape


# -- text (the printer and error messages write shapes with these) -------------------------

def layout_to_text(layout: Layout) -> str:
    other = dict()
    for letter, text in layout.other:
        other.setdefault(letter, []).append(text)
    parts: list[str] = []

    def emit_other(letter: str):
        for text in other.pop(letter, []):
            parts.append(f"{letter}({text})")

    emit_other("D")
    if layout.tiles:
        parts.append("T" + "".join(
            "(" + ",".join("*" if d == -1 else str(d) for d in t) + ")" for t in layout.tiles))
    for letter in ("L", "#", "*"):
        emit_other(letter)
    if layout.element_size_bits:
        parts.append(f"E({layout.element_size_bits})")
    if layout.memory_space:
        parts.append(f"S({layout.memory_space})")
    for letter in ("SC", "P", "M"):
        emit_other(letter)
    for letter in list(other):
        emit_other(letter)
    text = ",".join(str(d) for d in layout.minor_to_major)
    if parts:
        text += ":" + "".join(parts)
    return "{" + text + "}"


def shape_to_text(shape: Shape, layout: bool = True) -> str:
    if isinstance(shape, ArrayShape):
        dims = []
        dyn = shape.dynamic or (False,) * len(shape.dims)
        for d, is_dyn in zip(shape.dims, dyn):
            if d == UNBOUNDED:
                dims.append("?")
            elif is_dyn:
                dims.append(f"<={d}")
            else:
                dims.append(str(d))
        text = f"{shape.element_type.name}[{','.join(dims)}]"
        if layout and shape.layout is not None:
            text += layout_to_text(shape.layout)
        return text
    if isinstance(shape, TupleShape):
        return "(" + ", ".join(shape_to_text(e, layout) for e in shape.elements) + ")"
    if isinstance(shape, TokenShape):
        return "token[]"
    if isinstance(shape, OpaqueShape):
        return "opaque[]"
    if isinstance(shape, BufferShape):
        return f"b({shape_to_text(shape.inner, layout)})"
    raise TypeError(f"not a shape: {shape!r}")
