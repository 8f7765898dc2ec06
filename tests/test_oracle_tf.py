"""The TensorFlow oracle (hloref.fuzz.oracles.tf): TF 2.21's own XLA against hand-computed
numpy values and against hloref.

TF's import is slow (10-20 s), so everything shares one in-process TF (module-scoped) and
one worker process.
"""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

# Like pytest.importorskip("tensorflow"), without paying TF's 10-20 s import at collection
# time (the module-scoped fixture imports it when a test here actually runs).
if importlib.util.find_spec("tensorflow") is None:
    pytest.skip("tensorflow is not installed", allow_module_level=True)
pytest.importorskip("jax")
ml_dtypes = pytest.importorskip("ml_dtypes")

import hloref  # noqa: E402
from hloref.fuzz.compare import compare_values  # noqa: E402
from hloref.fuzz.oracles import OracleError, OracleUnsupported  # noqa: E402
from hloref.fuzz.oracles import tf as tfo  # noqa: E402

import example_references as ex  # noqa: E402
from hlo_modules import MODULES  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(scope="module")
def tfmods():
    """(tf, tfxla, xla_data_pb2), imported once for the whole file."""
    if not tfo.available():
        pytest.skip("TensorFlow oracle unavailable")
    return tfo.tf_modules()


def agree(text, args, tf_value, *, opcode=None, atol=None):
    """hloref evaluates ``text`` on ``args`` to what TF computed."""
    ref = hloref.evaluate(text, *args)
    verdict = compare_values(tf_value, ref, opcode=opcode, atol=atol)
    assert verdict.ok, f"TF vs hloref: {verdict}"
    return ref


ADD_F32 = MODULES["add-f32"]


def test_import_is_lazy():
    import subprocess
    import sys
    code = ("import sys; import hloref.fuzz.oracles.tf as t; "
            "assert 'tensorflow' not in sys.modules and 'jax' not in sys.modules; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr


def test_add_f32(tfmods):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.full((2, 3), 0.5, np.float32)
    r = tfo.run_hlo(ADD_F32, x, y)
    assert isinstance(r, np.ndarray) and r.dtype == np.float32 and r.shape == (2, 3)
    np.testing.assert_array_equal(r, np.array([[0.5, 1.5, 2.5], [3.5, 4.5, 5.5]], np.float32))
    agree(ADD_F32, (x, y), r, opcode="add")


def test_cache_optimized_and_tf_hlo(tfmods):
    a = tfo.compile_hlo(ADD_F32)
    assert tfo.compile_hlo(ADD_F32) is a
    a.run(np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32))
    opt = a.optimized_hlo()
    assert opt is not None and opt.startswith("HloModule") and "ENTRY" in opt and "add" in opt
    pre = a.tf_hlo()
    assert pre is not None and "XlaCallModule" not in pre.split("\n")[0]
    assert len(a.parameter_shapes) == 2 and not a.result_shape.is_tuple()


def test_scalar_result_is_0d_array(tfmods):
    text = MODULES["negate-f32-scalar"]
    r = tfo.run_hlo(text, np.float32(2.5))
    assert isinstance(r, np.ndarray) and r.shape == () and r.dtype == np.float32 and r == -2.5


def test_bf16_dot(tfmods):
    text = """HloModule bfdot
ENTRY main {
  a = bf16[2,3] parameter(0)
  b = bf16[3,2] parameter(1)
  ROOT d = bf16[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""
    bf16 = ml_dtypes.bfloat16
    a = np.array([[1, 2, 3], [-1, 0.5, 4]], np.float32).astype(bf16)
    b = np.array([[2, 0], [1, -1], [0.25, 8]], np.float32).astype(bf16)
    r = tfo.run_hlo(text, a, b)
    assert r.dtype == bf16
    # Small exact values: every product and sum is exact in bf16.
    np.testing.assert_array_equal(r.astype(np.float32),
                                  np.array([[4.75, 22.0], [-0.5, 31.5]], np.float32))
    agree(text, (a, b), r, opcode="dot")


def test_tuple_result_and_parameter(tfmods):
    text = """HloModule tup
ENTRY main {
  p = (f32[2], (s32[], f32[2])) parameter(0)
  a = f32[2] get-tuple-element(p), index=0
  q = (s32[], f32[2]) get-tuple-element(p), index=1
  b = f32[2] get-tuple-element(q), index=1
  i = s32[] get-tuple-element(q), index=0
  s = f32[2] subtract(a, b)
  m = f32[2] multiply(a, a)
  inner = (s32[], f32[2]) tuple(i, s)
  e = () tuple()
  ROOT t = (f32[2], (s32[], f32[2]), ()) tuple(m, inner, e)
}
"""
    a = np.array([5.0, 1.0], np.float32)
    b = np.array([2.0, 4.0], np.float32)
    arg = (a, (np.int32(-3), b))
    r = tfo.run_hlo(text, arg)
    assert isinstance(r, tuple) and len(r) == 3 and r[2] == ()
    np.testing.assert_array_equal(r[0], np.array([25.0, 1.0], np.float32))
    assert r[1][0].dtype == np.int32 and int(r[1][0]) == -3
    np.testing.assert_array_equal(r[1][1], np.array([3.0, -3.0], np.float32))
    agree(text, (arg,), r)
    with pytest.raises(OracleError, match="tuple"):
        tfo.run_hlo(text, (a, b))


def test_while_loop(tfmods):
    # sum of 0..9 with a counter, and a product of the x elements along the way.
    text = """HloModule w
cond {
  s = (s32[], s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(10)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  acc = s32[] get-tuple-element(s), index=1
  v = f32[3] get-tuple-element(s), index=2
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  acc1 = s32[] add(acc, i)
  half = f32[] constant(0.5)
  h = f32[3] broadcast(half), dimensions={}
  v1 = f32[3] multiply(v, h)
  ROOT t = (s32[], s32[], f32[3]) tuple(i1, acc1, v1)
}
ENTRY main {
  x = f32[3] parameter(0)
  z = s32[] constant(0)
  init = (s32[], s32[], f32[3]) tuple(z, z, x)
  ROOT w = (s32[], s32[], f32[3]) while(init), condition=cond, body=body
}
"""
    x = np.array([1024.0, -3.0, 1.0], np.float32)
    r = tfo.run_hlo(text, x)
    assert int(r[0]) == 10 and int(r[1]) == 45
    np.testing.assert_array_equal(r[2], x / np.float32(1024))
    agree(text, (x,), r)


def test_s8_wraparound(tfmods):
    text = """HloModule wrap_s8
ENTRY main {
  x = s8[4] parameter(0)
  y = s8[4] parameter(1)
  a = s8[4] add(x, y)
  m = s8[4] multiply(x, y)
  ROOT t = (s8[4], s8[4]) tuple(a, m)
}
"""
    x = np.array([127, -128, 100, -7], np.int8)
    y = np.array([1, -1, 100, 3], np.int8)
    a, m = tfo.run_hlo(text, x, y)
    assert a.dtype == np.int8 and m.dtype == np.int8
    np.testing.assert_array_equal(a, np.array([-128, 127, -56, -4], np.int8))
    np.testing.assert_array_equal(m, np.array([127, -128, 16, -21], np.int8))
    agree(text, (x, y), (a, m))


def test_64bit_types_not_narrowed(tfmods):
    text = """HloModule w
ENTRY main {
  x = s64[2] parameter(0)
  y = f64[2] parameter(1)
  u = u64[2] parameter(2)
  one = s64[] constant(1)
  o = s64[2] broadcast(one), dimensions={}
  a = s64[2] add(x, o)
  yy = f64[2] multiply(y, y)
  ROOT t = (s64[2], f64[2], u64[2]) tuple(a, yy, u)
}
"""
    x = np.array([2**40, -(2**62)], np.int64)
    y = np.array([1e200, 1 + 2**-40], np.float64)
    u = np.array([2**64 - 1, 2**63], np.uint64)
    a, yy, uu = tfo.run_hlo(text, x, y, u)
    np.testing.assert_array_equal(a, x + 1)
    assert np.isinf(yy[0]) and yy[1] == (1 + 2**-40) ** 2
    np.testing.assert_array_equal(uu, u)


ROUND_TRIP_TYPES = [
    ("pred", np.bool_), ("s2", ml_dtypes.int2), ("u2", ml_dtypes.uint2),
    ("s4", ml_dtypes.int4), ("u4", ml_dtypes.uint4), ("s8", np.int8), ("u16", np.uint16),
    ("u32", np.uint32), ("f16", np.float16), ("bf16", ml_dtypes.bfloat16),
    ("c64", np.complex64), ("c128", np.complex128),
    ("f8e4m3fn", ml_dtypes.float8_e4m3fn), ("f8e5m2", ml_dtypes.float8_e5m2),
    ("f8e4m3fnuz", ml_dtypes.float8_e4m3fnuz), ("f8e5m2fnuz", ml_dtypes.float8_e5m2fnuz),
    ("f8e4m3b11fnuz", ml_dtypes.float8_e4m3b11fnuz), ("f8e4m3", ml_dtypes.float8_e4m3),
    ("f8e3m4", ml_dtypes.float8_e3m4), ("f8e8m0fnu", ml_dtypes.float8_e8m0fnu),
    ("f4e2m1fn", ml_dtypes.float4_e2m1fn),
]


@pytest.mark.parametrize("hlo_type,dtype", ROUND_TRIP_TYPES, ids=[t for t, _ in ROUND_TRIP_TYPES])
def test_types_round_trip(tfmods, hlo_type, dtype):
    """parameter -> convert to a wide type -> convert back -> result, with the wide value
    too: the boundary (including the carriers for s2/u2/s4/u4/f4/f8e4m3/f8e3m4/f8e8m0fnu)
    is exact and the values reach TF's XLA intact."""
    wide = "c128" if hlo_type.startswith("c") else "f32"
    text = f"""HloModule rt
ENTRY main {{
  x = {hlo_type}[4] parameter(0)
  c = {wide}[4] convert(x)
  b = {hlo_type}[4] convert(c)
  ROOT t = ({hlo_type}[4], {wide}[4]) tuple(b, c)
}}
"""
    if hlo_type == "pred":
        vals = [False, True, True, False]
    elif hlo_type == "f8e8m0fnu":
        vals = [1.0, 2.0, 0.25, 8.0]
    elif hlo_type in ("u2", "u4", "u16", "u32"):
        vals = [0, 1, 3, 2]
    else:
        vals = [0, 1, -1, -2]
    x = np.array(vals).astype(dtype)
    b, c = tfo.run_hlo(text, x)
    assert b.dtype == x.dtype
    np.testing.assert_array_equal(b, x)
    wide_dt = np.complex128 if wide == "c128" else np.float32
    np.testing.assert_array_equal(c, x.astype(wide_dt))


def test_int4_arithmetic_uses_the_carrier(tfmods):
    # s4 wraps around at 8 inside TF's XLA (the s8 carrier must not widen the arithmetic).
    text = """HloModule wrap_s4
ENTRY main {
  x = s4[3] parameter(0)
  y = s4[3] parameter(1)
  ROOT a = s4[3] add(x, y)
}
"""
    x = np.array([7, -8, 3], ml_dtypes.int4)
    y = np.array([1, -1, 2], ml_dtypes.int4)
    r = tfo.run_hlo(text, x, y)
    assert r.dtype == ml_dtypes.int4
    np.testing.assert_array_equal(r.astype(np.int8), np.array([-8, 7, 5], np.int8))
    agree(text, (x, y), r)


@pytest.mark.parametrize("t", ["s1", "u1", "f6e2m3fn"])
def test_unsupported_types(tfmods, t):
    text = f"""HloModule u
ENTRY main {{
  x = {t}[4] parameter(0)
  ROOT c = f32[4] convert(x)
}}
"""
    with pytest.raises(OracleUnsupported, match=t):
        tfo.compile_hlo(text)


def test_token_and_bitcast_and_debug_options_unsupported(tfmods):
    tok = """HloModule t
ENTRY main {
  t = token[] parameter(0)
  ROOT a = token[] after-all(t)
}
"""
    with pytest.raises(OracleUnsupported, match="token"):
        tfo.compile_hlo(tok)
    bc = """HloModule b
ENTRY main {
  x = f32[2,3] parameter(0)
  ROOT b = f32[6] bitcast(x)
}
"""
    with pytest.raises(OracleUnsupported, match="bitcast"):
        tfo.compile_hlo(bc)
    with pytest.raises(OracleUnsupported, match="debug options"):
        tfo.compile_hlo(ADD_F32, debug_options={"xla_backend_optimization_level": 0})


def test_ops_without_portable_stablehlo_unsupported(tfmods):
    text = """HloModule rd
ENTRY main {
  a = f32[4,2] parameter(0)
  b = f32[2,2,3] parameter(1)
  g = s32[2] parameter(2)
  ROOT r = f32[4,3] ragged-dot(a, b, g), lhs_contracting_dims={1}, rhs_contracting_dims={1}, lhs_ragged_dims={0}, rhs_group_dims={0}
}
"""
    with pytest.raises(OracleUnsupported, match="ragged_dot"):
        tfo.compile_hlo(text)


def test_unknown_custom_call_is_an_error(tfmods):
    text = """HloModule cc
ENTRY main {
  x = f32[4] parameter(0)
  ROOT r = f32[4] custom-call(x), custom_call_target="hloref_no_such_target"
}
"""
    with pytest.raises(OracleError, match="custom call"):
        tfo.run_hlo(text, np.ones(4, np.float32))


def test_ftz(tfmods):
    """TF's XLA:CPU flushes subnormal results to zero too (like jaxlib's XLA:CPU)."""
    text = MODULES["multiply-f32-pairs"]
    r = tfo.run_hlo(text, np.array([1e-39, 3.0], np.float32), np.array([1.0, 2.0], np.float32))
    np.testing.assert_array_equal(r, np.array([0.0, 6.0], np.float32))


def test_errors(tfmods):
    with pytest.raises(OracleError, match="parse"):
        tfo.compile_hlo("HloModule broken\nENTRY main { ROOT x = f32[ parameter(0) }")
    exe = tfo.compile_hlo(ADD_F32)
    with pytest.raises(OracleError, match="argument"):
        exe.run(np.zeros((2, 3), np.float32))
    with pytest.raises(OracleError, match="dtype"):
        exe.run(np.zeros((2, 3), np.float64), np.zeros((2, 3), np.float32))
    with pytest.raises(OracleError, match="shape"):
        exe.run(np.zeros((3, 2), np.float32), np.zeros((2, 3), np.float32))


# -- the example modules --------------------------------------------------------------


def _example(name):
    path = EXAMPLES / name
    if not path.exists():
        pytest.skip(f"{path} missing")
    text = path.read_text()
    return text, tfo.compile_hlo(text)


def test_example_mlp(tfmods):
    args = ex.mlp_inputs()
    text, exe = _example("mlp.hlo")
    r = exe.run(*args)
    np.testing.assert_allclose(r, ex.mlp(*args), rtol=1e-5, atol=1e-5)
    agree(text, args, r, opcode="dot", atol=1e-5)


def test_example_conv(tfmods):
    x, k, b = ex.conv_inputs()
    text, exe = _example("conv.hlo")
    r = exe.run(x, k, b)
    np.testing.assert_allclose(r, ex.conv(x, k, b), rtol=1e-5, atol=1e-5)
    agree(text, (x, k, b), r, opcode="convolution", atol=1e-5)


def test_example_while_loop(tfmods):
    x = np.array([4.0, 2.0, 0.25, 100.0], np.float32)
    text, exe = _example("while_loop.hlo")
    i, y = exe.run(x)
    assert i.dtype == np.int32 and 1 <= int(i) <= 20
    np.testing.assert_allclose(y, np.sqrt(x), rtol=1e-6)
    agree(text, (x,), (i, y))


def test_example_fp8_matmul(tfmods):
    args = ex.fp8_matmul_inputs()
    text, exe = _example("fp8_matmul.hlo")
    r = exe.run(*args)
    np.testing.assert_array_equal(r, ex.fp8_matmul(*args))
    agree(text, args, r, opcode="dot")


def test_example_softmax_bf16(tfmods):
    x = ex.softmax_input()
    text, exe = _example("softmax_bf16.hlo")
    r = exe.run(x)
    assert r.dtype == ml_dtypes.bfloat16
    np.testing.assert_allclose(r.astype(np.float32), ex.softmax(x), rtol=2e-2, atol=2e-3)
    agree(text, (x,), r, opcode="exponential", atol=2e-2)


def test_example_cond(tfmods):
    x = np.array([1.0, 2.0, -0.5], np.float32)
    y = np.array([3.0, -1.0, 4.0], np.float32)
    text, exe = _example("cond.hlo")
    a, s = exe.run(x, y)  # sum(x) > 0: (x * y, sum(y))
    np.testing.assert_array_equal(a, x * y)
    assert s == np.float32(6.0)
    agree(text, (x, y), (a, s))
    a, s = exe.run(-x, y)  # sum(-x) < 0: (-x - y, max(-x))
    np.testing.assert_array_equal(a, -x - y)
    assert s == np.float32(0.5)
    agree(text, (-x, y), (a, s))


def test_example_tf_dense(tfmods):
    x, w, b = ex.tf_dense_inputs()
    text, exe = _example("tf_dense.hlo")
    r = exe.run(x, w, b)
    np.testing.assert_allclose(r, ex.dense(x, w, b), rtol=1e-5, atol=1e-5)
    agree(text, (x, w, b), r, opcode="dot", atol=1e-5)


# -- path 2: programs written with TF's tf2xla ops; hloref evaluates TF's own HLO -------


def test_native_dot(tfmods):
    tf, tfxla, pb = tfmods
    rng = np.random.default_rng(4)
    a = rng.standard_normal((2, 3, 5)).astype(np.float32)
    b = rng.standard_normal((2, 5, 4)).astype(np.float32)

    def f(x, y):
        dn = pb.DotDimensionNumbers(lhs_contracting_dimensions=[2], rhs_contracting_dimensions=[1],
                                    lhs_batch_dimensions=[0], rhs_batch_dimensions=[0])
        return tfxla.dot_general(x, y, dn, preferred_element_type=tf.float32, use_v2=True)

    text, v = tfo.native_module(f, a, b)
    assert " dot(" in text
    np.testing.assert_allclose(v, np.einsum("bik,bkj->bij", a, b), rtol=1e-5, atol=1e-5)
    agree(text, (a, b), v, opcode="dot", atol=1e-5)


def test_native_conv(tfmods):
    tf, tfxla, pb = tfmods
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 7, 7, 2)).astype(np.float32)
    k = rng.standard_normal((3, 3, 2, 3)).astype(np.float32)

    def f(lhs, rhs):
        dn = pb.ConvolutionDimensionNumbers(
            input_batch_dimension=0, input_feature_dimension=3, input_spatial_dimensions=[1, 2],
            kernel_input_feature_dimension=2, kernel_output_feature_dimension=3,
            kernel_spatial_dimensions=[0, 1], output_batch_dimension=0,
            output_feature_dimension=3, output_spatial_dimensions=[1, 2])
        return tfxla.conv(lhs, rhs, window_strides=[2, 2], padding=[[1, 1], [0, 1]],
                          lhs_dilation=[1, 1], rhs_dilation=[1, 1], dimension_numbers=dn,
                          preferred_element_type=tf.float32, use_v2=True)

    text, v = tfo.native_module(f, x, k)
    assert "convolution(" in text
    xp = np.pad(x, ((0, 0), (1, 1), (0, 1), (0, 0)))  # 9 x 8
    ref = np.zeros((1, 4, 3, 3), np.float32)
    for i in range(4):
        for j in range(3):
            ref[:, i, j, :] = np.einsum("nhwc,hwco->no", xp[:, 2 * i:2 * i + 3, 2 * j:2 * j + 3], k)
    np.testing.assert_allclose(v, ref, rtol=1e-5, atol=1e-5)
    agree(text, (x, k), v, opcode="convolution", atol=1e-5)


def test_native_reduce_window(tfmods):
    tf, tfxla, _ = tfmods
    x = np.arange(20, dtype=np.float32).reshape(4, 5) - 7

    @tf.function(autograph=False)
    def mx(a, b):
        return tf.maximum(a, b)

    def f(a):
        return tfxla.reduce_window(a, tf.constant(-np.inf, tf.float32), mx.get_concrete_function(
            tf.TensorSpec([], tf.float32), tf.TensorSpec([], tf.float32)),
            window_dimensions=[2, 3], window_strides=[2, 1], padding=[[0, 0], [1, 1]])

    text, v = tfo.native_module(f, x)
    assert "reduce-window(" in text
    xp = np.pad(x, ((0, 0), (1, 1)), constant_values=-np.inf)
    ref = np.array([[xp[2 * i:2 * i + 2, j:j + 3].max() for j in range(5)] for i in range(2)],
                   np.float32)
    np.testing.assert_array_equal(v, ref)
    agree(text, (x,), v, opcode="reduce-window")


def test_native_gather(tfmods):
    tf, tfxla, pb = tfmods
    x = np.arange(24, dtype=np.int32).reshape(4, 6)
    idx = np.array([[0, 1], [3, 4], [2, 5]], np.int32)  # last one clamps to column 3

    def f(a, i):
        dn = pb.GatherDimensionNumbers(offset_dims=[1, 2], collapsed_slice_dims=[],
                                       start_index_map=[0, 1], index_vector_dim=1)
        return tfxla.gather(a, i, dn, slice_sizes=[1, 3])

    text, v = tfo.native_module(f, x, idx)
    assert "gather(" in text
    ref = np.stack([x[r:r + 1, min(c, 3):min(c, 3) + 3] for r, c in idx])
    np.testing.assert_array_equal(v, ref)
    agree(text, (x, idx), v, opcode="gather")


def test_native_sort(tfmods):
    tf, tfxla, _ = tfmods
    x = np.array([[3.0, -1.0, 2.5, -0.0, 0.0, 7.0], [1.0, 1.0, -5.0, 4.0, 2.0, -2.0]], np.float32)

    def f(a):
        return tfxla.sort(a)

    text, v = tfo.native_module(f, x)
    assert "sort(" in text
    np.testing.assert_array_equal(v, np.sort(x, axis=-1))
    agree(text, (x,), v, opcode="sort")


def test_native_variadic_sort_and_barrier(tfmods):
    tf, tfxla, _ = tfmods
    keys = np.array([5, 1, 4, 1, 3], np.int32)
    vals = np.array([0.5, 1.5, 2.5, 3.5, 4.5], np.float32)

    @tf.function(autograph=False)
    def less(k0, k1, v0, v1):
        return tf.less(k0, k1)

    def f(k, v):
        k, v = tfxla.optimization_barrier(k, v)
        comp = less.get_concrete_function(*(tf.TensorSpec([], t) for t in
                                            (tf.int32, tf.int32, tf.float32, tf.float32)))
        return tuple(tfxla.variadic_sort([k, v], dimension=0, comparator=comp, is_stable=True))

    text, v = tfo.native_module(f, keys, vals)
    assert "sort(" in text and "opt-barrier(" in text
    np.testing.assert_array_equal(v[0], np.array([1, 1, 3, 4, 5], np.int32))
    np.testing.assert_array_equal(v[1], np.array([1.5, 3.5, 4.5, 2.5, 0.5], np.float32))
    agree(text, (keys, vals), v, opcode="sort")


# -- the worker path --------------------------------------------------------------------


def test_worker():
    from hloref.fuzz.workers import OracleWorker
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    with OracleWorker("tf") as w:
        r = w.run(ADD_F32, [x, x], optimized=True)
        assert r.ok, r.message + r.stderr_tail
        np.testing.assert_array_equal(r.value, 2 * x)
        assert r.optimized_hlo and "ENTRY" in r.optimized_hlo
        r = w.run(ADD_F32, [x])
        assert r.kind == "error" and "argument" in r.message
        r = w.run(ADD_F32, [x, x], debug_options={"xla_backend_optimization_level": 0})
        assert r.kind == "unsupported"


def test_jaxlib_lapack_custom_calls_are_refused_not_an_error(tfmods):
    """jnp.linalg lowers to jaxlib's LAPACK FFI custom calls; TensorFlow's XLA has no handler
    for them (it fails with "No FFI handler registered for lapack_spotrf_ffi"): the TF
    oracle refuses such a module up front, so `hloref diff --oracle tf` says unsupported
    instead of reporting an error."""
    text = """HloModule potrf
ENTRY main {
  a = f32[3,3]{0,1} parameter(0)
  ROOT c = (f32[3,3]{0,1}, s32[]) custom-call(a), custom_call_target="lapack_spotrf_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={uplo = 76 : ui8}
}
"""
    with pytest.raises(OracleUnsupported, match="lapack_spotrf_ffi"):
        tfo.compile_hlo(text)
