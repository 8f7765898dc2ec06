"""The numerical envelope (fuzz/envelope.py) on subnormals and overflow: flush to
zero, operands read as zero (DAZ), and values that may overflow where the program came
near it.

Independent references: XLA:CPU's own results and values derived by hand from IEEE
rounding."""

from __future__ import annotations

import numpy as np

import hloref
from hloref.fuzz.differential import diff
from hloref.fuzz.envelope import Envelope, EnvelopePolicy, Freedoms, sample

from envelope_common import ADD, worker


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
