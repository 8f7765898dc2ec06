"""Check the fast f32 paths of the transcendentals against the reference path on every
f32 input: ``evaluator/trig_f32.py`` (sine, cosine) and ``elementwise.sqrt_f32``.

    python benchmarks/verify_trig_f32.py [--op sine|cosine|sqrt] [--sample N] [--seed S]
                                         [--kernel-range]

For each f32 bit pattern (all 2**32, or ``--sample`` random ones): the f32 result of
the fast path must equal, bit for bit, the reference path's (numpy's f64 function of
the widened input, rounded once to f32: what ``numeric.float_compute_f64`` computes).
It also prints the largest distance, in f64 ulps, between the kernel's f64 value
(``approx_f64``) and the libm's where the kernel is used (``|x| <= REDUCE_LIMIT``): the
guard (``GUARD``) must exceed it for the argument of the module docstring to hold.
Exits 1 on any difference. ``--kernel-range`` took 830 s for the sine and 216 s for the
cosine on the shared 2-core development machine; the inputs beyond it are slower (the
libm's reduction of huge arguments).
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

# through ``hloref.evaluator``, as the interpreter imports it: Numba's cache records the
# module's import name, and a kernel cached as ``evaluator.trig_f32`` fails to load there
from hloref.evaluator.elementwise import sqrt_f32
from hloref.evaluator.trig_f32 import GUARD, REDUCE_LIMIT, approx_f64, cos_f32, sin_f32

#: op -> (fast f32 path, the f64 function of the reference path)
OPS = {"sine": (sin_f32, np.sin), "cosine": (cos_f32, np.cos), "sqrt": (sqrt_f32, np.sqrt)}
#: the kernel's quadrant offset for ``approx_f64`` (absent: no f64 approximation to measure)
QUADRANT = {"sine": 0, "cosine": 1}
CHUNK = 1 << 24


def check(bits: np.ndarray, op: str) -> tuple[int, int]:
    """(number of results differing from the reference, largest f64 ulp distance)."""
    (fast, libm), quadrant0 = OPS[op], QUADRANT.get(op)
    x = bits.view(np.float32)
    with np.errstate(all="ignore"):  # signalling NaNs widen with an "invalid" flag
        wide = x.astype(np.float64)
        reference64 = libm(wide)
        reference = reference64.astype(np.float32)
    got = fast(x)
    differ = int(np.count_nonzero(got.view(np.uint32) != reference.view(np.uint32)))
    if quadrant0 is None:
        return differ, 0
    approx = np.empty(x.size, np.float64)
    approx_f64(x, approx, quadrant0)
    used = np.abs(wide) <= REDUCE_LIMIT
    a, r = approx[used].view(np.int64), reference64[used].view(np.int64)
    same_sign = (a < 0) == (r < 0)
    ulps = np.where(same_sign, np.abs(a - r), np.int64(1 << 62))
    return differ, int(ulps.max()) if ulps.size else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--op", choices=sorted(OPS), action="append")
    parser.add_argument("--sample", type=int, default=0,
                        help="random bit patterns to check (default: all 2**32)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kernel-range", action="store_true",
                        help="every f32 with |x| <= REDUCE_LIMIT (both signs) instead of all "
                             "2**32: the inputs the kernel computes; the others go to the "
                             "reference path itself")
    args = parser.parse_args(argv)
    failed = False
    for op in args.op or sorted(OPS):
        t0, differ, worst = time.time(), 0, 0
        if args.sample:
            rng = np.random.default_rng(args.seed)
            chunks = (rng.integers(0, 1 << 32, min(CHUNK, args.sample - lo), dtype=np.uint64)
                      .astype(np.uint32) for lo in range(0, args.sample, CHUNK))
        elif args.kernel_range:
            top = int(np.float32(REDUCE_LIMIT).view(np.uint32)) + 1  # |x| <= limit: bits < top
            chunks = (np.arange(lo, min(lo + CHUNK, top), dtype=np.uint64).astype(np.uint32)
                      | np.uint32(sign) for sign in (0, 1 << 31) for lo in range(0, top, CHUNK))
        else:
            chunks = (np.arange(lo, lo + CHUNK, dtype=np.uint64).astype(np.uint32)
                      for lo in range(0, 1 << 32, CHUNK))
        total = 0
        for bits in chunks:
            d, w = check(bits, op)
            differ, worst, total = differ + d, max(worst, w), total + bits.size
        print(f"{op}: {total} inputs, {differ} results differ from the reference path; "
              f"largest kernel-libm distance {worst} f64 ulps (guard {GUARD}); "
              f"{time.time() - t0:.0f} s")
        failed |= differ > 0 or worst >= GUARD
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
