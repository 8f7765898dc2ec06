"""The numerical envelope (fuzz/envelope.py) on narrow floats (f8 types, f8e8m0fnu,
MX block scales): excess precision, what a narrow value may keep, and what is flagged.

Independent references: XLA:CPU's own results and values derived by hand from IEEE
rounding."""

from __future__ import annotations

import numpy as np

from hloref.fuzz.differential import diff
from hloref.fuzz.envelope import EnvelopePolicy, Freedoms

from envelope_common import worker


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
