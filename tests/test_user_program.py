"""User programs (fuzz/user_program.py): every stored finding written as a plain JAX and
a plain TF program, run in a fresh process and compared with the finding's stored
values (never with hloref's evaluator). Each either reproduces, or says why not: the
translator's reason (a type or op the API lacks, an op the API lowers to other HLO), or
the measured reason pinned below. The table of outcomes is printed (``-s`` shows it)."""

from __future__ import annotations

import numpy as np
import pytest
from stored_findings import DIRS, load

from hloref.fuzz.standalone import run_script, standalone_script
from hloref.fuzz.user_program import confirm, hlo_opcodes, run_program, user_program

#: (finding, api) pairs whose program reproduces the finding (the stored value bit for
#: bit, or the same crash). For a TF finding under jax (and the reverse) it means the
#: other XLA, reached from its own user API, gives the same wrong value.
REPRODUCES = {
    (name, "jax") for name in (
        "atan2-iota-zero-zero-nan", "clz-s8-constant-folding", "concatenate-s2-aborts",
        "convert-bf16-to-pred-and-u16-llvm-cannot-select", "convert-f4e2m1fn-to-s64-saturates",
        "convert-int-f8-unsigned-fused-nan-saturates",
        "convolution-lhs-dilate-simplifier-check-failure",
        "convolution-s16-constant-folding-saturates", "divide-u2-constant-zero-sigfpe",
        "dynamic-update-slice-overlapping-update", "log-plus-one-f64-15-ulp",
        "reduce-s2-maximum-of-broadcast", "round-nearest-afz-f8e3m4-constant-folding",
        "s4-add-does-not-wrap", "sort-s2-not-a-permutation",
        "slice-of-empty-concatenate-stablehlo-crash",
        # TF findings: jax's chlo expansions of asin/atanh give TF's wrong values on jaxlib
        "asin-f8e8m0fnu-nan", "atanh-f64-104-ulp")
} | {
    (name, "tf") for name in (
        "atanh-f64-104-ulp", "convert-bf16-to-pred-and-u16-llvm-cannot-select",
        "convert-int-f8-unsigned-fused-nan-saturates", "log-plus-one-f64-15-ulp",
        "dynamic-update-slice-overlapping-update",
        "convolution-lhs-dilate-simplifier-check-failure",
        "convolution-s16-constant-folding-saturates")
}

#: (finding, api) pairs whose program runs but does not reproduce, with why (measured);
#: None: the program's own ``reason`` says it (the API lowers the op to other HLO).
NOT_REACHED = {
    ("constant-negative-zero-parsed-as-positive", "jax"):
        "jax.jit compiles StableHLO, never HLO text: the -0 constant keeps its sign",
    ("constant-negative-zero-parsed-as-positive", "tf"):
        "TF hands XLA an HloModuleProto, never HLO text: the -0 constant keeps its sign",
    ("acos-f8e3m4-iota-out-of-domain-inf", "jax"): None,
    ("asin-acos-of-integer-never-nan", "jax"): None,
    ("atanh-f4e2m1fn-constant-folding", "jax"): None,
    ("convert-c64-to-pred-segfault", "jax"): None,
    ("convert-c64-to-pred-segfault", "tf"): None,
    ("convert-f8e8m0fnu-negative-constant-folding", "jax"): None,
    ("divide-c64-constant-infinite-numerator", "jax"):
        "XLA's HLO text parser reads the constant (nan, inf) as (nan, nan) (hlo_module_from_text"
        "(...).to_string() and the StableHLO both show 0x7FC00000 twice); jax and TF build the "
        "constant without the text parser and XLA:CPU divides it right",
    ("divide-c64-constant-infinite-numerator", "tf"): "as under jax: a parser fault",
    ("dot-algorithm-bf16-x9-segfault", "jax"):
        "jax.lax.dot_general raises ValueError: The precision 'BF16_BF16_F32_X9' is not "
        "supported by dot_general on CPU: the algorithm never reaches XLA:CPU from jax",
    ("atan2-zero-zero-nan", "jax"): "a TF-only fault: jaxlib's XLA gives atan2(+0, +0) = +0",
    ("asin-acos-of-integer-never-nan", "tf"):
        "the HLO TF hands XLA for tf.math.asin has no asin instruction (other ops compute it)",
    ("slice-of-empty-concatenate-stablehlo-crash", "tf"):
        "TF 2.21's XLA compiles and runs it (an empty f32[0]): the abort is in the StableHLO "
        "pattern jaxlib 0.10.2's XLA runs when it converts StableHLO to HLO",
    ("rng-bit-generator-signed-float-as-unsigned", "tf"):
        "TF 2.21 registers no XlaRngBitGenerator kernel for XLA_CPU_JIT with dtype=DT_INT32",
}

CASES = [(d, api) for d in DIRS for api in ("jax", "tf")]
TABLE: list[str] = []


@pytest.mark.parametrize("d,api", CASES, ids=[f"{d.name}-{api}" for d, api in CASES])
def test_stored_finding_user_program(d, api):
    f = load(d)
    program = user_program(f.module, f.inputs, api=api)
    key = (f.name, api)
    if program.code is None:
        outcome = {"reproduces": False, "message": program.reason}
    else:
        actual = f.signal if f.verdict == "crash" else f.actual
        outcome = confirm(program, expected=f.expected, actual=actual, module=f.module,
                          part=f.part)
    TABLE.append(f"| {f.oracle}/{f.name} | {api} | "
                 f"{'reproduces' if outcome['reproduces'] else outcome['message']} |")
    if key in REPRODUCES:
        assert outcome["reproduces"], outcome["message"]
    elif key in NOT_REACHED:
        assert program.code is not None and not outcome["reproduces"], outcome["message"]
        assert NOT_REACHED[key] or program.reason, "pin why, or the translator must say"
    else:
        assert program.code is None and program.reason, outcome["message"]


def test_print_table():
    """Runs last in this file: prints the table the tests above filled in."""
    print("\n| finding | api | outcome |\n|---|---|---|\n" + "\n".join(TABLE))


def test_constants_stay_constants_and_parameters_become_arguments():
    text = ("HloModule m\nENTRY e {\n  k = s8[] constant(-3)\n  p = s8[2] parameter(0)\n"
            "  c = s8[] count-leading-zeros(k)\n  b = s8[2] broadcast(c), dimensions={}\n"
            "  ROOT a = s8[2] add(b, p)\n}\n")
    code = user_program(text, [np.array([1, 2], np.int8)]).code
    assert "def f(p):" in code and "k = jnp.asarray(np.array(-3, np.int8))" in code
    assert "lax.clz(k)" in code and "p = np.array([1, 2], np.int8)" in code


def test_a_crash_is_a_signal_not_a_python_error():
    text = ("HloModule m\nENTRY e {\n  a = f32[2,3] parameter(0)\n  b = f32[3,2] parameter(1)\n"
            "  ROOT d = f32[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0},"
            " algorithm=dot_bf16_bf16_f32_x9\n}\n")
    program = user_program(text, [np.ones((2, 3), np.float32), np.ones((3, 2), np.float32)])
    out = confirm(program, expected=[np.full((2, 2), 3, np.float32)], actual="crash")
    assert not out["reproduces"] and "ValueError" in out["message"]


def test_reasons_name_the_type_or_op():
    text = "HloModule m\nENTRY e {\n  p = s4[2] parameter(0)\n  ROOT n = s4[2] negate(p)\n}\n"
    reason = user_program(text, [np.zeros(2, np.int8)], api="tf").reason
    assert "s4" in reason
    text = ("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n"
            "  ROOT n = f32[2] logistic(p)\n}\n")
    program = user_program(text, [np.zeros(2, np.float32)])
    assert program.code is not None and "logistic" in program.reason
    with pytest.raises(ValueError, match="api must be"):
        user_program(text, [np.zeros(2, np.float32)], api="torch")


def test_hlo_opcodes_reads_xla_text():
    text = ("HloModule jit_f\n\nENTRY main.1 {\n  p.1 = u4[] parameter(0)\n"
            "  t = (f32[], s32[2]) tuple(a, b)\n"
            "  ROOT atan2.1 = f8e4m3b11fnuz[] atan2(constant.1, constant.1)\n}\n")
    assert hlo_opcodes(text) == {"parameter", "tuple", "atan2"}


#: The common ops, each as the jax.lax call the JAX translator writes: the program's
#: value must be the one XLA:CPU gives the module itself (its standalone script).
OPS_MODULE = """HloModule ops

%add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

%lt {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=LT
}

ENTRY e {
  x = f32[2,3] parameter(0)
  i = s32[4] parameter(1)
  k = s32[] parameter(2)
  c = f32[] constant(1.5)
  b = f32[2,3] broadcast(c), dimensions={}
  m = f32[2,3] multiply(x, b)
  t = f32[3,2] transpose(m), dimensions={1,0}
  r = f32[6] reshape(t)
  s = f32[4] slice(r), slice={[1:5]}
  io = f32[4] iota(), iota_dimension=0
  cat = f32[8] concatenate(s, io), dimensions={0}
  z = f32[] constant(0)
  pd = f32[18] pad(cat, z), padding=1_2_1
  red = f32[2] reduce(x, z), dimensions={1}, to_apply=%add
  srt = s32[4] sort(i), dimensions={0}, to_apply=%lt
  ds = s32[2] dynamic-slice(i, k), dynamic_slice_sizes={2}
  dus = s32[4] dynamic-update-slice(i, ds, k)
  clz = s32[4] count-leading-zeros(i)
  pop = s32[4] popcnt(i)
  shl = s32[4] shift-left(i, pop)
  sra = s32[4] shift-right-arithmetic(i, pop)
  srl = s32[4] shift-right-logical(i, pop)
  cmp = pred[4] compare(i, srt), direction=GE
  sel = s32[4] select(cmp, shl, sra)
  bc = f32[4] bitcast-convert(srl)
  cv = f32[4] convert(sel)
  d = f32[2,2] dot(x, t), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT out = (f32[18], f32[2], s32[4], f32[4], f32[4], f32[2,2], s32[4], s32[4]) tuple(pd, red, dus, bc, cv, d, srt, clz)
}
"""
OPS_INPUTS = [np.array([[1.5, -2.25, 3], [0.5, 7, -1]], np.float32),
              np.array([5, -3, 1 << 20, 0], np.int32), np.array(1, np.int32)]

RNG_MODULE = """HloModule rng
ENTRY e {
  s = u64[2] parameter(0)
  g = (u64[2], u32[2,3]) rng-bit-generator(s), algorithm=rng_three_fry
  ROOT v = u32[2,3] get-tuple-element(g), index=1
}
"""

#: The ops the TF translator writes differently from JAX's (by type, or through tf2xla).
TF_OPS_MODULE = """HloModule tf_ops

%lt {
  l = s32[] parameter(0)
  m = s32[] parameter(1)
  ROOT c = pred[] compare(l, m), direction=LT
}

ENTRY e {
  a = s32[2,3] parameter(0)
  b = s32[2,3] parameter(1)
  k = s32[] parameter(2)
  q = s32[2,3] divide(a, b)
  r = s32[2,3] remainder(a, b)
  n = s32[2,3] not(q)
  x = s32[2,3] xor(n, r)
  sh = s32[2,3] shift-right-arithmetic(a, b)
  lt = pred[2,3] compare(a, b), direction=LT
  sel = s32[2,3] select(lt, x, sh)
  v = s32[1,3] slice(a), slice={[0:1], [0:3]}
  w = s32[3] reshape(v)
  bw = s32[2,3] broadcast(w), dimensions={1}
  t = s32[3,2] transpose(bw), dimensions={1,0}
  z = s32[] constant(0)
  p = s32[9,2] pad(t, z), padding=1_1_2x0_0_0
  ds = s32[2,2] dynamic-slice(p, k, k), dynamic_slice_sizes={2,2}
  f = f32[2,3] convert(sel)
  d = f32[2,2] dot(f, f), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  st = s32[2,3] sort(sel), dimensions={1}, to_apply=%lt
  ROOT out = (s32[2,3], s32[2,2], f32[2,2], s32[2,3]) tuple(sel, ds, d, st)
}
"""
TF_OPS_INPUTS = [np.array([[7, -7, 9], [-12, 5, 3]], np.int32),
                 np.array([[2, 3, -4], [5, -2, 1]], np.int32), np.array(2, np.int32)]



def _elementwise_module() -> str:
    """Every elementwise op the JAX translator writes without an expansion, one leaf each."""
    unary = ["abs", "negate", "sign", "floor", "ceil", "exponential", "exponential-minus-one",
             "log", "log-plus-one", "sqrt", "rsqrt", "cbrt", "tanh", "tan", "sine", "cosine",
             "erf", "round-nearest-afz", "round-nearest-even"]
    binary = ["remainder", "power", "maximum", "minimum", "atan2", "divide", "subtract"]
    lines = ["HloModule elementwise", "ENTRY e {", "  x = f32[6] parameter(0)",
             "  y = f32[6] parameter(1)", "  i = s32[6] parameter(2)",
             "  lo = f32[] constant(-1)", "  hi = f32[] constant(2)",
             "  lob = f32[6] broadcast(lo), dimensions={}",
             "  hib = f32[6] broadcast(hi), dimensions={}"]
    leaves = []
    for k, op in enumerate(unary):
        lines.append(f"  un{k} = f32[6] {op}(x)")
        leaves.append((f"un{k}", "f32[6]"))
    for k, op in enumerate(binary):
        lines.append(f"  bin{k} = f32[6] {op}(x, y)")
        leaves.append((f"bin{k}", "f32[6]"))
    for k, op in enumerate(["and", "or", "xor"]):
        lines.append(f"  int{k} = s32[6] {op}(i, i)")
        leaves.append((f"int{k}", "s32[6]"))
    more = [("nt", "s32[6]", "not(i)"), ("fin", "pred[6]", "is-finite(x)"),
            ("cl", "f32[6]", "clamp(lob, x, hib)"), ("rv", "f32[6]", "reverse(x), dimensions={0}"),
            ("rp", "f32[6]", "reduce-precision(x), exponent_bits=5, mantissa_bits=3"),
            ("cx", "c64[6]", "complex(x, y)"), ("re", "f32[6]", "real(cx)"),
            ("im", "f32[6]", "imag(cx)")]
    for name, shape, expr in more:
        lines.append(f"  {name} = {shape} {expr}")
        leaves.append((name, shape))
    lines.append(f"  ROOT out = ({', '.join(s for _, s in leaves)}) "
                 f"tuple({', '.join(n for n, _ in leaves)})")
    return "\n".join(lines + ["}"]) + "\n"


ELEMENTWISE_INPUTS = [np.array([0.5, -1.5, 2.5, -0.0, 3.25, 7.0], np.float32),
                      np.array([2.0, 0.5, -3.0, 1.0, -0.25, 4.0], np.float32),
                      np.array([5, -3, 0, 1 << 20, -1, 7], np.int32)]


@pytest.mark.parametrize("api,text,inputs", [
    ("jax", _elementwise_module(), ELEMENTWISE_INPUTS),
    ("jax", OPS_MODULE, OPS_INPUTS),
    ("jax", RNG_MODULE, [np.array([1, 2], np.uint64)]),
    ("tf", TF_OPS_MODULE, TF_OPS_INPUTS),
], ids=["jax-elementwise", "jax-ops", "jax-rng", "tf-ops"])
def test_user_program_computes_what_xla_gives_the_module(api, text, inputs):
    program = user_program(text, inputs, api=api)
    assert program.code is not None and program.reason is None, program.reason
    run = run_program(program)
    assert run.returncode == 0, run.stderr_tail
    oracle = "xla" if api == "jax" else "tf"
    ref = run_script(standalone_script(text, inputs, oracle=oracle))
    assert ref.returncode == 0 and ref.values, ref.stderr_tail
    assert [(v.dtype, v.shape) for v in run.values] == [(v.dtype, v.shape) for v in ref.values]
    assert [v.tobytes() for v in run.values] == [v.tobytes() for v in ref.values]
