"""The findings archive: ``hloref report``, the table of findings, known-upstream records.

``hloref report DIR... [--format github|md|json] [--refresh]`` prints (or, with
``--refresh``, first re-measures: ``filing.refresh``) the maintainer's report of every
finding under the given directories. ``--index FILE`` writes the archive's table:
component, stage, upstream status, whether the JAX/TF user API reaches the bug.

A finding whose upstream record (``upstream.json``) says it is already reported or fixed
belongs in ``findings/known-upstream/``: ``known_root_keys(root)`` gives the root keys
of those, which campaigns count as known instead of filing again.
"""

from __future__ import annotations

import json
import os

from .findings import upstream_status

__all__ = ["finding_paths", "index_table", "index_page", "known_root_keys", "archived_root_keys",
           "cmd_report",
           "add_report_command", "KNOWN_STATUSES", "archive_root"]

#: Upstream statuses that make a finding a duplicate of a known issue.
KNOWN_STATUSES = frozenset({"reported-open", "reported-closed", "fixed", "fixed-in-source"})


def finding_paths(paths) -> list[str]:
    """Finding directories (holding ``finding.json``) at or below ``paths``."""
    out = []
    for p in paths:
        if os.path.isfile(os.path.join(p, "finding.json")):
            out.append(p)
            continue
        for root, dirs, files in os.walk(p):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".")
                             and d not in ("pending", "retired", "outside-contract"))
            if "finding.json" in files:
                out.append(root)
                dirs[:] = []
    return sorted(out)


def archive_root() -> str | None:
    """The stored findings: ``$HLOREF_FINDINGS``, else the checkout's ``findings/``."""
    root = os.environ.get("HLOREF_FINDINGS") or os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "findings")
    return root if os.path.isdir(root) else None


def known_root_keys(root: str | None = None) -> dict[str, str]:
    """Root key → the known-upstream finding's first thread (or its directory)."""
    root = root or archive_root()
    keys: dict[str, str] = {}
    if root is None:
        return keys
    for d in finding_paths([os.path.join(root, "known-upstream")]) if os.path.isdir(
            os.path.join(root, "known-upstream")) else []:
        with open(os.path.join(d, "finding.json"), encoding="utf-8") as f:
            meta = json.load(f)
        if meta.get("root_key"):
            up = upstream_status(d) or {}
            threads = up.get("threads") or [{}]
            keys[meta["root_key"]] = threads[0].get("url") or d
    return keys


def archived_root_keys(root: str | None = None) -> dict[str, str]:
    """Root key → the stored finding's directory (relative to the archive) of every
    finding the archive holds, filed or not yet: a campaign that meets one again counts
    it, rather than filing it a second time."""
    root = root or archive_root()
    keys: dict[str, str] = {}
    for d in finding_paths([root]) if root is not None else []:
        with open(os.path.join(d, "finding.json"), encoding="utf-8") as f:
            key = json.load(f).get("root_key")
        if key:
            keys.setdefault(key, os.path.relpath(d, root))
    return keys


def index_table(paths, base: str) -> str:
    """The Markdown table of the findings under ``paths`` (names relative to ``base``)."""
    from .stage_table import component_of
    rows = ["| finding | verdict | component (measured stage) | upstream | user API reaches it |",
            "|---|---|---|---|---|"]
    for d in finding_paths(paths):
        with open(os.path.join(d, "finding.json"), encoding="utf-8") as f:
            meta = json.load(f)
        a = meta.get("attribution") or {}
        up = upstream_status(d)
        status = "not checked"
        if up:
            link = next((t.get("url") for t in up.get("threads", [])
                         if t.get("relation") in ("same-bug", "fix")), None)
            status = up.get("status", "?") + (f" ([thread]({link}))" if link else "")
        prog = meta.get("user_program") or {}
        reach = ("yes: " + prog.get("api", "") if prog.get("reproduces") else
                 "no: " + (prog.get("reason") or "its program does not reproduce")[:90]
                 if prog else "not checked")
        comp = component_of(a.get("stage"), a.get("pass")) if a else "not attributed"
        if a.get("stage"):
            conf = {True: "confirmed", False: "not confirmed", None: "unchecked"}[a.get("confirmed")]
            comp += f" (`{a['stage']}`, {conf})"
        rows.append(f"| `{os.path.relpath(d, base)}` | {meta.get('verdict')} | {comp} | {status} "
                    f"| {reach} |")
    return "\n".join(rows) + "\n"


def index_page(paths, base: str) -> str:
    """``findings/README.md``: what the archive is, then :func:`index_table`."""
    dirs = finding_paths(paths)
    known = sum(1 for d in dirs if (upstream_status(d) or {}).get("status") in KNOWN_STATUSES)
    return "\n".join([
        "# Stored findings", "",
        "Each directory is a finding as hloref's campaigns write them (docs/triage.md): the "
        "reduced `module.hlo`, `inputs.npz`, `expected.npz` (hloref's value), `actual.npz` "
        "(XLA's), `report.md` (the issue a maintainer files), `repro.py` (needs only "
        "jax/jaxlib or TensorFlow), `user_program.py` where the user API reaches the bug, "
        "`finding.json` (every record, with the measured stage attribution) and "
        "`upstream.json` (the trackers searched, the queries, the threads found). "
        "`known-upstream/` holds the findings already reported or fixed upstream; "
        "`retired/` the ones that are not bugs under XLA's contract.", "",
        f"{len(dirs)} findings, {known} of them known upstream. This page is written by "
        "`hloref report findings --index findings/README.md`; `hloref report DIR --refresh` "
        "measures a finding again.", "",
        index_table(paths, base)])


def cmd_report(args) -> int:
    from hloref.cli_common import CliError

    from .filing import refresh, render
    dirs = finding_paths(args.dirs)
    if not dirs:
        raise CliError("no findings (directories with finding.json) under "
                       + ", ".join(args.dirs))
    for d in dirs:
        if args.refresh:
            refresh(d, timeout=args.timeout, programs=not args.no_programs)
        if args.index is None:
            print(render(d, args.format))
    if args.index:
        base = os.path.dirname(os.path.abspath(args.index))
        with open(args.index, "w", encoding="utf-8") as f:
            f.write(index_page(args.dirs, base))
        print(f"wrote the table of {len(dirs)} findings to {args.index}")
    return 0


def add_report_command(sub) -> None:
    r = sub.add_parser("report", help="print the maintainer's report of stored findings")
    r.add_argument("dirs", nargs="+", help="finding directories, or directories holding them")
    r.add_argument("--format", choices=("github", "md", "json"), default="github")
    r.add_argument("--refresh", action="store_true",
                   help="measure again first: stage attribution, the jax-only reproducer, the "
                        "JAX/TF user program (runs XLA; about 5-60 s a finding)")
    r.add_argument("--no-programs", action="store_true",
                   help="with --refresh: skip the reproducer scripts")
    r.add_argument("--index", metavar="FILE",
                   help="write the table of the findings (component, upstream, user API) here "
                        "instead of printing the reports")
    r.add_argument("--timeout", type=float, default=180.0)
    r.set_defaults(fn=cmd_report)
