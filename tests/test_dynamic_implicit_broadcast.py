"""Elementwise ops on dynamic operands whose runtime sizes differ: XLA's dynamic
dimension inference broadcasts a size-1 operand against a larger one and otherwise
keeps the smaller size (XLA's own ``dynamic_padder_test.cc``, DynamicAddWithImplicit
Broadcast / ImplicitSlice, expects [9, 9] and [6, 6]). Checked against XLA:CPU and by
hand."""

from __future__ import annotations

import numpy as np
import pytest

import hloref

TEMPLATE = """HloModule module
update_s32 {
  lhs = s32[] parameter(0)
  rhs = s32[] parameter(1)
  ROOT add = s32[] add(lhs, rhs)
}
ENTRY entry {
  zero = s32[] constant(0)
  n1 = s32[] constant(N1)
  n2 = s32[] constant(N2)
  one = s32[] constant(1)
  two = s32[] constant(2)
  input1 = s32[4,2] iota(), iota_dimension=0
  ones = s32[4,2] broadcast(one), dimensions={}
  input1_added = s32[4,2] add(input1, ones)
  input1_dynamic = s32[<=4,2] set-dimension-size(input1_added, n1), dimensions={0}
  input2 = s32[4,2] broadcast(two), dimensions={}
  input2_dynamic = s32[<=4,2] set-dimension-size(input2, n2), dimensions={0}
  add = s32[<=4,2] OP(input1_dynamic, input2_dynamic)
  ROOT reduce = s32[2] reduce(add, zero), dimensions={0}, to_apply=update_s32
}
"""

# (n1, n2, op, by hand): rows of input1 are 1, 2, 3, 4; input2 is 2 everywhere.
CASES = [
    (1, 3, "add", 9),       # row [1] broadcast to 3 rows: 3 * (1 + 2)
    (3, 1, "add", 12),      # (1+2) + (2+2) + (3+2)
    (3, 2, "add", 7),       # implicit slice to 2 rows: (1+2) + (2+2)
    (2, 4, "multiply", 6),  # 2 rows: 1*2 + 2*2
    # A size equal to the bound is static (XLA:CPU agrees): only the dynamic operand's
    # size counts, no broadcast: 1 - 2 once.
    (1, 4, "subtract", -1),
    (4, 1, "subtract", -1),
    (1, 1, "add", 3),
]


@pytest.mark.parametrize("n1,n2,op,want", CASES)
def test_elementwise_sizes_like_xla(n1, n2, op, want):
    text = TEMPLATE.replace("N1", str(n1)).replace("N2", str(n2)).replace("OP", op)
    ours = hloref.evaluate(text)
    np.testing.assert_array_equal(ours, [want, want])
    from hloref.fuzz.oracles.xla import available, run_hlo
    if available():
        np.testing.assert_array_equal(run_hlo(text), ours)
