"""More realistic JAX programs for ``realistic_programs.PROGRAMS`` (the second set):
recurrences through ``lax.scan``, cumulative ops, linear algebra through LAPACK custom
calls, FFTs, f16 and bf16 mixed precision, pooling gradients, scatter-adds, random
numbers drawn inside the program, int8 quantization, ``fori_loop`` simulations,
``top_k``/sort rankings and k-means. Same conventions as ``realistic_programs.py``
(fixed seeds, ordinary initialisations, flat array arguments in ``jax.tree_util``
order); its helpers are in ``realistic_common.py``. The third and fourth sets, which
``MORE`` takes in after these, are in ``realistic_programs_third.py`` and
``realistic_programs_numerics.py``.
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
from realistic_programs_numerics import NUMERICS
from realistic_programs_third import THIRD

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


MORE = {
    **{
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
        )
    },
    **THIRD,
    **NUMERICS,
}
