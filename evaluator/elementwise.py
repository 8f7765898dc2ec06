"""Elementwise unary and binary ops (``docs/operation_semantics.md`` §Element-wise).

Element-type rules live in ``numeric``: integers wrap, narrow floats compute in f32
and round once, transcendentals of f32 and narrower compute in f64. Elementwise op
functions use ``shape`` only for its element type, so they also run on arrays of
other shapes (the vectorised reducers of ``reduce`` rely on that).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from hloref.errors import HloEvalError

from . import exp_log_f32, kernels, trig_f32, unary_tables
from .numeric import (compute_array, element_type_of, finish, float_compute, float_compute_f64,
                      int_compute_dtype, quiet, wrap_int)
from .registry import op
from .rsqrt_f32 import rsqrt_f32, rsqrt_f64


# ---------------------------------------------------------------- helpers


def _et(shape):
    return shape.element_type


def _int_args(*xs):
    et = element_type_of(xs[0])
    dt = int_compute_dtype(et)
    return [x.astype(dt, copy=False) for x in xs]


def _bits_unsigned(x: np.ndarray) -> np.ndarray:
    """The element's bit pattern as uint64 (masked to the element width)."""
    et = element_type_of(x)
    if et.is_pred:
        return x.astype(np.uint64)
    mask = np.uint64((1 << et.bits) - 1) if et.bits < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)
    return x.astype(np.int64).view(np.uint64) & mask if et.kind == "sint" else \
        x.astype(np.uint64) & mask


@numba.njit(cache=True)
def _erf_kernel(x, out):
    for i in range(x.size):
        out[i] = math.erf(x[i])


def _erf64(x):
    """erf of an f64 array (Numba's ``math.erf``: the host libm's)."""
    x = np.asarray(x, np.float64)
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty_like(flat)
    _erf_kernel(flat, out)
    return out.reshape(x.shape)


def _round_afz(x):
    t = np.trunc(x)
    frac = x - t
    return np.where(np.abs(frac) >= 0.5, t + np.sign(x), t)


def _sign_float(x):
    # sign(±0) = ±0, sign(NaN) = NaN
    return np.where(np.isnan(x), x, np.where(x == 0, x, np.sign(x)))


def _modulus(z):
    """|z| as the hypot of the parts (the host libm's, as the GPU backend)."""
    return np.hypot(z.real, z.imag)


def _sign_complex(z):
    mag = _modulus(z)
    return np.where(mag == 0, z, z / np.where(mag == 0, 1, mag))


def _compose(re, im):
    """The complex array re + i·im, part by part (``re + 1j * im`` turns an infinite
    ``im`` into a NaN real part: 1j * inf = nan + inf·i)."""
    re, im = np.broadcast_arrays(np.asarray(re, np.float64), np.asarray(im, np.float64))
    out = np.empty(re.shape, np.complex128)
    out.real, out.imag = re, im
    return out


def _complex_divide(a, b):
    """a / b in complex128, with C99 Annex G's recovery (``_Cdivd``, also XLA's
    ``EmitComplexDivide``) where the quotient comes out NaN in both parts: a zero
    divisor gives an infinity, an infinite dividend over a finite divisor an infinity,
    a finite dividend over an infinite divisor a (signed) zero."""
    a = np.asarray(a, np.complex128)
    b = np.asarray(b, np.complex128)
    with np.errstate(all="ignore"):
        q = a / b
        ar, ai, br, bi = a.real, a.imag, b.real, b.imag
        both_nan = np.isnan(q.real) & np.isnan(q.imag)
        if not both_nan.any():
            return q
        re, im = q.real.copy(), q.imag.copy()
        inf = np.float64(np.inf)
        zero_den = (br == 0) & (bi == 0) & ~(np.isnan(ar) & np.isnan(ai))
        s = np.copysign(inf, br)
        z_re, z_im = s * ar, s * ai
        finite_b = np.isfinite(br) & np.isfinite(bi)
        inf_num = (np.isinf(ar) | np.isinf(ai)) & finite_b
        a1r = np.copysign(np.isinf(ar).astype(np.float64), ar)
        a1i = np.copysign(np.isinf(ai).astype(np.float64), ai)
        n_re, n_im = inf * (a1r * br + a1i * bi), inf * (a1i * br - a1r * bi)
        finite_a = np.isfinite(ar) & np.isfinite(ai)
        inf_den = (np.isinf(br) | np.isinf(bi)) & finite_a
        b1r = np.copysign(np.isinf(br).astype(np.float64), br)
        b1i = np.copysign(np.isinf(bi).astype(np.float64), bi)
        d_re, d_im = 0.0 * (ar * b1r + ai * b1i), 0.0 * (ai * b1r - ar * b1i)
        for cond, r, i in ((inf_den, d_re, d_im), (inf_num, n_re, n_im), (zero_den, z_re, z_im)):
            take = both_nan & cond
            re = np.where(take, r, re)
            im = np.where(take, i, im)
    return _compose(re, im)


def _expm1_complex(z):
    # exp(x)cos(y) - 1 = expm1(x)cos(y) - 2 sin(y/2)^2: no cancellation for small |z|
    x, y = z.real, z.imag
    re = np.expm1(x) * np.cos(y) - 2.0 * np.sin(y / 2) ** 2
    return _compose(re, np.where(y == 0, y, np.exp(x) * np.sin(y)))  # C99 G.6.3.1: exp(x + i0) = exp(x) + i0


def _log1p_complex(z):
    # |1+z|^2 = 1 + (2x + x^2 + y^2): log1p of the small part keeps precision near z = 0
    x, y = z.real, z.imag
    big = np.abs(z) > 0.5
    re = np.where(big, np.log(np.abs(1 + z)), 0.5 * np.log1p(x * (2.0 + x) + y * y))
    return _compose(re, np.arctan2(y, 1.0 + x))


def _cbrt_complex(z):
    return z ** (1.0 / 3.0)


# Transcendental functions: (real implementation, complex implementation or None).
_TRANSCENDENTAL = {
    "exponential": (np.exp, np.exp),
    "exponential-minus-one": (np.expm1, _expm1_complex),
    "log": (np.log, np.log),
    "log-plus-one": (np.log1p, _log1p_complex),
    "sqrt": (np.sqrt, np.sqrt),
    "rsqrt": (rsqrt_f64, rsqrt_f64),
    "cbrt": (np.cbrt, _cbrt_complex),
    "sine": (np.sin, np.sin),
    "cosine": (np.cos, np.cos),
    "tan": (np.tan, np.tan),
    "tanh": (np.tanh, np.tanh),
    "sinh": (np.sinh, np.sinh),
    "cosh": (np.cosh, np.cosh),
    "asin": (np.arcsin, np.arcsin),
    "acos": (np.arccos, np.arccos),
    "atan": (np.arctan, np.arctan),
    "asinh": (np.arcsinh, np.arcsinh),
    "acosh": (np.arccosh, np.arccosh),
    "atanh": (np.arctanh, np.arctanh),
    "logistic": (exp_log_f32.logistic_f64, lambda z: 1 / (1 + np.exp(-z))),
    "erf": (_erf64, None),
}


def sqrt_f32(x: np.ndarray) -> np.ndarray:
    """``f32(sqrt(f64(x)))`` computed as f32's own square root: the same bits, since a
    square root correctly rounded to a format of at least 2p+2 bits (f64: 53 >= 2·24+2)
    and then to p bits is correctly rounded to p bits (Figueroa, "When is double
    rounding innocuous?", 1995); ``benchmarks/verify_trig_f32.py --op sqrt`` checks all
    2**32 inputs, NaN payloads included."""
    out = quiet(np.sqrt, x)
    return out if type(out) is np.ndarray else np.asarray(out)


_F32 = np.dtype(np.float32)
#: f32 kernels that return what ``float_compute_f64`` of the table's function does
_F32_KERNELS = {"sine": trig_f32.sin_f32, "cosine": trig_f32.cos_f32, "sqrt": sqrt_f32,
                "rsqrt": rsqrt_f32, "exponential": exp_log_f32.exp_f32,
                "exponential-minus-one": exp_log_f32.expm1_f32, "log": exp_log_f32.log_f32,
                "log-plus-one": exp_log_f32.log1p_f32, "logistic": exp_log_f32.logistic_f32,
                "tanh": exp_log_f32.tanh_f32}


def _transcendental(name):
    real_fn, complex_fn = _TRANSCENDENTAL[name]

    def evaluate(x, *, shape, result_accuracy=None):
        et = _et(shape)
        if et.is_complex:
            if complex_fn is None:
                raise HloEvalError(f"{name} is not defined on complex values")
            return float_compute_f64(complex_fn, x, et=et)
        if not et.is_float:
            raise HloEvalError(f"{name} needs a floating-point operand, got {et.name}")
        fast = _F32_KERNELS.get(name) if x.dtype == _F32 and et.dtype == _F32 else None
        if fast is not None:  # the last line's bits (the kernels' docstrings)
            return fast(x)
        if et.is_narrow_float:  # a table of that line's values, when ``x`` is of type ``et``
            table = unary_tables.lookup(name, lambda v: float_compute_f64(real_fn, v, et=et),
                                        x, et)
            if table is not None:
                return table
        return float_compute_f64(real_fn, x, et=et)

    evaluate.__name__ = name.replace("-", "_")
    return evaluate


for _name in _TRANSCENDENTAL:
    op(_name)(_transcendental(_name))


# ---------------------------------------------------------------- other unary ops


@op("abs")
def abs_(x, *, shape):
    in_et = element_type_of(x)
    if in_et.is_complex:
        # hypot of the parts (the host libm's, as the GPU backend): numpy's own complex
        # abs misrounds c128 magnitudes (37 % of N(0, 1) values by 1 ULP, against 0.5 %)
        return float_compute_f64(_modulus, x, et=_et(shape))
    if in_et.is_integer:
        (a,) = _int_args(x)
        return wrap_int(np.abs(a), _et(shape))  # abs(INT_MIN) wraps to INT_MIN
    return float_compute(np.abs, x, et=_et(shape))


@op("negate")
def negate(x, *, shape):
    et = _et(shape)
    if et.is_integer:
        (a,) = _int_args(x)
        return wrap_int(np.negative(a), et)
    return float_compute(np.negative, x, et=et)


@op("sign")
def sign(x, *, shape):
    et = _et(shape)
    if et.is_integer:
        (a,) = _int_args(x)
        return wrap_int(np.sign(a.astype(np.int64) if et.kind == "sint" else (a != 0).astype(np.int64)), et)
    if et.is_complex:
        return float_compute_f64(_sign_complex, x, et=et)
    return float_compute(_sign_float, x, et=et)


@op("ceil")
def ceil(x, *, shape):
    return float_compute(np.ceil, x, et=_et(shape))


@op("floor")
def floor(x, *, shape):
    return float_compute(np.floor, x, et=_et(shape))


@op("round-nearest-afz")
def round_nearest_afz(x, *, shape):
    return float_compute(_round_afz, x, et=_et(shape))


@op("round-nearest-even")
def round_nearest_even(x, *, shape):
    return float_compute(np.rint, x, et=_et(shape))


@op("is-finite")
def is_finite(x, *, shape):
    return np.isfinite(compute_array(x))


@op("not")
def not_(x, *, shape):
    et = _et(shape)
    if et.is_pred:
        return np.logical_not(x)
    (a,) = _int_args(x)
    return wrap_int(np.invert(a), et)


@op("popcnt")
def popcnt(x, *, shape):
    counts = kernels.popcnt_array(_bits_unsigned(x))
    return wrap_int(counts.reshape(x.shape), _et(shape))


@op("count-leading-zeros")
def count_leading_zeros(x, *, shape):
    bits = element_type_of(x).bits
    counts = kernels.clz_array(_bits_unsigned(x), bits)
    return wrap_int(counts.reshape(x.shape), _et(shape))


@op("real")
def real(x, *, shape):
    if element_type_of(x).is_complex:
        return np.real(x).astype(_et(shape).dtype)
    return x.copy()


@op("imag")
def imag(x, *, shape):
    if element_type_of(x).is_complex:
        return np.imag(x).astype(_et(shape).dtype)
    return finish(np.zeros(x.shape, np.float64), _et(shape))


# ---------------------------------------------------------------- binary ops


def _arith(name, int_fn, float_fn, complex_fn=None):
    def evaluate(a, b, *, shape):
        et = shape.element_type
        if et.kind == "float":  # the common case first (the chain below would reach it)
            return float_compute(float_fn, a, b, et=et)
        if et.is_integer:
            x, y = _int_args(a, b)
            with np.errstate(all="ignore"):
                return wrap_int(int_fn(x, y), et)
        if et.is_pred:
            return int_fn(a, b).astype(bool)
        if et.is_complex:
            with np.errstate(all="ignore"):
                return finish((complex_fn or float_fn)(a, b), et)
        return float_compute(float_fn, a, b, et=et)

    evaluate.__name__ = name.replace("-", "_")
    op(name)(evaluate)


_arith("add", np.add, np.add)
_arith("subtract", np.subtract, np.subtract)
def _complex_multiply(a, b):
    """(ar·br − ai·bi) + i(ar·bi + ai·br), every product and sum rounded to the part type
    on its own (the GPU backend's ``c_mul``). numpy's complex loops contract these to
    FMA where the CPU has FMA instructions, so their last bit depended on the machine."""
    a, b = np.broadcast_arrays(a, b)
    out = np.empty(a.shape, np.result_type(a, b))
    ar, ai, br, bi = a.real, a.imag, b.real, b.imag
    out.real = ar * br - ai * bi
    out.imag = ar * bi + ai * br
    return out


_arith("multiply", np.multiply, np.multiply, _complex_multiply)


def _int_divrem(a, b, et, *, remainder: bool):
    """XLA's integer divide/remainder (x/0 = -1, x%0 = x, INT_MIN/-1 = INT_MIN)."""
    x, y = np.broadcast_arrays(*_int_args(a, b))
    out = kernels.divrem_array(x, y, remainder=remainder)
    return wrap_int(out.reshape(x.shape), et)


@op("divide")
def divide(a, b, *, shape):
    et = _et(shape)
    if et.is_integer:
        return _int_divrem(a, b, et, remainder=False)
    if et.is_complex:
        with np.errstate(all="ignore"):
            return finish(_complex_divide(a, b), et)
    return float_compute(np.divide, a, b, et=et)


@op("remainder")
def remainder(a, b, *, shape):
    et = _et(shape)
    if et.is_integer:
        return _int_divrem(a, b, et, remainder=True)
    return float_compute(np.fmod, a, b, et=et)


@op("power")
def power(a, b, *, shape):
    et = _et(shape)
    if et.is_integer:
        x, y = _int_args(a, b)
        bx, by = np.broadcast_arrays(x, y)
        bits = kernels.pow_array(bx, by).reshape(bx.shape)
        return wrap_int(bits.view(np.int64) if et.kind == "sint" else bits, et)
    return float_compute_f64(np.power, a, b, et=et)


def _atan2_complex(y, x):
    # XLA/MHLO's definition for complex operands: -i * log((x + i*y) / sqrt(x^2 + y^2))
    return -1j * np.log(_complex_divide(x + 1j * y, np.sqrt(x * x + y * y)))


@op("atan2")
def atan2(a, b, *, shape):
    et = _et(shape)
    if et.is_complex:
        return float_compute_f64(_atan2_complex, a, b, et=et)
    return float_compute_f64(np.arctan2, a, b, et=et)


def ieee_max_min(take_max: bool):
    def fn(x, y):
        r = np.maximum(x, y) if take_max else np.minimum(x, y)
        # IEEE-754 maximum/minimum: NaN propagates; -0 < +0.
        zeros = (x == 0) & (y == 0)
        if np.any(zeros):
            neg = np.signbit(x) & np.signbit(y) if take_max else np.signbit(x) | np.signbit(y)
            r = np.where(zeros, np.where(neg, -0.0, 0.0).astype(r.dtype), r)
        return r
    return fn


def complex_max_min(take_max: bool):
    def fn(x, y):
        # lexicographic order on (real, imag), as the StableHLO reference compares
        gt = (x.real > y.real) | ((x.real == y.real) & (x.imag > y.imag))
        return np.where(gt if take_max else ~gt, x, y)
    return fn


def _max_min(name, take_max):
    float_fn = ieee_max_min(take_max)
    int_fn = np.maximum if take_max else np.minimum

    def evaluate(a, b, *, shape):
        et = shape.element_type
        if et.kind == "float":  # the common case first (the chain below would reach it)
            return float_compute(float_fn, a, b, et=et)
        if et.is_integer:
            x, y = _int_args(a, b)
            return wrap_int(int_fn(x, y), et)
        if et.is_pred:
            return np.logical_or(a, b) if take_max else np.logical_and(a, b)
        if et.is_complex:
            return complex_max_min(take_max)(a, b)
        return float_compute(float_fn, a, b, et=et)

    evaluate.__name__ = name
    op(name)(evaluate)


_max_min("maximum", True)
_max_min("minimum", False)


def _bitwise(name, fn, pred_fn):
    def evaluate(a, b, *, shape):
        et = _et(shape)
        if et.is_pred:
            return pred_fn(a, b)
        if not et.is_integer:
            raise HloEvalError(f"{name} needs integer or pred operands, got {et.name}")
        x, y = _int_args(a, b)
        return wrap_int(fn(x, y), et)

    evaluate.__name__ = name + "_"
    op(name)(evaluate)


_bitwise("and", np.bitwise_and, np.logical_and)
_bitwise("or", np.bitwise_or, np.logical_or)
_bitwise("xor", np.bitwise_xor, np.logical_xor)


def _check_shift(et):
    if not et.is_integer:
        raise HloEvalError(f"shifts need integer operands, got {et.name}")


def _shift_amounts(b):
    # The amount is read as unsigned: negative amounts are huge, hence "too large".
    return _bits_unsigned(b)


def _logical_shift(a, b, shape, shift):
    """Shift the element's bits (as unsigned); amounts >= the width give 0."""
    et = _et(shape)
    _check_shift(et)
    x, n = np.broadcast_arrays(_bits_unsigned(a), _shift_amounts(b))
    too_big = n >= np.uint64(et.bits)
    out = np.where(too_big, np.uint64(0), shift(x, np.where(too_big, np.uint64(0), n)))
    return wrap_int(out.view(np.int64) if et.kind == "sint" else out, et)


@op("shift-left")
def shift_left(a, b, *, shape):
    return _logical_shift(a, b, shape, np.left_shift)


@op("shift-right-logical")
def shift_right_logical(a, b, *, shape):
    return _logical_shift(a, b, shape, np.right_shift)


@op("shift-right-arithmetic")
def shift_right_arithmetic(a, b, *, shape):
    et = _et(shape)
    _check_shift(et)
    bits = _bits_unsigned(a)
    # sign-extend the element's bits to int64
    sign = np.uint64(1) << np.uint64(et.bits - 1)
    x = (bits ^ sign).view(np.int64) - np.int64(sign) if et.bits < 64 else bits.view(np.int64)
    n = _shift_amounts(b)
    x, n = np.broadcast_arrays(x, n)
    too_big = n >= np.uint64(et.bits)
    shifted = x >> np.where(too_big, np.uint64(0), n).astype(np.int64)
    out = np.where(too_big, np.where(x < 0, np.int64(-1), np.int64(0)), shifted)
    return wrap_int(out if et.kind == "sint" else out.view(np.uint64), et)


@op("complex")
def complex_(a, b, *, shape):
    a, b = np.broadcast_arrays(a, b)
    out = np.empty(a.shape, _et(shape).dtype)
    out.real = a
    out.imag = b
    return out


@op("mulhi")
def mulhi(a, b, *, shape):
    et = _et(shape)
    x, y = _int_args(a, b)
    x, y = np.broadcast_arrays(x, y)
    if et.bits == 64:
        return wrap_int(kernels.mulhi64_array(x, y).reshape(x.shape), et)
    if et.kind == "sint":
        product = x.astype(np.int64) * y.astype(np.int64)
        return wrap_int(product >> np.int64(et.bits), et)
    product = x.astype(np.uint64) * y.astype(np.uint64)
    return wrap_int(product >> np.uint64(et.bits), et)

