"""The numerical envelope (fuzz/envelope.py): what it lets through and what it flags.

Independent references: XLA:CPU's own results, other summation orders computed
with numpy, and values derived by hand from IEEE rounding."""

from __future__ import annotations

import numpy as np
import pytest

import hloref
from hloref.fuzz.check import check_modules
from hloref.fuzz.differential import diff
from hloref.fuzz.envelope import Envelope, EnvelopePolicy, Freedoms, sample
from hloref.fuzz.workers import OracleWorker

ADD = "add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }\n"
ROW_SUM = "HloModule m\n" + ADD + """ENTRY e {
  x = f32[64,4096] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[64] reduce(x, z), dimensions={1}, to_apply=add
}
"""


@pytest.fixture(scope="module")
def worker():
    with OracleWorker("xla") as w:
        yield w


def _envelope(text, *args, policy=None):
    module = hloref.parse(text)
    policy = policy or EnvelopePolicy()
    s = sample(module, list(args), policy)
    return Envelope(s.nominal, s.samples, policy, module), s


def test_xla_row_sums_inside_and_one_element_off_by_0_2_percent_flagged(worker):
    # the class of a real XLA bug: one element of a large batched reduction 0.2 % off,
    # while every instruction agrees with XLA in isolation
    x = np.random.default_rng(0).uniform(0.5, 1.5, (64, 4096)).astype(np.float32)
    good = diff(ROW_SUM, [x], worker=worker)
    assert good.verdict == "match", good.summary()
    for factor in (1.002, 1.0001):  # 0.2 % and a subtle 1e-4
        bad = np.array(good.actual, copy=True)
        bad[17] *= np.float32(factor)
        report = diff(ROW_SUM, [x], worker=worker, oracle_value=bad)
        assert report.verdict == "mismatch", report.summary()
        assert report.envelope.index == (17,) and report.envelope.count == 1
        assert report.envelope.widths > 1
        assert report.culprit is None and report.fault_stage == "code generation"


def test_other_summation_orders_are_inside_and_accumulation_freedom_is_what_allows_them():
    # pairwise (numpy), sequential f32, and reversed sequential f32 sums of the same rows
    x = np.random.default_rng(1).standard_normal((8, 3000)).astype(np.float32)
    env, _ = _envelope(ROW_SUM.replace("64,4096", "8,3000").replace("f32[64]", "f32[8]"), x)
    sequential = np.zeros(8, np.float32)
    for j in range(x.shape[1]):
        sequential += x[:, j]
    backwards = np.zeros(8, np.float32)
    for j in reversed(range(x.shape[1])):
        backwards += x[:, j]
    for other in (x.sum(axis=1, dtype=np.float32), sequential, backwards):
        assert env.check(other).ok, env.check(other)
    no_reordering = EnvelopePolicy(freedoms=Freedoms(accumulation=False))
    strict, _ = _envelope(ROW_SUM.replace("64,4096", "8,3000").replace("f32[64]", "f32[8]"), x,
                          policy=no_reordering)
    assert not strict.check(sequential).ok  # hloref's nominal is the exact sum rounded once


def test_exact_arithmetic_never_blurs():
    # small integers as floats: every add/multiply is exact, so no sample may move
    text = """HloModule m
ENTRY e {
  x = f32[5] parameter(0)
  two = f32[] constant(2)
  b = f32[5] broadcast(two), dimensions={}
  m = f32[5] multiply(x, b)
  ROOT s = f32[5] add(m, x)
}
"""
    x = np.arange(5, dtype=np.float32)
    env, s = _envelope(text, x)
    for v in s.samples:
        np.testing.assert_array_equal(v, 3 * x)  # by hand: 2x + x
    assert not env.check(3 * x + np.float32(2) ** -19 * 3 * x + np.float32(2) ** -20).ok


def test_random_rounding_picks_the_two_neighbours_of_the_exact_result():
    # 0.1f + 0.2f: exact sum 0.300000004470348358..., neighbours 0.29999998 and 0.30000001
    text = """HloModule m
ENTRY e {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""
    _, s = _envelope(text, np.float32(0.1), np.float32(0.2),
                     policy=EnvelopePolicy(samples=32))
    exact = np.float64(np.float32(0.1)) + np.float64(np.float32(0.2))
    lo = np.nextafter(np.float32(exact), np.float32(0))
    hi = np.nextafter(lo, np.float32(1))
    assert lo < exact < hi
    assert {float(v) for v in s.samples} == {float(lo), float(hi)}


def test_a_compare_on_a_rounding_edge_allows_both_outcomes_and_a_clear_one_does_not():
    text = """HloModule m
ENTRY e {
  a = f32[2] parameter(0)
  b = f32[2] parameter(1)
  t = f32[2] parameter(2)
  s = f32[2] add(a, b)
  ROOT c = pred[2] compare(s, t), direction=GT
}
"""
    # element 0: 0.1f + 0.2f rounds to 0.30000001 (nearest) or 0.29999998 (its lower
    # neighbour: the exact sum lies between them), and only the first is > 0.29999998;
    # element 1: 1 + 2 > 2.5, no doubt
    a = np.array([0.1, 1], np.float32)
    b = np.array([0.2, 2], np.float32)
    t = np.array([np.nextafter(np.float32(0.3), np.float32(0)), 2.5], np.float32)
    assert float(t[0]) == 0.29999998211860657
    env, _ = _envelope(text, a, b, t, policy=EnvelopePolicy(samples=16))
    assert env.check(np.array([True, True])).ok
    assert env.check(np.array([False, True])).ok
    assert not env.check(np.array([True, False])).ok


def test_loop_integration_matches_xla_and_a_wrong_step_size_is_flagged(worker):
    # 300 explicit Euler steps of y' = -y: the loop carries rounding from step to step
    text = """HloModule m
cond { p = (s32[], f32[16]) parameter(0)  i = s32[] get-tuple-element(p), index=0
       n = s32[] constant(300)  ROOT c = pred[] compare(i, n), direction=LT }
body { p = (s32[], f32[16]) parameter(0)  i = s32[] get-tuple-element(p), index=0
       y = f32[16] get-tuple-element(p), index=1  h = f32[] constant(0.01)
       hb = f32[16] broadcast(h), dimensions={}  d = f32[16] multiply(hb, y)
       y2 = f32[16] subtract(y, d)  one = s32[] constant(1)  i2 = s32[] add(i, one)
       ROOT t = (s32[], f32[16]) tuple(i2, y2) }
ENTRY e {
  y0 = f32[16] parameter(0)
  z = s32[] constant(0)
  t = (s32[], f32[16]) tuple(z, y0)
  w = (s32[], f32[16]) while(t), condition=cond, body=body
  ROOT r = f32[16] get-tuple-element(w), index=1
}
"""
    y0 = np.random.default_rng(2).uniform(1, 2, 16).astype(np.float32)
    report = diff(text, [y0], worker=worker)
    assert report.verdict == "match", report.summary()
    np.testing.assert_allclose(report.actual, y0 * 0.99 ** 300, rtol=1e-4)  # by hand
    wrong = text.replace("constant(0.01)", "constant(0.0100001)")  # 1e-5 relative
    mutated = check_modules(hloref.parse(text), hloref.parse(wrong), [y0])
    assert mutated.verdict == "mismatch", mutated.summary()


def test_math_budget_bounds_a_single_transcendental(worker):
    # exp's XLA:CPU budget is 7 ULP: a result 40 ULP off is outside, XLA's own inside
    text = "HloModule m\nENTRY e {\n  x = f32[256] parameter(0)\n  ROOT y = f32[256] exponential(x)\n}\n"
    x = np.linspace(-20, 20, 256).astype(np.float32)
    report = diff(text, [x], worker=worker)
    assert report.verdict == "match", report.summary()
    off = np.array(report.actual, copy=True)
    off[100] = np.float32(off[100] + 40 * np.spacing(off[100]))
    assert diff(text, [x], worker=worker, oracle_value=off).verdict == "mismatch"


def test_integer_outputs_are_exact_when_no_float_feeds_them():
    text = """HloModule m
ENTRY e {
  x = s32[4] parameter(0)
  ROOT y = s32[4] multiply(x, x)
}
"""
    x = np.array([1, 2, 3, 4], np.int32)
    env, _ = _envelope(text, x)
    assert env.check(x * x).ok
    assert not env.check(x * x + np.array([0, 0, 1, 0], np.int32)).ok


VARIADIC_WINDOW = """HloModule m
pair {
  x1 = f32[] parameter(0)  x2 = f32[] parameter(1)  y1 = f32[] parameter(2)  y2 = f32[] parameter(3)
  s = f32[] add(x1, y1)  m = f32[] maximum(x2, y2)
  ROOT t = (f32[], f32[]) tuple(s, m)
}
ENTRY e {
  a = f32[3,2,4,6] parameter(0)  b = f32[3,2,4,6] parameter(1)
  z = f32[] constant(0)  ninf = f32[] constant(-inf)
  ROOT r = (f32[3,2,4,6], f32[3,2,4,6]) reduce-window(a, b, z, ninf), window={size=2x1x2x1 pad=0_1x0_0x0_1x0_0}, to_apply=pair
}
"""


def test_variadic_reducer_sums_in_any_order_and_its_max_stays_exact(worker):
    # jax's lax_test testReduceWindowVariadic: (x1 + y1, max(x2, y2)). XLA:CPU sums
    # each window in its own order (5 of 32 of jax's cases differ from hloref's by a
    # few ULP); a planted 1e-4 error in the sum or in the max is flagged.
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((3, 2, 4, 6)) * 3).astype(np.float32)
    b = rng.standard_normal((3, 2, 4, 6)).astype(np.float32)
    good = diff(VARIADIC_WINDOW, [a, b], worker=worker)
    assert good.verdict == "match", good.summary()
    env, _ = _envelope(VARIADIC_WINDOW, a, b)
    sums, maxes = env.nominal
    # the 4-term window sums in every order, in f32, are inside
    for order in ((0, 1, 2, 3), (3, 2, 1, 0), (1, 3, 0, 2)):
        terms = [np.pad(a, ((0, 1), (0, 0), (0, 1), (0, 0)))[i:i + 3, :, j:j + 4]
                 for i, j in ((0, 0), (0, 1), (1, 0), (1, 1))]
        acc = np.zeros_like(sums)
        for k in order:
            acc = (acc + terms[k]).astype(np.float32)
        assert env.check((acc, maxes)).ok
    bad_sum = np.array(sums, copy=True)
    bad_sum[1, 0, 2, 3] += np.float32(1e-4) * max(1.0, abs(float(bad_sum[1, 0, 2, 3])))
    assert not env.check((bad_sum, maxes)).ok
    bad_max = np.array(maxes, copy=True)
    bad_max[0, 0, 0, 0] *= np.float32(1.0001)  # beyond the per-type floor of 2 ULP
    assert not env.check((sums, bad_max)).ok


SIGN_AND_ZERO_TEST = """HloModule m
ENTRY e {
  x = f32[64] parameter(0)
  z = f32[] constant(0)
  zb = f32[64] broadcast(z), dimensions={}
  eq = pred[64] compare(x, zb), direction=EQ
  s = f32[64] sign(x)
  ROOT t = (pred[64], f32[64]) tuple(eq, s)
}
"""


def test_subnormal_operands_read_as_zero_is_xlas_daz_and_normal_values_stay_exact(worker):
    # jaxlib's CPU client runs with DAZ: x == 0 is true and sign(x) is 0 for subnormal
    # x (5 false alarms in jax's testInterpGradNan before the ftz freedom covered it)
    x = np.float32(np.exp(np.linspace(-95, -80, 64)))  # subnormal up to ~exp(-87.3)
    x[::7] *= -1
    xla = diff(SIGN_AND_ZERO_TEST, [x], worker=worker)
    eq, s = xla.actual
    assert eq.sum() > 0 and np.all(s[eq] == 0)  # XLA flushed some: the test means something
    assert xla.verdict == "match", xla.summary()
    strict = EnvelopePolicy(freedoms=Freedoms(ftz=False))
    assert diff(SIGN_AND_ZERO_TEST, [x], worker=worker, policy=strict).verdict == "mismatch"
    # normal values: the comparison and the sign are exact, a flipped one is flagged
    bad_eq, bad_s = np.array(eq, copy=True), np.array(s, copy=True)
    bad_eq[-1] = True
    report = diff(SIGN_AND_ZERO_TEST, [x], worker=worker, oracle_value=(bad_eq, s))
    assert report.verdict == "mismatch", report.summary()
    bad_s[-1] = 0.0
    report = diff(SIGN_AND_ZERO_TEST, [x], worker=worker, oracle_value=(eq, bad_s))
    assert report.verdict == "mismatch", report.summary()


SCAN_PRODUCT = """HloModule m
step {
  x = f32[3] parameter(0)
  c = f32[3] parameter(1)
  m = f32[3] multiply(c, x)
  ROOT t = (f32[3], f32[3]) tuple(m, m)
}
ENTRY e {
  xs = f32[3,6] parameter(0)
  init = f32[3] parameter(1)
  ROOT s = (f32[3,6], f32[3]) scan(xs, init), dimensions={1}, num_carries=1, to_apply=step
}
"""


def test_a_scan_carry_passing_through_the_subnormals_may_flush_to_zero_for_good(worker):
    # XLA:CPU runs a scan as a loop with FTZ/DAZ: 2e-38 * 0.5 = 1e-38 is subnormal and
    # flushed, so the running product stays 0 where the written semantics (hloref)
    # come back to 4e-38, 8e-38 (spmd_partitioner_test.cc:4867, 1,024 steps of random
    # factors). The scan's body gets the freedoms of a while body.
    xs = np.array([[0.5, 4, 2, 1, 1, 1],            # dips below the smallest normal
                   [1.5, 0.5, 3, 0.25, 2, 1],        # normal all along
                   [0.5, 0.5, 0.5, 0.5, 0.5, 8]], np.float32)  # tiny but normal
    init = np.array([2e-38, 1.0, 1e-30], np.float32)
    xla = diff(SCAN_PRODUCT, [xs, init], worker=worker)
    out, carry = xla.actual
    # by hand, XLA:CPU's value: row 0 flushed at the first step, rows 1, 2 exact products
    np.testing.assert_array_equal(out[0], np.zeros(6, np.float32))
    np.testing.assert_array_equal(out[1], np.cumprod(xs[1]).astype(np.float32))
    np.testing.assert_array_equal(out[2], (np.float32(1e-30) * np.cumprod(xs[2])).astype(np.float32))
    assert carry[0] == 0
    assert xla.verdict == "match", xla.summary()
    # a normal product off by 0.1 %, or a tiny but normal one zeroed, is still flagged
    bad = np.array(out, copy=True)
    bad[1, 3] *= np.float32(1.001)
    report = diff(SCAN_PRODUCT, [xs, init], worker=worker, oracle_value=(bad, carry))
    assert report.verdict == "mismatch", report.summary()
    bad = np.array(out, copy=True)
    bad[2, 4:] = 0
    report = diff(SCAN_PRODUCT, [xs, init], worker=worker, oracle_value=(bad, carry))
    assert report.verdict == "mismatch", report.summary()


SCAN_ROW_SUMS = "HloModule m\n" + ADD + """step {
  row = f32[512] parameter(0)
  c = f32[] parameter(1)
  z = f32[] constant(0)
  s = f32[] reduce(row, z), dimensions={0}, to_apply=add
  n = f32[] add(s, c)
  ROOT t = (f32[], f32[]) tuple(n, n)
}
ENTRY e {
  xs = f32[64,512] parameter(0)
  init = f32[] parameter(1)
  ROOT s = (f32[64], f32[]) scan(xs, init), dimensions={0}, num_carries=1, to_apply=step
}
"""


def test_a_reduce_in_a_scan_body_sums_in_any_order(worker):
    # XLA:CPU sums each row of the scan's body in its own order: 12 of the 64 running
    # sums are up to 6 ULP from the written order's (spmd_partitioner_test.cc:4651)
    x = np.random.default_rng(1).uniform(-1, 1, (64, 512)).astype(np.float32)
    init = np.float32(0.5)
    xla = diff(SCAN_ROW_SUMS, [x, init], worker=worker)
    assert xla.verdict == "match", xla.summary()
    out, carry = xla.actual
    written = hloref.evaluate(hloref.parse(SCAN_ROW_SUMS), x, init)[0]
    assert not np.array_equal(out, written)  # XLA's order differs: the test means something
    bad = np.array(out, copy=True)
    bad[0] *= np.float32(1.001)  # 0.1 % of the first row sum
    report = diff(SCAN_ROW_SUMS, [x, init], worker=worker, oracle_value=(bad, carry))
    assert report.verdict == "mismatch", report.summary()


COMPLEX_DIVIDE = """HloModule m
ENTRY e {
  a = c64[4] parameter(0)
  b = c64[4] parameter(1)
  ROOT q = c64[4] divide(a, b)
}
"""


def test_complex_infinities_match_whatever_their_other_part(worker):
    # C99 G.3: a complex value with an infinite part is an infinity. XLA:CPU's divide
    # gives (inf, -inf) where Smith's quotient is (inf, NaN) (its ratio b_r/b_i is
    # subnormal and flushed, so its Annex G recovery runs), and (NaN, -inf) where
    # hloref's is (inf, -inf): all the same complex infinity (2 mismatches in jax's
    # FunctionAccuracyTest sinc before). A finite value against an infinity, or a
    # finite one off by 1e-3, is still flagged.
    inf = np.inf
    a = np.array([complex(-inf, -inf), complex(inf, 1), 1 + 2j, 3 - 1j], np.complex64)
    b = np.array([complex(-1.4191163e-07, -2.4145012e+31), complex(1e-30, 1e30), 3 + 4j, 1j],
                 np.complex64)
    report = diff(COMPLEX_DIVIDE, [a, b], worker=worker)
    assert report.verdict == "match", report.summary()
    theirs = np.array(report.actual, copy=True)
    assert np.isinf(theirs[0].imag) and np.isinf(theirs[1].imag)  # XLA's own infinities
    bad = np.array(theirs, copy=True)
    bad[0] = complex(3e38, 0)
    assert diff(COMPLEX_DIVIDE, [a, b], worker=worker, oracle_value=bad).verdict == "mismatch"
    bad = np.array(theirs, copy=True)
    bad[2] *= np.complex64(1.001)
    assert diff(COMPLEX_DIVIDE, [a, b], worker=worker, oracle_value=bad).verdict == "mismatch"


PRODUCT_WINDOW = """HloModule R2Window
mul {
  lhs = f32[] parameter(0)
  rhs = f32[] parameter(1)
  ROOT mul = f32[] multiply(lhs, rhs)
}
ENTRY R2Window {
  operand = f32[256,384]{1,0} parameter(0)
  constant = f32[] constant(1)
  ROOT reduce-window = f32[256,384]{1,0} reduce-window(operand, constant), window={size=2x3 pad=0_1x1_1}, to_apply=mul
}
"""


def test_products_multiply_in_any_order(worker):
    # XLA's reduce_window_test.cc R2General256x384: XLA:CPU reassociates the 6-factor
    # products (up to 3 ULP from hloref's left-to-right value: a conformance false
    # alarm before multiply combiners had the accumulation freedom); a 1e-4 relative
    # error is still flagged
    x = np.random.default_rng(3).uniform(-2, 2, (256, 384)).astype(np.float32)
    report = diff(PRODUCT_WINDOW, [x], worker=worker)
    assert report.verdict == "match", report.summary()
    env, _ = _envelope(PRODUCT_WINDOW, x)
    p = np.pad(x, ((0, 1), (1, 1)), constant_values=1)
    factors = [p[i:i + 256, j:j + 384] for i in range(2) for j in range(3)]
    for order in ((0, 1, 2, 3, 4, 5), (5, 4, 3, 2, 1, 0), (0, 5, 1, 4, 2, 3)):
        acc = np.ones_like(x)
        for k in order:
            acc = (acc * factors[k]).astype(np.float32)
        assert env.check(acc).ok, env.check(acc)
    bad = np.array(report.actual, copy=True)
    bad[100, 200] *= np.float32(1.0001)
    assert diff(PRODUCT_WINDOW, [x], worker=worker, oracle_value=bad).verdict == "mismatch"


COMPLEX_MULTIPLY = """HloModule m
ENTRY e {
  a = c64[3] parameter(0)
  b = c64[3] parameter(1)
  ROOT p = c64[3] multiply(a, b)
}
"""


def test_a_subnormal_part_of_a_complex_result_may_flush(worker):
    # (1e-13 + 5e-20i)(1e-19 + 0i) = 1e-32 + 5e-39i has a subnormal imaginary part,
    # which XLA:CPU flushes to 0 (jax's sinc on the complex plane), 7 ULP of |z| away;
    # a normal value off by 1e-3 is flagged
    a = np.array([1e-13 + 5e-20j, 1 + 2j, 3 - 1j], np.complex64)
    b = np.array([1e-19 + 0j, 2 - 1j, 1 + 1j], np.complex64)
    report = diff(COMPLEX_MULTIPLY, [a, b], worker=worker)
    assert report.actual[0].imag == 0 and report.expected[0].imag != 0  # XLA flushed it
    assert report.verdict == "match", report.summary()
    strict = EnvelopePolicy(freedoms=Freedoms(ftz=False))
    assert diff(COMPLEX_MULTIPLY, [a, b], worker=worker, policy=strict).verdict == "mismatch"
    bad = np.array(report.actual, copy=True)
    bad[1] *= np.complex64(1.001)
    assert diff(COMPLEX_MULTIPLY, [a, b], worker=worker, oracle_value=bad).verdict == "mismatch"


REPEATED_SUM = """HloModule m
add {
  lhs.0 = f32[] parameter(0)  lhs.1 = f32[] parameter(1)
  rhs.0 = f32[] parameter(2)  rhs.1 = f32[] parameter(3)
  add.0 = f32[] add(lhs.0, rhs.0)
  add.1 = f32[] add(lhs.1, rhs.1)
  ROOT tuple = (f32[], f32[]) tuple(add.0, add.0)
}
ENTRY e {
  p0 = f32[40,40] parameter(0)
  p1 = f32[40,40] parameter(1)
  c = f32[] constant(0)
  ROOT rw = (f32[33,33], f32[33,33]) reduce-window(p0, p1, c, c), window={size=8x8}, to_apply=add
}
"""


def test_a_variadic_output_repeating_another_sum_reorders_like_it(worker):
    # XLA's reduce_window_test.cc VariadicWithNonTrivialWindows: the reducer returns
    # (add.0, add.0), so both outputs are the window sums of operand 0 and XLA:CPU
    # orders the second one's 64 terms its own way; 1e-4 off is still flagged
    rng = np.random.default_rng(5)
    a, b = (rng.standard_normal((40, 40)).astype(np.float32) for _ in range(2))
    report = diff(REPEATED_SUM, [a, b], worker=worker)
    assert report.verdict == "match", report.summary()
    first, second = report.actual
    bad = np.array(second, copy=True)
    bad[10, 20] += np.float32(1e-4) * max(1.0, abs(float(bad[10, 20])))
    assert diff(REPEATED_SUM, [a, b], worker=worker,
                oracle_value=(first, bad)).verdict == "mismatch"


FMA_MODULE = """HloModule eltwise_f32_0
llvm_fusion {
  p0 = f32[1024,1024] parameter(0)
  p1 = f32[1024,1024] parameter(1)
  add0 = f32[1024,1024] add(p0, p1)
  mul0 = f32[1024,1024] multiply(add0, add0)
  ROOT sub = f32[1024,1024] subtract(mul0, p0)
}
ENTRY e {
  p0 = f32[1024,1024] parameter(0)
  p1 = f32[1024,1024] parameter(1)
  ROOT result = f32[1024,1024] fusion(p0, p1), kind=kLoop, calls=llvm_fusion
}
"""


def test_fma_contraction_with_cancellation_is_inside(worker):
    # XLA's llvm_kernel_backend_test.cc module on the conformance script's seeded inputs:
    # XLA:CPU computes (p0 + p1)^2 - p0 as one FMA; on 3 of the 1,048,576 elements the
    # product nearly cancels p0 and the FMA's residual fell half an envelope width
    # outside before the envelope contracted a product into its add or subtract in half
    # the runs; an error of 1e-4 of the operands' scale is still flagged
    from hloref.inputs import random_value
    module = hloref.parse(FMA_MODULE)
    rng = np.random.default_rng(0)
    p0, p1 = (random_value(p.shape, rng) for p in module.entry.parameters)
    report = diff(FMA_MODULE, [p0, p1], worker=worker)
    assert report.verdict == "match", report.summary()
    bad = np.array(report.actual, copy=True)
    bad[100, 200] += np.float32(1e-4) * max(1.0, abs(float(p0[100, 200])))
    assert diff(FMA_MODULE, [p0, p1], worker=worker, oracle_value=bad).verdict == "mismatch"


def test_bf16_all_reduce_on_8_devices_sums_in_f32_once_and_a_wrong_element_is_flagged():
    # XLA:CPU (jaxlib 0.10.2, 8 host devices) returns a bf16 all-reduce as the f32 sum
    # of the 8 terms rounded once: checked equal on all 4,096 elements of this very input
    # (and the same on every device); hloref adds in bf16 device by device. The
    # accumulation freedom of an all-reduce is over the group's terms (Σ|terms| from the
    # collective on |x|, n = group size), not the result's magnitude alone.
    import ml_dtypes
    from hloref.fuzz.perturb import sample_program
    text = """HloModule m, replica_count=8
add { a = bf16[] parameter(0) b = bf16[] parameter(1) ROOT c = bf16[] add(a, b) }
ENTRY e { x = bf16[4096] parameter(0)
  ar = bf16[4096] all-reduce(x), replica_groups={}, to_apply=add
  ROOT m = bf16[4096] multiply(ar, x) }"""
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal(4096).astype(ml_dtypes.bfloat16) for _ in range(8)]
    module = hloref.parse(text)
    f32 = [x.astype(np.float32) for x in xs]
    once = np.sum(np.stack(f32), axis=0).astype(ml_dtypes.bfloat16)
    xla_like = [(once.astype(np.float32) * f).astype(ml_dtypes.bfloat16) for f in f32]
    policy = EnvelopePolicy()
    runs = sample_program(lambda hooks: tuple(hloref.evaluate(
        module, xs, interpreter_options=lambda d: hooks.interpreter_options(module, f"d{d}"))),
        policy)
    env = Envelope(runs.nominal, runs.samples, policy, module)
    differ = sum(int(np.sum(a.astype(np.float32) != b.astype(np.float32)))
                 for a, b in zip(runs.nominal, xla_like))
    assert differ > 1000  # the two orders really differ
    assert env.check(tuple(xla_like)).ok
    bad = [v.copy() for v in xla_like]
    i = int(np.argmax(np.abs(bad[5].astype(np.float32))))
    bad[5][i] = ml_dtypes.bfloat16(float(bad[5][i]) * 1.1)
    verdict = env.check(tuple(bad))
    assert not verdict.ok and verdict.count == 1


LOGADDEXP = """
{name} {{
  x = {t}[] parameter(0)
  y = {t}[] parameter(1)
  sub = {t}[] subtract(x, y)
  ne = pred[] compare(sub, sub), direction=NE
  add = {t}[] add(x, y)
  mx = {t}[] maximum(x, y)
  ab = {t}[] abs(sub)
  ng = {t}[] negate(ab)
  ex = {t}[] exponential(ng)
  l1 = {t}[] log-plus-one(ex)
  a3 = {t}[] add(mx, l1)
  ROOT s = {t}[] select(ne, add, a3)
}}
"""

#: lax.cumlogsumexp as jax lowers it (a reduce-window with a logaddexp reducer, the
#: window the whole row, padded 63 below) and a logsumexp reduce with the same reducer
CUMLOGSUMEXP = "HloModule m\n" + LOGADDEXP.format(name="lae", t="f32") + """
ENTRY e {
  x = f32[16,64] parameter(0)
  ninf = f32[] constant(-inf)
  c = f32[16,64] reduce-window(x, ninf), window={size=1x64 pad=0_0x63_0}, to_apply=lae
  r = f32[16] reduce(x, ninf), dimensions={1}, to_apply=lae
  ROOT t = (f32[16,64], f32[16]) tuple(c, r)
}
"""

X_PLUS_2_ABS_Y = """HloModule m
r {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  a = f32[] abs(y)
  two = f32[] constant(2)
  m = f32[] multiply(two, a)
  ROOT s = f32[] add(x, m)
}
ENTRY e {
  x = f32[16,64] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[16] reduce(x, z), dimensions={1}, to_apply=r
}
"""


def test_a_logaddexp_reducer_folds_in_any_order_and_a_wrong_element_is_flagged(worker):
    """XLA:CPU applies a written reducer in its own order (hloref: a tree); logaddexp is
    associative up to rounding (fuzz/reducers.py), so the envelope allows the other
    order: XLA:CPU's cumlogsumexp and logsumexp are inside; one element 1e-4 off (far
    more than a few roundings of logaddexp, 4096 ULPs at this size) is flagged, in each
    output. Without the order budget this input is a mismatch (and jax's own
    cumlogsumexp program was called a known gap, non-associative-reducer)."""
    x = np.random.default_rng(1).standard_normal((16, 64)).astype(np.float32)
    good = diff(CUMLOGSUMEXP, [x], worker=worker)
    assert good.verdict == "match", good.summary()
    # the value by hand (in f64) is within the tolerance too: the oracle is not wrong
    exact = np.logaddexp.accumulate(x.astype(np.float64), axis=1)
    np.testing.assert_allclose(good.expected[0], exact, rtol=1e-5, atol=1e-5)
    for out, index in ((0, (3, 40)), (1, (9,))):
        bad = [np.array(v, copy=True) for v in good.expected]
        bad[out][index] = np.float32(bad[out][index] * (1 + 1e-4) + 1e-4)
        report = diff(CUMLOGSUMEXP, [x], worker=worker, oracle_value=tuple(bad))
        assert report.verdict == "mismatch", report.summary()


def test_a_reducer_that_is_not_associative_gets_no_order_budget():
    """``r(x, y) = x + 2|y|`` folded in another order gives another value (by hand, a
    row [1, -1, 2] with init 0: from the left r(r(r(0, 1), -1), 2) = r(r(2, -1), 2) =
    r(4, 2) = 8; as hloref's tree, r(0, r(r(1, -1), 2)) = r(0, r(3, 2)) = r(0, 7) = 14):
    no order is the answer, so the envelope does not widen for it (the verdict names the
    known gap instead: every sampled run equals the nominal one), and the reducer check
    says so."""
    from hloref.fuzz.reducers import reorder_free
    module = hloref.parse(X_PLUS_2_ABS_Y)
    assert not reorder_free(module, module.computations["r"])
    x = np.random.default_rng(1).standard_normal((16, 64)).astype(np.float32)
    env, s = _envelope(X_PLUS_2_ABS_Y, x)
    left = np.asarray(hloref.evaluate(module, x))  # the tree (nominal)
    assert np.array_equal(np.asarray(s.nominal), left)
    for run in s.samples:
        assert np.array_equal(np.asarray(run), left)


def _svd_values_module(x):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    def f(x):
        xc = x - jnp.mean(x, axis=0)
        return jnp.linalg.svd(xc, compute_uv=False), jnp.linalg.eigvalsh(xc.T @ xc)
    return jax.jit(f).lower(x).as_text(dialect="hlo")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_single_precision_lapack_results_carry_their_backward_error(worker, seed):
    """jnp.linalg.svd / eigvalsh lower to lapack_sgesdd_ffi / lapack_ssyevd_ffi: XLA:CPU
    runs the f32 routines, hloref the f64 ones rounded once, so XLA's values carry the
    f32 algorithm's error, up to p(n)·u·‖A‖₂ (Weyl; Higham Thm 19.4): the envelope
    allows 2n·u·max|values| (fuzz/error_bounds.lapack_atol). Before, the tuple results
    of these custom calls got no freedom at all (a singular value 8 ULPs off was a
    mismatch). The values by hand (numpy's f64 SVD) agree with both; a value 0.2 % off
    is still flagged."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((50, 6)) @ rng.standard_normal((6, 6))).astype(np.float32)
    text = _svd_values_module(x)
    good = diff(text, [x], worker=worker)
    assert good.verdict == "match", good.summary()
    xc = x.astype(np.float64) - x.astype(np.float64).mean(axis=0)
    np.testing.assert_allclose(good.expected[0], np.linalg.svd(xc, compute_uv=False),
                               rtol=1e-4, atol=1e-4 * np.abs(good.expected[0]).max())
    for out in (0, 1):
        bad = [np.array(v, copy=True) for v in good.expected]
        # the median value (the bound is relative to the largest: a value far below it,
        # e.g. the smallest singular value here, is not known to 0.2 % by the f32 routine)
        k = int(np.argsort(np.abs(bad[out]))[len(bad[out]) // 2])
        bad[out][k] = np.float32(bad[out][k] * 1.002)
        report = diff(text, [x], worker=worker, oracle_value=tuple(bad))
        assert report.verdict == "mismatch", (out, report.summary())


def _solve_module(a, b):
    jax = pytest.importorskip("jax")
    return jax.jit(lambda a, b: jax.numpy.linalg.solve(a, b)).lower(a, b).as_text(dialect="hlo")


@pytest.mark.parametrize("scale", [1.0, 1.5e7])
def test_an_lu_factor_keeps_its_multipliers_apart_from_the_size_of_u(worker, scale):
    """jnp.linalg.solve lowers to lapack_sgetrf_ffi (U and L's multipliers packed in one
    matrix) and two lapack_strsm_ffi. The packed matrix's budget was normwise over both
    factors, so for a matrix of entries ~1e7 (scipy's expm solves one: its Pade
    denominator) each multiplier, at most 1 with partial pivoting, was perturbed by
    2n·u·max|U| ~ 40, and every perturbed run of jax.scipy.linalg.expm overflowed. Now
    each factor has its own: XLA's solution is inside, the values agree with numpy's f64
    solve, and the largest element 0.2 % off is flagged."""
    rng = np.random.default_rng(3)
    a = (scale * (np.eye(12) + 0.3 * rng.standard_normal((12, 12)))).astype(np.float32)
    b = (scale * rng.standard_normal((12, 5))).astype(np.float32)
    text = _solve_module(a, b)
    s = sample(hloref.parse(text), [a, b], EnvelopePolicy())
    assert all(np.all(np.isfinite(np.asarray(run))) for run in s.samples)
    good = diff(text, [a, b], worker=worker)
    assert good.verdict == "match", good.summary()
    exact = np.linalg.solve(a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(np.asarray(good.expected), exact, rtol=1e-4, atol=1e-5)
    bad = np.array(good.expected, copy=True)
    # the largest element (the bounds are normwise: a small one is not known to 0.2 %)
    k = np.unravel_index(np.argmax(np.abs(bad)), bad.shape)
    bad[k] = np.float32(bad[k] * 1.002)
    assert diff(text, [a, b], worker=worker, oracle_value=bad).verdict == "mismatch"


MAP_CANCEL = """HloModule m
mapper {
  p = f32[] parameter(0)
  sq = f32[] multiply(p, p)
  d = f32[] subtract(sq, p)
  ROOT r = f32[] multiply(d, d)
}
ENTRY e {
  x = f32[12] parameter(0)
  ROOT m = f32[12] map(x), dimensions={0}, to_apply=mapper
}
"""


def test_a_map_body_rounds_like_the_program_it_is_inlined_into(worker):
    """XLA's MapInliner turns a map into elementwise ops of its caller, so its arithmetic
    gets the program's freedoms (here FMA contraction of x*x - x: cancellation near
    x = 1 makes it visible). A campaign (seed 7) filed XLA's answer on these inputs as a
    mismatch, 1.25 envelope widths outside, when the map body was not perturbed; a 1e-4
    error in one element is still flagged."""
    x = np.array([0.9847006, -2.6637502, 0.37592784, 1.3533571, -2.252971, 1.8977332,
                  -2.794907, 2.5834064, -3.2892787, -2.8026817, -4.2847834, 2.965452],
                 np.float32)
    good = diff(MAP_CANCEL, [x], worker=worker)
    assert good.verdict == "match", good.summary()
    by_hand = (x.astype(np.float64) ** 2 - x) ** 2
    np.testing.assert_allclose(good.expected, by_hand, rtol=1e-5)
    bad = np.array(good.expected, copy=True)
    bad[0] = np.float32(bad[0] * (1 + 1e-4))
    assert diff(MAP_CANCEL, [x], worker=worker, oracle_value=bad).verdict == "mismatch"


def test_a_vector_dot_product_stays_a_scalar_in_the_envelopes_runs(worker):
    # conjugate gradients' step size: alpha = rr / (p . Ap), a rank-0 dot broadcast back
    # over the vector. The perturbed runs sum f32 dots natively; that path returned the
    # scalar as shape (1,) and the broadcast refused it (the envelope said "error").
    text = """HloModule m
ENTRY e {
  a = f32[48] parameter(0)
  b = f32[48] parameter(1)
  d = f32[] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  s = f32[48] broadcast(d), dimensions={}
  ROOT r = f32[48] multiply(s, a)
}
"""
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((2, 48)).astype(np.float32)
    report = diff(text, [a, b], worker=worker, isolate_all=True)  # samples the envelope
    assert report.verdict == "match", report.summary()
    np.testing.assert_allclose(report.actual, np.dot(a.astype(np.float64), b) * a, rtol=1e-5)
    native = hloref.evaluator.interpreter.Interpreter(
        hloref.parse(text), op_overrides={"dot": {"accumulate": "native"}}).run([a, b])
    assert native.shape == (48,)


def test_a_value_without_correct_bits_may_overflow_only_where_the_program_came_near_it():
    """Conjugate gradients on check-dump's random (indefinite) matrix diverge for 200
    iterations: p.Ap reaches 2.6e37, within a factor 13 of f32's 3.4e38, and x spreads
    over [-6e9, 4e9] across the runs; XLA's tree_reduction_rewriter snapshot overflowed
    to NaN. Where the runs leave an element no correct bit (a spread larger than its
    magnitude) in a program whose values came within 2^-8 of overflowing, NaN and the
    infinities are possible outcomes; elements the runs agree on still are not, and
    neither is anything in a program far from overflowing (values by hand)."""
    policy = EnvelopePolicy()
    nominal = np.array([-2.0e9, 1.5], np.float32)
    samples = [np.array([v, 1.5 + 1e-7 * k], np.float32)
               for k, v in enumerate([-6.1e9, 4.2e9, -1.0e9, 3.0e8, -2.5e9, 1.0e9, -4.0e9, 2.0e9])]
    near = Envelope(nominal, samples, policy, peak=2.6e37 / 3.4028235e38)
    far = Envelope(nominal, samples, policy, peak=1e-20)
    for x in (np.nan, np.inf, -np.inf):
        assert near.check(np.array([x, 1.5], np.float32)).ok
        assert not far.check(np.array([x, 1.5], np.float32)).ok
    assert not near.check(np.array([-2.0e9, np.nan], np.float32)).ok  # 1.5 is determined
    assert not near.check(np.array([-2.0e9, 2.5], np.float32)).ok


def test_a_flushed_sum_may_feed_a_power_that_keeps_its_own_subnormal_exponent(worker):
    """power(add(p, p), p) at p = 1.4e-45 (a campaign, seed 7): XLA:CPU flushes the sum to
    0 but its power reads the subnormal exponent as it is: 0^1.4e-45 = 0, where hloref
    (no flushing) gives 2.8e-45^1.4e-45 = 1 (by hand: exp(1.4e-45 * ln 2.8e-45)). The
    DAZ runs of an instruction never coincide with its operand's, so some run flushes the
    sum and not the power (the two had the same runs, 1 chance in 70, and the envelope
    missed XLA's 0). The normal elements stay exact to their budgets."""
    text = """HloModule fuzz_16
ENTRY %main.16 {
  %p.1 = f32[4] parameter(0)
  %add.2 = f32[4] add(%p.1, %p.1)
  ROOT %power.3 = f32[4] power(%add.2, %p.1)
}
"""  # the campaign's names: its two instructions had the same DAZ runs
    p = np.array([1.4012985e-45, 5.0314018e-24, 0.75, 2.0], np.float32)
    report = diff(text, [p], worker=worker)
    assert report.actual[0] == 0.0 and report.expected[0] == 1.0
    assert report.verdict == "match", report.summary()
    strict = EnvelopePolicy(freedoms=Freedoms(ftz=False))
    assert diff(text, [p], worker=worker, policy=strict).verdict == "mismatch"
    off = np.array(report.actual, copy=True)
    off[3] *= 1.001  # (2*2)^2 = 16, by hand: 16.016 is outside
    assert diff(text, [p], worker=worker, oracle_value=off).verdict == "mismatch"


E8M0_ACOSH = """HloModule m
mx {
  a = f8e8m0fnu[] parameter(0)
  b = f8e8m0fnu[] parameter(1)
  ROOT m = f8e8m0fnu[] maximum(a, b)
}
ENTRY e {
  p = f8e8m0fnu[4] parameter(0)
  h = f8e8m0fnu[4] acosh(p)
  c = f32[4] convert(h)
  k = f8e8m0fnu[] parameter(1)
  r = f8e8m0fnu[] reduce(h, k), dimensions={0}, to_apply=mx
  ROOT t = (f32[4], f8e8m0fnu[]) tuple(c, r)
}
"""


def test_a_narrow_value_read_by_a_convert_and_a_reduce_may_keep_its_f32_value(worker):
    """acosh(512) = 6.93 rounds to 8 in f8e8m0fnu (by hand: 6.93 is above 6, the
    midpoint of 4 and 8); XLA:CPU's float normalization computes it in f32 and, with
    excess precision allowed, its convert reads the f32 value 6.93 although a max
    reduce reads it too (a campaign, seed 23). Without excess precision, 6.93 is
    outside."""
    import ml_dtypes as md
    p = np.array([512.0, 8192.0, 128.0, 2.0]).astype(md.float8_e8m0fnu)
    k = np.array(2.0 ** -127).astype(md.float8_e8m0fnu)
    report = diff(E8M0_ACOSH, [p, k], worker=worker)
    wide = np.arccosh(512.0)
    assert abs(float(report.actual[0][0]) - wide) < 1e-5  # XLA kept the f32 value
    assert float(report.expected[0][0]) == 8.0
    assert report.verdict == "match", report.summary()
    strict = EnvelopePolicy(freedoms=Freedoms(excess_precision=False))
    assert diff(E8M0_ACOSH, [p, k], worker=worker, policy=strict).verdict == "mismatch"


def test_the_overflow_reach_counts_sums_not_a_masks_constant():
    """Sampled.peak is what an accumulation reached (a sum an order the runs did not take
    may overflow), not a sentinel: attention's mask where(m, s, -3.4e38) reaches f32's
    largest value without any sum near it. By hand: the dot 1e19·1e18 + 1e19·1e18 = 2e37
    is 0.0588 of 3.4028235e38; the masked row's sum is 1 + 2 = 3."""
    masked = """HloModule m
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
ENTRY e {
  x = f32[4] parameter(0)
  m = pred[4] parameter(1)
  low = f32[] constant(-3.4028235e38)
  lows = f32[4] broadcast(low), dimensions={}
  s = f32[4] select(m, x, lows)
  z = f32[] constant(0)
  e = f32[4] exponential(s)
  ROOT r = f32[] reduce(e, z), dimensions={0}, to_apply=add
}
"""
    x = np.array([0.0, np.log(2.0), 1.0, 1.0], np.float32)
    mask = np.array([True, True, False, False])
    s = sample(hloref.parse(masked), [x, mask], EnvelopePolicy())
    assert abs(float(s.nominal) - 3.0) < 1e-6 and s.peak < 1e-30
    dot = """HloModule m
ENTRY e {
  a = f32[2] parameter(0)
  b = f32[2] parameter(1)
  ROOT d = f32[] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}
}
"""
    s = sample(hloref.parse(dot), [np.full(2, 1e19, np.float32), np.full(2, 1e18, np.float32)],
               EnvelopePolicy())
    assert abs(s.peak - 2e37 / 3.4028235e38) < 1e-4


F4_ADD_EMPTY_SLICE = """HloModule m

add16 {
  a = f16[] parameter(0)
  b = f16[] parameter(1)
  ROOT s = f16[] add(a, b)
}

ENTRY e {
  p = f4e2m1fn[3,3] parameter(0)
  d = f4e2m1fn[3,3] add(p, p)
  none = f4e2m1fn[0,0] slice(d), slice={[3:3], [3:3]}
  w = f16[3,3] convert(d)
  z = f16[] parameter(1)
  r = f16[3,3] reduce(w, z), dimensions={}, to_apply=add16
  ROOT t = (f4e2m1fn[0,0], f16[3,3]) tuple(none, r)
}
"""


def test_a_user_of_no_elements_does_not_keep_a_narrow_value_from_excess_precision(worker):
    """A campaign (seed 0, --xla-opt fast): f4e2m1fn 4 + 4 = 8 rounds to 6 (f4e2m1fn's
    largest value, by hand), but with excess precision XLA:CPU at -O0 converts the f32
    sum 8 to f16. The envelope lets a narrow result keep its f32 value only when every
    user reads it arithmetically; its other user here, a slice, has no elements and
    reads nothing. XLA's 8 is now inside; 20 (no rounding of 4 + 4 gives it) is not."""
    import ml_dtypes
    p = np.array([[-2, 1.5, 4], [-6, -6, 1.5], [-2, 1, 3]]).astype(ml_dtypes.float4_e2m1fn)
    z = np.float16(0)
    fast = {"xla_backend_optimization_level": 0}
    good = diff(F4_ADD_EMPTY_SLICE, [p, z], worker=worker, debug_options=fast)
    assert good.verdict == "match", good.summary()
    assert float(np.asarray(good.expected[1])[0, 2]) == 6.0  # hloref: rounded to f4
    bad = [np.array(v, copy=True) for v in good.expected]
    bad[1][0, 2] = np.float16(20.0)
    assert diff(F4_ADD_EMPTY_SLICE, [p, z], worker=worker, oracle_value=tuple(bad),
                debug_options=fast).verdict == "mismatch"


def test_an_element_most_runs_overflow_to_nan_may_take_any_finite_value():
    """Where the nominal value is finite and most perturbed runs gave NaN (an overflow
    in a type without infinities, or inf - inf), the few finite runs cannot bound the
    element: the values between the nominal one and the overflow are as reachable as
    the overflow. Any finite value of the type is then inside, NaN too; with most runs
    finite, their spread still bounds it (values by hand)."""
    import ml_dtypes
    e4 = ml_dtypes.float8_e4m3fn
    policy = EnvelopePolicy()
    nominal = np.array([0.01171875, 1.0]).astype(e4)
    lost = [np.array([np.nan, 1.0]).astype(e4)] * 5 + [np.array([0.125, 1.0]).astype(e4)] * 3
    env = Envelope(nominal, lost, policy)
    for x in (0.375, -448.0, 448.0, np.nan):
        assert env.check(np.array([x, 1.0]).astype(e4)).ok, x
    assert not env.check(np.array([0.375, 3.0]).astype(e4)).ok  # the other element holds
    kept = [np.array([np.nan, 1.0]).astype(e4)] * 3 + [np.array([0.125, 1.0]).astype(e4)] * 5
    assert not Envelope(nominal, kept, policy).check(np.array([0.375, 1.0]).astype(e4)).ok


def test_an_f8_sum_whose_square_overflows_in_most_runs_is_not_pinned_to_the_nominal(worker):
    """A campaign (seed 0, the #14 benchmark), cut down: the sum s of 50 f8e4m3fn values
    (exactly 0.04296875; summed in f8e4m3fn with every partial sum rounded, 0.25 in
    index order: by hand below) is broadcast, carried through a sort, sliced, and a
    convolution sums 3 products s*s.
    The sum's reassociation budget (about +-36 here) makes 3*s*s overflow f8e4m3fn
    (NaN) in every perturbed run, so the envelope had collapsed to the nominal value
    +- 1 ULP and XLA:CPU's value (from its own f8 order of the sum) was called a
    mismatch; it is inside now."""
    import ml_dtypes
    e4 = ml_dtypes.float8_e4m3fn
    bits = [187, 177, 55, 32, 58, 164, 177, 180, 165, 65, 175, 149, 176, 24, 177, 54, 25, 51,
            55, 61, 177, 192, 179, 31, 52, 191, 191, 45, 50, 43, 56, 60, 170, 179, 186, 165,
            185, 58, 156, 178, 53, 185, 0, 64, 171, 63, 49, 185, 169, 178]
    x = np.array(bits, np.uint8).view(e4).reshape(5, 5, 2)
    wide = x.astype(np.float64).ravel()
    assert wide.sum() == 0.04296875
    s = 0.0
    for v in wide:  # index order, every partial sum rounded to f8e4m3fn
        s = float(np.array(s + v).astype(e4).astype(np.float64))
    assert s == 0.25
    text = """HloModule fuzz_74

%add_f8e4m3fn.5 {
  %p.2 = f8e4m3fn[] parameter(0)
  %p.3 = f8e4m3fn[] parameter(1)
  ROOT %add.4 = f8e4m3fn[] add(%p.2, %p.3)
}

%cmp.14 {
  %p.9 = f8e4m3fn[] parameter(0)
  %p.10 = f8e4m3fn[] parameter(1)
  %p.11 = f8e4m3fn[] parameter(2)
  %p.12 = f8e4m3fn[] parameter(3)
  ROOT %compare.13 = pred[] compare(%p.9, %p.10), direction=GT, type=TOTALORDER
}

ENTRY %main.74 {
  %p.1 = f8e4m3fn[5,5,2] parameter(0)
  %constant.6.cut = f8e4m3fn[] parameter(1)
  %reduce.7 = f8e4m3fn[] reduce(%p.1, %constant.6.cut), dimensions={0,1,2}, to_apply=%add_f8e4m3fn.5
  %broadcast.8 = f8e4m3fn[5,5,2] broadcast(%reduce.7), dimensions={}
  %sort.15 = (f8e4m3fn[5,5,2], f8e4m3fn[5,5,2]) sort(%p.1, %broadcast.8), dimensions={2}, is_stable=true, to_apply=%cmp.14
  %get_tuple_element.16 = f8e4m3fn[5,5,2]{0,1,2} get-tuple-element(%sort.15), index=1
  %reshape.65 = f8e4m3fn[50] reshape(%get_tuple_element.16)
  %slice.66 = f8e4m3fn[1] slice(%reshape.65), slice={[18:19]}
  %reshape.67 = f8e4m3fn[] reshape(%slice.66)
  %broadcast.68 = f8e4m3fn[6,3,1,4] broadcast(%reshape.67), dimensions={}
  %reshape.69 = f8e4m3fn[50] reshape(%broadcast.8)
  %slice.70 = f8e4m3fn[9] slice(%reshape.69), slice={[30:39]}
  %reshape.71 = f8e4m3fn[1,1,3,3] reshape(%slice.70)
  ROOT %convolution.72 = f8e4m3fn[1,3,3,1] convolution(%broadcast.68, %reshape.71), window={size=1x3 stride=2x2 pad=0_2x1_0}, dim_labels=1fb0_0o1i->f10b
}
"""
    report = diff(text, [x, np.zeros((), e4)], worker=worker)
    nominal = float(np.asarray(report.expected).astype(np.float64)[0, 0, 0, 0])
    xla = float(np.asarray(report.actual).astype(np.float64)[0, 0, 0, 0])
    assert nominal < 0.02 and abs(xla - nominal) > 0.05  # 3 s^2 ~ 0.006 exactly, rounded in f8
    assert report.verdict == "match", report.summary()


E8M0_REMAINDER = """HloModule m

ENTRY e {
  p = f8e8m0fnu[] parameter(0)
  r = f8e8m0fnu[] remainder(p, p)
  ROOT c = f32[] convert(r)
}
"""


def test_an_f8e8m0fnu_remainder_may_keep_its_f32_zero(worker):
    """A campaign (seed 0): fmod(8, 8) = 0, which f8e8m0fnu cannot hold (NaN, hloref's
    value as written); XLA:CPU computes the remainder in f32 and, with excess
    precision, converts its 0 to f32 without rounding it to f8e8m0fnu first. A remainder
    is exact in every other type, so only here may it keep its f32 value; without
    excess precision XLA:CPU gives NaN, and a value no rounding gives is flagged."""
    import ml_dtypes
    x = np.array(8.0).astype(ml_dtypes.float8_e8m0fnu)
    assert np.isnan(np.array(np.fmod(8.0, 8.0)).astype(ml_dtypes.float8_e8m0fnu).astype(float))
    kept = diff(E8M0_REMAINDER, [x], worker=worker)
    assert float(kept.actual) == 0.0 and np.isnan(float(kept.expected))
    assert kept.verdict == "match", kept.summary()
    strict = diff(E8M0_REMAINDER, [x], worker=worker,
                  debug_options={"xla_allow_excess_precision": False})
    assert np.isnan(float(strict.actual)) and strict.verdict == "match"
    assert diff(E8M0_REMAINDER, [x], worker=worker,
                oracle_value=np.float32(5.0)).verdict == "mismatch"


E8M0_NEGATE = """HloModule m

ENTRY e {
  p = f8e8m0fnu[2] parameter(0)
  n = f8e8m0fnu[2] negate(p)
  ROOT c = f32[2] convert(n)
}
"""


def test_an_f8e8m0fnu_negate_may_keep_its_f32_value(worker):
    """A campaign (seed 53): negate of f8e8m0fnu 1024 is -1024, which the unsigned
    f8e8m0fnu cannot hold (NaN as written, hloref); XLA's float normalization computes
    it in f32 and converts -1024 to f32 without the f8e8m0fnu rounding. A value no
    rounding gives (+1024) is flagged."""
    import ml_dtypes
    x = np.array([np.nan, 1024.0]).astype(ml_dtypes.float8_e8m0fnu)
    assert np.isnan(np.array(-1024.0).astype(ml_dtypes.float8_e8m0fnu).astype(float))
    report = diff(E8M0_NEGATE, [x], worker=worker)
    assert np.isnan(np.asarray(report.expected)).all()
    assert np.asarray(report.actual)[1] == -1024.0
    assert report.verdict == "match", report.summary()
    assert diff(E8M0_NEGATE, [x], worker=worker,
                oracle_value=np.array([np.nan, 1024.0], np.float32)).verdict == "mismatch"


MX_SCALES = """HloModule m

ENTRY e {
  x = f32[6] parameter(0)
  a = f32[6] abs(x)
  k = f32[] constant(0.002232142857142857)
  kb = f32[6] broadcast(k), dimensions={}
  q = f32[6] multiply(a, kb)
  ROOT s = f8e8m0fnu[6] convert(q)
}
"""


def test_an_mx_block_scale_one_f8e8m0fnu_ulp_off_is_a_mismatch(worker):
    """MX block scales: |x| / 448 (times 1/448 as f32) converted to f8e8m0fnu. By hand,
    |x| = 448 * (1, 2.5, 0.7, 1024, 3.9, 0.26) gives about (1, 2.5, 0.7, 1024, 3.9,
    0.26), which round to the powers of two (1, 2, 0.5, 1024, 4, 0.25): no value near a
    rounding boundary (1.5 * 2^k), so no correct implementation rounds to a neighbour.
    XLA:CPU's scales match; the same scales with one doubled (one f8e8m0fnu ULP, the
    realistic-programs mutant 'doubled 1/448') are a mismatch: f8e8m0fnu has no ULP
    floor (a factor of 2 is not a rounding)."""
    import ml_dtypes
    e8 = ml_dtypes.float8_e8m0fnu
    x = (448.0 * np.array([1, -2.5, 0.7, 1024, -3.9, 0.26])).astype(np.float32)
    want = np.array([1, 2, 0.5, 1024, 4, 0.25])
    report = diff(MX_SCALES, [x], worker=worker)
    assert np.asarray(report.expected).astype(np.float64).tolist() == want.tolist()
    assert report.verdict == "match", report.summary()
    for i in range(6):
        doubled = want.copy()
        doubled[i] *= 2
        off = diff(MX_SCALES, [x], worker=worker, oracle_value=doubled.astype(e8))
        assert off.verdict == "mismatch", (i, off.summary())


FLUSHED_DOT = """HloModule m

ENTRY e {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  ROOT d = f32[] dot(x, y), lhs_contracting_dims={0}, rhs_contracting_dims={0}
}
"""


def test_a_sum_may_lose_the_terms_flush_to_zero_flushes(worker):
    """x = (1e-20, 2e-19, 3e-20, 1.5e-19), y = (1e-20, 3e-19, 2e-20, 1e-19): the products
    are 1e-40, 6e-38, 6e-40 and 1.5e-38, exactly 7.57e-38. XLA:CPU (FTZ) flushes its first
    partial sum, the subnormal 1e-40, and gives 6e-38 + 6e-40 + 1.5e-38 = 7.56e-38 (by
    hand, each product exact in f64, the sum rounded once): 1e-40 off, far more than the f32 rounding of a 7.57e-38 sum allows. A flushed
    term is below the smallest normal, so a sum of n terms may move by n of them
    (``flushed_terms``; a campaign, seed 71, found it in a convolution); a value moved by
    more is a mismatch."""
    x = np.array([1e-20, 2e-19, 3e-20, 1.5e-19], np.float32)
    y = np.array([1e-20, 3e-19, 2e-20, 1e-19], np.float32)
    report = diff(FLUSHED_DOT, [x, y], worker=worker)
    assert float(report.expected) == float(np.float32(7.57e-38))
    products = [np.float64(a) * np.float64(b) for a, b in zip(x, y)]
    assert float(report.actual) == float(np.float32(sum(products[1:])))  # the first lost
    assert report.verdict == "match", report.summary()
    tiny = float(np.finfo(np.float32).tiny)
    off = diff(FLUSHED_DOT, [x, y], worker=worker,
               oracle_value=np.float32(7.57e-38 - 20 * tiny))
    assert off.verdict == "mismatch", off.summary()


def _attention(q, k, v):
    """bf16 causal attention as XLA's fused-attention tests write it: scores q·k
    times 2, future positions masked with -2.366e38, softmax with an f32 sum."""
    import jax.numpy as jnp
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) * jnp.bfloat16(2)
    n = q.shape[2]
    future = (jnp.arange(n)[:, None] < jnp.arange(n)[None, :]).astype(jnp.bfloat16)
    s = s + future * jnp.bfloat16(-2.366e38)
    p = jnp.exp(s - jnp.max(s, axis=-1, keepdims=True))
    total = jnp.sum(p.astype(jnp.float32), axis=-1, keepdims=True).astype(jnp.bfloat16)
    return jnp.einsum("bhqk,bhkd->bhqd", p / total, v)


def test_a_marginal_miss_is_judged_again_with_more_runs(worker):
    """bf16 attention, batch 2, 6 heads, 512 positions, head size 128 (XLA's
    gpu_fused_mha_test.cc configurations; N(0, 1) inputs, seed 1): scores of spread
    ~22 make each softmax row nearly one-hot, so an output moves in jumps where two
    scores nearly tie, and for a few of the 786,432 outputs the 8 runs all land on one
    side: XLA:CPU's correct answer was outside that envelope, by at most a few widths.
    Such a marginal miss is judged again with confirm_samples (32) runs, where it is inside;
    an output moved by 3.0 (24 widths) is no marginal miss and stays a mismatch of the
    8 runs (moved by 1.0, 7.5 widths, it was judged again, and was still outside)."""
    import jax
    import jax.numpy as jnp
    import ml_dtypes
    from hloref.fuzz.envelope import MARGINAL_WIDTHS
    shape = (2, 6, 512, 128)
    zeros = jnp.zeros(shape, jnp.bfloat16)
    text = jax.jit(_attention).lower(zeros, zeros, zeros).as_text(dialect="hlo")
    rng = np.random.default_rng(1)
    args = [rng.standard_normal(shape).astype(ml_dtypes.bfloat16) for _ in range(3)]
    report = diff(text, args, worker=worker)
    assert report.verdict == "match", report.summary()
    assert report.policy.samples == EnvelopePolicy().confirm_samples == 32
    module = hloref.parse(text)
    policy = EnvelopePolicy()
    eight = Envelope.of(sample(module, args, policy), policy, module)
    assert not eight.check(report.actual).ok
    assert eight.check(report.actual, stretch=MARGINAL_WIDTHS).ok
    wrong = np.array(report.actual)
    wrong[0, 0, 5, 0] = np.asarray(report.expected)[0, 0, 5, 0].astype(np.float32) + 3.0
    off = diff(text, args, worker=worker, oracle_value=wrong)
    assert off.verdict == "mismatch" and off.policy.samples == 8, off.summary()


def test_a_confirmation_that_would_not_fit_the_memory_budget_is_not_run(worker):
    """An answer 1.5 envelope widths out (a marginal miss, and a real one: 32 runs keep
    it outside) is judged again with 32 runs; under a memory budget too small for 33
    copies of the output in f64 with their sorted copies (Limits.max_bytes, here 200 KB
    for 1,000 outputs), the 8-run verdict stands instead (a bf16 layer norm of 24
    million outputs took 23 GB before the process was killed)."""
    from hloref.evaluator.interpreter import Limits
    text = """HloModule m
ENTRY e {
  x = f32[1000] parameter(0)
  y = f32[1000] parameter(1)
  ROOT p = f32[1000] multiply(x, y)
}
"""
    rng = np.random.default_rng(3)
    x, y = (rng.standard_normal(1000).astype(np.float32) for _ in range(2))
    module = hloref.parse(text)
    policy = EnvelopePolicy()
    env = Envelope.of(sample(module, [x, y], policy), policy, module)
    leaf = env.leaves[()]
    off = (leaf.hi + 1.5 * (leaf.hi - leaf.lo)).astype(np.float32)
    full = diff(text, [x, y], worker=worker, oracle_value=off)
    assert full.verdict == "mismatch" and full.policy.samples == 32, full.summary()
    small = diff(text, [x, y], worker=worker, oracle_value=off,
                 limits=Limits(max_bytes=200_000))
    assert small.verdict == "mismatch" and small.policy.samples == 8, small.summary()


def test_a_complex_modulus_carries_xla_cpus_accuracy_budget(worker):
    """XLA:CPU's c64 abs is up to 1.84 ULP off the exact modulus (here: within
    COMPLEX_ABS_ULPS = 2 on 20,000 N(0,1) values, and over 1 ULP somewhere), so the
    envelope may not take it for exact: a campaign (seed 53) fed it to cosine, where
    abs(-0.665 + 1.223i) = 1.392, one ULP of it moves cos by 8 of its own ULPs, and
    XLA's fused value was called a mismatch. It is inside now; a wrong element is not."""
    from hloref.fuzz.oracles import xla
    from hloref.fuzz.perturb import COMPLEX_ABS_ULPS
    rng = np.random.default_rng(1)
    z = (rng.standard_normal(20000) + 1j * rng.standard_normal(20000)).astype(np.complex64)
    alone = np.asarray(xla.run_hlo("HloModule m\nENTRY e {\n  p = c64[20000] parameter(0)\n"
                                   "  ROOT a = f32[20000] abs(p)\n}\n", z)).astype(np.float64)
    exact = np.abs(z.astype(np.complex128))
    ulps = np.abs(alone - exact) / np.spacing(exact.astype(np.float32)).astype(np.float64)
    assert 1.0 < ulps.max() <= COMPLEX_ABS_ULPS
    text = ("HloModule m\n\nENTRY e {\n  p = c64[4,2] parameter(0)\n"
            "  a = f32[4,2]{0,1} abs(p)\n  ROOT c = f32[4,2]{1,0} cosine(a)\n}\n")
    x = np.array([[-0.665213 + 1.2231387j, 0.11272575 - 0.71259964j],
                  [-0.36596224 - 1.0234301j, -2.1003788 - 1.531952j],
                  [0.6850284 + 0.32037514j, -0.7726343 - 0.7196077j],
                  [1.947841 - 1.3351508j, 0.7257541 + 1.4670398j]], np.complex64)
    report = diff(text, [x], worker=worker)
    assert report.verdict == "match", report.summary()
    wrong = np.asarray(report.expected).copy()
    wrong[0, 0] += 1e-5  # ~650 ULP of 0.1775: no modulus within 2 ULP gives it
    assert diff(text, [x], worker=worker, oracle_value=wrong).verdict == "mismatch"


F4_SINH_TWO_USERS = """HloModule m
ENTRY e {
  p = f4e2m1fn[3,1] parameter(0)
  s = f4e2m1fn[3,1] sinh(p)
  t = f4e2m1fn[1,3] transpose(s), dimensions={1,0}
  c = f16[3,1] convert(s)
  ROOT r = (f4e2m1fn[1,3], f16[3,1]) tuple(t, c)
}
"""


def test_a_narrow_value_with_a_structural_user_may_reach_its_convert_unrounded(worker):
    """sinh(-3) = -10.018 (by hand: (e^-3 - e^3) / 2), which f4e2m1fn saturates to -6.
    XLA:CPU's float normalization computes the sinh in f32, rounds it for the
    transpose (-6) and, with excess precision, removes the convert pair on the f16 use,
    which reads -10.02 (a campaign, seed 83, through a stochastic-convert). The use is
    inside; without excess precision it is outside."""
    import ml_dtypes as md
    p = np.array([[-3.0], [-1.5], [-2.0]]).astype(md.float4_e2m1fn)
    report = diff(F4_SINH_TWO_USERS, [p], worker=worker)
    assert float(report.actual[0][0, 0]) == -6.0
    assert abs(float(report.actual[1][0, 0]) - np.sinh(-3.0)) < 0.01  # XLA kept f32
    assert float(report.expected[1][0, 0]) == -6.0
    assert report.verdict == "match", report.summary()
    strict = EnvelopePolicy(freedoms=Freedoms(excess_precision=False))
    assert diff(F4_SINH_TWO_USERS, [p], worker=worker, policy=strict).verdict == "mismatch"


F8_SUM_TO_SHIFT = """HloModule fuzz_15

%add_f8e5m2.9 {
  %p.6 = f8e5m2[] parameter(0)
  %p.7 = f8e5m2[] parameter(1)
  ROOT %add.8 = f8e5m2[] add(%p.6, %p.7)
}

ENTRY %main.15 {
  %p.1 = f8e5m2[] parameter(0)
  %add.3 = f8e5m2[] add(%p.1, %p.1)
  %compare.4.cut = pred[] parameter(3)
  %constant.5.cut = f8e5m2[4,4,3] parameter(2)
  %constant.10.cut = f8e5m2[] parameter(1)
  %reduce.11 = f8e5m2[] reduce(%constant.5.cut, %constant.10.cut), dimensions={0,1,2}, to_apply=%add_f8e5m2.9
  %convert.12 = u32[] convert(%reduce.11)
  %shift_left.13 = u32[] shift-left(%convert.12, %convert.12)
  ROOT %tuple.14 = (f8e5m2[], pred[], u32[]) tuple(%add.3, %compare.4.cut, %shift_left.13)
}
"""

F8_TERMS = [[[0.4375, -1.25, 8.0], [7.0, 0.625, -2.0], [5.0, -0.21875, -3.5],
             [-1.75, -7.0, 0.21875]],
            [[6.0, -4.0, -7.0], [-2.0, 2.5, -1.0], [-2.0, 1.25, -0.109375], [-6.0, -6.0, -3.5]],
            [[-1.25, 7.0, 10.0], [-4.0, 4.0, -2.5], [0.75, -6.0, 6.0], [6.0, 3.0, -2.0]],
            [[2.5, 4.0, 3.0], [-6.0, -1.0, 1.75], [-7.0, -3.5, 1.75], [0.625, -1.75, 0.875]]]


def test_a_narrow_reduce_folded_from_the_left_reaches_an_integer_output(worker):
    """A campaign (seed 89, its module verbatim: the runs' draws are keyed by instruction
    names, and with these the sampled budget missed XLA's value): 48 f8e5m2 values whose
    exact sum is -0.046875 (u32 0, shifted 0). XLA:CPU folds the written f8 add from the
    left, each step rounded to f8e5m2: 1 (by hand below), so convert gives 1 and
    1 << 1 = 2. The sampled budget around the wide sum almost never lands on that exact
    integer; the envelope's left-fold runs do."""
    import ml_dtypes as md
    x = np.array(F8_TERMS).astype(md.float8_e5m2)
    z = np.array(0.0).astype(md.float8_e5m2)
    acc = np.array(0.0).astype(md.float8_e5m2)
    for t in x.reshape(-1):  # by hand: row-major, each sum rounded to f8e5m2
        acc = np.array(np.float32(acc) + np.float32(t)).astype(md.float8_e5m2)
    assert float(acc) == 1.0 and float(np.sum(x.astype(np.float64))) == -0.046875
    p = np.array(0.875).astype(md.float8_e5m2)
    report = diff(F8_SUM_TO_SHIFT, [p, z, x, np.array(False)], worker=worker)
    assert int(report.actual[2]) == 2 and int(report.expected[2]) == 0
    assert report.verdict == "match", report.summary()
