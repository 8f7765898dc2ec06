"""XLA's own HLO test modules as hloref's conformance suite.

Usage::

    python ci/conformance.py SOURCE [--ref main] [--cache DIR] [--out docs/conformance.md]
                             [--json results.json] [--extract-to DIR] [--limit N]
                             [--no-eval] [--only SUBSTRING] [--timeout S] [--seed N]
                             [--shard I/N] [--xla-only] [--cached-only] [--resume]
                             [--multi-device] [--keys FILE] [--redo A.json ...]
                             [--merge A.json B.json ...]

``SOURCE`` is a bare git directory of openxla/xla (or its mirror ROCm/xla, whose ``main``
holds the same files; ``--ref`` picks the commit), a checkout of it, or a directory of
``.hlo`` files (e.g. written earlier by ``--extract-to``). From ``xla/**/*_test.cc`` every
C++ raw string literal (``R"(...)"``, ``R"hlo(...)hlo"``) that contains ``ENTRY`` is one
module; identical texts are scored once.

For each module:

1. XLA's parser (jaxlib's ``hlo_module_from_text``, in a worker process: XLA may abort)
   decides whether it is HLO at all; texts XLA rejects (format placeholders such as
   ``$0``, deliberately bad modules) are left out of the score.
2. hloref parses it; its printed text must parse again in XLA *and* in hloref to the
   same module (the round trip).
3. XLA:CPU compiles and runs it (through jaxlib, as ``hloref diff`` does) on seeded inputs
   (``hloref.inputs.random_value``, seed ``--seed``; a module with ``bitcast``, which jaxlib
   cannot compile, runs with each bitcast replaced by its logical transpose/reshape,
   ``ci/logical_bitcasts.py``; a set-dimension-size's size parameter is drawn within
   [0, bound], ``bounded_sizes``); when it runs, hloref evaluates it on
   the same inputs and XLA:CPU's value is judged as ``hloref diff`` judges it: a match
   within the per-type ULP floor (``fuzz/compare.py``), else inside the numerical
   envelope (``fuzz/envelope.py``: 8 perturbed evaluations, fewer, at least 2, for a
   module whose evaluation takes over 5 s; reported separately), else another valid
   answer (an unstable sort's tie order, ``fuzz/undetermined.py:tie_order_valid``; a dynamic result at its
   padded bound, ``valid_region``; counted apart), else a documented
   semantic gap (``fuzz/known_classes.py``), else a mismatch. A module on several devices
   runs on that many host devices; where its collectives are written for another
   layout than its header declares (the test sets the count in C++), both runs get the
   layout its collectives are consistent on (``devices_for``) in the header.

XLA's answers (parse verdicts, inputs and outputs) are cached under ``--cache`` keyed by
the text's hash: jaxlib is pinned, so they only need computing once. The summary table
goes to ``--out`` (Markdown); ``--json`` writes one record per module.
Exit status: 0 when every module XLA accepts parses in hloref, 1 otherwise, 2 on bad usage.

This script holds the command line (``main``) and the scoring of each module (``score``);
the rest lives beside it, one concept a module:

* ``ci/conformance_extract.py``: the module literals of XLA's test sources (``Case``,
  ``literals_of``, ``extract``).
* ``ci/conformance_workers.py``: the XLA and hloref worker processes (``Worker``; this
  script re-executes itself with ``--worker``), XLA's cached answers (``Cache``), seeded
  size parameters (``bounded_sizes``).
* ``ci/conformance_judge.py``: judging one value (``judge``, ``judge_devices``, the
  envelope's ``envelope_samples``); the other valid answers it accepts are checked
  by ``fuzz/dynamic_region.py:valid_region`` (a dynamic result at its padded bound) and
  ``fuzz/undetermined.py:tie_order_valid`` (an unstable sort's tie order).
* ``ci/conformance_layout.py``: multi-device layouts (``devices_for``,
  ``layout_consistent``, ``with_devices``).
* ``ci/conformance_reasons.py``: the reason tables (``reason_for``, ``REASON_RULES``,
  ``REASON_BY_LOCATION``, ``XLA_PARSER_BUGS``).
* ``ci/conformance_report.py``: merging records (``merge_records``) and the Markdown
  summary (``summary``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import time

import numpy as np

from conformance_extract import Case, extract
from conformance_layout import (COLLECTIVES, MAX_DEVICES, declared_devices, devices_for,
                                multi_device, with_devices)
from conformance_reasons import XLA_PARSER_BUGS, reason_for
from conformance_report import merge_records, summary, write_json
from conformance_workers import Cache, Worker, bounded_sizes, worker_main, xla_cached

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def score(cases: list[Case], cache: Cache, *, evaluate: bool, seed: int, timeout: float,
          progress: bool = True, xla_only: bool = False, cached_only: bool = False,
          done: dict | None = None, json_path: str | None = None) -> list[dict]:
    """One record per case. ``done``: records of an earlier run by key, kept as they
    are (``--resume``); with ``json_path`` the records so far are written there every
    200 cases, so a run cut short leaves them."""
    xla = Worker("xla", timeout)
    ours = Worker("hloref", timeout)
    records = []
    t0 = time.time()
    try:
        for i, case in enumerate(cases):
            if progress and i % 200 == 0:
                print(f"[{i}/{len(cases)}] {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
                if json_path and i:
                    write_json(json_path, records)
            if done and case.key in done:
                records.append(done[case.key])
                continue
            rec = {"key": case.key, "where": case.where, "copies": len(case.locations)}
            records.append(rec)
            got = xla_cached(cache, xla, f"{case.key}.parse", "parse", case.text, timeout=60)
            rec["xla_parse"] = got[0]
            if got[0] != "ok":
                rec["xla_message"] = str(got[1])[:300]
                continue
            run = None
            text, suffix = case.text, ""
            inferred = devices_for(case.text) if evaluate else None
            if inferred:  # collectives for more devices than the header: the test's count
                text, suffix = with_devices(case.text, *inferred), ".devices%dx%d" % inferred
                rec["devices"], rec["devices_inferred"] = "%dx%d" % inferred, True
            elif evaluate and multi_device(case.text):
                # (a distinct cache name: old runs cached these as one-device answers)
                suffix = ".devices%dx%d" % declared_devices(case.text)
                rec["devices"] = suffix[len(".devices"):]
            if evaluate and rec.get("devices") and \
                    np.prod([int(v) for v in rec["devices"].split("x")]) > MAX_DEVICES:
                run = ("unsupported", f"a module on more than {MAX_DEVICES} devices")
                rec["xla_run"], rec["xla_message"] = run
            elif evaluate:
                sizes = bounded_sizes(case.text)
                if sizes:  # size parameters seeded within their bounds (a new cache name)
                    suffix += ".sizes"
                    rec["seeded_sizes"] = {str(k): v for k, v in sorted(sizes.items())}
                run = xla_cached(cache, xla, f"{case.key}.run{seed}{suffix}", "run", text, seed,
                                  None, sizes, cached_only=cached_only)
                if run[0] == "unsupported" and "cannot compile `bitcast`" in str(run[1]):
                    # XLA:CPU runs the bitcasts' logical equivalent (ci/logical_bitcasts.py)
                    run = xla_cached(cache, xla, f"{case.key}.run{seed}{suffix}.logical-bitcasts",
                                      "run", text, seed, "logical-bitcasts", sizes,
                                      cached_only=cached_only)
                    if run[0] == "ok":
                        rec["xla_logical_bitcasts"] = True
                rec["xla_run"] = run[0]
                if run[0] != "ok":
                    rec["xla_message"] = str(run[1]).splitlines()[0][:300] if run[1] else ""
            args = run[1][0] if run and run[0] == "ok" else None
            if xla_only:
                continue
            expected = run[1][1] if args is not None else None
            res = ours("check", text if args is not None else case.text, args, expected)
            if res[0] == "timeout" and args is not None:
                # the evaluation (or its envelope) was slow: parse and print alone
                slow = res[1]
                res = ours("check", text, None, None)
                if res[0] == "done" and res[1].get("parse") == "ok":
                    res[1].update(eval="timeout", message=slow)
            if res[0] != "done":
                rec["hloref_parse"] = res[0]
                rec["hloref_message"] = res[1][:300]
                continue
            res = res[1]
            rec["hloref_parse"] = res["parse"]
            if res["parse"] != "ok":
                rec["hloref_message"] = res["message"][:300]
                if case.where in XLA_PARSER_BUGS:
                    rec["reason"] = XLA_PARSER_BUGS[case.where]
                if "traceback" in res:
                    rec["traceback"] = res["traceback"]
                continue
            rec["reparse"] = res.get("reparse")
            if "printed" in res:
                again = xla_cached(cache, xla, hashlib.sha256(res["printed"].encode()).hexdigest()[:16]
                                    + ".parse", "parse", res["printed"], timeout=60)
                rec["roundtrip_xla"] = again[0]
                if again[0] != "ok":
                    rec["roundtrip_message"] = str(again[1])[:300]
            if args is None:
                continue
            rec["hloref_eval"] = res.get("eval")
            if res.get("eval") != "ok":
                rec["hloref_message"] = res.get("message", "")[:300]
                if "traceback" in res:
                    rec["traceback"] = res["traceback"]
                if res.get("eval") != "timeout":
                    rec["reason"] = reason_for(rec, case.text)
                continue
            verdict = res.get("verdict", "mismatch")
            rec["verdict"] = verdict
            for k in ("compare_message", "known_gap", "envelope_samples", "eval_seconds",
                      "accepted"):
                if k in res:
                    rec[k] = res[k][:300] if isinstance(res[k], str) else res[k]
            if verdict == "known-gap":
                rec["reason"] = "documented semantic gap (fuzz/known_classes.py) " + rec["known_gap"]
            elif verdict == "mismatch":
                rec["reason"] = reason_for(rec, case.text)
    finally:
        xla.close()
        ours.close()
    return records


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("source", nargs="?")
    p.add_argument("--ref", default="main")
    p.add_argument("--cache", default=os.path.join(HERE, "out", "conformance-cache"))
    p.add_argument("--out")
    p.add_argument("--json")
    p.add_argument("--extract-to")
    p.add_argument("--limit", type=int)
    p.add_argument("--only", help="score only modules whose location contains this text")
    p.add_argument("--no-eval", action="store_true")
    p.add_argument("--redo", nargs="+", metavar="JSON",
                   help="score again only the modules XLA:CPU ran whose record in these "
                        "files is not a match (e.g. after a fix; with --cached-only)")
    p.add_argument("--keys", metavar="FILE",
                   help="score only the modules whose text hash (a record's `key`) this "
                        "file lists (a JSON list, or one per line)")
    p.add_argument("--multi-device", action="store_true",
                   help="score only modules on several devices (declared in the header, or "
                        "inferred from their collectives' device ids)")
    p.add_argument("--shard", help="I/N: score every N-th module starting at I")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=120.0)
    p.add_argument("--xla-only", action="store_true", help="only fill the cache of XLA's answers")
    p.add_argument("--cached-only", action="store_true",
                   help="run XLA:CPU only where its answer is already cached")
    p.add_argument("--resume", action="store_true",
                   help="keep the records already in --json (by text hash) instead of scoring "
                        "those modules again (the file is rewritten every 200 modules)")
    p.add_argument("--merge", nargs="+", metavar="JSON",
                   help="summarise the records of earlier runs (e.g. the --json of each "
                        "--shard; a later file's record replaces an earlier one's) instead "
                        "of scoring; reasons are derived again with the current rules")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        worker_main(a.worker)
        return 0
    if not a.source or not os.path.isdir(a.source):
        p.error("SOURCE must be an XLA git directory, checkout, or a directory of .hlo files")
    cases = extract(a.source, a.ref)
    cases.sort(key=lambda c: c.where)
    if a.only:
        cases = [c for c in cases if any(a.only in w for w in c.locations)]
    if a.redo:
        redo = set()
        for path in a.redo:
            with open(path, encoding="utf-8") as f:
                for r in json.load(f):
                    if r.get("xla_run") == "ok" and r.get("verdict") not in ("match", "envelope"):
                        redo.add(r["key"])
        cases = [c for c in cases if c.key in redo]
    if a.keys:
        with open(a.keys, encoding="utf-8") as f:
            body = f.read()
        keys = set(json.loads(body) if body.lstrip().startswith("[") else body.split())
        cases = [c for c in cases if c.key in keys]
    if a.multi_device:
        cases = [c for c in cases if COLLECTIVES.search(c.text) and (
            devices_for(c.text) or multi_device(c.text))]
    if a.limit:
        cases = cases[:a.limit]
    if a.shard:
        i, n = (int(x) for x in a.shard.split("/"))
        cases = cases[i::n]
    if a.extract_to:
        os.makedirs(a.extract_to, exist_ok=True)
        for c in cases:
            name = re.sub(r"[^A-Za-z0-9_.-]", "_", c.where) + ".hlo"
            with open(os.path.join(a.extract_to, name), "w", encoding="utf-8") as f:
                f.write(c.text)
    if a.merge:
        records = merge_records(a.merge, cases)
    else:
        done = None
        if a.resume and a.json and os.path.exists(a.json):
            with open(a.json, encoding="utf-8") as f:
                done = {r["key"]: r for r in json.load(f)}
        records = score(cases, Cache(a.cache), evaluate=not a.no_eval, seed=a.seed,
                        timeout=a.timeout, xla_only=a.xla_only, cached_only=a.cached_only,
                        done=done, json_path=a.json)
    desc = f"`{a.ref}` of {os.path.basename(os.path.normpath(a.source))}"
    try:
        rev = subprocess.run(["git", f"--git-dir={a.source}", "rev-parse", a.ref], check=True,
                             capture_output=True, text=True).stdout.strip()
        desc = f"XLA test sources at `{a.ref}` = `{rev}`"
    except (subprocess.CalledProcessError, OSError):
        pass
    text = summary(records, not a.no_eval, desc)
    print(text)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    if a.json:
        write_json(a.json, records)
    accepted = [r for r in records if r["xla_parse"] == "ok"]
    return 0 if all(r.get("hloref_parse") == "ok" for r in accepted) else 1


if __name__ == "__main__":
    sys.exit(main())
