"""``while`` (and conditionals holding one) inside computations that ops call on every
element (reducers, comparators, combiners, map bodies): compiled into the device
function as a loop (``gpu/computation.py``), bounded by ``Limits.max_while_iterations``
as on the CPU. Every result is checked against the CPU backend (bit for bit) and by
hand; ``fallback=False`` throughout. (XLA:CPU, jaxlib 0.10.2, aborts compiling a reduce
whose reducer holds a while: "ComputeOutputToInputIndexing is not implemented for
opcode call", then a failed check in computation_partitioner.cc; so no XLA here.)"""

from __future__ import annotations

import numpy as np
import pytest

import hloref
from hloref.errors import HloEvalError, HloLimitError
from hloref.evaluator.interpreter import Limits
from hloref.gpu.computation import compile_computation

from gpu_check import check, module, values

#: a loop adding y to x, |n| times where n = y mod 4 (a data-dependent trip count), as a
#: tuple state (counter, accumulator)
LOOP = """
cond {{
  s = (s32[], {t}[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  z = s32[] constant(0)
  ROOT c = pred[] compare(i, z), direction=GT
}}
body {{
  s = (s32[], {t}[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  a = {t}[] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] subtract(i, one)
  h = {t}[] constant(1)
  b = {t}[] add(a, h)
  ROOT r = (s32[], {t}[]) tuple(j, b)
}}
red {{
  x = {t}[] parameter(0)
  y = {t}[] parameter(1)
  k = s32[] convert(y)
  four = s32[] constant(4)
  n = s32[] remainder(k, four)
  t0 = (s32[], {t}[]) tuple(n, x)
  w = (s32[], {t}[]) while(t0), condition=cond, body=body
  a = {t}[] get-tuple-element(w), index=1
  ROOT s = {t}[] add(a, y)
}}
"""


@pytest.mark.parametrize("t", ["f32", "s32", "bf16", "u8", "f64"])
def test_reduce_with_a_while_in_the_reducer(t):
    text = module([f"{t}[3,5]", f"{t}[]"], "reduce(p0, p1), dimensions={1}, to_apply=red",
                  f"{t}[3]", extra=LOOP.format(t=t))
    x = values(t, (3, 5), kind="small" if t[0] in "su" else "unit")
    if t[0] not in "su":
        x = np.round(x * 8).astype(x.dtype)  # whole numbers: the trip count is exact
    out = check(text, x, np.zeros((), x.dtype), xla=False)
    if t in ("s32", "f32", "f64"):  # by hand: acc + max(y rem 4, 0) + y, in order
        want = []
        for row in x.astype(np.int64):
            acc = 0
            for y in row:
                acc += max(int(np.fmod(y, 4)), 0) + int(y)
            want.append((acc + 2**31) % 2**32 - 2**31 if t == "s32" else acc)  # s32 wraps
        np.testing.assert_array_equal(out.astype(np.int64), want)
    m = hloref.parse(text)
    assert compile_computation(m.computations["red"], m).loops


def test_map_reduce_window_scatter_and_sort_with_a_loop():
    t = "s32"
    extra = LOOP.format(t=t) + """
one_arg {
  x = s32[] parameter(0)
  z = s32[] constant(0)
  ROOT r = s32[] call(x, x), to_apply=red
}
lt {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  c = s32[] call(a, a), to_apply=red
  d = s32[] call(b, b), to_apply=red
  ROOT l = pred[] compare(c, d), direction=LT
}
"""
    x = values(t, (4, 6), kind="small")
    z = np.int32(0)
    check(module(["s32[4,6]"], "map(p0), dimensions={0,1}, to_apply=one_arg", "s32[4,6]",
                 extra=extra), x, xla=False)
    check(module(["s32[4,6]", "s32[]"], "reduce-window(p0, p1), window={size=2x3 stride=1x2}, "
                 "to_apply=red", "s32[3,2]", extra=extra), x, z, xla=False)
    check(module(["s32[4,6]"], "sort(p0), dimensions={1}, is_stable=true, to_apply=lt",
                 "s32[4,6]", extra=extra), x, xla=False)
    idx = np.array([[0], [2], [0], [3]], np.int32)
    upd = values(t, (4, 6), kind="small")
    check(module(["s32[4,6]", "s32[4,1]", "s32[4,6]"],
                 "scatter(p0, p1, p2), update_window_dims={1}, inserted_window_dims={0}, "
                 "scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=red",
                 "s32[4,6]", extra=extra), x, idx, upd, xla=False)


def test_conditional_with_a_loop_runs_only_the_selected_branch():
    """The false branch's loop would never end for the true branch's operands (its
    counter only grows): compiled as an if/else block, it does not run there."""
    extra = """
up_cond { s = s32[] parameter(0)  z = s32[] constant(0)
  ROOT c = pred[] compare(s, z), direction=GT }
up_body { s = s32[] parameter(0)  one = s32[] constant(1)  ROOT r = s32[] add(s, one) }
down_cond { s = s32[] parameter(0)  z = s32[] constant(0)
  ROOT c = pred[] compare(s, z), direction=LT }
down_body { s = s32[] parameter(0)  one = s32[] constant(1)  ROOT r = s32[] add(s, one) }
tb { x = s32[] parameter(0)  ROOT n = s32[] negate(x) }
fb { x = s32[] parameter(0)
  ROOT w = s32[] while(x), condition=down_cond, body=down_body }
grows { x = s32[] parameter(0)
  ROOT w = s32[] while(x), condition=up_cond, body=up_body }
red {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  z = s32[] constant(0)
  p = pred[] compare(b, z), direction=GT
  c = s32[] conditional(p, b, b), true_computation=tb, false_computation=fb
  ROOT s = s32[] add(a, c)
}
"""
    text = module(["s32[7]", "s32[]"], "reduce(p0, p1), dimensions={0}, to_apply=red", "s32[]",
                  extra=extra)
    x = np.array([3, -2, 0, 5, -7, 1, 2], np.int32)
    out = check(text, x, np.int32(0), xla=False)
    assert int(out) == -(3 + 5 + 1 + 2)  # negatives count up to 0, positives negate
    m = hloref.parse(text)
    assert "else:" in compile_computation(m.computations["red"], m).source


def _limit_module():
    extra = """
c { s = s32[] parameter(0)  k = s32[] constant(100)  ROOT p = pred[] compare(s, k), direction=LT }
b { s = s32[] parameter(0)  one = s32[] constant(1)  ROOT r = s32[] add(s, one) }
red { x = s32[] parameter(0)  y = s32[] parameter(1)
  w = s32[] while(y), condition=c, body=b
  ROOT s = s32[] add(x, w) }
"""
    return module(["s32[6]", "s32[]"], "reduce(p0, p1), dimensions={0}, to_apply=red", "s32[]",
                  extra=extra)


def test_loop_limit_is_the_cpus():
    """Limits.max_while_iterations bounds a loop inside a reducer on both backends (a
    trip count of 100 - y: under the limit for large elements, over it for small)."""
    text = _limit_module()
    small = np.array([95, 97, 99, 100, 120, 98], np.int32)
    for backend in ("cpu", "gpu"):
        kw = {"fallback": False} if backend == "gpu" else {}
        out = hloref.evaluate(text, small, np.int32(0), backend=backend,
                              limits=Limits(max_while_iterations=8), **kw)
        assert int(out) == 100 * 5 + 120
    big = small.copy()
    big[2] = 50
    for backend in ("cpu", "gpu"):
        kw = {"fallback": False} if backend == "gpu" else {}
        with pytest.raises(HloLimitError, match="8 iterations"):
            hloref.evaluate(text, big, np.int32(0), backend=backend,
                            limits=Limits(max_while_iterations=8), **kw)
    # the recorded status is cleared: the next evaluation runs normally
    out = hloref.evaluate(text, small, np.int32(0), backend="gpu", fallback=False,
                          limits=Limits(max_while_iterations=8))
    assert int(out) == 100 * 5 + 120


def test_the_loop_named_is_the_first_that_fails_on_both_backends():
    """Two loops in a reducer, both past the limit for every element (trip counts 100 -
    y, then 200 - y): the CPU stops at the first, ``w1``, of element 0. The device's
    threads went on to ``w2`` with the state ``w1`` left and recorded it as well; its
    record was the last loop written (``w2``), now the earliest in program order."""
    extra = """
c1 { s = s32[] parameter(0)  k = s32[] constant(100)  ROOT p = pred[] compare(s, k), direction=LT }
c2 { s = s32[] parameter(0)  k = s32[] constant(200)  ROOT p = pred[] compare(s, k), direction=LT }
b { s = s32[] parameter(0)  one = s32[] constant(1)  ROOT r = s32[] add(s, one) }
red { x = s32[] parameter(0)  y = s32[] parameter(1)
  w1 = s32[] while(y), condition=c1, body=b
  w2 = s32[] while(w1), condition=c2, body=b
  ROOT s = s32[] add(x, w2) }
"""
    text = module(["s32[6]", "s32[]"], "reduce(p0, p1), dimensions={0}, to_apply=red", "s32[]",
                  extra=extra)
    x = np.array([1, 2, 3, 4, 5, 6], np.int32)
    messages = []
    for backend in ("cpu", "gpu"):
        kw = {"fallback": False} if backend == "gpu" else {}
        with pytest.raises(HloLimitError, match="8 iterations") as err:
            hloref.evaluate(text, x, np.int32(0), backend=backend,
                            limits=Limits(max_while_iterations=8), **kw)
        assert "%w1" in str(err.value) and "%w2" not in str(err.value), (backend, err.value)
        messages.append(str(err.value))
    assert messages[0] == messages[1] == (
        "instruction %w1: while loop still running after 8 iterations (condition %c1, "
        "body %b): endless, or it needs a higher limit (Limits.max_while_iterations)")


def test_endless_loop_is_reported_on_both_backends():
    """A body handing back the counter the condition reads unchanged (``i + 0``): the
    CPU proves the loop endless, the device sees its state come back bit for bit."""
    extra = """
c { s = (s32[], f32[]) parameter(0)  i = s32[] get-tuple-element(s), index=0
  k = s32[] constant(3)  ROOT p = pred[] compare(i, k), direction=LT }
b { s = (s32[], f32[]) parameter(0)  i = s32[] get-tuple-element(s), index=0
  a = f32[] get-tuple-element(s), index=1  z = s32[] constant(0)
  j = s32[] add(i, z)  ROOT r = (s32[], f32[]) tuple(j, a) }
red { x = f32[] parameter(0)  y = f32[] parameter(1)
  k = s32[] convert(x)  t = (s32[], f32[]) tuple(k, y)
  w = (s32[], f32[]) while(t), condition=c, body=b
  ROOT a = f32[] get-tuple-element(w), index=1 }
"""
    text = module(["f32[4]", "f32[]"], "reduce(p0, p1), dimensions={0}, to_apply=red", "f32[]",
                  extra=extra)
    x = np.array([5, 6, 1, 7], np.float32)
    for backend in ("cpu", "gpu"):
        kw = {"fallback": False} if backend == "gpu" else {}
        with pytest.raises(HloEvalError, match="does not terminate"):
            hloref.evaluate(text, x, np.float32(0), backend=backend, **kw)


def test_nested_loops_with_complex_and_pred_state():
    """A loop inside a loop body, the state holding c64, pred and s8 (which wraps)."""
    extra = """
ic { s = (s8[], c64[]) parameter(0)  i = s8[] get-tuple-element(s), index=0
  z = s8[] constant(0)  ROOT p = pred[] compare(i, z), direction=GT }
ib { s = (s8[], c64[]) parameter(0)  i = s8[] get-tuple-element(s), index=0
  c = c64[] get-tuple-element(s), index=1  one = s8[] constant(1)  j = s8[] subtract(i, one)
  d = c64[] add(c, c)  ROOT r = (s8[], c64[]) tuple(j, d) }
oc { s = (s8[], c64[], pred[]) parameter(0)  ROOT p = pred[] get-tuple-element(s), index=2 }
ob { s = (s8[], c64[], pred[]) parameter(0)  i = s8[] get-tuple-element(s), index=0
  c = c64[] get-tuple-element(s), index=1  two = s8[] constant(2)
  t = (s8[], c64[]) tuple(two, c)
  w = (s8[], c64[]) while(t), condition=ic, body=ib
  d = c64[] get-tuple-element(w), index=1
  k = s8[] constant(100)  j = s8[] add(i, k)
  z = s8[] constant(0)  more = pred[] compare(j, z), direction=GT
  ROOT r = (s8[], c64[], pred[]) tuple(j, d, more) }
red { x = c64[] parameter(0)  y = c64[] parameter(1)
  i = s8[] constant(1)  t = pred[] constant(true)
  s = (s8[], c64[], pred[]) tuple(i, y, t)
  w = (s8[], c64[], pred[]) while(s), condition=oc, body=ob
  d = c64[] get-tuple-element(w), index=1
  ROOT a = c64[] add(x, d) }
"""
    text = module(["c64[1,5]", "c64[]"], "reduce(p0, p1), dimensions={1}, to_apply=red",
                  "c64[1]", extra=extra)
    x = (values("f32", (1, 5), kind="unit") + 1j * values("f32", (1, 5), kind="unit")) * 0.9
    x = x.astype(np.complex64)
    # the counter 1 -> 101 -> -55 (s8 wraps): two outer runs, each doubling the
    # element twice: acc <- acc + 16 x, in order from 0 (the doublings are exact)
    out = check(text, x, np.complex64(0), xla=False)
    acc = 0j
    for v in x[0]:
        acc = complex(np.complex64(acc + 16 * complex(v)))
    assert complex(out[0]) == acc
