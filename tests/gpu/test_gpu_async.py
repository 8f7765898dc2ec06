"""Async pairs on the GPU backend (fallback disabled): async-start/update/done around a
called computation and around a wrapped op (sugared X-start), copy-start/copy-done;
against the cpu backend and values by hand."""

from __future__ import annotations

import numpy as np

import hloref

from gpu_check import check, values

ASYNC = """HloModule a

wrapped {
  p = f32[4,3] parameter(0)
  q = f32[4,3] parameter(1)
  ROOT s = f32[4,3] multiply(p, q)
}

ENTRY e {
  a = f32[4,3] parameter(0)
  b = f32[4,3] parameter(1)
  st = ((f32[4,3], f32[4,3]), f32[4,3], s32[]) async-start(a, b), calls=wrapped
  up = ((f32[4,3], f32[4,3]), f32[4,3], s32[]) async-update(st)
  d = f32[4,3] async-done(up)
  cs = (f32[4,3], f32[4,3], u32[]) copy-start(d)
  ROOT cd = f32[4,3] copy-done(cs)
}
"""

SUGARED = """HloModule s
ENTRY e {
  a = f32[5] parameter(0)
  cs = ((f32[5]), f32[5], u32[]) custom-call-start(a), custom_call_target="Sharding", sharding={replicated}
  ROOT cd = f32[5] custom-call-done(cs)
}
"""


def test_async_start_done_and_copy():
    a, b = values("f32", (4, 3)), values("f32", (4, 3))
    # XLA:CPU through the oracle's StableHLO round trip rejects the async pair (the
    # done's shape comes back wrapped in a tuple): checked against the cpu and by hand
    out = check(ASYNC, a, b, xla=False)
    np.testing.assert_array_equal(out, a * b)


def test_async_wrapped_op():
    x = values("f32", (5,))
    out = check(SUGARED, x, xla=False)  # XLA:CPU has no host Sharding custom call
    np.testing.assert_array_equal(out, x)
    assert hloref.gpu.gpu_status("async-start").startswith("yes")

