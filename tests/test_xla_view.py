"""The freedoms XLA takes once it has inlined calls and sunk constants into loops
(fuzz/xla_view.py): the rewrites of fuzz/rewrites.py and excess precision across those
boundaries. Three campaign false alarms of issue 30, each as a small module.

Independent reference: XLA:CPU through the oracle worker. Each case's module is one XLA
rewrites (XLA's value is far from the written one, and the verdict is a match), and its
planted variant is one where XLA does not (a call marked ``inlineable="false"``, a
divisor that is no broadcast, a loop constant that is a parameter): XLA's own value
there is the written one, and the rewritten value, planted as the oracle's, is a
mismatch."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import hloref
from hloref.fuzz.differential import diff
from hloref.fuzz.rewrites import matches
from hloref.fuzz.workers import OracleWorker
from hloref.fuzz.xla_view import XlaView

FLT_MAX = np.float32(3.4028235e38)

#: multiply(call, x), the call's root a convert of a pred (an f16_classifier_loss mutant:
#: a one-hot in a call times a log-softmax): after CallInliner, Mul(Convert(Pred), X)
ONEHOT = """HloModule m
onehot {
  p = s32[4] parameter(0)
  k = s32[4] constant({0, 1, 2, 3})
  eq = pred[4] compare(p, k), direction=EQ
  ROOT c = f32[4] convert(eq)
}
"""
PRED_IN_CALL = ONEHOT + """ENTRY e {
  l = s32[4] parameter(0)
  x = f32[4] parameter(1)
  h = f32[4] call(l), to_apply=onehot%s
  ROOT r = f32[4] multiply(x, h)
}
"""
PRED_IN_CALL_ARGS = [np.array([0, 0, 2, 0], np.int32),
                     np.array([np.nan, np.inf, 1.5, -np.inf], np.float32)]

#: the same with the pred passed into the call: the callee's parameter is the caller's
#: operand once inlined
PRED_THROUGH_PARAMETER = """HloModule m
conv {
  q = pred[4] parameter(0)
  ROOT c = f32[4] convert(q)
}
ENTRY e {
  p = pred[4] parameter(0)
  x = f32[4] parameter(1)
  h = f32[4] call(p), to_apply=conv%s
  ROOT r = f32[4] multiply(h, x)
}
"""
PRED_THROUGH_PARAMETER_ARGS = [np.array([False, False, True, False]),
                               np.array([np.nan, np.inf, 2.0, np.nan], np.float32)]

#: x / reshape(reshape(broadcast(c))), c a parameter at -FLT_MAX (an attention_fwd
#: mutant's cut): the simplifier merges the reshapes into the broadcast, then
#: A / broadcast(B) => A * broadcast(1 / B), 1/c subnormal and read as 0
DIVIDE_BY_RESHAPED_BROADCAST = """HloModule m
ENTRY e {
  x = f32[2,4,8] parameter(0)
  c = f32[] parameter(1)
  b = f32[2,32] broadcast(c), dimensions={}
  r1 = f32[64] reshape(b)
  r2 = f32[2,4,8] reshape(r1)
  ROOT d = f32[2,4,8] divide(x, r2)
}
"""
#: planted: the divisor is the same values without a broadcast
DIVIDE_BY_RESHAPED_ARRAY = """HloModule m
ENTRY e {
  x = f32[2,4,8] parameter(0)
  c = f32[2,32] parameter(1)
  r1 = f32[64] reshape(c)
  r2 = f32[2,4,8] reshape(r1)
  ROOT d = f32[2,4,8] divide(x, r2)
}
"""
DIVIDE_ARGS = [np.full((2, 4, 8), 1e30, np.float32), -FLT_MAX]

#: a loop-invariant constant in a while body (a batch_norm_training mutant's loop):
#: WhileLoopConstantSinking makes the divisor broadcast(constant), then A / Const =>
#: A * (1 / Const)
LOOP = """HloModule m
cond {
  p = (s32[], f32[8], f32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(2)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], f32[8], f32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[8] get-tuple-element(p), index=1
  c = f32[] get-tuple-element(p), index=2
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  b = f32[8] broadcast(c), dimensions={}
  d = f32[8] divide(x, b)
  x1 = f32[8] multiply(d, b)
  ROOT t = (s32[], f32[8], f32[]) tuple(i1, x1, c)
}
ENTRY e {
  x = f32[8] parameter(0)
  %s
  z = s32[] constant(0)
  t = (s32[], f32[8], f32[]) tuple(z, x, c)
  w = (s32[], f32[8], f32[]) while(t), condition=cond, body=body
  ROOT r = f32[8] get-tuple-element(w), index=1
}
"""
LOOP_CONSTANT = LOOP % "c = f32[] constant(-3.40282347e+38)"
LOOP_PARAMETER = LOOP % "c = f32[] parameter(1)"

#: a bf16 sum returned by a call and compared in f32 (a bf16 log-softmax in a call):
#: once inlined, float normalization lets the convert read the f32 sum (excess
#: precision), 256 + 1 = 257 is not rounded to bf16, and 257 == 257
BF16_IN_CALL = """HloModule m
f {
  a = bf16[8] parameter(0)
  b = bf16[8] parameter(1)
  ROOT s = bf16[8] add(a, b)
}
ENTRY e {
  a = bf16[8] parameter(0)
  b = bf16[8] parameter(1)
  s = bf16[8] call(a, b), to_apply=f%s
  r = f32[8] convert(s)
  k = f32[] constant(257)
  kb = f32[8] broadcast(k), dimensions={}
  eq = pred[8] compare(r, kb), direction=EQ
  ROOT o = f32[8] convert(eq)
}
"""
BF16_ARGS = [np.full(8, 256, ml_dtypes.bfloat16),
             np.array([1, 1, 1, 1, 2, 1, 0, 1], ml_dtypes.bfloat16)]

NOT_INLINED = ', frontend_attributes={inlineable="false"}'

#: name -> (module, planted module where XLA takes no freedom, inputs of both, the
#: rewrite the verdict names or None for excess precision)
CASES = {
    "pred-multiply-in-call": (PRED_IN_CALL % "", PRED_IN_CALL % NOT_INLINED,
                              PRED_IN_CALL_ARGS, "pred-multiply"),
    "pred-multiply-through-parameter": (PRED_THROUGH_PARAMETER % "",
                                        PRED_THROUGH_PARAMETER % NOT_INLINED,
                                        PRED_THROUGH_PARAMETER_ARGS, "pred-multiply"),
    "divide-by-reshaped-broadcast": (DIVIDE_BY_RESHAPED_BROADCAST, DIVIDE_BY_RESHAPED_ARRAY,
                                     DIVIDE_ARGS, "divide-by-broadcast"),
    "divide-by-constant-sunk-into-loop": (LOOP_CONSTANT, LOOP_PARAMETER,
                                          [np.full(8, 1e30, np.float32)],
                                          "divide-by-constant"),
    "excess-precision-in-call": (BF16_IN_CALL % "", BF16_IN_CALL % NOT_INLINED, BF16_ARGS,
                                 None),
}


@pytest.fixture(scope="module")
def worker():
    with OracleWorker("xla") as w:
        yield w


def _planted_args(name, args):
    if name == "divide-by-reshaped-broadcast":
        return [args[0], np.full((2, 32), args[1], np.float32)]
    if name == "divide-by-constant-sunk-into-loop":
        return [args[0], -FLT_MAX]
    return args


def _far(a, b) -> bool:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    with np.errstate(invalid="ignore"):
        return bool(np.any(~np.isclose(a, b, rtol=1e-3, atol=0, equal_nan=True)))


@pytest.mark.parametrize("name", sorted(CASES))
def test_xla_takes_the_freedom_across_the_boundary_and_the_verdict_is_a_match(worker, name):
    text, _, args, rewrite = CASES[name]
    report = diff(text, args, worker=worker)
    assert _far(report.actual, report.expected), (report.actual, report.expected)
    assert report.verdict == "match", report.summary()
    if rewrite is not None:
        assert any(r.startswith(rewrite) for r in report.envelope.rewrites), report.summary()


@pytest.mark.parametrize("name", sorted(CASES))
def test_where_xla_takes_no_freedom_the_planted_value_is_a_mismatch(worker, name):
    text, planted, args, _ = CASES[name]
    rewritten = diff(text, args, worker=worker, localize=False).actual
    args = _planted_args(name, args)
    own = diff(planted, args, worker=worker, localize=False)
    assert own.verdict == "match", own.summary()  # XLA keeps the written value there
    assert _far(own.actual, rewritten)
    report = diff(planted, args, worker=worker, oracle_value=rewritten, localize=False)
    assert report.verdict == "mismatch", report.summary()


def test_the_view_follows_calls_parameters_and_sunk_constants_only_where_xla_does():
    module = hloref.parse(PRED_THROUGH_PARAMETER % "")
    view = XlaView(module)
    h = next(i for i in module.entry.instructions if i.name == "h")
    root, path = view.through(h, ())
    assert root.name == "c" and path == (h,)
    assert view.through(root.operands[0], path)[0].name == "p"  # back to the caller
    assert XlaView(hloref.parse(PRED_THROUGH_PARAMETER % NOT_INLINED)).callees == {}
    loop = hloref.parse(LOOP_CONSTANT)
    gte = next(i for i in loop.computations["body"].instructions if i.name == "c")
    assert XlaView(loop).constant(gte) is not None
    assert XlaView(hloref.parse(LOOP_PARAMETER)).constant(
        next(i for i in hloref.parse(LOOP_PARAMETER).computations["body"].instructions
             if i.name == "c")) is None
    found = matches(loop, loop.computations["body"])
    assert [r.name for r, _ in found["d"]] == ["divide-by-constant"]


def test_a_reshape_read_elsewhere_keeps_the_broadcast_alive_and_the_rewrite_away():
    # r1 has a second use: XLA's merged reshape(broadcast) is a new broadcast beside the
    # old one, so c has two uses and A / broadcast(B) does not apply
    text = DIVIDE_BY_RESHAPED_BROADCAST.replace(
        "  ROOT d = f32[2,4,8] divide(x, r2)",
        "  d = f32[2,4,8] divide(x, r2)\n  ROOT t = (f32[2,4,8], f32[64]) tuple(d, r1)")
    module = hloref.parse(text)
    assert "d" not in matches(module, module.entry)
    module = hloref.parse(DIVIDE_BY_RESHAPED_BROADCAST)
    assert [r.name for r, _ in matches(module, module.entry)["d"]] == ["divide-by-broadcast"]


def test_a_computation_called_twice_gives_each_call_its_own_operand_values(worker):
    # the same one-hot called on two label vectors: each multiply's rewritten value
    # (select(pred, x, 0)) reads the pred of its own call (with the other call's, r2's
    # first element would be NaN where XLA gives 0)
    text = ONEHOT + """ENTRY e {
  l1 = s32[4] parameter(0)
  l2 = s32[4] parameter(1)
  x = f32[4] parameter(2)
  h1 = f32[4] call(l1), to_apply=onehot
  h2 = f32[4] call(l2), to_apply=onehot
  r1 = f32[4] multiply(x, h1)
  r2 = f32[4] multiply(h2, x)
  ROOT t = (f32[4], f32[4]) tuple(r1, r2)
}
"""
    args = [np.array([0, 0, 2, 0], np.int32), np.array([9, 1, 9, 3], np.int32),
            np.array([np.nan, np.inf, 1.5, -np.inf], np.float32)]
    report = diff(text, args, worker=worker)
    assert np.array_equal(np.asarray(report.actual[1]), [0, np.inf, 0, -np.inf])
    assert report.verdict == "match", report.summary()
    assert sum(r.startswith("pred-multiply") for r in report.envelope.rewrites) == 2
