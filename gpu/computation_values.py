"""The values of a scalar computation compiled to a device function (``gpu/computation.py``):
their types at compile time, and the helpers that take them apart and put them together.

A value is a local name of the generated code holding a *storage* value (an array
element itself; a complex element is a complex scalar), of an element type; a list of
values for an HLO tuple; a tuple of storage values for a small array (``VecType``, 2 to
``VEC_MAX`` elements, row-major); ``(storage value, sizes)`` for a one-element array
with runtime dimension sizes (``SizedType``); ``TOKEN`` for a token. What has no device
form raises :class:`Unsupported` (the computation is then called through the GPU
interpreter, ``gpu/calls.py``).
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from hloref.shapes import ArrayShape, TupleShape
from hloref.types import element_type

from .device import storage_dtype, type_class

__all__ = ["Unsupported", "TOKEN", "VEC_MAX", "VecType", "vec_shape", "holds_vec", "SizedType",
           "holds_sized", "CLASSES", "scalar_type", "value_type", "any_type", "cpu_order",
           "root_order", "storage_constant", "store_c64", "store_c128", "complex_nonzero",
           "part_type", "tuple_leaves", "flatten", "rebuild", "result_shapes"]


class Unsupported(Exception):
    """The computation (or this instruction of it) has no device form."""


class _Token:
    """The type of a token value in a computation (``after-all``): passed along by
    tuples, dropped by ``add-dependency``; nothing computes on it."""

    name = "token"

    def __repr__(self):
        return "token"


TOKEN = _Token()

#: the most elements of a small array value (``VecType``): rng-bit-generator's state
VEC_MAX = 4


class VecType:
    """The type of a small array value of 2 to ``VEC_MAX`` elements (an rng-bit-generator
    state, ``u64[2]`` or ``u64[3]``): its value is a Python tuple of storage values in
    row-major order (an HLO tuple is a list). Only the forms registered with
    ``small_arrays`` (``gpu/computation_emitter.py``) and the elementwise ops take one."""

    def __init__(self, et, n: int):
        self.et, self.n = et, int(n)
        self.name = f"{et.name}[{n}]"

    def __eq__(self, other):
        return isinstance(other, VecType) and (self.et, self.n) == (other.et, other.n)

    def __hash__(self):
        return hash((self.et.name, self.n))

    def __repr__(self):
        return self.name


def vec_shape(shape):
    """``VecType`` of an array shape of 2 to ``VEC_MAX`` elements, else None."""
    if not isinstance(shape, ArrayShape) or not 2 <= shape.size <= VEC_MAX:
        return None
    if type_class(shape.element_type) not in CLASSES or any(shape.dynamic):
        return None
    return VecType(shape.element_type, shape.size)


def holds_vec(t) -> bool:
    if isinstance(t, list):
        return any(holds_vec(x) for x in t)
    return isinstance(t, VecType)


class SizedType:
    """The type of a one-element array with runtime dimension sizes (the CPU's side
    table, ``evaluator/dynamic.py``): its value is ``(storage value, sizes)``, one size
    per dimension (an int, or the name of an int64 local), each 0 or 1 when no error was
    recorded; the storage value is the element, valid or padding."""

    def __init__(self, et, dims):
        self.et, self.dims = et, tuple(int(d) for d in dims)
        self.name = f"{et.name}[{','.join(f'<={d}' for d in self.dims)}]"

    def __eq__(self, other):
        return isinstance(other, SizedType) and (self.et, self.dims) == (other.et, other.dims)

    def __hash__(self):
        return hash((self.et.name, self.dims))

    def __repr__(self):
        return self.name


def holds_sized(t) -> bool:
    if isinstance(t, list):
        return any(holds_sized(x) for x in t)
    return isinstance(t, SizedType)


CLASSES = ("sint", "uint", "pred", "f32", "f64", "narrow", "complex")


def scalar_type(shape, *, rank0=True):
    """The element type of a scalar (``rank0=False``: of any one-element array, which
    holds one storage value just the same)."""
    if not isinstance(shape, ArrayShape) or (shape.rank != 0 if rank0 else shape.size != 1):
        raise Unsupported("not a scalar")
    et = shape.element_type
    if type_class(et) not in CLASSES:
        raise Unsupported(f"{et.name}")
    return et


def value_type(shape, *, rank0=True):
    """An element type, or a list of them for a tuple of scalars."""
    if isinstance(shape, TupleShape):
        return [value_type(s, rank0=rank0) for s in shape.elements]
    return scalar_type(shape, rank0=rank0)


def any_type(shape):
    """The type of a value inside a computation: an element type (one element), a
    ``VecType`` (2 to ``VEC_MAX`` elements), or a list of them for a tuple."""
    if isinstance(shape, TupleShape):
        return [any_type(s) for s in shape.elements]
    vec = vec_shape(shape)
    return vec if vec is not None else scalar_type(shape, rank0=False)


def cpu_order(module, comp):
    """``comp``'s instructions as the CPU's interpreter plans them (``Interpreter._plan``):
    the live ones (what the root and the side effects need, a tuple's unread elements
    not: ``forward_tuples``) in ``topological_order``, each with the instruction whose
    value it forwards (``forwarded``: a get-tuple-element of a tuple), else None."""
    from hloref.evaluator.interpreter import forwarded, live_instructions, topological_order
    live = live_instructions(module, comp, forward_tuples=True)
    return [(i, forwarded(i)) for i in topological_order(comp) if id(i) in live]


def root_order(comp):
    """The instructions reachable from the root, operands first."""
    seen, out = set(), []

    def visit(instr):
        if id(instr) in seen:
            return
        seen.add(id(instr))
        for o in instr.operands:
            visit(o)
        out.append(instr)

    visit(comp.root)
    return out


def storage_constant(literal, et):
    arr = np.asarray(literal)
    if arr.size != 1:
        raise Unsupported("non-scalar constant")
    return arr.reshape(-1).astype(et.dtype).view(storage_dtype(et))[0]


@cuda.jit(device=True)
def store_c64(re, im):
    return np.complex64(complex(np.float32(re), np.float32(im)))


@cuda.jit(device=True)
def store_c128(re, im):
    return np.complex128(complex(np.float64(re), np.float64(im)))


@cuda.jit(device=True)
def complex_nonzero(re, im):
    return np.int64(1) if (re != 0 or im != 0) else np.int64(0)


def part_type(et):
    return element_type("f32" if et.name == "c64" else "f64")


def tuple_leaves(value):
    """A value (or type) as a flat list: a tuple's elements, else the one value."""
    if isinstance(value, list):
        if any(isinstance(v, list) for v in value):
            raise Unsupported("nested tuple")
        return list(value)
    return [value]


def flatten(value, vtype):
    """``(storage values, element types)`` of a value: a tuple's elements in order (nested
    tuples too), a small array's elements row-major, else the one value."""
    if isinstance(vtype, list):
        names, types = [], []
        for v, t in zip(value, vtype):
            n, ts = flatten(v, t)
            names += n
            types += ts
        return names, types
    if isinstance(vtype, VecType):
        return list(value), [vtype.et] * vtype.n
    return [value], [vtype]


def rebuild(names, vtype):
    """The value of type ``vtype`` whose ``flatten`` storage values are ``names``."""
    names = list(names)

    def take(t):
        if isinstance(t, list):
            return [take(x) for x in t]
        if isinstance(t, VecType):
            out = tuple(names[:t.n])
            del names[:t.n]
            return out
        return names.pop(0)

    return take(vtype)


def result_shapes(shape):
    return list(shape.elements) if isinstance(shape, TupleShape) else [shape]
