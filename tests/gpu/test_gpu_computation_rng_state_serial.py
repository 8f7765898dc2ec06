"""rng-get-and-update-state in computations whose call order has no closed form, on the
device in the serial mode (``gpu/serial.py``; ``gpu/computation.py``: ``_Emitter``'s
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
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import hloref
from hloref.evaluator.rng import RNG_STATE_INITIAL

from gpu_check import bits_equal

S0 = RNG_STATE_INITIAL
M64 = 2**64 - 1
M32 = 2**32 - 1
W128 = 2**128


def both(text, *args):
    """(cpu, gpu) values of ``text``, the gpu without fallback (a fallback raises)."""
    m = hloref.parse(text)
    cpu = hloref.evaluate(m, *args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        gpu = hloref.evaluate(m, *args, backend="gpu", fallback=False)
    return cpu, gpu


def words(state):
    return [state % W128 & M64, state % W128 >> 64]


def read_low(name, delta):
    """HLO lines: ``{name}`` is the low word of the state a site of ``delta`` reads."""
    return (f"  {name}_s = u64[2] rng-get-and-update-state(), delta={delta}\n"
            f"  {name}_v = u64[1] slice({name}_s), slice={{[0:1]}}\n"
            f"  {name} = u64[] reshape({name}_v)\n")


# ----------------------------------------------------------------- map: a while loop

LOOP = """HloModule m
cond {
  st = (u64[], u64[]) parameter(0)
  i = u64[] get-tuple-element(st), index=0
  n = u64[] get-tuple-element(st), index=1
  ROOT lt = pred[] compare(i, n), direction=LT
}
step {
  st = (u64[], u64[]) parameter(0)
  i = u64[] get-tuple-element(st), index=0
  n = u64[] get-tuple-element(st), index=1
  unused = u64[2] rng-get-and-update-state(), delta=%(d)d
  one = u64[] constant(1)
  j = u64[] add(i, one)
  ROOT r = (u64[], u64[]) tuple(j, n)
}
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
ENTRY e {
  x = u64[6] parameter(0)
  w = u64[6] parameter(1)
  a = u64[2] rng-get-and-update-state(), delta=5
  m = u64[6] map(x, w), dimensions={0}, to_apply=body
  b = u64[2] rng-get-and-update-state(), delta=1
  ROOT t = u64[10] concatenate(a, m, b), dimensions={0}
}
"""


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


# ----------------------------------------------------------------- map: conditionals

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
ENTRY e {
  x = u64[7] parameter(0)
  a = u64[2] rng-get-and-update-state(), delta=100
  m = u64[7] map(x), dimensions={0}, to_apply=body
  b = u64[2] rng-get-and-update-state(), delta=1
  ROOT t = u64[11] concatenate(a, m, b), dimensions={0}
}
"""


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


PRED_BRANCH = """HloModule m
yes {
  y = u64[] parameter(0)
  s = u64[2] rng-get-and-update-state(), delta=3
  lo = u64[1] slice(s), slice={[0:1]}
  l = u64[] reshape(lo)
  ROOT r = u64[] add(y, l)
}
no {
  ROOT n = u64[] parameter(0)
}
body {
  x = u64[] parameter(0)
  two = u64[] constant(2)
  p = pred[] compare(x, two), direction=LT
  ROOT c = u64[] conditional(p, x, x), true_computation=yes, false_computation=no
}
ENTRY e {
  p = u64[4] parameter(0)
  a = u64[2] rng-get-and-update-state(), delta=100
  m = u64[4] map(p), dimensions={0}, to_apply=body
  b = u64[2] rng-get-and-update-state(), delta=100
  ROOT t = u64[8] concatenate(a, m, b), dimensions={0}
}
"""


def test_map_pred_conditional():
    """A pred selector (the module that fell back to the CPU before): elements 0 and 1
    take the branch with the site, 2 and 3 not: the map moves the state 2 x 3."""
    cpu, gpu = both(PRED_BRANCH, np.array([0, 1, 2, 3], np.uint64))
    assert bits_equal(gpu, cpu), (gpu, cpu)
    assert [int(v) for v in cpu[2:6]] == [S0 + 100, 1 + S0 + 103, 2, 3]
    assert int(cpu[-2]) == S0 + 106


# ----------------------------------------------------------------- map: nested ops

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
sel {
  a = u64[] parameter(0)
  b = u64[] parameter(1)
  s = u64[2] rng-get-and-update-state(), delta=17
  ROOT p = pred[] compare(a, b), direction=GE
}
sct {
  a = u64[] parameter(0)
  b = u64[] parameter(1)
%(sct)s  c = u64[] add(a, b)
  ROOT r = u64[] add(c, ls)
}
never {
  a = u64[] parameter(0)
  b = u64[] parameter(1)
  s = u64[2] rng-get-and-update-state(), delta=1000000
  ROOT p = pred[] compare(a, b), direction=LT
}
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
ENTRY e {
  x = u64[5] parameter(0)
  a = u64[2] rng-get-and-update-state(), delta=100
  m = u64[5] map(x), dimensions={0}, to_apply=body
  b = u64[2] rng-get-and-update-state(), delta=1
  ROOT t = u64[9] concatenate(a, m, b), dimensions={0}
}
"""


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


# ----------------------------------------------------------------- reduce: a loop in the reducer

REDUCE_LOOP = """HloModule m
cond {
  st = (u64[], u64[]) parameter(0)
  i = u64[] get-tuple-element(st), index=0
  n = u64[] get-tuple-element(st), index=1
  ROOT lt = pred[] compare(i, n), direction=LT
}
step {
  st = (u64[], u64[]) parameter(0)
  i = u64[] get-tuple-element(st), index=0
  n = u64[] get-tuple-element(st), index=1
  s = u64[2] rng-get-and-update-state(), delta=%(d)d
  one = u64[] constant(1)
  j = u64[] add(i, one)
  ROOT r = (u64[], u64[]) tuple(j, n)
}
red {
  a = u64[] parameter(0)
  x = u64[] parameter(1)
  zero = u64[] constant(0)
  init = (u64[], u64[]) tuple(zero, x)
  loop = (u64[], u64[]) while(init), condition=cond, body=step
%(e)s  ROOT r = u64[] add(a, le)
}
ENTRY e {
  p = u64[3,4] parameter(0)
  z = u64[] constant(0)
  a = u64[2] rng-get-and-update-state(), delta=100
  r = u64[4] reduce(p, z), dimensions={0}, to_apply=red
  b = u64[2] rng-get-and-update-state(), delta=1
  ROOT t = u64[8] concatenate(a, r, b), dimensions={0}
}
"""


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


# ----------------------------------------------------------------- reduce-window

REDUCE_WINDOW = """HloModule m
red {
  a = u64[] parameter(0)
  b = u64[] parameter(1)
%(l)s  c = u64[] multiply(a, b)
  ROOT r = u64[] add(c, l)
}
ENTRY e {
  p = u64[3,4] parameter(0)
  z = u64[] constant(7)
  a = u64[2] rng-get-and-update-state(), delta=100
  r = u64[%(out)s] reduce-window(p, z), window={%(window)s}, to_apply=red
  b = u64[2] rng-get-and-update-state(), delta=100
  f = u64[%(n)d] reshape(r)
  ROOT t = u64[%(n4)d] concatenate(a, f, b), dimensions={0}
}
"""

#: (window, result dims): 2x3 windows over the 3x4 operand padded by a row above and a
#: column each side; 2x2 windows at strides 2 and 3 over it base-dilated 2 along rows
#: (holes between them) and padded by a column on the left
WINDOWS = [("size=2x3 pad=1_0x1_1", "3,4"),
           ("size=2x2 stride=2x3 lhs_dilate=2x1 pad=0_0x1_0", "2,2")]


def _window_positions(window_text, out_dims):
    """The operand positions (flat) of each window, row-major, padding and holes left
    out: by hand from the window's written geometry (size, stride, padding low,
    base dilation), for the two windows of ``WINDOWS``."""
    if window_text.startswith("size=2x3"):
        size, stride, low, bdil = (2, 3), (1, 1), (1, 1), (1, 1)
    else:
        size, stride, low, bdil = (2, 2), (2, 3), (0, 1), (2, 1)
    dims = (3, 4)
    out = []
    for o0 in range(out_dims[0]):
        for o1 in range(out_dims[1]):
            pos = []
            for k0 in range(size[0]):
                for k1 in range(size[1]):
                    c = [o0 * stride[0] + k0 - low[0], o1 * stride[1] + k1 - low[1]]
                    if any(v < 0 or v % b for v, b in zip(c, bdil)):
                        continue
                    c = [v // b for v, b in zip(c, bdil)]
                    if all(v < n for v, n in zip(c, dims)):
                        pos.append(c[0] * 4 + c[1])
            out.append(pos)
    return out


@pytest.mark.parametrize("window,out", WINDOWS)
def test_reduce_window_by_hand(window, out):
    """The CPU's sequential fold: windows row-major, each from the init over its
    positions on the operand (padding and holes call nothing): ``acc = acc x v + low
    word``; the state moves 3 per call."""
    out_dims = tuple(int(v) for v in out.split(","))
    n = out_dims[0] * out_dims[1]
    text = REDUCE_WINDOW % {"l": read_low("l", 3), "out": out, "window": window, "n": n,
                            "n4": n + 4}
    p = (np.arange(12, dtype=np.uint64) * np.uint64(2**40 + 3) + np.uint64(1)).reshape(3, 4)
    cpu, gpu = both(text, p)
    assert bits_equal(gpu, cpu), (gpu, cpu)
    flat = p.reshape(-1).tolist()
    s = S0 + 100
    want = words(S0)
    for pos in _window_positions(window, out_dims):
        acc = 7
        for q in pos:
            acc = (acc * flat[q] + words(s)[0]) & M64
            s += 3
        want.append(acc)
    want += words(s)
    assert bits_equal(cpu, np.array(want, np.uint64)), cpu


VARIADIC_WINDOW = """HloModule m
red {
  a = f32[] parameter(0)
  i = s32[] parameter(1)
  b = f32[] parameter(2)
  j = s32[] parameter(3)
  s = u64[2] rng-get-and-update-state(), delta=%d
  lo = u64[1] slice(s), slice={[0:1]}
  l = u64[] reshape(lo)
  k = s32[] convert(l)
  ge = pred[] compare(a, b), direction=GE
  m = f32[] select(ge, a, b)
  x = s32[] select(ge, i, j)
  ROOT r = (f32[], s32[]) tuple(m, k)
}
ENTRY e {
  p = f32[4,5] parameter(0)
  q = s32[4,5] iota(), iota_dimension=1
  z = f32[] constant(-inf)
  y = s32[] constant(-1)
  a = u64[2] rng-get-and-update-state(), delta=100
  r = (f32[3,2], s32[3,2]) reduce-window(p, q, z, y), window={size=2x3 stride=1x2 pad=0_0x1_0}, to_apply=red
  b = u64[2] rng-get-and-update-state(), delta=100
  ROOT t = (u64[2], (f32[3,2], s32[3,2]), u64[2]) tuple(a, r, b)
}
"""


def test_reduce_window_variadic():
    """Two inputs, a tuple-valued reducer (argmax-like, its second result the state's
    low word): CPU bit for bit, state after and before."""
    delta = 2**64 + 2**63
    p = np.random.default_rng(2).standard_normal((4, 5)).astype(np.float32)
    cpu, gpu = both(VARIADIC_WINDOW % delta, p)
    assert bits_equal(gpu, cpu), (gpu, cpu)
    # 6 windows of 2 x 3 positions, the first column's windows on the padding column
    calls = 3 * (2 * 2) + 3 * (2 * 3)
    assert [int(v) for v in cpu[2]] == words(S0 + 100 + calls * delta)


# ----------------------------------------------------------------- select-and-scatter

SELECT_AND_SCATTER = """HloModule m
sel {
  a = u32[] parameter(0)
  b = u32[] parameter(1)
%(sel)s  ROOT p = pred[] compare(a, b), direction=GE
}
sct {
  a = u32[] parameter(0)
  b = u32[] parameter(1)
%(sct)s  c = u32[] add(a, b)
  k = u32[] convert(sct)
  ROOT r = u32[] add(c, k)
}
ENTRY e {
  x = u32[5] parameter(0)
  src = u32[3] parameter(1)
  i = u32[] constant(1000)
  a = u64[2] rng-get-and-update-state(), delta=100
  r = u32[5] select-and-scatter(x, src, i), window={size=3 stride=2 pad=1_1}, select=sel, scatter=sct
  b = u64[2] rng-get-and-update-state(), delta=100
  rc = u64[5] convert(r)
  ROOT t = u64[9] concatenate(a, rc, b), dimensions={0}
}
"""

SITE_FREE = "  {0} = u64[] constant(0)\n"


@pytest.mark.parametrize("serial", ["select", "scatter", "both"])
def test_select_and_scatter_by_hand(serial):
    """x = [0, 1, 2, 3, 4], windows of 3 at stride 2 over one padding each side: window
    0 holds (pad, 0, 1), window 1 (1, 2, 3), window 2 (3, 4, pad). The CPU's select loop
    runs window position 1 over all windows, then position 2; a window calls select at
    each position after its first one on the operand (that one is its first choice):
    window 1 at position 1 (call 0), window 2 at 1 (call 1), window 0 at 2 (call 2),
    window 1 at 2 (3), window 2 at 2 (4, the candidate the padding's zero): 5 calls.
    GE keeps the larger: windows choose 1, 3, 4, all distinct, so one scatter round in
    source order: 3 calls of delta 2**64 + 7, each adding its low word (mod 2**32)."""
    ds, dc = 5, 2**64 + 7
    text = SELECT_AND_SCATTER % {
        "sel": read_low("sel", ds) if serial != "scatter" else SITE_FREE.format("sel"),
        "sct": read_low("sct", dc) if serial != "select" else SITE_FREE.format("sct")}
    x = np.arange(5, dtype=np.uint32)
    src = np.array([10, 20, 30], np.uint32)
    cpu, gpu = both(text, x, src)
    assert bits_equal(gpu, cpu), (gpu, cpu)
    s = S0 + 100 + (5 * ds if serial != "scatter" else 0)
    out = [1000] * 5
    for target, v in zip((1, 3, 4), src.tolist()):
        low = words(s)[0] if serial != "select" else 0
        out[target] = (1000 + v + low) & M32
        s += dc if serial != "select" else 0
    want = words(S0) + out + words(s)
    assert bits_equal(cpu, np.array(want, np.uint64)), cpu


SELECT_RANDOM = """HloModule m
sel {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  s = u64[2] rng-get-and-update-state(), delta=%d
  lo = u64[1] slice(s), slice={[0:1]}
  l = u64[] reshape(lo)
  one = u64[] constant(1)
  bit = u64[] and(l, one)
  z = u64[] constant(0)
  ROOT p = pred[] compare(bit, z), direction=EQ
}
sct {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  s = u64[2] rng-get-and-update-state(), delta=7
  hi = u64[1] slice(s), slice={[1:2]}
  h = u64[] reshape(hi)
  c = f32[] convert(h)
  ab = f32[] multiply(a, b)
  ROOT r = f32[] add(ab, c)
}
ENTRY e {
  x = f32[4,5] parameter(0)
  src = f32[2,3] parameter(1)
  i = f32[] constant(0.5)
  a = u64[2] rng-get-and-update-state(), delta=100
  r = f32[4,5] select-and-scatter(x, src, i), window={size=3x3 stride=2x2 pad=0_1x1_1}, select=sel, scatter=sct
  b = u64[2] rng-get-and-update-state(), delta=100
  ROOT t = (u64[2], f32[4,5], u64[2]) tuple(a, r, b)
}
"""


def test_select_and_scatter_random_choices():
    """A select answering the low bit of the state it reads (choices depend on the call
    order), overlapping 2-D windows (several choose the same element: scatter rounds), a
    scatter adding the high word: CPU bit for bit."""
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    src = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    cpu, gpu = both(SELECT_RANDOM % (2**63 + 1), x, src)
    assert bits_equal(gpu, cpu), (gpu, cpu)
    assert int(cpu[2][0]) != int(cpu[0][0]) + 100


# ----------------------------------------------------------------- scatter

SCATTER = """HloModule m
comb {
  a = u32[] parameter(0)
  b = u32[] parameter(1)
%(l)s  k = u32[] convert(l)
  ab = u32[] multiply(a, b)
  ROOT r = u32[] add(ab, k)
}
ENTRY e {
  x = u32[6] parameter(0)
  idx = s32[5,1] parameter(1)
  upd = u32[5,2] parameter(2)
  a = u64[2] rng-get-and-update-state(), delta=100
  r = u32[6] scatter(x, idx, upd), update_window_dims={1}, inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=comb
  b = u64[2] rng-get-and-update-state(), delta=100
  rc = u64[6] convert(r)
  ROOT t = u64[10] concatenate(a, rc, b), dimensions={0}
}
"""


def test_scatter_by_hand():
    """Windows of 2 at indices 1, 5 (out of bounds: skipped, no call), 2, 1, -1
    (skipped): the CPU combines update by update, scatter index by index, each window in
    order: ``x[t] = x[t] u + low word`` with a delta carrying into the high word."""
    d = 2**64 - 3
    x = np.arange(1, 7, dtype=np.uint32)
    idx = np.array([[1], [5], [2], [1], [-1]], np.int32)
    upd = (np.arange(10, dtype=np.uint32) + 2).reshape(5, 2)
    cpu, gpu = both(SCATTER % {"l": read_low("l", d)}, x, idx, upd)
    assert bits_equal(gpu, cpu), (gpu, cpu)
    s = S0 + 100
    out = x.astype(np.int64).tolist()
    for (i,), u in zip(idx.tolist(), upd.tolist()):
        if i < 0 or i + 2 > 6:
            continue
        for w in range(2):
            out[i + w] = (out[i + w] * u[w] + words(s)[0]) & M32
            s += d
    want = words(S0) + out + words(s)
    assert bits_equal(cpu, np.array(want, np.uint64)), cpu


VARIADIC_SCATTER = """HloModule m
comb {
  a = f32[] parameter(0)
  i = s32[] parameter(1)
  b = f32[] parameter(2)
  j = s32[] parameter(3)
  s = u64[2] rng-get-and-update-state(), delta=-1
  lo = u64[1] slice(s), slice={[0:1]}
  l = u64[] reshape(lo)
  k = s32[] convert(l)
  ab = f32[] add(a, b)
  ij = s32[] xor(i, k)
  ROOT r = (f32[], s32[]) tuple(ab, ij)
}
ENTRY e {
  x = f32[4,3] parameter(0)
  y = s32[4,3] parameter(1)
  idx = s32[3,2] parameter(2)
  u = f32[3,2] parameter(3)
  v = s32[3,2] parameter(4)
  a = u64[2] rng-get-and-update-state(), delta=100
  r = (f32[4,3], s32[4,3]) scatter(x, y, idx, u, v), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0,1}, index_vector_dim=1, to_apply=comb
  b = u64[2] rng-get-and-update-state(), delta=100
  ROOT t = (u64[2], (f32[4,3], s32[4,3]), u64[2]) tuple(a, r, b)
}
"""


def test_scatter_variadic():
    """Two operands, a tuple-valued combiner, 2-D indices (one window out of bounds),
    a negative delta (the state wraps below zero): CPU bit for bit; the state moves by
    one delta per applied update (2 windows of 2)."""
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    y = np.arange(12, dtype=np.int32).reshape(4, 3) * 7
    idx = np.array([[1, 0], [3, 2], [1, 1]], np.int32)
    u = np.arange(6, dtype=np.float32).reshape(3, 2) + 0.5
    v = np.arange(6, dtype=np.int32).reshape(3, 2) * 3
    cpu, gpu = both(VARIADIC_SCATTER, x, y, idx, u, v)
    assert bits_equal(gpu, cpu), (gpu, cpu)
    assert [int(w) for w in cpu[2]] == words(S0 + 100 - 4)


# ----------------------------------------------------------------- sort

SORT = """HloModule m
less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  s = u64[2] rng-get-and-update-state(), delta=%d
  lo = u64[1] slice(s), slice={[0:1]}
  l = u64[] reshape(lo)
  one = u64[] constant(1)
  bit = u64[] and(l, one)
  z = u64[] constant(0)
  ROOT p = pred[] compare(bit, z), direction=EQ
}
ENTRY e {
  x = f32[%(rows)d,%(n)d] parameter(0)
  i = s32[%(rows)d,%(n)d] iota(), iota_dimension=1
  a = u64[2] rng-get-and-update-state(), delta=100
  r = (f32[%(rows)d,%(n)d], s32[%(rows)d,%(n)d]) sort(x, i), dimensions={1}, to_apply=less
  b = u64[2] rng-get-and-update-state(), delta=100
  ROOT t = (u64[2], (f32[%(rows)d,%(n)d], s32[%(rows)d,%(n)d]), u64[2]) tuple(a, r, b)
}
"""


def test_sort_pairs_by_hand():
    """Rows of two: libstdc++'s stable sort compares once, ``less(x[1], x[0])`` (its
    final merge), and swaps when true; the comparator answers whether the low word of
    the state its call reads is even, row r's call reading S + 100 + r d."""
    d = 2**64 + 1
    text = SORT.replace("%(rows)d", "5").replace("%(n)d", "2") % d
    x = np.arange(10, dtype=np.float32).reshape(5, 2)
    cpu, gpu = both(text, x)
    assert bits_equal(gpu, cpu), (gpu, cpu)
    for r in range(5):
        swap = words(S0 + 100 + r * d)[0] % 2 == 0
        assert cpu[1][1][r].tolist() == ([1, 0] if swap else [0, 1])
    assert [int(w) for w in cpu[2]] == words(S0 + 100 + 5 * d)


def test_sort_random_comparator():
    """A comparator answering the state's low bit (no order at all): the CPU's libstdc++
    stable sort and the device's make the same calls in the same order, so the same
    permutations (rows of 9 and of 13: insertion-sort chunks and buffered merges)."""
    for rows, n in ((3, 9), (2, 13)):
        text = SORT.replace("%(rows)d", str(rows)).replace("%(n)d", str(n)) % 3
        x = np.random.default_rng(n).standard_normal((rows, n)).astype(np.float32)
        cpu, gpu = both(text, x)
        assert bits_equal(gpu, cpu), (gpu, cpu)
        assert int(cpu[2][0]) > int(cpu[0][0]) + 100


# ----------------------------------------------------------------- collectives on one device

ALL_REDUCE = """HloModule m
red {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ab = f32[] add(a, b)
%(l)s  c = f32[] convert(l)
  ROOT r = f32[] add(ab, c)
}
ENTRY e {
  x = f32[4] parameter(0)
  a = u64[2] rng-get-and-update-state(), delta=100
  r = f32[4] all-reduce(x), to_apply=red, replica_groups={}
  g = f32[4] reduce-scatter(x), dimensions={0}, to_apply=red, replica_groups={}
  b = u64[2] rng-get-and-update-state(), delta=100
  ROOT t = (u64[2], f32[4], f32[4], u64[2]) tuple(a, r, g, b)
}
"""


def test_one_device_collectives_never_call_the_reducer():
    """On one device each group has one participant: the CPU's all-reduce and
    reduce-scatter give the operand without calling the reducer (which would add the
    low word of the state it reads), so the state moves only by the first read's 100."""
    x = np.array([1.5, -2, 3, 0.25], np.float32)
    cpu, gpu = both(ALL_REDUCE % {"l": read_low("l", 11)}, x)
    assert bits_equal(gpu, cpu), (gpu, cpu)
    assert bits_equal(cpu[1], x) and bits_equal(cpu[2], x)
    assert [int(w) for w in cpu[3]] == words(S0 + 100)


# ----------------------------------------------------------------- fast paths and dead sites

DEAD_SITE_SCATTER = """HloModule m
comb {
  a = %(t)s[] parameter(0)
  b = %(t)s[] parameter(1)
  s = u64[2] rng-get-and-update-state(), delta=9
  ROOT r = %(t)s[] %(op)s(a, b)
}
ENTRY e {
  x = %(t)s[4] parameter(0)
  idx = s32[3,1] parameter(1)
  upd = %(t)s[3] parameter(2)
  a = u64[2] rng-get-and-update-state(), delta=100
  r = %(t)s[4] scatter(x, idx, upd), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=comb
  b = u64[2] rng-get-and-update-state(), delta=100
  ROOT t = (u64[2], %(t)s[4], u64[2]) tuple(a, r, b)
}
"""


def test_scatter_root_op_with_a_dead_site():
    """``ROOT op(a, b)`` beside a dead site of delta 9: no fast path replaces the
    computation by its root (``evaluator.reduce.reads_everything``: the site is evaluated
    for its effect), so every backend calls it update by update, twice (index 7 is out
    of bounds), for an integer add too."""
    idx = np.array([[1], [7], [3]], np.int32)
    for t, op, dtype, calls in [("u32", "add", np.uint32, 2), ("pred", "or", bool, 2),
                                ("bf16", "add", np.dtype("bfloat16"), 2)]:
        x = np.array([1, 0, 1, 0]).astype(dtype)
        upd = np.array([1, 1, 0]).astype(dtype)
        cpu, gpu = both(DEAD_SITE_SCATTER % {"t": t, "op": op}, x, idx, upd)
        assert bits_equal(gpu, cpu), (t, gpu, cpu)
        assert [int(w) for w in cpu[2]] == words(S0 + 100 + 9 * calls), t
        assert cpu[1].astype(np.float32).tolist() == [1, 1, 1, 0], t


DEAD_SITE_SELECT_AND_SCATTER = """HloModule m
sel {
  a = u32[] parameter(0)
  b = u32[] parameter(1)
  s = u64[2] rng-get-and-update-state(), delta=5
  ROOT p = pred[] compare(a, b), direction=GE
}
sct {
  a = u32[] parameter(0)
  b = u32[] parameter(1)
  s = u64[2] rng-get-and-update-state(), delta=7
  ROOT r = u32[] add(a, b)
}
ENTRY e {
  x = u32[5] parameter(0)
  src = u32[3] parameter(1)
  i = u32[] constant(1000)
  a = u64[2] rng-get-and-update-state(), delta=100
  r = u32[5] select-and-scatter(x, src, i), window={size=3 stride=2 pad=1_1}, select=sel, scatter=sct
  b = u64[2] rng-get-and-update-state(), delta=100
  ROOT t = (u64[2], u32[5], u64[2]) tuple(a, r, b)
}
"""


def test_select_and_scatter_root_ops_with_dead_sites():
    """A ``compare`` select and an ``add`` scatter, each beside a dead site: the CPU
    has no fast path for either (it calls select 5 times and scatter 3 times, the
    windows of ``test_select_and_scatter_by_hand``), and the device makes the calls."""
    x = np.arange(5, dtype=np.uint32)
    src = np.array([10, 20, 30], np.uint32)
    cpu, gpu = both(DEAD_SITE_SELECT_AND_SCATTER, x, src)
    assert bits_equal(gpu, cpu), (gpu, cpu)
    assert cpu[1].tolist() == [1000, 1010, 1000, 1020, 1030]
    assert [int(w) for w in cpu[2]] == words(S0 + 100 + 5 * 5 + 3 * 7)
