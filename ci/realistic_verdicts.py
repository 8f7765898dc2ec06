"""Measure hloref's verdicts on realistic programs and planted miscompilations.

Usage:
  python ci/realistic_verdicts.py [--out DIR] [--only NAME,...] [--json FILE] [--skip-dump]
                                  [--rev REV] [--seed N] [--per-kind N] [--timeout S]

Materializes the suite of ``tests/realistic_programs.py`` into DIR (default: a new
temporary directory, kept) and, for every program, runs hloref's command line (each
call a subprocess, timed):

* ``hloref diff module.hlo --inputs inputs.npz --oracle xla --json``: a false alarm
  if the verdict is not ``match``;
* ``hloref check module.hlo optimized.hlo --inputs inputs.npz``: a false alarm if the
  exit status is 1;
* ``hloref check-dump dump/ --seed 0``: a false alarm if it names a divergent pass
  (exit status 1);
* for each planted mutant of ``optimized.hlo`` (``tests/realistic_mutants.py``):
  ``hloref check module.hlo mutant.hlo --inputs inputs.npz``: a miss if the exit
  status is 0.

Prints a program table and a mutant table in Markdown and the totals (false alarms /
runs, detected / mutants). Exit status 0 always, 2 if it cannot run.

``--rev REV`` measures hloref as committed at git revision REV (``git archive`` into a
temporary package tree put first on PYTHONPATH, the whole script re-run under it),
not the working tree: the baseline when the working tree holds a verdict in progress.
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

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_TREE_ENV = "HLOREF_REALISTIC_TREE"


# ------------------------------------------------------------------ hloref at a revision


def _package_tree(rev: str) -> str:
    """hloref at ``rev`` laid out as installed packages (``package-dir`` of pyproject):
    DEST/hloref, DEST/hloref/{evaluator,fuzz,gpu}."""
    dest = tempfile.mkdtemp(prefix=f"hloref-{rev.replace('/', '_')[:20]}-")
    src = os.path.join(dest, "src")
    os.makedirs(src)
    archive = subprocess.run(["git", "-C", HERE, "archive", rev, "hloref", "evaluator", "fuzz",
                              "gpu"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", src], input=archive, check=True)
    site = os.path.join(dest, "site")
    os.makedirs(site)
    shutil.move(os.path.join(src, "hloref"), os.path.join(site, "hloref"))
    for sub in ("evaluator", "fuzz", "gpu"):
        if os.path.isdir(os.path.join(src, sub)):
            shutil.move(os.path.join(src, sub), os.path.join(site, "hloref", sub))
    return site


def _reexec_at(rev: str, argv: list[str]) -> int:
    try:
        commit = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", rev],
                                capture_output=True, text=True, check=True).stdout.strip()
        site = _package_tree(rev)
    except (subprocess.CalledProcessError, OSError) as exc:
        print(f"cannot build hloref at {rev}: {exc}", file=sys.stderr)
        return 2
    env = dict(os.environ)
    env["PYTHONPATH"] = site + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env[_TREE_ENV] = f"{rev} ({commit})"
    try:
        return subprocess.run([sys.executable, os.path.abspath(__file__), *argv], env=env).returncode
    finally:
        shutil.rmtree(os.path.dirname(site), ignore_errors=True)


# ------------------------------------------------------------------ running hloref


def _hloref(args: list[str], timeout: float, cwd: str | None = None) -> dict:
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-m", "hloref", *args], capture_output=True,
                              text=True, timeout=timeout, cwd=cwd)
    except subprocess.TimeoutExpired as exc:
        return {"rc": None, "seconds": time.perf_counter() - t0, "stdout": exc.stdout or "",
                "stderr": "timeout", "timeout": True}
    return {"rc": proc.returncode, "seconds": time.perf_counter() - t0, "stdout": proc.stdout,
            "stderr": proc.stderr[-4000:], "timeout": False}


def _first_line(text: str, limit: int = 160) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()[:limit]
    return ""


def _diff(d: str, timeout: float) -> dict:
    r = _hloref(["diff", "module.hlo", "--inputs", "inputs.npz", "--oracle", "xla", "--json"],
                timeout, cwd=d)
    verdict, detail = "error", _first_line(r["stderr"])
    if r["timeout"]:
        verdict = "timeout"
    else:
        try:
            report = json.loads(r["stdout"])
            verdict = report.get("verdict", "error")
            c = report.get("ulp_floor") or {}
            detail = c.get("message") or report.get("message") or ""
            if c.get("max_ulp") is not None:
                detail += f" (max ulp {c['max_ulp']:g}, max rel {c.get('max_rel', 0):.3g})"
            if report.get("culprit"):
                cu = report["culprit"]
                detail += f"; culprit %{cu['instruction']} ({cu['opcode']})"
            if report.get("explained_by_rounding"):
                detail += "; explained by rounding"
        except (json.JSONDecodeError, TypeError, AttributeError):
            pass
    return {"verdict": verdict, "false_alarm": verdict != "match", "rc": r["rc"],
            "seconds": r["seconds"], "detail": detail}


def _check(d: str, after: str, timeout: float) -> dict:
    r = _hloref(["check", "module.hlo", after, "--inputs", "inputs.npz"], timeout, cwd=d)
    verdict = {0: "match", 1: "mismatch"}.get(r["rc"], "timeout" if r["timeout"] else "error")
    detail = _first_line(r["stderr"], 400)
    if r["rc"] in (0, 1):  # the line after "verdict: ...": AFTER's value against the envelope
        lines = [line.strip() for line in r["stdout"].splitlines() if line.strip()]
        at = next((i for i, line in enumerate(lines) if line.startswith("verdict:")), None)
        detail = lines[at + 1][:400] if at is not None and at + 1 < len(lines) else \
            _first_line(r["stdout"], 400)
    return {"verdict": verdict, "rc": r["rc"], "seconds": r["seconds"], "detail": detail}


def _check_dump(d: str, seed: int, timeout: float) -> dict:
    out = os.path.join(d, "check-dump.json")
    r = _hloref(["check-dump", "dump", "--seed", str(seed), "--json", out], timeout, cwd=d)
    verdict = {0: "match", 1: "divergent"}.get(r["rc"], "timeout" if r["timeout"] else "error")
    detail, snapshots = "", 0
    try:
        with open(out, encoding="utf-8") as f:
            summary = json.load(f)
        for m in summary:
            snapshots += len(m.get("snapshots", []))
            if m.get("first_divergent"):
                detail = f"first divergent: {m['first_divergent']}"
                bad = next((s for s in m["snapshots"] if s["label"] == m["first_divergent"]), None)
                if bad:
                    detail += f" (max ulp {bad['max_ulp']:g}, max rel {bad['max_rel']:.3g})"
            if m.get("status") == "error":
                detail = m.get("message", "")
        errors = sum(1 for m in summary for s in m.get("snapshots", [])
                     if s["status"] != "ok")
        if errors:
            detail += f"; {errors} snapshots not evaluated"
    except (OSError, json.JSONDecodeError):
        detail = _first_line(r["stderr"]) or _first_line(r["stdout"])
    return {"verdict": verdict, "false_alarm": r["rc"] == 1, "rc": r["rc"],
            "seconds": r["seconds"], "snapshots": snapshots, "detail": detail}


# ------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="directory to materialize the suite into (default: temp)")
    parser.add_argument("--only", help="comma-separated program names")
    parser.add_argument("--json", help="write every result as JSON to this file")
    parser.add_argument("--skip-dump", action="store_true",
                        help="no per-pass dump and no check-dump runs")
    parser.add_argument("--rev", help="measure hloref as committed at this git revision")
    parser.add_argument("--seed", type=int, default=0, help="mutant seed and check-dump seed")
    parser.add_argument("--per-kind", type=int, default=2, help="mutants per kind and program")
    parser.add_argument("--timeout", type=float, default=600.0, help="per hloref call (s)")
    args = parser.parse_args(argv)
    if args.rev and not os.environ.get(_TREE_ENV):
        rest = []
        skip = False
        for i, a in enumerate(argv):  # drop --rev from the re-run's arguments
            if skip:
                skip = False
                continue
            if a == "--rev":
                skip = True
                continue
            if a.startswith("--rev="):
                continue
            rest.append(a)
        rc = _reexec_at(args.rev, rest)
        return rc if rc in (0, 2) else 2

    sys.path.insert(0, os.path.join(HERE, "tests"))
    try:
        import hloref
        import realistic_mutants as rm
        import realistic_programs as rp
    except Exception as exc:  # noqa: BLE001 - jax, hloref or the suite cannot be imported
        print(f"cannot import the suite: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    names = list(rp.PROGRAMS)
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in rp.PROGRAMS]
        if unknown:
            print(f"unknown programs: {', '.join(unknown)} (known: {', '.join(rp.PROGRAMS)})",
                  file=sys.stderr)
            return 2
    out = args.out or tempfile.mkdtemp(prefix="realistic-verdicts-")
    os.makedirs(out, exist_ok=True)
    source = os.environ.get(_TREE_ENV) or "working tree"
    print(f"hloref: {os.path.dirname(hloref.__file__)} ({source}); suite in {out}", flush=True)

    results = []
    for name in names:
        rec: dict = {"program": name}
        results.append(rec)
        t0 = time.perf_counter()
        try:
            program = rp.PROGRAMS[name]()
            rec["build_seconds"] = time.perf_counter() - t0
            m = rp.materialize(program, out, dump=not args.skip_dump)
        except Exception as exc:  # noqa: BLE001 - record and go on
            rec["error"] = f"materialize: {type(exc).__name__}: {exc}"
            print(f"{name}: {rec['error']}", flush=True)
            continue
        d = m.directory
        rec.update(description=program.description, instructions=m.instructions,
                   optimized_instructions=m.optimized_instructions,
                   materialize_seconds={k: round(v, 3) for k, v in m.seconds.items()},
                   materialize_errors=m.errors)
        t0 = time.perf_counter()
        try:
            with open(m.optimized, encoding="utf-8") as f:
                optimized = f.read()
            mutants = rm.mutants(optimized, program.args, seed=args.seed, per_kind=args.per_kind)
        except Exception as exc:  # noqa: BLE001
            mutants = []
            rec["mutant_error"] = f"{type(exc).__name__}: {exc}"
        rec["mutant_seconds"] = time.perf_counter() - t0
        mdir = os.path.join(d, "mutants")
        shutil.rmtree(mdir, ignore_errors=True)
        os.makedirs(mdir)
        listing = []
        for i, mu in enumerate(mutants):
            path = os.path.join("mutants", f"{i:02d}_{mu.kind}.hlo")
            with open(os.path.join(d, path), "w", encoding="utf-8") as f:
                f.write(mu.text)
            listing.append({"file": path, "kind": mu.kind, "description": mu.description,
                            "line": mu.line, "effect": mu.effect})
        with open(os.path.join(mdir, "mutants.json"), "w", encoding="utf-8") as f:
            json.dump(listing, f, indent=2)
        print(f"{name}: {m.instructions} instructions ({m.optimized_instructions} optimized), "
              f"{len(mutants)} mutants; materialized in "
              f"{sum(m.seconds.values()) + rec['build_seconds']:.1f}s"
              + (f"; ERRORS: {m.errors}" if m.errors else ""), flush=True)

        rec["diff"] = _diff(d, args.timeout)
        rec["check"] = _check(d, "optimized.hlo", args.timeout)
        rec["check"]["false_alarm"] = rec["check"]["rc"] == 1
        if not args.skip_dump and m.dump:
            rec["check_dump"] = _check_dump(d, args.seed, args.timeout)
        rec["mutants"] = []
        for item in listing:
            c = _check(d, item["file"], args.timeout)
            c.update(item)
            c["flagged"] = c["rc"] == 1
            c["miss"] = c["rc"] == 0
            rec["mutants"].append(c)
        flagged = sum(c["flagged"] for c in rec["mutants"])
        print(f"  diff {rec['diff']['verdict']} ({rec['diff']['seconds']:.1f}s), check "
              f"{rec['check']['verdict']} ({rec['check']['seconds']:.1f}s)"
              + (f", check-dump {rec['check_dump']['verdict']} "
                 f"({rec['check_dump']['seconds']:.1f}s)" if "check_dump" in rec else "")
              + f", mutants flagged {flagged}/{len(rec['mutants'])}", flush=True)

    print()
    print(_tables(results, not args.skip_dump))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"hloref": source, "out": out, "results": results}, f, indent=2,
                      default=str)
    return 0


def _tables(results: list[dict], with_dump: bool) -> str:
    lines = ["## Programs (false alarm = not `match` on a correct program)", "",
             "| program | instr | diff | s | check (unopt vs opt) | s | "
             + ("check-dump | s | " if with_dump else "") + "details |",
             "|---|---|---|---|---|---|" + ("---|---|" if with_dump else "") + "---|"]
    fa = runs = 0
    for r in results:
        if "error" in r:
            lines.append(f"| {r['program']} | | error | | | |" + (" | |" if with_dump else "")
                         + f" {r['error'][:200]} |")
            continue
        cells = []
        details = []
        for key in ("diff", "check") + (("check_dump",) if with_dump else ()):
            c = r.get(key)
            if c is None:
                cells += ["-", ""]
                continue
            runs += 1
            fa += bool(c["false_alarm"])
            mark = " **FALSE ALARM**" if c["false_alarm"] else ""
            cells += [f"{c['verdict']}{mark}", f"{c['seconds']:.1f}"]
            if c["verdict"] != "match" and c.get("detail"):
                details.append(f"{key}: {c['detail']}")
        if r.get("materialize_errors"):
            details.append("materialize: " + "; ".join(r["materialize_errors"]))
        lines.append(f"| {r['program']} | {r.get('instructions', '')} | " + " | ".join(cells)
                     + " | " + "<br>".join(d.replace("|", "\\|") for d in details) + " |")
    lines += ["", f"**false alarms: {fa} / {runs} runs**", "",
              "## Planted mutants (`hloref check module.hlo mutant.hlo`; miss = exit 0)", "",
              "effect: the mutation's change of the result, evaluated in f64, relative to the "
              "output's magnitude (inf: integers or shapes changed)", "",
              "| program | kind | mutation | effect | flagged | s | check says |",
              "|---|---|---|---|---|---|---|"]
    total = detected = errors = clean_detected = clean_total = 0
    for r in results:
        clean_ok = r.get("check", {}).get("rc") == 0
        for c in r.get("mutants", []):
            total += 1
            detected += c["flagged"]
            errors += c["rc"] not in (0, 1)
            if clean_ok:
                clean_total += 1
                clean_detected += c["flagged"]
            flag = "yes" if c["flagged"] else ("**MISS**" if c["miss"] else c["verdict"])
            eff = "" if c.get("effect") is None else f"{c['effect']:.2g}"
            lines.append(f"| {r['program']} | {c['kind']} | {c['description'].replace('|', '/')} "
                         f"| {eff} | {flag} | {c['seconds']:.1f} "
                         f"| {c['detail'].replace('|', '/')[:140]} |")
    lines += ["", f"**detected: {detected} / {total} mutants** ({errors} errors); on programs whose "
              f"unmutated check passes: {clean_detected} / {clean_total}"]
    by_kind: dict = {}
    for r in results:
        for c in r.get("mutants", []):
            k = by_kind.setdefault(c["kind"], [0, 0])
            k[0] += c["flagged"]
            k[1] += 1
    lines += ["", "| kind | detected / mutants |", "|---|---|"]
    lines += [f"| {k} | {v[0]} / {v[1]} |" for k, v in by_kind.items()]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
