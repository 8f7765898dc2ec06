"""Per-call evaluation: a computation that ``gpu/computation.py`` cannot compile into a
device function, called by its op through the GPU interpreter, one call at a time, in
the CPU backend's call order.

An op that calls a computation per element (map, reduce, reduce-window, scatter,
select-and-scatter, sort) runs it as a device function when the computation compiler
accepts it (the fast path: one thread per element, or the serial mode). What it does
not accept (a computation holding a custom-call, host transfers, collectives whose
rendezvous depend on the data, arrays larger than a few elements, runtime sizes beyond
one element...) is evaluated here instead of on the CPU: every call is a sub-evaluation
of the computation by the GPU interpreter (the op's ``to_apply``, a bound computation)
on one-element device views of the operands, each of its ops a device kernel, so every
effect is the GPU interpreter's own and comes in the CPU's order (the infeed queue,
outfeed, host transfers, the rng state, the collectives' rendezvous matched by
execution count, as the CPU matches them), and each result is copied into its place on
the device. The data never leave the device. The host drives the loop over the calls;
what it reads back is control, as for a top-level ``while`` or ``conditional``: a sort
comparator's answer (one ``pred`` per comparison, the libstdc++ stable sort running on
the host), select-and-scatter's ``select`` answers, and a scatter's indices (to place
the updates, as the CPU does).

The order of calls is the CPU's sequential one, computed from the CPU's own index
functions so that it is the same by construction: ``map`` row-major; ``reduce`` output
by output, each folding its elements from the init (``evaluator.reduce.
reduced_positions``); ``reduce-window`` window by window, each window's positions
row-major, padding and holes skipped (``evaluator.windows.window_sources``);
``scatter`` update by update (``evaluator.indexing.scatter_plan``); select-and-scatter's
select phase window position by position, windows row-major within, then its scatter
phase in rounds (the CPU's); ``sort`` row by row, libstdc++'s ``std::stable_sort``
(``evaluator.sort.stable_sort`` run as Python, as the CPU runs it). These are the CPU's
orders for a computation it cannot apply to whole arrays; a computation it can
(``evaluator.reduce.is_vectorizable``: elementwise ops only) is one the compiler
accepts, so it never comes here.

Slow by design (a few kernel launches per call): it is the GPU's answer for the rare
computations the compiler refuses, not a fast path.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from hloref.errors import HloEvalError
from hloref.shapes import ArrayShape, TupleShape

from .device import DArray, device_copy, empty, to_device
from .elementwise import launch
from .shape_ops import broadcast

__all__ = ["element", "map_calls", "reduce_calls", "reduce_window_calls", "scatter_calls",
           "select_and_scatter_calls", "sort_calls"]


def element(x: DArray, k: int) -> DArray:
    """Element ``k`` (flat, row-major) of ``x`` as a device scalar: a view of its storage
    (ops never write into their operands)."""
    k = int(k)
    return DArray(x.data[k:k + 1], (), x.et)


@cuda.jit
def _take(dst, src, index, n):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < n:
        dst[i] = src[index[i]]
        i += step


@cuda.jit
def _put(dst, i, src):
    dst[i] = src[0]


def _store(out: DArray, k: int, value) -> None:
    """``out[k] = value`` (a one-element device value) on the device."""
    if not isinstance(value, DArray) or value.size != 1 or value.et != out.et:
        raise HloEvalError(f"the computation returned {value!r} where one {out.et.name} "
                           f"element is expected")
    _put[1, 1](out.data, int(k), value.data)


def _leaves(result, n: int) -> list:
    values = list(result) if isinstance(result, tuple) else [result]
    if len(values) != n:
        raise HloEvalError(f"the computation returned {len(values)} values, {n} expected")
    return values


def _outputs(shape) -> list:
    leaves = list(shape.elements) if isinstance(shape, TupleShape) else [shape]
    return [empty(s.dims, s.element_type) for s in leaves]


def _packed(outs, shape):
    return tuple(outs) if isinstance(shape, TupleShape) else outs[0]


def _permuted(x: DArray, source) -> DArray:
    """``out[i] = x[source[i]]`` (flat), on the device; ``source`` a host index vector."""
    out = empty(x.shape, x.et)
    if out.size:
        launch(_take, out.size, out.data, x.data, cuda.to_device(np.ascontiguousarray(
            source, dtype=np.int64)), out.size)
    return out


# ----------------------------------------------------------------- the ops

def map_calls(operands, shape, to_apply) -> DArray:
    """``map``: the computation on every element, row-major."""
    out = empty(shape.dims, shape.element_type)
    for k in range(out.size):
        _store(out, k, _leaves(to_apply(*[element(o, k) for o in operands]), 1)[0])
    return out


def _fold(xs, inits, positions, to_apply, outs) -> None:
    """Per output ``o``: ``acc = init``, then ``acc = to_apply(*acc, *x[p])`` for the
    flat positions ``p`` of row ``o`` of ``positions`` that are >= 0; ``outs[o] = acc``."""
    n = len(xs)
    for o in range(positions.shape[0]):
        acc = list(inits)
        for p in positions[o]:
            if p >= 0:
                acc = _leaves(to_apply(*acc, *[element(x, p) for x in xs]), n)
        for out, a in zip(outs, acc):
            _store(out, o, a)


def reduce_calls(xs, inits, shape, dims, to_apply):
    """``reduce``: output by output, each folding its elements in the CPU's order from
    the init (``reduced_positions``)."""
    from hloref.evaluator.reduce import reduced_positions
    outs = _outputs(shape)
    positions = reduced_positions(tuple(xs[0].shape), tuple(dims))
    if outs[0].size:
        _fold(xs, inits, positions.reshape(outs[0].size, -1), to_apply, outs)
    return _packed(outs, shape)


def reduce_window_calls(xs, inits, shape, window, to_apply):
    """``reduce-window``: window by window (row-major), each folding its positions
    (row-major, padding and holes skipped) from the init (``window_sources``)."""
    from hloref.evaluator.windows import window_sources
    outs = _outputs(shape)
    sources = window_sources(tuple(xs[0].shape), window)
    if tuple(sources.shape[:-1]) != tuple(outs[0].shape):
        raise HloEvalError(f"computed dimensions {list(sources.shape[:-1])}, the instruction "
                           f"says {list(outs[0].shape)}")
    if outs[0].size:
        _fold(xs, inits, sources.reshape(outs[0].size, -1), to_apply, outs)
    return _packed(outs, shape)


def scatter_calls(operands, indices, updates, shape, attrs, to_apply):
    """``scatter``: the operands copied, then update by update in the CPU's order
    (``scatter_plan``; the indices are read to the host to place them) ``out[t] =
    to_apply(*out[t], *update[u])``."""
    from hloref.evaluator.indexing import scatter_plan
    n = len(operands)
    outs = [device_copy(o) for o in operands]
    targets, taken = scatter_plan(tuple(operands[0].shape), indices.to_host(),
                                  tuple(updates[0].shape), **attrs)
    for t, u in zip(targets, taken):
        result = _leaves(to_apply(*[element(o, t) for o in outs],
                                  *[element(x, u) for x in updates]), n)
        for out, r in zip(outs, result):
            _store(out, t, r)
    return _packed(outs, shape)


def select_and_scatter_calls(operand, source, init, shape, window, select, scatter):
    """select-and-scatter as the CPU runs it with computations it calls per element:
    every window's first valid position is its choice; then window position by position
    (windows row-major within) ``select(choice, candidate)`` for each window that has a
    choice (a candidate on padding is a zero), the candidate replacing the choice when
    it is valid and select says false; then the scatter in rounds (round ``r``: the
    ``r``-th window choosing each element, in source order) ``out[c] = scatter(out[c],
    source)``, every element starting as ``init``. The choices are host indices; each
    select answer is read back (one ``pred``)."""
    from hloref.evaluator.windows import occurrence_rank, window_dims, window_sources
    if any(w.base_dilation != 1 or w.window_dilation != 1
           for w in window_dims(window, operand.ndim)):
        raise HloEvalError("select-and-scatter does not take window dilations")
    sources = window_sources(tuple(operand.shape), window)
    out_dims = tuple(sources.shape[:-1])
    if out_dims != tuple(source.shape):
        raise HloEvalError(f"select-and-scatter: windows give dimensions {list(out_dims)}, "
                           f"the source has {list(source.shape)}")
    windows = sources.reshape(-1, sources.shape[-1])
    count, k_total = windows.shape
    best = windows[:, 0].copy() if k_total else np.full(count, -1, np.int64)
    zero = to_device(np.zeros((), operand.et.dtype))
    for k in range(1, k_total):
        for w in range(count):
            if best[w] < 0:
                if windows[w, k] >= 0:
                    best[w] = windows[w, k]
                continue
            cand = windows[w, k]
            keep = _leaves(select(element(operand, best[w]),
                                  element(operand, cand) if cand >= 0 else zero), 1)[0]
            if cand >= 0 and not bool(keep.to_host()):
                best[w] = cand
    out = broadcast(init, shape=ArrayShape(init.et, tuple(operand.shape)))  # all init
    chosen = np.nonzero(best >= 0)[0]
    targets = best[chosen]
    if targets.size:
        rank = occurrence_rank(targets)
        for r in range(int(rank.max()) + 1):
            for i in np.nonzero(rank == r)[0]:
                t, s = targets[i], chosen[i]
                value = _leaves(scatter(element(out, t), element(source, s)), 1)[0]
                _store(out, t, value)
    return out


def _less(keys, a, b, desc):
    """``stable_sort``'s comparison here: ``keys`` is ``(compare, operands, row)`` (the
    row's flat offsets); one comparator call on the device, its ``pred`` read back."""
    compare, operands, row = keys
    args = []
    for x in operands:
        args.append(element(x, row[a]))
        args.append(element(x, row[b]))
    return bool(_leaves(compare(*args), 1)[0].to_host())


@functools.cache
def _stable_sort():
    """libstdc++'s ``std::stable_sort`` (``evaluator.sort.stable_sort``'s source) as
    Python comparing through ``_less``: cloned once."""
    from hloref.evaluator.sort import python_clone, stable_sort
    return python_clone(stable_sort, _lt=_less)


def sort_calls(operands, shape, d: int, compare):
    """``sort`` along ``d``: row by row (row-major), libstdc++'s ``std::stable_sort``
    (the CPU's Python run of ``evaluator.sort.stable_sort``) asking ``compare(x0[a],
    x0[b], x1[a], x1[b], ...)`` once per comparison and reading its answer; then every
    operand permuted on the device."""
    dims = tuple(operands[0].shape)
    size = int(np.prod(dims, dtype=np.int64))
    offsets = np.moveaxis(np.arange(size, dtype=np.int64).reshape(dims), d, -1)
    n = dims[d] if dims else 1
    rows = offsets.reshape(-1, n) if size else np.zeros((0, n), np.int64)

    run = _stable_sort()
    source = np.empty(size, np.int64)
    buf = np.empty(max(n, 1), np.int64)
    for row in rows:
        p = np.arange(n, dtype=np.int64)
        run(p, n, (compare, operands, row), False, buf)
        source[row] = row[p]
    outs = [_permuted(x, source) for x in operands]
    return _packed(outs, shape)
