"""Oracles: real compilers that hloref's results are compared against.

``hloref.fuzz.oracles.xla`` runs HLO text on XLA:CPU in-process through jaxlib
(imported lazily: importing this package does not import jax).
"""

from .errors import OracleError, OracleUnsupported

__all__ = ["OracleError", "OracleUnsupported"]
