"""The third set of realistic JAX programs for ``realistic_programs.PROGRAMS`` (through
``realistic_programs_more.MORE``): loops until convergence, quantiles, SVD and eigh,
bf16 convolutions, scatter max/min, associative scans, image resizing, searchsorted and
Gumbel sampling. Same conventions as ``realistic_programs.py``; helpers in
``realistic_common.py``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from realistic_common import (
    cross_entropy,
    flat_program,
    glorot,
    keys,
    normal,
)

__all__ = ["THIRD"]


def bisection_root(seed=0):
    a = jax.random.uniform(jax.random.PRNGKey(seed), (32,), minval=0.5, maxval=4.0)

    def bisection_root(a):
        def cond(s):
            lo, hi, it = s
            return jnp.logical_and(jnp.max(hi - lo) > 1e-6, it < 100)

        def body(s):
            lo, hi, it = s
            mid = 0.5 * (lo + hi)
            f = mid**3 - a
            return jnp.where(f > 0, lo, mid), jnp.where(f > 0, mid, hi), it + 1

        lo, hi, it = lax.while_loop(cond, body, (jnp.zeros_like(a), jnp.full_like(a, 4.0), 0))
        return 0.5 * (lo + hi), it

    return flat_program(
        "bisection_root", bisection_root, (a,), "cube roots by bisection, data-dependent trip count"
    )


def newton_until_converged(seed=0):
    a = jax.random.uniform(jax.random.PRNGKey(seed), (64,), minval=0.1, maxval=100.0)

    def newton_until_converged(a):
        def cond(s):
            x, prev, it = s
            return jnp.logical_and(jnp.max(jnp.abs(x - prev)) > 1e-5 * jnp.max(x), it < 50)

        def body(s):
            x, _, it = s
            return 0.5 * (x + a / x), x, it + 1

        x, _, it = lax.while_loop(cond, body, (a, jnp.zeros_like(a), 0))
        return x, it

    return flat_program(
        "newton_until_converged", newton_until_converged, (a,), "Newton sqrt until converged"
    )


def median_quantiles(seed=0):
    x = normal(jax.random.PRNGKey(seed), (8, 101))

    def median_quantiles(x):
        return (
            jnp.median(x, axis=1),
            jnp.percentile(x, jnp.array([5.0, 25.0, 75.0, 95.0]), axis=1),
            jnp.quantile(x, 0.3, axis=1, method="linear"),
        )

    return flat_program(
        "median_quantiles",
        median_quantiles,
        (x,),
        "median, percentiles, quantiles (sort + interpolation)",
    )


def pca_svd(seed=0):
    x = normal(jax.random.PRNGKey(seed), (50, 6)) @ normal(jax.random.PRNGKey(seed + 1), (6, 6))

    def pca_svd(x):
        xc = x - jnp.mean(x, axis=0)
        u, s, vt = jnp.linalg.svd(xc, full_matrices=False)
        proj = xc @ vt[:2].T
        return s, jnp.abs(proj), jnp.sum(s[:2] ** 2) / jnp.sum(s**2)

    return flat_program(
        "pca_svd", pca_svd, (x,), "PCA via SVD (singular values, |projections|, explained variance)"
    )


def eigh_spectral(seed=0):
    m = normal(jax.random.PRNGKey(seed), (12, 12))

    def eigh_spectral(m):
        a = m @ m.T + jnp.eye(12)
        w, v = jnp.linalg.eigh(a)
        recon = (v * w) @ v.T
        return w, recon, jnp.linalg.slogdet(a)[1]

    return flat_program("eigh_spectral", eigh_spectral, (m,), "eigh, reconstruction and slogdet")


def bf16_cnn_fwd(seed=0):
    k = keys(seed, 3)
    x = normal(k[0], (4, 16, 16, 3)).astype(jnp.bfloat16)
    w1 = (glorot(k[1], (3, 3, 3, 16))).astype(jnp.bfloat16)
    w2 = (glorot(k[2], (3, 3, 16, 8))).astype(jnp.bfloat16)

    def bf16_cnn_fwd(x, w1, w2):
        dn = ("NHWC", "HWIO", "NHWC")
        h = lax.conv_general_dilated(
            x, w1, (1, 1), "SAME", dimension_numbers=dn, preferred_element_type=jnp.float32
        )
        h = jax.nn.relu(h).astype(jnp.bfloat16)
        h = lax.conv_general_dilated(h, w2, (2, 2), "SAME", dimension_numbers=dn)
        up = lax.conv_transpose(h, w2.transpose(0, 1, 3, 2), (2, 2), "SAME", dimension_numbers=dn)
        return jnp.mean(h.astype(jnp.float32), axis=(1, 2)), up

    return flat_program(
        "bf16_cnn_fwd", bf16_cnn_fwd, (x, w1, w2), "bf16 convolutions, stride 2, transposed conv"
    )


def scatter_max_min(seed=0):
    k = keys(seed, 3)
    vals = normal(k[0], (200,))
    idx = jax.random.randint(k[1], (200,), 0, 16)
    base = normal(k[2], (16,))

    def scatter_max_min(vals, idx, base):
        return (
            base.at[idx].max(vals),
            base.at[idx].min(vals),
            base.at[idx].add(vals),
            base.at[idx].multiply(1.0 + 0.01 * vals),
        )

    return flat_program(
        "scatter_max_min",
        scatter_max_min,
        (vals, idx, base),
        "scatter max/min/add/multiply with duplicate indices",
    )


def assoc_scan_linear_rnn(seed=0):
    k = keys(seed, 2)
    a = jax.random.uniform(k[0], (64, 8), minval=0.8, maxval=0.99)
    b = normal(k[1], (64, 8))

    def assoc_scan_linear_rnn(a, b):
        def comb(x, y):
            return x[0] * y[0], y[0] * x[1] + y[1]

        return lax.associative_scan(comb, (a, b), axis=0)[1]

    return flat_program(
        "assoc_scan_linear_rnn",
        assoc_scan_linear_rnn,
        (a, b),
        "linear recurrence with lax.associative_scan",
    )


def image_resize(seed=0):
    x = normal(jax.random.PRNGKey(seed), (2, 12, 12, 3))

    def image_resize(x):
        return (
            jax.image.resize(x, (2, 20, 20, 3), "bilinear"),
            jax.image.resize(x, (2, 6, 6, 3), "lanczos3"),
            jax.image.resize(x, (2, 24, 24, 3), "nearest"),
        )

    return flat_program(
        "image_resize", image_resize, (x,), "jax.image.resize bilinear/lanczos3/nearest"
    )


def f16_classifier_loss(seed=0):
    k = keys(seed, 3)
    x = normal(k[0], (32, 20)).astype(jnp.float16)
    w = glorot(k[1], (20, 10)).astype(jnp.float16)
    labels = jax.random.randint(k[2], (32,), 0, 10)

    def loss(w, x, labels):
        logits = x @ w
        return cross_entropy(logits, labels, 10)

    def f16_classifier_loss(w, x, labels):
        v, g = jax.value_and_grad(loss)(w, x, labels)
        return v, g, jnp.mean((jnp.argmax(x @ w, axis=1) == labels).astype(jnp.float32))

    return flat_program(
        "f16_classifier_loss",
        f16_classifier_loss,
        (w, x, labels),
        "f16 softmax cross-entropy, gradient, accuracy",
    )


def searchsorted_interp(seed=0):
    k = keys(seed, 2)
    xp = jnp.sort(jax.random.uniform(k[0], (40,), maxval=10.0))
    fp = jnp.sin(xp)
    x = jax.random.uniform(k[1], (100,), maxval=10.0)

    def searchsorted_interp(xp, fp, x):
        return jnp.searchsorted(xp, x), jnp.interp(x, xp, fp), jnp.digitize(x, xp)

    return flat_program(
        "searchsorted_interp", searchsorted_interp, (xp, fp, x), "searchsorted, interp, digitize"
    )


def gumbel_categorical(seed=0):
    logits = normal(jax.random.PRNGKey(seed), (16, 10))
    key = np.asarray(jax.random.key_data(jax.random.PRNGKey(seed + 3)))

    def gumbel_categorical(logits, key):
        k = jax.random.wrap_key_data(key)
        return (
            jax.random.categorical(k, logits, axis=-1, shape=(4, 16)),
            jax.random.gumbel(k, (16, 10)) + logits,
        )

    return flat_program(
        "gumbel_categorical",
        gumbel_categorical,
        (logits, key),
        "categorical sampling via gumbel-max",
    )


THIRD = {
    f.__name__: f
    for f in (
        bisection_root,
        newton_until_converged,
        median_quantiles,
        pca_svd,
        eigh_spectral,
        bf16_cnn_fwd,
        scatter_max_min,
        assoc_scan_linear_rnn,
        image_resize,
        f16_classifier_loss,
        searchsorted_interp,
        gumbel_categorical,
    )
}
