"""Literal values in HLO text: float values of every element type against
ml_dtypes and numpy, shortest exact printing, integers, NaN payloads, and XLA's parser
agreeing on the printed text.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from hloref.parser import parse_literal, parse_shape
from hloref.printer import literal_to_text
from hloref.types import ELEMENT_TYPES

from parser_common import roundtrip


LITERAL_CASES = [
    ("f32", "0.1", 0.1), ("f32", "-1e-45", -1e-45), ("f32", "3.4028235e+38", 3.4028235e38),
    ("f16", "65504", 65504.0), ("f16", "65519", 65519.0), ("f16", "1e-8", 1e-8),
    ("bf16", "0.1", 0.1), ("bf16", "3.3895e38", 3.3895e38), ("f64", "1e308", 1e308),
    ("f8e4m3fn", "448", 448.0), ("f8e4m3fn", "0.3", 0.3), ("f8e5m2", "57344", 57344.0),
    ("f8e4m3", "240", 240.0), ("f8e3m4", "15.5", 15.5), ("f8e4m3fnuz", "-0", -0.0),
    ("f8e4m3b11fnuz", "30", 30.0), ("f8e5m2fnuz", "1e-5", 1e-5), ("f4e2m1fn", "6", 6.0),
    ("f4e2m1fn", "0.75", 0.75), ("f8e8m0fnu", "1024", 1024.0), ("f8e8m0fnu", "3", 3.0),
    ("f32", "inf", np.inf), ("f16", "-inf", -np.inf), ("f8e4m3fn", "nan", np.nan),
    # e8m0 has no zero: the NaN literal (which XLA's constant folder prints) must not be
    # read as the 0.0 that held its place
    ("f8e8m0fnu", "nan", np.nan),
]


@pytest.mark.parametrize("type_name,text,value", LITERAL_CASES)
def test_float_literal_values(type_name, text, value):
    et = ELEMENT_TYPES[type_name]
    got = parse_literal(text, f"{type_name}[]")
    with np.errstate(all="ignore"):
        want = np.array(value, dtype=np.float64).astype(et.dtype)
    assert got.dtype == et.dtype and got.shape == ()
    assert got.view(et.bits_dtype) == want.view(et.bits_dtype)
    # printed back, the literal reparses to the same bits
    again = parse_literal(literal_to_text(got, parse_shape(f"{type_name}[]")), f"{type_name}[]")
    assert again.view(et.bits_dtype) == got.view(et.bits_dtype)


def test_float_printing_shortest_and_exact():
    rng = np.random.default_rng(0)
    for name in ("f16", "bf16", "f32", "f64", "f8e4m3fn", "f8e5m2", "f8e4m3fnuz", "f4e2m1fn", "f8e8m0fnu"):
        et = ELEMENT_TYPES[name]
        nbits = et.bits_dtype.itemsize * 8
        bits = rng.integers(0, 2 ** min(nbits, 63), size=200, dtype=np.uint64).astype(et.bits_dtype)
        if name == "f4e2m1fn":
            bits = bits & 0xF
        arr = bits.view(et.dtype)
        shape = parse_shape(f"{name}[200]")
        text = literal_to_text(arr, shape)
        back = parse_literal(text, shape)
        np.testing.assert_array_equal(back.view(et.bits_dtype), arr.view(et.bits_dtype))
    assert literal_to_text(np.float32(0.1), parse_shape("f32[]")) == "0.1"
    assert literal_to_text(np.array(0.1, ml_dtypes.bfloat16), parse_shape("bf16[]")) == "0.1"
    assert literal_to_text(np.float32(1e10), parse_shape("f32[]")) == "1e+10"


def test_integer_literals():
    assert parse_literal("-128", "s8[]") == -128
    assert parse_literal("{-8, 7}", "s4[2]").astype(int).tolist() == [-8, 7]
    assert parse_literal("18446744073709551615", "u64[]") == np.uint64(2**64 - 1)
    assert parse_literal("-9223372036854775808", "s64[]") == np.iinfo(np.int64).min
    assert parse_literal("{1, 0}", "u1[2]").astype(int).tolist() == [1, 0]
    assert parse_literal("{{1,2,3},{4,5,6}}", "s32[2,3]{0,1}").tolist() == [[1, 2, 3], [4, 5, 6]]


def test_nan_payloads():
    assert parse_literal("nan(0x1)", "f16[]").view(np.uint16) == 0x7C01
    assert parse_literal("-nan(0x3ff)", "f16[]").view(np.uint16) == 0xFFFF
    assert parse_literal("nan(0x7f)", "bf16[]").view(np.uint16) == 0x7FFF
    assert parse_literal("nan(0x3)", "f8e5m2[]").view(np.uint8) == 0x7F
    assert parse_literal("nan", "f8e4m3fnuz[]").view(np.uint8) == 0x80
    assert parse_literal("nan", "f64[]").view(np.uint64) == 0x7FF8000000000000
    text = literal_to_text(parse_literal("{nan(0x1), -nan, nan}", "f16[3]"), parse_shape("f16[3]"))
    assert text == "{nan(0x1), -nan, nan}"


def test_xla_agrees_on_literal_text():
    """XLA parses the printed literals of every type (its printer, ours, same numbers)."""
    lines = []
    for i, (type_name, text, _) in enumerate(LITERAL_CASES):
        v = parse_literal(text, f"{type_name}[]")
        lines.append(f"  c{i} = {type_name}[] constant({literal_to_text(v, parse_shape(type_name + '[]'))})")
    lines.append("  ROOT r = f32[] constant(nan(0x1234))")
    roundtrip("HloModule lits\nENTRY e {\n" + "\n".join(lines) + "\n}\n")
