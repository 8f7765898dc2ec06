"""A registry of realistic JAX programs, the kind users check every day, for measuring
hloref's verdicts (``hloref diff``, ``hloref check``, ``hloref check-dump``).

Each program is a small-but-real function with arguments from ordinary
initialisations (glorot/he normal through ``jax.random`` with fixed seeds, tokens from
``randint``, data ~ N(0, 1)); training steps come twice: ``NAME`` (freshly
initialised parameters) and ``NAME_trained`` (parameters and optimizer state from one
previous step of training, run with jax, on a new batch).

``PROGRAMS[name]()`` builds a :class:`Program`:

* ``fn`` takes flat array arguments. Programs written over pytrees are flattened with
  ``jax.tree_util`` (dict keys sorted, tuples in order); ``Program.arg_names`` holds
  each flat argument's key path, in order, and equals the ENTRY parameter order of
  ``jax.jit(fn, keep_unused=True).lower(*args)``.
* ``args`` is a tuple of numpy / ml_dtypes arrays.

``materialize(program, out_dir)`` writes ``out_dir/<name>/``: ``module.hlo``
(unoptimized HLO), ``optimized.hlo`` (as XLA:CPU optimized it), ``inputs.npz`` (the
``hloref --inputs`` convention) and ``dump/`` (XLA's per-pass dump of this module only,
made in a subprocess: ``python tests/realistic_programs.py --dump NAME DIR``).

Importing this module imports jax (on the CPU platform).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import time
from functools import partial
from typing import Callable

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

__all__ = ["Program", "PROGRAMS", "FAST", "materialize", "Materialized", "count_instructions",
           "lower", "entry_parameter_shapes"]


from realistic_common import Program  # noqa: E402
from realistic_common import adam_init as _adam_init  # noqa: E402
from realistic_common import adam_update as _adam_update  # noqa: E402
from realistic_common import cross_entropy as _cross_entropy  # noqa: E402
from realistic_common import flat_program as _flat_program  # noqa: E402
from realistic_common import glorot as _glorot  # noqa: E402
from realistic_common import he as _he  # noqa: E402
from realistic_common import keys as _keys  # noqa: E402
from realistic_common import layer_norm as _layer_norm  # noqa: E402
from realistic_common import normal as _normal  # noqa: E402
from realistic_common import to_numpy as _np  # noqa: E402
from realistic_programs_heldout import HELDOUT  # noqa: E402
from realistic_programs_heldout2 import HELDOUT2  # noqa: E402
from realistic_programs_models import MODELS  # noqa: E402
from realistic_programs_more import MORE  # noqa: E402


def lower(program: Program):
    return program.lower()


def _trained(step, params, opt, batch, next_batch):
    """Arguments for the step after one step of training with jax."""
    out = jax.jit(step)(params, opt, *batch)
    return (_np(out[0]), _np(out[1])) + tuple(next_batch)


# ------------------------------------------------------------------ transformer


def _transformer_init(seed, *, vocab, d_model, n_heads, n_layers, seq, d_ff):
    ks = iter(_keys(seed, 4 + 4 * n_layers))
    params = {
        "embed": _normal(next(ks), (vocab, d_model)) * 0.02,
        "pos": _normal(next(ks), (seq, d_model)) * 0.02,
        "ln_f": {"scale": jnp.ones((d_model,)), "bias": jnp.zeros((d_model,))},
        "unembed": _glorot(next(ks), (d_model, vocab)),
        "layers": [],
    }
    for _ in range(n_layers):
        params["layers"].append({
            "ln1": {"scale": jnp.ones((d_model,)), "bias": jnp.zeros((d_model,))},
            "wqkv": _glorot(next(ks), (d_model, 3 * d_model)),
            "wo": _glorot(next(ks), (d_model, d_model)),
            "ln2": {"scale": jnp.ones((d_model,)), "bias": jnp.zeros((d_model,))},
            "w1": _glorot(next(ks), (d_model, d_ff)), "b1": jnp.zeros((d_ff,)),
            "w2": _glorot(next(ks), (d_ff, d_model)), "b2": jnp.zeros((d_model,)),
        })
    return params


def _mha(x, wqkv, wo, n_heads, causal=True):
    b, s, d = x.shape
    hd = d // n_heads
    qkv = x @ wqkv
    q, k, v = jnp.split(qkv, 3, axis=-1)
    q, k, v = (t.reshape(b, s, n_heads, hd) for t in (q, k, v))
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(hd).astype(np.float32)
    if causal:
        mask = jnp.tril(jnp.ones((s, s), bool))
        logits = jnp.where(mask, logits, jnp.finfo(logits.dtype).min)
    weights = jax.nn.softmax(logits, axis=-1)
    out = jnp.einsum("bhqk,bkhd->bqhd", weights, v).reshape(b, s, d)
    return out @ wo


def _transformer_loss(params, tokens, targets, n_heads):
    x = params["embed"][tokens] + params["pos"][None]
    for layer in params["layers"]:
        h = _layer_norm(x, layer["ln1"]["scale"], layer["ln1"]["bias"])
        x = x + _mha(h, layer["wqkv"], layer["wo"], n_heads)
        h = _layer_norm(x, layer["ln2"]["scale"], layer["ln2"]["bias"])
        x = x + jax.nn.gelu(h @ layer["w1"] + layer["b1"]) @ layer["w2"] + layer["b2"]
    x = _layer_norm(x, params["ln_f"]["scale"], params["ln_f"]["bias"])
    logits = x @ params["unembed"]
    return _cross_entropy(logits, targets, params["unembed"].shape[1])


def _transformer_step(n_heads, scan_layers=False):
    loss_fn = _stacked_transformer_loss if scan_layers else _transformer_loss

    def step(params, opt, tokens, targets):
        loss, grads = jax.value_and_grad(loss_fn)(params, tokens, targets, n_heads)
        params, opt = _adam_update(params, grads, opt)
        return params, opt, loss
    return step


def _stacked_transformer_loss(params, tokens, targets, n_heads):
    """Layers stacked on a leading axis and applied with ``lax.scan`` (scan over layers,
    as large-model code bases write it)."""
    x = params["embed"][tokens] + params["pos"][None]

    def layer_fn(x, layer):
        h = _layer_norm(x, layer["ln1"]["scale"], layer["ln1"]["bias"])
        x = x + _mha(h, layer["wqkv"], layer["wo"], n_heads)
        h = _layer_norm(x, layer["ln2"]["scale"], layer["ln2"]["bias"])
        x = x + jax.nn.gelu(h @ layer["w1"] + layer["b1"]) @ layer["w2"] + layer["b2"]
        return x, None

    x, _ = lax.scan(layer_fn, x, params["layers"])
    x = _layer_norm(x, params["ln_f"]["scale"], params["ln_f"]["bias"])
    logits = x @ params["unembed"]
    return _cross_entropy(logits, targets, params["unembed"].shape[1])


def _transformer(name, *, trained, vocab=64, d_model=32, n_heads=4, n_layers=2, seq=16,
                 batch=2, d_ff=128, seed=0, scan_layers=False):
    params = _transformer_init(seed, vocab=vocab, d_model=d_model, n_heads=n_heads,
                               n_layers=n_layers, seq=seq, d_ff=d_ff)
    opt = _adam_init(params)

    def data(s):
        k = jax.random.PRNGKey(1000 + s)
        toks = jax.random.randint(k, (batch, seq + 1), 0, vocab, jnp.int32)
        return toks[:, :-1], toks[:, 1:]

    step = _transformer_step(n_heads, scan_layers)
    if scan_layers:
        params["layers"] = jax.tree_util.tree_map(lambda *ls: jnp.stack(ls), *params["layers"])
        opt = _adam_init(params)
    if trained:
        args = _trained(step, params, opt, data(seed), data(seed + 1))
    else:
        args = (params, opt) + data(seed)
    desc = (f"transformer training step: {n_layers} layers, d_model {d_model}, {n_heads} heads, "
            f"seq {seq}, batch {batch}, causal attention, layer norm, GELU, softmax "
            f"cross-entropy, Adam" + ("; layers stacked and applied with lax.scan" if scan_layers
                                     else "") +
            ("; params after one step of training" if trained else ""))
    return _flat_program(name, step, args, desc)


# ------------------------------------------------------------------ attention


def _attention_args(seed=0, b=2, s=16, d=32):
    k = _keys(seed, 3)
    x = _normal(k[0], (b, s, d))
    return x, _glorot(k[1], (d, 3 * d)), _glorot(k[2], (d, d))


def attention_fwd():
    def attention_fwd(x, wqkv, wo):
        return _mha(x, wqkv, wo, 4)
    return _flat_program("attention_fwd", attention_fwd, _attention_args(),
                         "multi-head causal self-attention forward (batch 2, seq 16, d 32, 4 heads)")


def attention_grad():
    def attention_grad(x, wqkv, wo, target):
        def loss(x, wqkv, wo):
            return jnp.mean(jnp.square(_mha(x, wqkv, wo, 4) - target))
        return jax.grad(loss, argnums=(0, 1, 2))(x, wqkv, wo)
    x, wqkv, wo = _attention_args()
    target = _normal(jax.random.PRNGKey(7), x.shape)
    return _flat_program("attention_grad", attention_grad, (x, wqkv, wo, target),
                         "jax.grad of an MSE loss through causal multi-head attention "
                         "(w.r.t. input and both weights)")


# ------------------------------------------------------------------ CNN with batch norm


def _batch_norm_train(x, scale, bias, eps=1e-5):
    axes = tuple(range(x.ndim - 1))
    mean = jnp.mean(x, axis=axes)
    var = jnp.var(x, axis=axes)
    return (x - mean) * lax.rsqrt(var + eps) * scale + bias, mean, var


def _conv(x, w):
    return lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                    dimension_numbers=("NHWC", "HWIO", "NHWC"))


def _cnn_loss(params, stats, images, labels):
    new_stats = {}
    x = images
    for i, pool in ((1, "max"), (2, "avg")):
        x = _conv(x, params[f"conv{i}"]["w"])
        x, mean, var = _batch_norm_train(x, params[f"bn{i}"]["scale"], params[f"bn{i}"]["bias"])
        new_stats[f"bn{i}"] = {
            "mean": 0.9 * stats[f"bn{i}"]["mean"] + 0.1 * mean,
            "var": 0.9 * stats[f"bn{i}"]["var"] + 0.1 * var,
        }
        x = jax.nn.relu(x)
        if pool == "max":
            x = lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        else:
            x = lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4.0
    x = x.reshape(x.shape[0], -1)
    logits = x @ params["dense"]["w"] + params["dense"]["b"]
    return _cross_entropy(logits, labels, 10), new_stats


def _cnn_step(params, momentum, stats, images, labels, lr=0.05, beta=0.9):
    (loss, new_stats), grads = jax.value_and_grad(_cnn_loss, has_aux=True)(
        params, stats, images, labels)
    momentum = jax.tree_util.tree_map(lambda m, g: beta * m + g, momentum, grads)
    params = jax.tree_util.tree_map(lambda p, m: p - lr * m, params, momentum)
    return params, momentum, new_stats, loss


def _cnn(name, trained, seed=0, batch=8):
    k = _keys(seed, 4)
    params = {
        "conv1": {"w": _he(k[0], (3, 3, 3, 8))},
        "bn1": {"scale": jnp.ones((8,)), "bias": jnp.zeros((8,))},
        "conv2": {"w": _he(k[1], (3, 3, 8, 16))},
        "bn2": {"scale": jnp.ones((16,)), "bias": jnp.zeros((16,))},
        "dense": {"w": _glorot(k[2], (2 * 2 * 16, 10)), "b": jnp.zeros((10,))},
    }
    momentum = jax.tree_util.tree_map(jnp.zeros_like, params)
    stats = {f"bn{i}": {"mean": jnp.zeros((c,)), "var": jnp.ones((c,))} for i, c in ((1, 8), (2, 16))}

    def data(s):
        kk = jax.random.split(jax.random.PRNGKey(2000 + s))
        return (_normal(kk[0], (batch, 8, 8, 3)),
                jax.random.randint(kk[1], (batch,), 0, 10, jnp.int32))

    def step3(params, momentum, stats, images, labels):
        return _cnn_step(params, momentum, stats, images, labels)

    if trained:
        out = jax.jit(step3)(params, momentum, stats, *data(seed))
        args = (_np(out[0]), _np(out[1]), _np(out[2])) + data(seed + 1)
    else:
        args = (params, momentum, stats) + data(seed)
    return _flat_program(name, step3, args,
                         "CNN training step: conv 3x3 + batch norm (batch statistics, running "
                         "averages) + relu + max/avg pooling, twice, dense, softmax CE, SGD with "
                         "momentum" + ("; params after one step" if trained else ""))


# ------------------------------------------------------------------ LSTM through scan


def lstm_grad(seed=0, seq=12, batch=4, n_in=8, hidden=16):
    k = _keys(seed, 6)
    params = {"wx": _glorot(k[0], (n_in, 4 * hidden)), "wh": _glorot(k[1], (hidden, 4 * hidden)),
              "b": jnp.zeros((4 * hidden,)), "wout": _glorot(k[2], (hidden, 1))}
    xs = _normal(k[3], (seq, batch, n_in))
    ys = _normal(k[4], (seq, batch, 1))

    def loss_fn(params, xs, ys):
        def cell(carry, x):
            h, c = carry
            z = x @ params["wx"] + h @ params["wh"] + params["b"]
            i, f, g, o = jnp.split(z, 4, axis=-1)
            c = jax.nn.sigmoid(f + 1.0) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
            h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), h @ params["wout"]
        init = (jnp.zeros((xs.shape[1], hidden)), jnp.zeros((xs.shape[1], hidden)))
        _, preds = lax.scan(cell, init, xs)
        return jnp.mean(jnp.square(preds - ys))

    def lstm_grad(params, xs, ys):
        return jax.value_and_grad(loss_fn)(params, xs, ys)

    return _flat_program("lstm_grad", lstm_grad, (params, xs, ys),
                         f"LSTM (seq {seq}, batch {batch}, hidden {hidden}) forward + gradient "
                         "through lax.scan (value_and_grad of an MSE loss)")


# ------------------------------------------------------------------ mixture of experts


def moe_routing(seed=0, tokens=32, d=16, n_experts=4, k=2, capacity=16, d_ff=32):
    ks = _keys(seed, 4)
    x = _normal(ks[0], (tokens, d))
    w_gate = _glorot(ks[1], (d, n_experts))
    w_in = _glorot(ks[2], (n_experts, d, d_ff))
    w_out = _glorot(ks[3], (n_experts, d_ff, d))

    def moe_routing(x, w_gate, w_in, w_out):
        probs = jax.nn.softmax(x @ w_gate, axis=-1)                       # [t, e]
        gate_vals, expert_idx = lax.top_k(probs, k)                        # [t, k]
        gate_vals = gate_vals / jnp.sum(gate_vals, axis=-1, keepdims=True)
        expert_mask = jax.nn.one_hot(expert_idx, n_experts, dtype=jnp.int32)  # [t, k, e]
        # position of each (token, choice) in its expert's buffer: choices in order k, t
        flat = expert_mask.transpose(1, 0, 2).reshape(k * tokens, n_experts)
        pos = (jnp.cumsum(flat, axis=0) - 1) * flat
        pos = pos.reshape(k, tokens, n_experts).transpose(1, 0, 2)         # [t, k, e]
        keep = expert_mask * (pos < capacity)
        pos_1h = jax.nn.one_hot(jnp.sum(pos * keep, axis=-1), capacity)   # [t, k, c]
        dispatch = jnp.einsum("tke,tkc->tec", keep.astype(jnp.float32), pos_1h)
        combine = jnp.einsum("tk,tke,tkc->tec", gate_vals, keep.astype(jnp.float32), pos_1h)
        expert_in = jnp.einsum("tec,td->ecd", dispatch, x)
        h = jax.nn.gelu(jnp.einsum("ecd,edf->ecf", expert_in, w_in))
        expert_out = jnp.einsum("ecf,efd->ecd", h, w_out)
        aux_loss = n_experts * jnp.sum(jnp.mean(probs, axis=0) *
                                       jnp.mean(jnp.sum(keep, axis=1).astype(jnp.float32), axis=0))
        return jnp.einsum("tec,ecd->td", combine, expert_out), aux_loss

    return _flat_program("moe_routing", moe_routing, (x, w_gate, w_in, w_out),
                         f"mixture of experts: softmax gating, lax.top_k (k={k}) over {n_experts} "
                         f"experts, capacity {capacity}, one-hot dispatch/combine einsums, GELU "
                         "expert FFN, load-balancing loss")


# ------------------------------------------------------------------ bf16 mixed precision


def _bf16_mlp(name, trained, seed=0, batch=16, sizes=(32, 64, 64, 10), loss_scale=1024.0):
    ks = _keys(seed, len(sizes))
    params = [{"w": _glorot(ks[i], (sizes[i], sizes[i + 1])), "b": jnp.zeros((sizes[i + 1],))}
              for i in range(len(sizes) - 1)]
    opt = _adam_init(params)

    def loss_fn(params, x, labels):
        h = x.astype(jnp.bfloat16)
        for i, layer in enumerate(params):
            h = h @ layer["w"].astype(jnp.bfloat16) + layer["b"].astype(jnp.bfloat16)
            if i < len(params) - 1:
                h = jax.nn.relu(h)
        loss = _cross_entropy(h.astype(jnp.float32), labels, sizes[-1])
        return loss * loss_scale, loss

    def step(params, opt, x, labels):
        (_, loss), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, x, labels)
        grads = jax.tree_util.tree_map(lambda g: g.astype(jnp.float32) / loss_scale, grads)
        finite = jnp.all(jnp.array([jnp.all(jnp.isfinite(g))
                                    for g in jax.tree_util.tree_leaves(grads)]))
        new_params, new_opt = _adam_update(params, grads, opt)
        params = jax.tree_util.tree_map(lambda n, p: jnp.where(finite, n, p), new_params, params)
        opt = jax.tree_util.tree_map(lambda n, o: jnp.where(finite, n, o), new_opt, opt)
        return params, opt, loss

    def data(s):
        kk = jax.random.split(jax.random.PRNGKey(3000 + s))
        return (_normal(kk[0], (batch, sizes[0])),
                jax.random.randint(kk[1], (batch,), 0, sizes[-1], jnp.int32))

    args = _trained(step, params, opt, data(seed), data(seed + 1)) if trained else \
        (params, opt) + data(seed)
    return _flat_program(name, step, args,
                         "bf16 mixed-precision MLP training step (params f32, compute bf16, "
                         f"static loss scale {loss_scale:g}, skip on non-finite grads, Adam)"
                         + ("; params after one step" if trained else ""))


# ------------------------------------------------------------------ fp8


E4M3_MAX = float(ml_dtypes.finfo(ml_dtypes.float8_e4m3fn).max)


def fp8_matmul(seed=0, m=16, k=32, n=24):
    """Quantize both operands to e4m3fn with per-tensor amax scales, dot with f32
    accumulation, dequantize (what an fp8 linear layer does)."""
    ks = _keys(seed, 2)
    x = _normal(ks[0], (m, k))
    w = _glorot(ks[1], (k, n))

    def fp8_matmul(x, w):
        def quantize(t):
            scale = jnp.max(jnp.abs(t)) / E4M3_MAX
            q = jnp.clip(t / scale, -E4M3_MAX, E4M3_MAX).astype(jnp.float8_e4m3fn)
            return q, scale
        xq, sx = quantize(x)
        wq, sw = quantize(w)
        return jnp.dot(xq, wq, preferred_element_type=jnp.float32) * (sx * sw)

    return _flat_program("fp8_matmul", fp8_matmul, (x, w),
                         "fp8 linear layer: per-tensor amax scaling to float8_e4m3fn, dot with "
                         "preferred_element_type f32, dequantize")


def fp8_matmul_prequantized(seed=1, m=16, k=32, n=24):
    """Operands already in e4m3fn (as stored weights/activations are), with scales."""
    ks = _keys(seed, 2)
    x = _normal(ks[0], (m, k))
    w = _glorot(ks[1], (k, n))
    sx = np.float32(np.max(np.abs(np.asarray(x))) / E4M3_MAX)
    sw = np.float32(np.max(np.abs(np.asarray(w))) / E4M3_MAX)
    xq = (np.asarray(x) / sx).astype(ml_dtypes.float8_e4m3fn)
    wq = (np.asarray(w) / sw).astype(ml_dtypes.float8_e4m3fn)

    def fp8_matmul_prequantized(xq, wq, sx, sw, bias):
        y = jnp.dot(xq, wq, preferred_element_type=jnp.float32) * (sx * sw) + bias
        return jax.nn.relu(y).astype(jnp.bfloat16)

    bias = np.asarray(_normal(jax.random.PRNGKey(5), (n,)) * 0.1)
    return _flat_program("fp8_matmul_prequantized", fp8_matmul_prequantized,
                         (xq, wq, sx, sw, bias),
                         "fp8 matmul on float8_e4m3fn operands with per-tensor scales, "
                         "preferred_element_type f32, bias, relu, bf16 output")


# ------------------------------------------------------------------ ODE (RK4)


def _rk4(f, y, dt):
    k1 = f(y)
    k2 = f(y + 0.5 * dt * k1)
    k3 = f(y + 0.5 * dt * k2)
    k4 = f(y + dt * k3)
    return y + dt / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4)


def rk4_lorenz(seed=0, batch=4, steps=100, dt=0.01):
    y0 = np.asarray(_normal(jax.random.PRNGKey(seed), (batch, 3))) + np.float32([0, 0, 20])

    def lorenz(y, sigma=10.0, rho=28.0, beta=8.0 / 3.0):
        x, yy, z = y[:, 0], y[:, 1], y[:, 2]
        return jnp.stack([sigma * (yy - x), x * (rho - z) - yy, x * yy - beta * z], axis=1)

    def rk4_lorenz(y0):
        return lax.fori_loop(0, steps, lambda i, y: _rk4(lorenz, y, dt), y0)

    return _flat_program("rk4_lorenz", rk4_lorenz, (y0,),
                         f"Lorenz system integrated with RK4 in lax.fori_loop ({steps} steps, "
                         f"dt {dt}, {batch} initial conditions)")


def rk4_pendulum(seed=0, batch=8, steps=100):
    k = _keys(seed, 2)
    state = np.asarray(_normal(k[0], (batch, 2)))
    damping = np.asarray(jnp.abs(_normal(k[1], (batch,))) * 0.2)

    def rk4_pendulum(state, damping, dt):
        def f(s):
            theta, omega = s[:, 0], s[:, 1]
            return jnp.stack([omega, -damping * omega - 9.81 * jnp.sin(theta)], axis=1)

        def body(i, carry):
            s, energy = carry
            s = _rk4(f, s, dt)
            e = 0.5 * s[:, 1] ** 2 + 9.81 * (1 - jnp.cos(s[:, 0]))
            return s, energy.at[i].set(jnp.mean(e))
        return lax.fori_loop(0, steps, body, (state, jnp.zeros((steps,))))

    return _flat_program("rk4_pendulum", rk4_pendulum, (state, damping, np.float32(0.05)),
                         f"damped pendulum with RK4 in lax.fori_loop ({steps} steps), mean energy "
                         "recorded each step with .at[i].set")


# ------------------------------------------------------------------ beam search


def beam_search(seed=0, vocab=16, beam=4, max_len=8, d=16, eos=0):
    ks = _keys(seed, 3)
    embed = _normal(ks[0], (vocab, d))
    w = _glorot(ks[1], (d, d))
    unembed = _glorot(ks[2], (d, vocab)) * 3.0

    def beam_search(embed, w, unembed, bos):
        def logprobs(tokens):
            h = jnp.tanh(embed[tokens] @ w)
            return jax.nn.log_softmax(h @ unembed, axis=-1)

        seqs = jnp.zeros((beam, max_len), jnp.int32).at[:, 0].set(bos)
        scores = jnp.array([0.0] + [-1e9] * (beam - 1), jnp.float32)
        done = jnp.zeros((beam,), bool)

        def cond(state):
            t, _, _, done = state
            return (t < max_len) & ~jnp.all(done)

        def body(state):
            t, seqs, scores, done = state
            lp = logprobs(seqs[:, t - 1])                                       # [beam, vocab]
            # finished beams only extend with eos at no cost
            lp = jnp.where(done[:, None], jnp.where(jnp.arange(vocab) == eos, 0.0, -1e9), lp)
            cand = (scores[:, None] + lp).reshape(-1)
            top, idx = lax.top_k(cand, beam)
            src, tok = idx // vocab, idx % vocab
            seqs = seqs[src]
            seqs = lax.dynamic_update_slice(seqs, tok[:, None], (0, t))
            return t + 1, seqs, top, done[src] | (tok == eos)

        _, seqs, scores, _ = lax.while_loop(cond, body, (jnp.int32(1), seqs, scores, done))
        return seqs, scores

    return _flat_program("beam_search", beam_search, (embed, w, unembed, np.int32(3)),
                         f"beam search (beam {beam}, vocab {vocab}, max length {max_len}) with "
                         "lax.while_loop and lax.top_k over a tiny tanh language model")


# ------------------------------------------------------------------ standalone norms


def layer_norm(seed=0):
    k = _keys(seed, 3)
    x = _normal(k[0], (32, 64)) * 3.0 + 1.0
    scale = 1.0 + 0.1 * _normal(k[1], (64,))
    bias = 0.1 * _normal(k[2], (64,))

    def layer_norm(x, scale, bias):
        return _layer_norm(x, scale, bias)
    return _flat_program("layer_norm", layer_norm, (x, scale, bias),
                         "layer norm over the last axis (32 x 64), eps 1e-5")


def log_softmax(seed=0):
    x = _normal(jax.random.PRNGKey(seed), (32, 100)) * 4.0

    def log_softmax(x):
        return jax.nn.log_softmax(x, axis=-1)
    return _flat_program("log_softmax", log_softmax, (x,), "jax.nn.log_softmax over 100 classes")


def batch_norm_inference(seed=0):
    k = _keys(seed, 5)
    x = _normal(k[0], (8, 8, 8, 16))
    mean = 0.1 * _normal(k[1], (16,))
    var = jnp.exp(0.2 * _normal(k[2], (16,)))
    scale = 1.0 + 0.1 * _normal(k[3], (16,))
    bias = 0.1 * _normal(k[4], (16,))

    def batch_norm_inference(x, mean, var, scale, bias):
        return (x - mean) * lax.rsqrt(var + 1e-5) * scale + bias
    return _flat_program("batch_norm_inference", batch_norm_inference, (x, mean, var, scale, bias),
                         "batch norm, inference form (running statistics), NHWC 8x8x8x16")


def batch_norm_training(seed=0):
    k = _keys(seed, 5)
    x = _normal(k[0], (8, 8, 8, 16)) * 2.0 + 0.5
    scale = 1.0 + 0.1 * _normal(k[3], (16,))
    bias = 0.1 * _normal(k[4], (16,))
    running = (jnp.zeros((16,)), jnp.ones((16,)))

    def batch_norm_training(x, scale, bias, running_mean, running_var):
        y, mean, var = _batch_norm_train(x, scale, bias)
        n = x.size // x.shape[-1]
        return (y, 0.9 * running_mean + 0.1 * mean,
                0.9 * running_var + 0.1 * var * (n / (n - 1)))
    return _flat_program("batch_norm_training", batch_norm_training, (x, scale, bias) + running,
                         "batch norm, training form (batch statistics, running-average update), "
                         "NHWC 8x8x8x16")


# ------------------------------------------------------------------ registry

PROGRAMS: dict[str, Callable[[], Program]] = {
    "transformer_train": partial(_transformer, "transformer_train", trained=False),
    "transformer_train_trained": partial(_transformer, "transformer_train_trained", trained=True),
    "attention_fwd": attention_fwd,
    "attention_grad": attention_grad,
    "cnn_train": partial(_cnn, "cnn_train", False),
    "cnn_train_trained": partial(_cnn, "cnn_train_trained", True),
    "lstm_grad": lstm_grad,
    "moe_routing": moe_routing,
    "bf16_mlp_train": partial(_bf16_mlp, "bf16_mlp_train", False),
    "bf16_mlp_train_trained": partial(_bf16_mlp, "bf16_mlp_train_trained", True),
    "fp8_matmul": fp8_matmul,
    "fp8_matmul_prequantized": fp8_matmul_prequantized,
    "rk4_lorenz": rk4_lorenz,
    "rk4_pendulum": rk4_pendulum,
    "beam_search": beam_search,
    "layer_norm": layer_norm,
    "log_softmax": log_softmax,
    "batch_norm_inference": batch_norm_inference,
    "batch_norm_training": batch_norm_training,
    **MORE,
    **MODELS,
    **HELDOUT,
    **HELDOUT2,
    # the cost benchmark: 8 layers, 8 heads, d_model 64, seq 32, batch 4, layers applied with
    # lax.scan; unoptimized HLO of about 1,600 instructions
    "transformer_train_large": partial(_transformer, "transformer_train_large", trained=False,
                                       n_layers=8, n_heads=8, d_model=64, d_ff=256, seq=32,
                                       batch=4, scan_layers=True),
}

#: A fast subset (small modules, quick to evaluate and compile) for tests.
FAST = ("layer_norm", "log_softmax", "fp8_matmul", "attention_fwd")


# ------------------------------------------------------------------ materialize

_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s")


def count_instructions(hlo_text: str) -> int:
    """Instruction lines (``name = ...``) in every computation of an HLO module."""
    return sum(1 for line in hlo_text.splitlines() if _INSTR.match(line))


def entry_parameter_shapes(module) -> list:
    return [(str(p.shape)) for p in module.entry.parameters]


@dataclasses.dataclass
class Materialized:
    name: str
    directory: str
    module: str
    optimized: str
    inputs: str
    dump: str | None
    instructions: int = 0
    optimized_instructions: int = 0
    seconds: dict = dataclasses.field(default_factory=dict)
    #: problems found while checking: parse/evaluate errors of hloref on the files
    errors: list = dataclasses.field(default_factory=list)


def _write_npz(path, arrays):
    from hloref.cli_common import write_npz
    write_npz(path, [np.asarray(a) for a in arrays])


def _check_parameters(module, args) -> list[str]:
    from hloref.shapes import ArrayShape
    params = module.entry.parameters
    problems = []
    if len(params) != len(args):
        problems.append(f"ENTRY has {len(params)} parameters, the program {len(args)} arguments")
    for i, (p, a) in enumerate(zip(params, args)):
        a = np.asarray(a)
        if not isinstance(p.shape, ArrayShape) or tuple(p.shape.dims) != a.shape:
            problems.append(f"parameter {i} (%{p.name}) is {p.shape}, argument is "
                            f"{a.dtype}{list(a.shape)}")
    return problems


def _optimized_text(compiled) -> str:
    """The optimized module as XLA prints it (``Compiled.as_text()``), but with every
    constant's data: ``as_text`` elides large constants (``{...}``), which constant
    folding makes out of iotas and schedules."""
    from jax._src.lib import hlo
    options = hlo.HloPrintOptions()
    options.print_large_constants = True
    return compiled.runtime_executable().hlo_modules()[0].to_string(options)


def materialize(program: Program, out_dir: str, *, dump: bool = True,
                check: bool = True) -> Materialized:
    """Write ``out_dir/<name>/{module.hlo, optimized.hlo, inputs.npz, dump/}``; with
    ``check``, parse both modules with hloref, check the ENTRY parameters against the
    arguments and evaluate the optimized module (errors go to ``Materialized.errors``)."""
    import hloref
    directory = os.path.join(out_dir, program.name)
    os.makedirs(directory, exist_ok=True)
    m = Materialized(program.name, directory, os.path.join(directory, "module.hlo"),
                     os.path.join(directory, "optimized.hlo"),
                     os.path.join(directory, "inputs.npz"), None)
    t0 = time.perf_counter()
    lowered = program.lower()
    text = lowered.as_text(dialect="hlo")
    m.seconds["lower"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    optimized = _optimized_text(lowered.compile())
    m.seconds["compile"] = time.perf_counter() - t0
    for path, t in ((m.module, text), (m.optimized, optimized)):
        with open(path, "w", encoding="utf-8") as f:
            f.write(t)
    m.instructions = count_instructions(text)
    m.optimized_instructions = count_instructions(optimized)
    _write_npz(m.inputs, program.args)
    if check:
        for label, path, t in (("module.hlo", m.module, text), ("optimized.hlo", m.optimized,
                                                                 optimized)):
            try:
                mod = hloref.parse(t, filename=path)
            except hloref.HloError as exc:
                m.errors.append(f"{label}: hloref.parse: {type(exc).__name__}: {exc}")
                continue
            m.errors.extend(f"{label}: {p}" for p in _check_parameters(mod, program.args))
            if label == "optimized.hlo":
                t0 = time.perf_counter()
                try:
                    hloref.evaluate(mod, *program.args)
                except hloref.HloError as exc:
                    m.errors.append(f"{label}: hloref.evaluate: {type(exc).__name__}: {exc}")
                m.seconds["hloref_optimized"] = time.perf_counter() - t0
    if dump:
        t0 = time.perf_counter()
        m.dump = os.path.join(directory, "dump")
        err = dump_passes(program.name, m.dump)
        if err:
            m.errors.append(f"dump: {err}")
        m.seconds["dump"] = time.perf_counter() - t0
    return m


def dump_passes(name: str, directory: str, timeout: float = 600.0) -> str | None:
    """XLA's per-pass dump of program ``name``, made in a subprocess; only the files of
    the program's own module are kept. Returns an error message, or None."""
    import shutil
    if os.path.isdir(directory):
        shutil.rmtree(directory)
    os.makedirs(directory)
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") +
                        f" --xla_dump_to={directory} --xla_dump_hlo_pass_re=.*").strip()
    env["JAX_PLATFORMS"] = "cpu"
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--dump", name, directory],
                          env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        return f"subprocess exit {proc.returncode}: {proc.stderr[-2000:]}"
    return None


def _dump_main(name: str, directory: str) -> int:
    """(subprocess) build the program, then compile it; every file the dump gained during
    that compile is this module's; everything else (jax's own small modules from building
    the arguments) is removed."""
    program = PROGRAMS[name]()
    lowered = program.lower()
    before = set(os.listdir(directory))
    lowered.compile()
    ours = set(os.listdir(directory)) - before
    import shutil
    for f in before:
        path = os.path.join(directory, f)
        if os.path.isdir(path):
            shutil.rmtree(path)  # jax's own per-module folders (compile options, MLIR)
        else:
            os.unlink(path)
    if not any(f.endswith(".before_optimizations.txt") for f in ours):
        print(f"no before_optimizations file among {sorted(ours)[:5]}", file=sys.stderr)
        return 1
    print(json.dumps({"files": len(ours)}))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--dump":
        sys.exit(_dump_main(sys.argv[2], sys.argv[3]))
    print("usage: realistic_programs.py --dump NAME DIR", file=sys.stderr)
    sys.exit(2)
