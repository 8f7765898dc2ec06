"""rng-bit-generator inside a computation that ``map`` calls on every element
(``gpu/computation_rng.py``: ``rng_bit_generator`` and the small array values of
its ``u64[2]``/``u64[3]`` state, ``VecType``, built by concatenate, broadcast or a
constant and read back by slice), ``fallback=False``: Philox (two- and three-word
states, ``rng_default``) and ThreeFry, 8- to 64-bit and float results, a second draw
from the first's new state, counters at the 64-bit wrap. The op is deterministic in its
state and bit-exact with XLA:CPU, so each result is checked against the CPU backend and
XLA:CPU bit for bit (XLA:CPU expands the op before fusion and runs these maps).
"""

from __future__ import annotations

import numpy as np
import pytest

from hloref.evaluator.rng import philox4x32, threefry2x32

from gpu_check import bits_equal, check

N = 8


def states():
    """Keys and counters: random, the largest (the 64-bit counter wraps, Philox carries
    into the high word), zero."""
    rng = np.random.default_rng(7)
    key = rng.integers(0, 2**63, N, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    ctr = rng.integers(0, 2**63, N, dtype=np.uint64)
    ctr[:3] = [2**64 - 1, 2**64 - 2, 0]
    key[3] = 0
    return key, ctr


def chain_module(alg, k, t):
    """Draw ``v`` from state ``[key, ctr(, ctr)]``, then ``w`` from the new state;
    ``(v xor w) + new counter word``."""
    parts = ", ".join(["a", "b", "b"][:k]) if k else ""
    return f"""HloModule m
body {{
  x = u64[] parameter(0)
  y = u64[] parameter(1)
  a = u64[1] reshape(x)
  b = u64[1] reshape(y)
  s = u64[{k}] concatenate({parts}), dimensions={{0}}
  g = (u64[{k}], {t}[]) rng-bit-generator(s), algorithm={alg}
  ns = u64[{k}] get-tuple-element(g), index=0
  v = {t}[] get-tuple-element(g), index=1
  g2 = (u64[{k}], {t}[1]) rng-bit-generator(ns), algorithm={alg}
  v2 = {t}[1] get-tuple-element(g2), index=1
  w = {t}[] reshape(v2)
  ns2 = u64[{k}] get-tuple-element(g2), index=0
  c = u64[1] slice(ns2), slice={{[1:2]}}
  cs = u64[] reshape(c)
  cv = {t}[] convert(cs)
  xw = {t}[] xor(v, w)
  ROOT r = {t}[] add(xw, cv)
}}
ENTRY e {{
  p = u64[{N}] parameter(0)
  q = u64[{N}] parameter(1)
  ROOT m = {t}[{N}] map(p, q), dimensions={{0}}, to_apply=body
}}
"""


@pytest.mark.parametrize("alg,k,t", [("rng_philox", 3, "u32"), ("rng_philox", 2, "u64"),
                                     ("rng_default", 2, "u8"), ("rng_three_fry", 2, "u32"),
                                     ("rng_three_fry", 2, "u64"), ("rng_philox", 3, "u16")])
def test_rng_bit_generator_chain(alg, k, t):
    key, ctr = states()
    got = np.asarray(check(chain_module(alg, k, t), key, ctr, xla="required"))
    # by hand: the CPU's generators of one counter (Philox: 128-bit counter (lo, hi) =
    # (ctr, ctr) for three words, (ctr, key) for two; ThreeFry: the 64-bit ctr)
    want = []
    for kk, c in zip(key.tolist(), ctr.tolist()):
        words, counter = [], c
        hi = c if k == 3 else kk
        for _ in range(2):
            if alg == "rng_three_fry":
                x0, x1 = (int(w[0]) for w in threefry2x32(np.array([counter], np.uint64), kk))
                counter = (counter + 1) % 2**64
            else:
                x0, x1 = (int(v) for v in philox4x32(np.array([counter], np.uint64),
                                                     np.array([hi], np.uint64), kk)[0, :2])
                hi = (hi + (counter == 2**64 - 1)) % 2**64 if k == 3 else hi
                counter = (counter + 1) % 2**64
            words.append(x0 | (x1 << 32) if t == "u64" else x0)
        bits = int(t[1:])
        want.append(((words[0] ^ words[1]) + counter) % 2**bits)
    assert bits_equal(got, np.array(want, dtype=np.uint64).astype(got.dtype))


@pytest.mark.parametrize("t,u", [("f32", "u32"), ("bf16", "u16"), ("s64", "u64"),
                                 ("f64", "u64"), ("s8", "u8")])
def test_rng_bit_generator_constant_and_broadcast_states(t, u):
    """A state broadcast from x (ThreeFry ``[x, x]``) and a constant Philox state
    ``{17, 2^64 - 1, 3}`` whose bits alone are the result (the array form): every result
    type is the bit pattern of the words' low bits; ``bits(v) xor bits(e)`` as ``u``."""
    text = f"""HloModule m
body {{
  x = u64[] parameter(0)
  s = u64[2] broadcast(x), dimensions={{}}
  g = (u64[2], {t}[]) rng-bit-generator(s), algorithm=rng_three_fry
  v = {t}[] get-tuple-element(g), index=1
  c = u64[3] constant({{17, 18446744073709551615, 3}})
  d = {t}[1,1] rng-bit-generator(c), algorithm=rng_philox
  e = {t}[] reshape(d)
  bv = {u}[] bitcast-convert(v)
  be = {u}[] bitcast-convert(e)
  ROOT r = {u}[] xor(bv, be)
}}
ENTRY e {{
  p = u64[{N}] parameter(0)
  ROOT m = {u}[{N}] map(p), dimensions={{0}}, to_apply=body
}}
"""
    key, _ = states()
    got = np.asarray(check(text, key, xla="required"))
    bits = int(u[1:])
    m = 2**bits - 1
    e = int(philox4x32(np.array([2**64 - 1], np.uint64), np.array([3], np.uint64), 17)[0, 0])
    if bits == 64:
        w = philox4x32(np.array([2**64 - 1], np.uint64), np.array([3], np.uint64), 17)[0]
        e = int(w[0]) | (int(w[1]) << 32)
    want = []
    for kk in key.tolist():
        x0, x1 = (int(w[0]) for w in threefry2x32(np.array([kk], np.uint64), kk))
        v = x0 | (x1 << 32) if bits == 64 else x0
        want.append((v & m) ^ (e & m))
    assert bits_equal(got, np.array(want, dtype=np.uint64).astype(got.dtype))
