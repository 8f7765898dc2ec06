"""Ordinary JAX tests, as a library's test suite has them (not collected by default:
``tests/test_pytest_plugin.py`` runs this file with and without ``pytest --hloref``).

They all pass on jaxlib 0.10.2. One of them, ``test_int4_residual_is_requantized``,
executes a computation that XLA:CPU gets wrong (findings/xla-cpu-jaxlib-0.10.2/
s4-add-does-not-wrap: an s4 add followed by a convert to s8 does not wrap); its own
asserts do not notice. ``pytest --hloref`` does, and fails it.

    pytest tests/jax_ordinary_suite.py             # 5 passed
    pytest --hloref tests/jax_ordinary_suite.py    # 1 failed (the int4 test), 4 passed
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


def test_mlp_forward_shapes_and_finiteness():
    rng = np.random.default_rng(0)
    w = rng.normal(size=(8, 4)).astype(np.float32)
    x = rng.normal(size=(16, 8)).astype(np.float32)

    @jax.jit
    def forward(w, x):
        return jax.nn.softmax(jnp.tanh(x @ w), axis=-1)

    p = forward(w, x)
    assert p.shape == (16, 4)
    np.testing.assert_allclose(np.sum(np.asarray(p), axis=-1), 1.0, rtol=1e-5)


def test_training_loop_decreases_the_loss():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(32, 3)).astype(np.float32)
    y = x @ np.array([1.0, -2.0, 0.5], np.float32)

    @jax.jit
    def step(w):
        loss, g = jax.value_and_grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
        return w - 0.1 * g, loss

    w = jnp.zeros(3)
    losses = []
    for _ in range(20):
        w, loss = step(w)
        losses.append(float(loss))
    assert losses[-1] < losses[0] / 10


def test_cumulative_scan_matches_cumsum():
    x = jnp.arange(10.0)
    _, ys = lax.scan(lambda c, v: (c + v, c + v), 0.0, x)
    np.testing.assert_allclose(ys, np.cumsum(np.arange(10.0)))


def test_sort_is_ordered():
    x = jnp.array([3.0, -1.0, 2.0, 0.5])
    s = jax.jit(jnp.sort)(x)
    assert bool(jnp.all(s[1:] >= s[:-1]))


def test_int4_residual_is_requantized():
    """An int4 residual connection, requantized to int8. XLA:CPU forgets that int4
    arithmetic wraps (findings/known-upstream/xla-cpu-jaxlib-0.10.2/s4-add-does-not-wrap)."""
    q = jnp.array([[-8, 7, 3, -1], [1, 2, -3, 4]], dtype=jnp.int4)

    @jax.jit
    def residual(q):
        return (q + q).astype(jnp.int8)

    out = residual(q)
    assert out.shape == (2, 4) and out.dtype == jnp.int8
