"""Fuzz campaigns: generated HLO programs, hloref against an oracle, findings on disk.

The property and its outcomes are in ``fuzz/property.py``, findings (keys, atomic
writes, reduction) in ``fuzz/findings.py``, replay in ``fuzz/replay.py``, statistics
and summaries in ``fuzz/stats.py``, batched oracle runs in ``fuzz/batch.py``, the Ray driver in
``fuzz/ray_campaign.py`` and the command line in ``fuzz/commands.py``. This module
is the runner; its options, the ``--xla-opt`` presets, the example database
and the seeds are in ``fuzz/campaign_options.py`` (re-exported here).

**Runner.** ``hloref fuzz [--time 10m | --examples N] [--oracle xla|tf|both] [--seed S]
[--workers K | --ray ADDRESS] [--batch B] [--xla-opt default|fast] [--ops ...] [--out DIR]
[--db DIR|redis://...]
[--json-summary FILE] [--junit FILE]``. Each of the K worker processes owns its own
``OracleWorker`` and runs Hypothesis; one Hypothesis example draws ``B`` programs
(``--batch``, default 16), which the oracle compiles and runs as one module
(``fuzz/batch.py``: a part that is not a match is confirmed alone; ``--batch 1`` runs
every program alone, as before batching; the TensorFlow oracle always runs programs
alone). ``target()`` gets the largest error of the example's programs. What the oracle
refused is learned (``Refusals``) and shared by the workers (``OUT/.refusals.json``);
``--xla-opt fast`` compiles with LLVM at -O0 (``XLA_OPT_PRESETS``: less of XLA tested). The parent
aggregates per-worker statistics files and prints progress (a status line on a TTY,
plain periodic lines otherwise) and a summary at the end. Exit status 1 when the run wrote new findings, 0 otherwise.

**Seeds.** Worker ``i`` of a campaign with seed ``S`` runs Hypothesis with the seeds
``hash_seed(S, i, start, run)``, so no two workers (and no resumed run) repeat work.

**Findings.** Every finding is first written as ``DIR/pending/<key>`` (unreduced,
atomic). A crash or a hang is reduced into ``DIR/<name>`` at once (its signature tells
the batches which programs to run alone); a mismatch when the worker's budget is spent
(``Runner.reduce_deferred``): a reduction runs hundreds of programs, and the
campaign's time is for testing. The summary's ``seconds`` and rates are those of the
testing; ``wall_seconds`` and ``reduction_after_testing_seconds`` say how much longer
the run took.

**Resuming.** ``DIR/campaign.json`` holds the totals; a killed campaign loses no
finding: rerunning with the same ``--out`` reduces what was pending and carries on
from the recorded example count (new Hypothesis seeds, the same totals).

**Example database.** ``--db DIR`` is a ``DirectoryBasedExampleDatabase``
(Hypothesis replays stored examples first; ``target()`` on the observed error in
ULPs keeps the pareto front there too). Workers on several machines share it when
``DIR`` is on shared storage (NFS, a mounted bucket), or through Redis:
``--db redis://HOST:PORT/N`` is Hypothesis's own ``RedisExampleDatabase`` (needs the
``redis`` package). To share it across CI runs, read the database another workflow
uploaded as an artifact and write locally::

    from hypothesis.database import (DirectoryBasedExampleDatabase,
        GitHubArtifactDatabase, MultiplexedDatabase, ReadOnlyDatabase)
    db = MultiplexedDatabase(
        DirectoryBasedExampleDatabase(".hypothesis/hloref-fuzz"),
        ReadOnlyDatabase(GitHubArtifactDatabase("OWNER", "REPO",
                                                artifact_name="hloref-fuzz-db")))

(``--db-github OWNER/REPO`` builds exactly that; the nightly workflow uploads
``.hypothesis/hloref-fuzz`` as the ``hloref-fuzz-db`` artifact, and needs
``GITHUB_TOKEN`` with ``actions: read`` to download it.)
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time

from .batch import Refusals, check_alone, check_batch
from .campaign_options import (CampaignOptions, CampaignSetupError, XLA_OPT_PRESETS, database,
                               hash_seed, parse_duration, xla_debug_options)
from .findings import claim, finding_dirs, load_program, pre_key, signature, write_pending
from .property import KNOWN_DIFFERENCES, Outcome, check_program, known_difference
from .replay import replay
from .stats import (Stats, aggregate, atomic_json, make_summary, progress_line, reason,
                    write_junit)
from .triage import reduce_and_write

__all__ = ["CampaignOptions", "CampaignSetupError", "Runner", "run_campaign", "hash_seed",
           "XLA_OPT_PRESETS", "xla_debug_options",
           "parse_duration", "database", "Outcome", "check_program", "known_difference", "KNOWN_DIFFERENCES",
           "signature", "reduce_and_write", "replay", "load_program", "write_pending", "Stats"]


class Runner:
    """One worker's loop: Hypothesis examples of ``batch`` programs, the property,
    findings, statistics. ``record`` (a finding) is what a Ray actor overrides."""

    def __init__(self, opts: CampaignOptions, index: int, start_examples: int,
                 quota: int | None, deadline: float | None):
        self.opts = opts
        self.index = index
        self.quota = quota
        self.deadline = deadline
        self.stats = Stats()
        self.done = 0
        self.start_examples = start_examples
        self.workers: dict = {}
        self.refusals = {oracle: Refusals() for oracle in opts.oracles}
        #: what the oracles refused, shared by the campaign's workers and kept across
        #: resumed runs (a refusal learned once, not once per worker)
        self._refusals_path = os.path.join(opts.out, ".refusals.json")
        self._refusals_known = {oracle: -1 for oracle in opts.oracles}
        self._refusals_read = 0.0
        self.stats_path = os.path.join(opts.out, ".stats", f"worker-{index}.json")
        self._last_flush = 0.0
        self._t_mark = time.perf_counter()
        self._tested: set = set()  # digests of the programs run, to skip repeats
        self._starts_closed = 0  # oracle starts of workers closed already
        #: pending mismatches, reduced after the testing (``reduce_deferred``)
        self.deferred: list[str] = []
        #: when this worker stopped testing (``time.time()``; ``None`` before)
        self.testing_ended: float | None = None
        self.memory = None
        if opts.memory_audit_every:
            from .memory_campaign import CampaignMemoryAudit
            self.memory = CampaignMemoryAudit(self)
        self.reach = None
        if opts.reach is not None:
            from .reach import ReachState
            self.reach = ReachState(opts.reach, opts.out, index, opts.element_types)

    def worker(self, oracle: str):
        if oracle not in self.workers:
            if self.opts.worker_factory is not None:
                self.workers[oracle] = self.opts.worker_factory(oracle)
            else:
                from .workers import OracleWorker
                self.workers[oracle] = OracleWorker(
                    oracle, timeout=self.opts.timeout,
                    debug_options=xla_debug_options(self.opts, oracle) or None)
        return self.workers[oracle]

    def close(self) -> None:
        self._starts_closed += sum(getattr(w, "starts", 0) for w in self.workers.values())
        for w in self.workers.values():
            try:
                w.close()
            except Exception:  # noqa: BLE001
                pass
        self.workers.clear()

    def flush(self, force: bool = False) -> None:
        now = time.perf_counter()
        if force or now - self._last_flush > 1.0:
            self._last_flush = now
            self.stats.oracle_starts = self._starts_closed + sum(
                getattr(w, "starts", 0) for w in self.workers.values())
            atomic_json(self.stats_path, {"stats": self.stats.to_json(), "done": self.done,
                                          "index": self.index,
                                          "testing_ended": self.testing_ended})

    def remaining(self) -> int | None:
        """Programs left in this worker's budget (``None``: no count limit); 0 when the
        count or the time is spent."""
        if self.deadline is not None and time.time() >= self.deadline:
            return 0
        return None if self.quota is None else max(0, self.quota - self.done)

    def out_of_budget(self) -> bool:
        return self.remaining() == 0

    def first_time(self, module, args) -> bool:
        """False for a program (module and inputs) this worker has already tested,
        counted in ``Stats.repeats`` and not run again."""
        from hloref.cli_common import flatten_value
        h = hashlib.sha1(module.to_text().encode())
        for a in flatten_value(tuple(args)):
            h.update(str(a.dtype).encode() + bytes(str(a.shape), "ascii") + a.tobytes())
        key = h.digest()
        if key in self._tested:
            self.stats.repeats += 1
            return False
        self._tested.add(key)
        return True

    # -- judging -------------------------------------------------------------------------
    def handle(self, module, args, oracle: str, seed_info) -> Outcome:
        """Judge one program alone and account for it (statistics, findings)."""
        result = check_alone((module, args), self.worker(oracle), oracle=oracle,
                             timeout=self.opts.timeout, stats=self.stats)
        return self.account(module, args, result, oracle, seed_info)

    def check_items(self, items, infos) -> float:
        """Judge a list of ``(module, args)`` on every oracle; the largest score."""
        worst = 0.0
        for oracle in self.opts.oracles:
            worker = self.worker(oracle)
            if self.opts.batch > 1 and len(items) > 1 and oracle == "xla":
                results = check_batch(items, worker, oracle=oracle, timeout=self.opts.timeout,
                                      stats=self.stats, refusals=self.refusals[oracle])
            else:
                results = [check_alone(it, worker, oracle=oracle, timeout=self.opts.timeout,
                                       stats=self.stats) for it in items]
            for (module, args), info, result in zip(items, infos, results):
                worst = max(worst, self.account(module, args, result, oracle, info).score)
        if self.memory is not None:
            self.memory.check(items, infos)
        self.share_refusals()
        return worst

    def share_refusals(self, force: bool = False) -> None:
        """Write what this worker learned the oracles refuse to ``OUT/.refusals.json``
        (merged with what is there) and read what the others learned (every 10 s)."""
        try:
            now = time.perf_counter()
            learned = any(r.size() != self._refusals_known[o] for o, r in self.refusals.items())
            if not (force or learned or now - self._refusals_read > 10.0):
                return
            self._refusals_read = now
            try:
                with open(self._refusals_path, encoding="utf-8") as f:
                    data = json.load(f)
            except (OSError, ValueError):
                data = {}
            for oracle, r in self.refusals.items():
                r.merge(data.get(oracle) or {})
            mine = json.loads(json.dumps({o: r.to_json() for o, r in self.refusals.items()}))
            if any(mine[o] != data.get(o) for o in mine):
                atomic_json(self._refusals_path, {**data, **mine})
            for oracle, r in self.refusals.items():
                self._refusals_known[oracle] = r.size()
        except Exception as exc:  # noqa: BLE001 - an optimisation: never fatal
            print(f"hloref fuzz: could not share refusals: {exc}", file=sys.stderr)

    def account(self, module, args, result, oracle: str, seed_info) -> Outcome:
        """Count an outcome (or the exception the check raised) and record a finding."""
        if isinstance(result, BaseException):  # a bug in hloref/diff: count it, go on
            self.stats.outcomes["internal-error"] += 1
            self.stats.rejected[reason(f"internal error: {type(result).__name__}: {result}")] += 1
            self._save_internal_error(module, args, oracle, result)
            return Outcome("rejected", "error", message=str(result))
        outcome = result
        self.stats.outcomes[outcome.kind] += 1
        self.stats.verdicts[outcome.verdict] += 1
        if outcome.kind == "known":
            self.stats.known[outcome.known] += 1
        elif outcome.kind == "rejected":
            self.stats.rejected[reason(outcome.message) or outcome.verdict] += 1
        elif outcome.kind == "finding":
            t0 = time.perf_counter()
            try:
                self.record(module, args, outcome, oracle, seed_info)
            except Exception as exc:  # noqa: BLE001 - a campaign never dies on one program
                self.stats.outcomes["internal-error"] += 1
                print(f"hloref fuzz: could not record a finding: {type(exc).__name__}: {exc}",
                      file=sys.stderr)
            self.stats.reduce_seconds += time.perf_counter() - t0
        return outcome

    def _save_internal_error(self, module, args, oracle: str, exc: BaseException) -> None:
        """Keep what hloref failed on, as ``internal-errors/KEY/`` with ``module.hlo`` and
        ``inputs.npz`` (the layout of a pending finding) and ``traceback.txt``, so the
        bug can be reproduced; never raises."""
        import traceback

        from hloref.cli_common import flatten_value, write_npz
        try:
            text = module.to_text()
            key = hashlib.sha256(text.encode()).hexdigest()[:12]
            where = os.path.join(self.opts.out, "internal-errors", key)
            os.makedirs(where, exist_ok=True)
            with open(os.path.join(where, "module.hlo"), "w", encoding="utf-8") as f:
                f.write(text)
            write_npz(os.path.join(where, "inputs.npz"), flatten_value(tuple(args)))
            with open(os.path.join(where, "traceback.txt"), "w", encoding="utf-8") as f:
                f.write(f"oracle: {oracle}\n")
                f.write("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
        except Exception:  # noqa: BLE001 - best effort; the count is already taken
            pass

    # -- findings ------------------------------------------------------------------------
    def record(self, module, args, outcome: Outcome, oracle: str, seed_info) -> None:
        key = pre_key(outcome.report, module, oracle)
        if not claim(os.path.join(self.opts.out, ".seen", key)):
            self.stats.duplicates += 1
            return
        meta = {"oracle": oracle, "verdict": outcome.verdict, "seed": seed_info, "key": key}
        pending = write_pending(self.opts.out, key, module, args, meta)
        if outcome.verdict == "mismatch":  # reduced when the testing is over
            self.deferred.append(pending)
            return
        # a crash or a hang is reduced now: its signature tells the batches which
        # programs to run alone, or each program like it would take a batch down
        path = self.reduce_pending(pending)
        if path:
            self.stats.findings.append(path)
            self.learn_from(path, oracle)

    def reduce_deferred(self) -> None:
        """Reduce the mismatches found while testing (``record``), once the budget is
        spent: a reduction runs hundreds of programs, and a campaign's time is for
        testing new ones (a killed campaign reduces them when it resumes)."""
        while self.deferred:
            pending = self.deferred.pop(0)
            t0 = time.perf_counter()
            try:
                path = self.reduce_pending(pending)
            except Exception as exc:  # noqa: BLE001 - it stays pending for a resumed run
                print(f"hloref fuzz: could not reduce {pending}: {type(exc).__name__}: {exc}",
                      file=sys.stderr)
                path = None
            self.stats.reduce_seconds += time.perf_counter() - t0
            if path:
                self.stats.findings.append(path)
            self.flush(force=True)

    def learn_from(self, finding: str, oracle: str) -> None:
        """A crash or hang finding: programs like it run alone from now on."""
        try:
            with open(os.path.join(finding, "finding.json"), encoding="utf-8") as f:
                meta = json.load(f)
        except (OSError, ValueError):
            return
        if meta.get("verdict") in ("crash", "timeout") and oracle in self.refusals:
            self.refusals[oracle].learn_crash(meta.get("signature") or {})

    def reduce_pending(self, pending: str, out_dir: str | None = None) -> str | None:
        """Reduce a pending finding into ``out_dir`` (default ``--out``); the finding's
        directory, or ``None`` when it does not reproduce or is a duplicate."""
        from .differential import diff
        with open(os.path.join(pending, "meta.json"), encoding="utf-8") as f:
            meta = json.load(f)
        oracle = meta["oracle"]
        module, values = load_program(pending)
        worker = self.worker(oracle)
        report = diff(module, values, oracle=oracle, worker=worker, timeout=self.opts.timeout)
        if report.verdict not in ("mismatch", "crash", "timeout") or (
                report.verdict == "mismatch" and known_difference(report)):
            shutil.rmtree(pending, ignore_errors=True)  # does not reproduce from disk
            return None

        def still(r):
            return not (r.verdict == "mismatch" and known_difference(r))

        path, _sig, new = reduce_and_write(
            module, values, report, worker, out_dir or self.opts.out, oracle=oracle,
            seed=meta.get("seed"), blame=self.opts.blame,
            extra_meta={"campaign_key": meta.get("key")}, still_fails=still)
        shutil.rmtree(pending, ignore_errors=True)
        if path.startswith(("known-upstream:", "archived:")):  # upstream, or stored already
            self.stats.known[path] += 1
            return None
        if not new:
            self.stats.duplicates += 1
            return None
        self._note_debug_options(path, oracle)
        return path

    def _note_debug_options(self, path: str, oracle: str) -> None:
        """A finding of a campaign with ``--xla-opt`` other than default: its
        ``finding.json`` gets the compile options it was found with (``replay`` uses
        them), and ``xla_opt``."""
        extra = xla_debug_options(self.opts, oracle)
        if not extra:
            return
        meta_path = os.path.join(path, "finding.json")
        try:
            with open(meta_path, encoding="utf-8") as f:
                meta = json.load(f)
            meta["debug_options"] = {**extra, **(meta.get("debug_options") or {})}
            meta["xla_opt"] = self.opts.xla_opt
            atomic_json(meta_path, meta)
        except (OSError, ValueError):
            pass

    def resume_pending(self) -> None:
        pending = os.path.join(self.opts.out, "pending")
        if not os.path.isdir(pending):
            return
        for name in sorted(os.listdir(pending)):
            if name.startswith("."):
                continue
            # one worker takes each pending finding
            if not claim(os.path.join(self.opts.out, ".resumed", name)):
                continue
            try:
                path = self.reduce_pending(os.path.join(pending, name))
            except Exception as exc:  # noqa: BLE001
                print(f"hloref fuzz: could not reduce pending {name}: {exc}", file=sys.stderr)
                continue
            if path:
                self.stats.findings.append(path)

    # -- generation ----------------------------------------------------------------------
    def run_hypothesis(self, run_seed: int, examples: int, db=None) -> None:
        """One Hypothesis run of ``examples`` examples with seed ``run_seed``; each
        example draws up to ``batch`` programs (fewer when the budget ends)."""
        from hypothesis import HealthCheck, Phase, given, settings
        from hypothesis import seed as hseed
        from hypothesis import strategies as st
        from hypothesis import target
        from hypothesis.errors import HypothesisException

        from .strategies import inputs_for, modules

        opts = self.opts
        strat = modules(ops=opts.ops, max_instructions=opts.max_instructions,
                        element_types=opts.element_types)
        if self.reach is not None:
            strat = self.reach.strategy(strat)
        example_no = [0]

        @settings(max_examples=examples, deadline=None, database=db,
                  suppress_health_check=list(HealthCheck),
                  phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target],
                  report_multiple_bugs=False, print_blob=False)
        @hseed(run_seed)
        @given(st.data())
        def prop(data):
            left = self.remaining()
            n = opts.batch if left is None else min(max(1, opts.batch), left)
            if n <= 0:
                return
            items, infos = [], []
            for j in range(max(1, n)):
                module = data.draw(strat)
                args = data.draw(inputs_for(module))
                if not self.first_time(module, args):
                    continue  # e.g. the simplest example, which every Hypothesis run tries
                items.append((module, args))
                infos.append({"batch_seed": run_seed, "example": example_no[0], "program": j,
                              "mode": args.mode, "input_seed": args.seed})
            example_no[0] += 1
            self.stats.generator_seconds += time.perf_counter() - self._t_mark
            for module, _ in items:
                self.stats.add_program(module)
            self.done += len(items)
            target(self.check_items(items, infos), label="log2(1 + max ulp error)")
            if self.reach is not None and "xla" in opts.oracles:
                target(self.reach.observe(items, self.worker("xla")), label="pass coverage")
            self.flush()
            self._t_mark = time.perf_counter()

        self._t_mark = time.perf_counter()
        try:
            prop()
        except HypothesisException as exc:
            # FlakyStrategyDefinition: an example Hypothesis replays after the budget ran
            # out draws nothing (it drew programs before). Expected at the end of every
            # timed run: the programs it ran are counted. Anything else is said, plainly.
            if type(exc).__name__ != "FlakyStrategyDefinition" or not self.out_of_budget():
                print(f"hloref fuzz: note: Hypothesis stopped run {run_seed} early "
                      f"({type(exc).__name__}); the programs it ran are counted and the "
                      f"campaign goes on", file=sys.stderr)

    def generate(self, run_seed, db=None, *, stale_runs: int = 10) -> None:
        """Hypothesis runs with the seeds ``run_seed(0)``, ``run_seed(1)``, ... until the
        budget is spent, or ``stale_runs`` runs in a row found no program not tested
        before (a generator restricted to a tiny space: the budget is then left unspent
        rather than looping forever)."""
        per_example = max(1, self.opts.batch)
        run_no = stale = 0
        while not self.out_of_budget() and stale < stale_runs:
            left = self.remaining()
            n = self.opts.examples_per_run if left is None else \
                min(self.opts.examples_per_run, -(-left // per_example))
            before = self.done
            # more than needed: every run starts with the simplest examples, repeats after
            # the first run (an example past the budget draws nothing)
            self.run_hypothesis(run_seed(run_no), max(n, 3) + 1, db)
            run_no += 1
            stale = 0 if self.done > before else stale + 1

    def run(self) -> Stats:
        opts = self.opts
        db = database(opts)
        t_start = time.perf_counter()
        self.share_refusals(force=True)
        self.resume_pending()
        try:
            self.generate(lambda run_no: hash_seed(opts.seed, self.index, self.start_examples,
                                                   run_no), db)
            self.testing_ended = time.time()
            self.flush(force=True)
            self.reduce_deferred()
        finally:
            self.stats.seconds = time.perf_counter() - t_start
            self.flush(force=True)
            if self.reach is not None:
                self.reach.flush(force=True)
            self.close()
            if self.opts.worker_factory is None:
                from .workers import shutdown_zygotes
                shutdown_zygotes()
        return self.stats


def _worker_main(opts: CampaignOptions, index: int, start_examples: int, quota, deadline) -> None:
    Runner(opts, index, start_examples, quota, deadline).run()


def run_campaign(opts: CampaignOptions) -> dict:
    """Run a campaign in local worker processes (``fuzz/ray_campaign.py`` runs one on a
    Ray cluster); returns the summary (also written to ``--json-summary``)."""
    import multiprocessing as mp

    from .strategies import reachable_opcodes
    database(opts)  # a bad --db fails here, not in every worker
    xla_debug_options(opts, "xla")  # and a bad --xla-opt
    os.makedirs(opts.out, exist_ok=True)
    prepared = None
    if opts.reach is not None:
        from .reach import prepare
        try:
            prepared = prepare(opts.reach, opts.out, opts.element_types)
        except (ValueError, OSError) as exc:
            raise CampaignSetupError(str(exc)) from None
    state_path = os.path.join(opts.out, "campaign.json")
    previous = Stats()
    start_examples = 0
    if os.path.exists(state_path):
        with open(state_path, encoding="utf-8") as f:
            state = json.load(f)
        previous = Stats.from_json(state.get("totals", {}))
        start_examples = int(state.get("examples_started", 0))
    # fold stats left by a killed run into the totals, then start clean
    stats_dir = os.path.join(opts.out, ".stats")
    leftover = aggregate(stats_dir, Stats())
    if leftover.programs:
        previous.merge(leftover)
        start_examples += leftover.programs
    shutil.rmtree(stats_dir, ignore_errors=True)
    shutil.rmtree(os.path.join(opts.out, ".resumed"), ignore_errors=True)
    existing = set(finding_dirs(opts.out))
    deadline = time.time() + opts.seconds if opts.seconds else None
    k = max(1, opts.workers)
    if opts.examples is None and opts.seconds is None:
        opts.examples = 100
    quotas = [None] * k
    if opts.examples is not None:
        quotas = [opts.examples // k + (1 if i < opts.examples % k else 0) for i in range(k)]
    atomic_json(state_path, {"seed": opts.seed, "examples_started": start_examples,
                             "totals": previous.to_json(), "oracles": list(opts.oracles)})
    reachable = len(reachable_opcodes())
    tty = sys.stdout.isatty() and not opts.quiet
    t0, t0_wall = time.perf_counter(), time.time()
    last_print = 0.0
    if k == 1:
        runner = Runner(opts, 0, start_examples, quotas[0], deadline)
        if opts.quiet:
            runner.run()
        else:
            _run_with_progress(runner, t0, reachable, tty, opts.progress_every)
        run_stats = runner.stats
        ends = [runner.testing_ended]
    else:
        ctx = mp.get_context("spawn")
        procs = [ctx.Process(target=_worker_main, args=(opts, i, start_examples + i * 1_000_000,
                                                        quotas[i], deadline), daemon=False)
                 for i in range(k)]
        for p in procs:
            p.start()
        try:
            while any(p.is_alive() for p in procs):
                time.sleep(0.5)
                elapsed = time.perf_counter() - t0
                if opts.quiet:
                    continue
                line = progress_line(aggregate(stats_dir, Stats()), elapsed, reachable)
                if tty:
                    print("\r" + line[:200], end="", flush=True)
                elif elapsed - last_print >= opts.progress_every:
                    last_print = elapsed
                    print(line, flush=True)
        except KeyboardInterrupt:
            for p in procs:
                p.terminate()
            raise
        finally:
            for p in procs:
                p.join()
        if tty:
            print()
        run_stats = aggregate(stats_dir, Stats())
        ends = _testing_ends(stats_dir, k)
    elapsed = time.perf_counter() - t0
    # the rates are over the testing; the mismatches found are reduced after it
    testing = elapsed if None in ends else min(elapsed, max(ends) - t0_wall)
    run_stats.seconds = testing
    shutil.rmtree(stats_dir, ignore_errors=True)
    totals = Stats.from_json(previous.to_json())
    totals.merge(run_stats)
    totals.seconds = previous.seconds + elapsed
    atomic_json(state_path, {"seed": opts.seed,
                             "examples_started": start_examples + run_stats.programs,
                             "totals": totals.to_json(), "oracles": list(opts.oracles)})
    extra = {"wall_seconds": elapsed, "reduction_after_testing_seconds": elapsed - testing}
    if opts.reach is not None:
        from .reach import summary
        extra.update(summary(opts.reach, opts.out, prepared))
    return finish(opts, run_stats, totals, existing, reachable, workers=k, extra=extra)


def _testing_ends(stats_dir: str, k: int) -> list:
    """When each of the ``k`` workers stopped testing (``None`` for one that did not say)."""
    ends = [None] * k
    for i in range(k):
        try:
            with open(os.path.join(stats_dir, f"worker-{i}.json"), encoding="utf-8") as f:
                ends[i] = json.load(f).get("testing_ended")
        except (OSError, ValueError):
            pass
    return ends


def _run_with_progress(runner, t0: float, reachable: int, tty: bool, every: float) -> None:
    """Run one worker in a thread while this one prints progress: a status line
    rewritten in place on a TTY, else a line every ``every`` seconds (a CI log); an
    exception of the worker is raised here."""
    import threading
    failure: list = []

    def target():
        try:
            runner.run()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the calling thread
            failure.append(exc)

    th = threading.Thread(target=target, daemon=True)
    th.start()
    last_print = 0.0
    while th.is_alive():
        th.join(0.5)
        elapsed = time.perf_counter() - t0
        if not tty and elapsed - last_print < every:
            continue
        try:
            line = progress_line(runner.stats, elapsed, reachable)
        except RuntimeError:  # a counter changed size while read: the next line has it
            continue
        if tty:
            print("\r" + line[:200], end="", flush=True)
        else:
            last_print = elapsed
            print(line, flush=True)
    if tty:
        print()
    if failure:
        raise failure[0]


def finish(opts: CampaignOptions, run_stats: Stats, totals: Stats, existing: set, reachable: int,
           *, workers: int, extra: dict | None = None) -> dict:
    """The summary of a finished run, written as ``--json-summary`` and ``--junit``."""
    names = finding_dirs(opts.out)
    new_findings = [os.path.join(opts.out, n) for n in names if n not in existing]
    all_findings = [os.path.join(opts.out, n) for n in names]
    summary = make_summary(run_stats, totals, new_findings, all_findings, workers=workers,
                           seed=opts.seed, oracles=opts.oracles, out=opts.out,
                           reachable=reachable, extra=extra)
    if opts.json_summary:
        atomic_json(opts.json_summary, summary)
    if opts.junit:
        write_junit(opts.junit, summary)
    return summary


def __getattr__(name: str):
    """``test_hlo_property`` and ``fuzz_one_input`` live in ``fuzz/property.py`` (built
    on first use); kept reachable here."""
    if name in ("test_hlo_property", "fuzz_one_input"):
        from . import property as prop
        return getattr(prop, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
