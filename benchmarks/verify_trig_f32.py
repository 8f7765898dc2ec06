"""Check the fast f32 paths of the transcendentals against the reference path on every
f32 input: ``evaluator/trig_f32.py`` (sine, cosine), ``evaluator/exp_log_f32.py``
(exponential, exponential-minus-one, log, log-plus-one, logistic, tanh),
``evaluator/rsqrt_f32.py`` and ``elementwise.sqrt_f32``.

    python benchmarks/verify_trig_f32.py [--op NAME] [--sample N] [--seed S]
                                         [--kernel-range]

For each f32 bit pattern (all 2**32, or ``--sample`` random ones): the f32 result of
the fast path must equal, bit for bit, the reference path's: what
``numeric.float_compute_f64`` computes from the op's f64 function (numpy's, or for
``logistic`` ``exp_log_f32.logistic_f64``), the old path itself, NaN payloads included.
For the kernels with an f64 approximation it also prints the largest distance, in f64
ulps, between the kernel's f64 value (``approx_f64``) and the reference f64 function's
where the kernel is used (the trig kernels: ``|x| <= REDUCE_LIMIT``; the others: ``x`` in
the op's ``DOMAIN`` with a normal f32 result): the guard (``GUARD``) must exceed it for
the argument of the modules' docstrings to hold. Exits 1 on any difference.
``--kernel-range`` (trig only) took 830 s for the sine and 216 s for the cosine on the
shared 2-core development machine; the inputs beyond it are slower (the libm's
reduction of huge arguments). docs/benchmarks.md lists the full runs' times.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

# through ``hloref.evaluator``, as the interpreter imports it: Numba's cache records the
# module's import name, and a kernel cached as ``evaluator.trig_f32`` fails to load there
from hloref.evaluator import exp_log_f32, trig_f32
from hloref.evaluator.elementwise import sqrt_f32
from hloref.evaluator.numeric import element_type_of, float_compute_f64
from hloref.evaluator.rsqrt_f32 import rsqrt_f32, rsqrt_f64

#: op -> (fast f32 path, the f64 function of the reference path)
OPS = {"sine": (trig_f32.sin_f32, np.sin), "cosine": (trig_f32.cos_f32, np.cos),
       "sqrt": (sqrt_f32, np.sqrt), "rsqrt": (rsqrt_f32, rsqrt_f64),
       "exponential": (exp_log_f32.exp_f32, np.exp),
       "exponential-minus-one": (exp_log_f32.expm1_f32, np.expm1),
       "log": (exp_log_f32.log_f32, np.log), "log-plus-one": (exp_log_f32.log1p_f32, np.log1p),
       "logistic": (exp_log_f32.logistic_f32, exp_log_f32.logistic_f64),
       "tanh": (exp_log_f32.tanh_f32, np.tanh)}
#: the trig kernels' quadrant offset for ``approx_f64``
QUADRANT = {"sine": 0, "cosine": 1}
CHUNK = 1 << 24
_TINY = np.finfo(np.float32).tiny


def _approx(op: str, x: np.ndarray, wide: np.ndarray):
    """(the kernel's f64 values, where the kernel uses them) or None (no approximation)."""
    fast = OPS[op][0]
    if op in QUADRANT:
        approx = np.empty(x.size, np.float64)
        trig_f32.approx_f64(x, approx, QUADRANT[op])
        return approx, np.abs(wide) <= trig_f32.REDUCE_LIMIT
    if fast.__name__ not in exp_log_f32.OPS:
        return None
    code = exp_log_f32.OPS[fast.__name__][0]
    approx = exp_log_f32.approx_f64(code, x)
    lo, hi = exp_log_f32.DOMAIN[code]
    return approx, (wide >= lo) & (wide <= hi) & (np.abs(approx) >= _TINY)


def check(bits: np.ndarray, op: str) -> tuple[int, int]:
    """(number of results differing from the reference, largest f64 ulp distance)."""
    fast, libm = OPS[op]
    x = bits.view(np.float32)
    reference = float_compute_f64(libm, x, et=element_type_of(x))
    got = fast(x)
    differ = int(np.count_nonzero(got.view(np.uint32) != reference.view(np.uint32)))
    with np.errstate(all="ignore"):  # signalling NaNs widen with an "invalid" flag
        wide = x.astype(np.float64)
        found = _approx(op, x, wide)
        if found is None:
            return differ, 0
        approx, used = found
        reference64 = libm(wide[used])
    a, r = approx[used].view(np.int64), reference64.view(np.int64)
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
                        help="sine and cosine: every f32 with |x| <= REDUCE_LIMIT (both signs) "
                             "instead of all 2**32: the inputs the kernel computes; the "
                             "others go to the reference path itself")
    args = parser.parse_args(argv)
    failed = False
    for op in args.op or sorted(OPS):
        t0, differ, worst = time.time(), 0, 0
        guard = trig_f32.GUARD if op in QUADRANT else exp_log_f32.GUARD
        if args.sample:
            rng = np.random.default_rng(args.seed)
            chunks = (rng.integers(0, 1 << 32, min(CHUNK, args.sample - lo), dtype=np.uint64)
                      .astype(np.uint32) for lo in range(0, args.sample, CHUNK))
        elif args.kernel_range:
            # |x| <= limit: bits < top
            top = int(np.float32(trig_f32.REDUCE_LIMIT).view(np.uint32)) + 1
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
              f"largest kernel-libm distance {worst} f64 ulps (guard {guard}); "
              f"{time.time() - t0:.0f} s", flush=True)
        failed |= differ > 0 or worst >= guard
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
