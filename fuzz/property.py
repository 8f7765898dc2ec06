"""The property a campaign tests, and how its outcomes are classified.

For a module drawn by ``hloref.fuzz.strategies.modules()`` and inputs drawn by
``inputs_for(module)``, hloref and the oracle agree under the comparison policy
(``fuzz/differential.py``: the envelope), or the oracle crashes or hangs (a
finding). ``check_program`` evaluates it and classifies the outcome:

* ``match`` (including differences inside the envelope);
* ``known``: a mismatch or a crash that a known XLA difference explains, a
  ``known-gap`` verdict, or an ``undetermined`` one (the module and inputs determine no
  single value: such programs are skipped), each named by its ``known_classes``
  record, which ``diff`` checked once; counted, never reported;
* ``finding``: mismatch, crash or timeout (``fuzz/findings.py`` reduces,
  deduplicates and writes it);
* ``rejected``: the oracle or hloref refused the module (``error``/``unsupported``
  verdicts: generator/oracle limits, counted by message).

``fuzz_one_input(buffer)`` runs the property on one byte string (HypoFuzz, Atheris:
``atheris.Setup(sys.argv, fuzz_one_input)``); it raises ``AssertionError`` on a
finding that is not a known difference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .known_classes import KNOWN_DIFFERENCES  # the catalogue
from .known_classes import known_difference as _classified

__all__ = ["Outcome", "check_program", "known_difference", "KNOWN_DIFFERENCES", "leaves"]


def known_difference(report) -> str | None:
    """The known XLA difference of a mismatch ``report``: the one ``diff`` found with the
    module at hand (``report.known_difference``), else what the culprit alone shows."""
    return getattr(report, "known_difference", None) or _classified(report)


def leaves(value):
    """The arrays of a (nested tuple) value, depth first."""
    from .compare import leaves as paths_and_leaves
    for _path, leaf in paths_and_leaves(value):
        if isinstance(leaf, np.ndarray):
            yield leaf


# --------------------------------------------------------------------------- the property


@dataclass
class Outcome:
    """What ``check_program`` concluded about one program."""

    kind: str  # match, known, finding, rejected
    verdict: str  # the DiffReport verdict
    report: object = None
    known: str | None = None
    message: str = ""
    score: float = 0.0  # log2(1 + max ulp) of the final comparison, for target()


def check_program(module, args, worker, *, oracle: str = "xla", timeout: float = 60.0,
                  oracle_value=None, localize: bool = True) -> Outcome:
    """Run the property on one program; never raises for a mismatch or a crash.

    ``oracle_value``: the oracle's result already computed (the program's part of a
    batched run); it is judged without running the program again."""
    from .differential import diff
    report = diff(module, args, oracle=oracle, worker=worker, timeout=timeout,
                  oracle_value=oracle_value, localize=localize)
    v = report.verdict
    score = 0.0
    if report.comparison is not None and not report.comparison.ok:
        mu = report.comparison.max_ulp
        score = math.log2(1.0 + (mu if np.isfinite(mu) else 2.0 ** 64))
    if v == "match":
        return Outcome("match", v, report, score=score)
    if v == "known-gap":  # a documented implementation-defined difference (a gap record)
        return Outcome("known", v, report, known=report.known_gap, score=score)
    if v == "undetermined":  # the text determines no single value: skipped
        return Outcome("known", v, report, known=report.undetermined, score=score)
    if v in ("error", "unsupported"):
        return Outcome("rejected", v, report, message=report.message)
    if v in ("mismatch", "crash") and report.known_difference:  # diff's one check
        return Outcome("known", v, report, known=report.known_difference, score=score)
    return Outcome("finding", v, report, message=report.message, score=score)


_PROPERTY_WORKER: dict = {}


def _property_worker():
    if "xla" not in _PROPERTY_WORKER:
        from .workers import OracleWorker
        _PROPERTY_WORKER["xla"] = OracleWorker("xla", timeout=60)
    return _PROPERTY_WORKER["xla"]


def _make_property():
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    from hypothesis import target

    from .strategies import inputs_for, modules

    @settings(deadline=None, suppress_health_check=list(HealthCheck), max_examples=50)
    @given(modules(), st.data())
    def test_hlo_property(module, data):
        """hloref and XLA:CPU agree on generated programs (or XLA crashes: a finding)."""
        args = data.draw(inputs_for(module))
        outcome = check_program(module, args, _property_worker())
        target(outcome.score, label="log2(1 + max ulp error)")
        assert outcome.kind != "finding", outcome.report.summary()

    return test_hlo_property


_PROPERTY: dict = {}


def __getattr__(name: str):
    """``test_hlo_property`` and ``fuzz_one_input(buffer: bytes)`` (the property on one
    input, for HypoFuzz/Atheris), built on first use: building them imports Hypothesis
    and the strategies, which ``hloref run`` should not pay for at start-up."""
    if name not in ("test_hlo_property", "fuzz_one_input"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if not _PROPERTY:
        try:
            prop = _make_property()
            prop.__test__ = False  # run through fuzz_one_input or by hand, not collected
            _PROPERTY.update(test_hlo_property=prop,
                             fuzz_one_input=prop.hypothesis.fuzz_one_input)
        except ImportError:  # pragma: no cover - hypothesis is a test dependency
            _PROPERTY.update(test_hlo_property=None, fuzz_one_input=None)
    return _PROPERTY[name]


