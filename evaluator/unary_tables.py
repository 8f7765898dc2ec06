"""Unary functions of 8- and 16-bit float types by table lookup.

A type of at most 16 bits has at most 65,536 values, so a unary elementwise function
of it is a table: the function evaluated once on every bit pattern (by the very code
that computes it on an array, ``numeric.float_compute_f64`` for the transcendentals),
then indexed by the operand's bits. The result is that code's, bit for bit (NaN
payloads included), by construction: each element of the table is computed exactly as
the element of a large array would be. A table is built the first time an array of at
least ``MIN_ELEMENTS`` elements needs it (about 2 ms for a sine of bf16) and kept for
the process; smaller arrays use it once it exists.
"""

from __future__ import annotations

import threading

import numpy as np

__all__ = ["lookup", "MIN_ELEMENTS"]

#: arrays smaller than this compute directly until the table exists
MIN_ELEMENTS = 1 << 12

#: (function name, element type name) -> result table indexed by the operand's bits
_TABLES: dict = {}
_LOCK = threading.Lock()


def tabulable(et) -> bool:
    """Whether ``et`` is a float type every one of whose 8 or 16 bits patterns is a value
    (``f4e2m1fn`` and the other sub-byte types are stored one per byte: not tabulated)."""
    return et.is_narrow_float and et.bits in (8, 16) and et.dtype.itemsize * 8 == et.bits


def lookup(name: str, compute, x: np.ndarray, et) -> np.ndarray | None:
    """``compute(x)`` for a unary ``compute`` of float type ``et`` (operand and result),
    by table; ``None`` when ``et`` is not tabulable or ``x`` too small to build one."""
    if type(x) is not np.ndarray or x.ndim == 0 or not tabulable(et) or x.dtype != et.dtype:
        return None  # (a scalar, as a per-element reducer passes, is computed directly)
    key = (name, et.name)
    table = _TABLES.get(key)
    if table is None:
        if x.size < MIN_ELEMENTS:
            return None
        patterns = np.arange(1 << et.bits, dtype=np.uint64).astype(et.bits_dtype)
        table = np.ascontiguousarray(compute(patterns.view(et.dtype))).view(et.bits_dtype)
        with _LOCK:
            table = _TABLES.setdefault(key, table)
    return table[x.view(et.bits_dtype)].view(et.dtype)
