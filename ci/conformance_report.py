"""Records of ci/conformance.py runs: writing them (``write_json``), merging earlier runs
with the current reasons (``merge_records``), and the Markdown summary (``summary``)."""

from __future__ import annotations

import collections
import json
import os
import re

from conformance_extract import Case
from conformance_judge import ACCEPTED_PADDED, ACCEPTED_SORT
from conformance_reasons import XLA_PARSER_BUGS, reason_for

def write_json(path: str, records: list[dict]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(records, f, indent=1, default=str)
    os.replace(tmp, path)


def merge_records(paths: list[str], cases: list[Case]) -> list[dict]:
    """The records of ``paths`` for ``cases`` (later files win), with the multi-device
    rule and the reasons applied again as the current script would."""
    by_key: dict[str, dict] = {}
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for r in json.load(f):
                by_key[r["key"]] = r
    records = []
    for case in cases:
        r = by_key.get(case.key)
        if r is None:
            continue
        if r.get("xla_run") == "ok" and r.get("hloref_parse") == "ok" and (
                r.get("hloref_eval") not in ("ok", "timeout") or r.get("verdict") == "mismatch"):
            r["reason"] = reason_for(r, case.text)
        if r.get("hloref_parse") == "error" and r["where"] in XLA_PARSER_BUGS:
            r["reason"] = XLA_PARSER_BUGS[r["where"]]
        records.append(r)
    return records


def _classify(message: str) -> str:
    """A short failure class from an error message (numbers and names stripped)."""
    m = re.sub(r"line \d+, column \d+: ", "", message or "")
    m = re.sub(r"'[^']*'", "'…'", m)
    m = re.sub(r"\d+", "N", m)
    return m[:90]


def summary(records: list[dict], evaluate: bool, source_desc: str) -> str:
    n = len(records)
    accepted = [r for r in records if r["xla_parse"] == "ok"]
    parsed = [r for r in accepted if r.get("hloref_parse") == "ok"]
    bugs = [r for r in accepted if r.get("hloref_parse") == "error" and r["where"] in XLA_PARSER_BUGS]
    parseable = len(accepted) - len(bugs)
    rt_ok = [r for r in parsed if r.get("roundtrip_xla") == "ok" and r.get("reparse") == "ok"]
    lines = ["# Conformance: XLA's HLO test modules", "",
             f"Source: {source_desc}. Reproduce with `python ci/conformance.py <xla checkout or git dir>`"
             " (see the script's docstring).", "",
             "| | modules | share |", "|---|---:|---:|",
             f"| distinct raw-string modules with `ENTRY` | {n} | |",
             f"| accepted by XLA's parser | {len(accepted)} | |",
             f"| … of which XLA's own test expects rejected (jaxlib 0.10.2's parser accepts "
             f"them by a bug; hloref rejects them, as current XLA does) | {len(bugs)} | |",
             f"| parsed by hloref | {len(parsed)} | {100 * len(parsed) / max(parseable, 1):.2f} % "
             f"of the others |",
             f"| printed by hloref, accepted by XLA and reparsed identically | {len(rt_ok)} | "
             f"{100 * len(rt_ok) / max(len(parsed), 1):.2f} % of parsed |"]
    if evaluate:
        attempted = [r for r in accepted if r.get("xla_run") != "not-attempted"]
        lines.append(f"| … of which XLA:CPU was asked to run | {len(attempted)} | |")
        ran = [r for r in accepted if r.get("xla_run") == "ok"]
        ev = [r for r in ran if r.get("hloref_parse") == "ok"]
        match = [r for r in ev if r.get("verdict") == "match"]
        rnd = [r for r in ev if r.get("verdict") == "envelope"]
        logical = sum(1 for r in ran if r.get("xla_logical_bitcasts"))
        lines += [f"| run by XLA:CPU (jaxlib) on seeded inputs | {len(ran)} | |",
                  f"| … of which with `bitcast` run as its logical transpose/reshape "
                  f"(ci/logical_bitcasts.py) | {logical} | |",
                  f"| hloref's value matches XLA:CPU | {len(match) + len(rnd)} | "
                  f"{100 * (len(match) + len(rnd)) / max(len(ran), 1):.2f} % |",
                  f"| … of which inside the numerical envelope only (outside the per-type ULP "
                  f"floor) | {len(rnd)} | |",
                  f"| … of which XLA:CPU's answer is another valid one: an unstable `sort`'s tie "
                  f"order | {sum(1 for r in ev if r.get('accepted') == ACCEPTED_SORT)} | |",
                  f"| … of which XLA:CPU's answer is another valid one: a dynamic result at its "
                  f"padded bound | {sum(1 for r in ev if r.get('accepted') == ACCEPTED_PADDED)} "
                  f"| |"]
        explained = [r for r in ev if r.get("verdict") != "match" and r.get("verdict") != "envelope"
                     and r.get("reason")] + [r for r in ran if r in bugs]
        lines.append(f"| differs for a reason listed below (XLA:CPU bug, implementation-defined, "
                     f"module written for more devices) | {len(explained)} | "
                     f"{100 * len(explained) / max(len(ran), 1):.2f} % |")
        slow = [r for r in ran if r.get("hloref_parse") == "timeout"
                or r.get("hloref_eval") == "timeout"]
        lines.append(f"| hloref's job (parse, print, evaluation, envelope) timed out (`--timeout`) | "
                     f"{len(slow)} | {100 * len(slow) / max(len(ran), 1):.2f} % |")
        unexplained = len(ran) - len(match) - len(rnd) - len(explained) - len(slow)
        lines.append(f"| differs, not understood yet | {unexplained} | "
                     f"{100 * unexplained / max(len(ran), 1):.2f} % |")
    lines.append("")
    groups: dict[str, list] = collections.defaultdict(list)
    for r in accepted:
        if r.get("hloref_parse") != "ok":
            groups["parse: " + _classify(r.get("hloref_message", ""))].append(r)
        elif r.get("roundtrip_xla") not in (None, "ok"):
            groups["round trip (XLA rejects hloref's print): " + _classify(r.get("roundtrip_message", ""))].append(r)
        elif r.get("reparse") != "ok":
            groups["round trip (hloref reparse): " + _classify(str(r.get("reparse")))].append(r)
        elif r.get("xla_run") == "ok" and r.get("hloref_eval") == "timeout":
            groups["hloref's evaluation timed out (parsed and printed)"].append(r)
        elif r.get("xla_run") == "ok" and r.get("hloref_eval") != "ok":
            groups[f"eval {r.get('hloref_eval')}: " + _classify(r.get("hloref_message", ""))].append(r)
        elif r.get("xla_run") == "ok" and r.get("verdict") in ("mismatch", "known-gap"):
            groups["value differs from XLA:CPU"].append(r)
    if groups:
        lines += ["## Remaining failures", "", "| class | count | example |", "|---|---:|---|"]
        for k, rs in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            lines.append(f"| {k.replace('|', '/')} | {len(rs)} | `{rs[0]['where']}` |")
        lines.append("")
    if evaluate:
        differ = [r for r in accepted if r.get("xla_run") == "ok" and r.get("hloref_parse") == "ok"
                  and (r.get("hloref_eval") not in ("ok", "timeout")
                       or r.get("verdict") in ("mismatch", "known-gap"))] + \
            [r for r in bugs if r.get("xla_run") == "ok"]
        if differ:
            lines += ["## Every module XLA:CPU runs where hloref does not give its answer", "",
                      "(`hloref` names hloref's value, `XLA` XLA:CPU's; the reasons are explained in "
                      "docs/semantics.md, section 'Conformance with XLA's test modules')", "",
                      "| reason | modules |", "|---|---:|"]
            by_reason = collections.Counter(r.get("reason") or "**not understood yet**"
                                            for r in differ)
            for k, c in by_reason.most_common():
                lines.append(f"| {k} | {c} |")
            lines += ["", "| module | what happens | reason |", "|---|---|---|"]
            for r in differ:
                what = (r.get("compare_message") if r.get("hloref_eval") == "ok"
                        else f"parse: {r.get('hloref_message', '')}" if r in bugs
                        else f"{r.get('hloref_eval')}: {r.get('hloref_message', '')}")
                lines.append(f"| `{r['where']}` | {str(what)[:140].replace('|', '/')} | "
                             f"{(r.get('reason') or '**not understood yet**')[:60]} |")
            lines.append("")
        not_run = collections.Counter(_classify(r.get("xla_message", ""))[:60] for r in accepted
                                      if r.get("xla_run") != "ok")
        lines += ["## Modules XLA parses but XLA:CPU (through jaxlib) does not run", "",
                  "| reason | count |", "|---|---:|"]
        for k, c in not_run.most_common(25):
            lines.append(f"| {k.replace('|', '/')} | {c} |")
        lines.append("")
    return "\n".join(lines)
