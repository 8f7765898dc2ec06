"""The GPU op registry: opcode -> GPU op function (same calling convention as the CPU's).

A GPU op function takes device operands (``DArray``, tuples, tokens) positionally and
the same keyword arguments as the CPU op of that opcode (it may accept fewer, plus
``ctx``). It raises :class:`GpuFallback` *before doing any work* when it has no kernel
for the case at hand (e.g. complex element types); the interpreter then runs the CPU op.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable

__all__ = ["gpu_op", "GPU_OPS", "GpuEntry", "GpuFallback", "load_all"]


class GpuFallback(Exception):
    """Raised by a GPU op that has no kernel for these operands; ``reason`` says why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class GpuEntry:
    opcode: str
    fn: Callable
    params: frozenset
    var_keywords: bool
    family: str
    #: cases this op still runs on the CPU (shown by ``hloref ops``), or ""
    note: str = ""


GPU_OPS: dict[str, GpuEntry] = {}


def gpu_op(*opcodes: str, note: str = ""):
    def register(fn: Callable) -> Callable:
        sig = inspect.signature(fn)
        params = frozenset(n for n, p in sig.parameters.items()
                           if p.kind is inspect.Parameter.KEYWORD_ONLY)
        var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())
        family = fn.__module__.rsplit(".", 1)[-1]
        for opcode in opcodes:
            if opcode in GPU_OPS:
                raise RuntimeError(f"GPU opcode {opcode} registered twice")
            GPU_OPS[opcode] = GpuEntry(opcode, fn, params, var_kw, family, note)
        return fn

    return register


_loaded = False


def load_all() -> dict[str, GpuEntry]:
    """Import the modules of this package named by the op catalogue's ``family`` column
    (a family's module and its ``<family>_<part>`` modules, as
    ``evaluator/registry.py:family_modules`` finds them) so that their ``@gpu_op``
    registrations run."""
    global _loaded
    if not _loaded:
        import importlib
        from pathlib import Path
        from hloref.evaluator.registry import family_modules
        for name in family_modules(Path(__file__).parent):
            importlib.import_module(f"{__package__}.{name}")
        _loaded = True
    return GPU_OPS
