"""Every target of issue 32, each measured as a ratio (or a size) in one run, one table.

    python benchmarks/targets.py [--quick] [--pytest] [--json FILE]

Runs, each in its own process (so one's memory and threads do not reach another's):

* 32.1 the envelope of the 1,609-instruction step against one evaluation, CPU time and
  peak bytes (``bench_envelope.py --no-diff``);
* 32.2 the whole ``hloref diff`` command on that step (process start, imports, XLA's
  compile, the envelope), wall and CPU seconds of the child process;
* 32.3 fixed costs against numpy (``bench_core.py --quick``);
* 32.4 f32 and bf16 transcendentals at 1M elements against numpy, one thread
  (``bench_transcendentals.py``);
* 32.5 production sizes: XLA's bf16 layer norm [160,197,768] and a 2-layer transformer
  block at sequence 1,024 and width 768 (``production_programs.py``), each evaluated and
  enveloped, and the largest resident set of those processes against 8 GB;
* 32.6 with ``--pytest --jax-tests DIR`` (jax's ``tests/`` of the installed version):
  ``pytest --hloref`` on slices of jax's own tests against plain pytest
  (``bench_pytest_overhead.py``; about 8 minutes a round on a quiet machine).

Every child runs with ``OPENBLAS_NUM_THREADS=1`` unless the environment sets it: numpy's
products then run on one thread, as hloref's own do, and two BLAS threads on a shared
machine do not wait for each other.

Each benchmark measures its two sides in the same run (``timing.paired``). The table
gives each target, the value, and met or NOT met; docs/benchmarks.md explains, with a
profile, each one not met.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tests"))

from targets_json import Records  # noqa: E402


def _child(argv: list[str], env: dict | None = None) -> tuple[float, float, int, str]:
    """Run ``argv``; (wall s, CPU s of the child, its largest resident set in bytes,
    its output)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, env={**os.environ, **(env or {})},
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    output = done.stdout + done.stderr
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{output[-3000:]}")
    return wall, cpu, after.ru_maxrss * 1024, output


def _bench(script: str, args: list[str], env: dict | None = None) -> tuple[list[dict], str, int]:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    try:
        _, _, rss, output = _child([sys.executable, os.path.join(HERE, script), *args,
                                    "--json", path], env)
        with open(path, encoding="utf-8") as f:
            return json.load(f), output, rss
    finally:
        os.unlink(path)


def _diff_of_step(records: Records) -> str:
    import realistic_programs as rp
    out = tempfile.mkdtemp(prefix="hloref-targets-")
    m = rp.materialize(rp.PROGRAMS["transformer_train_large"](), out, dump=False)
    wall, cpu, _, output = _child([sys.executable, "-m", "hloref", "diff", m.module,
                                   "--inputs", m.inputs])
    verdict = next((line for line in output.splitlines() if "verdict" in line.lower()), "")
    records.add("32.2", "hloref diff of the step, end to end (wall s)", wall, 10.0, "s",
                note=verdict.strip()[:120])
    records.add("32.2", "hloref diff of the step, end to end (CPU s)", cpu, 10.0, "s")
    return output


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="fewer repeats, and no production size")
    parser.add_argument("--pytest", action="store_true",
                        help="also item 6, pytest --hloref on jax's tests (--jax-tests)")
    parser.add_argument("--jax-tests", help="jax's tests/ directory, for --pytest")
    parser.add_argument("--rounds", default="1", help="rounds of --pytest (default 1)")
    parser.add_argument("--json", help="write every record here")
    args = parser.parse_args(argv)
    if args.pytest and not args.jax_tests:
        parser.error("--pytest needs --jax-tests DIR (jax's tests/ of the installed version)")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    records = Records()
    repeat = "3" if args.quick else "5"

    def take(items):
        records.items.extend(items)

    print("32.1 envelope ...", flush=True)
    take(_bench("bench_envelope.py", ["--repeat", repeat, "--no-diff"])[0])
    print("32.2 diff of the step ...", flush=True)
    _diff_of_step(records)
    print("32.3 fixed costs ...", flush=True)
    take(_bench("bench_core.py", ["--quick", "--repeat", "15"])[0])
    print("32.4 transcendentals ...", flush=True)
    take(_bench("bench_transcendentals.py", ["--repeat", repeat], {"HLOREF_THREADS": "1"})[0])
    if not args.quick:
        print("32.5 production size ...", flush=True)
        items, _, rss = _bench("bench_envelope.py", ["--hlo", os.path.join(
            HERE, "layer_norm_bf16_160.hlo"), "--repeat", "1", "--no-diff"])
        block, _, rss = _bench("bench_envelope.py", ["--program", "transformer_block_1024",
                                                     "--once", "--no-diff"])
        for r in items + block:
            r["item"] = "32.5"
        take(items + block)
        records.add("32.5", "largest resident set of those benchmark processes (GB)",
                    rss / 1e9, 8.0, "GB")
    if args.pytest:
        print("32.6 pytest --hloref ...", flush=True)
        take(_bench("bench_pytest_overhead.py", ["--tests", args.jax_tests,
                                                 "--rounds", args.rounds])[0])

    print()
    print(f"{'item':5s} {'target':66s} {'value':>10s} {'limit':>8s}  met")
    for r in records.items:
        limit = "" if r["target"] is None else f"{r['target']:g}{r['unit']}"
        met = "" if r["met"] is None else ("met" if r["met"] else "NOT met")
        print(f"{r['item']:5s} {r['name'][:66]:66s} {r['value']:9.2f}{r['unit']:1s} "
              f"{limit:>8s}  {met}")
    missed = [r for r in records.items if r["met"] is False]
    print(f"\n{len(records.items) - len(missed)} of {len(records.items)} met; each one not met "
          "is explained, with its profile, in docs/benchmarks.md")
    records.write(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
