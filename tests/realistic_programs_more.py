"""More realistic JAX programs for ``realistic_programs.PROGRAMS`` (the second set):
recurrences through ``lax.scan``, cumulative ops, linear algebra through LAPACK custom
calls, FFTs, f16 and bf16 mixed precision, pooling gradients, scatter-adds, random
numbers drawn inside the program, int8 quantization, ``fori_loop`` simulations,
``top_k``/sort rankings and k-means. Same conventions as ``realistic_programs.py``
(fixed seeds, ordinary initialisations, flat array arguments in ``jax.tree_util``
order); its helpers are in ``realistic_common.py``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from realistic_common import (
    adam_init,
    adam_update,
    cross_entropy,
    flat_program,
    glorot,
    keys,
    layer_norm,
    normal,
)

__all__ = ["MORE"]


def gru_scan_grad(seed=0, seq=10, batch=4, n_in=8, hidden=16):
    k = keys(seed, 5)
    params = {
        "w": glorot(k[0], (n_in, 3 * hidden)),
        "u": glorot(k[1], (hidden, 3 * hidden)),
        "b": jnp.zeros((3 * hidden,)),
        "out": glorot(k[2], (hidden, 1)),
    }
    xs = normal(k[3], (seq, batch, n_in))
    ys = normal(k[4], (batch, 1))

    def cell(p, h, x):
        gx = x @ p["w"] + p["b"]
        gh = h @ p["u"]
        z = jax.nn.sigmoid(gx[:, :hidden] + gh[:, :hidden])
        r = jax.nn.sigmoid(gx[:, hidden : 2 * hidden] + gh[:, hidden : 2 * hidden])
        n = jnp.tanh(gx[:, 2 * hidden :] + r * gh[:, 2 * hidden :])
        return (1 - z) * n + z * h

    def loss(p, xs, ys):
        h, _ = lax.scan(lambda h, x: (cell(p, h, x), None), jnp.zeros((batch, hidden)), xs)
        return jnp.mean(jnp.square(h @ p["out"] - ys))

    def gru_scan_grad(p, xs, ys):
        return jax.value_and_grad(loss)(p, xs, ys)

    return flat_program(
        "gru_scan_grad",
        gru_scan_grad,
        (params, xs, ys),
        f"GRU over {seq} steps with lax.scan, MSE loss and its gradient",
    )


def cumulative_ops(seed=0):
    k = keys(seed, 2)
    x = normal(k[0], (16, 64))
    p = jax.random.uniform(k[1], (16, 64), minval=0.9, maxval=1.1)

    def cumulative_ops(x, p):
        return (
            jnp.cumsum(x, axis=1),
            jnp.cumprod(p, axis=1),
            lax.cumlogsumexp(x, axis=1),
            lax.cummax(x, axis=1),
            jnp.cumsum(x, axis=0, dtype=jnp.float32),
        )

    return flat_program(
        "cumulative_ops",
        cumulative_ops,
        (x, p),
        "cumsum, cumprod, cumlogsumexp, cummax over 64 columns (16 x 64)",
    )


def gp_marginal_likelihood(seed=0, n=24, d=3):
    k = keys(seed, 3)
    x = normal(k[0], (n, d))
    y = jnp.sin(x[:, 0]) + 0.1 * normal(k[1], (n,))
    hyper = jnp.array([0.0, 0.0, -2.0])  # log lengthscale, log variance, log noise

    def nll(hyper, x, y):
        ls, var, noise = jnp.exp(hyper[0]), jnp.exp(hyper[1]), jnp.exp(hyper[2])
        d2 = jnp.sum(jnp.square(x[:, None, :] - x[None, :, :]), axis=-1)
        kxx = var * jnp.exp(-0.5 * d2 / ls**2) + (noise + 1e-4) * jnp.eye(x.shape[0])
        chol = jnp.linalg.cholesky(kxx)
        alpha = jax.scipy.linalg.cho_solve((chol, True), y)
        return (
            0.5 * y @ alpha
            + jnp.sum(jnp.log(jnp.diag(chol)))
            + 0.5 * x.shape[0] * jnp.log(2 * jnp.pi)
        )

    def gp_marginal_likelihood(hyper, x, y):
        return jax.value_and_grad(nll)(hyper, x, y)

    return flat_program(
        "gp_marginal_likelihood",
        gp_marginal_likelihood,
        (hyper, x, y),
        f"Gaussian-process negative log marginal likelihood ({n} points, RBF "
        "kernel) and its gradient: Cholesky and triangular solves (LAPACK)",
    )


def fft_convolution(seed=0, n=128):
    k = keys(seed, 2)
    signal = normal(k[0], (8, n))
    kernel = normal(k[1], (n,)) * jnp.exp(-jnp.arange(n) / 8.0)

    def fft_convolution(signal, kernel):
        spec = jnp.fft.rfft(signal, axis=-1) * jnp.fft.rfft(kernel)
        circ = jnp.fft.irfft(spec, n=n, axis=-1)
        power = jnp.abs(jnp.fft.fft(signal, axis=-1)) ** 2
        return circ, power

    return flat_program(
        "fft_convolution",
        fft_convolution,
        (signal, kernel),
        f"circular convolution through rfft/irfft and a power spectrum " f"(8 signals of {n})",
    )


def f16_attention(seed=0, b=2, s=16, d=32):
    k = keys(seed, 3)
    q, kk, v = (normal(k[i], (b, s, d)).astype(jnp.float16) for i in range(3))

    def f16_attention(q, k, v):
        scores = jnp.einsum("bqd,bkd->bqk", q, k) / jnp.float16(np.sqrt(d))
        probs = jax.nn.softmax(scores.astype(jnp.float32), axis=-1).astype(jnp.float16)
        return jnp.einsum("bqk,bkd->bqd", probs, v)

    return flat_program(
        "f16_attention",
        f16_attention,
        (q, kk, v),
        "attention with f16 q/k/v, the softmax in f32 (mixed precision)",
    )


def pooling_grad(seed=0):
    k = keys(seed, 3)
    x = normal(k[0], (4, 16, 16, 8))
    w = glorot(k[1], (3, 3, 1, 8))  # depthwise
    y = normal(k[2], (4, 8))

    def loss(w, x, y):
        h = lax.conv_general_dilated(
            x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=8
        )
        h = jax.nn.relu(h)
        mx = lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        av = lax.reduce_window(mx, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4.0
        return jnp.mean(jnp.square(jnp.mean(av, axis=(1, 2)) - y))

    def pooling_grad(w, x, y):
        return jax.value_and_grad(loss)(w, x, y)

    return flat_program(
        "pooling_grad",
        pooling_grad,
        (w, x, y),
        "depthwise 3x3 convolution, max pool then average pool, and the "
        "gradient (select-and-scatter, padded reduce-window)",
    )


def segment_sum_grad(seed=0, vocab=50, d=16, n=64, segments=8):
    k = keys(seed, 4)
    table = normal(k[0], (vocab, d)) * 0.1
    ids = jax.random.randint(k[1], (n,), 0, vocab)
    seg = jnp.sort(jax.random.randint(k[2], (n,), 0, segments))
    target = normal(k[3], (segments, d))

    def loss(table, ids, seg, target):
        pooled = jax.ops.segment_sum(table[ids], seg, num_segments=segments)
        counts = jax.ops.segment_sum(jnp.ones((n,)), seg, num_segments=segments)
        return jnp.mean(jnp.square(pooled / jnp.maximum(counts, 1.0)[:, None] - target))

    def segment_sum_grad(table, ids, seg, target):
        return jax.value_and_grad(loss)(table, ids, seg, target)

    return flat_program(
        "segment_sum_grad",
        segment_sum_grad,
        (table, ids, seg, target),
        "embedding bag: gather, segment_sum (scatter-add) of the rows, mean "
        "per segment, and the gradient (scatter-add into the table)",
    )


def vae_step(seed=0, batch=16, d=32, z=4, hidden=32):
    k = keys(seed, 6)
    params = {
        "enc": glorot(k[0], (d, hidden)),
        "mu": glorot(k[1], (hidden, z)),
        "logvar": glorot(k[2], (hidden, z)),
        "dec1": glorot(k[3], (z, hidden)),
        "dec2": glorot(k[4], (hidden, d)),
    }
    x = jax.nn.sigmoid(normal(k[5], (batch, d)))
    key = np.asarray(jax.random.key_data(jax.random.PRNGKey(seed + 1)))

    def loss(p, x, key):
        h = jnp.tanh(x @ p["enc"])
        mu, logvar = h @ p["mu"], h @ p["logvar"]
        eps = jax.random.normal(jax.random.wrap_key_data(key), mu.shape)
        zz = mu + jnp.exp(0.5 * logvar) * eps
        logits = jnp.tanh(zz @ p["dec1"]) @ p["dec2"]
        rec = jnp.sum(jnp.logaddexp(0.0, logits) - x * logits, axis=-1)
        kl = -0.5 * jnp.sum(1 + logvar - jnp.square(mu) - jnp.exp(logvar), axis=-1)
        return jnp.mean(rec + kl)

    def vae_step(p, x, key):
        value, grads = jax.value_and_grad(loss)(p, x, key)
        return value, jax.tree_util.tree_map(lambda a, g: a - 0.01 * g, p, grads)

    return flat_program(
        "vae_step",
        vae_step,
        (params, x, key),
        "variational autoencoder SGD step: threefry normal draws inside the "
        "program (reparameterization), softplus reconstruction, KL",
    )


def dropout_adamw_clip(seed=0, batch=32, sizes=(16, 64, 10)):
    k = keys(seed, 5)
    params = [
        {"w": glorot(k[i], (sizes[i], sizes[i + 1])), "b": jnp.zeros((sizes[i + 1],))}
        for i in range(len(sizes) - 1)
    ]
    opt = adam_init(params)
    x = normal(k[3], (batch, sizes[0]))
    labels = jax.random.randint(k[4], (batch,), 0, sizes[-1])
    key = np.asarray(jax.random.key_data(jax.random.PRNGKey(seed + 7)))

    def loss(params, x, labels, key):
        h = x
        for i, layer in enumerate(params):
            h = h @ layer["w"] + layer["b"]
            if i < len(params) - 1:
                h = jax.nn.gelu(h)
                keep = jax.random.bernoulli(
                    jax.random.fold_in(jax.random.wrap_key_data(key), i), 0.9, h.shape
                )
                h = jnp.where(keep, h / 0.9, 0.0)
        return cross_entropy(h, labels, sizes[-1])

    def dropout_adamw_clip(params, opt, x, labels, key):
        value, grads = jax.value_and_grad(loss)(params, x, labels, key)
        norm = jnp.sqrt(sum(jnp.sum(jnp.square(g)) for g in jax.tree_util.tree_leaves(grads)))
        grads = jax.tree_util.tree_map(lambda g: g * jnp.minimum(1.0, 1.0 / (norm + 1e-6)), grads)
        new, opt = adam_update(params, grads, opt)
        new = jax.tree_util.tree_map(lambda p, q: q - 1e-3 * 0.01 * p, params, new)
        return value, norm, new, opt

    return flat_program(
        "dropout_adamw_clip",
        dropout_adamw_clip,
        (params, opt, x, labels, key),
        "MLP with GELU and dropout (bernoulli draws in the program), gradient "
        "clipping by global norm, AdamW update",
    )


def int8_quantized_linear(seed=0, m=32, k_=64, n=48):
    k = keys(seed, 2)
    x = normal(k[0], (m, k_))
    w = glorot(k[1], (k_, n))

    def int8_quantized_linear(x, w):
        xs = jnp.max(jnp.abs(x), axis=1, keepdims=True) / 127.0
        ws = jnp.max(jnp.abs(w), axis=0, keepdims=True) / 127.0
        xq = jnp.clip(jnp.round(x / xs), -127, 127).astype(jnp.int8)
        wq = jnp.clip(jnp.round(w / ws), -127, 127).astype(jnp.int8)
        acc = lax.dot_general(xq, wq, (((1,), (0,)), ((), ())), preferred_element_type=jnp.int32)
        y = acc.astype(jnp.float32) * xs * ws
        return y, jnp.argmax(y, axis=1), jnp.mean(jnp.abs(y - x @ w))

    return flat_program(
        "int8_quantized_linear",
        int8_quantized_linear,
        (x, w),
        "per-row/per-column int8 quantization, int8 x int8 -> int32 matmul, "
        "dequantization, argmax and the error against the f32 matmul",
    )


def nbody_leapfrog(seed=0, n=16, steps=50, dt=0.01):
    k = keys(seed, 3)
    pos = normal(k[0], (n, 3))
    vel = 0.1 * normal(k[1], (n, 3))
    mass = jax.random.uniform(k[2], (n,), minval=0.5, maxval=1.5)

    def acc(pos, mass):
        d = pos[None, :, :] - pos[:, None, :]
        r2 = jnp.sum(d * d, axis=-1) + 1e-2
        inv = lax.rsqrt(r2) ** 3 * (1 - jnp.eye(n))
        return jnp.sum(d * (inv * mass[None, :])[:, :, None], axis=1)

    def nbody_leapfrog(pos, vel, mass):
        def step(_, state):
            p, v = state
            v = v + 0.5 * dt * acc(p, mass)
            p = p + dt * v
            v = v + 0.5 * dt * acc(p, mass)
            return p, v

        p, v = lax.fori_loop(0, steps, step, (pos, vel))
        energy = 0.5 * jnp.sum(mass[:, None] * v * v)
        return p, v, energy

    return flat_program(
        "nbody_leapfrog",
        nbody_leapfrog,
        (pos, vel, mass),
        f"{n}-body gravity, {steps} leapfrog steps in lax.fori_loop, softened rsqrt",
    )


def welford_stats(seed=0, rows=40, d=32):
    x = normal(jax.random.PRNGKey(seed), (rows, d)) * 5.0 + 100.0

    def welford_stats(x):
        def step(i, s):
            n, mean, m2 = s
            n = n + 1.0
            delta = x[i] - mean
            mean = mean + delta / n
            m2 = m2 + delta * (x[i] - mean)
            return n, mean, m2

        n, mean, m2 = lax.fori_loop(0, rows, step, (0.0, jnp.zeros((d,)), jnp.zeros((d,))))
        return mean, m2 / (n - 1), jnp.var(x, axis=0, ddof=1)

    return flat_program(
        "welford_stats",
        welford_stats,
        (x,),
        f"Welford's running mean and variance over {rows} rows (fori_loop with "
        "dynamic-slice), beside jnp.var",
    )


def topk_ranking(seed=0, queries=8, items=64, k=5):
    kk = keys(seed, 3)
    q = normal(kk[0], (queries, 16))
    items_ = normal(kk[1], (items, 16))
    relevance = jax.random.randint(kk[2], (queries, items), 0, 4)

    def topk_ranking(q, items_, relevance):
        scores = q @ items_.T
        top_scores, top_idx = lax.top_k(scores, k)
        gains = jnp.take_along_axis(relevance, top_idx, axis=1).astype(jnp.float32)
        discounts = 1.0 / jnp.log2(jnp.arange(2, k + 2, dtype=jnp.float32))
        dcg = jnp.sum((2.0**gains - 1.0) * discounts, axis=1)
        ideal = -jnp.sort(-relevance, axis=1)[:, :k].astype(jnp.float32)
        idcg = jnp.sum((2.0**ideal - 1.0) * discounts, axis=1)
        ranks = jnp.argsort(jnp.argsort(-scores, axis=1), axis=1)
        return top_scores, top_idx, dcg / jnp.maximum(idcg, 1e-6), ranks

    return flat_program(
        "topk_ranking",
        topk_ranking,
        (q, items_, relevance),
        f"retrieval: scores, top_k (k={k}), NDCG with sort, ranks by double " "argsort",
    )


def bf16_transformer_block(seed=0, b=2, s=16, d=64, heads=4):
    k = keys(seed, 6)
    bf = jnp.bfloat16
    x = normal(k[0], (b, s, d)).astype(bf)
    params = {
        "qkv": glorot(k[1], (d, 3 * d)).astype(bf),
        "o": glorot(k[2], (d, d)).astype(bf),
        "ff1": glorot(k[3], (d, 4 * d)).astype(bf),
        "ff2": glorot(k[4], (4 * d, d)).astype(bf),
        "ln": jnp.ones((d,), bf),
    }

    def bf16_transformer_block(p, x):
        h = layer_norm(x.astype(jnp.float32), p["ln"].astype(jnp.float32), 0.0).astype(bf)
        qkv = (h @ p["qkv"]).reshape(b, s, 3, heads, d // heads)
        q, kk, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        sc = jnp.einsum("bqhd,bkhd->bhqk", q, kk).astype(jnp.float32) / np.sqrt(d // heads)
        mask = jnp.tril(jnp.ones((s, s), bool))
        probs = jax.nn.softmax(jnp.where(mask, sc, -1e9), axis=-1).astype(bf)
        att = jnp.einsum("bhqk,bkhd->bqhd", probs, v).reshape(b, s, d)
        x = x + att @ p["o"]
        h = layer_norm(x.astype(jnp.float32), p["ln"].astype(jnp.float32), 0.0).astype(bf)
        return x + jax.nn.gelu(h @ p["ff1"]) @ p["ff2"]

    return flat_program(
        "bf16_transformer_block",
        bf16_transformer_block,
        (params, x),
        "pre-norm causal transformer block in bf16 (layer norm and softmax " "in f32), forward",
    )


def kmeans(seed=0, n=64, d=2, clusters=4, iters=5):
    k = keys(seed, 2)
    centers = jnp.array([[3.0, 3.0], [-3.0, 3.0], [3.0, -3.0], [-3.0, -3.0]])
    pts = centers[jax.random.randint(k[0], (n,), 0, clusters)] + normal(k[1], (n, d))
    init = pts[:clusters]

    def kmeans(pts, init):
        def step(_, c):
            d2 = jnp.sum(jnp.square(pts[:, None, :] - c[None, :, :]), axis=-1)
            assign = jnp.argmin(d2, axis=1)
            onehot = jax.nn.one_hot(assign, clusters)
            counts = jnp.sum(onehot, axis=0)
            sums = onehot.T @ pts
            return jnp.where(counts[:, None] > 0, sums / jnp.maximum(counts, 1.0)[:, None], c)

        c = lax.fori_loop(0, iters, step, init)
        d2 = jnp.sum(jnp.square(pts[:, None, :] - c[None, :, :]), axis=-1)
        return c, jnp.argmin(d2, axis=1), jnp.sum(jnp.min(d2, axis=1))

    return flat_program(
        "kmeans",
        kmeans,
        (pts, init),
        f"k-means, {iters} Lloyd iterations in fori_loop (argmin, one-hot means)",
    )


def newton_logistic(seed=0, n=64, d=6):
    k = keys(seed, 3)
    x = normal(k[0], (n, d))
    w_true = normal(k[1], (d,))
    y = (jax.random.uniform(k[2], (n,)) < jax.nn.sigmoid(x @ w_true)).astype(jnp.float32)
    w0 = jnp.zeros((d,))

    def newton_logistic(w, x, y):
        for _ in range(3):
            p = jax.nn.sigmoid(x @ w)
            g = x.T @ (p - y) + 1e-2 * w
            h = (x.T * (p * (1 - p))) @ x + 1e-2 * jnp.eye(d)
            w = w - jnp.linalg.solve(h, g)
        p = jax.nn.sigmoid(x @ w)
        nll = -jnp.mean(y * jnp.log(p + 1e-7) + (1 - y) * jnp.log(1 - p + 1e-7))
        return w, nll

    return flat_program(
        "newton_logistic",
        newton_logistic,
        (w0, x, y),
        "logistic regression, 3 Newton steps with jnp.linalg.solve (LU, LAPACK)",
    )


# ------------------------------------------------------------------ third set


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


# ------------------------------------------------------------------ fourth set: numerics


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


MORE = {
    f.__name__: f
    for f in (
        gru_scan_grad,
        cumulative_ops,
        gp_marginal_likelihood,
        fft_convolution,
        f16_attention,
        pooling_grad,
        segment_sum_grad,
        vae_step,
        dropout_adamw_clip,
        int8_quantized_linear,
        nbody_leapfrog,
        welford_stats,
        topk_ranking,
        bf16_transformer_block,
        kmeans,
        newton_logistic,
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
