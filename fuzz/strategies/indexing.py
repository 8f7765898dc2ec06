"""Makers of the indexing ops (dynamic-slice, dynamic-update-slice, gather, scatter),
and the structured strategies of gather and scatter dimension numbers the makers and
the tests share: ``gather_dims()`` and ``scatter_dims()`` draw valid dimension numbers
for an operand shape and carry the shapes they imply (``GatherDims``, ``ScatterDims``).

The makers call ``draw_gather_dims``/``draw_scatter_dims`` inside their own draw, so the
derivation adds no Hypothesis span of its own (the campaign's programs for a seed do not
depend on how the code is split); tests draw the strategies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from hloref.ir import Instruction
from hloref.op_properties import values_of
from hloref.shape_inference.indexing import interleave_dims
from hloref.shapes import ArrayShape

from .builder import Builder
from .shapes import kind_letter

# --------------------------------------------------------------------------- dimension numbers


@dataclass(frozen=True)
class ScatterDims:
    """Scatter dimension numbers valid for ``operand_dims``, with the index and update
    shapes they imply."""

    operand_dims: tuple[int, ...]
    update_window_dims: tuple[int, ...]
    inserted_window_dims: tuple[int, ...]
    scatter_dims_to_operand_dims: tuple[int, ...]
    index_vector_dim: int
    input_batching_dims: tuple[int, ...]
    scatter_indices_batching_dims: tuple[int, ...]
    indices_dims: tuple[int, ...]
    updates_dims: tuple[int, ...]

    def attrs(self) -> dict:
        """The HLO attributes (the batching ones only when there are batching dims)."""
        out = {"update_window_dims": self.update_window_dims,
               "inserted_window_dims": self.inserted_window_dims,
               "scatter_dims_to_operand_dims": self.scatter_dims_to_operand_dims,
               "index_vector_dim": self.index_vector_dim}
        if self.input_batching_dims:
            out["input_batching_dims"] = self.input_batching_dims
            out["scatter_indices_batching_dims"] = self.scatter_indices_batching_dims
        return out


@dataclass(frozen=True)
class GatherDims:
    """Gather dimension numbers valid for ``operand_dims``, with the index and result
    shapes they imply."""

    operand_dims: tuple[int, ...]
    offset_dims: tuple[int, ...]
    collapsed_slice_dims: tuple[int, ...]
    start_index_map: tuple[int, ...]
    index_vector_dim: int
    operand_batching_dims: tuple[int, ...]
    start_indices_batching_dims: tuple[int, ...]
    slice_sizes: tuple[int, ...]
    indices_dims: tuple[int, ...]
    result_dims: tuple[int, ...]

    def attrs(self) -> dict:
        """The HLO attributes (the batching ones only when there are batching dims)."""
        out = {"offset_dims": self.offset_dims, "collapsed_slice_dims": self.collapsed_slice_dims,
               "start_index_map": self.start_index_map, "index_vector_dim": self.index_vector_dim,
               "slice_sizes": self.slice_sizes}
        if self.operand_batching_dims:
            out["operand_batching_dims"] = self.operand_batching_dims
            out["start_indices_batching_dims"] = self.start_indices_batching_dims
        return out


def _draw_batching(draw, candidates, max_batching: int) -> tuple[int, ...]:
    if not max_batching:
        return ()
    n = draw(st.integers(0, min(max_batching, len(candidates))))
    return tuple(sorted(draw(st.permutations(candidates))[:n]))


def _index_layout(draw, operand_dims, batching, batch_dims, k, implicit_index_vector):
    """The index array: the drawn batch dims with the batching dims (sized like the
    operand's) at drawn places, and the index vector (``k``) at ``index_vector_dim``,
    or left implicit (``k == 1`` only). Returns (indices dims, index_vector_dim, the
    indices' batching dims, the batch dims in order)."""
    batch = list(batch_dims())
    places = []
    if batching:
        n_batch = len(batch) + len(batching)
        places = draw(st.permutations(list(range(n_batch))))[:len(batching)]
        rest = iter(batch)
        by_place = dict(zip(places, (operand_dims[d] for d in batching)))
        batch = [by_place[i] if i in by_place else next(rest) for i in range(n_batch)]
    ivd = draw(st.integers(0, len(batch)))
    if implicit_index_vector and not draw(st.booleans()) and k == 1:
        ivd = len(batch)
        idims = tuple(batch)
    else:
        idims = tuple(batch[:ivd] + [k] + batch[ivd:])
    index_batching = tuple(p if p < ivd else p + 1 for p in places)
    return idims, ivd, index_batching, tuple(batch)


def draw_scatter_dims(draw, operand_dims: Sequence[int], batch_dims: Callable[[], Sequence[int]],
                      *, max_batching_dims: int = 0, inserted_unindexed: bool = False,
                      implicit_index_vector: bool = False) -> ScatterDims:
    """``scatter_dims()`` drawn with ``draw`` inside a caller's draw; ``batch_dims()``
    draws the index array's batch dimensions."""
    operand_dims = tuple(operand_dims)
    r = len(operand_dims)
    batching = _draw_batching(draw, list(range(r)), max_batching_dims)
    rest = [d for d in range(r) if d not in batching]
    k = draw(st.integers(1, len(rest))) if rest else 0
    to_operand = tuple(draw(st.permutations(rest))[:k]) if rest else ()
    inserted = [d for d in to_operand if draw(st.booleans())]
    if inserted_unindexed:
        inserted += [d for d in rest if d not in to_operand and draw(st.booleans())]
    inserted = tuple(sorted(inserted))
    window_operand = [d for d in range(r) if d not in inserted and d not in batching]
    window_sizes = [draw(st.integers(0, operand_dims[d])) for d in window_operand]
    idims, ivd, index_batching, batch = _index_layout(draw, operand_dims, batching, batch_dims,
                                                      k, implicit_index_vector)
    u_rank = len(window_sizes) + len(batch)
    uwd = tuple(sorted(draw(st.permutations(list(range(u_rank))))[:len(window_sizes)]))
    return ScatterDims(operand_dims, uwd, inserted, to_operand, ivd, batching, index_batching,
                       idims, interleave_dims(uwd, window_sizes, batch))


def draw_gather_dims(draw, operand_dims: Sequence[int], batch_dims: Callable[[], Sequence[int]],
                     *, max_batching_dims: int = 0, collapse_unindexed: bool = False,
                     implicit_index_vector: bool = False, min_index_vector_size: int = 1,
                     on_indices: Callable[[tuple[int, ...]], object] | None = None
                     ) -> GatherDims:
    """``gather_dims()`` drawn with ``draw`` inside a caller's draw; ``batch_dims()``
    draws the index array's batch dimensions. ``on_indices(indices_dims)`` is called
    before the offset dims are drawn: the gather maker draws its index array there, as
    it always has, so the campaign's programs for a seed stay what they were."""
    operand_dims = tuple(operand_dims)
    r = len(operand_dims)
    # a batching or collapsed dimension has slice size 1: its operand size is at least 1
    batching = _draw_batching(draw, [d for d in range(r) if operand_dims[d] >= 1],
                              max_batching_dims)
    rest = [d for d in range(r) if d not in batching]
    k = draw(st.integers(min(min_index_vector_size, len(rest)), len(rest)))
    start_map = tuple(draw(st.permutations(rest))[:k]) if rest else ()
    collapsed = [d for d in start_map if operand_dims[d] >= 1 and draw(st.booleans())]
    if collapse_unindexed:
        collapsed += [d for d in rest if d not in start_map and operand_dims[d] >= 1
                      and draw(st.booleans())]
    collapsed = tuple(sorted(collapsed))
    sizes = tuple(1 if d in collapsed or d in batching else draw(st.integers(0, operand_dims[d]))
                  for d in range(r))
    idims, ivd, index_batching, batch = _index_layout(draw, operand_dims, batching, batch_dims,
                                                      k, implicit_index_vector)
    if on_indices is not None:
        on_indices(idims)
    offset_operand = [d for d in range(r) if d not in collapsed and d not in batching]
    out_rank = len(offset_operand) + len(batch)
    offset = tuple(sorted(draw(st.permutations(list(range(out_rank))))[:len(offset_operand)]))
    return GatherDims(operand_dims, offset, collapsed, start_map, ivd, batching, index_batching,
                      sizes, idims, interleave_dims(offset, [sizes[d] for d in offset_operand], batch))


def _check_dims_args(operand_dims, batch_dims, max_batching_dims):
    if (isinstance(operand_dims, (str, bytes)) or not hasattr(operand_dims, "__len__")
            or not operand_dims or any(not isinstance(d, int) or isinstance(d, bool) or d < 0
                                       for d in operand_dims)):
        raise InvalidArgument(f"operand_dims={operand_dims!r} must be a non-empty sequence "
                              "of sizes >= 0")
    if not isinstance(max_batching_dims, int) or not 0 <= max_batching_dims <= len(operand_dims):
        raise InvalidArgument(f"max_batching_dims={max_batching_dims!r} must be an integer in "
                              f"[0, {len(operand_dims)}]")
    if batch_dims is None:
        return st.lists(st.integers(0, 3), max_size=2)
    if not isinstance(batch_dims, st.SearchStrategy):
        raise InvalidArgument(f"batch_dims={batch_dims!r} must be a strategy of dimension sizes")
    return batch_dims


def scatter_dims(operand_dims: Sequence[int], *, batch_dims=None, max_batching_dims: int = 0,
                 inserted_unindexed: bool = False,
                 implicit_index_vector: bool = False) -> st.SearchStrategy[ScatterDims]:
    """Scatter dimension numbers for an operand of ``operand_dims``, valid by
    construction (``ScatterDims``: the attributes, the indices' and the updates' dims).

    ``batch_dims``: a strategy of the index array's batch dimension sizes (default: up
    to two sizes in [0, 3]); ``max_batching_dims``: up to this many operand dimensions
    become batching dims (``input_batching_dims``); ``inserted_unindexed``: inserted
    window dims may include dimensions no index addresses; ``implicit_index_vector``:
    a one-component index vector may be left implicit (``index_vector_dim`` = rank)."""
    batch = _check_dims_args(operand_dims, batch_dims, max_batching_dims)

    @st.composite
    def dims(draw):
        return draw_scatter_dims(draw, operand_dims, lambda: tuple(draw(batch)),
                                 max_batching_dims=max_batching_dims,
                                 inserted_unindexed=inserted_unindexed,
                                 implicit_index_vector=implicit_index_vector)
    return dims()


def gather_dims(operand_dims: Sequence[int], *, batch_dims=None, max_batching_dims: int = 0,
                collapse_unindexed: bool = False, implicit_index_vector: bool = False,
                min_index_vector_size: int = 1) -> st.SearchStrategy[GatherDims]:
    """Gather dimension numbers for an operand of ``operand_dims``, valid by
    construction (``GatherDims``: the attributes, the indices' and the result's dims).

    ``batch_dims``, ``max_batching_dims`` (``operand_batching_dims``) and
    ``implicit_index_vector`` as for ``scatter_dims()``; ``collapse_unindexed``:
    collapsed slice dims may include dimensions no index addresses;
    ``min_index_vector_size``: 0 allows an empty ``start_index_map``."""
    batch = _check_dims_args(operand_dims, batch_dims, max_batching_dims)
    if min_index_vector_size not in (0, 1):
        raise InvalidArgument(f"min_index_vector_size={min_index_vector_size!r} must be 0 or 1")

    @st.composite
    def dims(draw):
        return draw_gather_dims(draw, operand_dims, lambda: tuple(draw(batch)),
                                max_batching_dims=max_batching_dims,
                                collapse_unindexed=collapse_unindexed,
                                implicit_index_vector=implicit_index_vector,
                                min_index_vector_size=min_index_vector_size)
    return dims()


# --------------------------------------------------------------------------- makers


def _index_scalars(b: Builder, n: int, bound: int = 6) -> list[Instruction]:
    et = b.et(b.draw(st.sampled_from(["s32", "s32", "s64", "u32", "s8"])))
    out = []
    for _ in range(n):
        if b.fixed or b.draw(st.booleans()):
            lo = 0 if et.is_unsigned_integer else -2
            out.append(b.constant(et, (), b.draw(st.integers(lo, bound))))
        else:
            out.append(b.fresh_value(et, (), hint="index"))
    return out


def make_dynamic_slice(b: Builder):
    x = b.operand("fcsup", min_rank=1)
    sizes = tuple(b.draw(st.integers(0, d)) for d in x.shape.dims)
    idx = _index_scalars(b, x.shape.rank, max(x.shape.dims) + 2)
    return b.add("dynamic-slice", [x] + idx, {"dynamic_slice_sizes": sizes})


def make_dynamic_update_slice(b: Builder):
    x = b.operand("fcsup", min_rank=1)
    udims = tuple(b.draw(st.integers(0, d)) for d in x.shape.dims)
    u = b.operand(et=x.shape.element_type, dims=udims)
    idx = _index_scalars(b, x.shape.rank, max(x.shape.dims) + 2)
    return b.add("dynamic-update-slice", [x, u] + idx)


def _indices(b: Builder, dims, bound: int, *, unique: bool = False) -> Instruction:
    et = b.et(b.draw(st.sampled_from(["s32", "s32", "s64", "u32", "s8"])))
    n = math.prod(dims)
    if unique or b.fixed or b.draw(st.booleans()):
        rng = np.random.default_rng(b.draw(st.integers(0, 2**32 - 1)))
        lo = 0 if (unique or et.is_unsigned_integer) else -2
        if unique:
            vals = rng.permutation(max(bound, n))[:n] if n else np.zeros(0)
        else:
            vals = rng.integers(lo, bound + 2, size=n)
        return b.constant(et, dims, np.asarray(vals).reshape(dims))
    return b.fresh_value(et, dims, hint="index")


def make_gather(b: Builder):
    x = b.operand("fcsup", min_rank=1)
    idx = []
    g = draw_gather_dims(b.draw, x.shape.dims, lambda: b.new_dims(max_rank=2),
                         implicit_index_vector=True, on_indices=lambda dims: idx.append(
                             _indices(b, dims, max(x.shape.dims) + 1)))
    return b.add("gather", [x, idx[0]], g.attrs())


def make_scatter(b: Builder):
    x = b.operand("fsup", min_rank=1)
    et = x.shape.element_type
    sd = draw_scatter_dims(b.draw, x.shape.dims, lambda: b.new_dims(max_rank=2))
    # combiner: assignment needs unique indices; otherwise an order-independent one
    kinds = [op for op, letters in values_of("generated-scatter-combiner").items()
             if kind_letter(et) in letters] + ["assign"]
    kind = b.draw(st.sampled_from(kinds))
    unique = kind == "assign" or (kind == "add" and et.is_float)
    idx = _indices(b, sd.indices_dims, max(x.shape.dims) + 1, unique=unique)
    u = b.operand(et=et, dims=sd.updates_dims)
    if kind == "assign":
        sb = Builder(b.draw, b.ctx, param_shapes=[ArrayShape(et, ())] * 2, fixed=True)
        root = sb.add("copy", [sb.params[1]])
        ref = b.finish_computation(sb, root, "assign")
    else:
        ref = b.scalar_computation(et, kind)
    attrs = {**sd.attrs(), "to_apply": ref}
    if unique and b.draw(st.booleans()):
        attrs["unique_indices"] = True
    return b.add("scatter", [x, idx, u], attrs, called={"to_apply": ref})
