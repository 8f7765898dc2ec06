"""What the numerical envelope costs: ``diff`` of a ~1,600-instruction transformer
training step (tests/realistic_programs.py, ``transformer_train_large``), with and
without the envelope, measured in the same run.

    python benchmarks/bench_envelope.py [--repeat 5] [--program NAME] [--samples N]
                                        [--group N] [--no-diff] [--hlo FILE] [--once]
                                        [--json FILE]

Prints the median seconds of one hloref evaluation and of the envelope (the nominal
run plus ``samples`` perturbed runs, then the envelope built from them), in CPU
seconds (``time.process_time``: other processes on a shared machine inflate wall
time, not these) and in wall seconds, with their ratio beside its target (at most
10x); then the peak bytes allocated while evaluating once and while building the
envelope (``tracemalloc``, which numpy reports its arrays to), their ratio beside its
target (at most 3x); then, unless ``--no-diff``, the wall time of a whole ``diff``
against XLA:CPU with the envelope forced (the XLA compile included, as a user sees
it) and of a ``diff`` whose verdict needs no envelope.

``--program`` also takes the production-size programs of ``production_programs.py``
(``transformer_block_1024``: two transformer layers at sequence 1,024, width 768),
built and lowered at run time; for those the diffs are skipped and XLA:CPU's compile
time and the median of three runs of the same jitted function are printed beside
hloref's. ``--once``: one evaluation and one envelope, each timed in CPU and wall
seconds in the same call (for programs too large to repeat), instead of paired medians.

On a machine with few cores shared with other work, run it with
``OPENBLAS_NUM_THREADS=1``: OpenBLAS's threads otherwise wait for each other on every
small matrix product (a 128x64 by 64x256 product measured 78 ms instead of 0.04 ms).
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
    parser.add_argument("--group", type=int, default=None,
                        help="perturbed runs evaluated together (fuzz/sampling.py "
                        "LOCKSTEP_GROUP); 1 for one run at a time")
    parser.add_argument("--no-diff", action="store_true", help="skip the diffs against XLA")
    parser.add_argument("--once", action="store_true",
                        help="time one evaluation and one envelope (CPU and wall seconds of the "
                             "same call) instead of paired medians of --repeat rounds")
    parser.add_argument("--hlo", help="an HLO module file instead of a realistic program "
                        "(inputs: seeded standard normal values; implies --no-diff), e.g. "
                        "benchmarks/layer_norm_bf16_big.hlo, an output-dominated case")
    parser.add_argument("--json", help="also write the target records here (targets.py)")
    args = parser.parse_args(argv)

    import realistic_programs as rp
    from targets_json import Records
    from timing import paired

    import hloref
    from hloref.api import coerce_argument
    from hloref.cli_common import read_npz, unflatten_arguments
    from hloref.evaluator.interpreter import Interpreter
    from hloref.fuzz.differential import diff
    from hloref.fuzz.envelope import Envelope, EnvelopePolicy, sample
    from hloref.fuzz.workers import OracleWorker

    xla_times = None
    if args.hlo:
        import numpy as np
        text = open(args.hlo, encoding="utf-8").read()
        module = hloref.parse(text)
        rng = np.random.default_rng(0)
        values = [rng.standard_normal(tuple(p.shape.dims)).astype(p.shape.element_type.dtype)
                  for p in module.entry.parameters]
        args.program, args.no_diff = os.path.basename(args.hlo), True
    elif args.program not in rp.PROGRAMS:
        import production_programs
        if args.program not in production_programs.PROGRAMS:
            parser.error(f"--program {args.program}: not in tests/realistic_programs.py's or "
                         "benchmarks/production_programs.py's PROGRAMS")
        program = production_programs.PROGRAMS[args.program]()
        print(f"{args.program}: {program.description}")
        lowered = program.lower()
        text = lowered.as_text(dialect="hlo")
        module = hloref.parse(text)
        values = list(program.args)
        xla_times = _xla_times(lowered, program.args)
        args.no_diff = True
    else:
        out = tempfile.mkdtemp(prefix="hloref-bench-envelope-")
        m = rp.materialize(rp.PROGRAMS[args.program](), out, dump=False)
        text = open(m.module, encoding="utf-8").read()
        module = hloref.parse(text)
        values = unflatten_arguments(read_npz(m.inputs),
                                     [p.shape for p in module.entry.parameters])
    n_instr = rp.count_instructions(text)
    values = [coerce_argument(v, p.shape, "argument") for v, p in
              zip(values, module.entry.parameters)]
    policy = EnvelopePolicy(**({"samples": args.samples} if args.samples else {}))
    if args.group:
        import hloref.fuzz.sampling as sampling
        sampling.LOCKSTEP_GROUP = args.group

    def evaluate():
        Interpreter(module).run(list(values))

    def envelope():
        Envelope.of(sample(module, values, policy), policy, module)

    print(f"{args.program}: {n_instr} instructions; envelope: {policy.samples} samples, "
          f"widened {policy.widen:g}x")
    records = Records()
    if xla_times is not None:
        print(f"XLA:CPU: compile {xla_times[0]:8.3f} wall s; one run {xla_times[1]:8.3f} wall s "
              f"(median of 3), {xla_times[2]:8.3f} CPU s")
    if args.once:
        evaluate()  # warm-up: Numba's cache load, BLAS start
        t_eval, t_env = _once(evaluate), _once(envelope)
        for i, unit in ((0, "CPU s"), (1, "wall s")):
            ratio = t_env[i] / t_eval[i]
            met = records.add("32.1", f"{args.program}: envelope / one evaluation ({unit})",
                              ratio, 10.0, note=f"one evaluation {t_eval[i]:.3f} {unit}, "
                              f"envelope {t_env[i]:.3f} {unit}")
            print(f"one evaluation {t_eval[i]:8.3f} {unit}; envelope {t_env[i]:8.3f} {unit}; "
                  f"ratio {ratio:6.2f}x  (target <= 10x: {met})")
    for clock, unit in (() if args.once else
                        ((time.process_time, "CPU s"), (time.perf_counter, "wall s"))):
        t_env, t_eval, ratio = paired(envelope, evaluate, args.repeat, clock=clock)
        met = records.add("32.1", f"{args.program}: envelope / one evaluation ({unit})", ratio,
                          10.0, note=f"one evaluation {t_eval:.3f} {unit}, envelope "
                          f"{t_env:.3f} {unit}")
        print(f"one evaluation {t_eval:8.3f} {unit}; envelope {t_env:8.3f} {unit}; "
              f"ratio {ratio:6.2f}x  (target <= 10x: {met})")
    m_eval, m_env = _peak_bytes(evaluate), _peak_bytes(envelope)
    met = records.add("32.1", f"{args.program}: envelope / one evaluation (peak bytes)",
                      m_env / m_eval, 3.0, note=f"{m_eval / 1e6:.1f} MB, {m_env / 1e6:.1f} MB")
    print(f"peak allocated: one evaluation {m_eval / 1e6:8.1f} MB; envelope "
          f"{m_env / 1e6:8.1f} MB; ratio {m_env / m_eval:6.2f}x  (target <= 3x: {met})")
    if args.no_diff:
        records.write(args.json)
        return 0

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
        inside = Envelope(s.nominal, s.samples, forced, module).check(plain.actual)
        t_forced = time.perf_counter() - t0
    print(f"diff vs XLA:CPU (compile + run + verdict): {t_plain:8.3f} s, verdict {plain.verdict}"
          f" ({'envelope used' if plain.envelope is not None else 'within the ULP floor'})")
    print(f"diff on XLA's returned value (no XLA run):  {t_judge:8.3f} s, verdict {full.verdict}")
    print(f"envelope forced on XLA's value:             {t_forced:8.3f} s, "
          f"{'inside' if inside.ok else 'OUTSIDE'} (at most {inside.max_position:.2f} of the "
          f"half-width)")
    print(f"diff with the envelope forced, in process:  {t_plain + t_forced:8.3f} s "
          f"(the whole command, process start and imports included: targets.py)")
    records.write(args.json)
    return 0


def _once(fn) -> tuple[float, float]:
    """CPU and wall seconds of one call of ``fn``."""
    c0, w0 = time.process_time(), time.perf_counter()
    fn()
    return time.process_time() - c0, time.perf_counter() - w0


def _xla_times(lowered, args) -> tuple[float, float, float]:
    """XLA:CPU on the same module: compile wall seconds, and the median wall and CPU
    seconds of three runs (after one warm-up run)."""
    import statistics

    import jax
    t0 = time.perf_counter()
    compiled = lowered.compile()
    compile_s = time.perf_counter() - t0

    def run():
        jax.block_until_ready(compiled(*args))

    runs = [_once(run) for _ in range(4)][1:]
    return (compile_s, statistics.median(r[1] for r in runs),
            statistics.median(r[0] for r in runs))


def _peak_bytes(fn) -> int:
    """The most bytes ``fn`` had allocated at once beyond what was live before it."""
    import tracemalloc
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        fn()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


if __name__ == "__main__":
    sys.exit(main())
