"""Variants of filed XLA:CPU bugs a campaign must count as known, not file again
(``fuzz/known_bugs.py``): each row is a module a campaign (seed 7) refiled or a hand-made
counterpart that is not the bug, with the class it belongs to. What makes a row the bug
is derived by hand from the module (which operands constant folding evaluates, what
hloref's value is by the written semantics); the XLA:CPU behaviour each class names was
measured and is stored under ``findings/xla-cpu-jaxlib-0.10.2`` (``hloref replay``)."""

from __future__ import annotations

from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest

from hloref.fuzz.known_classes import FILED, known_folding
from hloref.fuzz.known_classes import KNOWN_DIFFERENCES


def _module(body: str, *callees: str) -> str:
    return "HloModule m\n" + "".join(callees) + "ENTRY e {\n" + body + "\n}\n"


REDUCER = """max2 {
  a = s2[] parameter(0)
  b = s2[] parameter(1)
  ROOT m = s2[] maximum(a, b)
}
"""

ROWS = [
    # f8e8m0fnu holds only powers of two: 0 and negatives are NaN (ml_dtypes: checked)
    ("s64 zero constant to e8m0", _module(
        "  k = s64[] constant(0)\n  ROOT c = f8e8m0fnu[] convert(k)"), [],
     "f8e8m0fnu-constant-folding"),
    ("iota of e8m0 starts at 0", _module(
        "  ROOT i = f8e8m0fnu[1,4] iota(), iota_dimension=1"), [],
     "f8e8m0fnu-constant-folding"),
    ("u16 subtract(p, p) is a folded 0", _module(
        "  p = u16[2] parameter(0)\n  s = u16[2] subtract(p, p)\n"
        "  ROOT c = f8e8m0fnu[2] convert(s)"), [np.array([3, 9], np.uint16)],
     "f8e8m0fnu-constant-folding"),
    ("positive constants convert fine", _module(
        "  k = s32[2] constant({2, 8})\n  ROOT c = f8e8m0fnu[2] convert(k)"), [], None),
    ("a negative parameter is not folded", _module(
        "  p = s32[2] parameter(0)\n  ROOT c = f8e8m0fnu[2] convert(p)"),
     [np.array([-2, 8], np.int32)], None),
    # a conditional branch given a constant: XLA makes cheap branches a select and folds
    ("e8m0 of a constant passed into a conditional branch", "HloModule m\n"
     "b0 {\n  p = f16[2] parameter(0)\n  ROOT n = f16[2] negate(p)\n}\n"
     "b1 {\n  q = f16[2] parameter(0)\n  c = f8e8m0fnu[2] convert(q)\n"
     "  ROOT r = f16[2] convert(c)\n}\n"
     "ENTRY e {\n  i = s32[] parameter(0)\n  k = f16[2] constant({1.4, -4.78})\n"
     "  ROOT s = f16[2] conditional(i, k, k), branch_computations={b0, b1}\n}\n",
     [np.int32(1)], "f8e8m0fnu-constant-folding"),
    ("e8m0 of a parameter passed into a conditional branch", "HloModule m\n"
     "b0 {\n  p = f16[2] parameter(0)\n  ROOT n = f16[2] negate(p)\n}\n"
     "b1 {\n  q = f16[2] parameter(0)\n  c = f8e8m0fnu[2] convert(q)\n"
     "  ROOT r = f16[2] convert(c)\n}\n"
     "ENTRY e {\n  i = s32[] parameter(0)\n  k = f16[2] parameter(1)\n"
     "  ROOT s = f16[2] conditional(i, k, k), branch_computations={b0, b1}\n}\n",
     [np.int32(1), np.array([1.4, -4.78], np.float16)], None),
    # clz of a negative value is 0 (the sign bit is set)
    ("s32 clz of -2 folded", _module(
        "  k = s32[2] constant({-2, 8})\n  ROOT c = s32[2] count-leading-zeros(k)"), [],
     "clz-negative-constant-folding"),
    ("s8 clz of non-negative constants", _module(
        "  k = s8[2] constant({0, 8})\n  ROOT c = s8[2] count-leading-zeros(k)"), [], None),
    ("s8 clz of a negative parameter", _module(
        "  p = s8[2] parameter(0)\n  ROOT c = s8[2] count-leading-zeros(p)"),
     [np.array([-3, 4], np.int8)], None),
    ("f8e3m4 round-nearest-afz of a constant", _module(
        "  k = f8e3m4[2] constant({-0.47, 0.53})\n  ROOT r = f8e3m4[2] round-nearest-afz(k)"),
     [], "round-f8e3m4-folding"),
    ("f8e4m3fn round-nearest-afz of a constant", _module(
        "  k = f8e4m3fn[2] constant({-0.47, 0.5})\n  ROOT r = f8e4m3fn[2] round-nearest-afz(k)"),
     [], None),
    ("f8e3m4 round-nearest-even of a constant", _module(
        "  k = f8e3m4[2] constant({0.34, -0.53})\n  ROOT r = f8e3m4[2] round-nearest-even(k)"),
     [], "round-f8e3m4-folding"),
    # compare(p, p) LT is false whatever p (a NaN too), so the simplifier makes it a constant
    ("e8m0 of a folded compare(p, p)", _module(
        "  p = f32[2] parameter(0)\n  c = pred[2] compare(p, p), direction=LT\n"
        "  ROOT e = f8e8m0fnu[2] convert(c)"), [np.array([1.0, 2.0], np.float32)],
     "f8e8m0fnu-constant-folding"),
    # a campaign (seed 31): xor(p, p) of pred is false; compare(p, reshape(p)) with the
    # reshape to p's own shape is compare(p, p) once the simplifier drops the reshape
    ("e8m0 of a folded pred xor(p, p)", _module(
        "  p = pred[1] parameter(0)\n  x = pred[1] xor(p, p)\n"
        "  ROOT e = f8e8m0fnu[1] convert(x)"), [np.array([True])],
     "f8e8m0fnu-constant-folding"),
    ("e8m0 of compare(p, reshape(p)) GT TOTALORDER", _module(
        "  p = f8e8m0fnu[3] parameter(0)\n  r = f8e8m0fnu[3] reshape(p)\n"
        "  c = pred[3] compare(p, r), direction=GT, type=TOTALORDER\n"
        "  ROOT e = f8e8m0fnu[3] convert(c)"),
     [np.array([1.0, 2.0, 4.0]).astype(ml_dtypes.float8_e8m0fnu)],
     "f8e8m0fnu-constant-folding"),
    # acos(2) is NaN (outside [-1, 1]); XLA:CPU's kernel of a known iota gives inf
    ("f8e3m4 acos of an iota", _module(
        "  i = f8e3m4[1,5] iota(), iota_dimension=1\n  ROOT a = f8e3m4[1,5] acos(i)"), [],
     "acos-asin-f8e3m4-known-operand-inf"),
    ("f8e3m4 asin of an iota inside the domain", _module(
        "  i = f8e3m4[1,2] iota(), iota_dimension=1\n  ROOT a = f8e3m4[1,2] asin(i)"), [], None),
    ("f8e3m4 acos of a parameter", _module(
        "  p = f8e3m4[3] parameter(0)\n  ROOT a = f8e3m4[3] acos(p)"),
     [np.array([0.0, 2.0, 3.0]).astype(ml_dtypes.float8_e3m4)], None),
    ("e8m0 of compare(p, p) EQ of floats (NaN != NaN: not a constant)", _module(
        "  p = f32[2] parameter(0)\n  c = pred[2] compare(p, p), direction=EQ\n"
        "  n = pred[2] not(c)\n  ROOT e = f8e8m0fnu[2] convert(n)"),
     [np.array([1.0, 2.0], np.float32)], None),
    # atan2(+0, +0) = +0 (C99 F.9.1.4)
    ("atan2 of a folded zero", _module(
        "  p = s32[2] parameter(0)\n  c = pred[2] compare(p, p), direction=LT\n"
        "  f = f64[2] convert(c)\n  z = f64[2] subtract(f, f)\n"
        "  ROOT a = f64[2] atan2(z, z)"), [np.array([3, 4], np.int32)],
     "atan2-zero-zero-folding"),
    ("atan2 of parameters", _module(
        "  p = f64[2] parameter(0)\n  ROOT a = f64[2] atan2(p, p)"),
     [np.array([0.0, 1.0])], None),
    # popcnt(-1) in s2 is 2, which wraps to -2; the folder counts 8 bits (0)
    ("s2 popcnt of a constant", _module(
        "  k = s2[2] constant({1, -1})\n  ROOT c = s2[2] popcnt(k)"), [],
     "popcnt-s4"),
    # asin is defined on [-1, 1]: asin(11) is NaN, sign(NaN) NaN
    ("sign(asin) of a converted u8 outside [-1, 1]", _module(
        "  p = u8[2] parameter(0)\n  c = f32[2] convert(p)\n  a = f32[2] asin(c)\n"
        "  ROOT s = f32[2] sign(a)"), [np.array([11, 0], np.uint8)],
     "asin-acos-of-integer-never-nan"),
    ("sign(asin) of a converted u8 inside [-1, 1]", _module(
        "  p = u8[2] parameter(0)\n  c = f32[2] convert(p)\n  a = f32[2] asin(c)\n"
        "  ROOT s = f32[2] sign(a)"), [np.array([1, 0], np.uint8)], None),
    # f4e2m1fn has no infinity: inf saturates to 6 (ml_dtypes: checked)
    ("f16 inf constant to f4e2m1fn", _module(
        "  k = f16[] constant(inf)\n  ROOT c = f4e2m1fn[] convert(k)"), [],
     "f4e2m1fn-infinity-folding"),
    ("f16 finite constant to f4e2m1fn", _module(
        "  k = f16[] constant(7)\n  ROOT c = f4e2m1fn[] convert(k)"), [], None),
    ("s2 maximum reduce of a broadcast", _module(
        "  p = s2[] parameter(0)\n  b = s2[3,3] broadcast(p), dimensions={}\n"
        "  k = s2[] constant(-2)\n  ROOT r = s2[3] reduce(b, k), dimensions={0}, to_apply=max2",
        REDUCER), [np.array(1).astype(ml_dtypes.int2)], "reduce-2bit"),
    # u32 3e9 exceeds f8e4m3fn's 448: NaN, and NaN converts to integer 0
    ("u32 -> f8e4m3fn -> u32 with an out-of-range value", _module(
        "  p = u32[2] parameter(0)\n  f = f8e4m3fn[2] convert(p)\n  ROOT c = u32[2] convert(f)"),
     [np.array([3000000000, 5], np.uint32)], "convert-int-f8-unsigned-nan"),
    # a campaign (seed 0): 305739718 exceeds f8e4m3b11fnuz's 30, NaN, reaching the
    # convert to u32 through a reshape, a slice and a reshape inside a conditional branch
    ("u32 -> f8e4m3b11fnuz -> reshape, slice -> u32 out of range", _module(
        "  p = u32[1,2] parameter(0)\n  f = f8e4m3b11fnuz[1,2] convert(p)\n"
        "  r = f8e4m3b11fnuz[2] reshape(f)\n  s = f8e4m3b11fnuz[1] slice(r), slice={[1:2]}\n"
        "  e = f8e4m3b11fnuz[] reshape(s)\n  ROOT c = u32[] convert(e)"),
     [np.array([[0, 305739718]], np.uint32)], "convert-int-f8-unsigned-nan"),
    ("u32 -> f8e4m3b11fnuz -> reshape, slice -> u32 in range", _module(
        "  p = u32[1,2] parameter(0)\n  f = f8e4m3b11fnuz[1,2] convert(p)\n"
        "  r = f8e4m3b11fnuz[2] reshape(f)\n  s = f8e4m3b11fnuz[1] slice(r), slice={[1:2]}\n"
        "  e = f8e4m3b11fnuz[] reshape(s)\n  ROOT c = u32[] convert(e)"),
     [np.array([[0, 7]], np.uint32)], None),
    # a campaign (seed 53): u16 8437 exceeds f8e4m3fn's 448, NaN; to f4e2m1fn, which has
    # no NaN, a zero (ml_dtypes: -0); XLA:CPU's fused pair gives 6
    ("u16 -> f8e4m3fn -> f4e2m1fn out of range", _module(
        "  p = u16[2] parameter(0)\n  f = f8e4m3fn[2] convert(p)\n"
        "  ROOT c = f4e2m1fn[2] convert(f)"),
     [np.array([8437, 24692], np.uint16)], "convert-int-f8-unsigned-nan"),
    ("u16 -> f8e4m3fn -> f4e2m1fn in range", _module(
        "  p = u16[2] parameter(0)\n  f = f8e4m3fn[2] convert(p)\n"
        "  ROOT c = f4e2m1fn[2] convert(f)"),
     [np.array([3, 5], np.uint16)], None),
    ("u32 -> f8e4m3fn -> u32 in range", _module(
        "  p = u32[2] parameter(0)\n  f = f8e4m3fn[2] convert(p)\n  ROOT c = u32[2] convert(f)"),
     [np.array([3, 5], np.uint32)], None),
    ("f32 -> f8e4m3fn -> u32 (XLA gives 0: measured)", _module(
        "  p = f32[2] parameter(0)\n  f = f8e4m3fn[2] convert(p)\n  ROOT c = u32[2] convert(f)"),
     [np.array([3e9, 5], np.float32)], None),
]


@pytest.mark.parametrize("name,text,args,want", ROWS, ids=[r[0] for r in ROWS])
def test_a_variant_of_a_filed_bug_is_known(name, text, args, want):
    report = SimpleNamespace(verdict="mismatch", culprit=None)
    assert known_folding(report, text, args) == want


def test_every_filed_class_is_described_and_only_mismatches_are_classified():
    assert FILED <= set(KNOWN_DIFFERENCES)
    text = ROWS[0][1]
    assert known_folding(SimpleNamespace(verdict="match", culprit=None), text, []) is None


PRED_TIMES = _module("  m = pred[4] parameter(0)\n  x = f16[4] parameter(1)\n"
                     "  c = f16[4] convert(m)\n  ROOT r = f16[4] multiply(c, x)")


def test_xla_cpus_select_for_a_product_with_a_converted_pred_is_known():
    """A campaign (seed 31): convert(p) * x with p false. By IEEE multiplication 0 * NaN
    and 0 * -inf are NaN and 0 * -2 is -0 (hloref); XLA's algebraic simplifier makes it
    select(p, x, 0), so XLA:CPU gives +0 everywhere (jax-ml/jax#12233, open). A wrong
    value that is not such a zero is not this class."""
    pytest.importorskip("jax")
    from hloref.fuzz.property import check_program
    from hloref.fuzz.workers import OracleWorker
    m = np.array([False, False, False, True])
    x = np.array([np.nan, -np.inf, -2.0, 3.0], np.float16)
    with OracleWorker("xla") as worker:
        outcome = check_program(PRED_TIMES, [m, x], worker)
    expected = np.asarray(outcome.report.expected).astype(np.float64)
    assert np.isnan(expected[:2]).all() and expected[2] == 0 and np.signbit(expected[2])
    assert np.asarray(outcome.report.actual).astype(np.float64).tolist() == [0, 0, 0, 3]
    # the rewrite is now a freedom of the envelope (fuzz/rewrites.py): a match naming it;
    # the record still classifies a value outside the freedom's preconditions
    assert outcome.kind == "match", outcome.report.summary()
    assert any(r.startswith("pred-multiply ") for r in outcome.report.envelope.rewrites)
    other = SimpleNamespace(verdict="mismatch", culprit=None, expected=outcome.report.expected,
                            actual=np.array([0, 0, 0, 2.5], np.float16))
    assert known_folding(other, PRED_TIMES, [m, x]) is None


ABS_SQUARE = """HloModule m

square {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  m = s32[] multiply(a, a)
  ROOT r = s32[] abs(m)
}

ENTRY e {
  p = s32[5] parameter(0)
  ROOT r = s32[5] map(p, p), dimensions={0}, to_apply=square
}
"""


def test_xla_cpus_dropped_abs_of_a_wrapping_signed_square_is_known():
    """A campaign (seed 0, --xla-opt fast; default options too): abs(x * x) in s32. By
    the wrapping semantics (-1805746537)^2 mod 2^32 is -847446767 as s32 and its abs
    847446767 (hloref; by hand below); XLA's simplifier drops the abs, taking x * x for
    non-negative (openxla/xla#41784: signed overflow is undefined to its maintainers),
    so XLA:CPU gives -847446767. A wrong value that is not the negation is not this
    class, and neither is an abs of a product of two different values."""
    pytest.importorskip("jax")
    from hloref.fuzz.property import check_program
    from hloref.fuzz.workers import OracleWorker
    x = np.array([-1805746537, 46341, 3, -65536, 2147483647], np.int32)
    wrapped = ((x.astype(np.int64) ** 2) % 2 ** 32).astype(np.uint32).view(np.int32)
    by_hand = np.abs(wrapped.astype(np.int64)).astype(np.int32)
    assert by_hand.tolist() == [847446767, 2147479015, 9, 0, 1]
    with OracleWorker("xla") as worker:
        outcome = check_program(ABS_SQUARE, [x], worker)
    assert np.asarray(outcome.report.expected).tolist() == by_hand.tolist()
    assert np.asarray(outcome.report.actual).tolist() == [-847446767, -2147479015, 9, 0, 1]
    assert outcome.kind == "known" and outcome.known == "signed-square-assumed-nonnegative"
    other = SimpleNamespace(verdict="mismatch", culprit=None, expected=outcome.report.expected,
                            actual=np.array([-847446767, 5, 9, 0, 1], np.int32))
    assert known_folding(other, ABS_SQUARE, [x]) is None
    product = ABS_SQUARE.replace("multiply(a, a)", "multiply(a, b)")
    same = SimpleNamespace(verdict="mismatch", culprit=None, expected=outcome.report.expected,
                           actual=outcome.report.actual)
    assert known_folding(same, product, [x]) is None


EXP_QUOTIENT = _module("  p = f64[5] parameter(0)\n  e = f64[5] exponential(p)\n"
                       "  ROOT d = f64[5] divide(e, e)")


def test_xla_cpus_exp_quotient_rewrite_is_known():
    """A campaign (seed 41): exp(x)/exp(x). By IEEE exp(1.7e269) = inf and inf/inf is
    NaN, exp(-1.75e51) = 0 and 0/0 is NaN, and exp(-inf)/exp(-inf) = 0/0 is NaN (hloref);
    XLA's algebraic simplifier rewrites exp(A)/exp(B) into exp(A - B) on purpose, so
    XLA:CPU gives exp(0) = 1 for the finite x and exp(NaN) = NaN for -inf. A wrong value
    where hloref's is not NaN is not this class."""
    pytest.importorskip("jax")
    from hloref.fuzz.property import check_program
    from hloref.fuzz.workers import OracleWorker
    x = np.array([1.739047580e269, -1.754018374e51, -np.inf, 0.5, -3.2e-235])
    with np.errstate(over="ignore", invalid="ignore"):
        by_hand = np.exp(x) / np.exp(x)
    assert np.isnan(by_hand[:3]).all() and (by_hand[3:] == 1).all()
    with OracleWorker("xla") as worker:
        outcome = check_program(EXP_QUOTIENT, [x], worker)
    assert np.array_equal(np.asarray(outcome.report.expected), by_hand, equal_nan=True)
    assert np.array_equal(np.asarray(outcome.report.actual), [1, 1, np.nan, 1, 1], equal_nan=True)
    # the rewrite is now a freedom of the envelope (fuzz/rewrites.py): a match naming it
    assert outcome.kind == "match", outcome.report.summary()
    assert any(r.startswith("exp-quotient ") for r in outcome.report.envelope.rewrites)
    other = SimpleNamespace(verdict="mismatch", culprit=None, expected=outcome.report.expected,
                            actual=np.array([1, 1, np.nan, 2, 1]))
    assert known_folding(other, EXP_QUOTIENT, [x]) is None


@pytest.mark.parametrize("literal,actual,want", [
    ("5.877e-39", np.nan, "ftz"),    # 2^-127: the folder flushes it, ceil(0) = 0 is NaN
    ("5.877e-39", 2.0, None),        # a wrong value that is no NaN
    ("1.175e-38", np.nan, None),     # 2^-126 is a normal f32: nothing to flush
])
def test_a_folded_f8e8m0fnu_op_of_the_least_value_flushed_to_nan_is_ftz(literal, actual, want):
    """A campaign (seed 53): ceil of the f8e8m0fnu constant 2^-127 is 1 (hloref; by hand:
    0 < 2^-127 <= 1); XLA's constant folder computes in f32, where 2^-127 is subnormal
    and flushed, ceil(0) = 0, and f8e8m0fnu has no zero: NaN."""
    e8 = ml_dtypes.float8_e8m0fnu
    text = _module(f"  k = f8e8m0fnu[] constant({literal})\n"
                   "  ROOT c = f8e8m0fnu[] ceil(k)")
    import hloref
    expected = hloref.evaluate(text)
    assert float(np.asarray(expected).astype(np.float64)) == 1.0  # ceil of (0, 1]
    report = SimpleNamespace(verdict="mismatch", culprit=None, expected=expected,
                             actual=np.array(actual).astype(e8))
    assert known_folding(report, text, []) == want
