"""Bit-level conversions: ``bitcast-convert``, ``reduce-precision``, ``stochastic-convert``.

* ``bitcast-convert`` (operation_semantics §BitcastConvertType, HloEvaluator
  ``Literal::BitcastConvert``): the bits are reinterpreted. Same width: element by
  element. Different widths: converting to a type ``k`` times narrower adds a minor-most
  dimension of size ``k`` holding the pieces of each element, least significant piece
  first (little-endian, XLA's host order); converting to a ``k`` times wider type takes
  that minor dimension away again. Sub-byte types (s4/u4/s2/u2/s1/u1/f4e2m1fn) take
  part at their logical width: an ``s8`` becomes ``s4[..., 2]`` with the low nibble
  first. ``pred`` counts as 8 bits. Complex types are rejected, as XLA's shape
  inference does.
* ``reduce-precision`` (operation_semantics §ReducePrecision, XLA's
  ``EmitReducePrecisionIR``): works on the bit pattern. The mantissa is rounded to
  ``mantissa_bits`` with ties to even by adding a bias and truncating; then a value whose
  exponent is above the reduced range becomes ±inf and one at or below its bottom
  (``bias - (2**(exponent_bits-1) - 1)``, i.e. the reduced format has no subnormals)
  becomes ±0. NaN inputs are returned unchanged (also with ``mantissa_bits=0``, checked
  against XLA:CPU). Bit counts at or above the type's are
  no-ops for that part. f16/bf16/f32/f64 are processed on their own bit patterns; the
  fp8/fp4 types (no IEEE inf/NaN layout) are widened to f16 (f8e8m0fnu: f32), reduced
  there and rounded back, which is what XLA:CPU does (checked against jaxlib 0.10.2:
  f8e5m2 subnormals survive ``exponent_bits=5``; f8e4m3fn 352 -> NaN at
  ``exponent_bits=4``). NaN stays NaN; for f8e5m2 XLA:CPU's f16 -> f8 conversion writes
  0x7F for every NaN, we write ml_dtypes' canonical NaN with the sign kept.
* ``stochastic-convert(operand, random)`` (HloEvaluator ``StochasticConvertOp``; XLA:CPU's
  ``StochasticConvertDecomposer`` computes the same): float to signed integer. NaN → 0;
  values at or beyond the type's range (compared with the range limits rounded to the
  operand type) and ±inf saturate; otherwise ``|x|`` is split into its integer part and
  its fraction ``f``, and the magnitude rounds up when ``random < floor(f * 2**bits)``
  (``bits`` is the operand's width, the width of ``random``); the sign is then
  reapplied.
"""

from __future__ import annotations

import numba
import numpy as np

from hloref.errors import HloEvalError
from hloref.types import F16, F32

from . import narrow
from .numeric import contiguous, element_type_of, to_float64, wrap_int
from .registry import op


__all__ = ["bitcast_convert", "reduce_precision", "stochastic_convert",
           "reduce_precision_bits", "reduce_precision_scalar"]


# ---------------------------------------------------------------------------
# bitcast-convert
# ---------------------------------------------------------------------------

def _to_bits(x: np.ndarray, et) -> np.ndarray:
    """Logical bit patterns of ``x`` as uint64 (sub-byte types masked to their width)."""
    raw = x.view(et.bits_dtype).astype(np.uint64)
    if et.bits < et.storage_bits:
        raw &= np.uint64((1 << et.bits) - 1)
    return raw


def _from_bits(bits: np.ndarray, et) -> np.ndarray:
    """uint64 bit patterns (of width ``et.bits``) -> array of ``et``."""
    if et.is_pred:
        return bits != 0
    if et.bits < et.storage_bits:
        bits = bits & np.uint64((1 << et.bits) - 1)
        if et.is_integer:
            return wrap_int(bits.astype(np.int64), et)
        return bits.astype(np.uint8).view(et.dtype)
    return bits.astype(et.bits_dtype).view(et.dtype)


@op("bitcast-convert")
def bitcast_convert(x, *, shape):
    src, dst = element_type_of(x), shape.element_type
    if src.is_complex or dst.is_complex:
        if src == dst:  # the only complex form XLA accepts: the same type, bits unchanged
            return x.copy()
        raise HloEvalError(f"bitcast-convert between {src.name} and {dst.name}: XLA converts "
                           f"complex values only to the same complex type")
    if src.is_pred and dst.is_pred:
        return x.copy()
    ib, ob = src.bits, dst.bits
    if src.is_pred:
        bits = x.astype(np.uint64)
    else:
        bits = _to_bits(x, src)
    if ib == ob:
        out = bits
    elif ib > ob:
        if ib % ob:
            raise HloEvalError(f"bitcast-convert: {ib} bits is not a multiple of {ob}")
        k = ib // ob
        shifts = (np.arange(k, dtype=np.uint64) * np.uint64(ob))
        mask = np.uint64((1 << ob) - 1) if ob < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)
        out = (bits[..., None] >> shifts) & mask
    else:
        if ob % ib:
            raise HloEvalError(f"bitcast-convert: {ob} bits is not a multiple of {ib}")
        k = ob // ib
        if x.ndim == 0 or x.shape[-1] != k:
            raise HloEvalError(f"bitcast-convert from {src.name} to {dst.name}: the minor "
                               f"dimension must be {k}, got {list(x.shape)}")
        shifts = (np.arange(k, dtype=np.uint64) * np.uint64(ib))
        out = np.bitwise_or.reduce(bits << shifts, axis=-1)
    result = _from_bits(np.asarray(out, np.uint64), dst)
    # (same width: elementwise, the operand's dimensions; a comparator or reducer run on
    # whole arrays at once, reduce.VECTORIZABLE, passes arrays for its scalars)
    if ib != ob and tuple(result.shape) != tuple(shape.dims):
        raise HloEvalError(f"bitcast-convert computed dimensions {list(result.shape)}, the "
                           f"instruction says {list(shape.dims)}")
    return contiguous(result)


# ---------------------------------------------------------------------------
# reduce-precision
# ---------------------------------------------------------------------------

@numba.njit(cache=True)
def reduce_precision_scalar(x, width, se, sm, de, dm):
    """Bit pattern ``x`` (uint64) of an IEEE format (width, se exponent bits, sm mantissa
    bits) reduced to ``de`` exponent bits and ``dm`` mantissa bits; returns the pattern."""
    one = np.uint64(1)
    sign = one << np.uint64(width - 1)
    exp_mask = ((one << np.uint64(se)) - one) << np.uint64(sm)
    man_mask = (one << np.uint64(sm)) - one
    is_nan = (x & exp_mask) == exp_mask and (x & man_mask) != 0
    orig = x
    if dm < sm:
        shift = np.uint64(sm - dm)
        last = one << shift
        bias = (last >> one) - one + ((x & last) >> shift)
        x = (x + bias) & ~(last - one)
        if width < 64:
            x &= (one << np.uint64(width)) - one
    if de < se:
        x_exp = x & exp_mask
        src_bias = (1 << (se - 1)) - 1
        red_bias = (1 << (de - 1)) - 1
        max_e = np.uint64(src_bias + red_bias)
        min_e = np.uint64(src_bias - red_bias)
        if x_exp > (max_e << np.uint64(sm)):
            x = (x & sign) | exp_mask
        elif x_exp <= (min_e << np.uint64(sm)):
            x = x & sign
    if is_nan:
        x = orig
    return x


@numba.njit(cache=True)
def _reduce_precision_kernel(inp, out, width, se, sm, de, dm):
    for i in range(inp.shape[0]):
        out[i] = reduce_precision_scalar(inp[i], width, se, sm, de, dm)


def reduce_precision_bits(bits: np.ndarray, width: int, se: int, sm: int, de: int, dm: int):
    """Vector form of :func:`reduce_precision_scalar` on a uint64 array."""
    flat = np.ascontiguousarray(bits, dtype=np.uint64).reshape(-1)
    out = np.empty_like(flat)
    if flat.size:
        _reduce_precision_kernel(flat, out, width, se, sm, de, dm)
    return out.reshape(np.shape(bits))


_IEEE_NATIVE = {"f16", "bf16", "f32", "f64"}


def reduce_precision_bits_of(et, exponent_bits, mantissa_bits) -> tuple[int, int]:
    """reduce-precision's ``(exponent_bits, mantissa_bits)`` for an operand of ``et``,
    checked."""
    if not et.is_float:
        raise HloEvalError(f"reduce-precision takes a float operand, got {et.name}")
    de, dm = int(exponent_bits), int(mantissa_bits)
    if de < 1 or dm < 0:
        raise HloEvalError(f"reduce-precision: exponent_bits={de}, mantissa_bits={dm}")
    return de, dm


@op("reduce-precision")
def reduce_precision(x, *, exponent_bits, mantissa_bits, shape=None):
    et = element_type_of(x)
    de, dm = reduce_precision_bits_of(et, exponent_bits, mantissa_bits)
    fmt = et.float_format
    if et.name in _IEEE_NATIVE:
        se, sm, width = fmt.exponent_bits, fmt.mantissa_bits, et.bits
        bits = x.view(et.bits_dtype).astype(np.uint64)
        out = reduce_precision_bits(bits, width, se, sm, min(de, se), min(dm, sm))
        return out.astype(et.bits_dtype).view(et.dtype).reshape(x.shape)
    # fp8/fp4: as XLA:CPU does, widen exactly to f16 (f32 for f8e8m0fnu, whose range f16
    # lacks), reduce there, and round back to the type. So f8e4m3fn with exponent_bits=4
    # still overflows past the IEEE e4 range (-> NaN, the type has no inf) and flushes
    # its subnormals, while f8e5m2 with exponent_bits=5 keeps its subnormals (f16's
    # exponent is 5 bits too).
    wide_et = F16 if fmt.exponent_bits <= 5 else F32
    wf = wide_et.float_format
    wide = narrow.to_f32(x).astype(wide_et.dtype)  # exact
    bits = wide.view(wide_et.bits_dtype).astype(np.uint64)
    out = reduce_precision_bits(bits, wide_et.bits, wf.exponent_bits, wf.mantissa_bits,
                                min(de, wf.exponent_bits), min(dm, wf.mantissa_bits))
    out = out.astype(wide_et.bits_dtype).view(wide_et.dtype).reshape(x.shape)
    return narrow.from_float(out.astype(np.float32), et)


# ---------------------------------------------------------------------------
# stochastic-convert
# ---------------------------------------------------------------------------

def check_stochastic_convert(src, rt, dst) -> None:
    """stochastic-convert's types: a float operand ``src``, random bits ``rt`` of its
    width, a signed integer result ``dst``."""
    if not src.is_float:
        raise HloEvalError(f"stochastic-convert takes a float operand, got {src.name}")
    if not rt.is_unsigned_integer or rt.bits != src.bits:
        raise HloEvalError(f"stochastic-convert: random bits must be u{src.bits}, got {rt.name}")
    if not dst.is_signed_integer:
        raise HloEvalError(f"stochastic-convert to {dst.name} is not supported "
                           f"(XLA converts to signed integers only)")


def stochastic_limits(src, dst) -> tuple[int, int, float, float]:
    """``(lo, hi)`` of ``dst`` and the same limits as the operand type ``src`` sees them
    (``static_cast<Fp>``: rounded to nearest), as floats."""
    lo, hi = dst.min_value, dst.max_value
    f_lo = float(to_float64(_round_to(np.float64(lo), src)))
    f_hi = float(to_float64(_round_to(np.float64(hi), src)))
    return lo, hi, f_lo, f_hi


@op("stochastic-convert")
def stochastic_convert(x, random, *, shape):
    src, dst = element_type_of(x), shape.element_type
    rt = element_type_of(random)
    check_stochastic_convert(src, rt, dst)
    lo, hi, f_lo, f_hi = stochastic_limits(src, dst)
    v = to_float64(x)
    with np.errstate(all="ignore"):
        nan = np.isnan(v)
        neg = np.signbit(v)
        mag = np.where(nan, 0.0, np.abs(v))
        sat_hi = ~nan & (v >= f_hi)
        sat_lo = ~nan & (v <= f_lo)
        mag = np.where(sat_hi | sat_lo, 0.0, mag)
        whole = np.floor(mag)
        frac = mag - whole
        fixed = np.floor(np.ldexp(frac, src.bits)).astype(np.uint64)
        up = random.astype(np.uint64) < fixed
        t = whole.astype(np.int64) + up.astype(np.int64)
        t = np.where(neg, -t, t)
        t = np.where(sat_hi, hi, np.where(sat_lo, lo, t))
        t = np.where(nan, 0, t)
    return wrap_int(np.asarray(t, np.int64), dst).reshape(x.shape)


def _round_to(value: np.float64, et) -> np.ndarray:
    arr = np.asarray(value, np.float64)
    if et.is_narrow_float:
        return narrow.from_float(arr, et)
    return arr.astype(et.dtype)
