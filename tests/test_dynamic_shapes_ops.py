"""Bounded dynamic shapes through more ops (slice, sort, dot, concatenate, pad,
reduce-window, while, call, fusion, conditional, dynamic-reshape), against XLA:CPU and
by hand.

Padding past a runtime size is unspecified, so a dynamic result is compared on its
first ``n`` elements only; a reduction over a dynamic dimension must not see it.
"""

from __future__ import annotations

import numpy as np
import pytest

import hloref
from hloref.errors import HloEvalError

pytest.importorskip("jax")
from hloref.fuzz.compare import compare_values  # noqa: E402
from hloref.fuzz.oracles.xla import run_hlo  # noqa: E402

from dynamic_shapes_common import ADD  # noqa: E402


SORT_GT = """gt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GT
}
"""


def _nan_tail(n, size=6, seed=0):
    p = np.random.default_rng(seed + n).integers(-9, 10, size).astype(np.float32)
    p[n:] = np.nan
    return p


def _sized_module(body, result):
    """``r`` (dimension 0 dynamic) and its runtime size, from p (f32[6]) sized n."""
    return f"""HloModule m
{ADD}{SORT_GT}
ENTRY e {{
  p = f32[6] parameter(0)
  n = s32[] parameter(1)
  s = f32[<=6] set-dimension-size(p, n), dimensions={{0}}
  {body}
  g = s32[] get-dimension-size(r), dimensions={{0}}
  ROOT o = ({result}, s32[]) tuple(r, g)
}}
"""


#: (body defining r, r's shape, by-hand function of the valid part v -> r's valid part)
_CASES = {
    "slice_prefix": ("r = f32[<=3] slice(s), slice={[0:3]}", "f32[<=3]", lambda v: v[0:3]),
    "slice_offset": ("r = f32[<=4] slice(s), slice={[2:6]}", "f32[<=4]", lambda v: v[2:6]),
    "slice_stride": ("r = f32[<=3] slice(s), slice={[1:6:2]}", "f32[<=3]", lambda v: v[1:6:2]),
    "concat_dyn_dyn": ("r = f32[<=12] concatenate(s, s), dimensions={0}", "f32[<=12]",
                       lambda v: np.concatenate([v, v])),
    "concat_dyn_static": ("c = f32[3] constant({10,20,30})\n  r = f32[<=9] concatenate(s, c), "
                          "dimensions={0}", "f32[<=9]",
                          lambda v: np.concatenate([v, [10, 20, 30]])),
    "concat_static_dyn": ("c = f32[3] constant({10,20,30})\n  r = f32[<=9] concatenate(c, s), "
                          "dimensions={0}", "f32[<=9]",
                          lambda v: np.concatenate([[10, 20, 30], v])),
    "pad_edge": ("z = f32[] constant(-7)\n  r = f32[<=9] pad(s, z), padding=1_2", "f32[<=9]",
                 lambda v: np.pad(v, (1, 2), constant_values=-7)),
    "pad_interior": ("z = f32[] constant(-7)\n  r = f32[<=13] pad(s, z), padding=1_1_1",
                     "f32[<=13]", lambda v: _interior(v, 1, 1, 1, -7)),
    "reverse": ("r = f32[<=6] reverse(s), dimensions={0}", "f32[<=6]", lambda v: v[::-1]),
    "sort": ("r = f32[<=6] sort(s), dimensions={0}, to_apply=gt", "f32[<=6]",
             lambda v: np.sort(v)[::-1]),
    "dynamic_slice_whole": ("i = s32[] constant(3)\n  r = f32[<=6] dynamic-slice(s, i), "
                            "dynamic_slice_sizes={6}", "f32[<=6]", lambda v: v),
    "dus_into_dynamic": ("i = s32[] constant(1)\n  u = f32[2] constant({-1,-2})\n"
                         "  r = f32[<=6] dynamic-update-slice(s, u, i)", "f32[<=6]",
                         lambda v: _dus(v, [-1, -2], 1, 6)),
    "select_compare": ("z = f32[] constant(0)\n  zb = f32[<=6] broadcast(z), dimensions={}\n"
                       "  c = pred[<=6] compare(s, zb), direction=GT\n"
                       "  ng = f32[<=6] negate(s)\n  r = f32[<=6] select(c, s, ng)", "f32[<=6]",
                       np.abs),
    "convert_bitcast": ("i = s32[<=6] convert(s)\n  b = f32[<=6] bitcast-convert(i)\n"
                        "  r = f32[<=6] bitcast-convert(b)", "f32[<=6]",
                        lambda v: v.astype(np.int32).view(np.float32)),
    "reduce_window_stride": ("z = f32[] constant(0)\n  r = f32[<=3] reduce-window(s, z), "
                             "window={size=2 stride=2}, to_apply=add", "f32[<=3]",
                             lambda v: v[:len(v) // 2 * 2].reshape(-1, 2).sum(axis=1)),
    "dot_free": ("c = f32[1,3] constant({{1,2,3}})\n  sr = f32[<=6,1] reshape(s)\n"
                 "  r = f32[<=6,3] dot(sr, c), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
                 "f32[<=6,3]", lambda v: np.outer(v, [1, 2, 3])),
}


def _interior(v, lo, hi, interior, value):
    out = np.full(lo + hi + len(v) + max(len(v) - 1, 0) * interior, value, np.float32)
    out[lo:lo + len(v) + max(len(v) - 1, 0) * interior:interior + 1] = v
    return out


def _dus(v, u, start, bound):
    start = min(max(start, 0), bound - len(u))  # clamped against the bound, as XLA:CPU does
    out = np.concatenate([v, np.zeros(bound - len(v), np.float32)])
    out[start:start + len(u)] = u
    return out[:len(v)]


@pytest.mark.parametrize("case", sorted(_CASES))
def test_op_on_valid_part_against_xla(case):
    body, result, by_hand = _CASES[case]
    text = _sized_module(body, result)
    for n in range(7):
        p = _nan_tail(n)
        r, g = hloref.evaluate(text, p, np.int32(n))
        want = np.asarray(by_hand(p[:n].astype(np.float64)), np.float32)
        assert int(g) == want.shape[0] == r.shape[0], (case, n)
        np.testing.assert_array_equal(r, want, err_msg=f"{case} n={n}")
        if case == "slice_offset" and n < 2:
            continue  # XLA's size n - 2 goes negative and XLA:CPU crashes; hloref gives 0
        if case == "slice_prefix" and n > 3:
            continue  # XLA gives the size n - 0, past the bound 3; hloref gives 3
        xr, xg = run_hlo(text, p, np.int32(n))
        assert int(xg) == int(g), (case, n)
        assert compare_values(np.asarray(xr)[:int(xg)], r, opcode="dot").ok, (case, n)


def test_dot_contracting_over_dynamic_dim_against_xla():
    text = """HloModule m
ENTRY e {
  p = f32[6] parameter(0)
  w = f32[6] parameter(1)
  q = f32[6,2] parameter(2)
  n = s32[] parameter(3)
  s = f32[<=6] set-dimension-size(p, n), dimensions={0}
  a = f32[] dot(s, w), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  b = f32[2] dot(s, q), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  c = f32[] dot(s, s), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  ROOT o = (f32[], f32[2], f32[]) tuple(a, b, c)
}
"""
    for n in range(7):
        p = _nan_tail(n)
        w = np.arange(6, dtype=np.float32) - 2
        q = np.arange(12, dtype=np.float32).reshape(6, 2)
        v = p[:n].astype(np.float64)
        want = (v @ w[:n], v @ q[:n], v @ v)
        # the static operands' rows past n must not be read either
        wi, qi = w.copy(), q.copy()
        wi[n:], qi[n:] = np.inf, np.nan
        a, b, c = hloref.evaluate(text, p, wi, qi, np.int32(n))
        assert float(a) == want[0] and float(c) == want[2]
        np.testing.assert_array_equal(b, want[1])
        # XLA:CPU zeroes only the dynamic operand's padding (0 * inf is NaN there), so it
        # is compared with finite static operands
        xa, xb, xc = run_hlo(text, p, w, q, np.int32(n))
        assert (float(xa), float(xc)) == (float(a), float(c))
        np.testing.assert_array_equal(xb, b)


def test_batched_dot_with_dynamic_batch_by_hand():
    # batch dim dynamic on the lhs only: the rhs takes its size; free dims follow
    text = """HloModule m
ENTRY e {
  x = f32[4,2,3] parameter(0)
  y = f32[4,3,5] parameter(1)
  n = s32[] parameter(2)
  k = s32[] parameter(3)
  s = f32[<=4,2,<=3] set-dimension-size(x, n), dimensions={0}
  t = f32[<=4,2,<=3] set-dimension-size(s, k), dimensions={2}
  ROOT r = f32[<=4,2,5] dot(t, y), lhs_batch_dims={0}, rhs_batch_dims={0},
      lhs_contracting_dims={2}, rhs_contracting_dims={1}
}
"""
    rng = np.random.default_rng(5)
    x = rng.integers(-3, 4, (4, 2, 3)).astype(np.float32)
    y = rng.integers(-3, 4, (4, 3, 5)).astype(np.float32)
    for n, k in [(0, 3), (2, 1), (3, 0), (4, 2), (4, 3)]:
        xs = x.copy()
        xs[n:] = np.nan
        xs[:, :, k:] = np.nan
        r = hloref.evaluate(text, xs, y, np.int32(n), np.int32(k))
        want = np.einsum("bij,bjk->bik", x[:n, :, :k].astype(np.float64),
                         y[:n, :k].astype(np.float64))
        np.testing.assert_array_equal(r, want)


def test_sort_two_operands_along_and_across_dynamic_dims_by_hand():
    # XLA's HandleSort: the comparator takes two scalars per operand
    gt4 = SORT_GT.replace("  ROOT", "  i = s32[] parameter(2)\n  j = s32[] parameter(3)\n  ROOT")
    text = f"""HloModule m
{gt4}
ENTRY e {{
  p = f32[3,6] parameter(0)
  i = s32[3,6] iota(), iota_dimension=1
  n = s32[] parameter(1)
  m = s32[] parameter(2)
  s = f32[3,<=6] set-dimension-size(p, n), dimensions={{1}}
  sm = f32[<=3,<=6] set-dimension-size(s, m), dimensions={{0}}
  j = s32[<=3,<=6] set-dimension-size(i, n), dimensions={{1}}
  j2 = s32[<=3,<=6] set-dimension-size(j, m), dimensions={{0}}
  ROOT r = (f32[<=3,<=6], s32[<=3,<=6]) sort(sm, j2), dimensions={{1}}, to_apply=gt
}}
"""
    rng = np.random.default_rng(1)
    for n, m in [(0, 3), (1, 2), (4, 3), (6, 1), (5, 0)]:
        p = rng.permutation(18).reshape(3, 6).astype(np.float32)
        p[:, n:] = np.nan
        p[m:] = 1e30
        v, k = hloref.evaluate(text, p, np.int32(n), np.int32(m))
        assert v.shape == k.shape == (m, n)
        order = np.argsort(-p[:m, :n], axis=1, kind="stable")
        np.testing.assert_array_equal(k, order)
        np.testing.assert_array_equal(v, np.take_along_axis(p[:m, :n], order, axis=1))


def test_concatenate_packs_along_dim1_with_dynamic_dim0_by_hand():
    text = """HloModule m
ENTRY e {
  p = f32[3,4] parameter(0)
  q = f32[3,2] parameter(1)
  n = s32[] parameter(2)
  m = s32[] parameter(3)
  a = f32[<=3,<=4] set-dimension-size(p, n), dimensions={1}
  a2 = f32[<=3,<=4] set-dimension-size(a, m), dimensions={0}
  ROOT r = f32[<=3,<=10] concatenate(a2, q, a2), dimensions={1}
}
"""
    p = np.arange(12, dtype=np.float32).reshape(3, 4)
    q = -np.arange(6, dtype=np.float32).reshape(3, 2)
    for n, m in [(0, 3), (2, 2), (4, 1), (3, 0)]:
        ps = p.copy()
        ps[:, n:] = np.nan
        ps[m:] = np.nan
        r = hloref.evaluate(text, ps, q, np.int32(n), np.int32(m))
        want = np.concatenate([p[:m, :n], q[:m], p[:m, :n]], axis=1)
        np.testing.assert_array_equal(r, want)


def test_pad_with_negative_edges_and_reduce_window_by_hand():
    # XLA:CPU crashes on both (dynamic pad with negative edges, reduce-window over a
    # dynamic dim with size > n): derived from the valid part
    text = f"""HloModule m
{ADD}
ENTRY e {{
  p = f32[6] parameter(0)
  n = s32[] parameter(1)
  s = f32[<=6] set-dimension-size(p, n), dimensions={{0}}
  z = f32[] constant(-7)
  a = f32[<=6] pad(s, z), padding=-1_1
  b = f32[<=5] reduce-window(s, z), window={{size=2}}, to_apply=add
  ROOT o = (f32[<=6], f32[<=5]) tuple(a, b)
}}
"""
    for n in range(7):
        p = _nan_tail(n)
        a, b = hloref.evaluate(text, p, np.int32(n))
        v = p[:n]
        np.testing.assert_array_equal(a, np.concatenate([v[1:], [-7]]) if n else [])
        np.testing.assert_array_equal(b, (v[:-1] + v[1:] - 7) if n > 1 else [])


def test_while_carries_and_changes_sizes_against_xla():
    text = f"""HloModule m
{ADD}
cond {{
  t = (f32[<=6], s32[]) parameter(0)
  i = s32[] get-tuple-element(t), index=1
  k = s32[] constant(3)
  ROOT c = pred[] compare(i, k), direction=LT
}}
body {{
  t = (f32[<=6], s32[]) parameter(0)
  x = f32[<=6] get-tuple-element(t), index=0
  i = s32[] get-tuple-element(t), index=1
  y = f32[<=6] add(x, x)
  one = s32[] constant(1)
  j = s32[] add(i, one)
  m = s32[] get-dimension-size(x), dimensions={{0}}
  m1 = s32[] subtract(m, one)
  z = s32[] constant(0)
  m2 = s32[] maximum(m1, z)
  y2 = f32[<=6] set-dimension-size(y, m2), dimensions={{0}}
  ROOT o = (f32[<=6], s32[]) tuple(y2, j)
}}
ENTRY e {{
  p = f32[6] parameter(0)
  n = s32[] parameter(1)
  s = f32[<=6] set-dimension-size(p, n), dimensions={{0}}
  zi = s32[] constant(0)
  t = (f32[<=6], s32[]) tuple(s, zi)
  w = (f32[<=6], s32[]) while(t), condition=cond, body=body
  x = f32[<=6] get-tuple-element(w), index=0
  z = f32[] constant(0)
  r = f32[] reduce(x, z), dimensions={{0}}, to_apply=add
  g = s32[] get-dimension-size(x), dimensions={{0}}
  ROOT o = (f32[], s32[], f32[<=6]) tuple(r, g, x)
}}
"""
    for n in range(7):
        p = _nan_tail(n)
        m = max(n - 3, 0)
        r, g, x = hloref.evaluate(text, p, np.int32(n))
        assert int(g) == m and x.shape == (m,)
        np.testing.assert_array_equal(x, 8 * p[:m])
        assert float(r) == 8 * p[:m].sum()
        xr, xg, _ = run_hlo(text, p, np.int32(n))
        assert (float(xr), int(xg)) == (float(r), int(g))


def test_call_and_fusion_pass_sizes_in_and_out_against_xla():
    text = f"""HloModule m
{ADD}
inner {{
  x = f32[<=6] parameter(0)
  ROOT y = f32[<=6] negate(x)
}}
total {{
  x = f32[<=6] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(x, z), dimensions={{0}}, to_apply=add
}}
ENTRY e {{
  p = f32[6] parameter(0)
  n = s32[] parameter(1)
  s = f32[<=6] set-dimension-size(p, n), dimensions={{0}}
  c = f32[<=6] call(s), to_apply=inner
  r = f32[] CALL(c), TO=total
  g = s32[] get-dimension-size(c), dimensions={{0}}
  ROOT o = (f32[], s32[]) tuple(r, g)
}}
"""
    as_call = text.replace("CALL", "call").replace("TO=", "to_apply=")
    # XLA:CPU refuses a dynamic fusion parameter ("Asked to propagate a dynamic
    # dimension ... to fusion"): the fusion form is checked by hand only
    as_fusion = text.replace("CALL", "fusion").replace("TO=", "kind=kLoop, calls=")
    for n in range(7):
        p = _nan_tail(n)
        for variant in (as_call, as_fusion):
            r, g = hloref.evaluate(variant, p, np.int32(n))
            assert (float(r), int(g)) == (-p[:n].sum(), n)
        xr, xg = run_hlo(as_call, p, np.int32(n))
        assert (float(xr), int(xg)) == (float(r), int(g))


def test_conditional_branches_with_sizes_by_hand():
    text = f"""HloModule m
{ADD}
b0 {{
  x = f32[<=6] parameter(0)
  ROOT y = f32[<=6] negate(x)
}}
b1 {{
  x = f32[<=6] parameter(0)
  ROOT y = f32[<=5] slice(x), slice={{[1:6]}}
}}
b2 {{
  x = f32[<=6] parameter(0)
  ROOT y = f32[<=5] slice(x), slice={{[0:5]}}
}}
ENTRY e {{
  p = f32[6] parameter(0)
  n = s32[] parameter(1)
  k = s32[] parameter(2)
  s = f32[<=6] set-dimension-size(p, n), dimensions={{0}}
  c = f32[<=6] conditional(k, s, s, s), branch_computations={{b0, b1, b0}}
  d = pred[] compare(k, n), direction=LT
  c2 = f32[<=5] conditional(d, s, s), true_computation=b1, false_computation=b2
  g = s32[] get-dimension-size(c), dimensions={{0}}
  ROOT o = (f32[<=6], s32[], f32[<=5]) tuple(c, g, c2)
}}
"""
    for n in range(7):
        for k in (0, 1, 5):
            p = _nan_tail(n)
            # verify=False: XLA's verifier wants every branch root to have the
            # conditional's shape (b1's f32[<=5] is not c's f32[<=6]); this module pins
            # the evaluator's runtime sizes through branches of different bounds
            c, g, c2 = hloref.evaluate(text, p, np.int32(n), np.int32(k), verify=False)
            v = p[:n]
            want = v[1:] if k == 1 else -v
            assert int(g) == len(want)
            np.testing.assert_array_equal(c, want)
            np.testing.assert_array_equal(c2, v[1:] if k < n else v[:5])


def test_entry_parameter_shorter_than_its_bound():
    text = f"""HloModule m
{ADD}
ENTRY e {{
  p = f32[<=8] parameter(0)
  q = f32[<=8,2] parameter(1)
  z = f32[] constant(0)
  r = f32[] reduce(p, z), dimensions={{0}}, to_apply=add
  g = s32[] get-dimension-size(p), dimensions={{0}}
  m = f32[<=8] multiply(p, p)
  ROOT o = (f32[], s32[], f32[<=8], f32[<=8,2]) tuple(r, g, m, q)
}}
"""
    for n in (0, 5, 8):
        p = np.arange(1, n + 1, dtype=np.float32)
        q = np.ones((n, 2), np.float32)
        r, g, m, q2 = hloref.evaluate(text, p, q)
        assert float(r) == p.sum() and int(g) == n
        np.testing.assert_array_equal(m, p * p)
        np.testing.assert_array_equal(q2, q)
    with pytest.raises(HloEvalError):  # longer than the bound
        hloref.evaluate(text, np.zeros(9, np.float32), np.ones((8, 2), np.float32))
    with pytest.raises(HloEvalError):  # a static dimension cannot be short
        hloref.evaluate(text, np.zeros(3, np.float32), np.ones((3, 1), np.float32))
    # lists are taken too
    r, g, _, _ = hloref.evaluate(text, [1.0, 2.0], [[1.0, 1.0]])
    assert (float(r), int(g)) == (3.0, 2)


def test_dynamic_reshape_by_hand():
    text = """HloModule m
ENTRY e {
  p = f32[6] parameter(0)
  n = s32[] parameter(1)
  a = s32[] parameter(2)
  b = s32[] parameter(3)
  s = f32[<=6] set-dimension-size(p, n), dimensions={0}
  r = f32[<=3,<=6] dynamic-reshape(s, a, b)
  ROOT t = f32[<=6,<=3] transpose(r), dimensions={1,0}
}
"""
    for n, a, b in [(6, 2, 3), (4, 2, 2), (3, 1, 3), (0, 0, 5), (5, 1, 5)]:
        p = _nan_tail(n)
        t = hloref.evaluate(text, p, np.int32(n), np.int32(a), np.int32(b))
        np.testing.assert_array_equal(t, p[:n].reshape(a, b).T)
    with pytest.raises(HloEvalError):
        hloref.evaluate(text, _nan_tail(4), np.int32(4), np.int32(3), np.int32(2))
