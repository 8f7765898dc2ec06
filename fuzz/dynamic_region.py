"""The part of a dynamic result a module determines. A result whose shape has bounded
dynamic dimensions comes back from XLA:CPU as its bound-sized buffer: the runtime-sized
array first, then padding no text defines (XLA's ``DynamicPadder`` leaves it unwritten).
:func:`valid_region` cuts XLA's value to hloref's runtime sizes, so that the region the
module determines is compared and the padding is not; the ``dynamic-padding``
``undetermined`` record (``fuzz/undetermined.py``) and ``ci/conformance_judge.py`` both
read it."""

from __future__ import annotations

import numpy as np

from hloref.shapes import TupleShape

__all__ = ["valid_region"]


def _leaves(value) -> list:
    if isinstance(value, (tuple, list)):
        return [x for v in value for x in _leaves(v)]
    return [value]


def _shape_leaves(shape) -> list:
    if isinstance(shape, TupleShape):
        return [x for s in shape.elements for x in _shape_leaves(s)]
    return [shape]


def _rebuild(like, leaves):
    """``leaves`` (an iterator) in the tuple structure of ``like``."""
    if isinstance(like, (tuple, list)):
        return type(like)(_rebuild(v, leaves) for v in like)
    return next(leaves)


def valid_region(module, expected, ours):
    """XLA:CPU's value ``expected`` cut to the runtime sizes of hloref's ``ours``, where
    they differ only so: a result leaf whose declared shape has bounded dynamic
    dimensions (or whose root is a set-dimension-size of that dimension), XLA's array
    exactly at the bound and hloref's at most the bound in the dynamic dimensions,
    equal in the static ones. jaxlib returns the bound-sized buffer as XLA:CPU writes a
    dynamic result into it: the runtime-sized array densely first (row-major, the
    default layout), then padding with no defined value (seen on every multi-dimensional
    case: dynamic_padder_test.cc:1193, a s32[<=3,<=3] of runtime size 2 x 2, comes
    back as [[-3, -4, 2], [6, pad, pad], ...] for hloref's [[-3, -4], [2, 6]]). So the
    valid region is the first prod(runtime sizes) elements, reshaped to the runtime
    sizes (for one dimension, [0:size)). None when no leaf is cut so, or the
    structures differ otherwise."""
    exp, mine = _leaves(expected), _leaves(ours)
    root = module.entry.root
    shapes = _shape_leaves(root.shape)
    if not (len(exp) == len(mine) == len(shapes)):
        return None
    set_here = set(root.attrs.get("dimensions") or ()) if root.opcode == "set-dimension-size" \
        else set()
    out, cut = [], False
    for e, o, s in zip(exp, mine, shapes):
        e_shape, o_shape = np.shape(e), np.shape(o)
        if e_shape == o_shape:
            out.append(e)
            continue
        dims = getattr(s, "dims", None)
        layout = getattr(s, "layout", None)
        m2m = tuple(getattr(layout, "minor_to_major", None) or ()) if layout else ()
        if dims is None or tuple(e_shape) != tuple(dims) or len(o_shape) != len(dims):
            return None
        if m2m and m2m != tuple(range(len(dims) - 1, -1, -1)):
            return None  # a non-default layout: the dense order is not row-major
        dynamic = [bool(dyn) or k in set_here for k, dyn in enumerate(s.dynamic)]
        if any((n > d) if dyn else (n != d) for n, d, dyn in zip(o_shape, dims, dynamic)):
            return None
        count = int(np.prod(o_shape, dtype=np.int64))
        out.append(np.asarray(e).reshape(-1)[:count].reshape(o_shape))
        cut = True
    return _rebuild(expected, iter(out)) if cut else None
