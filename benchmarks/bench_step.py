"""One evaluation of the 1,609-instruction transformer training step: wall and CPU.

    python benchmarks/bench_step.py [--repeat N] [--dir DIR]

Builds ``transformer_train_large`` (``tests/realistic_programs.py``, with jax) into
``--dir`` once, then prints the median over ``--repeat`` evaluations (after one
warm-up) of the wall seconds and of the process's CPU seconds (``time.process_time``:
every thread, OpenBLAS's included). Run with another checkout's Python for a
before/after pair. docs/benchmarks.md ("Round 3") quotes it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "hloref-step"))
    args = parser.parse_args(argv)
    import realistic_programs as rp

    import hloref
    from hloref.api import coerce_argument
    from hloref.cli_common import read_npz, unflatten_arguments
    here = os.path.join(args.dir, "transformer_train_large")
    if not os.path.exists(os.path.join(here, "module.hlo")):
        rp.materialize(rp.PROGRAMS["transformer_train_large"](), args.dir, dump=False)
    with open(os.path.join(here, "module.hlo"), encoding="utf-8") as f:
        module = hloref.parse(f.read())
    params = module.entry.parameters
    values = unflatten_arguments(read_npz(os.path.join(here, "inputs.npz")),
                                 [p.shape for p in params])
    values = [coerce_argument(v, p.shape, "argument") for v, p in zip(values, params)]
    hloref.evaluate(module, *values)
    wall, cpu = [], []
    for _ in range(args.repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        hloref.evaluate(module, *values)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    print(f"one evaluation: wall {statistics.median(wall):.3f} s, "
          f"CPU {statistics.median(cpu):.3f} s (median of {args.repeat})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
