"""``sort`` and ``topk`` (operation_semantics §Sort, §TopK; StableHLO spec §sort).

Semantics decisions:

* **sort** permutes all operands together along ``dimensions={d}`` by the
  comparator ``to_apply`` (2N scalars → pred, "is lhs less than rhs").
  hloref always sorts **stably** (equal elements keep their operand order), as
  XLA's HloEvaluator does whatever ``is_stable`` says; a stable sort is also a
  valid result of ``is_stable=false`` (unstable only means the order of equal
  elements is unspecified), so ``is_stable`` needs no branch.
* A comparator that is not a strict weak ordering has no well-defined result.
  The one such case that occurs in practice, a plain ``compare(p, q),
  direction=LT|GT`` of type FLOAT on keys containing NaN (NaN is "equivalent" to
  everything), is evaluated by replaying what XLA:CPU does: its sort thunk
  (``xla/backends/cpu/runtime/sort_thunk.cc``) calls ``std::stable_sort``
  (``is_stable=true``) or ``std::sort`` (otherwise) from libstdc++, so hloref runs
  the same algorithms (chunked insertion sort of 7 + buffered merges; introsort
  with median-of-three, threshold 16, final insertion sort) on those rows.
  Other non-strict-weak comparators get whatever a stable merge sort gives.
* **topk** (``k``, ``largest``): the ``k`` largest (or smallest) elements of each
  row of the last dimension in descending (ascending) order, with s32 indices;
  ties go to the lower index. Floats are ordered by TOTALORDER
  (-NaN < -Inf < ... < -0 < +0 < ... < +Inf < +NaN), which is what XLA:CPU's topk
  does (measured with jaxlib 0.10.2: +NaN first for largest=true, -0 after +0).

Implementation: a comparator of the form ``compare(p[2k], p[2k+1]), direction=LT|GT``
(any ``type``; operands swapped flips the direction) is turned into keys for
``np.argsort(kind="stable")`` (TOTALORDER: ``compare.total_order_keys``). Any
other comparator that is elementwise (``reduce.is_vectorizable``) runs as a
bottom-up merge sort whose merges are computed by vectorised binary searches (unless
a guessed order verifies first: an operand ascending or descending, ties in operand
order, checked by two comparator calls over all neighbours, ``_guessed_order``): each
comparator call evaluates one probe for every element of every row at once, so a
row of n elements takes about (log2 n)**2 / 2 calls. If the comparator turns out not
to be a strict weak ordering (the merged positions are not a permutation), or is not
elementwise, rows are sorted one by one (row-major) by libstdc++'s ``std::stable_sort``
(``stable_sort`` below, run as plain Python: ``_python_sort``), one comparator call per
comparison. The number and order of comparator calls is implementation-defined (XLA
defines none); this one is the GPU's compiled-comparator sort's too, so a comparator
with effects (rng-get-and-update-state advancing the evaluation's state) makes the
same calls on both backends.
"""

from __future__ import annotations

import functools
import types

import numba
import numpy as np

from hloref.errors import HloEvalError
from hloref.shapes import TupleShape

from .compare import total_order_keys
from .numeric import compute_array, contiguous, element_type_of, int_compute_dtype
from .reduce import is_vectorizable, reads_everything
from .registry import op


_FLIP = {"LT": "GT", "GT": "LT"}


# --------------------------------------------------------------------------- comparator analysis

def simple_comparator(comp):
    """``(operand k, direction, type)`` when the comparator is ``compare(p2k, p2k+1)``
    with direction LT or GT (swapped parameters flip it) and nothing else
    (``reads_everything``), else None."""
    root = comp.root
    if root is None or root.opcode != "compare" or len(root.operands) != 2 \
            or not reads_everything(comp):
        return None
    a, b = root.operands
    if a.opcode != "parameter" or b.opcode != "parameter":
        return None
    direction = str(root.attrs.get("direction"))
    if direction not in _FLIP:
        return None
    pa, pb = a.parameter_number, b.parameter_number
    if pa // 2 != pb // 2 or pa == pb:
        return None
    if pa > pb:
        direction = _FLIP[direction]
    kind = root.attrs.get("type")
    return pa // 2, direction, (str(kind) if kind is not None else None)


def _sort_keys(x: np.ndarray, kind: str | None):
    """Ascending keys whose numpy order is the comparison's order, or None if unsupported.

    Also returns whether the keys are IEEE floats that may hold NaN (FLOAT comparisons)."""
    et = element_type_of(x)
    if et.is_float:
        if kind == "TOTALORDER":
            return total_order_keys(x), False
        if kind in (None, "FLOAT"):
            return compute_array(x).astype(np.float64), True
        return None, False
    if et.is_pred:
        return (x.astype(np.uint8), False) if kind in (None, "UNSIGNED") else (None, False)
    if et.is_integer:
        default = "SIGNED" if et.kind == "sint" else "UNSIGNED"
        if kind not in (None, default):
            return None, False
        return x.astype(int_compute_dtype(et)), False
    return None, False


def _descending(keys: np.ndarray) -> np.ndarray:
    if keys.dtype.kind == "f":
        return -keys
    return ~keys  # order-reversing bijection on int64/uint64/uint8


# --------------------------------------------------------------------------- libstdc++ replay
# One Python source for both backends: the functions below are compiled here with
# ``numba.njit(cache=True)`` (module-level dispatchers calling each other by global name,
# which is what keeps Numba's on-disk cache working), and ``gpu/sort.py`` compiles
# ``stable_sort`` and ``std_sort`` with everything they call again as CUDA device
# functions (``gpu.device.device_fn``), with its own comparison in place of ``_lt`` for
# general comparators. So the bodies keep to what both targets compile: no allocation
# (the caller passes ``buf`` and ``stack``), no recursion.

@numba.njit(cache=True)
def _lt(keys, a, b, desc):
    if desc:
        return keys[a] > keys[b]
    return keys[a] < keys[b]


@numba.njit(cache=True)
def _linear_insert(p, i, keys, desc):
    """libstdc++ ``__unguarded_linear_insert``: moves ``p[i]`` down past the elements
    after which it belongs."""
    val = p[i]
    j = i
    while j - 1 >= 0 and _lt(keys, val, p[j - 1], desc):
        p[j] = p[j - 1]
        j -= 1
    p[j] = val


@numba.njit(cache=True)
def _insertion_sort(p, first, last, keys, desc):
    if first == last:
        return
    for i in range(first + 1, last):
        val = p[i]
        if _lt(keys, val, p[first], desc):
            for j in range(i, first, -1):
                p[j] = p[j - 1]
            p[first] = val
        else:
            _linear_insert(p, i, keys, desc)


@numba.njit(cache=True)
def _move_merge(src1, f1, l1, src2, f2, l2, dst, r, keys, desc):
    """libstdc++ ``__move_merge``: ``src1[f1:l1]`` and ``src2[f2:l2]`` merged into ``dst``
    from ``r`` on (ties to the first); returns the end of what it wrote."""
    while f1 != l1 and f2 != l2:
        if _lt(keys, src2[f2], src1[f1], desc):
            dst[r] = src2[f2]
            f2 += 1
        else:
            dst[r] = src1[f1]
            f1 += 1
        r += 1
    while f1 != l1:
        dst[r] = src1[f1]
        f1 += 1
        r += 1
    while f2 != l2:
        dst[r] = src2[f2]
        f2 += 1
        r += 1
    return r


@numba.njit(cache=True)
def _merge_sort_loop(src, first, last, dst, r, step, keys, desc):
    two = 2 * step
    while last - first >= two:
        r = _move_merge(src, first, first + step, src, first + step, first + two, dst, r,
                        keys, desc)
        first += two
    if last - first < step:
        step = last - first
    _move_merge(src, first, first + step, src, first + step, last, dst, r, keys, desc)


@numba.njit(cache=True)
def _merge_sort_with_buffer(p, first, last, buf, keys, desc):
    length = last - first
    step = 7
    f = first
    while last - f >= step:
        _insertion_sort(p, f, f + step, keys, desc)
        f += step
    _insertion_sort(p, f, last, keys, desc)
    while step < length:
        _merge_sort_loop(p, first, last, buf, 0, step, keys, desc)
        step *= 2
        _merge_sort_loop(buf, 0, length, p, first, step, keys, desc)
        step *= 2


@numba.njit(cache=True)
def stable_sort(p, n, keys, desc, buf):
    """libstdc++ ``std::stable_sort`` with a buffer of (n + 1) / 2 elements (``buf`` holds
    at least that many)."""
    if n == 0:
        return
    middle = (n + 1) // 2
    _merge_sort_with_buffer(p, 0, middle, buf, keys, desc)
    _merge_sort_with_buffer(p, middle, n, buf, keys, desc)
    len1 = middle
    len2 = n - middle
    if len1 <= len2:  # forward merge from the buffered first half
        for i in range(len1):
            buf[i] = p[i]
        # (once the buffer is used up, the rest of the second half is already in place)
        _move_merge(buf, 0, len1, p, middle, n, p, 0, keys, desc)
    else:  # backward merge from the buffered second half
        for i in range(len2):
            buf[i] = p[middle + i]
        if len2 == 0:
            return
        last1 = middle - 1
        last2 = len2 - 1
        r = n
        while True:
            if _lt(keys, buf[last2], p[last1], desc):
                r -= 1
                p[r] = p[last1]
                if last1 == 0:
                    for j in range(last2, -1, -1):
                        r -= 1
                        p[r] = buf[j]
                    return
                last1 -= 1
            else:
                r -= 1
                p[r] = buf[last2]
                if last2 == 0:
                    return
                last2 -= 1


@numba.njit(cache=True)
def _introsort(p, n, depth0, keys, desc, buf, stack):
    """libstdc++ ``__introsort_loop`` on ``p[0:n]``. Its recursion runs on disjoint ranges,
    so an explicit stack of ``(first, last, depth)`` triples gives the same result (Numba's
    cache cannot hold recursive functions, CUDA device code has no recursion)."""
    stack[0] = 0
    stack[1] = n
    stack[2] = depth0
    top = 1
    while top > 0:
        top -= 1
        first = stack[3 * top]
        last = stack[3 * top + 1]
        depth = stack[3 * top + 2]
        while last - first > 16:
            if depth == 0:
                # heap sort in libstdc++; not replayed
                _merge_sort_with_buffer(p, first, last, buf, keys, desc)
                break
            depth -= 1
            # __move_median_to_first(first, first + 1, mid, last - 1)
            a = first + 1
            b = first + (last - first) // 2
            c = last - 1
            if _lt(keys, p[a], p[b], desc):
                if _lt(keys, p[b], p[c], desc):
                    m = b
                elif _lt(keys, p[a], p[c], desc):
                    m = c
                else:
                    m = a
            elif _lt(keys, p[a], p[c], desc):
                m = a
            elif _lt(keys, p[b], p[c], desc):
                m = c
            else:
                m = b
            t = p[first]
            p[first] = p[m]
            p[m] = t
            # __unguarded_partition(first + 1, last, first)
            lo = first + 1
            hi = last
            while True:
                while lo < last and _lt(keys, p[lo], p[first], desc):
                    lo += 1
                hi -= 1
                while hi > first and _lt(keys, p[first], p[hi], desc):
                    hi -= 1
                if not lo < hi:
                    break
                t = p[lo]
                p[lo] = p[hi]
                p[hi] = t
                lo += 1
            stack[3 * top] = lo
            stack[3 * top + 1] = last
            stack[3 * top + 2] = depth
            top += 1
            last = lo


@numba.njit(cache=True)
def std_sort(p, n, keys, desc, buf, stack):
    """libstdc++ ``std::sort``: introsort then the final insertion sort (``buf``: n
    elements, ``stack``: ``introsort_stack_size(n)``)."""
    if n == 0:
        return
    lg = 0
    while (1 << (lg + 1)) <= n:
        lg += 1
    _introsort(p, n, 2 * lg, keys, desc, buf, stack)
    if n > 16:
        _insertion_sort(p, 0, 16, keys, desc)
        for i in range(16, n):
            _linear_insert(p, i, keys, desc)
    else:
        _insertion_sort(p, 0, n, keys, desc)


def introsort_stack_size(n: int) -> int:
    """How many int64s ``std_sort`` of ``n`` elements needs in ``stack``: (first, last,
    depth) triples, more than introsort's depth limit 2 * floor(log2 n) can push."""
    lg = max(int(n).bit_length() - 1, 0)
    return 3 * ((2 * lg + 1) * (2 * lg + 1) + 64)


@numba.njit(cache=True)
def _replay_rows(keys2d, perm2d, rows, desc, stable, buf, stack):
    n = keys2d.shape[1]
    for r in rows:
        p = perm2d[r]
        for i in range(n):
            p[i] = i
        if stable:
            stable_sort(p, n, keys2d[r], desc, buf)
        else:
            std_sort(p, n, keys2d[r], desc, buf, stack)


# --------------------------------------------------------------------------- general comparators

def _merge_sort_vectorized(flat, compare) -> np.ndarray | None:
    """Stable bottom-up merge sort of the rows of ``flat`` (list of (R, n) arrays) with
    ``compare(*pairs)`` evaluated on whole arrays; None if the merges are inconsistent."""
    rows, n = flat[0].shape
    perm = np.broadcast_to(np.arange(n, dtype=np.int64), (rows, n)).copy()
    row_of = np.repeat(np.arange(rows, dtype=np.int64), n)
    pos = np.tile(np.arange(n, dtype=np.int64), rows)
    w = 1
    while w < n:
        q = pos % (2 * w)
        bs = pos - q
        left = q < w
        left_len = np.minimum(w, n - bs)
        right_len = np.clip(n - bs - w, 0, w)
        lo = np.zeros(rows * n, dtype=np.int64)
        hi = np.where(left, right_len, left_len)
        cur = perm.reshape(-1)
        while True:
            active = np.nonzero(lo < hi)[0]
            if active.size == 0:
                break
            mid = (lo[active] + hi[active]) // 2
            is_left = left[active]
            other_pos = np.where(is_left, bs[active] + w + mid, bs[active] + mid)
            r = row_of[active]
            self_el = cur[active]
            other_el = perm[r, other_pos]
            a_el = np.where(is_left, other_el, self_el)
            b_el = np.where(is_left, self_el, other_el)
            args = []
            for f in flat:
                args.append(f[r, a_el])
                args.append(f[r, b_el])
            res = np.broadcast_to(np.asarray(compare(*args)), active.shape).astype(bool)
            go_right = np.where(is_left, res, ~res)
            lo[active] = np.where(go_right, mid + 1, lo[active])
            hi[active] = np.where(go_right, hi[active], mid)
        new_pos = bs + np.where(left, q, q - w) + lo
        target = row_of * n + new_pos
        if np.bincount(target, minlength=rows * n).max(initial=0) > 1:
            return None
        new_perm = np.empty(rows * n, dtype=np.int64)
        new_perm[target] = cur
        perm = new_perm.reshape(rows, n)
        w *= 2
    return perm


def _candidate_orders(flat):
    """Stable row orders a comparator often is (JAX's and XLA's own comparators: one
    operand in TOTALORDER, ascending or descending, ties by position or by an iota
    operand): each operand's keys ascending and descending (ties in operand order)."""
    for f in flat[:2]:
        try:
            et = element_type_of(f)
        except Exception:  # noqa: BLE001 - not an HLO element type
            continue
        if et.is_float:
            keys = [total_order_keys(f), compute_array(f).astype(np.float64)]
        elif et.is_integer or et.is_pred:
            keys = [f.astype(int_compute_dtype(et)) if not et.is_pred else f.astype(np.uint8)]
        else:
            continue
        n = f.shape[1]
        for k in keys:
            yield np.argsort(k, axis=1, kind="stable")
            yield (n - 1 - np.argsort(k[:, ::-1], axis=1, kind="stable"))[:, ::-1]


def _verified_order(flat, compare, perm) -> bool:
    """Whether ``perm`` is the stable sort of every row by ``compare``: no element is
    less than the one before it, and of two equivalent neighbours (neither less) the
    earlier comes first. For a strict weak ordering that order is unique, so it is
    the merge sort's."""
    a, b = perm[:, :-1], perm[:, 1:]
    lhs = [np.take_along_axis(f, a, axis=1).reshape(-1) for f in flat]
    rhs = [np.take_along_axis(f, b, axis=1).reshape(-1) for f in flat]
    shape = (a.size,)

    def less(x, y):
        args = []
        for u, v in zip(x, y):
            args += [u, v]
        return np.broadcast_to(np.asarray(compare(*args)), shape).astype(bool)

    if less(rhs, lhs).any():
        return False
    equivalent = ~less(lhs, rhs)
    return not np.any(equivalent & (a.reshape(-1) > b.reshape(-1)))


def _guessed_order(flat, compare) -> np.ndarray | None:
    """The stable order of ``_candidate_orders`` that ``compare`` verifies (two
    comparator calls per candidate, instead of the merge sort's (log2 n)**2 / 2)."""
    for perm in _candidate_orders(flat):
        if _verified_order(flat, compare, perm.astype(np.int64, copy=False)):
            return perm.astype(np.int64, copy=False)
    return None


def python_clone(fn, **overrides):
    """A plain Python function with the body of ``fn`` (an njit dispatcher): the njit
    dispatchers it calls are rebound to Python clones too, and the global names in
    ``overrides`` to the functions given, in ``fn`` and in everything it calls (as
    ``gpu.device.device_fn`` does for the device)."""
    py = getattr(fn, "py_func", fn)
    globs = dict(py.__globals__)
    for name in py.__code__.co_names:
        if name in overrides:
            globs[name] = overrides[name]
        elif isinstance(globs.get(name), numba.core.registry.CPUDispatcher):
            globs[name] = python_clone(globs[name], **overrides)
    clone = types.FunctionType(py.__code__, globs, py.__name__, py.__defaults__, py.__closure__)
    clone.__doc__ = py.__doc__
    return clone


def _called_lt(keys, a, b, desc):
    """The comparison of ``stable_sort`` for a comparator computation: ``keys`` is
    ``(compare, row values of each operand)``; one comparator call, ``compare(x0[a],
    x0[b], x1[a], x1[b], ...)``."""
    compare, values = keys
    args = []
    for v in values:
        args.append(np.asarray(v[a]))
        args.append(np.asarray(v[b]))
    return bool(compare(*args))


@functools.cache
def _called_stable_sort():
    """libstdc++'s ``std::stable_sort`` (``stable_sort``'s own source) in plain Python,
    comparing through ``_called_lt``."""
    return python_clone(stable_sort, _lt=_called_lt)


def _python_sort(flat, compare) -> np.ndarray:
    """Row by row (row-major), libstdc++'s ``std::stable_sort`` (the source of
    ``stable_sort``, run as Python) with one comparator call per comparison: the calls
    the GPU's compiled-comparator sort makes too (``gpu/sort.py``), in the same order,
    so a comparator with effects (rng-get-and-update-state) sees the same sequence."""
    rows, n = flat[0].shape
    perm = np.empty((rows, n), dtype=np.int64)
    run = _called_stable_sort()
    buf = np.empty(max(n, 1), dtype=np.int64)
    for r in range(rows):
        p = np.arange(n, dtype=np.int64)
        run(p, n, (compare, [f[r] for f in flat]), False, buf)
        perm[r] = p
    return perm


def _sort_permutation(flat, to_apply, is_stable, ctx) -> np.ndarray:
    rows, n = flat[0].shape
    simple = simple_comparator(to_apply.computation)
    if simple is not None:
        k, direction, kind = simple
        keys, may_nan = _sort_keys(flat[k], kind)
        if keys is not None:
            nan_rows = np.nonzero(np.isnan(keys).any(axis=1))[0] if may_nan else np.zeros(0, np.int64)
            ordered = keys if direction == "LT" else _descending(np.where(np.isnan(keys), 0, keys)
                                                                  if may_nan else keys)
            perm = np.argsort(ordered, axis=1, kind="stable").astype(np.int64)
            if nan_rows.size:
                _replay_rows(np.ascontiguousarray(keys, dtype=np.float64), perm,
                             nan_rows.astype(np.int64), direction == "GT", bool(is_stable),
                             np.empty(n, dtype=np.int64),
                             np.empty(introsort_stack_size(n), dtype=np.int64))
            return perm
    if is_vectorizable(to_apply.computation, ctx.module):
        perm = _guessed_order(flat, to_apply)
        if perm is not None:
            return perm
        perm = _merge_sort_vectorized(flat, to_apply)
        if perm is not None:
            return perm
    return _python_sort(flat, to_apply)


@op("sort")
def sort(*operands, shape, dimensions, to_apply, is_stable=False, ctx):
    """Sort ``operands`` together along ``dimensions[0]`` (always stably; see above)."""
    if not operands:
        raise HloEvalError("sort needs at least one operand")
    (d,) = tuple(dimensions)
    moved = [np.moveaxis(x, d, -1) for x in operands]
    n = moved[0].shape[-1]
    rows = int(np.prod(moved[0].shape[:-1], dtype=np.int64))
    flat = [contiguous(m).reshape(rows, n) for m in moved]
    if flat[0].shape[0] == 0 or n <= 1:
        outs = [x.copy() for x in operands]
    else:
        perm = _sort_permutation(flat, to_apply, is_stable, ctx)
        outs = [contiguous(np.moveaxis(np.take_along_axis(f, perm, axis=1).reshape(m.shape), -1, d))
                for f, m in zip(flat, moved)]
    return tuple(outs) if isinstance(shape, TupleShape) else outs[0]


# --------------------------------------------------------------------------- topk

@op("topk")
def topk(x, *, shape, k, largest=True, is_stable=True):
    """(values, s32 indices) of the ``k`` largest/smallest along the last dim; ties by
    lower index; floats in TOTALORDER."""
    et = element_type_of(x)
    if x.ndim == 0:
        raise HloEvalError("topk needs an operand of rank >= 1")
    if et.is_float:
        keys = total_order_keys(x)
    elif et.is_pred:
        keys = x.astype(np.uint8)
    elif et.is_integer:
        keys = x.astype(int_compute_dtype(et))
    else:
        raise HloEvalError(f"topk is not defined on {et.name}")
    if largest:
        keys = _descending(keys)
    order = np.argsort(keys, axis=-1, kind="stable")[..., :k]
    values = contiguous(np.take_along_axis(x, order, axis=-1))
    return values, contiguous(order.astype(np.int32))
