"""call, fusion, while, conditional, opt-barrier, after-all, add-dependency."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("jax")

from hlo_builders import assert_match, module, run_hloref  # noqa: E402

COMPS = """add_mul {
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  s = f32[4] add(a, b)
  ROOT m = f32[4] multiply(s, b)
}
fused {
  p0 = f32[4] parameter(0)
  p1 = f32[4] parameter(1)
  e = f32[4] exponential(p0)
  ROOT s = f32[4] subtract(e, p1)
}
cond {
  st = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(st), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  st = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(st), index=0
  v = f32[4] get-tuple-element(st), index=1
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  h = f32[] constant(0.5)
  hb = f32[4] broadcast(h), dimensions={}
  v2 = f32[4] add(v, hb)
  ROOT out = (s32[], f32[4]) tuple(i2, v2)
}
br0 {
  p = f32[4] parameter(0)
  ROOT r = f32[4] negate(p)
}
br1 {
  p = f32[4] parameter(0)
  ROOT r = f32[4] abs(p)
}
br2 {
  p = f32[4] parameter(0)
  ROOT r = f32[4] floor(p)
}
"""


def test_call_fusion_while_opt_barrier():
    body = """  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  c = f32[4] call(x, y), to_apply=add_mul
  f = f32[4] fusion(x, y), kind=kLoop, calls=fused
  z = s32[] constant(0)
  init = (s32[], f32[4]) tuple(z, x)
  w = (s32[], f32[4]) while(init), condition=cond, body=body
  cw = (f32[4], (s32[], f32[4])) tuple(c, w)
  ob = (f32[4], (s32[], f32[4])) opt-barrier(cw)
  ROOT out = (f32[4], f32[4], (s32[], f32[4]), (f32[4], (s32[], f32[4]))) tuple(c, f, w, ob)"""
    x = np.array([1.0, -2.0, 0.5, 3.0], np.float32)
    y = np.array([0.25, 4.0, -1.0, 2.0], np.float32)
    text = module(body, computations=COMPS)
    ours, theirs = assert_match(text, x, y, opcode="exponential")
    np.testing.assert_array_equal(ours[0], (x + y) * y)
    assert int(ours[2][0]) == 5
    np.testing.assert_array_equal(ours[2][1], x + 2.5)


@pytest.mark.parametrize("index", [-1, 0, 1, 2, 3, 100])
def test_conditional_index_including_out_of_range(index):
    """An s32 index outside [0, N) runs the last branch (XLA:CPU agrees)."""
    body = """  i = s32[] parameter(0)
  x = f32[4] parameter(1)
  ROOT r = f32[4] conditional(i, x, x, x), branch_computations={br0, br1, br2}"""
    x = np.array([1.5, -2.5, 0.25, -3.75], np.float32)
    ours, _ = assert_match(module(body, computations=COMPS), np.int32(index), x)
    want = [-x, np.abs(x), np.floor(x)][index if 0 <= index < 3 else 2]
    np.testing.assert_array_equal(ours, want)


@pytest.mark.parametrize("p", [True, False])
def test_conditional_pred(p):
    body = """  c = pred[] parameter(0)
  x = f32[4] parameter(1)
  ROOT r = f32[4] conditional(c, x, x), true_computation=br0, false_computation=br1"""
    x = np.array([1.5, -2.5, 0.25, -3.75], np.float32)
    ours, _ = assert_match(module(body, computations=COMPS), np.bool_(p), x)
    np.testing.assert_array_equal(ours, -x if p else np.abs(x))


def test_after_all_add_dependency_by_hand():
    """Tokens cannot cross the XLA oracle's boundary; in the middle of a module they can."""
    body = """  x = f32[3] parameter(0)
  t0 = token[] after-all()
  t1 = token[] after-all(t0)
  d = f32[3] add-dependency(x, t1)
  ROOT n = f32[3] negate(d)"""
    x = np.array([1.0, 2.0, -3.0], np.float32)
    ours, _ = assert_match(module(body), x)
    np.testing.assert_array_equal(ours, -x)


def test_token_result_by_hand():
    from hloref.values import TOKEN_VALUE
    body = "  ROOT t = token[] after-all()"
    assert run_hloref(module(body)) is TOKEN_VALUE


def test_pred_conditional_passes_each_branch_its_own_operand():
    """The false branch gets operand 2 (found by the fuzzer: it used to get operand 1)."""
    text = """HloModule m
t {
  a = f32[2] parameter(0)
  ROOT n = f32[2] negate(a)
}
f {
  b = f32[3] parameter(0)
  ROOT s = f32[2] slice(b), slice={[1:3]}
}
ENTRY e {
  p = pred[] parameter(0)
  x = f32[2] parameter(1)
  y = f32[3] parameter(2)
  ROOT c = f32[2] conditional(p, x, y), true_computation=t, false_computation=f
}"""
    import numpy as np
    import hloref
    x = np.array([1, 2], np.float32)
    y = np.array([5, 6, 7], np.float32)
    np.testing.assert_array_equal(hloref.evaluate(text, np.bool_(True), x, y), [-1, -2])
    np.testing.assert_array_equal(hloref.evaluate(text, np.bool_(False), x, y), [6, 7])
