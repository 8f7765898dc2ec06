"""Asynchronous pairs: ``async-start``/``async-update``/``async-done``,
``copy-start``/``copy-done`` (operation_semantics §AsyncStart...).

hloref runs the wrapped work at ``async-start`` and carries the result in the
start's tuple ``((operands...), result, context...)``; ``async-done`` returns it.
Context elements (scheduler handles) are zeros. ``async-start`` itself is
dispatched by the interpreter (it needs the wrapped opcode or computation), see
``Interpreter._prepare_async_start``.
"""

from __future__ import annotations

import numpy as np

from hloref.shapes import ArrayShape, TupleShape

from .registry import op


def context_values(shape) -> list:
    """Zeros for the context elements of an async-start tuple shape (after element 1)."""
    out = []
    if isinstance(shape, TupleShape):
        for s in shape.elements[2:]:
            out.append(zeros(s))
    return out


def zeros(shape):
    if isinstance(shape, TupleShape):
        return tuple(zeros(s) for s in shape.elements)
    if isinstance(shape, ArrayShape):
        return np.zeros(shape.dims, shape.element_type.dtype)
    from hloref.values import TOKEN_VALUE
    return TOKEN_VALUE


@op("async-update")
def async_update(start, *, shape):
    return start


@op("async-done")
def async_done(start, *, shape):
    return start[1]


@op("copy-start")
def copy_start(x, *, shape):
    """``(destination, source, context)``: the copy is made here."""
    copied = x.copy() if isinstance(x, np.ndarray) else x
    return (copied, x) + tuple(context_values(shape)[0:1] if isinstance(shape, TupleShape) and
                               len(shape.elements) > 2 else ())


@op("copy-done")
def copy_done(start, *, shape):
    return start[0]
