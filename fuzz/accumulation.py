"""How far a reordered accumulation may move: the envelope's budgets for sums.

A reduce, dot, convolution, reduce-window, scatter or accumulating collective with an
add (or multiply) combiner may sum in any order: the budget is
``sqrt(n) * eps * sum|terms|`` plus one ULP (``sum_budget``); a written reducer that is
free up to rounding gets the gap between two orders (``order_budget``); batch norm,
cholesky and triangular-solve their expansion bounds (``error_bounds``). The nominal
run computes each budget once (``accumulation_budget``); perturbed runs reuse it.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from hloref.ir import Instruction, Module
from hloref.op_properties import opcodes_with
from hloref.shapes import ArrayShape
from hloref.types import ElementType

from .compare import smallest_normal
from .error_bounds import EXPANDED_OPS, expander_atol, lapack_atol
from .freedoms import Freedoms
from .reducers import reorder_free
from .rounding import eps_of, float_type, is_narrow, magnitude, to_f64, ulp_at

__all__ = ["PAIRWISE", "REORDERED", "COMMUNICATING", "MAX_FOLD_TERMS", "combiner_kinds",
           "reordered_combiner", "group_size", "terms", "accumulation_budget", "order_budget",
           "sum_budget", "flushed_terms", "in_f32", "expansion_budget"]

#: Accumulations through a written combiner: free only with an add or multiply one.
_COMBINER_ACCUMULATING = opcodes_with("combiner-accumulating")

#: Products summed in f32 when the operands are narrower (dot, convolution...).
_F32_PRODUCT_SUM = opcodes_with("f32-product-sum")


#: Combiners associative and commutative on their own pair of scalars (op_properties).
PAIRWISE = opcodes_with("pairwise-combiner")


def combiner_kinds(module: Module, instr: Instruction) -> tuple[str | None, ...] | None:
    """Per output of ``instr``'s applied computation (to_apply / scatter): the opcode
    when that output is ``op(x_j, y_j)`` of one pair of scalar parameters (for n
    outputs, parameters j and n + j; usually j = i), else ``None``; ``None`` overall when the
    computation is not a reducer. A variadic reducer such as ``(x1 + y1, max(x2, y2))``
    gives ``("add", "maximum")``: its sum may be taken in any order like a single one."""
    from hloref.evaluator.reduce import simple_reducer
    ref = instr.attrs.get("to_apply")
    if ref is None or str(ref) not in module.computations:
        return None
    comp = module.computations[str(ref)]
    single = simple_reducer(comp)
    if single is not None:
        return (single,)
    root, params = comp.root, comp.parameters
    if root is None or root.opcode != "tuple" or len(params) != 2 * len(root.operands):
        return None
    n = len(root.operands)
    pairs = [{params[j].name, params[n + j].name} for j in range(n)]
    kinds: list[str | None] = []
    for out in root.operands:
        # op(x_j, y_j) of any one pair: output i may repeat another output's combination
        # (``tuple(add.0, add.0)``), which is then reordered like it
        ok = out.opcode in PAIRWISE and len(out.operands) == 2 and \
            {o.name for o in out.operands} in pairs and \
            all(isinstance(o.shape, ArrayShape) and o.shape.rank == 0 for o in out.operands)
        kinds.append(out.opcode if ok else None)
    return tuple(kinds)


#: Reduced elements per result up to which the envelope folds a written reducer from
#: the left beside hloref's tree (one vectorised application per element: see
#: ``order_budget``); longer reductions get no order budget.
MAX_FOLD_TERMS = 4096


#: Combiners whose order of application is free and rounds (op_properties).
REORDERED = opcodes_with("reordered-combiner")

#: Accumulating collectives (op_properties: another rendezvous if evaluated again).
COMMUNICATING = opcodes_with("communicating")


def reordered_combiner(module: Module, instr: Instruction) -> bool:
    """Whether ``instr``'s applied computation adds or multiplies (in some output)."""
    return bool(REORDERED & set(combiner_kinds(module, instr) or ()))


def group_size(instr: Instruction, module: Module | None) -> int:
    """Participants of an accumulating collective (an upper bound where the group mode
    multiplies replicas by partitions): its first replica group, else every device."""
    rg = instr.attrs.get("replica_groups")
    groups = getattr(rg, "groups", None) or ()
    if groups:
        return max(1, len(groups[0]))
    return max(1, module.replica_count * module.num_partitions) if module is not None else 1


def terms(instr: Instruction, operands: list, value: np.ndarray,
          module: Module | None = None) -> int:
    """How many terms each result element sums."""
    op = instr.opcode
    try:
        if op == "dot":
            lhs = operands[0]
            dims = instr.attrs.get("lhs_contracting_dims") or ()
            return max(1, int(np.prod([lhs.shape[int(d)] for d in dims])))
        if op == "convolution":
            rhs = operands[1]
            dn = instr.attrs.get("dim_labels")
            out_f = rhs.shape[dn.kernel_output_feature_dimension]
            return max(1, rhs.size // max(1, out_f))
        if op in COMMUNICATING:
            return group_size(instr, module)
        if op == "reduce":
            return max(1, operands[0].size // max(1, value.size))
        if op == "reduce-window":
            window = instr.attrs.get("window")
            return max(1, int(np.prod([d.size for d in window.dims]))) if window else 1
        if op == "fft":
            return max(1, int(np.prod(value.shape[-len(instr.attrs.get("fft_length") or [1]):])))
    except Exception:  # noqa: BLE001 - fall back to a size ratio
        pass
    biggest = max((o.size for o in operands if isinstance(o, np.ndarray)), default=1)
    return max(1, biggest // max(1, value.size))


def accumulation_budget(module: Module, freedoms: Freedoms, instr: Instruction, operands: list,
                        value, recompute):
    """Per-element half-width of the reordering error, or ``None`` (exact)."""
    op = instr.opcode
    if not freedoms.accumulation:
        return None
    if op in EXPANDED_OPS:
        return expansion_budget(instr, operands, value)
    if op == "custom-call":
        return lapack_atol(instr, operands, value)
    if op in ("reduce", "reduce-window") and combiner_kinds(module, instr) is None:
        return order_budget(module, instr, operands, value, recompute)
    if op in _COMBINER_ACCUMULATING and not reordered_combiner(module, instr):
        return None  # max/min/and/or combiners are exact; others are combiners' business
    if isinstance(value, tuple):
        # a variadic reduce: each output combined by its own add or multiply may
        # be reordered
        kinds = combiner_kinds(module, instr)
        if op not in ("reduce", "reduce-window") or kinds is None or \
                len(kinds) != len(value):
            return None
        try:
            mags = recompute(*[magnitude(o) for o in operands])
        except Exception:  # noqa: BLE001 - a budget is best effort
            return None
        return tuple(
            sum_budget(instr, operands, leaf, np.abs(to_f64(np.asarray(mag))),
                       ftz=freedoms.ftz)
            if kind in REORDERED and float_type(leaf) is not None else None
            for kind, leaf, mag in zip(kinds, value, mags))
    et = float_type(value)
    if et is None:
        return None
    try:
        if op == "fft":
            total = float(np.sum(np.abs(operands[0].astype(np.complex128))))
            mag = np.full(value.shape, total)
        elif op in COMMUNICATING:
            # Σ|terms| over the group: the collective again on |operand|. Only budgets
            # of the nominal run are computed (perturbed runs reuse them), and every
            # device computes its own there, so all of them join this rendezvous.
            mag = np.abs(to_f64(np.asarray(recompute(magnitude(operands[0])))))
        else:
            abs_ops = [magnitude(o) for o in operands]
            mag = in_f32(instr, abs_ops, recompute) if is_narrow(et) else None
            if mag is None:  # (a narrow result type would round, even overflow, it)
                mag = recompute(*abs_ops)
            mag = np.abs(to_f64(np.asarray(mag)))
    except Exception:  # noqa: BLE001 - a budget is best effort
        return None
    return sum_budget(instr, operands, value, mag, module, ftz=freedoms.ftz)


def order_budget(module: Module, instr: Instruction, operands: list, value, recompute):
    """A written reducer (not one op of its parameters) that is associative and
    commutative up to rounding (``reducers.reorder_free``: ``logaddexp``, ``hypot``)
    may be applied in any order, as the semantics allow: the same op folded from the
    left (``reducer_order="left"``, XLA's loop order) gives the other end (for a reducer
    hloref cannot vectorize, which it folds from the left already, a reduce folded over
    its reversed dimensions: XLA may simplify such a reducer, e.g. ``add(a, add(0, b))``,
    and reorder it); the budget
    is twice their difference plus sqrt(n)·4 ULPs of the value where they differ
    anywhere (the roundings of the n applications). ``None`` when both orders agree
    bit for bit (an exact reducer, e.g. an argmax) or the reducer is not free."""
    from hloref.evaluator.reduce import is_vectorizable
    ref = instr.attrs.get("to_apply")
    comp = module.computations.get(str(ref)) if ref is not None else None
    et = float_type(value)
    if comp is None or et is None or isinstance(value, tuple):
        return None
    n = terms(instr, operands, value, module)
    if n > MAX_FOLD_TERMS or not reorder_free(module, comp):
        return None
    try:
        if is_vectorizable(comp, module):
            other = np.asarray(recompute(*operands, reducer_order="left"))
        elif instr.opcode == "reduce" and len(operands) == 2:
            # hloref folds this reducer left to right already: the other end is the
            # right-to-left fold, the same fold over the reversed reduced dimensions
            dims = tuple(instr.attrs.get("dimensions") or ())
            other = np.asarray(recompute(np.flip(operands[0], axis=dims), operands[1]))
        else:
            return None
    except Exception:  # noqa: BLE001 - a budget is best effort
        return None
    if other.shape != value.shape:
        return None
    nominal, alt = to_f64(value), to_f64(other)
    with np.errstate(all="ignore"):
        gap = np.abs(nominal - alt)
    gap = np.where(np.isnan(nominal) & np.isnan(alt), 0.0, gap)
    if not np.any(gap):
        return None
    with np.errstate(all="ignore"):
        budget = 2.0 * gap + 4.0 * math.sqrt(n) * ulp_at(value, et)
    return np.nan_to_num(budget, nan=np.inf, posinf=np.inf)


def sum_budget(instr: Instruction, operands: list, value, mag, module: Module | None = None,
               *, ftz: bool = False):
    """sqrt(n)·eps·Σ|terms| + 1 ULP for ``value``, given Σ|terms| (``mag``; for a
    product, the op on the magnitudes is Π|factors| = |value|: a relative error of
    sqrt(n)·eps, the reordered product's); with ``ftz``, plus n smallest normals of
    the type the terms are computed in (``flushed_terms``)."""
    op = instr.opcode
    et = float_type(value)
    n = terms(instr, operands, value, module)
    # dot and convolution of narrow floats accumulate in f32 (XLA:CPU and XLA:GPU
    # both do); a reduce's partial sums may be rounded to its reducer's type
    eps = eps_of(et) if op not in _F32_PRODUCT_SUM else min(eps_of(et), 2.0 ** -23)
    with np.errstate(all="ignore"):
        budget = math.sqrt(n) * eps * mag + ulp_at(value, et)
        if ftz:
            budget = budget + flushed_terms(n, et)
    return np.nan_to_num(budget, nan=np.inf, posinf=np.inf)


def flushed_terms(n_terms: int, et: ElementType) -> float:
    """How far XLA:CPU's flush to zero may move a sum of ``n_terms`` terms: each term
    (a product of a dot or convolution, a summand) that is subnormal where it is
    computed, f32 for the narrow floats, f32 or f64 otherwise, may be flushed to zero,
    and each is below that type's smallest normal (a campaign, seed 71: a convolution's
    -3.7e-38 result moved by 4.5e-42; tests/test_envelope.py: a dot whose first partial
    sum, 1e-40, XLA:CPU flushes)."""
    from hloref.types import F32
    return max(n_terms, 1) * smallest_normal(F32 if is_narrow(et) else et)


def in_f32(instr, operands, recompute):
    """The op evaluated with an f32 result (its rounding to a narrow type skipped)."""
    from hloref.types import F32
    if not isinstance(instr.shape, ArrayShape):
        return None
    try:
        return np.asarray(recompute(*operands, shape=replace(instr.shape, element_type=F32)),
                          np.float32)
    except Exception:  # noqa: BLE001 - the op takes no shape: keep the rounded value
        return None


def expansion_budget(instr, operands, value):
    atol = expander_atol(instr, operands, value)
    if atol is None:
        return None
    if isinstance(value, tuple):
        return tuple(atol.get((i,)) for i in range(len(value)))
    return atol.get(())
