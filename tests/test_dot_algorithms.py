"""``dot`` ``algorithm=`` emulation, against values built by hand with ml_dtypes.

XLA:CPU ignores these algorithms (it computes a full f32 dot; a known gap in
``fuzz/compare.py``), so the reference is the algorithm's definition: split each f32
operand into bf16 (or TF32/f16) parts and sum the algorithm's partial products.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import hloref


def _module(alg):
    return f"""HloModule m
ENTRY e {{
  a = f32[4,32] parameter(0)
  b = f32[32,5] parameter(1)
  ROOT d = f32[4,5] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}, algorithm={alg}
}}"""


def _bf16_parts(x, n):
    parts, rest = [], x.astype(np.float64)
    for _ in range(n):
        p = rest.astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)
        parts.append(p)
        rest = rest - p
    return parts


@pytest.mark.parametrize("alg, n, pairs", [
    ("dot_bf16_bf16_f32", 1, [(0, 0)]),
    ("dot_bf16_bf16_f32_x3", 2, [(0, 0), (0, 1), (1, 0)]),
    ("dot_bf16_bf16_f32_x6", 3, [(0, 0), (0, 1), (1, 0), (0, 2), (1, 1), (2, 0)]),
    ("dot_bf16_bf16_f32_x9", 3, [(i, j) for i in range(3) for j in range(3)]),
])
def test_bf16_split_algorithms(alg, n, pairs):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((4, 32)).astype(np.float32)
    b = rng.standard_normal((32, 5)).astype(np.float32)
    ap, bp = _bf16_parts(a, n), _bf16_parts(b, n)
    expected = sum(ap[i] @ bp[j] for i, j in pairs)
    got = hloref.evaluate(_module(alg), a, b)
    np.testing.assert_allclose(got, expected.astype(np.float32), rtol=2e-7, atol=1e-6)
    exact = a.astype(np.float64) @ b
    # more passes, closer to the exact product
    assert np.abs(got - exact).max() <= {1: 0.2, 2: 1e-3, 3: 1e-5}[n]


def test_tf32_rounds_operands_to_ten_mantissa_bits():
    a = np.array([[1 + 2 ** -11 + 2 ** -20]], np.float32)  # rounds up to 1 + 2**-10 in TF32
    b = np.array([[1.0]], np.float32)
    text = _module("dot_tf32_tf32_f32").replace("f32[4,32]", "f32[1,1]").replace(
        "f32[32,5]", "f32[1,1]").replace("f32[4,5]", "f32[1,1]")
    assert hloref.evaluate(text, a, b).item() == np.float32(1 + 2 ** -10)
