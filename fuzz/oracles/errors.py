"""Exceptions raised by the oracle backends (XLA:CPU through jaxlib, ...)."""

from __future__ import annotations


class OracleError(RuntimeError):
    """The oracle rejected the module or failed to run it (parse error, compile error,
    runtime error, argument mismatch). ``str(exc)`` carries the oracle's own message."""


class OracleUnsupported(NotImplementedError):
    """The oracle cannot be asked this question at all: an element type it cannot
    transfer or compile, a token parameter, a missing optional dependency, ...

    Differential testers should treat this as "skip", never as a mismatch."""


__all__ = ["OracleError", "OracleUnsupported"]
