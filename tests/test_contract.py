"""Where inputs leave XLA's contract (fuzz/contract.py): breaches and the unsigned
variant, with values derived by hand from the written semantics (two's complement
ranges, XLA's documented division and conversion cases)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import hloref
from hloref.fuzz.contract import contract_breaches, unsigned_arguments, unsigned_variant

ARITH = """HloModule m
ENTRY e {
  x = s32[3] parameter(0)
  y = s32[3] parameter(1)
  m = s32[3] multiply(x, y)
  s = s32[3] subtract(x, y)
  n = s32[3] negate(x)
  a = s32[3] abs(y)
  ROOT t = (s32[3], s32[3], s32[3], s32[3]) tuple(m, s, n, a)
}
"""


def _kinds(breaches):
    return {(b.instruction, b.kind): b for b in breaches}


def test_signed_overflow_of_each_op_is_reported_at_its_first_element():
    # 2^16 * 2^15 = 2^31 > 2^31 - 1; -2^31 - 1 < -2^31; -(-2^31) = 2^31; |-2^31| = 2^31
    x = np.array([5, 2 ** 16, -2 ** 31], np.int32)
    y = np.array([-2 ** 31, 2 ** 15, 1], np.int32)
    found = _kinds(contract_breaches(hloref.parse(ARITH), [x, y]))
    assert found[("m", "signed-overflow")].index == (0,)  # 5 * -2^31
    assert found[("m", "signed-overflow")].count == 2  # and 2^16 * 2^15
    assert found[("s", "signed-overflow")].index == (0,)  # 5 - (-2^31) = 2^31 + 5
    assert found[("s", "signed-overflow")].count == 2  # and -2^31 - 1
    assert found[("n", "signed-overflow")].index == (2,)
    assert found[("a", "signed-overflow")].index == (0,)
    assert "5, -2147483648" in found[("m", "signed-overflow")].detail


def test_in_range_arithmetic_and_unsigned_wrap_are_inside_the_contract():
    x = np.array([5, 2 ** 15, -2 ** 30], np.int32)
    y = np.array([-7, 2 ** 15 - 1, 1], np.int32)
    assert contract_breaches(hloref.parse(ARITH), [x, y]) == []
    text = ARITH.replace("s32", "u32").replace("  n = u32[3] negate(x)\n", "").replace(
        "  a = u32[3] abs(y)\n", "").replace("(u32[3], u32[3], u32[3], u32[3]) tuple(m, s, n, a)",
                                             "(u32[3], u32[3]) tuple(m, s)")
    big = np.array([2 ** 31, 3, 0], np.uint32)
    assert contract_breaches(hloref.parse(text), [big, big + 7]) == []  # wraps, defined


def test_division_by_zero_int_min_over_minus_one_shifts_and_conversions():
    text = """HloModule m
ENTRY e {
  x = s8[4] parameter(0)
  y = s8[4] parameter(1)
  f = f32[4] parameter(2)
  d = s8[4] divide(x, y)
  r = s8[4] remainder(x, y)
  l = s8[4] shift-left(x, y)
  c = s8[4] convert(f)
  ROOT t = (s8[4], s8[4], s8[4], s8[4]) tuple(d, r, l, c)
}
"""
    x = np.array([1, -128, 3, 4], np.int8)
    y = np.array([2, -1, 0, 8], np.int8)  # 8 >= the width of s8; -1 reads as 255
    f = np.array([127.9, -128.5, np.nan, -129.0], np.float32)  # trunc(-128.5) = -128 fits
    found = _kinds(contract_breaches(hloref.parse(text), [x, y, f]))
    assert found[("d", "integer-division-by-zero")].index == (2,)
    assert found[("d", "integer-division-overflow")].index == (1,)
    assert found[("r", "integer-division-by-zero")].index == (2,)
    assert found[("l", "shift-out-of-range")].index == (1,)
    assert found[("l", "shift-out-of-range")].count == 2
    assert found[("c", "convert-nan-to-integer")].index == (2,)
    assert found[("c", "convert-out-of-range")].index == (3,)
    assert found[("c", "convert-out-of-range")].count == 1


def test_breaches_inside_a_loop_body_name_the_body():
    text = """HloModule m
body {
  p = (s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  v = s32[] get-tuple-element(p), index=1
  one = s32[] constant(1)
  two = s32[] constant(2)
  i1 = s32[] add(i, one)
  v2 = s32[] multiply(v, two)
  ROOT q = (s32[], s32[]) tuple(i1, v2)
}
cond {
  p = (s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(40)
  ROOT c = pred[] compare(i, n), direction=LT
}
ENTRY e {
  x = s32[] parameter(0)
  z = s32[] constant(0)
  s = (s32[], s32[]) tuple(z, x)
  ROOT w = (s32[], s32[]) while(s), condition=cond, body=body
}
"""
    # 1 doubled: 2^30 * 2 = 2^31 is the 31st step's overflow; 40 steps never overflow i
    found = contract_breaches(hloref.parse(text), [np.int32(1)])
    assert [(b.computation, b.instruction, b.kind) for b in found] == \
        [("body", "v2", "signed-overflow")]
    assert "1073741824, 2" in found[0].detail
    assert contract_breaches(hloref.parse(text.replace("constant(40)", "constant(30)")),
                             [np.int32(1)]) == []


def test_power_rng_reduce_init_and_unstable_ties():
    text = """HloModule m
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
less { a = s32[] parameter(0)  b = s32[] parameter(1)  c = f32[] parameter(2)  d = f32[] parameter(3)
       ROOT l = pred[] compare(a, b), direction=LT }
ENTRY e {
  x = s16[2] parameter(0)
  y = s16[2] parameter(1)
  p = s16[2] power(x, y)
  st = u64[2] parameter(2)
  g = (u64[2], u32[4]) rng-bit-generator(st), algorithm=rng_default
  f = f32[3] parameter(3)
  one = f32[] constant(1)
  r = f32[] reduce(f, one), dimensions={0}, to_apply=add
  k = s32[3] parameter(4)
  srt = (s32[3], f32[3]) sort(k, f), dimensions={0}, to_apply=less
  ROOT t = (s16[2], (u64[2], u32[4]), f32[], (s32[3], f32[3])) tuple(p, g, r, srt)
}
"""
    x = np.array([2, 3], np.int16)
    y = np.array([15, -1], np.int16)  # 2^15 = 32768 > 32767; 3^-1
    k = np.array([1, 0, 1], np.int32)  # keys 1 and 1 tie, with f values 1 and 3
    f = np.array([1, 2, 3], np.float32)
    found = _kinds(contract_breaches(hloref.parse(text),
                                     [x, y, np.zeros(2, np.uint64), f, k]))
    assert found[("p", "signed-overflow")].index == (0,)
    assert found[("p", "integer-negative-exponent")].index == (1,)
    assert found[("g", "rng-default-algorithm")].index is None
    assert ("r", "reduce-init-not-identity") in found
    assert found[("srt", "unstable-sort-ties")].index == (1,)  # sorted: 0, 1, 1
    stable = text.replace("to_apply=less\n", "to_apply=less, is_stable=true\n")
    assert ("srt", "unstable-sort-ties") not in _kinds(
        contract_breaches(hloref.parse(stable), [x, y, np.zeros(2, np.uint64), f, k]))


def test_unsigned_variant_keeps_bits_and_wraps_where_the_signed_module_overflowed():
    module = hloref.parse(ARITH.replace("  n = s32[3] negate(x)\n", "").replace(
        "  a = s32[3] abs(y)\n", "").replace("(s32[3], s32[3], s32[3], s32[3]) tuple(m, s, n, a)",
                                             "(s32[3], s32[3]) tuple(m, s)"))
    variant = unsigned_variant(module)
    assert variant is not None and "s32" not in variant.to_text()
    x = np.array([5, 2 ** 16, -2 ** 31], np.int32)
    y = np.array([-7, 2 ** 15, 1], np.int32)
    m, s = hloref.evaluate(variant, *unsigned_arguments([x, y]))
    assert m.dtype == np.uint32
    # by hand, modulo 2^32: 5 * (2^32 - 7), 2^16 * 2^15 = 2^31, 2^31 * 1
    assert m.tolist() == [(5 * (2 ** 32 - 7)) % 2 ** 32, 2 ** 31, 2 ** 31]
    assert s.tolist() == [12, 2 ** 16 - 2 ** 15, 2 ** 31 - 1]
    assert contract_breaches(variant, unsigned_arguments([x, y])) == []


def test_unsigned_variant_rewrites_the_entry_layout_too():
    text = """HloModule m, entry_computation_layout={(s32[2]{0})->s32[2]{0}}
ENTRY e {
  x = s32[2]{0} parameter(0)
  ROOT n = s32[2]{0} negate(x)
}
"""
    variant = unsigned_variant(hloref.parse(text))
    assert variant is not None
    assert "entry_computation_layout={(u32[2]{0})->u32[2]{0}}" in variant.to_text()
    # -(1) and -(2^31) modulo 2^32
    x = unsigned_arguments([np.array([1, -2 ** 31], np.int32)])[0]
    assert hloref.evaluate(variant, x).tolist() == [2 ** 32 - 1, 2 ** 31]


def test_unsigned_variant_of_constants_and_signed_compare():
    text = """HloModule m
ENTRY e {
  x = s8[] parameter(0)
  k = s8[] constant(-1)
  ROOT c = pred[] compare(x, k), direction=LT, type=SIGNED
}
"""
    variant = unsigned_variant(hloref.parse(text))
    assert "u8[] constant(255)" in variant.to_text()
    assert "type=UNSIGNED" in variant.to_text()
    assert unsigned_variant(hloref.parse(text.replace("s8", "f32").replace(
        "constant(-1)", "constant(-1)").replace(", type=SIGNED", ""))) is None


def test_a_nan_read_bit_for_bit_is_reported_and_an_ordinary_compare_is_not():
    text = """HloModule m
ENTRY e {
  x = f32[3] parameter(0)
  b = s32[3] bitcast-convert(x)
  t = pred[3] compare(x, x), direction=LT, type=TOTALORDER
  f = pred[3] compare(x, x), direction=LT
  ROOT r = (s32[3], pred[3], pred[3]) tuple(b, t, f)
}
"""
    x = np.array([1, np.nan, 2], np.float32)
    found = _kinds(contract_breaches(hloref.parse(text), [x]))
    assert found[("b", "nan-bits-observed")].index == (1,)
    assert found[("t", "nan-bits-observed")].index == (1,)
    assert ("f", "nan-bits-observed") not in found
    assert contract_breaches(hloref.parse(text), [np.array([1, 2, 3], np.float32)]) == []


# Signed overflow inside an accumulation (fuzz/contract.py, `_accumulation_overflow`): each case's exact
# result by hand; the breach is reported only where it leaves the type's range.
_CONV_S16 = """HloModule c
ENTRY e {
  k = s16[] constant(%d)
  b = s16[2,2,4] broadcast(k), dimensions={}
  w = s16[2,2,1] constant({ { {6}, {6} }, { {-3}, {-2} } })
  ROOT c = s16[2,2,5] convolution(b, w), window={size=1 pad=1_1 lhs_dilate=2}, dim_labels=f0b_oi0->fb0, batch_group_count=2
}"""
_DOT_S8 = """HloModule d
ENTRY e {
  a = s8[2,3] parameter(0)
  b = s8[3,2] parameter(1)
  ROOT d = s8[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"""
_REDUCE_S4 = """HloModule r
add { x = s4[] parameter(0)  y = s4[] parameter(1)  ROOT s = s4[] add(x, y) }
ENTRY e {
  p = s4[4] parameter(0)
  z = s4[] constant(0)
  ROOT r = s4[] reduce(p, z), dimensions={0}, to_apply=add
}"""
_ONES_ROW0 = np.array([[1, 1], [0, 0], [0, 0]], np.int8)
ACCUMULATION_CASES = [
    # 12 x 32767 = 393,204 > 32,767 (and -5 x 32767 < -32,768): 8 elements
    ("conv-s16-overflows", _CONV_S16 % 32767, [], 8),
    ("conv-s16-fits", _CONV_S16 % 3, [], 0),                     # 12 x 3 = 36
    ("dot-s8-overflows", _DOT_S8, [np.full((2, 3), 100, np.int8), np.ones((3, 2), np.int8)], 4),
    ("dot-s8-fits", _DOT_S8, [np.full((2, 3), 100, np.int8), _ONES_ROW0], 0),  # 100
    ("reduce-s4-overflows", _REDUCE_S4, [np.array([3, 3, 3, -1], ml_dtypes.int4)], 1),  # 8 > 7
    ("reduce-s4-fits", _REDUCE_S4, [np.array([3, 3, -3, -1], ml_dtypes.int4)], 0),      # 2
]


@pytest.mark.parametrize("name,text,args,count", ACCUMULATION_CASES,
                         ids=[c[0] for c in ACCUMULATION_CASES])
def test_signed_overflow_inside_an_accumulation(name, text, args, count):
    found = [b for b in contract_breaches(text, args) if b.kind == "signed-overflow"]
    assert sum(b.count for b in found) == count, found
