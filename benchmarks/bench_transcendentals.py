"""Every unary transcendental of f32 and bf16 at 1M elements: hloref against numpy.

    HLOREF_THREADS=1 python benchmarks/bench_transcendentals.py [--repeat N] [--size N]

Prints, per op and type, the median CPU time of the process (``time.process_time``) of
``hloref.evaluate`` and of numpy's own function on the same array (f32 loops for f32,
ml_dtypes' loops for bf16) and their ratio; issue 32's target is 3x. Run with
``HLOREF_THREADS=1`` for one core on both sides (numpy's functions are
single-threaded; hloref splits large f64 computations over its thread pool).
numpy's f32 functions are less accurate than hloref's (f64, rounded once): the ratio
compares different accuracies. Inputs are N(0, 1), moved into each op's domain.
docs/benchmarks.md ("Round 2", "Round 3") quotes it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import ml_dtypes
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_core  # noqa: E402
from targets_json import Records  # noqa: E402

import hloref  # noqa: E402

#: opcode -> numpy function
NUMPY = {
    "exponential": np.exp, "exponential-minus-one": np.expm1, "log": np.log,
    "log-plus-one": np.log1p, "sqrt": np.sqrt, "rsqrt": lambda a: 1 / np.sqrt(a),
    "cbrt": np.cbrt, "sine": np.sin, "cosine": np.cos, "tan": np.tan, "tanh": np.tanh,
    "sinh": np.sinh, "cosh": np.cosh, "asin": np.arcsin, "acos": np.arccos,
    "atan": np.arctan, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "logistic": lambda a: 1 / (1 + np.exp(-a)),
}


def _domain(op: str, x: np.ndarray) -> np.ndarray:
    """``x`` moved into the op's real domain: the first of x, x/5, |x|+0.5, |x|+1.5 on
    which numpy's function is finite everywhere (log and sqrt want positive values,
    asin/acos/atanh |x| < 1, acosh x > 1)."""
    with np.errstate(all="ignore"):
        for y in (x, x / 5, np.abs(x) + 0.5, np.abs(x) + 1.5):
            if np.all(np.isfinite(NUMPY[op](y.astype(np.float64)))):
                return y.astype(x.dtype)
    return x


def cpu_ms(fn, repeat: int) -> float:
    fn()  # warm-up: Numba compile or cache load, a narrow type's table
    samples = []
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        samples.append(time.process_time() - t0)
    samples.sort()
    return samples[len(samples) // 2] * 1e3


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--size", type=int, default=1 << 20)
    parser.add_argument("--json", help="also write the target records here (targets.py)")
    args = parser.parse_args(argv)
    records = Records()
    x = np.random.default_rng(0).standard_normal(args.size).astype(np.float32)
    print(f"{'op':24s} {'type':5s} {'hloref ms':>10s} {'numpy ms':>9s} {'ratio':>6s}")
    for ty, dtype in (("f32", np.float32), ("bf16", ml_dtypes.bfloat16)):
        for op, reference in NUMPY.items():
            a = _domain(op, x).astype(dtype)
            module = hloref.parse(bench_core._unary(op, ty, a.size))
            ours = cpu_ms(lambda: hloref.evaluate(module, a), args.repeat)
            with np.errstate(all="ignore"):
                theirs = cpu_ms(lambda: reference(a), args.repeat)
            mark = records.add("32.4", f"{op} {ty}[{args.size}] / numpy (1 thread, CPU)",
                               ours / theirs, 3.0)
            print(f"{op:24s} {ty:5s} {ours:10.2f} {theirs:9.2f} {ours / theirs:6.2f}  3x {mark}",
                  flush=True)
    records.write(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
