"""The gpu backend against the cpu backend (bit for bit) and against XLA:CPU
(``compare_values``), on small shapes, in the CUDA simulator or on a GPU."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import hloref
from hloref.errors import HloUnsupportedError
from hloref.fuzz.compare import accumulation_atol
from hloref.types import element_type

from hloref.gpu.device import SIMULATOR

from gpu_check import RNG, FLOATS, bits_equal, check, module, values


# ---------------------------------------------------------------- elementwise

BINARY_FLOAT = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "remainder",
                "power", "atan2"]
UNARY_FLOAT = ["negate", "abs", "sign", "ceil", "floor", "round-nearest-afz", "round-nearest-even",
               "exponential", "log", "sqrt", "rsqrt", "tanh", "sine", "cosine", "logistic",
               "exponential-minus-one", "log-plus-one", "cbrt", "atan", "erf", "tan", "sinh",
               "cosh", "asin", "acos", "asinh", "acosh", "atanh"]


@pytest.mark.parametrize("t", FLOATS)
def test_binary_float(t):
    a, b = values(t, (5, 7)), values(t, (5, 7))
    for op in BINARY_FLOAT:
        check(module([f"{t}[5,7]"] * 2, f"{op}(p0, p1)", f"{t}[5,7]"), a, b, opcode=op,
              xla=op not in ("power", "atan2") or t == "f32")


@pytest.mark.parametrize("t", FLOATS)
def test_unary_float(t):
    kinds = {"log": "positive", "sqrt": "positive", "rsqrt": "positive", "log-plus-one": "positive",
             "asin": "unit", "acos": "unit", "atanh": "unit", "acosh": "positive"}
    for op in UNARY_FLOAT:
        x = values(t, (6, 6), kind=kinds.get(op, "normal"))
        if op == "acosh":
            x = (np.abs(x.astype(np.float32)) + 1.0).astype(x.dtype)
        check(module([f"{t}[6,6]"], f"{op}(p0)", f"{t}[6,6]"), x, opcode=op,
              xla=t in ("f32", "bf16") and op not in ("tan", "sinh", "cosh", "acosh", "asinh"))
    check(module([f"{t}[6,6]"], "is-finite(p0)", "pred[6,6]"), values(t, (6, 6)))


INT_BINARY = ["add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "and",
              "or", "xor", "shift-left", "shift-right-logical", "shift-right-arithmetic", "power"]


@pytest.mark.parametrize("t", ["s32", "u8", "s8", "s64", "u32", "s4"])
def test_binary_int(t):
    a = values(t, (8, 8))
    b = values(t, (8, 8))
    b.reshape(-1)[:8] = np.array([0, 0, 1, 3, 7, 8, 31, 64]).astype(np.int64).astype(b.dtype)
    b.reshape(-1)[8] = a.reshape(-1)[8]
    if t[0] == "s":
        a.reshape(-1)[9] = element_type(t).min_value
        b.reshape(-1)[9] = -1  # INT_MIN / -1
    for op in INT_BINARY:
        y = values(t, (8, 8), kind="small") if op == "power" else b
        check(module([f"{t}[8,8]"] * 2, f"{op}(p0, p1)", f"{t}[8,8]"), a, y, opcode=op,
              xla=(t != "s4" and op != "power"))
    for op in ["negate", "abs", "not", "popcnt", "count-leading-zeros", "sign"]:
        if op in ("abs", "sign", "negate") and t[0] == "u":
            continue
        check(module([f"{t}[8,8]"], f"{op}(p0)", f"{t}[8,8]"), a, opcode=op, xla=t != "s4")
    if t in ("s32", "u32", "s64"):
        check(module([f"{t}[8,8]"] * 2, "mulhi(p0, p1)", f"{t}[8,8]"), a, b, xla=False)


def test_pred_ops():
    a, b = values("pred", (4, 4)), values("pred", (4, 4))
    for op in ["and", "or", "xor", "maximum", "minimum", "add", "multiply"]:
        check(module(["pred[4,4]"] * 2, f"{op}(p0, p1)", "pred[4,4]"), a, b, xla=False)
    check(module(["pred[4,4]"], "not(p0)", "pred[4,4]"), a)


# ---------------------------------------------------------------- compare, select, clamp, convert


@pytest.mark.parametrize("t", ["f32", "bf16", "f8e4m3fn", "s32", "u16", "pred"])
def test_compare_select_clamp(t):
    a, b = values(t, (4, 6)), values(t, (4, 6))
    b.reshape(-1)[-3:] = a.reshape(-1)[-3:]
    for d in ["EQ", "NE", "LT", "LE", "GT", "GE"]:
        check(module([f"{t}[4,6]"] * 2, f"compare(p0, p1), direction={d}", "pred[4,6]"), a, b)
        if element_type(t).is_float:
            check(module([f"{t}[4,6]"] * 2, f"compare(p0, p1), direction={d}, type=TOTALORDER",
                         "pred[4,6]"), a, b)
    p = values("pred", (4, 6))
    check(module(["pred[4,6]", f"{t}[4,6]", f"{t}[4,6]"], "select(p0, p1, p2)", f"{t}[4,6]"), p, a, b)
    if t != "pred":
        lo, hi = np.sort(values(t, (2,), kind="small" if t[0] in "su" else "positive"))
        lo = np.asarray(-hi if t[0] in "sf" else lo, dtype=a.dtype)
        check(module([f"{t}[]", f"{t}[4,6]", f"{t}[]"], "clamp(p0, p1, p2)", f"{t}[4,6]"),
              lo, a, np.asarray(hi, a.dtype))


CONVERT_TYPES = ["f32", "f64", "bf16", "f16", "f8e4m3fn", "f8e5m2", "s32", "u8", "s64", "s4", "pred"]


def test_convert_matrix():
    for src in CONVERT_TYPES:
        x = values(src, (4, 4))
        if element_type(src).is_float:
            x = (x.astype(np.float64) * 40).astype(x.dtype)
        for dst in CONVERT_TYPES:
            check(module([f"{src}[4,4]"], "convert(p0)", f"{dst}[4,4]"), x,
                  xla=not ({src, dst} & {"s4"}) and not (element_type(src).is_float and element_type(dst).is_integer))


def test_narrow_floats_bit_exact_with_ml_dtypes():
    x = np.linspace(-300, 300, 64).astype(np.float32)
    for t, dt in [("bf16", ml_dtypes.bfloat16), ("f16", np.float16), ("f8e4m3fn", ml_dtypes.float8_e4m3fn)]:
        out = hloref.evaluate(module(["f32[64]"], "convert(p0)", f"{t}[64]"), x, backend="gpu")
        assert bits_equal(out, x.astype(dt))
        back = hloref.evaluate(module([f"{t}[64]"], "convert(p0)", "f32[64]"), out, backend="gpu")
        assert bits_equal(back, out.astype(np.float32))


# ---------------------------------------------------------------- shape ops


@pytest.mark.parametrize("t", ["f32", "bf16", "s8", "c64"])
def test_shape_ops(t):
    x = values(t, (3, 4, 2)) if t != "c64" else (RNG.standard_normal((3, 4, 2)) + 1j).astype(np.complex64)
    T = f"{t}[3,4,2]"
    check(module([T], "transpose(p0), dimensions={2,0,1}", f"{t}[2,3,4]"), x)
    check(module([T], "reshape(p0)", f"{t}[4,6]"), x)
    check(module([T], "broadcast(p0), dimensions={0,2,3}", f"{t}[3,5,4,2]"), x)
    check(module([T], "slice(p0), slice={[1:3], [0:4:3], [1:2]}", f"{t}[2,2,1]"), x)
    check(module([T], "reverse(p0), dimensions={0,2}", T), x)
    check(module([T], "copy(p0)", T), x)
    check(module([T, T], "concatenate(p0, p1), dimensions={1}", f"{t}[3,8,2]"), x, x)
    pv = x.reshape(-1)[:1].reshape(())
    check(module([T, f"{t}[]"], "pad(p0, p1), padding=1_2_1x-1_0_0x0_1_2", f"{t}[8,3,5]"), x, pv)
    s = values(t, ()) if t != "c64" else np.complex64(2 + 1j).reshape(())
    check(module([f"{t}[]"], "broadcast(p0), dimensions={}", f"{t}[2,3]"), np.asarray(s))


@pytest.mark.parametrize("t", ["s32", "u8", "f32", "bf16", "f8e4m3fn"])
def test_iota(t):
    check(module([], "iota(), iota_dimension=1", f"{t}[3,20]"))


# ---------------------------------------------------------------- reduce, dot, convolution

REDUCER = """
{k} {{
  x = {t}[] parameter(0)
  y = {t}[] parameter(1)
  ROOT r = {t}[] {op}(x, y)
}}
"""


@pytest.mark.parametrize("t,op", [("f32", "add"), ("bf16", "add"), ("f32", "maximum"),
                                  ("f8e4m3fn", "minimum"), ("s32", "add"), ("u8", "multiply"),
                                  ("s32", "xor"), ("pred", "and"), ("f32", "multiply")])
def test_reduce(t, op):
    x = values(t, (4, 3, 5), kind="unit" if op == "multiply" else "normal")
    if element_type(t).is_float and op in ("add", "multiply"):
        x = values(t, (4, 3, 5), kind="unit")
    init = {"add": 0, "multiply": 1, "maximum": -np.inf, "minimum": np.inf, "xor": 0, "and": 1}[op]
    if element_type(t).is_integer and op in ("maximum", "minimum"):
        init = 0
    init = np.asarray(init).astype(x.dtype)
    xf = np.abs(x.astype(np.float64)) if t != "pred" else None
    for dims, out in [("{1}", "[4,5]"), ("{2,0}", "[3]"), ("{0,1,2}", "[]")]:
        atol = None
        if xf is not None and element_type(t).is_float and op in ("add", "multiply"):
            # XLA accumulates in the element type (bf16 in bf16), hloref in f64
            axes = tuple(int(d) for d in dims.strip("{}").split(","))
            terms = xf.sum(axis=axes) if op == "add" else xf.prod(axis=axes)
            atol = accumulation_atol(60, terms, element_type(t))
        text = module([f"{t}[4,3,5]", f"{t}[]"], f"reduce(p0, p1), dimensions={dims}, to_apply=red",
                      f"{t}{out}", extra=REDUCER.format(k="red", t=t, op=op))
        check(text, x, init, opcode="reduce", exact=not (element_type(t).is_float and op in ("add", "multiply")),
              atol=atol)


@pytest.mark.parametrize("ta,tr", [("f32", "f32"), ("bf16", "f32"), ("f8e4m3fn", "f32"),
                                   ("s32", "s32"), ("f32", "bf16")])
def test_dot(ta, tr):
    a, b = values(ta, (2, 3, 4), kind="unit"), values(ta, (2, 4, 5), kind="unit")
    if ta == "s32":
        a, b = values(ta, (2, 3, 4)), values(ta, (2, 4, 5))
    text = module([f"{ta}[2,3,4]", f"{ta}[2,4,5]"],
                  "dot(p0, p1), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, "
                  "rhs_contracting_dims={1}", f"{tr}[2,3,5]")
    atol = None
    if ta != "s32":
        atol = accumulation_atol(4, np.matmul(np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64))),
                                 element_type("f32"))
    check(text, a, b, opcode="dot", exact=ta == "s32", atol=atol)
    # no batch, two contracting dims, transposed operands
    text = module([f"{ta}[4,3,2]", f"{ta}[5,4,2]"],
                  "dot(p0, p1), lhs_contracting_dims={0,2}, rhs_contracting_dims={1,2}", f"{tr}[3,5]")
    a2, b2 = np.ascontiguousarray(np.transpose(a, (2, 1, 0))), np.ascontiguousarray(np.transpose(b, (2, 1, 0)))
    check(text, a2, b2, opcode="dot", exact=ta == "s32", atol=None if ta == "s32" else 1e-5)


@pytest.mark.parametrize("case", [
    ("f32[1,5,5,2]", "f32[3,3,2,4]", "f32[1,5,5,4]", "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f"),
    ("f32[2,4,7]", "f32[6,2,3]", "f32[2,6,2]",
     "window={size=3 stride=2 pad=0_-1 lhs_dilate=1 rhs_dilate=1}, dim_labels=bf0_oi0->bf0, feature_group_count=2"),
    ("f32[2,2,6]", "f32[3,2,2]", "f32[2,3,12]", "window={size=2 pad=2_1 lhs_dilate=2 rhs_dilate=2 rhs_reversal=1}, dim_labels=bf0_oi0->bf0"),
    ("s32[1,2,5]", "s32[2,2,2]", "s32[1,2,4]", "window={size=2}, dim_labels=bf0_oi0->bf0"),
    ("bf16[4,2,3]", "bf16[4,2,2]", "f32[2,4,2]", "window={size=2}, dim_labels=bf0_oi0->bf0, batch_group_count=2"),
])
def test_convolution(case):
    lt, rt, ot, attrs = case
    ldims = tuple(int(v) for v in lt[lt.index("[") + 1:-1].split(","))
    rdims = tuple(int(v) for v in rt[rt.index("[") + 1:-1].split(","))
    t = lt[:lt.index("[")]
    x, w = values(t, ldims, kind="unit"), values(t, rdims, kind="unit")
    if t == "s32":
        x, w = values(t, ldims, kind="small"), values(t, rdims, kind="small")
    check(module([lt, rt], f"convolution(p0, p1), {attrs}", ot), x, w, opcode="convolution",
          exact=t == "s32", atol=None if t == "s32" else 1e-5)


# ---------------------------------------------------------------- control flow and fallbacks

WHILE = """HloModule w

cond {
  s = (s32[], f32[8], s8[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}

body {
  s = (s32[], f32[8], s8[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[8] get-tuple-element(s), index=1
  k = s8[8] get-tuple-element(s), index=2
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  half = f32[] constant(0.5)
  hb = f32[8] broadcast(half), dimensions={}
  v2 = f32[8] multiply(v, hb)
  c = s8[] constant(100)
  cb = s8[8] broadcast(c), dimensions={}
  k2 = s8[8] add(k, cb)
  ROOT t = (s32[], f32[8], s8[8]) tuple(i2, v2, k2)
}

ENTRY e {
  x = f32[8] parameter(0)
  y = s8[8] parameter(1)
  z = s32[] constant(0)
  init = (s32[], f32[8], s8[8]) tuple(z, x, y)
  ROOT w = (s32[], f32[8], s8[8]) while(init), condition=cond, body=body
}
"""


def test_while_device_state():
    out = check(WHILE, values("f32", (8,)), values("s8", (8,)))
    assert int(out[0]) == 5


def test_fallback_counted_and_warned():
    # a custom-call target without a device version (the safety net) in a reducer: the
    # reducer runs one call at a time through the GPU interpreter (gpu/calls.py), whose
    # custom-call runs on the CPU at each call, each counted and warned; GetRngSeed
    # gives the low word of the evaluation's state and advances it by one, so each of
    # the 6 calls adds another seed (by hand: S0, S0 + 1, ... low words, as u64)
    from hloref.evaluator.rng import RNG_STATE_INITIAL
    a = np.arange(6, dtype=np.uint64)
    red = ("red {\n  x = u64[] parameter(0)\n  y = u64[] parameter(1)\n"
           "  g = u64[] custom-call(), custom_call_target=\"GetRngSeed\"\n"
           "  s = u64[] add(x, y)\n  ROOT t = u64[] add(s, g)\n}\n")
    text = module(["u64[6]", "u64[]"], "reduce(p0, p1), dimensions={0}, to_apply=red", "u64[]",
                  extra=red)
    zero = np.uint64(0)
    out = check(text, a, zero, fallbacks=6, opcode="reduce", xla=False)
    low = RNG_STATE_INITIAL & (2**64 - 1)
    assert int(out) == (int(a.sum()) + sum(low + k for k in range(6))) % 2**64
    report = hloref.gpu.last_report
    assert report.counts == {"custom-call": 6}
    m = hloref.parse(text)
    with pytest.raises(HloUnsupportedError):
        hloref.gpu.evaluate_gpu(m, [a, zero], fallback=False)


def test_reducer_with_ops_the_compiler_refuses_runs_on_the_device():
    # a reducer with an array of four elements and a sort of it (no scalar device form):
    # one call at a time through the GPU interpreter (gpu/calls.py), no fallback
    red = """
red {
  x = s32[] parameter(0)
  y = s32[] parameter(1)
  b = s32[4] broadcast(y), dimensions={}
  i = s32[4] iota(), iota_dimension=0
  m = s32[4] multiply(b, i)
  s = s32[4] sort(m), dimensions={0}, to_apply=lt
  l = s32[1] slice(s), slice={[3:4]}
  v = s32[] reshape(l)
  ROOT a = s32[] add(x, v)
}
lt {
  p = s32[] parameter(0)
  q = s32[] parameter(1)
  ROOT c = pred[] compare(p, q), direction=LT
}
"""
    text = module(["s32[3,4]", "s32[]"], "reduce(p0, p1), dimensions={1}, to_apply=red", "s32[3]",
                  extra=red)
    x = values("s32", (3, 4), kind="small")
    out = check(text, x, np.int32(1), xla=False)
    # by hand: each element y contributes max(0, 3 y) (the largest of 0, y, 2y, 3y)
    np.testing.assert_array_equal(out, 1 + np.maximum(0, 3 * x).sum(axis=1))


def test_opcode_without_gpu_kernel_falls_back():
    from hloref.evaluator.registry import load_all
    from hloref.gpu.registry import load_all as gpu_ops
    missing = sorted(set(load_all()) - set(gpu_ops()))
    assert hloref.gpu.gpu_status("parameter") == "yes"
    for op in missing:
        assert hloref.gpu.gpu_status(op).startswith("cpu fallback")
    assert hloref.supported_opcodes("gpu") >= hloref.supported_opcodes("cpu")
    # every opcode has a GPU op (runtime dimension sizes too: tests/gpu/test_gpu_dynamic.py)
    assert missing == []


def test_ops_table_fallback_notes():
    """What ``hloref ops`` still lists as running on the CPU: custom-call targets without
    a device version (the safety net), and nothing else: every other opcode runs on the
    device in every element type, and so does every computation an op calls (compiled,
    or one call at a time through the GPU interpreter). A new fallback note fails here."""
    from hloref.evaluator.registry import load_all
    noted = {op: hloref.gpu.gpu_status(op) for op in load_all()}
    noted = {op: s for op, s in noted.items() if "fallback" in s}
    assert set(noted) == {"custom-call"}


def test_conditional():
    text = """HloModule c
t { p = f32[4] parameter(0)  ROOT n = f32[4] negate(p) }
f { p = f32[4] parameter(0)  ROOT n = f32[4] abs(p) }
ENTRY e {
  b = pred[] parameter(0)
  x = f32[4] parameter(1)
  ROOT r = f32[4] conditional(b, x, x), true_computation=t, false_computation=f
}
"""
    x = values("f32", (4,))
    check(text, np.bool_(True), x)
    check(text, np.bool_(False), x)


@pytest.mark.skipif(SIMULATOR, reason="needs a real CUDA GPU (runs under the simulator otherwise)")
def test_real_gpu_smoke():  # pragma: no cover - needs hardware
    from numba import cuda
    if not cuda.is_available():
        pytest.skip("no CUDA GPU")
    a = values("f32", (64,))
    check(module(["f32[64]"] * 2, "add(p0, p1)", "f32[64]"), a, a)


DYNAMIC = """HloModule m
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
ENTRY e {
  p = f32[4] parameter(0)
  n = s32[] parameter(1)
  d = f32[<=4] set-dimension-size(p, n), dimensions={0}
  z = f32[] constant(0)
  r = f32[] reduce(d, z), dimensions={0}, to_apply=add
  g = s32[] get-dimension-size(d), dimensions={0}
  ROOT t = (f32[], s32[]) tuple(r, g)
}
"""


def test_runtime_dimension_sizes_on_the_device():
    """The gpu interpreter tracks runtime sizes (host ints beside device buffers): the
    reduce sums the 2 valid elements (by hand: 1 + 2) instead of all 4, with no
    fallback (more: tests/gpu/test_gpu_dynamic.py)."""
    m = hloref.parse(DYNAMIC)
    x = np.array([1, 2, 3, 4], np.float32)
    out = hloref.evaluate(m, x, np.int32(2), backend="gpu", fallback=False)
    assert float(out[0]) == 3.0 and int(out[1]) == 2
    assert not hloref.gpu.last_report


def test_get_dimension_size_static_on_the_device():
    out = check(module(["f32[5,3]"], "get-dimension-size(p0), dimensions={1}", "s32[]"),
                values("f32", (5, 3)), xla=False)
    assert out == 3 and out.dtype == np.int32


def test_simulator_threads_yield_at_each_poll(monkeypatch):
    """Under the simulator the backend patches its block threads once
    (gpu/simulator.py): the launching thread's polls call ``time.sleep(0)`` (releasing
    the GIL) before asking ``is_alive``, whose answer is unchanged, so a map whose body
    draws (x + rng(2, 5)) still gives values in [2, 5) (the written distribution). The
    time it saves (40-85 s -> 0.4 s for this map, measured) is not asserted here."""
    import time

    from hloref.gpu.device import SIMULATOR
    if not SIMULATOR:
        pytest.skip("simulator only")
    from numba.cuda.simulator import kernel as simulated
    assert getattr(simulated.BlockThread, "_hloref_polite_poll", False)
    yields = []
    real_sleep = time.sleep
    monkeypatch.setattr(time, "sleep", lambda s: (yields.append(s), real_sleep(s)))
    body = """HloModule m
body {
  x = f32[] parameter(0)
  lo = f32[] constant(2)
  hi = f32[] constant(5)
  r = f32[] rng(lo, hi), distribution=rng_uniform
  ROOT s = f32[] add(x, r)
}
ENTRY e {
  p = f32[256] parameter(0)
  ROOT m = f32[256] map(p), dimensions={0}, to_apply=body
}
"""
    out = np.asarray(hloref.evaluate(body, np.zeros(256, np.float32), backend="gpu",
                                     fallback=False))
    assert yields and all(s == 0 for s in yields)
    assert (out >= 2).all() and (out < 5).all()


def _dead_tuple_elements() -> dict:
    """The modules of tests/test_dead_code.py (written once, there)."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from test_dead_code import DEAD_TUPLE_ELEMENTS
    return DEAD_TUPLE_ELEMENTS


@pytest.mark.parametrize("name", sorted(_dead_tuple_elements()))
def test_a_tuple_element_nothing_reads_is_dead_code_on_the_gpu_too(name):
    """get-tuple-element of a tuple instruction reads the element itself, on the GPU
    backend as on the CPU (tests/test_dead_code.py's modules): the tuple's other elements
    (an infinite loop, an rng-bit-generator no algorithm takes) are dead code; -p + p = 0
    by hand, bit for bit with the CPU backend and XLA:CPU."""
    text = _dead_tuple_elements()[name]
    x = np.array([1.5, -2.0, 3.25, 0.0], np.float32)
    check(text, x, xla="required")
    assert np.array_equal(hloref.evaluate(text, x, backend="gpu", fallback=False),
                          np.zeros(4, np.float32))
