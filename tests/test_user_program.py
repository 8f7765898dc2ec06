"""User programs (fuzz/user_program.py): every stored finding written as a plain JAX and
a plain TF program, run in a fresh process and compared with the finding's stored
values (never with hloref's evaluator). Each either reproduces, or says why not: the
translator's reason (a type or op the API lacks, an op the API lowers to other HLO), or
the measured reason pinned below. The table of outcomes is printed (``-s`` shows it)."""

from __future__ import annotations

import numpy as np
import pytest
from stored_findings import DIRS, load

from hloref.fuzz.user_program import confirm, hlo_opcodes, user_program

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
