"""Makers of the conversions: convert, bitcast-convert, reduce-precision and
stochastic-convert (``evaluator/convert.py`` and ``evaluator/bitwise_convert.py``)."""

from __future__ import annotations

from hypothesis import strategies as st

from hloref.shapes import ArrayShape
from hloref.types import ELEMENT_TYPES

from .builder import Builder


def make_convert(b: Builder):
    x = b.operand("fcsup")
    et = b.pick_type("fcsup") if b.draw(st.integers(0, 3)) else b.et(
        b.draw(st.sampled_from([t for t in b.cfg.types] or ["f32"])))
    if x.shape.element_type.is_complex and not et.is_complex:
        x = b.add("real", [x])
    return b.add("convert", [x], shape=ArrayShape(et, x.shape.dims))


def make_bitcast_convert(b: Builder):
    x = b.operand("fcsu")
    src = x.shape.element_type
    same = [t for t in b.cfg.types if ELEMENT_TYPES[t].bits == src.bits and not
            ELEMENT_TYPES[t].is_pred]
    smaller = [t for t in b.cfg.types if ELEMENT_TYPES[t].bits < src.bits and
               src.bits % ELEMENT_TYPES[t].bits == 0 and not ELEMENT_TYPES[t].is_pred
               and ELEMENT_TYPES[t].bits >= 8 and not ELEMENT_TYPES[t].is_complex]
    if smaller and not src.is_complex and b.draw(st.integers(0, 2)) == 0:
        et = b.et(b.draw(st.sampled_from(smaller)))
        dims = x.shape.dims + (src.bits // et.bits,)
        return b.add("bitcast-convert", [x], shape=ArrayShape(et, dims))
    et = b.et(b.draw(st.sampled_from(same))) if same else src
    return b.add("bitcast-convert", [x], shape=ArrayShape(et, x.shape.dims))


def make_reduce_precision(b: Builder):
    x = b.operand("f")
    fmt = x.shape.element_type.float_format
    e = b.draw(st.integers(1, max(1, fmt.exponent_bits)))
    m = b.draw(st.integers(0, fmt.mantissa_bits))
    return b.add("reduce-precision", [x], {"exponent_bits": e, "mantissa_bits": m})


def make_stochastic_convert(b: Builder):
    src = b.et(b.draw(st.sampled_from(["f32", "f16", "bf16", "f64"])))
    x = b.operand(et=src)
    bits = b.et({16: "u16", 32: "u32", 64: "u64"}[src.bits])
    r = b.operand(et=bits, dims=x.shape.dims)
    outs = [t for t in ("s8", "s16", "s32") if ELEMENT_TYPES[t].bits < src.bits]
    out = b.et(b.draw(st.sampled_from(outs or ["s8"])))
    return b.add("stochastic-convert", [x, r], shape=ArrayShape(out, x.shape.dims))
