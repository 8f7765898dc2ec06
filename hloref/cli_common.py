"""What the command lines share: ``hloref/cli.py`` (``run``, ``parse``, ``ops``) and
``fuzz/commands.py`` (``diff``, ``check``, ``fuzz``, ...), and the npz convention that
findings and campaigns also write and read.

Exit codes, ``CliError`` (a user error reported as one line, exit 2), loading an HLO
text file, the ``--max-bytes``/``--max-while-iterations`` limits, and inputs/outputs as
``.npz`` files of ``arr_0``, ``arr_1``, ... (tuples flattened in order). It imports
nothing of the command lines, so both sides (and ``fuzz/findings.py``,
``fuzz/campaign.py``) import it without a cycle.
"""

from __future__ import annotations

import os
import tempfile
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from hloref.evaluator.interpreter import Limits

__all__ = ["EXIT_OK", "EXIT_MISMATCH", "EXIT_BAD_INPUT", "EXIT_STATUSES", "exit_status_text",
           "CliError", "require_modules", "load_module",
           "limits_from_args", "read_npz", "write_npz", "flatten_value", "unflatten_arguments",
           "random_arguments", "check_parameter_bytes", "cli_limit_message"]

EXIT_OK = 0
EXIT_MISMATCH = 1
EXIT_BAD_INPUT = 2


#: What each command's exit status means (its ``--help`` epilog, docs/cli.md).
EXIT_STATUSES = {
    "run": {0: "evaluated", 2: "bad input or a limit reached"},
    "parse": {0: "parsed (and verified)", 2: "bad input"},
    "ops": {0: "printed"},
    "diff": {0: "match or known-gap (the oracle's value is inside hloref's envelope, or "
                "differs only where a documented gap says it may)",
             1: "mismatch, or the oracle crashed or timed out",
             2: "bad input, or hloref or the oracle rejected the module (nothing compared)"},
    "check": {0: "match (AFTER's value is inside BEFORE's envelope)", 1: "mismatch",
              2: "bad input"},
    "check-dump": {0: "every snapshot is inside the envelope of the module before "
                      "optimizations", 1: "a snapshot is outside", 2: "bad input"},
    "fuzz": {0: "no new finding", 1: "new findings (written under --out)",
             2: "bad input or a campaign that cannot start"},
    "replay": {0: "no stored finding reproduces", 1: "at least one still reproduces",
               2: "bad input (no finding directories)"},
    "report": {0: "the reports printed (or the --index table written)",
               2: "bad input (no finding directories)"},
    "memory": {0: "the buffer assignment and XLA's figures check out",
               1: "a finding: two live values share bytes, a slice too small, an illegal "
                  "in-place reuse, a value changed through the assignment, or a figure "
                  "difference no cause explains",
               2: "bad input"},
}


def exit_status_text(command: str) -> str:
    """``exit status: 0 ..., 1 ..., 2 ...`` for ``command``'s ``--help``."""
    return "exit status: " + "; ".join(f"{code} {what}" for code, what in
                                       sorted(EXIT_STATUSES[command].items()))


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


def load_module(path: str, verify: bool = False):
    """The module in HLO text file ``path`` (verified with ``verify``: an
    ``HloVerifyError`` naming the instruction, and the module is marked verified so
    that ``hloref.evaluate`` does not verify it again); a missing or unreadable file is a
    ``CliError``."""
    from .parser import parse_module
    module = parse_module(_read_text(path), filename=path)
    if verify:
        from .api import verified
        verified(module)
    return module


def limits_from_args(args) -> "Limits":
    """The evaluation ``Limits`` of a command's ``--max-bytes`` and
    ``--max-while-iterations`` (defaults where absent)."""
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
    """The leaves of a (nested) tuple value, in order (the npz convention's order)."""
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

    def leaves(shape) -> int:
        return sum(leaves(s) for s in shape.elements) if isinstance(shape, TupleShape) else 1

    wanted = sum(leaves(s) for s in shapes)
    if len(arrays) != wanted:
        tuples = " (tuple parameters flattened)" if wanted != len(shapes) else ""
        raise CliError(f"the inputs file has {len(arrays)} array{'s' * (len(arrays) != 1)}, "
                       f"the entry computation takes {wanted}{tuples}: "
                       f"{len(shapes)} parameter{'s' * (len(shapes) != 1)}")

    def take(shape):
        if isinstance(shape, TupleShape):
            return tuple(take(s) for s in shape.elements)
        return next(it)

    return [take(s) for s in shapes]


def random_arguments(module, seed: int, limits: "Limits | None" = None) -> list:
    """Seeded random values for ``module``'s entry parameters (``hloref.inputs``); with
    ``limits``, parameters over its memory budget are refused before any is drawn
    (``HloLimitError`` naming the largest and the byte counts)."""
    from .inputs import random_value
    if limits is not None:
        check_parameter_bytes(module, limits)
    rng = np.random.default_rng(seed)
    return [random_value(p.shape, rng) for p in module.entry.parameters]


def check_parameter_bytes(module, limits: "Limits") -> None:
    """``HloLimitError`` when ``module``'s entry parameters alone take more bytes than
    ``limits.max_bytes`` (the budget ``hloref.evaluate`` enforces on live values)."""
    from .errors import HloLimitError
    from .shapes import byte_size
    params = module.entry.parameters
    sizes = [byte_size(p.shape) for p in params]
    total = sum(sizes)
    if total > limits.max_bytes:
        big = max(range(len(params)), key=sizes.__getitem__)
        p = params[big]
        raise HloLimitError(
            f"the entry parameters take {total} bytes (the largest, %{p.name} "
            f"{p.shape.to_text(layout=False)}, {sizes[big]} bytes), over the memory budget of "
            f"{limits.max_bytes} bytes (--max-bytes)")


def cli_limit_message(message: str) -> str:
    """A limit error's message with the command-line flag that sets the limit."""
    return (message.replace("(Limits.max_bytes)", "(--max-bytes, hloref.Limits.max_bytes)")
            .replace("(Limits.max_while_iterations)",
                     "(--max-while-iterations, hloref.Limits.max_while_iterations)"))


def require_modules(what: str, modules, extra: str) -> None:
    """``CliError`` naming the extra to install when a module ``what`` needs is missing
    (looked up, not imported)."""
    import importlib.util
    for name in modules:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise CliError(f"{what} needs {name}, which is not installed: "
                           f"pip install 'hloref[{extra}]'")
