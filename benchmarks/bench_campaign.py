"""Campaign throughput: programs per second and where the time goes, before and after,
measured in the same run.

    .venv/bin/python benchmarks/bench_campaign.py [--time 2m] [--workers 2] [--seed 0]
        [--before REV] [--modes before,after,fast] [--rounds 2]
        [--replay findings/xla-cpu-jaxlib-0.10.2] [--json FILE] [--keep DIR]

Runs the same fixed-seed campaign against XLA:CPU in several modes:

* ``before``: the code of git revision ``--before`` (default ``BEFORE_REV``, the state
  before the changes this benchmark measures), checked out into a temporary
  directory and imported from there (``PYTHONPATH``: its worker processes and oracle
  processes too), with its defaults (``--batch 16``);
* ``after``: this checkout, its defaults (``--xla-opt default``);
* ``fast``: this checkout with ``--xla-opt fast`` (LLVM at -O0: less of XLA tested,
  see the README);
* ``batch1``: this checkout with ``--batch 1`` (every program compiled alone).

The machine's speed drifts (shared cores), so each campaign's time is cut into
``--rounds`` stretches run in turns (the order reversed every round); a campaign
resumes from its ``--out`` directory, so each is one campaign with the seed it
started with. Each stretch runs in a subprocess. Prints, per mode: programs,
programs/s, CPU milliseconds per program (the campaign's processes, user plus
system: what a shared machine's load distorts least), the time split (generation,
hloref, XLA compile, XLA run, comparison, process hops, reduction; milliseconds per
program, summed over workers), opcodes and element types covered, outcomes, oracle
processes started and findings; then the coverage and findings each mode has that
``before`` lacks, and (``--replay``) which stored findings still reproduce
(``hloref replay``, with this checkout).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

#: The revision "before" runs by default: the campaign code before the throughput
#: work of issue #14 (zygote-forked oracle processes, shared refusals, --xla-opt).
BEFORE_REV = "c260fac"

MODES = {  # name -> (label, CampaignOptions overrides, runs this checkout)
    "before": ("before ({rev}, --batch 16)", {}, False),
    "after": ("after (--batch 16)", {}, True),
    "fast": ("after, --xla-opt fast", {"xla_opt": "fast"}, True),
    "batch1": ("after, --batch 1", {"batch": 1}, True),
}

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _cpu_seconds() -> float:
    """CPU time of this process's finished descendants (the stretch subprocess, its
    worker processes and their oracle processes), user plus system."""
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return kids.ru_utime + kids.ru_stime


def _checkout(rev: str, where: str) -> str:
    """``rev``'s tree laid out as the installed package (``hloref``, ``hloref.evaluator``,
    ``hloref.gpu``, ``hloref.fuzz``: pyproject's package-dir) under ``where``; returns
    the directory to put on ``PYTHONPATH``."""
    src = os.path.join(where, "src")
    os.makedirs(src, exist_ok=True)
    archive = subprocess.run(["git", "-C", ROOT, "archive", rev], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", src], input=archive, check=True)
    pkg = os.path.join(where, "pkg")
    shutil.copytree(os.path.join(src, "hloref"), os.path.join(pkg, "hloref"))
    for sub, folder in (("evaluator", "evaluator"), ("gpu", "gpu"), ("fuzz", "fuzz")):
        if os.path.isdir(os.path.join(src, folder)):
            shutil.copytree(os.path.join(src, folder), os.path.join(pkg, "hloref", sub))
    return pkg


def _stretch(out: str, seconds: float, args, overrides: dict, pythonpath: str | None) -> float:
    """Run (or resume) one stretch in a subprocess; returns the CPU seconds it took."""
    spec = {"out": out, "seconds": seconds, "workers": args.workers, "seed": args.seed,
            "blame": False, "quiet": True, **overrides}
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + (os.pathsep + env["PYTHONPATH"]
                                          if env.get("PYTHONPATH") else "")
    c0 = _cpu_seconds()
    subprocess.run([sys.executable, os.path.abspath(__file__), "--stretch", json.dumps(spec)],
                   env=env, check=True, cwd=ROOT if not pythonpath else os.path.dirname(pythonpath))
    return _cpu_seconds() - c0


def _run_stretch(spec: str) -> int:
    warnings.filterwarnings("ignore")
    from hloref.fuzz.campaign import CampaignOptions, run_campaign
    run_campaign(CampaignOptions(**json.loads(spec)))
    return 0


def _totals(out: str):
    from hloref.fuzz.stats import Stats
    with open(os.path.join(out, "campaign.json"), encoding="utf-8") as f:
        return Stats.from_json(json.load(f)["totals"])


def _signatures(out: str) -> dict:
    from hloref.fuzz.findings import finding_dirs
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
    p.add_argument("--before", default=BEFORE_REV, help="git revision of the 'before' mode")
    p.add_argument("--modes", default="before,after,fast",
                   help=f"comma-separated, of {', '.join(MODES)} (default before,after,fast)")
    p.add_argument("--rounds", type=int, default=2, help="stretches per mode, run in turns")
    p.add_argument("--warmup", default="15s",
                   help="a first campaign per mode, not counted (default 15s; 0: none)")
    p.add_argument("--replay", help="a findings directory to replay (hloref replay)")
    p.add_argument("--json", help="write the figures here")
    p.add_argument("--keep", help="keep the campaigns' directories under this directory")
    p.add_argument("--stretch", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.stretch:
        return _run_stretch(args.stretch)

    from hloref.fuzz.campaign import parse_duration
    from hloref.fuzz.replay import replay
    from hloref.fuzz.stats import TIME_PARTS

    total = parse_duration(args.time)
    root = os.path.abspath(args.keep or tempfile.mkdtemp(prefix="bench-campaign-"))
    names = [m for m in args.modes.split(",") if m]
    bad = [m for m in names if m not in MODES]
    if bad:
        p.error(f"unknown mode(s) {bad}; expected {list(MODES)}")
    labels = {m: MODES[m][0].format(rev=args.before) for m in names}
    outs = {m: os.path.join(root, m) for m in names}
    for out in outs.values():
        shutil.rmtree(out, ignore_errors=True)
    paths = {m: None for m in names}
    if "before" in names:
        paths["before"] = _checkout(args.before, os.path.join(root, "before-tree"))
    stretch = total / max(1, args.rounds)
    warm = parse_duration(args.warmup) if args.warmup else 0.0
    if warm:  # Numba's on-disk caches of a fresh checkout, the OS's file caches
        for m in names:
            _stretch(os.path.join(root, f"warmup-{m}"), warm, args, MODES[m][1], paths[m])
        print(f"warmed up: {warm:g} s per mode (not counted)", flush=True)
    print(f"{len(names)} campaigns of {total:g} s (seed {args.seed}, {args.workers} workers), "
          f"in {args.rounds} stretches each, run in turns; load average "
          f"{os.getloadavg()[0]:.1f} at the start", flush=True)
    t0 = time.time()
    cpu = dict.fromkeys(names, 0.0)
    for r in range(max(1, args.rounds)):
        for m in (names if r % 2 == 0 else names[::-1]):
            cpu[m] += _stretch(outs[m], stretch, args, MODES[m][1], paths[m])
            print(f"  round {r + 1}: {labels[m]}: {_totals(outs[m]).programs} programs so far",
                  flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} at the end ({time.time() - t0:.0f} s); the "
          "machine is shared: figures are as measured", flush=True)
    results = {}
    for m, out in outs.items():
        s = _totals(out)
        per = 1e3 / max(1, s.programs)
        results[m] = {
            "label": labels[m], "programs": s.programs, "seconds": s.seconds,
            "programs_per_second": s.programs / max(s.seconds, 1e-9),
            "cpu_ms_per_program": cpu[m] * 1e3 / max(1, s.programs),
            "ms_per_program": {label: getattr(s, name) * per for name, label in TIME_PARTS},
            "opcodes": sorted(s.opcodes), "element_types": sorted(s.element_types),
            "outcomes": dict(s.outcomes), "findings": _signatures(out),
            "batches": s.batches, "alone_runs": s.alone_runs, "confirmations": s.confirmations,
            "batch_only": s.batch_only, "batch_splits": s.batch_splits,
            "oracle_starts": None if m == "before" else s.oracle_starts,
        }
    parts = [label for _, label in TIME_PARTS]
    print("\n| mode | programs | programs/s | CPU ms/program | "
          + " | ".join(f"{x} ms" for x in parts) + " | opcodes | types |")
    print("|---" * (6 + len(parts)) + "|")
    for m, r in results.items():
        print(f"| {r['label']} | {r['programs']} | {r['programs_per_second']:.1f} | "
              f"{r['cpu_ms_per_program']:.0f} | "
              + " | ".join(f"{r['ms_per_program'][x]:.1f}" for x in parts)
              + f" | {len(r['opcodes'])} | {len(r['element_types'])} |")
    print("\n(time parts: wall-clock milliseconds per program, summed over workers)")
    base = results[names[0]]
    for m, r in results.items():
        print(f"{r['label']}: {r['batches']} batches, {r['alone_runs']} runs alone, "
              f"{r['confirmations']} confirmations alone ({r['batch_only']} only in the batch), "
              f"{r['batch_splits']} batches split, oracle processes started: "
              f"{r['oracle_starts'] if r['oracle_starts'] is not None else 'not counted'}")
        if m != names[0]:
            print(f"  vs {base['label']}: "
                  f"{r['programs_per_second'] / max(base['programs_per_second'], 1e-9):.2f}x "
                  f"programs/s, {base['cpu_ms_per_program'] / max(r['cpu_ms_per_program'], 1e-9):.2f}x"
                  " less CPU per program")
            for a, b, what in ((r, base, "only"), (base, r, "not")):
                ops = sorted(set(a["opcodes"]) - set(b["opcodes"]))
                types = sorted(set(a["element_types"]) - set(b["element_types"]))
                print(f"  covered by {r['label'] if what == 'only' else base['label']} only: "
                      f"opcodes {ops or 'none'}, element types {types or 'none'}")
    for m, r in results.items():
        print(f"{r['label']}: outcomes {r['outcomes']}; findings: "
              + (", ".join(f"{n} {s and s['opcodes']} {s and s['element_types']}" for n, s in
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
