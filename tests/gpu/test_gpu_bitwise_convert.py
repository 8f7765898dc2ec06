"""bitcast-convert, reduce-precision and stochastic-convert on the GPU backend (fallback
disabled) against the cpu backend (bit for bit), XLA:CPU, and numpy/ml_dtypes views."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import hloref
from hloref.types import element_type

from gpu_check import RNG, check, module, values

#: same-width pairs, and (wide, narrow) pairs split into / joined from pieces
SAME_WIDTH = [("f32", "s32"), ("s32", "f32"), ("u32", "f32"), ("f64", "u64"), ("s64", "f64"),
              ("bf16", "s16"), ("u16", "f16"), ("f8e4m3fn", "u8"), ("s8", "f8e5m2"),
              ("u8", "s8"), ("f16", "bf16")]
SPLIT = [("f32", "u8"), ("f64", "s16"), ("u64", "f32"), ("s32", "bf16"), ("f16", "s8"),
         ("s8", "s4"), ("u16", "u4")]


def _sub_byte(t):
    return t in ("s4", "u4")


def test_bitcast_convert_same_width():
    for src, dst in SAME_WIDTH:
        x = values(src, (4, 5))
        out = check(module([f"{src}[4,5]"], "bitcast-convert(p0)", f"{dst}[4,5]"), x,
                    xla="required")
        # independent: numpy's view of the same bytes
        assert out.tobytes() == x.tobytes(), (src, dst)


def test_bitcast_convert_split_and_join():
    for wide, narrow in SPLIT:
        k = element_type(wide).bits // element_type(narrow).bits
        x = values(wide, (3, 2))
        xla = False if _sub_byte(narrow) else "required"
        pieces = check(module([f"{wide}[3,2]"], "bitcast-convert(p0)", f"{narrow}[3,2,{k}]"), x,
                       xla=xla)
        back = check(module([f"{narrow}[3,2,{k}]"], "bitcast-convert(p0)", f"{wide}[3,2]"),
                     pieces, xla=xla)
        assert back.tobytes() == x.tobytes()
        if not _sub_byte(narrow):  # little-endian pieces: numpy's view of the bytes
            assert pieces.tobytes() == x.tobytes()


def test_bitcast_convert_sub_byte_by_hand():
    out = hloref.evaluate(module(["u8[2]"], "bitcast-convert(p0)", "s4[2,2]"),
                          np.array([0x9F, 0x07], np.uint8), backend="gpu", fallback=False)
    assert out.astype(np.int8).tolist() == [[-1, -7], [7, 0]]  # low nibble first


def test_bitcast_convert_pred_and_complex():
    # pred counts as 8 bits (the cpu backend, HloEvaluator); XLA:CPU's StableHLO import
    # rejects a pred bitcast, so these are checked by hand
    p = np.array([True, False, True, True, False, False])
    out = check(module(["pred[6]"], "bitcast-convert(p0)", "u8[6]"), p, xla=False)
    assert out.tolist() == [1, 0, 1, 1, 0, 0]
    out = check(module(["u8[6]"], "bitcast-convert(p0)", "pred[6]"),
                np.array([0, 1, 2, 0, 255, 1], np.uint8), xla=False)
    assert out.tolist() == [False, True, True, False, True, True]
    z = (RNG.standard_normal(4) + 1j).astype(np.complex64)
    check(module(["c64[4]"], "bitcast-convert(p0)", "c64[4]"), z, xla="required")


RP_TYPES = ["f32", "f64", "bf16", "f16", "f8e4m3fn", "f8e5m2", "f8e4m3fnuz"]
RP_BITS = [(8, 7), (5, 10), (4, 3), (5, 2), (2, 0), (11, 52), (3, 1)]


@pytest.mark.parametrize("t", RP_TYPES)
def test_reduce_precision(t):
    x = values(t, (8, 8))
    flat = x.reshape(-1)
    flat[8:16] = np.array([1e-3, -3e-5, 65504, 1e5, 6e-8, 0.1, 2.5, 255.9]).astype(np.float32).astype(x.dtype)
    for e, m in RP_BITS:
        text = module([f"{t}[8,8]"], f"reduce-precision(p0), exponent_bits={e}, mantissa_bits={m}",
                      f"{t}[8,8]")
        check(text, x, xla="required")


def test_reduce_precision_matches_ml_dtypes():
    # f32 reduced to bf16's (8, 7) and f16's (5, 10) formats is the value rounded to them,
    # for normal values in range
    x = (RNG.standard_normal(64) * 100).astype(np.float32)
    for (e, m), dt in [((8, 7), ml_dtypes.bfloat16), ((5, 10), np.float16)]:
        text = module(["f32[64]"], f"reduce-precision(p0), exponent_bits={e}, mantissa_bits={m}",
                      "f32[64]")
        out = hloref.evaluate(text, x, backend="gpu", fallback=False)
        assert np.array_equal(out, x.astype(dt).astype(np.float32))


@pytest.mark.parametrize("src,dst", [("f32", "s32"), ("f32", "s8"), ("bf16", "s16"),
                                     ("f16", "s32"), ("f64", "s64")])
def test_stochastic_convert(src, dst):
    x = values(src, (6, 6))
    flat = x.reshape(-1)
    flat[8:14] = np.array([2.5, -2.5, 1e9, -1e9, 0.75, -127.9]).astype(np.float32).astype(x.dtype)
    r = values(f"u{element_type(src).bits}", (6, 6))
    check(module([f"{src}[6,6]", f"u{element_type(src).bits}[6,6]"], "stochastic-convert(p0, p1)",
                 f"{dst}[6,6]"), x, r, xla="required")


def test_stochastic_convert_by_hand():
    # 2.25: fraction 0.25 -> rounds up when random < 0.25 * 2**32
    x = np.array([2.25, 2.25, -2.25, -2.25, np.nan, 1e10], np.float32)
    r = np.array([2 ** 30 - 1, 2 ** 30, 0, 2 ** 31, 0, 0], np.uint32)
    out = hloref.evaluate(module(["f32[6]", "u32[6]"], "stochastic-convert(p0, p1)", "s32[6]"),
                          x, r, backend="gpu", fallback=False)
    assert out.tolist() == [3, 2, -3, -2, 0, 2 ** 31 - 1]
