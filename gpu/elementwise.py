"""Elementwise unary and binary ops on the GPU (mirrors ``evaluator/elementwise.py``).

(Over 600 lines on purpose: the device element functions of every elementwise op and
type class, the table the reducers, comparators and map bodies compile from.)

Same element-type rules as the CPU: integers compute in int64/uint64 and wrap to
their width on store; f32 and narrow floats do arithmetic in f32 (narrow values
decoded exactly, the result encoded once with ``narrow.encode_scalar``); f64 in f64;
transcendentals of f32 and narrower compute in f64 and round once. Complex add,
subtract, multiply, divide, power, negate, abs, sign, real, imag, complex and the
transcendentals run in ``complex_elementwise.py``. The integer
element functions are the CPU's own scalar functions (``kernels.sdiv``/``srem``/
``udiv``/``urem``/``ipow``/``clz``/``popcnt``/``mulhi_*``) compiled for numba.cuda by
``device.device_fn``.

Transcendentals: on a GPU they are libdevice's (``math.*``) f64 functions, which may
differ from the host libm by an ulp of f64 (after rounding to f32 and narrower the
result is nearly always the same); under the simulator they are numpy's, i.e. the
CPU backend's. Ops undefined on a type (pred subtract) raise the CPU's error.

:func:`element_fn` / :func:`width_fn` give the device element function of an op on a
type, for the computation compiler (``gpu/computation.py``).

Kernels: one generic grid-stride kernel per arity, specialised (and cached) per
(element function, operand type classes, result type class). A scalar operand (size
1) broadcasts, as ``clamp``/``select`` allow.
"""

from __future__ import annotations

import functools

import math

import numpy as np
from numba import cuda

from hloref.errors import HloEvalError
from hloref.evaluator import kernels

from . import complex_elementwise, config
from .device import (LOAD, SIMULATOR, STORE, DArray, ceil64, device_fn, empty, floor64, rint64,
                     signbit, trunc64, type_class, type_params)
from .registry import GpuFallback, gpu_op


# ---------------------------------------------------------------- launching


def launch(kernel, n: int, *args) -> None:
    """Run a grid-stride ``kernel`` over ``n`` items with the configured geometry."""
    if n <= 0:
        return
    blocks, tpb = config.geometry(n)
    kernel[blocks, tpb](*args)


@cuda.jit
def _zero(out, n):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < n:
        out[i] = 0
        i += step


def zeros(shape, et) -> DArray:
    """A device array of ``shape`` and ``et`` with every storage bit zero (+0, false, 0
    for every element type): collectives' non-root results, padding past valid extents."""
    out = empty(shape, et)
    launch(_zero, out.size, out.data, out.size)
    return out


@functools.cache  # one compiled kernel per combination
def _kernel(fn, in_classes: tuple, out_class: str):
    """The cached elementwise kernel ``out[i] = store(fn(load(x0[i]), ...))``."""
    store = STORE[out_class]
    loads = [LOAD[c] for c in in_classes]
    if len(loads) == 1:
        (l0,) = loads

        @cuda.jit
        def k(out, n, sp, x0, n0, p0):
            i = cuda.grid(1)
            step = cuda.gridsize(1)
            while i < n:
                out[i] = store(fn(l0(x0[i if n0 > 1 else 0], p0)), sp)
                i += step
    elif len(loads) == 2:
        l0, l1 = loads

        @cuda.jit
        def k(out, n, sp, x0, n0, p0, x1, n1, p1):
            i = cuda.grid(1)
            step = cuda.gridsize(1)
            while i < n:
                out[i] = store(fn(l0(x0[i if n0 > 1 else 0], p0),
                                  l1(x1[i if n1 > 1 else 0], p1)), sp)
                i += step
    else:
        l0, l1, l2 = loads

        @cuda.jit
        def k(out, n, sp, x0, n0, p0, x1, n1, p1, x2, n2, p2):
            i = cuda.grid(1)
            step = cuda.gridsize(1)
            while i < n:
                out[i] = store(fn(l0(x0[i if n0 > 1 else 0], p0),
                                  l1(x1[i if n1 > 1 else 0], p1),
                                  l2(x2[i if n2 > 1 else 0], p2)), sp)
                i += step
    return k


def apply(fn, operands, out_et, out_shape=None, in_classes=None, out_class=None) -> DArray:
    """Run element function ``fn`` over device operands into a new array of ``out_et``."""
    if out_shape is None:
        out_shape = max((o.shape for o in operands), key=len)
    classes = tuple(in_classes or (type_class(o.et) for o in operands))
    out_class = out_class or type_class(out_et)
    if out_class not in STORE or any(c not in LOAD for c in classes):
        raise GpuFallback(f"no GPU kernel for element type "
                          f"{', '.join(sorted({o.et.name for o in operands} | {out_et.name}))}")
    out = empty(out_shape, out_et)
    n = out.size
    args = [out.data, n, type_params(out_et)]
    for o in operands:
        args += [o.data, o.size, type_params(o.et)]
    launch(_kernel(fn, classes, out_class), n, *args)
    return out


def element_kind(et) -> str:
    c = type_class(et)
    if c in ("f32", "f64", "narrow"):
        return "float"
    return c  # sint, uint, pred, complex, other


def _pick(table: dict, et, opname: str):
    kind = element_kind(et)
    fn = table.get(kind)
    if fn is None and kind in ("sint", "uint"):
        fn = table.get("int")
    if fn is None:
        raise GpuFallback(f"{opname} on {et.name} has no GPU kernel")
    return fn


#: opcode -> its element-function table (kind -> device function), for the computation
#: compiler (``gpu/computation.py``)
ELEMENT_TABLES: dict[str, dict] = {}


def element_fn(opname: str, et):
    """The device element function of elementwise ``opname`` on operands of ``et``
    (``GpuFallback`` when there is none)."""
    table = ELEMENT_TABLES.get(opname)
    if table is None:
        raise GpuFallback(f"{opname} has no GPU element function")
    return _pick(table, et, opname)


def _elementwise(opname: str, table: dict, *, note="", undefined=()):
    """Register ``opname`` as ``table[kind](*operand values)`` over the result type
    (complex operands: ``complex_elementwise``'s kernels where it has one). ``undefined``:
    operand kinds on which the op is an error (on the CPU backend and in XLA), raised as
    ``HloEvalError``, not a fallback."""

    def evaluate(*xs, shape):
        if element_kind(xs[0].et) in undefined:
            raise HloEvalError(f"{opname} is not defined on {xs[0].et.name} values")
        if element_kind(xs[0].et) == "complex":
            return _complex_op(opname, xs, shape)
        fn = _pick(table, xs[0].et, opname)
        return apply(fn, xs, shape.element_type)

    evaluate.__name__ = opname.replace("-", "_")
    gpu_op(opname, note=note)(evaluate)
    ELEMENT_TABLES[opname] = table
    return evaluate


def _complex_op(opname, xs, shape):
    et = shape.element_type
    if opname in complex_elementwise.BINARY:
        out_shape = max((o.shape for o in xs), key=len)
        return complex_elementwise.binary(opname, xs[0], xs[1], out_shape, et)
    if opname in complex_elementwise.UNARY or opname in complex_elementwise.TO_REAL:
        return complex_elementwise.unary(opname, xs[0], et)
    if opname in ("erf", "remainder"):
        raise HloEvalError(f"{opname} is not defined on complex values")
    raise GpuFallback(f"{opname} on {xs[0].et.name} has no GPU kernel")


def dfn(fn):
    return cuda.jit(device=True)(fn)


# ---------------------------------------------------------------- the CPU's integer functions

sdiv = device_fn(kernels.sdiv)
srem = device_fn(kernels.srem)
udiv = device_fn(kernels.udiv)
urem = device_fn(kernels.urem)
ipow = device_fn(kernels.ipow)
clz = device_fn(kernels.clz)
popcnt_ = device_fn(kernels.popcnt)
mulhi_s64 = device_fn(kernels.mulhi_s64)
mulhi_u64 = device_fn(kernels.mulhi_u64)

# ---------------------------------------------------------------- f64 functions per target

if SIMULATOR:  # numpy's functions: the CPU backend's, and no Python domain errors
    _exp, _expm1, _log, _log1p, _sqrt = np.exp, np.expm1, np.log, np.log1p, np.sqrt
    _sin, _cos, _tan, _tanh, _sinh, _cosh = np.sin, np.cos, np.tan, np.tanh, np.sinh, np.cosh
    _asin, _acos, _atan, _asinh, _acosh, _atanh = (np.arcsin, np.arccos, np.arctan, np.arcsinh,
                                                   np.arccosh, np.arctanh)
    _pow, _atan2, _cbrt, _fmod = np.power, np.arctan2, np.cbrt, np.fmod
    _erf = math.erf
else:  # pragma: no cover - needs a GPU
    _exp, _expm1, _log, _log1p, _sqrt = math.exp, math.expm1, math.log, math.log1p, math.sqrt
    _sin, _cos, _tan, _tanh, _sinh, _cosh = math.sin, math.cos, math.tan, math.tanh, math.sinh, math.cosh
    _asin, _acos, _atan, _asinh, _acosh, _atanh = (math.asin, math.acos, math.atan, math.asinh,
                                                   math.acosh, math.atanh)
    _pow, _atan2, _fmod, _erf = math.pow, math.atan2, math.fmod, math.erf
    _cbrt = cuda.cbrt


def _f64_unary(f):
    def g(x):
        return f(np.float64(x))
    return dfn(g)


_TRANSCENDENTAL = {
    "exponential": _exp, "exponential-minus-one": _expm1, "log": _log, "log-plus-one": _log1p,
    "sqrt": _sqrt, "cbrt": _cbrt, "sine": _sin, "cosine": _cos, "tan": _tan, "tanh": _tanh,
    "sinh": _sinh, "cosh": _cosh, "asin": _asin, "acos": _acos, "atan": _atan,
    "asinh": _asinh, "acosh": _acosh, "atanh": _atanh, "erf": _erf,
}
for _name, _f in _TRANSCENDENTAL.items():
    _elementwise(_name, {"float": _f64_unary(_f)})


@dfn
def _rsqrt(x):
    return 1.0 / _sqrt(np.float64(x))


@dfn
def _logistic(x):
    x = np.float64(x)
    e = _exp(-abs(x))
    if x >= 0:
        return 1.0 / (1.0 + e)
    return e / (1.0 + e)


_elementwise("rsqrt", {"float": _rsqrt})
_elementwise("logistic", {"float": _logistic})

# ---------------------------------------------------------------- other unary ops


@dfn
def _neg(a):
    return (a - a) - a  # integers: wraps (INT_MIN stays INT_MIN); floats: -a


@dfn
def _fneg(a):
    return -a


@dfn
def _abs_s(a):
    return a if a >= 0 else (a - a) - a


@dfn
def same(a):
    return a


@dfn
def _fabs(a):
    return abs(a)


@dfn
def _sign_s(a):
    if a > 0:
        return np.int64(1)
    if a < 0:
        return np.int64(-1)
    return np.int64(0)


@dfn
def _sign_u(a):
    return np.uint64(1) if a != 0 else np.uint64(0)


@dfn
def _sign_f(a):
    if a != a or a == 0:
        return np.float64(a)
    return 1.0 if a > 0 else -1.0


@dfn
def _ceil(a):
    return ceil64(np.float64(a))


@dfn
def _floor(a):
    return floor64(np.float64(a))


@dfn
def _round_afz(a):
    x = np.float64(a)
    t = trunc64(x)
    if abs(x - t) >= 0.5:
        t = t + (1.0 if x > 0 else -1.0)
    return t


@dfn
def _round_even(a):
    return rint64(np.float64(a))


@dfn
def _is_finite_f(a):
    return np.int64(1) if (a == a and a - a == 0) else np.int64(0)


@dfn
def _true(a):
    return np.int64(1)


@dfn
def _not_int(a):
    return ~a


@dfn
def _not_pred(a):
    return np.int64(1) - a


_elementwise("negate", {"int": _neg, "float": _fneg})
_elementwise("abs", {"sint": _abs_s, "uint": same, "float": _fabs})
_elementwise("sign", {"sint": _sign_s, "uint": _sign_u, "float": _sign_f})
_elementwise("ceil", {"float": _ceil})
_elementwise("floor", {"float": _floor})
_elementwise("round-nearest-afz", {"float": _round_afz})
_elementwise("round-nearest-even", {"float": _round_even})
_elementwise("is-finite", {"float": _is_finite_f, "int": _true})
_elementwise("not", {"int": _not_int, "pred": _not_pred})


@dfn
def _u_bits(v, bits):
    """The element's bit pattern (int64 or uint64 ``v``) as uint64, masked to ``bits``."""
    u = np.uint64(v)
    if bits < 64:
        u = u & ((np.uint64(1) << np.uint64(bits)) - np.uint64(1))
    return u


#: opcode -> ``make(bits, signed)``: the integer ops whose element function depends on the
#: operand's width (shifts, mulhi, popcnt, count-leading-zeros); see :func:`width_fn`
WIDTH_OPS: dict = {}
_WIDTH_FNS: dict = {}


def width_fn(opname: str, et):
    """The device element function of width-specialised ``opname`` (``WIDTH_OPS``) on
    integer operands of ``et`` (compiled once per width and signedness)."""
    kind = element_kind(et)
    if kind not in ("sint", "uint"):
        raise GpuFallback(f"{opname} on {et.name} has no GPU kernel")
    key = (opname, et.bits, kind)
    fn = _WIDTH_FNS.get(key)
    if fn is None:
        fn = _WIDTH_FNS[key] = WIDTH_OPS[opname](et.bits, kind == "sint")
    return fn


def _bits_op(opname, make):
    """An integer op needing the operand's width: kernels are specialised per width."""
    WIDTH_OPS[opname] = lambda bits, signed: make(bits)

    def evaluate(x, *, shape):
        return apply(width_fn(opname, x.et), (x,), shape.element_type)

    evaluate.__name__ = opname.replace("-", "_")
    gpu_op(opname)(evaluate)


def _make_popcnt(bits):
    @dfn
    def f(a):
        return np.int64(popcnt_(_u_bits(a, bits)))
    return f


def _make_clz(bits):
    @dfn
    def f(a):
        return np.int64(clz(_u_bits(a, bits), bits))
    return f


_bits_op("popcnt", _make_popcnt)
_bits_op("count-leading-zeros", _make_clz)

# ---------------------------------------------------------------- binary ops


@dfn
def add(a, b):
    return a + b


@dfn
def _sub(a, b):
    return a - b


@dfn
def mul(a, b):
    return a * b


@dfn
def _fdiv(a, b):
    return a / b


@dfn
def or_pred(a, b):
    return a | b


@dfn
def and_pred(a, b):
    return a & b


@dfn
def xor(a, b):
    return a ^ b


@dfn
def _frem(a, b):
    x = np.float64(a)
    y = np.float64(b)
    if x != x or y != y or y == 0 or x - x != 0:
        return np.float64(np.nan)
    if y - y != 0:  # |y| infinite
        return x
    return _fmod(x, y)


@dfn
def _fpow(a, b):
    return _pow(np.float64(a), np.float64(b))


@dfn
def _fatan2(a, b):
    return _atan2(np.float64(a), np.float64(b))


@dfn
def _ipow_s(a, b):
    return np.int64(ipow(a, b, True))


@dfn
def _ipow_u(a, b):
    return ipow(np.int64(a), np.int64(b), False)


@dfn
def imax(a, b):
    return a if a > b else b


@dfn
def imin(a, b):
    return a if a < b else b


@dfn
def fmax(a, b):
    """IEEE maximum: NaN propagates, +0 > -0."""
    if a != a:
        return a
    if b != b:
        return b
    if a == 0 and b == 0:
        return b if signbit(a) else a
    return a if a > b else b


@dfn
def fmin(a, b):
    if a != a:
        return a
    if b != b:
        return b
    if a == 0 and b == 0:
        return a if signbit(a) else b
    return a if a < b else b


_elementwise("add", {"int": add, "float": add, "pred": or_pred})
# pred subtract: numpy has none (the CPU backend fails) and StableHLO rejects i1 operands
_elementwise("subtract", {"int": _sub, "float": _sub}, undefined=("pred",))
_elementwise("multiply", {"int": mul, "float": mul, "pred": and_pred})
_elementwise("divide", {"sint": sdiv, "uint": udiv, "float": _fdiv})
_elementwise("remainder", {"sint": srem, "uint": urem, "float": _frem})
_elementwise("power", {"sint": _ipow_s, "uint": _ipow_u, "float": _fpow})
_elementwise("atan2", {"float": _fatan2})
_elementwise("maximum", {"int": imax, "float": fmax, "pred": or_pred})
_elementwise("minimum", {"int": imin, "float": fmin, "pred": and_pred})
_elementwise("and", {"int": and_pred, "pred": and_pred})
_elementwise("or", {"int": or_pred, "pred": or_pred})
_elementwise("xor", {"int": xor, "pred": xor})


def _shift_op(opname, make):
    WIDTH_OPS[opname] = make

    def evaluate(a, b, *, shape):
        return apply(width_fn(opname, a.et), (a, b), shape.element_type)

    evaluate.__name__ = opname.replace("-", "_")
    gpu_op(opname)(evaluate)


def _make_shl(bits, signed):
    @dfn
    def f(a, b):
        x = _u_bits(a, bits)
        n = _u_bits(b, bits)
        if n >= np.uint64(bits):
            return np.uint64(0)
        return x << n
    return f


def _make_shrl(bits, signed):
    @dfn
    def f(a, b):
        x = _u_bits(a, bits)
        n = _u_bits(b, bits)
        if n >= np.uint64(bits):
            return np.uint64(0)
        return x >> n
    return f


def _make_shra(bits, signed):
    @dfn
    def f(a, b):
        u = _u_bits(a, bits)
        if bits < 64:  # sign-extend the element's bits
            sign = np.uint64(1) << np.uint64(bits - 1)
            x = np.int64(u ^ sign) - np.int64(sign)
        else:
            x = np.int64(u)
        n = _u_bits(b, bits)
        if n >= np.uint64(bits):
            return np.int64(-1) if x < 0 else np.int64(0)
        return x >> np.int64(n)
    return f


_shift_op("shift-left", _make_shl)
_shift_op("shift-right-logical", _make_shrl)
_shift_op("shift-right-arithmetic", _make_shra)


def _make_mulhi(bits, signed):
    if bits == 64:
        return mulhi_s64 if signed else mulhi_u64
    if signed:
        @dfn
        def f(a, b):
            return (a * b) >> np.int64(bits)
    else:
        @dfn
        def f(a, b):
            return (a * b) >> np.uint64(bits)
    return f


_shift_op("mulhi", _make_mulhi)


# ---------------------------------------------------------------- complex parts


@dfn
def zero(a):
    return np.float64(0.0)


@gpu_op("real")
def real(x, *, shape):
    if element_kind(x.et) == "complex":
        return complex_elementwise.unary("real", x, shape.element_type)
    return apply(same, (x,), x.et, in_classes=("raw",), out_class="raw")


@gpu_op("imag")
def imag(x, *, shape):
    if element_kind(x.et) == "complex":
        return complex_elementwise.unary("imag", x, shape.element_type)
    return apply(zero, (x,), shape.element_type)


@gpu_op("complex")
def complex_(a, b, *, shape):
    if a.et.name not in ("f32", "f64") or b.et != a.et:
        raise GpuFallback(f"complex of {a.et.name} and {b.et.name} has no GPU kernel")
    out_shape = max((a.shape, b.shape), key=len)
    return complex_elementwise.compose(a, b, out_shape, shape.element_type)
