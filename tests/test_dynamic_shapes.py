"""Bounded dynamic shapes: ``set-dimension-size`` / ``get-dimension-size`` and the
propagation of runtime sizes (``evaluator/indexing.py`` ``dynamic_step``), against
XLA:CPU (which runs hand-written modules with runtime sizes) and by hand: elementwise
ops, reductions, broadcast, reshape and transpose. More ops (sort, dot, concatenate,
pad, loops, calls, conditionals): test_dynamic_shapes_ops.py; reshape, gather and
scatter by XLA's rules: test_dynamic_shapes_indexing.py.

Padding past a runtime size is unspecified, so a dynamic result is compared on its
first ``n`` elements only; a reduction over a dynamic dimension must not see it.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hloref
from hloref.errors import HloEvalError, HloUnsupportedError

pytest.importorskip("jax")
from hloref.fuzz.compare import compare_values  # noqa: E402
from hloref.fuzz.oracles.xla import run_hlo  # noqa: E402

from dynamic_shapes_common import ADD, slice_module as _slice_module  # noqa: E402


SETTINGS = dict(max_examples=20, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])


MAX_S32 = """mx {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT c = s32[] maximum(a, b)
}
"""


def _dims_text(dims, dyn_dim):
    return ",".join(f"<={d}" if i == dyn_dim else str(d) for i, d in enumerate(dims))


@settings(**SETTINGS)
@given(rows=st.integers(1, 4), cols=st.integers(1, 7), dyn_dim=st.integers(0, 1),
       reduce_dims=st.sampled_from([(0,), (1,), (0, 1)]), data=st.data())
def test_elementwise_reduce_against_xla(rows, cols, dyn_dim, reduce_dims, data):
    dims = (rows, cols)
    n = data.draw(st.integers(0, dims[dyn_dim]))
    dyn = _dims_text(dims, dyn_dim)
    kept = [d for i, d in enumerate(dims) if i not in reduce_dims]
    kept_dyn = [i for i in range(2) if i not in reduce_dims]
    kept_text = ",".join(f"<={dims[i]}" if i == dyn_dim else str(dims[i]) for i in kept_dyn)
    text = f"""HloModule m
{ADD}
ENTRY e {{
  p = f32[{rows},{cols}] parameter(0)
  q = f32[{rows},{cols}] parameter(1)
  n = s32[] parameter(2)
  s = f32[{dyn}] set-dimension-size(p, n), dimensions={{{dyn_dim}}}
  t = f32[{dyn}] set-dimension-size(q, n), dimensions={{{dyn_dim}}}
  m = f32[{dyn}] multiply(s, t)
  a = f32[{dyn}] add(m, s)
  c = f32[{dyn}] convert(a)
  z = f32[] constant(0)
  r = f32[{kept_text}] reduce(c, z), dimensions={{{",".join(map(str, reduce_dims))}}}, to_apply=add
  g = s32[] get-dimension-size(m), dimensions={{{dyn_dim}}}
  h = s32[] get-dimension-size(m), dimensions={{{1 - dyn_dim}}}
  ROOT o = (f32[{kept_text}], s32[], s32[]) tuple(r, g, h)
}}
"""
    rng = np.random.default_rng(rows * 100 + cols * 10 + n)
    p = rng.integers(-4, 5, dims).astype(np.float32)
    q = rng.integers(-4, 5, dims).astype(np.float32)
    r, g, h = hloref.evaluate(text, p, q, np.int32(n))
    xr, xg, xh = run_hlo(text, p, q, np.int32(n))
    assert int(g) == int(xg) == n
    assert int(h) == int(xh) == dims[1 - dyn_dim]
    # by hand: only the first n along the dynamic dimension exist
    cut = [slice(None)] * 2
    cut[dyn_dim] = slice(0, n)
    want = (p * q + p)[tuple(cut)].sum(axis=reduce_dims)
    if dyn_dim in reduce_dims:
        assert r.shape == want.shape
        np.testing.assert_array_equal(r, want)
        assert compare_values(xr, r, opcode="reduce").ok
    else:  # the kept dimension is dynamic: only its first n results are specified
        np.testing.assert_array_equal(r[:n], want)
        assert compare_values(np.asarray(xr)[:n], r[:n], opcode="reduce").ok
    # the entry result is returned cut to its runtime sizes
    assert [n if i == dyn_dim else d for i, d in zip(kept_dyn, kept)] == list(r.shape)


@settings(**SETTINGS)
@given(bound=st.integers(2, 8), data=st.data())
def test_broadcast_reshape_transpose_against_xla(bound, data):
    n = data.draw(st.integers(0, bound))
    text = f"""HloModule m
{ADD}
ENTRY e {{
  p = f32[{bound}] parameter(0)
  n = s32[] parameter(1)
  s = f32[<={bound}] set-dimension-size(p, n), dimensions={{0}}
  b = f32[3,<={bound}] broadcast(s), dimensions={{1}}
  t = f32[<={bound},3] transpose(b), dimensions={{1,0}}
  r1 = f32[1,<={bound},3] reshape(t)
  e = f32[1,<={bound},3] exponential(r1)
  z = f32[] constant(0)
  r = f32[3] reduce(e, z), dimensions={{0,1}}, to_apply=add
  g = s32[] get-dimension-size(r1), dimensions={{1}}
  ROOT o = (f32[3], s32[]) tuple(r, g)
}}
"""
    p = np.linspace(-1, 1, bound).astype(np.float32)
    r, g = hloref.evaluate(text, p, np.int32(n))
    xr, xg = run_hlo(text, p, np.int32(n))
    assert int(g) == int(xg) == n
    want = np.full(3, np.exp(p[:n].astype(np.float64)).sum())
    np.testing.assert_allclose(r, want, rtol=1e-6)
    assert compare_values(xr, r, opcode="reduce").ok


def test_variadic_reduce_argmax_over_dynamic_dim():
    # the largest value sits in the padding: it must not win
    text = f"""HloModule m
argmax {{
  a = s32[] parameter(0)
  i = s32[] parameter(1)
  b = s32[] parameter(2)
  j = s32[] parameter(3)
  gt = pred[] compare(a, b), direction=GT
  eq = pred[] compare(a, b), direction=EQ
  lt = pred[] compare(i, j), direction=LT
  tie = pred[] and(eq, lt)
  pick = pred[] or(gt, tie)
  v = s32[] select(pick, a, b)
  k = s32[] select(pick, i, j)
  ROOT t = (s32[], s32[]) tuple(v, k)
}}
ENTRY e {{
  p = s32[6] parameter(0)
  n = s32[] parameter(1)
  s = s32[<=6] set-dimension-size(p, n), dimensions={{0}}
  io = s32[6] iota(), iota_dimension=0
  si = s32[<=6] set-dimension-size(io, n), dimensions={{0}}
  lo = s32[] constant(-2147483648)
  z = s32[] constant(-1)
  ROOT r = (s32[], s32[]) reduce(s, si, lo, z), dimensions={{0}}, to_apply=argmax
}}
"""
    p = np.array([3, 7, 1, 7, 100, 2], np.int32)
    for n, want in [(0, (-2147483648, -1)), (1, (3, 0)), (3, (7, 1)), (4, (7, 1)),
                    (5, (100, 4)), (6, (100, 4))]:
        v, k = hloref.evaluate(text, p, np.int32(n))
        assert (int(v), int(k)) == want, n
        xv, xk = run_hlo(text, p, np.int32(n))
        assert (int(xv), int(xk)) == want, n


def test_dynamic_root_matches_xla_on_its_first_elements():
    text = """HloModule m
ENTRY e {
  p = f32[8] parameter(0)
  n = s32[] parameter(1)
  s = f32[<=8] set-dimension-size(p, n), dimensions={0}
  ROOT m = f32[<=8] negate(s)
}
"""
    p = np.arange(8, dtype=np.float32)
    got = hloref.evaluate(text, p, np.int32(3))
    xla = run_hlo(text, p, np.int32(3))
    np.testing.assert_array_equal(got[:3], -p[:3])
    assert compare_values(np.asarray(xla)[:3], got[:3]).ok


def test_set_twice_and_full_size_is_static():
    text = f"""HloModule m
{ADD}
ENTRY e {{
  p = f32[5] parameter(0)
  n = s32[] parameter(1)
  k = s32[] parameter(2)
  s = f32[<=5] set-dimension-size(p, n), dimensions={{0}}
  s_again = f32[<=5] set-dimension-size(s, k), dimensions={{0}}
  z = f32[] constant(0)
  ROOT r = f32[] reduce(s_again, z), dimensions={{0}}, to_apply=add
}}
"""
    p = np.array([1, 2, 4, 8, 16], np.float32)
    for n, k in [(2, 4), (5, 1), (0, 5), (3, 3)]:
        want = p[:k].sum()
        assert float(hloref.evaluate(text, p, np.int32(n), np.int32(k))) == want
        assert float(run_hlo(text, p, np.int32(n), np.int32(k))) == want


@pytest.mark.parametrize("op_line,opcode", [
    ("ROOT r = f32[2,3] reshape(s)", "reshape"),
    ("z = f32[] constant(0)\n  ROOT r = f32[<=6] reduce-window(s, z), window={size=3 pad=1_1}, "
     "to_apply=add", "reduce-window"),
    ("q = f32[8] constant({0,0,0,0,0,0,0,0})\n  i = s32[] constant(1)\n"
     "  ROOT r = f32[8] dynamic-update-slice(q, s, i)", "dynamic-update-slice"),
    ("i = s32[] constant(2)\n  ROOT r = f32[<=3] dynamic-slice(s, i), dynamic_slice_sizes={3}",
     "dynamic-slice"),
    ("ROOT r = f32[1] slice(s), slice={[4:5]}", "slice"),
    ("c = c64[<=6] convert(s)\n  ROOT r = c64[<=6] fft(c), fft_type=FFT, fft_length={6}", "fft"),
])
def test_other_ops_refuse_a_partial_size(op_line, opcode):
    text = _slice_module(op_line)
    p = np.arange(6, dtype=np.float32)
    with pytest.raises(HloUnsupportedError) as info:
        hloref.evaluate(text, p, np.int32(4))
    assert info.value.opcode == opcode
    # at the full size the value is static and the op runs
    hloref.evaluate(text, p, np.int32(6))


def test_size_out_of_range_is_an_error():
    text = _slice_module("ROOT r = f32[<=6] negate(s)")
    with pytest.raises(HloEvalError, match="outside"):
        hloref.evaluate(text, np.zeros(6, np.float32), np.int32(7))
    with pytest.raises(HloEvalError, match="outside"):
        hloref.evaluate(text, np.zeros(6, np.float32), np.int32(-1))


def test_called_computation_returning_a_dynamic_value():
    text = f"""HloModule m
{ADD}
inner {{
  p = f32[6] parameter(0)
  n = s32[] parameter(1)
  ROOT s = f32[<=6] set-dimension-size(p, n), dimensions={{0}}
}}
ENTRY e {{
  p = f32[6] parameter(0)
  n = s32[] parameter(1)
  c = f32[<=6] call(p, n), to_apply=inner
  z = f32[] constant(0)
  r = f32[] reduce(c, z), dimensions={{0}}, to_apply=add
  g = s32[] get-dimension-size(c), dimensions={{0}}
  ROOT o = (f32[], s32[]) tuple(r, g)
}}
"""
    p = np.array([1, 2, 4, 8, 16, np.nan], np.float32)
    for n in range(6):
        r, g = hloref.evaluate(text, p, np.int32(n))
        assert (float(r), int(g)) == (p[:n].sum(), n)
        xr, xg = run_hlo(text, p, np.int32(n))
        assert (float(xr), int(xg)) == (p[:n].sum(), n)


def test_reduce_keeps_a_dynamic_dim_and_max_ignores_padding():
    text = f"""HloModule m
{MAX_S32}
ENTRY e {{
  p = s32[3,4] parameter(0)
  n = s32[] parameter(1)
  s = s32[3,<=4] set-dimension-size(p, n), dimensions={{1}}
  z = s32[] constant(-100)
  r = s32[3] reduce(s, z), dimensions={{1}}, to_apply=mx
  c = s32[<=4] reduce(s, z), dimensions={{0}}, to_apply=mx
  g = s32[] get-dimension-size(c), dimensions={{0}}
  ROOT o = (s32[3], s32[<=4], s32[]) tuple(r, c, g)
}}
"""
    p = np.array([[1, 2, 3, 99], [5, -1, 0, 98], [-7, 4, 2, 97]], np.int32)
    r, c, g = hloref.evaluate(text, p, np.int32(2))
    np.testing.assert_array_equal(r, [2, 5, 4])
    np.testing.assert_array_equal(c[:2], [5, 4])
    assert int(g) == 2
    xr, xc, xg = run_hlo(text, p, np.int32(2))
    np.testing.assert_array_equal(xr, r)
    np.testing.assert_array_equal(np.asarray(xc)[:2], c[:2])
    assert int(xg) == 2
