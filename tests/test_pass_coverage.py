"""Pass coverage (``fuzz/pass_coverage.py``), aiming at a pass (``fuzz/pass_patterns.py``)
and type profiles (``fuzz/type_profiles.py``).

The counting is checked on a dump directory written by hand (the pairs derived from
the files' differences) and on XLA's own dump: a pattern the table says a pass
rewrites must show up as that pass changing that opcode when XLA compiles it."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hloref
from hloref.cli import main

pytest.importorskip("jax")

from hloref.fuzz.mutants import Seed, apply_mutation, mutants  # noqa: E402
from hloref.fuzz.mutations import MUTATIONS, MutationContext  # noqa: E402
from hloref.fuzz.pass_coverage import (Coverage, Reach, changed_opcodes, emitters_of,  # noqa: E402
                                       probe, reach_of_dump)
from hloref.fuzz.pass_patterns import (PASS_PATTERNS, UnknownPassError,  # noqa: E402
                                       mutation_weights)
from hloref.fuzz.strategies import modules, random_inputs  # noqa: E402
from hloref.fuzz.type_profiles import TypesError, ops_for_types, parse_types  # noqa: E402
from hloref.fuzz.workers import OracleWorker  # noqa: E402

BEFORE = """HloModule m

ENTRY e {
  a = f32[4]{0} parameter(0)
  z = f32[] constant(0)
  b = f32[4]{0} broadcast(z), dimensions={}
  ROOT s = f32[4]{0} add(a, b)
}
"""
#: algsimp removed the add of zero (and with it the broadcast and constant)
AFTER_ALGSIMP = """HloModule m

ENTRY e {
  ROOT a.1 = f32[4]{0} parameter(0), metadata={op_name="renamed"}
}
"""


def _write(directory, name, text):
    with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
        f.write(text)


def test_pairs_come_from_what_each_pass_changed(tmp_path):
    d = str(tmp_path)
    _write(d, "module_0001.m.before_optimizations.txt", BEFORE)
    _write(d, "module_0001.m.0000.simp.after_pipeline-start.before_algsimp.txt", BEFORE)
    _write(d, "module_0001.m.0001.simp.after_algsimp.before_dce.txt", AFTER_ALGSIMP)
    # a pass that only renamed and re-annotated: no change counted
    _write(d, "module_0001.m.0002.simp.after_renamer.before_pipeline-end.txt",
           AFTER_ALGSIMP.replace("a.1", "a.2").replace("renamed", "again"))
    _write(d, "module_0001.m.cpu_after_optimizations.txt", AFTER_ALGSIMP)
    reach = reach_of_dump(d)
    assert reach.pairs == {("algsimp", "add"), ("algsimp", "broadcast"),
                           ("algsimp", "constant")}
    assert reach.passes == {"algsimp"}


def test_changed_opcodes_sees_layouts_and_moves_into_fusions():
    moved = BEFORE.replace("ENTRY e {", "f {\n  p = f32[4]{0} parameter(0)\n  "
                           "ROOT n = f32[4]{0} negate(p)\n}\n\nENTRY e {")
    assert changed_opcodes(BEFORE, BEFORE.replace("f32[4]{0} add", "f32[4]{0:T(4)} add")) \
        == {"add"}
    assert changed_opcodes(BEFORE, moved) == {"parameter", "negate"}


def test_emitters_are_fusion_kinds_and_thunks_with_types():
    text = """HloModule m

%fused (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %n = f32[4]{0} negate(%p)
}

ENTRY %e (a: f32[4], b: bf16[2,2]) -> (f32[4], bf16[2,2]) {
  %a = f32[4]{0} parameter(0)
  %f = f32[4]{0} fusion(%a), kind=kLoop, calls=%fused
  %b = bf16[2,2]{1,0} parameter(1)
  %d = bf16[2,2]{1,0} dot(%b, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %t = (f32[4]{0}, bf16[2,2]{1,0}) tuple(%f, %d)
}
"""
    assert emitters_of(text) == {("kLoop", "f32"), ("thunk:dot", "bf16")}


def test_coverage_counts_new_pairs_once_and_merges():
    c = Coverage()
    new, _ = c.add(Reach({("algsimp", "add"), ("fusion", "add")}, {("kLoop", "f32")}))
    assert new == {("algsimp", "add"), ("fusion", "add")}
    new, new_e = c.add(Reach({("algsimp", "add"), ("cse", "add")}, {("kLoop", "f32")}))
    assert new == {("cse", "add")} and new_e == set()
    other = Coverage.from_json(c.to_json())
    other.merge(c)
    s = other.summary()
    assert s["passes"] == 3 and s["pass_opcode_pairs"] == 3 and s["probes"] == 4
    assert other.pairs[("algsimp", "add")] == 4
    assert s["programs_per_pass"] == {"algsimp": 4, "fusion": 2, "cse": 2}


@pytest.fixture(scope="module")
def xla():
    w = OracleWorker("xla", timeout=120)
    yield w
    w.close()


def test_xla_dump_of_a_call_shows_the_inliner_and_fusion(xla):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    text = open(os.path.join(root, "examples", "mlp.hlo"), encoding="utf-8").read()
    reach = probe(xla, text, random_inputs(hloref.parse(text), 0))
    # mlp.hlo's relu is a call: XLA inlines it, then fuses the elementwise ops
    assert ("call-inliner", "call") in reach.pairs
    assert ("fusion", "maximum") in reach.pairs
    assert any(e == "f32" for _, e in reach.emitters)


def test_the_table_is_right_about_algsimp_and_copies(xla):
    """``layout_change`` is in algsimp's table for 'If a copy feeds a copy, make it a
    single copy' / copies eliminated: XLA's dump shows algsimp changing the copy."""
    text = ("HloModule m\n\nENTRY e {\n  a = f32[4,6] parameter(0)\n  "
            "n = f32[4,6] negate(a)\n  ROOT c = f32[4,6]{0,1} copy(n)\n}\n")
    found: list = []

    @settings(max_examples=30, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def find_copy(data):
        new, desc = apply_mutation(data.draw, text, "layout_change", MutationContext())
        if desc is None or not desc.endswith(": copy"):
            return
        reach = probe(xla, new, random_inputs(hloref.parse(new), 0))
        assert ("algsimp", "copy") in reach.pairs, desc
        found.append(desc)
    find_copy()
    assert found, "layout_change never inserted a copy"


def test_table_names_real_mutations_and_weights_aim():
    for name, patterns in PASS_PATTERNS.items():
        for p in patterns:
            assert set(p.mutations) <= set(MUTATIONS), (name, p)
            assert p.source.startswith("xla/"), (name, p)
    w = mutation_weights("algsimp")
    assert w["identity_operation"] > w["wrap_in_while"] == 1.0
    with pytest.raises(UnknownPassError, match="known passes"):
        mutation_weights("no-such-pass")


def test_targeting_draws_the_passs_mutations_more_often():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    seeds = [Seed("mlp", open(os.path.join(root, "examples", "mlp.hlo"), encoding="utf-8").read())]

    def first_kinds(weights):
        kinds = []

        @settings(max_examples=40, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(mutants(seeds, max_mutations=1, weights=weights, donors=False))
        def run(m):
            kinds.extend(d.split(":")[0] for d in m.mutations["mutations"])
        run()
        return kinds
    aimed = first_kinds(mutation_weights("call-inliner"))
    plain = first_kinds(None)
    assert aimed.count("wrap_in_call") / max(1, len(aimed)) > \
        plain.count("wrap_in_call") / max(1, len(plain))


def test_mainstream_profile_keeps_programs_to_its_types():
    types = parse_types("mainstream")
    assert types == ("f32", "bf16", "f16", "s32", "pred")
    ops = ops_for_types(None, types)
    assert "fft" not in ops and "rng-bit-generator" not in ops and "dot" in ops

    @settings(max_examples=60, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(modules(ops=ops, element_types=types))
    def check(module):
        for _, i in module.instructions():
            et = getattr(i.shape, "element_type", None)
            if et is not None and et.kind in ("float", "complex"):
                assert et.name in types, (i.name, i.opcode, et.name)
    check()
    with pytest.raises(TypesError, match="expected a profile"):
        parse_types("f33")


def test_cli_rejects_bad_types_and_unknown_target_pass(capsys, tmp_path):
    assert main(["fuzz", "--examples", "1", "--types", "f33", "--out", str(tmp_path)]) == 2
    assert "--types f33" in capsys.readouterr().err
    assert main(["fuzz", "--examples", "1", "--target-pass", "nope", "--out",
                 str(tmp_path)]) == 2
    assert "known passes" in capsys.readouterr().err
