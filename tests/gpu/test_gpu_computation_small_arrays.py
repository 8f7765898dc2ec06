"""Small array values (2 to 4 elements, ``gpu/computation_values.py``'s ``VecType``) inside a
computation that ``map`` calls on every element, ``fallback=False``: through ``while``
loop state (one loop variable per element), ``conditional`` operands and branch results
(every branch computed and one chosen, or an if/elif block when a branch loops), nested
``call``/``fusion``, tuples, ``copy``/``opt-barrier``; moved by broadcast, concatenate,
reshape, slice, transpose, reverse, bitcast (layouts), iota, dynamic-slice and
dynamic-update-slice with run-time starts; elementwise ops element by element.

Each result against the CPU backend bit for bit, and by hand from the written semantics:
rng-bit-generator's bits from ``evaluator/rng.py``'s generators called directly, moves
and clamped starts spelt out. XLA:CPU (jaxlib 0.10.2) aborts compiling most of these
maps (a while, a conditional, a dynamic-slice or a select in a map body: ``SmallVector
unable to grow``); it runs the pure moves, checked there (``xla="required"``).
"""

from __future__ import annotations

import numpy as np
import pytest

import hloref
from hloref.errors import HloEvalError, HloLimitError
from hloref.evaluator.interpreter import Limits
from hloref.evaluator.rng import philox4x32, threefry2x32

from gpu_check import bits_equal, check

N = 8
M64 = 2**64


def draw(alg, state, bits):
    """One element of bits from ``state`` (a list of ints) by the written rule: ThreeFry
    counter ``state[1]`` under key ``state[0]``; Philox the 128-bit counter ``(state[1],
    state[2])`` (two words: ``(state[1], state[0])``), word 0 (64 bits: words 0, 1);
    the new state advances the counter by one (Philox carries into the high word)."""
    key, ctr = state[0], state[1]
    if alg == "rng_three_fry":
        x0, x1 = (int(w[0]) for w in threefry2x32(np.array([ctr], np.uint64), key))
        new = [key, (ctr + 1) % M64]
    else:
        hi = state[2] if len(state) == 3 else key
        x0, x1 = (int(v) for v in philox4x32(np.array([ctr], np.uint64),
                                             np.array([hi], np.uint64), key)[0, :2])
        new = [key, (ctr + 1) % M64]
        if len(state) == 3:
            new.append((hi + (ctr == M64 - 1)) % M64)
    return new, (x0 | (x1 << 32) if bits == 64 else x0) % 2**bits


def keys_counters():
    rng = np.random.default_rng(11)
    key = rng.integers(0, 2**63, N, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    ctr = rng.integers(0, 2**63, N, dtype=np.uint64)
    ctr[:2] = [M64 - 1, M64 - 2]  # the counter wraps inside the loop (Philox carries)
    return key, ctr


def loop_module(alg, k, t):
    """A map body that runs ``n`` iterations of a ``while`` whose state holds the
    ``u64[k]`` generator state: each draws from it, xors the bits into an accumulator
    and passes the new state on; ``acc + last counter word``."""
    words = ", ".join(["a", "b", "b"][:k])
    st = f"u64[{k}]"
    state = f"({st}, {t}[], s32[], s32[])"
    return f"""HloModule m
cond {{
  s = {state} parameter(0)
  i = s32[] get-tuple-element(s), index=2
  n = s32[] get-tuple-element(s), index=3
  ROOT c = pred[] compare(i, n), direction=LT
}}
body {{
  s = {state} parameter(0)
  st = {st} get-tuple-element(s), index=0
  acc = {t}[] get-tuple-element(s), index=1
  i = s32[] get-tuple-element(s), index=2
  n = s32[] get-tuple-element(s), index=3
  g = ({st}, {t}[]) rng-bit-generator(st), algorithm={alg}
  ns = {st} get-tuple-element(g), index=0
  v = {t}[] get-tuple-element(g), index=1
  a2 = {t}[] xor(acc, v)
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT r = {state} tuple(ns, a2, i2, n)
}}
f {{
  x = u64[] parameter(0)
  y = u64[] parameter(1)
  n = s32[] parameter(2)
  a = u64[1] reshape(x)
  b = u64[1] reshape(y)
  s = {st} concatenate({words}), dimensions={{0}}
  z = {t}[] constant(0)
  i = s32[] constant(0)
  t0 = {state} tuple(s, z, i, n)
  w = {state} while(t0), condition=cond, body=body
  fs = {st} get-tuple-element(w), index=0
  acc = {t}[] get-tuple-element(w), index=1
  c1 = u64[1] slice(fs), slice={{[1:2]}}
  c = u64[] reshape(c1)
  cv = {t}[] convert(c)
  ROOT r = {t}[] add(acc, cv)
}}
ENTRY e {{
  p = u64[{N}] parameter(0)
  q = u64[{N}] parameter(1)
  n = s32[{N}] parameter(2)
  ROOT m = {t}[{N}] map(p, q, n), dimensions={{0}}, to_apply=f
}}
"""


@pytest.mark.parametrize("alg,k,t", [("rng_three_fry", 2, "u32"), ("rng_philox", 3, "u64"),
                                     ("rng_philox", 2, "u32")])
def test_generator_state_through_a_loop(alg, k, t):
    key, ctr = keys_counters()
    n = np.array([0, 1, 2, 3, 4, 1, 3, 2], np.int32)
    got = np.asarray(check(loop_module(alg, k, t), key, ctr, n, xla=False))
    bits = int(t[1:])
    want = []
    for kk, c, steps in zip(key.tolist(), ctr.tolist(), n.tolist()):
        state, acc = [kk, c, c][:k], 0
        for _ in range(steps):
            state, v = draw(alg, state, bits)
            acc ^= v
        want.append((acc + state[1]) % 2**bits)
    assert bits_equal(got, np.array(want, np.uint64).astype(got.dtype))


def conditional_module(loop):
    """A map body whose ``conditional`` (index ``n``: 0 ThreeFry, 1 Philox, anything
    else the last branch, which swaps the state's words) takes and returns ``(u64[2]
    state, u32 bits)``; ``loop``: branch 1 draws twice in a ``while`` (an if/elif block
    on the device, so the unselected branches never run)."""
    philox = """  g = (u64[2], u32[]) rng-bit-generator(st), algorithm=rng_philox
  ns = u64[2] get-tuple-element(g), index=0
  v = u32[] get-tuple-element(g), index=1
  ROOT r = (u64[2], u32[]) tuple(ns, v)"""
    if loop:
        philox = """  z = u32[] constant(0)
  i = s32[] constant(0)
  t0 = (u64[2], u32[], s32[]) tuple(st, z, i)
  w = (u64[2], u32[], s32[]) while(t0), condition=c2, body=b2
  ns = u64[2] get-tuple-element(w), index=0
  v = u32[] get-tuple-element(w), index=1
  ROOT r = (u64[2], u32[]) tuple(ns, v)"""
    return f"""HloModule m
c2 {{
  s = (u64[2], u32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=2
  two = s32[] constant(2)
  ROOT c = pred[] compare(i, two), direction=LT
}}
b2 {{
  s = (u64[2], u32[], s32[]) parameter(0)
  st = u64[2] get-tuple-element(s), index=0
  acc = u32[] get-tuple-element(s), index=1
  i = s32[] get-tuple-element(s), index=2
  g = (u64[2], u32[]) rng-bit-generator(st), algorithm=rng_philox
  ns = u64[2] get-tuple-element(g), index=0
  v = u32[] get-tuple-element(g), index=1
  a = u32[] add(acc, v)
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT r = (u64[2], u32[], s32[]) tuple(ns, a, i2)
}}
br0 {{
  st = u64[2] parameter(0)
  g = (u64[2], u32[]) rng-bit-generator(st), algorithm=rng_three_fry
  ns = u64[2] get-tuple-element(g), index=0
  v = u32[] get-tuple-element(g), index=1
  ROOT r = (u64[2], u32[]) tuple(ns, v)
}}
br1 {{
  st = u64[2] parameter(0)
{philox}
}}
br2 {{
  st = u64[2] parameter(0)
  sw = u64[2] reverse(st), dimensions={{0}}
  seven = u32[] constant(7)
  ROOT r = (u64[2], u32[]) tuple(sw, seven)
}}
f {{
  x = u64[] parameter(0)
  n = s32[] parameter(1)
  a = u64[1] reshape(x)
  y = u64[1] constant({{5}})
  s = u64[2] concatenate(y, a), dimensions={{0}}
  c = (u64[2], u32[]) conditional(n, s, s, s), branch_computations={{br0, br1, br2}}
  ns = u64[2] get-tuple-element(c), index=0
  v = u32[] get-tuple-element(c), index=1
  w1 = u64[1] slice(ns), slice={{[1:2]}}
  w = u64[] reshape(w1)
  cw = u32[] convert(w)
  ROOT r = u32[] xor(v, cw)
}}
ENTRY e {{
  p = u64[{N}] parameter(0)
  n = s32[{N}] parameter(1)
  ROOT m = u32[{N}] map(p, n), dimensions={{0}}, to_apply=f
}}
"""


@pytest.mark.parametrize("loop", [False, True])
def test_conditional_chooses_a_generator(loop):
    _, ctr = keys_counters()
    n = np.array([0, 1, 2, -1, 7, 1, 0, 1], np.int32)
    got = np.asarray(check(conditional_module(loop), ctr, n, xla=False))
    want = []
    for c, k in zip(ctr.tolist(), n.tolist()):
        state = [5, c]
        if k == 0:
            state, v = draw("rng_three_fry", state, 32)
        elif k == 1 and not loop:
            state, v = draw("rng_philox", state, 32)
        elif k == 1:  # two draws in the loop, their bits summed
            state, d1 = draw("rng_philox", state, 32)
            state, d2 = draw("rng_philox", state, 32)
            v = (d1 + d2) % 2**32
        else:
            state, v = state[::-1], 7
        want.append(v ^ (state[1] % 2**32))
    assert bits_equal(got, np.array(want, np.uint64).astype(np.uint32))


def map_module(body, params, out):
    """``map`` of computation ``f`` (``body``) over ``N``-element parameters."""
    plines = "\n".join(f"  p{i} = {t}[{N}] parameter({i})" for i, t in enumerate(params))
    names = ", ".join(f"p{i}" for i in range(len(params)))
    return (f"HloModule m\n{body}\nENTRY e {{\n{plines}\n"
            f"  ROOT m = {out}[{N}] map({names}), dimensions={{0}}, to_apply=f\n}}\n")


def test_moves():
    """broadcast, transpose, reverse, slice (rank 2), reshape, iota, elementwise add and
    multiply: ``[x, y]`` broadcast to rows ``[[x, y], [x, y]]``, transposed ``[[x, x],
    [y, y]]``, rows reversed ``[[y, y], [x, x]]``, column 1 ``[y, x]``, plus ``[1, 2]``,
    times iota ``[0, 1]``: ``x + 2``; the result twice that as u32."""
    text = map_module("""f {
  x = u64[] parameter(0)
  y = u64[] parameter(1)
  a = u64[1] reshape(x)
  b = u64[1] reshape(y)
  v = u64[2] concatenate(a, b), dimensions={0}
  w = u64[2,2] broadcast(v), dimensions={1}
  t = u64[2,2] transpose(w), dimensions={1,0}
  r = u64[2,2] reverse(t), dimensions={0}
  sl = u64[2,1] slice(r), slice={[0:2], [1:2]}
  bc = u64[2] reshape(sl)
  one = u64[2] constant({1, 2})
  ad = u64[2] add(bc, one)
  io = u64[2] iota(), iota_dimension=0
  mu = u64[2] multiply(ad, io)
  e0 = u64[1] slice(mu), slice={[1:2]}
  e = u64[] reshape(e0)
  c = u32[] convert(e)
  ROOT z = u32[] add(c, c)
}""", ["u64", "u64"], "u32")
    x, y = keys_counters()
    got = np.asarray(check(text, x, y, xla="required"))
    want = ((x + np.uint64(2)) * np.uint64(2)).astype(np.uint32)
    assert bits_equal(got, want)


def test_bitcast_in_layouts_and_types():
    """``u32[2,2]{0,1}`` (column-major) ``[[x, y], [x + 1, y + 1]]`` bitcast to
    ``f32[4]`` is the memory order ``[x, x + 1, y, y + 1]`` as f32 bits; element 1 minus
    element 2, bitcast back to u32."""
    text = map_module("""f {
  x = u32[] parameter(0)
  y = u32[] parameter(1)
  a = u32[1,1] reshape(x)
  b = u32[1,1] reshape(y)
  r0 = u32[1,2] concatenate(a, b), dimensions={1}
  one = u32[1,2] constant({{1, 1}})
  r1 = u32[1,2] add(r0, one)
  m = u32[2,2]{0,1} concatenate(r0, r1), dimensions={0}
  f = f32[4] bitcast(m)
  e1 = f32[1] slice(f), slice={[1:2]}
  e2 = f32[1] slice(f), slice={[2:3]}
  d = f32[1] subtract(e1, e2)
  u = u32[1] bitcast-convert(d)
  ROOT z = u32[] reshape(u)
}""", ["u32", "u32"], "u32")
    rng = np.random.default_rng(5)
    x = rng.integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)
    y = rng.integers(0, 2**32, N, dtype=np.uint64).astype(np.uint32)
    x[:2] = [0x7F800000, 0xFFFFFFFF]  # inf (+1: NaN), a NaN (+1 wraps to +0)
    got = np.asarray(check(text, x, y, xla=False))
    want = ((x + np.uint32(1)).view(np.float32) - y.view(np.float32)).view(np.uint32)
    nan = np.isnan(want.view(np.float32))
    assert bits_equal(got[~nan], want[~nan]) and np.isnan(got.view(np.float32)[nan]).all()


@pytest.mark.parametrize("t", ["s32", "u64", "s8"])
def test_dynamic_slice_and_update_with_run_time_starts(t):
    """``v = [x, y, x]``; ``d``, a dynamic-slice of 2 at start ``i`` clamped to ``[0,
    1]``; a dynamic-update-slice of ``v`` writing ``v[c]`` (c: i clamped to ``[0, 2]``)
    at c (``v`` itself), xored with ``d``; that pair written into row ``i`` (clamped to
    ``[0, 1]``), column 1 (clamped to 0) of a 2x2 of x; column 1 plus the pair, the
    product of its two elements."""
    text = map_module(f"""f {{
  x = u64[] parameter(0)
  y = u64[] parameter(1)
  i = {t}[] parameter(2)
  a = u64[1] reshape(x)
  b = u64[1] reshape(y)
  v = u64[3] concatenate(a, b, a), dimensions={{0}}
  d = u64[2] dynamic-slice(v, i), dynamic_slice_sizes={{2}}
  d1 = u64[1] dynamic-slice(v, i), dynamic_slice_sizes={{1}}
  u = u64[3] dynamic-update-slice(v, d1, i)
  us = u64[2] slice(u), slice={{[1:3]}}
  k = u64[2] xor(d, us)
  z = u64[2,2] broadcast(x), dimensions={{}}
  k2 = u64[1,2] reshape(k)
  j = {t}[] constant(1)
  m = u64[2,2] dynamic-update-slice(z, k2, i, j)
  mr = u64[4] reshape(m)
  m1 = u64[2] slice(mr), slice={{[1:4:2]}}
  s = u64[2] add(m1, k)
  h0 = u64[1] slice(s), slice={{[0:1]}}
  h1 = u64[1] slice(s), slice={{[1:2]}}
  ss = u64[1] multiply(h0, h1)
  ROOT r = u64[] reshape(ss)
}}""", ["u64", "u64", t], "u64")
    x, y = keys_counters()
    et = np.dtype({"s32": np.int32, "u64": np.uint64, "s8": np.int8}[t])
    if t == "u64":
        i = np.array([0, 1, 2, 3, 2**63, M64 - 1, 1, 0], np.uint64)
    else:
        i = np.array([0, 1, 2, 3, -1, -128 if t == "s8" else -2**31, 1, 127], et)
    got = np.asarray(check(text, x, y, i, xla=False))
    want = []
    for xv, yv, iv in zip(x.tolist(), y.tolist(), i.tolist()):
        v = [xv, yv, xv]
        c1 = min(max(iv, 0), 1)
        k = [v[c1] ^ v[1], v[c1 + 1] ^ v[2]]  # the update writes v[c] back at c: v
        m = [[xv, xv], [xv, xv]]
        m[c1] = k  # the 1x2 update at (c1, 1 clamped to [0, 0])
        m1 = [m[0][1], m[1][1]]
        s = [(p + q) % M64 for p, q in zip(m1, k)]
        want.append((s[0] * s[1]) % M64)
    assert bits_equal(got, np.array(want, np.uint64))


def test_elementwise_float_ops_element_by_element():
    """``[x, y]`` and ``[y, x]``: multiply, divide, compare, select, clamp with scalar
    bounds, exponential, convert, bitcast-convert, each element through the scalar path
    (specials included): the CPU's arrays bit for bit."""
    text = map_module("""f {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  a = f32[1] reshape(x)
  b = f32[1] reshape(y)
  v = f32[2] concatenate(a, b), dimensions={0}
  w = f32[2] concatenate(b, a), dimensions={0}
  m = f32[2] multiply(v, w)
  d = f32[2] divide(m, v)
  c = pred[2] compare(d, w), direction=LT
  s = f32[2] select(c, d, m)
  lo = f32[] constant(-1)
  hi = f32[] constant(2)
  cl = f32[2] clamp(lo, s, hi)
  e = f32[2] exponential(cl)
  p = pred[] compare(x, y), direction=GT
  e2 = f32[2] select(p, e, cl)
  i = s32[2] convert(e2)
  u = u32[2] bitcast-convert(e2)
  iu = u32[2] convert(i)
  z = u32[2] xor(u, iu)
  z0 = u32[1] slice(z), slice={[0:1]}
  z1 = u32[1] slice(z), slice={[1:2]}
  zz = u32[1] add(z0, z1)
  ROOT r = u32[] reshape(zz)
}""", ["f32", "f32"], "u32")
    rng = np.random.default_rng(9)
    x = rng.standard_normal(N).astype(np.float32)
    y = rng.standard_normal(N).astype(np.float32)
    x[:4] = [np.nan, -0.0, np.inf, 1.5]
    y[:4] = [1.0, 0.0, -np.inf, 1.5]
    check(text, x, y, xla=False)
    # by hand, element 3 (x = y = 1.5): m = 2.25, d = 1.5, not < 1.5: s = 2.25, clamped
    # 2, x > y false: e2 = 2 (no exponential), bits 0x40000000 xor 2 for each element
    m = hloref.parse(text)
    got = np.asarray(hloref.evaluate(m, x[3:4].repeat(N), y[3:4].repeat(N), backend="gpu",
                                     fallback=False))
    assert (got == np.uint32((0x40000000 ^ 2) * 2)).all()


def test_calls_tuples_and_barriers():
    """A ``call`` taking and returning small arrays (in a tuple), a ``fusion`` of one,
    ``opt-barrier`` and ``copy`` of a tuple holding them, and a ``select`` of a pred
    pair: ``g([x, y]) = ([y, x], [x + y, y])``, the fusion adds ``[3, 4]``."""
    text = map_module("""g {
  v = u64[2] parameter(0)
  r = u64[2] reverse(v), dimensions={0}
  a = u64[1] slice(v), slice={[0:1]}
  b = u64[1] slice(v), slice={[1:2]}
  s = u64[1] add(a, b)
  w = u64[2] concatenate(s, b), dimensions={0}
  ROOT t = (u64[2], u64[2]) tuple(r, w)
}
h {
  v = u64[2] parameter(0)
  c = u64[2] constant({3, 4})
  ROOT r = u64[2] add(v, c)
}
f {
  x = u64[] parameter(0)
  y = u64[] parameter(1)
  v = u64[2] broadcast(x), dimensions={}
  yy = u64[1] reshape(y)
  v2 = u64[2] dynamic-update-slice(v, yy, y)
  t = (u64[2], u64[2]) call(v2), to_apply=g
  o = (u64[2], u64[2]) opt-barrier(t)
  c = (u64[2], u64[2]) copy(o)
  r = u64[2] get-tuple-element(c), index=0
  w = u64[2] get-tuple-element(c), index=1
  fw = u64[2] fusion(w), kind=kLoop, calls=h
  p = pred[2] compare(r, fw), direction=LT
  s = u64[2] select(p, r, fw)
  h0 = u64[1] slice(s), slice={[0:1]}
  h1 = u64[1] slice(s), slice={[1:2]}
  ss = u64[1] subtract(h0, h1)
  ROOT z = u64[] reshape(ss)
}""", ["u64", "u64"], "u64")
    x, _ = keys_counters()
    y = np.array([0, 1, 2, 1, 0, 5, 1, 0], np.uint64)
    got = np.asarray(check(text, x, y, xla=False))
    want = []
    for xv, yv in zip(x.tolist(), y.tolist()):
        v = [xv, xv]
        v[min(yv, 1)] = yv  # the start clamped to [0, 1]
        r, w = v[::-1], [(v[0] + v[1]) % M64, v[1]]
        fw = [(w[0] + 3) % M64, (w[1] + 4) % M64]
        s = [a if a < b else b for a, b in zip(r, fw)]
        want.append((s[0] - s[1]) % M64)
    assert bits_equal(got, np.array(want, np.uint64))


def stuck_loop_module():
    """A ``while`` whose state ``(u64[2] v, s32 i)`` the condition reads only through
    ``v`` (element 0 below 10); the body adds ``[1, 0]`` unless element 1 is 0, when it
    hands ``v`` back unchanged (the loop never ends)."""
    return map_module("""cond {
  s = (u64[2], s32[]) parameter(0)
  v = u64[2] get-tuple-element(s), index=0
  a = u64[1] slice(v), slice={[0:1]}
  a0 = u64[] reshape(a)
  ten = u64[] constant(10)
  ROOT c = pred[] compare(a0, ten), direction=LT
}
body {
  s = (u64[2], s32[]) parameter(0)
  v = u64[2] get-tuple-element(s), index=0
  i = s32[] get-tuple-element(s), index=1
  b = u64[1] slice(v), slice={[1:2]}
  b0 = u64[] reshape(b)
  z = u64[] constant(0)
  stuck = pred[] compare(b0, z), direction=EQ
  one = u64[2] constant({1, 0})
  n = u64[2] add(v, one)
  nv = u64[2] select(stuck, v, n)
  ROOT r = (u64[2], s32[]) tuple(nv, i)
}
f {
  x = u64[] parameter(0)
  y = u64[] parameter(1)
  a = u64[1] reshape(x)
  b = u64[1] reshape(y)
  v = u64[2] concatenate(a, b), dimensions={0}
  i = s32[] constant(0)
  t = (u64[2], s32[]) tuple(v, i)
  w = (u64[2], s32[]) while(t), condition=cond, body=body
  wv = u64[2] get-tuple-element(w), index=0
  r = u64[1] slice(wv), slice={[0:1]}
  ROOT r0 = u64[] reshape(r)
}""", ["u64", "u64"], "u64")


def test_loop_over_a_small_array_ends_stops_or_never_ends():
    """Every element of a small array state takes part in the loop's checks: ``x`` runs
    up to 10 (``max(x, 10)``); element 1 of 0 with ``x < 10`` leaves the state unchanged
    (both backends: the endless-loop error); an iteration limit below the steps needed
    stops both backends with the limit error."""
    m = hloref.parse(stuck_loop_module())
    x = np.array([0, 3, 12, 5, 9, 10, 1, 2], np.uint64)
    got = check(stuck_loop_module(), x, np.ones(N, np.uint64), xla=False)
    assert bits_equal(got, np.maximum(x, np.uint64(10)))
    y = np.ones(N, np.uint64)
    y[3] = 0
    for backend in ("cpu", "gpu"):
        with pytest.raises(HloEvalError, match="does not terminate") as e:
            hloref.evaluate(m, x, y, backend=backend, fallback=False)
        assert e.value.instruction == "w" and not isinstance(e.value, HloLimitError)
        with pytest.raises(HloLimitError) as e:
            hloref.evaluate(m, x, np.ones(N, np.uint64), backend=backend, fallback=False,
                            limits=Limits(max_while_iterations=5))
        assert e.value.instruction == "w"
