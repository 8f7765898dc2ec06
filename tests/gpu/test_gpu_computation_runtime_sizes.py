"""Runtime dimension sizes inside a computation that ``map`` calls on every element
(``gpu/computation_sizes.py``: ``sized_op``), ``fallback=False``: one-element arrays
whose sizes ``set-dimension-size`` and ``dynamic-reshape`` set at run time to 0 or 1,
read by ``get-dimension-size``, carried by elementwise ops (the smallest of the
operands'), ended by ``reduce`` (the init where a reduced dimension is empty, the
combiner not called) and exposed again by ``set-dimension-size`` back to 1 (the padding
the CPU left there: the element itself, or the zero ``dynamic-reshape`` embeds); the
CPU's errors (a size outside its bound, a reshape that cannot hold the valid elements)
raised after the evaluation, naming the instruction; an error in a conditional's
unselected branch is never raised.

Each against the CPU backend bit for bit and by hand from ``evaluator/dynamic.py``'s
rules. No XLA check: XLA:CPU (jaxlib 0.10.2) runs these maps but drops the init of a
one-element reduce in a map body, static sizes too (``reduce(x, 0.5)`` gives ``x``,
the written semantics ``0.5 + x``), so it is no reference here.
"""

from __future__ import annotations

import numpy as np
import pytest

import hloref
from hloref.errors import HloEvalError

from gpu_check import bits_equal, check

N = 8

ADD = """add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}
"""


def map_module(body, params, out):
    plines = "\n".join(f"  p{i} = {t}[{N}] parameter({i})" for i, t in enumerate(params))
    names = ", ".join(f"p{i}" for i in range(len(params)))
    return (f"HloModule m\n{ADD}{body}\nENTRY e {{\n{plines}\n"
            f"  ROOT m = {out}[{N}] map({names}), dimensions={{0}}, to_apply=f\n}}\n")


SET_REDUCE_GET = map_module("""f {
  x = f32[] parameter(0)
  n = s32[] parameter(1)
  m = s32[] parameter(2)
  a = f32[1] reshape(x)
  d = f32[<=1] set-dimension-size(a, n), dimensions={0}
  e = f32[<=1] set-dimension-size(a, m), dimensions={0}
  p = f32[<=1] multiply(d, e)
  z = f32[] constant(0.5)
  r = f32[] reduce(p, z), dimensions={0}, to_apply=add
  g = s32[] get-dimension-size(p), dimensions={0}
  h = s32[] get-dimension-size(d), dimensions={0}
  k = s32[] multiply(h, h)
  gk = s32[] add(g, k)
  gf = f32[] convert(gk)
  ROOT o = f32[] multiply(r, gf)
}""", ["f32", "s32", "s32"], "f32")


def test_set_size_elementwise_reduce_get():
    """``p = x * x`` with sizes n and m: its size ``min(n, m)``; the reduce ``0.5 +
    x * x`` when that is 1, else 0.5; times ``min(n, m) + n * n``."""
    x = (np.arange(N, dtype=np.float32) - 2.5) * np.float32(1.5)
    x[0] = -0.0
    n = np.array([0, 1, 1, 0, 1, 0, 1, 1], np.int32)
    m = np.array([0, 1, 0, 1, 1, 1, 0, 1], np.int32)
    got = np.asarray(check(SET_REDUCE_GET, x, n, m, xla=False))
    size = np.minimum(n, m)
    r = np.where(size == 1, np.float32(0.5) + x * x, np.float32(0.5)).astype(np.float32)
    want = (r * (size + n * n).astype(np.float32)).astype(np.float32)
    assert bits_equal(got, want)


def test_size_out_of_bounds_is_the_cpus_error():
    x = np.ones(N, np.float32)
    n = np.array([0, 1, 1, 2, 1, 0, -1, 1], np.int32)
    m = hloref.parse(SET_REDUCE_GET)
    for backend in ("cpu", "gpu"):
        with pytest.raises(HloEvalError, match=r"set-dimension-size: size .*outside \[0, 1\]") \
                as e:
            hloref.evaluate(m, x, n, np.ones(N, np.int32), backend=backend, fallback=False)
        assert e.value.instruction == "d"
    # the device records the error but the evaluation after it still works
    got = hloref.evaluate(m, x, np.ones(N, np.int32), np.ones(N, np.int32), backend="gpu",
                          fallback=False)
    assert bits_equal(np.asarray(got), np.full(N, 3.0, np.float32))


RESHAPE = map_module("""f {
  x = f32[] parameter(0)
  n = s32[] parameter(1)
  j = s32[] parameter(2)
  a = f32[1,1] reshape(x)
  d = f32[<=1,1] set-dimension-size(a, n), dimensions={0}
  one = s32[] constant(1)
  k = f32[1,<=1] dynamic-reshape(d, one, j)
  back = f32[1,1] set-dimension-size(k, one), dimensions={1}
  z = f32[] constant(0.25)
  r = f32[] reduce(back, z), dimensions={0,1}, to_apply=add
  kd = f32[<=1,1] set-dimension-size(d, one), dimensions={0}
  r2 = f32[] reduce(kd, z), dimensions={0,1}, to_apply=add
  g = s32[] get-dimension-size(k), dimensions={1}
  gf = f32[] convert(g)
  s = f32[] add(r, gf)
  ROOT o = f32[] multiply(s, r2)
}""", ["f32", "s32", "s32"], "f32")


def test_dynamic_reshape_embeds_a_zero():
    """``k`` lays out the ``n`` valid elements of ``d`` as ``1 x n``: with none valid the
    CPU embeds a zero, which ``back`` (size 1 again) exposes: ``0.25 + 0``; with one,
    ``0.25 + x``; plus the size n; times ``0.25 + x`` (``d``'s padding is the element
    itself, exposed by ``kd``)."""
    x = np.arange(N, dtype=np.float32) * np.float32(1.75) - np.float32(3)
    n = np.array([0, 1, 1, 0, 1, 0, 0, 1], np.int32)
    got = np.asarray(check(RESHAPE, x, n, n, xla=False))
    r = np.where(n == 1, np.float32(0.25) + x, np.float32(0.25)).astype(np.float32)
    want = ((r + n.astype(np.float32)) * (np.float32(0.25) + x)).astype(np.float32)
    assert bits_equal(got, want)
    m = hloref.parse(RESHAPE)
    j = n.copy()
    j[5] = 1  # no valid element laid out as 1 x 1
    for backend in ("cpu", "gpu"):
        with pytest.raises(HloEvalError, match="dynamic-reshape: .*cannot take the dimensions") \
                as e:
            hloref.evaluate(m, x, n, j, backend=backend, fallback=False)
        assert e.value.instruction == "k"


def test_an_unselected_branch_records_no_error():
    """A conditional whose branch 1 sets a size of ``n`` (2 is out of bounds): the
    error only where branch 1 runs; branch 0 passes x through."""
    text = map_module("""b0 {
  t = (f32[], s32[]) parameter(0)
  ROOT x = f32[] get-tuple-element(t), index=0
}
b1 {
  t = (f32[], s32[]) parameter(0)
  x = f32[] get-tuple-element(t), index=0
  n = s32[] get-tuple-element(t), index=1
  a = f32[1] reshape(x)
  d = f32[<=1] set-dimension-size(a, n), dimensions={0}
  z = f32[] constant(1)
  ROOT r = f32[] reduce(d, z), dimensions={0}, to_apply=add
}
f {
  x = f32[] parameter(0)
  n = s32[] parameter(1)
  c = s32[] parameter(2)
  t = (f32[], s32[]) tuple(x, n)
  ROOT r = f32[] conditional(c, t, t), branch_computations={b0, b1}
}""", ["f32", "s32", "s32"], "f32")
    x = np.arange(N, dtype=np.float32) + np.float32(0.5)
    n = np.array([2, 1, 0, 2, 1, 2, 0, 1], np.int32)
    c = np.array([0, 1, 1, 0, 1, 0, 1, 1], np.int32)
    got = np.asarray(check(text, x, n, c, xla=False))
    want = np.where(c == 0, x, np.where(n == 1, np.float32(1) + x, np.float32(1)))
    assert bits_equal(got, want.astype(np.float32))
    c[0] = 1
    m = hloref.parse(text)
    for backend in ("cpu", "gpu"):
        with pytest.raises(HloEvalError, match="set-dimension-size") as e:
            hloref.evaluate(m, x, n, c, backend=backend, fallback=False)
        assert e.value.instruction == "d"
