"""Makers of shape ops: broadcast, reshape, transpose, reverse, slice, concatenate,
pad, iota, constant, tuple/get-tuple-element."""

from __future__ import annotations

from hypothesis import strategies as st

from hloref.attrs import PaddingDim, SliceDim
from hloref.shapes import ArrayShape

from .builder import Builder


def make_broadcast(b: Builder):
    x = b.operand("fcsup", max_rank=2)
    rank = b.draw(st.integers(x.shape.rank, min(x.shape.rank + 2, 4)))
    positions = sorted(b.draw(st.permutations(list(range(rank))))[:x.shape.rank])
    dims = [0] * rank
    for p, d in zip(positions, x.shape.dims):
        dims[p] = d
    size = max(x.shape.size, 1)
    for i in range(rank):
        if i not in positions:
            room = max(1, b.cfg.max_elements // size)
            dims[i] = b.draw(st.integers(1, max(1, min(4, room))))
            size *= dims[i]
    return b.add("broadcast", [x], {"dimensions": tuple(positions)},
                 shape=ArrayShape(x.shape.element_type, tuple(dims)))


def _factor(b: Builder, n: int) -> tuple:
    if n == 0:
        dims = list(b.new_dims(min_rank=1))
        if 0 not in dims:
            dims[b.draw(st.integers(0, len(dims) - 1))] = 0
        return tuple(dims)
    dims = []
    rest = n
    for _ in range(b.draw(st.integers(0, 3))):
        divs = [d for d in range(1, rest + 1) if rest % d == 0]
        d = b.draw(st.sampled_from(divs))
        dims.append(d)
        rest //= d
    dims.append(rest)
    if b.draw(st.booleans()):
        dims.insert(b.draw(st.integers(0, len(dims))), 1)
    perm = b.draw(st.permutations(dims))
    return tuple(perm)


def make_reshape(b: Builder):
    x = b.operand("fcsup")
    return b.add("reshape", [x], shape=ArrayShape(x.shape.element_type, _factor(b, x.shape.size)))


def make_transpose(b: Builder):
    x = b.operand("fcsup", min_rank=1)
    perm = tuple(b.draw(st.permutations(list(range(x.shape.rank)))))
    return b.add("transpose", [x], {"dimensions": perm})


def make_reverse(b: Builder):
    x = b.operand("fcsup", min_rank=1)
    dims = tuple(sorted(b.draw(st.sets(st.integers(0, x.shape.rank - 1), min_size=1))))
    return b.add("reverse", [x], {"dimensions": dims})


def make_slice(b: Builder):
    x = b.operand("fcsup", min_rank=1)
    sl = []
    for d in x.shape.dims:
        start = b.draw(st.integers(0, d))
        limit = b.draw(st.integers(start, d))
        stride = b.draw(st.integers(1, 3))
        sl.append(SliceDim(start, limit, stride))
    return b.add("slice", [x], {"slice": tuple(sl)})


def make_concatenate(b: Builder):
    x = b.operand("fcsup", min_rank=1)
    dim = b.draw(st.integers(0, x.shape.rank - 1))
    parts = [x]
    for _ in range(b.draw(st.integers(1, 2))):
        dims = list(x.shape.dims)
        dims[dim] = b.draw(st.integers(0, 3))
        parts.append(b.operand(et=x.shape.element_type, dims=tuple(dims)))
    return b.add("concatenate", parts, {"dimensions": (dim,)})


def make_pad(b: Builder):
    # rank >= 1: hloref prints a rank-0 pad as ``padding=`` and cannot read it back
    x = b.operand("fcsup", min_rank=1)
    pv = b.scalar_of(x.shape.element_type)
    pads = []
    for d in x.shape.dims:
        interior = b.draw(st.integers(0, 2)) if d > 1 else 0
        full = d + max(d - 1, 0) * interior
        low = b.draw(st.integers(-min(2, full), 2))
        high = b.draw(st.integers(-min(2, full + low), 2)) if full + low >= 0 else 0
        pads.append(PaddingDim(low, high, interior))
    return b.add("pad", [x, pv], {"padding": tuple(pads)})


def make_iota(b: Builder):
    et = b.pick_type("fsu")
    dims = b.new_dims(min_rank=1)
    return b.add("iota", [], {"iota_dimension": b.draw(st.integers(0, len(dims) - 1))},
                 shape=ArrayShape(et, dims))


def make_constant(b: Builder):
    et = b.pick_type("fcsup")
    return b.constant(et, b.new_dims(max_rank=2))


def make_tuple(b: Builder):
    vals = [b.operand() for _ in range(b.draw(st.integers(1, 3)))]
    t = b.add("tuple", vals, pool=False)
    i = b.draw(st.integers(0, len(vals) - 1))
    return b.add("get-tuple-element", [t], {"index": i})
