"""Calibrate the numerical envelope on the realistic programs: how close do correct
answers come to its edge, over many envelope seeds?

    python ci/envelope_calibration.py [--seeds 20] [--samples 8] [--widen 2] [--only A,B]
                                      [--out DIR] [--no-excess-precision] [--json FILE]

For each program of tests/realistic_programs.py (the large one excepted), two
correct answers are judged: XLA:CPU's result for the unoptimized module, and XLA's
optimized module evaluated by hloref. Each is judged against the envelope sampled
with ``--seeds`` different seeds. The *position* of an answer is its largest
distance from hloref's value in envelope half-widths (above 1 = outside = a false
alarm). Prints per program the largest position over seeds and the number of false
alarms, then the totals: the measured false-alarm rate per judgement.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--widen", type=float, default=2.0)
    parser.add_argument("--only", help="comma-separated program names")
    parser.add_argument("--out", help="materialize the programs here (default: a temp dir)")
    parser.add_argument("--no-excess-precision", action="store_true")
    parser.add_argument("--json", help="write the per-program figures here")
    args = parser.parse_args(argv)

    import numpy as np
    import realistic_programs as rp

    import hloref
    from hloref.api import coerce_argument
    from hloref.cli_common import read_npz, unflatten_arguments
    from hloref.fuzz.envelope import Envelope, EnvelopePolicy, sample
    from hloref.fuzz.workers import OracleWorker

    names = args.only.split(",") if args.only else [n for n in rp.PROGRAMS
                                                    if n != "transformer_train_large"]
    out = args.out or tempfile.mkdtemp(prefix="hloref-calibration-")
    debug = {"xla_allow_excess_precision": False} if args.no_excess_precision else None
    rows = []
    total = alarms = 0
    with OracleWorker("xla") as worker:
        for name in names:
            d = os.path.join(out, name)
            if not os.path.exists(os.path.join(d, "optimized.hlo")):
                rp.materialize(rp.PROGRAMS[name](), out, dump=False)
            module = hloref.parse(open(os.path.join(d, "module.hlo"), encoding="utf-8").read())
            values = unflatten_arguments(read_npz(os.path.join(d, "inputs.npz")),
                                         [p.shape for p in module.entry.parameters])
            values = [coerce_argument(v, p.shape, "argument") for v, p in
                      zip(values, module.entry.parameters)]
            xla = worker.run(module.to_text(), values, debug_options=debug)
            if not xla.ok:
                print(f"{name}: XLA {xla.kind}: {xla.message}")
                continue
            optimized = hloref.evaluate(
                hloref.parse(open(os.path.join(d, "optimized.hlo"), encoding="utf-8").read()),
                *values)
            positions = {"xla": [], "optimized": []}
            for seed in range(args.seeds):
                policy = EnvelopePolicy(samples=args.samples, widen=args.widen, seed=seed)
                if debug:
                    policy = policy.with_debug_options(debug)
                s = sample(module, values, policy)
                env = Envelope(s.nominal, s.samples, policy, module)
                for key, answer in (("xla", xla.value), ("optimized", optimized)):
                    v = env.check(answer)
                    positions[key].append(v.max_position if v.ok else 1.0 + 2.0 * v.widths)
            n_alarm = sum(p > 1 for ps in positions.values() for p in ps)
            total += 2 * args.seeds
            alarms += n_alarm
            row = {"program": name, "false_alarms": n_alarm, "judgements": 2 * args.seeds,
                   **{f"{k}_max_position": float(np.max(v)) for k, v in positions.items()},
                   **{f"{k}_median_position": float(np.median(v)) for k, v in positions.items()}}
            rows.append(row)
            print(f"{name:28s} XLA: max {row['xla_max_position']:.2f} median "
                  f"{row['xla_median_position']:.2f} | optimized: max "
                  f"{row['optimized_max_position']:.2f} median "
                  f"{row['optimized_median_position']:.2f} | false alarms {n_alarm}/"
                  f"{2 * args.seeds}", flush=True)
    print(f"\n{alarms} false alarms in {total} judgements ({args.samples} samples, widened "
          f"{args.widen:g}x, {args.seeds} seeds per program"
          f"{', excess precision off' if debug else ''})")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
