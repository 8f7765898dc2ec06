"""The known-difference classifier (fuzz/known_gaps.py) on hand-built reports: FTZ
explains a mismatch only where XLA flushed hloref's subnormals to zero, never because
the oracle's values hold subnormals (uninitialised memory read as floats mostly does:
findings/xla-cpu-jaxlib-0.10.2/fusion-parameter-output-garbage was dismissed so).
Accumulation overflow, NaN bits and signs, and the gaps of tie orders are here too;
XLA:CPU's crashes and constant folding: test_known_gaps_crashes.py; narrow types,
transcendental bands and complex special values: test_known_gaps_values.py."""

from __future__ import annotations

from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest

from hloref.fuzz.known_classes import FILED, known_crash, known_folding
from hloref.fuzz.known_classes import KNOWN_DIFFERENCES, known_difference

from known_gaps_common import localized as _localized, worker, xla


SUB = np.float32(1e-40)  # subnormal in f32 (smallest normal 1.18e-38)


def _unlocalized(expected, actual):
    return SimpleNamespace(culprit=None, expected=expected, actual=actual)


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


def test_filed_known_differences_still_reproduce_on_replay():
    """The classes that are themselves stored findings do not hide them from replay."""
    assert {"sort-2bit", "int-divide-by-constant-zero", "concatenate-2bit-aborts"} <= FILED
    assert FILED <= set(KNOWN_DIFFERENCES)


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
