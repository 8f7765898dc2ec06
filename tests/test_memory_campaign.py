"""Campaigns with the memory audit (``hloref fuzz --memory-audit``), against XLA:CPU for
real: a clean campaign audits its programs and finds nothing; a campaign whose real
XLA:CPU assignments are corrupted by a planted bug (each program's output moved onto
entry parameter 0's bytes, which are the caller's and read-only) yields one memory
finding, reduced, with the colliding pair in its report, filed under XLA's buffer
assignment."""

from __future__ import annotations

import json

import pytest

from hloref.cli import main

from memory_plant import memory_findings, plant_output_over_parameter

pytest.importorskip("jax")

from hloref.fuzz import campaign as C  # noqa: E402


def test_clean_campaign_audits_and_finds_nothing(tmp_path, capsys):
    out, summary = tmp_path / "out", tmp_path / "summary.json"
    code = main(["fuzz", "--examples", "4", "--seed", "3", "--batch", "1", "--out", str(out),
                 "--no-blame", "--memory-audit", "--memory-audit-every", "1",
                 "--json-summary", str(summary),
                 "--max-instructions", "6"])
    data = json.loads(summary.read_text())
    m = data["memory_audit"]
    assert m.get("audited", 0) + m.get("skipped", 0) == 4
    assert m.get("audited", 0) >= 2, m
    assert m.get("failed", 0) == 0 and not memory_findings(out), m
    assert code == (1 if data["new_findings"] else 0)
    assert "memory audit: " in capsys.readouterr().out


def test_memory_audit_every_n_and_bad_values(tmp_path):
    out, summary = tmp_path / "out", tmp_path / "summary.json"
    main(["fuzz", "--examples", "8", "--seed", "3", "--batch", "1", "--out", str(out),
          "--no-blame", "--memory-audit", "--json-summary", str(summary),
          "--max-instructions", "6"])
    m = json.loads(summary.read_text())["memory_audit"]
    assert m.get("audited", 0) + m.get("skipped", 0) == 2  # every 4th by default
    assert main(["fuzz", "--examples", "1", "--memory-audit-every", "0",
                 "--memory-audit", "--out", str(out)]) == 2
    assert main(["fuzz", "--examples", "1", "--memory-audit", "--oracle", "tf",
                 "--out", str(out)]) == 2


def test_planted_collision_is_one_reduced_finding_with_the_pair(tmp_path):
    out = tmp_path / "out"
    opts = C.CampaignOptions(out=str(out), seed=5, examples=4, batch=1, ops=["add"],
                             max_instructions=5, blame=False, quiet=True,
                             memory_audit_every=1, memory_corrupt=plant_output_over_parameter)
    summary = C.run_campaign(opts)
    m = summary["memory_audit"]
    assert m.get("failed", 0) >= 1, m
    found = memory_findings(out)
    assert len(found) == 1, found  # every planted failure has one root cause
    d = out / found[0]
    meta = json.loads((d / "finding.json").read_text())
    assert meta["verdict"] == "memory" and meta["memory"]["planted"]
    # XLA:CPU reads the output's operands element by element, so writing over the last
    # read would be a legal in-place reuse, were the bytes not the caller's argument
    assert (meta["memory"]["kind"], meta["memory"]["rule"]) == ("collision", "read-only")
    pair = meta["memory"]["values"]
    assert len(pair) == 2
    optimized = (d / "optimized.hlo").read_text()
    params = [ln.split("=")[0].strip().lstrip("%") for ln in optimized.splitlines()
              if " parameter(0)" in ln and "ENTRY" not in ln]
    assert any(v in params for v in pair), (pair, params)
    report = (d / "report.md").read_text()
    assert all(f"`{v}`" in report for v in pair)
    assert "XLA's buffer assignment" in report and "## What the memory audit found" in report
    assert meta["attribution"]["stage"] == "buffer-assignment" and meta["root_key"]
    # reduced: the smallest program that still fails the same way is one add
    assert meta["instructions"] <= 3, (d / "module.hlo").read_text()
    # the archive's form: hloref report renders it, and the index names the component
    assert main(["report", str(d)]) == 0
    assert main(["report", str(out), "--index", str(tmp_path / "index.md")]) == 0
    assert "buffer assignment" in (tmp_path / "index.md").read_text()


def test_replay_audits_a_memory_finding_again(tmp_path, capsys):
    """A planted finding replayed with the same corruption fails the same way; replayed
    without it (XLA:CPU's real assignment), the audit checks out and the finding is gone;
    ``hloref replay`` says so and why."""
    out = tmp_path / "out"
    opts = C.CampaignOptions(out=str(out), seed=5, examples=4, batch=1, ops=["add"],
                             max_instructions=5, blame=False, quiet=True,
                             memory_audit_every=1, memory_corrupt=plant_output_over_parameter)
    C.run_campaign(opts)
    (name,) = memory_findings(out)
    d = str(out / name)
    (again,) = C.replay([d], memory_corrupt=plant_output_over_parameter)
    assert again["reproduces"] and again["verdict"] == "memory", again
    assert (again["memory"]["kind"], again["memory"]["rule"]) == ("collision", "read-only")
    assert "fails the same way: collision / read-only" in again["message"]
    (real,) = C.replay([d])
    assert not real["reproduces"] and real["verdict"] == "ok", real
    assert "checks out now (stored: collision / read-only, planted" in real["message"]
    assert main(["replay", d]) == 0
    printed = capsys.readouterr().out
    assert "stored memory, now ok: not a bug: the memory audit checks out" in printed
    assert "0 of 1 findings still reproduce" in printed
