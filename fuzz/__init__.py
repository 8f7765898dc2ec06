"""Differential testing of XLA against hloref: oracles, the comparison policy,
isolation, pass blame, reduction, findings.

``hloref.fuzz.diff(module, args, oracle="xla") -> DiffReport`` is the entry point.
Importing this package does not import jax or TensorFlow; the oracles run in
worker processes (``hloref.fuzz.workers``).
"""

from .compare import Tolerance, Verdict, compare_values
from .differential import DiffReport, diff

__all__ = ["diff", "DiffReport", "compare_values", "Verdict", "Tolerance"]
