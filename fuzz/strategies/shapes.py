"""Element types and shapes: the ``element_types()`` and ``shapes()`` strategies, the
argument checks every public strategy shares, and the dimension drawing the builder
uses."""

from __future__ import annotations

import math

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from hloref.shapes import ArrayShape, Layout
from hloref.types import ARRAY_TYPES, ELEMENT_TYPES, ElementType

ALL_ELEMENT_TYPES: tuple[str, ...] = tuple(t.name for t in ARRAY_TYPES)
#: Types the XLA oracle accepts (s1/u1 are mapped to pred by hlo_to_stablehlo).
ORACLE_ELEMENT_TYPES: tuple[str, ...] = tuple(t for t in ALL_ELEMENT_TYPES if t not in ("s1", "u1"))

#: The type a maker falls back to when the module's types have none of a kind.
KIND_DEFAULT = {"f": "f32", "c": "c64", "s": "s32", "u": "u32", "p": "pred"}


def kind_letter(et: ElementType) -> str:
    """The letter of ``et``'s kind: f(loat) c(omplex) s(igned) u(nsigned) p(red)."""
    return {"float": "f", "complex": "c", "sint": "s", "uint": "u", "pred": "p"}[et.kind]


def validate_bounds(name: str, lo, hi, *, minimum: int = 0) -> None:
    """``min_<name>``/``max_<name>`` are integers, at least ``minimum``, ``lo <= hi``."""
    for label, v in ((f"min_{name}", lo), (f"max_{name}", hi)):
        if not isinstance(v, int) or isinstance(v, bool):
            raise InvalidArgument(f"{label}={v!r} must be an integer")
        if v < minimum:
            raise InvalidArgument(f"{label}={v} must be >= {minimum}")
    if lo > hi:
        raise InvalidArgument(f"min_{name}={lo} must be <= max_{name}={hi}")


def validate_types(names) -> tuple[str, ...]:
    """Element type names (default: ``ORACLE_ELEMENT_TYPES``), each one known."""
    if names is None:
        return ORACLE_ELEMENT_TYPES
    names = tuple(names)
    if not names:
        raise InvalidArgument("element_types must not be empty")
    for n in names:
        if n not in ALL_ELEMENT_TYPES:
            raise InvalidArgument(f"unknown element type {n!r}; expected one of "
                                  f"{', '.join(ALL_ELEMENT_TYPES)}")
    return names


def element_types(*, allowed=None, kinds: str = "fcsup") -> st.SearchStrategy[ElementType]:
    """Array element types (``ElementType``); ``allowed``: names (default: every type
    the XLA oracle accepts); ``kinds``: letters f(loat) c(omplex) s(igned) u(nsigned)
    p(red)."""
    names = validate_types(allowed)
    if not isinstance(kinds, str) or not kinds or set(kinds) - set("fcsup"):
        raise InvalidArgument(f"kinds={kinds!r} must be a non-empty string of letters from 'fcsup'")
    chosen = [ELEMENT_TYPES[n] for n in names if kind_letter(ELEMENT_TYPES[n]) in kinds]
    if not chosen:
        raise InvalidArgument(f"no element type of kinds {kinds!r} among {names}")
    return st.sampled_from(chosen)


_ABOVE_POW2 = (3, 5, 9, 17, 33, 65, 129)


def _dim(draw, max_dim: int, zero_ok: bool) -> int:
    r = draw(st.integers(0, 15))
    if r == 0 and zero_ok:
        return 0
    if r == 1:
        opts = [d for d in _ABOVE_POW2 if d <= max_dim]
        if opts:
            return draw(st.sampled_from(opts))
    return draw(st.integers(1, max(1, min(max_dim, 4))))


def draw_dims(draw, *, min_rank=0, max_rank=3, max_dim=5, max_elements=64, zero_ok=True):
    """Dimension sizes: mostly 1-4, now and then 0 (``zero_ok``) or just above a power
    of two (up to ``max_dim``), at most ``max_elements`` elements."""
    rank = draw(st.integers(min_rank, max_rank))
    dims = []
    for _ in range(rank):
        size = math.prod(dims) if dims else 1
        room = max(1, max_elements // max(size, 1))
        dims.append(min(_dim(draw, max_dim, zero_ok), room) if room >= 1 else 1)
    return tuple(dims)


def random_layout(draw, rank: int) -> Layout | None:
    """A random minor-to-major order (``None`` below rank 2, where there is one)."""
    if rank < 2:
        return None
    perm = draw(st.permutations(list(range(rank))))
    return Layout(tuple(perm))


@st.composite
def _shapes(draw, types, min_rank, max_rank, max_dim, max_elements, zero_ok, layouts):
    et = draw(element_types(allowed=types))
    dims = draw_dims(draw, min_rank=min_rank, max_rank=max_rank, max_dim=max_dim,
                     max_elements=max_elements, zero_ok=zero_ok)
    shape = ArrayShape(et, dims)
    if layouts and draw(st.integers(0, 3)) == 0:
        shape = shape.with_layout(random_layout(draw, len(dims)))
    return shape


def shapes(*, element_types=None, min_rank: int = 0, max_rank: int = 3, max_dim: int = 5,
           max_elements: int = 64, zero_size: bool = True,
           layouts: bool = True) -> st.SearchStrategy[ArrayShape]:
    """Array shapes: rank in [min_rank, max_rank], dimensions up to ``max_dim``
    (occasionally 0 when ``zero_size``, or just above a power of two), at most
    ``max_elements`` elements, a random non-default layout now and then."""
    types = validate_types(element_types)
    validate_bounds("rank", min_rank, max_rank)
    if max_rank > 6:
        raise InvalidArgument(f"max_rank={max_rank} must be <= 6")
    validate_bounds("dim", 1, max_dim, minimum=1)
    validate_bounds("elements", 1, max_elements, minimum=1)
    return _shapes(types, min_rank, max_rank, max_dim, max_elements, zero_size, layouts)
