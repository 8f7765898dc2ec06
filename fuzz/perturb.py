"""Perturbed runs: one instruction at a time, within the freedoms XLA takes.

(Over 600 lines on purpose: one concept, how each class of instruction may move,
whose rules read each other's tables; the freedoms are in ``freedoms.py``, the
envelope built from the runs in ``envelope.py``.)

Method: stochastic arithmetic, as CESTAC/CADNA and Verificarlo do it. The module is
evaluated once as written (the *nominal* run: hloref's correctly rounded value of
every op) and ``samples`` more times with every floating-point result perturbed
within its freedom (``Perturber``), each instruction following a balanced schedule
over the runs (directed up, directed down, independent per element: ``_mode``):

* ``rounding``: an add, subtract, multiply, divide, sqrt or narrowing convert whose
  exact result is not representable is rounded up or down at random (CESTAC random
  rounding); an exact result stays exact (so integer-valued floats, masks, ``x * 1``
  and ``x / 2`` never blur). To first order this covers reassociation of elementwise
  chains, FMA contraction and rewrites such as ``x / c`` → ``x * (1 / c)``.
* ``excess_precision`` (XLA's ``xla_allow_excess_precision``, on by default): the
  rounding of an arithmetic result to a float of 16 bits or fewer may go either way
  or be skipped (the value kept in f32). Off: narrow results are rounded as written.
  Explicit ``convert`` instructions round as written unless ``elide_converts``.
* ``math_budgets``: a transcendental result gets a uniform random error within XLA's
  accuracy budget for the op (``compare.OPCODE_ULPS``, from XLA's
  ``accuracy_budget.h``).
* ``accumulation``: reduce, dot, convolution, reduce-window and scatter with an add
  combiner may sum in any order: a uniform random error within
  ``sqrt(n) * eps * sum|terms|`` (the magnitude of a reordered sum's rounding error;
  the rigorous ``2 n eps sum|terms|`` is kept for one instruction in isolation);
  batch norm, cholesky and triangular-solve get their expansion bounds.
* ``ftz``: XLA:CPU flushes subnormals (jaxlib's CPU client runs with the FTZ and
  DAZ bits set; constant folding does not): a value within the smallest normal of zero
  matches zero, and in about half of the runs an arithmetic instruction reads a
  subnormal f32/f64/bf16 operand as zero (so ``x == 0``, ``sign(x)`` or ``1 / x``
  of a subnormal ``x`` may go either way).

Everything else (loops, calls, fusions, discontinuities) propagates for free: a
``compare`` that flips in some samples puts both outcomes in the envelope; an
integer result that differs between samples is allowed its sampled range.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field, replace

import ml_dtypes
import numpy as np

from hloref.ir import Computation, Instruction, Module
from hloref.opcodes import ACCUMULATING
from hloref.shapes import ArrayShape
from hloref.types import ElementType, from_dtype

from .compare import NARROW_OPCODE_ULPS, OPCODE_ULPS, smallest_normal, ulp_of
from .error_bounds import (COMPLEX_FORMULA_OPS, EXPANDED_OPS, complex_formula_atol, expander_atol,
                           is_single_precision_lapack, lapack_atol)
from .freedoms import EnvelopePolicy, Freedoms
from .reducers import reorder_free
from .rewrites import RewriteRun

__all__ = ["Perturber", "Sampled", "sample", "sample_program", "RunHooks",
           "program_computations", "combiner_kinds",
           "float_type", "ulp_at", "is_narrow", "flushed_terms"]


# ---------------------------------------------------------------- op classes

#: Results computed exactly from their operands (or moved unchanged): never perturbed.
_EXACT = frozenset({
    "parameter", "constant", "tuple", "get-tuple-element", "bitcast", "reshape", "transpose",
    "broadcast", "slice", "dynamic-slice", "dynamic-update-slice", "concatenate", "pad",
    "reverse", "copy", "copy-start", "copy-done", "gather", "select", "clamp", "maximum",
    "minimum", "negate", "abs", "compare", "iota", "sort", "topk", "floor", "ceil",
    "round-nearest-afz", "round-nearest-even", "sign", "is-finite", "real", "imag", "complex",
    "bitcast-convert", "reduce-precision", "remainder", "while", "call", "fusion",
    "conditional", "async-start", "async-done", "async-update", "opt-barrier", "domain",
    "after-all", "add-dependency", "get-dimension-size", "set-dimension-size",
    "dynamic-reshape", "rng", "rng-bit-generator", "rng-get-and-update-state", "infeed",
    "outfeed", "send", "send-done", "recv", "recv-done", "partition-id", "replica-id",
    "collective-permute", "collective-permute-start", "collective-permute-done",
    "all-gather", "all-gather-start", "all-gather-done", "all-to-all", "ragged-all-to-all",
    "shuffle", "select-and-scatter", "map", "stochastic-convert",
})

#: XLA:CPU's accuracy budget for the modulus of a complex value (``abs``), in ULPs of
#: the result: measured up to 1.84 on jaxlib 0.10.2 (tests/test_envelope.py)
COMPLEX_ABS_ULPS = 2.0

#: Ops exact in every type but f8e8m0fnu, which has neither zero nor sign: there their
#: f32 value (0, a negative, a NaN's image) is not representable, and XLA's float
#: normalization may keep it under excess precision (name -> the exact f64 function).
_E8M0_INEXACT = {
    "remainder": np.fmod, "negate": np.negative, "floor": np.floor, "ceil": np.ceil,
    "round-nearest-even": np.rint,
    "round-nearest-afz": lambda x: np.copysign(np.floor(np.abs(x) + 0.5), x),
}

#: Opcodes of ``_EXACT`` that some types make inexact (``Perturber._inexact_in_type``).
_INEXACT_IN_SOME_TYPES = frozenset({"abs"}) | frozenset(_E8M0_INEXACT)

#: Accumulating collectives: evaluating one again is another rendezvous with the other
#: devices, which only the devices whose run chose to recompute would join.
_COMMUNICATING = frozenset({"all-reduce", "all-reduce-start", "reduce-scatter",
                            "collective-reduce"})

#: Consumers that read a value arithmetically (through its numeric value, in f32 or
#: wider), so a narrow operand kept unrounded in f32 means to them what excess
#: precision means to XLA; bit-level and structural users get the rounded value.
_ARITHMETIC_USERS = frozenset({
    "add", "subtract", "multiply", "divide", "sqrt", "rsqrt", "cbrt", "exponential",
    "exponential-minus-one", "log", "log-plus-one", "tanh", "logistic", "sine", "cosine", "tan",
    "atan2", "power", "maximum", "minimum", "negate", "abs", "compare", "convert", "dot",
    "convolution", "erf", "sinh", "cosh", "asin", "acos", "atan", "asinh", "acosh", "atanh",
    # float normalization computes a narrow reduce in f32 too, reading its inputs' f32
    # values where a convert pair was removed (an f8e8m0fnu acosh read by a convert and a
    # min/max reduce: XLA's convert saw 6.93, the e8m0 value is 8; a campaign, seed 23)
    "reduce", "reduce-window",
})

#: Results an exact wider computation can check: random rounding where inexact.
_ROUNDED = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "sqrt": np.sqrt,
}

def _logistic(x):
    return 0.5 * (1 + np.tanh(0.5 * x))


#: f64 references of the transcendental ops, for narrow floats (rounded from f32).
_MATH_F64 = {
    "exponential": np.exp, "exponential-minus-one": np.expm1, "log": np.log,
    "log-plus-one": np.log1p, "tanh": np.tanh, "logistic": _logistic, "sine": np.sin,
    "cosine": np.cos, "tan": np.tan, "atan": np.arctan, "atan2": np.arctan2, "cbrt": np.cbrt,
    "rsqrt": lambda x: 1 / np.sqrt(x), "power": np.power, "sinh": np.sinh, "cosh": np.cosh,
    "asin": np.arcsin, "acos": np.arccos, "asinh": np.arcsinh, "acosh": np.arccosh,
    "atanh": np.arctanh,
}

#: Ops whose sum order is free (with an add combiner): the catalogue's accumulating
#: group, less select-and-scatter (its select picks positions by the operand's values,
#: so the budget's run on magnitudes would pick other ones).
_ACCUMULATING = ACCUMULATING - {"select-and-scatter"}


#: Called computations whose instructions are program steps (perturbed); computations
#: applied by reduce, scatter, sort, map... are combiners, not steps.
_CONTROL_ATTRS = {"call": ("to_apply",), "fusion": ("calls",), "while": ("condition", "body"),
                  "scan": ("to_apply",),  # XLA:CPU runs it as a while loop: per-step arithmetic
                  # XLA's MapInliner inlines a map's computation into elementwise ops
                  "map": ("to_apply",),
                  "conditional": ("branch_computations", "true_computation",
                                  "false_computation"), "async-start": ("calls",)}


def program_computations(module: Module) -> frozenset[str]:
    """Names of the entry and the computations it reaches through control flow."""
    seen: set[str] = set()
    stack = [module.entry]
    while stack:
        comp = stack.pop()
        if comp.name in seen:
            continue
        seen.add(comp.name)
        for instr in comp.instructions:
            for attr in _CONTROL_ATTRS.get(instr.opcode, ()):
                ref = instr.attrs.get(attr)
                refs = ref if isinstance(ref, (list, tuple)) else [ref]
                for r in refs:
                    if r is not None and str(r) in module.computations:
                        stack.append(module.computations[str(r)])
    return frozenset(seen)


def float_type(value) -> ElementType | None:
    if not isinstance(value, np.ndarray):
        return None
    try:
        et = from_dtype(value.dtype)
    except Exception:  # noqa: BLE001 - not an HLO element type
        return None
    return et if (et.is_float or et.is_complex) else None


def _eps(et: ElementType) -> float:
    if et.is_complex:
        return 2.0 ** -(23 if et.name == "c64" else 52)
    return 2.0 ** -et.float_format.mantissa_bits


def _part_type(et: ElementType) -> ElementType:
    return from_dtype(np.float32 if et.name == "c64" else np.float64) if et.is_complex else et


def is_narrow(et: ElementType) -> bool:
    return et.is_float and et.bits <= 16


#: Combiners that are associative and commutative on their own pair of scalars.
_PAIRWISE = frozenset({"add", "multiply", "maximum", "minimum", "and", "or", "xor"})


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
        ok = out.opcode in _PAIRWISE and len(out.operands) == 2 and \
            {o.name for o in out.operands} in pairs and \
            all(isinstance(o.shape, ArrayShape) and o.shape.rank == 0 for o in out.operands)
        kinds.append(out.opcode if ok else None)
    return tuple(kinds)


#: Reduced elements per result up to which the envelope folds a written reducer from
#: the left beside hloref's tree (one vectorised application per element: see
#: ``Perturber._order_budget``); longer reductions get no order budget.
_MAX_FOLD_TERMS = 4096


#: Combiners whose order of application is free and rounds: a sum's terms, a
#: product's factors (XLA:CPU reassociates both; max/min/and/or/xor are exact).
_REORDERED = frozenset({"add", "multiply"})


def _reordered_combiner(module: Module, instr: Instruction) -> bool:
    """Whether ``instr``'s applied computation adds or multiplies (in some output)."""
    return bool(_REORDERED & set(combiner_kinds(module, instr) or ()))


def _group_size(instr: Instruction, module: Module | None) -> int:
    """Participants of an accumulating collective (an upper bound where the group mode
    multiplies replicas by partitions): its first replica group, else every device."""
    rg = instr.attrs.get("replica_groups")
    groups = getattr(rg, "groups", None) or ()
    if groups:
        return max(1, len(groups[0]))
    return max(1, module.replica_count * module.num_partitions) if module is not None else 1


def _terms(instr: Instruction, operands: list, value: np.ndarray,
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
        if op in ("all-reduce", "all-reduce-start", "reduce-scatter", "collective-reduce"):
            return _group_size(instr, module)
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


#: Arithmetic that XLA:CPU's DAZ bit lets read a subnormal operand as zero (data
#: movement, control flow and accumulations are left out: the terms of a sum XLA may
#: flush are in the accumulation budget, ``flushed_terms``).
_DAZ_READERS = frozenset({
    "add", "subtract", "multiply", "divide", "remainder", "power", "atan2", "compare",
    "sign", "floor", "ceil", "round-nearest-afz", "round-nearest-even", "maximum",
    "minimum", "clamp", "sqrt", "rsqrt", "cbrt", "log", "log-plus-one", "exponential",
    "exponential-minus-one", "tanh", "logistic", "sine", "cosine", "tan", "atan", "erf",
    "sinh", "cosh", "asin", "acos", "asinh", "acosh", "atanh", "convert"})

#: The smallest normal of each type whose subnormals are subnormal in f32 or f64
#: (f16's and the f8s' are normal f32 values when XLA:CPU computes them: not flushed).
_DAZ_TINY = {np.dtype(dt): smallest_normal(from_dtype(np.dtype(dt)))
             for dt in (np.float32, np.float64, ml_dtypes.bfloat16, np.complex64, np.complex128)}


def _flush_subnormals(x):
    """``x`` with its subnormal elements (parts) replaced by a zero of the same sign,
    or ``x`` itself (the same object) when it has none."""
    tiny = _DAZ_TINY.get(getattr(x, "dtype", None))
    if tiny is None or x.size == 0:
        return x
    if x.dtype.kind == "c":
        re, im = x.real.copy(), x.imag.copy()
        fre, fim = _flush_subnormals(re), _flush_subnormals(im)
        if fre is re and fim is im:
            return x
        out = np.empty_like(x)
        out.real, out.imag = fre, fim
        return out
    mag = np.abs(x.astype(np.float64) if x.dtype == ml_dtypes.bfloat16 else x)
    sub = (mag < tiny) & (mag > 0)
    if not sub.any():
        return x
    zeros = np.where(np.signbit(x.astype(np.float64) if x.dtype == ml_dtypes.bfloat16 else x),
                     -0.0, 0.0).astype(x.dtype)
    return np.where(sub, zeros, x)


def _ulp_of_value(x):
    """The spacing of ``x``'s float (or complex part) type at each element; 0 for others."""
    et = float_type(x)
    return ulp_at(x, et) if et is not None else np.zeros(np.shape(x))


def _magnitude(x):
    if isinstance(x, tuple):
        return tuple(_magnitude(v) for v in x)
    if not isinstance(x, np.ndarray) or x.dtype.kind in "biu" or x.dtype == np.bool_:
        return x
    if x.dtype.kind == "c":
        return np.abs(x).astype(x.dtype)
    with np.errstate(all="ignore"):
        return np.abs(x.astype(np.float64)).astype(x.dtype)


def _to_f64(x: np.ndarray) -> np.ndarray:
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


# ---------------------------------------------------------------- perturbation


class Perturber:
    """The ``perturb`` hook of ``Interpreter``: one run's random perturbations.

    With ``rng=None`` it perturbs nothing and only records each accumulation's error
    budget (the nominal run); a sampling run reuses the recorded budgets (keyed by
    instruction and occurrence, so loop iterations line up) instead of evaluating
    the op again on the operands' magnitudes."""

    def __init__(self, module: Module, freedoms: Freedoms, rng: np.random.Generator | None,
                 budgets: dict | None = None, schedule: tuple | None = None,
                 shared: dict | None = None):
        self.module = module
        #: what a sampling's runs share: ``"peak"`` (written by the nominal run: the
        #: largest finite magnitude an accumulation reached, as a fraction of its type's
        #: largest finite value) and each computation's DAZ plans (``_daz_plans``)
        self.shared = shared if shared is not None else {}
        self.freedoms = freedoms
        self.rng = rng
        self.budgets = budgets if budgets is not None else {}
        self.program = program_computations(module)
        self._seen: dict = defaultdict(int)
        self._modes: dict = {}
        self._skippable: dict[str, frozenset] = {}
        #: (envelope seed, this run's index, number of runs): the balanced schedule
        self.schedule = schedule
        #: this run's f32 multiply operands by (computation, instruction): an add or
        #: subtract using the product may contract it into an FMA (``_contracted``)
        self._factors: dict = {}
        #: this run's f32 values of narrow results rounded for their structural users
        #: that an arithmetic user may read unrounded (``_unrounded_operands``)
        self._unrounded: dict = {}
        #: XLA's algebraic rewrites this run takes (``rewrites.py``; perturbed runs only)
        self.rewrites = RewriteRun(module, schedule or (0, 0, 2), self.shared,
                                   flush=_flush_subnormals if freedoms.ftz else None,
                                   ulp=_ulp_of_value) \
            if rng is not None and freedoms.rewrites else None

    def __call__(self, comp: Computation, instr: Instruction, operands: list, value, recompute):
        if comp.name not in self.program:
            return value
        rewritten = self.rewrites.value(comp, instr, operands, value) \
            if self.rewrites is not None else None
        perturbed = self._perturbed(comp, instr, operands, value, recompute)
        if rewritten is None:
            return perturbed
        return self.rewrites.merge(comp, instr, value, perturbed, rewritten)

    def _record_peak(self, value) -> None:
        """Keep the largest finite magnitude, relative to its type's largest finite value,
        that an accumulation of the program reached in the nominal run (a sum an order
        the runs did not take may overflow; elementwise values and constants, a mask's
        -3.4e38 in attention, do not count)."""
        for leaf in (value if isinstance(value, tuple) else (value,)):
            et = float_type(leaf) if isinstance(leaf, np.ndarray) and leaf.size else None
            if et is None:
                continue
            wide = leaf if leaf.dtype.kind in "fc" else _to_f64(leaf)
            with np.errstate(all="ignore"):
                mag = np.max(np.abs(wide), where=np.isfinite(wide), initial=0.0)
            ratio = float(mag) / float(ml_dtypes.finfo(_part_type(et).dtype).max)
            if ratio > self.shared.get("peak", 0.0):
                self.shared["peak"] = ratio

    def _perturbed(self, comp: Computation, instr: Instruction, operands: list, value, recompute):
        if self.rng is not None and self.freedoms.ftz and instr.opcode in _DAZ_READERS \
                and self._daz(comp, instr):
            flushed = [_flush_subnormals(o) for o in operands]
            if any(f is not o for f, o in zip(flushed, operands)):
                operands = flushed
                value = recompute(*operands)
        if self.rng is not None and self._unrounded and instr.opcode in _ARITHMETIC_USERS:
            wide = self._unrounded_operands(comp, instr, operands)
            if wide is not None:
                try:
                    value, operands = recompute(*wide), wide
                except Exception:  # an op that does not take the wider operand: as read
                    pass
        if self.rng is not None and instr.opcode in _INEXACT_IN_SOME_TYPES:
            perturbed = self._inexact_in_type(comp, instr, operands, value)
            if perturbed is not None:
                return perturbed
        if instr.opcode in _EXACT:
            return value
        op = instr.opcode
        if op in _ACCUMULATING or op in EXPANDED_OPS or is_single_precision_lapack(instr):
            key = (comp.name, instr.name, self._seen[(comp.name, instr.name)])
            self._seen[(comp.name, instr.name)] += 1
            budget = self.budgets.get(key)
            if budget is None or not _same_structure(budget, value):
                budget = self._accumulation_budget(instr, operands, value, recompute)
                self.budgets[key] = budget
            if self.rng is None and budget is not None:
                self._record_peak(value)
            if self.rng is None or budget is None:
                return value
            mode = self._mode(comp, instr)
            et = float_type(value)
            if op in ("reduce", "reduce-window") and et is not None and is_narrow(et) and \
                    self._left_fold(comp, instr):
                try:  # the reducer as written, folded from the left: each step rounded
                    return np.asarray(recompute(*operands, reducer_order="left"))
                except Exception:  # noqa: BLE001 - an alternative is best effort
                    pass
            if et is not None and is_narrow(et) and self.freedoms.excess_precision and \
                    op not in _COMMUNICATING and \
                    instr.name in self._skippable_names(comp) and self._skip(comp, instr):
                # excess precision: the narrow rounding of the sum skipped (kept in f32)
                wide = _in_f32(instr, operands, recompute)
                if wide is not None:
                    return self._uniform(wide, ulp_at(value, et) + budget - ulp_at(value, et), mode)
            return _map_leaves(lambda v, b: self._uniform(v, b, mode), value, budget)
        if self.rng is None or isinstance(value, tuple):
            return value
        et = float_type(value)
        if et is None:
            return value
        if op == "convert":
            src = float_type(operands[0]) if operands else None
            if src is None or src.is_complex or et.is_complex or \
                    src.float_format.mantissa_bits <= et.float_format.mantissa_bits:
                return value  # widening, or from an integer: exact
            if not (is_narrow(et) and self.freedoms.excess_precision and
                    self.freedoms.elide_converts):
                return value  # a narrowing convert rounds to nearest, as written
            return self._narrow_result(comp, instr, lambda x: x, operands, value, et)
        if op in _ROUNDED and not et.is_complex:
            if op == "multiply" and value.dtype == np.float32 and self.freedoms.rounding \
                    and instr.name in self._fma_sources(comp):
                self._factors[(comp.name, instr.name)] = (operands[0], operands[1])
            elif op in ("add", "subtract") and value.dtype == np.float32 and \
                    self.freedoms.rounding:
                fused = self._contracted(comp, instr, operands, value)
                if fused is not None:
                    return fused
            if is_narrow(et):
                if not self.freedoms.excess_precision:
                    return value
                return self._narrow_result(comp, instr, _ROUNDED[op], operands, value, et)
            if not self.freedoms.rounding:
                return value
            return self._random_rounding(_ROUNDED[op], operands, value, et,
                                         self._mode(comp, instr))
        if op in OPCODE_ULPS:
            if not self.freedoms.math_budgets:
                return value
            if is_narrow(et) and op in _MATH_F64:
                # computed in f32 (a few f32 ULPs, far below one narrow ULP) and rounded:
                # either neighbour of the exact value, never further
                if self.freedoms.excess_precision:
                    return self._narrow_result(comp, instr, _MATH_F64[op], operands, value, et)
                return self._random_rounding(_MATH_F64[op], operands, value, et,
                                             self._mode(comp, instr))
            ulps = OPCODE_ULPS[op]
            if et.is_narrow_float:
                ulps = min(ulps, NARROW_OPCODE_ULPS)
        else:  # complex arithmetic, custom calls, anything else that rounds once
            if not self.freedoms.rounding or (is_narrow(et) and not self.freedoms.excess_precision):
                return value
            ulps = 1.0
        if et.is_complex and op in COMPLEX_FORMULA_OPS:
            budget = complex_formula_atol(op, operands, et)
            if budget is not None:
                return self._uniform(value, np.nan_to_num(budget, nan=np.inf),
                                     self._mode(comp, instr))
        return self._uniform(value, ulps * ulp_at(value, et), self._mode(comp, instr))

    def _inexact_in_type(self, comp, instr, operands, value):
        """A perturbed result of an op ``_EXACT`` lists, for the types where it is not
        exact, else None: a complex modulus (``abs``: sqrt(re² + im²) rounded, XLA:CPU's
        up to 1.84 ULP off, ``COMPLEX_ABS_ULPS``) and f8e8m0fnu's ``_E8M0_INEXACT`` ops
        (no zero, no sign: fmod(8, 8) = 0 and -1024 are NaN there, while XLA's f32 value
        may be kept under excess precision)."""
        et = float_type(value)
        if et is None:
            return None
        if instr.opcode == "abs" and self.freedoms.math_budgets and operands and \
                np.iscomplexobj(operands[0]):
            return self._uniform(value, COMPLEX_ABS_ULPS * ulp_at(value, et),
                                 self._mode(comp, instr))
        if et.name == "f8e8m0fnu" and instr.opcode in _E8M0_INEXACT and \
                self.freedoms.excess_precision:
            return self._narrow_result(comp, instr, _E8M0_INEXACT[instr.opcode], operands,
                                       value, et)
        return None

    def _narrow_result(self, comp, instr, fn, operands, value, et):
        """Excess precision: a narrow float result whose users all read it
        arithmetically may keep its f32 value (the rounding skipped, as XLA's float
        normalization does when it removes a convert pair), in half the runs; else
        random rounding."""
        if instr.name in self._skippable_names(comp) and self._skip(comp, instr):
            with np.errstate(all="ignore"):
                exact = fn(*[np.asarray(o).astype(np.float64) for o in operands])
            return np.asarray(exact, np.float64).astype(np.float32)
        if instr.name in self._mixed_names(comp):
            with np.errstate(all="ignore"):
                exact = fn(*[np.asarray(o).astype(np.float64) for o in operands])
                self._unrounded[(comp.name, instr.name)] = np.asarray(
                    exact, np.float64).astype(np.float32)
        return self._random_rounding(fn, operands, value, et, self._mode(comp, instr))

    def _left_fold(self, comp, instr) -> bool:
        """Whether this run evaluates a narrow float reduction as XLA:CPU's loop does it:
        the written reducer folded from the left, each step rounded to the type (in half
        the runs, the undirected ones). The sampled budget around the wide sum covers its
        magnitude but, through a float-to-integer convert, almost never its exact value
        (a campaign, seed 89: 48 f8e5m2 values summing to -0.047, folded to 1 by
        XLA:CPU and by hand, then convert and shift-left)."""
        return self._coin("left", comp, instr)

    def _mixed_names(self, comp) -> frozenset:
        """Narrow results some of whose users read them arithmetically and some not (a
        transpose, a tuple, the root): ``_narrow_result`` rounds them for all, and
        ``_unrounded_operands`` may give the arithmetic users the f32 value."""
        key = ("mixed", comp.name)
        names = self._modes.get(key)
        if names is None:
            users = self._users(comp)
            names = frozenset(
                i.name for i in comp.instructions
                if any(u in _ARITHMETIC_USERS for u in users[i.name])
                and (i is comp.root or not all(u in _ARITHMETIC_USERS for u in users[i.name])))
            self._modes[key] = names
        return names

    def _unrounded_operands(self, comp, instr, operands):
        """Excess precision per use: an operand whose producer rounded a narrow result it
        computes in f32, because some of its users read it structurally, reaches this
        arithmetic user unrounded in half the runs (decided per use). XLA's float
        normalization computes the producer in f32 and rounds it for the structural
        users, while for this use, with excess precision, SimplifyFPConversions removes
        the convert pair (a campaign, seed 83: an f4e2m1fn sinh of -3 is -10.02 in f32
        and -6 rounded; XLA:CPU gave its transpose -6 and its convert to f16 -10.02).
        None when no operand is read unrounded."""
        out, changed = list(operands), False
        for k, o in enumerate(instr.operands):
            wide = self._unrounded.get((comp.name, o.name))
            if wide is None or k >= len(out) or np.shape(wide) != np.shape(out[k]):
                continue
            if self._coin("use", comp, instr, k):
                out[k], changed = wide, True
        return out if changed else None

    def _users(self, comp) -> dict:
        """The opcodes of the users of each instruction of ``comp`` (by name); a user of
        no elements reads nothing (an empty slice) and is left out."""
        key = ("users", comp.name)
        users = self._modes.get(key)
        if users is None:
            users = defaultdict(list)
            for i in comp.instructions:
                if getattr(i.shape, "is_array", False) and i.shape.size == 0:
                    continue
                for o in i.operands:
                    users[o.name].append(i.opcode)
            self._modes[key] = users
        return users

    def _coin(self, kind: str, comp, instr, *more) -> bool:
        """A choice this run makes once per ``(kind, instruction, *more)``: true in half of
        its independent runs, never in a directed one (which always rounds up or down,
        else an element could go through all runs without ever moving by one narrow
        ULP, which XLA's own rounding may do)."""
        key = (kind, comp.name, instr.name) + more
        choice = self._modes.get(key)
        if choice is None:
            choice = self._mode(comp, instr) is None and bool(self.rng.random() < 0.5)
            self._modes[key] = choice
        return choice

    def _skippable_names(self, comp) -> frozenset:
        names = self._skippable.get(comp.name)
        if names is None:
            users = self._users(comp)
            names = frozenset(i.name for i in comp.instructions
                              if i is not comp.root and users[i.name]
                              and all(u in _ARITHMETIC_USERS for u in users[i.name]))
            self._skippable[comp.name] = names
        return names

    def _skip(self, comp, instr) -> bool:
        """Whether this run keeps the instruction's narrow result in f32 (``_coin``)."""
        return self._coin("skip", comp, instr)

    def _fma_sources(self, comp) -> frozenset:
        """Names of the multiplies an add or subtract of ``comp`` reads directly."""
        key = ("fma-sources", comp.name)
        names = self._modes.get(key)
        if names is None:
            names = frozenset(o.name for i in comp.instructions if i.opcode in ("add", "subtract")
                              for o in i.operands[:2] if o.opcode == "multiply")
            self._modes[key] = names
        return names

    def _contracted(self, comp, instr, operands, value):
        """FMA contraction (XLA:CPU's LLVM contracts ``a * b + c``): in half the runs an
        f32 add or subtract of a product computed in this run is evaluated as one
        rounding of the exact ``a * b ± c`` (f64 holds an f32 product exactly), the
        product's own rounding skipped; ``None`` when this run does not contract it."""
        for k, producer in enumerate(instr.operands[:2]):
            factors = self._factors.get((comp.name, producer.name))
            if producer.opcode != "multiply" or factors is None:
                continue
            key = ("fma", comp.name, instr.name)
            fuse = self._modes.get(key)
            if fuse is None:
                if self.schedule is None:
                    fuse = bool(self.rng.random() < 0.5)
                else:
                    seed, index, runs = self.schedule
                    plan = _schedule(seed, comp.name, instr.name + "\x00fma", runs)
                    fuse = plan[index % runs] is not None if runs >= 4 else bool(index % 2)
                self._modes[key] = fuse
            if not fuse:
                return None
            self._factors.pop((comp.name, producer.name), None)
            a, b = (np.asarray(f, np.float64) for f in factors)
            other = np.asarray(operands[1 - k], np.float64)
            with np.errstate(all="ignore"):
                product = a * b
                exact = product + other if instr.opcode == "add" else \
                    (product - other if k == 0 else other - product)
                out = exact.astype(np.float32)
            if out.shape != value.shape:
                return None
            return out
        return None

    def _daz(self, comp, instr) -> bool:
        """Whether this run reads ``instr``'s subnormal operands as zero (a balanced,
        shuffled schedule over the runs, like ``_mode``'s, drawn apart from it)."""
        key = ("daz", comp.name, instr.name)
        daz = self._modes.get(key)
        if daz is None:
            if self.schedule is None:
                daz = bool(self.rng.random() < 0.5)
            else:
                seed, index, runs = self.schedule
                if runs >= 4:  # the plans depend on no run: computed once per sampling
                    plans = self.shared.get(("daz", comp.name))
                    if plans is None:
                        plans = self.shared[("daz", comp.name)] = _daz_plans(seed, comp, runs)
                    daz = plans[instr.name][index % runs]
                else:
                    daz = bool(index % 2)
            self._modes[key] = daz
        return daz

    def _mode(self, comp, instr) -> float | None:
        """This run's way of erring for one instruction (the same in every loop
        iteration): ``None``, independently per element, or systematic: +1 (every
        element errs up by its whole budget; directed rounding up) or -1 (down).
        Across the runs of one envelope each instruction gets a balanced, shuffled
        schedule (a quarter up, a quarter down, half independent), so every element
        of every inexact result errs both ways in some run: with independent coin
        flips alone, some elements of a large array would by chance never move and
        their envelope would be too narrow. Systematic errors add up linearly where
        independent ones partly cancel."""
        key = (comp.name, instr.name)
        mode = self._modes.get(key, False)
        if mode is False:
            if self.schedule is None:
                mode = None if self.rng.random() < 0.5 else float(self.rng.choice((-1.0, 1.0)))
            else:
                seed, index, runs = self.schedule
                plan = _schedule(seed, comp.name, instr.name, runs)
                mode = plan[index % runs]
            self._modes[key] = mode
        return mode

    # -- the three kinds of perturbation -------------------------------------
    def _uniform(self, value, half_width, mode=None, out_dtype=None):
        """``value`` plus a uniform random error in [-half_width, half_width] (or, in a
        systematic ``mode``, that fraction of the half-width everywhere)."""
        if half_width is None or not isinstance(value, np.ndarray):
            return value
        et = float_type(value)
        if et is None:
            return value
        w = np.broadcast_to(np.asarray(half_width, np.float64), value.shape)
        with np.errstate(all="ignore"):
            if et.is_complex:
                z = value.astype(np.complex128)
                if mode is None:
                    out = z + self.rng.uniform(-1, 1, value.shape) * w + \
                        1j * self.rng.uniform(-1, 1, value.shape) * w
                else:
                    out = z + mode * w * (1 + 1j) / math.sqrt(2)
                out = np.where(np.isfinite(z), out, z)
            else:
                x = value.astype(np.float64)
                r = self.rng.uniform(-1, 1, value.shape) if mode is None else \
                    np.full(value.shape, mode)
                out = x + r * w
                big = float(ml_dtypes.finfo(value.dtype).max)
                unbounded = (w >= big) & np.isfinite(x)
                if unbounded.any():  # no correct bits: anywhere in the finite range
                    out = np.where(unbounded, np.where(r < 0, -big, big), out)
                out = np.where(np.isfinite(x), out, x)  # inf and NaN are not rounding
            if out_dtype is not None:
                return out.astype(out_dtype)
            cast = out.astype(value.dtype)
            keep = ~np.isfinite(_to_f64(cast)) & np.isfinite(_to_f64(value))
        return np.where(keep, value, cast) if np.any(keep) else cast

    def _random_rounding(self, fn, operands, value, et, mode=None):
        """CESTAC random rounding: where the exact result is not representable, take
        the neighbour on the exact result's other side with probability 1/2 (an exact
        result, a NaN or an infinity stays as it is)."""
        native = value.dtype in (np.float32, np.float64)
        wide_t = np.longdouble if et.bits > 32 else np.float64
        with np.errstate(all="ignore"):
            exact = fn(*[np.asarray(o).astype(wide_t) for o in operands])
            y = value.astype(wide_t)
            up = exact > y
            flip = exact != y  # NaN: nextafter keeps it NaN
            if mode is None:
                flip &= self.rng.random(value.shape, dtype=np.float32) < 0.5
            else:  # directed rounding: towards +inf (mode > 0) or -inf
                flip &= up == (mode > 0)
            if not flip.any():
                return value
            out = np.array(value, copy=True)
            v, u = value[flip], up[flip]
            if native:
                inf = value.dtype.type(np.inf)
                other = np.nextafter(v, np.where(u, inf, -inf))
            else:
                step = ulp_at(v, et) * np.where(u, 1.0, -1.0)
                other = (v.astype(np.float64) + step).astype(value.dtype)
                other = np.where(np.isfinite(other.astype(np.float64)), other, v)
            out[flip] = other
        return out

    def _accumulation_budget(self, instr, operands, value, recompute):
        """Per-element half-width of the reordering error, or ``None`` (exact)."""
        op = instr.opcode
        if not self.freedoms.accumulation:
            return None
        if op in EXPANDED_OPS:
            return _expansion_budget(instr, operands, value)
        if op == "custom-call":
            return lapack_atol(instr, operands, value)
        if op in ("reduce", "reduce-window") and combiner_kinds(self.module, instr) is None:
            return self._order_budget(instr, operands, value, recompute)
        if op in ("reduce", "reduce-window", "scatter", "all-reduce", "all-reduce-start",
                  "reduce-scatter", "collective-reduce") and \
                not _reordered_combiner(self.module, instr):
            return None  # max/min/and/or combiners are exact; others are combiners' business
        if isinstance(value, tuple):
            # a variadic reduce: each output combined by its own add or multiply may
            # be reordered
            kinds = combiner_kinds(self.module, instr)
            if op not in ("reduce", "reduce-window") or kinds is None or \
                    len(kinds) != len(value):
                return None
            try:
                mags = recompute(*[_magnitude(o) for o in operands])
            except Exception:  # noqa: BLE001 - a budget is best effort
                return None
            return tuple(
                self._sum_budget(instr, operands, leaf, np.abs(_to_f64(np.asarray(mag))),
                                 ftz=self.freedoms.ftz)
                if kind in _REORDERED and float_type(leaf) is not None else None
                for kind, leaf, mag in zip(kinds, value, mags))
        et = float_type(value)
        if et is None:
            return None
        try:
            if op == "fft":
                total = float(np.sum(np.abs(operands[0].astype(np.complex128))))
                mag = np.full(value.shape, total)
            elif op in _COMMUNICATING:
                # Σ|terms| over the group: the collective again on |operand|. Only budgets
                # of the nominal run are computed (perturbed runs reuse them), and every
                # device computes its own there, so all of them join this rendezvous.
                mag = np.abs(_to_f64(np.asarray(recompute(_magnitude(operands[0])))))
            else:
                abs_ops = [_magnitude(o) for o in operands]
                mag = _in_f32(instr, abs_ops, recompute) if is_narrow(et) else None
                if mag is None:  # (a narrow result type would round, even overflow, it)
                    mag = recompute(*abs_ops)
                mag = np.abs(_to_f64(np.asarray(mag)))
        except Exception:  # noqa: BLE001 - a budget is best effort
            return None
        return self._sum_budget(instr, operands, value, mag, self.module, ftz=self.freedoms.ftz)

    def _order_budget(self, instr, operands, value, recompute):
        """A written reducer (not one op of its parameters) that is associative and
        commutative up to rounding (``reducers.reorder_free``: ``logaddexp``, ``hypot``)
        may be applied in any order, as the semantics allow: the same op folded from the
        left (``reducer_order="left"``, XLA's loop order) gives the other end; the budget
        is twice their difference plus sqrt(n)·4 ULPs of the value where they differ
        anywhere (the roundings of the n applications). ``None`` when both orders agree
        bit for bit (an exact reducer, e.g. an argmax) or the reducer is not free."""
        from hloref.evaluator.reduce import is_vectorizable
        ref = instr.attrs.get("to_apply")
        comp = self.module.computations.get(str(ref)) if ref is not None else None
        et = float_type(value)
        if comp is None or et is None or isinstance(value, tuple):
            return None
        n = _terms(instr, operands, value, self.module)
        if n > _MAX_FOLD_TERMS or not reorder_free(self.module, comp) or \
                not is_vectorizable(comp, self.module):
            return None
        try:
            other = np.asarray(recompute(*operands, reducer_order="left"))
        except Exception:  # noqa: BLE001 - a budget is best effort
            return None
        if other.shape != value.shape:
            return None
        nominal, alt = _to_f64(value), _to_f64(other)
        with np.errstate(all="ignore"):
            gap = np.abs(nominal - alt)
        gap = np.where(np.isnan(nominal) & np.isnan(alt), 0.0, gap)
        if not np.any(gap):
            return None
        with np.errstate(all="ignore"):
            budget = 2.0 * gap + 4.0 * math.sqrt(n) * ulp_at(value, et)
        return np.nan_to_num(budget, nan=np.inf, posinf=np.inf)

    @staticmethod
    def _sum_budget(instr, operands, value, mag, module=None, *, ftz=False):
        """sqrt(n)·eps·Σ|terms| + 1 ULP for ``value``, given Σ|terms| (``mag``; for a
        product, the op on the magnitudes is Π|factors| = |value|: a relative error of
        sqrt(n)·eps, the reordered product's); with ``ftz``, plus n smallest normals of
        the type the terms are computed in (``flushed_terms``)."""
        op = instr.opcode
        et = float_type(value)
        n = _terms(instr, operands, value, module)
        # dot and convolution of narrow floats accumulate in f32 (XLA:CPU and XLA:GPU
        # both do); a reduce's partial sums may be rounded to its reducer's type
        eps = _eps(et) if op not in ("dot", "convolution", "ragged-dot", "scaled-dot") \
            else min(_eps(et), 2.0 ** -23)
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


def _in_f32(instr, operands, recompute):
    """The op evaluated with an f32 result (its rounding to a narrow type skipped)."""
    from hloref.types import F32
    if not isinstance(instr.shape, ArrayShape):
        return None
    try:
        return np.asarray(recompute(*operands, shape=replace(instr.shape, element_type=F32)),
                          np.float32)
    except Exception:  # noqa: BLE001 - the op takes no shape: keep the rounded value
        return None


def _schedule(seed: int, comp: str, instr: str, runs: int) -> list:
    """The shuffled modes of one instruction over ``runs`` runs (see ``_mode``)."""
    import zlib
    key = zlib.crc32(f"{comp}\x00{instr}".encode())
    rng = np.random.default_rng([seed, key])
    quarter = max(1, runs // 4)
    plan = [1.0] * quarter + [-1.0] * quarter + [None] * max(0, runs - 2 * quarter)
    rng.shuffle(plan)
    return plan


def _daz_plans(seed: int, comp: Computation, runs: int) -> dict:
    """``{name: runs}``: the runs in which each instruction of ``comp`` reads its
    subnormal operands as zero: half of them, shuffled, and never the same runs as one of
    its operands' (XLA:CPU flushes per instruction: a subnormal sum may be flushed while
    the power reading it keeps its own subnormal exponent; with equal plans, 1 pair in 70
    of independent shuffles, no run shows that)."""
    plans: dict = {}
    for instr in comp.instructions:  # operands first
        avoid = {plans[o.name] for o in instr.operands if o.name in plans}
        for salt in range(8):
            mine = tuple(m is not None for m in
                         _schedule(seed, comp.name, f"{instr.name}\x00daz" + "\x00" * salt,
                                   runs))
            if mine not in avoid:
                break
        plans[instr.name] = mine
    return plans


def _expansion_budget(instr, operands, value):
    atol = expander_atol(instr, operands, value)
    if atol is None:
        return None
    if isinstance(value, tuple):
        return tuple(atol.get((i,)) for i in range(len(value)))
    return atol.get(())


def ulp_at(value: np.ndarray, et: ElementType) -> np.ndarray:
    """The spacing of ``et`` at each element's magnitude (f64; complex: at |z|)."""
    if value.dtype in (np.float32, np.float64):
        with np.errstate(all="ignore"):
            return np.spacing(np.abs(np.where(np.isfinite(value), value, 0))).astype(np.float64)
    mag = np.abs(value.astype(np.complex128)) if et.is_complex else value.astype(np.float64)
    return ulp_of(np.nan_to_num(mag, nan=0.0, posinf=0.0, neginf=0.0), _part_type(et))


def _same_structure(budget, value) -> bool:
    if isinstance(value, tuple):
        return isinstance(budget, tuple) and len(budget) == len(value)
    return not isinstance(budget, tuple) and (
        np.ndim(budget) == 0 or np.shape(budget) == np.shape(value))


def _map_leaves(fn, value, budget):
    if isinstance(value, tuple):
        return tuple(_map_leaves(fn, v, b) if b is not None else v
                     for v, b in zip(value, budget))
    return fn(value, budget)


# ---------------------------------------------------------------- sampling


@dataclass
class Sampled:
    """The nominal result, the perturbed results, and (when recorded) the values of
    each entry instruction in the nominal and the perturbed runs."""

    nominal: object
    samples: list
    entry_nominal: dict = field(default_factory=dict)
    entry_samples: dict = field(default_factory=dict)  # name -> list of values
    seconds: float = 0.0
    #: the largest finite magnitude an accumulation of the program reached in the nominal
    #: run, as a fraction of its type's largest finite value (``Perturber._record_peak``)
    peak: float = 0.0
    #: per perturbed run, the XLA rewrites it took (``rewrites.RewriteRun.applied``)
    rewrites: list = field(default_factory=list)


class RunHooks:
    """The hooks of one run (the nominal one, ``index=None``, or perturbed run
    ``index``) of a program that may be several interpreter runs: one per device, or
    the pieces of a multi-device program. ``perturber(module, key)`` is the ``perturb``
    hook of the piece named ``key`` (its budgets are recorded in the nominal run and
    reused by the same piece in every perturbed run); ``interpreter_options(module,
    key)`` the ``Interpreter`` keyword arguments (the hook and ``op_overrides``)."""

    def __init__(self, policy: EnvelopePolicy, index: int | None, budgets: dict,
                 seed: np.random.SeedSequence | None = None, shared: dict | None = None):
        import threading
        self.policy, self.index, self.seed = policy, index, seed
        self._budgets = budgets
        self.shared = shared if shared is not None else {}
        self._lock = threading.Lock()
        self._perturbers: list = []

    def rewrites(self) -> frozenset:
        """The XLA rewrites this run's perturbers took."""
        return frozenset(n for p in self._perturbers if p.rewrites is not None
                         for n in p.rewrites.applied)

    def perturber(self, module: Module, key: str = "") -> Perturber:
        import zlib
        with self._lock:
            budgets = self._budgets.setdefault(key, {})
        freedoms = self.policy.freedoms
        if self.index is None:
            return Perturber(module, freedoms, None, budgets, shared=self.shared)
        seed = self.seed if not key else np.random.SeedSequence(
            self.seed.entropy, spawn_key=tuple(self.seed.spawn_key) + (zlib.crc32(key.encode()),))
        perturber = Perturber(module, freedoms, np.random.default_rng(seed), budgets,
                              schedule=(self.policy.seed, self.index, self.policy.samples),
                              shared=self.shared)
        with self._lock:
            self._perturbers.append(perturber)
        return perturber

    def interpreter_options(self, module: Module, key: str = "") -> dict:
        options = {"perturb": self.perturber(module, key)}
        if self.index is not None and self.policy.freedoms.accumulation:
            # a perturbed run sums f32 dots in f32 (as XLA does): its error is far inside
            # the accumulation freedom the run adds anyway, and BLAS sgemm is twice
            # dgemm's speed
            options["op_overrides"] = {"dot": {"accumulate": "native"}}
        return options


def sample_program(run, policy: EnvelopePolicy | None = None) -> Sampled:
    """The nominal and ``policy.samples`` perturbed values of a program that ``run(hooks)``
    evaluates, giving each interpreter it starts ``hooks.interpreter_options(module,
    key)`` (``RunHooks``): for programs that are more than one interpreter run."""
    import time
    policy = policy or EnvelopePolicy()
    t0 = time.perf_counter()
    budgets: dict = {}
    shared: dict = {}
    out = Sampled(run(RunHooks(policy, None, budgets, shared=shared)), [])
    seeds = np.random.SeedSequence(policy.seed).spawn(policy.samples)
    for k, s in enumerate(seeds):
        hooks = RunHooks(policy, k, budgets, s, shared=shared)
        out.samples.append(run(hooks))
        out.rewrites.append(hooks.rewrites())
    out.seconds = time.perf_counter() - t0
    out.peak = shared.get("peak", 0.0)
    return out


def sample(module: Module, args: list, policy: EnvelopePolicy | None = None, *, limits=None,
           record_entry: bool = False, nominal=None) -> Sampled:
    """Evaluate ``module`` once as written and ``policy.samples`` times perturbed."""
    from hloref.evaluator.interpreter import Interpreter
    out = Sampled(None, [])

    def observer_for(hooks: RunHooks):
        if not record_entry:
            return None
        store, many = (out.entry_nominal, False) if hooks.index is None else \
            (out.entry_samples, True)

        def observe(comp, instr, value):
            if comp is module.entry and instr.opcode != "parameter":
                if many:
                    store.setdefault(instr.name, []).append(value)
                else:
                    store[instr.name] = value
        return observe

    def run(hooks: RunHooks):
        return Interpreter(module, limits=limits, observer=observer_for(hooks),
                           **hooks.interpreter_options(module)).run(list(args))

    runs = sample_program(run, policy)
    out.nominal, out.samples, out.seconds = runs.nominal, runs.samples, runs.seconds
    out.peak, out.rewrites = runs.peak, runs.rewrites
    return out
