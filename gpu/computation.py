"""Scalar HLO computations (reducers, combiners, ``map`` bodies) compiled to numba.cuda
device functions, so ops that call a computation run it on the device.

A computation qualifies when the CPU backend evaluates it elementwise
(``reduce.is_vectorizable``: scalars only, elementwise ops, compare, select, clamp,
convert, constants, tuples) and every op has a GPU element function of its types
(``elementwise.ELEMENT_TABLES``, ``compare.DIRECTIONS``, ``convert.convert_fn``; not
complex, not the width-specialised shifts/popcnt/clz/mulhi). Its device function takes
and returns *storage* values (the array elements themselves) and computes each
instruction as the elementwise kernels do: ``store(fn(load(a), load(b)))`` with the
operand and result types' load/store, so each step rounds or wraps to its type exactly
as the CPU's vectorised interpretation of the computation does.

The function's Python source is generated from the instructions (one line each, in
dependency order) and compiled with ``cuda.jit(device=True)``; compiled functions are
cached per computation. :func:`compile_computation` returns None when the computation
does not qualify (the caller then falls back to the CPU).
"""

from __future__ import annotations

import numpy as np
from numba import cuda

from hloref.evaluator.reduce import is_vectorizable
from hloref.shapes import ArrayShape, TupleShape

from .compare import DIRECTIONS, clamp_fn
from .convert import convert_fn
from .device import LOAD, STORE, storage_dtype, type_class, type_params
from .elementwise import ELEMENT_TABLES, element_fn
from .registry import GpuFallback

__all__ = ["Compiled", "compile_computation"]


class _Unsupported(Exception):
    pass


class Compiled:
    """A device function ``fn(*parameter storage values) -> result storage value(s)``;
    ``results``: the element types of its results (one per tuple element)."""

    def __init__(self, fn, params, results, tuple_result: bool, source: str):
        self.fn = fn
        self.params = params
        self.results = results
        self.tuple_result = tuple_result
        self.source = source


_CACHE: dict = {}


def compile_computation(comp, module) -> Compiled | None:
    """``comp`` as a device function, or None when it does not qualify (see above)."""
    hit = _CACHE.get(id(comp))
    if hit is not None and hit[0] is comp:
        return hit[1]
    compiled = None
    if is_vectorizable(comp, module):
        try:
            compiled = _compile(comp)
        except (_Unsupported, GpuFallback):
            compiled = None
    _CACHE[id(comp)] = (comp, compiled)
    return compiled


def _scalar_type(shape):
    if not isinstance(shape, ArrayShape) or shape.rank != 0:
        raise _Unsupported("not a scalar")
    et = shape.element_type
    if type_class(et) not in ("sint", "uint", "pred", "f32", "f64", "narrow"):
        raise _Unsupported(f"{et.name}")
    return et


def _order(comp):
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


def _storage_constant(literal, et):
    arr = np.asarray(literal)
    if arr.size != 1:
        raise _Unsupported("non-scalar constant")
    return arr.reshape(-1).astype(et.dtype).view(storage_dtype(et))[0]


def _compile(comp) -> Compiled:
    ns: dict = {}
    names: dict[int, str] = {}
    types: dict[int, object] = {}
    lines: list[str] = []
    params = sorted(comp.parameters, key=lambda p: p.parameter_number)
    for p in params:
        names[id(p)] = f"v{p.parameter_number}"
        types[id(p)] = _scalar_type(p.shape)

    def bind(prefix, value):
        key = f"{prefix}{len(ns)}"
        ns[key] = value
        return key

    def load(instr, cls=None):
        et = types[id(instr)]
        cls = cls or type_class(et)
        return f"{bind('L', LOAD[cls])}({names[id(instr)]}, {bind('P', type_params(et))})"

    for k, instr in enumerate(_order(comp)):
        op = instr.opcode
        if op == "parameter":
            continue
        name = f"t{k}"
        names[id(instr)] = name
        if op == "tuple":
            if instr is not comp.root:
                raise _Unsupported("tuple below the root")
            continue
        et = _scalar_type(instr.shape)
        types[id(instr)] = et
        store = f"{bind('S', STORE[type_class(et)])}"
        pout = bind("P", type_params(et))
        args = instr.operands
        if op == "constant":
            expr = bind("C", _storage_constant(instr.literal, et))
        elif op in ("copy", "opt-barrier"):
            expr = names[id(args[0])]
        elif op == "get-tuple-element":
            raise _Unsupported("get-tuple-element")
        elif op == "select":
            p, a, b = (names[id(o)] for o in args)
            expr = f"({a} if {p} != 0 else {b})"
        elif op == "compare":
            src = types[id(args[0])]
            direction = str(instr.attrs.get("direction"))
            if direction not in DIRECTIONS:
                raise _Unsupported(direction)
            cls = type_class(src)
            if cls in ("f32", "f64", "narrow") and str(instr.attrs.get("type", "")) == "TOTALORDER":
                cls = "key_" + cls
            fn = bind("F", DIRECTIONS[direction])
            expr = f"{store}({fn}({load(args[0], cls)}, {load(args[1], cls)}), {pout})"
        elif op == "clamp":
            fn = bind("F", clamp_fn(types[id(args[1])]))
            expr = f"{store}({fn}({', '.join(load(o) for o in args)}), {pout})"
        elif op == "convert":
            fn, cin, cout = convert_fn(types[id(args[0])], et)
            f = bind("F", fn)
            s_out = bind("S", STORE[cout])
            expr = f"{s_out}({f}({load(args[0], cin)}), {pout})"
        elif op in ELEMENT_TABLES:
            f = bind("F", element_fn(op, types[id(args[0])]))
            expr = f"{store}({f}({', '.join(load(o) for o in args)}), {pout})"
        else:
            raise _Unsupported(op)
        lines.append(f"    {name} = {expr}")
    root = comp.root
    if root.opcode == "tuple":
        results = [types[id(o)] for o in root.operands]
        ret = "(" + ", ".join(names[id(o)] for o in root.operands) + ",)"
        tuple_result = True
    else:
        results = [types[id(root)]]
        ret = names[id(root)]
        tuple_result = False
    header = "def f(" + ", ".join(f"v{p.parameter_number}" for p in params) + "):"
    source = "\n".join([header] + lines + [f"    return {ret}"]) + "\n"
    exec(compile(source, f"<hlo computation {comp.name}>", "exec"), ns)
    fn = cuda.jit(device=True)(ns["f"])
    return Compiled(fn, [types[id(p)] for p in params], results, tuple_result, source)


def result_shapes(shape):
    return list(shape.elements) if isinstance(shape, TupleShape) else [shape]
