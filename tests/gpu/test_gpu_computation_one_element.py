"""Ops on one-element arrays inside computations that ops call on every element
(``gpu/computation_one_element.py``; ``gpu/computation_control.py``: ``one_device``): nested map, reduce,
reduce-window, sort, gather, pad, get-dimension-size; replica-id, partition-id and the
collectives of a one-device module. Each result against the CPU backend bit for bit
and by hand (the value the written semantics gives), ``fallback=False``.

No XLA here: XLA:CPU (jaxlib 0.10.2) aborts compiling a reduce or map whose computation
holds ops its loop-fusion emitter cannot index (a call, a collective, a while...:
"ComputeOutputToInputIndexing is not implemented for opcode ...", then a failed check in
computation_partitioner.cc), and the modules here are such computations.
"""

from __future__ import annotations

import numpy as np
import pytest

import hloref
from hloref.errors import HloUnsupportedError

from gpu_check import check, module, values

ADD = """
add {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT s = {t}[] add(a, b)
}}
mul {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT s = {t}[] multiply(a, b)
}}
"""


def map_module(t, n, body_lines, extra=""):
    body = f"""
body {{
  x = {t}[] parameter(0)
{body_lines}
}}
"""
    return module([f"{t}[{n}]"], "map(p0), dimensions={0}, to_apply=body", f"{t}[{n}]",
                  extra=ADD.format(t=t) + extra + body)


@pytest.mark.parametrize("t", ["f32", "s32", "bf16", "u8"])
def test_reduce_of_one_element_in_a_map(t):
    """``reduce(reshape(x) -> t[1,1], init 3)`` with ``mul``: ``mul(3, x)`` = 3 x (one
    combine of the init with the one element, whatever the dimensions)."""
    lines = f"""  r = {t}[1,1] reshape(x)
  three = {t}[] constant(3)
  q = {t}[1] reduce(r, three), dimensions={{1}}, to_apply=mul
  ROOT y = {t}[] reshape(q)"""
    x = values(t, (40,), kind="small")
    got = check(map_module(t, 40, lines), x, xla=False)
    want = (x.astype(np.float64) * 3).astype(x.dtype)
    assert (np.asarray(got) == want).all()


def test_variadic_reduce_and_sort_of_one_element_in_a_reducer():
    """A reducer holding a variadic reduce (sum, product) of one-element arrays and a
    variadic sort of them (the comparator never runs): the outer reduce of x over 5
    elements with init 0 is then sum(x) + 1 * ... computed by hand below."""
    extra = ADD.format(t="s32") + """
pair {
  a0 = s32[] parameter(0)
  a1 = s32[] parameter(1)
  b0 = s32[] parameter(2)
  b1 = s32[] parameter(3)
  s = s32[] add(a0, b0)
  m = s32[] multiply(a1, b1)
  ROOT t = (s32[], s32[]) tuple(s, m)
}
lt {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT l = pred[] compare(a, b), direction=LT
}
red {
  acc = s32[] parameter(0)
  v = s32[] parameter(1)
  r = s32[1] reshape(v)
  z = s32[] constant(10)
  o = s32[] constant(2)
  q = (s32[], s32[]) reduce(r, r, z, o), dimensions={0}, to_apply=pair
  s = s32[] get-tuple-element(q), index=0
  m = s32[] get-tuple-element(q), index=1
  sr = s32[1] reshape(s)
  mr = s32[1] reshape(m)
  st = (s32[1], s32[1]) sort(mr, sr), dimensions={0}, to_apply=lt
  sb = s32[1] get-tuple-element(st), index=1
  m2 = s32[1] get-tuple-element(st), index=0
  d = s32[1] subtract(m2, sb)
  e = s32[] reshape(d)
  ROOT u = s32[] add(acc, e)
}
"""
    text = module(["s32[7,5]", "s32[]"], "reduce(p0, p1), dimensions={1}, to_apply=red", "s32[7]",
                  extra=extra)
    x = values("s32", (7, 5), kind="small")
    got = check(text, x, np.int32(0), xla=False)
    # each element v adds 2 v - (10 + v) = v - 10
    want = (x.astype(np.int64) - 10).sum(axis=1).astype(np.int32)
    assert (np.asarray(got) == want).all()


@pytest.mark.parametrize("pad,use_element", [("0_0", True), ("0_0_3", True), ("-1_1", False),
                                             ("1_-1", False)])
def test_pad_of_one_element(pad, use_element):
    """The result's one element is the operand's when the low padding is 0 (interior
    padding adds nothing between one element), else the padding value (-5)."""
    lines = f"""  r = f32[1] reshape(x)
  v = f32[] constant(-5)
  q = f32[1] pad(r, v), padding={pad}
  ROOT y = f32[] reshape(q)"""
    x = values("f32", (16,))
    got = check(map_module("f32", 16, lines), x, xla=False)
    assert (np.asarray(got) == (x if use_element else np.float32(-5))).all()


@pytest.mark.parametrize("window,covers", [("size=1", True), ("size=2 pad=1_0", True),
                                           ("size=1 pad=1_-1", False),
                                           ("size=3 pad=1_3 rhs_dilate=2", False),
                                           ("size=3 pad=2_2 rhs_dilate=2", True)])
def test_reduce_window_of_one_element(window, covers):
    """Output 0's window holds positions ``k * dilation - low``: when one of them is 0
    the result is ``add(init, x)``, else the init (7)."""
    lines = f"""  r = f32[1] reshape(x)
  i = f32[] constant(7)
  q = f32[1] reduce-window(r, i), window={{{window}}}, to_apply=add
  ROOT y = f32[] reshape(q)"""
    x = np.round(values("f32", (16,)) * 8)
    got = check(map_module("f32", 16, lines), x, xla=False)
    assert (np.asarray(got) == (x + 7 if covers else np.float32(7))).all()


def test_gather_nested_map_and_dimension_size():
    """gather of the one element (start index 3 clamped to 0), a map inside the map
    (negate), and get-dimension-size (1): ``-x + 1``."""
    extra = """
neg {
  a = f32[] parameter(0)
  ROOT n = f32[] negate(a)
}
"""
    lines = """  r = f32[1] reshape(x)
  i = s32[1] constant({3})
  g = f32[1] gather(r, i), offset_dims={}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1}
  m = f32[1] map(g), dimensions={0}, to_apply=neg
  d = s32[] get-dimension-size(m), dimensions={0}
  c = f32[] convert(d)
  n = f32[] reshape(m)
  ROOT y = f32[] add(n, c)"""
    x = np.linspace(-3, 5, 24, dtype=np.float32)
    got = check(map_module("f32", 24, lines, extra), x, xla=False)
    assert (np.asarray(got) == -x + np.float32(1)).all()


def test_one_device_collectives_in_a_reducer():
    """On one device: all-reduce, all-gather, all-to-all, collective-broadcast give the
    operand, collective-permute with ``{0,0}`` the operand and with no pair zeros, and
    replica-id and partition-id are 0: the reducer adds ``b + 0 + 0``: row sums."""
    extra = ADD.format(t="f32") + """
red {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  r = f32[] all-reduce(b), replica_groups={}, to_apply=add
  g1 = f32[1] reshape(r)
  g = f32[1] all-gather(g1), dimensions={0}, replica_groups={}
  t = f32[1] all-to-all(g), dimensions={0}, replica_groups={}
  cb = f32[1] collective-broadcast(t), replica_groups={}
  p = f32[1] collective-permute(cb), source_target_pairs={{0,0}}
  zp = f32[1] collective-permute(cb), source_target_pairs={}
  sm = f32[1] add(p, zp)
  s = f32[] reshape(sm)
  rid = u32[] replica-id()
  pid = u32[] partition-id()
  ids = u32[] add(rid, pid)
  fi = f32[] convert(ids)
  v = f32[] add(s, fi)
  ROOT u = f32[] add(a, v)
}
"""
    text = module(["f32[6,9]", "f32[]"], "reduce(p0, p1), dimensions={1}, to_apply=red", "f32[6]",
                  extra=extra)
    x = np.arange(54, dtype=np.float32).reshape(6, 9) - 20  # whole numbers: exact sums
    got = check(text, x, np.float32(0), xla=False)
    assert (np.asarray(got) == x.sum(axis=1)).all()


def test_replica_id_in_a_map_on_two_replicas():
    """Each replica's map body adds its replica id (the computation is compiled per
    device): device d gives x + d, on both backends."""
    text = """HloModule m, replica_count=2
body {
  x = f32[] parameter(0)
  rid = u32[] replica-id()
  f = f32[] convert(rid)
  ROOT y = f32[] add(x, f)
}
ENTRY e {
  p0 = f32[20] parameter(0)
  ROOT r = f32[20] map(p0), dimensions={0}, to_apply=body
}
"""
    x = [np.arange(20, dtype=np.float32), np.arange(20, dtype=np.float32) * 2]
    for backend in ("cpu", "gpu"):
        kw = {"fallback": False} if backend == "gpu" else {}
        out = hloref.evaluate(text, x, backend=backend, **kw)
        assert (np.asarray(out[0]) == x[0]).all() and (np.asarray(out[1]) == x[1] + 1).all()


def test_infeed_in_a_reducer_runs_on_the_device():
    """Host transfers in a computation called per element: the reducer runs one call at a
    time through the GPU interpreter (``gpu/calls.py``), the queue read in the CPU's call
    order; equal to the CPU's result and, by hand, to the sum of the inputs and feeds."""
    text = """HloModule m
red {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  tok = token[] after-all()
  ifd = (f32[], token[]) infeed(tok)
  v = f32[] get-tuple-element(ifd), index=0
  s = f32[] add(a, b)
  ROOT t = f32[] add(s, v)
}
ENTRY e {
  x = f32[4] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(x, z), dimensions={0}, to_apply=red
}
"""
    x = np.arange(4, dtype=np.float32)
    feed = [np.float32(100 * (k + 1)) for k in range(4)]
    cpu = hloref.evaluate(text, x, infeed=list(feed))
    assert cpu == x.sum() + sum(feed)
    gpu = hloref.evaluate(text, x, backend="gpu", fallback=False, infeed=list(feed))
    assert hloref.gpu.last_report.total == 0 and gpu == cpu


@pytest.mark.parametrize("index,applies", [(0, True), (1, False), (-1, False)])
def test_scatter_of_one_element(index, applies):
    """A scatter into a one-element array: the window fits at index 0 only, so the
    result is ``mul(x, 3)`` there, and the operand itself for an out-of-bounds index."""
    lines = f"""  r = f32[1] reshape(x)
  i = s32[1] constant({{{index}}})
  u = f32[1] constant({{3}})
  q = f32[1] scatter(r, i, u), update_window_dims={{}}, inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply=mul
  ROOT y = f32[] reshape(q)"""
    x = np.linspace(-2, 2, 20, dtype=np.float32)
    got = check(map_module("f32", 20, lines), x, xla=False)
    assert (np.asarray(got) == (x * 3 if applies else x)).all()


def test_topk_and_tokens():
    """topk of one element (k = 1): the element and index 0; ``after-all`` and
    ``add-dependency`` (the value): ``x + 0``."""
    lines = """  r = f32[1] reshape(x)
  tk = (f32[1], s32[1]) topk(r), k=1, largest=true
  v = f32[1] get-tuple-element(tk), index=0
  i = s32[1] get-tuple-element(tk), index=1
  tok = token[] after-all()
  dv = f32[1] add-dependency(v, tok)
  fi = f32[1] convert(i)
  s = f32[1] add(dv, fi)
  ROOT y = f32[] reshape(s)"""
    x = np.linspace(-2, 2, 20, dtype=np.float32)
    got = check(map_module("f32", 20, lines), x, xla=False)
    assert (np.asarray(got) == x).all()
