"""rng-get-and-update-state inside a computation that ``map`` calls on every element
or that ``reduce`` folds with (``gpu/computation.py``: ``_state_sites``,
``gpu/computation_rng.py``: ``rng_state``; ``gpu/rng.py``: ``state_at``; the map kernel in
``gpu/windows.py``, the sequential reduce kernel in ``gpu/reduce.py``),
``fallback=False``. The CPU calls a map body holding one element by element in
row-major order, and such a reducer output by output over the reduced elements in
order, each call evaluating its sites in its interpreter's order and advancing the
evaluation's one 128-bit state: call ``k`` at a site reads ``state + k * (deltas of one
call) + (deltas of the call's earlier sites)``, and the op leaves the state ``calls *
deltas`` further on. Results against the CPU backend bit for bit (maps called twice,
inside a while loop, nested calls, dead sites, a variadic reduce, deltas that carry
into and wrap the high word) and by hand.

Sites whose calls depend on the data or padding (under a conditional or a while, in
sort, scatter, reduce-window...) run in the serial mode instead
(test_gpu_computation_rng_state_serial.py); the two modules that fell back to the CPU
before run on the device here too.

No XLA here: XLA:CPU (jaxlib 0.10.2) aborts compiling a map whose computation holds
rng-get-and-update-state (see test_gpu_computation_rng.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from gpu_check import bits_equal

from hlo_modules import MODULES, parameters, state_bracket, state_read
from rng_state_common import M64, S0, both


def words_module(delta, n):
    """map over u64[n]: element k gives the low (x = 0) or high (x != 0) word of the
    state its call reads; a state read before and after the map."""
    return f"""HloModule m
body {{
  x = u64[] parameter(0)
  s = u64[2] rng-get-and-update-state(), delta={delta}
  lo = u64[1] slice(s), slice={{[0:1]}}
  hi = u64[1] slice(s), slice={{[1:2]}}
  l = u64[] reshape(lo)
  h = u64[] reshape(hi)
  z = u64[] constant(0)
  p = pred[] compare(x, z), direction=EQ
  ROOT r = u64[] select(p, l, h)
}}
""" + state_bracket(parameters(f"x = u64[{n}]"),
                    f"  m = u64[{n}] map(x), dimensions={{0}}, to_apply=body\n",
                    [("m", f"u64[{n}]")], before=5, after=1)


@pytest.mark.parametrize("delta", [7, 2**63 - 1, -S0 - 12])
def test_map_state_by_hand(delta):
    """Call k reads S0 + 5 + k * delta (mod 2**128): the low words on even, the high
    words on odd elements; the state after the map is k = n. Deltas: small; large (the
    high word fills); negative (the state wraps below zero: high word all ones)."""
    n = 6
    x = (np.arange(n) % 2).astype(np.uint64)
    cpu, gpu = both(words_module(delta, n), x)
    states = [(S0 + 5 + k * delta) % 2**128 for k in range(n + 1)]
    want = [S0 & M64, S0 >> 64]
    want += [(s >> 64) if k % 2 else (s & M64) for k, s in enumerate(states[:n])]
    want += [states[n] & M64, states[n] >> 64]
    want = np.array(want, np.uint64)
    assert bits_equal(cpu, want), cpu
    assert bits_equal(gpu, want), gpu


SITES = """HloModule m
inner {
  z = u64[] parameter(0)
  g = u64[2] rng-get-and-update-state(), delta=7
  h = u64[1] slice(g), slice={[1:2]}
  hh = u64[] reshape(h)
  ROOT o = u64[] add(z, hh)
}
body {
  x = u64[] parameter(0)
  dead = u64[2] rng-get-and-update-state(), delta=1000
  s = u64[2] rng-get-and-update-state(), delta=-3
  lo = u64[1] slice(s), slice={[0:1]}
  l = u64[] reshape(lo)
  c = u64[] call(x), to_apply=inner
  a = u64[] add(l, c)
  ROOT r = u64[] xor(a, x)
}
""" + state_bracket(parameters("p = u64[2,3]"),
                    "  m1 = u64[2,3] map(p), dimensions={0,1}, to_apply=body\n"
                    "  m2 = u64[2,3] map(m1), dimensions={0,1}, to_apply=body\n",
                    [("f1", "u64[6]"), ("f2", "u64[6]")],
                    tail="  f1 = u64[6] reshape(m1)\n  f2 = u64[6] reshape(m2)\n")


def test_map_state_sites_calls_and_two_maps():
    """Three sites a call (one dead, one in a nested call: the CPU's order is the text
    order, the dead one included), the body mapped twice (the second map goes on from
    the first's state), state reads before and after."""
    p = (np.arange(6, dtype=np.uint64) * np.uint64(12345678901)).reshape(2, 3)
    cpu, gpu = both(SITES, p)
    assert bits_equal(gpu, cpu), (gpu, cpu)
    per_call = 1000 - 3 + 7
    assert int(cpu[-2]) == S0 + 100 + 12 * per_call  # 12 calls; b's state, by hand
    k, x = 4, int(p.reshape(-1)[4])  # m1's call 4: the low word of site s, the high of g
    base = S0 + 100 + k * per_call
    want = ((((base + 1000) & M64) + x + ((base + 997) >> 64)) & M64) ^ x
    assert int(cpu[2 + k]) == want


LOOP = """HloModule m
body {
  x = u32[] parameter(0)
  s = u64[2] rng-get-and-update-state(), delta=%d
  lo = u64[1] slice(s), slice={[0:1]}
  l = u64[] reshape(lo)
  c = u32[] convert(l)
  ROOT r = u32[] add(x, c)
}
cond {
  st = (s32[], u32[3,2]) parameter(0)
  i = s32[] get-tuple-element(st), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
step {
  st = (s32[], u32[3,2]) parameter(0)
  i = s32[] get-tuple-element(st), index=0
  v = u32[3,2] get-tuple-element(st), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  w = u32[3,2] map(v), dimensions={0,1}, to_apply=body
  ROOT r = (s32[], u32[3,2]) tuple(j, w)
}
ENTRY e {
  p = u32[3,2] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], u32[3,2]) tuple(zero, p)
  w = (s32[], u32[3,2]) while(init), condition=cond, body=step
  v = u32[3,2] get-tuple-element(w), index=1
  g = u64[2] rng-get-and-update-state(), delta=1
  gl = u64[1] slice(g), slice={[0:1]}
  gc = u32[1] convert(gl)
  f = u32[6] reshape(v)
  ROOT t = u32[7] concatenate(f, gc), dimensions={0}
}
"""


@pytest.mark.parametrize("delta", [1, 2**40 + 3])
def test_map_state_inside_while(delta):
    """A map in a while body, three iterations: each iteration's map goes on from the
    last one's state (18 calls), then a state read; element k after three maps is
    p[k] plus the low words of the states calls k, 6 + k and 12 + k read (by hand)."""
    p = np.arange(6, dtype=np.uint32) * np.uint32(1000)
    cpu, gpu = both(LOOP % delta, p.reshape(3, 2))
    assert bits_equal(gpu, cpu), (gpu, cpu)
    want = [(int(p[k]) + sum(((S0 + (6 * it + k) * delta) & M64) for it in range(3))) & 0xFFFFFFFF
            for k in range(6)] + [(S0 + 18 * delta) & 0xFFFFFFFF]
    assert bits_equal(cpu, np.array(want, np.uint32)), cpu


EXPANDED = """HloModule m
body {
  x = f32[] parameter(0)
  s = u64[2] rng-get-and-update-state(), delta=1
  g = (u64[2], u32[]) rng-bit-generator(s), algorithm=rng_philox
  bits = u32[] get-tuple-element(g), index=1
  nine = u32[] constant(9)
  sh = u32[] shift-right-logical(bits, nine)
  f = f32[] convert(sh)
  ROOT r = f32[] add(x, f)
}
ENTRY e {
  p = f32[4,2] parameter(0)
  ROOT m = f32[4,2] map(p), dimensions={0,1}, to_apply=body
}
"""


def test_map_state_feeds_rng_bit_generator():
    """XLA's RngExpander pattern: the state read is an rng-bit-generator's state."""
    p = np.linspace(-2, 2, 8, dtype=np.float32).reshape(4, 2)
    cpu, gpu = both(EXPANDED, p)
    assert bits_equal(gpu, cpu), (gpu, cpu)
    assert len(np.unique(cpu)) == 8


REDUCE = """HloModule m
red {
  a = u64[] parameter(0)
  b = u32[] parameter(1)
  x = u64[] parameter(2)
  y = u32[] parameter(3)
  s = u64[2] rng-get-and-update-state(), delta=%d
  lo = u64[1] slice(s), slice={[0:1]}
  l = u64[] reshape(lo)
  ax = u64[] add(a, x)
  r0 = u64[] add(ax, l)
  k = u32[] convert(l)
  by = u32[] xor(b, y)
  r1 = u32[] multiply(by, k)
  ROOT r = (u64[], u32[]) tuple(r0, r1)
}
""" + state_bracket(
    parameters("p = u64[2,3,2]", "q = u32[2,3,2]") +
    "  z = u64[] constant(1)\n  w = u32[] constant(1)\n",
    "  r = (u64[3], u32[3]) reduce(p, q, z, w), dimensions={2,0}, to_apply=red\n"
    "  r0 = u64[3] get-tuple-element(r), index=0\n"
    "  r1 = u32[3] get-tuple-element(r), index=1\n"
    "  c1 = u64[3] convert(r1)\n",
    [("r0", "u64[3]"), ("c1", "u64[3]")], after=1)


@pytest.mark.parametrize("delta", [3, -S0 - 150])
def test_reduce_state_by_hand(delta):
    """A variadic reduce over dimensions {2, 0} (a non-vectorisable reducer: the CPU's
    sequential fold, output by output): output j's r-th call (r row-major over the
    reduced dimensions in the attribute's order) is call 4 j + r; the first result
    by hand, the whole against the CPU."""
    p = (np.arange(12, dtype=np.uint64) * np.uint64(2**40 + 7)).reshape(2, 3, 2)
    q = np.arange(12, dtype=np.uint32).reshape(2, 3, 2) * np.uint32(77777)
    cpu, gpu = both(REDUCE % delta, p, q)
    assert bits_equal(gpu, cpu), (gpu, cpu)
    s = S0 + 100
    for j in range(3):
        acc = 1
        for r in range(4):
            k2, k0 = divmod(r, 2)  # dims {2, 0}: dimension 2 outer, 0 inner
            acc = (acc + int(p[k0, j, k2]) + ((s + (4 * j + r) * delta) & M64)) & M64
        assert int(cpu[2 + j]) == acc
    after = (s + 12 * delta) % 2**128
    assert [int(cpu[-2]), int(cpu[-1])] == [after & M64, after >> 64]


DATA_DEPENDENT = {
    "reduce-window": "HloModule m\nred {\n" + parameters("a = u64[]", "b = u64[]") +
    state_read(3) + "  c = u64[] add(a, b)\n  ROOT r = u64[] add(c, l)\n}\n" + state_bracket(
        parameters("p = u64[4]") + "  z = u64[] constant(0)\n",
        "  r = u64[4] reduce-window(p, z), window={size=2 pad=1_0}, to_apply=red\n",
        [("r", "u64[4]")]),
    "conditional": MODULES["map-pred-conditional-state"],
}


@pytest.mark.parametrize("name", sorted(DATA_DEPENDENT))
def test_data_dependent_calls_on_the_device(name):
    """A site in a conditional branch (calls depend on the data) or in a reduce-window's
    reducer (calls depend on the padding): the serial mode, no fallback; the results
    and the state reads before and after agree with the CPU's."""
    text = DATA_DEPENDENT[name]
    p = np.array([0, 1, 2, 3], np.uint64)
    cpu, gpu = both(text, p)
    assert bits_equal(gpu, cpu), (gpu, cpu)
    assert int(cpu[-2]) > int(cpu[0]) + 100
