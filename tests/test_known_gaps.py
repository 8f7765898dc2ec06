"""The known-difference classifier (fuzz/known_gaps.py) on hand-built reports: FTZ
explains a mismatch only where XLA flushed hloref's subnormals to zero, never because
the oracle's values hold subnormals (uninitialised memory read as floats mostly does:
findings/xla-cpu-jaxlib-0.10.2/fusion-parameter-output-garbage was dismissed so)."""

from __future__ import annotations

from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest

from hloref.fuzz.known_classes import FILED, known_crash, known_folding
from hloref.fuzz.known_classes import KNOWN_DIFFERENCES, known_difference

SUB = np.float32(1e-40)  # subnormal in f32 (smallest normal 1.18e-38)


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


def _unlocalized(expected, actual):
    return SimpleNamespace(culprit=None, expected=expected, actual=actual)


def _localized(opcode, operands, expected, actual):
    c = SimpleNamespace(opcode=opcode, operands=operands, expected=expected, actual=actual)
    c.innermost = lambda: c
    return SimpleNamespace(culprit=c, expected=expected, actual=actual)


@pytest.mark.parametrize("expected,actual,want", [
    ([SUB, 2.0], [0.0, 2.0], "ftz"),                     # a subnormal result flushed
    ([-SUB, 2.0], [-0.0, 2.0], "ftz"),
    ([22.0, 33.0], [3.06e-41, -1.68e-31], None),         # garbage, subnormal-looking
    ([SUB, 5.0], [0.0, 7.0], None),                      # a flush and a real difference
    ([0.0, 1.0], [SUB, 1.0], None),                      # XLA subnormal, hloref zero
])
def test_unlocalized_ftz_only_where_subnormals_were_flushed(expected, actual, want):
    e, a = np.array(expected, np.float32), np.array(actual, np.float32)
    assert known_difference(_unlocalized(e, a)) == want


def test_localized_ftz_by_subnormal_operands_or_flushed_results():
    x = np.array([SUB, 1.0], np.float32)
    # DAZ: the culprit read a subnormal operand (1/x of a subnormal: inf either way)
    r = _localized("divide", [np.ones(2, np.float32), x], np.array([3e38, 1.0], np.float32),
                   np.array([np.inf, 1.0], np.float32))
    assert known_difference(r) == "ftz"
    # normal operands, XLA's result is garbage with subnormals in it: not FTZ
    y = np.array([1.0, 2.0, 3.0], np.float32)
    r = _localized("add", [y, y], 2 * y, np.array([2.0, 3.06e-41, -1.68e-31], np.float32))
    assert known_difference(r) is None
    # normal operands, a subnormal product flushed: FTZ of the result
    z = np.array([1e-20, 1.0], np.float32)
    r = _localized("multiply", [z, z], np.array([1e-40, 1.0], np.float32),
                   np.array([0.0, 1.0], np.float32))
    assert known_difference(r) == "ftz"


def test_accumulation_overflow_only_where_the_sums_could_overflow():
    # by hand: 3 terms of at most 2 x 3 = 6 each: |sum| <= 18 in any order (f32 max 3.4e38)
    a = np.array([[1.0, 2.0, -2.0]], np.float32)
    b = np.array([[3.0], [1.0], [2.0]], np.float32)
    r = _localized("dot", [a, b], np.array([[1.0]], np.float32),
                   np.array([[np.nan]], np.float32))
    assert known_difference(r) is None
    # f16 (max 65504): 3 terms of up to 200 x 200 = 40000 can overflow in some order
    a16, b16 = (a * 100).astype(np.float16), (b * 100).astype(np.float16)
    r = _localized("dot", [a16, b16], np.array([[10000.0]], np.float16),
                   np.array([[np.inf]], np.float16))
    assert known_difference(r) == "accumulation-overflow"


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


@pytest.mark.parametrize("dtype,want", [
    (ml_dtypes.int2, "sort-2bit"), (ml_dtypes.uint2, "sort-2bit"), (np.int8, None),
])
def test_a_sort_of_2bit_keys_is_the_filed_sort_bug(dtype, want):
    """XLA:CPU's wrong sort of s2 keys (the stored finding) came back from a campaign as
    a u2 variant ([[2, 2, 1, 0]] sorted by GT came back [[2, 2, 0, 1]]): a sort culprit
    with 2-bit operands is the known difference; other types are not."""
    keys = np.array([[2, 0, 1, 2]]).astype(dtype)
    report = _localized("sort", [keys], np.array([[2, 2, 1, 0]]).astype(dtype),
                        np.array([[2, 2, 0, 1]]).astype(dtype))
    assert known_difference(report) == want


def test_filed_known_differences_still_reproduce_on_replay():
    """The classes that are themselves stored findings do not hide them from replay."""
    assert {"sort-2bit", "int-divide-by-constant-zero", "concatenate-2bit-aborts"} <= FILED
    assert FILED <= set(KNOWN_DIFFERENCES)


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


@pytest.mark.parametrize("dtype,value,want", [
    (np.uint32, 6.0, "convert-f4e2m1fn-to-int-saturates"),  # a campaign's u32 variant
    (np.int64, -6.0, "convert-f4e2m1fn-to-int-saturates"),  # the stored s64 finding
    (np.uint32, 4.0, None),                                 # 4 converts right
])
def test_a_saturating_f4e2m1fn_convert_is_the_filed_bug(dtype, value, want):
    """XLA:CPU converts f4e2m1fn ±6 to an integer type's extremes (u32: 6 -> 4294967295,
    seen in a 60 s campaign); ±6 is representable and converts to ±6 by hand."""
    x = np.array([value]).astype(ml_dtypes.float4_e2m1fn)
    report = _localized("convert", [x], np.array([value]).astype(dtype),
                        np.array([np.iinfo(dtype).max]).astype(dtype))
    assert known_difference(report) == want


@pytest.mark.parametrize("op,values,want,between", [
    ("multiply", [6, 2, 7], "s4-arithmetic-does-not-wrap", "r"),  # 36, 4, 49 leave s4
    ("add", [3, -4, 2], None, "r"),                               # 6, -8, 4 stay inside
    ("add", [2, 4, 1], "s4-arithmetic-does-not-wrap", "b"),       # 8 wraps; a broadcast
])
def test_s4_arithmetic_that_wraps_before_a_widening_convert(op, values, want, between):
    """XLA:CPU's float-normalization-s4 keeps s4 sums and products unwrapped when they are
    converted to s8 (the stored add finding; a campaign found multiply, and, seed 71, an
    add read through a broadcast): a mismatch of a module whose s4 arithmetic leaves
    [-8, 7] (by hand) is that difference."""
    text = f"""HloModule m
ENTRY e {{
  p = s4[3] parameter(0)
  r = s4[3] {op}(p, p)
  b = s4[3] broadcast(r), dimensions={{0}}
  ROOT c = s8[3] convert({between})
}}
"""
    report = SimpleNamespace(verdict="mismatch", culprit=None)
    assert known_folding(report, text, [np.array(values).astype(ml_dtypes.int4)]) == want


@pytest.mark.parametrize("big,want,dtype", [(2.5e34, "accumulation-overflow", np.float32),
                                            (1e15, None, np.float32),
                                            (1e200, "accumulation-overflow", np.float64),
                                            (1e150, None, np.float64)])
def test_batch_norm_whose_squares_overflow_is_the_accumulation_difference(big, want, dtype):
    """XLA expands batch-norm-training into E[x²] - E[x]² in f32: an x of 2.5e34 squares to
    inf and the output is NaN (a campaign, seed 7), where hloref's f64 statistics give
    finite values; 1e15 squares to 1e30, inside f32, so a mismatch there is no such
    difference (by hand: f32 max 3.4e38)."""
    x = np.array([[big, 1.0], [3.0, -2.0]], dtype)  # f64: 1e200² = inf (a campaign, seed
    s = np.ones(2, dtype)  # 23, crashed the classifier: Python's float ** 2 raises)
    report = _localized("batch-norm-training", [x, s, s], np.zeros((2, 2), dtype),
                        np.full((2, 2), np.nan, dtype))
    assert known_difference(report) == want


NAN_BITS = """HloModule m
ENTRY e {
  p = f32[2] parameter(0)
  l = f32[2] log-plus-one(p)
  ROOT b = s32[2] bitcast-convert(l)
}
"""

NAN_SIGN = """HloModule m
ENTRY e {
  p = bf16[2] parameter(0)
  a = bf16[2] acos(p)
  q = bf16[2] parameter(1)
  ROOT c = pred[2] compare(a, q), direction=GE, type=TOTALORDER
}
"""


def test_the_bits_and_sign_of_a_nan_are_implementation_defined(worker):
    """log1p(-5e31) and acos(-1.4e21) are NaN (by hand: outside the domains); XLA:CPU's
    NaNs come back as 0xFFFFFFFF and +NaN where hloref's are 0xFFC00000 and -NaN (seen in
    a campaign, seed 7): a known gap, not a mismatch. Without a NaN, bits 1,000 ULPs off
    are still a mismatch."""
    pytest.importorskip("jax")
    import ml_dtypes as md

    from hloref.fuzz.differential import diff
    p = np.array([-4.9787705e+31, 0.5], np.float32)
    r = diff(NAN_BITS, [p], worker=worker)
    assert r.verdict in ("known-gap", "match"), r.summary()
    if r.verdict == "known-gap":
        assert r.known_gap == "nan-sign-payload"
    finite = np.array([0.25, 0.5], np.float32)
    good = diff(NAN_BITS, [finite], worker=worker)
    assert good.verdict == "match", good.summary()
    off = np.array(good.expected, copy=True)
    off[1] += 1000
    assert diff(NAN_BITS, [finite], worker=worker, oracle_value=off).verdict == "mismatch"
    a = np.array([-1.4e21, -4.8e-31]).astype(md.bfloat16)
    q = np.array([-0.163, -0.163]).astype(md.bfloat16)
    s = diff(NAN_SIGN, [a, q], worker=worker)
    assert s.verdict in ("known-gap", "match"), s.summary()


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


def test_the_classifiers_read_the_reports_values_instead_of_evaluating_again():
    """DiffReport.entry_values (computed for the comparison) give the operands: with
    them, no second evaluation is needed (args=None here would make one fail)."""
    text = """HloModule m
ENTRY e {
  a = s32[] constant(-1)
  b = s32[] constant(-1)
  ROOT r = s32[] power(a, b)
}
"""
    values = {("e", "a"): np.int32(-1), ("e", "b"): np.int32(-1)}
    report = SimpleNamespace(verdict="mismatch", culprit=None, entry_values=values)
    assert known_folding(report, text, None) == "int-power-negative-folding"
    crash = SimpleNamespace(verdict="crash", message="died with SIGFPE",
                            entry_values={("e", "a"): np.int32(0), ("e", "b"): np.int32(0)})
    assert known_crash(crash, text.replace("power", "divide"), None) == \
        "int-divide-by-constant-zero"


@pytest.mark.parametrize("big,want", [(35.72, "accumulation-overflow"), (1.5, None)])
def test_batch_norm_grad_terms_that_overflow_f16_are_the_accumulation_difference(big, want):
    """f16 batch-norm-grad of x = dy = [[0.2, big], ...] around mean -32.22 (a campaign,
    seed 23): XLA's expansion computes (x - mean)·Σ dy·(x - mean)/(var + eps) in f16, about
    68 x 2,430 / 0.99 = 167,000 > 65,504 (inf), where hloref's f64 result is 271.25; with
    |x| <= 1.5 and |mean| <= 1 the bound, d = 2.5, 2.5 x (6 x 1.5 x 2.5) / 0.86 = 65, stays
    far inside (by hand)."""
    x = np.array([[0.0005, 0.2013, -0.0068], [-32.22, big, 0.3916]], np.float16)
    scale = np.array([0.2013, -0.0068, -32.22], np.float16)
    mean = np.array([-0.0068, -32.22, 35.72 if want else 1.0], np.float16)
    var = np.array([1.591, 0.9873, 0.8594], np.float16)
    if not want:
        x = np.clip(x, -1.5, 1.5)
        mean = np.clip(mean, -1.0, 1.0)
    report = _localized("batch-norm-grad", [x, scale, mean, var, x],
                        np.zeros((2, 3), np.float16), np.full((2, 3), np.inf, np.float16))
    assert known_difference(report) == want


def test_sub_byte_results_of_the_saturating_f4_convert_and_a_complex_zero_power():
    """A campaign (seed 23): f4e2m1fn 6 converts to s4 7 on XLA:CPU (6 fits in s4: by
    hand 6), the filed saturating convert; and power(0, 2.6 + 5.3i) is NaN on XLA:CPU where
    C99's cpow(0, z) = cexp(z clog 0) = cexp(-inf - inf i) = 0 for Re z > 0 (G.6.3.1)."""
    six = np.array([6.0]).astype(ml_dtypes.float4_e2m1fn)
    report = _localized("convert", [six], np.array([6]).astype(ml_dtypes.int4),
                        np.array([7]).astype(ml_dtypes.int4))
    assert known_difference(report) == "convert-f4e2m1fn-to-int-saturates"
    zero, z = np.array([0j]), np.array([2.647863932 + 5.331354864j])
    report = _localized("power", [zero, z], np.array([0j]), np.array([complex(np.nan, np.nan)]))
    assert known_difference(report) == "complex-special"
    report = _localized("power", [np.array([1 + 0j]), z], np.array([1 + 0j]),
                        np.array([complex(np.nan, np.nan)]))
    assert known_difference(report) is None


def _ulps_off(value: float, ulps: int) -> float:
    return float(np.float64(value) + ulps * np.spacing(abs(np.float64(value))))


def _mp(fn: str, x: float) -> float:
    """``fn(x)`` by mpmath at 100 digits, rounded to f64."""
    import mpmath
    with mpmath.workdps(100):
        return float(getattr(mpmath, fn)(x))


@pytest.mark.parametrize("x,ulps,dtype,want", [
    (-0.374664685, 15, np.float64, "log-plus-one-f64-band"),   # the stored finding
    (-0.374664685, 128, np.float64, "log-plus-one-f64-band"),  # the band's worst
    (-0.374664685, 400, np.float64, None),                     # more than the band's error
    (-0.2, 15, np.float64, None),                              # outside the band
])
def test_f64_log1p_in_xla_cpus_inaccurate_band_is_the_filed_bug(x, ulps, dtype, want):
    exact = _mp("log1p", x)
    report = _localized("log-plus-one", [np.array([x], dtype)], np.array([exact], dtype),
                        np.array([_ulps_off(exact, ulps)], dtype))
    assert known_difference(report) == want


@pytest.mark.parametrize("r,real_ulps,imag_off,want", [
    (0.7676435096355178, 103, 0.0, "log-plus-one-f64-band"),  # |z|² - 1 = -0.41 (campaign)
    (0.7676435096355178, 103, 1e-12, None),                   # the angle wrong too
    (0.5, 103, 0.0, None),                                    # |z|² - 1 = -0.75: not the band
])
def test_c128_log_inherits_the_band_in_its_real_part(r, real_ulps, imag_off, want):
    exact = _mp("log", r)  # log(-r + 0i) = log r + i pi
    z = np.array([-r + 0j])
    e = np.array([complex(exact, np.pi)])
    a = np.array([complex(_ulps_off(exact, real_ulps), np.pi + imag_off)])
    assert known_difference(_localized("log", [z], e, a)) == want


@pytest.mark.parametrize("t,op,x,want", [
    ("f64", "log-plus-one", -0.374664685, "log-plus-one-f64-band"),
    ("f64", "log-plus-one", -0.2, None),
    ("c128", "log", complex(-0.7676435096355178, 0), "log-plus-one-f64-band"),
    ("c128", "log-plus-one", complex(-0.231937134, -0.079277963), "log-plus-one-f64-band"),
])
def test_xla_cpu_really_is_off_in_the_log1p_band(t, op, x, want, xla):
    """XLA:CPU (jaxlib 0.10.2): f64 log-plus-one of -0.374664685 is 15 ULP from mpmath's
    (the stored finding), c128 log of -0.7676435 103 ULP off in its real part, c128
    log-plus-one of -0.2319 - 0.0793i (2 Re z + |z|^2 = -0.404, a campaign, seed 89) off
    in its real part; the campaign's check calls them known. Outside the band (-0.2) XLA
    agrees: a match."""
    text = (f"HloModule m\n\nENTRY e {{\n  p = {t}[1] parameter(0)\n"
            f"  ROOT r = {t}[1] {op}(p)\n}}\n")
    value = np.array([x], np.float64 if t == "f64" else np.complex128)
    outcome = xla(text, [value])
    if want is None:
        assert outcome.verdict == "match"
    else:
        assert outcome.verdict == "mismatch"
        assert outcome.kind == "known" and outcome.known == want


@pytest.mark.parametrize("z,real_ulps,imag_off,want", [
    (complex(-0.231937134, -0.079277963), 63, 0.0, "log-plus-one-f64-band"),  # arg -0.404
    (complex(-0.231937134, -0.079277963), 63, 1e-12, None),   # the angle wrong too
    (complex(-0.1, -0.079277963), 63, 0.0, None),             # arg -0.19: not the band
])
def test_c128_log_plus_one_inherits_the_band_in_its_real_part(z, real_ulps, imag_off, want):
    """log1p(z) = log|1 + z| + i arg(1 + z); its real part is log1p(2 Re z + |z|^2)/2, by
    hand; mpmath gives both parts."""
    import mpmath
    with mpmath.workdps(100):
        w = mpmath.log(1 + mpmath.mpc(z.real, z.imag))
    exact = complex(float(w.real), float(w.imag))
    e = np.array([exact])
    a = np.array([complex(_ulps_off(exact.real, real_ulps), exact.imag + imag_off)])
    report = _localized("log-plus-one", [np.array([z])], e, a)
    assert known_difference(report) == want


def _reduce_text(n):
    return ("HloModule m\n\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
            "  ROOT s = f32[] add(a, b)\n}\n\nENTRY e {\n"
            f"  x = f32[{n}] parameter(0)\n  z = f32[] constant(0)\n"
            "  ROOT r = f32[] reduce(x, z), dimensions={0}, to_apply=add\n}\n")


@pytest.mark.parametrize("values,want", [
    # two -max terms overflow to -inf when summed first in f32: inf + -inf = NaN (by
    # hand); hloref's f64 sum is inf
    ([np.inf, -3.4028235e38, -3.4028235e38, 1.0], "accumulation-overflow"),
    # one -max term: no order of f32 sums overflows, inf is the only answer
    ([np.inf, -3.4028235e38, 2.0, 1.0], None),
])
def test_an_infinity_met_by_an_overflowing_sum_is_the_accumulation_difference(values, want):
    """A campaign (seed 0) found XLA:CPU's f32 sum of [-1, -1.5e27, -max, -max, ..., inf,
    ...] NaN where hloref's is inf: some order of the terms overflows to -inf before it
    meets +inf. Only where the other sign's finite terms could overflow on their own."""
    x = np.array(values, np.float32)
    c = SimpleNamespace(opcode="reduce", name="r", operands=[x, np.array(0, np.float32)],
                        expected=np.array(np.inf, np.float32),
                        actual=np.array(np.nan, np.float32), text=_reduce_text(x.size))
    c.innermost = lambda: c
    report = SimpleNamespace(culprit=c, expected=c.expected, actual=c.actual)
    assert known_difference(report) == want


def test_xla_cpu_really_sums_an_overflowing_reduce_with_an_infinity_to_nan(xla):
    """The class above is what XLA:CPU (jaxlib 0.10.2) does: the campaign's check calls
    this reduce known, not a finding."""
    x = np.array([-1.0, -1.4837957e27, -3.4028235e38, -3.4028235e38, 1.5438245e-07, -1.0,
                  np.inf, -2.1132566e-15, 3.8742269e34, 1.1754944e-38, -34.118893,
                  2.8408047e-11], np.float32)
    outcome = xla(_reduce_text(x.size), [x])
    assert outcome.verdict == "mismatch", outcome
    assert np.isnan(np.asarray(outcome.report.actual)) and np.isinf(np.asarray(
        outcome.report.expected))
    assert outcome.kind == "known" and outcome.known == "accumulation-overflow"


@pytest.mark.parametrize("x,actual,want", [
    (2.0 ** -128, np.nan, "ftz-f8e8m0fnu"),   # XLA:CPU's NaN (measured)
    (2.7e-200, np.nan, "ftz-f8e8m0fnu"),      # the seed-0 campaign's finding
    (2.0 ** -126, np.nan, None),              # 2^-126 itself is a value of f8e8m0fnu
    (2.0 ** -128, 2.0 ** -126, None),         # another wrong value, not the NaN
])
def test_a_tiny_f64_converted_to_nan_f8e8m0fnu_is_the_known_difference(x, actual, want):
    """f8e8m0fnu holds 2^-127 ... 2^127 and NaN, no zero: the nearest value to a positive
    f64 below 2^-127 is 2^-127 (by hand; hloref), XLA:CPU gives NaN."""
    import ml_dtypes
    e8 = ml_dtypes.float8_e8m0fnu
    expected = np.array([max(x, 2.0 ** -127)]).astype(e8)
    report = _localized("convert", [np.array([x])], expected, np.array([actual]).astype(e8))
    assert known_difference(report) == want


def test_xla_cpu_really_converts_tiny_f64_to_nan_f8e8m0fnu(xla):
    """Measured: f64 2^-128 and 2^-140 give NaN on XLA:CPU, 2^-127 stays; the campaign's
    check calls the program known."""
    text = ("HloModule m\n\nENTRY e {\n  p = f64[3] parameter(0)\n"
            "  ROOT c = f8e8m0fnu[3] convert(p)\n}\n")
    x = np.array([2.0 ** -127, 2.0 ** -128, 2.0 ** -140])
    outcome = xla(text, [x])
    got = np.asarray(outcome.report.actual).astype(np.float64)
    assert got[0] == 2.0 ** -127 and np.isnan(got[1:]).all()
    assert outcome.kind == "known" and outcome.known == "ftz-f8e8m0fnu"


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
    127. Counted as the stored convolution-s16 finding's class."""
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


def test_the_log1p_band_class_allows_rounding_elsewhere_in_the_array():
    """A campaign (seed 31): f64[2,4,3] log-plus-one, one element in the band 123 ULP off
    and others 1 ULP off outside it (XLA:CPU's ordinary rounding): still the filed class;
    an element outside the band 20 ULP off is not."""
    x = np.array([-0.4136, 0.5, -0.9, 2.0])
    exact = np.array([_mp("log1p", v) for v in x])
    off = np.array([123, 1, -1, 0])
    a = exact + off * np.spacing(np.abs(exact))
    report = _localized("log-plus-one", [x], exact, a)
    assert known_difference(report) == "log-plus-one-f64-band"
    a[3] = exact[3] + 20 * np.spacing(abs(exact[3]))
    assert known_difference(_localized("log-plus-one", [x], exact, a)) is None


def test_a_dot_whose_finite_product_overflows_beside_an_infinity_is_the_accumulation_difference(xla):
    """A campaign (seed 31): a batched f64 dot whose element [1, 0] sums 1.59e283 x
    3.84e252 (over f64's 1.8e308) and -inf x 1.59e283. Computed in the type the first
    product is +inf and the sum NaN (XLA:CPU); hloref's wider products keep it finite,
    so its sum is -inf (by hand: any finite value plus -inf)."""
    text = ("HloModule m\n\nENTRY e {\n  a = f64[3,2,3] parameter(0)\n"
            "  b = f64[2,3] parameter(1)\n  ROOT d = f64[3,3] dot(a, b), lhs_batch_dims={0}, "
            "rhs_batch_dims={1}, lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n")
    h = float.fromhex
    a = np.array([h(v) for v in (
        "-0x1.acca82dedb060p-895", "0x1.9f99e308d8675p-594", "0x1.fffffffffffffp+1023",
        "0x1.0c16fb083d81cp+839", "0x1.4584c1574dcd5p-375", "-0x1.51333f2dd853bp+175",
        "0x1.b51e612f1f2a5p+940", "0x1.0000000000000p-1022", "0x1.0c92b755634d5p-474",
        "-inf", "0x1.06f8c281bc984p+854", "0x1.6aa21a60e27b8p-656",
        "-0x1.48c83b04c6338p+918", "0x1.0000000000000p+0", "0x1.999567e8efc1bp+621",
        "0x1.3680608cf514ep-380", "0x1.e03966ace27b0p+174", "-0x1.caac88ce2568cp-162")]
                 ).reshape(3, 2, 3)
    b = a.ravel()[2:8].reshape(2, 3).copy()  # the campaign's rhs: six of the lhs's values
    with np.errstate(over="ignore"):  # the overflow the test is about
        assert a[1, 0, 0] * b[0, 1] == np.inf and a[1, 1, 0] == -np.inf
    outcome = xla(text, [a, b])
    assert np.isnan(np.asarray(outcome.report.actual)[1, 0])
    assert np.asarray(outcome.report.expected)[1, 0] == -np.inf
    assert outcome.kind == "known" and outcome.known == "accumulation-overflow"


def test_a_convolution_whose_products_overflow_both_ways_beside_a_nan_is_the_accumulation_difference(xla):
    """A campaign (seed 31): a bf16 convolution (pad=2_0, lhs_dilate=2, rhs_dilate=2,
    window 3) whose lhs holds a NaN that output elements 0, 2 and 4 read. Element 6 reads
    lhs[2], lhs[3], lhs[4] with kernel[0], kernel[1], kernel[2] (by hand: the dilated,
    padded lhs is [0, 0, l0, _, l1, _, l2, _, l3, _, l4]; taps 6, 8, 10); the products
    are ~-6e-22, (-1.18e36)(-3.39e38) = 4.0e74 and (-2.16e14)(6.17e34) = -1.3e49. Exactly
    the sum is 4.0e74, so bf16 +inf (hloref); with products in f32 (XLA:CPU) they are
    +inf and -inf, and the sum NaN."""
    text = ("HloModule m\n\nENTRY e {\n  x = bf16[1,1,5] parameter(0)\n"
            "  k = bf16[1,1,3] parameter(1)\n  ROOT c = bf16[1,1,7] convolution(x, k), "
            "window={size=3 pad=2_0 lhs_dilate=2 rhs_dilate=2}, dim_labels=fb0_oi0->fb0\n}\n")
    bf = ml_dtypes.bfloat16
    x = np.array([64444, 32704, 17329, 64356, 55108], np.uint16).view(bf).reshape(1, 1, 5)
    k = np.array([38924, 65407, 31038], np.uint16).view(bf).reshape(1, 1, 3)
    wide_x, wide_k = x.astype(np.float64).ravel(), k.astype(np.float64).ravel()
    exact = wide_x[2] * wide_k[0] + wide_x[3] * wide_k[1] + wide_x[4] * wide_k[2]
    assert exact > float(ml_dtypes.finfo(bf).max)  # rounds to +inf in bf16
    with np.errstate(over="ignore"):
        products = (wide_x[2:] * wide_k).astype(np.float32)
    assert np.isposinf(products[1]) and np.isneginf(products[2])
    outcome = xla(text, [x, k])
    assert np.isposinf(np.asarray(outcome.report.expected).astype(np.float64)[0, 0, 6])
    assert np.isnan(np.asarray(outcome.report.actual).astype(np.float64)[0, 0, 6])
    assert outcome.kind == "known" and outcome.known == "accumulation-overflow"


@pytest.mark.parametrize("kernel,want", [
    ((1.0, -3.0e38, 3.0e38), "accumulation-overflow"),  # products overflow both ways
    ((1.0, 2.0, 3.0), None),                              # nothing can overflow
])
def test_a_nan_operand_excuses_an_inf_to_nan_swap_only_where_products_could_overflow(kernel, want):
    """Hand-built reports: a convolution whose lhs holds a NaN, hloref +inf and the
    oracle NaN at one element; it is the accumulation difference only where the
    products' bound reaches the type's overflow."""
    x = np.array([[[1e30, np.nan, 1e30, 1e30, 1e30]]], np.float32)
    k = np.array([[kernel]], np.float32)
    expected = np.array([[[np.nan, np.inf]]], np.float32)
    actual = np.array([[[np.nan, np.nan]]], np.float32)
    assert known_difference(_localized("convolution", [x, k], expected, actual)) == want


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


@pytest.mark.parametrize("expected,actual,want", [
    ([2.0 ** -127, 2.0], [np.nan, 2.0], "ftz"),     # 2^-127 is f32-subnormal: flushed, NaN
    ([2.0 ** -126, 2.0], [np.nan, 2.0], None),      # 2^-126 is normal: a real difference
    ([2.0 ** -127, 2.0], [2.0 ** -127, 4.0], None),  # a real difference beside it
])
def test_unlocalized_ftz_of_f8e8m0fnu_reads_the_flushed_value_as_nan(expected, actual, want):
    """f8e8m0fnu has no zero; XLA computes it in f32, where its least value 2^-127 is
    subnormal, so a flushed value comes back NaN (ml_dtypes: 0 -> NaN, checked here).
    The seed-31 campaign's folded expm1(2^-127) is this (XLA's optimized module holds
    the constant NaN; the same expm1 of a parameter gives 2^-127)."""
    e8 = ml_dtypes.float8_e8m0fnu
    assert np.isnan(np.array(0.0).astype(e8).astype(np.float64))
    assert 2.0 ** -127 < float(np.finfo(np.float32).tiny) <= 2.0 ** -126
    e, a = np.array(expected).astype(e8), np.array(actual).astype(e8)
    assert known_difference(_unlocalized(e, a)) == want


def test_xla_cpu_really_folds_expm1_of_the_least_f8e8m0fnu_to_nan(xla):
    text = ("HloModule m\n\nENTRY e {\n  c = f8e8m0fnu[] constant(5.877e-39)\n"
            "  ROOT r = f8e8m0fnu[] exponential-minus-one(c)\n}\n")
    outcome = xla(text, [])
    # by hand: expm1(2^-127) = 2^-127 (1 + 2^-128 + ...), nearest f8e8m0fnu 2^-127
    assert float(np.asarray(outcome.report.expected).astype(np.float64)) == 2.0 ** -127
    assert np.isnan(np.asarray(outcome.report.actual).astype(np.float64))
    assert outcome.kind == "known" and outcome.known == "ftz"


@pytest.mark.parametrize("a,want", [
    (8.955381e-23, "complex-special"),  # a^2 = 8e-45: below f32's smallest normal
    (1e-10, None),                       # a^2 = 1e-20: a normal f32
])
def test_a_complex_formula_whose_squares_underflow_is_the_special_values_difference(a, want):
    """A campaign (seed 0): c64 atan2(z, z) with z = a(1 + i). XLA's expansion divides
    by sqrt(x^2 + y^2); for a = 8.955e-23 the squares are below f32's smallest normal
    (1.18e-38), FTZ makes them zero and XLA:CPU gives NaN, where hloref gives
    atan2 = pi/4 (by hand: z/z = 1, so the angle of (x + iy) with x = y is pi/4)."""
    z = np.array([a * (1 + 1j)], np.complex64)
    assert (float(z.real[0]) ** 2 < float(np.finfo(np.float32).tiny)) == (want is not None)
    expected = np.array([np.pi / 4 + 0j], np.complex64)
    actual = np.array([complex(np.nan, np.nan)], np.complex64)
    assert known_difference(_localized("atan2", [z, z], expected, actual)) == want


SAS_TIES = """HloModule m

select {
  a = s4[] parameter(0)
  b = s4[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GE
}

add {
  a = s4[] parameter(0)
  b = s4[] parameter(1)
  ROOT c = s4[] add(a, b)
}

ENTRY e {
  x = s4[4,3,1] parameter(0)
  init = s4[] parameter(1)
  s = s4[2,2,1] parameter(2)
  ROOT r = s4[4,3,1] select-and-scatter(x, s, init), window={size=3x3x1 stride=2x1x2 pad=0_1x0_1x0_1}, select=select, scatter=add
}
"""


def test_a_select_and_scatter_tie_walked_in_another_order_is_a_known_gap(worker):
    """A campaign (seed 41): the window at source [0, 0] covers rows 0-2 and columns
    0-2 of x, whose maximum 7 stands at [0, 2] and at [1, 0] (by hand, below). With the
    non-strict GE select a row-major walk keeps [0, 2] (hloref), a walk of columns
    before rows reaches [1, 0] first (XLA:CPU); the walk's order is implementation-
    defined, so both are valid. A source value put where no walk puts it is not."""
    from hloref.fuzz.differential import diff
    x = np.array([[6, 5, 7], [7, -1, 5], [0, 1, -6], [-3, 2, 2]], np.int8)
    window = x[0:3, 0:3]
    assert window.max() == 7 and [tuple(p) for p in np.argwhere(window == 7)] == [(0, 2), (1, 0)]
    args = [x.reshape(4, 3, 1).astype(ml_dtypes.int4), np.array(0, ml_dtypes.int4),
            np.ones((2, 2, 1), ml_dtypes.int4)]
    report = diff(SAS_TIES, args, worker=worker)
    hloref_value = np.asarray(report.expected).astype(np.int8)[:, :, 0]
    xla_value = np.asarray(report.actual).astype(np.int8)[:, :, 0]
    assert hloref_value[0, 2] >= 1 and xla_value[1, 0] >= 1
    assert report.verdict == "known-gap" and report.known_gap == "select-and-scatter-ties", \
        report.summary()
    wrong = np.asarray(report.expected).astype(np.int8).copy()
    wrong[0, 2, 0] -= 1
    wrong[1, 1, 0] += 1  # -1 at [1, 1] is no window's maximum
    planted = diff(SAS_TIES, args, worker=worker, oracle_value=wrong.astype(ml_dtypes.int4))
    assert planted.verdict == "mismatch", planted.summary()


@pytest.mark.parametrize("y,x,actual,want", [
    (0j, -5.5758824 + 14.647746j, np.pi + 0j, "complex-special"),  # on the cut: either side
    (0j, 5.5758824 + 14.647746j, np.pi + 0j, None),                # Re x > 0: off the cut
    (1e-3 + 0j, -5.5758824 + 14.647746j, np.pi + 0j, None),        # y != 0: off the cut
    (0j, -5.5758824 + 14.647746j, 3.0 + 0j, None),                 # on it, but no side's value
])
def test_a_complex_atan2_exactly_on_its_branch_cut_may_take_either_side(y, x, actual, want):
    """A campaign (seed 41): c64 atan2(0, -5.58 + 14.65i). atan2(y, x) = -i log((x + iy)
    / sqrt(x^2 + y^2)); with y = 0 the quotient is x / sqrt(x^2) = -1 when Re x < 0 (the
    principal sqrt(x^2) is -x there), so the log sits on its cut and the result is +pi or
    -pi by the sign of a zero inside the expansion: hloref -pi, XLA:CPU +pi. Off the cut
    the same difference is not this class."""
    z = np.complex128(x)
    if want:
        assert np.isclose(z / np.sqrt(z * z), -1)
    expected = np.array([-np.pi + 0j], np.complex64)
    report = _localized("atan2", [np.array([y], np.complex64), np.array([x], np.complex64)],
                        expected, np.array([actual], np.complex64))
    assert known_difference(report) == want


_SORT_F8 = """HloModule m

cmp {{
  a = f8e5m2[] parameter(0)
  b = f8e5m2[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GT{total}
}}

ENTRY e {{
  x = f8e5m2[3] parameter(0)
  ROOT s = f8e5m2[3] sort(x), dimensions={{0}}, is_stable=true, to_apply=cmp
}}
"""


@pytest.mark.parametrize("total,values,want", [
    (", type=TOTALORDER", [np.nan, 3.0, 1.0], "nan-sign-payload"),  # the NaN's sign orders it
    (", type=TOTALORDER", [2.0, 3.0, 1.0], None),                   # no NaN
    ("", [np.nan, 3.0, 1.0], None),                                  # no TOTALORDER compare
])
def test_a_sort_by_totalorder_reads_the_sign_of_its_nans(total, values, want):
    """A campaign (seed 41): a descending TOTALORDER sort of f8e5m2 sums holding NaN put
    the NaNs last in hloref and first in XLA:CPU: TOTALORDER orders -NaN below every
    number and +NaN above, and the sign of a NaN an addition produces is unspecified
    (IEEE 754 6.3), so where it sorts is implementation-defined."""
    from hloref import parse
    from hloref.fuzz.known_classes import known_gap
    module = parse(_SORT_F8.format(total=total))
    x = np.array(values).astype(ml_dtypes.float8_e5m2)
    assert known_gap(module, {("e", "x"): x}) == want


_F4_ACOS_BITS = """HloModule m

ENTRY e {
  x = f4e2m1fn[4] parameter(0)
  a = f4e2m1fn[4] acos(x)
  ROOT b = s4[4] bitcast-convert(a)
}
"""


@pytest.mark.parametrize("values,want", [
    ([3.0, 0.0, 1.5, -1.5], "nan-sign-payload"),  # acos(3), acos(+-1.5): NaN into f4e2m1fn
    ([1.0, 0.0, 0.5, -0.5], None),                 # all in acos's domain
    (None, None),                                   # the operand's value unknown: no excuse
])
def test_a_nan_made_an_f4e2m1fn_zero_read_by_its_bits_is_the_nan_sign_gap(values, want):
    """A campaign (seed 0, the #14 benchmark): acos of f4e2m1fn 3 and +-1.5 is NaN, which
    f4e2m1fn cannot hold: it becomes a zero with a sign taken from the NaN's (ml_dtypes:
    +NaN -> -0, bits 0x8; -NaN -> +0, checked below), and a bitcast to s4 shows it (0
    in hloref, -8 on XLA:CPU at -O0). The NaN's sign is unspecified, so is the zero's."""
    from hloref import parse
    from hloref.fuzz.known_classes import known_gap
    nans = np.array([np.nan, -np.nan], np.float32).astype(ml_dtypes.float4_e2m1fn)
    assert nans.view(np.uint8).tolist() == [8, 0]
    known = {} if values is None else \
        {("e", "x"): np.array(values).astype(ml_dtypes.float4_e2m1fn)}
    assert known_gap(parse(_F4_ACOS_BITS), known) == want


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


@pytest.mark.parametrize("base,actual,want", [
    (-2 + 0j, -1j * np.sqrt(2), "complex-special"),  # on the cut: the other side's value
    (-2 + 0j, 1.0 + 0j, None),                        # on the cut, but neither side's
    (2 + 0j, -np.sqrt(2) + 0j, None),                 # off the cut
])
def test_a_complex_power_exactly_on_its_branch_cut_may_take_either_side(base, actual, want):
    """power(z, 1/2) at z = -2 + 0i: the principal value is i sqrt(2) (hloref, numpy),
    the other side of the negative real axis -i sqrt(2); a two-operand op whose cut is
    on its first operand (the table's entries see every operand)."""
    z = np.array([base], np.complex128)
    w = np.array([0.5 + 0j], np.complex128)
    expected = np.power(z, w)
    if want:
        assert np.isclose(expected[0], 1j * np.sqrt(2))
    report = _localized("power", [z, w], expected, np.array([actual], np.complex128))
    assert known_difference(report) == want


@pytest.mark.parametrize("x,mean,want", [
    (-22.33, -8136.0, "accumulation-overflow"),  # the campaign's values (seed 71)
    (-22.33, -1.0, None),                        # every term of the expansion stays small
])
def test_batch_norm_inference_terms_that_overflow_f16_are_the_accumulation_difference(
        x, mean, want):
    """f16 batch-norm-inference with scale = offset = mean = -8136, variance 1.687,
    epsilon 0.5 (a campaign, seed 71): by hand y = -8136 (x + 8136) / sqrt(2.187) - 8136
    = -4.46e7, beyond f16's 65,504: -inf, as hloref rounds it once. XLA's expansion
    computes x·t + (offset - mean·t), t = scale / sqrt(var + eps) = -5501: x·t = +122,840
    is +inf in f16 and offset - mean·t = -inf, so NaN. With mean = -1 (and scale = -1)
    no term leaves f16's range (by hand: 22.33 / 1.48 = 15), so a mismatch there is not
    this difference."""
    big = want is not None
    s = np.array([-8136.0 if big else -1.0], np.float16)
    operands = [np.array([[x]], np.float16), s, s, np.array([mean], np.float16),
                np.array([1.687], np.float16)]
    report = _localized("batch-norm-inference", operands, np.array([[-np.inf]], np.float16),
                        np.array([[np.nan]], np.float16))
    report.culprit.text = """HloModule isolated
ENTRY e {
  x = f16[1,1] parameter(0)
  s = f16[1] parameter(1)
  m = f16[1] parameter(2)
  v = f16[1] parameter(3)
  ROOT b = f16[1,1] batch-norm-inference(x, s, s, m, v), epsilon=0.5, feature_index=1
}
"""
    assert known_difference(report) == want


@pytest.mark.parametrize("ours,want", [
    (complex(-np.inf, np.inf), "complex-special"),  # z^z overflows: infinite parts
    (complex(-3.2e37, 1.1e38), None),               # a finite result XLA got wrong
])
def test_a_complex_power_whose_result_overflows_is_a_complex_special_value(ours, want):
    """z^z for z = 77.76 + 122.31i (a campaign, seed 71): z log z = 264.1 + 686.8i by
    hand, |z^z| = e^264 overflows c64 (e^88.7 at most), so hloref gives infinite parts
    (C99 G.6.3.1: cexp of a huge real part) and XLA:CPU NaN, the complex-special class;
    a finite result XLA gets wrong is not excused."""
    z = np.array([77.76276 + 122.3119j], np.complex64)
    report = _localized("power", [z, z], np.array([ours], np.complex64),
                        np.array([complex(np.nan, np.nan)], np.complex64))
    assert known_difference(report) == want


@pytest.mark.parametrize("init,want", [
    ("(0, 1)", "reduce-non-identity-init"),  # 1i: not add's identity
    ("(1, 0)", "reduce-non-identity-init"),
    ("(0, 0)", None),                        # 0: the identity
])
def test_a_complex_reduce_init_is_the_identity_only_if_both_parts_are_zero(init, want):
    """A c64 add-reduce whose init is 0 + 1i applies a value that is not the identity, so
    where XLA:CPU folds it in (once per partial accumulator) is implementation-defined:
    the documented gap. The check used to cast the init to a real float, which drops the
    imaginary part, and took 0 + 1i for 0 (a ComplexWarning in a campaign, seed 79)."""
    from hloref import parse
    from hloref.fuzz.known_classes import known_gap
    text = f"""HloModule m
add {{
  a = c64[] parameter(0)
  b = c64[] parameter(1)
  ROOT s = c64[] add(a, b)
}}
ENTRY e {{
  x = c64[4] parameter(0)
  z = c64[] constant({init})
  ROOT r = c64[] reduce(x, z), dimensions={{0}}, to_apply=add
}}
"""
    module = parse(text)
    x = np.array([1 + 2j, 3, 4j, -1], np.complex64)
    assert known_gap(module, {("e", "x"): x}) == want


def test_complex_special_and_overflow_classes_of_a_campaign_seed_79():
    """Three findings of a campaign (seed 79), each a catalogued class once seen whole:

    * atan2(y = 0, x = -0.478 - 0.325i) is on atan2's cut (y = 0, Re x < 0): pi in
      hloref, -pi - 1.2e-7i in XLA:CPU; the off-cut elements where XLA:CPU is 6e-8 from
      hloref's 0 (within 4 ULPs) no longer hide the class;
    * c128 z / (0 + 0i) with a constant divisor: by C99 Annex G (and XLA:CPU's divide of
      a zero parameter) an infinity; the simplifier's z * (1 / 0) gives NaN;
    * a convolution whose product (-1.7e37)(-9.1e35) overflows f32 to +inf beside an
      infinite operand element, where the exact sum is -inf: opposite infinities."""
    y = np.array([0j, 0j], np.complex64)
    x = np.array([-0.47823247 - 0.3247416j, 1.0058099 + 1.0600473j], np.complex64)
    report = _localized("atan2", [y, x], np.array([np.pi + 0j, 0j], np.complex64),
                        np.array([-np.pi - 1.1920928e-07j, 6.2852756e-08 + 0j], np.complex64))
    assert known_difference(report) == "complex-special"
    far = _localized("atan2", [y, x], np.array([np.pi + 0j, 0j], np.complex64),
                     np.array([-np.pi + 0j, 0.5 + 0j], np.complex64))
    assert known_difference(far) is None  # 0.5 off the cut is no cut effect

    text = """HloModule m
ENTRY e {
  p = c128[2] parameter(0)
  z = c128[] constant((0, 0))
  b = c128[2] broadcast(z), dimensions={}
  ROOT d = c128[2] divide(p, b)
}
"""
    num = np.array([-9.13 + 17.17j, 28.0 - 25.0j])
    inf = np.array([complex(-np.inf, np.inf), complex(np.inf, -np.inf)])
    nan = np.full(2, complex(np.nan, np.nan))
    report = SimpleNamespace(verdict="mismatch", culprit=None, expected=inf, actual=nan)
    assert known_folding(report, text, [num]) == "complex-special"
    finite = SimpleNamespace(verdict="mismatch", culprit=None, expected=inf,
                             actual=np.array([1 + 1j, 2 + 2j]))
    assert known_folding(finite, text, [num]) is None

    lhs = np.array([[-np.inf, 3.4028235e38, -1.6718064e37]], np.float32)
    rhs = np.full((3, 1), -9.108927e35, np.float32)
    report = _localized("dot", [lhs, rhs], np.array([[-np.inf]], np.float32),
                        np.array([[np.inf]], np.float32))
    assert known_difference(report) == "accumulation-overflow"


@pytest.mark.parametrize("count, want", [(1, "complex-special"), (2, None)])
def test_atan2_cut_beside_an_off_cut_element_the_verdict_keeps_inside(count, want):
    """A campaign (seed 83): c64 atan2(y, x) with y = (0, 1/64), x = (-23.92 + 8.82i,
    3.60 + 14.16i). Element 0 is on the cut (y = 0, Re x < 0: x / sqrt(x^2) = -1 by hand,
    so the angle is +-pi): pi in hloref, -pi + 6e-8i in XLA:CPU. Element 1 is off the cut,
    2.6e-4 - 1.0e-3i, where XLA:CPU's expansion is 4.7e-8 away: beyond 4 ULPs of its
    magnitude, inside the culprit's verdict (which counts 1 element outside). The class
    holds when the verdict's count is the flipped elements alone, not when it also
    counts the off-cut one."""
    y = np.array([0j, 0.015625 + 0j], np.complex64)
    x = np.array([-23.919586 + 8.822664j, 3.5968428 + 14.158512j], np.complex64)
    report = _localized("atan2", [y, x],
                        np.array([np.pi + 0j, 2.6335768e-04 - 1.036673e-03j], np.complex64),
                        np.array([-np.pi + 5.9604645e-08j, 2.6339520e-04 - 1.0367024e-03j],
                                 np.complex64))
    report.culprit.verdict = SimpleNamespace(count=count)
    assert known_difference(report) == want


GROUPED_CONV = """HloModule m

ENTRY e {
  p = f64[2,2,3] parameter(0)
  k = f64[1,1,4] parameter(1)
  ROOT c = f64[4,7,2] convolution(p, k), window={size=1 pad=2_2}, dim_labels=fb0_i0o->f0b, feature_group_count=2
}
"""


@pytest.mark.parametrize("poison, want", [(-np.inf, "conv-groups-nonfinite"), (-3.0, None)])
def test_grouped_convolution_with_an_infinity_is_xla_cpus_group_converter(poison, want, xla):
    """A campaign (seed 89): a grouped f64 convolution (2 groups of one input feature,
    two output features each) whose group-0 input holds -inf. By the spec group 1's
    outputs read only input feature 1 (finite); XLA:CPU's convolution-group-converter
    multiplies the zeros of its expanded kernel by the -inf: NaN in group 1. With a
    finite value there, XLA agrees: a match."""
    p = np.arange(12, dtype=np.float64).reshape(2, 2, 3) - 5.0
    p[0, 0, 1] = poison
    k = np.array([[[0.641139559, 0.076115964, 0.063821535, -0.043233575]]])
    outcome = xla(GROUPED_CONV, [p, k])
    if want is None:
        assert outcome.verdict == "match"
    else:
        assert outcome.kind == "known" and outcome.known == want
        # by hand: group 1 (output features 2, 3) stays finite in hloref's value
        from hloref import evaluate
        value = evaluate(GROUPED_CONV, p, k)
        assert np.all(np.isfinite(value[2:]))
