"""rng-get-and-update-state in computations whose call order has no closed form, on the
device in the serial mode (``gpu/serial.py``; ``gpu/computation.py``: the emitter's
serial mode, ``gpu/rng.py``: ``take_state``, ``StateChannel``), ``fallback=False``:
sites under a while loop, in a conditional's branches (only the selected branch's
count), in nested one-element ops, and the computations of reduce-window, sort,
scatter and select-and-scatter. The op makes every call from one thread in the CPU's
call order; each site reads the state before the op plus the deltas consumed so far,
and the op advances the evaluation's state by all of them.

Every module reads the state before and after the op (``a``, ``b``), so the state the
op leaves is compared too. Results against the CPU backend bit for bit, and by hand
from the written semantics: the CPU's call orders (``evaluator/windows.py``,
``evaluator/indexing.py``, ``evaluator/sort.py``: libstdc++'s stable sort, one call per
comparison) and ``next_rng_state`` (the 128-bit state advanced by each call's delta).
Deltas carry into and wrap the high word.

No XLA here: XLA:CPU (jaxlib 0.10.2) aborts compiling a map or reduce whose computation
holds rng-get-and-update-state (see test_gpu_computation_rng.py), and the data-dependent
orders of the others are implementation-defined.

This file: map bodies (a while loop, conditionals, nested one-element ops) and a reduce
reducer holding a loop; reduce-window and select-and-scatter:
test_gpu_computation_rng_state_serial_windows.py; scatter, sort, collectives on one
device and dead sites: test_gpu_computation_rng_state_serial_scatter_sort.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from gpu_check import bits_equal

from hlo_modules import MODULES, counted_loop, dead_site_computation, parameters, state_bracket
from rng_state_common import M64, S0, both, read_low, words


LOOP = "HloModule m\n" + counted_loop(
    "  unused = u64[2] rng-get-and-update-state(), delta=%(d)d\n") + """\
body {
  x = u64[] parameter(0)
  w = u64[] parameter(1)
  zero = u64[] constant(0)
  init = (u64[], u64[]) tuple(zero, x)
  loop = (u64[], u64[]) while(init), condition=cond, body=step
  s = u64[2] rng-get-and-update-state(), delta=%(e)d
  lo = u64[1] slice(s), slice={[0:1]}
  hi = u64[1] slice(s), slice={[1:2]}
  l = u64[] reshape(lo)
  h = u64[] reshape(hi)
  p = pred[] compare(w, zero), direction=EQ
  ROOT r = u64[] select(p, l, h)
}
""" + state_bracket(parameters("x = u64[6]", "w = u64[6]"),
                    "  m = u64[6] map(x, w), dimensions={0}, to_apply=body\n",
                    [("m", "u64[6]")], before=5, after=1)


@pytest.mark.parametrize("d,e", [(3, 1000), (2**64 - 5, 2**63 + 1), (-S0 - 7, 2**127)])
def test_map_while_loop_by_hand(d, e):
    """Element i's loop runs x[i] times, its (unused, still evaluated) site of delta d
    each time, then one site of delta e: that site reads S + 5 + sum_{j<i}(x[j] d + e) +
    x[i] d (its low word for w[i] = 0, else its high word); the map leaves the state
    sum(x) d + 6 e further on."""
    x = np.array([2, 0, 3, 1, 4, 2], np.uint64)
    w = np.array([0, 1, 0, 1, 1, 0], np.uint64)
    cpu, gpu = both(LOOP % {"d": d, "e": e}, x, w)
    assert bits_equal(gpu, cpu), (gpu, cpu)
    s = S0 + 5
    want = words(S0)
    for xi, wi in zip(x.tolist(), w.tolist()):
        s += xi * d
        want.append(words(s)[1 if wi else 0])
        s += e
    want += words(s)
    assert bits_equal(cpu, np.array(want, np.uint64)), cpu


BRANCHES = """HloModule m
b0 {
  y = u64[] parameter(0)
%(r0)s  ROOT r = u64[] add(y, r0)
}
b1 {
  y = u64[] parameter(0)
%(r1)s  ROOT r = u64[] xor(y, r1)
}
b2 {
  ROOT y = u64[] parameter(0)
}
body {
  x = u64[] parameter(0)
  i = s32[] convert(x)
  ROOT c = u64[] conditional(i, x, x, x), branch_computations={b0, b1, b2}
}
""" + state_bracket(parameters("x = u64[7]"),
                    "  m = u64[7] map(x), dimensions={0}, to_apply=body\n",
                    [("m", "u64[7]")], after=1)


def test_map_conditional_by_hand():
    """An index selector: branch 0 adds the low word of a site of delta 3, branch 1
    xors that of a site of delta 2**64 + 9 (it carries into the high word), branch 2
    (and any index outside [0, 3)) has none: only the selected branch's site counts."""
    d0, d1 = 3, 2**64 + 9
    text = BRANCHES % {"r0": read_low("r0", d0), "r1": read_low("r1", d1)}
    x = np.array([0, 1, 2, 1, 7, 0, 1], np.uint64)
    cpu, gpu = both(text, x)
    assert bits_equal(gpu, cpu), (gpu, cpu)
    s = S0 + 100
    want = words(S0)
    for v in x.tolist():
        if v == 0:
            want.append((v + words(s)[0]) & M64)
            s += d0
        elif v == 1:
            want.append(v ^ words(s)[0])
            s += d1
        else:
            want.append(v)
    want += words(s)
    assert bits_equal(cpu, np.array(want, np.uint64)), cpu


PRED_BRANCH = MODULES["map-pred-conditional-state"]


def test_map_pred_conditional():
    """A pred selector (the module that fell back to the CPU before): elements 0 and 1
    take the branch with the site, 2 and 3 not: the map moves the state 2 x 3."""
    cpu, gpu = both(PRED_BRANCH, np.array([0, 1, 2, 3], np.uint64))
    assert bits_equal(gpu, cpu), (gpu, cpu)
    assert [int(v) for v in cpu[2:6]] == [S0 + 100, 1 + S0 + 103, 2, 3]
    assert int(cpu[-2]) == S0 + 106


NESTED = """HloModule m
red {
  a = u64[] parameter(0)
  b = u64[] parameter(1)
%(red)s  c = u64[] add(a, b)
  ROOT r = u64[] add(c, lr)
}
comb {
  a = u64[] parameter(0)
  b = u64[] parameter(1)
%(comb)s  ROOT r = u64[] xor(b, lc)
}
""" + dead_site_computation("sel", "u64", 17, "ROOT p = pred[] compare(a, b), direction=GE") + """\
sct {
  a = u64[] parameter(0)
  b = u64[] parameter(1)
%(sct)s  c = u64[] add(a, b)
  ROOT r = u64[] add(c, ls)
}
""" + dead_site_computation(
    "never", "u64", 1000000, "ROOT p = pred[] compare(a, b), direction=LT") + """\
inner {
  z = u64[] parameter(0)
%(inner)s  ROOT o = u64[] add(z, li)
}
body {
  x = u64[] parameter(0)
  dead = u64[2] rng-get-and-update-state(), delta=2
  x1 = u64[1] reshape(x)
  five = u64[] constant(5)
  rd = u64[] reduce(x1, five), dimensions={0}, to_apply=red
  rw = u64[1] reduce-window(x1, five), window={size=2 pad=0_1}, to_apply=red
  no = u64[1] reduce-window(x1, five), window={size=1 pad=1_-1}, to_apply=red
  i = s32[] convert(x)
  i1 = s32[1] reshape(i)
  sc = u64[1] scatter(x1, i1, x1), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=comb
  ss = u64[1] select-and-scatter(x1, x1, five), window={size=3 pad=1_1}, select=sel, scatter=sct
  st = u64[1] sort(x1), dimensions={0}, to_apply=never
  cl = u64[] call(x), to_apply=inner
  r1 = u64[1] add(rw, no)
  r2 = u64[1] add(sc, ss)
  r3 = u64[1] add(r1, r2)
  r4 = u64[1] add(r3, st)
  f = u64[] reshape(r4)
  g = u64[] add(f, rd)
  ROOT h = u64[] add(g, cl)
}
""" + state_bracket(parameters("x = u64[5]"),
                    "  m = u64[5] map(x), dimensions={0}, to_apply=body\n",
                    [("m", "u64[5]")], after=1)


def test_map_nested_one_element_ops():
    """Sites in one-element reduce and reduce-window (one reducer call each where the
    window holds the element, none where it does not), scatter (the combiner called
    only for index 0), select-and-scatter (select called once, its answer dropped;
    scatter once), sort (no comparator call), a nested call and a dead site, in the
    CPU's order. Element i's calls, by hand: the dead site (2), reduce (11),
    reduce-window (11), scatter where x = 0 (13, the high word), select (17), scatter
    (19), call (23); the state after: the sum of them all."""
    text = NESTED % {"red": read_low("lr", 11), "comb": read_low("lc", 13).replace(
        "[0:1]", "[1:2]"), "sct": read_low("ls", 19), "inner": read_low("li", 23)}
    x = np.array([0, 3, 0, 9, 1], np.uint64)
    cpu, gpu = both(text, x)
    assert bits_equal(gpu, cpu), (gpu, cpu)
    s = S0 + 100
    want = words(S0)
    for v in x.tolist():
        s += 2
        rd = (5 + v + words(s)[0]) & M64
        s += 11
        rw = (5 + v + words(s)[0]) & M64
        s += 11
        if v == 0:
            sc = v ^ words(s)[1]
            s += 13
        else:
            sc = v
        s += 17  # select(x, 0): one call, its answer unused
        ss = (5 + v + words(s)[0]) & M64
        s += 19
        cl = (v + words(s)[0]) & M64
        s += 23
        want.append((rw + 5 + sc + ss + v + rd + cl) & M64)
    want += words(s)
    assert bits_equal(cpu, np.array(want, np.uint64)), cpu


REDUCE_LOOP = "HloModule m\n" + counted_loop(
    "  s = u64[2] rng-get-and-update-state(), delta=%(d)d\n") + """\
red {
  a = u64[] parameter(0)
  x = u64[] parameter(1)
  zero = u64[] constant(0)
  init = (u64[], u64[]) tuple(zero, x)
  loop = (u64[], u64[]) while(init), condition=cond, body=step
%(e)s  ROOT r = u64[] add(a, le)
}
""" + state_bracket(parameters("p = u64[3,4]") + "  z = u64[] constant(0)\n",
                    "  r = u64[4] reduce(p, z), dimensions={0}, to_apply=red\n",
                    [("r", "u64[4]")], after=1)


def test_reduce_loop_in_reducer_by_hand():
    """A reducer whose loop runs x times (a site of delta d each), then adds the low
    word of a site of delta e: the CPU folds output by output, each over dimension 0
    in order, so the sum of output j is that of the low words the e-sites read."""
    d, e = 2**64 - 1, 7
    text = REDUCE_LOOP % {"d": d, "e": read_low("le", e)}
    p = np.array([[1, 0, 2, 3], [0, 2, 1, 0], [3, 1, 0, 2]], np.uint64)
    cpu, gpu = both(text, p)
    assert bits_equal(gpu, cpu), (gpu, cpu)
    s = S0 + 100
    want = words(S0)
    for j in range(4):
        acc = 0
        for i in range(3):
            s += int(p[i, j]) * d
            acc = (acc + words(s)[0]) & M64
            s += e
        want.append(acc)
    want += words(s)
    assert bits_equal(cpu, np.array(want, np.uint64)), cpu
