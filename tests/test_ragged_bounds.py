"""ragged-all-to-all's row blocks are checked against the sender's data and the
receiver's output on the CPU as on the GPU (``evaluator.collectives.ragged_blocks``):
an offset or size past either end is an error naming the rows, never a silent clamp
or a negative index counted from the end."""

from __future__ import annotations

import numpy as np
import pytest

import hloref
from hloref.errors import HloEvalError

TEXT = """HloModule m
ENTRY e {
  d = f32[2,2] parameter(0)
  o = f32[3,2] parameter(1)
  io = s32[1] parameter(2)
  ss = s32[1] parameter(3)
  oo = s32[1] parameter(4)
  rs = s32[1] parameter(5)
  ROOT ra = f32[3,2] ragged-all-to-all(d, o, io, ss, oo, rs), replica_groups={{0}}
}
"""


def _run(io, ss, oo):
    data = np.arange(4, dtype=np.float32).reshape(2, 2)
    out = np.full((3, 2), -1, np.float32)
    s32 = lambda v: np.array([v], np.int32)  # noqa: E731
    return hloref.evaluate(hloref.parse(TEXT), data, out, s32(io), s32(ss), s32(oo), s32(ss))


def test_rows_in_range_by_hand():
    # rows [0, 2) of the data to rows [1, 3) of the output; row 0 keeps the output's -1
    np.testing.assert_array_equal(_run(0, 2, 1), [[-1, -1], [0, 1], [2, 3]])


@pytest.mark.parametrize("io,ss,oo", [(1, 2, 0),    # past the end of the data
                                      (0, 2, 2),    # past the end of the output
                                      (-1, 1, 0),   # negative source offset
                                      (0, 1, -1)])  # negative output offset
def test_rows_out_of_range_are_an_error(io, ss, oo):
    with pytest.raises(HloEvalError, match=r"ragged-all-to-all: rows \["):
        _run(io, ss, oo)
