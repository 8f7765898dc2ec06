"""What the numerical envelope costs: ``diff`` of a ~1,600-instruction transformer
training step (tests/realistic_programs.py, ``transformer_train_large``), with and
without the envelope, measured in the same run.

    python benchmarks/bench_envelope.py [--repeat 5] [--program NAME]

Prints the median seconds of one hloref evaluation, of the envelope (the nominal run
plus ``samples`` perturbed runs), their ratio (the target is at most 10x), and the
wall time of a whole ``diff`` against XLA:CPU with the envelope forced (the XLA
compile included, as a user sees it) and of a ``diff`` whose verdict needs no
envelope (the plain comparison already agrees).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
sys.path.insert(0, HERE)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--program", default="transformer_train_large")
    parser.add_argument("--samples", type=int, default=None)
    args = parser.parse_args(argv)

    import realistic_programs as rp
    from timing import paired

    import hloref
    from hloref.api import coerce_argument
    from hloref.cli_common import read_npz, unflatten_arguments
    from hloref.evaluator.interpreter import Interpreter
    from hloref.fuzz.differential import diff
    from hloref.fuzz.envelope import EnvelopePolicy, sample
    from hloref.fuzz.workers import OracleWorker

    out = tempfile.mkdtemp(prefix="hloref-bench-envelope-")
    m = rp.materialize(rp.PROGRAMS[args.program](), out, dump=False)
    text = open(m.module, encoding="utf-8").read()
    module = hloref.parse(text)
    n_instr = rp.count_instructions(text)
    values = unflatten_arguments(read_npz(m.inputs),
                                 [p.shape for p in module.entry.parameters])
    values = [coerce_argument(v, p.shape, "argument") for v, p in
              zip(values, module.entry.parameters)]
    policy = EnvelopePolicy(**({"samples": args.samples} if args.samples else {}))

    def evaluate():
        Interpreter(module).run(list(values))

    def envelope():
        sample(module, values, policy)

    t_env, t_eval, ratio = paired(envelope, evaluate, args.repeat)
    print(f"{args.program}: {n_instr} instructions; envelope: {policy.samples} samples, "
          f"widened {policy.widen:g}x")
    print(f"one hloref evaluation      {t_eval:8.3f} s")
    print(f"envelope (nominal+samples) {t_env:8.3f} s   ratio {ratio:.2f}x one evaluation "
          f"(target <= 10x)")

    forced = EnvelopePolicy(samples=policy.samples, widen=policy.widen)
    with OracleWorker("xla") as worker:
        t0 = time.perf_counter()
        plain = diff(module, values, worker=worker, policy=forced)
        t_plain = time.perf_counter() - t0
        t0 = time.perf_counter()
        full = diff(module, values, worker=worker, policy=forced, isolate_all=False,
                    oracle_value=plain.actual)
        t_judge = time.perf_counter() - t0
        # the envelope forced: judge XLA's value against it whatever the plain comparison
        t0 = time.perf_counter()
        s = sample(module, values, forced)
        from hloref.fuzz.envelope import Envelope
        inside = Envelope(s.nominal, s.samples, forced, module).check(plain.actual)
        t_forced = time.perf_counter() - t0
    print(f"diff vs XLA:CPU (compile + run + verdict): {t_plain:8.3f} s, verdict {plain.verdict}"
          f" ({'envelope used' if plain.envelope is not None else 'within the ULP floor'})")
    print(f"diff on XLA's returned value (no XLA run):  {t_judge:8.3f} s, verdict {full.verdict}")
    print(f"envelope forced on XLA's value:             {t_forced:8.3f} s, "
          f"{'inside' if inside.ok else 'OUTSIDE'} (at most {inside.max_position:.2f} of the "
          f"half-width)")
    print(f"diff with the envelope forced, end to end:  {t_plain + t_forced:8.3f} s "
          f"(target < 60 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
