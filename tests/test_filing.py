"""Every stored finding is fileable as it stands (issue 27's report fields): a measured
component, an upstream status with its evidence, a reproducer that needs only jax/jaxlib
or TensorFlow, a user-API program or the reason there is none, the expected value with
its derivation, the actual value or the crash, versions, debug options and the host's
CPU. The reproducers themselves are run by test_standalone.py and test_user_program.py;
the stages are pinned by test_stages.py."""

from __future__ import annotations

import json
import os

import pytest

from hloref.fuzz.archive import KNOWN_STATUSES, finding_paths, index_page
from hloref.fuzz.filing import render

ROOT = os.path.join(os.path.dirname(__file__), "..", "findings")
DIRS = finding_paths([ROOT])
IDS = [os.path.relpath(d, ROOT) for d in DIRS]
STATUSES = {"none-found", "related-only"} | KNOWN_STATUSES


def _json(d, name):
    with open(os.path.join(d, name), encoding="utf-8") as f:
        return json.load(f)


def test_the_archive_holds_the_stored_findings():
    assert len(DIRS) == 30
    assert not any("retired" in d for d in DIRS)


@pytest.mark.parametrize("d", DIRS, ids=IDS)
def test_every_field_of_the_report(d):
    meta = _json(d, "finding.json")
    a = meta["attribution"]
    assert a["stage"], f"no stage measured: {a['steps']}"
    assert meta["root_key"]
    assert meta["reproducer"]["reproduces"], meta["reproducer"]
    assert os.path.exists(os.path.join(d, "repro.py"))
    prog = meta["user_program"]
    assert prog["reproduces"] is True or prog["reason"] or prog.get("message")
    text = render(d, "github")
    for field in ("**Component:**", "**Upstream:**", "## Reproducer (", "## From the user API",
                  "## Expected", "## Actual", "## Where along XLA's chain (measured)",
                  "- versions: ", "- debug options: ", "- host CPU: "):
        assert field in text, field
    assert "Derivation" in text or "By hand" in text or "Why this is a bug" in text \
        or "Expected, by hand" in text
    if meta["verdict"] == "crash":
        assert a["fatal"] or a["signal"], "a crash names its CHECK line or signal"
    md = render(d, "md")
    assert "<details>" not in md and "## Expected" in md
    assert json.loads(render(d, "json"))["upstream"]["status"] in STATUSES


@pytest.mark.parametrize("d", DIRS, ids=IDS)
def test_every_finding_has_an_upstream_status_with_its_evidence(d):
    up = _json(d, "upstream.json")
    assert up["status"] in STATUSES
    assert len(up["queries"]) >= 3, "the queries tried are the evidence of 'none found'"
    if up["status"] in KNOWN_STATUSES:
        assert any(t["relation"] in ("same-bug", "fix") for t in up["threads"])
        assert "known-upstream" in d, "a finding known upstream lives in known-upstream/"
    else:
        assert "known-upstream" not in d


def test_the_readme_is_the_generated_index():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        assert f.read() == index_page([ROOT], ROOT)
