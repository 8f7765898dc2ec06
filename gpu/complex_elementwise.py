"""Complex elementwise arithmetic on the GPU: the complex half of ``gpu/elementwise.py``
(the CPU's is in ``evaluator/elementwise.py``).

A complex array is stored as interleaved (real, imaginary) pairs of its part type
(c64: f32, c128: f64); kernels view the storage as a flat float array and compute on
the two parts, the CPU's formulas written out:

* ``add``/``subtract``/``negate`` part by part in the part type;
* ``multiply``: ``(ar*br - ai*bi, ar*bi + ai*br)`` in the part type (XLA's
  ``EmitComplexMultiply``). The CPU backend's numpy loop fuses one product of each part
  (an FMA on AVX2/AVX-512 machines, none elsewhere), so the two agree to an ulp, not
  bit for bit;
* ``divide``: numpy's Smith division in f64 (c64 rounded once), then C99 Annex G's
  recovery where both parts come out NaN, exactly the CPU's ``_complex_divide``;
* ``abs``: ``hypot`` in f64 rounded once; ``sign``: ``z / |z|`` by the same Smith
  division (no recovery; 0 stays 0);
* ``real``/``imag``/``complex`` move parts; ``compare`` EQ/NE compare both parts.

* transcendentals (exp, log, sqrt, sin, cos, tan, tanh, sinh, cosh, the inverse
  functions, rsqrt, logistic, cbrt, power): in c128 by numpy's functions in the
  simulator (the CPU backend's, so bit-exact there) and numba's ``cmath`` on a GPU
  (within ulps of c128), rounded once to c64; expm1 and log1p by the CPU's formulas
  from real functions; rsqrt and logistic divide by numpy's Smith division.

* maximum/minimum (and clamp): the CPU's lexicographic order on (real, imag);
  atan2: the CPU's formula ``-i log((x + iy) / sqrt(x^2 + y^2))`` in c128.
"""

from __future__ import annotations

import cmath
import functools
import math

import numpy as np
from numba import cuda

from . import config
from .device import SIMULATOR, DArray, empty

if SIMULATOR:  # numpy's functions: the CPU backend's (the host libm's, npymath's)
    _hypot = np.hypot
    _cexp, _clog, _csqrt, _cpow = np.exp, np.log, np.sqrt, np.power
    _csin, _ccos, _ctan, _ctanh, _csinh, _ccosh = (np.sin, np.cos, np.tan, np.tanh, np.sinh,
                                                   np.cosh)
    _casin, _cacos, _catan, _casinh, _cacosh, _catanh = (
        np.arcsin, np.arccos, np.arctan, np.arcsinh, np.arccosh, np.arctanh)
    _rexpm1, _rexp, _rlog, _rlog1p, _rsin, _rcos, _ratan2 = (
        np.expm1, np.exp, np.log, np.log1p, np.sin, np.cos, np.arctan2)
else:  # pragma: no cover - needs a GPU
    _hypot = math.hypot
    _cexp, _clog, _csqrt = cmath.exp, cmath.log, cmath.sqrt
    _csin, _ccos, _ctan, _ctanh, _csinh, _ccosh = (cmath.sin, cmath.cos, cmath.tan,
                                                   cmath.tanh, cmath.sinh, cmath.cosh)
    _casin, _cacos, _catan, _casinh, _cacosh, _catanh = (
        cmath.asin, cmath.acos, cmath.atan, cmath.asinh, cmath.acosh, cmath.atanh)
    _rexpm1, _rexp, _rlog, _rlog1p, _rsin, _rcos, _ratan2 = (
        math.expm1, math.exp, math.log, math.log1p, math.sin, math.cos, math.atan2)

    @cuda.jit(device=True)
    def _cpow(z, w):
        return z ** w


def _launch(kernel, n, *args):
    if n > 0:
        blocks, tpb = config.geometry(n)
        kernel[blocks, tpb](*args)


def parts(x: DArray):
    """The storage of complex ``x`` as a flat float array of 2 * size parts."""
    return x.data.view(np.float32 if x.et.name == "c64" else np.float64)


# ----------------------------------------------------------------- element functions


@cuda.jit(device=True)
def c_add(ar, ai, br, bi):
    return ar + br, ai + bi


@cuda.jit(device=True)
def c_sub(ar, ai, br, bi):
    return ar - br, ai - bi


@cuda.jit(device=True)
def c_mul(ar, ai, br, bi):
    return ar * br - ai * bi, ar * bi + ai * br


@cuda.jit(device=True)
def smith(ar, ai, br, bi):
    """numpy's complex division (Smith's algorithm) in f64."""
    ar = np.float64(ar)
    ai = np.float64(ai)
    br = np.float64(br)
    bi = np.float64(bi)
    abr = abs(br)
    abi = abs(bi)
    if abr >= abi:
        if abr == 0 and abi == 0:
            return ar / abr, ai / abr
        rat = bi / br
        scl = 1.0 / (br + bi * rat)
        return (ar + ai * rat) * scl, (ai - ar * rat) * scl
    rat = br / bi
    scl = 1.0 / (bi + br * rat)
    return (ar * rat + ai) * scl, (ai * rat - ar) * scl


@cuda.jit(device=True)
def _isinf(x):
    return x - x != x - x and x == x


@cuda.jit(device=True)
def _finite(x):
    return x - x == 0


@cuda.jit(device=True)
def _inf_sign(x):
    """copysign(1 if x is infinite else 0, x)."""
    return math.copysign(1.0 if _isinf(x) else 0.0, x)


@cuda.jit(device=True)
def c_div(ar, ai, br, bi):
    """Smith division with C99 Annex G's recovery (the CPU's ``_complex_divide``)."""
    re, im = smith(ar, ai, br, bi)
    if not (re != re and im != im):
        return re, im
    ar = np.float64(ar)
    ai = np.float64(ai)
    br = np.float64(br)
    bi = np.float64(bi)
    inf = np.float64(np.inf)
    if br == 0 and bi == 0 and not (ar != ar and ai != ai):
        s = math.copysign(inf, br)
        return s * ar, s * ai
    if (_isinf(ar) or _isinf(ai)) and _finite(br) and _finite(bi):
        a1r = _inf_sign(ar)
        a1i = _inf_sign(ai)
        return inf * (a1r * br + a1i * bi), inf * (a1i * br - a1r * bi)
    if (_isinf(br) or _isinf(bi)) and _finite(ar) and _finite(ai):
        b1r = _inf_sign(br)
        b1i = _inf_sign(bi)
        return 0.0 * (ar * b1r + ai * b1i), 0.0 * (ai * b1r - ar * b1i)
    return re, im


@cuda.jit(device=True)
def c_neg(ar, ai):
    return -ar, -ai


@cuda.jit(device=True)
def c_sign(ar, ai):
    mag = _hypot(np.float64(ar), np.float64(ai))
    if mag == 0:
        return np.float64(ar), np.float64(ai)
    return smith(ar, ai, mag, 0.0)


@cuda.jit(device=True)
def c_abs(ar, ai):
    return _hypot(np.float64(ar), np.float64(ai))


@cuda.jit(device=True)
def c_real(ar, ai):
    return ar


@cuda.jit(device=True)
def c_imag(ar, ai):
    return ai


@cuda.jit(device=True)
def c_eq(ar, ai, br, bi):
    return np.uint8(1) if (ar == br and ai == bi) else np.uint8(0)


@cuda.jit(device=True)
def c_ne(ar, ai, br, bi):
    return np.uint8(0) if (ar == br and ai == bi) else np.uint8(1)


# ----------------------------------------------------------------- transcendentals


def _c128_unary(f):
    """``(ar, ai) -> parts of f(ar + i ai)`` computed in c128."""
    @cuda.jit(device=True)
    def g(ar, ai):
        w = f(complex(np.float64(ar), np.float64(ai)))
        return w.real, w.imag
    return g


@cuda.jit(device=True)
def c_expm1(ar, ai):
    """The CPU's ``_expm1_complex``: expm1(x)cos(y) - 2 sin(y/2)^2 + i exp(x) sin(y)."""
    x = np.float64(ar)
    y = np.float64(ai)
    s = _rsin(y / 2)
    re = _rexpm1(x) * _rcos(y) - 2.0 * (s * s)
    return re, (y if y == 0 else _rexp(x) * _rsin(y))


@cuda.jit(device=True)
def c_log1p(ar, ai):
    """The CPU's ``_log1p_complex``: log|1+z| (log1p of the small part near 0) + i arg(1+z)."""
    x = np.float64(ar)
    y = np.float64(ai)
    if _hypot(x, y) > 0.5:
        re = _rlog(_hypot(1.0 + x, y))
    else:
        re = 0.5 * _rlog1p(x * (2.0 + x) + y * y)
    return re, _ratan2(y, 1.0 + x)


@cuda.jit(device=True)
def c_cbrt(ar, ai):
    w = _cpow(complex(np.float64(ar), np.float64(ai)), complex(1.0 / 3.0, 0.0))
    return w.real, w.imag


@cuda.jit(device=True)
def c_rsqrt(ar, ai):
    w = _csqrt(complex(np.float64(ar), np.float64(ai)))
    return smith(1.0, 0.0, w.real, w.imag)


@cuda.jit(device=True)
def c_logistic(ar, ai):
    """1 / (1 + exp(-z)), as numpy evaluates it in c128."""
    w = _cexp(complex(-np.float64(ar), -np.float64(ai)))
    return smith(1.0, 0.0, 1.0 + w.real, 0.0 + w.imag)


@cuda.jit(device=True)
def c_pow(ar, ai, br, bi):
    w = _cpow(complex(np.float64(ar), np.float64(ai)), complex(np.float64(br), np.float64(bi)))
    return w.real, w.imag


@cuda.jit(device=True)
def _c_gt(ar, ai, br, bi):
    """The CPU's lexicographic order on (real, imag) (the StableHLO reference's)."""
    return ar > br or (ar == br and ai > bi)


@cuda.jit(device=True)
def c_max(ar, ai, br, bi):
    if _c_gt(ar, ai, br, bi):
        return ar, ai
    return br, bi


@cuda.jit(device=True)
def c_min(ar, ai, br, bi):
    if _c_gt(ar, ai, br, bi):
        return br, bi
    return ar, ai


@cuda.jit(device=True)
def c_atan2(yr, yi, xr, xi):
    """The CPU's complex atan2 in c128: ``-1j * log((x + 1j*y) / sqrt(x*x + y*y))``,
    each complex product as numpy's ``(ar br - ai bi, ar bi + ai br)`` and the quotient
    by Smith's division with C99 Annex G's recovery (the CPU's ``_complex_divide``)."""
    xr = np.float64(xr)
    xi = np.float64(xi)
    yr = np.float64(yr)
    yi = np.float64(yi)
    nr = xr + (0.0 * yr - 1.0 * yi)  # x + 1j*y
    ni = xi + (0.0 * yi + 1.0 * yr)
    sr = (xr * xr - xi * xi) + (yr * yr - yi * yi)  # x*x + y*y
    si = (xr * xi + xi * xr) + (yr * yi + yi * yr)
    d = _csqrt(complex(sr, si))
    qr, qi = c_div(nr, ni, d.real, d.imag)
    w = _clog(complex(qr, qi))
    return -0.0 * w.real - (-1.0) * w.imag, -0.0 * w.imag + (-1.0) * w.real  # -1j * w


TRANSCENDENTAL = {
    "exponential": _c128_unary(_cexp), "log": _c128_unary(_clog),
    "sqrt": _c128_unary(_csqrt), "sine": _c128_unary(_csin), "cosine": _c128_unary(_ccos),
    "tan": _c128_unary(_ctan), "tanh": _c128_unary(_ctanh), "sinh": _c128_unary(_csinh),
    "cosh": _c128_unary(_ccosh), "asin": _c128_unary(_casin), "acos": _c128_unary(_cacos),
    "atan": _c128_unary(_catan), "asinh": _c128_unary(_casinh),
    "acosh": _c128_unary(_cacosh), "atanh": _c128_unary(_catanh),
    "exponential-minus-one": c_expm1, "log-plus-one": c_log1p, "cbrt": c_cbrt,
    "rsqrt": c_rsqrt, "logistic": c_logistic,
}


# ----------------------------------------------------------------- kernels


@functools.cache
def _binary_to_complex(fn):
    @cuda.jit
    def k(out, n, a, na, b, nb):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            ja = i if na > 1 else 0
            jb = i if nb > 1 else 0
            re, im = fn(a[2 * ja], a[2 * ja + 1], b[2 * jb], b[2 * jb + 1])
            out[2 * i] = re
            out[2 * i + 1] = im
            i += step
    return k


@functools.cache
def _binary_to_scalar(fn):
    @cuda.jit
    def k(out, n, a, na, b, nb):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            ja = i if na > 1 else 0
            jb = i if nb > 1 else 0
            out[i] = fn(a[2 * ja], a[2 * ja + 1], b[2 * jb], b[2 * jb + 1])
            i += step
    return k


@functools.cache
def _unary_to_complex(fn):
    @cuda.jit
    def k(out, n, a):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            re, im = fn(a[2 * i], a[2 * i + 1])
            out[2 * i] = re
            out[2 * i + 1] = im
            i += step
    return k


@functools.cache
def _unary_to_scalar(fn):
    @cuda.jit
    def k(out, n, a):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            out[i] = fn(a[2 * i], a[2 * i + 1])
            i += step
    return k


@cuda.jit
def _compose(out, n, a, na, b, nb):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < n:
        out[2 * i] = a[i if na > 1 else 0]
        out[2 * i + 1] = b[i if nb > 1 else 0]
        i += step


BINARY = {"add": c_add, "subtract": c_sub, "multiply": c_mul, "divide": c_div, "power": c_pow,
          "maximum": c_max, "minimum": c_min, "atan2": c_atan2}
UNARY = {"negate": c_neg, "sign": c_sign, **TRANSCENDENTAL}
TO_REAL = {"abs": c_abs, "real": c_real, "imag": c_imag}
COMPARE = {"EQ": c_eq, "NE": c_ne}


def binary(opname, a: DArray, b: DArray, out_shape, out_et) -> DArray:
    out = empty(out_shape, out_et)
    _launch(_binary_to_complex(BINARY[opname]), out.size, parts(out), out.size, parts(a), a.size,
            parts(b), b.size)
    return out


def unary(opname, x: DArray, out_et) -> DArray:
    out = empty(x.shape, out_et)
    if opname in UNARY:
        _launch(_unary_to_complex(UNARY[opname]), out.size, parts(out), out.size, parts(x))
    else:
        _launch(_unary_to_scalar(TO_REAL[opname]), out.size, out.data, out.size, parts(x))
    return out


def compare(direction, a: DArray, b: DArray, out_shape, out_et) -> DArray:
    out = empty(out_shape, out_et)
    _launch(_binary_to_scalar(COMPARE[direction]), out.size, out.data, out.size, parts(a),
            a.size, parts(b), b.size)
    return out


def compose(re: DArray, im: DArray, out_shape, out_et) -> DArray:
    """``complex(re, im)``: f32 parts to c64, f64 parts to c128."""
    out = empty(out_shape, out_et)
    _launch(_compose, out.size, parts(out), out.size, re.data, re.size, im.data, im.size)
    return out
