"""XLA's algebraic rewrites that change float results on purpose, as freedoms of the
numerical envelope (docs/semantics.md, "What XLA leaves undefined or
implementation-defined" and "Algebraic rewrites XLA makes on purpose").

XLA's ``AlgebraicSimplifier`` rewrites some patterns into forms that are equal over the
reals but not in floating point: ``(A / B) / C`` becomes ``A / (B * C)``, which is 0 where
``B * C`` overflows although the written form is finite; ``(A - C1) + C2`` becomes
``A + (C2 - C1)`` with the constants folded in the element type, which loses ``C2``
where it is below half an ULP of ``C1``. Either form is what XLA may return, so the
envelope runs the rewritten form of every instruction that matches a pattern, with
XLA's own preconditions (constants, one use, a power of two, a non-negative operand),
in half of its perturbed runs, and records which rewrites the runs took
(``RewriteRun.applied``); a verdict that needed one names it (``envelope.Envelope``).

Each rewrite is one record of ``REWRITES`` (name, pattern, source line, reason,
constraints, rewritten form); the patterns are matched on the module once, as XLA's
simplifier sees it (``xla_view``: through inlined calls, reshapes over a broadcast of
a scalar, constants sunk into loops), and a run evaluates the form with hloref's own op
functions in the instruction's element type, each step rounded to it, so that an
intermediate overflow or underflow is XLA's. Line numbers are those of
``xla/hlo/transforms/simplifiers/algebraic_simplifier.cc`` at ROCm/xla main 183fa00
(2026-08-22, a mirror of openxla/xla; the file last changed by 4721e1a, 2026-08-21)
unless the record says otherwise.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from hloref.ir import Computation, Instruction, Module
from hloref.shapes import ArrayShape

from .xla_view import XlaView, view_of

__all__ = ["Rewrite", "REWRITES", "RewriteRun", "matches", "match_plan", "MatchPlan",
           "is_nonnegative", "RECOVERED_ULPS"]


@dataclass(frozen=True)
class Rewrite:
    """One rewrite: ``pattern`` is a tree of ``(opcode, operand patterns...)`` whose
    leaves are names; ``constant`` leaves must be constants (or a broadcast or convert
    of one), ``nonconstant`` leaves must not be; ``where(binding, module)`` adds XLA's
    other preconditions; ``form(values, op)`` computes the rewritten value from the
    leaves' values, ``op(opcode, *args)`` evaluating one step in the element type."""

    name: str
    pattern: tuple
    source: str
    reason: str
    form: Callable
    constant: tuple = ()
    nonconstant: tuple = ()
    #: "float" (real floats), "inexact" (floats and complex), "any"
    types: str = "float"
    where: Callable | None = None


# ---------------------------------------------------------------- preconditions


def _literal(constant: Instruction | None):
    """The value of a constant (``XlaView.constant``'s answer), or None."""
    return np.asarray(constant.literal) if constant is not None else None


def _all_equal(constant: Instruction | None, x: float) -> bool:
    v = _literal(constant)
    return v is not None and v.size > 0 and bool(np.all(v.astype(np.float64) == x))


def _power_of_two(constant: Instruction | None) -> bool:
    v = _literal(constant)
    if v is None or v.size == 0 or v.dtype.kind not in "f" and not str(v.dtype).startswith(
            ("bfloat", "float")):
        return False
    w = v.astype(np.float64)
    if not np.all(np.isfinite(w)) or np.any(w == 0):
        return False
    return bool(np.all(np.frexp(np.abs(w))[0] == 0.5))


def is_nonnegative(instr: Instruction) -> bool:
    """XLA's ``IsNonNegative`` on real floats (algebraic_simplifier.cc:537): x*x, exp,
    abs, a constant without sign bit or NaN, and what min/max/select/broadcast/power
    make of those."""
    op = instr.opcode
    if op == "multiply":
        return instr.operands[0] is instr.operands[1]
    if op in ("exponential", "abs"):
        return True
    if op == "broadcast":
        return is_nonnegative(instr.operands[0])
    if op == "constant":
        v = np.asarray(instr.literal).astype(np.float64) if instr.literal is not None else None
        return v is not None and not np.any(np.signbit(v) | np.isnan(v))
    if op == "minimum" or op == "select":
        ops = instr.operands if op == "minimum" else instr.operands[1:]
        return all(is_nonnegative(o) for o in ops)
    if op == "maximum":
        return any(is_nonnegative(o) for o in instr.operands)
    if op == "power":
        return is_nonnegative(instr.operands[0])
    return False


def _one_use(*leaves: str) -> Callable:
    """The instructions bound to these pattern positions have a single user."""
    def check(binding: "Binding", module: Module) -> bool:
        return all(binding.users(binding.nodes[leaf]) == 1 for leaf in leaves)
    return check


# ---------------------------------------------------------------- the table

def _zero_like(x):
    return np.zeros_like(np.asarray(x))


REWRITES: tuple[Rewrite, ...] = (
    Rewrite("add-constants", ("add", ("add", "A", "C1"), "C2"), "algebraic_simplifier.cc:933",
            "(A + C1) + C2 => A + (C1 + C2) 'to allow constant folding'; C1 + C2 is folded "
            "in the element type", lambda v, op: op("add", v["A"], op("add", v["C1"], v["C2"])),
            nonconstant=("A",), constant=("C1", "C2")),
    Rewrite("subtract-constant-add", ("add", ("subtract", "A", "C1"), "C2"),
            "algebraic_simplifier.cc:2335 then :933",
            "A - C1 => A + (-C1) (canonicalization), then (A + C1) + C2 => A + (C1 + C2): "
            "the f16 (x - 1) + 6.1e-5 that XLA folds to x + (-1)",
            lambda v, op: op("add", v["A"], op("add", op("negate", v["C1"]), v["C2"])),
            nonconstant=("A",), constant=("C1", "C2")),
    Rewrite("constant-minus-add", ("add", ("subtract", "C1", "A"), "C2"),
            "algebraic_simplifier.cc:952", "(C1 - A) + C2 => (C1 + C2) - A",
            lambda v, op: op("subtract", op("add", v["C1"], v["C2"]), v["A"]),
            nonconstant=("A",), constant=("C1", "C2")),
    Rewrite("distribute-power-of-two", ("add", ("multiply", "A", "C"), ("multiply", "B", "C")),
            "algebraic_simplifier.cc:1025",
            "A*C + B*C => (A+B)*C for C = ±2^k, 'differences in rounding, underflow, and "
            "overflow acceptable in the ML context'",
            lambda v, op: op("multiply", op("add", v["A"], v["B"]), v["C"]),
            where=lambda b, m: _power_of_two(b.constant("C")) and
            all(b.users(b.nodes[k]) == 1 for k in ("0", "1")), constant=("C",)),
    Rewrite("exp-quotient", ("divide", ("exponential", "A"), ("exponential", "B")),
            "algebraic_simplifier.cc:2481", "exp(A)/exp(B) => exp(A-B)",
            lambda v, op: op("exponential", op("subtract", v["A"], v["B"])), types="inexact"),
    Rewrite("divide-by-exp", ("divide", "A", ("exponential", "B")),
            "algebraic_simplifier.cc:2491", "A/exp(B) => A*exp(-B)",
            lambda v, op: op("multiply", v["A"], op("exponential", op("negate", v["B"]))),
            types="inexact"),
    Rewrite("divide-by-power", ("divide", "A", ("power", "B", "C")),
            "algebraic_simplifier.cc:2503", "A/pow(B,C) => A*pow(B,-C)",
            lambda v, op: op("multiply", v["A"], op("power", v["B"], op("negate", v["C"]))),
            types="inexact"),
    Rewrite("divide-by-sqrt", ("divide", "A", ("sqrt", "B")), "algebraic_simplifier.cc:2521",
            "A/sqrt(B) => A*rsqrt(B) (sqrt with one use)",
            lambda v, op: op("multiply", v["A"], op("rsqrt", v["B"])), types="inexact",
            where=_one_use("1")),
    Rewrite("divide-by-rsqrt", ("divide", "A", ("rsqrt", "B")), "algebraic_simplifier.cc:2530",
            "A/rsqrt(B) => A*sqrt(B) (rsqrt with one use)",
            lambda v, op: op("multiply", v["A"], op("sqrt", v["B"])), types="inexact",
            where=_one_use("1")),
    Rewrite("divide-by-constant", ("divide", "A", "C"), "algebraic_simplifier.cc:2544",
            "A / Const => A * (1 / Const); 1/Const folded (a subnormal reciprocal is then "
            "read as 0 by XLA:CPU's DAZ)",
            lambda v, op: op("multiply", v["A"], op("divide", np.ones_like(v["C"]), v["C"])),
            nonconstant=("A",), types="inexact", constant=("C",)),
    Rewrite("divide-by-broadcast", ("divide", "A", ("broadcast", "B")),
            "algebraic_simplifier.cc:2577",
            "A / broadcast(B) => A * broadcast(1 / B) on CPU (enable_sink_broadcast, on by "
            "default), B with one use, not complex",
            lambda v, op: op("multiply", v["A"], op("divide", np.ones_like(v["1"]), v["1"])),
            where=lambda b, m: b.users(b.nodes["B"]) == 1 and b.constant("1") is None),
    Rewrite("quotient-of-quotients", ("divide", ("divide", "A", "B"), ("divide", "C", "D")),
            "algebraic_simplifier.cc:2599", "(A / B) / (C / D) => (A * D) / (B * C)",
            lambda v, op: op("divide", op("multiply", v["A"], v["D"]),
                             op("multiply", v["B"], v["C"])), types="inexact"),
    Rewrite("divide-divide", ("divide", ("divide", "A", "B"), "C"), "algebraic_simplifier.cc:2610",
            "(A / B) / C => A / (B * C): the f64 (x/x)/x that XLA returns as 0 where x*x "
            "overflows", lambda v, op: op("divide", v["A"], op("multiply", v["B"], v["C"])),
            types="inexact"),
    Rewrite("divide-by-quotient", ("divide", "A", ("divide", "B", "C")),
            "algebraic_simplifier.cc:2618", "A / (B / C) => (A*C) / B",
            lambda v, op: op("divide", op("multiply", v["A"], v["C"]), v["B"]), types="inexact"),
    Rewrite("pred-multiply", ("multiply", "X", ("convert", "P")), "algebraic_simplifier.cc:5041",
            "Mul(Convert(Pred), X) => select(Pred, X, 0): NaN or inf times false is 0",
            lambda v, op: np.where(np.asarray(v["P"]).astype(bool), v["X"], _zero_like(v["X"])),
            types="inexact",
            where=lambda b, m: b.nodes["P"].shape.element_type.name == "pred"),
    Rewrite("constants-of-two-products",
            ("multiply", ("multiply", "X", "C1"), ("multiply", "Y", "C2")),
            "algebraic_simplifier.cc:5059",
            "Mul(Mul(x, c1), Mul(y, c2)) => Mul(Mul(x, y), c1*c2)",
            lambda v, op: op("multiply", op("multiply", v["X"], v["Y"]),
                             op("multiply", v["C1"], v["C2"])),
            nonconstant=("X", "Y"), constant=("C1", "C2")),
    Rewrite("multiply-constants", ("multiply", ("multiply", "A", "C1"), "C2"),
            "algebraic_simplifier.cc:5085 and :5142",
            "(A * C1) * C2 => A * (C1 * C2); C1 * C2 folded in the element type",
            lambda v, op: op("multiply", v["A"], op("multiply", v["C1"], v["C2"])),
            nonconstant=("A",), constant=("C1", "C2")),
    Rewrite("exp-product", ("multiply", ("exponential", "A"), ("exponential", "B")),
            "algebraic_simplifier.cc:5165", "exp(A) * exp(B) => exp(A+B)",
            lambda v, op: op("exponential", op("add", v["A"], v["B"])), types="inexact"),
    Rewrite("sqrt-squared", ("multiply", ("sqrt", "X"), ("sqrt", "X")),
            "algebraic_simplifier.cc:5175", "sqrt(x) * sqrt(x) => x for x >= 0",
            lambda v, op: np.asarray(v["X"]),
            where=lambda b, m: is_nonnegative(b.nodes["X"])),
    Rewrite("rsqrt-squared", ("multiply", ("rsqrt", "X"), ("rsqrt", "X")),
            "algebraic_simplifier.cc:5187", "rsqrt(x) * rsqrt(x) => 1/x for x >= 0",
            lambda v, op: op("divide", np.ones_like(v["X"]), v["X"]),
            where=lambda b, m: is_nonnegative(b.nodes["X"])),
    Rewrite("log-of-exp", ("log", ("exponential", "A")),
            "algebraic_simplifier.cc:5231 at 49468c7 (2026-07-27)",
            "ln(exp(A)) => A; unconditional in jaxlib 0.10.2's XLA (log(exp(89f)) = 89, "
            "measured), behind fast math since 6a6c5cb (PR #45560, 2026-07-27)",
            lambda v, op: np.asarray(v["A"])),
    Rewrite("log-of-power", ("log", ("power", "A", "B")), "algebraic_simplifier.cc:5306",
            "ln(pow(A,B)) => select(B == 0, 0, B*ln(abs(A)))",
            lambda v, op: np.where(np.asarray(v["B"]) == 0, _zero_like(v["B"]),
                                   op("multiply", op("log", op("abs", v["A"])), v["B"]))),
    Rewrite("log-of-sqrt", ("log", ("sqrt", "A")), "algebraic_simplifier.cc:5327",
            "ln(sqrt(A)) => ln(A) * 0.5",
            lambda v, op: op("multiply", op("log", v["A"]), np.full_like(v["A"], 0.5))),
    Rewrite("log-of-rsqrt", ("log", ("rsqrt", "A")), "algebraic_simplifier.cc:5335",
            "ln(rsqrt(A)) => ln(A) * -0.5",
            lambda v, op: op("multiply", op("log", v["A"]), np.full_like(v["A"], -0.5))),
    Rewrite("power-of-exp", ("power", ("exponential", "A"), "B"), "algebraic_simplifier.cc:6190",
            "pow(exp(A), B) => exp(A*B)",
            lambda v, op: op("exponential", op("multiply", v["A"], v["B"])), types="inexact"),
    Rewrite("cube", ("power", "A", "C"), "algebraic_simplifier.cc:6208",
            "pow(A, 3) => A*(A*A) (GELU): two roundings",
            lambda v, op: op("multiply", v["A"], op("multiply", v["A"], v["A"])),
            types="inexact", where=lambda b, m: _all_equal(b.constant("C"), 3), constant=("C",)),
    Rewrite("reciprocal-power", ("power", "A", "C"), "algebraic_simplifier.cc:6217",
            "pow(A, -1) => 1/A, integers too: pow(0, -1) becomes XLA's 1/0 = -1",
            lambda v, op: op("divide", np.ones_like(v["A"]), v["A"]), types="any",
            where=lambda b, m: _all_equal(b.constant("C"), -1), constant=("C",)),
    Rewrite("rsqrt-of-power", ("rsqrt", ("power", "A", "C")), "algebraic_simplifier.cc:7731",
            "rsqrt(pow(A, -2)) => A for A >= 0", lambda v, op: np.asarray(v["A"]),
            where=lambda b, m: _all_equal(b.constant("C"), -2) and is_nonnegative(b.nodes["A"]),
            constant=("C",)),
    Rewrite("rsqrt-of-reciprocal", ("rsqrt", ("divide", "C", "A")), "algebraic_simplifier.cc:7740",
            "rsqrt(1/A) => sqrt(A) for A >= 0", lambda v, op: op("sqrt", v["A"]),
            where=lambda b, m: _all_equal(b.constant("C"), 1) and is_nonnegative(b.nodes["A"]),
            constant=("C",)),
    Rewrite("sqrt-of-square", ("sqrt", ("multiply", "A", "A")),
            "algebraic_simplifier.cc:9552 at 49468c7 (2026-07-27)",
            "sqrt(A*A) => |A|; unconditional in jaxlib 0.10.2's XLA (sqrt(3e38f * 3e38f) = "
            "3e38, measured), behind fast math since 6a6c5cb (2026-07-27)",
            lambda v, op: op("abs", v["A"])),
)

#: A rewritten element within this many ULPs of the written value is the rounding
#: freedom's business: the run perturbs the written value there (``RewriteRun.merge``).
RECOVERED_ULPS = 4.0

#: Opcodes of the patterns' roots, for a quick rejection.
_ROOTS = frozenset(r.pattern[0] for r in REWRITES)
#: Binary opcodes whose operands a pattern may match in either order (XLA canonicalizes
#: constants to the right of an add and matches most multiplies in any order).
_COMMUTATIVE = frozenset({"add", "multiply"})


# ---------------------------------------------------------------- matching


@dataclass
class Binding:
    """Where a match found each leaf: ``leaves[name] = (holder, k, path)``, the value of
    operand ``k`` of instruction ``holder``, reached through the calls of ``path``
    (``xla_view``: XLA inlines them); ``nodes[name]`` the leaf's instruction (``paths``
    its path), and ``nodes[str(k)]`` the root's operand ``k``."""

    view: XlaView
    leaves: dict = field(default_factory=dict)
    nodes: dict = field(default_factory=dict)
    paths: dict = field(default_factory=dict)

    def users(self, instr: Instruction) -> int:
        return self.view.users(instr)

    def constant(self, name: str) -> Instruction | None:
        """The constant XLA sees at leaf ``name`` (``XlaView.constant``), or None."""
        return self.view.constant(self.nodes[name], self.paths.get(name, ()))

    def copy(self) -> "Binding":
        return Binding(self.view, dict(self.leaves), dict(self.nodes), dict(self.paths))


def _match(pat, instr: Instruction, path: tuple, rewrite: Rewrite, b: Binding) -> bool:
    opcode, subs = pat[0], pat[1:]
    if instr.opcode != opcode or len(instr.operands) != len(subs):
        return False
    orders = [list(range(len(subs)))]
    if opcode in _COMMUTATIVE and len(subs) == 2:
        orders.append([1, 0])
    for order in orders:
        trial = b.copy()
        if all(_match_operand(subs[i], instr, k, path, rewrite, trial)
               for i, k in enumerate(order)):
            b.leaves, b.nodes, b.paths = trial.leaves, trial.nodes, trial.paths
            return True
    return False


def _match_operand(sub, holder: Instruction, k: int, path: tuple, rewrite: Rewrite,
                   b: Binding) -> bool:
    operand = holder.operands[k]
    if isinstance(sub, tuple):
        # what XLA sees there: through an inlined call (or back out of one through a
        # parameter), and a broadcast of a scalar through the reshapes over it
        seen, seen_path = b.view.broadcast(operand, path) if sub[0] == "broadcast" else \
            b.view.through(operand, path)
        return _match(sub, seen, seen_path, rewrite, b)
    if sub in b.nodes:  # a repeated leaf: the same instruction
        return b.nodes[sub] is operand
    if sub in rewrite.constant and b.view.constant(operand, path) is None:
        return False
    if sub in rewrite.nonconstant and b.view.constant(operand, path) is not None:
        return False
    b.leaves[sub], b.nodes[sub], b.paths[sub] = (holder, k, path), operand, path
    return True


def _type_ok(instr: Instruction, types: str) -> bool:
    shape = instr.shape
    if not isinstance(shape, ArrayShape):
        return False
    et = shape.element_type
    if types == "float":
        return et.is_float
    if types == "inexact":
        return et.is_float or et.is_complex
    return et.is_float or et.is_complex or et.is_integer


def matches(module: Module, comp: Computation, view: XlaView | None = None) -> dict:
    """``{instruction name: [(Rewrite, Binding), ...]}`` for ``comp``'s instructions that
    match a rewrite's pattern and preconditions, as XLA's simplifier sees the module
    (``view``, made from ``module`` if not given)."""
    view = view if view is not None else XlaView(module)
    out: dict = {}
    for instr in comp.instructions:
        if instr.opcode not in _ROOTS:
            continue
        for rewrite in REWRITES:
            if rewrite.pattern[0] != instr.opcode or not _type_ok(instr, rewrite.types):
                continue
            b = Binding(view)
            if not _match(rewrite.pattern, instr, (), rewrite, b):
                continue
            for k, o in enumerate(instr.operands):
                b.nodes[str(k)] = o
            try:
                ok = rewrite.where is None or bool(rewrite.where(b, module))
            except (AttributeError, KeyError, TypeError, IndexError):
                ok = False
            if ok:
                out.setdefault(instr.name, []).append((rewrite, b))
    return out


@dataclass
class MatchPlan:
    """A module's matches and what a run records to evaluate them: ``found[computation]``
    is ``matches``' answer; ``record[computation]`` the instructions whose operand values
    a run keeps (the patterns' inner instructions); ``lifts[(computation, call)]`` the
    keys a run copies up from the called computation when the call returns, so that a
    root reads the values of the call it reached, not of another call of the same
    computation (``RewriteRun.value``)."""

    found: dict
    record: dict
    lifts: dict


def match_plan(module: Module, view: XlaView | None = None) -> MatchPlan:
    """The ``MatchPlan`` of every computation of ``module`` (as ``view`` sees it)."""
    view = view if view is not None else XlaView(module)
    found, record, lifts = {}, {}, {}
    for comp in module.computations.values():
        found[comp.name] = matched = matches(module, comp, view)
        for name, pairs in matched.items():
            for _, b in pairs:
                for holder, _k, path in b.leaves.values():
                    if not path and holder.name == name:
                        continue  # the root's own operands: the run has them
                    # where the holder lives, and each call's hop up to the root's level
                    owner = view.callees[id(path[-1])].name if path else comp.name
                    record.setdefault(owner, set()).add(holder.name)
                    for j, call in enumerate(path):
                        caller = view.callees[id(path[j - 1])].name if j else comp.name
                        suffix = tuple(c.name for c in path[j + 1:]) + (holder.name,)
                        lifts.setdefault((caller, call.name), set()).add(suffix)
    return MatchPlan(found, record, lifts)


# ---------------------------------------------------------------- one run


class RewriteRun:
    """The rewrites of one perturbed run: which instructions it evaluates in their
    rewritten form (half of the runs of each matching instruction, balanced and
    shuffled like the envelope's other choices), the operand values of the patterns'
    inner instructions in this run, and the rewrites it applied (``applied``: names
    with the instruction, for the verdict)."""

    def __init__(self, module: Module, schedule: tuple, shared: dict,
                 flush: Callable | None = None, ulp: Callable | None = None):
        """``flush``: reads subnormal intermediates as zero (XLA:CPU's DAZ); ``ulp(value)``:
        the spacing of the value's type at each element (``merge``)."""
        self.module = module
        self.ulp = ulp
        self.seed, self.index, self.runs = schedule
        self.shared = shared
        self.flush = flush
        self.applied: set[str] = set()
        self._operands: dict = {}
        self._choices: dict = {}
        self._taken: dict = {}

    def _plan(self) -> MatchPlan:
        key = ("rewrite-plan", id(self.module))
        plan = self.shared.get(key)
        if plan is None:
            plan = self.shared[key] = match_plan(self.module, view_of(self.module, self.shared))
        return plan

    def _chosen(self, comp: Computation, instr: Instruction, n: int) -> int | None:
        """Which of the ``n`` matching rewrites this run applies, or None (half the runs;
        the same in every loop iteration)."""
        cached = self._choices.get((comp.name, instr.name), False)
        if cached is not False:
            return cached
        choice = self._choice(comp, instr, n)
        self._choices[(comp.name, instr.name)] = choice
        return choice

    def _choice(self, comp: Computation, instr: Instruction, n: int) -> int | None:
        key = zlib.crc32(f"{comp.name}\x00{instr.name}\x00rewrite".encode())
        order = np.random.default_rng([self.seed, key]).permutation(max(self.runs, 2))
        position = int(np.nonzero(order == self.index % max(self.runs, 2))[0][0])
        if position >= max(1, len(order) // 2):
            return None
        return position % n

    def involves(self, comp: Computation, instr: Instruction) -> bool:
        """Whether ``value`` reads or rewrites ``instr`` (a matching instruction, or an
        inner instruction of a match whose operands it records)."""
        plan = self._plan()
        return (instr.name in plan.found.get(comp.name, {})
                or instr.name in plan.record.get(comp.name, ())
                or (comp.name, instr.name) in plan.lifts)

    def value(self, comp: Computation, instr: Instruction, operands: list, written):
        """The rewritten value of ``instr`` in this run (``written``: its value as
        written), or None (as written)."""
        plan = self._plan()
        if instr.name in plan.record.get(comp.name, ()):
            self._operands[(comp.name, instr.name)] = operands
        if instr.opcode == "call":  # the values its callee recorded, as this call's
            for suffix in plan.lifts.get((comp.name, instr.name), ()):
                callee = str(instr.attrs.get("to_apply"))
                self._operands[(comp.name, instr.name) + suffix] = \
                    self._operands.get((callee,) + suffix)
        pairs = plan.found.get(comp.name, {}).get(instr.name)
        if not pairs:
            return None
        pick = self._chosen(comp, instr, len(pairs))
        if pick is None:
            return None
        rewrite, binding = pairs[pick]
        values = {}
        for leaf, (holder, k, path) in binding.leaves.items():
            ops = operands if holder is instr and not path else self._operands.get(
                (comp.name,) + tuple(c.name for c in path) + (holder.name,))
            if ops is None or k >= len(ops):
                return None
            values[leaf] = np.asarray(ops[k])
        for k, o in enumerate(operands):
            values[str(k)] = np.asarray(o)
        try:
            out = np.asarray(rewrite.form(values, self._step(instr)))
        except Exception:  # noqa: BLE001 - a rewrite the ops cannot evaluate is not taken
            return None
        if not isinstance(written, np.ndarray) or out.shape != written.shape:
            return None
        self._taken[(comp.name, instr.name)] = f"{rewrite.name} ({rewrite.source}) at %{instr.name}"
        return out.astype(written.dtype, copy=False)

    def merge(self, comp: Computation, instr: Instruction, written, perturbed, rewritten):
        """This run's value of an instruction it rewrote: the rewritten form where it is
        more than ``RECOVERED_ULPS`` from the value as written (an overflow, a flush, a
        folded constant: beyond what rounding covers), the run's usual perturbation of the
        written value elsewhere (so the rewrite never narrows an envelope: the rounding
        freedom stays where the two forms agree). Records the rewrite only where it took
        effect."""
        if not isinstance(perturbed, np.ndarray) or perturbed.shape != rewritten.shape:
            return perturbed
        w, r = np.asarray(written), np.asarray(rewritten)
        with np.errstate(all="ignore"):
            if w.dtype.kind in "biu":
                far = w != r
            else:
                kind = np.complex128 if w.dtype.kind == "c" else np.float64
                wf, rf = w.astype(kind), r.astype(kind)
                both_nan = np.isnan(wf) & np.isnan(rf)
                tol = RECOVERED_ULPS * np.asarray(self.ulp(w), np.float64) \
                    if self.ulp is not None else 0.0
                far = ~both_nan & ~((wf == rf) | (np.abs(rf - wf) <= tol))
        if not np.any(far):
            return perturbed
        self.applied.add(self._taken.get((comp.name, instr.name), instr.name))
        return np.where(far, r, perturbed).astype(perturbed.dtype, copy=False)

    def _step(self, instr: Instruction):
        """``op(opcode, *args)``: one step of a rewritten form, hloref's op in the
        instruction's element type; a subnormal intermediate (an earlier step's result,
        not a leaf, not the final result) is read as zero by the next step (XLA:CPU's
        DAZ) when ``flush`` is given."""
        from hloref.evaluator.registry import OPS, load_all
        load_all()
        shape = instr.shape
        flush = self.flush
        steps: list = []  # this form's intermediate results (kept alive: compared by id)

        def read(a):
            if flush is not None and any(a is s for s in steps):
                return flush(a)
            return np.asarray(a)

        def op(opcode, *args):
            out = np.asarray(OPS[opcode].fn(*[read(a) for a in args], shape=shape))
            steps.append(out)
            return out
        return op
