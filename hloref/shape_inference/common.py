"""What every shape rule uses: ``ShapeError``, shape printing and comparison,
attribute coercion, element-kind checks, and the ``@infer`` registry ``INFER``."""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

from ..attrs import ComputationRef, Window, WindowDim
from ..geometry import window_output_size
from ..shapes import ArrayShape, BufferShape, Shape, TupleShape, shape_to_text
from ..types import ELEMENT_TYPES, ElementType


class ShapeError(ValueError):
    """An instruction's operands/attributes violate a shape constraint."""


# --------------------------------------------------------------------------- helpers

def shape_str(shape: Shape) -> str:
    """``f32[2,3]`` / ``(f32[], s32[<=2])`` without layouts, for messages (anything that
    is not a shape: its ``str``)."""
    try:
        return shape_to_text(shape, layout=False)
    except TypeError:
        return str(shape)


def same_shape(a: Shape, b: Shape, *, ignore_element_type: bool = False,
               ignore_fp_precision: bool = False) -> bool:
    """Structural equality ignoring layouts and dynamic markers."""
    if isinstance(a, ArrayShape) and isinstance(b, ArrayShape):
        if a.dims != b.dims:
            return False
        if ignore_element_type or a.element_type == b.element_type:
            return True
        return ignore_fp_precision and a.element_type.is_float and b.element_type.is_float
    if isinstance(a, TupleShape) and isinstance(b, TupleShape):
        return len(a.elements) == len(b.elements) and all(
            same_shape(x, y, ignore_element_type=ignore_element_type,
                       ignore_fp_precision=ignore_fp_precision)
            for x, y in zip(a.elements, b.elements))
    if isinstance(a, BufferShape) and isinstance(b, BufferShape):
        return same_shape(a.inner, b.inner, ignore_element_type=ignore_element_type)
    return type(a) is type(b) and not isinstance(a, (ArrayShape, TupleShape, BufferShape))


def as_array(shape: Shape, what: str) -> ArrayShape:
    if not isinstance(shape, ArrayShape):
        raise ShapeError(f"{what} must be an array, got {shape_str(shape)}")
    return shape


def make_array(et: ElementType, dims: Iterable[int]) -> ArrayShape:
    return ArrayShape(et, tuple(int(d) for d in dims))


def int_list(value, name: str) -> tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, int):
        return (int(value),)
    try:
        return tuple(int(v) for v in value)
    except (TypeError, ValueError):
        raise ShapeError(f"attribute {name} must be a list of integers, got {value!r}") from None


def required(value, name: str):
    if value is None:
        raise ShapeError(f"missing required attribute {name}")
    return value


def check_dims_in_range(dims: Sequence[int], rank: int, name: str, *, unique: bool = True,
                   sorted_: bool = False) -> None:
    for d in dims:
        if not 0 <= d < rank:
            raise ShapeError(f"{name}={{{','.join(map(str, dims))}}}: dimension {d} is out of "
                             f"range [0, {rank})")
    if unique and len(set(dims)) != len(dims):
        raise ShapeError(f"{name}={{{','.join(map(str, dims))}}} has a repeated dimension")
    if sorted_ and list(dims) != sorted(dims):
        raise ShapeError(f"{name}={{{','.join(map(str, dims))}}} must be sorted ascending")


def arrays_of_equal_dims(operands: Sequence[Shape], op: str) -> list[ArrayShape]:
    """At least one array operand, all with the same dimensions (map, sort)."""
    if not operands:
        raise ShapeError(f"{op}: expects at least one operand")
    arrs = [as_array(o, f"{op} operand {i}") for i, o in enumerate(operands)]
    for i, a in enumerate(arrs):
        if a.dims != arrs[0].dims:
            raise ShapeError(f"{op}: operand {i} dims {list(a.dims)} differ from operand 0 "
                             f"{list(arrs[0].dims)}")
    return arrs


def tuple_or_single(shapes: list[Shape]) -> Shape:
    return shapes[0] if len(shapes) == 1 else TupleShape(tuple(shapes))


def program_shape(ps) -> tuple[tuple[Shape, ...], Shape] | None:
    """Normalize a program shape argument; None when unknown (a bare name)."""
    if ps is None or isinstance(ps, (str, ComputationRef)):
        return None
    if hasattr(ps, "parameters") and hasattr(ps, "result"):
        return tuple(ps.parameters), ps.result
    params, result = ps
    return tuple(params), result


def element_kind_ok(et: ElementType, kinds: str) -> bool:
    """kinds: letters f(loat) c(omplex) s(igned int) u(nsigned int) p(red)."""
    return ((et.is_float and "f" in kinds) or (et.is_complex and "c" in kinds)
            or (et.is_signed_integer and "s" in kinds)
            or (et.is_unsigned_integer and "u" in kinds) or (et.is_pred and "p" in kinds))


KIND_WORDS = {"f": "floating", "c": "complex", "s": "signed integer",
               "u": "unsigned integer", "p": "pred"}


def expect_kind(et: ElementType, kinds: str, op: str, what: str = "operand") -> None:
    if not element_kind_ok(et, kinds):
        words = " or ".join(KIND_WORDS[k] for k in kinds)
        raise ShapeError(f"{op}: {what} element type must be {words}, got {et.name}")


def expect_same_type(a: ArrayShape, b: ArrayShape, op: str, what: str) -> None:
    if a.element_type != b.element_type:
        raise ShapeError(f"{op}: {what} element types differ: {a.element_type.name} vs "
                         f"{b.element_type.name}")


def complex_component(et: ElementType) -> ElementType:
    return ELEMENT_TYPES["f32"] if et.name == "c64" else ELEMENT_TYPES["f64"]



def window_output_dim(size: int, wd: WindowDim) -> int:
    """Output extent of one window dimension over a base dimension of ``size``."""
    if wd.size <= 0:
        raise ShapeError(f"window size must be positive, got {wd.size}")
    if wd.stride <= 0:
        raise ShapeError(f"window stride must be positive, got {wd.stride}")
    if wd.base_dilation < 1 or wd.window_dilation < 1:
        raise ShapeError(f"window dilations must be >= 1, got lhs_dilate={wd.base_dilation} "
                         f"rhs_dilate={wd.window_dilation}")
    return window_output_size(size, wd)


def window_dims(window) -> tuple[WindowDim, ...]:
    if window is None:
        return ()
    if isinstance(window, Window):
        return tuple(window.dims)
    return tuple(window)



#: opcode -> shape rule, filled by ``@infer`` in the family modules.
INFER: dict[str, Callable[..., Shape]] = {}


def infer(*opcodes: str) -> Callable[[Callable[..., Shape]], Callable[..., Shape]]:
    """Register the decorated function as the shape rule of ``opcodes``."""
    def register(fn: Callable[..., Shape]) -> Callable[..., Shape]:
        for opcode in opcodes:
            if opcode in INFER:
                raise ValueError(f"two shape rules for opcode {opcode!r}")
            INFER[opcode] = fn
        return fn
    return register
