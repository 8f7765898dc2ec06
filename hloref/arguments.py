"""Checking a caller's argument against a parameter shape: ``coerce_argument``.

Below ``hloref.api`` (which re-exports it) so that the evaluator (``infeed``) can
check its values without importing the public API."""

from __future__ import annotations

import numpy as np

from .errors import HloEvalError
from .shapes import ArrayShape, Shape, TokenShape, TupleShape
from .values import TOKEN_VALUE, Token

__all__ = ["coerce_argument"]


def coerce_argument(value, shape: Shape, where: str):
    """Check ``value`` against parameter ``shape`` and return it in the evaluator's form.

    Arrays must have the shape's dimensions and dtype; a narrow-float or sub-byte
    parameter also takes an unsigned-integer array of the same width holding the raw
    bits (npz files cannot record ml_dtypes types). Python scalars and lists are
    converted when their values fit. Tuple parameters take tuples (or lists)."""
    if isinstance(shape, TupleShape):
        if not isinstance(value, (tuple, list)) or len(value) != len(shape.elements):
            raise HloEvalError(f"{where}: expected a tuple of {len(shape.elements)} values for "
                               f"{shape.to_text(layout=False)}, got {_describe(value)}")
        return tuple(coerce_argument(v, s, f"{where}[{i}]")
                     for i, (v, s) in enumerate(zip(value, shape.elements)))
    if isinstance(shape, TokenShape):
        return TOKEN_VALUE if value is None or isinstance(value, Token) else _bad(where, shape, value)
    if not isinstance(shape, ArrayShape):
        raise HloEvalError(f"{where}: parameters of shape {shape} are not supported")
    dtype = shape.element_type.dtype
    arr = value if isinstance(value, np.ndarray) else None
    if arr is None:
        try:
            arr = np.asarray(value, dtype=dtype)
        except (TypeError, ValueError, OverflowError) as exc:
            raise HloEvalError(f"{where}: cannot convert {_describe(value)} to "
                               f"{shape.to_text(layout=False)}: {exc}") from None
    if arr.dtype != dtype:
        bits = shape.element_type.bits_dtype
        raw = (shape.element_type.is_float or shape.element_type.bits < 8) and bits != dtype
        if raw and arr.dtype.kind == "V" and arr.dtype.itemsize == bits.itemsize and \
                arr.dtype.fields is None:
            arr = arr.view(bits)  # an ml_dtypes array numpy.save stored without its type
        if raw and arr.dtype == bits:
            arr = arr.view(dtype)
        else:
            hint = f" (or its raw bits as {bits.name})" if raw else ""
            if arr.dtype.kind == "V":
                hint += (f"; numpy.save/savez store an ml_dtypes array as raw bytes ("
                         f"{arr.dtype.name}) without its type: store the raw bits, "
                         f"a.view(numpy.{bits.name if raw else 'uint' + str(8 * arr.dtype.itemsize)})")
            raise HloEvalError(f"{where}: expected dtype {dtype.name}{hint} for "
                               f"{shape.to_text(layout=False)}, got {arr.dtype.name}")
    if tuple(arr.shape) != tuple(shape.dims):
        raise HloEvalError(f"{where}: expected dimensions {list(shape.dims)} for "
                           f"{shape.to_text(layout=False)}, got {list(arr.shape)}")
    return arr if arr.flags.c_contiguous else arr.copy(order="C")


def _bad(where, shape, value):
    raise HloEvalError(f"{where}: expected {shape}, got {_describe(value)}")


def _describe(value) -> str:
    if isinstance(value, np.ndarray):
        return f"an array {value.dtype.name}{list(value.shape)}"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)}"
    return type(value).__name__
