"""Plans shared across evaluations of one module object (``evaluator/plan_cache.py``):
a module edited in place is planned again, interpreters do not share their bindings,
and ``op_overrides`` get their own plans. Values are checked against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import hloref
from hloref.attrs import ComputationRef
from hloref.evaluator.interpreter import Interpreter
from hloref.ir import Instruction

TEXT = """HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
mul {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] multiply(a, b)
}
ENTRY e {
  x = f32[3] parameter(0)
  y = f32[3] parameter(1)
  s = f32[3] add(x, y)
  d = f32[3] subtract(x, y)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(s, z), dimensions={0}, to_apply=add
}"""

X = np.array([1.5, -2.0, 4.0], np.float32)
Y = np.array([0.5, 3.0, -1.0], np.float32)


def test_root_and_operands_rewired_in_place_are_planned_again():
    m = hloref.parse(TEXT)
    assert hloref.evaluate(m, X, Y) == np.float32(np.sum(X + Y))
    entry = m.entry
    d = entry.instruction("d")
    r = entry.instruction("r")
    r.operands = [d, r.operands[1]]  # as fuzz/reduce.py rewires operands
    assert hloref.evaluate(m, X, Y) == np.float32(np.sum(X - Y))
    entry.root = d  # and roots
    np.testing.assert_array_equal(hloref.evaluate(m, X, Y), X - Y)


def test_instruction_replaced_and_attribute_changed_in_place():
    m = hloref.parse(TEXT)
    hloref.evaluate(m, X, Y)
    entry = m.entry
    s = entry.instruction("s")
    mul = Instruction(name="p", opcode="multiply", shape=s.shape, operands=list(s.operands))
    entry.instructions[entry.instructions.index(s)] = mul
    r = entry.instruction("r")
    r.operands = [mul, r.operands[1]]
    assert hloref.evaluate(m, X, Y) == np.float32(np.sum((X * Y).astype(np.float64)))
    r.attrs["to_apply"] = ComputationRef("mul")  # the reducer swapped; the init must be 1
    z = entry.instruction("z")
    z.literal = np.array(1, np.float32)
    assert hloref.evaluate(m, X, Y) == np.float32(np.prod((X * Y).astype(np.float64)))


def test_interpreters_keep_their_own_bindings():
    """The reduce's called computation is bound to each interpreter: values observed by
    one interpreter's observer are its own evaluation's."""
    m = hloref.parse(TEXT)
    seen: list[list] = [[], []]
    for k in range(2):
        interp = Interpreter(m, observer=lambda c, i, v, k=k: seen[k].append((c.name, i.name)))
        interp.run([X, Y])
    assert seen[0] == seen[1]
    assert ("e", "r") in seen[0]


def test_op_overrides_get_their_own_plan():
    """``accumulate="native"`` sums an f32 dot in f32 (BLAS sgemm); the plain plan sums
    in f64. Both orders are checked against numpy on values where they differ."""
    text = """HloModule m
ENTRY e {
  a = f32[1,4096] parameter(0)
  b = f32[4096,1] parameter(1)
  ROOT d = f32[1,1] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"""
    m = hloref.parse(text)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((1, 4096)).astype(np.float32)
    b = rng.standard_normal((4096, 1)).astype(np.float32)
    wide = np.float32(a.astype(np.float64) @ b.astype(np.float64))
    assert (a @ b)[0, 0] != wide[0, 0]  # the two accumulations differ on these values
    np.testing.assert_array_equal(hloref.evaluate(m, a, b), wide)
    native = Interpreter(m, op_overrides={"dot": {"accumulate": "native"}}).run([a, b])
    np.testing.assert_array_equal(native, a @ b)
    np.testing.assert_array_equal(hloref.evaluate(m, a, b), wide)


def test_the_cache_does_not_keep_an_interpreter_alive():
    """The first interpreter's plan (its reduce bound to it, with its observer) is the
    one cached; the cached copy must not hold that interpreter or what it observed."""
    import gc
    import weakref
    m = hloref.parse(TEXT)
    recorded: list = []
    interp = Interpreter(m, observer=lambda c, i, v: recorded.append(v))
    assert interp.run([X, Y]) == np.float32(np.sum(X + Y))
    gone = weakref.ref(interp)
    del interp
    gc.collect()
    assert gone() is None
    assert hloref.evaluate(m, X, Y) == np.float32(np.sum(X + Y))  # the cache still serves


def test_a_called_computation_edited_in_place_is_recognised_again():
    """The reducer's kind is remembered for the module (``Interpreter.fact``): its root
    turned into ``maximum`` in place makes the reduce a maximum."""
    m = hloref.parse(TEXT)
    assert hloref.evaluate(m, X, Y) == np.float32(np.sum(X + Y))
    m.computations["add"].root.opcode = "maximum"
    assert hloref.evaluate(m, X, Y) == np.float32(max(0.0, np.max(X + Y)))


def test_the_cache_does_not_keep_a_module_alive():
    import gc
    import weakref
    m = hloref.parse(TEXT)
    assert hloref.evaluate(m, X, Y) == np.float32(np.sum(X + Y))
    gone = weakref.ref(m)
    del m
    gc.collect()
    assert gone() is None


def test_compiled_module_evaluates_like_evaluate():
    """``hloref.compile``: the value of ``sum(x + y)`` (numpy's, in f64 rounded once),
    for arrays (its own path) and for lists (``evaluate``'s general path); after an
    edit in place, compiling again gives the edited module's value."""
    m = hloref.parse(TEXT)
    compiled = hloref.compile(m)
    want = np.float32(np.sum((X + Y).astype(np.float64)))
    assert compiled(X, Y) == want
    assert compiled(X.tolist(), Y.tolist()) == want
    with pytest.raises(hloref.HloEvalError, match="takes 2 arguments, got 1"):
        compiled(X)
    r = m.entry.instruction("r")
    r.operands = [m.entry.instruction("d"), r.operands[1]]
    assert hloref.compile(m)(X, Y) == np.float32(np.sum((X - Y).astype(np.float64)))
