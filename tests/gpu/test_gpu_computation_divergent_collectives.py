"""Collectives whose executions per call depend on the data, in computations called per
element on several devices: under a conditional, in a while loop, in the comparator of
a sort, the combiner of a scatter, the reducer of a reduce-window and of a reduce, the
scatter of a select-and-scatter, with rng-get-and-update-state. They run one call at a
time through each device's GPU interpreter (``gpu/calls.py``), whose collectives meet
the other devices' through the CPU's rendezvous (device ``d``'s ``k``-th execution of
an instruction meets device ``e``'s ``k``-th, whatever element or call each came from).
The GPU backend with ``fallback=False`` against the cpu backend's simulation bit for
bit, and values by hand from that pairing; mismatched counts time out with the CPU's
error. XLA:CPU aborts compiling these forms (a collective in a map, reduce, sort...
computation), so it gives no values here. (Written by a helper for a device-side
rendezvous it built; that design was not merged, these checks hold for this one.)"""

from __future__ import annotations

import numpy as np
import pytest

import hloref
from hloref.errors import HloEvalError
from hloref.evaluator.collectives import run_devices
from hloref.gpu.collectives import run_devices as gpu_run_devices

from collective_modules import (BRANCH_ALL_REDUCE, collective_forms,
                                collective_forms_by_hand)
from gpu_check import RNG, check_devices
from hlo_modules import scatter_entry


BRANCH = BRANCH_ALL_REDUCE + """\
ENTRY e {
  p = f32[%d] parameter(0)
  ROOT r = f32[%d] map(p), dimensions={0}, to_apply=body
}
"""


def test_all_reduce_under_a_conditional_pairs_elements_as_the_cpu():
    """Replica 0's element 0 (the first to take the branch there) meets replica 1's
    element 1 (the first there): both get 1 + 20; the others negate."""
    xs = [np.array([1, -2], np.float32), np.array([-10, 20], np.float32)]
    gpu = check_devices(BRANCH % (2, 2), xs)
    np.testing.assert_array_equal(gpu[0], [21, 2])
    np.testing.assert_array_equal(gpu[1], [10, 21])


def test_mismatched_counts_raise_the_cpus_error():
    """Replica 0 takes the branch twice, replica 1 once: replica 0's second all-reduce
    waits for replica 1 forever. Both backends time out (0.5 s here) at the same
    rendezvous with the same error."""
    m = hloref.parse(BRANCH % (2, 2))
    xs = [np.array([1, 2], np.float32), np.array([-10, 20], np.float32)]
    with pytest.raises(HloEvalError) as cpu:
        run_devices(m, [[x] for x in xs], timeout=0.5)
    with pytest.raises(HloEvalError) as gpu:
        gpu_run_devices(m, [[x] for x in xs], fallback=False, timeout=0.5)
    want = ("collective ar waited 0.5 s for devices [1]: they never reached it "
            "(mismatched collectives)")
    assert str(cpu.value) == want and str(gpu.value) == want


def test_crossed_branches_deadlock_is_the_cpus_error():
    """Each branch holds its own all-reduce; replica 0 takes one, replica 1 the other:
    both wait forever and time out (the device that times out first is named: either)."""
    text = BRANCH.replace("ROOT n = f32[] negate(x)",
                          "ROOT ar2 = f32[] all-reduce(x), replica_groups={}, to_apply=add")
    m = hloref.parse(text % (2, 2))
    xs = [np.array([1, 2], np.float32), np.array([-10, -20], np.float32)]
    pattern = (r"^collective ar2? waited 0.2 s for devices \[[01]\]: they never reached it "
               r"\(mismatched collectives\)$")
    with pytest.raises(HloEvalError, match=pattern):
        gpu_run_devices(m, [[x] for x in xs], fallback=False, timeout=0.2)
    with pytest.raises(HloEvalError, match=pattern):
        run_devices(m, [[x] for x in xs], timeout=0.2)


def test_while_trip_counts_differ_per_device_with_equal_totals():
    """Each element loops ``x`` times, an all-reduce of ``10 x + i`` per iteration added
    up: replica 0 loops 2 then 1 times, replica 1 once then twice; execution k of one
    meets execution k of the other (element 0's second iteration on replica 0 meets
    element 1's first on replica 1)."""
    text = """HloModule m, replica_count=2
add { a = s32[] parameter(0)  b = s32[] parameter(1)  ROOT s = s32[] add(a, b) }
cond { s = (s32[], s32[], s32[]) parameter(0)  i = s32[] get-tuple-element(s), index=0
  n = s32[] get-tuple-element(s), index=1  ROOT p = pred[] compare(i, n), direction=LT }
step {
  s = (s32[], s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0  n = s32[] get-tuple-element(s), index=1
  acc = s32[] get-tuple-element(s), index=2
  ten = s32[] constant(10)  tn = s32[] multiply(n, ten)  v = s32[] add(tn, i)
  ar = s32[] all-reduce(v), replica_groups={}, to_apply=add
  a2 = s32[] add(acc, ar)
  one = s32[] constant(1)  i2 = s32[] add(i, one)
  ROOT o = (s32[], s32[], s32[]) tuple(i2, n, a2)
}
body {
  x = s32[] parameter(0)  z = s32[] constant(0)
  init = (s32[], s32[], s32[]) tuple(z, x, z)
  w = (s32[], s32[], s32[]) while(init), condition=cond, body=step
  ROOT r = s32[] get-tuple-element(w), index=2
}
ENTRY e {
  p = s32[2] parameter(0)
  ROOT r = s32[2] map(p), dimensions={0}, to_apply=body
}
"""
    xs = [np.array([2, 1], np.int32), np.array([1, 2], np.int32)]
    gpu = check_devices(text, xs)
    # executions in order: (element, value) per replica
    runs = [[(e, 10 * int(x) + i) for e, x in enumerate(d) for i in range(int(x))] for d in xs]
    for d in range(2):
        want = [0, 0]
        for k, (e, _) in enumerate(runs[d]):
            want[e] += runs[0][k][1] + runs[1][k][1]
        np.testing.assert_array_equal(gpu[d], want)
    np.testing.assert_array_equal(gpu[0], [(20 + 10) + (21 + 20), 10 + 21])


def test_sort_comparator_with_all_reduce_on_two_replicas():
    """The comparator compares the all-reduced difference: both replicas get the same
    answers, so they make the same calls, and each sorts its own row by the sum of both
    replicas' keys (stable), bit for bit with the CPU's libstdc++ stable sort."""
    text = """HloModule m, replica_count=2
add { a = s32[] parameter(0)  b = s32[] parameter(1)  ROOT s = s32[] add(a, b) }
lt {
  a = s32[] parameter(0)  b = s32[] parameter(1)
  c = f32[] parameter(2)  d = f32[] parameter(3)
  s = s32[] subtract(a, b)
  ar = s32[] all-reduce(s), replica_groups={}, to_apply=add
  z = s32[] constant(0)
  ROOT p = pred[] compare(ar, z), direction=LT
}
ENTRY e {
  k = s32[2,9] parameter(0)
  v = f32[2,9] parameter(1)
  ROOT r = (s32[2,9], f32[2,9]) sort(k, v), dimensions={1}, to_apply=lt
}
"""
    ks = [RNG.integers(-5, 6, (2, 9)).astype(np.int32) for _ in range(2)]
    vs = [RNG.standard_normal((2, 9)).astype(np.float32) for _ in range(2)]
    gpu = check_devices(text, ks, vs)
    total = ks[0].astype(np.int64) + ks[1]
    for d in range(2):
        for row in range(2):
            perm = np.argsort(total[row], kind="stable")
            np.testing.assert_array_equal(gpu[d][0][row], ks[d][row][perm])
            np.testing.assert_array_equal(gpu[d][1][row], vs[d][row][perm])


def test_scatter_combiner_with_all_reduce_on_two_replicas():
    """Combiner ``a + all-reduce(u)``: update k of replica 0 meets update k of replica
    1, in the CPU's per-update order; each replica adds the pair's sum where its own
    index points (its indices differ from the other's)."""
    text = """HloModule m, replica_count=2
add { a = s32[] parameter(0)  b = s32[] parameter(1)  ROOT s = s32[] add(a, b) }
comb {
  a = s32[] parameter(0)  u = s32[] parameter(1)
  ar = s32[] all-reduce(u), replica_groups={}, to_apply=add
  ROOT s = s32[] add(a, ar)
}
""" + scatter_entry("s32", 5, 4, "comb", root="r")
    xs = [RNG.integers(-9, 10, 5).astype(np.int32) for _ in range(2)]
    idx = [np.array([[3], [0], [3], [1]], np.int32), np.array([[4], [4], [2], [0]], np.int32)]
    us = [RNG.integers(-9, 10, 4).astype(np.int32) for _ in range(2)]
    gpu = check_devices(text, xs, idx, us)
    for d in range(2):
        want = xs[d].copy()
        for k in range(4):
            want[idx[d][k, 0]] += us[0][k] + us[1][k]
        np.testing.assert_array_equal(gpu[d], want)


def test_reduce_window_and_select_and_scatter_with_all_reduce():
    """A reduce-window whose reducer all-reduces the running sum (windows row-major,
    positions on padding call nothing), and a select-and-scatter whose scatter does
    (rounds as the CPU): against the CPU bit for bit; the reduce-window by hand."""
    text = """HloModule m, replica_count=2
add { a = s32[] parameter(0)  b = s32[] parameter(1)  ROOT s = s32[] add(a, b) }
red {
  a = s32[] parameter(0)  b = s32[] parameter(1)  s = s32[] add(a, b)
  ROOT ar = s32[] all-reduce(s), replica_groups={}, to_apply=add
}
ge { a = s32[] parameter(0)  b = s32[] parameter(1)  ROOT p = pred[] compare(a, b), direction=GE }
ENTRY e {
  x = s32[5] parameter(0)
  src = s32[3] parameter(1)
  z = s32[] constant(1)
  rw = s32[3] reduce-window(x, z), window={size=3 stride=2 pad=1_1}, to_apply=red
  ss = s32[5] select-and-scatter(x, src, z), window={size=3 stride=2 pad=1_1}, select=ge,
    scatter=red
  ROOT o = (s32[3], s32[5]) tuple(rw, ss)
}
"""
    xs = [np.array([3, -1, 4, 1, -5], np.int32), np.array([2, 7, -1, 8, 2], np.int32)]
    srcs = [np.array([1, 2, 3], np.int32), np.array([10, 20, 30], np.int32)]
    gpu = check_devices(text, xs, srcs)
    # each fold step meets the other replica's same step: acc = acc0 + x0 + acc1 + x1,
    # the same on both (the inits are both 1); positions on padding call nothing
    accs = []
    for w in range(3):
        a = [1, 1]
        for r in range(3):
            pos = 2 * w - 1 + r
            if 0 <= pos < 5:
                s = a[0] + int(xs[0][pos]) + a[1] + int(xs[1][pos])
                a = [s, s]
        accs.append(a[0])
    for d in range(2):
        np.testing.assert_array_equal(gpu[d][0], accs)
    # select (GE, the first maximum): replica 0 picks elements 0, 2, 3 (one round),
    # replica 1 elements 1, 3, 3 (rounds: windows 0 and 1, then window 2); call k of
    # one meets call k of the other: (1 + 1) + (1 + 10) = 13, (1 + 2) + (1 + 20) = 24,
    # (1 + 3) + (24 + 30) = 58
    np.testing.assert_array_equal(gpu[0][1], [13, 1, 24, 58, 1])
    np.testing.assert_array_equal(gpu[1][1], [1, 13, 1, 58, 1])


def test_reduce_with_all_reduce_in_a_loop_of_the_reducer():
    """A reducer whose all-reduce sits in a loop running ``b`` times (the element): the
    fold of replica 0 and replica 1 make different numbers of executions per step but
    the same in all, against the CPU bit for bit."""
    text = """HloModule m, replica_count=2
add { a = s32[] parameter(0)  b = s32[] parameter(1)  ROOT s = s32[] add(a, b) }
cond { s = (s32[], s32[]) parameter(0)  n = s32[] get-tuple-element(s), index=1
  z = s32[] constant(0)  ROOT p = pred[] compare(n, z), direction=GT }
step {
  s = (s32[], s32[]) parameter(0)
  a = s32[] get-tuple-element(s), index=0  n = s32[] get-tuple-element(s), index=1
  ar = s32[] all-reduce(n), replica_groups={}, to_apply=add
  a2 = s32[] add(a, ar)  one = s32[] constant(1)  n2 = s32[] subtract(n, one)
  ROOT o = (s32[], s32[]) tuple(a2, n2)
}
red {
  a = s32[] parameter(0)  b = s32[] parameter(1)
  init = (s32[], s32[]) tuple(a, b)
  w = (s32[], s32[]) while(init), condition=cond, body=step
  ROOT r = s32[] get-tuple-element(w), index=0
}
ENTRY e {
  p = s32[2,3] parameter(0)  z = s32[] constant(0)
  ROOT r = s32[2] reduce(p, z), dimensions={1}, to_apply=red
}
"""
    xs = [np.array([[2, 0, 1], [1, 1, 1]], np.int32), np.array([[1, 1, 1], [0, 3, 0]], np.int32)]
    gpu = check_devices(text, xs)
    # executions per replica in order: the loop counter values n, n-1, ..., 1 of each step
    runs = [[(o, v) for o in range(2) for k in range(3) for v in range(int(x[o, k]), 0, -1)]
            for x in xs]
    for d in range(2):
        want = [0, 0]
        for k, (o, _) in enumerate(runs[d]):
            want[o] += runs[0][k][1] + runs[1][k][1]
        np.testing.assert_array_equal(gpu[d], want)


def test_rng_state_and_all_reduce_under_a_conditional():
    """rng-get-and-update-state (each replica's own state) with an all-reduce under a
    conditional: the serial mode's state channel per device, the rendezvous across
    them; the states and values against the CPU bit for bit."""
    text = """HloModule m, replica_count=2
add { a = u64[] parameter(0)  b = u64[] parameter(1)  ROOT s = u64[] add(a, b) }
t {
  x = u64[] parameter(0)
  st = u64[2] rng-get-and-update-state(), delta=3
  lo = u64[1] slice(st), slice={[0:1]}
  l = u64[] reshape(lo)
  v = u64[] add(x, l)
  ROOT ar = u64[] all-reduce(v), replica_groups={}, to_apply=add
}
f { x = u64[] parameter(0)  st = u64[2] rng-get-and-update-state(), delta=5
  hi = u64[1] slice(st), slice={[1:2]}  h = u64[] reshape(hi)  ROOT s = u64[] xor(x, h) }
body {
  x = u64[] parameter(0)  k = u64[] constant(4)
  r = u64[] remainder(x, k)  one = u64[] constant(1)
  p = pred[] compare(r, one), direction=LE
  ROOT c = u64[] conditional(p, x, x), true_computation=t, false_computation=f
}
ENTRY e {
  p = u64[4] parameter(0)
  m = u64[4] map(p), dimensions={0}, to_apply=body
  after = u64[2] rng-get-and-update-state(), delta=1
  ROOT o = (u64[4], u64[2]) tuple(m, after)
}
"""
    xs = [np.array([1, 2, 6, 8], np.uint64), np.array([3, 5, 4, 7], np.uint64)]
    check_devices(text, xs)


FORMS = "HloModule m, replica_count=4\n" + collective_forms(extra="""\
  g = s32[4] all-gather(x1), replica_groups={}, dimensions={0}
  g3 = s32[1] slice(g), slice={[3:4]}
  h = s32[] reshape(g3)
  ps = (s32[], s32[], u32[], u32[]) collective-permute-start(y), source_target_pairs={{3,0}}
  pd = s32[] collective-permute-done(ps)
  ars = s32[] all-reduce-start(y), replica_groups={{0,1,2,3}}, to_apply=add
  ard = s32[] all-reduce-done(ars)
""", terms="""\
  k0 = s32[] constant(1000)  k1 = s32[] constant(100)  k2 = s32[] constant(10)
  k3 = s32[] constant(7)  k4 = s32[] constant(3)  k5 = s32[] constant(10000)
  k6 = s32[] constant(100000)  k7 = s32[] constant(1000000)
  m0 = s32[] multiply(cp, k0)  m1 = s32[] multiply(cb, k1)  m2 = s32[] multiply(a0, k2)
  m3 = s32[] multiply(a1, k3)  m4 = s32[] multiply(b, k4)  m5 = s32[] multiply(h, k5)
  m6 = s32[] multiply(pd, k6)  m7 = s32[] multiply(ard, k7)
  w0 = s32[] add(m0, m1)  w1 = s32[] add(w0, m2)  w2 = s32[] add(w1, m3)  w3 = s32[] add(w2, m4)
  w4 = s32[] add(w3, m5)  w5 = s32[] add(w4, m6)  w6 = s32[] add(w5, m7)
  ROOT o = s32[] add(w6, r)
""") + """\
bt { s = (s32[], s32[]) parameter(0)  x = s32[] get-tuple-element(s), index=0
  y = s32[] get-tuple-element(s), index=1  ROOT c = s32[] call(x, y), to_apply=body }
bf { s = (s32[], s32[]) parameter(0)  ROOT z = s32[] constant(-1) }
gate {
  x = s32[] parameter(0)  y = s32[] parameter(1)
  p = pred[] compare(x, y), direction=NE
  t = (s32[], s32[]) tuple(x, y)
  ROOT c = s32[] conditional(p, t, t), true_computation=bt, false_computation=bf
}
ENTRY e {
  p = s32[3] parameter(0)
  q = s32[3] parameter(1)
  ROOT r = s32[3] map(p, q), dimensions={0}, to_apply=gate
}
"""


def test_every_collective_form_under_a_conditional_on_four_replicas():
    """collective-permute (a cycle on three replicas, zeros for the fourth), its async
    pair, collective-broadcast (group root), all-to-all's tuple form and along a
    dimension, reduce-scatter, all-gather and the all-reduce pair, in a branch every
    element takes (x != y): each execution meets the same element's on the others,
    by hand and against the CPU bit for bit."""
    xs = [np.array([0, 1, 2], np.int32) + 3 * d for d in range(4)]
    ys = [np.array([1, 4, 2], np.int32) * (d + 1) + 20 for d in range(4)]
    gpu = check_devices(FORMS, xs, ys)
    for d in range(4):
        pd = ys[3] if d == 0 else 0
        total = ys[0] + ys[1] + ys[2] + ys[3]
        want = (collective_forms_by_hand(xs, ys, d) + 10000 * xs[3] + 100000 * pd +
                1000000 * total)
        np.testing.assert_array_equal(gpu[d], want)


def test_all_reduce_of_a_small_array_under_a_conditional():
    """An all-reduce of a two-element small array ``(-x, x)`` (element by element), its
    first element kept: replica 0's element 0 meets replica 1's element 1."""
    text = BRANCH.replace(
        "t { x = f32[] parameter(0)  ROOT ar = f32[] all-reduce(x), replica_groups={}, "
        "to_apply=add }",
        """t {
  x = f32[] parameter(0)  x1 = f32[1] reshape(x)
  n = f32[] negate(x)  n1 = f32[1] reshape(n)
  w = f32[2] concatenate(n1, x1), dimensions={0}
  ar = f32[2] all-reduce(w), replica_groups={}, to_apply=add
  s = f32[1] slice(ar), slice={[0:1]}
  ROOT r = f32[] reshape(s)
}""")
    assert "f32[2] all-reduce" in text
    xs = [np.array([1, -2], np.float32), np.array([-10, 20], np.float32)]
    gpu = check_devices(text % (2, 2), xs)
    np.testing.assert_array_equal(gpu[0], [-21, 2])
    np.testing.assert_array_equal(gpu[1], [10, -21])
