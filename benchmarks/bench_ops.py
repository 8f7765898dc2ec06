"""Op-family and whole-module benchmarks, measured in one run.

Usage: python benchmarks/bench_ops.py [--repeat N] [--skip-startup]

1. Ops at realistic sizes: hloref ``evaluate`` time / numpy time (or / XLA:CPU
   execution time, compile excluded, where numpy has no equivalent).
2. A whole module: a transformer block lowered from JAX, hloref ``evaluate`` vs
   XLA:CPU compile + run (and run alone).
3. Start-up: ``hloref run`` on a small module with the Numba cache warm, and with
   an empty cache (how long filling it takes).

For numbers comparable with numpy's BLAS, unset OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE
for this command (see the README).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import hloref
from timing import paired, single




def _module(params: str, body: str, extra: str = "") -> str:
    return f"HloModule m\n{extra}\nENTRY e {{\n{params}\n{body}\n}}\n"


ADD = "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"


def op_cases():
    rng = np.random.default_rng(0)
    n = 1 << 20
    x = rng.standard_normal(n).astype(np.float32)
    yield ("tanh f32[1M]", _module("  x = f32[1048576] parameter(0)",
                                   "  ROOT r = f32[1048576] tanh(x)"), (x,), lambda: np.tanh(x), "numpy")
    yield ("multiply f32[1M]", _module("  x = f32[1048576] parameter(0)",
                                       "  ROOT r = f32[1048576] multiply(x, x)"), (x,), lambda: x * x, "numpy")
    a = rng.standard_normal((1024, 1024)).astype(np.float32)
    yield ("reduce-add f32[1024,1024]->[1024]",
           _module("  x = f32[1024,1024] parameter(0)\n  z = f32[] constant(0)",
                   "  ROOT r = f32[1024] reduce(x, z), dimensions={1}, to_apply=add", ADD),
           (a,), lambda: a.sum(axis=1), "numpy")
    yield ("transpose f32[1024,1024]",
           _module("  x = f32[1024,1024] parameter(0)",
                   "  ROOT r = f32[1024,1024] transpose(x), dimensions={1,0}"),
           (a,), lambda: np.ascontiguousarray(a.T), "numpy")
    table = rng.standard_normal((10000, 128)).astype(np.float32)
    idx = rng.integers(0, 10000, (100000, 1)).astype(np.int32)
    yield ("gather 100k rows of f32[10000,128]",
           _module("  t = f32[10000,128] parameter(0)\n  i = s32[100000,1] parameter(1)",
                   "  ROOT g = f32[100000,128] gather(t, i), offset_dims={1}, collapsed_slice_dims={0}, "
                   "start_index_map={0}, index_vector_dim=1, slice_sizes={1,128}"),
           (table, idx), lambda: table[idx[:, 0]], "numpy")
    upd = rng.standard_normal((100000, 16)).astype(np.float32)
    sidx = rng.integers(0, 1000, (100000, 1)).astype(np.int32)
    base = np.zeros((1000, 16), np.float32)

    def np_scatter():
        out = base.copy()
        np.add.at(out, sidx[:, 0], upd)
        return out

    yield ("scatter-add 100k x 16 into f32[1000,16]",
           _module("  o = f32[1000,16] parameter(0)\n  i = s32[100000,1] parameter(1)\n"
                   "  u = f32[100000,16] parameter(2)",
                   "  ROOT s = f32[1000,16] scatter(o, i, u), update_window_dims={1}, "
                   "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, "
                   "to_apply=add", ADD),
           (base, sidx, upd), np_scatter, "numpy")
    m = rng.standard_normal((512, 512)).astype(np.float32)
    yield ("dot f32[512,512]x[512,512]",
           _module("  a = f32[512,512] parameter(0)\n  b = f32[512,512] parameter(1)",
                   "  ROOT d = f32[512,512] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
           (m, m), lambda: m @ m, "numpy")
    img = rng.standard_normal((8, 32, 32, 16)).astype(np.float32)
    ker = rng.standard_normal((3, 3, 16, 32)).astype(np.float32)
    yield ("convolution f32[8,32,32,16] * [3,3,16,32]",
           _module("  x = f32[8,32,32,16] parameter(0)\n  k = f32[3,3,16,32] parameter(1)",
                   "  ROOT c = f32[8,32,32,32] convolution(x, k), window={size=3x3 pad=1_1x1_1}, "
                   "dim_labels=b01f_01io->b01f"),
           (img, ker), None, "xla")


def transformer_block():
    import jax
    import jax.numpy as jnp
    rng = np.random.default_rng(1)
    d, h, t = 128, 4, 64

    def block(x, wq, wk, wv, wo, w1, w2):
        def ln(v):
            mu = v.mean(-1, keepdims=True)
            return (v - mu) / jnp.sqrt(((v - mu) ** 2).mean(-1, keepdims=True) + 1e-5)
        y = ln(x)
        q, k, v = [(y @ w).reshape(t, h, d // h) for w in (wq, wk, wv)]
        att = jax.nn.softmax(jnp.einsum("thd,shd->hts", q, k) / np.sqrt(d // h), axis=-1)
        x = x + jnp.einsum("hts,shd->thd", att, v).reshape(t, d) @ wo
        return x + jax.nn.gelu(ln(x) @ w1) @ w2

    args = [rng.standard_normal((t, d)).astype(np.float32)] + \
        [(rng.standard_normal(s) / np.sqrt(s[0])).astype(np.float32)
         for s in [(d, d)] * 4 + [(d, 4 * d), (4 * d, d)]]
    return jax.jit(block).lower(*args).as_text(dialect="hlo"), args


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--skip-startup", action="store_true")
    args = parser.parse_args(argv)
    from hloref.fuzz.oracles.xla import compile_hlo
    print(f"{'case':44s} {'hloref ms':>10s} {'ref ms':>10s} {'ratio':>7s}  reference")
    for name, text, inputs, reference, kind in op_cases():
        module = hloref.parse(text)
        if kind == "xla":
            exe = compile_hlo(text)
            reference = (lambda exe=exe: exe.run(*inputs))
            label = "XLA:CPU run (compile excluded)"
        else:
            label = "numpy"
        t_ours, t_ref, ratio = paired(lambda: hloref.evaluate(module, *inputs), reference,
                                      args.repeat)
        print(f"{name:44s} {t_ours * 1e3:10.2f} {t_ref * 1e3:10.2f} {ratio:7.2f}  {label}")

    text, inputs = transformer_block()
    module = hloref.parse(text)
    t_ours = single(lambda: hloref.evaluate(module, *inputs), args.repeat)
    t0 = time.perf_counter()
    from hloref.fuzz.oracles import xla
    xla.clear_cache()
    exe = compile_hlo(text)
    exe.run(*inputs)
    t_compile_run = time.perf_counter() - t0
    t_run = single(lambda: exe.run(*inputs), args.repeat)
    n_instr = sum(len(c.instructions) for c in module.computations.values())
    print(f"\ntransformer block from JAX ({n_instr} instructions): hloref evaluate "
          f"{t_ours * 1e3:.1f} ms; XLA:CPU compile+run {t_compile_run * 1e3:.1f} ms "
          f"(ratio {t_ours / t_compile_run:.2f}); XLA:CPU run alone {t_run * 1e3:.2f} ms")

    if args.skip_startup:
        return
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    example = os.path.join(here, "examples", "softmax_bf16.hlo")
    cmd = [sys.executable, "-m", "hloref", "run", example, "--seed", "0"]
    cold_dir = tempfile.mkdtemp(prefix="hloref-numba-cache-")
    try:
        env = {**os.environ, "NUMBA_CACHE_DIR": cold_dir}
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, capture_output=True)
        cold = time.perf_counter() - t0
        warm = statistics.median(
            _wall(cmd, env) for _ in range(3))
        print(f"\nhloref run examples/softmax_bf16.hlo: cold Numba cache {cold:.2f} s "
              f"(fills the cache), warm cache {warm:.2f} s")
    finally:
        shutil.rmtree(cold_dir, ignore_errors=True)


def _wall(cmd, env):
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, capture_output=True)
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()
