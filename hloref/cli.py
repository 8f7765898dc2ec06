"""The ``hloref`` command line.

``hloref run FILE.hlo [--inputs in.npz | --seed N] [--backend cpu|gpu] [--no-fallback] [--output out.npz] [--print]``
``hloref parse FILE.hlo [--verify] [--print]``
``hloref ops``
``hloref diff FILE.hlo --oracle xla|tf [--inputs | --seed] [--isolate] [--blame] [--reduce DIR] [--json]``
``hloref check BEFORE.hlo AFTER.hlo [--inputs | --seed]``
``hloref check-dump DIR [--plot out.png] [--json out.json]``

Exit status: 0 on success (diff/check: match), 1 mismatch or oracle crash, 2 on bad
input (one message on stderr, no traceback).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

from .errors import HloError

__all__ = ["main"]

EXIT_OK = 0
EXIT_MISMATCH = 1
EXIT_BAD_INPUT = 2


class CliError(Exception):
    """A user error the CLI reports as one line."""


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        raise CliError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise CliError(f"{path}: is a directory, expected an HLO text file") from None
    except UnicodeDecodeError:
        raise CliError(f"{path}: not a UTF-8 text file") from None
    except OSError as exc:
        raise CliError(f"{path}: {exc.strerror}") from None


def _load_module(path: str, verify: bool = False):
    from .parser import parse_module
    module = parse_module(_read_text(path), filename=path)
    if verify:
        from .verifier import verify_module
        verify_module(module)
    return module


def _limits(args):
    from hloref.evaluator.interpreter import Limits
    kw = {}
    if getattr(args, "max_bytes", None) is not None:
        kw["max_bytes"] = args.max_bytes
    if getattr(args, "max_while_iterations", None) is not None:
        kw["max_while_iterations"] = args.max_while_iterations
    return Limits(**kw)


# ---------------------------------------------------------------- npz convention


def read_npz(path: str) -> list[np.ndarray]:
    """Arrays ``arr_0``, ``arr_1``, ... of an npz file, in order (other keys ignored)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            keys = [k for k in data.files if k.startswith("arr_") and k[4:].isdigit()]
            keys.sort(key=lambda k: int(k[4:]))
            if [int(k[4:]) for k in keys] != list(range(len(keys))):
                raise CliError(f"{path}: arrays must be arr_0, arr_1, ... without gaps "
                               f"(numpy.savez(path, *arrays)); found {', '.join(keys)}")
            return [data[k] for k in keys]
    except FileNotFoundError:
        raise CliError(f"{path}: no such file") from None
    except CliError:
        raise
    except Exception as exc:  # zipfile/pickle/format errors
        raise CliError(f"{path}: not a readable .npz file ({type(exc).__name__}: {exc})") from None


def write_npz(path: str, arrays: list[np.ndarray]) -> None:
    """Write ``arrays`` as ``arr_0``, ... atomically; ml_dtypes arrays as their raw bits."""
    stored = []
    for a in arrays:
        if a.dtype.kind not in "biufc" or a.dtype.type.__module__.startswith("ml_dtypes"):
            a = a.view(np.dtype(f"u{a.dtype.itemsize}"))
        stored.append(a)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise CliError(f"{path}: directory {directory} does not exist")
    fd, tmp = tempfile.mkstemp(suffix=".npz", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, *stored)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def flatten_value(value) -> list:
    if isinstance(value, tuple):
        out = []
        for v in value:
            out.extend(flatten_value(v))
        return out
    return [value]


def unflatten_arguments(arrays: list, shapes: list) -> list:
    """Group the flat ``arrays`` of an npz into one value per parameter shape."""
    from .shapes import TupleShape
    it = iter(arrays)

    def take(shape):
        if isinstance(shape, TupleShape):
            return tuple(take(s) for s in shape.elements)
        try:
            return next(it)
        except StopIteration:
            raise CliError("the inputs file has too few arrays for the entry parameters") from None

    values = [take(s) for s in shapes]
    if next(it, None) is not None:
        raise CliError(f"the inputs file has {len(arrays)} arrays, more than the entry "
                       f"parameters take")
    return values


def random_arguments(module, seed: int) -> list:
    from .inputs import random_value
    rng = np.random.default_rng(seed)
    return [random_value(p.shape, rng) for p in module.entry.parameters]


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
    module = _load_module(args.file, verify=not getattr(args, "no_verify", False))
    if args.inputs and args.seed is not None:
        raise CliError("give either --inputs or --seed, not both")
    params = module.entry.parameters
    if args.inputs:
        values = unflatten_arguments(read_npz(args.inputs), [p.shape for p in params])
    else:
        values = random_arguments(module, args.seed if args.seed is not None else 0)
    result = api.evaluate(module, *values, backend=args.backend, limits=_limits(args),
                          fallback=not args.no_fallback, verify=False)  # verified on load
    if args.output:
        from .values import Token
        write_npz(args.output, [v for v in flatten_value(result) if not isinstance(v, Token)])
    if args.print or not args.output:
        print(format_value(result))
    return EXIT_OK


def cmd_parse(args) -> int:
    module = _load_module(args.file, verify=args.verify)
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
    run.add_argument("--backend", choices=["cpu", "gpu"], default="cpu")
    run.add_argument("--no-fallback", action="store_true",
                     help="gpu: fail on an op without a GPU kernel instead of running it on the CPU")
    run.add_argument("--output", help="write results to this .npz (tuples flattened)")
    run.add_argument("--print", action="store_true", help="print results (default without --output)")
    run.add_argument("--max-bytes", type=int, help="memory budget for live values, in bytes")
    run.add_argument("--max-while-iterations", type=int, help="iteration limit per while loop")
    run.add_argument("--no-verify", action="store_true",
                     help="evaluate without verifying the module first (shapes, operands, "
                          "attributes)")
    run.set_defaults(fn=cmd_run)

    p = sub.add_parser("parse", help="parse (and verify) a module")
    p.add_argument("file")
    p.add_argument("--verify", action="store_true", help="also check shapes and attributes")
    p.add_argument("--print", action="store_true", help="print the module back as HLO text")
    p.set_defaults(fn=cmd_parse)

    ops = sub.add_parser("ops", help="opcodes and element types each backend supports")
    ops.add_argument("--types-only", action="store_true",
                     help="print only the opcode × element-type table")
    ops.set_defaults(fn=cmd_ops)

    from hloref.fuzz.commands import add_commands
    add_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.fn(args)
    except (HloError, CliError) as exc:
        print(f"hloref: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except MemoryError:
        print("hloref: error: out of memory (lower the inputs or set --max-bytes)", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("hloref: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
