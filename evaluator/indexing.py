"""Indexed data movement: ``gather``, ``scatter``, ``dynamic-slice``,
``dynamic-update-slice``, ``get-dimension-size``, ``set-dimension-size``
(operation_semantics §Gather, §Scatter, §DynamicSlice, §DynamicUpdateSlice,
§GetDimensionSize, §SetDimensionSize; StableHLO spec §gather, §scatter,
§dynamic_slice, §dynamic_update_slice).

Semantics decisions:

* **Index types.** Start indices of any integer type are read as mathematical
  integers (int64; u64 values above 2**62 are saturated, which clamps or skips
  them exactly as their true value would).
* **gather / dynamic-slice / dynamic-update-slice clamp** every start index to
  ``[0, operand_dim - slice_size]`` so the whole slice stays in bounds (XLA docs
  §DynamicSlice, StableHLO §gather: ``clamp(start_index[d_start], 0,
  dim(operand, d_operand) - slice_sizes[d_operand])``). Batching dims
  (``operand_batching_dims``/``start_indices_batching_dims``) index the operand
  with the batch position itself, never clamped.
* **scatter out of bounds: per-window skip.** An update window whose start
  (plus batch position) puts *any* element of the window outside the operand
  is skipped entirely; the docs and StableHLO speak per element, but XLA's
  HloEvaluator (``HandleScatter``) and XLA:CPU (measured with jaxlib 0.10.2:
  operand s32[6], window of 2 at index 5 leaves element 5 untouched) skip the
  whole window. hloref follows XLA:CPU. Scatter indices are never clamped.
* **scatter order.** Updates are applied in row-major order of the update
  scatter indices, then of the window indices (HloEvaluator's order), each as
  ``to_apply(current, update)`` with its own rounding; duplicate indices are
  therefore combined in that order and, for an overwriting combiner, the last
  update in that order wins. ``unique_indices`` and ``indices_are_sorted`` are
  hints that are ignored (results do not depend on them).
* **Bounded dynamic sizes.** ``set-dimension-size(x, n), dimensions={d}`` gives
  its result a runtime size ``n`` in dimension ``d`` (``0 <= n <= bound``, else
  ``HloEvalError``); the data keeps its full static (bound) extent and the
  elements past ``n`` are padding whose values are unspecified. The interpreter
  keeps the runtime sizes in a side table next to each value and propagates them
  (``evaluator/dynamic.py``, which documents the rules per op);
  ``get-dimension-size`` reads the size (the static size when none was set).

Implementation: gather computes the full flat index array (one int64 per result
element) and takes from the flat operand in one ``np.take``. Scatter computes the
flat target index of every in-bounds update element; recognised combiners are
applied unbuffered (``ufunc.at`` in the compute type for integer and f32/f64/complex
add/multiply/and/or/xor/max/min, a Numba loop for float max/min, a last-wins
dedup for overwrite); any other combiner runs vectorised over rounds of updates
whose targets are distinct (round k holds the k-th update to every target, so
per-target order is kept), or per element when the computation is not elementwise.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from hloref.errors import HloEvalError
from hloref.shapes import TupleShape

from .combiners import COMBINERS
from .numeric import contiguous, element_type_of, int_compute_dtype, wrap_int
from .reduce import is_vectorizable, reads_everything, simple_reducer
from .registry import op


_U64_SATURATE = np.uint64(1 << 62)


# --------------------------------------------------------------------------- helpers

def _as_int64(a) -> np.ndarray:
    """Integer index values as int64 (u64 saturated at 2**62 instead of wrapping)."""
    a = np.asarray(a)
    if a.dtype == np.uint64:
        return np.minimum(a, _U64_SATURATE).astype(np.int64)
    return a.astype(np.int64)


def scalar_index(a) -> int:
    """An integer index operand as a Python int (u64 saturated, as ``_as_int64``)."""
    return int(_as_int64(a))


def _strides(dims) -> np.ndarray:
    """Row-major element strides of ``dims``."""
    out = np.ones(len(dims), dtype=np.int64)
    for i in range(len(dims) - 2, -1, -1):
        out[i] = out[i + 1] * dims[i + 1]
    return out


def index_matrix(indices: np.ndarray, index_vector_dim: int):
    """``(indices as (n_batch, K) int64, batch shape)``: the index vectors, one per row,
    with the batch dims (all dims but ``index_vector_dim``) in row-major order."""
    if index_vector_dim == indices.ndim:
        moved = indices[..., None]
    else:
        moved = np.moveaxis(indices, index_vector_dim, -1)
    batch_shape = tuple(moved.shape[:-1])
    n_batch = int(np.prod(batch_shape, dtype=np.int64))
    return _as_int64(moved).reshape(n_batch, moved.shape[-1]), batch_shape


def _batch_coordinate(batch_shape, indices_dim: int, index_vector_dim: int) -> np.ndarray:
    """For each batch position (row-major), its coordinate along indices dim ``indices_dim``
    (numbered among all indices dims, ``index_vector_dim`` included)."""
    axis = indices_dim if indices_dim < index_vector_dim else indices_dim - 1
    size = batch_shape[axis]
    inner = int(np.prod(batch_shape[axis + 1:], dtype=np.int64))
    outer = int(np.prod(batch_shape[:axis], dtype=np.int64))
    coord = np.broadcast_to(np.arange(size, dtype=np.int64)[None, :, None], (outer, size, inner))
    return coord.reshape(-1)


def _window_offsets(dims, strides, window_dims, window_sizes) -> np.ndarray:
    """Flat offsets (row-major over ``window_dims``) of a window of ``window_sizes``."""
    off = np.zeros((), dtype=np.int64)
    for d, s in zip(window_dims, window_sizes):
        off = np.add.outer(off, np.arange(s, dtype=np.int64) * strides[d])
    return off.reshape(-1)


# --------------------------------------------------------------------------- gather

@op("gather")
def gather(operand, start_indices, *, shape, offset_dims, collapsed_slice_dims, start_index_map,
           index_vector_dim, slice_sizes, operand_batching_dims=(),
           start_indices_batching_dims=(), indices_are_sorted=False):
    """``result[b..., o...] = operand[clamp(start(b)) + batch(b) + offset(o)]`` (StableHLO §gather)."""
    dims = operand.shape
    rank = operand.ndim
    sizes = tuple(slice_sizes)
    collapsed, obd = set(collapsed_slice_dims), tuple(operand_batching_dims)
    idx, batch_shape = index_matrix(start_indices, index_vector_dim)
    offset_operand_dims = [d for d in range(rank) if d not in collapsed and d not in obd]
    offset_sizes = tuple(sizes[d] for d in offset_operand_dims)
    out_dims = tuple(shape.dims)
    if len(offset_dims) + len(batch_shape) != len(out_dims):
        raise HloEvalError("gather: offset_dims and the batch dims do not add up to the result rank")
    if int(np.prod(out_dims, dtype=np.int64)) == 0:
        return np.zeros(out_dims, dtype=operand.dtype)
    if operand.size == 0:
        raise HloEvalError("gather: non-empty result from an empty operand")
    strides = _strides(dims)
    n_batch = idx.shape[0]
    base = np.zeros(n_batch, dtype=np.int64)
    for k, d in enumerate(start_index_map):
        hi = max(dims[d] - sizes[d], 0)
        base += np.clip(idx[:, k], 0, hi) * strides[d]
    for od, sd in zip(obd, start_indices_batching_dims):
        base += _batch_coordinate(batch_shape, sd, index_vector_dim) * strides[od]
    off = _window_offsets(dims, strides, offset_operand_dims, offset_sizes)
    canonical = _take_windows(operand, base, off).reshape(batch_shape + offset_sizes)
    n_b = len(batch_shape)
    offset_set = {d: i for i, d in enumerate(offset_dims)}
    perm, bi = [], 0
    for i in range(len(out_dims)):
        if i in offset_set:
            perm.append(n_b + offset_set[i])
        else:
            perm.append(bi)
            bi += 1
    return contiguous(np.transpose(canonical, perm))


@numba.njit(cache=True)
def _gather_kernel(src, base, off, out):
    n, m = out.shape
    for i in range(n):
        b = base[i]
        for j in range(m):
            out[i, j] = src[b + off[j]]


_BITS_VIEW = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _take_windows(operand: np.ndarray, base: np.ndarray, off: np.ndarray) -> np.ndarray:
    """``operand.flat[base[i] + off[j]]`` as an (i, j) array, without materialising the
    (i, j) index matrix (100k windows of 128 elements made a 100 MB one). Elements
    are moved as raw bits, so one kernel per element width serves every type."""
    bits = _BITS_VIEW.get(operand.dtype.itemsize)
    flat = np.ascontiguousarray(operand).reshape(-1)
    if bits is None:  # c128: 16-byte elements
        return np.take(flat, base[:, None] + off[None, :])
    out = np.empty((base.size, off.size), bits)
    _gather_kernel(flat.view(bits), base.astype(np.int64, copy=False),
                   off.astype(np.int64, copy=False), out)
    return out.view(operand.dtype)


# --------------------------------------------------------------------------- scatter

def overwrite_combiner(comp, n: int) -> bool:
    """True when the combiner returns its update parameters unchanged (``ROOT p1``,
    ``ROOT copy(p1)`` or ``ROOT tuple(pN, ..., p2N-1)``)."""
    root = comp.root
    while root is not None and root.opcode == "copy":
        root = root.operands[0]
    if root is None or not reads_everything(comp):
        return False
    if n == 1 and root.opcode == "parameter":
        return root.parameter_number == 1
    if root.opcode != "tuple" or len(root.operands) != n:
        return False
    return all(o.opcode == "parameter" and o.parameter_number == n + i
               for i, o in enumerate(root.operands))


@numba.njit(cache=True)
def _scatter_max_min(out, targets, updates, take_max):
    """``out[t] = max/min(out[t], u)`` in order: NaN propagates (the current NaN is kept,
    else the update's), -0 < +0."""
    for i in range(targets.size):
        t = targets[i]
        a = out[t]
        b = updates[i]
        if a != a:
            continue
        if b != b:
            out[t] = b
            continue
        if take_max:
            if b > a or (b == a and a == 0 and math.copysign(1.0, a) < 0
                         and math.copysign(1.0, b) > 0):
                out[t] = b
        else:
            if b < a or (b == a and a == 0 and math.copysign(1.0, a) > 0
                         and math.copysign(1.0, b) < 0):
                out[t] = b


def simple_applies(kind: str, et) -> bool:
    """Whether scatter applies the recognised combiner ``kind`` on ``et`` itself
    (``_apply_simple``), without calling the combiner computation."""
    return et.is_integer or ((et.is_float or et.is_complex) and not et.is_narrow_float
                             and kind in ("add", "multiply")) or \
        (et.is_float and kind in ("maximum", "minimum"))


def _apply_simple(kind: str, out: np.ndarray, targets: np.ndarray, updates: np.ndarray) -> bool:
    """Apply a recognised combiner in place on flat ``out``; False if not handled here
    (``simple_applies``)."""
    et = element_type_of(out)
    if not simple_applies(kind, et):
        return False
    if et.is_integer:
        cd = int_compute_dtype(et)
        acc = out.astype(cd)
        COMBINERS[kind].integer.at(acc, targets, updates.astype(cd))
        out[...] = wrap_int(acc, et)
        return True
    if (et.is_float or et.is_complex) and not et.is_narrow_float and kind in ("add", "multiply"):
        with np.errstate(all="ignore"):
            (np.add if kind == "add" else np.multiply).at(out, targets, updates)
        return True
    if et.is_float and kind in ("maximum", "minimum"):
        if et.is_narrow_float:  # max/min are exact: decode to f32, pick, re-encode exactly
            from .numeric import compute_array, finish
            work = compute_array(out).copy()
            _scatter_max_min(work, targets, compute_array(updates), kind == "maximum")
            out[...] = finish(work, et)
        else:
            _scatter_max_min(out, targets, updates, kind == "maximum")
        return True
    return False  # pragma: no cover - simple_applies says which


def _occurrence_rounds(targets: np.ndarray):
    """Split positions into rounds of distinct targets: round k holds, for each target,
    its k-th update (in the given order). Returns (positions ordered by round, counts)."""
    m = targets.size
    order = np.argsort(targets, kind="stable")
    ts = targets[order]
    pos = np.arange(m, dtype=np.int64)
    new_group = np.ones(m, dtype=bool)
    new_group[1:] = ts[1:] != ts[:-1]
    group_start = np.maximum.accumulate(np.where(new_group, pos, 0))
    rank = np.empty(m, dtype=np.int64)
    rank[order] = pos - group_start
    return np.argsort(rank, kind="stable"), np.bincount(rank)


def _as_values(result, n: int) -> list[np.ndarray]:
    if n == 1 and not isinstance(result, tuple):
        return [np.asarray(result)]
    if not isinstance(result, tuple) or len(result) != n:
        raise HloEvalError(f"scatter combiner returned {type(result).__name__}, expected {n} values")
    return [np.asarray(r) for r in result]


@op("scatter")
def scatter(*args, shape, update_window_dims, inserted_window_dims, scatter_dims_to_operand_dims,
            index_vector_dim, to_apply, input_batching_dims=(), scatter_indices_batching_dims=(),
            indices_are_sorted=False, unique_indices=False, ctx):
    """Variadic scatter; out-of-bounds windows are skipped whole (see the module docstring)."""
    n = (len(args) - 1) // 2
    if len(args) != 2 * n + 1 or n == 0:
        raise HloEvalError(f"scatter takes N operands, indices and N updates, got {len(args)}")
    operands, indices, updates = args[:n], args[n], args[n + 1:]
    dims = operands[0].shape
    outs = [np.array(o, copy=True).reshape(-1) for o in operands]
    targets, taken = scatter_plan(dims, indices, updates[0].shape, update_window_dims,
                                  inserted_window_dims, scatter_dims_to_operand_dims,
                                  index_vector_dim, input_batching_dims,
                                  scatter_indices_batching_dims)
    ups = [np.asarray(u).reshape(-1)[taken] for u in updates]
    if targets.size:
        _combine(outs, targets, ups, to_apply, ctx, n)
    return _pack([o.reshape(dims) for o in outs], shape)


def scatter_plan(dims, indices, update_dims, update_window_dims, inserted_window_dims,
                 scatter_dims_to_operand_dims, index_vector_dim, input_batching_dims=(),
                 scatter_indices_batching_dims=()):
    """Where a scatter's updates go: ``(targets, taken)``, int64 vectors of one entry per
    applied update element, in the order the combiner is applied (scatter index by index,
    each window row-major; windows out of bounds skipped whole): the flat offset into
    the operand (``dims``) and the flat offset into the updates (``update_dims``)."""
    rank = len(dims)
    uwd = tuple(update_window_dims)
    inserted, ibd = set(inserted_window_dims), tuple(input_batching_dims)
    idx, batch_shape = index_matrix(indices, index_vector_dim)
    n_scatter = idx.shape[0]
    window_operand_dims = [d for d in range(rank) if d not in inserted and d not in ibd]
    if len(window_operand_dims) != len(uwd):
        raise HloEvalError("scatter: update_window_dims do not match the operand's window dims")
    window_sizes = [update_dims[d] for d in uwd]
    full_window = np.ones(rank, dtype=np.int64)
    for d, s in zip(window_operand_dims, window_sizes):
        full_window[d] = s
    n_window = int(np.prod(window_sizes, dtype=np.int64))
    empty = np.zeros(0, dtype=np.int64)
    if n_scatter == 0 or n_window == 0 or int(np.prod(dims, dtype=np.int64)) == 0:
        return empty, empty
    starts = np.zeros((n_scatter, rank), dtype=np.int64)
    for k, d in enumerate(scatter_dims_to_operand_dims):
        starts[:, d] += idx[:, k]
    for od, sd in zip(ibd, scatter_indices_batching_dims):
        starts[:, od] += _batch_coordinate(batch_shape, sd, index_vector_dim)
    dims_arr = np.asarray(dims, dtype=np.int64)
    valid = np.all((starts >= 0) & (starts + full_window <= dims_arr), axis=1)
    strides = _strides(dims)
    base = (starts[valid] * strides).sum(axis=1)
    off = _window_offsets(dims, strides, window_operand_dims, window_sizes)
    targets = (base[:, None] + off[None, :]).reshape(-1)
    scatter_update_dims = [d for d in range(len(update_dims)) if d not in uwd]
    perm = scatter_update_dims + list(uwd)
    update_index = np.arange(int(np.prod(update_dims, dtype=np.int64)),
                             dtype=np.int64).reshape(tuple(update_dims))
    taken = np.transpose(update_index, perm).reshape(n_scatter, n_window)[valid].reshape(-1)
    return targets, taken


def _pack(values, shape):
    if isinstance(shape, TupleShape):
        return tuple(values)
    return values[0]


def _combine(outs, targets, ups, to_apply, ctx, n):
    comp = to_apply.computation
    if overwrite_combiner(comp, n):
        # the last update to each target (in order) wins
        last = np.full(outs[0].size, -1, dtype=np.int64)
        np.maximum.at(last, targets, np.arange(targets.size, dtype=np.int64))
        written = np.nonzero(last >= 0)[0]
        for o, u in zip(outs, ups):
            o[written] = u[last[written]]
        return
    if n == 1:
        kind = simple_reducer(comp)
        if kind is not None and comp.parameters[0].shape.element_type == element_type_of(outs[0]):
            if _apply_simple(kind, outs[0], targets, ups[0]):
                return
    if is_vectorizable(comp, ctx.module):
        order, counts = _occurrence_rounds(targets)
        start = 0
        for c in counts:
            sel = order[start:start + c]
            start += c
            t = targets[sel]
            result = _as_values(to_apply(*[o[t] for o in outs], *[u[sel] for u in ups]), n)
            for o, r in zip(outs, result):
                o[t] = np.broadcast_to(r, t.shape).astype(o.dtype, copy=False)
        return
    for i in range(targets.size):  # per element, in order
        t = targets[i]
        result = _as_values(to_apply(*[np.asarray(o[t]) for o in outs],
                                     *[np.asarray(u[i]) for u in ups]), n)
        for o, r in zip(outs, result):
            o[t] = r


# --------------------------------------------------------------------------- dynamic slices

def _clamped_starts(start_indices, dims, sizes) -> list[int]:
    if len(start_indices) == 1 and np.ndim(start_indices[0]) == 1:
        # the legacy form: one rank-1 array of every start (XLA's InferDynamicSliceShape
        # accepts it; its DynamicIndexSplitter pass splits it into scalars)
        start_indices = list(np.asarray(start_indices[0]))
    if len(start_indices) != len(dims):
        raise HloEvalError(f"expected {len(dims)} start indices, got {len(start_indices)}")
    return [min(max(scalar_index(i), 0), max(d - s, 0))
            for i, d, s in zip(start_indices, dims, sizes)]


@op("dynamic-slice")
def dynamic_slice(operand, *start_indices, shape, dynamic_slice_sizes):
    """``operand[s0:s0+n0, ...]`` with each start clamped to ``[0, dim - size]``."""
    sizes = tuple(dynamic_slice_sizes)
    starts = _clamped_starts(start_indices, operand.shape, sizes)
    index = tuple(slice(s, s + n) for s, n in zip(starts, sizes))
    return operand[index].copy()


@op("dynamic-update-slice")
def dynamic_update_slice(operand, update, *start_indices, shape):
    """A copy of ``operand`` with ``update`` written at the clamped starts."""
    starts = _clamped_starts(start_indices, operand.shape, update.shape)
    out = operand.copy()
    out[tuple(slice(s, s + n) for s, n in zip(starts, update.shape))] = update
    return out


# --------------------------------------------------------------------------- dimension sizes

@op("get-dimension-size")
def get_dimension_size(operand, *, shape, dimensions):
    """The static size of dimension ``dimensions[0]`` as s32. (A runtime size set by
    ``set-dimension-size`` is read by the interpreter's ``dynamic_step`` instead.)"""
    (d,) = tuple(dimensions)
    return np.array(operand.shape[d], dtype=np.int32)


@op("set-dimension-size")
def set_dimension_size(operand, size, *, shape, dimensions):
    """A copy of ``operand``; the interpreter's ``dynamic_step`` records the runtime size."""
    return operand.copy()
