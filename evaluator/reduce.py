"""``reduce`` (operation_semantics §Reduce), variadic.

Accumulation (see ``docs/semantics.md``):

* a reducer that is one commutative op of its two parameters (``add``,
  ``multiply``, ``maximum``, ``minimum``, ``and``, ``or``, ``xor``) on a single
  input takes a fast path: float ``add``/``multiply`` accumulate in f64 (c128 for
  complex) and round once to the result type; integers wrap in int64/uint64;
  ``maximum``/``minimum`` propagate NaN and order -0 < +0;
* any other reducer is applied as a balanced binary tree over the reduced
  elements, pairing neighbours in row-major order (``r(r(x0, x1), r(x2, x3))``...),
  then once with the init value: ``r(init, tree)``. The reducer runs vectorised
  over all output positions at once when it is made only of elementwise ops on
  scalars, and per output element otherwise (a left fold from the init).
  ``reducer_order="left"`` (not an HLO attribute: the envelope's recomputation, see
  ``fold_reduce``) folds a vectorisable reducer from the left instead.
"""

from __future__ import annotations

import weakref

import numpy as np

from hloref.errors import HloEvalError
from hloref.op_properties import opcodes_with
from hloref.opcodes import ELEMENTWISE, SIDE_EFFECTING
from hloref.shapes import ArrayShape, TupleShape

from . import plan_cache
from .combiners import COMBINERS
from .elementwise import ieee_max_min  # shared NaN/±0 rule
from .kernels import sum_f64
from .numeric import (contiguous, compute_array, element_type_of, finish, int_compute_dtype, quiet,
                      to_float64)
from .registry import op


#: Opcodes a reducer may contain and still run on whole arrays at once: the elementwise
#: ops (bitcast-convert included: on scalars, every instruction here being rank 0, it is
#: between types of one width, a bit-for-bit view) and the ones that pass scalars through
#: (op properties ``reducer-vectorized`` and ``reducer-scalar-only``).
VECTORIZABLE = (ELEMENTWISE - opcodes_with("reducer-scalar-only")) | opcodes_with("reducer-vectorized")


def reads_everything(computation) -> bool:
    """Whether every instruction of ``computation`` that its root does not read is inert
    (no effect: not side-effecting, not a custom-call, calling no computation). A fast
    path that replaces the computation by what its root computes (``simple_reducer``,
    ``evaluator.sort.simple_comparator``, ``evaluator.indexing.overwrite_combiner``)
    must not drop an instruction the interpreter would evaluate for its effects (an
    outfeed whose token nothing reads); unread pure code changes nothing."""
    seen: set[int] = set()
    stack = [computation.root] if computation.root is not None else []
    while stack:
        instr = stack.pop()
        if id(instr) not in seen:
            seen.add(id(instr))
            stack.extend(instr.operands)
    return all(id(i) in seen or (i.opcode not in SIDE_EFFECTING and i.opcode != "custom-call"
                                 and not i.called_computation_names())
               for i in computation.instructions)


def simple_reducer(computation, ctx=None) -> str | None:
    """The opcode if ``computation`` is ``ROOT op(p0, p1)`` on two scalars (and nothing
    else: ``reads_everything``), else None. Remembered per computation (``plan_cache``),
    or for the module by the interpreter ``ctx`` (``Interpreter.fact``)."""
    fact = getattr(ctx, "fact", None)
    if fact is not None:
        return fact(computation, "simple_reducer", _simple_reducer)
    return plan_cache.derived(computation, "simple_reducer", _simple_reducer)


def _simple_reducer(computation) -> str | None:
    root = computation.root
    params = computation.parameters
    if len(params) != 2 or root is None or root.opcode not in COMBINERS:
        return None
    if not reads_everything(computation):
        return None
    if {o.name for o in root.operands} != {p.name for p in params} or len(root.operands) != 2:
        return None
    shapes = [p.shape for p in params] + [root.shape]
    if not all(isinstance(s, ArrayShape) and s.rank == 0 for s in shapes):
        return None
    if len({s.element_type for s in shapes}) != 1:
        return None
    return root.opcode


_VECTORIZABLE_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def is_vectorizable(computation, module) -> bool:
    """True when every instruction (nested calls included) is an elementwise op on scalars.

    Cached per computation: a reducer inside a loop body is checked once, not per
    iteration."""
    cached = _VECTORIZABLE_CACHE.get(computation)
    if cached is None:
        cached = _VECTORIZABLE_CACHE[computation] = _check_vectorizable(computation, module)
    return cached


def _check_vectorizable(computation, module) -> bool:
    for instr in computation.instructions:
        if instr.opcode in ("call", "fusion"):
            for name in instr.called_computation_names():
                if not is_vectorizable(module.computations[name], module):
                    return False
            continue
        if instr.opcode not in VECTORIZABLE:
            return False
        shapes = instr.shape.elements if isinstance(instr.shape, TupleShape) else (instr.shape,)
        if not all(isinstance(s, ArrayShape) and s.rank == 0 for s in shapes):
            return False
    return True


def _move_reduced_last(x: np.ndarray, dims: tuple[int, ...]) -> np.ndarray:
    kept = [d for d in range(x.ndim) if d not in dims]
    moved = np.transpose(x, kept + list(dims))
    # explicit length, not -1: numpy cannot infer -1 for a zero-size array
    n = 1
    for d in dims:
        n *= x.shape[d]
    return moved.reshape(moved.shape[:len(kept)] + (n,))


def reduced_positions(dims, reduced: tuple[int, ...]) -> np.ndarray:
    """``(outputs, n)`` int64: the flat (row-major) offsets into an array of ``dims`` that
    each output of a reduce over ``reduced`` folds, outputs row-major, each output's
    elements in the order :func:`sequential_reduce` visits them (``_move_reduced_last``'s
    layout, so the same order by construction). For a backend calling the reducer per
    element (``gpu/calls.py``)."""
    index = np.arange(int(np.prod(dims, dtype=np.int64)), dtype=np.int64).reshape(tuple(dims))
    moved = _move_reduced_last(index, tuple(reduced))
    return moved.reshape(-1, moved.shape[-1]) if moved.ndim else moved.reshape(1, 1)


_F32_F64 = (np.dtype(np.float32), np.dtype(np.float64))


def _add_and_round(total: np.ndarray, init: np.ndarray, dtype) -> np.ndarray:
    total += init
    return total if total.dtype == dtype else total.astype(dtype)


def fast_reduce(kind: str, x: np.ndarray, init: np.ndarray, et, axis=-1) -> np.ndarray | None:
    """Reduce ``x`` over ``axis`` (an int or tuple) with a recognised reducer, then
    combine with ``init``. Works in place of a transposed copy: numpy reduces the
    axes directly (float add/multiply accumulate in f64 on the fly)."""
    axes = axis if type(axis) is tuple else (axis,)
    if len(axes) == 1 and x.ndim:  # the common case without a generator (~0.4 µs)
        axes = (axes[0] % x.ndim,)
    else:
        axes = tuple(a % x.ndim for a in axes) if x.ndim else ()
    if kind == "add" and x.dtype in _F32_F64 and x.dtype == et.dtype and init.dtype == x.dtype:
        # the commonest reduce, first: what the general path below computes for it
        # (``to_float64`` and ``finish`` of these types are these two ``astype``)
        total = sum_f64(x, axes)
        if total is not None:
            return quiet(_add_and_round, total, init.astype(np.float64), x.dtype)
    kept = tuple(n for d, n in enumerate(x.shape) if d not in axes)
    empty = any(x.shape[a] == 0 for a in axes)
    with np.errstate(all="ignore"):
        if et.is_float or et.is_complex:
            if kind in ("add", "multiply"):
                wide_dtype = np.complex128 if et.is_complex else np.float64
                values = x if not et.is_narrow_float else to_float64(x)
                wide_init = to_float64(init)
                if kind == "add":
                    total = sum_f64(values, axes) if not et.is_complex else None
                    if total is None:
                        total = np.add.reduce(values, axis=axes, dtype=wide_dtype)
                    total = total + wide_init
                else:
                    total = np.multiply.reduce(values, axis=axes, dtype=wide_dtype) * wide_init
                return finish(np.asarray(total), et)
            if kind in ("maximum", "minimum"):
                if et.is_complex:
                    return None
                take_max = kind == "maximum"
                values, start = compute_array(x), compute_array(init)
                fn = ieee_max_min(take_max)
                if empty:
                    return finish(np.broadcast_to(start, kept).copy(), et)
                best = values.max(axis=axes) if take_max else values.min(axis=axes)
                is_zero = best == 0
                if np.any(is_zero):
                    zeros = values == 0
                    signs = np.signbit(values)
                    if take_max:  # +0 wins if any +0 is present
                        pick_neg = ~np.any(zeros & ~signs, axis=axes)
                    else:  # -0 wins if any -0 is present
                        pick_neg = np.any(zeros & signs, axis=axes)
                    best = np.where(is_zero, np.where(pick_neg, -0.0, 0.0).astype(best.dtype), best)
                return finish(fn(best, start), et)
            return None
        if et.is_pred:
            ufunc = COMBINERS[kind].pred
            acc = ufunc.reduce(x, axis=axes) if not empty else np.broadcast_to(init, kept)
            return np.asarray(ufunc(acc, init)).astype(bool)
        if et.is_integer:
            dt = int_compute_dtype(et)
            ufunc = COMBINERS[kind].integer
            start = init.astype(dt)
            if empty:
                return finish(np.broadcast_to(start, kept).copy(), et)
            if kind in ("add", "multiply"):
                acc = ufunc.reduce(x, axis=axes, dtype=dt)
            else:
                acc = ufunc.reduce(x.astype(dt), axis=axes)
            return finish(np.asarray(ufunc(acc, start)), et)
    return None


def mixed_precision(inputs, inits) -> bool:
    """Whether an input's element type differs from its accumulator's (init's): a
    reducer ``f(acc: f32, x: bf16)`` cannot combine two partial results (their types are
    the accumulator's), so it is folded from the left, as XLA's loop emitters do, not in
    the pairwise tree."""
    return any(element_type_of(x) != element_type_of(i) for x, i in zip(inputs, inits))


def tree_reduce(apply, xs: list[np.ndarray], inits: list[np.ndarray]):
    """Reduce the last axis of each array in ``xs`` with ``apply(*accs, *values)``.

    Neighbours are combined pairwise until one element is left, then the init
    values: ``apply(*inits, *tree)``. ``apply`` works on whole arrays."""
    n = len(xs)
    length = xs[0].shape[-1]
    kept_shape = xs[0].shape[:-1]
    if length == 0:
        return [np.broadcast_to(i, kept_shape).copy() for i in inits]
    values = list(xs)
    while length > 1:
        half = length // 2
        left = [v[..., 0:2 * half:2] for v in values]
        right = [v[..., 1:2 * half:2] for v in values]
        combined = [np.broadcast_to(c, left[0].shape)
                    for c in reducer_outputs(apply(*left, *right), n)]
        if length % 2:
            combined = [np.concatenate([c, v[..., -1:].astype(c.dtype)], axis=-1)
                        for c, v in zip(combined, values)]
        values = combined
        length = values[0].shape[-1]
    last = [v[..., 0] for v in values]
    out = reducer_outputs(apply(*[np.broadcast_to(i, kept_shape) for i in inits], *last), n)
    return [contiguous(np.broadcast_to(o, kept_shape)) for o in out]


def reducer_outputs(value, n):
    """A reducer computation's result as a list of ``n`` arrays (a bare value when
    ``n == 1``, else a tuple of ``n``)."""
    if n == 1 and not isinstance(value, tuple):
        return [np.asarray(value)]
    if not isinstance(value, tuple) or len(value) != n:
        raise HloEvalError(f"reducer returned {type(value).__name__}, expected a tuple of {n}")
    return [np.asarray(v) for v in value]


def sequential_reduce(apply, xs: list[np.ndarray], inits: list[np.ndarray], mask=None):
    """Per output element: ``acc = init; for v in row: acc = apply(acc, v)`` (scalars),
    skipping the positions where ``mask`` (same shape as ``xs``) is False."""
    n = len(xs)
    kept_shape = xs[0].shape[:-1]
    outs = [np.empty(kept_shape, dtype=i.dtype) for i in inits]
    for pos in np.ndindex(*kept_shape):
        acc = [np.asarray(i) for i in inits]
        for k in range(xs[0].shape[-1]):
            if mask is not None and not mask[pos + (k,)]:
                continue
            acc = reducer_outputs(apply(*acc, *[x[pos + (k,)] for x in xs]), n)
        for o, a in zip(outs, acc):
            o[pos] = a
    return outs


def fold_reduce(apply, xs: list[np.ndarray], inits: list[np.ndarray], mask=None):
    """The left fold over the last axis, vectorised over the kept positions: ``acc =
    init``, then ``acc = apply(*acc, *values_k)`` for k in order, skipping the positions
    where ``mask`` is False. Another order the semantics allow (XLA's loop emitters fold
    a reducer they cannot reassociate this way): the envelope evaluates it beside the
    tree (``reducer_order="left"``, ``fuzz/perturb.py``)."""
    n = len(xs)
    kept_shape = xs[0].shape[:-1]
    acc = [np.broadcast_to(np.asarray(i), kept_shape).copy() for i in inits]
    with np.errstate(all="ignore"):
        for k in range(xs[0].shape[-1]):
            out = reducer_outputs(apply(*acc, *[x[..., k] for x in xs]), n)
            out = [np.broadcast_to(o, kept_shape).astype(a.dtype, copy=False)
                   for o, a in zip(out, acc)]
            if mask is not None:
                out = [np.where(mask[..., k], o, a) for o, a in zip(out, acc)]
            acc = [contiguous(o) for o in out]
    return acc


@op("reduce")
def reduce(*operands, shape, dimensions, to_apply, ctx, reducer_order="tree"):
    n = len(operands) // 2
    if len(operands) != 2 * n or n == 0:
        raise HloEvalError(f"reduce takes N inputs and N init values, got {len(operands)} operands")
    inputs, inits = list(operands[:n]), list(operands[n:])
    dims = tuple(dimensions)
    result_shapes = shape.elements if isinstance(shape, TupleShape) else (shape,)
    # the left fold of a narrow float rounds each step to the type (the reducer as
    # written, XLA:CPU's loop order); the fast path would sum wide and round once
    if n == 1 and not (reducer_order == "left" and result_shapes[0].element_type.is_narrow_float):
        kind = simple_reducer(to_apply.computation, ctx)
        if kind is not None and element_type_of(inputs[0]) == result_shapes[0].element_type:
            out = fast_reduce(kind, inputs[0], inits[0], result_shapes[0].element_type, axis=dims)
            if out is not None:
                return contiguous(out.reshape(result_shapes[0].dims))
    moved = [_move_reduced_last(x, dims) for x in inputs]
    vectorized = is_vectorizable(to_apply.computation, ctx.module)
    if not vectorized:
        outs = sequential_reduce(to_apply, moved, inits)
    elif reducer_order == "left" or mixed_precision(inputs, inits):
        outs = fold_reduce(to_apply, moved, inits)
    else:
        outs = tree_reduce(to_apply, moved, inits)
    outs = [contiguous(o.reshape(s.dims)).astype(s.element_type.dtype, copy=False)
            for o, s in zip(outs, result_shapes)]
    return outs[0] if n == 1 else tuple(outs)
