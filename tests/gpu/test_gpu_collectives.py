"""Collectives on the GPU backend: replica-id and partition-id of a single-device module
against the cpu backend and XLA:CPU; modules of several replicas (one GPU interpreter
per replica) against the cpu backend and by hand."""

from __future__ import annotations

import numpy as np
import pytest

import hloref

from hloref.types import element_type

from collective_modules import (MODULES, OUTSIDE_GROUPS, PERMUTE_SEVERAL, per_device_inputs,
                                permute_several_inputs)
from gpu_check import RNG, bits_equal, check


def test_replica_and_partition_id_single_device():
    text = """HloModule r
ENTRY e {
  r = u32[] replica-id()
  p = u32[] partition-id()
  ROOT t = (u32[], u32[]) tuple(r, p)
}
"""
    out = check(text, xla="required")
    assert [int(v) for v in out] == [0, 0]


# ----------------------------------------------------------------- several simulated devices
# One GPU interpreter per replica (fallback disabled), against the cpu backend's
# simulation (bit for bit) and values derived by hand from operation_semantics.

MULTI = """HloModule m, replica_count=4
add {{ a = {t}[] parameter(0)  b = {t}[] parameter(1)  ROOT s = {t}[] add(a, b) }}
mx {{ a = {t}[] parameter(0)  b = {t}[] parameter(1)  ROOT s = {t}[] maximum(a, b) }}
ENTRY e {{
  x = {t}[4,3] parameter(0)
  ar = {t}[4,3] all-reduce(x), replica_groups={{}}, to_apply=add
  am = {t}[4,3] all-reduce(x), replica_groups={{{{0,2}},{{1,3}}}}, to_apply=mx
  ag = {t}[4,6] all-gather(x), replica_groups={{{{1,0}},{{3,2}}}}, dimensions={{1}}
  rs = {t}[1,3] reduce-scatter(x), replica_groups={{}}, dimensions={{0}}, to_apply=add
  aa = {t}[4,3] all-to-all(x), replica_groups={{}}, dimensions={{0}}
  cp = {t}[4,3] collective-permute(x), source_target_pairs={{{{0,1}},{{1,2}},{{2,0}}}}
  cb = {t}[4,3] collective-broadcast(x), replica_groups={{{{2,0,1,3}}}}
  id = u32[] replica-id()
  s = {t}[4,3] all-reduce-start(x), replica_groups={{}}, to_apply=add
  d = {t}[4,3] all-reduce-done(s)
  ROOT t = ({t}[4,3], {t}[4,3], {t}[4,6], {t}[1,3], {t}[4,3], {t}[4,3], {t}[4,3], u32[], {t}[4,3]) tuple(ar, am, ag, rs, aa, cp, cb, id, d)
}}
"""


@pytest.mark.parametrize("t", ["s32", "f32", "bf16"])
def test_collectives_on_four_devices(t):
    # small integers: every sum exact in each type
    xs = [RNG.integers(-4, 5, (4, 3)).astype(element_type(t).dtype) for _ in range(4)]
    m = hloref.parse(MULTI.format(t=t))
    cpu = hloref.evaluate(m, xs)
    gpu = hloref.evaluate(m, xs, backend="gpu", fallback=False)
    assert hloref.gpu.last_report.total == 0
    w = [x.astype(np.float64) for x in xs]
    for d in range(4):
        assert bits_equal(gpu[d], cpu[d])
        ar, am, ag, rs, aa, cp, cb, rid, done = (np.asarray(v).astype(np.float64) for v in gpu[d])
        total = ((w[0] + w[1]) + w[2]) + w[3]  # group order
        np.testing.assert_array_equal(ar, total.astype(xs[0].dtype).astype(np.float64))
        np.testing.assert_array_equal(done, ar)
        np.testing.assert_array_equal(am, np.maximum(w[d % 2], w[d % 2 + 2]))
        pair = [1, 0] if d < 2 else [3, 2]
        np.testing.assert_array_equal(ag, np.concatenate([w[pair[0]], w[pair[1]]], axis=1))
        np.testing.assert_array_equal(rs, ar[d:d + 1])
        np.testing.assert_array_equal(aa, np.stack([w[k][d] for k in range(4)]))
        src = {1: 0, 2: 1, 0: 2}.get(d)
        np.testing.assert_array_equal(cp, w[src] if src is not None else np.zeros((4, 3)))
        np.testing.assert_array_equal(cb, w[2])
        assert int(rid) == d


def test_collective_permute_start_and_all_gather_start_on_two_devices():
    text = """HloModule m, replica_count=2
ENTRY e {
  x = f32[3] parameter(0)
  s = (f32[3], f32[3], u32[], u32[]) collective-permute-start(x), source_target_pairs={{0,1},{1,0}}
  p = f32[3] collective-permute-done(s)
  g = (f32[3], f32[6]) all-gather-start(x), replica_groups={}, dimensions={0}
  a = f32[6] all-gather-done(g)
  ROOT t = (f32[3], f32[6]) tuple(p, a)
}
"""
    xs = [np.array([1, 2, 3], np.float32), np.array([4, 5, 6], np.float32)]
    gpu = hloref.evaluate(hloref.parse(text), xs, backend="gpu", fallback=False)
    assert hloref.gpu.last_report.total == 0
    np.testing.assert_array_equal(gpu[0][0], xs[1])
    np.testing.assert_array_equal(gpu[1][0], xs[0])
    for d in range(2):
        np.testing.assert_array_equal(gpu[d][1], [1, 2, 3, 4, 5, 6])


def test_collective_reduce_ragged_all_to_all_send_recv_feeds_on_two_devices():
    """collective-reduce (sum at the root, zeros elsewhere), ragged-all-to-all, send/recv
    between the devices, infeed/outfeed: against the cpu backend and by hand."""
    text = """HloModule m, replica_count=2
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
ENTRY e {
  x = f32[3] parameter(0)
  cr = f32[3] collective-reduce(x), replica_groups={}, to_apply=add
  d = f32[4,2] parameter(1)
  o = f32[4,2] parameter(2)
  io = s32[2] parameter(3)
  ss = s32[2] parameter(4)
  oo = s32[2] parameter(5)
  rs = s32[2] parameter(6)
  ra = f32[4,2] ragged-all-to-all(d, o, io, ss, oo, rs), replica_groups={{0,1}}
  t = token[] after-all()
  s = (f32[3], u32[], token[]) send(x, t), channel_id=5, frontend_attributes={_xla_send_recv_source_target_pairs="{{0,1},{1,0}}"}
  sd = token[] send-done(s), channel_id=5
  r = (f32[3], u32[], token[]) recv(t), channel_id=5, frontend_attributes={_xla_send_recv_source_target_pairs="{{0,1},{1,0}}"}
  rd = (f32[3], token[]) recv-done(r), channel_id=5
  got = f32[3] get-tuple-element(rd), index=0
  inf = (f32[2], token[]) infeed(t)
  fed = f32[2] get-tuple-element(inf), index=0
  of = token[] outfeed(got, t), outfeed_shape=f32[3]{0}
  ROOT out = (f32[3], f32[4,2], f32[3], f32[2]) tuple(cr, ra, got, fed)
}
"""
    m = hloref.parse(text)
    xs = [np.array([1, 2, 3], np.float32), np.array([4, 5, 6], np.float32)]
    data = [np.arange(8, dtype=np.float32).reshape(4, 2), 10 + np.arange(8, dtype=np.float32).reshape(4, 2)]
    base = [np.full((4, 2), -1, np.float32)] * 2
    # device 0 sends rows [0, 1) to itself and [1, 3) to device 1; device 1 sends rows
    # [0, 2) to device 0 (placed at row 1) and [2, 3) to itself (placed at row 3)
    io = [np.array([0, 1], np.int32), np.array([0, 2], np.int32)]
    ss = [np.array([1, 2], np.int32), np.array([2, 1], np.int32)]
    oo = [np.array([0, 0], np.int32), np.array([1, 3], np.int32)]
    rs = [np.array([1, 2], np.int32), np.array([2, 1], np.int32)]
    args = [xs, data, base, io, ss, oo, rs]
    runs = {}
    for backend in ("cpu", "gpu"):
        # non-empty lists: hloref.evaluate replaces an empty per-device list by its own
        outfeed = [["first"], ["first"]]
        kw = {"fallback": False} if backend == "gpu" else {}
        runs[backend] = (hloref.evaluate(m, *args, backend=backend, outfeed=outfeed,
                                         infeed=[[np.array([7, 8], np.float32)],
                                                 [np.array([9, 0], np.float32)]], **kw), outfeed)
    assert hloref.gpu.last_report.total == 0
    (gpu, gpu_out), (cpu, cpu_out) = runs["gpu"], runs["cpu"]
    for d in range(2):
        assert bits_equal(gpu[d], cpu[d])
        np.testing.assert_array_equal(gpu_out[d][1], cpu_out[d][1])
    np.testing.assert_array_equal(gpu[0][0], [5, 7, 9])
    np.testing.assert_array_equal(gpu[1][0], [0, 0, 0])
    np.testing.assert_array_equal(gpu[0][1], [[0, 1], [10, 11], [12, 13], [-1, -1]])
    np.testing.assert_array_equal(gpu[1][1], [[2, 3], [4, 5], [-1, -1], [14, 15]])
    np.testing.assert_array_equal(gpu[0][2], xs[1])
    np.testing.assert_array_equal(gpu[1][2], xs[0])
    np.testing.assert_array_equal(gpu[0][3], [7, 8])
    np.testing.assert_array_equal(gpu_out[1][1], xs[0])


def test_reducer_the_compiler_refuses_on_two_devices():
    """A reducer the device compiler does not take (a tuple-shaped custom-call): the
    all-reduce applies it element by element through the GPU interpreter
    (``gpu/calls.py``), on the device, as the CPU's ``_combine`` applies it."""
    text = """HloModule m, replica_count=2
red { a = s32[] parameter(0)  b = s32[] parameter(1)  s = s32[] add(a, b)  i = u32[] partition-id()  z = s32[] convert(i)  w = s32[] add(s, z)  t = (s32[], s32[]) custom-call(w, w), custom_call_target="Sharding"  c = s32[] get-tuple-element(t), index=0  ROOT m = s32[] add(c, c) }
ENTRY e {
  x = s32[3] parameter(0)
  ROOT r = s32[3] all-reduce(x), replica_groups={}, to_apply=red
}
"""
    xs = [np.array([1, 2, 3], np.int32), np.array([4, 5, 6], np.int32)]
    m = hloref.parse(text)
    cpu = hloref.evaluate(m, xs)
    gpu = hloref.evaluate(m, xs, backend="gpu", fallback=False)
    assert hloref.gpu.last_report.total == 0
    for d in range(2):
        assert bits_equal(gpu[d], cpu[d])
        np.testing.assert_array_equal(gpu[d], [10, 14, 18])  # (a + b) * 2


#: One device: an infeed's value, and its negation outfed.
FEEDS = """HloModule m
ENTRY e {
  t = token[] after-all()
  inf = (f32[2], token[]) infeed(t)
  fed = f32[2] get-tuple-element(inf), index=0
  n = f32[2] negate(fed)
  of = token[] outfeed(n, t), outfeed_shape=f32[2]{0}
  ROOT r = (f32[2], token[]) tuple(fed, of)
}
"""


def test_feeds_on_one_device():
    """evaluate_gpu's io: infeed from and outfeed to the caller's queues."""
    from collections import deque
    from hloref.evaluator.collectives import DeviceIO
    text = FEEDS
    io = DeviceIO(infeed=deque([np.array([1.5, -2], np.float32)]))
    out = hloref.gpu.evaluate_gpu(hloref.parse(text), [], fallback=False, io=io)
    np.testing.assert_array_equal(out[0], [1.5, -2])
    np.testing.assert_array_equal(io.outfeed[0], [-1.5, 2])


def test_feeds_on_one_device_through_evaluate():
    """hloref.evaluate(backend="gpu") hands the caller's infeed/outfeed to the device
    (they were dropped: an infeed on one device read an empty queue)."""
    text = FEEDS
    outfeed = []
    out = hloref.evaluate(text, backend="gpu", fallback=False,
                          infeed=[np.array([1.5, -2], np.float32)], outfeed=outfeed)
    np.testing.assert_array_equal(out[0], [1.5, -2])
    np.testing.assert_array_equal(outfeed[0], [-1.5, 2])


# ------------------------------------------ XLA's collective group modes (replicas x partitions)
# The modules tests/test_collectives_xla.py checks against XLA:CPU on several host
# devices; here the GPU backend (fallback disabled) must give the cpu backend's values.

@pytest.mark.parametrize("name", ["all_reduce_modes", "collective_permute_modes",
                                  "gather_scatter_to_all", "partitions_only",
                                  "conditional_same_channel", "mesh_axes_groups",
                                  "combined_all_reduce"])
def test_group_modes_match_the_cpu_backend(name):
    text = MODULES[name]
    args = per_device_inputs(hloref.parse(text))
    cpu = hloref.evaluate(text, *args)
    gpu = hloref.evaluate(text, *args, backend="gpu", fallback=False)
    assert hloref.gpu.last_report.total == 0
    for d, (c, g) in enumerate(zip(cpu, gpu)):
        for a, b in zip(c, g, strict=True):
            np.testing.assert_array_equal(np.asarray(b), np.asarray(a), err_msg=f"device {d}")


def test_all_gather_whose_group_contradicts_its_declared_shape_is_an_error():
    # the cpu backend's rule (tests/test_collectives_xla.py): one participant cannot
    # double the gathered dimension
    text = """HloModule m, num_partitions=2
ENTRY e {
  x = f32[1,2,4] parameter(0)
  ROOT ag = f32[1,4,4] all-gather(x), dimensions={1}, replica_groups={}
}
"""
    xs = [np.ones((1, 2, 4), np.float32)] * 2
    with pytest.raises(hloref.HloError, match=r"1 participant\(s\) give \[1, 2, 4\]"):
        hloref.evaluate(text, xs, backend="gpu", fallback=False, verify=False)


def _gpu_equals_cpu(text, *args):
    m = hloref.parse(text)
    cpu = hloref.evaluate(m, *args)
    gpu = hloref.evaluate(m, *args, backend="gpu", fallback=False)
    assert hloref.gpu.last_report.total == 0
    for g, c in zip(gpu, cpu):
        for a, b in zip(g if isinstance(g, tuple) else (g,), c if isinstance(c, tuple) else (c,)):
            assert bits_equal(a, b), (a, b)
    return gpu


def test_reduce_scatter_of_two_operands_by_hand():
    """Each operand summed over the two replicas, replica d keeping block d."""
    text = """HloModule m, replica_count=2
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
ENTRY e {
  x = f32[4] parameter(0)
  y = f32[2] parameter(1)
  ROOT rs = (f32[2], f32[1]) reduce-scatter(x, y), dimensions={0}, replica_groups={}, to_apply=add
}
"""
    xs = [np.array([1, 2, 3, 4], np.float32), np.array([10, 20, 30, 40], np.float32)]
    ys = [np.array([0.5, 1.5], np.float32), np.array([-1, 8], np.float32)]
    gpu = _gpu_equals_cpu(text, xs, ys)
    np.testing.assert_array_equal(gpu[0][0], [11, 22])
    np.testing.assert_array_equal(gpu[1][0], [33, 44])
    np.testing.assert_array_equal(gpu[0][1], [-0.5])
    np.testing.assert_array_equal(gpu[1][1], [9.5])


def test_collective_permute_of_several_operands_and_in_place_by_hand():
    """Several operands: a tuple, each permuted (replica 0 has no source: zeros); the
    in-place form (``slice_sizes``) permutes its input whole."""
    xs, ys = permute_several_inputs()
    gpu = _gpu_equals_cpu(PERMUTE_SEVERAL, xs, ys)
    np.testing.assert_array_equal(gpu[0][0], [0, 0])
    np.testing.assert_array_equal(gpu[2][0], xs[1])
    np.testing.assert_array_equal(gpu[1][1], ys[0])
    in_place = """HloModule m, replica_count=2
ENTRY e {
  x = f32[4] parameter(0)
  o = f32[4] parameter(1)
  c = s32[] constant(0)
  i = (s32[]) tuple(c)
  ROOT cp = f32[4] collective-permute(x, o, i, i), source_target_pairs={{0,1},{1,0}}, slice_sizes={{4}}
}
"""
    xs = [np.arange(4, dtype=np.float32) + 10 * d for d in range(2)]
    gpu = _gpu_equals_cpu(in_place, xs, [np.zeros(4, np.float32)] * 2)
    np.testing.assert_array_equal(gpu[0], xs[1])
    np.testing.assert_array_equal(gpu[1], xs[0])


def test_a_device_in_no_group_of_collective_broadcast_or_reduce_gets_zeros():
    """The spec's collective_broadcast example (its values by hand, as
    tests/test_collectives.py has them) on the device: replicas 0 and 3 are in no group and get zeros."""
    xs = [np.array([[1, 2]], np.int64), np.array([[3, 4]], np.int64),
          np.array([[5, 6]], np.int64), np.array([[7, 8]], np.int64)]
    out = hloref.evaluate(OUTSIDE_GROUPS, xs, backend="gpu", fallback=False)
    assert hloref.gpu.last_report.total == 0
    assert [np.asarray(cb).tolist() for cb, _ in out] == [[[0, 0]], [[5, 6]], [[5, 6]], [[0, 0]]]
    assert [np.asarray(cr).tolist() for _, cr in out] == [[[0, 0]], [[8, 10]], [[0, 0]], [[0, 0]]]
