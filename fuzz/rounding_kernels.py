"""One-pass Numba loops for ``rounding.py``'s element work on f32 and f64 values.

Each computes, element for element, the numpy expression it stands for in
``rounding.py`` (the same f64 operations in the same order, the same cast back), in one
pass instead of a temporary per step; the callers keep the numpy expression for every
other case (other types, other memory layouts).

* ``uniform_real``: ``uniform``'s real branch, ``value + r * w`` with its unbounded and
  non-finite rules, given the draws ``r`` (or a directed ``mode``).
* ``has_subnormal``: whether ``flush_subnormals`` has anything to flush, read from the
  bits (a zero exponent field and a nonzero significand are exactly the values strictly
  between zero and the smallest normal).
"""

from __future__ import annotations

import math

import numba
import numpy as np

__all__ = ["uniform_real", "has_subnormal"]


@numba.njit(cache=True, error_model="numpy")
def _uniform_loop(value, draws, mode, w, big, out):
    """``out[i]``: ``value[i] + r * w[i]`` in f64 (``r``: ``draws[i]``, or ``mode`` when
    ``draws`` is empty; ``w`` of one element is every element's) cast to ``out``'s type;
    where ``w >= big`` and the value is finite, ``±big`` by the sign of ``r``; a non-finite
    value as it is; a cast that overflows keeps the finite value."""
    scalar_w = w.size == 1
    directed = draws.size == 0
    for i in range(value.size):
        x = np.float64(value[i])
        wi = w[0] if scalar_w else w[i]
        r = mode if directed else draws[i]
        o = x + r * wi
        finite = math.isfinite(x)
        if finite:
            if wi >= big:
                o = -big if r < 0 else big
        else:
            o = x
        out[i] = o  # rounded to out's type, as numpy's astype rounds
        if finite and not math.isfinite(np.float64(out[i])):
            out[i] = value[i]


def uniform_real(value: np.ndarray, draws: np.ndarray | None, mode, w: np.ndarray,
                 big: float) -> np.ndarray | None:
    """``rounding.uniform``'s value for a C-contiguous f32 or f64 ``value`` and f64 ``w``
    (one element, or C-contiguous of ``value``'s shape): a new array; None when the
    layout or type is not one this loop takes."""
    if value.dtype not in (np.float32, np.float64) or not value.flags.c_contiguous or \
            w.dtype != np.float64 or not (w.size == 1 or (w.shape == value.shape and
                                                          w.flags.c_contiguous)):
        return None
    out = np.empty(value.shape, value.dtype)
    d = np.empty(0) if draws is None else draws.reshape(-1)
    _uniform_loop(value.reshape(-1), d, 0.0 if mode is None else float(mode), w.reshape(-1),
                  big, out.reshape(-1))
    return out


@numba.njit(cache=True)
def _any_subnormal(bits, magnitude, significand):
    # blocks without a branch per element (the compiler vectorizes them), stopping after
    # the first block that has one
    n = bits.size
    for start in range(0, n, 4096):
        found = False
        for i in range(start, min(start + 4096, n)):
            m = bits[i] & magnitude  # a subnormal: 0 < its magnitude bits <= significand
            found |= (m != 0) & (m <= significand)
        if found:
            return True
    return False


#: The bit view and the exponent and significand fields of each type ``flush_subnormals``
#: flushes (complex: its parts, through their own type).
_FIELDS = {np.dtype(np.float32): (np.int32, 0x7F800000, 0x007FFFFF),
           np.dtype(np.float64): (np.int64, 0x7FF0000000000000, 0x000FFFFFFFFFFFFF)}


def _fields(dtype):
    found = _FIELDS.get(dtype)
    if found is None and dtype.name == "bfloat16":
        found = (np.uint16, 0x7F80, 0x007F)
    return found


def has_subnormal(x: np.ndarray) -> bool | None:
    """Whether the C-contiguous real ``x`` has a subnormal element; None when its layout
    or type is not one this loop reads."""
    fields = _fields(x.dtype)
    if fields is None or not x.flags.c_contiguous:
        return None
    view, exponent, significand = fields
    bits = x.reshape(-1).view(view)
    return bool(_any_subnormal(bits, bits.dtype.type(exponent | significand),
                               bits.dtype.type(significand)))
