"""Where the fixed cost per instruction goes: cProfile of ``hloref.evaluate``.

    python benchmarks/profile_fixed_costs.py [--case NAME ...] [--calls N] [--top K]

Profiles ``--calls`` evaluations of one parsed module per case (parse and the first
evaluation, which compiles or loads Numba kernels, excluded) and prints the ``--top``
functions by own time. Cases: the ``bench_core.py --quick`` cases by name (``add
f32[65536]``...), and ``transformer`` (the 1,609-instruction training step of
``bench_envelope.py``, built with jax). docs/benchmarks.md ("Fixed costs") quotes it.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))


def _transformer():
    import tempfile

    import realistic_programs as rp

    import hloref
    from hloref.api import coerce_argument
    from hloref.cli_common import read_npz, unflatten_arguments
    out = tempfile.mkdtemp(prefix="hloref-profile-")
    m = rp.materialize(rp.PROGRAMS["transformer_train_large"](), out, dump=False)
    module = hloref.parse(open(m.module, encoding="utf-8").read())
    values = unflatten_arguments(read_npz(m.inputs), [p.shape for p in module.entry.parameters])
    values = [coerce_argument(v, p.shape, "argument")
              for v, p in zip(values, module.entry.parameters)]
    return module, values


def profile(module, args, calls: int, top: int) -> str:
    import hloref
    hloref.evaluate(module, *args)  # Numba compile / cache load, plan
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        hloref.evaluate(module, *args)
    prof.disable()
    text = io.StringIO()
    stats = pstats.Stats(prof, stream=text)
    stats.strip_dirs().sort_stats("tottime").print_stats(top)
    return text.getvalue()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", action="append",
                        help="a bench_core case name, or 'transformer' (default: all quick "
                             "cases and the transformer)")
    parser.add_argument("--calls", type=int, default=None,
                        help="evaluations profiled (default 2000; 3 for the transformer)")
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args(argv)

    import bench_core

    import hloref
    core = {name: (text, inputs) for name, text, inputs, _ in bench_core.cases(True)}
    wanted = args.case or [*core, "transformer"]
    for name in wanted:
        if name == "transformer":
            module, values = _transformer()
            calls = args.calls or 3
        elif name in core:
            text, values = core[name]
            module, calls = hloref.parse(text), args.calls or 2000
        else:
            parser.error(f"unknown case {name!r}; one of: {', '.join([*core, 'transformer'])}")
        print(f"== {name}: {calls} evaluations")
        print(profile(module, values, calls, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
