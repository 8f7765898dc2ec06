"""Programs at production size (issue 32, item 5), built at run time with jax (nothing
large is committed): ``PROGRAMS[name]()`` returns a ``realistic_common.Program``
(``fn`` over flat arguments, ``args`` numpy arrays in ENTRY parameter order), which
``bench_envelope.py --program NAME`` lowers with ``as_text(dialect="hlo")``.

* ``transformer_block_1024``: embeddings in, two pre-LN transformer layers (causal
  multi-head attention with 12 heads, MLP 768 -> 3072 -> 768 with gelu, residuals),
  sequence 1,024, width 768, batch 1, f32, forward only. Weights glorot-normal,
  biases zero, layer-norm scales one, embeddings N(0, 1) (jax.random, seed 0).
* ``transformer_block_1024_bf16``: the same in bf16 (weights and activations; layer
  norm and softmax computed in f32, as mixed-precision models do).
"""

from __future__ import annotations

import os
import sys
from functools import partial

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tests"))

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from realistic_common import flat_program, glorot, keys, layer_norm, normal  # noqa: E402

__all__ = ["PROGRAMS", "transformer_block"]


def _attention(x, wqkv, wo, heads):
    b, s, d = x.shape
    hd = d // heads
    q, k, v = jnp.split(x @ wqkv, 3, axis=-1)
    q, k, v = (t.reshape(b, s, heads, hd) for t in (q, k, v))
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k).astype(jnp.float32) / np.float32(np.sqrt(hd))
    mask = jnp.tril(jnp.ones((s, s), bool))
    logits = jnp.where(mask, logits, jnp.finfo(jnp.float32).min)
    weights = jax.nn.softmax(logits, axis=-1).astype(x.dtype)
    return jnp.einsum("bhqk,bkhd->bqhd", weights, v).reshape(b, s, d) @ wo


def _norm(x, p):
    return layer_norm(x.astype(jnp.float32), p["scale"], p["bias"]).astype(x.dtype)


def _block(x, layers, heads):
    for p in layers:
        x = x + _attention(_norm(x, p["ln1"]), p["wqkv"], p["wo"], heads)
        h = _norm(x, p["ln2"])
        x = x + jax.nn.gelu(h @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
    return x


def transformer_block(name="transformer_block_1024", *, seq=1024, width=768, heads=12,
                      layers=2, ff=3072, dtype=jnp.float32, seed=0):
    ks = iter(keys(seed, 1 + 4 * layers))
    x = normal(next(ks), (1, seq, width)).astype(dtype)
    params = []
    for _ in range(layers):
        params.append({
            "ln1": {"scale": jnp.ones((width,)), "bias": jnp.zeros((width,))},
            "wqkv": glorot(next(ks), (width, 3 * width)).astype(dtype),
            "wo": glorot(next(ks), (width, width)).astype(dtype),
            "ln2": {"scale": jnp.ones((width,)), "bias": jnp.zeros((width,))},
            "w1": glorot(next(ks), (width, ff)).astype(dtype), "b1": jnp.zeros((ff,), dtype),
            "w2": glorot(next(ks), (ff, width)).astype(dtype), "b2": jnp.zeros((width,), dtype),
        })
    desc = (f"{layers} pre-LN transformer layers, sequence {seq}, width {width}, {heads} heads, "
            f"MLP {width}->{ff}->{width}, {jnp.dtype(dtype).name}, forward")
    return flat_program(name, partial(_block, heads=heads), (x, params), desc)


PROGRAMS = {
    "transformer_block_1024": transformer_block,
    "transformer_block_1024_bf16": partial(transformer_block, "transformer_block_1024_bf16",
                                           dtype=jnp.bfloat16),
}
