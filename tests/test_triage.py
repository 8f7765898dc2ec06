"""From a failing program to a filed finding (fuzz/triage.py): the contract, dedup by
root cause, findings known upstream. XLA:CPU is the oracle; the stored findings' values
are checked by hand in test_findings.py."""

from __future__ import annotations

import json
import os

import pytest

import hloref
from hloref.fuzz.differential import diff
from hloref.fuzz.findings import finding_dirs, load_program
from hloref.fuzz.triage import contract_variant, reduce_and_write, write_outside_contract

pytest.importorskip("jax")

KNOWN = os.path.join(os.path.dirname(__file__), "..", "findings", "known-upstream",
                     "xla-cpu-jaxlib-0.10.2")


@pytest.fixture(scope="module")
def worker():
    from hloref.fuzz.workers import OracleWorker
    w = OracleWorker("xla")
    yield w
    w.close()


def test_an_in_contract_variant_replaces_signed_overflow(worker):
    """s4 -8 + -8 overflows (undefined for XLA's maintainers); the u4 module on the same
    bits wraps by definition, and XLA:CPU still returns the unwrapped sum (24 for
    8 + 8 + 8 where u4 wraps 8 + 8 to 0): the variant is the finding to file."""
    module, args = load_program(os.path.join(KNOWN, "s4-add-does-not-wrap"))

    def fails(m, a):
        return diff(m, a, oracle="xla", worker=worker).verdict == "mismatch"

    outside = contract_variant(module, args, fails)
    assert any("signed-overflow" in b for b in outside["breaches"])
    variant, vargs = outside["variant"]
    assert "u4[" in variant.to_text() and "s4[" not in variant.to_text()
    assert fails(variant, vargs)


def test_a_failure_only_outside_the_contract_is_not_filed(tmp_path):
    """When the in-contract variant does not fail (here by construction: the judge says
    so), the program is kept under outside-contract/ and no finding is written."""
    module, args = load_program(os.path.join(KNOWN, "s4-add-does-not-wrap"))
    outside = contract_variant(module, args, lambda m, a: False)
    assert outside["variant"] is None and outside["breaches"]

    class Report:
        verdict = "mismatch"
    path = write_outside_contract(str(tmp_path), module, args, Report(), outside)
    assert os.path.isdir(path) and "outside-contract" in path
    assert finding_dirs(str(tmp_path)) == []
    with open(os.path.join(path, "meta.json"), encoding="utf-8") as f:
        assert "signed-overflow" in json.dumps(json.load(f))


CLZ = ("HloModule m\nENTRY e {{\n  c = {t}[] constant(-3)\n"
       "  ROOT z = {t}[] count-leading-zeros(c)\n}}\n")


def _reduce(worker, text, out, monkeypatch, archive):
    monkeypatch.setenv("HLOREF_FINDINGS", str(archive))
    module = hloref.parse(text)
    report = diff(module, [], oracle="xla", worker=worker)
    # XLA:CPU's constant folder counts clz of -3 outside the type's width (by hand: 0)
    assert report.verdict == "mismatch"
    return reduce_and_write(module, [], report, worker, str(out), write_report=False)


def test_one_root_cause_is_one_finding_with_variants(worker, tmp_path, monkeypatch):
    empty = tmp_path / "archive"
    empty.mkdir()
    first, _, new = _reduce(worker, CLZ.format(t="s8"), tmp_path / "out", monkeypatch, empty)
    assert new
    with open(os.path.join(first, "finding.json"), encoding="utf-8") as f:
        meta = json.load(f)
    assert meta["attribution"]["stage"] == "hlo-pass"
    assert meta["attribution"]["pass"] == "constant_folding"
    second, _, new = _reduce(worker, CLZ.format(t="s16"), tmp_path / "out", monkeypatch, empty)
    assert not new and second == first
    with open(os.path.join(first, "finding.json"), encoding="utf-8") as f:
        assert json.load(f)["variants"][0]["element_types"] == ["s16"]
    assert len(finding_dirs(str(tmp_path / "out"))) == 1


def test_a_root_cause_known_upstream_is_counted_not_filed(worker, tmp_path, monkeypatch):
    archive = os.path.join(os.path.dirname(__file__), "..", "findings")
    path, _, new = _reduce(worker, CLZ.format(t="s32"), tmp_path / "out", monkeypatch, archive)
    assert not new and path.startswith("known-upstream:")
    assert finding_dirs(str(tmp_path / "out")) == []
