"""Perturbed runs: one instruction at a time, within the freedoms XLA takes.

Its parts: ``rounding.py`` (how one rounded value may move), ``accumulation.py``
(the budgets of reordered sums), ``sampling.py`` (the nominal and perturbed runs);
the freedoms are in ``freedoms.py``, the envelope built from the runs in
``envelope.py``, and which opcodes belong to which class in ``hloref/op_properties.py``
(the envelope's table).

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

from collections import defaultdict
from functools import lru_cache

import ml_dtypes
import numpy as np

from hloref.ir import Computation, Instruction, Module
from hloref.op_properties import opcodes_with, values_of
from hloref.opcodes import ACCUMULATING
from hloref.types import from_dtype

from .accumulation import COMMUNICATING, accumulation_budget, in_f32
from .compare import NARROW_OPCODE_ULPS, OPCODE_ULPS
from .error_bounds import COMPLEX_FORMULA_OPS, EXPANDED_OPS, complex_formula_atol, \
    is_single_precision_lapack
from .freedoms import Freedoms
from .rewrites import RewriteRun
from .rounding import flush_subnormals, float_type, is_narrow, part_type, random_rounding, \
    to_f64, ulp_at, ulp_of_value, uniform
from .xla_view import view_of

__all__ = ["Perturber", "program_computations", "COMPLEX_ABS_ULPS"]


# ---------------------------------------------------------------- op classes

#: Results computed exactly from their operands (or moved unchanged): never perturbed.
_EXACT = opcodes_with("envelope-exact")

#: XLA:CPU's accuracy budget for the modulus of a complex value (``abs``), in ULPs of
#: the result: measured up to 1.84 on jaxlib 0.10.2 (tests/test_envelope.py)
COMPLEX_ABS_ULPS = 2.0


def _round_afz(x):
    return np.copysign(np.floor(np.abs(x) + 0.5), x)


def _logistic(x):
    return 0.5 * (1 + np.tanh(0.5 * x))


def _rsqrt(x):
    return 1 / np.sqrt(x)


#: The f64 functions of the table's values that numpy does not name.
_F64_FUNCTIONS = {"round_afz": _round_afz, "logistic": _logistic, "rsqrt": _rsqrt}


def _f64_function(name: str):
    return _F64_FUNCTIONS.get(name) or getattr(np, name)


#: Ops exact in every type but f8e8m0fnu (name -> the exact f64 function).
_E8M0_INEXACT = values_of("e8m0-inexact", _f64_function)

#: Opcodes of ``_EXACT`` that some types make inexact (``Perturber._inexact_in_type``).
_INEXACT_IN_SOME_TYPES = frozenset({"abs"}) | frozenset(_E8M0_INEXACT)

#: Consumers that read a value arithmetically (a narrow operand kept in f32 means to
#: them what excess precision means to XLA).
_ARITHMETIC_USERS = opcodes_with("arithmetic-user")

#: Results an exact wider computation can check: random rounding where inexact.
_ROUNDED = values_of("random-rounded", _f64_function)

#: f64 references of the transcendental ops, for narrow floats (rounded from f32).
_MATH_F64 = values_of("narrow-math-f64", _f64_function)

#: Ops whose sum order is free (with an add combiner): the catalogue's accumulating
#: group, less select-and-scatter (its select picks positions by the operand's values,
#: so the budget's run on magnitudes would pick other ones).
_ACCUMULATING = ACCUMULATING - {"select-and-scatter"}

#: Called computations whose instructions are program steps (perturbed), by the
#: attributes that name them.
_CONTROL_ATTRS = values_of("program-control", lambda v: tuple(v.split(",")))

#: Arithmetic that XLA:CPU's DAZ bit lets read a subnormal operand as zero.
_DAZ_READERS = opcodes_with("daz-reader")



_F32 = from_dtype(np.float32)


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
                                   flush=flush_subnormals if freedoms.ftz else None,
                                   ulp=ulp_of_value) \
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

    def passes_through(self, comp: Computation, instr: Instruction) -> bool:
        """Whether this hook returns ``instr``'s value as it is, drawing nothing and
        recording nothing (the same in every perturbed run of a sampling): an exact op
        that no subnormal, excess-precision or type rule reads and no rewrite involves."""
        if comp.name not in self.program:
            return True
        op = instr.opcode
        if op not in _EXACT or op in _DAZ_READERS or op in _ARITHMETIC_USERS or \
                op in _INEXACT_IN_SOME_TYPES:
            return False
        return self.rewrites is None or not self.rewrites.involves(comp, instr)

    def rounds_in_f32(self, comp: Computation, instr: Instruction) -> bool:
        """Whether ``rounded_f32`` may stand for this hook on ``instr`` (a perturbed run
        with a schedule, random rounding on, an op of ``_ROUNDED`` no rewrite involves),
        given f32 operands and value, no subnormal operand and ``keeps_unrounded`` false."""
        return self.rng is not None and self.schedule is not None and \
            self.freedoms.rounding and comp.name in self.program and \
            instr.opcode in _ROUNDED and \
            (self.rewrites is None or not self.rewrites.involves(comp, instr))

    def sums_freely(self, comp: Computation, instr: Instruction) -> bool:
        """Whether ``summed`` may stand for this hook on ``instr``: a perturbed run with a
        schedule, an accumulation whose order is free, no rewrite involved (given a
        value of f32 or f64 and ``keeps_unrounded`` false)."""
        return self.rng is not None and self.schedule is not None and \
            comp.name in self.program and instr.opcode in _ACCUMULATING and \
            instr.opcode not in _EXACT and \
            (self.rewrites is None or not self.rewrites.involves(comp, instr))

    def summed(self, comp: Computation, instr: Instruction, value):
        """This hook's value where ``sums_freely`` holds and the nominal run recorded
        this occurrence's budget for an array like ``value`` (f32 or f64): the
        accumulating branch of ``_perturbed``; else None, with nothing done."""
        seen = (comp.name, instr.name)
        budget = self.budgets.get(seen + (self._seen[seen],))
        if budget is None or isinstance(budget, tuple) or \
                not _same_structure(budget, value):
            return None
        self._seen[seen] += 1
        return uniform(self.rng, value, budget, self._mode(comp, instr))

    def forget_factors(self, comp: Computation, instr: Instruction) -> None:
        """Drop the operands this run kept of the multiply ``instr`` for an FMA
        contraction, once every user of its value in this call of ``comp`` has run (each
        call sets them again before its users read them)."""
        self._factors.pop((comp.name, instr.name), None)

    def keeps_unrounded(self) -> bool:
        """Whether this run holds f32 values of narrow results (``_unrounded_operands``)."""
        return bool(self._unrounded)

    def rounded_f32(self, comp: Computation, instr: Instruction, operands: list, value):
        """This hook's value where ``rounds_in_f32`` holds: the f32 branch of
        ``_perturbed`` (FMA contraction, else random rounding), the others being no-ops
        there."""
        op = instr.opcode
        if op == "multiply" and instr.name in self._fma_sources(comp):
            self._factors[(comp.name, instr.name)] = (operands[0], operands[1])
        elif op in ("add", "subtract"):
            fused = self._contracted(comp, instr, operands, value)
            if fused is not None:
                return fused
        return random_rounding(self.rng, _ROUNDED[op], operands, value, _F32,
                               self._mode(comp, instr))

    def _record_peak(self, value) -> None:
        """Keep the largest finite magnitude, relative to its type's largest finite value,
        that an accumulation of the program reached in the nominal run (a sum an order
        the runs did not take may overflow; elementwise values and constants, a mask's
        -3.4e38 in attention, do not count)."""
        for leaf in (value if isinstance(value, tuple) else (value,)):
            et = float_type(leaf) if isinstance(leaf, np.ndarray) and leaf.size else None
            if et is None:
                continue
            wide = leaf if leaf.dtype.kind in "fc" else to_f64(leaf)
            with np.errstate(all="ignore"):
                mag = np.max(np.abs(wide), where=np.isfinite(wide), initial=0.0)
            ratio = float(mag) / float(ml_dtypes.finfo(part_type(et).dtype).max)
            if ratio > self.shared.get("peak", 0.0):
                self.shared["peak"] = ratio

    def _perturbed(self, comp: Computation, instr: Instruction, operands: list, value, recompute):
        if self.rng is not None and self.freedoms.ftz and instr.opcode in _DAZ_READERS \
                and self._daz(comp, instr):
            flushed = [flush_subnormals(o) for o in operands]
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
                budget = accumulation_budget(self.module, self.freedoms, instr, operands,
                                             value, recompute)
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
                    op not in COMMUNICATING and \
                    instr.name in self._skippable_names(comp) and self._skip(comp, instr):
                # excess precision: the narrow rounding of the sum skipped (kept in f32)
                wide = in_f32(instr, operands, recompute)
                if wide is not None:
                    return uniform(self.rng, wide,
                                   ulp_at(value, et) + budget - ulp_at(value, et), mode)
            return _map_leaves(lambda v, b: uniform(self.rng, v, b, mode), value, budget)
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
            return random_rounding(self.rng, _ROUNDED[op], operands, value, et,
                                         self._mode(comp, instr))
        if op in OPCODE_ULPS:
            if not self.freedoms.math_budgets:
                return value
            if is_narrow(et) and op in _MATH_F64:
                # computed in f32 (a few f32 ULPs, far below one narrow ULP) and rounded:
                # either neighbour of the exact value, never further
                if self.freedoms.excess_precision:
                    return self._narrow_result(comp, instr, _MATH_F64[op], operands, value, et)
                return random_rounding(self.rng, _MATH_F64[op], operands, value, et,
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
                return uniform(self.rng, value, np.nan_to_num(budget, nan=np.inf),
                                     self._mode(comp, instr))
        return uniform(self.rng, value, ulps * ulp_at(value, et), self._mode(comp, instr))

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
            return uniform(self.rng, value, COMPLEX_ABS_ULPS * ulp_at(value, et),
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
        return random_rounding(self.rng, fn, operands, value, et, self._mode(comp, instr))

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
            # a called root is read by its calls' users once XLA inlines the calls
            called = view_of(self.module, self.shared).call_users(comp)
            reads = {i.name: users[i.name] if i is not comp.root else
                     called and called + users[i.name] for i in comp.instructions}
            names = frozenset(i.name for i in comp.instructions if reads[i.name]
                              and all(u in _ARITHMETIC_USERS for u in reads[i.name]))
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


@lru_cache(maxsize=1 << 16)
def _schedule(seed: int, comp: str, instr: str, runs: int) -> tuple:
    """The shuffled modes of one instruction over ``runs`` runs (see ``_mode``); the same
    for every run of a sampling, so computed once (not once per run)."""
    import zlib
    key = zlib.crc32(f"{comp}\x00{instr}".encode())
    rng = np.random.default_rng([seed, key])
    quarter = max(1, runs // 4)
    plan = [1.0] * quarter + [-1.0] * quarter + [None] * max(0, runs - 2 * quarter)
    rng.shuffle(plan)
    return tuple(plan)


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
