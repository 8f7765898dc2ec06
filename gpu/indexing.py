"""Indexed data movement on the GPU: ``gather``, ``scatter``, ``dynamic-slice``,
``dynamic-update-slice`` (mirrors ``evaluator/indexing.py``, whose docstring fixes the
semantics: clamped gather/dynamic-slice starts, whole-window skip for out-of-bounds
scatter windows, updates applied in row-major order of the scatter indices).

Every kernel is index arithmetic on device buffers; start indices are read on the
device (integers of any width; u64 above 2**62 saturates, as on the CPU), never copied
to the host.

* ``gather``: one kernel computes each batch position's flat operand offset (clamped
  starts plus batch coordinates), a second moves one result element per thread
  (storage bits, so every element type).
* ``scatter``: one kernel computes each scatter index's window start and whether the
  window lies inside the operand; then **each thread owns one operand element** and
  walks the scatter indices in order, applying every update that lands on it. A target
  receives at most one element per scatter index, so this is exactly the CPU's order
  (row-major scatter indices), without atomics and deterministic; each combine rounds
  to the element type, as the combiner computation does. Cost: operand size x number
  of scatter indices index tests. Combiners: one commutative op of the two parameters
  (``reduce.simple_reducer``: add, multiply, maximum, minimum, and, or, xor) on
  integer, pred and real float types, overwrite (``ROOT`` the update parameters,
  variadic too) on every element type, and any combiner the computation compiler
  (``gpu/computation.py``) accepts: complex ones, and variadic ones (one thread per
  element of all the operands, applying the tuple-valued combiner). A serial combiner
  (``gpu/serial.py``: one holding rng-get-and-update-state) is called from one thread in
  the CPU's per-update order (scatter indices in order, each window row-major).
* ``dynamic-slice`` / ``dynamic-update-slice``: the start scalars are loaded into one
  int64 device array, then one thread per result (update) element clamps and moves.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from hloref.errors import HloEvalError
from hloref.evaluator.reduce import is_vectorizable, simple_reducer
from hloref.shapes import TupleShape

from . import calls
from .device import LOAD, STORE, DArray, device_copy, empty, to_device, type_class, type_params
from .elementwise import launch
from .reduce import combiner
from .registry import gpu_op
from .serial import run_calls
from .shape_ops import copy, int_tuple, row_major_strides, strided_offset, strided_offsets2

from hloref.evaluator.indexing import overwrite_combiner, simple_applies  # noqa: E402 - shared with the cpu


_SATURATE = 1 << 62


# ----------------------------------------------------------------- index loads

@functools.cache  # one device function per index type class
def index_loader(cls: str):
    """A device function ``(storage value, params) -> int64`` for index type class ``cls``."""
    load = LOAD[cls]
    if cls == "uint":
        @cuda.jit(device=True)
        def f(x, p):
            v = load(x, p)
            if v > np.uint64(_SATURATE):
                return np.int64(_SATURATE)
            return np.int64(v)
    else:
        @cuda.jit(device=True)
        def f(x, p):
            return np.int64(load(x, p))
    return f


def _index_class(et, opcode: str) -> str:
    cls = type_class(et)
    if cls not in ("sint", "uint"):
        raise HloEvalError(f"{opcode}: indices must be integers, got {et.name}")
    return cls


@functools.cache
def _put_index_kernel(cls):
    ld = index_loader(cls)

    @cuda.jit
    def k(src, p, dst, slot):
        if cuda.grid(1) == 0:
            dst[slot] = ld(src[0], p)

    return k


def device_starts(scalars, opcode: str):
    """The scalar start-index operands as one int64 device array (no host read)."""
    out = cuda.device_array(max(len(scalars), 1), dtype=np.int64)
    for slot, s in enumerate(scalars):
        if s.size != 1:
            raise HloEvalError(f"{opcode}: start index {slot} is not a scalar ({s!r})")
        _put_index_kernel(_index_class(s.et, opcode))[1, 1](s.data, type_params(s.et), out, slot)
    return out


# ----------------------------------------------------------------- dynamic slices

@cuda.jit(device=True)
def _clamped_base(starts, his, strides, rank):
    base = np.int64(0)
    for d in range(rank):
        s = starts[d]
        if s > his[d]:
            s = his[d]
        if s < 0:
            s = np.int64(0)
        base += s * strides[d]
    return base


@cuda.jit
def _dynamic_slice(src, out, n, dims, strides, starts, his, rank):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < n:
        base = _clamped_base(starts, his, strides, rank)
        out[i] = src[strided_offset(i, dims, strides, base)]
        i += step


@cuda.jit
def _dynamic_update(upd, out, n, dims, strides, starts, his, rank):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < n:
        base = _clamped_base(starts, his, strides, rank)
        out[strided_offset(i, dims, strides, base)] = upd[i]
        i += step


def _check_starts(opcode, x, starts):
    if len(starts) != x.ndim:
        raise HloEvalError(f"{opcode}: expected {x.ndim} start indices, got {len(starts)}")


@gpu_op("dynamic-slice")
def dynamic_slice(x, *start_indices, shape, dynamic_slice_sizes):
    _check_starts("dynamic-slice", x, start_indices)
    sizes = tuple(int(s) for s in dynamic_slice_sizes)
    out = empty(sizes, x.et)
    if out.size == 0:
        return out
    starts = device_starts(start_indices, "dynamic-slice")
    his = [max(d - s, 0) for d, s in zip(x.shape, sizes)]
    launch(_dynamic_slice, out.size, x.data, out.data, out.size, int_tuple(sizes),
           int_tuple(row_major_strides(x.shape)) if x.ndim else (0,), starts, int_tuple(his),
           x.ndim)
    return out


@gpu_op("dynamic-update-slice")
def dynamic_update_slice(x, update, *start_indices, shape):
    _check_starts("dynamic-update-slice", x, start_indices)
    if update.ndim != x.ndim or any(u > d for u, d in zip(update.shape, x.shape)):
        raise HloEvalError(f"dynamic-update-slice: update {list(update.shape)} does not fit "
                           f"in operand {list(x.shape)}")
    out = device_copy(x)
    if update.size == 0:
        return out
    starts = device_starts(start_indices, "dynamic-update-slice")
    his = [max(d - s, 0) for d, s in zip(x.shape, update.shape)]
    launch(_dynamic_update, update.size, update.data, out.data, update.size,
           int_tuple(update.shape), int_tuple(row_major_strides(x.shape)) if x.ndim else (0,),
           starts, int_tuple(his), x.ndim)
    return out


# ----------------------------------------------------------------- index vectors

class _Indices:
    """How batch position ``b`` (row-major over the indices dims except
    ``index_vector_dim``) finds its index vector: ``strided_offset(b, dims, strides)``
    plus ``k * kstride`` for component ``k``; ``pairs`` give, per batching-dim pair,
    the batch coordinate as ``(b // inner) % size``."""

    def __init__(self, indices: DArray, index_vector_dim: int, batching_dims):
        ivd = int(index_vector_dim)
        st = row_major_strides(indices.shape)
        rank = indices.ndim
        if not 0 <= ivd <= rank:
            raise HloEvalError(f"index_vector_dim {ivd} out of range for indices of rank {rank}")
        self.batch_shape = tuple(indices.shape[d] for d in range(rank) if d != ivd)
        self.dims = int_tuple(self.batch_shape)
        self.strides = int_tuple(st[d] for d in range(rank) if d != ivd) if self.batch_shape \
            else (0,)
        self.kstride = st[ivd] if ivd < rank else 0
        self.k = indices.shape[ivd] if ivd < rank else 1
        self.n = int(np.prod(self.batch_shape, dtype=np.int64))
        inner, size = [], []
        for sd in batching_dims:
            axis = sd if sd < ivd else sd - 1
            size.append(self.batch_shape[axis])
            inner.append(int(np.prod(self.batch_shape[axis + 1:], dtype=np.int64)))
        self.inner, self.size = int_tuple(inner), int_tuple(size)
        self.params = type_params(indices.et)


# ----------------------------------------------------------------- gather

@functools.cache
def _gather_base_kernel(cls):
    ld = index_loader(cls)

    @cuda.jit
    def k(idx, p, base, n, bdims, bstrides, kstride, nk, kstr, khi, npairs, pin, psz, pstr):
        b = cuda.grid(1)
        step = cuda.gridsize(1)
        while b < n:
            at = strided_offset(b, bdims, bstrides, 0)
            acc = np.int64(0)
            for j in range(nk):
                v = ld(idx[at + j * kstride], p)
                if v > khi[j]:
                    v = khi[j]
                if v < 0:
                    v = np.int64(0)
                acc += v * kstr[j]
            for j in range(npairs):
                acc += ((b // pin[j]) % psz[j]) * pstr[j]
            base[b] = acc
            b += step

    return k


@cuda.jit
def _gather(src, base, out, n, dims, bmul, ostr):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < n:
        b, off = strided_offsets2(i, dims, bmul, ostr, np.int64(0), np.int64(0))
        out[i] = src[base[b] + off]
        i += step


@gpu_op("gather")
def gather(x, indices, *, shape, offset_dims, collapsed_slice_dims, start_index_map,
           index_vector_dim, slice_sizes, operand_batching_dims=(),
           start_indices_batching_dims=()):
    rank = x.ndim
    sizes = tuple(int(s) for s in slice_sizes)
    collapsed, obd = set(collapsed_slice_dims), tuple(operand_batching_dims)
    ix = _Indices(indices, index_vector_dim, tuple(start_indices_batching_dims))
    cls = _index_class(indices.et, "gather")
    smap = tuple(start_index_map)
    if len(smap) != ix.k:
        raise HloEvalError(f"gather: start_index_map has {len(smap)} entries, the index "
                           f"vectors have {ix.k}")
    offset_operand_dims = [d for d in range(rank) if d not in collapsed and d not in obd]
    out_dims = tuple(shape.dims)
    offset_dims = tuple(offset_dims)
    if len(offset_dims) + len(ix.batch_shape) != len(out_dims):
        raise HloEvalError("gather: offset_dims and the batch dims do not add up to the "
                           "result rank")
    out = empty(out_dims, x.et)
    if out.size == 0:
        return out
    if x.size == 0:
        raise HloEvalError("gather: non-empty result from an empty operand")
    xs = row_major_strides(x.shape)
    base = cuda.device_array(max(ix.n, 1), dtype=np.int64)
    launch(_gather_base_kernel(cls), ix.n, indices.data, ix.params, base, ix.n, ix.dims,
           ix.strides, ix.kstride, len(smap), int_tuple(xs[d] for d in smap),
           int_tuple(max(x.shape[d] - sizes[d], 0) for d in smap), len(obd), ix.inner,
           ix.size, int_tuple(xs[d] for d in obd))
    bmul_batch = row_major_strides(ix.batch_shape)
    bmul, ostr, want, bi, oi = [], [], [], 0, 0
    for d in range(len(out_dims)):
        if d in offset_dims:
            bmul.append(0)
            ostr.append(xs[offset_operand_dims[oi]])
            want.append(sizes[offset_operand_dims[oi]])
            oi += 1
        else:
            bmul.append(bmul_batch[bi])
            ostr.append(0)
            want.append(ix.batch_shape[bi])
            bi += 1
    if tuple(want) != out_dims:
        raise HloEvalError(f"gather: computed dimensions {want}, the instruction says "
                           f"{list(out_dims)}")
    launch(_gather, out.size, x.data, base, out.data, out.size, int_tuple(out_dims),
           int_tuple(bmul) if bmul else (0,), int_tuple(ostr) if ostr else (0,))
    return out


# ----------------------------------------------------------------- scatter

@functools.cache
def _scatter_start_kernel(cls):
    ld = index_loader(cls)

    @cuda.jit
    def k(idx, p, starts, valid, ubase, n, rank, bdims, bstrides, kstride, nk, kdim,
          npairs, pin, psz, pdim, odims, fullw, sdims, sstr):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            at = strided_offset(i, bdims, bstrides, 0)
            for d in range(rank):
                starts[i * rank + d] = 0
            for j in range(nk):
                starts[i * rank + kdim[j]] += ld(idx[at + j * kstride], p)
            for j in range(npairs):
                starts[i * rank + pdim[j]] += (i // pin[j]) % psz[j]
            ok = 1
            for d in range(rank):
                s = starts[i * rank + d]
                if s < 0 or s + fullw[d] > odims[d]:
                    ok = 0
            valid[i] = ok
            ubase[i] = strided_offset(i, sdims, sstr, 0)
            i += step

    return k


@cuda.jit(device=True)
def _update_offset(t, i, rank, odims, starts, fullw, uwstr, ubase):
    """The update element scatter index ``i`` writes to operand element ``t``, or -1."""
    rem = t
    uoff = ubase[i]
    for d in range(rank - 1, -1, -1):
        q = rem // odims[d]
        w = rem - q * odims[d] - starts[i * rank + d]
        rem = q
        if w < 0 or w >= fullw[d]:
            return np.int64(-1)
        uoff += w * uwstr[d]
    return uoff


@cuda.jit(device=True)
def _overwrite(old, new, p):
    return new


@functools.cache  # one compiled kernel per (combiner, type class)
def _scatter_combine_kernel(op, cls):
    """Every update landing on an operand element, in scatter-index order: combined by
    ``op`` (compute values of type class ``cls``), or with ``op=None`` its storage
    value written over the element's."""
    if op is None:
        put = _overwrite
    else:
        load, store = LOAD[cls], STORE[cls]

        @cuda.jit(device=True)
        def put(old, new, p):
            return store(op(load(old, p), load(new, p)), p)

    @cuda.jit
    def k(out, upd, n, rank, odims, n_scatter, starts, valid, ubase, fullw, uwstr, p):
        t = cuda.grid(1)
        step = cuda.gridsize(1)
        while t < n:
            for i in range(n_scatter):
                if valid[i] != 0:
                    u = _update_offset(t, i, rank, odims, starts, fullw, uwstr, ubase)
                    if u >= 0:
                        out[t] = put(out[t], upd[u], p)
            t += step

    return k


_VARIADIC: dict = {}


def _scatter_variadic_kernel(compiled, n: int):
    """Each thread owns one element of every operand and applies
    ``f(outs[t]..., updates[u]...)`` (a tuple of ``n`` storage values) per update that
    lands on it, in scatter-index order."""
    key = (id(compiled), n)
    hit = _VARIADIC.get(key)
    if hit is None:
        outs = [f"o{j}" for j in range(n)]
        upds = [f"u{j}" for j in range(n)]
        source = "\n".join(
            [f"def k({', '.join(outs + upds)}, count, rank, odims, n_scatter, starts, valid, "
             "ubase, fullw, uwstr):",
             "    t = cuda.grid(1)",
             "    step = cuda.gridsize(1)",
             "    while t < count:",
             "        for i in range(n_scatter):",
             "            if valid[i] != 0:",
             "                u = update_offset(t, i, rank, odims, starts, fullw, uwstr, ubase)",
             "                if u >= 0:",
             f"                    c = f({', '.join(o + '[t]' for o in outs)}, "
             f"{', '.join(x + '[u]' for x in upds)})"]
            + [f"                    {o}[t] = c[{j}]" for j, o in enumerate(outs)]
            + ["        t += step"]) + "\n"
        ns = {"cuda": cuda, "f": compiled.fn, "update_offset": _update_offset}
        exec(compile(source, "<gpu variadic scatter>", "exec"), ns)
        hit = _VARIADIC[key] = (compiled, cuda.jit(ns["k"]))
    return hit[1]


_SERIAL: dict = {}


def _scatter_serial_kernel(compiled, n: int):
    """The CPU's per-update loop for a serial combiner (``gpu/serial.py``), in one
    thread: scatter indices in order, each valid one's window elements row-major (over
    the operand's window dimensions), ``outs[t]... = f(outs[t]..., updates[u]...)``."""
    key = (id(compiled), n)
    hit = _SERIAL.get(key)
    if hit is None:
        outs = [f"o{j}" for j in range(n)]
        upds = [f"u{j}" for j in range(n)]
        extras = "".join(", " + e for e in compiled.extra_params)
        put = [f"                {o}[t] = c[{j}]" for j, o in enumerate(outs)] \
            if compiled.tuple_result else [f"                {outs[0]}[t] = c"]
        source = "\n".join(
            [f"def k({', '.join(outs + upds)}, count, rank, odims, n_scatter, starts, valid, "
             f"ubase, fullw, uwstr, ostrides, nwin{extras}):",
             "    for i in range(n_scatter):",
             "        if valid[i] != 0:",
             "            for w in range(nwin):",
             "                rem = w",
             "                t = 0",
             "                u = ubase[i]",
             "                for d in range(rank - 1, -1, -1):",
             "                    q = rem // fullw[d]",
             "                    wd = rem - q * fullw[d]",
             "                    rem = q",
             "                    t += (starts[i * rank + d] + wd) * ostrides[d]",
             "                    u += wd * uwstr[d]",
             f"                c = f({', '.join(o + '[t]' for o in outs)}, "
             f"{', '.join(x + '[u]' for x in upds)}{extras})"] + put) + "\n"
        ns = {"f": compiled.fn}
        exec(compile(source, "<gpu serial scatter>", "exec"), ns)
        hit = _SERIAL[key] = (compiled, cuda.jit(ns["k"]))
    return hit[1]


@gpu_op("scatter")
def scatter(*args, shape, update_window_dims, inserted_window_dims,
            scatter_dims_to_operand_dims, index_vector_dim, to_apply, ctx, input_batching_dims=(),
            scatter_indices_batching_dims=()):
    n = (len(args) - 1) // 2
    if len(args) != 2 * n + 1 or n == 0:
        raise HloEvalError(f"scatter takes N operands, indices and N updates, got {len(args)}")
    operands, indices, updates = args[:n], args[n], args[n + 1:]
    comp = to_apply.computation
    overwrite = overwrite_combiner(comp, n)
    op, op_class, variadic = None, None, None
    if not overwrite:
        # the combiner fast path where the CPU takes its own (``simple_applies``: no
        # calls), or for a computation without effects (the CPU's calls change nothing
        # else); one with effects besides its root (a dead rng-get-and-update-state)
        # the CPU calls update by update, and so the compiled path here
        kind = simple_reducer(comp) if n == 1 and not operands[0].et.is_complex else None
        if kind is not None and not (simple_applies(kind, operands[0].et)
                                     or is_vectorizable(comp, ctx.module)):
            kind = None
        if kind is not None and comp.parameters[0].shape.element_type == operands[0].et:
            op = combiner(kind, operands[0].et)[0]
        else:  # any other combiner the computation compiler accepts (variadic, complex)
            from .computation import compile_computation
            compiled = compile_computation(comp, ctx.module, serial=True)
            ets = [o.et for o in operands]
            if compiled is None or compiled.params != ets + [u.et for u in updates] \
                    or compiled.results != ets or compiled.tuple_result != (n > 1):
                # one call at a time through the GPU interpreter (``gpu/calls.py``)
                return calls.scatter_calls(operands, indices, updates, shape, dict(
                    update_window_dims=update_window_dims,
                    inserted_window_dims=inserted_window_dims,
                    scatter_dims_to_operand_dims=scatter_dims_to_operand_dims,
                    index_vector_dim=index_vector_dim, input_batching_dims=input_batching_dims,
                    scatter_indices_batching_dims=scatter_indices_batching_dims), to_apply)
            if n == 1 and not compiled.serial:
                op, op_class = compiled.fn, "raw"
            else:
                variadic = compiled
    cls = _index_class(indices.et, "scatter")
    dims = operands[0].shape
    rank = len(dims)
    uwd = tuple(update_window_dims)
    inserted, ibd = set(inserted_window_dims), tuple(input_batching_dims)
    ix = _Indices(indices, index_vector_dim, tuple(scatter_indices_batching_dims))
    window_operand_dims = [d for d in range(rank) if d not in inserted and d not in ibd]
    if len(window_operand_dims) != len(uwd):
        raise HloEvalError("scatter: update_window_dims do not match the operand's window dims")
    smap = tuple(scatter_dims_to_operand_dims)
    if len(smap) != ix.k:
        raise HloEvalError(f"scatter: scatter_dims_to_operand_dims has {len(smap)} entries, "
                           f"the index vectors have {ix.k}")
    u0 = updates[0]
    window_sizes = [u0.shape[d] for d in uwd]
    fullw = [1] * rank
    for d, s in zip(window_operand_dims, window_sizes):
        fullw[d] = s
    outs = [device_copy(o) for o in operands]
    n_window = int(np.prod(window_sizes, dtype=np.int64))
    if ix.n == 0 or n_window == 0 or operands[0].size == 0:
        return tuple(outs) if isinstance(shape, TupleShape) else outs[0]
    us = row_major_strides(u0.shape)
    scatter_update_dims = [d for d in range(u0.ndim) if d not in uwd]
    uwstr = [0] * rank
    for d, ud in zip(window_operand_dims, uwd):
        uwstr[d] = us[ud]
    starts = cuda.device_array(ix.n * max(rank, 1), dtype=np.int64)
    valid = cuda.device_array(ix.n, dtype=np.uint8)
    ubase = cuda.device_array(ix.n, dtype=np.int64)
    launch(_scatter_start_kernel(cls), ix.n, indices.data, ix.params, starts, valid, ubase,
           ix.n, rank, ix.dims, ix.strides, ix.kstride, len(smap), int_tuple(smap), len(ibd),
           ix.inner, ix.size, int_tuple(ibd), int_tuple(dims), int_tuple(fullw),
           int_tuple(u0.shape[d] for d in scatter_update_dims),
           int_tuple(us[d] for d in scatter_update_dims) if scatter_update_dims else (0,))
    geometry = (rank, int_tuple(dims), ix.n, starts, valid, ubase, int_tuple(fullw),
                int_tuple(uwstr))
    size = operands[0].size
    if variadic is not None and variadic.serial:
        run_calls(variadic, ctx, _scatter_serial_kernel(variadic, n), size,
                  *[o.data for o in outs], *[u.data for u in updates], size, *geometry,
                  int_tuple(row_major_strides(dims)), n_window)
        return tuple(outs) if isinstance(shape, TupleShape) else outs[0]
    if variadic is not None:
        launch(_scatter_variadic_kernel(variadic, n), size, *[o.data for o in outs],
               *[u.data for u in updates], size, *geometry)
        return tuple(outs)
    for out, upd in zip(outs, updates):
        et = out.et
        k = _scatter_combine_kernel(None, None) if overwrite else \
            _scatter_combine_kernel(op, op_class or type_class(et))
        launch(k, size, out.data, upd.data, size, *geometry, type_params(et))
    return tuple(outs) if isinstance(shape, TupleShape) else outs[0]


# ----------------------------------------------------------------- dimension sizes

@gpu_op("get-dimension-size")
def get_dimension_size(operand, *, shape, dimensions):
    """The static size of dimension ``dimensions[0]`` as a device s32 scalar. (A runtime
    size, from set-dimension-size or dynamic-reshape, is read by the interpreter's
    ``dynamic_step`` instead: ``gpu/dynamic.py``.)"""
    (d,) = tuple(dimensions)
    if not 0 <= int(d) < operand.ndim:
        raise HloEvalError(f"get-dimension-size: dimension {d} out of range for a "
                           f"rank-{operand.ndim} operand")
    return to_device(np.array(operand.shape[int(d)], dtype=np.int32))


@gpu_op("set-dimension-size")
def set_dimension_size(operand, size, *, shape, dimensions):
    """A copy of ``operand``; the interpreter's ``dynamic_step`` records the size
    (``gpu/dynamic.py``)."""
    return copy(operand, shape=shape)
