"""Every ``examples/*.hlo`` module end to end on backend="gpu" against backend="cpu"."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import hloref
from hloref.fuzz.compare import compare_values

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.hlo"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example(path):
    m = hloref.parse(path.read_text())
    rng = np.random.default_rng(7)
    args = [rng.standard_normal(p.shape.dims).astype(p.shape.element_type.dtype)
            for p in m.entry.parameters]
    cpu = hloref.evaluate(m, *args)
    gpu = hloref.evaluate(m, *args, backend="gpu")
    verdict = compare_values(gpu, cpu, opcode="dot", atol=1e-5)
    assert verdict.ok, str(verdict)
    assert not hloref.gpu.last_report, str(hloref.gpu.last_report)
