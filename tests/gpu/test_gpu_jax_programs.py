"""Ordinary JAX programs on the GPU backend with no CPU fallback (``fallback=False``):
pooling (and its gradient, select-and-scatter), embeddings (gather, and scatter-add in
the gradient), sorting (sort, argsort, top_k), attention, integer matmuls (int8/uint8
to int32, a quantized linear layer), fp8 matmuls (e4m3fn, e5m2). Each is lowered by jax
to HLO and checked bit for bit against the CPU backend and against XLA:CPU
(``gpu_check.check``), at small shapes with the launch size shrunk (``conftest.py``)
so that grids span several blocks."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

from gpu_check import check

RNG = np.random.default_rng(2024)


def _hlo(fn, *args):
    return jax.jit(fn).lower(*args).as_text(dialect="hlo")


def _normal(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def _run(fn, *args, exact=True, opcode=None, atol=None):
    """gpu bit for bit against cpu (``exact``), and against XLA:CPU within ``atol``
    where the summation order differs (XLA's reduce-window and dot orders are its own)."""
    return check(_hlo(fn, *args), *args, exact=exact, opcode=opcode, atol=atol, xla="required")


def test_max_and_average_pooling():
    x = _normal(2, 6, 6, 3)

    def pools(x):
        mx = lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        avg = lax.reduce_window(x, 0.0, lax.add, (1, 3, 3, 1), (1, 1, 1, 1), "SAME") / 9.0
        return mx, avg

    _run(pools, x, opcode="reduce-window", atol=1e-6)


def test_max_pool_gradient():
    # select-and-scatter: the gradient of max pooling
    x = _normal(1, 4, 6, 2)

    def loss(x):
        return jnp.sum(lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1),
                                         "VALID") ** 2)

    _run(jax.grad(loss), x)


def test_embedding_lookup_and_its_gradient():
    table = _normal(10, 4)
    ids = RNG.integers(0, 10, (3, 5)).astype(np.int32)

    def embed(table, ids):
        return jnp.take(table, ids, axis=0)

    _run(embed, table, ids)
    _run(jax.grad(lambda t, i: jnp.sum(embed(t, i) ** 2)), table, ids)  # scatter-add


def test_sorting_argsort_and_top_k():
    x = np.round(_normal(3, 9) * 2, 1)

    def sorts(x):
        values, indices = lax.top_k(x, 3)
        return jnp.sort(x, axis=-1), jnp.argsort(x, axis=-1, stable=True), values, indices

    _run(sorts, x)


def test_attention():
    q, k, v = _normal(2, 5, 8), _normal(2, 7, 8), _normal(2, 7, 8)
    mask = np.tril(np.ones((5, 7), bool))

    def attention(q, k, v):
        s = jnp.einsum("bqd,bkd->bqk", q, k) / np.sqrt(8.0).astype(np.float32)
        s = jnp.where(mask, s, -1e9)
        return jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(s, axis=-1), v)

    _run(attention, q, k, v, opcode="dot", atol=1e-6)


def test_integer_matmuls():
    a = RNG.integers(-128, 128, (4, 16)).astype(np.int8)
    b = RNG.integers(-128, 128, (16, 6)).astype(np.int8)
    u = RNG.integers(0, 256, (4, 16)).astype(np.uint8)

    def int_mm(a, b, u):
        return (lax.dot(a, b, preferred_element_type=jnp.int32),
                jnp.matmul(a.astype(jnp.int32), b.astype(jnp.int32)),
                lax.dot(u, b, preferred_element_type=jnp.int32))

    _run(int_mm, a, b, u)


@pytest.mark.parametrize("dtype", [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2])
def test_fp8_matmul(dtype):
    a = (_normal(4, 16) * 2).astype(dtype)
    b = (_normal(16, 6) * 2).astype(dtype)
    scale = np.float32(0.5)

    def fp8_mm(a, b, scale):
        return lax.dot(a, b, preferred_element_type=jnp.float32) * scale

    _run(fp8_mm, a, b, scale, opcode="dot", atol=1e-6)


def test_quantized_int8_linear_layer():
    x, w = _normal(3, 8), _normal(8, 5)

    def qlinear(x, w):
        sx = jnp.max(jnp.abs(x)) / 127.0
        sw = jnp.max(jnp.abs(w), axis=0) / 127.0
        qx = jnp.clip(jnp.round(x / sx), -127, 127).astype(jnp.int8)
        qw = jnp.clip(jnp.round(w / sw), -127, 127).astype(jnp.int8)
        acc = lax.dot(qx, qw, preferred_element_type=jnp.int32)
        return acc.astype(jnp.float32) * sx * sw

    _run(qlinear, x, w, opcode="dot", atol=1e-6)
