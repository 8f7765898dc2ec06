"""``sort`` and ``topk`` on the GPU (mirrors ``evaluator/sort.py``, whose docstring fixes
the semantics: always stable; a FLOAT ``compare`` on rows holding NaN, which is not a
strict weak ordering, replays what XLA:CPU's libstdc++ ``std::stable_sort`` /
``std::sort`` do; topk in TOTALORDER with ties to the lower index).

Three kernels, all device-resident:

1. one thread per element writes the sort key of the key operand (f64 compute values
   for FLOAT, sign-magnitude int64 for TOTALORDER, int64/uint64 for integers, 0/1 for
   pred) and the identity permutation, row by row;
2. one thread per row sorts its permutation: libstdc++'s ``std::stable_sort`` (chunked
   insertion sort of 7 and buffered merges), which for a strict weak ordering is *the*
   stable order, so it equals the CPU's stable argsort; a row with NaN keys under a
   FLOAT comparison and ``is_stable=false`` runs libstdc++'s ``std::sort`` (introsort,
   median of three, threshold 16, final insertion sort) instead, as the CPU replays;
   both are the CPU's own Python source compiled as device functions
   (``evaluator.sort.libstdcxx_sorts``);
3. one thread per element moves every operand's storage bits through the permutation.

Comparators: ``compare(p2k, p2k+1), direction=LT|GT`` of any ``type`` (swapped
parameters flip the direction), on any operand ``k``, through keys as above; any other
comparator the computation compiler (``gpu/computation.py``) accepts (lexicographic
multi-key chains) runs compiled as the comparison of the same stable sort on row copies
of the operands: for a strict weak ordering that is the CPU's result (for one that is
not, the CPU's vectorised merge sort may order differently; a comparator the CPU does
not apply to whole arrays it sorts by the same libstdc++ stable sort, comparison by
comparison, and a serial one, holding rng-get-and-update-state, runs here from one
thread, rows in order, so that both make the same calls). Complex values
have no order: a comparator comparing them LT/GT raises the CPU's error, and so does
``topk`` of complex values; compiled comparators may use complex EQ/NE.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from hloref.errors import HloEvalError
from hloref.evaluator.sort import introsort_stack_size, simple_comparator, stable_sort, std_sort
from hloref.shapes import TupleShape

from . import calls
from . import compare  # noqa: F401  (registers the TOTALORDER key loads LOAD["key_*"])
from .device import LOAD, device_fn, empty, type_class, type_params
from .elementwise import launch
from .registry import gpu_op
from .serial import run_calls
from .shape_ops import int_tuple, row_major_strides, strided_offset


def _key_plan(et, kind):
    """``(load name, key dtype, may hold NaN)`` for sort keys of ``et`` compared as ``kind``
    (as the CPU's ``compare``: the type matters only as TOTALORDER of floats), or None
    for complex keys (no order: the caller raises the CPU's error)."""
    cls = type_class(et)
    if cls in ("f32", "f64", "narrow"):
        if kind == "TOTALORDER":
            return "key_" + cls, np.int64, False
        return cls, np.float64, True
    if cls == "pred":
        return "pred", np.int64, False
    if cls in ("sint", "uint"):
        return cls, (np.int64 if cls == "sint" else np.uint64), False
    return None


# ----------------------------------------------------------------- the libstdc++ algorithms

def algorithms(lt=None):
    """libstdc++'s ``std::stable_sort`` and ``std::sort`` as device functions compiled
    from the CPU's source (``evaluator.sort``), over the comparison
    ``lt(keys, a, b, desc)`` (a device function; by default the CPU's key comparison):
    ``(stable_sort(p, n, keys, desc, buf), std_sort(p, n, keys, desc, buf, stack))``."""
    overrides = {} if lt is None else {"_lt": lt}
    return device_fn(stable_sort, **overrides), device_fn(std_sort, **overrides)


_stable_sort, _std_sort = algorithms()


@cuda.jit
def _sort_rows(keys, perm, rows, n, desc, replay_nan, buf, stack, ssize):
    r = cuda.grid(1)
    step = cuda.gridsize(1)
    while r < rows:
        k = keys[r * n:(r + 1) * n]
        p = perm[r * n:(r + 1) * n]
        b = buf[r * n:(r + 1) * n]
        has_nan = False
        if replay_nan:
            for i in range(n):
                if k[i] != k[i]:
                    has_nan = True
        if has_nan:
            _std_sort(p, n, k, desc, b, stack[r * ssize:(r + 1) * ssize])
        else:
            _stable_sort(p, n, k, desc, b)
        r += step


# ----------------------------------------------------------------- keys and moves

@cuda.jit(device=True)
def _row_offset(i, n, dims, strides, dstride):
    """Flat offset of element ``i % n`` of row ``i // n``: rows run row-major over
    ``dims`` (``strides``), the sorted dimension has stride ``dstride``."""
    r = i // n
    return strided_offset(r, dims, strides, (i - r * n) * dstride)


@functools.cache  # one compiled kernel per (key load, key dtype)
def _keys_kernel(load_name, as_float):
    load = LOAD[load_name]
    if as_float:
        @cuda.jit(device=True)
        def key(x, p):
            return np.float64(load(x, p))
    else:
        key = load

    @cuda.jit
    def k(x, keys, perm, total, n, p, dims, strides, dstride):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < total:
            keys[i] = key(x[_row_offset(i, n, dims, strides, dstride)], p)
            perm[i] = i % n
            i += step

    return k


@cuda.jit
def _permute(src, out, perm, total, n, dims, strides, dstride):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < total:
        row = i - i % n
        j = perm[i]
        out[_row_offset(i, n, dims, strides, dstride)] = \
            src[_row_offset(row + j, n, dims, strides, dstride)]
        i += step


class _Rows:
    """Rows along dimension ``d`` of an array of ``dims``: count, length, and the kernel
    arguments locating element ``j`` of row ``r``."""

    def __init__(self, dims, d):
        st = row_major_strides(dims)
        other = [k for k in range(len(dims)) if k != d]
        self.n = int(dims[d])
        self.rows = int(np.prod([dims[k] for k in other], dtype=np.int64))
        self.total = self.rows * self.n
        self.args = (int_tuple(dims[k] for k in other),
                     int_tuple(st[k] for k in other) if other else (0,), int(st[d]))


def permutation(x, rows: _Rows, load_name, key_dtype, desc: bool, replay_nan: bool):
    """The stable sorting permutation of every row of ``x`` (an int64 device array)."""
    keys = cuda.device_array(max(rows.total, 1), dtype=key_dtype)
    perm = cuda.device_array(max(rows.total, 1), dtype=np.int64)
    launch(_keys_kernel(load_name, key_dtype == np.float64), rows.total, x.data, keys, perm,
           rows.total, rows.n, type_params(x.et), *rows.args)
    buf = cuda.device_array(max(rows.total, 1), dtype=np.int64)
    ssize = introsort_stack_size(rows.n) if replay_nan else 1
    stack = cuda.device_array(max(rows.rows * ssize, 1), dtype=np.int64)
    launch(_sort_rows, rows.rows, keys, perm, rows.rows, rows.n, desc, replay_nan, buf, stack,
           ssize)
    return perm


@cuda.jit
def _rows_of(src, out, perm, total, n, dims, strides, dstride):
    """``out``: ``src`` laid out row after row; ``perm``: the identity in every row."""
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < total:
        out[i] = src[_row_offset(i, n, dims, strides, dstride)]
        perm[i] = i % n
        i += step


_GENERAL: dict = {}


def _general_kernel(compiled, arity: int):
    """A per-row stable sort whose comparison is the compiled comparator
    ``f(x0[a], x0[b], x1[a], x1[b], ...) != 0`` over row buffers ``x0, x1, ...``. A
    serial comparator's channel arguments (``gpu/serial.py``) ride in the keys tuple
    after the rows, to ``f`` after the values."""
    key = (id(compiled), arity)
    hit = _GENERAL.get(key)
    if hit is None:
        extras = compiled.extra_params
        args = ", ".join([f"keys[{j}][a], keys[{j}][b]" for j in range(arity)]
                         + [f"keys[{arity + j}]" for j in range(len(extras))])
        xs = [f"x{j}" for j in range(arity)]
        rows = ", ".join([f"{x}[r * n:(r + 1) * n]" for x in xs] + extras)
        source = "\n".join([
            "def lt(keys, a, b, desc):",
            f"    return f({args}) != 0",
            "",
            f"def k({', '.join(xs)}, perm, rows, n, buf{''.join(', ' + e for e in extras)}):",
            "    r = cuda.grid(1)",
            "    step = cuda.gridsize(1)",
            "    while r < rows:",
            f"        stable(perm[r * n:(r + 1) * n], n, ({rows},), False, "
            "buf[r * n:(r + 1) * n])",
            "        r += step"]) + "\n"
        ns = {"cuda": cuda, "f": compiled.fn}
        exec(compile(source, "<gpu sort comparator>", "exec"), ns)
        ns["stable"] = algorithms(cuda.jit(device=True)(ns["lt"]))[0]
        hit = _GENERAL[key] = (compiled, cuda.jit(ns["k"]))
    return hit[1]


def _general_sort(operands, shape, d, to_apply, ctx):
    """Any comparator the computation compiler accepts (lexicographic multi-key sorts):
    libstdc++'s stable sort, which for a strict weak ordering is the CPU's result. A
    serial comparator (``gpu/serial.py``: one holding rng-get-and-update-state) runs
    from one thread: rows in order (row-major over the other dimensions), each by the
    same stable sort the CPU runs for a comparator it does not apply to whole arrays
    (``evaluator.sort._python_sort``), so the same comparator calls in the same order.
    Rows of fewer than two elements call no comparator (the CPU copies them)."""
    from .computation import compile_computation
    compiled = compile_computation(to_apply.computation, ctx.module, serial=True)
    want = [o.et for o in operands for _ in range(2)]
    if compiled is None or compiled.tuple_result or compiled.params != want or \
            [r.name for r in compiled.results] != ["pred"]:
        # one comparison at a time through the GPU interpreter (``gpu/calls.py``)
        return calls.sort_calls(operands, shape, d, to_apply)
    x0 = operands[0]
    rows = _Rows(x0.shape, d)
    outs = [empty(o.shape, o.et) for o in operands]
    if rows.total == 0:
        return tuple(outs) if isinstance(shape, TupleShape) else outs[0]
    perm = cuda.device_array(rows.total, dtype=np.int64)
    laid = []
    for o in operands:
        r = empty((rows.total,), o.et)
        launch(_rows_of, rows.total, o.data, r.data, perm, rows.total, rows.n, *rows.args)
        laid.append(r.data)
    buf = cuda.device_array(rows.total, dtype=np.int64)
    run_calls(compiled, ctx, _general_kernel(compiled, len(operands)), rows.rows, *laid, perm,
              rows.rows, rows.n, buf)
    for o, out in zip(operands, outs):
        launch(_permute, rows.total, o.data, out.data, perm, rows.total, rows.n, *rows.args)
    return tuple(outs) if isinstance(shape, TupleShape) else outs[0]


@gpu_op("sort")
def sort(*operands, shape, dimensions, to_apply, ctx, is_stable=False):
    if not operands:
        raise HloEvalError("sort needs at least one operand")
    simple = simple_comparator(to_apply.computation)
    if simple is None:
        (d,) = tuple(dimensions)
        if any(o.shape != operands[0].shape for o in operands):
            raise HloEvalError("sort operands must have the same dimensions")
        return _general_sort(operands, shape, d, to_apply, ctx)
    k, direction, kind = simple
    if k >= len(operands):
        raise HloEvalError(f"sort comparator compares operand {k} of {len(operands)}")
    plan = _key_plan(operands[k].et, kind)
    if plan is None:  # complex keys: the CPU's compare raises this
        raise HloEvalError(f"compare direction {direction} is not defined on complex values")
    (d,) = tuple(dimensions)
    x0 = operands[0]
    if any(o.shape != x0.shape for o in operands):
        raise HloEvalError("sort operands must have the same dimensions")
    rows = _Rows(x0.shape, d)
    outs = [empty(o.shape, o.et) for o in operands]
    if rows.total == 0:
        return tuple(outs) if isinstance(shape, TupleShape) else outs[0]
    load_name, key_dtype, may_nan = plan
    perm = permutation(operands[k], rows, load_name, key_dtype, direction == "GT",
                       may_nan and not is_stable)
    for o, out in zip(operands, outs):
        launch(_permute, rows.total, o.data, out.data, perm, rows.total, rows.n, *rows.args)
    return tuple(outs) if isinstance(shape, TupleShape) else outs[0]


# ----------------------------------------------------------------- topk

@cuda.jit
def _take_first(src, perm, vals, idx, total, n, k, dims, strides, dstride):
    """Row by row, the first ``k`` of each sorted row: values and s32 indices."""
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < total:
        r = i // k
        j = perm[r * n + i - r * k]
        vals[i] = src[_row_offset(r * n + j, n, dims, strides, dstride)]
        idx[i] = np.int32(j)
        i += step


@gpu_op("topk")
def topk(x, *, shape, k, largest=True):
    if x.ndim == 0:
        raise HloEvalError("topk needs an operand of rank >= 1")
    cls = type_class(x.et)
    if cls in ("f32", "f64", "narrow"):
        load_name = "key_" + cls
        key_dtype = np.int64
    elif cls in ("pred", "sint"):
        load_name, key_dtype = cls, np.int64
    elif cls == "uint":
        load_name, key_dtype = cls, np.uint64
    else:  # complex: no order (the CPU's error)
        raise HloEvalError(f"topk is not defined on {x.et.name}")
    k = int(k)
    rows = _Rows(x.shape, x.ndim - 1)
    if not 0 <= k <= rows.n:
        raise HloEvalError(f"topk: k={k} outside [0, {rows.n}]")
    out_dims = tuple(x.shape[:-1]) + (k,)
    vals = empty(out_dims, x.et)
    idx = empty(out_dims, shape.elements[1].element_type)
    if rows.total == 0 or k == 0:
        return vals, idx
    perm = permutation(x, rows, load_name, key_dtype, bool(largest), False)
    launch(_take_first, vals.size, x.data, perm, vals.data, idx.data, vals.size, rows.n, k,
           *rows.args)
    return vals, idx
