"""The memory budget counts live values: a value is released after its last use.

Expected peaks are derived by hand from the rule in ``Limits``: before an
instruction runs, live bytes (arguments plus computed values not yet released) plus
its result's bytes must fit ``max_bytes``."""

from __future__ import annotations

import numpy as np
import pytest

import hloref
from hloref.errors import HloLimitError

_CHAIN = "\n".join(
    ["HloModule chain", "ENTRY e {", "  v0 = f32[1000] parameter(0)"]
    + [f"  v{i} = f32[1000] negate(v{i - 1})" for i in range(1, 10)]
    + ["  ROOT v10 = f32[1000] negate(v9)", "}"])


def test_chain_peak_is_argument_plus_two_values():
    x = np.arange(1000, dtype=np.float32)
    # step k holds the argument (4000 B) and v(k-1) (4000 B) while v(k) (4000 B) is made
    out = hloref.evaluate(_CHAIN, x, limits=hloref.Limits(max_bytes=12000))
    np.testing.assert_array_equal(out, x)  # ten negations
    with pytest.raises(HloLimitError, match="memory budget"):
        hloref.evaluate(_CHAIN, x, limits=hloref.Limits(max_bytes=11999))


def test_value_used_twice_stays_live_until_its_last_use():
    text = """HloModule fan
ENTRY e {
  x = f32[1000] parameter(0)
  a = f32[1000] negate(x)
  b = f32[1000] negate(a)
  c = f32[1000] negate(b)
  ROOT d = f32[1000] add(a, c)
}"""
    x = np.ones(1000, np.float32)
    # making c: x, a (kept for d), b, c -> 16000 B; making d: x, a, c, d -> 16000 B
    out = hloref.evaluate(text, x, limits=hloref.Limits(max_bytes=16000))
    np.testing.assert_array_equal(out, np.full(1000, -2, np.float32))
    with pytest.raises(HloLimitError):
        hloref.evaluate(text, x, limits=hloref.Limits(max_bytes=15999))


def test_while_body_values_are_released_each_iteration():
    text = """HloModule loop
cond {
  p = (s32[], f32[1000]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(50)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], f32[1000]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[1000] get-tuple-element(p), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  y = f32[1000] negate(x)
  ROOT t = (s32[], f32[1000]) tuple(j, y)
}
ENTRY e {
  x = f32[1000] parameter(0)
  z = s32[] constant(0)
  t = (s32[], f32[1000]) tuple(z, x)
  w = (s32[], f32[1000]) while(t), condition=cond, body=body
  ROOT r = f32[1000] get-tuple-element(w), index=1
}"""
    x = np.ones(1000, np.float32)
    # fifty iterations would need 50 x 4000 B if body values leaked; 64 kB is plenty
    # for a few live copies and far below what a leak would take
    out = hloref.evaluate(text, x, limits=hloref.Limits(max_bytes=64000))
    np.testing.assert_array_equal(out, x)  # an even number of negations
