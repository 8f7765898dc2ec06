"""The estimate of the calls hloref makes element by element (``fuzz/mutation_cost.py``),
against counts derived by hand from the operations' semantics: a reduce-window applies
its reducer once per window element of each output element, a reduce once per input
element, a sort's comparator n log2 n times (the estimate's bound), a loop multiplies by
its trips; computations hloref applies to whole arrays (``evaluator/reduce.py``'s
``is_vectorizable``) count nothing. And the mutant strategy drops what is above its
limit; and no mutation makes a loop start its counter elsewhere (a special value there
made a loop of 3 trips run for minutes in hloref)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

import hloref
from hloref.evaluator.reduce import is_vectorizable
from hloref.fuzz.corpus import Seed
from hloref.fuzz.mutants import MutantStats, mutants
from hloref.fuzz.mutation_cost import DEFAULT_TRIPS, instruction_steps, sequential_calls

REDUCERS = """
red {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  s = f32[] add(a, b)
  ROOT r = f32[] broadcast(s), dimensions={}
}

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = pred[] compare(a, b), direction=LT
  ROOT r = pred[] broadcast(c), dimensions={}
}
"""


def _module(entry: str, extra: str = "") -> object:
    return hloref.parse("HloModule m\n" + REDUCERS + extra + "\nENTRY e {\n" + entry + "\n}\n",
                        verify=True)


def test_the_reducers_are_what_the_evaluator_says():
    m = _module("  x = f32[2] parameter(0)\n  ROOT n = f32[2] negate(x)")
    assert not is_vectorizable(m.computation("red"), m)
    assert not is_vectorizable(m.computation("less"), m)
    assert is_vectorizable(m.computation("add"), m)


@pytest.mark.parametrize("entry, calls", [
    # 2 x 6 outputs, a window of 3
    ("  x = f32[2,8] parameter(0)\n  z = f32[] constant(0)\n"
     "  ROOT w = f32[2,6] reduce-window(x, z), window={size=1x3}, to_apply=red", 36),
    # strided: 2 x 3 outputs
    ("  x = f32[2,8] parameter(0)\n  z = f32[] constant(0)\n"
     "  ROOT w = f32[2,3] reduce-window(x, z), window={size=1x3 stride=1x2}, to_apply=red", 18),
    # a vectorizable reducer: whole arrays
    ("  x = f32[2,8] parameter(0)\n  z = f32[] constant(0)\n"
     "  ROOT w = f32[2,6] reduce-window(x, z), window={size=1x3}, to_apply=add", 0),
    # once per input element
    ("  x = f32[2,8] parameter(0)\n  z = f32[] constant(0)\n"
     "  ROOT r = f32[2] reduce(x, z), dimensions={1}, to_apply=red", 16),
    # 8 elements, log2 8 = 3 comparisons each at most
    ("  x = f32[8] parameter(0)\n"
     "  ROOT s = f32[8] sort(x), dimensions={0}, to_apply=less", 24),
])
def test_calls_count_what_the_semantics_apply(entry, calls):
    assert sequential_calls(_module(entry)) == calls


LOOP = """
cond {
  p = (s32[], f32[2,8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}

body {
  p = (s32[], f32[2,8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  x = f32[2,8] get-tuple-element(p), index=1
  z = f32[] constant(0)
  w = f32[2,6] reduce-window(x, z), window={size=1x3}, to_apply=red
  pad0 = f32[] constant(0)
  y = f32[2,8] pad(w, pad0), padding=0_0x1_1
  ROOT t = (s32[], f32[2,8]) tuple(j, y)
}
"""


def test_a_loop_multiplies_by_its_trips():
    entry = ("  x = f32[2,8] parameter(0)\n  zero = s32[] constant(0)\n"
             "  t = (s32[], f32[2,8]) tuple(zero, x)\n"
             "  ROOT l = (s32[], f32[2,8]) while(t), condition=cond, body=body")
    assert sequential_calls(_module(entry, LOOP)) == 5 * 36
    # the entry's 4 instructions, 5 trips of the condition's 4 and the body's 10, 180
    # calls of the reducer's 4
    assert instruction_steps(_module(entry, LOOP)) == 4 + 5 * 4 + 5 * 10 + 180 * 4
    unknown = LOOP.replace("n = s32[] constant(5)", "n = s32[] get-tuple-element(p), index=0")
    assert sequential_calls(_module(entry, unknown)) == DEFAULT_TRIPS * 36


def test_the_strategy_drops_mutants_above_the_limit():
    seed = _module("  x = f32[2,8] parameter(0)\n  z = f32[] constant(0)\n"
                   "  ROOT w = f32[2,6] reduce-window(x, z), window={size=1x3}, to_apply=red")
    stats = MutantStats()
    # a loop of 2 or 3 trips around the reduce-window (72, 108 calls) is dropped, 1 trip kept
    strat = mutants([Seed("rw", seed.to_text())], kinds=["wrap_in_while"], max_mutations=1,
                    stats=stats, max_sequential_calls=40, max_instruction_steps=None)
    seen = []

    @settings(max_examples=30, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(strat)
    def check(m):
        assert sequential_calls(m) <= 40
        seen.append(len(m.mutations["mutations"]))

    check()
    assert stats.too_slow["wrap_in_while"] > 0 and stats.applied["wrap_in_while"] > 0
    assert any(seen)


def test_no_mutation_touches_where_a_loop_counter_starts():
    """Every mutant of a module with a loop of 5 trips, under the mutations that change
    constants and values, still starts its counter at 0 (the loop's trips are the same)."""
    entry = ("  x = f32[2,8] parameter(0)\n  zero = s32[] constant(0)\n"
             "  t = (s32[], f32[2,8]) tuple(zero, x)\n"
             "  ROOT l = (s32[], f32[2,8]) while(t), condition=cond, body=body")
    seed = _module(entry, LOOP.replace("to_apply=red", "to_apply=add"))
    strat = mutants([Seed("loop", seed.to_text())],
                    kinds=["special_constant", "identity_operation", "retype_subgraph"],
                    max_mutations=3, max_instruction_steps=None)

    @settings(max_examples=40, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(strat)
    def check(m):
        (loop,) = [i for _, i in m.instructions() if i.opcode == "while"]
        counter = loop.operands[0].operands[0]
        assert counter.opcode == "constant" and int(counter.literal) == 0, m.to_text()

    check()
