"""Mutations of real programs (``fuzz/mutations.py``, ``fuzz/mutants.py``): every mutant
verifies with hloref and is compiled by XLA; the mutations that claim to keep a
program's value keep XLA's value (XLA against XLA, no hloref evaluation); the strategy
shrinks and replays like any Hypothesis strategy."""

from __future__ import annotations

import glob
import os
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

import hloref

pytest.importorskip("jax")

from hloref.fuzz.mutants import MutantStats, Seed, apply_mutation, mutants  # noqa: E402
from hloref.fuzz.mutations import MUTATIONS, MutationContext  # noqa: E402
from hloref.fuzz.strategies import random_inputs  # noqa: E402
from hloref.fuzz.workers import OracleWorker  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEEDS = [Seed(os.path.basename(p), open(p, encoding="utf-8").read())
         for p in sorted(glob.glob(os.path.join(ROOT, "examples", "*.hlo")))]
#: mutations after which the program computes the same values as before
VALUE_KEEPING = ("layout_change", "wrap_in_call", "wrap_in_conditional", "wrap_in_while")
SETTINGS = settings(max_examples=25, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def xla():
    w = OracleWorker("xla", timeout=120)
    yield w
    w.close()


def _flat(value):
    if isinstance(value, (tuple, list)):
        return [x for v in value for x in _flat(v)]
    return [np.asarray(value)]


def _mutate(data, seed: Seed, name: str, ctx=None):
    ctx = ctx or MutationContext(donors=[hloref.parse(s.text) for s in SEEDS[:2]])
    return apply_mutation(data.draw, seed.text, name, ctx)


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_every_mutant_verifies_and_xla_compiles_it(name, xla):
    applied = []

    @SETTINGS
    @given(st.data())
    def check(data):
        seed = data.draw(st.sampled_from(SEEDS))
        text, desc = _mutate(data, seed, name)
        if desc is None:
            return
        applied.append(desc)
        module = hloref.parse(text, verify=True)  # raises when invalid
        result = xla.run(text, random_inputs(module, 0))
        assert result.ok, f"{name} ({desc}) on {seed.name}: XLA {result.kind}: " \
                          f"{result.message}\n{text}"
    check()
    assert applied, f"{name} never applied to examples/*.hlo"


@pytest.mark.parametrize("name", VALUE_KEEPING)
def test_value_keeping_mutations_keep_xlas_value(name, xla):
    @SETTINGS
    @given(st.data())
    def check(data):
        seed = data.draw(st.sampled_from(SEEDS))
        text, desc = _mutate(data, seed, name)
        if desc is None:
            return
        args = random_inputs(hloref.parse(seed.text), 1)
        before, after = xla.run(seed.text, args), xla.run(text, args)
        assert before.ok and after.ok
        for a, b in zip(_flat(before.value), _flat(after.value)):
            np.testing.assert_allclose(b.astype(np.float64), a.astype(np.float64),
                                       rtol=2e-2, atol=1e-6, equal_nan=True,
                                       err_msg=f"{name}: {desc}")
    check()


def test_retype_changes_the_element_type_of_a_region():
    text = ("HloModule m\n\nENTRY e {\n  a = f32[4] parameter(0)\n  b = f32[4] parameter(1)\n"
            "  c = f32[4] add(a, b)\n  ROOT d = f32[4] multiply(c, c)\n}\n")

    @SETTINGS
    @given(st.data())
    def check(data):
        ctx = MutationContext(types=("bf16",))
        new, desc = apply_mutation(data.draw, text, "retype_subgraph", ctx)
        assert desc is not None
        module = hloref.parse(new, verify=True)
        ops = Counter((i.opcode, i.shape.element_type.name) for i in module.entry.instructions
                      if i.opcode in ("add", "multiply"))
        # the region is computed in bf16, converted in from f32 and back out
        assert ("add", "bf16") in ops or ("multiply", "bf16") in ops
        assert module.entry.root.shape.element_type.name == "f32"
    check()


def test_strategy_draws_valid_mutants_and_records_them():
    stats = MutantStats()

    @SETTINGS
    @given(mutants(SEEDS, max_mutations=3, stats=stats))
    def check(module):
        hloref.parse(module.to_text(), verify=True)
        assert module.mutations["seed"] in {s.name for s in SEEDS}
    check()
    assert sum(stats.applied.values()) > 0


def test_strategy_shrinks_to_the_smallest_seed_unmutated():
    from hypothesis import find
    smallest = find(mutants(SEEDS, max_mutations=3), lambda m: True,
                    settings=settings(database=None, max_examples=20))
    # the pool is ordered by size, smallest first (the index Hypothesis shrinks to)
    assert smallest.mutations["seed"] == min(SEEDS, key=lambda s: len(s.text)).name
    assert min(SEEDS, key=lambda s: len(s.text)).name != SEEDS[0].name
    assert len(smallest.mutations["mutations"]) <= 1


def test_strategy_arguments_are_checked():
    with pytest.raises(InvalidArgument):
        mutants([]).example()
    with pytest.raises(InvalidArgument, match="unknown mutations"):
        mutants(SEEDS, kinds=["no_such"]).example()
