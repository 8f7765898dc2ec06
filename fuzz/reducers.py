"""Whether a reducer may be applied in any order: associativity and commutativity up to
rounding, tested on sampled values.

``reduce`` and ``reduce-window`` leave the order of application to the implementation
(operation_semantics §Reduce). For the one-op reducers (``add``, ``maximum``...) the
envelope knows what reordering does (``fuzz/perturb.py``). A written reducer such as
``logaddexp`` (``max(x, y) + log1p(exp(-|x - y|))``, what ``lax.cumlogsumexp`` and
``logsumexp`` reductions lower to) is associative and commutative too, up to a few
roundings, while ``x + 2|y|`` is not: no order is *the* answer. Reading the opcodes
cannot tell them apart (both subtract or take an absolute value), so this module
evaluates the reducer: on seeded triples ``(a, b, c)`` spanning six decades, signs,
zeros and ties, ``r(r(a, b), c)`` must equal ``r(a, r(b, c))`` and ``r(a, b)`` equal
``r(b, a)`` within ``TOLERANCE_EPS`` machine epsilons of the magnitudes involved
(integers: exactly). NaN results must agree in being NaN.

Used by the envelope (an order budget for reducers that pass, ``perturb.py``) and by
``known_gaps.py`` (the undetermined "non-associative-reducer" only for reducers that fail).
"""

from __future__ import annotations

import weakref

import ml_dtypes
import numpy as np

from hloref.ir import Computation, Module
from hloref.shapes import ArrayShape

__all__ = ["reorder_free", "reorder_checkable", "acts_as_identity", "TOLERANCE_EPS"]

#: Allowed difference between two orders of three elements, in epsilons of the element
#: type times (|a| + |b| + |c| + |each result|): a few roundings per application, each
#: within a few ulps (a transcendental inside a reducer: XLA's budgets are 1-4 ulps).
TOLERANCE_EPS = 16.0

_SAMPLES = 512
_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _samples(dtype: np.dtype, is_float: bool, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if not is_float and dtype.kind in "iu":
        info = np.iinfo(dtype)
        lo, hi = max(int(info.min), -1000), min(int(info.max), 1000)
        return rng.integers(lo, hi + 1, _SAMPLES).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, _SAMPLES).astype(bool)
    x = rng.standard_normal(_SAMPLES) * 10.0 ** rng.uniform(-3, 3, _SAMPLES)
    x[::17] = 0.0
    x[5::23] = x[4::23][:len(x[5::23])]  # ties
    return x.astype(dtype)


def _agree(left: np.ndarray, right: np.ndarray, scale: np.ndarray, dtype: np.dtype,
           is_float: bool) -> bool:
    if not is_float:
        return bool(np.array_equal(left, right))
    lf, rf = left.astype(np.float64), right.astype(np.float64)
    nan = np.isnan(lf) | np.isnan(rf)
    if not np.array_equal(np.isnan(lf), np.isnan(rf)):
        return False
    same_inf = lf == rf
    eps = float(ml_dtypes.finfo(dtype).eps)
    with np.errstate(all="ignore"):
        close = np.abs(lf - rf) <= TOLERANCE_EPS * eps * scale
    return bool(np.all(nan | same_inf | close))


def reorder_free(module: Module, computation: Computation) -> bool:
    """True when ``computation`` is a reducer of two scalars of one real element type
    (floating point or integer) that is associative and commutative on sampled values
    (see the module docstring). Variadic reducers, complex and narrow-storage types
    numpy cannot hold, and reducers that fail to evaluate on arrays give False."""
    cached = _CACHE.get(computation)
    if cached is not None:
        return cached
    _CACHE[computation] = result = _reorder_free(module, computation)
    return result


def reorder_checkable(computation: Computation) -> bool:
    """True when ``reorder_free`` can test ``computation`` by evaluating it: a reducer of
    two scalars of one real element type numpy holds, giving one such scalar (for any
    other, ``reorder_free`` says False without knowing)."""
    return _scalar_type(computation) is not None


def _scalar_type(computation: Computation):
    params, root = computation.parameters, computation.root
    if len(params) != 2 or root is None:
        return None
    shapes = [p.shape for p in params] + [root.shape]
    if not all(isinstance(s, ArrayShape) and s.rank == 0 for s in shapes) or \
            len({s.element_type for s in shapes}) != 1:
        return None
    et = shapes[0].element_type
    if et.is_complex:
        return None
    try:
        np.dtype(et.dtype)
    except TypeError:
        return None
    return et


def _applied(module: Module, computation: Computation, dtype: np.dtype):
    """``r(x, y)``: the reducer applied elementwise to two arrays of samples."""
    from hloref.evaluator.interpreter import Interpreter
    interp = Interpreter(module)

    def r(x, y):
        return np.asarray(interp.call(computation, [x, y])).astype(dtype, copy=False)
    return r


def _reorder_free(module: Module, computation: Computation) -> bool:
    et = _scalar_type(computation)
    if et is None:
        return False
    dtype = np.dtype(et.dtype)
    is_float = et.is_float
    a, b, c = (_samples(dtype, is_float, seed) for seed in (1, 2, 3))
    r = _applied(module, computation, dtype)
    try:
        with np.errstate(all="ignore"):
            ab, bc = r(a, b), r(b, c)
            left, right = r(ab, c), r(a, bc)
            ba = r(b, a)
    except Exception:  # noqa: BLE001 - a reducer that cannot run on arrays: not known free
        return False
    if any(v.shape != a.shape for v in (ab, bc, left, right, ba)):
        return False
    if is_float:
        wide = [np.abs(v.astype(np.float64)) for v in (a, b, c)]
        with np.errstate(all="ignore"):
            scale = wide[0] + wide[1] + wide[2] + np.abs(left.astype(np.float64)) + \
                np.abs(right.astype(np.float64))
        scale = np.nan_to_num(scale, nan=0.0, posinf=np.inf)
        commute_scale = wide[0] + wide[1] + np.abs(ab.astype(np.float64))
    else:
        scale = commute_scale = np.zeros(a.shape)
    return _agree(left, right, scale, dtype, is_float) and \
        _agree(ab, ba, commute_scale, dtype, is_float)


def acts_as_identity(module: Module, computation: Computation, init) -> bool:
    """True when the scalar ``init`` is an identity of the reducer ``computation`` on
    sampled values: ``r(init, x)`` and ``r(x, init)`` give ``x`` up to the rounding
    ``reorder_free`` allows (``logaddexp``'s is -inf, not 0). A reducer that cannot be
    evaluated this way (``reorder_checkable`` is False), or an init that is not one
    scalar of its type, gives True: not known to be wrong."""
    et = _scalar_type(computation)
    value = np.asarray(init)
    if et is None or value.size != 1:
        return True
    dtype = np.dtype(et.dtype)
    x = _samples(dtype, et.is_float, 4)
    e = np.full(x.shape, value.reshape(()), dtype)
    r = _applied(module, computation, dtype)
    try:
        with np.errstate(all="ignore"):
            left, right = r(e, x), r(x, e)
    except Exception:  # noqa: BLE001 - cannot run on arrays: not known to be wrong
        return True
    if left.shape != x.shape or right.shape != x.shape:
        return True
    scale = np.abs(x.astype(np.float64)) if et.is_float else np.zeros(x.shape)
    return _agree(left, x, scale, dtype, et.is_float) and \
        _agree(right, x, scale, dtype, et.is_float)
