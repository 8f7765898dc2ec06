"""Shape and data-movement ops against XLA:CPU (bitcast against hand-derived numpy)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

pytest.importorskip("jax")

from hlo_builders import (ORACLE_TYPES, assert_match, dtype, et, module, run_hloref,  # noqa: E402
                          shape_text, values_for)

SHAPE_TYPES = ("pred", "s4", "s8", "u16", "s32", "u64", "f16", "bf16", "f32", "f64", "c64",
               "f8e4m3fn", "f4e2m1fn")


def _vals(t, dims, seed=0):
    return values_for(t, dims, np.random.default_rng(seed))


def _single(t, in_dims, out_dims, expr, out_t=None):
    return module(f"  x = {shape_text(t, in_dims)} parameter(0)\n"
                  f"  ROOT r = {shape_text(out_t or t, out_dims)} {expr}")


@pytest.mark.parametrize("t", SHAPE_TYPES)
def test_movement_ops_one_module(t):
    """broadcast, reshape, transpose, slice (strided), concatenate, pad (negative and
    interior), reverse, copy, tuple/get-tuple-element: one module per type."""
    x = _vals(t, (3, 4, 5))
    s = lambda d: shape_text(t, d)  # noqa: E731
    body = f"""  x = {s((3, 4, 5))} parameter(0)
  pv = {t}[] parameter(1)
  b = {s((2, 5, 3, 4))} broadcast(x), dimensions={{2,3,1}}
  bs = {s((2, 3))} broadcast(pv), dimensions={{}}
  rs = {s((6, 10))} reshape(x)
  tr = {s((5, 3, 4))} transpose(x), dimensions={{2,0,1}}
  sl = {s((2, 2, 2))} slice(x), slice={{[0:3:2], [1:4:2], [0:5:3]}}
  x2 = {s((3, 8, 5))} concatenate(x, x), dimensions={{1}}
  sl2 = {s((3, 5, 5))} slice(x2), slice={{[0:3], [0:5], [0:5]}}
  cc = {s((3, 9, 5))} concatenate(x, sl2), dimensions={{1}}
  pd = {s((4, 9, 7))} pad(x, pv), padding=0_1x1_1_1x-1_-1_1
  rv = {s((3, 4, 5))} reverse(x), dimensions={{0,2}}
  cp = {s((3, 4, 5))} copy(x)
  tp = ({s((3, 4, 5))}, {s((2, 3))}) tuple(cp, bs)
  g = {s((2, 3))} get-tuple-element(tp), index=1
  ROOT out = ({s((2, 5, 3, 4))}, {s((6, 10))}, {s((5, 3, 4))}, {s((2, 2, 2))}, {s((3, 9, 5))}, {s((4, 9, 7))}, {s((3, 4, 5))}, {s((2, 3))}, ({s((3, 4, 5))}, {s((2, 3))})) tuple(b, rs, tr, sl, cc, pd, rv, g, tp)"""
    pv = _vals(t, (), 1)
    ours, theirs = assert_match(module(body), x, pv)
    # hand-derived spot checks
    _same_bits(ours[0], np.broadcast_to(np.transpose(x, (2, 0, 1))[None], (2, 5, 3, 4)))
    _same_bits(ours[3], x[0:3:2, 1:4:2, 0:5:3])
    _same_bits(ours[6], x[::-1, :, ::-1])
    for o, w in zip(ours[:8], theirs[:8]):  # data movement: the same bits as XLA
        if et(t).bits >= 8 and t != "pred":
            _same_bits(o, w)


def _same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype
    if a.dtype.itemsize in (1, 2, 4, 8) and a.dtype != np.bool_:
        a, b = a.view(f"u{a.dtype.itemsize}"), b.view(f"u{b.dtype.itemsize}")
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("t", ORACLE_TYPES)
def test_iota_all_types(t):
    if t == "pred":
        pytest.skip("StableHLO verification rejects iota of pred (XLA refuses the module)")
    dims = (3, 20) if et(t).bits > 4 else (3, 5)
    body = "\n".join(f"  i{d} = {shape_text(t, dims)} iota(), iota_dimension={d}" for d in (0, 1))
    body += f"\n  ROOT out = ({shape_text(t, dims)}, {shape_text(t, dims)}) tuple(i0, i1)"
    ours, theirs = assert_match(module(body))
    if et(t).is_integer and et(t).bits >= 8:
        np.testing.assert_array_equal(ours[1], np.broadcast_to(np.arange(dims[1]), dims))


@settings(max_examples=8, deadline=None, derandomize=True)
@given(data=st.data())
def test_hypothesis_transpose_slice_pad(data):
    rank = data.draw(st.integers(1, 3))
    dims = tuple(data.draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank)))
    perm = data.draw(st.permutations(range(rank)))
    t = data.draw(st.sampled_from(["s32", "f32", "bf16", "u8"]))
    sl, sl_dims, pads, pad_dims = [], [], [], []
    for d in dims:
        start = data.draw(st.integers(0, d - 1))
        limit = data.draw(st.integers(start + 1, d))
        stride = data.draw(st.integers(1, 3))
        sl.append(f"[{start}:{limit}:{stride}]")
        sl_dims.append(-(-(limit - start) // stride))
        lo, hi, inner = (data.draw(st.integers(-1, 2)), data.draw(st.integers(-1, 2)),
                         data.draw(st.integers(0, 2)))
        n = lo + hi + d + max(d - 1, 0) * inner
        if n < 0:
            lo, hi = 0, 0
            n = d + max(d - 1, 0) * inner
        pads.append(f"{lo}_{hi}_{inner}")
        pad_dims.append(n)
    tr_dims = tuple(dims[p] for p in perm)
    s = lambda d: shape_text(t, d)  # noqa: E731
    body = f"""  x = {s(dims)} parameter(0)
  z = {t}[] constant(3)
  a = {s(tr_dims)} transpose(x), dimensions={{{','.join(map(str, perm))}}}
  b = {s(sl_dims)} slice(x), slice={{{', '.join(sl)}}}
  c = {s(pad_dims)} pad(x, z), padding={'x'.join(pads)}
  ROOT out = ({s(tr_dims)}, {s(sl_dims)}, {s(pad_dims)}) tuple(a, b, c)"""
    x = _vals(t, dims, data.draw(st.integers(0, 1000)))
    ours, _ = assert_match(module(body), x)
    np.testing.assert_array_equal(ours[0], np.transpose(x, perm))


# ------------------------------------------------------------------ bitcast (by hand)


@pytest.mark.parametrize("in_layout,out_dims,out_layout", [
    ((1, 0), (4, 3), (1, 0)),   # row-major both: a plain reshape of the memory
    ((0, 1), (4, 3), (1, 0)),   # column-major operand: memory is x.T
    ((1, 0), (4, 3), (0, 1)),   # column-major result
    ((0, 1), (3, 4), (0, 1)),
])
def test_bitcast_layouts_by_hand(in_layout, out_dims, out_layout):
    """``bitcast`` reinterprets memory: the XLA oracle refuses it, so derive with numpy.
    Memory order of a layout is the transpose by reversed minor_to_major."""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    text = module(f"  x = f32[3,4]{{{','.join(map(str, in_layout))}}} parameter(0)\n"
                  f"  ROOT r = f32[{out_dims[0]},{out_dims[1]}]{{{','.join(map(str, out_layout))}}} "
                  f"bitcast(x)")
    memory = np.transpose(x, tuple(reversed(in_layout))).ravel()
    major_to_minor = tuple(reversed(out_layout))
    phys = memory.reshape([out_dims[d] for d in major_to_minor])
    want = np.transpose(phys, np.argsort(major_to_minor))
    np.testing.assert_array_equal(run_hloref(text, x), want)


def test_bitcast_element_type_same_width():
    x = np.array([1.0, -2.0, 0.5], np.float32)
    text = module("  x = f32[3]{0} parameter(0)\n  ROOT r = s32[3]{0} bitcast(x)")
    np.testing.assert_array_equal(run_hloref(text, x), x.view(np.int32))
