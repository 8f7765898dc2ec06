"""``hloref memory``: audit an optimized module's memory (``hloref.memory_audit``).

    hloref memory OPTIMIZED.hlo|DUMP_DIR [--buffer-assignment FILE] [--module NAME]
                  [--inputs in.npz | --seed N] [--no-eval] [--compare OTHER.hlo]
                  [--plot out.png] [--json out.json]

A dump directory (``--xla_dump_to``) is read without help: its
``*after_optimizations.txt`` (the largest, or the one whose name contains ``--module``)
and the ``-buffer-assignment.txt`` beside it; so is a module file with that file beside
it. With an assignment, XLA's figures are its allocation totals (what
``memory_analysis()`` reports), the assignment is checked, and the module is evaluated
through it on ``--inputs`` or seeded random inputs (seed 0 unless ``--seed``;
``--no-eval`` skips it). Exit status 0: everything checks out; 1: a finding; 2: bad
input.
"""

from __future__ import annotations

import json
import os

from hloref.cli_common import (EXIT_MISMATCH, EXIT_OK, CliError, load_module,
                               random_arguments, read_npz, unflatten_arguments)

__all__ = ["add_memory_command", "cmd_memory", "resolve_paths"]


def resolve_paths(path: str, assignment: str | None, module: str | None) -> tuple[str, str | None]:
    """(module file, buffer-assignment file or None) for a file or a dump directory."""
    from .memory_xla import read_dump
    if os.path.isdir(path):
        try:
            found, found_assignment = read_dump(path, module)
        except FileNotFoundError as exc:
            raise CliError(str(exc)) from None
        return found, assignment or found_assignment
    if not os.path.exists(path):
        raise CliError(f"{path}: no such file")
    if assignment is None and path.endswith(".txt"):
        beside = path[:-len(".txt")] + "-buffer-assignment.txt"
        if os.path.exists(beside):
            assignment = beside
    return path, assignment


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror}") from None


def cmd_memory(args) -> int:
    from hloref.buffer_assignment import parse_buffer_assignment
    from hloref.memory_audit import audit
    if args.inputs is not None and args.seed is not None:
        raise CliError("give either --inputs or --seed, not both")
    path, assignment_path = resolve_paths(args.path, args.buffer_assignment, args.module)
    module = load_module(path)
    if not module.attrs.get("is_scheduled"):
        raise CliError(f"{path}: the module is not scheduled (is_scheduled=true): the memory "
                       "audit needs XLA's optimized module")
    assignment = None
    if assignment_path is not None:
        assignment = parse_buffer_assignment(_read(assignment_path), assignment_path)
    inputs = None
    if assignment is not None and not args.no_eval:
        if args.inputs is not None:
            inputs = unflatten_arguments(read_npz(args.inputs),
                                         [p.shape for p in module.entry.parameters])
        else:
            inputs = random_arguments(module, args.seed or 0)
    result = audit(module, assignment=assignment, args=inputs)
    if result.check is not None and not result.check.checked_values and \
            result.check.unmodelled:
        raise CliError(f"{assignment_path}: none of its values belongs to {path} (e.g. "
                       f"{result.check.unmodelled[0]}): not this module's buffer assignment")
    out = result.as_dict()
    out["files"] = {"module": path, "buffer_assignment": assignment_path}
    print(result.summary())
    if args.compare:
        from hloref.liveness import analyze
        from hloref.memory_compare import compare_peaks
        other = analyze(load_module(args.compare))
        comparison = compare_peaks(result.liveness, other)
        print(f"compared with {args.compare}:")
        print(comparison.summary())
        out["compare"] = comparison.as_dict()
    if args.plot:
        from hloref.memory_plot import plot_memory
        plot_memory(result.liveness, args.plot, assignment=assignment)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)
    return EXIT_OK if result.ok else EXIT_MISMATCH


def add_memory_command(sub) -> None:
    p = sub.add_parser("memory", help="audit an optimized module's memory: liveness and "
                       "peak, XLA's figures and buffer assignment")
    p.add_argument("path", help="optimized, scheduled HLO text file, or an --xla_dump_to "
                                "directory")
    p.add_argument("--buffer-assignment", help="XLA's *-buffer-assignment.txt (default: the "
                                               "one beside the module)")
    p.add_argument("--module", help="in a dump directory: the module whose files to read "
                                    "(a part of its name)")
    p.add_argument("--inputs", help=".npz with arr_0, arr_1, ... for the evaluation through "
                                    "the assignment")
    p.add_argument("--seed", type=int, help="seed for random inputs (default 0)")
    p.add_argument("--no-eval", action="store_true",
                   help="do not evaluate the module through the assignment")
    p.add_argument("--compare", help="another optimized module: the peak delta and where it "
                                     "comes from, per instruction")
    p.add_argument("--plot", help="draw live bytes over the schedule to this image "
                                  "(matplotlib)")
    p.add_argument("--json", help="write the audit as JSON")
    p.set_defaults(fn=cmd_memory)

