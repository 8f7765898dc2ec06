"""Signed overflow inside an accumulation: a ``dot``, ``convolution``, ``reduce``,
``reduce-window``, ``scatter``... (the catalogue's ``accumulating`` group) whose exact
result leaves its signed integer type's range.

Signed overflow is undefined behaviour by XLA's maintainers' word (openxla/xla#41784,
docs/semantics.md "What XLA leaves undefined"), and that holds for the additions and
multiplications an accumulation does as much as for an ``add`` instruction. The check
is exact: the instruction is run alone (``isolation.isolated_module``) with every
signed integer type of 32 bits or fewer widened to s64, on the same operand values, and
the result is compared with the original type's range. An s64 accumulation is not
checked (it has no wider type here). Only an exact result outside the range counts: an
order of summation whose partial sums overflow while the exact result fits is wrapped
back by two's complement on every backend XLA has, and is not treated as a breach.
"""

from __future__ import annotations

import numpy as np

from hloref.ir import Instruction, Module
from hloref.shapes import ArrayShape, TupleShape
from hloref.types import ELEMENT_TYPES, from_dtype

__all__ = ["accumulation_overflow"]

_S64 = ELEMENT_TYPES["s64"]


def _wide(shape):
    if isinstance(shape, ArrayShape) and shape.element_type.kind == "sint" \
            and shape.element_type.bits <= 32:
        return shape.with_element_type(_S64)
    if isinstance(shape, TupleShape):
        return TupleShape(tuple(_wide(s) for s in shape.elements))
    return shape


def _narrow_signed(a: np.ndarray):
    """The element type of ``a`` when it is a signed integer type of 32 bits or fewer
    (s2, s4 and the ml_dtypes sub-byte types included), else None."""
    try:
        et = from_dtype(a.dtype)
    except Exception:  # noqa: BLE001 - not an HLO element type
        return None
    return et if et.kind == "sint" and et.bits <= 32 else None


def _wide_value(value):
    if isinstance(value, tuple):
        return tuple(_wide_value(v) for v in value)
    a = np.asarray(value)
    return a.astype(np.int64) if _narrow_signed(a) is not None else a


def _leaves(value) -> list:
    if isinstance(value, tuple):
        return [leaf for v in value for leaf in _leaves(v)]
    return [np.asarray(value)]


def _exact_result(module: Module, instr: Instruction, operands: list):
    """``instr`` run alone with its signed types widened to s64; None where that cannot
    be done (nothing to widen, or the widened module does not verify)."""
    import hloref
    from hloref.errors import HloError
    from hloref.verifier import verify_module

    from .isolation import isolated_module
    alone = hloref.parse(isolated_module(module, instr).to_text())
    changed = False
    for _, i in alone.instructions():
        shape = _wide(i.shape)
        if shape != i.shape:
            i.shape, changed = shape, True
        if i.opcode == "constant" and i.literal is not None:
            i.literal = _wide_value(i.literal)
    if not changed:
        return None
    try:
        alone = hloref.parse(alone.to_text())
        verify_module(alone)
        return hloref.evaluate(alone, *[_wide_value(o) for o in operands])
    except HloError:
        return None


def accumulation_overflow(module: Module):
    """The contract check for one module: ``check(instr, operands, value)`` returns
    ``[("signed-overflow", detail, mask)]`` where ``instr``'s exact result leaves its
    signed type's range (the mask over its first result leaf), else ``[]``."""
    def check(instr, operands, value):
        leaves = _leaves(value)
        if not any(_narrow_signed(a) is not None for a in leaves):
            return []
        exact = _exact_result(module, instr, operands)
        if exact is None:
            return []
        out = []
        for got, wide in zip(leaves, _leaves(exact)):
            et = _narrow_signed(got)
            if et is None:
                continue
            lo, hi = -(1 << (et.bits - 1)), (1 << (et.bits - 1)) - 1
            mask = (wide < lo) | (wide > hi)
            out.append(("signed-overflow", "the exact accumulated result leaves the signed "
                        "type's range", np.asarray(mask, bool)))
            break
        return out
    return check
