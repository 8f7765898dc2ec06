"""Windowed and per-element higher-order ops: ``reduce-window``, ``select-and-scatter``,
``map`` and ``scan``.

Window conventions (operation_semantics §ReduceWindow, HloEvaluator
``HandleReduceWindow``/``IterateThroughWindow``): along each dimension the operand is
base-dilated (``lhs_dilate``: ``d - 1`` holes between neighbours), then padded
(``pad=lo_hi``; a negative amount crops), and a window of ``size`` elements spaced
``rhs_dilate`` apart slides over the result with ``stride``. Output size per dimension:
``(padded - ((size - 1) * rhs_dilate + 1)) // stride + 1`` (0 when the window does not
fit).

**Padding and holes are skipped, not filled with the init value.** XLA's HloEvaluator
only visits window positions that land on an operand element and starts each window's
accumulator from the init value once; XLA:CPU agrees (checked: ``add`` with init 100
over ``pad=1_1`` gives ``100 + x0 + x1`` for the first window, not ``200 + x0 + x1``).
The StableHLO spec instead pads with the init value; the two agree whenever the init is
the reducer's identity. A window that covers no operand element gives the init value.

Accumulation follows ``reduce`` (``evaluator/reduce.py``): a single-input reducer that
is one commutative op of its parameters takes the fast path (float add/multiply in
f64, rounded once; NaN-propagating max/min; integers wrap); any other reducer is
applied as a balanced tree over the window elements in row-major window order, then
once with the init value (``r(init, tree)``), vectorised over all output positions
when the reducer is elementwise, and sequentially per output element otherwise.
(XLA folds sequentially, ``r(...r(r(init, x0), x1)..., xn)``; the two agree for
associative reducers, which operation_semantics requires.)
"""

from __future__ import annotations

import numpy as np

from hloref.attrs import Window, WindowDim
from hloref.errors import HloEvalError
from hloref.geometry import dilate_pad_slices, window_positions, window_span
from hloref.shapes import TupleShape

from .combiners import COMBINERS, identity
from .numeric import compute_array, contiguous, element_type_of
from .reduce import (fast_reduce, fold_reduce, is_vectorizable, mixed_precision,
                     reducer_outputs, sequential_reduce, simple_reducer, tree_reduce)
from .registry import op


__all__ = ["reduce_window", "select_and_scatter", "map_", "scan", "window_view"]


# ---------------------------------------------------------------------------
# Window geometry.
# ---------------------------------------------------------------------------

def window_dims(window, rank: int) -> tuple[WindowDim, ...]:
    if isinstance(window, Window):
        dims = window.dims
    elif window is None:
        dims = tuple(WindowDim(size=1) for _ in range(rank))
    else:
        dims = tuple(window)
    if len(dims) != rank:
        raise HloEvalError(f"window has {len(dims)} dimensions, the operand has rank {rank}")
    for w in dims:
        if w.size < 0 or w.stride < 1 or w.base_dilation < 1 or w.window_dilation < 1:
            raise HloEvalError(f"invalid window dimension {w}")
        if w.window_reversal:
            raise HloEvalError("window reversal is not allowed here")
    return dims


def _pad_dilate(x: np.ndarray, wdims, fill) -> np.ndarray:
    """``x`` base-dilated and padded (negative padding crops), holes and pads = ``fill``."""
    shape, place, crop = [], [], []
    for n, w in zip(x.shape, wdims):
        extent, dst, kept = dilate_pad_slices(n, w.padding_low, w.padding_high, w.base_dilation)
        shape.append(extent)
        place.append(dst)
        crop.append(kept)
    out = np.empty(shape, x.dtype)
    out[...] = fill
    out[tuple(place)] = x[tuple(crop)]
    return out


def _out_dims(padded_shape, wdims) -> tuple[int, ...]:
    return tuple(window_positions(n, window_span(w.size, w.window_dilation), w.stride)
                 if w.size > 0 else 0 for n, w in zip(padded_shape, wdims))


def window_view(padded: np.ndarray, wdims) -> np.ndarray:
    """A strided view ``(out..., size...)`` of the windows of an already padded array."""
    out = _out_dims(padded.shape, wdims)
    sizes = tuple(w.size for w in wdims)
    strides = tuple(s * w.stride for s, w in zip(padded.strides, wdims)) + \
        tuple(s * w.window_dilation for s, w in zip(padded.strides, wdims))
    if 0 in out or 0 in sizes:
        return np.empty(out + sizes, padded.dtype)
    if padded.dtype.kind == "V" or padded.dtype.type.__module__.startswith("ml_dtypes"):
        # as_strided rebuilds the dtype from the array interface, where some ml_dtypes
        # types (float8_e5m2: '<f1') are not understood: stride the raw bits instead
        bits = np.dtype(f"u{padded.dtype.itemsize}")
        return np.lib.stride_tricks.as_strided(padded.view(bits), out + sizes, strides,
                                               writeable=False).view(padded.dtype)
    return np.lib.stride_tricks.as_strided(padded, out + sizes, strides, writeable=False)


def _windows(x: np.ndarray, wdims, fill) -> np.ndarray:
    """Windows of ``x`` flattened: ``(out..., K)`` (a copy), K = prod(sizes)."""
    view = window_view(_pad_dilate(x, wdims, fill), wdims)
    rank = x.ndim
    out, sizes = view.shape[:rank], view.shape[rank:]
    # Copied window-position-major, (K, out...), and returned as a (out..., K) view: numpy
    # reduces a strided last axis as K elementwise passes over contiguous memory, much
    # faster than reducing a short contiguous last axis.
    flat = np.empty((int(np.prod(sizes, dtype=np.int64)),) + out, x.dtype)
    for k, offs in enumerate(np.ndindex(*sizes)):
        flat[k] = view[(Ellipsis,) + offs]
    return np.moveaxis(flat, 0, -1)


def window_sources(dims, window) -> np.ndarray:
    """``(out..., K)`` int64: for every window (row-major) and window position (row-major),
    the flat offset of the operand element of ``dims`` it lands on, -1 on padding and
    base-dilation holes: the positions :func:`sequential_reduce` (reduce-window) and
    select-and-scatter visit, in their order (``_windows`` of the offsets themselves).
    For a backend calling the computation per element (``gpu/calls.py``)."""
    index = np.arange(int(np.prod(dims, dtype=np.int64)), dtype=np.int64).reshape(tuple(dims))
    return _windows(index, window_dims(window, len(dims)), -1)


#: the largest copy of a reduce-window's windows (bytes) the fast path makes; past it, an
#: order-free reducer folds the window positions into the result one at a time
WINDOW_BYTES = 1 << 30


def _streamed(kind: str, x: np.ndarray, wdims, ident) -> np.ndarray | None:
    """``(out..., 1)``: the windows of ``x`` reduced by ``kind`` folding one window
    position at a time into the result, without copying the windows, where they would
    take more than :data:`WINDOW_BYTES` and the reducer's result does not depend on the
    order (maximum/minimum with NaN propagating and +0 above -0, integer and bool
    arithmetic); None otherwise. XLA's cost-analysis test has a 2,047-wide max window
    over 2x3x1024x1024 (51 GB of windows)."""
    if x.dtype.kind == "c" or (x.dtype.kind == "f" and kind not in ("maximum", "minimum")):
        return None
    sizes = tuple(w.size for w in wdims)
    extents = tuple(dilate_pad_slices(n, w.padding_low, w.padding_high, w.base_dilation)[0]
                    for n, w in zip(x.shape, wdims))
    out = _out_dims(extents, wdims)  # sized before padding: most windows stay below
    count = int(np.prod(out, dtype=np.int64)) * int(np.prod(sizes, dtype=np.int64))
    if count * x.dtype.itemsize <= WINDOW_BYTES or 0 in sizes or 0 in out:
        return None
    padded = _pad_dilate(x, wdims, ident)
    from .elementwise import ieee_max_min
    if x.dtype.kind == "f":
        fold = ieee_max_min(kind == "maximum")
    else:  # integers and bools (numpy's integer ufuncs on bools are the pred ones)
        fold = COMBINERS[kind].integer
    view = window_view(padded, wdims)
    acc = None
    with np.errstate(all="ignore"):
        for offs in np.ndindex(*sizes):
            part = view[(Ellipsis,) + offs]
            acc = np.array(part) if acc is None else fold(acc, part)
    return acc[..., None]


def _valid_mask(shape, wdims):
    """``(out..., K)`` bool: which window positions land on an operand element; None if all."""
    needs = any(w.padding_low > 0 or w.padding_high > 0 or
                (w.base_dilation > 1 and n > 1) for n, w in zip(shape, wdims))
    if not needs:
        return None
    return _windows(np.ones(shape, bool), wdims, False)


# ---------------------------------------------------------------------------
# reduce-window
# ---------------------------------------------------------------------------

def _masked_tree(apply, xs, inits, mask):
    """``tree_reduce`` over the last axis skipping positions where ``mask`` is False."""
    n = len(xs)
    kept_shape = xs[0].shape[:-1]
    values, valid = list(xs), mask
    length = values[0].shape[-1]
    if length == 0:
        return [np.broadcast_to(i, kept_shape).copy() for i in inits]
    with np.errstate(all="ignore"):
        while length > 1:
            half = length // 2
            left = [v[..., 0:2 * half:2] for v in values]
            right = [v[..., 1:2 * half:2] for v in values]
            lm, rm = valid[..., 0:2 * half:2], valid[..., 1:2 * half:2]
            both = lm & rm
            combined = [np.broadcast_to(c, left[0].shape)
                        for c in reducer_outputs(apply(*left, *right), n)]
            combined = [np.where(both, c.astype(l.dtype, copy=False), np.where(lm, l, r))
                        for c, l, r in zip(combined, left, right)]
            cm = lm | rm
            if length % 2:
                combined = [np.concatenate([c, v[..., -1:].astype(c.dtype)], axis=-1)
                            for c, v in zip(combined, values)]
                cm = np.concatenate([cm, valid[..., -1:]], axis=-1)
            values, valid = combined, cm
            length = values[0].shape[-1]
        last = [v[..., 0] for v in values]
        any_valid = valid[..., 0]
        full = [np.broadcast_to(i, kept_shape) for i in inits]
        out = reducer_outputs(apply(*full, *last), n)
    return [contiguous(np.where(any_valid, np.broadcast_to(o, kept_shape).astype(f.dtype), f))
            for o, f in zip(out, full)]


@op("reduce-window")
def reduce_window(*operands, shape, to_apply, ctx, window=None, reducer_order="tree"):
    n = len(operands) // 2
    if len(operands) != 2 * n or n == 0:
        raise HloEvalError(f"reduce-window takes N inputs and N init values, "
                           f"got {len(operands)} operands")
    inputs, inits = list(operands[:n]), list(operands[n:])
    rank = inputs[0].ndim
    wdims = window_dims(window, rank)
    result_shapes = shape.elements if isinstance(shape, TupleShape) else (shape,)
    in_shape = inputs[0].shape
    if any(x.shape != in_shape for x in inputs):
        raise HloEvalError("reduce-window inputs must have the same dimensions")
    if n == 1 and not (reducer_order == "left" and result_shapes[0].element_type.is_narrow_float):
        kind = simple_reducer(to_apply.computation)  # (the left fold of a narrow float:
        et = result_shapes[0].element_type           # each step rounded, see reduce)
        if kind is not None and element_type_of(inputs[0]) == et:
            x = compute_array(inputs[0])
            ident = identity(kind, x.dtype)
            if ident is not None:
                win = _streamed(kind, x, wdims, ident)
                if win is None:
                    win = _windows(x, wdims, ident)
                out = fast_reduce(kind, win, compute_array(inits[0]), et)
                if out is not None:
                    return _finish_shape(out, result_shapes[0])

    xs = [_windows(x, wdims, np.zeros((), x.dtype)) for x in inputs]
    mask = _valid_mask(in_shape, wdims)
    if mask is None:
        mask = np.ones(xs[0].shape, bool)
    if is_vectorizable(to_apply.computation, ctx.module) and (
            reducer_order == "left" or mixed_precision(inputs, inits)):
        outs = fold_reduce(to_apply, xs, inits, None if mask.all() else mask)
    elif is_vectorizable(to_apply.computation, ctx.module):
        outs = _masked_tree(to_apply, xs, inits, mask) if not mask.all() \
            else tree_reduce(to_apply, xs, inits)
    else:
        outs = sequential_reduce(to_apply, xs, inits, mask)
    outs = [_finish_shape(o, s) for o, s in zip(outs, result_shapes)]
    return outs[0] if n == 1 else tuple(outs)


def _finish_shape(value, s):
    value = np.asarray(value).astype(s.element_type.dtype, copy=False)
    if tuple(value.shape) != tuple(s.dims):
        raise HloEvalError(f"computed dimensions {list(value.shape)}, the instruction says "
                           f"{list(s.dims)}")
    return contiguous(value)


# ---------------------------------------------------------------------------
# select-and-scatter
# ---------------------------------------------------------------------------

def occurrence_rank(targets: np.ndarray) -> np.ndarray:
    """For each entry of ``targets`` (in order), how many earlier entries have the same
    target: select-and-scatter's rounds, in which every target is distinct (round ``r``
    holds the ``r``-th update, in source order, of each target, so order is kept per
    target)."""
    order = np.argsort(targets, kind="stable")
    sorted_t = targets[order]
    first = np.r_[0, np.nonzero(np.diff(sorted_t))[0] + 1]
    starts = np.repeat(first, np.diff(np.r_[first, sorted_t.size]))
    rank = np.empty(targets.size, np.int64)
    rank[order] = np.arange(sorted_t.size) - starts
    return rank


@op("select-and-scatter")
def select_and_scatter(operand, source, init, *, shape, select, scatter, ctx, window=None):
    """operation_semantics §SelectAndScatter, as HloEvaluator/XLA:CPU do it.

    Every result element starts as ``init``. For each window (source element, row-major),
    the window's operand elements are visited in row-major order, skipping padding;
    the first one is the running choice and each later one replaces it unless
    ``select(choice, candidate)`` is true. Then ``result[choice] = scatter(result[choice],
    source)``; windows choosing the same element apply in row-major source order."""
    rank = operand.ndim
    wdims = window_dims(window, rank)
    if any(w.base_dilation != 1 or w.window_dilation != 1 for w in wdims):
        raise HloEvalError("select-and-scatter does not take window dilations")
    index = np.arange(operand.size, dtype=np.int64).reshape(operand.shape)
    vals = _windows(operand, wdims, np.zeros((), operand.dtype))
    idx = _windows(index, wdims, -1)
    out_dims = vals.shape[:-1]
    if tuple(out_dims) != tuple(source.shape):
        raise HloEvalError(f"select-and-scatter: windows give dimensions {list(out_dims)}, "
                           f"the source has {list(source.shape)}")
    valid = idx >= 0
    k_total = vals.shape[-1]
    best = vals[..., 0].copy() if k_total else np.zeros(out_dims, operand.dtype)
    best_idx = idx[..., 0].copy() if k_total else np.full(out_dims, -1, np.int64)
    have = valid[..., 0].copy() if k_total else np.zeros(out_dims, bool)
    sel_vec = is_vectorizable(select.computation, ctx.module)
    with np.errstate(all="ignore"):
        for k in range(1, k_total):
            cand, cidx, cvalid = vals[..., k], idx[..., k], valid[..., k]
            if sel_vec:
                keep = np.broadcast_to(np.asarray(select(best, cand), bool), out_dims)
            else:
                keep = np.empty(out_dims, bool)
                for pos in np.ndindex(*out_dims):
                    keep[pos] = bool(select(best[pos], cand[pos])) if have[pos] else False
            take = cvalid & (~have | ~keep)
            best = np.where(take, cand, best)
            best_idx = np.where(take, cidx, best_idx)
            have = have | cvalid
    result = np.empty(operand.size, dtype=shape.element_type.dtype)
    result[...] = init
    targets = best_idx.reshape(-1)
    src = source.reshape(-1)
    chosen = np.nonzero(targets >= 0)[0]  # row-major source order
    targets, src = targets[chosen], src[chosen]
    if targets.size:
        rank_in_group = occurrence_rank(targets)
        sc_vec = is_vectorizable(scatter.computation, ctx.module)
        with np.errstate(all="ignore"):
            for r in range(int(rank_in_group.max()) + 1):
                sel = rank_in_group == r
                t, s = targets[sel], src[sel]
                if sc_vec:
                    result[t] = np.broadcast_to(np.asarray(scatter(result[t], s)), t.shape)
                else:
                    for ti, si in zip(t, s):
                        result[ti] = scatter(result[ti], si)
    return result.reshape(shape.dims)


# ---------------------------------------------------------------------------
# map
# ---------------------------------------------------------------------------

@op("map")
def map_(*operands, shape, to_apply, ctx, dimensions=None):
    """operation_semantics §Map: the scalar computation applied at every index."""
    dims = tuple(shape.dims)
    dtype = shape.element_type.dtype
    if any(tuple(o.shape) != dims for o in operands):
        raise HloEvalError("map operands must all have the result's dimensions")
    if is_vectorizable(to_apply.computation, ctx.module):
        with np.errstate(all="ignore"):
            value = np.asarray(to_apply(*operands))
        return contiguous(np.broadcast_to(value, dims).astype(dtype))
    out = np.empty(dims, dtype)
    for pos in np.ndindex(*dims):
        out[pos] = to_apply(*[o[pos] for o in operands])
    return out


# ---------------------------------------------------------------------------
# scan
# ---------------------------------------------------------------------------

def scan_plan(operands, shape, dimensions, num_carries):
    """scan's attributes decoded and checked: ``(d, inputs, carries, result shapes,
    number of stacked outputs, length of dimension d)``."""
    if len(dimensions) != 1:
        raise HloEvalError(f"scan takes one dimension, got {list(dimensions)}")
    d = int(dimensions[0])
    nc = int(num_carries)
    if nc < 0 or nc > len(operands):
        raise HloEvalError(f"scan: num_carries={nc} with {len(operands)} operands")
    inputs = list(operands[:len(operands) - nc])
    carries = list(operands[len(operands) - nc:])
    result_shapes = tuple(shape.elements) if isinstance(shape, TupleShape) else (shape,)
    n_out = len(result_shapes) - nc
    if n_out < 0:
        raise HloEvalError("scan: the result has fewer elements than num_carries")
    if inputs:
        length = inputs[0].shape[d]
    elif n_out:
        length = result_shapes[0].dims[d]
    else:
        length = 0
    return d, inputs, carries, result_shapes, n_out, length


def scan_step_results(res, count: int) -> list:
    """What ``to_apply`` returned for one position, as a list of ``count`` values."""
    res = list(res) if isinstance(res, tuple) else [res]
    if len(res) != count:
        raise HloEvalError(f"scan: to_apply returned {len(res)} values, expected {count}")
    return res


@op("scan")
def scan(*operands, shape, to_apply, ctx, dimensions, num_carries=0, is_reverse=False,
         is_associative=False):
    """``scan(inputs..., inits...)`` along ``dimensions={d}`` (the new XLA opcode).

    Operand and result order, checked against XLA:CPU (jaxlib 0.10.2): the last
    ``num_carries`` operands are the initial carries; ``to_apply`` takes
    ``(input slices..., carries...)`` (each input indexed at one position of dim ``d``,
    which is removed) and returns ``(outputs..., new carries...)``; the result is
    ``(outputs stacked along d..., final carries...)``. With ``is_reverse`` the positions
    are visited from last to first and each output is stored at its own position.
    ``is_associative`` only permits a parallel schedule; evaluation is sequential."""
    d, inputs, carries, result_shapes, n_out, length = scan_plan(operands, shape, dimensions,
                                                                 num_carries)
    out_shapes = result_shapes[:n_out]
    outs = [np.empty(s.dims, s.element_type.dtype) for s in out_shapes]
    steps = range(length - 1, -1, -1) if is_reverse else range(length)
    for i in steps:
        args = [np.take(x, i, axis=d) for x in inputs] + carries
        res = scan_step_results(to_apply(*args), len(result_shapes))
        for o, r in zip(outs, res[:n_out]):
            place = [slice(None)] * o.ndim
            place[d] = i
            o[tuple(place)] = r
        carries = [np.asarray(c) for c in res[n_out:]]
    final = [contiguous(np.asarray(c).astype(s.element_type.dtype, copy=False))
             for c, s in zip(carries, result_shapes[n_out:])]
    values = outs + final
    if not isinstance(shape, TupleShape):
        return values[0]
    return tuple(values)

