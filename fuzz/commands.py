"""``hloref diff``, ``hloref check``, ``hloref check-dump``, ``hloref fuzz`` and
``hloref replay``.

Exit status: 0 match, 1 mismatch or oracle crash/timeout, 2 usage or input error.
"""

from __future__ import annotations

import json
import os

import numpy as np

from hloref.cli_common import (EXIT_BAD_INPUT, EXIT_MISMATCH, EXIT_OK, CliError,
                               limits_from_args, load_module, random_arguments,
                               read_npz, require_modules, unflatten_arguments)
from hloref.errors import HloError


__all__ = ["ORACLE_MODULES", "require_oracle", "cmd_diff", "cmd_check", "cmd_check_dump",
           "cmd_fuzz", "cmd_replay", "add_commands", "add_fuzz_commands"]


def _inputs(args, module) -> list:
    if args.inputs and args.seed is not None:
        raise CliError("give either --inputs or --seed, not both")
    params = module.entry.parameters
    if args.inputs:
        return unflatten_arguments(read_npz(args.inputs), [p.shape for p in params])
    return random_arguments(module, args.seed if args.seed is not None else 0,
                            limits_from_args(args))


def _coerce(module, values):
    from hloref.api import coerce_argument
    return [coerce_argument(v, p.shape, f"argument {i} (%{p.name})")
            for i, (v, p) in enumerate(zip(values, module.entry.parameters))]


#: What each oracle needs installed, and the extra that installs it.
ORACLE_MODULES = {"xla": (("jax", "jaxlib"), "jax"), "tf": (("tensorflow", "jaxlib"), "tf")}


def require_oracle(what: str, oracle: str) -> None:
    """A ``CliError`` naming the extra to install when ``oracle``'s packages are missing."""
    modules, extra = ORACLE_MODULES[oracle]
    require_modules(f"{what} (the {oracle} oracle)", modules, extra)


def cmd_diff(args) -> int:
    from .differential import diff
    from .workers import OracleWorker
    require_oracle("hloref diff", args.oracle)
    module = load_module(args.file, verify=True)  # a verifier error is bad input: XLA never runs
    values = _coerce(module, _inputs(args, module))
    with OracleWorker(args.oracle, timeout=args.timeout) as worker:
        debug = {"xla_allow_excess_precision": False} if args.no_excess_precision else None
        report = diff(module, values, oracle=args.oracle, worker=worker,
                      isolate_all=args.isolate, limits=limits_from_args(args),
                      debug_options=debug, policy=_policy(args))
        blame = None
        if args.blame and report.verdict == "mismatch" and args.oracle == "xla":
            from .blame import blame as run_blame
            blame = run_blame(module.to_text(), values, worker)
        finding = None
        if args.reduce and report.verdict in ("mismatch", "crash"):
            finding = _reduce_and_write(module, values, report, worker, args.reduce, blame,
                                        args.oracle, seed=args.seed)
    rejected = report.verdict not in ("match", "known-gap", "undetermined", "mismatch", "crash",
                                      "timeout")
    if args.json:
        print(json.dumps(_report_json(report, blame, finding), indent=2, default=str))
        if rejected:
            return EXIT_BAD_INPUT
    elif rejected:  # one message, on stderr (main prints it)
        raise CliError(_rejection(report, module, args.file))
    else:
        print(report.summary())
        if args.isolate:
            print("\nisolated instructions:")
            for r in report.isolated:
                print(f"  %{r.name:30s} {r.opcode:24s} "
                      f"{r.verdict.describe(theirs=report.oracle_label)}")
        if blame is not None:
            print(f"\nfirst pass that changes the answer: {blame.pass_name or 'none found'}"
                  + ("" if blame.confirmed is None else
                     f" (confirmed by disabling it: {blame.confirmed})"))
            print(blame.table())
        if finding and finding.startswith("known-upstream:"):
            print(f"\nthe same root cause is known upstream: {finding.split(':', 1)[1]}")
        elif finding and finding.startswith("archived:"):
            print(f"\nthe same root cause is in the findings archive: "
                  f"findings/{finding.split(':', 1)[1]} (nothing written)")
        elif finding:
            print(f"\nreduced reproducer written to {finding}")
    return EXIT_OK if report.verdict in ("match", "known-gap", "undetermined") \
        else EXIT_MISMATCH


def _rejection(report, module, path: str) -> str:
    """The one message of a verdict that compared nothing (``error``, ``unsupported``):
    hloref or the oracle refused the module. A module after XLA's optimizations, which
    XLA cannot compile again, gets what to do instead."""
    message = report.message
    if message.startswith("hloref: "):
        return message[len("hloref: "):]
    if message.startswith("hloref"):
        return message
    text = f"{report.oracle_label} rejected the module ({report.verdict}): {message}"
    if module.attrs.get("is_scheduled") or "after_optimizations" in os.path.basename(path):
        before = _before_optimizations(path)
        text += (f"\n{path} is a module after XLA's optimizations (is_scheduled=true), which "
                 f"XLA does not compile again. Give diff the module before optimizations "
                 + (f"(hloref diff {before}); to judge this module against it: hloref check "
                    f"{before} {path}; to judge every pass of the dump: hloref check-dump "
                    f"{os.path.dirname(path) or '.'}" if before else
                    f"(--xla_dump_to's *.before_optimizations.txt, or jax.jit(f).lower(...)"
                    f".as_text(dialect='hlo')); to judge this module against it: hloref check "
                    f"BEFORE.hlo {path}; to judge every pass of a dump: hloref check-dump DIR"))
    return text


def _before_optimizations(path: str) -> str | None:
    """The dump's module before optimizations beside ``path`` (``PREFIX.*after_optimizations
    .txt`` → ``PREFIX.before_optimizations.txt``), if it is there."""
    import re
    m = re.match(r"(.*)\.[a-z]*_?after_optimizations\.txt$", path)
    candidate = f"{m.group(1)}.before_optimizations.txt" if m else None
    return candidate if candidate and os.path.isfile(candidate) else None


def _report_json(report, blame, finding) -> dict:
    """``--json``: the verdict and its meaning, and the values named as in every report
    (``fuzz/vocabulary.py``): ``hloref`` and ``oracle_value`` (the oracle's, judged)."""
    from .vocabulary import verdict_meaning
    out = {"verdict": report.verdict,
           "meaning": verdict_meaning(report.verdict, theirs=report.oracle_label),
           "oracle": report.oracle, "message": report.message,
           "debug_options": report.debug_options,
           "hloref_seconds": report.hloref_seconds, "oracle_seconds": report.oracle_seconds}
    if report.comparison is not None:
        c = report.comparison
        # the plain comparison under the per-type ULP floor: informative, not the verdict
        out["ulp_floor"] = {"within": c.ok, "message": c.message, "max_ulp": c.max_ulp,
                            "max_abs": c.max_abs, "max_rel": c.max_rel, "count": c.count,
                            "first_index": c.first_index, "hloref": c.expected_at_first,
                            "oracle_value": c.actual_at_first, "output": list(c.leaf)}
    if report.envelope is not None:
        e = report.envelope
        out["envelope"] = {"inside": e.ok, "output": list(e.leaf), "index": e.index,
                           "hloref": e.expected, "oracle_value": e.actual, "lo": e.lo,
                           "hi": e.hi,
                           "widths_outside": e.widths, "count": e.count,
                           "max_position": e.max_position,
                           "samples": report.policy.samples if report.policy else None,
                           "widen": report.policy.widen if report.policy else None}
    out["fault_stage"] = report.fault_stage
    out["envelope_seconds"] = report.envelope_seconds
    if report.culprit is not None:
        c = report.culprit.innermost()
        out["culprit"] = {"computation": c.computation, "instruction": c.name,
                          "opcode": c.opcode,
                          "verdict": c.verdict.describe(theirs=report.oracle_label)}
    if blame is not None:
        out["blamed_pass"] = blame.pass_name
        out["blame_confirmed"] = blame.confirmed
    if finding:
        out["finding"] = finding
    return out


def _reduce_and_write(module, values, report, worker, out_dir, blame, oracle, seed=None) -> str:
    """``--reduce``: the campaign's shared reduction (``campaign.reduce_and_write``);
    pass blame already ran here when ``--blame`` was given, so it is not repeated."""
    from .triage import reduce_and_write
    extra = {"blamed_pass": blame.pass_name, "blame_confirmed": blame.confirmed} if blame else None
    path, _signature, _new = reduce_and_write(module, values, report, worker, out_dir,
                                              oracle=oracle, seed=seed, blame=blame is None,
                                              extra_meta=extra)
    return path


def cmd_check(args) -> int:
    """Evaluate BEFORE's envelope and AFTER with hloref on the same inputs: is AFTER inside?
    Names the first instruction (by name, in BEFORE's order) outside its envelope."""
    from .check import check_modules
    before = load_module(args.before, verify=True)  # as evaluate and diff do
    after = load_module(args.after, verify=True)
    values = _coerce(before, _inputs(args, before))
    try:
        after_values = _coerce(after, values)
    except HloError as exc:
        raise CliError(f"{after.source_name or 'module'}: the inputs do not fit: {exc}") from None
    del after_values
    report = check_modules(before, after, values, limits=limits_from_args(args),
                           policy=_policy(args))
    print(f"before: {args.before}, after: {args.after} (both evaluated by hloref)")
    print(report.summary())
    return EXIT_OK if report.ok else EXIT_MISMATCH


def _policy(args):
    from .envelope import EnvelopePolicy
    kw = {}
    if getattr(args, "samples", None):
        kw["samples"] = args.samples
    if getattr(args, "widen", None):
        kw["widen"] = args.widen
    if getattr(args, "elide_converts", False):
        from .envelope import Freedoms
        kw["freedoms"] = Freedoms(elide_converts=True)
    policy = EnvelopePolicy(**kw)
    if getattr(args, "no_excess_precision", False):
        policy = policy.with_debug_options({"xla_allow_excess_precision": False})
    return policy


def cmd_check_dump(args) -> int:
    from .blame import evaluate_snapshots, first_divergent, read_dump
    import hloref
    if not os.path.isdir(args.dir):
        raise CliError(f"{args.dir}: not a directory")
    modules = read_dump(args.dir)
    modules = {k: m for k, m in modules.items() if m.before}
    if not modules:
        raise CliError(f"{args.dir}: no XLA dump (*.before_optimizations.txt) found")
    any_bad = False
    summary = []
    for prefix, dm in sorted(modules.items()):
        module = hloref.parse(open(dm.before, encoding="utf-8").read(), filename=dm.before)
        values = _coerce(module, random_arguments(module, args.seed, limits_from_args(args)))
        try:
            _, results = evaluate_snapshots(dm, values, limits=limits_from_args(args),
                                            policy=_policy(args))
        except HloError as exc:
            print(f"{prefix}: cannot evaluate the module before optimizations: {exc}")
            summary.append({"module": prefix, "status": "error", "message": str(exc)})
            continue
        bad = first_divergent(results)
        any_bad |= bad is not None
        print(f"\n{prefix}: {len(results)} snapshots; first divergent: "
              f"{bad.label if bad else 'none'}")
        print("| # | snapshot | status | envelope position | max ulp vs before | max rel |")
        print("|---|---|---|---|---|---|")
        for i, r in enumerate(results):
            status = r.status if r.status != "ok" else ("inside" if r.inside else "outside")
            mark = " **first divergence**" if r is bad else ""
            print(f"| {i} | {r.label}{mark} | {status} | {r.position:.3g} | {r.max_ulp:g} | "
                  f"{r.max_rel:g} |")
        summary.append({"module": prefix, "first_divergent": bad.label if bad else None,
                        "snapshots": [{"label": r.label, "status": r.status,
                                       "inside": r.inside if r.status == "ok" else None,
                                       "envelope_position": r.position,
                                       "envelope": str(r.envelope) if r.envelope else None,
                                       "max_ulp": r.max_ulp, "max_rel": r.max_rel,
                                       "message": r.message} for r in results]})
        if args.plot:
            _plot(results, prefix, args.plot if len(modules) == 1 else
                  f"{os.path.splitext(args.plot)[0]}.{prefix}.png")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=2)
    return EXIT_MISMATCH if any_bad else EXIT_OK


def _plot(results, title, path) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (pip install matplotlib)")
        return
    ys = [r.position if r.status == "ok" else np.nan for r in results]
    fig, ax = plt.subplots(figsize=(max(6, len(results) * 0.35), 4))
    ax.plot(range(len(ys)), [y if np.isfinite(y) else np.nan for y in ys], marker="o")
    ax.axhline(1.0, color="red", linestyle="--", linewidth=1)
    ax.set_xticks(range(len(results)))
    ax.set_xticklabels([r.label.split(": after ")[-1][:28] for r in results], rotation=75,
                       fontsize=7)
    finite = [y for y in ys if np.isfinite(y)]
    top = max(finite + [1.0]) * 1.15
    if top > 20:
        ax.set_yscale("symlog", linthresh=1.0)
    ax.set_ylim(0, top)
    ax.set_ylabel("distance from hloref's value\n(envelope half-widths; > 1 is outside)")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"plot written to {path}")


def add_commands(sub) -> None:
    def envelope_options(p):
        p.add_argument("--samples", type=int, help="perturbed runs of the envelope (default 8)")
        p.add_argument("--widen", type=float, help="envelope width, in sampled deviations (default 2)")
        p.add_argument("--no-excess-precision", action="store_true",
                       help="XLA ran with xla_allow_excess_precision=false: narrow roundings "
                            "may not be skipped")
        p.add_argument("--elide-converts", action="store_true",
                       help="explicit f32->narrow->f32 convert pairs may be removed (XLA's "
                            "SimplifyFPConversions in GPU pipelines); XLA:CPU keeps them")

    def common(p):
        envelope_options(p)
        p.add_argument("--inputs", help=".npz with arr_0, arr_1, ... (tuple parameters flattened)")
        p.add_argument("--seed", type=int, help="seed for random inputs (default 0)")
        limits(p)

    def limits(p):
        p.add_argument("--max-bytes", type=int,
                       help="memory budget for live values, in bytes (default 8 GiB)")
        p.add_argument("--max-while-iterations", type=int,
                       help="iteration limit per while loop (default 1,000,000)")

    d = sub.add_parser("diff", help="judge XLA's value of a module against hloref's envelope",
                       description="Run the module on hloref and on the oracle with the same "
                       "inputs; the verdict says whether the oracle's value is inside the "
                       "numerical envelope around hloref's value.")
    d.add_argument("file", help="HLO text file, before XLA's optimizations")
    d.add_argument("--oracle", choices=["xla", "tf"], default="xla",
                   help="xla: XLA:CPU through jaxlib (default); tf: TensorFlow's XLA")
    common(d)
    d.add_argument("--isolate", action="store_true",
                   help="run every instruction alone on the oracle and list the verdicts")
    d.add_argument("--blame", action="store_true",
                   help="on a mismatch, find the first XLA pass that changes the answer")
    d.add_argument("--reduce", metavar="OUT_DIR", help="on a mismatch, write a reduced finding here")
    d.add_argument("--json", action="store_true", help="print the report as JSON")
    d.add_argument("--timeout", type=float, default=120.0, help="oracle time limit (s)")
    d.set_defaults(fn=cmd_diff)

    c = sub.add_parser("check", help="judge AFTER against BEFORE's envelope, both evaluated "
                                     "by hloref",
                       description="Evaluate both modules with hloref on the same inputs; the "
                       "verdict says whether AFTER's value is inside the numerical envelope "
                       "around BEFORE's value.")
    c.add_argument("before", help="HLO text file: the reference module")
    c.add_argument("after", help="HLO text file: the module judged (e.g. after a pass)")
    common(c)
    c.set_defaults(fn=cmd_check)

    cd = sub.add_parser("check-dump", help="judge every pass snapshot of an XLA dump directory "
                                           "against the module before optimizations")
    cd.add_argument("dir", help="an --xla_dump_to directory (with --xla_dump_hlo_pass_re=.*)")
    cd.add_argument("--seed", type=int, default=0, help="seed for random inputs (default 0)")
    cd.add_argument("--plot", help="write a PNG of the error after each pass")
    cd.add_argument("--json", help="write the per-module tables as JSON to this file")
    envelope_options(cd)
    limits(cd)
    cd.set_defaults(fn=cmd_check_dump)

    add_fuzz_commands(sub)


# --------------------------------------------------------------------------- campaigns


#: ``--memory-audit`` alone audits every 4th program: auditing one costs about 0.9 s
#: (a compile of its own, liveness, the check, the evaluation through the assignment)
#: where checking its value costs about 0.7 s (10-minute mainstream campaign, docs/memory.md)
MEMORY_AUDIT_EVERY = 4


def cmd_fuzz(args) -> int:
    from .campaign import CampaignOptions, CampaignSetupError, parse_duration, run_campaign
    from .stats import format_summary
    try:
        seconds = parse_duration(args.time) if args.time else None
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if args.examples is not None and args.examples < 0:
        raise CliError("--examples must be >= 0")
    if args.batch < 1:
        raise CliError("--batch must be >= 1")
    if args.unit_programs < 1:
        raise CliError("--unit-programs must be >= 1")
    if args.workers is not None and args.workers < 1:
        raise CliError("--workers must be >= 1")
    oracles = ("xla", "tf") if args.oracle == "both" else (args.oracle,)
    require_modules("hloref fuzz", ("hypothesis",), "fuzz")
    for oracle in oracles:
        require_oracle("hloref fuzz", oracle)
    if args.ops:
        from .strategies import GENERATABLE_OPCODES, NOT_IN_XLA
        known = GENERATABLE_OPCODES | NOT_IN_XLA
        ops = [o for part in args.ops for o in part.split(",") if o]
        bad = [o for o in ops if o not in known]
        if bad:
            raise CliError(f"--ops: the generator cannot produce {', '.join(bad)}")
    else:
        ops = None
    from .reach_cli import reach_options
    types, ops, reach = reach_options(args, ops)
    every = args.memory_audit_every if args.memory_audit_every is not None else \
        (MEMORY_AUDIT_EVERY if args.memory_audit else 0)
    if every < 0 or (args.memory_audit_every == 0 and args.memory_audit):
        raise CliError("--memory-audit-every must be >= 1")
    if every and "xla" not in oracles:
        raise CliError("--memory-audit needs the xla oracle")
    opts = CampaignOptions(out=args.out, oracles=oracles, seed=args.seed, examples=args.examples,
                           seconds=seconds, workers=args.workers or (0 if args.ray else 1),
                           ops=ops, db=args.db, batch=args.batch, ray=args.ray,
                           unit_programs=args.unit_programs,
                           db_github=args.db_github, max_instructions=args.max_instructions,
                           timeout=args.timeout, blame=not args.no_blame,
                           json_summary=args.json_summary, junit=args.junit,
                           progress_every=args.progress_every, xla_opt=args.xla_opt,
                           element_types=types, reach=reach, memory_audit_every=every)
    try:
        if opts.ray:
            from .ray_campaign import run_ray_campaign
            summary = run_ray_campaign(opts)
        else:
            summary = run_campaign(opts)
    except CampaignSetupError as exc:
        raise CliError(str(exc)) from None
    print(format_summary(summary))
    from .pass_coverage import format_coverage
    if summary.get("pass_coverage"):
        print(format_coverage(summary))
    return EXIT_MISMATCH if summary["new_findings"] else EXIT_OK


def cmd_replay(args) -> int:
    from .replay import replay
    from .stats import atomic_json
    for p in args.dirs:
        if not os.path.isdir(p):
            raise CliError(f"{p}: not a directory")
    for oracle in sorted(_stored_oracles(args.dirs)):
        require_oracle("hloref replay", oracle)
    results = replay(args.dirs, timeout=args.timeout)
    if not results:
        raise CliError("no findings (directories with finding.json) found")
    for r in results:
        status = ("REPRODUCES" if r["reproduces"] else
                  "CHANGED" if r["verdict"] == r["stored_verdict"] == "memory" else
                  f"known difference ({r['known_difference']})" if r.get("known_difference")
                  else f"not on this host (lacks {', '.join(r['host_lacks'])})"
                  if r.get("host_lacks") else "fixed/gone")
        print(f"{status:11s} {r['path']}: stored {r['stored_verdict']}, now {r['verdict']}: "
              f"{r['classification']}" + (f"; stage {r['stage']}" if r.get("stage") else "")
              + (f"; upstream: {r['upstream']}" if r.get("upstream") else "")
              + (f"; {r['message']}" if r.get("memory") else ""))
    by_root: dict = {}
    for r in results:
        if r.get("root_key"):
            by_root.setdefault(r["root_key"], []).append(r["path"])
    for key, paths in sorted(by_root.items()):
        if len(paths) > 1:  # one root cause stored twice
            print(f"same root cause ({key}): {', '.join(paths)}")
    n = sum(r["reproduces"] for r in results)
    print(f"{n} of {len(results)} findings still reproduce")
    if args.json:
        atomic_json(args.json, results)
    return EXIT_MISMATCH if n else EXIT_OK


def _stored_oracles(dirs) -> set:
    """The oracles the findings under ``dirs`` were found with (their ``finding.json``)."""
    found = set()
    for top in dirs:
        for root, _subdirs, files in os.walk(top):
            if "finding.json" in files:
                try:
                    with open(os.path.join(root, "finding.json"), encoding="utf-8") as f:
                        found.add(json.load(f).get("oracle", "xla"))
                except (OSError, ValueError):
                    continue
    return found & set(ORACLE_MODULES)


def add_fuzz_commands(sub) -> None:
    f = sub.add_parser("fuzz", help="run a fuzz campaign: generated programs vs an oracle")
    budget = f.add_mutually_exclusive_group()
    budget.add_argument("--time", help="run this long (90s, 10m, 1h)")
    budget.add_argument("--examples", type=int, help="run this many programs (default 100)")
    f.add_argument("--oracle", choices=["xla", "tf", "both"], default="xla",
                   help="xla (default), tf, or both: each program against each oracle")
    f.add_argument("--seed", type=int, default=0, help="campaign seed (default 0)")
    f.add_argument("--workers", type=int,
                   help="worker processes, one oracle each (default 1; with --ray, one per "
                        "CPU of the cluster)")
    f.add_argument("--ray", metavar="ADDRESS",
                   help="run the workers as Ray actors on this cluster (what ray.init accepts: "
                        "auto, HOST:PORT, ray://HOST:10001); needs pip install hloref[ray]")
    f.add_argument("--unit-programs", type=int, default=128,
                   help="with --ray: programs per unit of work (a unit whose worker dies is "
                        "run again whole)")
    f.add_argument("--batch", type=int, default=16,
                   help="programs the oracle compiles and runs as one module (1: each alone)")
    f.add_argument("--xla-opt", choices=("default", "fast"), default="default",
                   help="XLA:CPU's compile settings: default (what XLA users get), or fast: "
                        "LLVM at -O0 (xla_backend_optimization_level=0; the HLO passes are the "
                        "same, LLVM's IR optimizations and optimizing code generation are not "
                        "tested); about a quarter less compile time")
    f.add_argument("--ops", nargs="+", help="restrict the generated opcodes (space/comma separated)")
    f.add_argument("--out", default="fuzz-findings", help="findings and campaign state")
    f.add_argument("--db", help="Hypothesis example database: a directory (shared storage for "
                                "several machines) or redis://HOST:PORT/N")
    f.add_argument("--db-github", metavar="OWNER/REPO",
                   help="also read the example database from this repository's "
                        "hloref-fuzz-db artifact (read-only)")
    f.add_argument("--json-summary", help="write the summary as JSON here")
    f.add_argument("--junit", help="write a JUnit XML report here")
    f.add_argument("--max-instructions", type=int, default=12,
                   help="most instructions per generated program (default 12)")
    f.add_argument("--timeout", type=float, default=60.0, help="oracle time limit per run (s)")
    f.add_argument("--no-blame", action="store_true", help="skip XLA pass blame on findings")
    f.add_argument("--memory-audit", action="store_true",
                   help="also audit XLA:CPU's buffer assignment and memory figures of the "
                        "generated programs (hloref memory); a failed audit is a finding")
    f.add_argument("--memory-audit-every", type=int, metavar="N",
                   help=f"audit every N-th program (implies --memory-audit; default "
                        f"{MEMORY_AUDIT_EVERY}; 1: all, which about halves the campaign's "
                        f"programs per second)")
    from .reach_cli import add_reach_arguments
    add_reach_arguments(f)
    f.add_argument("--progress-every", type=float, default=10.0,
                   help="seconds between progress lines when not on a TTY")
    f.set_defaults(fn=cmd_fuzz)

    r = sub.add_parser("replay", help="re-run stored findings; say which still reproduce")
    r.add_argument("dirs", nargs="+", help="finding directories or a campaign --out directory")
    r.add_argument("--timeout", type=float, default=60.0,
                   help="oracle time limit per run (s, default 60)")
    r.add_argument("--json", help="write the results as JSON here")
    r.set_defaults(fn=cmd_replay)

    from .archive import add_report_command
    add_report_command(sub)

