"""Another order of a window walk: is the oracle's ``select-and-scatter`` hloref's under
a different dimension order?

A ``select-and-scatter`` picks one element per window by folding ``select`` over it.
The written semantics (StableHLO: a ``reduce`` of the window with ``select``) leaves
the order of that fold implementation-defined, so with a non-strict ``select`` (GE, LE)
and tied values in a window, which of the tied elements receives the source value
depends on the walk. hloref walks each window row-major; XLA:CPU walks it in other
dimension orders (measured: dimension 1 before 0 for an s4 window of 3x3x1, dimension 2
before 0 for an f64 window of 3x1x2 with padding; campaigns, seeds 31 and 41).

``same_under_another_order(culprit)`` evaluates the isolated instruction with hloref
once per permutation of the window's dimensions (the operand, source and window
permuted, so that hloref's row-major walk is the permuted walk, and the result permuted
back) and says whether one of them gives the oracle's value: then the oracle chose
another valid element, and the mismatch is the known gap ``select-and-scatter-ties``.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np

__all__ = ["same_under_another_order", "MAX_RANK", "MAX_ELEMENTS"]

#: permutations of up to 5 window dimensions (120 evaluations) are tried
MAX_RANK = 5
#: operands larger than this are not re-evaluated (the campaign's programs are small)
MAX_ELEMENTS = 1 << 16


def _permuted(module, perm):
    """The isolated module with its operand, source and result dimensions and its window
    permuted by ``perm`` (new dimension i is old dimension perm[i])."""
    from hloref.ir import Computation, Module
    from hloref.shapes import ArrayShape

    entry = module.entry
    sas = entry.root

    def shape(s):
        return ArrayShape(s.element_type, tuple(s.dims[p] for p in perm))

    params = []
    for p in sorted(entry.parameters, key=lambda q: q.parameter_number):
        params.append(dataclasses.replace(p, shape=shape(p.shape) if p.shape.rank else p.shape))
    window = sas.attrs["window"]
    attrs = dict(sas.attrs)
    attrs["window"] = dataclasses.replace(window, dims=tuple(window.dims[p] for p in perm))
    root = dataclasses.replace(sas, operands=params, shape=shape(sas.shape), attrs=attrs)
    comps = dict(module.computations)
    comps[entry.name] = Computation(name=entry.name, instructions=params + [root], root=root,
                                    is_entry=True)
    return Module(name=module.name, computations=comps, entry_name=entry.name)


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal, or for floats within a few ULP (the oracle may add a window's source values
    in another order)."""
    if a.shape != b.shape:
        return False
    if a.dtype.kind in "biu" or b.dtype.kind in "biu" or a.dtype.kind == "V":
        return bool(np.array_equal(a, b))
    x, y = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(all="ignore"):
        tol = 8 * np.spacing(np.maximum(np.abs(x), np.abs(y)).astype(a.dtype)).astype(np.float64)
        return bool(np.all((x == y) | (np.isnan(x) & np.isnan(y)) | (np.abs(x - y) <= tol)))


def same_under_another_order(culprit) -> bool:
    """Whether the isolated ``select-and-scatter`` ``culprit`` (``.text``, ``.operands``,
    ``.actual``) gives the oracle's value when its windows are walked in another order of
    their dimensions."""
    import hloref
    if getattr(culprit, "opcode", None) != "select-and-scatter" or \
            len(getattr(culprit, "operands", ()) or ()) != 3:
        return False
    try:
        module = hloref.parse(culprit.text)
    except Exception:  # noqa: BLE001 - no module, no explanation
        return False
    sas = module.entry.root
    operand, source, init = (np.asarray(o) for o in culprit.operands)
    actual = np.asarray(culprit.actual)
    rank = operand.ndim
    if sas.opcode != "select-and-scatter" or rank < 2 or rank > MAX_RANK or \
            operand.size > MAX_ELEMENTS or actual.shape != operand.shape:
        return False
    for perm in itertools.permutations(range(rank)):
        if perm == tuple(range(rank)):
            continue
        inverse = np.argsort(perm)
        try:
            value = hloref.evaluate(_permuted(module, perm), operand.transpose(perm),
                                    source.transpose(perm), init)
        except Exception:  # noqa: BLE001 - a permutation hloref refuses explains nothing
            continue
        if _close(np.asarray(value).transpose(inverse), actual):
            return True
    return False
