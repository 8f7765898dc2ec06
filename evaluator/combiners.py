"""The recognised combiners: the binary ops a reducer, reduce-window or scatter
computation may be (``ROOT op(p0, p1)``, ``reduce.simple_reducer``) and that the
evaluator then applies to whole arrays with numpy instead of calling the computation.

One table, ``COMBINERS``: per opcode, the numpy ufunc on integers, the one on bools
(pred: ``add`` is ``or``, ``multiply`` is ``and``, ``maximum``/``minimum`` are
``or``/``and``), and the identity in a compute dtype (reduce-window pads its windows
with it). Floats are not here: float add/multiply accumulate in f64 and maximum/minimum
follow XLA's NaN and signed-zero rules (``reduce.fast_reduce``, ``elementwise.ieee_max_min``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

__all__ = ["Combiner", "COMBINERS", "identity"]


@dataclass(frozen=True)
class Combiner:
    integer: Callable        # numpy ufunc on (signed and unsigned) integers
    pred: Callable           # numpy ufunc on bools
    #: ``identity(dtype)``: the value ``x`` with ``op(x, y) == y`` in compute dtype
    #: ``dtype`` (bool, integer, float or complex); None where the op takes no such type
    identity: Callable


def _add_identity(dtype: np.dtype):
    # -0.0, not +0.0: -0.0 + y is y for y = -0.0 too
    if dtype == np.bool_:
        return False
    if dtype.kind in "fc":
        return -0.0 if dtype.kind == "f" else complex(-0.0, -0.0)
    return 0


def _multiply_identity(dtype: np.dtype):
    return True if dtype == np.bool_ else 1.0 if dtype.kind in "fc" else 1


def _maximum_identity(dtype: np.dtype):
    if dtype == np.bool_:
        return False
    return -np.inf if dtype.kind in "fc" else np.iinfo(dtype).min


def _minimum_identity(dtype: np.dtype):
    if dtype == np.bool_:
        return True
    return np.inf if dtype.kind in "fc" else np.iinfo(dtype).max


def _and_identity(dtype: np.dtype):
    # every bit set: -1 for signed types, the largest value for unsigned ones
    if dtype == np.bool_:
        return True
    if dtype.kind in "fc":
        return None
    info = np.iinfo(dtype)
    return -1 if info.min < 0 else info.max


def _or_xor_identity(dtype: np.dtype):
    if dtype == np.bool_:
        return False
    return None if dtype.kind in "fc" else 0


COMBINERS: dict[str, Combiner] = {
    "add": Combiner(np.add, np.logical_or, _add_identity),
    "multiply": Combiner(np.multiply, np.logical_and, _multiply_identity),
    "maximum": Combiner(np.maximum, np.logical_or, _maximum_identity),
    "minimum": Combiner(np.minimum, np.logical_and, _minimum_identity),
    "and": Combiner(np.bitwise_and, np.logical_and, _and_identity),
    "or": Combiner(np.bitwise_or, np.logical_or, _or_xor_identity),
    "xor": Combiner(np.bitwise_xor, np.logical_xor, _or_xor_identity),
}


def identity(kind: str, dtype: np.dtype):
    """The identity of combiner ``kind`` in compute dtype ``dtype`` (None if none)."""
    return COMBINERS[kind].identity(np.dtype(dtype))
