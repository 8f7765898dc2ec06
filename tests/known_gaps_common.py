"""What the known-difference tests (tests/test_known_gaps*.py) share: the
XLA:CPU worker and check fixtures, hand-built reports, and constants."""

from __future__ import annotations

from types import SimpleNamespace

import pytest


@pytest.fixture(scope="module")
def worker():
    """One XLA:CPU oracle worker for the module's tests against XLA (it restarts itself
    after a crash)."""
    pytest.importorskip("jax")
    from hloref.fuzz.workers import OracleWorker
    with OracleWorker("xla") as w:
        yield w


@pytest.fixture(scope="module")
def xla(worker):
    """The campaign's check of a program (text, args) on that worker."""
    from hloref.fuzz.property import check_program
    return lambda text, args: check_program(text, args, worker)


def localized(opcode, operands, expected, actual):
    c = SimpleNamespace(opcode=opcode, operands=operands, expected=expected, actual=actual)
    c.innermost = lambda: c
    return SimpleNamespace(culprit=c, expected=expected, actual=actual)
