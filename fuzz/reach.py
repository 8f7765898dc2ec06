"""Campaigns that reach where users' programs go: mutants of real programs, pass
coverage from XLA's per-pass dump, and aiming at a named pass.

``ReachOptions`` (on ``CampaignOptions.reach``) says what a campaign does beyond the
generator:

* ``mutate``: programs are mutants of the seed corpus (``fuzz/corpus.py``,
  ``fuzz/mutants.py``) instead of generated ones (``mix``: the share of generated
  programs kept among them); seeds larger than ``cut_instructions`` are replaced by
  cuts of them (``fuzz/seed_cuts.py``: a value and what it needs), which XLA compiles
  and hloref judges in a fraction of the whole program's time; mutants then stay
  within twice that size (as do the mutants kept as seeds) and splices take at most
  ``cut_instructions`` instructions;
* ``probe_every``: one program in every N is compiled again with XLA's per-pass
  dump (``fuzz/pass_coverage.py``); the (pass, opcode) and (emitter, element type)
  pairs it reached are counted, and in a mutation campaign a mutant that reached a
  new pair joins the seeds (when it is no larger than ``max_seed_instructions``), so
  it is mutated further;
* ``target_pass``: mutations that make the patterns the pass rewrites
  (``fuzz/pass_patterns.py``) are drawn more often, seeds the pass changed are
  picked more often, and Hypothesis' ``target()`` gets the number of opcodes the pass
  changed in the probed program.

The parent prepares the corpus once (``prepare``: ``OUT/.reach/seeds/``); each worker
(``ReachState``) reads it and writes its coverage to ``OUT/.reach/coverage/``, which
``summary`` merges into the campaign summary (``pass_coverage``, ``mutations``,
``corpus``).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass

from .mutants import MutantStats, Seed, mutants
from .pass_coverage import Coverage, load_coverage, probe

__all__ = ["ReachOptions", "ReachState", "prepare", "summary", "CUT_FROM"]

#: the largest programs seeds are cut from
CUT_FROM = 5000


@dataclass
class ReachOptions:
    mutate: bool = False
    corpus: tuple = ()
    realistic: str = "default"
    examples: bool = True
    #: share of programs still drawn from the generator in a mutation campaign
    mix: float = 0.5
    #: probe one program in every N (0: none)
    probe_every: int = 0
    target_pass: str | None = None
    max_mutations: int = 4
    max_seed_instructions: int = 150
    #: seeds larger than this are replaced by cuts of at most this many instructions
    #: (``fuzz/seed_cuts.py``); 0: no cuts, seeds above ``max_seed_instructions`` are
    #: left out
    cut_instructions: int = 16


def _dir(out: str, *parts) -> str:
    return os.path.join(out, ".reach", *parts)


def prepare(reach: ReachOptions, out: str, types=None) -> dict:
    """Write the seed corpus to ``OUT/.reach/seeds/`` and clear old coverage files;
    what was loaded and skipped."""
    shutil.rmtree(_dir(out, "coverage"), ignore_errors=True)
    os.makedirs(_dir(out, "coverage"), exist_ok=True)
    if not reach.mutate:
        return {}
    from .corpus import load_corpus
    if reach.cut_instructions:
        from .seed_cuts import cut_seeds
        corpus = load_corpus(realistic=reach.realistic, examples=reach.examples,
                             dirs=reach.corpus, types=None, max_instructions=CUT_FROM)
        corpus.seeds, skipped = cut_seeds(corpus.seeds, max_instructions=reach.cut_instructions,
                                          types=types)
        corpus.skipped.update(skipped)
    else:
        corpus = load_corpus(realistic=reach.realistic, examples=reach.examples,
                             dirs=reach.corpus, types=types,
                             max_instructions=reach.max_seed_instructions)
    if not corpus.seeds:
        reasons = "; ".join(f"{k}: {v}" for k, v in corpus.skipped.items())
        raise ValueError(f"the seed corpus is empty ({reasons or 'no seeds found'})")
    seeds_dir = _dir(out, "seeds")
    shutil.rmtree(seeds_dir, ignore_errors=True)
    os.makedirs(seeds_dir)
    index = []
    for k, s in enumerate(corpus.seeds):
        file = f"{k:04d}.hlo"
        with open(os.path.join(seeds_dir, file), "w", encoding="utf-8") as f:
            f.write(s.text)
        index.append({"file": file, "name": s.name})
    with open(os.path.join(seeds_dir, "index.json"), "w", encoding="utf-8") as f:
        json.dump(index, f, indent=1)
    return {"seeds": corpus.names(), "skipped": corpus.skipped}


def _load_seeds(out: str) -> list[Seed]:
    seeds_dir = _dir(out, "seeds")
    with open(os.path.join(seeds_dir, "index.json"), encoding="utf-8") as f:
        index = json.load(f)
    seeds = []
    for e in index:
        with open(os.path.join(seeds_dir, e["file"]), encoding="utf-8") as f:
            seeds.append(Seed(e["name"], f.read()))
    return seeds


class ReachState:
    """One worker's part: the mutant strategy, probing, coverage, grown seeds."""

    def __init__(self, reach: ReachOptions, out: str, index: int, types=None):
        self.reach = reach
        self.out = out
        self.index = index
        self.types = types
        self.coverage = Coverage()
        self.mstats = MutantStats()
        self.seeds: list[Seed] = _load_seeds(out) if reach.mutate else []
        self.grown = 0
        self.count = 0
        self.path = _dir(out, "coverage", f"worker-{index}.json")
        #: mutants kept as seeds are no larger than this
        self.seed_limit = (min(reach.max_seed_instructions, 2 * reach.cut_instructions)
                           if reach.cut_instructions else reach.max_seed_instructions)
        self._last_flush = 0.0

    def strategy(self, generated):
        """The programs' strategy: mutants of the seeds (with a share ``mix`` of
        ``generated`` programs), or ``generated`` alone."""
        if not self.reach.mutate:
            return generated
        from hypothesis import strategies as st

        from .pass_patterns import mutation_weights
        weights = mutation_weights(self.reach.target_pass) if self.reach.target_pass else None
        cut = self.reach.cut_instructions
        muts = mutants(self.seeds, max_mutations=self.reach.max_mutations, weights=weights,
                       types=self.types, stats=self.mstats,
                       max_instructions=2 * cut if cut else None,
                       max_splice=cut if cut else 80)
        mix = max(0.0, min(1.0, self.reach.mix))
        if mix <= 0.0:
            return muts
        if mix >= 1.0:
            return generated
        tenths = int(round(mix * 10))

        @st.composite
        def mixed(draw):
            return draw(generated if draw(st.integers(0, 9)) < tenths else muts)
        return mixed()

    def observe(self, items, worker) -> float:
        """Probe a sample of the judged programs; the score for ``target()``: the
        opcodes the target pass changed (or new pairs reached when none is named)."""
        if not self.reach.probe_every:
            return 0.0
        best = 0.0
        for module, args in items:
            self.count += 1
            if self.count % self.reach.probe_every:
                continue
            t0 = time.perf_counter()
            try:
                text = module.to_text()
                reached = probe(worker, text, list(args))
            except Exception:  # noqa: BLE001 - coverage is best effort, never fatal
                reached = None
            self.coverage.probe_seconds += time.perf_counter() - t0
            if reached is None:
                continue
            new_pairs, new_emitters = self.coverage.add(reached)
            target = self.reach.target_pass
            hits = {op for p, op in reached.pairs if p == target} if target else set()
            score = float(len(hits)) if target else float(len(new_pairs) + len(new_emitters))
            best = max(best, score)
            small = sum(len(c.instructions) for c in module.computations.values()) \
                <= self.seed_limit
            if self.reach.mutate and small and (new_pairs or new_emitters or hits):
                self.grown += 1
                self.coverage.kept += 1
                self.seeds.append(Seed(f"grown:{self.index}:{self.grown}", text,
                                       weight=3.0 if hits else 1.0))
        self.flush()
        return best

    def flush(self, force: bool = False) -> None:
        now = time.perf_counter()
        if not (force or now - self._last_flush > 2.0):
            return
        self._last_flush = now
        from .stats import atomic_json
        atomic_json(self.path, {**self.coverage.to_json(), "mutations": self.mstats.to_json()})


def summary(reach: ReachOptions, out: str, prepared: dict | None = None) -> dict:
    """``pass_coverage`` (merged over the workers), ``mutations`` and ``corpus`` for the
    campaign summary."""
    directory = _dir(out, "coverage")
    cov = load_coverage(directory)
    muts = MutantStats()
    if os.path.isdir(directory):
        for name in sorted(os.listdir(directory)):
            try:
                with open(os.path.join(directory, name), encoding="utf-8") as f:
                    m = json.load(f).get("mutations", {})
            except (OSError, ValueError):
                continue
            for key in ("applied", "not_applicable", "invalid", "too_large", "too_slow"):
                getattr(muts, key).update(m.get(key, {}))
    out_d = {"pass_coverage": cov.summary()}
    if reach.target_pass:
        out_d["pass_coverage"]["target_pass"] = reach.target_pass
        out_d["pass_coverage"]["target_pass_pairs"] = sorted(
            o for p, o in cov.pairs if p == reach.target_pass)
        out_d["pass_coverage"]["target_pass_programs"] = cov.pass_programs[reach.target_pass]
    if reach.mutate:
        out_d["mutations"] = muts.to_json()
        out_d["corpus"] = prepared or {}
    return out_d
