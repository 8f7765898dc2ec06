"""Seeds cut from real programs (``fuzz/seed_cuts.py``) and the mutant chain that parses
each mutant once (``fuzz/mutants.py``): a cut is a sub-program of its seed, instruction
for instruction, XLA compiles and runs it on the seed's own arguments and computes the
value the seed's instruction has there (XLA against XLA, the value read from the
seed's program with that instruction made an extra output by hand; the cut keeps the
parameters it reads, under their names)."""

from __future__ import annotations

import glob
import os
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hloref

pytest.importorskip("jax")

from hloref.fuzz.corpus import Seed  # noqa: E402
from hloref.fuzz.mutants import MutantStats, mutants  # noqa: E402
from hloref.fuzz.seed_cuts import cut_seeds, module_size  # noqa: E402
from hloref.fuzz.strategies import random_inputs  # noqa: E402
from hloref.fuzz.workers import OracleWorker  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: as the corpus holds them: printed by hloref
SEEDS = [Seed(os.path.basename(p), hloref.parse(open(p, encoding="utf-8").read()).to_text())
         for p in sorted(glob.glob(os.path.join(ROOT, "examples", "*.hlo")))]
_LINE = re.compile(r"^\s*(?:ROOT\s+)?(%[\w.\-]+ = .*)$")


@pytest.fixture(scope="module")
def xla():
    w = OracleWorker("xla", timeout=120)
    yield w
    w.close()


def _lines(text: str) -> set:
    return {m.group(1) for m in map(_LINE.match, text.splitlines()) if m}


def _as_output(text: str, name: str) -> str:
    """The seed with instruction ``name`` of its entry as a second output, edited as text:
    ``ROOT r = S op(...)`` becomes ``r = ...`` plus ``ROOT t = (S, T) tuple(r, name)``."""
    module = hloref.parse(text)
    module.attrs.pop("entry_computation_layout", None)  # the result changes
    module.entry.has_signature = False
    lines = module.to_text().splitlines()
    in_entry, out = False, []
    shapes = {i.name: str(i.shape) for i in module.entry.instructions}
    root = None
    for line in lines:
        if line.startswith("ENTRY"):
            in_entry = True
        if in_entry and line.strip().startswith("ROOT"):
            root = re.match(r"^\s*ROOT\s+%?([\w.\-]+)", line).group(1)
            line = line.replace("ROOT ", "", 1)
        if in_entry and line.strip() == "}":
            out.append(f"  ROOT %cut.out = ({shapes[root]}, {shapes[name]}) "
                       f"tuple(%{root}, %{name})")
            in_entry = False
        out.append(line)
    return "\n".join(out) + "\n"


def test_cuts_are_sub_programs_of_their_seed_within_the_size():
    big = [s for s in SEEDS if module_size(hloref.parse(s.text)) > 12]
    assert big, "the examples hold no program above 12 instructions"
    cuts, skipped = cut_seeds(big, max_instructions=12, min_instructions=3)
    assert cuts
    by_name = {s.name: s for s in big}
    for c in cuts:
        seed_name, _, value = c.name.partition("#")
        assert value, f"{c.name}: a cut is named after its value"
        m = hloref.parse(c.text, verify=True)
        assert 3 <= module_size(m) <= 12
        assert m.entry.root.name == value
        # every instruction is the seed's, with the same shape, operands and attributes;
        # the parameters are the seed's that the value reads, renumbered in their order
        seed = hloref.parse(by_name[seed_name].text)
        number = {p.name: p.parameter_number for p in seed.entry.parameters}
        read = {o.name for i in m.entry.instructions for o in i.operands}
        params = m.entry.parameters
        assert [p.parameter_number for p in params] == list(range(len(params)))
        assert [number[p.name] for p in params] == sorted(number[p.name] for p in params)
        assert {p.name for p in params} <= read | {m.entry.root.name}
        renumbered = {re.sub(r"parameter\(\d+\)", f"parameter({number[p.name]})", line)
                      for p in params for line in _lines(c.text)
                      if line.startswith(f"%{p.name} ")}
        others = {line for line in _lines(c.text) if " parameter(" not in line}
        assert (others | renumbered) - _lines(by_name[seed_name].text) <= {
            line for line in others if line.startswith(f"%{value} ")}
        assert _lines(c.text) & _lines(by_name[seed_name].text)
    assert len({c.text for c in cuts}) == len(cuts)
    assert set(skipped) <= set(by_name)


def test_a_small_seed_stays_whole_and_types_filter_cuts():
    small = [s for s in SEEDS if module_size(hloref.parse(s.text)) <= 40]
    kept, _ = cut_seeds(small, max_instructions=40)
    assert [s.text for s in kept] == [s.text for s in small]
    cuts, skipped = cut_seeds(SEEDS, max_instructions=12, min_instructions=3, types=("f32",))
    for c in cuts:
        assert set(re.findall(r"\b(pred|[suf]\d+|bf16)\[", c.text)) <= {"f32"}
    assert skipped


def test_xla_computes_the_seeds_value_on_the_cut(xla):
    cuts, _ = cut_seeds(SEEDS, max_instructions=12, min_instructions=3)
    checked = 0
    for c in cuts:
        seed_name, _, value = c.name.partition("#")
        if not value:  # a seed small enough to stay whole
            continue
        (seed,) = [s for s in SEEDS if s.name == seed_name]
        module = hloref.parse(seed.text, verify=True)
        args = random_inputs(module, 7)
        whole = xla.run(_as_output(seed.text, value), args)
        # the cut's parameters are the seed's it reads, under their names
        by_param = {p.name: a for p, a in zip(module.entry.parameters, args)}
        cut = xla.run(c.text, [by_param[p.name] for p in
                               hloref.parse(c.text).entry.parameters])
        assert whole.ok and cut.ok, (c.name, whole.message, cut.message)
        np.testing.assert_array_equal(np.asarray(cut.value), np.asarray(whole.value[1]),
                                      err_msg=c.name)
        checked += 1
    assert checked >= 3


def test_the_mutant_chain_gives_verified_mutants_it_records():
    """Parsing each mutant once (the verified module starts the next mutation): the drawn
    module verifies, prints as it parses, and carries a record of its mutations, which the
    stats count as applied."""
    stats = MutantStats()
    strat = mutants(SEEDS, max_mutations=4, stats=stats)
    seen = []

    @settings(max_examples=30, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def check(data):
        m = data.draw(strat)
        hloref.parse(m.to_text(), verify=True)
        assert m.to_text() == hloref.parse(m.to_text()).to_text()
        seen.append(len(m.mutations["mutations"]))

    check()
    # (the stats also count mutations of draws Hypothesis abandoned half way)
    assert sum(seen) > 0 and sum(stats.applied.values()) >= sum(seen)
