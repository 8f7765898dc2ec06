"""What ``pytest --hloref`` adds to jax's own tests (issue 32, item 6): fixed slices of
``lax_test.py``, ``lax_numpy_test.py``, ``linalg_test.py`` and ``random_test.py``,
each run with and without ``--hloref``, in alternating order, ``--rounds`` times.

    python benchmarks/bench_pytest_overhead.py --tests JAX/tests [--rounds 3]
        [--files lax_test.py:0/12,lax_numpy_test.py:0/16,linalg_test.py:0/5,random_test.py:0/2]
        [--inline] [--keep DIR]

``--tests``: jax's ``tests/`` directory for the installed jax (jax-v0.10.2's here); it is
copied to a temporary directory first. A slice ``FILE:K/N`` keeps the tests whose
node id's sha256 is K modulo N (a plugin this script writes beside the copy; no
pytest-xdist), the same tests in every run. Prints, per file, the median wall time
without and with ``--hloref``, the median of the per-round ratios beside its target
(1.15x for lax and lax_numpy, 1.5x for linalg and random), the same for CPU time
(the test processes and their children: what other work on a shared machine does not
inflate) and of the test's process alone (the CPU time less the background checker's,
which the summary prints: the time on the tests' critical path when the checker
keeps up on another core), the load average at the start, and the plugin's counts
(computations checked, matched, mismatched, skipped, repeats). ``--inline`` also runs
``--hloref --hloref-inline`` (checking in the test's process, as before the
background checker) as a third arm. ``--hloref-no-blame`` is not passed: a mismatch
costs its blame, as a user sees it.

Run it with nothing else on the machine: on a loaded machine the background checker
waits for a core like everything else, and the wall-time ratio measures the load.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from targets_json import Records  # noqa: E402

TARGETS = {"lax_test.py": 1.15, "lax_numpy_test.py": 1.15, "linalg_test.py": 1.5,
           "random_test.py": 1.5}
DEFAULT_FILES = "lax_test.py:0/12,lax_numpy_test.py:0/16,linalg_test.py:0/5,random_test.py:0/2"

SLICER = '''"""Keep the tests whose node id's sha256 is K modulo N (HLOREF_BENCH_SLICE="K/N")."""
import hashlib, os

def pytest_collection_modifyitems(config, items):
    spec = os.environ.get("HLOREF_BENCH_SLICE")
    if not spec:
        return
    k, n = map(int, spec.split("/"))
    keep, drop = [], []
    for item in items:
        h = int.from_bytes(hashlib.sha256(item.nodeid.encode()).digest()[:4], "big")
        (keep if h % n == k else drop).append(item)
    items[:] = keep
    config.hook.pytest_deselected(items=drop)
'''

COUNTS = re.compile(r"hloref: (\d+) computations checked: (\d+) matched.*?, (\d+) mismatched; "
                    r"(\d+) skipped as unsupported, (\d+) skipped over --hloref-max-elements=\d+,"
                    r" (\d+) other skips; (\d+) repeated executions")
CHECKER = re.compile(r"the checker used ([\d.]+) CPU s(?: \(([\d.]+) s with its start and end\))?")


def run_once(workdir: str, test_file: str, slice_spec: str, extra: list[str]) -> dict:
    env = dict(os.environ, HLOREF_BENCH_SLICE=slice_spec,
               PYTHONPATH=os.pathsep.join([workdir, os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "hloref_bench_slice",
           "-q", *extra, test_file]
    load0 = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out = proc.stdout + proc.stderr
    outcome = out.strip().splitlines()[-1] if out.strip() else "(no output)"
    m = COUNTS.search(out)
    counts = None
    if m:
        c = dict(zip(["checked", "matched", "mismatched", "unsupported", "over", "other",
                      "repeats"], map(int, m.groups())))
        counts = (f"{c['checked']} checked: {c['matched']} matched, {c['mismatched']} "
                  f"mismatched; skipped {c['unsupported']} unsupported, {c['over']} over the "
                  f"limit, {c['other']} other; {c['repeats']} repeats")
    m = CHECKER.search(out)
    checker = float(m.group(2) or m.group(1)) if m else 0.0
    return {"wall": wall, "cpu": cpu, "checker": checker, "load": (load0, os.getloadavg()[0]),
            "outcome": re.sub(r"=+", "", outcome).strip(), "counts": counts, "rc": proc.returncode}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tests", required=True, help="jax's tests/ directory")
    parser.add_argument("--files", default=DEFAULT_FILES)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--inline", action="store_true",
                        help="also run --hloref --hloref-inline (checking in the test's process)")
    parser.add_argument("--keep", help="copy jax's tests here (kept) instead of a temp dir")
    parser.add_argument("--json", help="also write the target records here (targets.py)")
    args = parser.parse_args(argv)
    if not os.path.isdir(args.tests):
        parser.error(f"--tests {args.tests}: no such directory (jax's tests/ for jax "
                     "0.10.2, e.g. from the jax-v0.10.2 source archive)")
    workdir = args.keep or tempfile.mkdtemp(prefix="hloref-bench-pytest-")
    target = os.path.join(workdir, "tests")
    if not os.path.isdir(target):
        shutil.copytree(args.tests, target)
    with open(os.path.join(target, "hloref_bench_slice.py"), "w", encoding="utf-8") as f:
        f.write(SLICER)
    repro = os.path.join(workdir, "reproducers")
    arms = {"plain": [], "hloref": ["--hloref", f"--hloref-out={repro}"]}
    if args.inline:
        arms["inline"] = ["--hloref", "--hloref-inline", f"--hloref-out={repro}"]
    print(f"jax's tests copied to {target}; {os.cpu_count()} cores; {args.rounds} rounds, "
          "arms in alternating order")
    rows = []
    for spec in args.files.split(","):
        test_file, slice_spec = spec.split(":") if ":" in spec else (spec, "0/1")
        runs: dict[str, list] = {a: [] for a in arms}
        for r in range(args.rounds):
            order = list(arms) if r % 2 == 0 else list(reversed(arms))
            for arm in order:
                res = run_once(target, test_file, slice_spec, arms[arm])
                runs[arm].append(res)
                print(f"  {test_file} [{slice_spec}] round {r + 1} {arm:7s}: "
                      f"{res['wall']:7.1f} s wall, {res['cpu']:7.1f} s CPU, load "
                      f"{res['load'][0]:.1f}->{res['load'][1]:.1f}; {res['outcome']}",
                      flush=True)
        rows.append((test_file, slice_spec, runs))
    print()
    print("| file | slice | arm | wall s (median) | ratio (median of rounds) | target | "
          "CPU s | CPU ratio | test process CPU ratio | load | counts |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    records = Records()
    for test_file, slice_spec, runs in rows:
        plain = runs["plain"]
        for arm, rs in runs.items():
            wall = statistics.median(x["wall"] for x in rs)
            cpu = statistics.median(x["cpu"] for x in rs)
            load = statistics.median(x["load"][0] for x in rs)
            if arm == "plain":
                ratio = cpu_ratio = main_ratio = "1.00"
                verdict = ""
            else:
                r = statistics.median(a["wall"] / b["wall"] for a, b in zip(rs, plain))
                cr = statistics.median(a["cpu"] / b["cpu"] for a, b in zip(rs, plain))
                mr = statistics.median((a["cpu"] - a["checker"]) / b["cpu"]
                                       for a, b in zip(rs, plain))
                ratio, cpu_ratio, main_ratio = f"{r:.2f}", f"{cr:.2f}", f"{mr:.2f}"
                t = TARGETS.get(test_file)
                verdict = f"<= {t}x: {records.add('32.6', f'pytest --hloref {test_file} [{slice_spec}] / pytest (wall)', r, t)}" if t else ""
            counts = rs[-1]["counts"] or ""
            print(f"| {test_file} | {slice_spec} | {arm} | {wall:.1f} | {ratio} | {verdict} | "
                  f"{cpu:.1f} | {cpu_ratio} | {main_ratio} | {load:.1f} | {counts} |")
    records.write(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
