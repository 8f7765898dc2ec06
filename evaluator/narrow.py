"""Narrow-float conversion kernels: bit patterns <-> f32/f64, bit-exact with ml_dtypes 0.6.

Numba's CPU target has no float16/bfloat16/fp8/fp4 types, so hloref carries narrow
floats as their bit patterns (``uint8``/``uint16`` views of the ml_dtypes arrays) and
converts them here. Every conversion is driven by the element type's
:class:`~hloref.types.FloatFormat` (exponent bits, mantissa bits, bias, NaN style,
signedness); there is one generic decode kernel and one generic encode kernel (one
specialisation per source width: f32 and f64), not one kernel per type.

Public API (what the evaluator imports)::

    decode(bits, et)                  # uint8/uint16 bit patterns -> float32, exact
    encode(values, et, via_f32=False) # float32/float64 -> bit patterns, one RNE rounding
    to_f32(x), to_f64(x)              # narrow-dtype array -> float32 / float64
    from_float(values, et)            # float32/float64 -> array of et.dtype
    cast_float(values, et)            # any float array -> et.dtype

Scalar building blocks (plain ``@numba.njit`` functions of integers, no numpy calls,
so they can be compiled for ``numba.cuda`` as well): :func:`decode_scalar` and
:func:`encode_scalar`; :func:`format_params` gives their format integers.

Behaviour (the oracle is ml_dtypes 0.6 for every type except f16, whose oracle is
numpy's own float16 cast; all of this is checked by ``tests/test_narrow.py``):

* **Rounding.** Round to nearest, ties to even, once, from the source precision;
  subnormal targets, carries into the next binade and f32 subnormal sources are all
  exact. A value that rounds past the largest finite magnitude (so anything at or above
  ``max + ulp/2`` when max's mantissa is odd, strictly above it when even) overflows:
  ``ieee`` types (f16, bf16, f8e5m2, f8e4m3, f8e3m4) -> +-inf; ``fn``
  (f8e4m3fn) -> NaN with the sign (``S.1111.111``); ``fnuz`` (f8e4m3fnuz, f8e5m2fnuz,
  f8e4m3b11fnuz) -> NaN ``0x80``; f4e2m1fn saturates to +-6; f8e8m0fnu -> NaN
  ``0xFF``. Infinite inputs follow the same rules.
* **Zero.** fnuz types have no -0: -0 and negative values that round to zero give
  ``0x00``. f4e2m1fn keeps -0.
* **NaN encode.** f16 (numpy): sign kept, payload truncated to the top 10 mantissa
  bits, and forced to ``...01`` if that leaves it zero (so a NaN stays a NaN; signalling
  NaNs are not quietened). bf16 and the ieee fp8 types: the canonical quiet NaN with the
  input's sign (payload dropped): bf16 ``0x7FC0``/``0xFFC0``, e5m2 ``0x7E``, e4m3
  ``0x7C``, e3m4 ``0x78``. f8e4m3fn: ``0x7F``/``0xFF``. fnuz: ``0x80`` whatever the sign.
  **f4e2m1fn has no NaN: ml_dtypes turns +NaN into -0 (``0x8``) and -NaN into +0
  (``0x0``)**, i.e. zero with the sign flipped. f8e8m0fnu: ``0xFF``.
* **NaN decode.** f16 and bf16: sign and payload are kept (shifted into the f32
  mantissa, signalling NaNs stay signalling). Every 8-bit type: the canonical quiet NaN
  with the pattern's sign (``0x7FC00000``/``0xFFC00000``); the fnuz NaN ``0x80`` decodes
  to the *negative* quiet NaN ``0xFFC00000``; f8e8m0fnu's ``0xFF`` to ``0x7FC00000``.
* **f8e8m0fnu** (unsigned powers of two, 2^-127 .. 2^127, no zero). Every negative
  input (including -0), +0, NaN and +-inf give NaN ``0xFF``. A positive value
  ``2^k * (1 + f)`` goes to ``2^(k+1)`` when ``f >= 1/2`` (ties round *up*, e.g.
  1.5 -> 2, 3 -> 4, 6 -> 8) and to ``2^k`` otherwise; results above 2^127 are NaN, and
  everything below 2^-127 saturates to 2^-127 (``0x00``). Quirk reproduced from ml_dtypes
  for f32 *subnormal* sources: values ``<= 2^-127`` give ``0x00`` and every value in
  ``(2^-127, 2^-126)`` gives ``0x01`` (2^-126), not just those ``>= 1.5 * 2^-127``. f64
  sources in that range (they are f64 normals) use the regular rule above.

**f64 sources and ml_dtypes' double rounding.** ``np.asarray(x, np.float64).astype(T)``
in ml_dtypes 0.6 goes through float32 for **every ml_dtypes type**: bf16, all seven
f8 types, f4e2m1fn and f8e8m0fnu (e.g. ``1 + 2**-8 + 2**-40`` -> bf16 gives 1.0, the
correct rounding is ``1 + 2**-7``; ``1.5 - 2**-40`` -> f8e8m0fnu gives 2.0, the
correct rounding under ml_dtypes' own rule is 1.0). Only f16 (numpy's cast) rounds f64
directly. :func:`encode` rounds f64 once, directly (correct rounding, same special-value
rules as above); ``encode(values, et, via_f32=True)`` reproduces ml_dtypes/numpy bit for
bit instead: it rounds to f32 first (numpy's ``astype(float32)``, RNE) for every type
except f16, which numpy converts directly anyway. For f32 sources both are identical.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import prange

from hloref.types import ElementType, from_dtype

__all__ = [
    "decode", "encode", "to_f32", "to_f64", "from_float", "cast_float",
    "decode_scalar", "encode_scalar", "format_params",
    "STYLE_IEEE", "STYLE_FN", "STYLE_FNUZ", "STYLE_NONE", "STYLE_E8M0",
]

# NaN-style codes (the kernels' integer parameter).
STYLE_IEEE = 0
STYLE_FN = 1
STYLE_FNUZ = 2
STYLE_NONE = 3
STYLE_E8M0 = 4
_STYLE_CODES = {"ieee": STYLE_IEEE, "fn": STYLE_FN, "fnuz": STYLE_FNUZ,
                "none": STYLE_NONE, "e8m0": STYLE_E8M0}

# Flag bits.
FLAG_DECODE_PAYLOAD = 1  # decode keeps the NaN payload (f16, bf16)
FLAG_ENCODE_PAYLOAD = 2  # encode truncates the NaN payload (f16, numpy's rule)

#: Encodes of at least this many elements use the multi-threaded (``prange``) kernel.
#: Measured on the 2-core development machine: about 1.5x at 2**24 elements when the
#: second core is idle (~80 -> ~120 M elements/s), a loss below ~2**17 (thread
#: launch). Set to ``None`` to stay single-threaded (e.g. when calling from several
#: Python threads: numba's workqueue threading layer does not allow concurrent
#: parallel launches).
PARALLEL_THRESHOLD: int | None = 1 << 20
#: 16-bit decodes of at least this many elements index a 65536-entry float32 table
#: (built once per type with the decode kernel) instead of running the kernel.
TABLE_THRESHOLD = 1 << 12


# ---------------------------------------------------------------------------
# Scalar functions (integer arithmetic only; CUDA-compilable).
# ---------------------------------------------------------------------------

@numba.njit(cache=True)
def decode_scalar(b, de, dm, dbias, style, flags):
    """Bit pattern ``b`` of a narrow format -> the float32 bit pattern (as int64), exact."""
    b = np.int64(b)
    if style == STYLE_E8M0:
        if b == (1 << de) - 1:
            return np.int64(0x7FC00000)
        e = b - dbias  # value 2**e
        if e >= -126:
            return (e + 127) << 23
        return np.int64(1) << (e + 149)
    width = de + dm
    sign = (b >> width) & 1
    mag = b & ((1 << width) - 1)
    ef = mag >> dm
    frac = mag & ((1 << dm) - 1)
    s32 = sign << 31
    if style == STYLE_IEEE:
        if ef == (1 << de) - 1:
            if frac == 0:
                return s32 | 0x7F800000
            if flags & FLAG_DECODE_PAYLOAD:
                return s32 | 0x7F800000 | (frac << (23 - dm))
            return s32 | 0x7FC00000
    elif style == STYLE_FN:
        if mag == (1 << width) - 1:
            return s32 | 0x7FC00000
    elif style == STYLE_FNUZ:
        if sign == 1 and mag == 0:
            return np.int64(0xFFC00000)
    if ef == 0:
        if frac == 0:
            return s32
        sig = frac
        e = 1 - dbias - dm  # value = sig * 2**e
    else:
        sig = frac | (1 << dm)
        e = ef - dbias - dm
    p = dm
    while (sig >> p) == 0:
        p -= 1
    exp = p + e  # unbiased exponent of the value
    if exp >= -126:
        return s32 | ((exp + 127) << 23) | ((sig << (23 - p)) & 0x7FFFFF)
    # f32 subnormal: value = m32 * 2**-149, m32 = sig * 2**(e + 149)
    return s32 | (sig << (e + 149))


@numba.njit(cache=True)
def encode_scalar(x, se, sm, de, dm, dbias, style, flags):
    """Source float bit pattern ``x`` (f32 or f64 layout given by ``se``/``sm``; int64)
    -> bit pattern of the narrow format (int64), rounded to nearest even once."""
    x = np.int64(x)
    swidth = se + sm
    sign = (x >> swidth) & 1
    mag = x & ((np.int64(1) << swidth) - 1)
    ef = mag >> sm
    frac = mag & ((np.int64(1) << sm) - 1)
    sbias = (1 << (se - 1)) - 1
    s_all = (1 << se) - 1
    width = de + dm
    exp_all = (1 << de) - 1

    if style == STYLE_E8M0:
        if sign == 1 or ef == s_all or mag == 0:
            return np.int64(exp_all)
        if ef == 0:
            # Source subnormal (ml_dtypes' f32 behaviour): <= 2**-dbias -> 0x00, else 0x01.
            k = sbias + sm - 1 - dbias
            if k >= 62:
                return np.int64(0)
            if k < 0 or frac > (np.int64(1) << k):
                return np.int64(1)
            return np.int64(0)
        up = (frac >> (sm - 1)) & 1  # ties (f == 1/2) round up
        field = ef - sbias + dbias + up
        if field < 0:
            return np.int64(0)
        if field >= exp_all:
            return np.int64(exp_all)
        return field

    sgn = sign << width
    # Largest finite magnitude and the result of overflow, per style.
    if style == STYLE_IEEE:
        maxbits = (exp_all << dm) - 1
        ovf = sgn | (exp_all << dm)
    elif style == STYLE_FN:
        maxbits = (1 << width) - 2
        ovf = sgn | ((1 << width) - 1)
    elif style == STYLE_FNUZ:
        maxbits = (1 << width) - 1
        ovf = np.int64(1) << width
    else:  # STYLE_NONE: saturate
        maxbits = (1 << width) - 1
        ovf = sgn | maxbits

    if ef == s_all:
        if frac == 0:  # infinity
            return ovf
        # NaN
        if style == STYLE_IEEE:
            if flags & FLAG_ENCODE_PAYLOAD:
                pl = frac >> (sm - dm)
                if pl == 0:
                    pl = 1
                return sgn | (exp_all << dm) | pl
            return sgn | (exp_all << dm) | (1 << (dm - 1))
        if style == STYLE_FN:
            return sgn | ((1 << width) - 1)
        if style == STYLE_FNUZ:
            return np.int64(1) << width
        return (sign ^ 1) << width  # STYLE_NONE: ml_dtypes gives zero of opposite sign

    if mag == 0:
        if style == STYLE_FNUZ:
            return np.int64(0)
        return sgn

    if ef == 0:
        sig = frac
        e = 1 - sbias - sm
        p = sm - 1
        while (sig >> p) == 0:
            p -= 1
    else:
        sig = frac | (np.int64(1) << sm)
        e = ef - sbias - sm
        p = sm
    exp = p + e  # value = sig * 2**e, in [2**exp, 2**(exp+1))
    demin = 1 - dbias
    normal = exp >= demin
    if normal:
        q = exp - dm
    else:
        q = demin - dm
    shift = q - e
    if shift <= 0:
        n = sig << (-shift)
    elif shift >= p + 2:
        n = np.int64(0)  # below half the smallest step
    else:
        n = sig >> shift
        rem = sig - (n << shift)
        half = np.int64(1) << (shift - 1)
        if rem > half or (rem == half and (n & 1) == 1):
            n += 1
    if normal:
        mbits = ((exp + dbias - 1) << dm) + n  # a carry out of n bumps the exponent
    else:
        mbits = n  # n == 2**dm is the smallest normal, which is also right
    if mbits > maxbits:
        return ovf
    if mbits == 0 and style == STYLE_FNUZ:
        return np.int64(0)
    return sgn | mbits


# ---------------------------------------------------------------------------
# Array kernels: flat contiguous arrays; narrow side as a byte buffer (nb bytes/elt,
# little-endian), so one specialisation serves 8- and 16-bit formats.
# ---------------------------------------------------------------------------

@numba.njit(cache=True)
def _decode_kernel(inp, nb, out, de, dm, dbias, style, flags):
    n = out.shape[0]
    if nb == 1:
        for i in range(n):
            out[i] = np.uint32(decode_scalar(inp[i], de, dm, dbias, style, flags))
    else:
        for i in range(n):
            b = np.int64(inp[2 * i]) | (np.int64(inp[2 * i + 1]) << 8)
            out[i] = np.uint32(decode_scalar(b, de, dm, dbias, style, flags))


@numba.njit(cache=True)
def _encode_kernel(inp, se, sm, out, nb, de, dm, dbias, style, flags):
    n = inp.shape[0]
    if nb == 1:
        for i in range(n):
            out[i] = np.uint8(encode_scalar(inp[i], se, sm, de, dm, dbias, style, flags))
    else:
        for i in range(n):
            r = encode_scalar(inp[i], se, sm, de, dm, dbias, style, flags)
            out[2 * i] = np.uint8(r & 0xFF)
            out[2 * i + 1] = np.uint8((r >> 8) & 0xFF)


# The same loop as ``_encode_kernel`` with ``prange``, written twice on purpose: one
# Python function compiled with and without ``parallel=True`` would share one on-disk
# cache entry (Numba's cache index is keyed by the function's bytecode and signature,
# not its options), so one process could load the other's compiled code.
@numba.njit(cache=True, parallel=True)
def _encode_kernel_par(inp, se, sm, out, nb, de, dm, dbias, style, flags):
    n = inp.shape[0]
    if nb == 1:
        for i in prange(n):
            out[i] = np.uint8(encode_scalar(inp[i], se, sm, de, dm, dbias, style, flags))
    else:
        for i in prange(n):
            r = encode_scalar(inp[i], se, sm, de, dm, dbias, style, flags)
            out[2 * i] = np.uint8(r & 0xFF)
            out[2 * i + 1] = np.uint8((r >> 8) & 0xFF)


# ---------------------------------------------------------------------------
# Python wrappers.
# ---------------------------------------------------------------------------

_PARAMS: dict = {}


def format_params(et: ElementType) -> tuple[int, int, int, int, int]:
    """``(exponent_bits, mantissa_bits, bias, style_code, flags)`` of a narrow float type."""
    try:
        return _PARAMS[et.name]
    except KeyError:
        pass
    fmt = et.float_format
    if fmt is None or not et.is_narrow_float:
        raise TypeError(f"{et!r} is not a narrow float type")
    flags = 0
    if fmt.nan_style == "ieee" and fmt.mantissa_bits >= 7:
        flags |= FLAG_DECODE_PAYLOAD  # f16, bf16
    if et.dtype == np.dtype(np.float16):
        flags |= FLAG_ENCODE_PAYLOAD
    p = (fmt.exponent_bits, fmt.mantissa_bits, fmt.bias, _STYLE_CODES[fmt.nan_style], flags)
    _PARAMS[et.name] = p
    return p


def _as_et(et) -> ElementType:
    if isinstance(et, ElementType):
        return et
    return from_dtype(et)


def decode(bits: np.ndarray, et: ElementType) -> np.ndarray:
    """Bit patterns (any shape, uint8/uint16 or any same-width view) -> float32, exact."""
    et = _as_et(et)
    de, dm, dbias, style, flags = format_params(et)
    bits = np.asarray(bits)
    nb = et.dtype.itemsize
    if bits.dtype.itemsize != nb:
        raise TypeError(f"decode {et!r}: expected {nb}-byte bit patterns, got {bits.dtype}")
    if not bits.dtype.isnative:
        bits = bits.astype(bits.dtype.newbyteorder("="))
    shape = bits.shape
    if nb == 2 and bits.size >= TABLE_THRESHOLD:
        return _decode_table(et)[bits.view(np.uint16)]
    flat = np.ascontiguousarray(bits).reshape(-1)
    out = np.empty(flat.shape[0], np.uint32)
    if flat.shape[0]:
        _decode_kernel(flat.view(np.uint8), nb, out, de, dm, dbias, style, flags)
    return out.view(np.float32).reshape(shape)


_TABLES: dict = {}


def _decode_table(et: ElementType) -> np.ndarray:
    """float32 values of all 2**16 bit patterns of a 16-bit type (read-only, cached)."""
    tab = _TABLES.get(et.name)
    if tab is None:
        de, dm, dbias, style, flags = format_params(et)
        pats = np.arange(1 << 16, dtype=np.uint16)
        out = np.empty(1 << 16, np.uint32)
        _decode_kernel(pats.view(np.uint8), 2, out, de, dm, dbias, style, flags)
        tab = out.view(np.float32)
        tab.flags.writeable = False
        _TABLES[et.name] = tab
    return tab


def encode(values: np.ndarray, et: ElementType, via_f32: bool = False) -> np.ndarray:
    """float32/float64 values (any shape) -> bit patterns (``et.bits_dtype``).

    Rounds to nearest even once from the given precision. With ``via_f32=True`` a
    float64 source is first rounded to float32, as ml_dtypes' numpy casts do (except
    for f16, which numpy rounds directly); see the module docstring.
    """
    et = _as_et(et)
    de, dm, dbias, style, flags = format_params(et)
    values = np.asarray(values)
    if values.dtype not in (np.float32, np.float64):
        if values.dtype.kind == "V" or (values.dtype.kind == "f" and values.dtype.itemsize < 4):
            values = to_f32(values)  # narrow float source: exact widening
        else:
            values = values.astype(np.float64)
    if via_f32 and values.dtype == np.float64 and not (flags & FLAG_ENCODE_PAYLOAD):
        values = values.astype(np.float32)
    shape = values.shape
    flat = np.ascontiguousarray(values).reshape(-1)
    nb = et.dtype.itemsize
    n = flat.shape[0]
    out = np.empty(n * nb, np.uint8)
    if n:
        if flat.dtype == np.float32:
            src, se, sm = flat.view(np.uint32), 8, 23
        else:
            src, se, sm = flat.view(np.int64), 11, 52
        par = PARALLEL_THRESHOLD is not None and n >= PARALLEL_THRESHOLD
        kern = _encode_kernel_par if par else _encode_kernel
        kern(src, se, sm, out, nb, de, dm, dbias, style, flags)
    return out.view(et.bits_dtype).reshape(shape)


def to_f32(x) -> np.ndarray:
    """Array of a narrow float dtype (ml_dtypes or float16) -> float32 (exact)."""
    x = np.asarray(x)
    if x.dtype in (np.float32, np.float64):
        return x.astype(np.float32)
    et = from_dtype(x.dtype)
    return decode(x.view(et.bits_dtype), et)


def to_f64(x) -> np.ndarray:
    """Array of a narrow float dtype -> float64 (exact)."""
    x = np.asarray(x)
    if x.dtype in (np.float32, np.float64):
        return x.astype(np.float64)
    return to_f32(x).astype(np.float64)


def from_float(values: np.ndarray, et: ElementType, via_f32: bool = False) -> np.ndarray:
    """float32/float64 values -> array of ``et.dtype`` (see :func:`encode`)."""
    et = _as_et(et)
    return encode(values, et, via_f32=via_f32).view(et.dtype)


def cast_float(values: np.ndarray, et: ElementType, via_f32: bool = False) -> np.ndarray:
    """Any float array (narrow included) -> ``et.dtype``, rounding once.

    Narrow sources are widened exactly to float32 first; f32/f64 targets use numpy's
    ``astype``; narrow targets use :func:`encode` (``via_f32`` as there).
    """
    et = _as_et(et)
    values = np.asarray(values)
    if values.dtype not in (np.float32, np.float64):
        values = to_f32(values)
    if not et.is_narrow_float:
        return values.astype(et.dtype)
    return from_float(values, et, via_f32=via_f32)
