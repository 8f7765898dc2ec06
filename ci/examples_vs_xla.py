"""Evaluate every example module with hloref and XLA:CPU on the same seeded inputs.

Usage: python ci/examples_vs_xla.py [FILE.hlo ...] [--seed N]
Prints one line per module (hloref time, XLA compile+run time, verdict) and exits
1 if any module disagrees, 2 on bad input.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time

import numpy as np

import hloref
from hloref.fuzz.compare import compare_values
from hloref.inputs import random_value


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("files", nargs="*")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = args.files or sorted(glob.glob(os.path.join(here, "examples", "*.hlo")))
    try:
        from hloref.fuzz.oracles.xla import run_hlo
    except ImportError as exc:  # jax not installed
        print(f"XLA oracle unavailable ({exc}); evaluating with hloref only")
        run_hlo = None
    failures = 0
    for path in files:
        name = os.path.basename(path)
        try:
            text = open(path, encoding="utf-8").read()
            module = hloref.parse(text, filename=path)
            rng = np.random.default_rng(args.seed)
            inputs = [random_value(p.shape, rng) for p in module.entry.parameters]
            t0 = time.perf_counter()
            ours = hloref.evaluate(module, *inputs)
            t_ours = time.perf_counter() - t0
        except hloref.HloError as exc:
            print(f"{name:24s} hloref error: {exc}")
            failures += 1
            continue
        if run_hlo is None:
            print(f"{name:24s} hloref {t_ours * 1e3:8.1f} ms")
            continue
        t0 = time.perf_counter()
        theirs = run_hlo(text, *inputs)
        t_xla = time.perf_counter() - t0
        # Whole modules chain accumulations (dot, reduce, convolution) whose order
        # differs between the two: allow 1e-5 of the largest output magnitude.
        leaves = ours if isinstance(ours, tuple) else (ours,)
        floats = [np.abs(x.astype(np.float64)) for x in leaves
                  if isinstance(x, np.ndarray) and x.size and x.dtype.kind not in "biu"]
        scale = max((float(np.max(f[np.isfinite(f)], initial=0.0)) for f in floats), default=0.0)
        verdict = compare_values(theirs, ours, atol=1e-5 * max(scale, 1.0))
        status = "match" if verdict.ok else str(verdict)
        failures += 0 if verdict.ok else 1
        print(f"{name:24s} hloref {t_ours * 1e3:8.1f} ms   xla compile+run {t_xla * 1e3:8.1f} ms   {status}")
    print(f"{len(files) - failures} of {len(files)} example modules agree with XLA:CPU"
          if run_hlo else f"{len(files) - failures} of {len(files)} example modules evaluated")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
