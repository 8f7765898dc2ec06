"""What the realistic programs share (``realistic_programs.py``,
``realistic_programs_more.py``): the :class:`Program` record, flattening pytree
programs, seeded initialisations and the layers/losses/optimizer several programs use.

Importing this module imports jax (on the CPU platform).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Callable

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

__all__ = ["Program", "flat_program", "keys", "normal", "glorot", "he", "layer_norm", "group_norm",
           "cross_entropy", "adam_update", "adam_init", "to_numpy"]


@dataclasses.dataclass
class Program:
    name: str
    fn: Callable
    args: tuple
    arg_names: tuple = ()
    description: str = ""

    def jitted(self):
        return jax.jit(self.fn, keep_unused=True)

    def lower(self):
        return self.jitted().lower(*self.args)


# ------------------------------------------------------------------ helpers


def to_numpy(tree):
    return jax.tree_util.tree_map(lambda a: np.asarray(a), tree)


def flat_program(name: str, step: Callable, tree_args: tuple, description: str) -> Program:
    """A program over pytree arguments ``step(*tree_args)``, as a function of their flat
    leaves (``jax.tree_util`` order)."""
    with_paths, treedef = jax.tree_util.tree_flatten_with_path(tree_args)
    names = tuple(jax.tree_util.keystr(p) for p, _ in with_paths)
    leaves = tuple(np.asarray(v) for _, v in with_paths)

    def fn(*flat):
        return step(*jax.tree_util.tree_unflatten(treedef, list(flat)))

    fn.__name__ = fn.__qualname__ = name  # the HLO module is jit_<name>
    return Program(name, fn, leaves, names, description)


def keys(seed: int, n: int):
    return list(jax.random.split(jax.random.PRNGKey(seed), n))


glorot = jax.nn.initializers.glorot_normal()
he = jax.nn.initializers.he_normal()


def normal(key, shape, dtype=jnp.float32):
    return jax.random.normal(key, shape, dtype)


def layer_norm(x, scale, bias, eps=1e-5):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + eps) * scale + bias


def group_norm(x, groups, scale, bias, eps=1e-5):
    """Group norm of NHWC ``x`` over spatial positions and each group of channels."""
    n, h, w, c = x.shape
    g = x.reshape(n, h, w, groups, c // groups)
    mean = jnp.mean(g, axis=(1, 2, 4), keepdims=True)
    var = jnp.var(g, axis=(1, 2, 4), keepdims=True)
    return ((g - mean) * lax.rsqrt(var + eps)).reshape(n, h, w, c) * scale + bias


def cross_entropy(logits, labels, n_classes):
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.mean(jnp.sum(jax.nn.one_hot(labels, n_classes, dtype=logits.dtype) * logp,
                             axis=-1))


def adam_update(params, grads, opt, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8):
    count = opt["count"] + 1
    m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, opt["m"], grads)
    v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * jnp.square(g), opt["v"], grads)
    t = count.astype(jnp.float32)
    c1 = 1 - b1 ** t
    c2 = 1 - b2 ** t
    new = jax.tree_util.tree_map(
        lambda p, m, v: p - lr * (m / c1) / (jnp.sqrt(v / c2) + eps), params, m, v)
    return new, {"count": count, "m": m, "v": v}


def adam_init(params):
    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    return {"count": jnp.zeros((), jnp.int32), "m": zeros,
            "v": jax.tree_util.tree_map(jnp.zeros_like, params)}
