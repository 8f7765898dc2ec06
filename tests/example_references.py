"""The example modules (``examples/*.hlo``) as the README describes them: their inputs
and their values in numpy, for the tests that run them on an oracle (XLA:CPU through
jaxlib: tests/test_oracle_xla.py; TensorFlow's XLA: tests/test_oracle_tf.py)."""

from __future__ import annotations

import ml_dtypes
import numpy as np


def relu(x):
    return np.maximum(x, 0)


def mlp_inputs():
    """``x, w1, b1, w2, b2`` of examples/mlp.hlo (f32)."""
    rng = np.random.default_rng(0)
    return [rng.standard_normal(s).astype(np.float32)
            for s in [(2, 8), (8, 16), (16,), (16, 4), (4,)]]


def mlp(x, w1, b1, w2, b2):
    """Two dense layers, the first with a ReLU."""
    return relu(x @ w1 + b1) @ w2 + b2


def conv_inputs():
    """``x`` (NHWC), ``k`` (HWIO), ``b`` of examples/conv.hlo (f32)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 6, 6, 3)).astype(np.float32)
    k = rng.standard_normal((3, 3, 3, 4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    return x, k, b


def conv(x, k, b):
    """A 3x3 convolution, stride 1, SAME padding, plus the bias, then a ReLU."""
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    ref = np.zeros((1, 6, 6, 4), np.float32)
    for i in range(6):
        for j in range(6):
            ref[:, i, j, :] = np.einsum("nhwc,hwco->no", xp[:, i:i + 3, j:j + 3, :], k)
    return relu(ref + b)


def fp8_matmul_inputs():
    """``a, b`` (f8e4m3fn, small integers: every product exact) and the two f32 scales
    of examples/fp8_matmul.hlo."""
    f8 = ml_dtypes.float8_e4m3fn
    rng = np.random.default_rng(2)
    a = rng.integers(-4, 5, (4, 8)).astype(np.float32).astype(f8)
    b = rng.integers(-4, 5, (8, 4)).astype(np.float32).astype(f8)
    return a, b, np.float32(0.5), np.float32(0.25)


def fp8_matmul(a, b, sa, sb):
    """The f32 product of the fp8 operands times both scales (exact for these inputs)."""
    return (a.astype(np.float32) @ b.astype(np.float32)) * (np.float32(sa) * np.float32(sb))


def softmax_input():
    """examples/softmax_bf16.hlo's ``x``: bf16 [4, 8], evenly spaced over [-3, 3]."""
    return np.linspace(-3, 3, 32, dtype=np.float32).reshape(4, 8).astype(ml_dtypes.bfloat16)


def softmax(x):
    """Softmax over the last dimension, in f32."""
    xf = x.astype(np.float32)
    e = np.exp(xf - xf.max(axis=-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def tf_dense_inputs():
    """``x, w, b`` of examples/tf_dense.hlo (f32)."""
    rng = np.random.default_rng(3)
    return [rng.standard_normal(s).astype(np.float32) for s in [(2, 8), (8, 4), (4,)]]


def dense(x, w, b):
    """One dense layer with a ReLU."""
    return relu(x @ w + b)
