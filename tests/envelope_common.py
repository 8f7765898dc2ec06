"""What the envelope tests (tests/test_envelope*.py) share: the XLA:CPU worker
fixture, the envelope of a module, and module texts used by more than one file."""

from __future__ import annotations

import pytest

from hloref.fuzz.workers import OracleWorker


ADD = "add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }\n"


@pytest.fixture(scope="module")
def worker():
    with OracleWorker("xla") as w:
        yield w
