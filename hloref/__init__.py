"""hloref: a reference interpreter and differential tester for XLA's HLO."""

from .errors import (HloError, HloEvalError, HloLimitError, HloParseError, HloUnsupportedError,
                     HloVerifyError)
from .ir import Computation, Instruction, Module
from .types import ELEMENT_TYPES, ElementType, element_type

__version__ = "0.1.0"


def parse(text: str, *, filename: str | None = None, verify: bool = False) -> Module:
    """Parse HLO text as XLA prints it into a ``Module`` (``HloParseError`` on bad text)."""
    from .parser import parse_module
    module = parse_module(text, filename=filename)
    if verify:
        from .verifier import verify_module
        verify_module(module)
    return module


def evaluate(module_or_text, *args, backend: str = "cpu", limits=None, **kwargs):
    """Evaluate the entry computation on numpy ``args``; returns an array or a tuple.

    See ``hloref.api.evaluate`` for multi-device modules and infeed/outfeed queues."""
    api = _API[0] if _API else _load_api()  # not an import statement: ~0.4 µs a call
    return api.evaluate(module_or_text, *args, backend=backend, limits=limits, **kwargs)


def compile(module_or_text, *, limits=None, verify: bool = True):  # noqa: A001
    """The module prepared once for repeated evaluation: ``compiled(*args)`` evaluates
    it as ``evaluate`` would, without checking the module again (compile a module
    edited in place again). See ``hloref.api.Compiled``."""
    api = _API[0] if _API else _load_api()
    return api.compile_module(module_or_text, limits=limits, verify=verify)


_API: list = []


def _load_api():
    from . import api
    _API.append(api)
    return api


def supported_opcodes(backend: str = "cpu") -> frozenset[str]:
    """The opcodes the given backend evaluates."""
    from .api import supported_opcodes as _supported
    return _supported(backend)


def __getattr__(name):
    if name == "Limits":
        from hloref.evaluator.interpreter import Limits
        return Limits
    raise AttributeError(f"module 'hloref' has no attribute {name!r}")


__all__ = [
    "parse", "evaluate", "compile", "supported_opcodes", "Limits", "Module", "Computation",
    "Instruction", "ElementType", "element_type", "ELEMENT_TYPES", "HloError", "HloParseError",
    "HloVerifyError", "HloUnsupportedError", "HloEvalError", "HloLimitError",
]
