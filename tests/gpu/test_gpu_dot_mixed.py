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
