"""``reduce-window`` and ``select-and-scatter`` on the GPU (mirrors ``evaluator/windows.py``,
whose docstring fixes the window conventions: base dilation, padding (negative crops),
window dilation, stride; padding and holes are skipped, not filled with the init value).

* ``reduce-window``: one thread per result element walks its window in row-major order,
  skipping positions that fall on padding or holes, and combines like ``reduce``
  (``gpu/reduce.py``): the reducer is one commutative op of its parameters (float
  add/multiply accumulate in f64 and round once; max/min propagate NaN with -0 < +0;
  integers wrap), the window's value is combined with the init value last; a window on
  no operand element gives the init value. Any other reducer (variadic too) that the
  computation compiler (``gpu/computation.py``) accepts runs the CPU's masked pairwise
  tree over the window positions, bit-exact; one it does not apply to whole arrays
  (``reduce.is_vectorizable``) folds each window from the init in row-major order,
  skipping padding and holes, as its ``sequential_reduce``; a serial one
  (``gpu/serial.py``: holding rng-get-and-update-state) makes those calls from one
  thread in the CPU's order, windows row-major, each window's positions row-major (a
  position on padding or a hole calls nothing); the rest runs on the CPU. Complex
  add/multiply accumulate the window in f64 parts with the CPU's identity (-0-0j, 1+0j)
  on padding and holes, then the init, rounded once; other complex reducers (maximum,
  minimum...) run compiled.
* ``select-and-scatter``: one thread per source element (window) picks its operand
  element as the CPU does (the first valid one, replaced by each later candidate
  unless ``select(choice, candidate)``); then one thread per operand element starts
  from ``init`` and applies, in row-major source order, the source values of the
  windows that chose it (only the windows that can cover it are visited), each
  ``scatter(current, source)`` rounded to the element type. ``select`` is one
  ``compare`` of its two parameters (either order, FLOAT or TOTALORDER) or any
  computation the computation compiler (``gpu/computation.py``) accepts, and so is
  ``scatter``; other computations run on the CPU. Complex operands (or results) always
  take the compiled computations. The compare and combiner fast paths only take a
  computation the CPU applies to whole arrays (one holding an effect besides its root,
  a dead rng-get-and-update-state, it calls element by element). A serial ``select`` or
  ``scatter`` (``gpu/serial.py``) is called from one thread in the CPU's order:
  ``select`` window position outer, windows inner (row-major), from each window's
  second position on the operand (the candidate a zero where the position is
  padding); ``scatter`` in rounds, round ``q`` applying the ``q``-th window choosing
  each element, windows in source order.
* ``map``: the computation compiled to a device function (``gpu/computation.py``), one
  thread per element; a serial one from one thread, element by element row-major.
* ``scan``: the body in the GPU interpreter per position, inputs sliced and outputs
  stacked by device kernels.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from hloref.errors import HloEvalError
from hloref.evaluator.reduce import is_vectorizable, simple_reducer
from hloref.evaluator.rng import next_rng_state
from hloref.shapes import TupleShape

from . import calls, computation_devices
from .compare import DIRECTIONS
from .device import LOAD, STORE, empty, storage_dtype, type_class, type_params
from .elementwise import launch
from .reduce import combiner, complex_combine, complex_fast, sequential_source
from .registry import GpuFallback, gpu_op
from .serial import run_calls
from .shape_ops import dilated_index, int_tuple, row_major_strides
from hloref.evaluator.windows import scan_plan, scan_step_results, window_dims


class _Geometry:
    """Kernel arguments describing windows of ``wdims`` over an operand of ``xdims``
    with results of ``odims`` (every tuple non-empty: rank 0 gets a dummy dimension)."""

    def __init__(self, xdims, odims, wdims):
        rank = len(xdims)
        self.rank = rank
        self.xdims = int_tuple(xdims)
        self.xstrides = int_tuple(row_major_strides(xdims)) if rank else (0,)
        self.odims = int_tuple(odims)
        self.ostrides = int_tuple(row_major_strides(odims)) if rank else (0,)
        self.size = int_tuple(w.size for w in wdims)
        self.kstrides = int_tuple(row_major_strides([w.size for w in wdims])) if rank else (0,)
        self.stride = int_tuple(w.stride for w in wdims)
        self.wdil = int_tuple(w.window_dilation for w in wdims)
        self.bdil = int_tuple(w.base_dilation for w in wdims)
        self.padlo = int_tuple(w.padding_low for w in wdims) if rank else (0,)
        self.total = int(np.prod([w.size for w in wdims], dtype=np.int64))

    def args(self):
        return (self.rank, self.xdims, self.xstrides, self.odims, self.ostrides, self.size,
                self.kstrides, self.stride, self.wdil, self.bdil, self.padlo, self.total)


@cuda.jit(device=True)
def _window_offset(o, r, rank, xdims, xstrides, odims, ostrides, size, kstrides, stride, wdil,
                   bdil, padlo):
    """Flat operand offset of window position ``r`` of result element ``o``, or -1 where
    it falls on padding or a hole."""
    off = np.int64(0)
    for d in range(rank):
        od = (o // ostrides[d]) % odims[d]
        kd = (r // kstrides[d]) % size[d]
        idx = dilated_index(od * stride[d] + kd * wdil[d] - padlo[d], bdil[d], xdims[d])
        if idx < 0:
            return np.int64(-1)
        off += idx * xstrides[d]
    return off


# ----------------------------------------------------------------- reduce-window

@functools.cache  # one compiled kernel per (reducer, widening, type class)
def _reduce_window_kernel(op, widen, cls):
    load, store = LOAD[cls], STORE[cls]

    @cuda.jit
    def k(x, init, out, n, p, rank, xdims, xstrides, odims, ostrides, size, kstrides, stride,
          wdil, bdil, padlo, total):
        o = cuda.grid(1)
        step = cuda.gridsize(1)
        while o < n:
            start = widen(load(init[0], p))
            acc = start
            have = False
            for r in range(total):
                off = _window_offset(o, r, rank, xdims, xstrides, odims, ostrides, size,
                                     kstrides, stride, wdil, bdil, padlo)
                if off >= 0:
                    v = widen(load(x[off], p))
                    if have:
                        acc = op(acc, v)
                    else:
                        acc = v
                        have = True
            if have:
                out[o] = store(op(acc, start), p)
            else:
                out[o] = store(start, p)
            o += step

    return k


def _general_window_source(n: int, tuple_result: bool) -> str:
    """A kernel reducing each window of ``n`` inputs with device function ``f`` as the
    CPU's masked tree does (``windows._masked_tree``): the balanced pairwise tree over all
    window positions, where a pair with one position on padding passes the other up and
    a pair with none stays empty; ``f(inits, tree)`` if any position was valid, else the
    inits. Streamed with a stack of subtrees, as ``reduce``'s general kernel."""
    xs, ins, outs = ([f"{p}{j}" for j in range(n)] for p in ("x", "i", "o"))
    a, st = [f"a{j}" for j in range(n)], [f"s{j}" for j in range(n)]

    def take():
        return [f"{t} = c[{j}]" for j, t in enumerate(a)] if tuple_result else [f"{a[0]} = c"]

    def merge(indent):
        pad = " " * indent
        return ([pad + "if v[top] != 0 and av != 0:",
                 pad + f"    c = f({', '.join(f'{t}[top]' for t in st)}, {', '.join(a)})"]
                + [pad + "    " + line for line in take()]
                + [pad + "elif v[top] != 0:"]
                + [pad + f"    {a[j]} = {st[j]}[top]" for j in range(n)]
                + [pad + "    av = 1"])

    body = [f"def k({', '.join(xs + ins + outs)}, count, rank, xdims, xstrides, odims, "
            f"ostrides, size, kstrides, stride, wdil, bdil, padlo, total):",
            "    o = cuda.grid(1)", "    step = cuda.gridsize(1)", "    while o < count:",
            "        h = cuda.local.array(64, np.int64)",
            "        v = cuda.local.array(64, np.uint8)"]
    body += [f"        {st[j]} = cuda.local.array(64, D{j})" for j in range(n)]
    body += ["        top = 0", "        av = 0", "        for r in range(total):",
             "            off = window_offset(o, r, rank, xdims, xstrides, odims, ostrides, "
             "size, kstrides, stride, wdil, bdil, padlo)",
             "            if off >= 0:"]
    body += [f"                {a[j]} = {xs[j]}[off]" for j in range(n)]
    body += ["                av = 1", "            else:"]
    body += [f"                {a[j]} = {ins[j]}[0]" for j in range(n)]
    body += ["                av = 0", "            hh = 0",
             "            while top > 0 and h[top - 1] == hh:", "                top -= 1"]
    body += merge(16)
    body += ["                hh += 1"]
    body += [f"            {st[j]}[top] = {a[j]}" for j in range(n)]
    body += ["            v[top] = av", "            h[top] = hh", "            top += 1",
             "        if top > 0:", "            top -= 1"]
    body += [f"            {a[j]} = {st[j]}[top]" for j in range(n)]
    body += ["            av = v[top]", "            while top > 0:", "                top -= 1"]
    body += merge(16)
    body += ["        if av != 0:",
             f"            c = f({', '.join(f'{i}[0]' for i in ins)}, {', '.join(a)})"]
    body += ["            " + line for line in take()]
    body += [f"            {outs[j]}[o] = {a[j]}" for j in range(n)]
    body += ["        else:"]
    body += [f"            {outs[j]}[o] = {ins[j]}[0]" for j in range(n)]
    body += ["        o += step"]
    return "\n".join(body) + "\n"


_GENERAL_WINDOWS: dict = {}


def _general_reduce_window(operands, shape, to_apply, window, ctx):
    from .computation import compile_computation
    comp = to_apply.computation
    n = len(operands) // 2
    if len(operands) != 2 * n or n == 0:
        raise HloEvalError(f"reduce-window takes N inputs and N init values, got "
                           f"{len(operands)} operands")
    xs, inits = operands[:n], operands[n:]
    leaves = list(shape.elements) if isinstance(shape, TupleShape) else [shape]
    ets = [s.element_type for s in leaves]
    compiled = compile_computation(comp, ctx.module, serial=True)
    if compiled is None or compiled.results != ets or compiled.params != ets + [x.et for x in xs] \
            or any(i.et != e for i, e in zip(inits, ets)):
        # one call at a time through the GPU interpreter (``gpu/calls.py``), the CPU's
        # sequential fold; the compiler takes every reducer of elementwise ops (which the
        # CPU applies to whole arrays), so such a one here is the CPU's
        if is_vectorizable(comp, ctx.module):
            raise GpuFallback("a reducer of elementwise ops the device-function compiler "
                              "refuses (the CPU applies it to whole arrays)")
        return calls.reduce_window_calls(xs, inits, shape, window, to_apply)
    # mixed precision (an input type other than its accumulator's): the CPU's left fold
    # (``evaluator.reduce.mixed_precision``), the sequential kernel's order
    tree = compiled.vectorizable and all(x.et == e for x, e in zip(xs, ets))
    x0 = xs[0]
    if any(x.shape != x0.shape for x in xs):
        raise HloEvalError("reduce-window inputs must have the same dimensions")
    wdims = window_dims(window, x0.ndim)
    dtypes = [storage_dtype(e).type for e in ets]
    key = (id(compiled), tuple(str(d) for d in dtypes), tree)
    hit = _GENERAL_WINDOWS.get(key)
    if hit is None:
        ns = {"cuda": cuda, "np": np, "f": compiled.fn, "window_offset": _window_offset}
        ns.update({f"D{j}": d for j, d in enumerate(dtypes)})
        source = _general_window_source(n, compiled.tuple_result) if tree \
            else sequential_source(n, compiled.tuple_result, True,
                                   extras=compiled.extra_params)
        exec(compile(source, "<gpu reduce-window>", "exec"), ns)
        hit = _GENERAL_WINDOWS[key] = (compiled, cuda.jit(ns["k"]))
    outs = [empty(s.dims, s.element_type) for s in leaves]
    geo = _Geometry(x0.shape, leaves[0].dims, wdims)
    run_calls(compiled, ctx, hit[1], outs[0].size, *[x.data for x in xs],
              *[i.data for i in inits], *[o.data for o in outs], outs[0].size, *geo.args())
    return tuple(outs) if isinstance(shape, TupleShape) else outs[0]


@cuda.jit
def _complex_window_kernel(x, init, out, n, multiply, rank, xdims, xstrides, odims, ostrides,
                           size, kstrides, stride, wdil, bdil, padlo, total):
    """Complex add/multiply over each window, on the parts (interleaved storage), as the
    CPU's fast path: positions on padding or holes hold the identity (-0-0j for add,
    1+0j for multiply), the window's values accumulate in row-major order in f64 parts
    (c128), then ``acc op init``, rounded once on store."""
    o = cuda.grid(1)
    step = cuda.gridsize(1)
    while o < n:
        re = np.float64(1.0) if multiply else np.float64(0.0)
        im = np.float64(0.0)
        for r in range(total):
            off = _window_offset(o, r, rank, xdims, xstrides, odims, ostrides, size,
                                 kstrides, stride, wdil, bdil, padlo)
            if off >= 0:
                xr = np.float64(x[2 * off])
                xi = np.float64(x[2 * off + 1])
            elif multiply:
                xr = np.float64(1.0)
                xi = np.float64(0.0)
            else:
                xr = np.float64(-0.0)
                xi = np.float64(-0.0)
            if r == 0:
                re = xr
                im = xi
            else:
                re, im = complex_combine(re, im, xr, xi, multiply)
        re, im = complex_combine(re, im, np.float64(init[0]), np.float64(init[1]), multiply)
        out[2 * o] = re
        out[2 * o + 1] = im
        o += step


@gpu_op("reduce-window")
def reduce_window(*operands, shape, to_apply, ctx, window=None):
    kind = simple_reducer(to_apply.computation)
    fast = complex_fast(operands, shape, kind)
    if len(operands) != 2 or isinstance(shape, TupleShape) or kind is None \
            or operands[0].et != shape.element_type or \
            (operands[0].et.is_complex and not fast):
        return _general_reduce_window(operands, shape, to_apply, window, ctx)
    x, init = operands
    et = shape.element_type
    if fast:
        from .complex_elementwise import parts
        out = empty(shape.dims, et)
        geo = _Geometry(x.shape, shape.dims, window_dims(window, x.ndim))
        launch(_complex_window_kernel, out.size, parts(x), parts(init), parts(out), out.size,
               kind == "multiply", *geo.args())
        return out
    op, widen = combiner(kind, et)
    wdims = window_dims(window, x.ndim)
    out = empty(shape.dims, et)
    geo = _Geometry(x.shape, shape.dims, wdims)
    launch(_reduce_window_kernel(op, widen, type_class(et)), out.size, x.data, init.data,
           out.data, out.size, type_params(et), *geo.args())
    return out


# ----------------------------------------------------------------- select-and-scatter

def select_compare(comp):
    """``(direction, total_order, swapped)`` when ``comp`` is ``ROOT compare(p0, p1)``
    (``swapped``: written ``compare(p1, p0)``) of two scalars, else None."""
    root, params = comp.root, comp.parameters
    if root is None or root.opcode != "compare" or len(params) != 2 or len(root.operands) != 2:
        return None
    a, b = root.operands
    if a is params[0] and b is params[1]:
        swapped = False
    elif a is params[1] and b is params[0]:
        swapped = True
    else:
        return None
    if any(p.shape.rank != 0 for p in params) or params[0].shape != params[1].shape:
        return None
    direction = str(root.attrs.get("direction"))
    if direction not in DIRECTIONS:
        return None
    total = str(root.attrs.get("type", "")) == "TOTALORDER"
    return direction, total, swapped


@functools.cache  # one compiled kernel per (comparison, value load, order)
def _select_kernel(cmp, key, swapped):
    @cuda.jit
    def k(x, chosen, n, p, rank, xdims, xstrides, odims, ostrides, size, kstrides, stride,
          wdil, bdil, padlo, total):
        s = cuda.grid(1)
        step = cuda.gridsize(1)
        while s < n:
            best = np.int64(-1)
            for r in range(total):
                off = _window_offset(s, r, rank, xdims, xstrides, odims, ostrides, size,
                                     kstrides, stride, wdil, bdil, padlo)
                if off >= 0:
                    if best < 0:
                        best = off
                    else:
                        a = key(x[best], p)
                        b = key(x[off], p)
                        keep = cmp(b, a) if swapped else cmp(a, b)
                        if keep == 0:
                            best = off
            chosen[s] = best
            s += step

    return k


@cuda.jit(device=True)
def _covering(t, d, xdims, xstrides, sdims, size, stride, padlo):
    """``(lo, hi)``: the window positions along dimension ``d`` whose window covers
    operand element ``t`` (none when ``hi < lo``)."""
    c = (t // xstrides[d]) % xdims[d]
    lo = -((-(c + padlo[d] - size[d] + 1)) // stride[d])
    if lo < 0:
        lo = 0
    hi = (c + padlo[d]) // stride[d]
    if hi > sdims[d] - 1:
        hi = sdims[d] - 1
    return lo, hi


@functools.cache  # one compiled kernel per (scatter op, type class)
def _scatter_windows_kernel(op, cls):
    load, store = LOAD[cls], STORE[cls]

    @cuda.jit
    def k(src, init, chosen, out, n, p, rank, xdims, xstrides, sdims, sstrides, size, stride,
          padlo):
        t = cuda.grid(1)
        step = cuda.gridsize(1)
        while t < n:
            acc = init[0]
            count = np.int64(1)
            for d in range(rank):  # windows covering t: o in [lo, hi] per dimension
                lo, hi = _covering(t, d, xdims, xstrides, sdims, size, stride, padlo)
                count *= hi - lo + 1 if hi >= lo else 0
            for r in range(count):  # row-major over the covering windows
                rem = r
                s = np.int64(0)
                for d in range(rank - 1, -1, -1):
                    lo, hi = _covering(t, d, xdims, xstrides, sdims, size, stride, padlo)
                    length = hi - lo + 1
                    q = rem // length
                    s += (lo + rem - q * length) * sstrides[d]
                    rem = q
                if chosen[s] == t:
                    acc = store(op(load(acc, p), load(src[s], p)), p)
            out[t] = acc
            t += step

    return k


_SERIAL_SELECTS: dict = {}


def _serial_select_kernel(compiled):
    """The CPU's select loop for a serial ``select`` (``gpu/serial.py``), in one thread:
    window position ``r`` outer (row-major in the window), windows ``s`` inner (row-major
    over the source); a window with no choice yet takes position ``r`` if it is on the
    operand; one with a choice calls ``select(choice, candidate)``, the candidate a zero
    of the storage type where ``r`` falls on padding (the CPU's padded window values),
    and takes ``r`` if it is on the operand and the answer is false."""
    hit = _SERIAL_SELECTS.get(id(compiled))
    if hit is None:
        extras = "".join(", " + e for e in compiled.extra_params)
        source = "\n".join([
            "def k(x, chosen, zero, n, rank, xdims, xstrides, odims, ostrides, size, kstrides, "
            f"stride, wdil, bdil, padlo, total{extras}):",
            "    for s in range(n):",
            "        chosen[s] = -1",
            "    for r in range(total):",
            "        for s in range(n):",
            "            off = window_offset(s, r, rank, xdims, xstrides, odims, ostrides, size, "
            "kstrides, stride, wdil, bdil, padlo)",
            "            if chosen[s] < 0:",
            "                if off >= 0:",
            "                    chosen[s] = off",
            "            else:",
            "                cand = x[off] if off >= 0 else zero[0]",
            f"                keep = f(x[chosen[s]], cand{extras})",
            "                if off >= 0 and keep == 0:",
            "                    chosen[s] = off"]) + "\n"
        ns = {"f": compiled.fn, "window_offset": _window_offset}
        exec(compile(source, "<gpu serial select>", "exec"), ns)
        hit = _SERIAL_SELECTS[id(compiled)] = (compiled, cuda.jit(ns["k"]))
    return hit[1]


_SERIAL_SCATTERS: dict = {}


def _serial_scatter_kernel(compiled):
    """The CPU's scatter rounds for a serial ``scatter`` (``gpu/serial.py``), in one
    thread: every element starts as ``init``; each chosen window gets its rank among the
    windows choosing the same element (in source order); round ``q`` applies, in source
    order, the windows of rank ``q``: ``out[t] = scatter(out[t], source)``."""
    hit = _SERIAL_SCATTERS.get(id(compiled))
    if hit is None:
        extras = "".join(", " + e for e in compiled.extra_params)
        source = "\n".join([
            f"def k(src, init, chosen, out, seen, order, n, size{extras}):",
            "    for t in range(size):",
            "        out[t] = init[0]",
            "        seen[t] = 0",
            "    rounds = 0",
            "    for s in range(n):",
            "        t = chosen[s]",
            "        if t >= 0:",
            "            order[s] = seen[t]",
            "            seen[t] += 1",
            "            if seen[t] > rounds:",
            "                rounds = seen[t]",
            "    for q in range(rounds):",
            "        for s in range(n):",
            "            t = chosen[s]",
            "            if t >= 0 and order[s] == q:",
            f"                out[t] = f(out[t], src[s]{extras})"]) + "\n"
        ns = {"f": compiled.fn}
        exec(compile(source, "<gpu serial scatter>", "exec"), ns)
        hit = _SERIAL_SCATTERS[id(compiled)] = (compiled, cuda.jit(ns["k"]))
    return hit[1]


@gpu_op("select-and-scatter")
def select_and_scatter(x, source, init, *, shape, select, scatter, ctx, window=None):
    """The CPU's ``select_and_scatter`` (its docstring fixes the semantics). A serial
    ``select`` or ``scatter`` (``gpu/serial.py``: one holding rng-get-and-update-state)
    is called from one thread in the CPU's order of its element-by-element loops
    (``_serial_select_kernel``, ``_serial_scatter_kernel``), all of select's calls
    before scatter's, each computation's channels around its own launch; the other
    phase runs in parallel as usual."""
    from .computation import compile_computation
    sel_serial = sc_serial = None
    et = shape.element_type

    def per_call():  # ``gpu/calls.py``: both computations one call at a time, the CPU's order
        return calls.select_and_scatter_calls(x, source, init, shape, window, select, scatter)

    if source.et != et or init.et != et:
        return per_call()
    xcls = type_class(x.et)
    if xcls not in ("sint", "uint", "pred", "f32", "f64", "narrow", "complex"):
        return per_call()
    # complex operands or results: the compiled computations (complex_elementwise's part
    # functions), as the CPU applies them element by element
    # the compare and combiner fast paths only where the CPU applies the computation
    # to whole arrays (``is_vectorizable``): one with effects besides its root (a dead
    # rng-get-and-update-state) the CPU calls element by element, and so the compiled
    # path here, which makes those calls
    sel = select_compare(select.computation) \
        if xcls != "complex" and is_vectorizable(select.computation, ctx.module) else None
    if sel is not None:
        direction, total_order, swapped = sel
        cmp = DIRECTIONS[direction]
        key = LOAD["key_" + xcls] if total_order and xcls in ("f32", "f64", "narrow") \
            else LOAD[xcls]
    else:  # any select computation the compiler accepts, on the storage values
        compiled = compile_computation(select.computation, ctx.module, serial=True)
        if compiled is None or compiled.params != [x.et, x.et] or \
                [r.name for r in compiled.results] != ["pred"]:
            return per_call()
        cmp, key, swapped = compiled.fn, LOAD["raw"], False
        sel_serial = compiled if compiled.serial else None
    kind = simple_reducer(scatter.computation) \
        if not et.is_complex and is_vectorizable(scatter.computation, ctx.module) else None
    if kind is not None:
        op, op_class = combiner(kind, et)[0], type_class(et)
    else:
        compiled = compile_computation(scatter.computation, ctx.module, serial=True)
        if compiled is None or compiled.params != [et, et] or compiled.results != [et]:
            return per_call()
        op, op_class = compiled.fn, "raw"
        sc_serial = compiled if compiled.serial else None
    wdims = window_dims(window, x.ndim)
    if any(w.base_dilation != 1 or w.window_dilation != 1 for w in wdims):
        raise HloEvalError("select-and-scatter does not take window dilations")
    geo = _Geometry(x.shape, source.shape, wdims)
    spans = []
    for n, w in zip(x.shape, wdims):
        padded = n + w.padding_low + w.padding_high
        spans.append((padded - w.size) // w.stride + 1 if padded >= w.size and w.size > 0 else 0)
    if tuple(spans) != tuple(source.shape):
        raise HloEvalError(f"select-and-scatter: windows give dimensions {spans}, the source "
                           f"has {list(source.shape)}")
    chosen = cuda.device_array(max(source.size, 1), dtype=np.int64)
    if sel_serial is not None:
        zero = cuda.to_device(np.zeros(1, x.data.dtype))
        run_calls(sel_serial, ctx, _serial_select_kernel(sel_serial), source.size, x.data,
                  chosen, zero, source.size, *geo.args())
    else:
        launch(_select_kernel(cmp, key, swapped), source.size, x.data, chosen,
               source.size, type_params(x.et), *geo.args())
    out = empty(shape.dims, et)
    if sc_serial is not None:
        seen = cuda.device_array(max(out.size, 1), dtype=np.int64)
        order = cuda.device_array(max(source.size, 1), dtype=np.int64)
        run_calls(sc_serial, ctx, _serial_scatter_kernel(sc_serial), out.size, source.data,
                  init.data, chosen, out.data, seen, order, source.size, out.size)
        return out
    launch(_scatter_windows_kernel(op, op_class), out.size, source.data, init.data,
           chosen, out.data, out.size, type_params(et), geo.rank, geo.xdims, geo.xstrides,
           geo.odims, geo.ostrides, geo.size, geo.stride, geo.padlo)
    return out


# ----------------------------------------------------------------- map

_MAPS: dict = {}


def _map_kernel(compiled, arity: int):
    """One thread per element; a computation holding rng-get-and-update-state
    (``compiled.state_delta``) also gets the element's index, its call index in the
    CPU's row-major order, and the state before the map (``slo``, ``shi``). A serial
    computation (``gpu/serial.py``) gets its channels' arguments, the kernel's last."""
    key = (id(compiled), arity)
    hit = _MAPS.get(key)
    if hit is None:
        xs = [f"x{j}" for j in range(arity)]
        state = compiled.state_delta is not None
        extras = compiled.extra_params
        args = [x + "[i]" for x in xs] + (["i", "slo", "shi"] if state else []) + extras
        source = "\n".join([
            f"def k(out, count{', slo, shi' if state else ''}{''.join(', ' + x for x in xs)}"
            f"{''.join(', ' + e for e in extras)}):",
            "    i = cuda.grid(1)",
            "    step = cuda.gridsize(1)",
            "    while i < count:",
            f"        out[i] = f({', '.join(args)})",
            "        i += step"]) + "\n"
        ns = {"cuda": cuda, "f": compiled.fn}
        exec(compile(source, "<gpu map>", "exec"), ns)
        hit = _MAPS[key] = (compiled, cuda.jit(ns["k"]))
    return hit[1]


@gpu_op("map")
def map_(*operands, shape, to_apply, ctx):
    """operation_semantics §Map: the computation compiled for the device
    (``gpu/computation.py``), one thread per element. A serial computation
    (``gpu/serial.py``) is called from one thread in the CPU's order: element by
    element, row-major (its ``np.ndindex`` loop over the result). Holding collectives on
    several devices, unrolled over them (``gpu/computation_devices.py``)."""
    from .computation import compile_computation
    dims = tuple(shape.dims)
    if any(tuple(o.shape) != dims for o in operands):
        raise HloEvalError("map operands must all have the result's dimensions")
    if computation_devices.applies(ctx, to_apply.computation):  # collectives, several devices
        try:
            return computation_devices.map_on_devices(operands, shape, to_apply.computation, ctx)
        except GpuFallback:  # not unrolled: one call at a time, each device's own
            return calls.map_calls(operands, shape, to_apply)
    compiled = compile_computation(to_apply.computation, ctx.module, call_index=True,
                                   serial=True)
    if compiled is None or compiled.tuple_result or compiled.params != [
            o.et for o in operands] or compiled.results != [shape.element_type]:
        return calls.map_calls(operands, shape, to_apply)  # one call at a time (gpu/calls.py)
    out = empty(dims, shape.element_type)
    state = []
    if compiled.state_delta is not None:  # the CPU calls it out.size times, row-major
        lo, hi = next_rng_state(ctx, out.size * compiled.state_delta % 2**128)
        state = [np.uint64(lo), np.uint64(hi)]
    run_calls(compiled, ctx, _map_kernel(compiled, len(operands)), out.size, out.data,
              out.size, *state, *[o.data for o in operands])
    return out


# ----------------------------------------------------------------- scan

@gpu_op("scan")
def scan(*operands, shape, to_apply, dimensions, num_carries=0, is_reverse=False):
    """``scan`` (the CPU's semantics, ``evaluator/windows.py``): the body runs in the GPU
    interpreter once per position; inputs are sliced at the position on the device and
    the per-position outputs stacked along the scanned dimension by ``concatenate``."""
    from .shape_ops import concatenate, gather
    d, inputs, carries, leaves, n_out, length = scan_plan(operands, shape, dimensions,
                                                          num_carries)
    out_shapes = leaves[:n_out]

    def take(x, i):
        st = row_major_strides(x.shape)
        dims = [n for k, n in enumerate(x.shape) if k != d]
        return gather(x, dims, [v for k, v in enumerate(st) if k != d], i * st[d])

    per_position: list = [None] * length
    steps = range(length - 1, -1, -1) if is_reverse else range(length)
    for i in steps:
        res = scan_step_results(to_apply(*[take(x, i) for x in inputs], *carries), len(leaves))
        per_position[i] = res[:n_out]
        carries = res[n_out:]
    outs = []
    for j, s_ in enumerate(out_shapes):
        if length == 0:
            outs.append(empty(s_.dims, s_.element_type))
            continue
        one = list(s_.dims)
        one[d] = 1
        outs.append(concatenate(*[per_position[i][j].reshape(one) for i in range(length)],
                                shape=s_, dimensions=(d,)))
    values = outs + carries
    return tuple(values) if isinstance(shape, TupleShape) else values[0]
