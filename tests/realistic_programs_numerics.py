"""The fourth set of realistic JAX programs for ``realistic_programs.PROGRAMS`` (through
``realistic_programs_more.MORE``): numerics: bf16 and f16 softmax, logsumexp, GELU and
loss scaling, cancellation, inverse and determinant, integer arithmetic,
reduce-precision, special functions, sorts with NaNs, bf16 top-k ties and cumsum. Same
conventions as ``realistic_programs.py``; helpers in ``realistic_common.py``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from realistic_common import (
    cross_entropy,
    flat_program,
    glorot,
    keys,
    normal,
)

__all__ = ["NUMERICS"]


def bf16_softmax_large(seed=0):
    x = (normal(jax.random.PRNGKey(seed), (16, 128)) * 30.0).astype(jnp.bfloat16)

    def bf16_softmax_large(x):
        return jax.nn.softmax(x, axis=-1), jax.nn.log_softmax(x, axis=-1)

    return flat_program(
        "bf16_softmax_large", bf16_softmax_large, (x,), "bf16 softmax/log_softmax of large logits"
    )


def f16_masked_logsumexp(seed=0):
    k = keys(seed, 2)
    x = (normal(k[0], (8, 64)) * 4.0).astype(jnp.float16)
    mask = jax.random.bernoulli(k[1], 0.7, (8, 64))

    def f16_masked_logsumexp(x, mask):
        return jax.nn.logsumexp(jnp.where(mask, x, -jnp.inf), axis=-1), jax.scipy.special.logsumexp(
            x.astype(jnp.float32), b=mask.astype(jnp.float32), axis=-1
        )

    return flat_program(
        "f16_masked_logsumexp",
        f16_masked_logsumexp,
        (x, mask),
        "masked logsumexp in f16 and weighted logsumexp",
    )


def cancellation_variance(seed=0):
    x = normal(jax.random.PRNGKey(seed), (32, 256)) + 1000.0

    def cancellation_variance(x):
        naive = jnp.mean(x * x, axis=1) - jnp.mean(x, axis=1) ** 2
        return naive, jnp.var(x, axis=1)

    return flat_program(
        "cancellation_variance",
        cancellation_variance,
        (x,),
        "E[x^2]-E[x]^2 with mean 1000 (cancellation) beside jnp.var",
    )


def bf16_gelu_mlp(seed=0):
    k = keys(seed, 3)
    x = normal(k[0], (32, 64)).astype(jnp.bfloat16)
    w1 = glorot(k[1], (64, 256)).astype(jnp.bfloat16)
    w2 = glorot(k[2], (256, 64)).astype(jnp.bfloat16)

    def bf16_gelu_mlp(x, w1, w2):
        h = jax.nn.gelu(x @ w1, approximate=True)
        return h @ w2, jax.nn.gelu(x @ w1, approximate=False)

    return flat_program(
        "bf16_gelu_mlp", bf16_gelu_mlp, (x, w1, w2), "bf16 MLP with tanh and erf GELU"
    )


def inverse_det(seed=0):
    m = normal(jax.random.PRNGKey(seed), (4, 8, 8)) + 4.0 * jnp.eye(8)

    def inverse_det(m):
        return (
            jnp.linalg.inv(m),
            jnp.linalg.det(m),
            jnp.linalg.solve(m, jnp.ones((4, 8, 1)))[..., 0],
        )

    return flat_program("inverse_det", inverse_det, (m,), "batched inv, det, solve (LU)")


def integer_arith(seed=0):
    k = keys(seed, 2)
    a = jax.random.randint(k[0], (64,), -1000, 1000)
    b = jax.random.randint(k[1], (64,), -20, 20)
    b = jnp.where(b == 0, 7, b)

    def integer_arith(a, b):
        return (
            a // b,
            a % b,
            jnp.right_shift(a, 3),
            jnp.round(a.astype(jnp.float32) / b.astype(jnp.float32)).astype(jnp.int32),
            jnp.clip(a * b, -5000, 5000),
        )

    return flat_program(
        "integer_arith", integer_arith, (a, b), "floor division/mod of negatives, shifts, rounding"
    )


def f16_loss_scaled_step(seed=0):
    k = keys(seed, 4)
    w = glorot(k[0], (32, 10)).astype(jnp.float16)
    x = normal(k[1], (64, 32)).astype(jnp.float16)
    y = jax.random.randint(k[2], (64,), 0, 10)

    def loss(w, x, y, scale):
        return cross_entropy((x @ w).astype(jnp.float32), y, 10) * scale

    def f16_loss_scaled_step(w, x, y):
        scale = jnp.float32(2.0**12)
        v, g = jax.value_and_grad(loss)(w, x, y, scale)
        g = g.astype(jnp.float32) / scale
        finite = jnp.all(jnp.isfinite(g))
        new_w = jnp.where(finite, (w.astype(jnp.float32) - 0.1 * g).astype(jnp.float16), w)
        return v / scale, new_w, finite

    return flat_program(
        "f16_loss_scaled_step",
        f16_loss_scaled_step,
        (w, x, y),
        "f16 step with dynamic loss scaling and finite check",
    )


def reduce_precision_ops(seed=0):
    x = normal(jax.random.PRNGKey(seed), (256,)) * 100.0

    def reduce_precision_ops(x):
        return (
            lax.reduce_precision(x, exponent_bits=5, mantissa_bits=10),
            lax.reduce_precision(x, exponent_bits=8, mantissa_bits=7),
            lax.reduce_precision(x, exponent_bits=4, mantissa_bits=3),
        )

    return flat_program(
        "reduce_precision_ops",
        reduce_precision_ops,
        (x,),
        "lax.reduce_precision to f16/bf16/fp8-like formats",
    )


def special_functions(seed=0):
    x = jax.random.uniform(jax.random.PRNGKey(seed), (128,), minval=0.1, maxval=20.0)
    p = jax.random.uniform(jax.random.PRNGKey(seed + 1), (128,), minval=-0.99, maxval=0.99)

    def special_functions(x, p):
        return (
            lax.lgamma(x),
            lax.digamma(x),
            jax.scipy.special.erfinv(p),
            lax.igamma(x, 0.5 * x),
            jax.scipy.special.gammaln(x) - jax.scipy.special.gammaln(x + 0.5),
            lax.bessel_i1e(x),
        )

    return flat_program(
        "special_functions",
        special_functions,
        (x, p),
        "lgamma, digamma, erfinv, igamma, bessel_i1e",
    )


def sort_with_nans(seed=0):
    x = normal(jax.random.PRNGKey(seed), (8, 32))
    x = x.at[:, ::7].set(jnp.nan).at[:, 3::9].set(-0.0).at[:, 4::9].set(0.0)

    def sort_with_nans(x):
        return (
            jnp.sort(x, axis=1),
            jnp.argsort(x, axis=1, stable=True),
            jnp.nanmax(x, axis=1),
            jnp.nanmean(x, axis=1),
        )

    return flat_program(
        "sort_with_nans",
        sort_with_nans,
        (x,),
        "sort/argsort with NaN and signed zeros, nanmax, nanmean",
    )


def bf16_topk_ties(seed=0):
    x = jnp.round(normal(jax.random.PRNGKey(seed), (16, 50)) * 2.0).astype(jnp.bfloat16)

    def bf16_topk_ties(x):
        v, i = lax.top_k(x, 5)
        return v, i, jnp.argmax(x, axis=1), jnp.argmin(x, axis=1)

    return flat_program(
        "bf16_topk_ties", bf16_topk_ties, (x,), "top_k/argmax/argmin of bf16 with many ties"
    )


def bf16_cumsum(seed=0):
    x = normal(jax.random.PRNGKey(seed), (8, 512)).astype(jnp.bfloat16)

    def bf16_cumsum(x):
        return jnp.cumsum(x, axis=1), jnp.cumsum(x.astype(jnp.float32), axis=1), jnp.sum(x, axis=1)

    return flat_program(
        "bf16_cumsum", bf16_cumsum, (x,), "bf16 cumsum over 512, f32 cumsum, bf16 sum"
    )


NUMERICS = {
    f.__name__: f
    for f in (
        bf16_softmax_large,
        f16_masked_logsumexp,
        cancellation_variance,
        bf16_gelu_mlp,
        inverse_det,
        integer_arith,
        f16_loss_scaled_step,
        reduce_precision_ops,
        special_functions,
        sort_with_nans,
        bf16_topk_ties,
        bf16_cumsum,
    )
}
