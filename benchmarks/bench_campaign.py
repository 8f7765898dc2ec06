"""Campaign throughput: programs per second and where the time goes, with batched
oracle runs and without, measured in the same run.

    .venv/bin/python benchmarks/bench_campaign.py [--time 2m] [--workers 2] [--seed 0]
        [--batch 16] [--rounds 2] [--replay findings/xla-cpu-jaxlib-0.10.2] [--json FILE]

Runs the same fixed-seed campaign against XLA:CPU twice: ``--batch 1`` (every program
compiled alone, as before batching: "before") and ``--batch B`` ("after"). The machine's
speed drifts (shared cores), so each campaign's time is cut into ``--rounds``
stretches run in turns (before, after, after, before, ...); a campaign resumes from its
``--out`` directory, so each is one campaign with the seed it started with. Prints,
per mode: programs, programs/s, CPU milliseconds per program (the campaign's processes,
user plus system: what a shared machine's load distorts least), the time split (generation, hloref, XLA compile, XLA
run, comparison, process hops, reduction; milliseconds per program, summed over
workers), opcodes and element types covered, outcomes and findings; then the coverage
and findings each mode has that the other lacks, and (``--replay``) which stored
findings still reproduce (``hloref replay``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
import warnings

from hloref.fuzz.campaign import CampaignOptions, parse_duration, run_campaign
from hloref.fuzz.findings import finding_dirs, replay
from hloref.fuzz.stats import TIME_PARTS, Stats


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished descendants (the campaign's worker
    processes and their oracle processes), user plus system."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _campaign(out: str, seconds: float, args, batch: int) -> float:
    """Run (or resume) one stretch; returns the CPU seconds it took."""
    opts = CampaignOptions(out=out, seconds=seconds, workers=args.workers, seed=args.seed,
                           batch=batch, blame=False, quiet=True)
    c0 = _cpu_seconds()
    run_campaign(opts)
    return _cpu_seconds() - c0


def _totals(out: str) -> Stats:
    with open(os.path.join(out, "campaign.json"), encoding="utf-8") as f:
        return Stats.from_json(json.load(f)["totals"])


def _signatures(out: str) -> dict:
    sigs = {}
    for name in finding_dirs(out):
        with open(os.path.join(out, name, "finding.json"), encoding="utf-8") as f:
            meta = json.load(f)
        sigs[name] = meta.get("signature")
    return sigs


def main(argv=None) -> int:
    warnings.filterwarnings("ignore")
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--time", default="2m", help="campaign length per mode (default 2m)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch", type=int, default=16, help="programs per oracle module (after)")
    p.add_argument("--rounds", type=int, default=2, help="stretches per mode, run in turns")
    p.add_argument("--replay", help="a findings directory to replay (hloref replay)")
    p.add_argument("--json", help="write the figures here")
    p.add_argument("--keep", help="keep the campaigns' directories under this directory")
    args = p.parse_args(argv)
    total = parse_duration(args.time)
    root = args.keep or tempfile.mkdtemp(prefix="bench-campaign-")
    modes = {"before (--batch 1)": 1, f"after (--batch {args.batch})": args.batch}
    outs = {m: os.path.join(root, f"batch-{b}") for m, b in modes.items()}
    for out in outs.values():
        shutil.rmtree(out, ignore_errors=True)
    stretch = total / max(1, args.rounds)
    names = list(modes)
    print(f"{len(modes)} campaigns of {total:g} s (seed {args.seed}, {args.workers} workers), "
          f"in {args.rounds} stretches each, run in turns; load average "
          f"{os.getloadavg()[0]:.1f} at the start", flush=True)
    t0 = time.time()
    cpu = dict.fromkeys(names, 0.0)
    for r in range(max(1, args.rounds)):
        for m in (names if r % 2 == 0 else names[::-1]):
            cpu[m] += _campaign(outs[m], stretch, args, modes[m])
            s = _totals(outs[m])
            print(f"  round {r + 1}: {m}: {s.programs} programs so far", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} at the end ({time.time() - t0:.0f} s); the "
          "machine is shared: figures are as measured", flush=True)
    results = {}
    for m, out in outs.items():
        s = _totals(out)
        per = 1e3 / max(1, s.programs)
        results[m] = {
            "programs": s.programs, "seconds": s.seconds,
            "programs_per_second": s.programs / max(s.seconds, 1e-9),
            "cpu_ms_per_program": cpu[m] * 1e3 / max(1, s.programs),
            "ms_per_program": {label: getattr(s, name) * per for name, label in TIME_PARTS},
            "opcodes": sorted(s.opcodes), "element_types": sorted(s.element_types),
            "outcomes": dict(s.outcomes), "findings": _signatures(out),
            "batches": s.batches, "alone_runs": s.alone_runs, "confirmations": s.confirmations,
            "batch_only": s.batch_only, "batch_splits": s.batch_splits,
        }
    labels = [label for _, label in TIME_PARTS]
    print("\n| mode | programs | programs/s | CPU ms/program | "
          + " | ".join(f"{x} ms" for x in labels) + " | opcodes | types |")
    print("|---" * (6 + len(labels)) + "|")
    for m, r in results.items():
        print(f"| {m} | {r['programs']} | {r['programs_per_second']:.1f} | "
              f"{r['cpu_ms_per_program']:.0f} | "
              + " | ".join(f"{r['ms_per_program'][x]:.1f}" for x in labels)
              + f" | {len(r['opcodes'])} | {len(r['element_types'])} |")
    before, after = (results[m] for m in names)
    print(f"\nspeed-up: {after['programs_per_second'] / max(before['programs_per_second'], 1e-9):.2f}x"
          f" in programs/s, {before['cpu_ms_per_program'] / max(after['cpu_ms_per_program'], 1e-9):.2f}x"
          " in CPU time per program (all processes: the figure a busy machine distorts least)")
    print(f"after: {after['batches']} batches, {after['alone_runs']} runs alone, "
          f"{after['confirmations']} confirmations alone ({after['batch_only']} only in the "
          f"batch), {after['batch_splits']} batches split")
    for a, b, an, bn in ((before, after, names[0], names[1]), (after, before, names[1], names[0])):
        ops = sorted(set(a["opcodes"]) - set(b["opcodes"]))
        types = sorted(set(a["element_types"]) - set(b["element_types"]))
        print(f"covered by {an} only: opcodes {ops or 'none'}, element types {types or 'none'}")
    for m, r in results.items():
        print(f"{m}: outcomes {r['outcomes']}; findings: "
              + (", ".join(f"{n} {s['opcodes']} {s['element_types']}" for n, s in
                           r["findings"].items()) or "none"))
    if args.replay:
        rep = replay([args.replay])
        n = sum(r["reproduces"] for r in rep)
        print(f"\nreplay of {args.replay}: {n} of {len(rep)} findings reproduce")
        for r in rep:
            print(f"  {'REPRODUCES' if r['reproduces'] else 'no':10s} "
                  f"{os.path.basename(r['path'])}: {r['classification']}")
        results["replay"] = [{k: r[k] for k in ("path", "verdict", "reproduces",
                                                "classification")} for r in rep]
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
