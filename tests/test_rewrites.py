"""XLA's algebraic rewrites as freedoms of the envelope (fuzz/rewrites.py).

Independent references: XLA:CPU's own results through the oracle (the two false
findings of issue 27 and two more rewrites that change values), and values derived by
hand from IEEE rounding for the narrowness checks."""

from __future__ import annotations

import re

import numpy as np
import pytest

import hloref
from hloref.fuzz.differential import diff
from hloref.fuzz.envelope import Envelope, EnvelopePolicy, Freedoms, sample
from hloref.fuzz.rewrites import REWRITES, matches
from hloref.fuzz.workers import OracleWorker

NO_REWRITES = EnvelopePolicy(freedoms=Freedoms(rewrites=False))

DIVIDE_DIVIDE = """HloModule m
ENTRY e {
  x = f64[] parameter(0)
  d = f64[] divide(x, x)
  ROOT r = f64[] divide(d, x)
}
"""

F16_SHIFT = """HloModule m
ENTRY e {
  x = f16[] parameter(0)
  one = f16[] constant(1)
  c = f16[] constant(6.1035e-05)
  s = f16[] subtract(x, one)
  ROOT r = f16[] add(s, c)
}
"""


@pytest.fixture(scope="module")
def worker():
    with OracleWorker("xla") as w:
        yield w


def test_f64_divide_divide_that_xla_returns_as_zero_is_a_match_naming_the_rewrite(worker):
    # (x/x)/x = 1e-200 as written; XLA's x / (x*x) = 1e200 / inf = 0
    x = np.float64(1e200)
    report = diff(DIVIDE_DIVIDE, [x], worker=worker)
    assert float(report.actual) == 0.0  # XLA:CPU does rewrite it
    assert float(report.expected) == 1e-200
    assert report.verdict == "match", report.summary()
    assert any(r.startswith("divide-divide") for r in report.envelope.rewrites)
    assert "algebraic_simplifier.cc:2610" in report.summary()
    strict = diff(DIVIDE_DIVIDE, [x], worker=worker, policy=NO_REWRITES,
                  oracle_value=report.actual, localize=False)
    assert strict.verdict == "mismatch", strict.summary()


def test_without_the_algebraic_simplifier_xla_keeps_the_written_form_and_so_does_the_envelope(
        worker):
    # the rewrite is the simplifier's: disabled, XLA:CPU returns (x/x)/x = 1e-200, and the
    # envelope drops the freedom, so XLA's rewritten 0 would now be a mismatch
    options = {"xla_disable_hlo_passes": "algsimp"}
    report = diff(DIVIDE_DIVIDE, [np.float64(1e200)], worker=worker, debug_options=options)
    assert float(report.actual) == 1e-200 and report.verdict == "match"
    assert report.policy.freedoms.rewrites is False
    assert EnvelopePolicy().with_debug_options({"xla_disable_hlo_passes": "fusion"}
                                               ).freedoms.rewrites is True
    zero = diff(DIVIDE_DIVIDE, [np.float64(1e200)], worker=worker, debug_options=options,
                oracle_value=np.float64(0.0), localize=False)
    assert zero.verdict == "mismatch", zero.summary()


def test_f16_shift_that_xla_folds_to_x_minus_one_is_a_match_naming_the_rewrite(worker):
    # x = 1 + 2^-10: (x - 1) + 2^-14 = 2^-10 + 2^-14 exactly; XLA folds -1 + 2^-14 in f16,
    # which rounds to -1 (half an f16 ULP below 1 is 2^-12), and returns x - 1 = 2^-10
    x = np.float16(1.0009765625)
    report = diff(F16_SHIFT, [x], worker=worker)
    assert float(report.actual) == 2.0 ** -10
    assert float(report.expected) == 2.0 ** -10 + 2.0 ** -14
    assert report.verdict == "match", report.summary()
    assert any(r.startswith("subtract-constant-add") for r in report.envelope.rewrites)
    strict = diff(F16_SHIFT, [x], worker=worker, policy=NO_REWRITES,
                  oracle_value=report.actual, localize=False)
    assert strict.verdict == "mismatch", strict.summary()


def test_divide_by_a_huge_constant_reads_its_subnormal_reciprocal_as_zero(worker):
    # x / 3e38 = 3.3e-9 as written; XLA's x * (1/3e38) multiplies by 3.3e-39, a
    # subnormal its DAZ reads as 0
    text = """HloModule m
ENTRY e {
  x = f32[] parameter(0)
  c = f32[] constant(3e+38)
  ROOT r = f32[] divide(x, c)
}
"""
    report = diff(text, [np.float32(1e30)], worker=worker)
    assert float(report.actual) == 0.0
    assert report.verdict == "match", report.summary()
    assert any(r.startswith("divide-by-constant") for r in report.envelope.rewrites)


def test_nan_times_a_converted_false_is_zero_on_xla(worker):
    text = """HloModule m
ENTRY e {
  x = f32[2] parameter(0)
  p = pred[2] parameter(1)
  c = f32[2] convert(p)
  ROOT r = f32[2] multiply(x, c)
}
"""
    x = np.array([np.nan, np.inf], np.float32)
    p = np.array([False, False])
    report = diff(text, [x, p], worker=worker)
    assert np.all(np.asarray(report.actual) == 0.0)
    assert report.verdict == "match", report.summary()
    assert any(r.startswith("pred-multiply") for r in report.envelope.rewrites)


def _leaf(text, args, policy):
    module = hloref.parse(text)
    s = sample(module, list(args), policy)
    return Envelope.of(s, policy, module).leaves[()], s


def test_a_module_without_the_pattern_gets_the_same_envelope_and_takes_no_rewrite():
    # (x - y) + c with y a parameter: not XLA's pattern (C1 must be a constant), so the
    # folded x + (c - y) = x - 1 that the f16 rewrite allows stays outside
    text = F16_SHIFT.replace("one = f16[] constant(1)", "one = f16[] parameter(1)")
    x, y = np.float16(1.0009765625), np.float16(1)
    with_, s = _leaf(text, [x, y], EnvelopePolicy())
    without, _ = _leaf(text, [x, y], NO_REWRITES)
    assert not any(s.rewrites)
    assert np.array_equal(with_.lo, without.lo) and np.array_equal(with_.hi, without.hi)
    module = hloref.parse(text)
    env = Envelope.of(sample(module, [x, y]), EnvelopePolicy(), module)
    assert not env.check(np.float16(2.0 ** -10)).ok
    assert env.check(np.float16(2.0 ** -10 + 2.0 ** -14)).ok


def test_divide_divide_with_a_product_far_from_overflow_stays_narrow():
    # (6/2)/6 = 0.5 exactly, and so is 6/(2*6): the rewrite takes effect nowhere (the
    # forms agree), and the envelope is the exact value's
    module = hloref.parse(DIVIDE_DIVIDE.replace("divide(x, x)", "divide(x, y)").replace(
        "x = f64[] parameter(0)", "x = f64[] parameter(0)\n  y = f64[] parameter(1)"))
    s = sample(module, [np.float64(6), np.float64(2)])
    assert not any(s.rewrites) and all(float(v) == 0.5 for v in s.samples)
    env = Envelope.of(s, EnvelopePolicy(), module)
    assert env.check(np.float64(0.5)).ok
    assert not env.check(np.float64(0.5 + 2.0 ** -40)).ok


def test_preconditions_are_xlas():
    # A / sqrt(B) only when the sqrt has one use; (A + C1) + C2 only with constants;
    # A*C + B*C only for a power of two C
    text = """HloModule m
ENTRY e {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  s = f32[] sqrt(b)
  q = f32[] divide(a, s)
  t = f32[] add(s, q)
  c3 = f32[] constant(3)
  c4 = f32[] constant(4)
  m1 = f32[] multiply(a, c3)
  m2 = f32[] multiply(b, c3)
  u = f32[] add(m1, m2)
  m3 = f32[] multiply(a, c4)
  m4 = f32[] multiply(b, c4)
  v = f32[] add(m3, m4)
  w = f32[] add(t, u)
  ROOT r = f32[] add(w, v)
}
"""
    module = hloref.parse(text)
    found = {name: [r.name for r, _ in pairs] for name, pairs in matches(module, module.entry).items()}
    assert "q" not in found  # the sqrt has two users
    assert "u" not in found  # 3 is not a power of two
    assert found.get("v") == ["distribute-power-of-two"]


def test_every_record_cites_its_line_in_the_simplifier():
    names = [r.name for r in REWRITES]
    assert len(names) == len(set(names))
    for r in REWRITES:
        assert re.search(r"algebraic_simplifier\.cc:\d+", r.source), r.name
        assert r.reason and r.pattern[0] and callable(r.form)


def _h(body: str) -> str:
    return "HloModule m\nENTRY e {\n" + body + "\n}\n"


#: name -> (module, inputs): XLA:CPU returns the rewritten form's value, far from the
#: written one (an intermediate overflows, or is NaN, in one form only)
XLA_REWRITES = {
    "log-of-exp": (_h("  x = f32[] parameter(0)\n  e = f32[] exponential(x)\n"
                      "  ROOT r = f32[] log(e)"), [np.float32(89)]),
    "exp-quotient": (_h("  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                        "  ea = f32[] exponential(a)\n  eb = f32[] exponential(b)\n"
                        "  ROOT r = f32[] divide(ea, eb)"), [np.float32(100), np.float32(100)]),
    "divide-by-broadcast": (_h("  a = f32[3] parameter(0)\n  b = f32[] parameter(1)\n"
                               "  bb = f32[3] broadcast(b), dimensions={}\n"
                               "  ROOT r = f32[3] divide(a, bb)"),
                            [np.full(3, 1e30, np.float32), np.float32(3e38)]),
    "reciprocal-power": (_h("  a = s32[2] parameter(0)\n  c = s32[] constant(-1)\n"
                            "  cb = s32[2] broadcast(c), dimensions={}\n"
                            "  ROOT r = s32[2] power(a, cb)"), [np.array([0, 2], np.int32)]),
    "power-of-exp": (_h("  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                        "  ea = f32[] exponential(a)\n  ROOT r = f32[] power(ea, b)"),
                     [np.float32(100), np.float32(0.01)]),
    "log-of-power": (_h("  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                        "  p = f32[] power(a, b)\n  ROOT r = f32[] log(p)"),
                     [np.float32(10), np.float32(400)]),
    "multiply-constants": (_h("  a = f32[] parameter(0)\n  c1 = f32[] constant(1e+30)\n"
                              "  c2 = f32[] constant(1e+30)\n  m = f32[] multiply(a, c1)\n"
                              "  ROOT r = f32[] multiply(m, c2)"), [np.float32(1e-30)]),
    "divide-by-quotient": (_h("  a = f64[] parameter(0)\n  b = f64[] parameter(1)\n"
                              "  c = f64[] parameter(2)\n  q = f64[] divide(b, c)\n"
                              "  ROOT r = f64[] divide(a, q)"),
                           [np.float64(1e200), np.float64(1e300), np.float64(1e200)]),
    "exp-product": (_h("  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                       "  ea = f32[] exponential(a)\n  eb = f32[] exponential(b)\n"
                       "  ROOT r = f32[] multiply(ea, eb)"), [np.float32(100), np.float32(-100)]),
}


@pytest.mark.parametrize("name", sorted(XLA_REWRITES))
def test_xla_returns_the_rewritten_form_and_the_verdict_names_the_rewrite(worker, name):
    text, args = XLA_REWRITES[name]
    report = diff(text, args, worker=worker)
    actual, expected = np.asarray(report.actual, np.float64), np.asarray(report.expected,
                                                                          np.float64)
    with np.errstate(invalid="ignore"):
        far = ~np.isclose(actual, expected, rtol=1e-3, atol=0, equal_nan=True)
    assert np.any(far), (actual, expected)  # XLA:CPU does rewrite it
    assert report.verdict == "match", report.summary()
    assert any(r.startswith(name) for r in report.envelope.rewrites), report.summary()
    strict = diff(text, args, worker=worker, policy=NO_REWRITES, oracle_value=report.actual,
                  localize=False)
    assert strict.verdict == "mismatch", strict.summary()


def test_a_rewrite_within_rounding_leaves_the_envelope_as_it_was():
    # x / 3 and XLA's x * (1/3) differ by at most an ULP or so on ordinary values: the
    # rounding freedom's business, so the runs that take the rewrite perturb the written
    # value as usual and the envelope is the one without the freedom, bit for bit
    text = """HloModule m
ENTRY e {
  x = f32[64] parameter(0)
  c = f32[] constant(3)
  cb = f32[64] broadcast(c), dimensions={}
  ROOT r = f32[64] divide(x, cb)
}
"""
    x = np.random.default_rng(1).uniform(-10, 10, 64).astype(np.float32)
    with_, s = _leaf(text, [x], EnvelopePolicy())
    without, _ = _leaf(text, [x], NO_REWRITES)
    assert not any(s.rewrites)
    assert np.array_equal(with_.lo, without.lo) and np.array_equal(with_.hi, without.hi)
    assert np.any(with_.hi > with_.lo)  # the division does round
