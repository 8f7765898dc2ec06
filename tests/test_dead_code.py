"""Dead code is not evaluated (XLA removes it), side effects are; bad parameter
numbers are clean errors, never tracebacks."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import hloref
from hloref.errors import HloEvalError

INFINITE_WHILE = """HloModule m
cond {
  c = s32[] parameter(0)
  ROOT t = pred[] constant(true)
}
body {
  b = s32[] parameter(0)
  one = s32[] constant(1)
  ROOT n = s32[] add(b, one)
}
ENTRY e {
  p = s32[] parameter(0)
  w = s32[] while(p), condition=cond, body=body
  ROOT r = s32[] negate(p)
}
"""


def test_unused_infinite_while_is_not_run():
    limits = hloref.Limits(max_while_iterations=1000)
    out = hloref.evaluate(INFINITE_WHILE, np.int32(5), limits=limits)
    assert out == -5  # by hand: negate(5)


def test_unused_infinite_while_matches_xla():
    xla = pytest.importorskip("hloref.fuzz.oracles.xla")
    if not xla.available():
        pytest.skip("no XLA:CPU")
    assert xla.run_hlo(INFINITE_WHILE, np.int32(7)) == -7
    assert hloref.evaluate(INFINITE_WHILE, np.int32(7)) == -7


DEAD_TUPLE_ELEMENTS = {
    # an rng-bit-generator with an f32[4] state, which no algorithm takes (hloref refuses
    # to run it), behind get-tuple-element(tuple(a, b), 1): XLA's hlo_extractor_test.cc
    "invalid-rng": """HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  g = (f32[4], f32[4]) rng-bit-generator(p), algorithm=rng_default
  n = f32[4] negate(p)
  t = ((f32[4], f32[4]), f32[4]) tuple(g, n)
  e1 = f32[4] get-tuple-element(t), index=1
  ROOT r = f32[4] add(e1, p)
}
""",
    # an infinite loop in a dead element, two tuples deep
    "infinite-while": """HloModule m
cond {
  c = f32[4] parameter(0)
  ROOT t = pred[] constant(true)
}
body {
  ROOT b = f32[4] parameter(0)
}
ENTRY e {
  p = f32[4] parameter(0)
  w = f32[4] while(p), condition=cond, body=body
  n = f32[4] negate(p)
  inner = (f32[4], f32[4]) tuple(w, n)
  outer = ((f32[4], f32[4]), f32[4]) tuple(inner, p)
  i = (f32[4], f32[4]) get-tuple-element(outer), index=0
  e1 = f32[4] get-tuple-element(i), index=1
  ROOT r = f32[4] add(e1, p)
}
""",
}


@pytest.mark.parametrize("name", sorted(DEAD_TUPLE_ELEMENTS))
def test_a_tuple_element_nothing_reads_is_dead_code(name):
    """get-tuple-element of a tuple instruction is that operand (XLA's simplifier makes
    it so, then removes the rest as dead code): the tuple's other elements are not
    evaluated. By hand -p + p = 0; XLA:CPU gives the same."""
    text = DEAD_TUPLE_ELEMENTS[name]
    x = np.array([1.5, -2.0, 3.25, 0.0], np.float32)
    limits = hloref.Limits(max_while_iterations=1000)
    out = hloref.evaluate(text, x, limits=limits)
    np.testing.assert_array_equal(out, np.zeros(4, np.float32))
    xla = pytest.importorskip("hloref.fuzz.oracles.xla")
    if xla.available():
        np.testing.assert_array_equal(np.asarray(xla.run_hlo(text, x)), out)


def test_unused_side_effects_still_happen():
    text = """HloModule m
ENTRY e {
  p = f32[2] parameter(0)
  tok = token[] after-all()
  o = token[] outfeed(p, tok), outfeed_shape=f32[2]
  ROOT r = f32[2] negate(p)
}
"""
    outfeed: list = []
    x = np.array([1, 2], np.float32)
    out = hloref.evaluate(text, x, outfeed=outfeed)
    np.testing.assert_array_equal(out, -x)
    assert len(outfeed) == 1
    np.testing.assert_array_equal(np.asarray(outfeed[0]), x)


def test_unused_unsupported_op_does_not_matter():
    text = """HloModule m
ENTRY e {
  p = f32[2] parameter(0)
  c = f32[2] custom-call(p), custom_call_target="no_such_target"
  ROOT r = f32[2] negate(p)
}
"""
    np.testing.assert_array_equal(hloref.evaluate(text, np.ones(2, np.float32)), -np.ones(2))


@pytest.mark.parametrize("number", ["4294967296", "2"])
def test_bad_parameter_numbers_are_clean_errors(tmp_path, number):
    text = f"HloModule m\nENTRY e {{\n  a = f32[2] parameter(0)\n  ROOT p = f32[2] parameter({number})\n}}\n"
    module = hloref.parse(text)
    # the interpreter's own check (evaluate verifies first unless verify=False; the
    # verifier's message is checked below, through hloref run)
    with pytest.raises(HloEvalError, match="parameter numbers must be 0..1"):
        hloref.evaluate(module, np.ones(2, np.float32), np.ones(2, np.float32), verify=False)
    path = tmp_path / "m.hlo"
    path.write_text(text)
    proc = subprocess.run([sys.executable, "-m", "hloref", "run", str(path), "--seed", "0"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    # hloref run verifies first: the verifier's message names the instruction
    assert "Traceback" not in proc.stderr and "instruction %p" in proc.stderr and \
        f"parameter number {number} is out of range" in proc.stderr, proc.stderr


def test_iota_with_a_zero_dimension_allocates_nothing():
    text = "HloModule t\nENTRY t {\n  ROOT i = f32[1000000000000, 0] iota(), iota_dimension=0\n}\n"
    out = hloref.evaluate(text)
    assert out.shape == (1000000000000, 0) and out.dtype == np.float32


FIXED_POINT_WHILE = """HloModule m
loop_body {
  p = (u32[], f32[1]) parameter(0)
  t0 = u32[] get-tuple-element(p), index=0
  t1 = f32[1] get-tuple-element(p), index=1
  add0 = f32[1] add(t1, t1)
  ROOT _ = (u32[],f32[1]) tuple(t0,t1)
}
loop_cond {
  p1 = (u32[], f32[1]) parameter(0)
  count = u32[] get-tuple-element(p1), index=0
  ub = u32[] constant(2)
  ROOT _ = pred[] compare(count, ub), direction=LT
}
ENTRY main {
  p2 = f32[1] parameter(0)
  ind = u32[] constant(1)
  t = (u32[],f32[1]) tuple(ind,p2)
  w = (u32[],f32[1]) while(t), body=loop_body, condition=loop_cond
  ROOT _ = f32[1] get-tuple-element(w), index=1
}
"""


def test_while_whose_body_returns_its_state_is_reported_at_once():
    """gpu_latency_hiding_scheduler_test.cc:296: the counter is never incremented, so
    1 < 2 holds forever; reported after one iteration, not after the limit."""
    limits = hloref.Limits(max_while_iterations=10**9)
    with pytest.raises(HloEvalError, match="does not terminate"):
        hloref.evaluate(FIXED_POINT_WHILE, np.ones(1, np.float32), limits=limits)
    # The same loop counting up terminates after one iteration (by hand: count 1 -> 2).
    counting = FIXED_POINT_WHILE.replace(
        "ROOT _ = (u32[],f32[1]) tuple(t0,t1)",
        "one = u32[] constant(1)\n  t2 = u32[] add(t0, one)\n  ROOT _ = (u32[],f32[1]) tuple(t2,add0)")
    np.testing.assert_array_equal(hloref.evaluate(counting, np.ones(1, np.float32)), [2.0])


FLAG_WHILE = """HloModule module
while_cond {
  p0 = (f32[3], f32[3], pred[]) parameter(0)
  ROOT gte = pred[] get-tuple-element(p0), index=2
}
while_body {
  p0 = (f32[3], f32[3], pred[]) parameter(0)
  gte0 = f32[3] get-tuple-element(p0), index=0
  gte1 = f32[3] get-tuple-element(p0), index=1
  gte2 = pred[] get-tuple-element(p0), index=2
  add = f32[3] add(gte0, gte1)
  ROOT tuple = (f32[3], f32[3], pred[]) tuple(add, gte1, gte2)
}
ENTRY entry {
  p0 = f32[3] parameter(0)
  p1 = pred[] parameter(1)
  tuple = (f32[3], f32[3], pred[]) tuple(p0, p0, p1)
  while = (f32[3], f32[3], pred[]) while(tuple), condition=while_cond, body=while_body
  ROOT gte = f32[3] get-tuple-element(while), index=0
}
"""


def test_while_whose_condition_reads_only_a_passed_through_flag():
    """memory_space_assignment_test.cc:7175: the condition reads a pred the body passes
    through; another element changes every iteration. With the flag true the loop never
    ends (reported at once, not after 2M slow iterations); false: no iteration, p0."""
    x = np.array([1, 2, 3], np.float32)
    limits = hloref.Limits(max_while_iterations=10**9)
    with pytest.raises(HloEvalError, match="does not terminate"):
        hloref.evaluate(FLAG_WHILE, x, np.bool_(True), limits=limits)
    np.testing.assert_array_equal(hloref.evaluate(FLAG_WHILE, x, np.bool_(False)), x)


def test_while_with_runtime_sizes_is_checked_the_same_way():
    """The same loop on a bounded dynamic operand (the interpreter tracks runtime sizes,
    so the while runs through its runtime-size path): reported at once as well; with the
    flag false the result is the operand cut to its runtime size (2, by hand)."""
    text = FLAG_WHILE.replace("f32[3]", "f32[<=3]").replace(
        "  p0 = f32[<=3] parameter(0)\n",
        "  a = f32[3] parameter(0)\n  two = s32[] constant(2)\n"
        "  p0 = f32[<=3] set-dimension-size(a, two), dimensions={0}\n")
    x = np.array([1, 2, 3], np.float32)
    limits = hloref.Limits(max_while_iterations=10**9)
    with pytest.raises(HloEvalError, match="does not terminate"):
        hloref.evaluate(text, x, np.bool_(True), limits=limits)
    np.testing.assert_array_equal(hloref.evaluate(text, x, np.bool_(False)), x[:2])


COUNTER_PLUS = """HloModule m
cond {
  s = (s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  two = s32[] constant(2)
  ROOT lt = pred[] compare(i, two), direction=LT
}
body {
  s = (s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  j = s32[] get-tuple-element(s), index=1
  step = s32[] constant(STEP)
  i2 = s32[] add(i, step)
  one = s32[] constant(1)
  j2 = s32[] add(j, one)
  ROOT t = (s32[], s32[]) tuple(i2, j2)
}
ENTRY e {
  zero = s32[] constant(0)
  init = (s32[], s32[]) tuple(zero, zero)
  ROOT w = (s32[], s32[]) while(init), condition=cond, body=body
}
"""


def test_a_counter_plus_zero_never_terminates():
    # sharding_propagation_test.cc:11303 in miniature: the counter the condition reads is
    # recomputed from itself alone (i + 0), equal every time: no value by the written
    # semantics, reported at once instead of after Limits.max_while_iterations
    with pytest.raises(HloEvalError, match="does not terminate"):
        hloref.evaluate(COUNTER_PLUS.replace("STEP", "0"))
    # by hand: i = 0, 1, 2 (two iterations), j counts them
    assert [int(v) for v in hloref.evaluate(COUNTER_PLUS.replace("STEP", "1"))] == [2, 2]


def test_an_equal_counter_computed_from_another_part_is_not_endless():
    # i advances only once j reaches 3 (i + (j >= 3)): i is equal for three iterations,
    # but the body computes it from j too, so equal contents prove nothing
    text = COUNTER_PLUS.replace("""  step = s32[] constant(STEP)
  i2 = s32[] add(i, step)""", """  three = s32[] constant(3)
  ge = pred[] compare(j, three), direction=GE
  step = s32[] convert(ge)
  i2 = s32[] add(i, step)""")
    # by hand: (i, j) = (0,0) (0,1) (0,2) (0,3) (1,4) (2,5)
    assert [int(v) for v in hloref.evaluate(text)] == [2, 5]
