"""Campaigns on a Ray cluster: ``hloref fuzz --ray ADDRESS``.

The driver (the ``hloref fuzz`` process) starts one Ray actor per worker (``--workers
K``, default one per CPU of the cluster); each actor owns an oracle worker process
and runs *units* of work handed out by the driver. Unit ``u`` is ``unit_programs``
programs drawn by Hypothesis with the seeds ``hash_seed(S, "unit", u, run)``: units
never overlap, and a unit run again draws the same programs.

What a campaign guarantees holds across the cluster:

* **One writer.** An actor reduces what it finds in a scratch directory of its own
  node and returns the finding's files with the unit's statistics; only the driver
  writes ``--out``: it deduplicates by the pre-reduction key (``OUT/.seen/<key>``,
  which holds the name of the finding it resolved to; the keys already seen go out
  with every unit, so actors skip known failures) and by directory name (the
  signature), and writes each finding atomically (a temporary directory, then rename).
* **Every program counted once.** A unit's statistics are merged when its result
  arrives, then ``campaign.json`` records the unit as done (atomically).
* **A dead worker is replaced and its program is not lost.** Actors are restarted by
  Ray (``max_restarts=-1``); the unit a dead actor (or node) was running is handed
  out again, whole, and nothing of its first attempt was counted.
* **Resume.** A driver killed and started again with the same ``--out`` skips the
  units ``campaign.json`` lists as done and re-runs the ones that were in flight.
* ``--memory-audit``: each unit audits every N-th of its programs (the same ones when
  it runs again); a failed audit is reduced on the actor and comes back as a finding
  with its pre-reduction key (``memory-...``), as value findings do.
* Progress lines, the summary, ``--json-summary`` and ``--junit`` as without Ray;
  ``OUT/.ray/workers.json`` lists the actors' nodes and process ids and the unit
  each is running.

Ray is optional (``pip install 'hloref[ray]'``); without ``--ray`` nothing imports it.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import tempfile
import time

from .campaign import CampaignOptions, CampaignSetupError, Runner, database, finish, hash_seed
from .campaign_options import xla_debug_options
from .findings import finding_dirs, pre_key, write_pending
from .memory_campaign import CampaignMemoryAudit, memory_pre_key, reduce_and_write_memory
from .property import known_difference
from .report import publish_directory
from .stats import Stats, atomic_json, progress_line

__all__ = ["run_ray_campaign", "UnitWorker"]

#: How often a unit may be handed out again after the actor running it died.
MAX_ATTEMPTS = 4


def _files_of(path: str) -> dict:
    """A finding directory's files, by name (what a unit hands the driver)."""
    files = {}
    for name in sorted(os.listdir(path)):
        with open(os.path.join(path, name), "rb") as f:
            files[name] = f.read()
    return files


class _UnitMemoryAudit(CampaignMemoryAudit):
    """A unit's memory audits (``--memory-audit``): a failed audit is reduced in the
    actor's scratch directory and its files go back to the driver with the unit, keyed
    by ``memory_pre_key`` (the local campaign's ``OUT/.seen`` name), as the value
    findings do; the driver writes it and counts it."""

    def record(self, module, args, check, info) -> None:
        runner = self.runner
        key = memory_pre_key(module, check)
        if key in runner.seen:
            runner.stats.duplicates += 1
            return None
        runner.seen.add(key)
        out = tempfile.mkdtemp(prefix="memory-", dir=runner.scratch)
        try:
            path, new = reduce_and_write_memory(
                module, args, check, runner.worker("xla"), out, seed=info,
                debug_options=xla_debug_options(runner.opts, "xla") or None,
                corrupt=runner.opts.memory_corrupt, timeout=runner.opts.timeout)
            if not new or not os.path.isdir(path):  # known upstream
                runner.found.append({"pre_key": key, "name": None})
            else:
                runner.found.append({"pre_key": key, "name": os.path.basename(path),
                                     "files": _files_of(path)})
        finally:
            shutil.rmtree(out, ignore_errors=True)
        return None


class _UnitRunner(Runner):
    """A ``Runner`` whose findings go back to the driver instead of onto ``--out``."""

    def __init__(self, opts: CampaignOptions, scratch: str):
        super().__init__(opts, 0, 0, None, None)
        self.scratch = scratch
        self.seen: set = set()
        self.found: list = []
        if self.memory is not None:
            self.memory = _UnitMemoryAudit(self)

    def flush(self, force: bool = False) -> None:  # the driver keeps the statistics
        pass

    def record(self, module, args, outcome, oracle: str, seed_info) -> None:
        from .differential import diff
        from .findings import load_program
        from .triage import reduce_and_write
        key = pre_key(outcome.report, module, oracle)
        if key in self.seen:
            self.stats.duplicates += 1
            return
        self.seen.add(key)
        meta = {"oracle": oracle, "verdict": outcome.verdict, "seed": seed_info, "key": key}
        pending = write_pending(self.scratch, key, module, args, meta)
        try:
            module, values = load_program(pending)  # what the driver could replay from disk
            worker = self.worker(oracle)
            report = diff(module, values, oracle=oracle, worker=worker, timeout=self.opts.timeout)
            if report.verdict not in ("mismatch", "crash", "timeout") or (
                    report.verdict == "mismatch" and known_difference(report)):
                self.found.append({"pre_key": key, "name": None})
                return
            out = tempfile.mkdtemp(prefix="reduced-", dir=self.scratch)
            path, _sig, _new = reduce_and_write(
                module, values, report, worker, out, oracle=oracle, seed=seed_info,
                blame=self.opts.blame, extra_meta={"campaign_key": key},
                still_fails=lambda r: not (r.verdict == "mismatch" and known_difference(r)))
            if not os.path.isdir(path):  # known upstream, or in the archive already
                self.found.append({"pre_key": key, "name": None})
                return
            self.learn_from(path, oracle)
            self.found.append({"pre_key": key, "name": os.path.basename(path),
                               "files": _files_of(path)})
            shutil.rmtree(out, ignore_errors=True)
        finally:
            shutil.rmtree(pending, ignore_errors=True)


class UnitWorker:
    """The body of a Ray actor: one oracle worker, kept across units."""

    def __init__(self, opts: CampaignOptions):
        self.scratch = tempfile.mkdtemp(prefix="hloref-ray-")
        self.opts = dataclasses.replace(opts, out=self.scratch, json_summary=None, junit=None,
                                        ray=None, quiet=True)
        self.runner = _UnitRunner(self.opts, self.scratch)
        self.db = database(self.opts)

    def info(self) -> dict:
        import socket
        return {"pid": os.getpid(), "node": socket.gethostname()}

    def run_unit(self, unit: int, programs: int, deadline: float | None, seen: list) -> dict:
        r = self.runner
        r.stats, r.done, r.quota, r.deadline = Stats(), 0, programs, deadline
        r.seen, r.found = set(seen), []
        if r.memory is not None:  # every N-th program of the unit: the same ones on a rerun
            r.memory.seen = 0
        t0 = time.perf_counter()
        r.generate(lambda run_no: hash_seed(self.opts.seed, "unit", unit, run_no), self.db)
        r.stats.seconds = time.perf_counter() - t0
        return {"unit": unit, "stats": r.stats.to_json(), "found": r.found, "pid": os.getpid()}


def _load_state(path: str) -> dict:
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    return {}


def _write_finding(out: str, item: dict) -> bool:
    """Write a finding the driver received, atomically; False when it exists."""
    def fill(tmp):
        for name, data in item["files"].items():
            with open(os.path.join(tmp, os.path.basename(name)), "wb") as f:
                f.write(data)
    return publish_directory(os.path.join(out, item["name"]), fill, replace=False)


def _check_reachable(address: str, timeout: float = 10.0) -> None:
    """A ``HOST:PORT`` (or ``ray://HOST:PORT``) nobody listens on fails here, in
    seconds, instead of in Ray's minutes of retries."""
    import socket
    hostport = address.split("://", 1)[-1]
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        return  # "auto", "local": Ray finds (or refuses) the cluster itself
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout).close()
    except OSError as exc:
        raise CampaignSetupError(f"--ray {address}: no Ray cluster answers there ({exc}); "
                                 "start one with `ray start --head` or give its address"
                                 ) from None


def run_ray_campaign(opts: CampaignOptions) -> dict:
    """Run a campaign on the Ray cluster at ``opts.ray``; returns the summary."""
    try:
        import ray
        from ray.exceptions import RayActorError, RayError
    except ImportError:
        raise CampaignSetupError("--ray needs Ray: pip install 'hloref[ray]' "
                                 "(or pip install ray)") from None
    from .strategies import reachable_opcodes
    database(opts)  # a bad --db fails here, not in every actor
    os.makedirs(opts.out, exist_ok=True)
    state_path = os.path.join(opts.out, "campaign.json")
    state = _load_state(state_path)
    previous = Stats.from_json(state.get("totals", {}))
    done_units = set(state.get("units_done", []))
    unit_keys = {int(k): v for k, v in state.get("unit_findings", {}).items()}
    examples_started = int(state.get("examples_started", 0))
    existing = set(finding_dirs(opts.out))
    seen_dir = os.path.join(opts.out, ".seen")
    os.makedirs(seen_dir, exist_ok=True)
    seen = set(os.listdir(seen_dir))
    _check_reachable(opts.ray)
    try:
        ray.init(address=opts.ray, ignore_reinit_error=True, log_to_driver=False,
                 logging_level="warning")
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise CampaignSetupError(f"--ray {opts.ray}: cannot join the Ray cluster: {exc}") from None
    n_actors = opts.workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
    if opts.examples is None and opts.seconds is None:
        opts.examples = 100
    deadline = time.time() + opts.seconds if opts.seconds else None
    actor_cls = ray.remote(num_cpus=1, max_restarts=-1, max_task_retries=0)(UnitWorker)
    actors = [actor_cls.remote(opts) for _ in range(n_actors)]
    workers_path = os.path.join(opts.out, ".ray", "workers.json")
    infos: dict = {}

    def refresh_infos(i):
        try:
            infos[i] = ray.get(actors[i].info.remote(), timeout=120)
        except RayError:
            infos[i] = {"pid": None, "node": None}

    for i in range(n_actors):
        refresh_infos(i)
    reachable = len(reachable_opcodes())
    run_stats = Stats()
    planned = 0  # programs handed out in this run (units in flight included)
    next_unit = 0
    retry: list = []  # (unit, programs, attempts) to hand out again
    inflight: dict = {}  # ref -> (actor index, unit, programs, attempts)
    busy: dict = {}  # actor index -> unit
    retried = lost = units_run = 0
    t0 = time.perf_counter()
    last_print = 0.0
    tty = sys.stdout.isatty() and not opts.quiet

    def save_workers():
        atomic_json(workers_path, {str(i): {**infos.get(i, {}), "unit": busy.get(i)}
                                   for i in range(n_actors)})

    def next_work():
        nonlocal next_unit, planned
        if retry:
            return retry.pop(0)
        if deadline is not None and time.time() >= deadline:
            return None
        if opts.examples is not None and planned >= opts.examples:
            return None
        while next_unit in done_units:
            next_unit += 1
        unit = next_unit
        next_unit += 1
        n = opts.unit_programs if opts.examples is None else \
            min(opts.unit_programs, opts.examples - planned)
        planned += n
        return unit, n, 0

    def hand_out():
        for i in range(n_actors):
            if i in busy:
                continue
            work = next_work()
            if work is None:
                return
            unit, n, attempts = work
            ref = actors[i].run_unit.remote(unit, n, deadline, sorted(seen))
            inflight[ref] = (i, unit, n, attempts)
            busy[i] = unit
        save_workers()

    try:
        hand_out()
        while inflight:
            ready, _ = ray.wait(list(inflight), num_returns=1, timeout=0.5)
            for ref in ready:
                i, unit, n, attempts = inflight.pop(ref)
                busy.pop(i, None)
                try:
                    result = ray.get(ref)
                except RayActorError as exc:  # the actor (or its node) died: run it again
                    if attempts + 1 < MAX_ATTEMPTS:
                        retried += 1
                        retry.append((unit, n, attempts + 1))
                    else:
                        lost += 1
                        print(f"hloref fuzz: unit {unit} failed {MAX_ATTEMPTS} times, "
                              f"given up: {exc}", file=sys.stderr)
                    refresh_infos(i)
                    continue
                keys = []
                for item in result["found"]:
                    key = item["pre_key"]
                    keys.append(key)
                    if key in seen:  # another unit found it first
                        run_stats.duplicates += 1
                        continue
                    name = item.get("name")
                    if name is not None:  # None: did not reproduce from disk
                        if _write_finding(opts.out, item):
                            run_stats.findings.append(os.path.join(opts.out, name))
                            if key.startswith("memory-"):
                                run_stats.memory["findings"] += 1
                        else:
                            run_stats.duplicates += 1
                    with open(os.path.join(seen_dir, key), "w", encoding="utf-8") as f:
                        f.write(name or "")
                    seen.add(key)
                units_run += 1
                stats = Stats.from_json(result["stats"])
                stats.findings = []
                run_stats.merge(stats)
                done_units.add(unit)
                unit_keys[unit] = keys
                totals = Stats.from_json(previous.to_json())
                totals.merge(run_stats)
                atomic_json(state_path, {
                    "seed": opts.seed, "mode": "ray", "units_done": sorted(done_units),
                    "unit_findings": {str(k): v for k, v in sorted(unit_keys.items())},
                    "examples_started": examples_started + run_stats.programs,
                    "totals": totals.to_json(), "oracles": list(opts.oracles)})
            hand_out()
            if ready and not inflight:
                save_workers()
            elapsed = time.perf_counter() - t0
            if not opts.quiet:
                line = progress_line(run_stats, elapsed, reachable)
                if tty:
                    print("\r" + line[:200], end="", flush=True)
                elif elapsed - last_print >= opts.progress_every:
                    last_print = elapsed
                    print(line, flush=True)
        if tty:
            print()
    finally:
        for a in actors:
            try:
                ray.kill(a)
            except Exception:  # noqa: BLE001
                pass
    elapsed = time.perf_counter() - t0
    run_stats.seconds = elapsed
    totals = Stats.from_json(previous.to_json())
    totals.merge(run_stats)
    totals.seconds = previous.seconds + elapsed
    atomic_json(state_path, {
        "seed": opts.seed, "mode": "ray", "units_done": sorted(done_units),
        "unit_findings": {str(k): v for k, v in sorted(unit_keys.items())},
        "examples_started": examples_started + run_stats.programs,
        "totals": totals.to_json(), "oracles": list(opts.oracles)})
    extra = {"ray": {"address": opts.ray, "actors": n_actors, "units": units_run,
                     "retried_units": retried, "lost_units": lost}}
    return finish(opts, run_stats, totals, existing, reachable, workers=n_actors, extra=extra)
