"""Regenerate the example HLO modules in this directory.

    python examples/make_examples.py            # (re)write examples/*.hlo
    python examples/make_examples.py --check    # exit 1 if a file differs from what it makes

Each module is what JAX 0.10.2 (``jax.jit(f).lower(*specs).as_text(dialect="hlo")``) or
TensorFlow 2.21 (``tf.function(jit_compile=True).experimental_get_compiler_ir(*args)(stage="hlo")``)
prints for a small function. Weights are parameters, never closed-over constants, so the
files stay small. Output is deterministic: JAX prints no metadata in this mode; for the
TensorFlow module the only rewrite is that ``source_file="..."`` paths in ``metadata`` are made
relative to site-packages (they would otherwise name this machine's virtualenv).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

HERE = Path(__file__).resolve().parent


# -- JAX ------------------------------------------------------------------------------


def _jax_examples() -> dict[str, str]:
    import jax
    import jax.numpy as jnp
    from jax import lax

    f32, bf16, f8 = jnp.float32, jnp.bfloat16, jnp.float8_e4m3fn

    def spec(shape, dtype=f32):
        return jax.ShapeDtypeStruct(shape, dtype)

    def hlo(f, *specs) -> str:
        return jax.jit(f).lower(*specs).as_text(dialect="hlo")

    out: dict[str, str] = {}

    # 2-layer MLP: x[2,8] -> 16 hidden (relu) -> 4.
    def mlp(x, w1, b1, w2, b2):
        h = jax.nn.relu(x @ w1 + b1)
        return h @ w2 + b2

    out["mlp.hlo"] = hlo(mlp, spec((2, 8)), spec((8, 16)), spec((16,)), spec((16, 4)),
                         spec((4,)))

    # One NHWC convolution layer: 3x3 kernel, SAME padding, stride 1, bias, relu.
    def conv(x, k, b):
        y = lax.conv_general_dilated(x, k, window_strides=(1, 1), padding="SAME",
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jax.nn.relu(y + b)

    out["conv.hlo"] = hlo(conv, spec((1, 6, 6, 3)), spec((3, 3, 3, 4)), spec((4,)))

    # Newton iterations for sqrt(x) with a tuple carry (i, y) and a data-dependent exit.
    def newton_sqrt(x):
        def cond(c):
            i, y = c
            return (i < 20) & (jnp.max(jnp.abs(y * y - x)) > 1e-6)

        def body(c):
            i, y = c
            return i + 1, 0.5 * (y + x / y)

        return lax.while_loop(cond, body, (jnp.int32(0), jnp.ones_like(x)))

    out["while_loop.hlo"] = hlo(newton_sqrt, spec((4,)))

    # FP8 matmul with f32 accumulation and per-tensor scales.
    def fp8_matmul(a, b, scale_a, scale_b):
        acc = lax.dot_general(a, b, (((1,), (0,)), ((), ())), preferred_element_type=f32)
        return acc * (scale_a * scale_b)

    out["fp8_matmul.hlo"] = hlo(fp8_matmul, spec((4, 8), f8), spec((8, 4), f8), spec(()),
                                spec(()))

    # bf16 softmax over the last axis (reduce max, exp, reduce sum, divide).
    def softmax(x):
        m = jnp.max(x, axis=-1, keepdims=True)
        e = jnp.exp(x - lax.stop_gradient(m))
        return e / jnp.sum(e, axis=-1, keepdims=True)

    out["softmax_bf16.hlo"] = hlo(softmax, spec((4, 8), bf16))

    # lax.cond -> conditional on a pred computed from the data.
    def cond_fn(x, y):
        return lax.cond(jnp.sum(x) > 0,
                        lambda a, b: (a * b, jnp.sum(b)),
                        lambda a, b: (a - b, jnp.max(a)),
                        x, y)

    out["cond.hlo"] = hlo(cond_fn, spec((3,)), spec((3,)))
    return out


# -- TensorFlow -----------------------------------------------------------------------

_SOURCE_FILE = re.compile(r'source_file="[^"]*?(?:site-packages|dist-packages)/([^"]*)"')


def _tf_examples() -> dict[str, str]:
    import numpy as np
    import tensorflow as tf

    @tf.function(jit_compile=True)
    def dense(x, w, b):
        return tf.nn.relu(tf.matmul(x, w) + b)

    args = [tf.constant(np.zeros(s, np.float32)) for s in [(2, 8), (8, 4), (4,)]]
    text = dense.experimental_get_compiler_ir(*args)(stage="hlo")
    text = _SOURCE_FILE.sub(r'source_file="\1"', text)
    if "source_file=\"/" in text:
        raise RuntimeError("tf_dense.hlo would contain an absolute source_file path")
    return {"tf_dense.hlo": text}


# -- driver ---------------------------------------------------------------------------


def make_all() -> dict[str, str]:
    files = {**_jax_examples(), **_tf_examples()}
    return {name: text.rstrip("\n") + "\n" for name, text in files.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true",
                    help="compare with the files on disk instead of writing them")
    ap.add_argument("--out", type=Path, default=HERE, help="output directory")
    ns = ap.parse_args(argv)
    files = make_all()
    bad = 0
    for name, text in sorted(files.items()):
        path = ns.out / name
        if ns.check:
            old = path.read_text() if path.exists() else None
            if old != text:
                print(f"{path}: differs from what make_examples.py produces")
                bad += 1
        else:
            path.write_text(text)
            print(f"wrote {path} ({text.count(chr(10))} lines)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
