"""dot and convolution whose operand types differ from the result type (int8 matmuls,
integer operands of a float result, mixed float widths) on the GPU backend (fallback
disabled) against the cpu backend (bit for bit) and XLA:CPU."""

from __future__ import annotations

import numpy as np
import pytest

import hloref
from hloref.fuzz.compare import accumulation_atol
from hloref.types import element_type

from gpu_check import check, module, values

#: (lhs type, rhs type, result type)
MIXED = [("s8", "s8", "s32"), ("u8", "s8", "s32"), ("s8", "s8", "s16"), ("s32", "s32", "s8"),
         ("u8", "u8", "u32"), ("s8", "s8", "f32"), ("s32", "u16", "f32"), ("pred", "pred", "s32"),
         ("bf16", "f32", "f32"), ("f8e4m3fn", "bf16", "bf16"), ("s4", "s4", "s32")]


@pytest.mark.parametrize("t,tr", [("f32", "s32"), ("bf16", "s32"), ("f16", "u8")])
def test_float_operands_integer_result_by_hand(t, tr):
    """XLA's ConvolutionTypeCanonicalizer: the dot in f32, then a convert (toward zero,
    saturating): [[1.125, -1.3125], [5.25, 6.5]] -> [[1, -1], [5, 6]] ([[1, 0], [5, 6]]
    unsigned); the CPU backend's tests/test_ops_reduce_dot.py checks the same against
    XLA:CPU."""
    a = np.array([[1.5, 2.25, -0.75], [3.0, 0.5, 1.0]])
    b = np.array([[1.0, 2.0], [0.5, -1.5], [2.0, 1.25]])
    text = module([f"{t}[2,3]", f"{t}[3,2]"], "dot(p0, p1), lhs_contracting_dims={1}, "
                  "rhs_contracting_dims={0}", f"{tr}[2,2]")
    dt = element_type(t).dtype
    out = hloref.evaluate(text, a.astype(dt), b.astype(dt), backend="gpu", fallback=False)
    assert out.tolist() == ([[1, 0], [5, 6]] if tr[0] == "u" else [[1, -1], [5, 6]])


def test_float_convolution_integer_result_by_hand():
    """The same rule for convolution: [0.75, -2.5, 1.5] (*) [1.5, 1] (window 2) =
    [-1.375, -2.25] -> [-1, -2]."""
    text = module(["f32[1,1,3]", "f32[1,1,2]"], "convolution(p0, p1), window={size=2}, "
                  "dim_labels=bf0_oi0->bf0", "s32[1,1,2]")
    x = np.array([[[0.75, -2.5, 1.5]]], np.float32)
    w = np.array([[[1.5, 1.0]]], np.float32)
    out = hloref.evaluate(text, x, w, backend="gpu", fallback=False)
    assert out.tolist() == [[[-1, -2]]]


@pytest.mark.parametrize("ta,tb,tr", MIXED)
def test_dot_mixed_types(ta, tb, tr):
    a, b = values(ta, (3, 4, 5)), values(tb, (3, 5, 2))
    text = module([f"{ta}[3,4,5]", f"{tb}[3,5,2]"],
                  "dot(p0, p1), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, "
                  "rhs_contracting_dims={1}", f"{tr}[3,4,2]")
    float_result = tr[0] in "fb"
    atol = None
    if float_result:  # XLA accumulates in the result type, hloref in f64
        terms = np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64)))
        atol = accumulation_atol(5, terms, element_type(tr))
    check(text, a, b, opcode="dot", exact=not float_result or ta[0] in "sup",
          xla=False if "s4" in (ta, tb) else "required", atol=atol)


def test_int8_matmul_by_hand():
    a = np.array([[127, -128], [3, 4]], np.int8)
    b = np.array([[127, 1], [-128, 2]], np.int8)
    text = module(["s8[2,2]", "s8[2,2]"], "dot(p0, p1), lhs_contracting_dims={1}, "
                  "rhs_contracting_dims={0}", "s32[2,2]")
    out = hloref.evaluate(text, a, b, backend="gpu", fallback=False)
    assert out.tolist() == (a.astype(np.int64) @ b.astype(np.int64)).tolist()


def test_convolution_int8_to_s32():
    x, w = values("s8", (1, 2, 6)), values("s8", (3, 2, 3))
    text = module(["s8[1,2,6]", "s8[3,2,3]"], "convolution(p0, p1), window={size=3 pad=1_1}, "
                  "dim_labels=bf0_oi0->bf0", "s32[1,3,6]")
    check(text, x, w, opcode="convolution", xla="required")


#: (lhs, rhs, result, attrs): windows with padding, dilation, reversal and groups
CONVS = [
    ("[1,5,5,2]", "[3,3,2,4]", "[1,5,5,4]", "window={size=3x3 pad=1_1x1_1}, "
     "dim_labels=b01f_01io->b01f"),
    ("[2,4,7]", "[6,2,3]", "[2,6,2]", "window={size=3 stride=2 pad=0_-1}, "
     "dim_labels=bf0_oi0->bf0, feature_group_count=2"),
    ("[2,2,6]", "[3,2,2]", "[2,3,12]", "window={size=2 pad=2_1 lhs_dilate=2 rhs_dilate=2 "
     "rhs_reversal=1}, dim_labels=bf0_oi0->bf0"),
    ("[4,2,3]", "[4,2,2]", "[2,4,2]", "window={size=2}, dim_labels=bf0_oi0->bf0, "
     "batch_group_count=2"),
]


def _dims(text):
    return tuple(int(v) for v in text.strip("[]").split(","))


def _complex(t, dims, rng):
    v = rng.standard_normal(dims) + 1j * rng.standard_normal(dims)
    return v.astype(np.complex64 if t == "c64" else np.complex128)


@pytest.mark.parametrize("ta,tb,tr", [("c64", "c64", "c64"), ("c128", "c128", "c128"),
                                      ("f32", "c64", "c64"), ("s8", "c128", "c128")])
def test_convolution_complex(ta, tb, tr):
    rng = np.random.default_rng(7)
    for k, (ld, rd, od, attrs) in enumerate(CONVS):
        # finite values: infinities times complex parts make NaNs that depend on the order
        x = _complex(ta, _dims(ld), rng) if ta[0] == "c" else \
            values(ta, _dims(ld), kind="unit" if ta[0] == "f" else "small")
        w = _complex(tb, _dims(rd), rng)
        text = module([f"{ta}{ld}", f"{tb}{rd}"], f"convolution(p0, p1), {attrs}", f"{tr}{od}")
        # XLA:CPU and the cpu backend sum in other orders (c128 on the cpu)
        mag = (np.abs(x.astype(np.complex128)).max() * np.abs(w).max()) * 20
        atol = accumulation_atol(40, mag, element_type(tr))
        # XLA:CPU has no mixed real/complex convolution: those against the cpu backend
        out = check(text, x, w, opcode="convolution", exact=False, atol=atol,
                    xla="required" if ta == tb else False)
        if k == 0:  # by hand: one output element, the 3x3 window at (2, 2), feature 1
            want = sum(x[0, 2 + i - 1, 2 + j - 1, c].astype(np.complex128) * w[i, j, c, 1]
                       for i in range(3) for j in range(3) for c in range(2))
            np.testing.assert_allclose(out[0, 2, 2, 1], want, rtol=1e-5)


@pytest.mark.parametrize("ta", ["pred", "s8", "f32"])
def test_convolution_pred_result(ta):
    # pred results: the OR over the window of (x != 0) AND (w != 0), as the cpu backend
    for ld, rd, od, attrs in CONVS:
        x, w = values(ta, _dims(ld)), values(ta, _dims(rd))
        if ta != "pred":  # zeros, so that products vanish
            x.reshape(-1)[::3] = 0
            w.reshape(-1)[::2] = 0
        text = module([f"{ta}{ld}", f"{ta}{rd}"], f"convolution(p0, p1), {attrs}", f"pred{od}")
        out = check(text, x, w, opcode="convolution", xla="required" if ta == "pred" else False)
        if ld == "[1,5,5,2]":  # by hand at (0, 0): the window's valid taps
            want = any(bool(x[0, i - 1, j - 1, c]) and bool(w[i, j, c, 0])
                       for i in range(1, 3) for j in range(1, 3) for c in range(2))
            assert bool(out[0, 0, 0, 0]) == want
