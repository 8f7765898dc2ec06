"""The known-difference classifier (fuzz/known_gaps.py) on hand-built reports: FTZ
explains a mismatch only where XLA flushed hloref's subnormals to zero, never because
the oracle's values hold subnormals (uninitialised memory read as floats mostly does:
findings/xla-cpu-jaxlib-0.10.2/fusion-parameter-output-garbage was dismissed so)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from hloref.fuzz.known_gaps import known_difference

SUB = np.float32(1e-40)  # subnormal in f32 (smallest normal 1.18e-38)


def _unlocalized(expected, actual):
    return SimpleNamespace(culprit=None, expected=expected, actual=actual)


def _localized(opcode, operands, expected, actual):
    c = SimpleNamespace(opcode=opcode, operands=operands, expected=expected, actual=actual)
    c.innermost = lambda: c
    return SimpleNamespace(culprit=c, expected=expected, actual=actual)


@pytest.mark.parametrize("expected,actual,want", [
    ([SUB, 2.0], [0.0, 2.0], "ftz"),                     # a subnormal result flushed
    ([-SUB, 2.0], [-0.0, 2.0], "ftz"),
    ([22.0, 33.0], [3.06e-41, -1.68e-31], None),         # garbage, subnormal-looking
    ([SUB, 5.0], [0.0, 7.0], None),                      # a flush and a real difference
    ([0.0, 1.0], [SUB, 1.0], None),                      # XLA subnormal, hloref zero
])
def test_unlocalized_ftz_only_where_subnormals_were_flushed(expected, actual, want):
    e, a = np.array(expected, np.float32), np.array(actual, np.float32)
    assert known_difference(_unlocalized(e, a)) == want


def test_localized_ftz_by_subnormal_operands_or_flushed_results():
    x = np.array([SUB, 1.0], np.float32)
    # DAZ: the culprit read a subnormal operand (1/x of a subnormal: inf either way)
    r = _localized("divide", [np.ones(2, np.float32), x], np.array([3e38, 1.0], np.float32),
                   np.array([np.inf, 1.0], np.float32))
    assert known_difference(r) == "ftz"
    # normal operands, XLA's result is garbage with subnormals in it: not FTZ
    y = np.array([1.0, 2.0, 3.0], np.float32)
    r = _localized("add", [y, y], 2 * y, np.array([2.0, 3.06e-41, -1.68e-31], np.float32))
    assert known_difference(r) is None
    # normal operands, a subnormal product flushed: FTZ of the result
    z = np.array([1e-20, 1.0], np.float32)
    r = _localized("multiply", [z, z], np.array([1e-40, 1.0], np.float32),
                   np.array([0.0, 1.0], np.float32))
    assert known_difference(r) == "ftz"


def test_accumulation_overflow_only_where_the_sums_could_overflow():
    # by hand: 3 terms of at most 2 x 3 = 6 each: |sum| <= 18 in any order (f32 max 3.4e38)
    a = np.array([[1.0, 2.0, -2.0]], np.float32)
    b = np.array([[3.0], [1.0], [2.0]], np.float32)
    r = _localized("dot", [a, b], np.array([[1.0]], np.float32),
                   np.array([[np.nan]], np.float32))
    assert known_difference(r) is None
    # f16 (max 65504): 3 terms of up to 200 x 200 = 40000 can overflow in some order
    a16, b16 = (a * 100).astype(np.float16), (b * 100).astype(np.float16)
    r = _localized("dot", [a16, b16], np.array([[10000.0]], np.float16),
                   np.array([[np.inf]], np.float16))
    assert known_difference(r) == "accumulation-overflow"
