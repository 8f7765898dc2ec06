"""Reach of a mutation campaign against the generator's, measured side by side in one
run (issue #30).

    .venv/bin/python benchmarks/bench_reach.py [--time 10m] [--workers 2] [--seed 0]
        [--arms generator,mixed] [--types mainstream] [--realistic all]
        [--pass-coverage 4] [--ceiling ceiling.json] [--keep DIR] [--json FILE]

Each arm is one ``hloref fuzz`` campaign with the same seed, time and number of
workers, every arm probing the same share of its programs for pass coverage
(``--pass-coverage N``: one program in N is compiled again with XLA's per-pass dump).
The arms run **at the same time**, each in its own subprocess (the arms without
mutants start when the mutation arms' seed corpora are written, so that every clock
starts together), so that they share the machine's load (a shared machine's speed drifts by a factor of two within minutes;
run one after the other, the second arm would see another machine). The arms:

* ``generator``: the generator alone (``--types``);
* ``mixed``: ``--mutate --mix 0.5``: half the programs generated, half mutants of the
  seed corpus (``--realistic``, examples; seeds larger than 16 instructions replaced by
  cuts of them), mutants that reach a new (pass, opcode) or (emitter, type) pair kept
  as seeds;
* ``mutants``: ``--mutate --mix 0``, mutants only;
* ``mutants-whole``: ``--mutate --mix 0 --cut-seeds 0`` (whole seeds up to 150
  instructions: how issue #30's first mutation campaigns ran).

Prints the machine's load average while the arms ran, and per arm: programs, programs
per second (of the testing: the mismatches found are reduced after it, as every
campaign does), distinct passes that changed at least one probed program, (pass,
opcode) pairs, (emitter, element type) pairs, probes, findings, outcomes, the time
split; then each arm's ratio to ``generator`` and the
passes and pairs it has that ``generator`` lacks. ``--ceiling`` (the JSON of
``benchmarks/reach_ceiling.py``) adds how many of the passes that change any realistic
program each arm reached.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ARMS = {
    "generator": [],
    "mixed": ["--mutate", "--mix", "0.5"],
    "mutants": ["--mutate", "--mix", "0"],
    "mutants-whole": ["--mutate", "--mix", "0", "--cut-seeds", "0", "--realistic", "default"],
}


def _command(arm: str, args, out: str) -> list[str]:
    cmd = [sys.executable, "-m", "hloref", "fuzz", "--time", args.time,
           "--workers", str(args.workers), "--seed", str(args.seed), "--types", args.types,
           "--pass-coverage", str(args.pass_coverage), "--out", os.path.join(out, arm),
           "--json-summary", os.path.join(out, f"{arm}.json")]
    extra = list(ARMS[arm])
    if "--mutate" in extra and "--realistic" not in extra:
        extra += ["--realistic", args.realistic]
    return cmd + extra


def run_arms(args, out: str) -> dict:
    procs = {}
    env = dict(os.environ, NUMBA_CACHE_DIR=os.environ.get(
        "NUMBA_CACHE_DIR", os.path.join(ROOT, ".numba_cache")))

    def start(arm):
        log = open(os.path.join(out, f"{arm}.log"), "w", encoding="utf-8")
        procs[arm] = (subprocess.Popen(_command(arm, args, out), cwd=ROOT, env=env,
                                       stdout=log, stderr=subprocess.STDOUT), log)

    # a mutation arm first prepares its seed corpus (a minute: lowering is cached, cutting
    # is not) before its clock starts; the other arms start when every corpus is written
    mutating = [a for a in args.arms if "--mutate" in ARMS[a]]
    for arm in mutating:
        start(arm)
    t0 = time.time()
    while mutating and time.time() - t0 < 900:
        if all(os.path.exists(os.path.join(out, a, ".reach", "seeds", "index.json"))
               or procs[a][0].poll() is not None for a in mutating):
            break
        time.sleep(0.5)
    for arm in args.arms:
        if arm not in procs:
            start(arm)
    # the machine's load while the arms run (one-minute load average, every 30 s)
    loads = []
    while any(proc.poll() is None for proc, _ in procs.values()):
        loads.append(os.getloadavg()[0])
        for _ in range(60):
            if all(proc.poll() is not None for proc, _ in procs.values()):
                break
            time.sleep(0.5)
    args.loads = loads
    results = {}
    for arm, (proc, log) in procs.items():
        proc.wait()
        log.close()
        path = os.path.join(out, f"{arm}.json")
        if proc.returncode not in (0, 1) or not os.path.exists(path):
            with open(os.path.join(out, f"{arm}.log"), encoding="utf-8") as f:
                tail = f.read()[-2000:]
            raise SystemExit(f"arm {arm} failed (exit {proc.returncode}):\n{tail}")
        with open(path, encoding="utf-8") as f:
            results[arm] = json.load(f)
    return results


def _row(arm: str, s: dict, ceiling: set | None) -> dict:
    c = s.get("pass_coverage", {})
    passes = {p for p, _ in c.get("pairs", [])}
    return {"arm": arm, "programs": s["programs"],
            "programs_per_second": round(s["programs_per_second"], 3),
            "testing_seconds": round(s["seconds"], 1),
            "reduction_after_testing_seconds": round(
                s.get("reduction_after_testing_seconds", 0.0), 1),
            "passes": len(passes), "pairs": c.get("pass_opcode_pairs", 0),
            "emitter_pairs": c.get("emitter_type_pairs", 0), "probes": c.get("probes", 0),
            "probe_seconds": c.get("probe_seconds", 0.0),
            "kept_for_new_pairs": c.get("kept_for_new_pairs", 0),
            "findings": s.get("new_findings", 0), "outcomes": s.get("outcomes", {}),
            "time_split": s.get("time_split", {}),
            "ceiling_passes": len(passes & ceiling) if ceiling is not None else None,
            "_passes": passes, "_pairs": {tuple(p) for p in c.get("pairs", [])}}


def report(rows: list[dict], ceiling: set | None) -> str:
    lines = ["| arm | programs | programs/s | passes | (pass, opcode) pairs | "
             "(emitter, type) pairs | probes | kept seeds | findings |"
             + (" of the ceiling's passes |" if ceiling is not None else ""),
             "|---|---|---|---|---|---|---|---|---|" + ("---|" if ceiling is not None else "")]
    for r in rows:
        lines.append(f"| {r['arm']} | {r['programs']} | {r['programs_per_second']:.2f} | "
                     f"{r['passes']} | {r['pairs']} | {r['emitter_pairs']} | {r['probes']} | "
                     f"{r['kept_for_new_pairs']} | {r['findings']} |"
                     + (f" {r['ceiling_passes']} of {len(ceiling)} |"
                        if ceiling is not None else ""))
    base = next((r for r in rows if r["arm"] == "generator"), None)
    if base:
        for r in rows:
            if r is base:
                continue
            ratio = lambda a, b: f"{a / b:.2f}" if b else "-"  # noqa: E731
            lines.append("")
            lines.append(f"{r['arm']} / generator: passes {ratio(r['passes'], base['passes'])}, "
                         f"pairs {ratio(r['pairs'], base['pairs'])}, programs/s "
                         f"{ratio(r['programs_per_second'], base['programs_per_second'])}")
            lines.append(f"  passes only {r['arm']} reached: "
                         + ", ".join(sorted(r["_passes"] - base["_passes"])))
            lines.append(f"  passes only generator reached: "
                         + ", ".join(sorted(base["_passes"] - r["_passes"])))
            lines.append(f"  pairs only in {r['arm']}: {len(r['_pairs'] - base['_pairs'])}; "
                         f"union of the two: {len(r['_pairs'] | base['_pairs'])} pairs, "
                         f"{len(r['_passes'] | base['_passes'])} passes")
    for r in rows:
        split = ", ".join(f"{k} {v:.0f} s" if isinstance(v, (int, float)) else f"{k} {v}"
                          for k, v in r["time_split"].items())
        after = r["reduction_after_testing_seconds"]
        lines.append(f"{r['arm']}: outcomes {r['outcomes']}; time: {split}; testing "
                     f"{r['testing_seconds']:.0f} s, then {after:.0f} s reducing its mismatches "
                     f"and closing")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--time", default="10m")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--arms", default="generator,mixed")
    p.add_argument("--types", default="mainstream")
    p.add_argument("--realistic", default="all")
    p.add_argument("--pass-coverage", type=int, default=4)
    p.add_argument("--ceiling", help="the JSON benchmarks/reach_ceiling.py wrote")
    p.add_argument("--keep", help="keep the campaigns' directories here")
    p.add_argument("--json")
    args = p.parse_args(argv)
    args.arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    bad = [a for a in args.arms if a not in ARMS]
    if bad:
        p.error(f"unknown arms {bad}; known: {sorted(ARMS)}")
    ceiling = None
    if args.ceiling:
        with open(args.ceiling, encoding="utf-8") as f:
            ceiling = set(json.load(f)["changing_passes"])
    out = args.keep or tempfile.mkdtemp(prefix="hloref-bench-reach-")
    os.makedirs(out, exist_ok=True)
    t0 = time.time()
    try:
        results = run_arms(args, out)
    finally:
        if not args.keep:
            shutil.rmtree(out, ignore_errors=True)
    rows = [_row(a, results[a], ceiling) for a in args.arms]
    loads = args.loads or [0.0]
    print(f"{len(args.arms)} arms at the same time, {args.time} each, {args.workers} workers "
          f"each, seed {args.seed}, --types {args.types}, --pass-coverage "
          f"{args.pass_coverage} ({time.time() - t0:.0f} s wall; load average "
          f"{min(loads):.1f} to {max(loads):.1f}, mean {sum(loads) / len(loads):.1f}, on "
          f"{os.cpu_count()} cores)")
    print(report(rows, ceiling))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump([{k: v for k, v in r.items() if not k.startswith("_")} | {
                "passes_reached": sorted(r["_passes"])} for r in rows], f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
