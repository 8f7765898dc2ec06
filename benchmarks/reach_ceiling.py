"""The ceiling of pass coverage: which of XLA:CPU's HLO passes change a real program at
all, measured on every realistic program (``tests/realistic_programs.py``), the
examples and any ``--corpus`` directory.

    .venv/bin/python benchmarks/reach_ceiling.py [--realistic all] [--corpus DIR]...
        [--json FILE] [--timeout 300]

Each program is compiled by XLA:CPU with the per-pass dump (``xla_dump_hlo_pass_re=.*``)
in a worker process (``fuzz/workers.py``: a program XLA aborts on costs only itself)
and read the way a campaign's probes are (``fuzz/pass_coverage.py``): the passes that
changed it and its (pass, opcode) pairs. The dump's file names also name the pass that
ran after each snapshot (``after_A.before_B``), so passes that ran without changing the
module show up too (a lower bound of the passes that run: one never followed by a
changing pass is not named); XLA's own log (``TF_CPP_VMODULE=hlo_pass_pipeline=1``)
names every pass its pipelines run, changing or not. Prints the union over all programs, per program, and
which passes one program alone reaches; ``--json`` writes every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _programs(args) -> list[tuple[str, str]]:
    from hloref.fuzz.corpus import load_corpus
    corpus = load_corpus(realistic=args.realistic, examples=True, dirs=args.corpus,
                         max_instructions=10 ** 9)
    for name, why in sorted(corpus.skipped.items()):
        print(f"skipped {name}: {why}", file=sys.stderr)
    return [(s.name, s.text) for s in corpus.seeds]


def _inputs(text: str):
    """Inputs for the program: zeros would make constant folding see constants, so a
    fixed-seed random draw from hloref's own input maker."""
    import hloref
    from hloref.fuzz.strategies.inputs import random_inputs
    return random_inputs(hloref.parse(text, verify=True), 0)


def _ran(directory: str) -> set:
    """Pass names in the dump's file names (``after_A`` and ``before_B``)."""
    from hloref.fuzz.blame import read_dump
    names = set()
    for dm in read_dump(directory).values():
        for s in dm.snapshots:
            if s.pass_name != "pipeline-start":
                names.add(s.pipeline if not s.pass_name.startswith("after_") else s.pass_name)
            if s.next_pass:
                names.add(s.next_pass)
    return names


_PASS_LINE = re.compile(r"\]\s+HLO pass (\S+)\s*$")
_PIPELINE_LINE = re.compile(r"Running HLO pass pipeline on module \S+: (.*)$")


def pipeline_passes(programs, timeout: float) -> tuple[list, list]:
    """``(pass names, pipeline names)`` XLA:CPU runs when it compiles ``programs``, read
    from its own log (``TF_CPP_VMODULE=hlo_pass_pipeline=1``: one line per pass run,
    changing the module or not), in a subprocess."""
    with tempfile.TemporaryDirectory(prefix="hloref-passes-") as d:
        paths = []
        for k, (_, text) in enumerate(programs):
            paths.append(os.path.join(d, f"{k}.hlo"))
            with open(paths[-1], "w", encoding="utf-8") as f:
                f.write(text)
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="0", TF_CPP_VMODULE="hlo_pass_pipeline=1")
        code = ("import sys\nfrom hloref.fuzz.oracles.xla import compile_hlo\n"
                "for p in sys.argv[1:]:\n    compile_hlo(open(p).read())\n")
        proc = subprocess.run([sys.executable, "-c", code, *paths], env=env, timeout=timeout,
                              capture_output=True, text=True)
    passes, pipelines = set(), set()
    for line in proc.stderr.splitlines():
        m = _PASS_LINE.search(line)
        if m:
            passes.add(m.group(1))
        m = _PIPELINE_LINE.search(line)
        if m:
            pipelines.add(m.group(1))
    return sorted(passes), sorted(pipelines)


def measure(programs, timeout: float) -> dict:
    from hloref.fuzz.pass_coverage import DUMP_OPTIONS, Coverage, reach_of_dump
    from hloref.fuzz.workers import OracleWorker
    total, per, ran, failed = Coverage(), {}, set(), {}
    with OracleWorker("xla", timeout=timeout) as worker:
        for name, text in programs:
            directory = tempfile.mkdtemp(prefix="hloref-ceiling-")
            t0 = time.perf_counter()
            try:
                args = _inputs(text)
                result = worker.run(text, list(args),
                                    debug_options={**DUMP_OPTIONS, "xla_dump_to": directory})
                if not result.ok:
                    failed[name] = (result.message or result.kind)[:200]
                    continue
                reach = reach_of_dump(directory)
                ran |= _ran(directory)
            except Exception as exc:  # noqa: BLE001 - one program's failure is reported
                failed[name] = f"{type(exc).__name__}: {exc}"[:200]
                continue
            finally:
                shutil.rmtree(directory, ignore_errors=True)
            total.add(reach)
            per[name] = {"passes": sorted(reach.passes), "pairs": len(reach.pairs),
                         "seconds": round(time.perf_counter() - t0, 2)}
            print(f"{name}: {len(reach.passes)} passes, {len(reach.pairs)} pairs "
                  f"({per[name]['seconds']} s)", file=sys.stderr)
    only = {}
    for name, d in per.items():
        others = set().union(*(set(e["passes"]) for n, e in per.items() if n != name))
        alone = sorted(set(d["passes"]) - others)
        if alone:
            only[name] = alone
    return {"programs": len(per), "failed": failed,
            "changing_passes": sorted(total.passes), "n_changing_passes": len(total.passes),
            "n_pairs": len(total.pairs), "n_emitter_pairs": len(total.emitters),
            "passes_seen_running": sorted(ran | total.passes),
            "n_passes_seen_running": len(ran | total.passes),
            "programs_per_pass": dict(sorted(total.pass_programs.items())),
            "reached_by_one_program_only": only, "per_program": per}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--realistic", default="all")
    p.add_argument("--corpus", action="append", default=[])
    p.add_argument("--json")
    p.add_argument("--timeout", type=float, default=300.0)
    args = p.parse_args(argv)
    programs = _programs(args)
    r = measure(programs, args.timeout)
    r["pipeline_passes"], r["pipelines"] = pipeline_passes(programs, args.timeout * 4)
    print(f"{r['programs']} programs compiled ({len(r['failed'])} failed)")
    print(f"distinct passes XLA:CPU's pipelines ran on them (its log): "
          f"{len(r['pipeline_passes'])}, in {len(r['pipelines'])} pipelines")
    print(f"passes that changed at least one program: {r['n_changing_passes']}")
    print(f"passes seen running (changing or named as the next pass): "
          f"{r['n_passes_seen_running']}")
    print(f"(pass, opcode) pairs: {r['n_pairs']}; (emitter, type) pairs: {r['n_emitter_pairs']}")
    print("changing passes: " + ", ".join(r["changing_passes"]))
    for name, alone in sorted(r["reached_by_one_program_only"].items()):
        print(f"  only {name}: {', '.join(alone)}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(r, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
