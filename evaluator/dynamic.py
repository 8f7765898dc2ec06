"""Bounded dynamic shapes: runtime dimension sizes carried beside values.

A value of shape ``f32[<=8]`` is stored at its bound extent (8 elements); the
interpreter keeps its runtime size in a side table (``sizes``: ``None`` for a static
value, a tuple of ints for an array, a list of entries for a tuple value). Elements
past the runtime size are padding with unspecified contents. ``dynamic_step``
evaluates one instruction given its operands' entries and returns the result's
entry. The rules follow XLA's dynamic padder (``xla/service/dynamic_padder.cc``,
``dynamic_dimension_inference.cc``), measured on XLA:CPU (jaxlib 0.10.2):

* **valid-part ops** (``slice``, ``pad``, ``concatenate``, ``reverse``, ``sort``,
  ``dot``, ``reduce``, ``reduce-window``, ``dynamic-reshape``): the op is evaluated on
  the operands' valid parts only (``x[:n0, :n1, ...]``) and the result written at the
  origin of a bound-sized buffer; the result's runtime sizes are its valid extents.
  So a ``slice`` ``[s:l:k]`` of ``n`` valid elements has ``ceil((min(n, l) - s) / k)``
  (at least 0), ``pad`` has ``lo + n + (n - 1) * interior + hi``, ``concatenate``
  packs the valid parts one after the other (sum of the sizes), ``reverse`` and
  ``sort`` reverse/sort the valid elements, ``dot`` contracts over the valid
  indices only. Padding never reaches a valid element.
* **pass-through** (elementwise, ``compare``/``select``/``clamp``, ``convert``,
  same-width ``bitcast-convert``, ``map``, ``copy``, ``broadcast``, ``transpose``,
  ``dynamic-slice`` taking a whole
  dynamic dimension, ``dynamic-update-slice`` into a dynamic operand (starts clamped
  against the bound, as XLA:CPU does: writes into the padding are lost)).
* a ``dynamic-slice`` of part of a dynamic dimension is static (XLA drops the
  dynamism); it is evaluated only when the clamped window lies inside the valid
  part, else ``HloUnsupportedError`` (XLA would read padding).
* a result dimension that the instruction's shape declares static (no ``<=``) but
  that would have fewer valid elements than its extent raises
  ``HloUnsupportedError`` for the same reason.
* ``reshape``, ``gather``, ``scatter``: XLA's ``HandleReshape`` / ``HandleGather`` /
  ``HandleScatter`` (``evaluator/dynamic_indexing.py``: ``reshape_step``, ``gather_step``,
  ``scatter_step``): a reshape lays the valid elements out in row-major order in the
  result's runtime sizes; a gather carries dynamic index batch dimensions and whole dynamic operand
  dimensions; a scatter scatters only the valid index vectors.
* Control flow (``call``, ``fusion``, ``while``, ``conditional``) is handled by the
  interpreter, which passes sizes into called computations' parameters and reads
  them back from their roots.

Anything else given a value whose runtime size is below its bound raises
``HloUnsupportedError`` naming the op: no silent wrong results.

The rules are written once for both backends: the few array operations they need
(cutting the valid part, embedding a result in its bound, concatenating, repeating a
size-1 dimension, reading a size or an index to the host) come from an *arrays* object,
:data:`HOST_ARRAYS` (numpy) on the CPU backend and ``gpu/dynamic.py``'s device kernels
on the GPU backend (``Interpreter.arrays``). The sizes themselves are host-side ints
beside the values, as XLA keeps them.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from hloref.errors import HloEvalError, HloUnsupportedError
from hloref.op_properties import opcodes_with
from hloref.opcodes import ELEMENTWISE, FORWARDS
from hloref.shapes import ArrayShape, TupleShape

from .dynamic_indexing import (dynamic_reshape_step, gather_step, merge_sizes, normal_sizes,
                               reshape_step, scatter_step)
from .numeric import contiguous

__all__ = ["DYNAMIC_SOURCES", "CONTROL_OPCODES", "dynamic_step", "is_partial", "_is_partial",
           "valid_part", "embed", "trim", "HostArrays", "HOST_ARRAYS", "entry_sizes"]

#: Opcodes whose result carries its operands' runtime sizes dimension for dimension:
#: the elementwise ops and map (elementwise in XLA's ``IsElementwiseImpl``);
#: bitcast-convert only between types of one width (``dynamic_step``).
_SAME_SHAPE = ELEMENTWISE | {"map"}
#: Opcodes whose result is operand 0 itself, tuples included (copy, elementwise, is
#: handled with the elementwise ops, a tuple copy apart).
_FORWARD_OPCODES = FORWARDS - ELEMENTWISE
#: Opcodes ``dynamic_step`` handles even when no operand carries runtime sizes.
DYNAMIC_SOURCES = frozenset({"set-dimension-size", "dynamic-reshape"})
#: Opcodes that call computations with sizes (handled by the interpreter): the
#: sequential callers and fusion.
CONTROL_OPCODES = opcodes_with("sequential-callers") | {"fusion"}


def is_partial(sizes) -> bool:
    """Whether a side-table entry (sizes, or a list of entries for a tuple) is dynamic."""
    if sizes is None:
        return False
    if isinstance(sizes, list):
        return any(is_partial(s) for s in sizes)
    return True


_is_partial = is_partial


def valid_part(x: np.ndarray, sizes) -> np.ndarray:
    """The valid region ``x[:n0, :n1, ...]`` (a view); ``x`` itself when static."""
    if sizes is None:
        return x
    return x[tuple(slice(0, int(n)) for n in sizes)]


def embed(valid: np.ndarray, dims) -> np.ndarray:
    """``valid`` at the origin of a zero-filled array of the bound ``dims``."""
    dims = tuple(dims)
    if tuple(valid.shape) == dims:
        return contiguous(valid)
    out = np.zeros(dims, dtype=valid.dtype)
    out[tuple(slice(0, n) for n in valid.shape)] = valid
    return out


class HostArrays:
    """The array operations of the size rules, on host numpy arrays (the CPU backend).
    ``gpu/dynamic.py``'s ``DeviceArrays`` has the same methods on device arrays."""

    @staticmethod
    def valid_part(x, sizes):
        """The valid region ``x[:n0, :n1, ...]`` (``sizes`` None: ``x`` itself)."""
        return valid_part(x, sizes)

    @staticmethod
    def embed(valid, dims):
        """``valid`` at the origin of a zero-filled array of the bound ``dims``."""
        return embed(valid, dims)

    @staticmethod
    def concatenate(parts, axis):
        return np.concatenate(parts, axis=axis)

    @staticmethod
    def repeat_first(x, axis):
        """``x`` with its first element along ``axis`` repeated over the whole axis."""
        return np.repeat(np.take(x, [0], axis=axis), x.shape[axis], axis=axis)

    @staticmethod
    def zeros(dims, et):
        return np.zeros(tuple(dims), et.dtype)

    @staticmethod
    def reshape(x, dims):
        return contiguous(x).reshape(tuple(dims))

    @staticmethod
    def compact(x):
        return contiguous(x)

    @staticmethod
    def to_host(x):
        """A small value (a size, an index, a predicate) read to the host."""
        return np.asarray(x)

    @staticmethod
    def from_host(x):
        """A host value the rules made (``get-dimension-size``'s size) as a value."""
        return x


#: the CPU backend's arrays
HOST_ARRAYS = HostArrays()


def trim(value, sizes, arrays=HOST_ARRAYS):
    """A value cut to its runtime sizes (tuples leaf by leaf): what the entry returns."""
    if sizes is None:
        return value
    if isinstance(sizes, list):
        return tuple(trim(v, s, arrays) for v, s in zip(value, sizes))
    return arrays.compact(arrays.valid_part(value, sizes))


def _with_dims(shape, dims_per_leaf):
    if isinstance(shape, TupleShape):
        return TupleShape(tuple(s.with_dims(d) for s, d in zip(shape.elements, dims_per_leaf)))
    return shape.with_dims(dims_per_leaf[0])


def _elementwise_sizes(operands, sizes, rank, arrays=HOST_ARRAYS):
    """Runtime sizes of an elementwise result whose dynamic operands disagree, as XLA's
    dynamic dimension inference (``HandleElementwiseNary``) and padder
    (``RewriteDynamicBinaryOp``) give them, operand by operand and dimension by
    dimension: a size of 1 against a larger one is an implicit broadcast (the result
    takes the larger size, the size-1 operand's element repeated along the dimension);
    otherwise the result takes the smaller size (an implicit slice). Static operands do
    not take part. Returns the operands (broadcast where needed) and the sizes."""
    merged = None
    for x, s in zip(operands, sizes):
        if s is None or x.ndim != rank:
            continue
        if merged is None:
            merged = list(s)
            continue
        for d, (e, n) in enumerate(zip(merged, s)):
            if e != n:
                broadcast = (n == 1 and n < e) or (e == 1 and e < n)
                merged[d] = max(e, n) if broadcast else min(e, n)
    if merged is None:
        return operands, None
    out = []
    for x, s in zip(operands, sizes):
        if s is not None and x.ndim == rank:
            for d, (n, m) in enumerate(zip(s, merged)):
                if n == 1 and m > 1:
                    x = arrays.repeat_first(x, d)
        out.append(x)
    return out, tuple(merged)


def dynamic_step(instr, fn, kwargs, operands, sizes, *, backend="cpu", arrays=HOST_ARRAYS):
    """Evaluate ``instr`` where runtime dimension sizes are involved.

    ``sizes[i]`` is operand ``i``'s side-table entry: ``None`` (static), a tuple of
    runtime sizes (an array), or a list of entries (a tuple value). ``fn`` is the op
    of the backend (with ``kwargs``), ``arrays`` its array operations
    (:class:`HostArrays`). Returns ``(value, entry)`` for the result."""
    opcode = instr.opcode
    shape = instr.shape

    def unsupported(why, *, reads_padding=False):
        return HloUnsupportedError(opcode, backend, f"operand with a runtime dynamic size below "
                                   f"its bound: {why}", instruction=instr.name,
                                   reads_padding=reads_padding)

    def finish(valid, leaf_shape=shape):
        """Embed a valid-part result in its bound shape; its sizes are its extents."""
        out_sizes = tuple(valid.shape)
        for d, (n, bound) in enumerate(zip(out_sizes, leaf_shape.dims)):
            if n > bound:
                raise HloEvalError(f"{opcode}: runtime size {n} exceeds the bound {bound} of "
                                   f"result dimension {d}", instruction=instr.name)
            if n < bound and not leaf_shape.dynamic[d]:
                raise unsupported(f"result dimension {d} is static ({bound}) in the "
                                  f"instruction's shape but only {n} of its elements are "
                                  f"defined (XLA reads padding there)", reads_padding=True)
        return arrays.embed(valid, leaf_shape.dims), normal_sizes(out_sizes, leaf_shape.dims)

    if opcode == "set-dimension-size":
        operand, size = operands[0], operands[1]
        (d,) = tuple(kwargs["dimensions"])
        n = int(arrays.to_host(size))
        bound = operand.shape[d]
        if not 0 <= n <= bound:
            raise HloEvalError(f"set-dimension-size: size {n} outside [0, {bound}] for "
                               f"dimension {d}", instruction=instr.name)
        if is_partial(sizes[1]):
            raise unsupported("the size operand")
        base = list(sizes[0] or operand.shape)
        base[d] = n
        return fn(*operands, **kwargs), normal_sizes(base, operand.shape)
    if opcode == "get-dimension-size":
        (d,) = tuple(kwargs["dimensions"])
        s = sizes[0]
        size = np.array(s[d] if s else operands[0].shape[d], dtype=np.int32)
        return arrays.from_host(size), None
    if opcode == "tuple":
        return fn(*operands, **kwargs), list(sizes)
    if opcode == "get-tuple-element":
        entry = sizes[0][kwargs["index"]] if isinstance(sizes[0], list) else None
        return fn(*operands, **kwargs), entry
    if opcode in _FORWARD_OPCODES or (opcode == "copy" and isinstance(sizes[0], list)):
        return fn(*operands, **kwargs), sizes[0]
    if any(isinstance(s, list) and is_partial(s) for s in sizes):
        raise unsupported("a tuple holding a dynamic value")
    if opcode == "dynamic-reshape":
        return dynamic_reshape_step(instr, operands, sizes, arrays)
    if opcode in _SAME_SHAPE and (opcode != "bitcast-convert"
                                  or operands[0].ndim == len(shape.dims)):
        operands, merged = _elementwise_sizes(operands, sizes, len(shape.dims), arrays)
        return fn(*operands, **kwargs), normal_sizes(merged, shape.dims)
    if opcode == "broadcast":
        out = list(shape.dims)
        for k, d in enumerate(tuple(kwargs.get("dimensions", ()))):
            out[d] = sizes[0][k]
        return fn(*operands, **kwargs), normal_sizes(out, shape.dims)
    if opcode == "transpose":
        perm = tuple(kwargs["dimensions"])
        return fn(*operands, **kwargs), normal_sizes([sizes[0][p] for p in perm], shape.dims)
    if opcode == "reshape":
        return reshape_step(instr, kwargs, operands, sizes, finish, unsupported, arrays)
    if opcode == "gather":
        return gather_step(instr, fn, kwargs, operands, sizes, unsupported, arrays)
    if opcode == "scatter":
        return scatter_step(instr, fn, kwargs, operands, sizes, unsupported, arrays)
    if opcode == "reverse":
        return finish(fn(arrays.valid_part(operands[0], sizes[0]), **kwargs))
    if opcode == "slice":
        # each [s:l:k] cut to the valid extent n: ceil((min(n, l) - s) / k) elements, at
        # least 0 (python's slicing of the valid part)
        x = arrays.valid_part(operands[0], sizes[0])
        cut = [dataclasses.replace(d, start=min(d.start, n), limit=max(min(d.limit, n),
                                                                       min(d.start, n)))
               for d, n in zip(kwargs["slice"], x.shape)]
        out = [-(-(d.limit - d.start) // d.stride) for d in cut]
        return finish(fn(x, **{**kwargs, "slice": cut, "shape": shape.with_dims(out)}))
    if opcode == "pad":
        if is_partial(sizes[1]):
            raise unsupported("the padding value")
        x = arrays.valid_part(operands[0], sizes[0])
        out = [max(p.low + p.high + n + max(n - 1, 0) * p.interior, 0)
               for n, p in zip(x.shape, kwargs["padding"])]
        return finish(fn(x, operands[1], **{**kwargs, "shape": shape.with_dims(out)}))
    if opcode == "concatenate":
        (axis,) = tuple(kwargs["dimensions"])
        rank = len(shape.dims)
        other = merge_sizes(opcode, instr, [None if s is None else
                                            tuple(v for k, v in enumerate(s) if k != axis)
                                            for s in sizes])
        parts = []
        for x, s in zip(operands, sizes):
            cut = list(s or x.shape)
            if other is not None:
                for k, v in zip([k for k in range(rank) if k != axis], other):
                    cut[k] = v
            parts.append(arrays.valid_part(x, cut))
        return finish(arrays.concatenate(parts, axis))
    if opcode == "sort":
        merged = merge_sizes(opcode, instr, sizes)
        cut = [arrays.valid_part(x, merged) for x in operands]
        dims = tuple(cut[0].shape)
        leaves = shape.elements if isinstance(shape, TupleShape) else (shape,)
        value = fn(*cut, **{**kwargs, "shape": _with_dims(shape, [dims] * len(leaves))})
        if isinstance(shape, TupleShape):
            done = [finish(v, leaf) for v, leaf in zip(value, leaves)]
            return tuple(v for v, _ in done), [e for _, e in done]
        return finish(value)
    if opcode == "dot":
        return _dot(instr, fn, kwargs, operands, sizes, finish, unsupported, arrays)
    if opcode == "reduce":
        return _reduce(instr, fn, kwargs, operands, sizes, unsupported, arrays)
    if opcode == "reduce-window":
        return _reduce_window(instr, fn, kwargs, operands, sizes, finish, unsupported, arrays)
    if opcode == "dynamic-slice":
        return _dynamic_slice(instr, fn, kwargs, operands, sizes, unsupported, arrays)
    if opcode == "dynamic-update-slice":
        if any(is_partial(s) for s in sizes[1:]):
            raise unsupported("the update of a dynamic-update-slice (XLA:CPU fails to compile "
                              "a dynamic update; its padding would be written)")
        return fn(*operands, **kwargs), sizes[0]
    raise unsupported("hloref propagates runtime sizes through elementwise ops, broadcast, "
                      "reshape, transpose, slice, pad, concatenate, reverse, sort, dot, "
                      "reduce, reduce-window, dynamic-slice, dynamic-update-slice, gather, "
                      "scatter, tuples and control flow")


def _dot(instr, fn, kwargs, operands, sizes, finish, unsupported, arrays):
    lhs, rhs = operands
    ls = list(sizes[0] or lhs.shape)
    rs = list(sizes[1] or rhs.shape)
    lb, rb = tuple(kwargs.get("lhs_batch_dims", ())), tuple(kwargs.get("rhs_batch_dims", ()))
    lc = tuple(kwargs.get("lhs_contracting_dims", ()))
    rc = tuple(kwargs.get("rhs_contracting_dims", ()))
    if kwargs.get("sparsity") is not None:
        raise unsupported("sparse dot")
    for a, b in list(zip(lb, rb)) + list(zip(lc, rc)):
        la, rb_ = lhs.shape[a], rhs.shape[b]
        na = ls[a] if ls[a] != la else None
        nb = rs[b] if rs[b] != rb_ else None
        if na is not None and nb is not None and na != nb:
            raise HloEvalError(f"dot: paired dimensions have different runtime sizes {na} and "
                               f"{nb}", instruction=instr.name)
        n = na if na is not None else nb
        if n is not None:
            ls[a] = rs[b] = n
    x, y = arrays.valid_part(lhs, ls), arrays.valid_part(rhs, rs)
    lf = [d for d in range(lhs.ndim) if d not in lb and d not in lc]
    rf = [d for d in range(rhs.ndim) if d not in rb and d not in rc]
    out = [ls[d] for d in lb] + [ls[d] for d in lf] + [rs[d] for d in rf]
    return finish(fn(x, y, **{**kwargs, "shape": instr.shape.with_dims(out)}))


def _reduce(instr, fn, kwargs, operands, sizes, unsupported, arrays):
    shape = instr.shape
    n = len(operands) // 2
    if any(is_partial(s) for s in sizes[n:]):
        raise unsupported("an init value")
    merged = merge_sizes("reduce", instr, sizes[:n])
    dims = tuple(kwargs["dimensions"])
    inputs = [arrays.compact(arrays.valid_part(x, [merged[k] if k in dims else x.shape[k]
                                                   for k in range(len(merged))]))
              for x in operands[:n]]
    value = fn(*inputs, *operands[n:], **kwargs)
    kept = [merged[k] for k in range(len(merged)) if k not in dims]
    leaves = shape.elements if isinstance(shape, TupleShape) else (shape,)
    entries = [normal_sizes(kept, leaf.dims) for leaf in leaves]
    return value, (entries if isinstance(shape, TupleShape) else entries[0])


def _reduce_window(instr, fn, kwargs, operands, sizes, finish, unsupported, arrays):
    """Valid-part evaluation where each dynamic dimension has an unpadded, undilated
    base (XLA's output size ``(n - dilated window) // stride + 1``, PADDING_VALID)."""
    from .windows import window_dims
    shape = instr.shape
    n = len(operands) // 2
    if any(is_partial(s) for s in sizes[n:]):
        raise unsupported("an init value")
    merged = merge_sizes("reduce-window", instr, sizes[:n])
    wdims = window_dims(kwargs.get("window"), operands[0].ndim)
    out = []
    for d, (m, bound, w) in enumerate(zip(merged, operands[0].shape, wdims)):
        if m != bound and (w.padding_low or w.padding_high or w.base_dilation != 1):
            raise unsupported(f"reduce-window with padding or base dilation on dynamic "
                              f"dimension {d} (XLA:CPU crashes on it; not evaluated)")
        if m == bound:
            out.append(shape.elements[0].dims[d] if isinstance(shape, TupleShape)
                       else shape.dims[d])
        else:
            span = (w.size - 1) * w.window_dilation + 1
            out.append(max((m - span) // w.stride + 1, 0) if m >= span else 0)
    cut = [arrays.valid_part(x, merged) for x in operands[:n]]
    leaves = shape.elements if isinstance(shape, TupleShape) else (shape,)
    if any(v == 0 for v in out):  # no window fits: an empty result
        values = [arrays.zeros(out, leaf.element_type) for leaf in leaves]
    else:
        value = fn(*cut, *operands[n:], **{**kwargs, "shape": _with_dims(shape, [out] * len(leaves))})
        values = list(value) if isinstance(shape, TupleShape) else [value]
    done = [finish(v, leaf) for v, leaf in zip(values, leaves)]
    if isinstance(shape, TupleShape):
        return tuple(v for v, _ in done), [e for _, e in done]
    return done[0]


def _dynamic_slice(instr, fn, kwargs, operands, sizes, unsupported, arrays):
    from .indexing import scalar_index
    x = operands[0]
    if any(is_partial(s) for s in sizes[1:]):
        raise unsupported("a start index")
    s = sizes[0]
    slice_sizes = tuple(kwargs["dynamic_slice_sizes"])
    out = list(slice_sizes)
    for d, (n, bound, size) in enumerate(zip(s, x.shape, slice_sizes)):
        if n == bound:
            continue
        if size == bound:  # the whole dimension: starts clamp to 0, the size carries over
            out[d] = n
            continue
        start = min(max(scalar_index(arrays.to_host(operands[1 + d])), 0), bound - size)
        if start + size > n:
            raise unsupported(f"dynamic-slice window [{start}, {start + size}) of dimension "
                              f"{d} reaches past its runtime size {n} (XLA reads padding)",
                              reads_padding=True)
    value = fn(*operands, **kwargs)
    return value, normal_sizes(out, instr.shape.dims)


def entry_sizes(value, shape):
    """For an entry argument of a shape with bounded dynamic dimensions: the array
    padded to the bound and its runtime sizes (``None`` when it has the full extent).
    An argument shorter than the bound in a dynamic dimension gives that size."""
    if not isinstance(shape, ArrayShape) or not any(shape.dynamic) \
            or not isinstance(value, np.ndarray) or value.ndim != len(shape.dims):
        return value, None
    dims = tuple(shape.dims)
    if tuple(value.shape) == dims:
        return value, None
    for d, (n, bound) in enumerate(zip(value.shape, dims)):
        if n != bound and (not shape.dynamic[d] or n > bound or bound < 0):
            return value, None  # not a runtime size: the caller's check reports it
    return embed(value, dims), tuple(int(n) for n in value.shape)
