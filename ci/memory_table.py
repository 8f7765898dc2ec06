"""The memory audit of the realistic programs: hloref's figures beside XLA:CPU's
``memory_analysis()``, every difference with its named causes (docs/memory.md's table).

    python ci/memory_table.py [NAME ...] [--json out.json] [--markdown out.md] [--no-eval]
    python ci/memory_table.py --cost transformer_train_large
    python ci/memory_table.py --from-json a.json b.json --compact --markdown out.md

Each program is lowered with jax here and compiled by XLA:CPU in a child process
(``hloref.jax.memory``); without names, the programs of ``tests/realistic_programs.py``'s
own registry (not the ones it imports). A program hloref or XLA fails on is a row with
its error. Exit status 1 when any program has a finding.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
os.environ.setdefault("JAX_PLATFORMS", "cpu")

BASE = ("transformer_train", "transformer_train_trained", "attention_fwd", "attention_grad",
        "cnn_train", "cnn_train_trained", "lstm_grad", "moe_routing", "bf16_mlp_train",
        "bf16_mlp_train_trained", "fp8_matmul", "fp8_matmul_prequantized", "rk4_lorenz",
        "rk4_pendulum", "beam_search", "layer_norm", "log_softmax", "batch_norm_inference",
        "batch_norm_training", "transformer_train_large")


def audit_program(name: str, evaluate: bool = True) -> dict:
    import realistic_programs as rp

    import hloref.jax as hj
    from hloref.buffer_assignment import parse_buffer_assignment
    from hloref.fuzz.memory_xla import compile_for_memory
    from hloref.memory_audit import audit
    program = rp.PROGRAMS[name]()
    t0 = time.perf_counter()
    if evaluate:
        result = hj.memory(program.jitted(), *program.args)
    else:
        xla = compile_for_memory(program.lower().as_text())
        import hloref
        result = audit(hloref.parse(xla.optimized), xla_stats=xla.stats,
                       assignment=parse_buffer_assignment(xla.assignment))
    out = result.as_dict()
    out["name"] = name
    out["wall_seconds"] = time.perf_counter() - t0
    return out


def cost(name: str) -> str:
    """Seconds of the audit without the evaluation (parse, liveness, figures, assignment
    check) against one evaluation of the optimized module by hloref."""
    import realistic_programs as rp

    import hloref
    from hloref.buffer_assignment import parse_buffer_assignment
    from hloref.cli_common import random_arguments
    from hloref.fuzz.memory_xla import compile_for_memory
    from hloref.memory_audit import audit
    text = rp.PROGRAMS[name]().lower().as_text()
    xla = compile_for_memory(text)
    t0 = time.perf_counter()
    module = hloref.parse(xla.optimized)
    result = audit(module, assignment=parse_buffer_assignment(xla.assignment))
    audit_s = time.perf_counter() - t0
    args = random_arguments(module, 0)
    t0 = time.perf_counter()
    hloref.evaluate(module, *args)
    eval_s = time.perf_counter() - t0
    return (f"{name}: {rp.count_instructions(xla.optimized)} instruction lines optimized, "
            f"{len(result.liveness.timeline)} in the schedule; audit {audit_s:.2f} s, one "
            f"evaluation {eval_s:.2f} s; findings {result.findings or 'none'}")


def _cell(row: dict) -> str:
    causes = [f"{name} {b:+d}" for name, b in row["causes"].items()]
    if row["unexplained"]:
        causes.append(f"**unexplained {row['unexplained']:+d}**")
    return "; ".join(causes)


def markdown(results: list[dict]) -> str:
    lines = ["| program | instr. | hloref peak (at) | XLA peak | hloref temp | XLA temp | "
             "argument / output / alias / constant (both) | peak: causes | temp: causes | "
             "checked values | evaluation | findings |",
             "|---|---:|---|---:|---:|---:|---|---|---|---:|---|---|"]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['name']} | | error: {r['error']} | | | | | | | | | |")
            continue
        rows = {f["figure"]: f for f in r["figures"]}
        same = " / ".join(
            str(rows[k]["hloref"]) if rows[k]["hloref"] == rows[k]["xla"]
            else f"{rows[k]['hloref']} vs {rows[k]['xla']}"
            for k in ("argument", "output", "alias", "constant"))
        ev = r["evaluation"]
        ev_text = "-" if ev is None else (f"{ev['compared']} unchanged" if ev["ok"]
                                          else ev["message"])
        lines.append(
            f"| {r['name']} | {r['instructions']} | {r['peak']} (%{r['peak_instruction']}) | "
            f"{rows['peak']['xla']} | {rows['temp']['hloref']} | {rows['temp']['xla']} | "
            f"{same} | {_cell(rows['peak'])} | {_cell(rows['temp'])} | "
            f"{r['assignment']['checked_values']} | {ev_text} | "
            f"{len(r['findings']) or 'none'} |")
    return "\n".join(lines) + "\n"


def compact(results: list[dict]) -> str:
    """One short row a program: the peaks, the temps and the verdict."""
    lines = ["| program | hloref peak (at) | XLA peak | hloref temp | XLA temp | checked values "
             "| evaluated values | findings |", "|---|---|---:|---:|---:|---:|---:|---|"]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['name']} | error: {r['error']} | | | | | | |")
            continue
        rows = {f["figure"]: f for f in r["figures"]}
        ev = r["evaluation"]
        lines.append(
            f"| {r['name']} | {r['peak']} (%{r['peak_instruction']}) | {rows['peak']['xla']} | "
            f"{rows['temp']['hloref']} | {rows['temp']['xla']} | "
            f"{r['assignment']['checked_values']} | "
            f"{'-' if ev is None else ev['compared']} | {len(r['findings']) or 'none'} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*")
    parser.add_argument("--json")
    parser.add_argument("--markdown")
    parser.add_argument("--no-eval", action="store_true")
    parser.add_argument("--compact", action="store_true", help="one short row a program")
    parser.add_argument("--from-json", nargs="+", metavar="FILE",
                        help="make the table from earlier --json files (later files win)")
    parser.add_argument("--cost", metavar="NAME", help="time the audit against one "
                                                       "evaluation of program NAME")
    args = parser.parse_args(argv)
    if args.cost:
        print(cost(args.cost))
        return 0
    names = args.names or list(BASE)
    results = []
    if args.from_json:
        merged: dict[str, dict] = {}
        for path in args.from_json:
            with open(path, encoding="utf-8") as f:
                merged.update((r["name"], r) for r in json.load(f))
        names = []
        results = list(merged.values())
    for name in names:
        try:
            r = audit_program(name, evaluate=not args.no_eval)
        except Exception as exc:  # noqa: BLE001 - a row, not the end of the table
            r = {"name": name, "error": f"{type(exc).__name__}: {exc}"[:300], "findings": []}
        results.append(r)
        print(f"{name}: {'error ' + r['error'] if 'error' in r else r['findings'] or 'ok'}",
              flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
    table = (compact if args.compact else markdown)(results)
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as f:
            f.write(table)
    else:
        print(table)
    return 1 if any(r.get("findings") or "error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
