"""The stored findings (``findings/xla-cpu-jaxlib-0.10.2``, ``findings/tf-2.21``, and those
under ``findings/known-upstream/``) as the
reproducer tests read them (test_standalone.py, test_user_program.py): the directories,
each one's module, inputs, expected and actual leaves in the result's element types, and
the findings whose actual value is only partly reproducible."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import hloref
from hloref.cli_common import read_npz
from hloref.fuzz.findings import load_program
from hloref.shapes import flatten_shape

FINDINGS = Path(__file__).resolve().parents[1] / "findings"
DIRS = sorted((d for base in (FINDINGS, FINDINGS / "known-upstream")
               for group in ("xla-cpu-jaxlib-0.10.2", "tf-2.21")
               for d in (base / group).iterdir() if (d / "finding.json").is_file()),
              key=lambda d: (d.parent.name, d.name))
IDS = [f"{d.parent.name}/{d.name}" for d in DIRS]

#: Findings whose stored actual value is not reproducible bit for bit: the reason, and
#: the part of the result leaves that is (compared bit for bit with the stored value).
NONDETERMINISTIC = {
    "fusion-parameter-output-garbage": (
        "the fusion's outputs past their first element are uninitialized memory (the "
        "finding's point)", lambda leaves: [leaves[0], leaves[1][:1]]),
    "sort-s2-not-a-permutation": (
        "the last element varies from run to run (0, -1 or -2 seen: read from outside the "
        "s2 data); the first four, {-2, -1, -2, -2}, are not sorted either",
        lambda leaves: [leaves[0][0, :4]]),
}


@dataclass
class Finding:
    name: str
    oracle: str
    verdict: str
    text: str
    module: object
    inputs: list
    debug_options: dict
    expected: list
    actual: list | None  # None for a crash
    signal: str  # for a crash: the signal it died with ("crash" when not recorded)

    @property
    def part(self):
        entry = NONDETERMINISTIC.get(self.name)
        return entry[1] if entry else None


def _stored(path: Path, dtypes: list) -> list | None:
    """An npz of result leaves, raw bits viewed as the result's element types."""
    if not path.is_file():
        return None
    return [a.view(dt) if a.dtype != dt else a for a, dt in zip(read_npz(str(path)), dtypes)]


def load(d: Path) -> Finding:
    meta = json.loads((d / "finding.json").read_text())
    text = (d / "module.hlo").read_text()
    module, inputs = load_program(str(d))
    dtypes = [np.dtype(s.element_type.dtype) for s in flatten_shape(hloref.parse(text).entry.root.shape)]
    m = re.search(r"\bSIG[A-Z]+\b", meta.get("message") or "")
    return Finding(d.name, meta["oracle"], meta["verdict"], text, module, inputs,
                   meta.get("debug_options") or {}, _stored(d / "expected.npz", dtypes),
                   _stored(d / "actual.npz", dtypes), m.group(0) if m else "crash")
