"""Throughput of the narrow-float conversion kernels (hloref.evaluator.narrow).

    python benchmarks/bench_narrow.py [--n 16777216] [--types bf16,f16,f8e4m3fn]

Prints elements/s for encode (f32 and f64 sources), decode, and ml_dtypes' own
``astype`` for comparison. The first call of each kernel (compilation or cache load)
is excluded; the best of ``--repeat`` runs is reported.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from hloref.evaluator import narrow as N
from hloref.types import element_type


def best(fn, repeat):
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1 << 24)
    ap.add_argument("--types", default="bf16,f16,f8e4m3fn,f8e5m2,f4e2m1fn,f8e8m0fnu")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--serial", action="store_true", help="disable the prange kernel")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    if args.serial:
        N.PARALLEL_THRESHOLD = None
    rng = np.random.default_rng(0)
    x32 = (rng.standard_normal(args.n) * 8).astype(np.float32)
    x64 = x32.astype(np.float64) * (1 + 2.0 ** -30)
    print(f"n={args.n}  parallel_threshold={N.PARALLEL_THRESHOLD}   (M elements/s)")
    print(f"{'type':14s} {'enc f32':>9s} {'enc f64':>9s} {'decode':>9s} | "
          f"{'ml f32':>9s} {'ml f64':>9s} {'ml dec':>9s}")
    for name in args.types.split(","):
        t = element_type(name)
        for x in (x32[:1000], x64[:1000]):
            N.encode(x, t)
        bits = N.encode(x32, t)
        N.decode(bits[:1000], t)
        narrow = bits.view(t.dtype)
        r = [best(lambda: N.encode(x32, t), args.repeat),
             best(lambda: N.encode(x64, t), args.repeat),
             best(lambda: N.decode(bits, t), args.repeat),
             best(lambda: x32.astype(t.dtype), args.repeat),
             best(lambda: x64.astype(t.dtype), args.repeat),
             best(lambda: narrow.astype(np.float32), args.repeat)]
        print(f"{name:14s} " + " ".join(f"{args.n / s / 1e6:9.1f}" for s in r[:3]) + " | "
              + " ".join(f"{args.n / s / 1e6:9.1f}" for s in r[3:]))


if __name__ == "__main__":
    main()
