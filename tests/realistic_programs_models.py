"""Realistic JAX programs, third set, for ``realistic_programs.PROGRAMS``: what current
model code does that the first two sets did not: a Llama-style block (RMSNorm, rotary
embeddings, grouped-query attention, SwiGLU) with its gradient, greedy decoding with a
KV cache written by ``dynamic_update_slice`` in a loop, nucleus sampling, depthwise and
transposed convolutions with group norm, CTC's forward recursion, log-domain Sinkhorn,
conjugate gradients run to a tolerance, int4 weights with group scales, fp8 with delayed
scaling, per-example clipped gradients (DP-SGD), bf16 parameters with f32 master weights,
histograms, complex-valued escape-time iteration. Same conventions as
``realistic_programs.py`` (fixed seeds, ordinary initialisations, flat array arguments
in ``jax.tree_util`` order); helpers in ``realistic_common.py``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from realistic_common import flat_program, glorot, group_norm, he, keys, normal

__all__ = ["MODELS"]


def _rms_norm(x, w, eps=1e-6):
    x32 = x.astype(jnp.float32)
    return (x32 * lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)).astype(x.dtype) * w


def _rope(x, positions, base=10000.0):
    """Rotary embeddings on the last axis of ``x`` [batch, seq, heads, dim]."""
    half = x.shape[-1] // 2
    freqs = base ** (-jnp.arange(half, dtype=jnp.float32) / half)
    angles = positions[:, None].astype(jnp.float32) * freqs[None, :]
    sin, cos = jnp.sin(angles)[None, :, None, :], jnp.cos(angles)[None, :, None, :]
    x1, x2 = x[..., :half].astype(jnp.float32), x[..., half:].astype(jnp.float32)
    return jnp.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1).astype(x.dtype)


def _llama_params(k, d, heads, kv_heads, ff, dtype=jnp.float32):
    hd = d // heads
    return {
        "wq": glorot(k[0], (d, heads * hd)).astype(dtype),
        "wk": glorot(k[1], (d, kv_heads * hd)).astype(dtype),
        "wv": glorot(k[2], (d, kv_heads * hd)).astype(dtype),
        "wo": glorot(k[3], (heads * hd, d)).astype(dtype),
        "w1": glorot(k[4], (d, ff)).astype(dtype),
        "w3": glorot(k[5], (d, ff)).astype(dtype),
        "w2": glorot(k[6], (ff, d)).astype(dtype),
        "n1": jnp.ones((d,), dtype),
        "n2": jnp.ones((d,), dtype),
    }


def _gqa(q, k, v, mask):
    """Grouped-query attention: q [b, s, h, d], k/v [b, t, g, d] with h a multiple of g."""
    b, s, h, d = q.shape
    g = k.shape[2]
    q = q.reshape(b, s, g, h // g, d)
    sc = jnp.einsum("bsgrd,btgd->bgrst", q, k).astype(jnp.float32) / np.sqrt(d)
    sc = jnp.where(mask, sc, jnp.finfo(jnp.float32).min)
    p = jax.nn.softmax(sc, axis=-1).astype(v.dtype)
    return jnp.einsum("bgrst,btgd->bsgrd", p, v).reshape(b, s, h * d)


def _llama_block(p, x, positions, mask, heads, kv_heads):
    b, s, d = x.shape
    hd = d // heads
    h = _rms_norm(x, p["n1"])
    q = _rope((h @ p["wq"]).reshape(b, s, heads, hd), positions)
    k = _rope((h @ p["wk"]).reshape(b, s, kv_heads, hd), positions)
    v = (h @ p["wv"]).reshape(b, s, kv_heads, hd)
    x = x + _gqa(q, k, v, mask) @ p["wo"]
    h = _rms_norm(x, p["n2"])
    return x + (jax.nn.silu(h @ p["w1"]) * (h @ p["w3"])) @ p["w2"]


def llama_block_grad(seed=0, b=2, s=16, d=64, heads=4, kv_heads=2, ff=172, vocab=97):
    k = keys(seed, 10)
    params = {"block": _llama_params(k[:7], d, heads, kv_heads, ff),
              "embed": normal(k[7], (vocab, d)) * 0.02}
    tokens = np.asarray(jax.random.randint(k[8], (b, s + 1), 0, vocab))

    def loss(p, tokens):
        x = p["embed"][tokens[:, :-1]]
        mask = jnp.tril(jnp.ones((s, s), bool))
        x = _llama_block(p["block"], x, jnp.arange(s), mask, heads, kv_heads)
        logits = _rms_norm(x, p["block"]["n2"]) @ p["embed"].T
        logp = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, tokens[:, 1:, None], axis=-1))

    def llama_block_grad(p, tokens):
        return jax.value_and_grad(loss)(p, tokens)

    return flat_program(
        "llama_block_grad", llama_block_grad, (params, tokens),
        "Llama-style block (RMSNorm, rotary embeddings, grouped-query attention 4/2, "
        "SwiGLU), tied embeddings, next-token loss and its gradient")


def bf16_llama_block(seed=0, b=2, s=32, d=64, heads=8, kv_heads=2, ff=160):
    k = keys(seed, 8)
    bf = jnp.bfloat16
    params = _llama_params(k[:7], d, heads, kv_heads, ff, bf)
    x = normal(k[7], (b, s, d)).astype(bf)

    def bf16_llama_block(p, x):
        mask = jnp.tril(jnp.ones((s, s), bool))
        return _llama_block(p, x, jnp.arange(s), mask, heads, kv_heads)

    return flat_program(
        "bf16_llama_block", bf16_llama_block, (params, x),
        "Llama-style block in bf16 (RMSNorm and softmax in f32, rotary embeddings, "
        "grouped-query attention 8/2, SwiGLU), forward")


def kv_cache_decode(seed=0, b=2, prompt=4, steps=8, d=32, heads=4, vocab=50):
    k = keys(seed, 10)
    params = {"block": _llama_params(k[:7], d, heads, heads, 64),
              "embed": normal(k[7], (vocab, d))}
    tokens = np.asarray(jax.random.randint(k[8], (b, prompt), 0, vocab))
    total = prompt + steps
    hd = d // heads

    def kv_cache_decode(p, tokens):
        bp = p["block"]
        cache_k = jnp.zeros((b, total, heads, hd))
        cache_v = jnp.zeros((b, total, heads, hd))
        out = jnp.zeros((b, total), jnp.int32).at[:, :prompt].set(tokens)

        def step(i, carry):
            out, ck, cv, logit_sum = carry
            x = p["embed"][lax.dynamic_slice_in_dim(out, i, 1, axis=1)]  # [b, 1, d]
            h = _rms_norm(x, bp["n1"])
            pos = jnp.full((1,), i)
            q = _rope((h @ bp["wq"]).reshape(b, 1, heads, hd), pos)
            kk = _rope((h @ bp["wk"]).reshape(b, 1, heads, hd), pos)
            v = (h @ bp["wv"]).reshape(b, 1, heads, hd)
            ck = lax.dynamic_update_slice_in_dim(ck, kk, i, axis=1)
            cv = lax.dynamic_update_slice_in_dim(cv, v, i, axis=1)
            mask = (jnp.arange(total) <= i)[None, None, None, :]
            x = x + _gqa(q, ck, cv, mask) @ bp["wo"]
            hh = _rms_norm(x, bp["n2"])
            x = x + (jax.nn.silu(hh @ bp["w1"]) * (hh @ bp["w3"])) @ bp["w2"]
            logits = (x @ p["embed"].T)[:, 0]
            nxt = jnp.argmax(logits, axis=-1).astype(jnp.int32)
            # the prompt is teacher-forced; afterwards the greedy token is appended
            keep = i + 1 < prompt
            cur = lax.dynamic_slice_in_dim(out, i + 1, 1, axis=1)[:, 0]
            out = lax.dynamic_update_slice_in_dim(
                out, jnp.where(keep, cur, nxt)[:, None], i + 1, axis=1)
            return out, ck, cv, logit_sum + jnp.max(logits, axis=-1)

        out, ck, cv, ls = lax.fori_loop(0, total - 1, step,
                                        (out, cache_k, cache_v, jnp.zeros((b,))))
        return out, ls, ck

    return flat_program(
        "kv_cache_decode", kv_cache_decode, (params, tokens),
        "greedy decoding for 8 tokens with a KV cache (dynamic_update_slice in a "
        "fori_loop), rotary embeddings, argmax")


def nucleus_sampling(seed=0, b=8, vocab=64, top_p=0.9):
    k = keys(seed, 2)
    logits = normal(k[0], (b, vocab)) * 3.0
    key = np.asarray(jax.random.key_data(k[1]))

    def nucleus_sampling(logits, key):
        probs = jax.nn.softmax(logits / 0.8, axis=-1)
        order = jnp.argsort(-probs, axis=-1)
        sorted_p = jnp.take_along_axis(probs, order, axis=-1)
        cum = jnp.cumsum(sorted_p, axis=-1)
        keep_sorted = cum - sorted_p < top_p
        keep = jnp.zeros_like(keep_sorted).at[jnp.arange(b)[:, None], order].set(keep_sorted)
        masked = jnp.where(keep, logits, -jnp.inf)
        sample = jax.random.categorical(jax.random.wrap_key_data(key), masked, axis=-1)
        return sample, keep.sum(axis=-1), cum[:, -1]

    return flat_program(
        "nucleus_sampling", nucleus_sampling, (logits, key),
        "top-p (nucleus) sampling: softmax with temperature, argsort, cumsum, scatter of "
        "the kept set, categorical draw")


def conv_decoder_grad(seed=0, n=2, c=16):
    k = keys(seed, 6)
    params = {
        "dw": he(k[0], (3, 3, 1, c)),  # depthwise: HWIO with I = 1, feature groups c
        "pw": he(k[1], (1, 1, c, c)),
        "up": he(k[2], (4, 4, c, 8)),
        "gn_s": jnp.ones((c,)),
        "gn_b": jnp.zeros((c,)),
    }
    z = normal(k[3], (n, 8, 8, c))
    target = normal(k[4], (n, 16, 16, 8))
    dn = ("NHWC", "HWIO", "NHWC")

    def loss(p, z, target):
        h = lax.conv_general_dilated(z, p["dw"], (1, 1), "SAME", dimension_numbers=dn,
                                     feature_group_count=c)
        h = lax.conv_general_dilated(h, p["pw"], (1, 1), "SAME", dimension_numbers=dn)
        h = jax.nn.silu(group_norm(h, 4, p["gn_s"], p["gn_b"]))
        y = lax.conv_transpose(h, p["up"], (2, 2), "SAME", dimension_numbers=dn)
        return jnp.mean(jnp.square(y - target))

    def conv_decoder_grad(p, z, target):
        return jax.value_and_grad(loss)(p, z, target)

    return flat_program(
        "conv_decoder_grad", conv_decoder_grad, (params, z, target),
        "decoder: depthwise 3x3 (feature groups) + pointwise conv, group norm, SiLU, "
        "transposed conv x2 upsampling, MSE and its gradient")


def ctc_forward(seed=0, b=4, t=20, labels=5, classes=8):
    k = keys(seed, 2)
    logits = normal(k[0], (t, b, classes))
    target = np.asarray(jax.random.randint(k[1], (b, labels), 1, classes))

    def ctc_forward(logits, target):
        logp = jax.nn.log_softmax(logits, axis=-1)  # blank = 0
        ext = jnp.zeros((b, 2 * labels + 1), jnp.int32).at[:, 1::2].set(target)
        s = 2 * labels + 1
        same = jnp.concatenate([jnp.ones((b, 2), bool), ext[:, 2:] == ext[:, :-2]], axis=1)
        neg = -1e30

        def step(alpha, lp):
            emit = jnp.take_along_axis(lp, ext, axis=1)
            a1 = jnp.concatenate([jnp.full((b, 1), neg), alpha[:, :-1]], axis=1)
            a2 = jnp.concatenate([jnp.full((b, 2), neg), alpha[:, :-2]], axis=1)
            a2 = jnp.where(same, neg, a2)
            new = jnp.logaddexp(jnp.logaddexp(alpha, a1), a2) + emit
            return new, new

        alpha0 = jnp.full((b, s), neg).at[:, 0].set(logp[0, :, 0])
        alpha0 = alpha0.at[:, 1].set(jnp.take_along_axis(logp[0], ext[:, 1:2], axis=1)[:, 0])
        alpha, _ = lax.scan(step, alpha0, logp[1:])
        return -jnp.logaddexp(alpha[:, -1], alpha[:, -2])

    return flat_program(
        "ctc_forward", ctc_forward, (logits, target),
        "CTC loss by the forward (alpha) recursion in log space over 20 frames (lax.scan, "
        "logaddexp)")


def sinkhorn(seed=0, n=32, m=24, iters=50, eps=0.05):
    k = keys(seed, 2)
    x = jax.random.uniform(k[0], (n, 2))
    y = jax.random.uniform(k[1], (m, 2))

    def sinkhorn(x, y):
        cost = jnp.sum(jnp.square(x[:, None] - y[None]), axis=-1)
        loga = jnp.full((n,), -np.log(n))
        logb = jnp.full((m,), -np.log(m))

        def body(_, fg):
            f, g = fg
            f = eps * (loga - jax.nn.logsumexp((g[None, :] - cost) / eps, axis=1))
            g = eps * (logb - jax.nn.logsumexp((f[:, None] - cost) / eps, axis=0))
            return f, g

        f, g = lax.fori_loop(0, iters, body, (jnp.zeros((n,)), jnp.zeros((m,))))
        plan = jnp.exp((f[:, None] + g[None, :] - cost) / eps)
        return jnp.sum(plan * cost), plan.sum(axis=1)

    return flat_program(
        "sinkhorn", sinkhorn, (x, y),
        "entropic optimal transport: 50 log-domain Sinkhorn iterations (fori_loop, "
        "logsumexp), transport cost and marginals")


def conjugate_gradient(seed=0, n=48, tol=1e-5, max_iters=200):
    k = keys(seed, 2)
    a = normal(k[0], (n, n))
    spd = a @ a.T / n + 0.5 * jnp.eye(n)
    rhs = normal(k[1], (n,))

    def conjugate_gradient(a, rhs):
        def cond(s):
            _, r, _, rr, i = s
            return (jnp.sqrt(rr) > tol * jnp.linalg.norm(rhs)) & (i < max_iters)

        def body(s):
            x, r, p, rr, i = s
            ap = a @ p
            alpha = rr / (p @ ap)
            x = x + alpha * p
            r = r - alpha * ap
            rr_new = r @ r
            return x, r, r + (rr_new / rr) * p, rr_new, i + 1

        x0 = jnp.zeros_like(rhs)
        x, r, _, rr, i = lax.while_loop(cond, body, (x0, rhs, rhs, rhs @ rhs, 0))
        return x, i, jnp.linalg.norm(a @ x - rhs)

    return flat_program(
        "conjugate_gradient", conjugate_gradient, (np.asarray(spd), rhs),
        "conjugate gradients on a 48x48 SPD system until the residual is 1e-5 relative "
        "(while_loop with a data-dependent trip count)")


def int4_weight_matmul(seed=0, batch=8, d_in=128, d_out=64, group=32):
    k = keys(seed, 3)
    w = normal(k[0], (d_in, d_out))
    scales = jnp.max(jnp.abs(w.reshape(d_in // group, group, d_out)), axis=1) / 7.0
    q = jnp.clip(jnp.round(w.reshape(d_in // group, group, d_out) / scales[:, None]), -8, 7)
    q = np.asarray(q.reshape(d_in, d_out).astype(jnp.int4))
    x = normal(k[1], (batch, d_in)).astype(jnp.bfloat16)

    def int4_weight_matmul(x, q, scales):
        deq = (q.astype(jnp.bfloat16).reshape(d_in // group, group, d_out)
               * scales[:, None].astype(jnp.bfloat16)).reshape(d_in, d_out)
        y = jnp.dot(x, deq, preferred_element_type=jnp.float32)
        xi = jnp.clip(jnp.round(x.astype(jnp.float32) * 8), -127, 127).astype(jnp.int8)
        yi = lax.dot(xi, q.astype(jnp.int8), preferred_element_type=jnp.int32)
        return y, yi

    return flat_program(
        "int4_weight_matmul", int4_weight_matmul, (x, q, np.asarray(scales)),
        "int4 weights with per-group scales dequantized to bf16, bf16 x bf16 -> f32 dot; "
        "int8 x int4 -> s32 dot")


def fp8_delayed_scaling(seed=0, batch=16, d_in=64, d_out=32, history=4):
    k = keys(seed, 4)
    w = glorot(k[0], (d_in, d_out))
    x = normal(k[1], (batch, d_in))
    dy = normal(k[2], (batch, d_out)) * 1e-3
    amax_hist = jnp.abs(normal(k[3], (3, history))) * 4.0
    e4, e5 = jnp.float8_e4m3fn, jnp.float8_e5m2

    def qdq(v, scale, dtype):
        fmax = float(jnp.finfo(dtype).max)
        return (jnp.clip(v * scale, -fmax, fmax).astype(dtype).astype(jnp.float32)) / scale

    def fp8_delayed_scaling(w, x, dy, amax_hist):
        fmax4, fmax5 = float(jnp.finfo(e4).max), float(jnp.finfo(e5).max)
        amax = jnp.max(amax_hist, axis=1)
        sx, sw, sg = fmax4 / amax[0], fmax4 / amax[1], fmax5 / amax[2]
        xq, wq = qdq(x, sx, e4), qdq(w, sw, e4)
        y = xq @ wq
        dyq = qdq(dy, sg, e5)
        dx, dw = dyq @ wq.T, xq.T @ dyq
        new_hist = jnp.concatenate(
            [amax_hist[:, 1:],
             jnp.stack([jnp.max(jnp.abs(x)), jnp.max(jnp.abs(w)), jnp.max(jnp.abs(dy))])[:, None]],
            axis=1)
        return y, dx, dw, new_hist

    return flat_program(
        "fp8_delayed_scaling", fp8_delayed_scaling, (w, x, dy, amax_hist),
        "fp8 linear layer with delayed scaling: e4m3 activations and weights, e5m2 "
        "gradients, scales from an amax history, its update")


def dp_sgd_step(seed=0, batch=8, d=16, hidden=32, clip=1.0, sigma=0.5):
    k = keys(seed, 5)
    params = {"w1": glorot(k[0], (d, hidden)), "b1": jnp.zeros((hidden,)),
              "w2": glorot(k[1], (hidden, 1)), "b2": jnp.zeros((1,))}
    x = normal(k[2], (batch, d))
    y = (jax.random.uniform(k[3], (batch,)) > 0.5).astype(jnp.float32)
    key = np.asarray(jax.random.key_data(k[4]))

    def loss(p, x, y):
        logit = (jnp.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"])[0]
        return jnp.maximum(logit, 0) - logit * y + jnp.log1p(jnp.exp(-jnp.abs(logit)))

    def dp_sgd_step(p, x, y, key):
        grads = jax.vmap(jax.grad(loss), in_axes=(None, 0, 0))(p, x, y)
        norms = jnp.sqrt(sum(jnp.sum(jnp.square(g.reshape(batch, -1)), axis=1)
                             for g in jax.tree_util.tree_leaves(grads)))
        factor = jnp.minimum(1.0, clip / (norms + 1e-6))
        ks = jax.random.split(jax.random.wrap_key_data(key), len(params))
        leaves, tree = jax.tree_util.tree_flatten(grads)
        noisy = [
            (jnp.tensordot(factor, g, axes=1) + sigma * clip * jax.random.normal(kk, g.shape[1:]))
            / batch for g, kk in zip(leaves, ks)]
        new = jax.tree_util.tree_map(lambda w, g: w - 0.1 * g, p,
                                     jax.tree_util.tree_unflatten(tree, noisy))
        return new, norms

    return flat_program(
        "dp_sgd_step", dp_sgd_step, (params, x, y, key),
        "DP-SGD step: per-example gradients by vmap, per-example norm clipping, Gaussian "
        "noise, SGD update")


def bf16_master_weights_step(seed=0, batch=16, d=32, hidden=64, classes=10, step=120):
    k = keys(seed, 4)
    master = {"w1": glorot(k[0], (d, hidden)), "w2": glorot(k[1], (hidden, classes))}
    x = normal(k[2], (batch, d)).astype(jnp.bfloat16)
    labels = np.asarray(jax.random.randint(k[3], (batch,), 0, classes))
    mom = jax.tree_util.tree_map(lambda w: jnp.full_like(w, 1e-3), master)
    count = np.asarray(step, np.int32)

    def loss(p, x, labels):
        h = jax.nn.relu(x @ p["w1"])
        logits = (h @ p["w2"]).astype(jnp.float32)
        logp = jax.nn.log_softmax(logits)
        return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))

    def bf16_master_weights_step(master, mom, x, labels, count):
        p16 = jax.tree_util.tree_map(lambda w: w.astype(jnp.bfloat16), master)
        l, g = jax.value_and_grad(loss)(p16, x, labels)
        g = jax.tree_util.tree_map(lambda a: a.astype(jnp.float32), g)
        gnorm = jnp.sqrt(sum(jnp.sum(jnp.square(a)) for a in jax.tree_util.tree_leaves(g)))
        g = jax.tree_util.tree_map(lambda a: a * jnp.minimum(1.0, 1.0 / gnorm), g)
        t = count.astype(jnp.float32)
        warm, total = 100.0, 1000.0
        lr = jnp.where(t < warm, 3e-3 * t / warm,
                       3e-3 * 0.5 * (1 + jnp.cos(jnp.pi * (t - warm) / (total - warm))))
        mom = jax.tree_util.tree_map(lambda m, a: 0.9 * m + a, mom, g)
        master = jax.tree_util.tree_map(lambda w, m: w * (1 - lr * 1e-2) - lr * m, master, mom)
        return master, mom, l, gnorm, count + 1

    return flat_program(
        "bf16_master_weights_step", bf16_master_weights_step,
        (master, mom, x, labels, count),
        "bf16 forward/backward with f32 master weights, global-norm clipping, warmup + "
        "cosine learning rate from the step count, momentum with weight decay")


def histogram_bincount(seed=0, n=1000, bins=20):
    k = keys(seed, 2)
    x = normal(k[0], (n,))
    ids = np.asarray(jax.random.randint(k[1], (n,), 0, 37))

    def histogram_bincount(x, ids):
        counts, edges = jnp.histogram(x, bins=bins, range=(-3.0, 3.0))
        weighted = jnp.bincount(ids, weights=x, length=37)
        digit = jnp.digitize(x, edges)
        return counts, edges, weighted, jnp.bincount(digit, length=bins + 2)

    return flat_program(
        "histogram_bincount", histogram_bincount, (x, ids),
        "histogram over 20 bins, weighted bincount (scatter-add), digitize")


def escape_time(seed=0, size=24, iters=40):
    del seed
    re = np.linspace(-2.0, 0.6, size, dtype=np.float32)
    im = np.linspace(-1.2, 1.2, size, dtype=np.float32)
    c = (re[None, :] + 1j * im[:, None]).astype(np.complex64)

    def escape_time(c):
        def body(_, s):
            z, n = s
            z = z * z + c
            return z, n + (jnp.abs(z) <= 2.0).astype(jnp.int32)

        z, n = lax.fori_loop(0, iters, body, (jnp.zeros_like(c), jnp.zeros(c.shape, jnp.int32)))
        return n, jnp.where(jnp.abs(z) <= 2.0, z, 0)

    return flat_program(
        "escape_time", escape_time, (c,),
        "Mandelbrot escape-time counts over a 24x24 c64 grid, 40 iterations (fori_loop of "
        "complex multiply-add and abs)")


def f16_label_smoothing(seed=0, batch=32, classes=100, smoothing=0.1):
    k = keys(seed, 2)
    logits = (normal(k[0], (batch, classes)) * 4).astype(jnp.float16)
    labels = np.asarray(jax.random.randint(k[1], (batch,), 0, classes))

    def f16_label_smoothing(logits, labels):
        lf = logits.astype(jnp.float32)
        logp = jax.nn.log_softmax(lf, axis=-1)
        onehot = jax.nn.one_hot(labels, classes)
        soft = onehot * (1 - smoothing) + smoothing / classes
        ce = -jnp.sum(soft * logp, axis=-1)
        z = jax.nn.logsumexp(lf, axis=-1)
        acc = jnp.mean(jnp.argmax(logits, axis=-1) == labels)
        return jnp.mean(ce + 1e-4 * z * z), acc, jax.nn.softmax(logits, axis=-1)

    return flat_program(
        "f16_label_smoothing", f16_label_smoothing, (logits, labels),
        "f16 logits: label-smoothed cross-entropy in f32 with z-loss, accuracy by argmax, "
        "f16 softmax")


def embedding_bag(seed=0, vocab=200, d=16, bags=12, per_bag=10):
    k = keys(seed, 3)
    table = normal(k[0], (vocab, d))
    ids = np.asarray(jax.random.randint(k[1], (bags, per_bag), 0, vocab))
    lengths = np.asarray(jax.random.randint(k[2], (bags,), 1, per_bag + 1))

    def loss(table, ids, lengths):
        mask = jnp.arange(per_bag)[None, :] < lengths[:, None]
        emb = jnp.where(mask[..., None], table[ids], 0.0)
        mean = emb.sum(axis=1) / lengths[:, None].astype(jnp.float32)
        return jnp.sum(jnp.tanh(mean) ** 2), mean

    def embedding_bag(table, ids, lengths):
        (l, mean), g = jax.value_and_grad(loss, has_aux=True)(table, ids, lengths)
        return l, mean, g

    return flat_program(
        "embedding_bag", embedding_bag, (table, ids, lengths),
        "embedding bag: gather, length mask, mean; gradient scatter-adds into the table")


MODELS = {
    f.__name__: f
    for f in (
        llama_block_grad,
        bf16_llama_block,
        kv_cache_decode,
        nucleus_sampling,
        conv_decoder_grad,
        ctc_forward,
        sinkhorn,
        conjugate_gradient,
        int4_weight_matmul,
        fp8_delayed_scaling,
        dp_sgd_step,
        bf16_master_weights_step,
        histogram_bincount,
        escape_time,
        f16_label_smoothing,
        embedding_bag,
    )
}
