"""XLA:CPU compile cost per generated program, under compile options and batch sizes,
measured in one process on the same fixed set of programs, in alternating rounds.

    .venv/bin/python benchmarks/bench_oracle_compile.py [--programs 256] [--seed 0]
        [--batch 16] [--rounds 3] [--sizes 1,16,64] [--opt NAME=JSON ...] [--json FILE]

Draws ``--programs`` programs exactly as a campaign with ``--seed`` does (worker 0,
``--batch`` programs per Hypothesis example), keeps those XLA:CPU compiles alone, then
for each configuration (a batch size and a dict of debug options, ``compile_hlo``'s
``debug_options``) compiles every program, batched as ``fuzz/batch.py`` combines
them, from a cold executable cache. Each round runs every configuration once, in a
rotated order, so the machine's drift falls on all alike; the figure is the median
over rounds of CPU milliseconds per program (this process, all threads: XLA compiles
on a thread pool) and of wall milliseconds, and its ratio to the first configuration.

Also printed per option set: how many of the batched modules' *optimized HLO* differ
from the default's (an option that changes the HLO passes changes which HLO is
tested, not only how it is turned into machine code), and how many programs' results
differ from the default's (bit for bit, NaNs equal).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings

#: Option sets compared by default (name -> debug options); "default" is XLA's own.
OPTION_SETS = {
    "default": {},
    "opt-level 1": {"xla_backend_optimization_level": 1},
    "opt-level 0": {"xla_backend_optimization_level": 0},
    "no expensive LLVM passes": {"xla_llvm_disable_expensive_passes": True},
    "codegen split 1": {"xla_cpu_parallel_codegen_split_count": 1},
    "emitter verification 0": {"xla_cpu_emitter_verification_level": 0},
}


def draw_programs(n: int, seed: int = 0, batch: int = 16) -> list:
    """``n`` programs ``(module, args)`` as worker 0 of a campaign with ``seed`` and
    ``batch`` draws them (its Hypothesis seeds, its repeat filter), without judging."""
    from hloref.fuzz.campaign import CampaignOptions, Runner, hash_seed

    class Collect(Runner):
        def check_items(self, items, infos):
            self.items.extend(items)
            return 0.0

        def flush(self, force=False):
            pass

    import tempfile
    opts = CampaignOptions(out=tempfile.mkdtemp(prefix="bench-draw-"), examples=n,
                           batch=batch, quiet=True)
    r = Collect(opts, 0, 0, n, None)
    r.items = []
    r.generate(lambda run_no: hash_seed(seed, 0, 0, run_no))
    return r.items


def _same(a, b) -> bool:
    import numpy as np
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(map(_same, a, b))
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return a.tobytes() == b.tobytes() or bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))


def main(argv=None) -> int:
    warnings.filterwarnings("ignore")
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--programs", type=int, default=256)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch", type=int, default=16, help="programs per Hypothesis example")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--sizes", default="16", help="batch sizes to compile (default 16)")
    p.add_argument("--opt", action="append", default=[],
                   help="NAME=JSON debug options (replaces the default option sets)")
    p.add_argument("--json", help="write the figures here")
    args = p.parse_args(argv)

    import hloref
    from hloref.fuzz.batch import combine
    from hloref.fuzz.oracles import xla

    sets = dict(OPTION_SETS)
    if args.opt:
        sets = {"default": {}}
        for spec in args.opt:
            name, _, js = spec.partition("=")
            sets[name] = json.loads(js)
    sizes = [int(s) for s in args.sizes.split(",")]
    probe = "HloModule probe\nENTRY e { p = f32[2] parameter(0)\n ROOT n = f32[2] negate(p) }"
    for name, options in list(sets.items()):
        try:
            xla.compile_hlo(probe, debug_options=options or None)
        except Exception as exc:  # noqa: BLE001 - e.g. "No such compile option"
            print(f"skipping {name} {options}: {str(exc).splitlines()[0][:160]}", flush=True)
            del sets[name]

    t0 = time.perf_counter()
    items = draw_programs(args.programs, args.seed, args.batch)
    print(f"drew {len(items)} programs in {time.perf_counter() - t0:.1f} s", flush=True)
    texts, argss = [], []
    for module, a in items:  # keep what XLA compiles alone: batches never split here
        text = module.to_text()
        try:
            xla.compile_hlo(text)
        except Exception:  # noqa: BLE001
            continue
        texts.append(text)
        argss.append(list(a))
    xla.clear_cache()
    print(f"{len(texts)} of them compile alone", flush=True)
    modules = [hloref.parse(t) for t in texts]
    batched = {}
    for b in sizes:
        batched[b] = [(combine(modules[i:i + b]).to_text() if b > 1 else texts[i],
                       [x for a in argss[i:i + b] for x in a]) for i in range(0, len(texts), b)]

    configs = [(b, name) for b in sizes for name in sets]
    cpu = {c: [] for c in configs}
    wall = {c: [] for c in configs}
    optimized = {}  # (b, name) -> optimized HLO texts
    values = {}
    for r in range(args.rounds):
        order = configs[r % len(configs):] + configs[:r % len(configs)]
        for c in order:
            b, name = c
            xla.clear_cache()
            c0, w0 = time.process_time(), time.perf_counter()
            exes = [xla.compile_hlo(t, debug_options=sets[name] or None) for t, _ in batched[b]]
            cpu[c].append((time.process_time() - c0) * 1e3 / len(texts))
            wall[c].append((time.perf_counter() - w0) * 1e3 / len(texts))
            if r == 0:
                optimized[c] = [e.optimized_hlo() for e in exes]
                values[c] = [e.run(*a) for e, (_, a) in zip(exes, batched[b])]
        print(f"  round {r + 1} done", flush=True)

    base = configs[0]
    base_cpu = statistics.median(cpu[base])
    print(f"\n{len(texts)} programs (seed {args.seed}); CPU and wall ms per program, "
          f"median of {args.rounds} rounds; ratio to {base[1]} at batch {base[0]}\n")
    print("| batch | options | CPU ms/program | wall ms/program | CPU ratio | optimized HLO "
          "differs | results differ |")
    print("|---|---|---|---|---|---|---|")
    out = {}
    for c in configs:
        b, name = c
        ref = (b, "default")
        hlo_diff = sum(x != y for x, y in zip(optimized[c], optimized[ref]))
        val_diff = sum(not _same(x, y) for x, y in zip(values[c], values[ref]))
        m = statistics.median(cpu[c])
        print(f"| {b} | {name} {sets[name] or ''} | {m:.1f} | {statistics.median(wall[c]):.1f} | "
              f"{m / base_cpu:.2f} | {hlo_diff} of {len(optimized[c])} | "
              f"{val_diff} of {len(values[c])} modules |")
        out[f"{b}/{name}"] = {"options": sets[name], "cpu_ms": cpu[c], "wall_ms": wall[c],
                              "optimized_hlo_differs": hlo_diff, "results_differ": val_diff}
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
