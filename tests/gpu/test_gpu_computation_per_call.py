"""Computations the device-function compiler refuses, called one call at a time through
the GPU interpreter (``gpu/calls.py``), ``fallback=False``: map, reduce, reduce-window,
scatter, select-and-scatter and sort whose computations hold host transfers (the
infeed queue, outfeed) or arrays of more elements than the compiler's small values.

Checked against the CPU backend bit for bit, the queues after the evaluation too
(the infeed values left, the outfeed list: the order of the calls), and by hand from
the written semantics and the CPU's documented call orders (``evaluator/reduce.py``
``sequential_reduce``, ``evaluator/windows.py`` select-and-scatter, ``evaluator/sort.py``
``_python_sort``). XLA:CPU aborts compiling a map or reduce whose computation holds
infeed or outfeed, so it gives no values here.
"""

from __future__ import annotations

import numpy as np
import pytest

import hloref

from gpu_check import bits_equal
from hlo_modules import MODULES, outfeed_computation, scatter_entry


def both(text, *args, infeed=()):
    """(cpu, gpu) results, each with its infeed left and outfeed list; the gpu with no
    fallback and no op on the CPU."""
    m = hloref.parse(text)
    runs = []
    for backend in ("cpu", "gpu"):
        feed, out = list(infeed), []
        kw = {} if backend == "cpu" else {"backend": "gpu", "fallback": False}
        value = hloref.evaluate(m, *args, infeed=feed, outfeed=out, **kw)
        runs.append((value, feed, out))
    assert hloref.gpu.last_report.total == 0
    (cv, cfeed, cout), (gv, gfeed, gout) = runs
    for c, g in zip(cv if isinstance(cv, tuple) else (cv,), gv if isinstance(gv, tuple) else (gv,)):
        assert bits_equal(g, c), (g, c)
    assert len(gout) == len(cout)
    for c, g in zip(cout, gout):
        assert bits_equal(np.asarray(g), np.asarray(c)), (g, c)
    return gv, gfeed, gout


FEED_MAP = MODULES["map-infeed-outfeed"]


def test_map_with_infeed_and_outfeed_by_hand():
    """Element k reads the k-th infeed value and outfeeds its own: [1+10, 2+20, 3+30],
    the outfeed [1, 2, 3] in row-major order."""
    x = np.array([1, 2, 3], np.float32)
    value, _, out = both(FEED_MAP, x, infeed=[10.0, 20.0, 30.0, 40.0])
    np.testing.assert_array_equal(value, [11, 22, 33])
    np.testing.assert_array_equal(np.asarray(out, np.float32), [1, 2, 3])


def test_map_with_an_empty_infeed_queue_is_the_cpus_error():
    x = np.array([1, 2, 3], np.float32)
    m = hloref.parse(FEED_MAP)
    errors = []
    for kw in ({}, {"backend": "gpu", "fallback": False}):
        with pytest.raises(hloref.HloEvalError) as e:
            hloref.evaluate(m, x, infeed=[10.0], outfeed=[], **kw)
        errors.append(str(e.value))
    assert errors[0] == errors[1] and "infeed queue is empty" in errors[0]


ARRAY_MAP = """HloModule m
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
body {
  x = f32[] parameter(0)
  b = f32[8] broadcast(x), dimensions={}
  i = f32[8] iota(), iota_dimension=0
  p = f32[8] multiply(b, i)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=add
}
ENTRY e {
  x = f32[2,3] parameter(0)
  ROOT m = f32[2,3] map(x), dimensions={0,1}, to_apply=body
}
"""


def test_map_body_with_an_eight_element_array_by_hand():
    """sum_i x * i over i < 8 is 28 x (exact in f32 for these x)."""
    x = np.array([[1, -2, 0.5], [3, 0, -0.25]], np.float32)
    value, _, _ = both(ARRAY_MAP, x)
    np.testing.assert_array_equal(value, 28 * x)


FEED_REDUCE = "HloModule m\n" + outfeed_computation(
    "body", "f32", "ROOT r = f32[] add(a, x)", seen="x", params=("a", "x")) + """\
ENTRY e {
  x = f32[2,3] parameter(0)
  z = f32[] constant(0.5)
  ROOT r = f32[3] reduce(x, z), dimensions={0}, to_apply=body
}
"""


def test_reduce_folds_output_by_output_by_hand():
    """Output j folds column j from the init 0.5: the outfeed lists the columns in turn."""
    x = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    value, _, out = both(FEED_REDUCE, x)
    np.testing.assert_array_equal(value, [5.5, 7.5, 9.5])
    np.testing.assert_array_equal(np.asarray(out, np.float32), [1, 4, 2, 5, 3, 6])


FEED_WINDOW = "HloModule m\n" + outfeed_computation(
    "body", "f32", "ROOT r = f32[] maximum(a, x)", seen="x", params=("a", "x")) + """\
ENTRY e {
  x = f32[5] parameter(0)
  z = f32[] constant(-100)
  ROOT r = f32[3] reduce-window(x, z), window={size=3 stride=2 pad=1_1}, to_apply=body
}
"""


def test_reduce_window_skips_padding_by_hand():
    """Windows [pad, x0, x1], [x1, x2, x3], [x3, x4, pad]: padding calls nothing."""
    x = np.array([3, -1, 4, 1, -5], np.float32)
    value, _, out = both(FEED_WINDOW, x)
    np.testing.assert_array_equal(value, [3, 4, 1])
    np.testing.assert_array_equal(np.asarray(out, np.float32), [3, -1, -1, 4, 1, 1, -5])


FEED_SCATTER = "HloModule m\n" + outfeed_computation(
    "body", "s32", "ROOT r = s32[] subtract(a, u)", seen="u", params=("a", "u")) + scatter_entry(
    "s32", 4, 3, "body", root="s")


def test_scatter_applies_updates_in_order_skipping_out_of_bounds_by_hand():
    x = np.array([100, 200, 300, 400], np.int32)
    idx = np.array([[2], [7], [2]], np.int32)  # index 7 is out of bounds: skipped
    u = np.array([1, 2, 3], np.int32)
    value, _, out = both(FEED_SCATTER, x, idx, u)
    np.testing.assert_array_equal(value, [100, 200, 296, 400])
    np.testing.assert_array_equal(np.asarray(out), [1, 3])


SELECT_AND_SCATTER = "HloModule m\n" + outfeed_computation(
    "ge", "f32", "ROOT c = pred[] compare(a, b), direction=GE") + """\
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
ENTRY e {
  x = f32[4] parameter(0)
  s = f32[2] parameter(1)
  z = f32[] constant(0)
  ROOT r = f32[4] select-and-scatter(x, s, z), window={size=3 stride=2 pad=1_0},
      select=ge, scatter=add
}
"""


def test_select_and_scatter_select_order_by_hand():
    """Windows [pad, x0, x1] and [x1, x2, x3]; position 1 is the first valid of window
    0, position 0 of window 1. Select calls, position outer, windows inner: window 1
    compares x2 (k=1), then window 0 x1 and window 1 x3 (k=2); each outfeeds its
    candidate."""
    x = np.array([1, 5, 2, 7], np.float32)
    s = np.array([10, 20], np.float32)
    value, _, out = both(SELECT_AND_SCATTER, x, s)
    np.testing.assert_array_equal(value, [0, 10, 0, 20])  # window 0 picks x1, window 1 x3
    np.testing.assert_array_equal(np.asarray(out, np.float32), [2, 5, 7])


SORT = "HloModule m\n" + outfeed_computation(
    "lt", "s32", "ROOT c = pred[] compare(a, b), direction=LT", seen="a") + """\
ENTRY e {
  x = s32[2,3] parameter(0)
  ROOT s = s32[2,3] sort(x), dimensions={1}, to_apply=lt
}
"""


def test_sort_comparator_calls_in_the_cpus_order():
    """Rows in order, libstdc++'s insertion sort on three elements: for [3, 1, 2] it asks
    lt(1, 3), then lt(2, 1), then lt(2, 3) (the outfeed lists each first argument)."""
    x = np.array([[3, 1, 2], [0, 5, 4]], np.int32)
    value, _, out = both(SORT, x)
    np.testing.assert_array_equal(value, [[1, 2, 3], [0, 4, 5]])
    np.testing.assert_array_equal(np.asarray(out)[:3], [1, 2, 2])


ALL_REDUCE = """HloModule m, replica_count=2
red {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  v = f32[3] broadcast(b), dimensions={}
  z = f32[] constant(0)
  s = f32[] reduce(v, z), dimensions={0}, to_apply=plus
  ROOT r = f32[] add(a, s)
}
plus { p = f32[] parameter(0)  q = f32[] parameter(1)  ROOT s = f32[] add(p, q) }
ENTRY e {
  x = f32[4] parameter(0)
  ROOT r = f32[4] all-reduce(x), replica_groups={}, to_apply=red
}
"""


def test_all_reduce_with_a_reducer_the_compiler_refuses_by_hand():
    """On two devices, a pure reducer with an array inside, applied element by element
    (one call at a time through the GPU interpreter): x0 + 3 x1 on both devices."""
    m = hloref.parse(ALL_REDUCE)
    xs = [np.array([1, 2, 3, 4], np.float32), np.array([10, 20, 30, 40], np.float32)]
    cpu = hloref.evaluate(m, xs)
    gpu = hloref.evaluate(m, xs, backend="gpu", fallback=False)
    assert hloref.gpu.last_report.total == 0
    for g, c in zip(gpu, cpu):
        assert bits_equal(g, c), (g, c)
        np.testing.assert_array_equal(g, xs[0] + 3 * xs[1])


def test_all_reduce_with_a_reducer_with_an_outfeed_by_hand():
    """A reducer with an outfeed, called element by element (the scalar computation's
    semantics; ``evaluator.collectives._combine``): each device outfeeds the second
    operand of each call, device 1's value at every element, in order."""
    text = ALL_REDUCE.replace("ROOT r = f32[] add(a, s)", """t = token[] after-all()
  o = token[] outfeed(b, t), outfeed_shape=f32[]
  ROOT r = f32[] add(a, s)""")
    m = hloref.parse(text)
    xs = [np.array([1, 2, 3, 4], np.float32), np.array([10, 20, 30, 40], np.float32)]
    outs = {"cpu": [[], []], "gpu": [[], []]}
    cpu = hloref.evaluate(m, xs, outfeed=outs["cpu"])
    gpu = hloref.evaluate(m, xs, backend="gpu", fallback=False, outfeed=outs["gpu"])
    assert hloref.gpu.last_report.total == 0
    for d in range(2):
        assert bits_equal(gpu[d], cpu[d]), (gpu[d], cpu[d])
        np.testing.assert_array_equal(gpu[d], xs[0] + 3 * xs[1])
        for backend in ("cpu", "gpu"):
            np.testing.assert_array_equal(np.asarray(outs[backend][d], np.float32), xs[1])
