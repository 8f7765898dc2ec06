"""Collectives on the GPU backend: replica-id and partition-id of a single-device module
against the cpu backend and XLA:CPU; modules of several replicas (one GPU interpreter
per replica) against the cpu backend and by hand."""

from __future__ import annotations

import numpy as np
import pytest

import hloref

from hloref.types import element_type

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


def test_fallback_collective_rendezvous_on_two_devices():
    """collective-reduce has no GPU kernel: its CPU op runs per device (counted) and
    meets the other device through the same rendezvous; the root gets the sum."""
    text = """HloModule m, replica_count=2
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
ENTRY e {
  x = f32[3] parameter(0)
  ROOT r = f32[3] collective-reduce(x), replica_groups={}, to_apply=add
}
"""
    xs = [np.array([1, 2, 3], np.float32), np.array([4, 5, 6], np.float32)]
    m = hloref.parse(text)
    gpu = hloref.evaluate(m, xs, backend="gpu")
    assert dict(hloref.gpu.last_report.counts) == {"collective-reduce": 2}
    np.testing.assert_array_equal(gpu[0], [5, 7, 9])
    np.testing.assert_array_equal(gpu[1], [0, 0, 0])
    with pytest.raises(hloref.errors.HloUnsupportedError):
        hloref.evaluate(m, xs, backend="gpu", fallback=False)
