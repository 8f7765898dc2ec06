"""CPU time of ``hloref.evaluate`` on the ``bench_core`` fixed-cost cases and of the
numpy work inside them, in µs.

    python benchmarks/fixed_cost_parts.py [--calls N] [--pieces]

Each figure is the median over ``--calls`` calls of the calling thread's CPU time
(``time.thread_time_ns``), which a shared machine distorts less than wall time: a
descheduled thread's wait is not counted. Run it with another checkout's Python
(``/work/main/.venv/bin/python benchmarks/fixed_cost_parts.py``) for a before/after
pair on the same machine state. ``--pieces``: the fixed cost of ``add f32[16]`` piece by
piece (minus the timing loop's own cost). docs/benchmarks.md ("Round 2", "Round 3")
quotes it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_core  # noqa: E402

import hloref  # noqa: E402


def cpu_us(fn, calls: int) -> float:
    """Median CPU µs of ``fn()`` after one warm-up call."""
    fn()
    samples = []
    for _ in range(calls):
        t0 = time.thread_time_ns()
        fn()
        samples.append(time.thread_time_ns() - t0)
    samples.sort()
    return samples[len(samples) // 2] / 1e3


def rows(calls: int):
    """``(case, hloref µs, numpy µs)``; with ``hloref.compile`` (this checkout on), each
    evaluate case again as a compiled module's call."""
    rng = np.random.default_rng(0)
    compile_ = getattr(hloref, "compile", None)

    def both(name, text, args, numpy_fn):
        m = hloref.parse(text)
        ref = cpu_us(numpy_fn, calls)
        yield name, cpu_us(lambda: hloref.evaluate(m, *args), calls), ref
        if compile_ is not None:
            compiled = compile_(m)
            yield "  the same, hloref.compile'd", cpu_us(lambda: compiled(*args), calls), ref

    x16 = np.ones(16, np.float32)
    yield from both("evaluate add f32[16] (the fixed cost)", bench_core._binary("add", "f32", 16),
                    (x16, x16), lambda: np.add(x16, x16))
    x = rng.standard_normal(1 << 16).astype(np.float32)
    yield from both("evaluate add f32[65536]", bench_core._binary("add", "f32", 1 << 16), (x, x),
                    lambda: np.add(x, x))
    a = rng.standard_normal((256, 256)).astype(np.float32)
    for dim in (0, 1):
        yield from both(f"evaluate reduce-add f32[256,256] dim {dim}",
                        bench_core._reduce("f32", 256, 256, dim), (a,),
                        lambda dim=dim: a.sum(axis=dim))
    b = rng.standard_normal((64, 64)).astype(np.float32)
    bd = b.astype(np.float64)
    out64, out32 = np.empty((64, 64)), np.empty((64, 64), np.float32)
    yield from both("evaluate dot f32[64,64]x[64,64]", bench_core._dot("f32", 64, 64, 64), (b, b),
                    lambda: b @ b)
    yield "  dgemm alone (numpy: sgemm alone)", \
        cpu_us(lambda: np.matmul(bd, bd, out=out64), calls), \
        cpu_us(lambda: np.matmul(b, b, out=out32), calls)
    m = hloref.parse(bench_core._chain(1000))
    x4 = np.ones(4, np.float32)
    yield "per instruction (1,000 f32[4] adds)", \
        cpu_us(lambda: hloref.evaluate(m, x4), max(calls // 20, 5)) / 1000, None


def pieces(calls: int):
    """Where ``evaluate add f32[16]``'s and a compiled reduce's CPU time goes, piece by
    piece (this checkout's ``plan_cache.record``, ``Interpreter.run_ready`` and
    ``hloref.compile``; each piece timed alone)."""
    from hloref import api
    from hloref.evaluator import plan_cache
    from hloref.evaluator.interpreter import Interpreter
    from hloref.evaluator.registry import OPS
    x16 = np.ones(16, np.float32)
    m = hloref.parse(bench_core._binary("add", "f32", 16))
    hloref.evaluate(m, x16, x16)
    ready = Interpreter(m)
    ready.run([x16, x16])
    shape = m.entry.root.shape
    none = cpu_us(lambda: None, calls)  # the timing loop's own cost, taken off below
    table = [
        ("hloref.evaluate", lambda: hloref.evaluate(m, x16, x16)),
        ("api.evaluate", lambda: api.evaluate(m, x16, x16)),
        ("Interpreter(module).run_ready(args)", lambda: Interpreter(m).run_ready((x16, x16))),
        ("Interpreter(module).run(args)", lambda: Interpreter(m).run([x16, x16])),
        ("  plan_cache.record (the module's check)", lambda: plan_cache.record(m)),
        ("  call_sized of a planned interpreter",
         lambda: ready.call_sized(m.entry, [x16, x16], None)),
        ("    the add op", lambda: OPS["add"].fn(x16, x16, shape=shape)),
        ("      np.add", lambda: np.add(x16, x16)),
    ]
    from hloref.evaluator.kernels import sum_f64
    from hloref.evaluator.reduce import fast_reduce
    a = np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32)
    reduce_module = hloref.parse(bench_core._reduce("f32", 256, 256, 0))
    compiled = hloref.compile(reduce_module)
    zero, et = np.zeros((), np.float32), reduce_module.entry.root.shape.element_type
    table += [
        ("compiled reduce-add f32[256,256] dim 0", lambda: compiled(a)),
        ("  fast_reduce (the f64 sum, the init, rounding)",
         lambda: fast_reduce("add", a, zero, et, axis=(0,))),
        ("    kernels.sum_f64", lambda: sum_f64(a, (0,))),
        ("  numpy a.sum(axis=0)", lambda: a.sum(axis=0)),
    ]
    for name, fn in table:
        yield name, cpu_us(fn, calls) - none


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--pieces", action="store_true",
                        help="where the fixed cost goes (this checkout's internals)")
    args = parser.parse_args(argv)
    if args.pieces:
        for name, us in pieces(args.calls):
            print(f"{name:44s} {us:10.2f}")
        return 0
    print(f"{'case':44s} {'hloref us':>10s} {'numpy us':>9s} {'ratio':>6s}")
    for name, ours, ref in rows(args.calls):
        tail = f"{ref:9.2f} {ours / ref:6.2f}" if ref else ""
        print(f"{name:44s} {ours:10.2f} {tail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
