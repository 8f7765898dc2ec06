"""The HLO text parser and printer on modules jax, TensorFlow and XLA's pass dumps
produced: each round trip is checked three ways (``parse(print(m)) == m``,
``print(parse(print(m))) == print(m)``, and XLA's own parser accepts the printed text),
and the typed attributes and constants against what the frameworks say.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

from hloref import attrs as A
from hloref.parser import parse_module

from parser_common import roundtrip


def is_hlo_module_text(text: str) -> bool:
    return text.lstrip().startswith("HloModule")


def _jax_functions():
    import jax
    import jax.numpy as jnp

    def mlp(x, w1, b1, w2):
        h = jax.nn.relu(x @ w1 + b1)
        return jax.nn.log_softmax(h @ w2)

    def conv(x, k):
        return jax.lax.conv_general_dilated(x, k, (2, 1), ((1, 1), (0, 1)), rhs_dilation=(1, 2),
                                            dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def loop(x):
        return jax.lax.fori_loop(0, 5, lambda i, c: c * 1.5 + i, x)

    def cond(p, x):
        return jax.lax.cond(p > 0, jnp.sin, jnp.cos, x)

    def switch(i, x):
        return jax.lax.switch(i, [jnp.sin, jnp.cos, jnp.tanh], x)

    def scatter_gather(x, idx):
        return x.at[idx].add(1.0)[idx[::-1]] * x[idx]

    def sort(x):
        return jnp.sort(x, axis=0), jnp.argsort(x[:, 0])

    def fp8(a, b):
        return jax.lax.dot(a, b, preferred_element_type=jnp.float32)

    def bf16(a, b):
        return (a @ b).astype(jnp.bfloat16) * jnp.bfloat16(0.1)

    def cplx(z):
        return jnp.fft.fft(z * (1 + 2j)).conj()

    def int4(a):
        return (a.astype(jnp.int8) * 3).astype(jnp.int4)

    def reduce_window(x):
        return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (2, 2), (1, 1), "SAME")

    def consts():
        return (jnp.array([0.1, -0.0, 3.4e38, 1e-45, jnp.inf, -jnp.inf], jnp.float32),
                jnp.array([1, -8, 7], jnp.int4), jnp.array([2**64 - 1, 5], jnp.uint64),
                jnp.array([0.1, 448.0, -0.015625], jnp.float8_e4m3fn),
                jnp.array([1 + 2j, -0.5j], jnp.complex64))

    f32 = np.ones((4, 8), np.float32)
    return {
        "mlp": (mlp, (f32, np.ones((8, 16), np.float32), np.ones(16, np.float32),
                      np.ones((16, 3), np.float32))),
        "conv": (conv, (np.ones((1, 8, 8, 3), np.float32), np.ones((3, 3, 3, 4), np.float32))),
        "loop": (loop, (f32,)),
        "cond": (cond, (np.float32(1), f32)),
        "switch": (switch, (np.int32(1), f32)),
        "scatter_gather": (scatter_gather, (np.arange(10, dtype=np.float32), np.array([1, 3, 3], np.int32))),
        "sort": (sort, (f32,)),
        "fp8": (fp8, (np.ones((4, 8), ml_dtypes.float8_e4m3fn), np.ones((8, 4), ml_dtypes.float8_e4m3fn))),
        "bf16": (bf16, (np.ones((4, 8), ml_dtypes.bfloat16), np.ones((8, 4), ml_dtypes.bfloat16))),
        "complex": (cplx, (np.ones(8, np.complex64),)),
        "int4": (int4, (np.ones(8, ml_dtypes.int4),)),
        "reduce_window": (reduce_window, (np.ones((4, 4), np.float32),)),
        "consts": (consts, ()),
    }


@pytest.fixture(scope="session")
def jax_modules():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    try:
        out = {}
        for name, (fn, args) in _jax_functions().items():
            lowered = jax.jit(fn).lower(*args)
            out[name + ".hlo"] = lowered.as_text(dialect="hlo")
            out[name + ".optimized"] = lowered.compile().as_text()
        return out
    finally:
        jax.config.update("jax_enable_x64", False)


@pytest.fixture(scope="session")
def tf_modules():
    tf = pytest.importorskip("tensorflow")

    @tf.function(jit_compile=True)
    def f(x, w):
        y = tf.nn.relu(tf.matmul(x, w))
        y = tf.reduce_sum(y, axis=1) + tf.constant([1.0, 2.0, 3.0, 4.0])
        i = tf.constant(0)
        _, y = tf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * 2.0), (i, y))
        return tf.sort(y), tf.argmax(x, axis=1)

    args = (tf.ones((4, 8)), tf.ones((8, 8)))
    ir = f.experimental_get_compiler_ir(*args)
    return {"tf.hlo": ir(stage="hlo"), "tf.optimized": ir(stage="optimized_hlo")}


_DUMP_SCRIPT = textwrap.dedent("""
    import jax, jax.numpy as jnp
    def f(x, w, idx):
        def body(i, c):
            return jnp.tanh(c @ w) + i
        y = jax.lax.fori_loop(0, 3, body, x)
        y = y.at[idx].add(1.0)
        z = jax.lax.cond(y.sum() > 0, lambda v: v * 2, lambda v: v - 1, y)
        return jnp.sort(z, axis=-1), jnp.cumsum(z, axis=0)
    x = jnp.ones((4, 8)); w = jnp.ones((8, 8)); idx = jnp.array([0, 2])
    jax.block_until_ready(jax.jit(f)(x, w, idx))
""")


@pytest.fixture(scope="session")
def dump_dir(tmp_path_factory):
    pytest.importorskip("jax")
    d = tmp_path_factory.mktemp("xla_dump")
    env = dict(os.environ, XLA_FLAGS=f"--xla_dump_to={d} --xla_dump_hlo_pass_re=.*",
               JAX_PLATFORMS="cpu")
    subprocess.run([sys.executable, "-c", _DUMP_SCRIPT], env=env, check=True, timeout=300)
    return d


def test_jax_modules_roundtrip(jax_modules):
    assert len(jax_modules) >= 20
    for name, text in jax_modules.items():
        m = roundtrip(text, name)
        assert m.entry.root is not None


def test_tf_modules_roundtrip(tf_modules):
    for name, text in tf_modules.items():
        m = roundtrip(text, name)
        assert any(i.opcode == "while" for _, i in m.instructions())


def test_xla_pass_dump_roundtrip(dump_dir):
    files = sorted(glob.glob(str(dump_dir / "*.txt")))
    hlo_files = []
    for f in files:
        with open(f) as fh:
            text = fh.read()
        if is_hlo_module_text(text):
            hlo_files.append((f, text))
        else:  # buffer assignment / live range / memory reports: not HLO modules
            assert os.path.basename(f).split(".")[-2].startswith("cpu_after_optimizations-"), f
    assert len(hlo_files) > 100
    with_frames = 0
    for f, text in hlo_files:
        m = roundtrip(text, f)
        with_frames += bool(m.extra_sections)
    assert with_frames > 0


def test_dump_contents_typed(dump_dir):
    """Spot-check typed attributes in a late-pipeline module."""
    files = sorted(glob.glob(str(dump_dir / "*jit_f*after_optimizations.txt")))
    assert files
    m = parse_module(open(files[-1]).read())
    assert m.attrs["is_scheduled"] is True
    ecl = m.attrs["entry_computation_layout"]
    assert len(ecl.parameters) == 3
    assert [t for t, _ in m.extra_sections] == ["FileNames", "FunctionNames", "FileLocations", "StackFrames"]
    ops = {i.opcode for _, i in m.instructions()}
    assert "while" in ops
    for _, i in m.instructions():
        if i.opcode == "while":
            assert isinstance(i.attrs["condition"], A.ComputationRef)
            assert i.attrs["condition"] in m.computations
        if i.opcode == "fusion":
            assert isinstance(i.attrs["kind"], A.Enum)
        if "metadata" in i.attrs:
            assert isinstance(i.attrs["metadata"], A.Raw)


def test_jax_typed_attributes(jax_modules):
    m = parse_module(jax_modules["conv.hlo"])
    conv = [i for _, i in m.instructions() if i.opcode == "convolution"][0]
    dn = conv.attrs["dim_labels"]
    assert dn.labels == "b01f_01io->b01f"
    assert dn.input_batch_dimension == 0 and dn.input_feature_dimension == 3
    assert dn.input_spatial_dimensions == (1, 2)
    w = conv.attrs["window"].dims
    assert [(d.size, d.stride, d.padding_low, d.padding_high, d.window_dilation) for d in w] == \
        [(3, 2, 1, 1, 1), (3, 1, 0, 1, 2)]
    m = parse_module(jax_modules["mlp.hlo"])
    dot = [i for _, i in m.instructions() if i.opcode == "dot"][0]
    assert dot.attrs["lhs_contracting_dims"] == (1,) and dot.attrs["rhs_contracting_dims"] == (0,)
    m = parse_module(jax_modules["scatter_gather.hlo"])
    sc = [i for _, i in m.instructions() if i.opcode == "scatter"][0]
    assert isinstance(sc.attrs["to_apply"], A.ComputationRef)
    assert isinstance(sc.attrs["update_window_dims"], tuple)
    g = [i for _, i in m.instructions() if i.opcode == "gather"][0]
    assert isinstance(g.attrs["slice_sizes"], tuple) and isinstance(g.attrs["index_vector_dim"], int)
    m = parse_module(jax_modules["switch.hlo"])
    cond = [i for _, i in m.instructions() if i.opcode == "conditional"][0]
    assert len(cond.attrs["branch_computations"]) == 3
    m = parse_module(jax_modules["sort.hlo"])
    srt = [i for _, i in m.instructions() if i.opcode == "sort"][0]
    assert srt.attrs["dimensions"] == (0,)
    m = parse_module(jax_modules["complex.hlo"])
    fft = [i for _, i in m.instructions() if i.opcode == "fft"][0]
    assert fft.attrs["fft_type"] == "FFT" and fft.attrs["fft_length"] == (8,)


def test_jax_constants_match_numpy(jax_modules):
    """Constants XLA printed parse to the values JAX put in them."""
    for key in ("consts.hlo", "consts.optimized"):
        m = parse_module(jax_modules[key])
        consts = {}
        for _, i in m.instructions():
            if i.opcode == "constant" and i.shape.is_array and i.shape.rank == 1:
                consts[i.shape.element_type.name] = i.literal
        np.testing.assert_array_equal(
            consts["f32"], np.array([0.1, -0.0, 3.4e38, 1e-45, np.inf, -np.inf], np.float32))
        assert np.signbit(consts["f32"][1])
        assert consts["f32"].view(np.uint32)[3] == 1  # smallest subnormal
        np.testing.assert_array_equal(consts["s4"].astype(int), [1, -8, 7])
        assert consts["s4"].dtype == ml_dtypes.int4
        assert consts["u64"].tolist() == [2**64 - 1, 5]
        np.testing.assert_array_equal(consts["f8e4m3fn"].view(np.uint8),
                                      np.array([0.1, 448.0, -0.015625], ml_dtypes.float8_e4m3fn).view(np.uint8))
        np.testing.assert_array_equal(consts["c64"], np.array([1 + 2j, -0.5j], np.complex64))
