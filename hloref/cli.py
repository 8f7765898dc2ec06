"""The ``hloref`` command line.

``hloref run FILE.hlo [--inputs in.npz | --seed N] [--backend cpu|gpu] [--no-fallback] [--output out.npz] [--print]``
``hloref parse FILE.hlo [--verify] [--print]``
``hloref ops``
``hloref diff FILE.hlo --oracle xla|tf [--inputs | --seed] [--isolate] [--blame] [--reduce DIR] [--json]``
``hloref check BEFORE.hlo AFTER.hlo [--inputs | --seed]``
``hloref check-dump DIR [--plot out.png] [--json out.json]``
``hloref memory OPTIMIZED.hlo|DUMP_DIR [--buffer-assignment FILE] [--inputs | --seed] [--compare OTHER.hlo] [--plot out.png] [--json out.json]``

Exit status: 0 on success (diff/check: match), 1 mismatch or oracle crash, 2 on bad
input (one message on stderr, no traceback).

The verbs after ``ops`` are ``fuzz/commands.py``'s (``add_commands``, imported by
``build_parser``) and ``fuzz/memory_commands.py``'s (``add_memory_command``); what both sides share (exit codes, ``CliError``, loading a module,
the npz convention) is ``hloref/cli_common.py``, which imports neither.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from .cli_common import (EXIT_BAD_INPUT, EXIT_OK, EXIT_STATUSES, CliError, cli_limit_message,
                         exit_status_text, flatten_value, limits_from_args, load_module,
                         random_arguments, read_npz, unflatten_arguments, write_npz)
from .errors import HloError

__all__ = ["main"]


# ---------------------------------------------------------------- printing


def format_value(value, indent: str = "") -> str:
    from .values import Token
    if isinstance(value, tuple):
        lines = [f"{indent}tuple of {len(value)}:"]
        for i, v in enumerate(value):
            lines.append(f"{indent}  [{i}]")
            lines.append(format_value(v, indent + "    "))
        return "\n".join(lines)
    if isinstance(value, Token):
        return f"{indent}token"
    from .types import from_dtype
    et = from_dtype(value.dtype)
    header = f"{indent}{et.name}[{','.join(map(str, value.shape))}]"
    with np.printoptions(threshold=200, edgeitems=3, linewidth=100):
        shown = value.astype(np.float32) if et.is_narrow_float else value
        body = np.array2string(np.asarray(shown), separator=", ")
    body = "\n".join(indent + "  " + line for line in body.splitlines())
    return f"{header}\n{body}"


# ---------------------------------------------------------------- commands


def cmd_run(args) -> int:
    from . import api
    module = load_module(args.file, verify=not getattr(args, "no_verify", False))
    if args.inputs and args.seed is not None:
        raise CliError("give either --inputs or --seed, not both")
    params = module.entry.parameters
    if args.inputs:
        values = unflatten_arguments(read_npz(args.inputs), [p.shape for p in params])
    else:
        values = random_arguments(module, args.seed if args.seed is not None else 0,
                                  limits_from_args(args))
    result = api.evaluate(module, *values, backend=args.backend, limits=limits_from_args(args),
                          fallback=not args.no_fallback, verify=False)  # verified on load
    if args.output:
        from .values import Token
        write_npz(args.output, [v for v in flatten_value(result) if not isinstance(v, Token)])
    if args.print or not args.output:
        print(format_value(result))
    return EXIT_OK


def cmd_parse(args) -> int:
    module = load_module(args.file, verify=args.verify)
    if args.print:
        sys.stdout.write(module.to_text())
    else:
        n = sum(len(c.instructions) for c in module.computations.values())
        status = "verified" if args.verify else "parsed"
        print(f"{args.file}: {status}: module {module.name}, {len(module.computations)} "
              f"computations, {n} instructions")
    return EXIT_OK


def cmd_ops(args) -> int:
    from .ops_table import format_ops_table, format_type_matrix
    if not args.types_only:
        print(format_ops_table())
        print()
    print(format_type_matrix())
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hloref", description="Reference interpreter for XLA HLO")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="evaluate a module's entry computation")
    run.add_argument("file", help="HLO text file")
    run.add_argument("--inputs", help=".npz with arr_0, arr_1, ... (tuple parameters flattened)")
    run.add_argument("--seed", type=int, help="seed for random inputs (default 0)")
    run.add_argument("--backend", choices=["cpu", "gpu"], default="cpu",
                     help="cpu (default), or gpu: the CUDA backend (pip install hloref[gpu])")
    run.add_argument("--no-fallback", action="store_true",
                     help="gpu: fail on an op without a GPU kernel instead of running it on the CPU")
    run.add_argument("--output", help="write results to this .npz (tuples flattened)")
    run.add_argument("--print", action="store_true", help="print results (default without --output)")
    run.add_argument("--max-bytes", type=int,
                     help="memory budget for live values, in bytes (default 8 GiB)")
    run.add_argument("--max-while-iterations", type=int,
                     help="iteration limit per while loop (default 1,000,000)")
    run.add_argument("--no-verify", action="store_true",
                     help="evaluate without verifying the module first (shapes, operands, "
                          "attributes)")
    run.set_defaults(fn=cmd_run)

    p = sub.add_parser("parse", help="parse (and verify) a module")
    p.add_argument("file", help="HLO text file")
    p.add_argument("--verify", action="store_true", help="also check shapes and attributes")
    p.add_argument("--print", action="store_true", help="print the module back as HLO text")
    p.set_defaults(fn=cmd_parse)

    ops = sub.add_parser("ops", help="opcodes and element types each backend supports")
    ops.add_argument("--types-only", action="store_true",
                     help="print only the opcode × element-type table")
    ops.set_defaults(fn=cmd_ops)

    from hloref.fuzz.commands import add_commands
    add_commands(sub)
    from hloref.fuzz.memory_commands import add_memory_command
    add_memory_command(sub)
    for name, command in sub.choices.items():  # every command's --help ends with its exits
        if command.epilog is None and name in EXIT_STATUSES:
            command.epilog = exit_status_text(name)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.fn(args)
    except (HloError, CliError) as exc:
        print(f"hloref: error: {cli_limit_message(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except MemoryError:
        budget = getattr(args, "max_bytes", None)
        hint = (f"--max-bytes {budget} is more than this machine can allocate: lower it"
                if budget is not None else
                "lower the inputs, or set --max-bytes below the free memory to be told "
                "which value is too large before it is allocated")
        print(f"hloref: error: out of memory ({hint})", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("hloref: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
