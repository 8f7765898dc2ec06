"""The op registry: opcode → evaluation function, one module per op family.

An op function takes its operand values positionally and its attributes as
keyword-only arguments named as in HLO text (``dimensions``, ``slice``,
``padding``...). Three keyword names are special:

* ``shape``: the instruction's result ``Shape``;
* ``ctx``: the running ``Interpreter`` (for ops that call computations or keep state);
* any attribute holding a ``ComputationRef`` arrives as a ``Called`` object: call it
  with argument values to evaluate the computation.

The dispatcher (``Interpreter``) reads the signature once per function and the
attributes once per instruction; op bodies never see the IR.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable

from hloref.opcodes import CATALOGUE

__all__ = ["op", "OPS", "OpEntry", "unsupported", "UNSUPPORTED"]


@dataclass(frozen=True)
class OpEntry:
    opcode: str
    fn: Callable
    #: keyword-only parameter names and whether each has a default
    keywords: tuple[tuple[str, bool], ...]
    family: str


OPS: dict[str, OpEntry] = {}
#: Opcodes that are known but not evaluated yet, with the reason.
UNSUPPORTED: dict[str, str] = {}


def op(*opcodes: str):
    """Register the decorated function as the evaluator of ``opcodes``."""

    def register(fn: Callable) -> Callable:
        sig = inspect.signature(fn)
        keywords = tuple(
            (name, p.default is not inspect.Parameter.empty)
            for name, p in sig.parameters.items()
            if p.kind is inspect.Parameter.KEYWORD_ONLY
        )
        family = fn.__module__.rsplit(".", 1)[-1]
        for opcode in opcodes:
            if opcode in OPS:
                raise RuntimeError(f"opcode {opcode} registered twice")
            OPS[opcode] = OpEntry(opcode, fn, keywords, family)
        return fn

    return register


def unsupported(opcode: str, reason: str) -> None:
    UNSUPPORTED[opcode] = reason


#: Opcodes the interpreter loop dispatches itself (not through ``OPS``): family
#: ``interpreter`` in the op catalogue.
INTERPRETER_OPCODES = frozenset(op for op, info in CATALOGUE.items()
                                if info.family == "interpreter")


def load_all() -> dict[str, OpEntry]:
    """Import every op-family module of this package so that its ``@op`` registrations run.

    A module is an op family when it defines ``OP_FAMILY = True`` at the top (checked
    by reading, so helper modules are not imported twice for nothing)."""
    global _loaded
    if not _loaded:
        import importlib
        import pkgutil
        from pathlib import Path
        here = Path(__file__).parent
        for info in sorted(pkgutil.iter_modules([str(here)]), key=lambda i: i.name):
            text = (here / f"{info.name}.py").read_text(encoding="utf-8") \
                if (here / f"{info.name}.py").exists() else ""
            if "\nOP_FAMILY = True" in text:
                importlib.import_module(f"{__package__}.{info.name}")
        _loaded = True
    return OPS


_loaded = False


class Called:
    """A called computation bound to the interpreter: ``called(*args) -> value``."""

    __slots__ = ("computation", "_ctx")

    def __init__(self, computation, ctx):
        self.computation = computation
        self._ctx = ctx

    def __call__(self, *args: Any):
        return self._ctx.call(self.computation, list(args))

    @property
    def name(self) -> str:
        return self.computation.name
