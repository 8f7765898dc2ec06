"""The property a campaign tests, and how its outcomes are classified.

For a module drawn by ``hloref.fuzz.strategies.modules()`` and inputs drawn by
``inputs_for(module)``, hloref and the oracle agree under the comparison policy
(``fuzz/differential.py``: the envelope), or the oracle crashes or hangs (a
finding). ``check_program`` evaluates it and classifies the outcome:

* ``match`` (including differences inside the envelope);
* ``known``: a mismatch whose culprit instruction falls under one of the
  deliberate, documented differences between hloref and XLA:CPU
  (``KNOWN_DIFFERENCES``), or a ``known-gap`` verdict; counted, never reported;
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

__all__ = ["Outcome", "check_program", "known_difference", "KNOWN_DIFFERENCES", "leaves"]


def leaves(value):
    """The arrays of a (nested tuple) value, depth first."""
    from .compare import leaves as paths_and_leaves
    for _path, leaf in paths_and_leaves(value):
        if isinstance(leaf, np.ndarray):
            yield leaf


#: Deliberate differences between hloref and XLA:CPU (jaxlib 0.10.2) that the campaign
#: counts but never reports; see ``tests/hlo_builders.py`` KNOWN_DIFFERENCES and
#: ``docs/semantics.md``. Each entry: (name, description).
KNOWN_DIFFERENCES = {
    "ftz": "XLA:CPU flushes subnormal inputs and results to zero (FTZ/DAZ at run time); "
           "hloref keeps them (the culprit's operands or hloref's result hold subnormals)",
    "popcnt-s4": "XLA:CPU counts the 8 bits of the sign-extended storage byte of s4",
    "int-power": "XLA:CPU's integer power looks at the low 6 bits of the exponent only",
    "complex-special": "XLA:CPU's complex functions do not follow C99 Annex G for inf/NaN "
                       "components and overflow for huge magnitudes",
    "accumulation-overflow": "an accumulating op (dot, convolution, reduce) whose terms "
                             "overflow the element type: hloref accumulates in f64 and rounds "
                             "once (inf), XLA accumulates in the type (inf - inf = NaN); the "
                             "accumulation precision is implementation-defined",
    "complex-normwise": "a complex result whose error is within the ULP budget of its "
                        "magnitude |z| but not of one tiny component (XLA:CPU's complex "
                        "functions are accurate normwise, the policy compares componentwise)",
}

_ACCUMULATING = frozenset({"dot", "convolution", "reduce", "reduce-window", "batch-norm-training",
                           "batch-norm-inference", "batch-norm-grad", "select-and-scatter"})


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


def _has_subnormal(value) -> bool:
    from hloref.types import from_dtype
    for leaf in leaves(value):
        try:
            et = from_dtype(leaf.dtype)
        except KeyError:
            continue
        if not (et.is_float or et.is_complex) or leaf.size == 0:
            continue
        parts = [leaf] if et.is_float else [np.real(leaf), np.imag(leaf)]
        fmt = et.float_format if et.is_float else from_dtype(np.real(leaf).dtype).float_format
        tiny = 2.0 ** (1 - fmt.bias)
        for p in parts:
            a = np.abs(p.astype(np.float64))
            if np.any((a > 0) & (a < tiny)):
                return True
    return False


def known_difference(report) -> str | None:
    """The ``KNOWN_DIFFERENCES`` key that explains a mismatch, or ``None``."""
    culprit = report.culprit.innermost() if getattr(report, "culprit", None) else None
    if culprit is None:
        # unlocalized: subnormals anywhere in hloref's values explain it as FTZ
        if _has_subnormal(report.expected) or _has_subnormal(report.actual):
            return "ftz"
        return None
    ops = culprit.operands
    if any(_has_subnormal(o) for o in ops) or _has_subnormal(culprit.expected) \
            or _has_subnormal(culprit.actual):
        return "ftz"
    arrays = [x for o in ops for x in leaves(o)]
    if culprit.opcode == "popcnt" and arrays and arrays[0].dtype.name == "int4":
        return "popcnt-s4"
    if culprit.opcode == "power" and len(arrays) == 2 and arrays[1].dtype.kind in "iu":
        e = arrays[1].astype(np.int64)
        if np.any(e >= 64) or np.any(e < 0):
            return "int-power"
    if culprit.opcode in _ACCUMULATING and all(np.all(np.isfinite(x)) for x in arrays
                                                if x.dtype.kind in "fc" or x.dtype.kind == "V"):
        nonfinite = [x for x in list(leaves(culprit.expected)) + list(leaves(culprit.actual))
                     if x.dtype.kind not in "biu" and not np.all(np.isfinite(
                         x.astype(np.complex128) if x.dtype.kind == "c" else
                         x.astype(np.float64)))]
        if nonfinite:
            return "accumulation-overflow"
    if _complex_normwise_ok(culprit):
        return "complex-normwise"
    if any(x.dtype.kind == "c" for x in arrays):
        for x in arrays:
            if x.dtype.kind == "c" and x.size and (
                    not np.all(np.isfinite(x)) or np.max(np.abs(x)) > 1e15):
                return "complex-special"
    return None


def _complex_normwise_ok(culprit) -> bool:
    """Complex results that agree within the budget measured against |z|."""
    from .compare import tolerance_for, ulp_of
    from hloref.types import from_dtype
    exp, act = list(leaves(culprit.expected)), list(leaves(culprit.actual))
    if not exp or len(exp) != len(act) or not any(e.dtype.kind == "c" for e in exp):
        return False
    for e, a in zip(exp, act):
        if e.dtype.kind != "c":
            continue
        et = from_dtype(e.dtype)
        comp = from_dtype(np.real(e).dtype)
        e128, a128 = e.astype(np.complex128), a.astype(np.complex128)
        if not (np.all(np.isfinite(e128)) and np.all(np.isfinite(a128))):
            return False
        tol = tolerance_for(et, culprit.opcode)
        allowed = (tol.ulps + 1) * ulp_of(np.abs(e128), comp)
        if np.any(np.abs(e128 - a128) > allowed):
            return False
    return True


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
    if v == "known-gap":  # a documented implementation-defined difference (compare.KNOWN_GAPS)
        return Outcome("known", v, report, known=report.known_gap, score=score)
    if v in ("error", "unsupported"):
        return Outcome("rejected", v, report, message=report.message)
    if v == "mismatch":
        known = known_difference(report)
        if known:
            return Outcome("known", v, report, known=known, score=score)
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


