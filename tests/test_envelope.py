"""The numerical envelope (fuzz/envelope.py): what it lets through and what it flags:
summation and reduction orders, rounding, loops, reducers, and the confirmation runs.
Subnormals and overflow: test_envelope_subnormals.py; narrow floats:
test_envelope_narrow.py; complex values and linear algebra: test_envelope_linalg.py.

Independent references: XLA:CPU's own results, other summation orders computed
with numpy, and values derived by hand from IEEE rounding."""

from __future__ import annotations

import numpy as np

import hloref
from hloref.fuzz.check import check_modules
from hloref.fuzz.differential import diff
from hloref.fuzz.envelope import Envelope, EnvelopePolicy, Freedoms, sample

from envelope_common import ADD, worker


ROW_SUM = "HloModule m\n" + ADD + """ENTRY e {
  x = f32[64,4096] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[64] reduce(x, z), dimensions={1}, to_apply=add
}
"""


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
    from hloref.fuzz.sampling import sample_program
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


def test_a_fault_before_code_generation_is_not_blamed_on_a_pass(worker):
    # XLA's text parser reads the constant `-0` as +0 (the stored finding
    # negative-zero-constant-print-parse-round-trip): 1 / -0 is -inf by IEEE division, XLA
    # gives +inf, and its optimized module already holds +0, so the fault lies before code
    # generation; the summary must not claim an HLO pass did it.
    text = ("HloModule m\nENTRY e {\n  c = f32[2] constant({-1, -0})\n"
            "  p = f32[2] parameter(0)\n  ROOT d = f32[2] divide(p, c)\n}\n")
    report = diff(text, [np.ones(2, np.float32)], worker=worker)
    assert report.verdict == "mismatch", report.summary()
    assert np.isneginf(report.expected[1]) and np.isposinf(report.actual[1])
    assert report.fault_stage == "before code generation"
    assert "XLA's parser" in report.summary() and "an HLO pass changed" not in report.summary()


#: a mutant's reducer (a campaign's finding, a layer norm's sum): add(a, add(0, b)), which
#: hloref folds left to right (a constant inside: not vectorized) and XLA simplifies to
#: add and reorders
ADD_OF_ZERO_PLUS = """HloModule m
r {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  z = f32[] constant(0)
  zb = f32[] broadcast(z), dimensions={}
  s = f32[] add(zb, b)
  ROOT t = f32[] add(a, s)
}
ENTRY e {
  x = f32[32,64] parameter(0)
  i = f32[] parameter(1)
  ROOT s = f32[32] reduce(x, i), dimensions={1}, to_apply=r
}
"""


def test_a_reducer_hloref_folds_in_order_may_still_be_reordered(worker):
    x = np.random.default_rng(11).uniform(-12.8, 12.8, (32, 64)).astype(np.float32)
    # by hand: the row sums folded left to right and in pairs (XLA's vectorized order
    # is another) differ in f32 somewhere
    left = np.zeros(32, np.float32)
    for k in range(64):
        left = (left + x[:, k]).astype(np.float32)
    pairs = x.copy()
    while pairs.shape[1] > 1:
        pairs = (pairs[:, 0::2] + pairs[:, 1::2]).astype(np.float32)
    assert np.any(left != pairs[:, 0])
    report = diff(ADD_OF_ZERO_PLUS, [x, np.float32(0)], worker=worker)
    assert report.verdict == "match", report.summary()
    wrong = np.array(report.actual, copy=True)
    wrong[5] += np.float32(1e-3) * np.abs(x[5]).sum()  # a planted error stays outside
    report = diff(ADD_OF_ZERO_PLUS, [x, np.float32(0)], worker=worker, oracle_value=wrong)
    assert report.verdict == "mismatch", report.summary()
