"""Differential testing: the same module, the same inputs, hloref and an oracle.

``diff(module, args, oracle="xla")`` evaluates the module with hloref (recording
every intermediate value), runs it on the oracle in a worker process, and compares
the results under the shared policy (``fuzz/compare.py``). When the results
differ, *isolation* re-runs every instruction on the oracle alone, fed with
hloref's values of its operands, and names the first instruction whose own result
differs (like XLA's ``run_hlo_module --isolate_instructions``); a mismatching
``fusion`` or ``call`` is opened and its body isolated in turn.

A final difference that no single instruction reproduces is rounding that
accumulated along the program; the report says so and does not call it a
miscompilation.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

import numpy as np

from hloref.errors import HloError
from hloref.ir import Computation, Instruction, Module
from hloref.shapes import ArrayShape, TokenShape, TupleShape, flatten_shape

from .compare import Verdict, accumulation_atol, compare_values, has_discontinuity, known_gap
from .workers import OracleResult, OracleWorker

__all__ = ["DiffReport", "IsolatedInstruction", "diff", "isolate", "isolated_module"]

#: Instructions that only move or forward values: never a miscompilation on their own.
_STRUCTURAL = frozenset({"parameter", "constant", "tuple", "get-tuple-element", "after-all",
                         "add-dependency", "opt-barrier", "domain", "bitcast"})
_ACCUMULATING = frozenset({"dot", "convolution", "reduce", "reduce-window", "ragged-dot",
                           "scaled-dot", "fft"})


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

    def innermost(self) -> "IsolatedInstruction":
        return self.inner.innermost() if self.inner is not None else self


@dataclass
class DiffReport:
    """``verdict``: match, mismatch, known-gap (a documented implementation-defined
    difference, ``compare.KNOWN_GAPS``), crash, timeout, unsupported, error (hloref or
    the oracle rejected the module)."""

    verdict: str
    oracle: str
    message: str = ""
    comparison: Verdict | None = None
    expected: object = None  # hloref's value
    actual: object = None  # the oracle's value
    culprit: IsolatedInstruction | None = None
    isolated: list[IsolatedInstruction] = field(default_factory=list)
    explained_by_rounding: bool = False
    #: key of ``compare.KNOWN_GAPS`` explaining a difference (verdict ``known-gap``)
    known_gap: str | None = None
    oracle_result: OracleResult | None = None
    hloref_seconds: float = 0.0
    oracle_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.verdict == "match"

    def summary(self) -> str:
        lines = [f"verdict: {self.verdict} (oracle {self.oracle})"]
        if self.message:
            lines.append(self.message)
        if self.comparison is not None and not self.comparison.ok:
            lines.append(f"final result: {self.comparison}")
        if self.known_gap:
            from .compare import KNOWN_GAPS
            lines.append(f"known semantic gap ({self.known_gap}): {KNOWN_GAPS[self.known_gap]}")
        if self.explained_by_rounding:
            lines.append("every instruction agrees in isolation: the final difference is "
                         "rounding accumulated along the program, not a miscompilation")
        if self.culprit is not None:
            c = self.culprit.innermost()
            lines.append(f"first differing instruction: %{c.name} ({c.opcode}) in "
                         f"computation {c.computation}: {c.verdict}")
        if self.oracle_result is not None and self.oracle_result.stderr_tail and \
                self.verdict in ("crash", "timeout"):
            lines.append("oracle stderr (last lines):\n" + self.oracle_result.stderr_tail)
        return "\n".join(lines)


# ---------------------------------------------------------------- isolation


def _called_closure(module: Module, comp: Computation, out: dict) -> None:
    for instr in comp.instructions:
        for name in instr.called_computation_names():
            if name not in out:
                callee = module.computations[name]
                _called_closure(module, callee, out)
                out[name] = callee


def isolated_module(module: Module, instr: Instruction) -> Module:
    """A module whose entry runs ``instr`` alone on parameters (one per operand)."""
    params = []
    for i, operand in enumerate(instr.operands):
        params.append(Instruction(name=f"isolated.p{i}", opcode="parameter", shape=operand.shape,
                                  parameter_number=i))
    clone = dataclasses.replace(instr, operands=params, control_predecessors=[])
    entry = Computation(name="isolated.entry", instructions=params + [clone], root=clone,
                        is_entry=True)
    callees: dict[str, Computation] = {}
    _called_closure(module, Computation("tmp", [clone]), callees)
    comps = dict(callees)
    comps[entry.name] = entry
    return Module(name=f"isolated_{instr.name}".replace("-", "_").replace(".", "_"),
                  computations=comps, entry_name=entry.name)


def _has_token(shape) -> bool:
    return any(isinstance(s, TokenShape) for s in flatten_shape(shape))


def _magnitude(value):
    """|value| in the value's own dtype (complex: |z| + 0j), for accumulation bounds."""
    if not isinstance(value, np.ndarray) or value.dtype.kind in "biu" or value.dtype == np.bool_:
        return value
    if value.dtype.kind == "c":
        return np.abs(value).astype(value.dtype)
    return np.abs(value.astype(np.float64)).astype(value.dtype)


_EXPANDED = frozenset({"batch-norm-training", "batch-norm-inference", "batch-norm-grad",
                       "cholesky", "triangular-solve"})


_COMPLEX_FORMULA = frozenset({"sine", "cosine", "power", "atan2"})


def _expander_atol(instr: Instruction, operands: list, expected):
    """Error bounds for ops XLA:CPU expands into element-type arithmetic
    (``compare.batch_norm_atol``, ``cholesky_atol``, ``triangular_solve_atol``)."""
    from . import compare
    shapes = flatten_shape(instr.shape)
    if not shapes or not isinstance(shapes[0], ArrayShape):
        return None
    et = shapes[0].element_type
    if not (et.is_float or et.is_complex):
        return None
    a = instr.attrs
    try:
        if instr.opcode.startswith("batch-norm"):
            if et.is_complex:
                return None
            bounds = compare.batch_norm_atol(instr.opcode, operands, epsilon=a.get("epsilon", 0.0),
                                             feature_index=a.get("feature_index", 0), et=et)
        elif instr.opcode == "cholesky":
            bounds = [compare.cholesky_atol(operands[0], expected, lower=a.get("lower", True),
                                            et=et)]
        else:
            bounds = [compare.triangular_solve_atol(
                operands[0], expected, left_side=a.get("left_side", False),
                lower=a.get("lower", False), unit_diagonal=a.get("unit_diagonal", False),
                transpose_a=a.get("transpose_a", "NO_TRANSPOSE"), et=et)]
    except Exception:  # noqa: BLE001 - a bound is best effort
        return None
    if isinstance(instr.shape, TupleShape):
        return {(i,): np.asarray(b, np.float64) for i, b in enumerate(bounds)}
    return {(): np.asarray(bounds[0], np.float64)} if bounds else None


def _accumulation_atol(module: Module, instr: Instruction, operands: list, expected=None):
    """Σ|terms| bound for accumulating ops: the op evaluated by hloref on |operands|;
    expansion error bounds for batch norm, cholesky and triangular-solve."""
    from hloref.evaluator.interpreter import Interpreter
    if instr.opcode in _EXPANDED:
        return _expander_atol(instr, operands, expected)
    if instr.opcode in _COMPLEX_FORMULA and isinstance(instr.shape, ArrayShape) and \
            instr.shape.element_type.is_complex:
        from .compare import complex_formula_atol
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
            atol[(i,) if isinstance(instr.shape, TupleShape) else ()] = bound
    return atol or None


def isolate(module: Module, values: dict, worker: OracleWorker, *,
            computation: Computation | None = None, stop_at_first: bool = True,
            recurse: bool = True, oracle_module: Module | None = None) -> list[IsolatedInstruction]:
    """Run each instruction of ``computation`` (default: the entry) alone on the oracle.

    ``values`` maps ``(computation name, instruction name)`` to hloref's value. With
    ``oracle_module`` (e.g. a hand-edited or transformed copy), the oracle runs that
    module's instruction of the same name, fed with ``module``'s operand values."""
    oracle_module = oracle_module or module
    from hloref.printer import module_to_text
    comp = computation or module.entry
    from hloref.evaluator.interpreter import _topological
    results: list[IsolatedInstruction] = []
    for instr in _topological(comp):
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
        result = worker.run(text, operands)
        if not result.ok:
            verdict = Verdict("mismatch" if result.kind in ("crash", "timeout") else result.kind,
                              f"oracle {result.kind}: {result.message}")
            if result.kind in ("unsupported", "error"):
                continue  # the oracle cannot run this instruction alone: no evidence either way
        else:
            atol = _accumulation_atol(module, instr, operands, values[key])
            verdict = compare_values(result.value, values[key], opcode=instr.opcode, atol=atol)
        entry = IsolatedInstruction(comp.name, instr.name, instr.opcode, verdict, text, operands,
                                    values[key], result.value)
        results.append(entry)
        if not verdict.ok:
            if recurse and instr.opcode in ("fusion", "call"):
                callee = module.computations[instr.called_computation_names()[0]]
                inner_values = _trace_computation(module, callee, operands)
                inner = isolate(module, inner_values, worker, computation=callee,
                                stop_at_first=True, recurse=True, oracle_module=oracle_module)
                bad = [r for r in inner if not r.verdict.ok]
                entry.inner = bad[0] if bad else None
            if stop_at_first:
                break
    return results


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
         localize: bool = True, oracle_module: Module | str | None = None) -> DiffReport:
    """Compare hloref on ``module`` with ``oracle`` on ``oracle_module`` (default: the same
    module), both with inputs ``args``."""
    from hloref import api
    from hloref.evaluator.interpreter import Interpreter
    from hloref.printer import module_to_text
    if isinstance(module, str):
        import hloref
        module = hloref.parse(module)
    own_worker = worker is None
    worker = worker or OracleWorker(oracle, timeout=timeout)
    try:
        params = module.entry.parameters
        values: dict = {}

        def observe(c, instr, value):
            if c is module.entry:
                values[(c.name, instr.name)] = value

        t0 = time.perf_counter()
        try:
            coerced = [api.coerce_argument(a, p.shape, f"argument {i}")
                       for i, (a, p) in enumerate(zip(args, params))]
            ours = Interpreter(module, limits=limits, observer=observe).run(coerced)
        except HloError as exc:
            return DiffReport("unsupported" if type(exc).__name__ == "HloUnsupportedError"
                              else "error", oracle, message=f"hloref: {exc}")
        hloref_seconds = time.perf_counter() - t0
        if isinstance(oracle_module, str):
            import hloref
            oracle_module = hloref.parse(oracle_module)
        text = module_to_text(oracle_module or module)
        result = worker.run(text, coerced, timeout=timeout)
        report = DiffReport("match", oracle, expected=ours, actual=result.value,
                            oracle_result=result, hloref_seconds=hloref_seconds,
                            oracle_seconds=result.seconds)
        if not result.ok:
            report.verdict = result.kind
            report.message = result.message
            return report
        report.comparison = compare_values(result.value, ours, opcode=module.entry.root.opcode)
        if report.comparison.ok and not isolate_all:
            return report
        if localize or isolate_all:
            report.isolated = isolate(module, values, worker, stop_at_first=not isolate_all,
                                      oracle_module=oracle_module)
            bad = [r for r in report.isolated if not r.verdict.ok]
            report.culprit = bad[0] if bad else None
        if report.comparison.ok:
            return report
        if report.culprit is None and localize and (
                _looks_like_rounding(report.comparison, ours) or
                _root_bound_explains(module, values, result.value, ours) or
                _narrow_source_explains(module, result.value, ours)):
            report.explained_by_rounding = True
            return report
        gap = known_gap(module, values, oracle)
        if gap is None and report.culprit is None and localize and has_discontinuity(module):
            gap = "rounding-through-discontinuity"
        if gap is None and report.culprit is None and localize:
            from .compare import complex_branch_cut
            if complex_branch_cut(module, values):
                gap = "complex-branch-cut-signed-zero"
        if gap is None and report.culprit is None and localize:
            from .compare import narrow_accumulation_feeds_accumulation
            if narrow_accumulation_feeds_accumulation(module):
                gap = "narrow-accumulation-propagated"
        if gap is not None:
            report.verdict = "known-gap"
            report.known_gap = gap
            return report
        report.verdict = "mismatch"
        if report.culprit is None:
            report.message = ("no single instruction reproduces the difference in isolation: "
                              "it arises from how the program is compiled as a whole (fusion, "
                              "layout, algebraic rewrites)")
        return report
    finally:
        if own_worker:
            worker.close()


def _root_bound_explains(module: Module, values: dict, actual, ours) -> bool:
    """The final difference is within the root instruction's own error bound (an
    accumulating or expanded root that agreed in isolation under that bound). A tuple
    root is checked element by element against the bound of the instruction that
    produced each element."""
    root = module.entry.root
    if root.opcode == "tuple" and isinstance(actual, tuple) and isinstance(ours, tuple) and \
            len(actual) == len(ours) == len(root.operands):
        return all(compare_values(a, o, opcode=producer.opcode).ok or
                   _bound_explains(module, values, producer, a, o)
                   for producer, a, o in zip(root.operands, actual, ours))
    return _bound_explains(module, values, root, actual, ours)


def _bound_explains(module: Module, values: dict, instr, actual, ours) -> bool:
    if instr.opcode not in _ACCUMULATING and instr.opcode not in _EXPANDED and \
            instr.opcode not in _COMPLEX_FORMULA:
        return False
    try:
        operands = [values[(module.entry.name, o.name)] for o in instr.operands]
    except KeyError:
        return False
    atol = _accumulation_atol(module, instr, operands, ours)
    return atol is not None and compare_values(actual, ours, opcode=instr.opcode, atol=atol).ok


#: Ops that carry a value unchanged (a convert only when it widens a float).
_EXACT_CARRIERS = frozenset({"negate", "abs", "copy", "reshape", "transpose", "broadcast",
                             "slice", "reverse", "bitcast", "opt-barrier"})


def _narrow_source_explains(module: Module, actual, ours) -> bool:
    """The root only carries (widening converts, negate, copies, reshapes...) the value
    of an instruction P whose element type is a float of 16 bits or fewer, and the
    oracle's result, read back in P's type, is made of P-type values within the policy
    of P's opcode: a narrow rounding difference that agreed in isolation, carried
    exactly into a wider type (TF's f8 asinh 1 ULP off, then convert to f16). A result
    that is not made of P-type values (a dropped f8 rounding) is not explained."""
    from hloref.types import from_dtype
    instr = module.entry.root
    while instr.opcode in _EXACT_CARRIERS or (
            instr.opcode == "convert" and _widens_float(instr)):
        if not instr.operands:
            return False
        instr = instr.operands[0]
    if instr is module.entry.root or not isinstance(instr.shape, ArrayShape):
        return False
    et = instr.shape.element_type
    if not et.is_narrow_float or not isinstance(actual, np.ndarray) or \
            not isinstance(ours, np.ndarray) or actual.dtype.kind != "f":
        return False
    with np.errstate(all="ignore"):
        a_narrow = actual.astype(np.float32).astype(et.dtype)
        o_narrow = ours.astype(np.float32).astype(et.dtype)
        representable = np.array_equal(a_narrow.astype(np.float64), actual.astype(np.float64),
                                       equal_nan=True)
    return representable and from_dtype(o_narrow.dtype) == et and \
        compare_values(a_narrow, o_narrow, opcode=instr.opcode).ok


def _widens_float(instr: Instruction) -> bool:
    src = instr.operands[0].shape if instr.operands else None
    if not (isinstance(src, ArrayShape) and isinstance(instr.shape, ArrayShape)):
        return False
    a, b = src.element_type, instr.shape.element_type
    return a.is_float and b.is_float and b.float_format.mantissa_bits >= a.float_format.mantissa_bits \
        and b.bits >= a.bits


def _looks_like_rounding(comparison: Verdict, ours) -> bool:
    """A float-only difference where at least half the significant bits still agree."""
    from hloref.types import from_dtype
    leaf = ours
    for i in comparison.leaf:
        leaf = leaf[i]
    if not isinstance(leaf, np.ndarray):
        return False
    et = from_dtype(leaf.dtype)
    if not (et.is_float or et.is_complex):
        return False
    fmt = et.float_format or from_dtype(np.real(leaf).dtype).float_format
    return np.isfinite(comparison.max_rel) and comparison.max_rel <= 2.0 ** (-fmt.mantissa_bits / 2)
