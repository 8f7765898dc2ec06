"""A computation whose root is a recognised form (``ROOT add(p0, p1)`` for a reducer,
``compare(p0, p1)`` for a comparator, ``ROOT p1`` for a scatter combiner) beside an
instruction its root does not read but the interpreter evaluates for its effect (an
outfeed): the fast paths that replace the computation by its root
(``evaluator.reduce.reads_everything``) do not apply, so every call happens, in the
CPU's order. By hand from the written semantics and those orders (the outfeed lists
what each call saw)."""

from __future__ import annotations

import numpy as np

import hloref

from hlo_modules import outfeed_computation, scatter_entry

REDUCE = "HloModule m\n" + outfeed_computation("add", "s32", "ROOT s = s32[] add(a, b)") + """\
ENTRY e {
  x = s32[2,3] parameter(0)
  z = s32[] constant(0)
  ROOT r = s32[2] reduce(x, z), dimensions={1}, to_apply=add
}
"""

SORT = "HloModule m\n" + outfeed_computation(
    "lt", "s32", "ROOT c = pred[] compare(a, b), direction=LT", seen="a") + """\
ENTRY e {
  x = s32[3] parameter(0)
  ROOT s = s32[3] sort(x), dimensions={0}, to_apply=lt
}
"""

SCATTER = "HloModule m\n" + outfeed_computation(
    "put", "s32", "ROOT r = s32[] copy(b)") + scatter_entry("s32", 4, 3, "put", root="s")


def _outfed(text, *args):
    out = []
    value = hloref.evaluate(text, *args, outfeed=out)
    return value, [int(np.asarray(v)) for v in out]


def test_a_reducer_with_an_outfeed_is_called_for_every_element():
    value, out = _outfed(REDUCE, np.array([[1, 2, 3], [4, 5, 6]], np.int32))
    np.testing.assert_array_equal(value, [6, 15])
    assert out == [1, 2, 3, 4, 5, 6]  # output by output, each row in order


def test_a_comparator_with_an_outfeed_is_called_for_every_comparison():
    """libstdc++'s insertion sort on [3, 1, 2]: lt(1, 3), lt(2, 1), lt(2, 3)."""
    value, out = _outfed(SORT, np.array([3, 1, 2], np.int32))
    np.testing.assert_array_equal(value, [1, 2, 3])
    assert out == [1, 2, 2]


def test_an_overwriting_combiner_with_an_outfeed_is_called_for_every_update():
    """Updates in order; index 9 is out of bounds (no call); the last write wins."""
    value, out = _outfed(SCATTER, np.array([0, 0, 0, 0], np.int32),
                         np.array([[1], [9], [1]], np.int32), np.array([7, 8, 5], np.int32))
    np.testing.assert_array_equal(value, [0, 5, 0, 0])
    assert out == [7, 5]


def test_unread_pure_code_keeps_the_fast_path():
    """An unread constant has no effect: ``ROOT add(p0, p1)`` still takes the fast path,
    which sums f32 in f64 and rounds once: 2**24 + 3 rounds to 2**24 + 4 (the pairwise
    tree in f32 would give 2**24 + 2)."""
    text = """HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  unused = f32[] constant(7)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[4] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(x, z), dimensions={0}, to_apply=add
}
"""
    out = hloref.evaluate(text, np.array([2**24, 1, 1, 1], np.float32))
    assert float(out) == 2**24 + 4
