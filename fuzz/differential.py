"""Differential testing: the same module, the same inputs, hloref and an oracle.

``diff(module, args, oracle="xla")`` evaluates the module with hloref (recording
every intermediate value), runs it on the oracle in a worker process, and asks one
question: is the oracle's result inside the module's numerical envelope
(``fuzz/envelope.py``): the values a correct implementation may return on these
inputs, given the freedoms XLA takes (reassociation, excess precision, its math
library's budgets, flushed subnormals)? Inside: ``match``. Outside: ``mismatch``,
with the element, both values, the envelope and how far outside it lies.

A mismatch is localised. *Isolation* re-runs every instruction on the oracle alone,
fed with hloref's values of its operands; the culprit is the first one whose result
falls outside that instruction's own envelope (its ULP or accumulation budget; for
a ``call``, ``fusion``, ``while`` or ``conditional``, the sampled envelope of the
called computation, which is then opened and isolated in turn: a fusion's or call's,
the branch a conditional ran, a ``map``'s computation at its first differing element,
or a ``while``'s condition or body at the first iteration
(of the first ``LOOP_OPEN_ITERATIONS``) where XLA's step differs from hloref's on
hloref's loop state). When no instruction
is wrong alone, the fault is in the compiled program as a whole, and the report goes
one level down: XLA's optimized module, evaluated by hloref, either lies inside the
envelope (the HLO passes are innocent: each fusion of the optimized module is
isolated on the oracle against hloref, and the first that differs is named) or not
(the answer changed before code generation: in XLA's text parser, the StableHLO
conversion or an HLO pass; ``--reduce`` attributes the stage, ``--blame`` names a pass).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

import numpy as np

from hloref.errors import HloError
from hloref.ir import Computation, Instruction, Module
from hloref.op_properties import opcodes_with
from hloref.opcodes import ACCUMULATING, CATALOGUE, STRUCTURAL
from hloref.shapes import ArrayShape, TokenShape, TupleShape, flatten_shape

from .compare import Verdict, accumulation_atol, compare_values, differs
from .error_bounds import COMPLEX_FORMULA_OPS, EXPANDED_OPS, complex_formula_atol, expander_atol
from .known_classes import BY_NAME, Case, known_class
from .isolation import isolated_module
from .envelope import Envelope, EnvelopePolicy, EnvelopeVerdict, confirmed, sample
from .accumulation import flushed_terms
from .vocabulary import oracle_label, verdict_meaning
from .workers import OracleResult, OracleWorker

__all__ = ["DiffReport", "IsolatedInstruction", "diff", "isolate", "isolated_module",
           "instruction_verdict"]

#: Instructions that only move or forward values: never a miscompilation on their own.
_STRUCTURAL = STRUCTURAL  # nothing to isolate: the catalogue's structural group
#: Accumulations judged alone by Σ|terms| (the op run on its operands' magnitudes):
#: the catalogue's group less the collectives (other devices' terms are not at hand),
#: scatter and select-and-scatter (their positions depend on the operands' values).
_ACCUMULATING = frozenset(op for op in ACCUMULATING
                          if CATALOGUE[op].family != "collectives") - {"scatter",
                                                                       "select-and-scatter"}


@dataclass
class IsolatedInstruction:
    """One instruction run alone on the oracle with hloref's operand values."""

    computation: str
    name: str
    opcode: str
    verdict: Verdict
    text: str  # the one-instruction module
    operands: list = field(default_factory=list)
    expected: object = None
    actual: object = None
    inner: "IsolatedInstruction | None" = None  # first mismatch inside a fusion/call body
    #: a loop's step (its condition or body, ``step``, run once on hloref's state): the
    #: iteration
    iteration: int | None = None
    step: str | None = None

    def innermost(self) -> "IsolatedInstruction":
        return self.inner.innermost() if self.inner is not None else self

    def where(self, theirs: str = "XLA") -> str:
        """The innermost mismatching instruction, its place and its verdict, for reports
        (with the iteration of every loop opened on the way); ``theirs`` names the
        oracle's value."""
        c, loops, node = self.innermost(), [], self
        while node is not None:
            if node.iteration is not None:
                loops.append(f"iteration {node.iteration} of %{node.name}, in its "
                             f"{node.step}")
            node = node.inner
        at = f" ({', '.join(loops)})" if loops else ""
        return (f"%{c.name} ({c.opcode}) in computation {c.computation}{at}: "
                f"{c.verdict.describe(theirs=theirs)}")


@dataclass
class DiffReport:
    """``verdict``: match (inside the envelope), mismatch (outside), known-gap (a
    documented semantic disagreement, a ``gap`` record of ``known_classes``),
    undetermined (the module and inputs determine no single value: an ``undetermined``
    record names the cause), crash, timeout, unsupported, error (hloref or the oracle
    rejected the module)."""

    verdict: str
    oracle: str
    message: str = ""
    #: the plain comparison under the per-type ULP floor (informative: a difference
    #: here is not a mismatch unless it also leaves the envelope)
    comparison: Verdict | None = None
    #: the oracle's result against the envelope (``None`` when the plain comparison
    #: already agreed within the floor, which lies inside every envelope)
    envelope: EnvelopeVerdict | None = None
    #: the sampled ``Envelope`` behind ``envelope`` (to judge outputs one by one
    #: without sampling again)
    envelope_model: Envelope | None = field(default=None, repr=False)
    expected: object = None  # hloref's value
    actual: object = None  # the oracle's value
    culprit: IsolatedInstruction | None = None
    isolated: list[IsolatedInstruction] = field(default_factory=list)
    #: where a mismatch no single instruction reproduces comes from: "code generation"
    #: (XLA's optimized module, evaluated by hloref, is inside the envelope) or "HLO
    #: passes" (it is not); ``None`` otherwise
    fault_stage: str | None = None
    #: the optimized module's first fusion whose oracle result differs (code generation)
    optimized_culprit: IsolatedInstruction | None = None
    #: the ``gap`` record of ``known_classes`` explaining a difference (verdict
    #: ``known-gap``)
    known_gap: str | None = None
    #: the ``xla-difference`` record when a mismatch or a crash is an XLA:CPU behaviour
    #: already known (a bug reported, a documented limitation): still a mismatch
    known_difference: str | None = None
    #: the ``undetermined`` record (verdict ``undetermined``): the cause, with the
    #: elements concerned and what was checked in ``message``
    undetermined: str | None = None
    oracle_result: OracleResult | None = None
    #: hloref's value of every entry instruction (computed for the comparison anyway;
    #: the known-difference classifiers read operands from it instead of evaluating again)
    entry_values: dict = field(default_factory=dict, repr=False)
    debug_options: dict = field(default_factory=dict)
    policy: EnvelopePolicy | None = None
    hloref_seconds: float = 0.0
    envelope_seconds: float = 0.0
    oracle_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.verdict == "match"

    @property
    def oracle_label(self) -> str:
        """The name of the oracle's value in reports (``fuzz/vocabulary.py``)."""
        return oracle_label(self.oracle)

    @property
    def oracle_ran(self) -> bool:
        """Whether the oracle ran (or its value was given): an ``error`` or
        ``unsupported`` verdict with no oracle run is hloref refusing the module."""
        return self.oracle_result is not None

    def summary(self) -> str:
        theirs = self.oracle_label
        if self.verdict in ("error", "unsupported") and self.message.startswith("hloref"):
            meaning = "hloref rejected the module" + (
                "" if self.oracle_ran else f"; {theirs} did not run")
        elif self.verdict in ("error", "unsupported"):
            meaning = f"{theirs} rejected the module"
        else:
            meaning = verdict_meaning(self.verdict, theirs=theirs)
        lines = [f"verdict: {self.verdict} (oracle {self.oracle}"
                 + (f", debug options {self.debug_options}" if self.debug_options else "")
                 + f"): {meaning}"]
        if self.message:
            lines.append(self.message)
        if self.envelope is not None:
            p = self.policy
            how = f" ({p.samples} samples, widened {p.widen:g}x)" if p else ""
            lines.append(f"final result: {self.envelope.describe(theirs=theirs)}{how}")
        elif self.comparison is not None and self.comparison.ok and self.verdict == "match":
            lines.append(f"final result: {theirs}'s value is within the per-type ULP floor of "
                         f"hloref's")
        if self.comparison is not None and not self.comparison.ok and self.verdict == "match":
            lines.append(f"differences beyond the ULP floor, all inside the envelope: "
                         f"{self.comparison.details(theirs=theirs)}")
        if self.undetermined:
            lines.append(f"undetermined ({self.undetermined}): "
                         f"{BY_NAME[self.undetermined].reason}")
        if self.known_gap:
            lines.append(f"known semantic gap ({self.known_gap}): "
                         f"{BY_NAME[self.known_gap].reason}")
        if self.known_difference:
            lines.append(f"a known XLA:CPU difference ({self.known_difference}): "
                         f"{BY_NAME[self.known_difference].reason}")
        if self.culprit is not None:
            lines.append(f"first instruction outside its own envelope: "
                         f"{self.culprit.where(theirs)}")
        if self.fault_stage == "code generation":
            lines.append("every instruction is inside its envelope alone, and XLA's optimized "
                         "module evaluated by hloref is inside the envelope: the HLO passes are "
                         "innocent; the fault is in code generation")
            if self.optimized_culprit is not None:
                lines.append(f"first instruction of the optimized module that differs on the "
                             f"oracle: {self.optimized_culprit.where(theirs)}")
        elif self.fault_stage == "before code generation":
            lines.append("every instruction is inside its envelope alone, but XLA's optimized "
                         "module evaluated by hloref is outside the envelope: the answer changed "
                         "before code generation, in XLA's parser, the StableHLO conversion or "
                         "an HLO pass (--reduce DIR attributes the stage; --blame names a pass)")
        if self.oracle_result is not None and self.oracle_result.stderr_tail and \
                self.verdict in ("crash", "timeout"):
            lines.append("oracle stderr (last lines):\n" + self.oracle_result.stderr_tail)
        return "\n".join(lines)


# ---------------------------------------------------------------- isolation


def _has_token(shape) -> bool:
    return any(isinstance(s, TokenShape) for s in flatten_shape(shape))


def _magnitude(value):
    """|value| in the value's own dtype (complex: |z| + 0j), for accumulation bounds."""
    if not isinstance(value, np.ndarray) or value.dtype.kind in "biu" or value.dtype == np.bool_:
        return value
    if value.dtype.kind == "c":
        return np.abs(value).astype(value.dtype)
    return np.abs(value.astype(np.float64)).astype(value.dtype)


def _accumulation_atol(module: Module, instr: Instruction, operands: list, expected=None, *,
                       ftz: bool = True):
    """Σ|terms| bound for accumulating ops: the op evaluated by hloref on |operands|
    (with ``ftz``, plus the terms XLA:CPU may flush, ``perturb.flushed_terms``);
    expansion error bounds for batch norm, cholesky and triangular-solve."""
    from hloref.evaluator.interpreter import Interpreter
    if instr.opcode in EXPANDED_OPS:
        return expander_atol(instr, operands, expected)
    if instr.opcode in COMPLEX_FORMULA_OPS and isinstance(instr.shape, ArrayShape) and \
            instr.shape.element_type.is_complex:
        bound = complex_formula_atol(instr.opcode, operands, instr.shape.element_type)
        return None if bound is None else {(): np.nan_to_num(bound, nan=np.inf)}
    if instr.opcode not in _ACCUMULATING or not isinstance(instr.shape, (ArrayShape, TupleShape)):
        return None
    try:
        if instr.opcode == "fft":
            # |any output| <= sum |x| over the transform: a scalar bound per module
            total = float(np.sum(np.abs(operands[0].astype(np.complex128))))
            magnitude = np.full(instr.shape.dims, total)
        else:
            iso = isolated_module(module, instr)
            abs_ops = [_magnitude(o) for o in operands]
            magnitude = Interpreter(iso).run(abs_ops)
    except Exception:  # noqa: BLE001 - a bound is best effort; fall back to no atol
        return None
    shapes = flatten_shape(instr.shape)
    leaves = magnitude if isinstance(magnitude, tuple) else (magnitude,)
    n_terms = 1
    for o in instr.operands:
        if isinstance(o.shape, ArrayShape):
            n_terms = max(n_terms, o.shape.size)
    atol = {}
    for i, (leaf, shape) in enumerate(zip(leaves, shapes)):
        if isinstance(shape, ArrayShape) and (shape.element_type.is_float or
                                              shape.element_type.is_complex):
            bound = accumulation_atol(n_terms, np.abs(leaf.astype(np.complex128)).real
                                      if shape.element_type.is_complex else
                                      np.abs(leaf.astype(np.float64)), shape.element_type)
            if ftz:
                bound = bound + flushed_terms(n_terms, shape.element_type)
            atol[(i,) if isinstance(instr.shape, TupleShape) else ()] = bound
    return atol or None


#: Instructions whose own envelope is sampled (they run computations).
_COMPOSITE = opcodes_with("composite")


def instruction_verdict(module: Module, instr: Instruction, operands: list, expected, actual,
                        policy: EnvelopePolicy | None = None) -> Verdict:
    """Is the oracle's ``actual`` inside ``instr``'s own envelope, given these operand
    values? For one op that is its budget (``compare``: per-type and per-opcode ULPs,
    ``2 n eps sum|terms|`` for accumulations, expansion bounds); for an instruction that
    runs computations, the sampled envelope of the instruction alone."""
    atol = _accumulation_atol(module, instr, operands, expected,
                              ftz=(policy or EnvelopePolicy()).freedoms.ftz)
    verdict = compare_values(actual, expected, opcode=instr.opcode, atol=atol)
    if verdict.ok or instr.opcode not in _COMPOSITE or not instr.called_computation_names():
        return verdict
    try:
        iso = isolated_module(module, instr)
        s = sample(iso, list(operands), policy or EnvelopePolicy())
        inside = Envelope.of(s, policy or EnvelopePolicy(), iso).check(actual)
    except HloError:
        return verdict
    return Verdict("match") if inside.ok else Verdict("mismatch", str(inside))


def isolate(module: Module, values: dict, worker: OracleWorker, *,
            computation: Computation | None = None, stop_at_first: bool = True,
            recurse: bool = True, oracle_module: Module | None = None,
            debug_options: dict | None = None,
            policy: EnvelopePolicy | None = None) -> list[IsolatedInstruction]:
    """Run each instruction of ``computation`` (default: the entry) alone on the oracle
    and judge it against its own envelope (``instruction_verdict``).

    ``values`` maps ``(computation name, instruction name)`` to hloref's value. With
    ``oracle_module`` (e.g. a hand-edited or transformed copy), the oracle runs that
    module's instruction of the same name, fed with ``module``'s operand values."""
    oracle_module = oracle_module or module
    from hloref.printer import module_to_text
    comp = computation or module.entry
    from hloref.evaluator.interpreter import topological_order
    results: list[IsolatedInstruction] = []
    # an instruction that crashes the oracle alone, while the module it came from ran,
    # says nothing of the mismatch being localised (a known crash of the op alone, such
    # as a 2-bit concatenate, that the whole program's compile folds away): such
    # entries are listed after every value verdict, so that the first value mismatch,
    # if any, is the culprit
    crashed_alone: list[IsolatedInstruction] = []
    for instr in topological_order(comp):
        if instr.opcode in _STRUCTURAL or _has_token(instr.shape) or \
                any(_has_token(o.shape) for o in instr.operands):
            continue
        key = (comp.name, instr.name)
        if key not in values:
            continue
        operands = [values[(comp.name, o.name)] for o in instr.operands]
        oracle_instr = _same_instruction(oracle_module, comp.name, instr)
        if oracle_instr is None:
            continue
        iso = isolated_module(oracle_module, oracle_instr)
        text = module_to_text(iso)
        result = worker.run(text, operands, debug_options=debug_options)
        if not result.ok:
            verdict = Verdict("mismatch" if result.kind in ("crash", "timeout") else result.kind,
                              f"oracle {result.kind}: {result.message}")
            if result.kind in ("unsupported", "error"):
                continue  # the oracle cannot run this instruction alone: no evidence either way
        else:
            verdict = instruction_verdict(module, instr, operands, values[key], result.value,
                                          policy)
        entry = IsolatedInstruction(comp.name, instr.name, instr.opcode, verdict, text, operands,
                                    values[key], result.value)
        if result.kind in ("crash", "timeout"):
            crashed_alone.append(entry)
            continue
        results.append(entry)
        if not verdict.ok:
            if recurse and instr.opcode == "while" and oracle_instr.opcode == "while":
                entry.inner = _open_loop(module, comp.name, instr, oracle_instr, operands[0],
                                         worker, oracle_module=oracle_module,
                                         debug_options=debug_options, policy=policy)
            elif recurse:
                opened = _opened(instr, operands, values[key], result.value)
                if opened is not None:
                    entry.inner = _first_inside(module, module.computations[opened[0]],
                                                opened[1], worker, oracle_module=oracle_module,
                                                debug_options=debug_options, policy=policy)
            if stop_at_first:
                break
    return results + crashed_alone


def _first_inside(module: Module, comp: Computation, args: list, worker: OracleWorker, *,
                  oracle_module: Module, debug_options, policy) -> IsolatedInstruction | None:
    """The first instruction of ``comp``, run by hloref on ``args``, that is outside its
    own envelope alone on the oracle (itself opened in turn), or ``None``."""
    inner = isolate(module, _trace_computation(module, comp, args), worker, computation=comp,
                    stop_at_first=True, recurse=True, oracle_module=oracle_module,
                    debug_options=debug_options, policy=policy)
    return next((r for r in inner if not r.verdict.ok), None)


#: How many iterations of a mismatching ``while`` are stepped on the oracle to find the
#: first one XLA computes differently (each costs two oracle runs).
LOOP_OPEN_ITERATIONS = 16


def _open_loop(module: Module, where: str, loop: Instruction, oracle_loop: Instruction, init,
               worker: OracleWorker, *, oracle_module: Module, debug_options, policy
               ) -> IsolatedInstruction | None:
    """The first step of ``loop`` XLA computes differently: hloref runs the loop from
    ``init``; at each iteration (up to ``LOOP_OPEN_ITERATIONS``) the oracle runs the
    condition, then the body, alone on hloref's state (each as a ``call``); the first
    whose result is outside its own envelope is returned, opened like a call, with
    its iteration. ``None`` when every step agrees (the loop as a whole then differs
    through its trip count beyond the cap, or not at all alone)."""
    from hloref.attrs import ComputationRef
    from hloref.evaluator.interpreter import Interpreter
    from hloref.printer import module_to_text
    cond, body = (module.computations[str(loop.attrs[k])] for k in ("condition", "body"))
    steps = []  # (computation, its step as a call, the oracle's step module), built once
    for comp, key in ((cond, "condition"), (body, "body")):
        step = Instruction(name=loop.name, opcode="call", shape=comp.root.shape,
                           operands=list(loop.operands[:1]),
                           attrs={"to_apply": ComputationRef(comp.name)})
        oracle_step = dataclasses.replace(
            step, attrs={"to_apply": ComputationRef(str(oracle_loop.attrs[key]))})
        steps.append((comp, step, module_to_text(isolated_module(oracle_module, oracle_step))))
    interp, state = Interpreter(module), init
    for iteration in range(LOOP_OPEN_ITERATIONS):
        for comp, step, text in steps:
            expected = interp.call(comp, [state])
            result = worker.run(text, [state], debug_options=debug_options)
            if not result.ok:
                if result.kind in ("unsupported", "error"):
                    return None  # the oracle cannot run the step alone: no evidence
                verdict = Verdict("mismatch", f"oracle {result.kind}: {result.message}")
            else:
                verdict = instruction_verdict(module, step, [state], expected, result.value,
                                              policy)
            if not verdict.ok:
                entry = IsolatedInstruction(where, loop.name, "while", verdict, text, [state],
                                            expected, result.value, iteration=iteration,
                                            step=("condition %" if comp is cond else "body %")
                                            + comp.name)
                entry.inner = _first_inside(module, comp, [state], worker,
                                            oracle_module=oracle_module,
                                            debug_options=debug_options, policy=policy)
                return entry
            if comp is cond and not bool(np.asarray(expected)):
                return None
        state = expected
    return None


def _opened(instr: Instruction, operands: list, expected=None, actual=None
            ) -> tuple[str, list] | None:
    """The computation a mismatching composite is opened into, with its arguments: a
    fusion's or call's callee with the operands; a conditional's branch that ran (the
    pred form: true, false; the index form: branch i, an index outside [0, N) the last),
    with that branch's operand; a map's computation with the operands' elements at the
    first element where the oracle's result (``actual``) differs from hloref's
    (``expected``). None for the others (a loop is stepped: ``_open_loop``)."""
    if instr.opcode in ("fusion", "call"):
        return instr.called_computation_names()[0], operands
    if instr.opcode == "map":
        index = _first_difference(expected, actual)
        if index is None:
            return None
        return instr.called_computation_names()[0], [np.asarray(o)[index] for o in operands]
    if instr.opcode != "conditional" or not operands:
        return None
    selector = np.asarray(operands[0])
    if "branch_computations" in instr.attrs:
        branches = [str(b) for b in instr.attrs["branch_computations"]]
        index = int(selector)
        index = index if 0 <= index < len(branches) else len(branches) - 1
    else:
        branches = [str(instr.attrs["true_computation"]), str(instr.attrs["false_computation"])]
        index = 0 if bool(selector) else 1
    if index + 1 >= len(operands):
        return None
    return branches[index], [operands[index + 1]]


def _first_difference(expected, actual) -> tuple | None:
    """The first index where two arrays of one shape differ (NaNs alike), or ``None``."""
    if not isinstance(expected, np.ndarray) or not isinstance(actual, np.ndarray) or \
            expected.shape != actual.shape or expected.dtype != actual.dtype:
        return None
    found = np.argwhere(differs(expected, actual))
    return tuple(int(i) for i in found[0]) if len(found) else None


def _same_instruction(module: Module, comp_name: str, instr: Instruction):
    comp = module.computations.get(comp_name)
    if comp is None and module.entry is not None and comp_name != module.entry_name:
        return None
    if comp is None:
        comp = module.entry
    for candidate in comp.instructions:
        if candidate.name == instr.name:
            return candidate if len(candidate.operands) == len(instr.operands) else None
    return None


def _trace_computation(module: Module, comp: Computation, args: list) -> dict:
    from hloref.evaluator.interpreter import Interpreter
    values: dict = {}

    def observe(c, instr, value):
        if c is comp:
            values[(c.name, instr.name)] = value

    Interpreter(module, observer=observe).call(comp, list(args))
    return values


# ---------------------------------------------------------------- diff


def diff(module: Module | str, args, oracle: str = "xla", *, isolate_all: bool = False,
         worker: OracleWorker | None = None, timeout: float = 120.0, limits=None,
         localize: bool = True, oracle_module: Module | str | None = None,
         debug_options: dict | None = None, policy: EnvelopePolicy | None = None,
         oracle_value=None, verify: bool = True) -> DiffReport:
    """Compare hloref on ``module`` with ``oracle`` on ``oracle_module`` (default: the same
    module), both with inputs ``args``, under the envelope.

    ``debug_options`` go to the oracle's compiler and set the envelope's freedoms
    (``xla_allow_excess_precision=False`` takes the excess-precision freedom away).
    ``oracle_value``: a result the oracle already returned (e.g. to a test), judged
    without running the module again (localisation still runs the worker). ``verify``:
    the module is verified first, as ``hloref.evaluate`` does (a module XLA's verifier
    would reject is an ``error`` report naming the instruction, not a comparison)."""
    from hloref import api
    from hloref.evaluator.interpreter import Interpreter
    from hloref.printer import module_to_text
    if isinstance(module, str):
        import hloref
        module = hloref.parse(module)
    debug_options = dict(debug_options or {})
    policy = (policy or EnvelopePolicy()).with_debug_options(debug_options) \
        if debug_options else (policy or EnvelopePolicy())
    own_worker = worker is None and (oracle_value is None or localize)
    worker = worker or (OracleWorker(oracle, timeout=timeout) if own_worker else None)
    try:
        params = module.entry.parameters
        values: dict = {}

        def observe(c, instr, value):
            if c is module.entry:
                values[(c.name, instr.name)] = value

        t0 = time.perf_counter()
        try:
            if verify:
                api.verified(module)
            coerced = [api.coerce_argument(a, p.shape, f"argument {i}")
                       for i, (a, p) in enumerate(zip(args, params))]
            ours = Interpreter(module, limits=limits, observer=observe).run(coerced)
        except HloError as exc:
            report = DiffReport("unsupported" if type(exc).__name__ == "HloUnsupportedError"
                                else "error", oracle, message=f"hloref: {exc}",
                                debug_options=debug_options, policy=policy)
            return _judged(report, Case("error", module, values, list(args), report, oracle,
                                        error=exc))
        hloref_seconds = time.perf_counter() - t0
        if isinstance(oracle_module, str):
            import hloref
            oracle_module = hloref.parse(oracle_module)
        text = module_to_text(oracle_module or module)
        if oracle_value is not None:
            result = OracleResult("ok", value=oracle_value)
        else:
            result = worker.run(text, coerced, timeout=timeout, debug_options=debug_options or None)
        report = DiffReport("match", oracle, expected=ours, actual=result.value,
                            oracle_result=result, hloref_seconds=hloref_seconds,
                            oracle_seconds=result.seconds, debug_options=debug_options,
                            policy=policy, entry_values=values)
        if not result.ok:
            report.verdict = result.kind
            report.message = result.message
            return _judged(report, Case(result.kind, module, values, coerced, report, oracle))
        report.comparison = compare_values(result.value, ours)
        if not report.comparison.ok or isolate_all:
            t1 = time.perf_counter()
            try:
                s = sample(module, coerced, policy, limits=limits)
                model = Envelope.of(s, policy, module)
                report.envelope_model, report.envelope, report.policy = confirmed(
                    module, coerced, result.value, model, model.check(result.value), policy,
                    limits=limits)
            except HloError as exc:
                report.verdict = "error"
                report.message = f"hloref (envelope): {exc}"
                return report
            report.envelope_seconds = time.perf_counter() - t1
        inside = report.comparison.ok or (report.envelope is not None and report.envelope.ok)
        if inside and not isolate_all:
            return report
        if (localize or isolate_all) and worker is not None:
            report.isolated = isolate(module, values, worker, stop_at_first=not isolate_all,
                                      oracle_module=oracle_module,
                                      debug_options=debug_options or None, policy=policy)
            bad = [r for r in report.isolated if not r.verdict.ok]
            report.culprit = bad[0] if bad else None
        if inside:
            return report
        report.verdict = "mismatch"
        _judged(report, Case("mismatch", module, values, coerced, report, oracle))
        if report.verdict == "mismatch" and report.culprit is None and localize and \
                worker is not None and oracle_module is None:
            _localize_in_compiled_program(report, module, text, coerced, values, worker,
                                          debug_options, policy, limits)
        return report
    finally:
        if own_worker and worker is not None:
            worker.close()


def _judged(report: DiffReport, case: Case) -> DiffReport:
    """``report`` after the one check of every known class (``known_classes.known_class``):
    an ``undetermined`` record makes the verdict ``undetermined`` (its cause and
    elements in the message), a ``gap`` makes it ``known-gap``, an ``xla-difference``
    names itself and leaves the verdict (mismatch, crash)."""
    record = known_class(case)
    if record is None:
        return report
    if record.kind == "undetermined":
        report.verdict = "undetermined"
        report.undetermined = record.name
        report.message = f"{record.explain(case)}" + (
            f" ({report.message})" if report.message and case.verdict == "error" else "")
    elif record.kind == "gap":
        report.verdict = "known-gap"
        report.known_gap = record.name
    else:
        report.known_difference = record.name
    return report


def _localize_in_compiled_program(report: DiffReport, module: Module, text: str, args: list,
                                  values: dict, worker: OracleWorker, debug_options: dict,
                                  policy: EnvelopePolicy, limits) -> None:
    """No instruction is wrong alone: evaluate XLA's optimized module with hloref. Inside
    the envelope: the passes are innocent, isolate the optimized module's fusions on the
    oracle; outside: the answer changed before code generation (parser, conversion or an
    HLO pass)."""
    import hloref
    from hloref.evaluator.interpreter import Interpreter
    got = worker.run(text, args, optimized=True, debug_options=debug_options or None)
    if not got.ok or not got.optimized_hlo:
        report.message = ("no single instruction is outside its own envelope: the fault arises "
                          "in the compiled program as a whole")
        return
    try:
        optimized = hloref.parse(got.optimized_hlo)
        opt_values: dict = {}

        def observe(c, instr, value):
            if c is optimized.entry:
                opt_values[(c.name, instr.name)] = value

        ours = Interpreter(optimized, limits=limits, observer=observe).run(list(args))
        s = sample(module, args, policy, limits=limits)
        inside = Envelope.of(s, policy, module).check(ours)
    except HloError as exc:
        report.message = (f"no single instruction is outside its own envelope; hloref cannot "
                          f"evaluate XLA's optimized module ({exc})")
        return
    if not inside.ok:
        report.fault_stage = "before code generation"
        return
    report.fault_stage = "code generation"
    bad = [r for r in isolate(optimized, opt_values, worker, stop_at_first=True,
                              debug_options=debug_options or None, policy=policy)
           if not r.verdict.ok]
    report.optimized_culprit = bad[0] if bad else None
