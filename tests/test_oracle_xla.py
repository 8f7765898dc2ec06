"""The XLA:CPU oracle (hloref.fuzz.oracles.xla) against hand-computed numpy values."""

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("jax")
ml_dtypes = pytest.importorskip("ml_dtypes")

from hloref.fuzz.oracles import OracleError, OracleUnsupported  # noqa: E402
from hloref.fuzz.oracles import xla  # noqa: E402

import example_references as ex  # noqa: E402
from hlo_modules import MODULES  # noqa: E402

ADD_F32 = MODULES["add-f32"]


def test_add_f32():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.full((2, 3), 0.5, np.float32)
    r = xla.run_hlo(ADD_F32, x, y)
    assert isinstance(r, np.ndarray) and r.dtype == np.float32 and r.shape == (2, 3)
    np.testing.assert_array_equal(r, np.array([[0.5, 1.5, 2.5], [3.5, 4.5, 5.5]], np.float32))


def test_cache_and_optimized_hlo():
    a = xla.compile_hlo(ADD_F32)
    assert xla.compile_hlo(ADD_F32) is a
    assert xla.compile_hlo(ADD_F32, debug_options={"xla_backend_optimization_level": 1}) is not a
    text = a.optimized_hlo()
    assert text.startswith("HloModule") and "ENTRY" in text and "add" in text
    assert len(a.parameter_shapes) == 2 and not a.result_shape.is_tuple()


def test_scalar_result_is_0d_array():
    text = MODULES["negate-f32-scalar"]
    r = xla.run_hlo(text, np.float32(2.5))
    assert isinstance(r, np.ndarray) and r.shape == () and r.dtype == np.float32
    assert r == -2.5


def test_tuple_result_nested():
    text = """HloModule tup
ENTRY main {
  x = f32[2] parameter(0)
  i = s32[] parameter(1)
  m = f32[2] multiply(x, x)
  inner = (s32[], f32[2]) tuple(i, x)
  e = () tuple()
  ROOT t = (f32[2], (s32[], f32[2]), ()) tuple(m, inner, e)
}
"""
    x = np.array([3.0, -2.0], np.float32)
    r = xla.run_hlo(text, x, np.int32(7))
    assert isinstance(r, tuple) and len(r) == 3
    np.testing.assert_array_equal(r[0], np.array([9.0, 4.0], np.float32))
    assert isinstance(r[1], tuple) and len(r[1]) == 2
    assert r[1][0].dtype == np.int32 and int(r[1][0]) == 7
    np.testing.assert_array_equal(r[1][1], x)
    assert r[2] == ()


def test_tuple_parameter_flattened():
    text = """HloModule tparam
ENTRY main {
  p = (f32[2], (s32[], f32[2])) parameter(0)
  a = f32[2] get-tuple-element(p), index=0
  q = (s32[], f32[2]) get-tuple-element(p), index=1
  b = f32[2] get-tuple-element(q), index=1
  i = s32[] get-tuple-element(q), index=0
  s = f32[2] subtract(a, b)
  ROOT t = (s32[], f32[2]) tuple(i, s)
}
"""
    a = np.array([5.0, 1.0], np.float32)
    b = np.array([2.0, 4.0], np.float32)
    r = xla.run_hlo(text, (a, (np.int32(-3), b)))
    assert int(r[0]) == -3
    np.testing.assert_array_equal(r[1], np.array([3.0, -3.0], np.float32))
    with pytest.raises(OracleError, match="tuple"):
        xla.run_hlo(text, (a, b))


def test_bf16_multiply_keeps_dtype():
    text = """HloModule bf
ENTRY main {
  x = bf16[4] parameter(0)
  y = bf16[4] parameter(1)
  ROOT m = bf16[4] multiply(x, y)
}
"""
    bf16 = ml_dtypes.bfloat16
    x = np.array([1.5, -2.0, 3.0, 0.25], bf16)
    y = np.array([2.0, 2.0, -0.5, 8.0], bf16)
    r = xla.run_hlo(text, x, y)
    assert r.dtype == bf16
    np.testing.assert_array_equal(r.astype(np.float32), np.array([3.0, -4.0, -1.5, 2.0], np.float32))


def test_bf16_rounding_of_convert():
    # 1 + 2^-8 is halfway between bf16 neighbours 1 and 1 + 2^-7: round to nearest even -> 1.
    text = """HloModule cv
ENTRY main {
  x = f32[3] parameter(0)
  ROOT c = bf16[3] convert(x)
}
"""
    x = np.array([1 + 2**-8, 1 + 3 * 2**-8, 3.0], np.float32)
    r = xla.run_hlo(text, x)
    assert r.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(r.astype(np.float32),
                                  np.array([1.0, 1 + 2**-6, 3.0], np.float32))


def test_s8_wraparound():
    text = """HloModule wrap
ENTRY main {
  x = s8[4] parameter(0)
  y = s8[4] parameter(1)
  ROOT s = s8[4] add(x, y)
}
"""
    x = np.array([127, -128, 100, -1], np.int8)
    y = np.array([1, -1, 100, 1], np.int8)
    r = xla.run_hlo(text, x, y)
    assert r.dtype == np.int8
    np.testing.assert_array_equal(r, np.array([-128, 127, -56, 0], np.int8))


def test_pred_compare_and_select():
    text = """HloModule pred_select
ENTRY main {
  x = s32[5] parameter(0)
  z = s32[] constant(0)
  zb = s32[5] broadcast(z), dimensions={}
  p = pred[5] compare(x, zb), direction=GT
  n = s32[5] negate(x)
  a = s32[5] select(p, x, n)
  ROOT t = (pred[5], s32[5]) tuple(p, a)
}
"""
    x = np.array([3, -4, 0, 7, -1], np.int32)
    p, a = xla.run_hlo(text, x)
    assert p.dtype == np.bool_
    np.testing.assert_array_equal(p, np.array([True, False, False, True, False]))
    np.testing.assert_array_equal(a, np.array([3, 4, 0, 7, 1], np.int32))


def test_pred_parameter():
    text = """HloModule pnot
ENTRY main {
  p = pred[3] parameter(0)
  ROOT n = pred[3] not(p)
}
"""
    r = xla.run_hlo(text, np.array([True, False, True]))
    np.testing.assert_array_equal(r, np.array([False, True, False]))


WHILE = """HloModule loop

cond {
  c = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(c), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}

body {
  b = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(b), index=0
  v = f32[3] get-tuple-element(b), index=1
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  fi = f32[] convert(i)
  fb = f32[3] broadcast(fi), dimensions={}
  v1 = f32[3] add(v, fb)
  ROOT t = (s32[], f32[3]) tuple(i1, v1)
}

ENTRY main {
  x = f32[3] parameter(0)
  z = s32[] constant(0)
  init = (s32[], f32[3]) tuple(z, x)
  ROOT w = (s32[], f32[3]) while(init), condition=cond, body=body
}
"""


def test_while_loop():
    x = np.array([1.0, -2.0, 0.5], np.float32)
    i, v = xla.run_hlo(WHILE, x)
    assert int(i) == 5
    np.testing.assert_array_equal(v, x + np.float32(0 + 1 + 2 + 3 + 4))


def test_64bit_types_not_narrowed():
    text = """HloModule wide
ENTRY main {
  x = s64[2] parameter(0)
  y = f64[2] parameter(1)
  a = s64[2] add(x, x)
  b = f64[2] multiply(y, y)
  ROOT t = (s64[2], f64[2]) tuple(a, b)
}
"""
    a, b = xla.run_hlo(text, np.array([2**40, -3], np.int64), np.array([1e200, 0.5], np.float64))
    assert a.dtype == np.int64 and b.dtype == np.float64
    np.testing.assert_array_equal(a, np.array([2**41, -6], np.int64))
    np.testing.assert_array_equal(b, np.array([np.inf, 0.25]))


@pytest.mark.parametrize("hlo_type,dtype", [
    ("s4", "int4"), ("u4", "uint4"), ("s2", "int2"), ("u2", "uint2"),
    ("f8e4m3fn", "float8_e4m3fn"), ("f8e5m2", "float8_e5m2"),
    ("f4e2m1fn", "float4_e2m1fn"), ("f8e8m0fnu", "float8_e8m0fnu"),
])
def test_narrow_types_round_trip(hlo_type, dtype):
    text = f"""HloModule narrow
ENTRY main {{
  x = {hlo_type}[3] parameter(0)
  ROOT c = f32[3] convert(x)
}}
"""
    dt = getattr(ml_dtypes, dtype)
    # Values exactly representable in every type listed (s2 is [-2, 1], e8m0 has no 0).
    vals = {"int2": [1, -2, 0], "uint2": [1, 3, 2], "float8_e8m0fnu": [1, 4, 0.5]}.get(
        dtype, [1, 2, 0.5] if dtype.startswith("float") else [1, 2, 0])
    x = np.array(vals, np.float32).astype(dt)
    r = xla.run_hlo(text, x)
    assert r.dtype == np.float32
    np.testing.assert_array_equal(r, np.array(vals, np.float32))
    back = f"""HloModule narrow_back
ENTRY main {{
  x = {hlo_type}[3] parameter(0)
  ROOT c = {hlo_type}[3] copy(x)
}}
"""
    r2 = xla.run_hlo(back, x)
    assert r2.dtype == np.dtype(dt)
    np.testing.assert_array_equal(r2.astype(np.float32), x.astype(np.float32))


def test_fp8_dot_f32_accumulation():
    text = """HloModule fp8dot
ENTRY main {
  a = f8e4m3fn[2,2] parameter(0)
  b = f8e4m3fn[2,2] parameter(1)
  ROOT d = f32[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""
    f8 = ml_dtypes.float8_e4m3fn
    a = np.array([[1, 2], [3, 4]], np.float32).astype(f8)
    b = np.array([[0.5, 1], [2, -1]], np.float32).astype(f8)
    r = xla.run_hlo(text, a, b)
    np.testing.assert_array_equal(r, np.array([[4.5, -1.0], [9.5, -1.0]], np.float32))


def test_ftz_default_documented():
    # XLA:CPU runs with flush-to-zero / denormals-are-zero: a subnormal times one is zero.
    text = MODULES["multiply-f32-pairs"]
    # (A constant 1 would be folded away by the algebraic simplifier; use a parameter.)
    r = xla.run_hlo(text, np.array([1e-39, 1e-36], np.float32), np.array([1, 1e-5], np.float32))
    np.testing.assert_array_equal(r, np.zeros(2, np.float32))  # numpy: [1e-39, 1e-41]


@pytest.mark.parametrize("t", ["s1", "u1", "f6e2m3fn", "f6e3m2fn"])
def test_unsupported_types(t):
    text = f"""HloModule u
ENTRY main {{
  x = {t}[2] parameter(0)
  ROOT c = f32[2] convert(x)
}}
"""
    with pytest.raises(OracleUnsupported, match=t):
        xla.compile_hlo(text)


def test_token_unsupported():
    text = """HloModule tok
ENTRY main {
  x = f32[2] parameter(0)
  t = token[] after-all()
  ROOT r = (f32[2], token[]) tuple(x, t)
}
"""
    with pytest.raises(OracleUnsupported, match="token"):
        xla.compile_hlo(text)


def test_bitcast_unsupported_but_bitcast_convert_runs():
    text = """HloModule bc
ENTRY main {
  x = f32[6]{0} parameter(0)
  ROOT b = f32[2,3]{1,0} bitcast(x)
}
"""
    with pytest.raises(OracleUnsupported, match="bitcast"):
        xla.compile_hlo(text)
    text = """HloModule bcc
ENTRY main {
  x = f32[2]{0} parameter(0)
  ROOT b = s32[2]{0} bitcast-convert(x)
}
"""
    r = xla.run_hlo(text, np.array([1.0, -2.0], np.float32))
    np.testing.assert_array_equal(r, np.array([0x3F800000, -0x40000000], np.int32))


def test_non_default_layouts_ignored():
    text = """HloModule lay, entry_computation_layout={(f32[2,3]{0,1})->f32[3,2]{0,1}}
ENTRY main {
  x = f32[2,3]{0,1} parameter(0)
  n = f32[2,3]{0,1} negate(x)
  ROOT t = f32[3,2]{0,1} transpose(n), dimensions={1,0}
}
"""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(xla.run_hlo(text, x), -x.T)


def test_parse_error():
    with pytest.raises(OracleError, match="parse"):
        xla.compile_hlo("HloModule bad\nENTRY main {\n  x = f32[2] parameter(0)\n  ROOT y = \n}\n")


def test_compile_error():
    text = """HloModule badshape
ENTRY main {
  x = f32[5] parameter(0)
  ROOT a = f32[6] add(x, x)
}
"""
    with pytest.raises(OracleError):
        xla.compile_hlo(text)


def test_argument_errors():
    exe = xla.compile_hlo(ADD_F32)
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(OracleError, match="2 argument"):
        exe.run(x)
    with pytest.raises(OracleError, match="dtype"):
        exe.run(x, x.astype(np.float64))
    with pytest.raises(OracleError, match="shape"):
        exe.run(x, np.zeros((3, 2), np.float32))


def test_debug_options():
    x = np.ones((2, 3), np.float32)
    r = xla.run_hlo(ADD_F32, x, x, debug_options={"xla_cpu_enable_fast_math": False})
    np.testing.assert_array_equal(r, 2 * x)
    with pytest.raises(OracleError, match="xla_no_such_flag"):
        xla.run_hlo(ADD_F32, x, x, debug_options={"xla_no_such_flag": True})


def test_cache_is_bounded():
    xla.clear_cache()
    texts = [ADD_F32.replace("add_f32", f"add_{i}") for i in range(xla.CACHE_SIZE + 3)]
    first = xla.compile_hlo(texts[0])
    for t in texts[1:]:
        xla.compile_hlo(t)
    assert len(xla._cache) == xla.CACHE_SIZE
    assert xla.compile_hlo(texts[0]) is not first  # evicted, recompiled


# -- the example modules in examples/ run on XLA:CPU and compute what README.md says -----

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _example(name):
    path = EXAMPLES / name
    if not path.exists():
        pytest.skip(f"{path} missing")
    return xla.compile_hlo(path.read_text())


def test_example_mlp():
    args = ex.mlp_inputs()
    r = _example("mlp.hlo").run(*args)
    np.testing.assert_allclose(r, ex.mlp(*args), rtol=1e-5, atol=1e-5)


def test_example_conv():
    x, k, b = ex.conv_inputs()
    r = _example("conv.hlo").run(x, k, b)
    np.testing.assert_allclose(r, ex.conv(x, k, b), rtol=1e-5, atol=1e-5)


def test_example_while_loop():
    x = np.array([4.0, 2.0, 0.25, 100.0], np.float32)
    i, y = _example("while_loop.hlo").run(x)
    assert i.dtype == np.int32 and 1 <= int(i) <= 20
    np.testing.assert_allclose(y, np.sqrt(x), rtol=1e-6)
    # Same Newton loop in numpy f32: same iteration count.
    n, z = 0, np.ones(4, np.float32)
    while n < 20 and np.max(np.abs(z * z - x)) > np.float32(1e-6):
        n, z = n + 1, np.float32(0.5) * (z + x / z)
    assert int(i) == n


def test_example_fp8_matmul():
    args = ex.fp8_matmul_inputs()
    r = _example("fp8_matmul.hlo").run(*args)
    np.testing.assert_array_equal(r, ex.fp8_matmul(*args))


def test_example_softmax_bf16():
    x = ex.softmax_input()
    r = _example("softmax_bf16.hlo").run(x)
    assert r.dtype == ml_dtypes.bfloat16
    np.testing.assert_allclose(r.astype(np.float32), ex.softmax(x), rtol=2e-2, atol=2e-3)


def test_example_cond():
    exe = _example("cond.hlo")
    x = np.array([1.0, 2.0, -0.5], np.float32)
    y = np.array([3.0, -1.0, 4.0], np.float32)
    a, s = exe.run(x, y)  # sum(x) > 0: (x * y, sum(y))
    np.testing.assert_array_equal(a, x * y)
    assert s.shape == () and float(s) == 6.0
    a, s = exe.run(-x, y)  # otherwise: (x - y, max(x))
    np.testing.assert_array_equal(a, -x - y)
    assert float(s) == 0.5


def test_example_tf_dense():
    x, w, b = ex.tf_dense_inputs()
    r = _example("tf_dense.hlo").run(x, w, b)
    np.testing.assert_allclose(r, ex.dense(x, w, b), rtol=1e-5, atol=1e-5)


POTRF = """HloModule potrf

ENTRY main {
  a = f32[3,3]{0,1} parameter(0)
  ROOT c = (f32[3,3]{0,1}, s32[]) custom-call(a), custom_call_target="lapack_spotrf_ffi", operand_layout_constraints={f32[3,3]{0,1}}, output_to_operand_aliasing={{0}: (0, {})}, api_version=API_VERSION_TYPED_FFI, backend_config={uplo = 76 : ui8}
}
"""


def test_lapack_custom_call_in_a_fresh_process():
    """A LAPACK custom call (as jnp.linalg.cholesky lowers) compiled from text in a process
    that never lowered linear algebra with jax: jaxlib's LAPACK table must be filled by
    the oracle itself (before the fix the process died with SIGSEGV). Expected: numpy's
    Cholesky factor in the lower triangle (uplo 'L' = 76), the upper triangle of the input
    kept, info 0."""
    import json
    import subprocess
    import sys
    a = np.array([[4.0, 2.0, 0.4], [2.0, 5.0, 1.0], [0.4, 1.0, 3.0]], np.float32)
    code = ("import json, sys, numpy as np\n"
            "from hloref.fuzz.oracles import xla\n"
            "text, a = sys.stdin.read().split('\\x00')\n"
            "f, info = xla.run_hlo(text, np.array(json.loads(a), np.float32))\n"
            "print(json.dumps([np.asarray(f).tolist(), int(info)]))\n")
    proc = subprocess.run([sys.executable, "-c", code], input=POTRF + "\x00" + json.dumps(a.tolist()),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    factor, info = json.loads(proc.stdout.strip().splitlines()[-1])
    factor = np.array(factor, np.float64)
    expected = np.linalg.cholesky(a.astype(np.float64))
    assert info == 0
    np.testing.assert_allclose(np.tril(factor), expected, rtol=1e-6)
    np.testing.assert_array_equal(np.triu(factor, 1), np.triu(a, 1))
