"""The table of known classes (fuzz/known_classes.py): every record is well formed and
agrees with its stored finding, the docs' table is generated from the records, and the
stated rule, not the table's order, decides between two records that match one case."""

from __future__ import annotations

import json
import random
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from hloref import parse
from hloref.fuzz.stage_table import component_of
from hloref.fuzz.known_classes import (KNOWN_CLASSES, Case, known_class, markdown_table,
                                       matching)
from hloref.fuzz.known_record import KINDS, rank

ROOT = Path(__file__).resolve().parent.parent


def test_every_record_is_well_formed_and_agrees_with_its_stored_finding():
    names = [r.name for r in KNOWN_CLASSES]
    assert len(names) == len(set(names))
    assert {r.kind for r in KNOWN_CLASSES} == set(KINDS)
    for r in KNOWN_CLASSES:
        assert r.reason and r.component and callable(r.predicate), r.name
        assert r.verdicts <= {"mismatch", "crash", "error"}, r.name
        if r.finding is None:
            continue
        stored = ROOT / r.finding
        assert (stored / "module.hlo").is_file(), f"{r.name}: {r.finding} is not stored"
        attribution = json.loads((stored / "finding.json").read_text()).get("attribution", {})
        measured = component_of(attribution.get("stage"), attribution.get("pass"))
        assert measured == r.component, r.name
        threads = json.loads((stored / "upstream.json").read_text()).get("threads", [])
        if r.upstream is not None:
            assert r.upstream in [t["url"] for t in threads], r.name


def test_the_docs_table_of_known_classes_is_generated_from_the_records():
    text = (ROOT / "docs" / "semantics.md").read_text()
    begin, end = "<!-- known-classes:begin -->\n", "<!-- known-classes:end -->"
    assert begin in text and end in text
    table = text.split(begin, 1)[1].split(end, 1)[0]
    assert table == markdown_table(), \
        "docs/semantics.md is stale: paste known_classes.markdown_table() between the markers"
    for r in KNOWN_CLASSES:
        assert f"`{r.name}`" in table


def _localized(opcode, operands, expected, actual, text=""):
    c = SimpleNamespace(opcode=opcode, operands=operands, expected=expected, actual=actual,
                        text=text, computation="e", name="r")
    c.innermost = lambda: c
    return SimpleNamespace(culprit=c, expected=expected, actual=actual)


_CONV = """HloModule m
ENTRY e {
  x = f32[1,1,4] parameter(0)
  k = f32[1,1,2] parameter(1)
  ROOT c = f32[1,1,8] convolution(x, k), window={size=2 pad=1_1 lhs_dilate=2},
    dim_labels=bf0_oi0->bf0
}
"""

_CONV_AND_REDUCE = """HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[1,1,4] parameter(0)
  k = f32[1,1,2] parameter(1)
  c = f32[1,1,5] convolution(x, k), window={size=2 pad=1_1}, dim_labels=bf0_oi0->bf0
  z = f32[] constant(0.5)
  ROOT r = f32[] reduce(c, z), dimensions={0,1,2}, to_apply=add
}
"""

_POWER = """HloModule m
ENTRY e {
  b = s32[2] constant({-1, -1})
  x = s32[2] constant({-3, 2})
  ROOT r = s32[2] power(b, x)
}
"""


def _cases():
    """Cases that two or more records match, with the one the rule picks."""
    inf = np.array([[[np.inf, 1.0]]], np.float32)
    x = np.ones((1, 1, 4), np.float32)
    big = np.array([1e20 + 1e-40j], np.complex64)
    tiny = np.array([1e-40 + 0j], np.complex64)
    power = parse(_POWER)
    power_report = _localized("power", [np.array([-1, -1], np.int32),
                                        np.array([-3, 2], np.int32)],
                              np.array([-1, 1], np.int32), np.array([0, 1], np.int32))
    return [
        # an inf kernel over dilation holes and edge padding: two gaps
        ("conv-dilation-holes-nonfinite",
         Case("mismatch", parse(_CONV), {("e", "x"): x, ("e", "k"): inf})),
        # a non-identity init and a padded inf kernel: the undetermined record first
        ("reduce-non-identity-init",
         Case("mismatch", parse(_CONV_AND_REDUCE), {("e", "x"): x, ("e", "k"): inf})),
        # a huge complex operand holding a subnormal part: complex-special, then ftz
        ("complex-special",
         Case("mismatch", report=_localized("sqrt", [big, tiny], big, big * 2))),
        # an integer power with a negative exponent, folded with base -1: the culprit's
        # class and the folder's; equal specificity, the name decides
        ("int-power", Case("mismatch", power, {}, [], power_report)),
    ]


@pytest.mark.parametrize("want,case", _cases(), ids=[c[0] for c in _cases()])
def test_the_stated_rule_not_the_tables_order_decides(want, case):
    found = matching(case)
    assert len(found) >= 2, [r.name for r in found]  # the rule has something to decide
    assert known_class(case).name == want
    table = list(KNOWN_CLASSES)
    rng = random.Random(28)
    for _ in range(40):
        rng.shuffle(table)
        assert known_class(Case(case.verdict, case.module, case.values, case.args,
                                case.report, case.oracle), table).name == want


def test_the_rule_puts_undetermined_before_gaps_before_xla_differences():
    by_kind = {k: [r for r in KNOWN_CLASSES if r.kind == k] for k in KINDS}
    worst = {k: max(rank(r) for r in rs) for k, rs in by_kind.items()}
    best = {k: min(rank(r) for r in rs) for k, rs in by_kind.items()}
    assert worst["undetermined"] < best["gap"] and worst["gap"] < best["xla-difference"]
