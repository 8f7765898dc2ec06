"""Makers of the indexing ops: dynamic-slice, dynamic-update-slice, gather, scatter."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

from hloref.ir import Instruction
from hloref.shapes import ArrayShape

from .builder import Builder


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
    r = x.shape.rank
    k = b.draw(st.integers(1, r))
    sim = tuple(b.draw(st.permutations(list(range(r))))[:k])
    # a collapsed dimension has slice size 1 (size 0 would leave the result undefined)
    collapsed = tuple(sorted(d for d in sim if x.shape.dims[d] >= 1 and b.draw(st.booleans())))
    sizes = tuple(1 if d in collapsed else b.draw(st.integers(0, x.shape.dims[d]))
                  for d in range(r))
    batch = b.new_dims(max_rank=2)
    ivd = b.draw(st.integers(0, len(batch)))
    idims = list(batch)
    vec_in_dims = b.draw(st.booleans()) or k > 1
    if vec_in_dims:
        idims.insert(ivd, k)
    else:
        ivd = len(idims)
    idx = _indices(b, tuple(idims), max(x.shape.dims) + 1)
    n_offset = r - len(collapsed)
    out_rank = n_offset + len(batch)
    offset = tuple(sorted(b.draw(st.permutations(list(range(out_rank))))[:n_offset]))
    return b.add("gather", [x, idx], {"offset_dims": offset, "collapsed_slice_dims": collapsed,
                                      "start_index_map": sim, "index_vector_dim": ivd,
                                      "slice_sizes": sizes})


def make_scatter(b: Builder):
    x = b.operand("fsup", min_rank=1)
    et = x.shape.element_type
    r = x.shape.rank
    k = b.draw(st.integers(1, r))
    sdod = tuple(b.draw(st.permutations(list(range(r))))[:k])
    inserted = tuple(sorted(d for d in sdod if b.draw(st.booleans())))
    window_sizes = [b.draw(st.integers(0, x.shape.dims[d])) for d in range(r) if d not in inserted]
    batch = b.new_dims(max_rank=2)
    ivd = b.draw(st.integers(0, len(batch)))
    idims = list(batch)
    idims.insert(ivd, k)
    n_win = len(window_sizes)
    u_rank = n_win + len(batch)
    uwd = tuple(sorted(b.draw(st.permutations(list(range(u_rank))))[:n_win]))
    udims, wi, bi = [], 0, 0
    for i in range(u_rank):
        if i in uwd:
            udims.append(window_sizes[wi])
            wi += 1
        else:
            udims.append(batch[bi])
            bi += 1
    # combiner: assignment needs unique indices; otherwise an order-independent one
    if et.is_float and et.name not in ("f8e8m0fnu",):
        kinds = ["maximum", "minimum", "assign", "add"]
    else:
        kinds = ["add", "maximum", "minimum", "assign"] if not et.is_pred else \
            ["maximum", "minimum", "or", "assign"]
    kind = b.draw(st.sampled_from(kinds))
    unique = kind == "assign" or (kind == "add" and et.is_float)
    idx = _indices(b, tuple(idims), max(x.shape.dims) + 1, unique=unique)
    u = b.operand(et=et, dims=tuple(udims))
    if kind == "assign":
        sb = Builder(b.draw, b.ctx, param_shapes=[ArrayShape(et, ())] * 2, fixed=True)
        root = sb.add("copy", [sb.params[1]])
        ref = b.finish_computation(sb, root, "assign")
    else:
        ref = b.scalar_computation(et, kind)
    attrs = {"update_window_dims": uwd, "inserted_window_dims": inserted,
             "scatter_dims_to_operand_dims": sdod, "index_vector_dim": ivd, "to_apply": ref}
    if unique and b.draw(st.booleans()):
        attrs["unique_indices"] = True
    return b.add("scatter", [x, idx, u], attrs, called={"to_apply": ref})
