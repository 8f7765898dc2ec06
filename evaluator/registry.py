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

__all__ = ["op", "OPS", "OpEntry", "unsupported", "UNSUPPORTED", "FAMILIES", "family_modules",
           "family_of_module", "load_all"]


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


#: The op families: the catalogue's ``family`` column (the interpreter loop apart).
FAMILIES = frozenset(info.family for info in CATALOGUE.values()) - {"interpreter"}


def family_modules(directory) -> list[str]:
    """The modules of ``directory`` (a backend's package folder) that register ops: each
    family's module (``reduce.py``) and its parts, the modules named ``<family>_<part>``
    that are no family themselves (``custom_call_lapack.py``, ``linalg_fft.py``), in
    that order. A family a backend has no module for is skipped."""
    from pathlib import Path
    names = sorted(p.stem for p in Path(directory).glob("*.py"))
    families = [n for n in names if n in FAMILIES]
    parts = [n for n in names if n not in FAMILIES and family_of_module(n) is not None]
    return families + parts


def family_of_module(name: str) -> str | None:
    """The family module ``name`` belongs to: itself, or ``F`` for a part ``F_<part>``
    (None: a helper module)."""
    if name in FAMILIES:
        return name
    owners = [f for f in FAMILIES if name.startswith(f + "_")]
    return max(owners, key=len) if owners else None


def load_all() -> dict[str, OpEntry]:
    """Import the modules of this package named by the op catalogue's ``family`` column
    (``family_modules``) so that their ``@op`` registrations run."""
    global _loaded
    if not _loaded:
        import importlib
        from pathlib import Path
        for name in family_modules(Path(__file__).parent):
            importlib.import_module(f"{__package__}.{name}")
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
