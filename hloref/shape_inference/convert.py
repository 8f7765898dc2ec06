"""Shape rules of the converting ops: convert, bitcast-convert, stochastic-convert, reduce-precision."""

from __future__ import annotations

from ..shapes import Shape
from ..types import ElementType
from .common import ShapeError, as_array, expect_kind, infer, make_array, required, shape_str


@infer("convert")
def infer_convert(operand: Shape, *, result_element_type: ElementType | None = None, **_):
    """``convert``: any array type to ``result_element_type`` (required); same dims.
    Complex to real or integer types too (XLA's ``InferConvertShape`` checks only that
    both are arrays; XLA:CPU keeps the real part)."""
    a = as_array(operand, "convert operand")
    et = required(result_element_type, "result_element_type")
    if not et.is_array:
        raise ShapeError(f"convert: result element type must be an array type, got {et.name}")
    return make_array(et, a.dims)


@infer("bitcast-convert")
def infer_bitcast_convert(operand: Shape, *, result_element_type: ElementType | None = None, **_):
    """``bitcast-convert``: equal bit widths keep dims; a narrower result adds a minor
    dimension of size in_bits/out_bits; a wider result drops the minor dimension,
    which must be out_bits/in_bits."""
    a = as_array(operand, "bitcast-convert operand")
    et = required(result_element_type, "result_element_type")
    if not et.is_array:
        raise ShapeError(f"bitcast-convert: result element type must be an array type, got {et.name}")
    if a.element_type.is_complex != et.is_complex:
        # XLA's InferBitcastConvertShape: "Conversion between complex and real type"
        raise ShapeError(f"bitcast-convert: no conversion between complex and real types "
                         f"({a.element_type.name} to {et.name})")
    ib, ob = a.element_type.bits, et.bits
    if ib == ob:
        return make_array(et, a.dims)
    if ib > ob:
        if ib % ob:
            raise ShapeError(f"bitcast-convert: {ib} bits is not a multiple of {ob} bits")
        return make_array(et, a.dims + (ib // ob,))
    if ob % ib:
        raise ShapeError(f"bitcast-convert: {ob} bits is not a multiple of {ib} bits")
    if not a.dims or a.dims[-1] != ob // ib:
        raise ShapeError(f"bitcast-convert from {a.element_type.name} to {et.name}: the operand's "
                         f"minor dimension must be {ob // ib}, got {shape_str(a)}")
    return make_array(et, a.dims[:-1])


@infer("stochastic-convert")
def infer_stochastic_convert(operand: Shape, random: Shape, *,
                             result_element_type: ElementType | None = None, **_):
    """``stochastic-convert(operand, random)``: float operand, unsigned random bits of
    the same width and dims; result dims of the operand."""
    a = as_array(operand, "stochastic-convert operand")
    r = as_array(random, "stochastic-convert random")
    et = required(result_element_type, "result_element_type")
    expect_kind(a.element_type, "f", "stochastic-convert")
    if not r.element_type.is_unsigned_integer or r.element_type.bits != a.element_type.bits:
        raise ShapeError(f"stochastic-convert: random bits must be u{a.element_type.bits}, "
                         f"got {r.element_type.name}")
    if r.dims != a.dims:
        raise ShapeError(f"stochastic-convert: random dims {list(r.dims)} must equal operand dims "
                         f"{list(a.dims)}")
    return make_array(et, a.dims)


@infer("reduce-precision")
def infer_reduce_precision(operand: Shape, *, exponent_bits=None, mantissa_bits=None, **_):
    """``reduce-precision``: float operand, exponent_bits >= 1, mantissa_bits >= 0."""
    a = as_array(operand, "reduce-precision operand")
    expect_kind(a.element_type, "f", "reduce-precision")
    e = required(exponent_bits, "exponent_bits")
    m = required(mantissa_bits, "mantissa_bits")
    if int(e) < 1:
        raise ShapeError(f"reduce-precision: exponent_bits must be >= 1, got {e}")
    if int(m) < 0:
        raise ShapeError(f"reduce-precision: mantissa_bits must be >= 0, got {m}")
    return make_array(a.element_type, a.dims)
