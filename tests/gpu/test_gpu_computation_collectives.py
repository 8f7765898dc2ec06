"""Computations called per element that hold collectives, on modules of several devices
(``gpu/computation_devices.py``): map bodies and reduce reducers with all-reduce,
all-gather, reduce-scatter, all-to-all, collective-permute, collective-broadcast, the
async pairs and replica-id/partition-id, on 2 and 4 devices (replicas, partitions):
the GPU backend with ``fallback=False`` against the cpu backend's simulation bit for bit,
and values by hand from the CPU's rendezvous (call ``k`` of every device meets call ``k``
of the others, group order). XLA:CPU aborts compiling a map or reduce whose computation
holds a collective, so it gives no values here."""

from __future__ import annotations

import numpy as np
import pytest

import hloref
from hloref.errors import HloEvalError, HloUnsupportedError
from hloref.types import element_type

from collective_modules import (BRANCH_ALL_REDUCE, collective_forms,
                                collective_forms_by_hand)
from gpu_check import RNG, check_devices


def test_map_all_reduce_times_replica_id_by_hand():
    text = """HloModule m, replica_count=2
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
body {
  x = f32[] parameter(0)
  ar = f32[] all-reduce(x), replica_groups={}, to_apply=add
  id = u32[] replica-id()
  c = f32[] convert(id)
  ROOT m = f32[] multiply(ar, c)
}
ENTRY e {
  p = f32[2,3] parameter(0)
  ROOT r = f32[2,3] map(p), dimensions={0,1}, to_apply=body
}
"""
    xs = [np.array([[1, 2, 3], [4, 5, 6]], np.float32),
          np.array([[10, 20, 30], [40, 50, 60]], np.float32)]
    gpu = check_devices(text, xs)
    # element k of replica 0 meets element k of replica 1: (x0 + x1) * replica-id
    np.testing.assert_array_equal(gpu[0], np.zeros((2, 3)))
    np.testing.assert_array_equal(gpu[1], [[11, 22, 33], [44, 55, 66]])


MAP4 = """HloModule m, replica_count=4
add {{ a = {t}[] parameter(0)  b = {t}[] parameter(1)  ROOT s = {t}[] add(a, b) }}
mx {{ a = {t}[] parameter(0)  b = {t}[] parameter(1)  ROOT s = {t}[] maximum(a, b) }}
body {{
  x = {t}[] parameter(0)
  y = {t}[] parameter(1)
  s = {t}[] all-reduce(x), replica_groups={{}}, to_apply=add
  m = {t}[] all-reduce(y), replica_groups={{{{0,2}},{{1,3}}}}, to_apply=mx
  ROOT r = {t}[] subtract(s, m)
}}
ENTRY e {{
  p = {t}[5] parameter(0)
  q = {t}[5] parameter(1)
  ROOT r = {t}[5] map(p, q), dimensions={{0}}, to_apply=body
}}
"""


@pytest.mark.parametrize("t", ["f32", "bf16", "s32"])
def test_map_all_reduce_sum_and_max_on_four_replicas(t):
    dtype = element_type(t).dtype
    xs = [(RNG.standard_normal(5) * 4).astype(dtype) for _ in range(4)]
    ys = [(RNG.standard_normal(5) * 4).astype(dtype) for _ in range(4)]
    gpu = check_devices(MAP4.format(t=t), xs, ys)
    if t == "s32":  # integers: exact by hand
        for d in range(4):
            total = xs[0] + xs[1] + xs[2] + xs[3]
            np.testing.assert_array_equal(gpu[d], total - np.maximum(ys[d % 2], ys[d % 2 + 2]))


def test_reduce_reducer_all_reduce_max_on_four_replicas_by_hand():
    """The reducer's all-reduce combines fold step k of every replica: acc_d =
    max over replicas of (acc_d + x_d[k]) is the same on every replica after a step."""
    text = """HloModule m, replica_count=4
mx { a = s32[] parameter(0)  b = s32[] parameter(1)  ROOT s = s32[] maximum(a, b) }
red {
  a = s32[] parameter(0)  b = s32[] parameter(1)
  s = s32[] add(a, b)
  ROOT m = s32[] all-reduce(s), replica_groups={}, to_apply=mx
}
ENTRY e {
  p = s32[2,3] parameter(0)
  z = s32[] parameter(1)
  ROOT r = s32[2] reduce(p, z), dimensions={1}, to_apply=red
}
"""
    xs = [RNG.integers(-9, 10, (2, 3)).astype(np.int32) for _ in range(4)]
    zs = [np.int32(v) for v in (0, 5, -3, 1)]
    gpu = check_devices(text, xs, zs)
    for o in range(2):
        acc = list(zs)
        for k in range(3):
            acc = [max(int(acc[e]) + int(xs[e][o, k]) for e in range(4))] * 4
        for d in range(4):
            assert int(gpu[d][o]) == acc[d]


def test_reduce_variadic_reducer_with_all_gather_on_two_replicas():
    """A variadic reducer (sum, and the other replica's element via a one-element
    all-gather, a small array sliced): the CPU's sequential fold, bit for bit."""
    text = """HloModule m, replica_count=2
red {
  a = f32[] parameter(0)  b = s32[] parameter(1)  x = f32[] parameter(2)  y = s32[] parameter(3)
  x1 = f32[1] reshape(x)
  g = f32[2] all-gather(x1), replica_groups={{0,1}}, dimensions={0}
  g1 = f32[1] slice(g), slice={[1:2]}
  o = f32[] reshape(g1)
  s = f32[] add(a, o)
  c = s32[] add(b, y)
  ROOT t = (f32[], s32[]) tuple(s, c)
}
ENTRY e {
  p = f32[3,4] parameter(0)
  q = s32[3,4] parameter(1)
  z = f32[] constant(0.5)
  w = s32[] constant(1)
  ROOT r = (f32[4], s32[4]) reduce(p, q, z, w), dimensions={0}, to_apply=red
}
"""
    xs = [RNG.standard_normal((3, 4)).astype(np.float32) for _ in range(2)]
    qs = [RNG.integers(-5, 6, (3, 4)).astype(np.int32) for _ in range(2)]
    gpu = check_devices(text, xs, qs)
    for d in range(2):
        np.testing.assert_array_equal(gpu[d][1], qs[d].sum(axis=0) + 1)
        want = np.full(4, 0.5, np.float32)
        for k in range(3):
            want = (want + xs[1][k]).astype(np.float32)  # replica 1's element, both
        np.testing.assert_array_equal(gpu[d][0], want)


def test_map_permute_broadcast_all_to_all_reduce_scatter_on_four_replicas():
    """One-element forms: collective-permute (a cycle on three replicas, zeros for the
    fourth), collective-broadcast (group root), all-to-all's tuple form (operand j to
    participant j), and of a two-element small array ``(x, y)``: reduce-scatter (its
    chunk of the sum) and all-to-all along dimension 0 (chunk ``me`` of each)."""
    text = "HloModule m, replica_count=4\n" + collective_forms() + """ENTRY e {
  p = s32[3] parameter(0)
  q = s32[3] parameter(1)
  ROOT r = s32[3] map(p, q), dimensions={0}, to_apply=body
}
"""
    xs = [RNG.integers(0, 9, 3).astype(np.int32) for _ in range(4)]
    ys = [RNG.integers(0, 9, 3).astype(np.int32) for _ in range(4)]
    gpu = check_devices(text, xs, ys)
    for d in range(4):
        np.testing.assert_array_equal(gpu[d], collective_forms_by_hand(xs, ys, d))


def test_async_pairs_and_nested_call_on_two_replicas():
    """all-reduce-start/done, all-gather-start/done and collective-permute-start/done in
    a computation the map body calls (inlined, unrolled with it)."""
    text = """HloModule m, replica_count=2
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
inner {
  x = f32[] parameter(0)
  s = f32[] all-reduce-start(x), replica_groups={}, to_apply=add
  d = f32[] all-reduce-done(s)
  x1 = f32[1] reshape(x)
  gs = (f32[1], f32[2]) all-gather-start(x1), replica_groups={{0,1}}, dimensions={0}
  g = f32[2] all-gather-done(gs)
  g0 = f32[1] slice(g), slice={[0:1]}
  h = f32[] reshape(g0)
  ps = (f32[], f32[], u32[], u32[]) collective-permute-start(x), source_target_pairs={{0,1},{1,0}}
  p = f32[] collective-permute-done(ps)
  t = f32[] multiply(d, h)
  ROOT o = f32[] subtract(t, p)
}
body { x = f32[] parameter(0)  ROOT c = f32[] call(x), to_apply=inner }
ENTRY e {
  p = f32[4] parameter(0)
  ROOT r = f32[4] map(p), dimensions={0}, to_apply=body
}
"""
    xs = [np.array([1, 2, 3, 4], np.float32), np.array([0.5, -1, 8, 2], np.float32)]
    gpu = check_devices(text, xs)
    for d in range(2):  # (x0 + x1) * x0 - x_other
        np.testing.assert_array_equal(gpu[d], (xs[0] + xs[1]) * xs[0] - xs[1 - d])


def test_map_on_two_by_two_partitions_with_global_ids():
    """replica_count=2 x num_partitions=2: an all-reduce over global device ids {0,3},{1,2}
    (channel_id, use_global_device_ids), a collective-permute between partitions, and
    partition-id in the body."""
    text = """HloModule m, replica_count=2, num_partitions=2
add { a = s32[] parameter(0)  b = s32[] parameter(1)  ROOT s = s32[] add(a, b) }
body {
  x = s32[] parameter(0)
  ar = s32[] all-reduce(x), channel_id=1, replica_groups={{0,3},{1,2}},
    use_global_device_ids=true, to_apply=add
  cp = s32[] collective-permute(x), channel_id=2, source_target_pairs={{0,1},{1,0}}
  id = u32[] partition-id()
  c = s32[] convert(id)
  k = s32[] constant(100)
  m = s32[] multiply(c, k)
  s = s32[] add(ar, m)
  t = s32[] multiply(cp, k)
  ROOT o = s32[] add(s, t)
}
ENTRY e {
  p = s32[3] parameter(0)
  ROOT r = s32[3] map(p), dimensions={0}, to_apply=body
}
"""
    xs = [RNG.integers(-9, 10, 3).astype(np.int32) for _ in range(4)]
    gpu = check_devices(text, xs)
    for d in range(4):  # device d = replica * 2 + partition
        group = [0, 3] if d in (0, 3) else [1, 2]
        other = d ^ 1  # the other partition of the same replica
        want = xs[group[0]] + xs[group[1]] + 100 * (d % 2) + 100 * xs[other]
        np.testing.assert_array_equal(gpu[d], want)


DIVERGENT = BRANCH_ALL_REDUCE + """\
ENTRY e {
  p = f32[2] parameter(0)
  r = f32[2] map(p), dimensions={0}, to_apply=body
  u = f32[2] map(p), dimensions={0}, to_apply=t
  ROOT o = (f32[2], f32[2]) tuple(r, u)
}
"""


def test_collective_under_a_conditional_keeps_the_cpu_pairing():
    """Only the elements taking the branch run the all-reduce: the CPU pairs replica 0's
    element 0 with replica 1's element 1 (the first execution on each). That map is not
    unrolled: it runs one call at a time through the GPU interpreter (``gpu/calls.py``),
    whose all-reduce meets the other device's by execution count as the CPU's does; the
    map calling the branch itself is unrolled."""
    xs = [np.array([1, -2], np.float32), np.array([-10, 20], np.float32)]
    gpu = check_devices(DIVERGENT, xs)
    for d in range(2):
        np.testing.assert_array_equal(gpu[d][1], xs[0] + xs[1])
    np.testing.assert_array_equal(gpu[0][0], [21, 2])
    np.testing.assert_array_equal(gpu[1][0], [10, 21])


def test_group_naming_a_missing_device_is_the_cpus_error():
    text = """HloModule m, replica_count=2
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
body { x = f32[] parameter(0)  ROOT ar = f32[] all-reduce(x), replica_groups={{0,2}}, to_apply=add }
ENTRY e {
  p = f32[2] parameter(0)
  ROOT r = f32[2] map(p), dimensions={0}, to_apply=body
}
"""
    m = hloref.parse(text)
    xs = [np.zeros(2, np.float32)] * 2
    for backend, kw in (("cpu", {}), ("gpu", {"fallback": False})):
        with pytest.raises(HloEvalError, match="name device 2, but the module runs on 2"):
            hloref.evaluate(m, xs, backend=backend, verify=False, **kw)


def test_device_ids_in_called_computations_are_each_devices():
    """replica-id read in a loop condition and in the all-reduce's reducer (the CPU
    evaluates both on the calling device): each device's clone reads its own id. The
    loop adds 1 until the value exceeds 10 x replica-id; the reducer adds the operands
    and the caller's replica-id."""
    text = """HloModule m, replica_count=2
red {
  a = s32[] parameter(0)  b = s32[] parameter(1)  s = s32[] add(a, b)
  i = u32[] replica-id()  c = s32[] convert(i)
  ROOT r = s32[] add(s, c)
}
cond {
  v = s32[] parameter(0)  i = u32[] replica-id()  c = s32[] convert(i)
  k = s32[] constant(10)  lim = s32[] multiply(c, k)
  ROOT p = pred[] compare(v, lim), direction=LE
}
step { v = s32[] parameter(0)  one = s32[] constant(1)  ROOT n = s32[] add(v, one) }
body {
  x = s32[] parameter(0)
  w = s32[] while(x), condition=cond, body=step
  ROOT ar = s32[] all-reduce(w), replica_groups={}, to_apply=red
}
ENTRY e {
  p = s32[3] parameter(0)
  ROOT r = s32[3] map(p), dimensions={0}, to_apply=body
}
"""
    xs = [np.array([-2, 3, 20], np.int32), np.array([1, 12, 5], np.int32)]
    gpu = check_devices(text, xs)

    def looped(x, r):
        while x <= 10 * r:
            x += 1
        return x

    for d in range(2):
        want = [looped(int(a), 0) + looped(int(b), 1) + d for a, b in zip(xs[0], xs[1])]
        np.testing.assert_array_equal(gpu[d], want)
