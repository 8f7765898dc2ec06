"""``E(n)`` packing of sub-byte element types in ``bitcast`` (``evaluator/shape_ops.py``).

XLA's packed format (``xla/util.h`` ``PackIntN``/``UnpackIntN``): ``8/n`` elements a
byte, element ``j`` of a byte at bit ``n * (8/n - j - 1)`` (the first element in the
most significant bits), the last partial byte zero-filled. XLA:CPU's oracle refuses
``bitcast``, so the expected values are written from that definition by hand.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hloref
from hloref.errors import HloEvalError


def _module(src, dst):
    return f"""HloModule m
ENTRY e {{
  p = {src} parameter(0)
  ROOT b = {dst} bitcast(p)
}}
"""


def test_u8_to_s4_packed_by_hand():
    got = hloref.evaluate(_module("u8[4]", "s4[8]{0:E(4)}"),
                          np.array([0x12, 0xF8, 0x7A, 0x00], np.uint8))
    assert got.dtype == np.dtype(ml_dtypes.int4)
    np.testing.assert_array_equal(got.astype(np.int8), [1, 2, -1, -8, 7, -6, 0, 0])


def test_s4_packed_to_u8_by_hand():
    x = np.array([1, 2, -1, -8, 7, -6, 0, 3], ml_dtypes.int4)
    got = hloref.evaluate(_module("s4[8]{0:E(4)}", "u8[4]"), x)
    np.testing.assert_array_equal(got, [0x12, 0xF8, 0x7A, 0x03])


def test_u2_and_u1_packing_by_hand():
    x = np.array([3, 0, 1, 2, 2, 2, 2, 2], ml_dtypes.uint2)
    got = hloref.evaluate(_module("u2[8]{0:E(2)}", "u8[2]"), x)
    np.testing.assert_array_equal(got, [0b11000110, 0b10101010])
    bits = hloref.evaluate(_module("u8[1]", "u1[8]{0:E(1)}"), np.array([0b10110001], np.uint8))
    np.testing.assert_array_equal(bits.astype(np.uint8), [1, 0, 1, 1, 0, 0, 0, 1])


def test_wider_word_and_layout_order():
    # u16 little-endian in memory: 0xABCD -> bytes CD AB -> nibbles C D A B
    got = hloref.evaluate(_module("u16[1]", "u4[2,2]{1,0:E(4)}"), np.array([0xABCD], np.uint16))
    np.testing.assert_array_equal(got.astype(np.uint8), [[0xC, 0xD], [0xA, 0xB]])
    # column-major result layout: memory order fills dimension 0 first
    got = hloref.evaluate(_module("u16[1]", "u4[2,2]{0,1:E(4)}"), np.array([0xABCD], np.uint16))
    np.testing.assert_array_equal(got.astype(np.uint8), [[0xC, 0xA], [0xD, 0xB]])


def test_f4_packed_to_u8():
    x = np.array([-6.0, 0.5, 1.0, 0.0], ml_dtypes.float4_e2m1fn)  # codes F, 1, 2, 0
    got = hloref.evaluate(_module("f4e2m1fn[4]{0:E(4)}", "u8[2]"), x)
    np.testing.assert_array_equal(got, [0xF1, 0x20])


def test_odd_count_pads_the_last_byte():
    x = np.array([5, 6, 7], ml_dtypes.uint4)
    got = hloref.evaluate(_module("u4[3]{0:E(4)}", "u8[2]"), x)
    np.testing.assert_array_equal(got, [0x56, 0x70])


def test_size_mismatch_is_an_error():
    with pytest.raises(HloEvalError):
        hloref.evaluate(_module("u8[3]", "s4[8]{0:E(4)}"), np.zeros(3, np.uint8))


def test_unpacked_sub_byte_bitcast_is_one_byte_per_element():
    x = np.array([-1, 2], ml_dtypes.int4)
    got = hloref.evaluate(_module("s4[2]", "u4[2]"), x)
    np.testing.assert_array_equal(got.astype(np.uint8), [15, 2])


@settings(max_examples=30, deadline=None, derandomize=True)
@given(bits=st.sampled_from([1, 2, 4]), nbytes=st.integers(1, 6), signed=st.booleans(),
       data=st.data())
def test_round_trip_and_definition(bits, nbytes, signed, data):
    raw = np.array(data.draw(st.lists(st.integers(0, 255), min_size=nbytes, max_size=nbytes)),
                   np.uint8)
    count = nbytes * 8 // bits
    tname = f"{'s' if signed else 'u'}{bits}"
    packed = f"{tname}[{count}]{{0:E({bits})}}"
    vals = hloref.evaluate(_module(f"u8[{nbytes}]", packed), raw)
    # by hand: element i is bits [8 - bits*(j+1), 8 - bits*j) of byte i // per
    per = 8 // bits
    want = []
    for i in range(count):
        b = (int(raw[i // per]) >> (bits * (per - 1 - i % per))) & ((1 << bits) - 1)
        if signed and b >= 1 << (bits - 1):
            b -= 1 << bits
        want.append(b)
    np.testing.assert_array_equal(vals.astype(np.int8), want)
    back = hloref.evaluate(_module(packed, f"u8[{nbytes}]"), vals)
    np.testing.assert_array_equal(back, raw)
