"""``reduce`` on the GPU (mirrors ``evaluator/reduce.py``).

A single-input reduce whose reducer is one commutative op of its two parameters
(``add``, ``multiply``, ``maximum``, ``minimum``, ``and``, ``or``, ``xor``;
``reduce.simple_reducer``) runs one GPU thread per output element, walking the reduced
elements in the CPU's order (row-major over ``dimensions`` as given), then combining
with the init value: float ``add``/``multiply`` accumulate in f64 and round once to
the result type; integers wrap in int64/uint64; ``maximum``/``minimum`` propagate NaN
and order -0 < +0. The CPU sums with numpy's pairwise summation, this kernel
sequentially: both in f64, so results agree after rounding except in rare near-ties
(the comparison policy's accumulation bound covers the difference).

Any other reducer, variadic reduces (argmax: values and indices) included, runs when
the computation compiler (``gpu/computation.py``) accepts it: one thread per output
element combines the reduced elements in the CPU's balanced tree order
(``reduce.tree_reduce``), each step rounding to the element types as the CPU does, so
results are bit-exact; a reducer the CPU does not apply to whole arrays
(``reduce.is_vectorizable``: one with shape ops on one-element arrays, say) folds
sequentially from the init, as the CPU's ``sequential_reduce``. Complex add/multiply reduces accumulate in f64 parts
(``_complex_kernel``; the CPU's c128 numpy reduce in another order: the accumulation
bound); other complex reducers (maximum, minimum...) run compiled. A reducer holding
rng-get-and-update-state folds sequentially too, given the call index where its sites
are static, else in the serial mode (``gpu/serial.py``): one thread, outputs row-major
over the kept dimensions, each over the reduced elements row-major in the order of
``dimensions`` as written. Reducers with ops that have no scalar device form
(custom-call...) run on the CPU.
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
from .device import LOAD, STORE, empty, storage_dtype, type_class, type_params
from .elementwise import (add, and_pred, element_kind, fmax, fmin, imax, imin, launch, mul, or_pred,
                          xor)
from .registry import GpuFallback, gpu_op
from .serial import run_calls
from .shape_ops import int_tuple as _t, row_major_strides, strided_offset


@cuda.jit(device=True)
def _widen_f64(x):
    return np.float64(x)


@cuda.jit(device=True)
def _keep(x):
    return x


_OPS = {
    "float": {"add": (add, _widen_f64), "multiply": (mul, _widen_f64),
              "maximum": (fmax, _keep), "minimum": (fmin, _keep)},
    "int": {"add": (add, _keep), "multiply": (mul, _keep), "maximum": (imax, _keep),
            "minimum": (imin, _keep), "and": (and_pred, _keep), "or": (or_pred, _keep),
            "xor": (xor, _keep)},
    "pred": {"add": (or_pred, _keep), "multiply": (and_pred, _keep),
             "maximum": (or_pred, _keep), "minimum": (and_pred, _keep),
             "and": (and_pred, _keep), "or": (or_pred, _keep), "xor": (xor, _keep)},
}

def combiner(kind: str, et):
    """``(op, widen)``: the device function of the recognised reducer ``kind``
    (``reduce.simple_reducer``) on element type ``et``, and the widening applied to each
    value before it (float add/multiply accumulate in f64); ``GpuFallback`` if none."""
    k = element_kind(et)
    table = _OPS.get("int" if k in ("sint", "uint") else k)
    if table is None or kind not in table:
        raise GpuFallback(f"{kind} of {et.name} has no GPU kernel")
    return table[kind]


@functools.cache  # one compiled kernel per combination
def _kernel(op, widen, cls):
    load, store = LOAD[cls], STORE[cls]

    @cuda.jit
    def k(x, init, out, n, kept_dims, kept_strides, red_dims, red_strides, total, p):
        o = cuda.grid(1)
        step = cuda.gridsize(1)
        while o < n:
            base = strided_offset(o, kept_dims, kept_strides, 0)
            start = widen(load(init[0], p))
            if total == 0:
                out[o] = store(start, p)
            else:
                acc = widen(load(x[base], p))  # reduced index 0 is offset 0
                for r in range(1, total):
                    off = strided_offset(r, red_dims, red_strides, base)
                    acc = op(acc, widen(load(x[off], p)))
                out[o] = store(op(acc, start), p)
            o += step

    return k


def _general_source(n: int, tuple_result: bool) -> str:
    """A kernel reducing ``n`` inputs with device function ``f`` in the CPU's balanced
    tree order (``reduce.tree_reduce``: neighbours pairwise, level by level, an odd last
    element carried up; then ``f(inits, tree)``), streamed with a stack of complete
    subtrees: a new subtree merges with the top while their heights agree, and what is
    left merges from the top down at the end, which is the same tree."""
    xs = [f"x{j}" for j in range(n)]
    ins = [f"i{j}" for j in range(n)]
    outs = [f"o{j}" for j in range(n)]
    a = [f"a{j}" for j in range(n)]
    st = [f"s{j}" for j in range(n)]

    def take(target):
        if tuple_result:
            return [f"{t} = c[{j}]" for j, t in enumerate(target)]
        return [f"{target[0]} = c"]

    body = [f"def k({', '.join(xs + ins + outs)}, count, kept_dims, kept_strides, red_dims, "
            f"red_strides, total):",
            "    o = cuda.grid(1)",
            "    step = cuda.gridsize(1)",
            "    while o < count:",
            "        base = strided_offset(o, kept_dims, kept_strides, 0)",
            "        h = cuda.local.array(64, np.int64)"]
    body += [f"        {st[j]} = cuda.local.array(64, D{j})" for j in range(n)]
    body += ["        top = 0",
             "        for r in range(total):",
             "            off = strided_offset(r, red_dims, red_strides, base)"]
    body += [f"            {a[j]} = {xs[j]}[off]" for j in range(n)]
    body += ["            hh = 0",
             "            while top > 0 and h[top - 1] == hh:",
             f"                c = f({', '.join(f'{t}[top - 1]' for t in st)}, {', '.join(a)})"]
    body += ["                " + line for line in take(a)]
    body += ["                top -= 1", "                hh += 1"]
    body += [f"            {st[j]}[top] = {a[j]}" for j in range(n)]
    body += ["            h[top] = hh", "            top += 1",
             "        if total == 0:"]
    body += [f"            {outs[j]}[o] = {ins[j]}[0]" for j in range(n)]
    body += ["        else:", "            top -= 1"]
    body += [f"            {a[j]} = {st[j]}[top]" for j in range(n)]
    body += ["            while top > 0:", "                top -= 1",
             f"                c = f({', '.join(f'{t}[top]' for t in st)}, {', '.join(a)})"]
    body += ["                " + line for line in take(a)]
    body += [f"            c = f({', '.join(f'{i}[0]' for i in ins)}, {', '.join(a)})"]
    body += ["            " + line for line in take(a)]
    body += [f"            {outs[j]}[o] = {a[j]}" for j in range(n)]
    body += ["        o += step"]
    return "\n".join(body) + "\n"


def sequential_source(n: int, tuple_result: bool, windowed: bool, state: bool = False,
                      extras=()) -> str:
    """A kernel folding each output's elements of ``n`` inputs with device function ``f``
    left to right from the inits, ``f(...f(f(inits, x0), x1)..., xk)``: the CPU's
    ``reduce.sequential_reduce`` for reducers it does not apply to whole arrays.
    ``windowed``: reduce-window's window positions (``window_offset``; padding and
    holes skipped), else reduce's strided offsets. ``state`` (reduce only): ``f`` holds
    rng-get-and-update-state and also takes its call index in the CPU's order (output
    ``o``'s ``r``-th call is call ``o * total + r``) and the state before the reduce
    (``slo``, ``shi``). ``extras``: the argument names of a serial computation's
    channels (``Compiled.extra_params``), the kernel's last arguments, passed to ``f``
    after the values; the kernel then runs in one thread (``serial.run_calls``), its loop
    walking the outputs in order."""
    xs, ins, outs = ([f"{p}{j}" for j in range(n)] for p in ("x", "i", "o"))
    a = [f"a{j}" for j in range(n)]
    tail = "".join(", " + e for e in extras)
    if windowed:
        head = [f"def k({', '.join(xs + ins + outs)}, count, rank, xdims, xstrides, odims, "
                f"ostrides, size, kstrides, stride, wdil, bdil, padlo, total{tail}):"]
        locate = ["            off = window_offset(o, r, rank, xdims, xstrides, odims, "
                  "ostrides, size, kstrides, stride, wdil, bdil, padlo)",
                  "            if off >= 0:"]
    else:
        head = [f"def k({', '.join(xs + ins + outs)}, count, kept_dims, kept_strides, "
                f"red_dims, red_strides, total{', slo, shi' if state else ''}{tail}):"]
        locate = ["            off = strided_offset(r, red_dims, red_strides, base)",
                  "            if True:"]
    body = head + ["    o = cuda.grid(1)", "    step = cuda.gridsize(1)", "    while o < count:"]
    if not windowed:
        body += ["        base = strided_offset(o, kept_dims, kept_strides, 0)"]
    body += [f"        {a[j]} = {ins[j]}[0]" for j in range(n)]
    body += ["        for r in range(total):"] + locate
    extra = (", o * total + r, slo, shi" if state else "") + tail
    body += [f"                c = f({', '.join(a)}, {', '.join(x + '[off]' for x in xs)}{extra})"]
    body += ([f"                {t} = c[{j}]" for j, t in enumerate(a)] if tuple_result
             else [f"                {a[0]} = c"])
    body += [f"        {outs[j]}[o] = {a[j]}" for j in range(n)]
    body += ["        o += step"]
    return "\n".join(body) + "\n"


_GENERAL: dict = {}


def _general_kernel(compiled, dtypes, tree: bool):
    """``tree``: the CPU's pairwise tree (a reducer it applies to whole arrays, one type),
    else its left fold (``sequential_source``)."""
    key = (id(compiled), tuple(str(d) for d in dtypes), tree)
    hit = _GENERAL.get(key)
    if hit is None:
        ns = {"cuda": cuda, "np": np, "f": compiled.fn, "strided_offset": strided_offset}
        ns.update({f"D{j}": d for j, d in enumerate(dtypes)})
        source = _general_source(len(dtypes), compiled.tuple_result) if tree \
            else sequential_source(len(dtypes), compiled.tuple_result, False,
                                   compiled.state_delta is not None, compiled.extra_params)
        exec(compile(source, "<gpu general reduce>", "exec"), ns)
        hit = _GENERAL[key] = (compiled, cuda.jit(ns["k"]))
    return hit[1]


def _general_reduce(operands, shape, dims, to_apply, ctx):
    """Any reducer the computation compiler accepts, variadic too, in the CPU's tree order
    (holding collectives on several devices: unrolled over them, ``gpu/computation_devices.py``)."""
    from .computation import compile_computation
    comp = to_apply.computation
    n = len(operands) // 2
    if len(operands) != 2 * n or n == 0:
        raise HloEvalError(f"reduce takes N inputs and N init values, got {len(operands)} operands")
    xs, inits = operands[:n], operands[n:]
    if computation_devices.applies(ctx, comp):  # collectives on several devices
        try:
            outs = computation_devices.reduce_on_devices(xs, inits, shape, dims, comp, ctx)
        except GpuFallback:  # not unrolled: one call at a time, each device's own
            return _per_call(xs, inits, shape, dims, to_apply, ctx)
        return tuple(outs) if isinstance(shape, TupleShape) else outs[0]
    leaves = list(shape.elements) if isinstance(shape, TupleShape) else [shape]
    # a reducer holding rng-get-and-update-state is not vectorisable: the CPU folds it
    # sequentially, output by output (row-major over the kept dimensions), each over the
    # reduced elements in order (row-major over ``dimensions`` in the attribute's order)
    # from the init (``sequential_source``): a call index where the sites are static,
    # else the serial mode, one thread walking that order
    compiled = compile_computation(comp, ctx.module, call_index=True, serial=True)
    ets = [s.element_type for s in leaves]
    if compiled is None or (compiled.results != ets or compiled.params != ets + [x.et for x in xs]
                            or any(i.et != e for i, e in zip(inits, ets))):
        return _per_call(xs, inits, shape, dims, to_apply, ctx)
    # mixed precision (an input type other than its accumulator's): the CPU's left fold
    # (``evaluator.reduce.mixed_precision``), which the sequential kernel makes too
    tree = compiled.vectorizable and all(x.et == e for x, e in zip(xs, ets))
    x0 = xs[0]
    if any(x.shape != x0.shape for x in xs):
        raise HloEvalError("reduce inputs must have the same dimensions")
    kept = [d for d in range(x0.ndim) if d not in dims]
    st = row_major_strides(x0.shape)
    outs = [empty(s.dims, s.element_type) for s in leaves]
    total = 1
    for d in dims:
        total *= x0.shape[d]
    kernel = _general_kernel(compiled, [storage_dtype(e).type for e in ets], tree)
    state = []
    if compiled.state_delta is not None:  # the CPU calls it size * total times
        lo, hi = next_rng_state(ctx, outs[0].size * total * compiled.state_delta % 2**128)
        state = [np.uint64(lo), np.uint64(hi)]
    run_calls(compiled, ctx, kernel, outs[0].size, *[x.data for x in xs],
              *[i.data for i in inits], *[o.data for o in outs], outs[0].size,
              _t(x0.shape[d] for d in kept), _t(st[d] for d in kept) if kept else (0,),
              _t(x0.shape[d] for d in dims), _t(st[d] for d in dims) if dims else (0,),
              total, *state)
    return tuple(outs) if isinstance(shape, TupleShape) else outs[0]


def _per_call(xs, inits, shape, dims, to_apply, ctx):
    """A reducer the compiler refuses (or whose types are not the init's and result's):
    one call at a time through the GPU interpreter (``gpu/calls.py``), the CPU's
    sequential fold. A reducer of elementwise ops the CPU applies to whole arrays in its
    tree: the compiler takes every such reducer, so this is the CPU's."""
    if is_vectorizable(to_apply.computation, ctx.module):
        raise GpuFallback("a reducer of elementwise ops the device-function compiler refuses "
                          "(the CPU applies it to whole arrays)")
    return calls.reduce_calls(xs, inits, shape, dims, to_apply)


@cuda.jit(device=True)
def complex_combine(re, im, xr, xi, multiply):
    """``(re + i im) * (xr + i xi)`` or ``+``, in f64 parts (the CPU's c128 operations)."""
    if multiply:
        return re * xr - im * xi, re * xi + im * xr
    return re + xr, im + xi


def complex_fast(operands, shape, kind) -> bool:
    """Whether a reduction (or reduce-window) runs the complex add/multiply kernel: one
    complex operand and init of the result type, reduced by ``add`` or ``multiply``."""
    return len(operands) == 2 and operands[0].et.is_complex and kind in ("add", "multiply") \
        and not isinstance(shape, TupleShape) and operands[0].et == shape.element_type \
        and operands[1].et == shape.element_type


@cuda.jit
def _complex_kernel(x, init, out, n, kept, ks, red, rs, total, multiply):
    """Complex add/multiply reduce over parts: each output's elements in row-major order
    of the reduced dims, accumulated in f64 parts (the CPU: numpy's c128 reduce, then
    the init), combined with the init, rounded once on store."""
    o = cuda.grid(1)
    step = cuda.gridsize(1)
    while o < n:
        base = strided_offset(o, kept, ks, 0)
        re = np.float64(1.0) if multiply else np.float64(0.0)
        im = np.float64(0.0)
        for r in range(total):
            off = strided_offset(r, red, rs, base)
            re, im = complex_combine(re, im, np.float64(x[2 * off]), np.float64(x[2 * off + 1]),
                                     multiply)
        re, im = complex_combine(re, im, np.float64(init[0]), np.float64(init[1]), multiply)
        out[2 * o] = re
        out[2 * o + 1] = im
        o += step


@gpu_op("reduce")
def reduce(*operands, shape, dimensions, to_apply, ctx):
    kind = simple_reducer(to_apply.computation)
    if complex_fast(operands, shape, kind):
        from .complex_elementwise import parts
        x, init = operands
        dims = tuple(dimensions)
        kept = [d for d in range(x.ndim) if d not in dims]
        xs = row_major_strides(x.shape)
        out = empty(shape.dims, shape.element_type)
        total = 1
        for d in dims:
            total *= x.shape[d]
        launch(_complex_kernel, out.size, parts(x), parts(init), parts(out), out.size,
               _t(x.shape[d] for d in kept), _t(xs[d] for d in kept) if kept else (0,),
               _t(x.shape[d] for d in dims), _t(xs[d] for d in dims) if dims else (0,),
               total, kind == "multiply")
        return out
    if len(operands) != 2 or isinstance(shape, TupleShape) or kind is None \
            or operands[0].et != shape.element_type or operands[0].et.is_complex:
        return _general_reduce(operands, shape, tuple(dimensions), to_apply, ctx)
    x, init = operands
    et = shape.element_type
    op, widen = combiner(kind, et)
    dims = tuple(dimensions)
    kept = [d for d in range(x.ndim) if d not in dims]
    xs = row_major_strides(x.shape)
    out = empty(shape.dims, et)
    total = 1
    for d in dims:
        total *= x.shape[d]
    launch(_kernel(op, widen, type_class(et)), out.size, x.data, init.data, out.data, out.size,
           _t(x.shape[d] for d in kept), _t(xs[d] for d in kept) if kept else (0,),
           _t(x.shape[d] for d in dims), _t(xs[d] for d in dims) if dims else (0,),
           total, type_params(et))
    return out
