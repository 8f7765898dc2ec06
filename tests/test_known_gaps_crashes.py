"""The known-difference classifier (fuzz/known_bugs.py, fuzz/known_gaps.py) on
XLA:CPU's known crashes and constant-folding bugs: hand-built reports, and XLA:CPU
really crashing or folding so."""

from __future__ import annotations

from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest

from hloref.fuzz.known_classes import known_crash, known_folding

from known_gaps_common import worker, xla


def _division(op, t, lhs, rhs, lhs_param=False):
    lhs_line = f"  a = {t}[] parameter(0)" if lhs_param else f"  a = {t}[] constant({lhs})"
    return f"""HloModule m
ENTRY e {{
{lhs_line}
  b = {t}[] constant({rhs})
  ROOT r = {t}[] {op}(a, b)
}}
"""


@pytest.mark.parametrize("op,t,lhs,rhs,want", [
    ("remainder", "s32", 0, 0, "int-divide-by-constant-zero"),   # XLA:CPU: SIGFPE (below)
    ("divide", "u2", 0, 0, "int-divide-by-constant-zero"),       # the stored finding's case
    ("divide", "s8", -128, -1, None),  # INT_MIN / -1: XLA:CPU folds it to -128 (checked)
    ("divide", "s32", 7, 2, None),                               # no zero: another crash
])
def test_known_crash_of_a_folded_integer_division(op, t, lhs, rhs, want):
    """A SIGFPE report on a module whose integer divide/remainder has constant operands
    and a zero divisor is the known crash; any other crash is not."""
    report = SimpleNamespace(verdict="crash", message="the xla oracle process died with SIGFPE")
    assert known_crash(report, _division(op, t, lhs, rhs), []) == want
    other = SimpleNamespace(verdict="crash", message="the xla oracle process died with SIGSEGV")
    assert known_crash(other, _division(op, t, lhs, rhs), []) is None


def test_a_divisor_from_a_parameter_is_not_the_folded_crash():
    """Constant folding needs both operands constant: a parameter lhs leaves the division
    to run time, where XLA:CPU guards it (x / 0 = -1)."""
    report = SimpleNamespace(verdict="crash", message="the xla oracle process died with SIGFPE")
    text = _division("divide", "s32", 0, 0, lhs_param=True)
    assert known_crash(report, text, [np.int32(5)]) is None


def test_xla_cpu_really_dies_on_remainder_by_constant_zero(xla):
    """The class above is XLA:CPU's behaviour (jaxlib 0.10.2), not a guess: the oracle
    dies with SIGFPE on s32 remainder(0, 0) of constants, and the campaign's check calls
    it known instead of a new finding. XLA's semantics (by hand): 0 % 0 = 0."""
    text = _division("remainder", "s32", 0, 0)
    outcome = xla(text, [])
    assert outcome.verdict == "crash" and "SIGFPE" in outcome.report.message
    assert outcome.kind == "known" and outcome.known == "int-divide-by-constant-zero"
    assert int(outcome.report.expected) == 0


@pytest.mark.parametrize("t,signal,want", [
    ("s2", "SIGABRT", "concatenate-2bit-aborts"),   # the stored finding
    ("u2", "SIGABRT", "concatenate-2bit-aborts"),   # XLA:CPU aborts on u2 too (checked)
    ("s4", "SIGABRT", None),                        # s4 concatenates fine: another crash
    ("u2", "SIGSEGV", None),
])
def test_known_crash_of_a_2bit_concatenate(t, signal, want):
    text = f"""HloModule m
ENTRY e {{
  a = {t}[3,5,1] parameter(0)
  b = {t}[3,1,1] parameter(1)
  ROOT c = {t}[3,6,1] concatenate(a, b), dimensions={{1}}
}}
"""
    report = SimpleNamespace(verdict="crash", message=f"the xla oracle process died with {signal}")
    assert known_crash(report, text, []) == want


def test_xla_cpu_really_aborts_on_a_variadic_sort_of_s2_keys(xla):
    """A campaign (seed 31): sort((p, p)) of s2[3,5,3] along dimension 1 killed XLA:CPU
    with SIGABRT; counted as the filed s2 sort bug. By the semantics it is p sorted
    along dimension 1, twice (hloref's value)."""
    text = """HloModule m

cmp {
  a = s2[] parameter(0)
  b = s2[] parameter(1)
  c = s2[] parameter(2)
  d = s2[] parameter(3)
  ROOT lt = pred[] compare(a, b), direction=LT
}

ENTRY e {
  p = s2[3,5,3] parameter(0)
  ROOT s = (s2[3,5,3], s2[3,5,3]) sort(p, p), dimensions={1}, is_stable=true, to_apply=cmp
}
"""
    bits = np.array([[[0, 1, 3], [1, 2, 2], [3, 3, 3], [0, 1, 3], [2, 0, 1]],
                     [[3, 3, 3], [0, 1, 3], [3, 1, 2], [1, 0, 3], [1, 1, 1]],
                     [[2, 2, 3], [1, 3, 2], [3, 3, 3], [3, 3, 1], [3, 3, 0]]])
    p = ((bits + 2) % 4 - 2).astype(ml_dtypes.int2)  # the campaign's s2 bit patterns
    outcome = xla(text, [p])
    # heap corruption ("malloc(): unaligned fastbin chunk detected"): runs die with
    # SIGABRT or SIGSEGV, or return rows that are not a permutation; known every way
    assert outcome.verdict in ("crash", "mismatch"), outcome
    assert outcome.kind == "known" and outcome.known == "sort-2bit", (
        outcome.verdict, outcome.report.message, outcome.report.culprit)
    want = np.sort(p.astype(np.int8), axis=1)
    for leaf in outcome.report.expected:
        assert np.array_equal(np.asarray(leaf).astype(np.int8), want)
    for signal in ("SIGABRT", "SIGSEGV"):
        report = SimpleNamespace(verdict="crash",
                                 message=f"the xla oracle process died with {signal}")
        assert known_crash(report, text, [p]) == "sort-2bit"
        assert known_crash(report, text.replace("s2", "s8"), [p.astype(np.int8)]) is None


@pytest.mark.parametrize("t,base,exp,want", [
    ("s2", -1, -1, "int-power-negative-folding"),   # the CI smoke campaign's finding
    ("s32", -1, -2, "int-power-negative-folding"),
    ("s32", 2, -1, None),   # both paths give 0: not this difference
    ("s32", -1, 3, None),   # a positive exponent: no difference
])
def test_known_folding_of_a_negative_integer_power(t, base, exp, want):
    """XLA's HloEvaluator folds pow(x, n < 0) to (x == 1 ? 1 : 0); XLA:CPU's run-time code
    and hloref give (-1)^n = ±1 (measured on s2, s8, s32: constants {-1, 1, -1} ^ {-1, -1,
    -2} fold to {0, 1, 0}, as parameters give {-1, 1, 1}). A mismatch of folded operands
    with base -1 and a negative exponent is that known difference."""
    text = f"""HloModule m
ENTRY e {{
  a = {t}[] constant({base})
  b = {t}[] constant({exp})
  ROOT r = {t}[] power(a, b)
}}
"""
    report = SimpleNamespace(verdict="mismatch", culprit=None)
    assert known_folding(report, text, []) == want


def test_a_power_of_parameters_is_not_folded():
    text = """HloModule m
ENTRY e {
  a = s32[] parameter(0)
  b = s32[] constant(-1)
  ROOT r = s32[] power(a, b)
}
"""
    report = SimpleNamespace(verdict="mismatch", culprit=None)
    assert known_folding(report, text, [np.int32(-1)]) is None


def test_a_divisor_xla_simplifies_to_a_constant_zero_is_the_folded_crash():
    """divide(xor(p, p), xor(p, p)): XLA's simplifier makes xor(p, p) the constant 0, then
    constant folding divides by it (SIGFPE, a campaign, seed 7); whatever p, by hand the
    divisor is 0."""
    text = """HloModule m
ENTRY e {
  p = s32[1] parameter(0)
  x = s32[1] xor(p, p)
  ROOT d = s32[1] divide(x, x)
}
"""
    report = SimpleNamespace(verdict="crash", message="the xla oracle process died with SIGFPE")
    assert known_crash(report, text, [np.array([5], np.int32)]) == "int-divide-by-constant-zero"


S8_CONV = """HloModule m

ENTRY e {
  a = s8[1,4,3] constant({ { {-1, 3, 5}, {-2, -6, 8}, {-3, -3, 4}, {6, -7, 4} } })
  k = s8[2,2,3] reshape(a)
  ROOT c = s8[4,1,2] convolution(a, k), window={size=2 pad=1_0}, dim_labels=b0f_0oi->0bf
}
"""


def test_a_folded_s8_convolution_that_saturates_is_the_filed_folding_bug(xla):
    """A campaign (seed 0, --xla-opt fast): the s8 convolution of two constants. By the
    definition (b0f_0oi->0bf, window 2, one low pad): out[p, 0, o] = sum over taps t and
    input features i of a[0, p + t - 1, i] * k[t, o, i], zero outside; in int64 below.
    Element [3, 0, 1] is 157, over s8's 127: it wraps to -99 (hloref), XLA's folder gives
    127. Counted as the stored convolution-u16 finding's class."""
    a = np.array([[[-1, 3, 5], [-2, -6, 8], [-3, -3, 4], [6, -7, 4]]], np.int64)
    k = a.reshape(2, 2, 3)
    exact = np.zeros((4, 1, 2), np.int64)
    for p in range(4):
        for t in range(2):
            if 0 <= p + t - 1 < 4:
                exact[p, 0] += k[t] @ a[0, p + t - 1]
    assert int(exact[3, 0, 1]) == 157
    wrapped = ((exact + 128) % 256 - 128).astype(np.int8)
    outcome = xla(S8_CONV, [])
    assert np.array_equal(np.asarray(outcome.report.expected), wrapped)
    assert int(np.asarray(outcome.report.actual)[3, 0, 1]) == 127
    assert outcome.kind == "known" and outcome.known == "convolution-int-folding-saturates"


def test_a_division_by_zero_of_a_reduce_over_an_empty_parameter_is_the_folded_crash(xla):
    """A campaign (seed 0): s16 divide(reduce(p, 0) over p's empty dimension, 0). p has
    no elements, so the reduce is its init value 0 (by the semantics), which XLA folds
    with the constant divisor 0 and dies with SIGFPE; hloref's value is XLA's x / 0 = -1.
    A parameter of no elements counts as a value the folder knows."""
    text = """HloModule m

or16 {
  a = s16[] parameter(0)
  b = s16[] parameter(1)
  ROOT o = s16[] or(a, b)
}

ENTRY e {
  p = s16[1,3,0] parameter(0)
  z = s16[] constant(0)
  r = s16[1,3] reduce(p, z), dimensions={2}, to_apply=or16
  d = s16[1,3] broadcast(z), dimensions={}
  ROOT q = s16[1,3] divide(r, d)
}
"""
    p = np.zeros((1, 3, 0), np.int16)
    outcome = xla(text, [p])
    assert outcome.verdict == "crash" and "SIGFPE" in outcome.report.message
    assert outcome.kind == "known" and outcome.known == "int-divide-by-constant-zero"
    assert np.asarray(outcome.report.expected).tolist() == [[-1, -1, -1]]


_BF16_PRED = """HloModule m
ENTRY e {{
  p = {t}[4,3] parameter(0)
  c = pred[4,3] convert(p)
  a = u16[4,3] convert(c)
  b = u16[4,3] convert(p)
  ROOT r = u16[4,3] add(a, b)
}}
"""


@pytest.mark.parametrize("t,signal,tail,want", [
    ("bf16", "SIGABRT", "LLVM ERROR: Cannot select: v16f32 = X86ISD::CMPP", "bf16-to-pred-cannot-select"),
    ("bf16", "SIGABRT", "  0x1: v16f32 = X86ISD::CMPP 0x2, 0x3\nIn function: f", "bf16-to-pred-cannot-select"),
    ("bf16", "SIGSEGV", "LLVM ERROR: Cannot select: v16f32 = X86ISD::CMPP", None),  # another death
    ("bf16", "SIGABRT", "malloc(): corrupted top size", None),                      # another abort
    ("f16", "SIGABRT", "LLVM ERROR: Cannot select: v16f32 = X86ISD::CMPP", None),   # no bf16 -> pred
])
def test_known_crash_of_llvm_selecting_a_bf16_to_pred_convert(t, signal, tail, want):
    report = SimpleNamespace(verdict="crash", message=f"the xla oracle process died with {signal}",
                             oracle_result=SimpleNamespace(stderr_tail=tail))
    assert known_crash(report, _BF16_PRED.format(t=t), []) == want


def test_xla_cpu_really_aborts_selecting_a_bf16_to_pred_convert(xla):
    """A campaign (seed 31), reduced by hand: bf16[4,3] converted to pred and to u16 in
    one fusion aborts XLA:CPU in LLVM's instruction selection on this (AVX-512) host;
    the stored finding convert-bf16-to-pred-and-u16-llvm-cannot-select. By hand the
    value is (x != 0) + saturate_u16(x): [[1, 1, 1], [1, 0, 1], [2, 2, 3], [3, 4, 301]]."""
    from hloref.fuzz.findings import host_cpu_flags
    have = host_cpu_flags() or frozenset()
    x = np.array([[-2, -1.5, -1], [-0.5, 0, 0.5], [1, 1.5, 2], [2.5, 3, 300]], ml_dtypes.bfloat16)
    outcome = xla(_BF16_PRED.format(t="bf16"), [x])
    assert np.asarray(outcome.report.expected).tolist() == [[1, 1, 1], [1, 0, 1], [2, 2, 3],
                                                            [3, 4, 301]]
    if {"avx512f", "avx512bw", "avx512_bf16"} <= have:
        assert outcome.verdict == "crash" and "SIGABRT" in outcome.report.message
        assert outcome.kind == "known" and outcome.known == "bf16-to-pred-cannot-select"
    else:  # elsewhere unverified: if XLA:CPU compiles it, its value must be the one by hand
        assert outcome.verdict == "match" or (outcome.verdict == "crash" and
                                              outcome.known == "bf16-to-pred-cannot-select")


_CONV_CHECK = """HloModule m
ENTRY e {
  x = f32[1,4,3,2] parameter(0)
  k = f32[3,3,1,2] parameter(1)
  ROOT c = f32[1,6,2,1] convolution(x, k), window={size=3x2 stride=2x1 pad=1_1x0_0 lhs_dilate=2x2}, dim_labels=01fb_0io1->f1b0
}
"""


@pytest.mark.parametrize("signal,tail,text,want", [
    ("SIGABRT", "F1128 algebraic_simplifier.cc:586] Check failed: computation->Accept(this) "
     "is OK (INVALID_ARGUMENT: Window dimensions do not match RHS shape:\\n...",
     _CONV_CHECK, "convolution-simplifier-check"),
    ("SIGABRT", "malloc(): corrupted top size", _CONV_CHECK, None),  # another abort
    ("SIGSEGV", "Window dimensions do not match RHS shape", _CONV_CHECK, None),
    ("SIGABRT", "Window dimensions do not match RHS shape",
     _BF16_PRED.format(t="f16"), None),                               # no convolution
])
def test_known_crash_of_the_simplifiers_convolution_check(signal, tail, text, want):
    report = SimpleNamespace(verdict="crash", message=f"the xla oracle process died with {signal}",
                             oracle_result=SimpleNamespace(stderr_tail=tail))
    assert known_crash(report, text, []) == want


def test_xla_cpu_really_aborts_in_the_simplifiers_convolution_check(xla):
    """A campaign (seed 53), stored in f32 as findings/xla-cpu-jaxlib-0.10.2/convolution-
    lhs-dilate-simplifier-check-failure; with all-ones inputs every element is 3 by hand."""
    ones = [np.ones((1, 4, 3, 2), np.float32), np.ones((3, 3, 1, 2), np.float32)]
    outcome = xla(_CONV_CHECK, ones)
    assert np.all(np.asarray(outcome.report.expected) == 3.0)
    assert outcome.verdict == "crash" and "SIGABRT" in outcome.report.message
    assert outcome.kind == "known" and outcome.known == "convolution-simplifier-check"
