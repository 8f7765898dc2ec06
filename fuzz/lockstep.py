"""The envelope's perturbed runs in lockstep: one pass over the program for all of them.

``run_lockstep`` evaluates a module once for several perturbed runs together, each run
keeping its own ``Perturber`` (its random generator, its schedule, its state), so
every run's value is the one it would have had alone, bit for bit. What is shared is
the interpreter's walk and, where it can be, the op's work:

* a value the runs all hold is kept once (``Same``: parameters, constants, loop
  counters, what is computed from them and left unperturbed); values that differ are
  stacked on a leading sample axis (``Stacked``) or, when they cannot be (tuples are
  kept element by element, tokens and differing shapes as they are), listed (``Each``);
* structural and elementwise ops (``BATCHED``) run once on the stacked operands, with
  the sample axis prepended to the result shape and to the attributes that name
  dimensions; every other op runs once per run (its values are each run's own, so
  nothing depends on which path it took);
* an instruction that no run perturbs (``Perturber.passes_through``) skips the
  perturbers; the others are perturbed run by run, with the run's operands and value;
* ``call`` and ``fusion`` run their computation in lockstep; a ``while`` (or
  ``conditional``) continues in lockstep as long as every run takes the same turn, and
  each run finishes it alone (its own interpreter, its own perturber) from the first
  iteration where they part.

The nominal run (which records the accumulation budgets) runs before, alone.
"""

from __future__ import annotations

import numpy as np

from hloref.errors import HloEvalError, HloLimitError, HloUnsupportedError
from hloref.evaluator.control import fused_arity, run_conditional
from hloref.evaluator.indexing import scalar_index
from hloref.evaluator.interpreter import Interpreter, forwarded
from hloref.ir import Computation, Module
from hloref.op_properties import opcodes_with, values_of
from hloref.opcodes import CATALOGUE
from hloref.shapes import ArrayShape

from .rounding_kernels import has_subnormal

__all__ = ["Same", "Stacked", "Each", "at", "gather", "BATCHED", "LockstepInterpreter",
           "run_lockstep", "lockstep_supported"]


class Same:
    """A value every run holds (one object)."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class Stacked:
    """Arrays of one shape and type, one per run, on a leading axis."""
    __slots__ = ("array",)

    def __init__(self, array: np.ndarray):
        self.array = array


class Each:
    """One value per run, as they are."""
    __slots__ = ("values",)

    def __init__(self, values: list):
        self.values = values


def at(value, k: int):
    """Run ``k``'s value."""
    t = type(value)
    if t is Same:
        return value.value
    if t is Stacked:
        return value.array[k, ...]  # an array, also of rank 0
    if t is Each:
        return value.values[k]
    return tuple(at(v, k) for v in value)


def gather(values: list):
    """The lockstep value of the runs' ``values``."""
    first = values[0]
    if all(v is first for v in values):
        return Same(first)
    if type(first) is tuple and all(type(v) is tuple and len(v) == len(first) for v in values):
        return tuple(gather([v[j] for v in values]) for j in range(len(first)))
    if type(first) is np.ndarray and all(
            type(v) is np.ndarray and v.shape == first.shape and v.dtype == first.dtype
            for v in values):
        return Stacked(np.stack(values))
    return Each(list(values))


def _stacked(value, runs: int, shape) -> np.ndarray | None:
    """The array of a ``Same`` or ``Stacked`` array value with the sample axis (a
    broadcast view of a ``Same`` one), or None."""
    if type(value) is Stacked:
        return value.array
    if type(value) is Same and type(value.value) is np.ndarray:
        return np.broadcast_to(value.value, (runs,) + value.value.shape)
    return None


class _Elements:
    """A tuple parameter that only get-tuple-elements read, each element let go after
    its last read (so that an update of it may be made in place: ``_in_place``)."""
    __slots__ = ("items", "left")

    def __init__(self, items: list, left: dict):
        self.items, self.left = items, left

    def read(self, k: int):
        value = self.items[k]
        self.left[k] -= 1
        if not self.left[k]:
            self.items[k] = None
        return value


def lockstep_supported(module: Module) -> bool:
    """Whether ``run_lockstep`` can run ``module``: no runtime dimension sizes (their side
    table is per run) and no op with effects between devices or on the host."""
    from hloref.evaluator.dynamic import DYNAMIC_SOURCES
    return not any(i.opcode in DYNAMIC_SOURCES or i.opcode in _NOT_IN_LOCKSTEP or
                   (i.opcode == "custom-call" and
                    i.attrs.get("custom_call_has_side_effect") is True)
                   for c in module.computations.values() for i in c.instructions)


#: Ops whose effects are outside their value (a run's infeed, outfeed, send, receive or
#: collective must happen in that run; ``rng`` draws from a state of its own): modules
#: with them, or with a custom call that has side effects, are sampled run by run.
_NOT_IN_LOCKSTEP = frozenset(o for o, row in CATALOGUE.items()
                             if "side-effecting" in row.groups) | opcodes_with("rendezvous")

#: Elementwise ops that run once on stacked operands: their op functions read and write
#: element by element whatever the rank.
_ELEMENTWISE = opcodes_with("lockstep-elementwise")


def _batched_shape(shape, runs: int) -> ArrayShape:
    return ArrayShape(shape.element_type, (runs,) + tuple(shape.dims))


def _shift(dims) -> tuple:
    return tuple(int(d) + 1 for d in dims)


def _elementwise(step, ops, runs):
    shape = step.instr.shape
    rank = len(shape.dims)
    arrays = []
    for o in ops:
        if type(o) is Same:
            v = o.value
            arrays.append(v if np.ndim(v) == 0 else np.broadcast_to(v, (runs,) + v.shape))
        elif type(o) is Stacked:
            a = o.array
            arrays.append(a if a.ndim == rank + 1 else a.reshape((runs,) + (1,) * rank))
        else:
            return None
    return step.fn(*arrays, **{**step.kwargs, "shape": _batched_shape(shape, runs)})


def _broadcast(step, ops, runs):
    x = _stacked(ops[0], runs, None)
    kw = step.kwargs
    return step.fn(x, shape=_batched_shape(step.instr.shape, runs),
                   dimensions=(0,) + _shift(kw.get("dimensions", ())))


def _reshape(step, ops, runs):
    return ops[0].array.reshape((runs,) + tuple(step.instr.shape.dims))


def _transpose(step, ops, runs):
    return np.ascontiguousarray(np.transpose(ops[0].array,
                                             (0,) + _shift(step.kwargs["dimensions"])))


def _slice(step, ops, runs):
    index = tuple(np.s_[d.start:d.limit:d.stride] for d in step.kwargs["slice"])
    return np.ascontiguousarray(ops[0].array[(slice(None),) + index])


def _concatenate(step, ops, runs):
    arrays = [_stacked(o, runs, None) for o in ops]
    if any(a is None for a in arrays):
        return None
    (dim,) = tuple(step.kwargs["dimensions"])
    return np.concatenate(arrays, axis=dim + 1)


def _indexed(step, ops, runs, arrays: int):
    """dynamic-slice / dynamic-update-slice with the same start indices in every run:
    the op on the stacked arrays with a start of 0 for the sample axis."""
    starts = ops[arrays:]
    if not all(type(s) is Same and np.ndim(s.value) == 0 for s in starts) or not starts:
        return None
    data = [_stacked(o, runs, None) for o in ops[:arrays]]
    if any(a is None for a in data):
        return None
    zero = np.zeros((), np.asarray(starts[0].value).dtype)
    kw = {**step.kwargs, "shape": _batched_shape(step.instr.shape, runs)}
    if "dynamic_slice_sizes" in kw:
        kw["dynamic_slice_sizes"] = (runs,) + tuple(kw["dynamic_slice_sizes"])
    return step.fn(*data, zero, *(s.value for s in starts), **kw)


#: opcode -> ``rule(step, lockstep operands, runs)``: the stacked value, or None when the
#: operands are not ones the rule takes (the op then runs once per run). Rules are tried
#: only when some operand differs between runs.
BATCHED = {op: _elementwise for op in _ELEMENTWISE}
#: the structural ops' rules (an implementation table: opcode -> rule)
_STRUCTURAL = {
    "broadcast": _broadcast,
    "reshape": lambda step, ops, runs: _reshape(step, ops, runs)
    if type(ops[0]) is Stacked else None,
    "transpose": lambda step, ops, runs: _transpose(step, ops, runs)
    if type(ops[0]) is Stacked else None,
    "slice": lambda step, ops, runs: _slice(step, ops, runs) if type(ops[0]) is Stacked else None,
    "concatenate": _concatenate,
    "dynamic-slice": lambda step, ops, runs: _indexed(step, ops, runs, 1),
    "dynamic-update-slice": lambda step, ops, runs: _indexed(step, ops, runs, 2),
}
BATCHED.update(_STRUCTURAL)


class LockstepInterpreter(Interpreter):
    """Evaluates a module for ``len(perturbers)`` perturbed runs together (module
    docstring). ``run`` returns the runs' results, in order."""

    def __init__(self, module: Module, perturbers: list, *, limits=None,
                 op_overrides: dict | None = None):
        super().__init__(module, limits=limits, op_overrides=op_overrides)
        self.perturbers = perturbers
        self.runs = len(perturbers)
        #: each run's own interpreter: the ops that run once per run, the computations
        #: those call, and the loops a run finishes alone
        self.alone = [Interpreter(module, limits=limits, perturb=p, op_overrides=op_overrides)
                      for p in perturbers]
        self._quiet: dict = {}

    def run(self, args: list, sizes: list | None = None) -> list:
        if sizes is not None:
            raise HloUnsupportedError("lockstep", "cpu", "runtime dimension sizes")
        result = self.lockstep_call(self.module.entry, [Same(a) for a in args])
        return [at(result, k) for k in range(self.runs)]

    # -- one computation ------------------------------------------------------
    def lockstep_call(self, comp: Computation, args: list):
        plan, n_params, root_index = self._plan(comp)
        if len(args) != n_params:
            raise HloEvalError(
                f"computation {comp.name} takes {n_params} arguments, got {len(args)}")
        quiet = self._quiet_steps(comp, plan)
        env: list = [None] * len(plan)
        for index, step in enumerate(plan):
            if step.parameter is not None:
                env[index] = self._parameter(comp, plan, quiet, index, args, root_index)
                continue
            ops = [env[i] for i in step.operand_index]
            for i in step.release:  # before the step: what it alone holds it may reuse
                env[i] = None
            if quiet[index] == "forward":
                env[index] = ops[0]
            else:
                env[index] = self._step(comp, index, step, ops, quiet[index])
            for i in step.release:  # after the step, which may read them
                if plan[i].instr.opcode == "multiply":
                    for p in self.perturbers:
                        p.forget_factors(comp, plan[i].instr)
        return env[root_index]

    def _quiet_steps(self, comp, plan) -> list:
        """Per step: "forward" (a tuple element read through), True (no run perturbs it)
        or False."""
        found = self._quiet.get(comp.name)
        if found is None:
            first = self.perturbers[0]
            found = ["forward" if forwarded(s.instr) is not None else
                     first.passes_through(comp, s.instr) for s in plan]
            self._quiet[comp.name] = found
        return found

    def _parameter(self, comp, plan, quiet, index, args, root_index):
        """The value of parameter step ``index``, taken out of ``args`` (the callers'
        lists are their own), a tuple that only get-tuple-elements read as ``_Elements``."""
        number = plan[index].parameter
        value, args[number] = args[number], None
        reads = self._element_reads(comp, plan, quiet).get(index)
        if reads is not None and type(value) is tuple and index != root_index:
            return _Elements(list(value), dict(reads))
        return value

    def _element_reads(self, comp, plan, quiet) -> dict:
        """``{parameter step: {element: reads}}`` for the tuple parameters of ``comp``
        that only unperturbed get-tuple-elements read."""
        key = ("elements", comp.name)
        found = self._quiet.get(key)
        if found is None:
            users: dict = {}
            for i, s in enumerate(plan):
                for j in s.operand_index:
                    users.setdefault(j, []).append(i)
            found = {}
            for i, s in enumerate(plan):
                mine = users.get(i, [])
                if s.parameter is None or not mine or any(
                        plan[u].instr.opcode != "get-tuple-element" or quiet[u] is not True
                        for u in mine):
                    continue
                reads: dict = {}
                for u in mine:
                    k = int(plan[u].instr.attrs.get("index", 0))
                    reads[k] = reads.get(k, 0) + 1
                found[i] = reads
            self._quiet[key] = found
        return found

    def _step(self, comp, index, step, ops, quiet):
        opcode = step.instr.opcode
        if opcode == "tuple":
            return tuple(ops) if quiet else self._perturbed(comp, index, step, ops, tuple(ops))
        if opcode == "get-tuple-element" and quiet:
            return self._element(comp, index, step, ops[0])
        if opcode in ("call", "fusion"):
            called = step.kwargs["to_apply" if opcode == "call" else "calls"]
            n = fused_arity(called, len(ops)) if opcode == "fusion" else len(ops)
            args = ops[:n]
            if quiet:  # the callee alone holds what the caller released
                ops.clear()
            value = self.lockstep_call(called.computation, args)
        elif opcode == "while":
            value = self._while(comp, index, step, ops.pop() if quiet else ops[0])
        elif opcode == "conditional":
            value = self._conditional(comp, index, step, ops)
        elif opcode == "dynamic-update-slice" and quiet and _in_place(step, ops, self.runs):
            value = ops[0]
        elif all(type(o) is Same for o in ops) and opcode not in _PER_RUN_ALWAYS:
            value = Same(self._evaluate(step, [o.value for o in ops]))
        else:
            rule = BATCHED.get(opcode)
            value = None
            if rule is not None:
                try:
                    out = rule(step, ops, self.runs)
                except Exception:  # noqa: BLE001 - run by run below, which says what failed
                    out = None
                if out is not None:
                    value = Stacked(np.asarray(out))
            if value is None:
                return self._each(comp, index, step, ops, quiet)
        return value if quiet else self._perturbed(comp, index, step, ops, value)

    def _element(self, comp, index, step, tup):
        k = int(step.instr.attrs.get("index", 0))
        if type(tup) is tuple:
            return tup[k]
        if type(tup) is _Elements:
            return tup.read(k)
        if type(tup) is Same:
            return Same(tup.value[k])
        return gather([at(tup, r)[k] for r in range(self.runs)])

    def _evaluate(self, step, operands: list):
        """The op of ``step`` on one run's operands (an op body's failure names the
        instruction, as ``Interpreter.call_sized`` does)."""
        try:
            value = step.fn(*operands, **step.kwargs)
        except (HloEvalError, HloUnsupportedError, HloLimitError):
            raise
        except Exception as exc:  # an op body failed: name the instruction
            if getattr(exc, "__module__", "").startswith("hloref"):
                raise
            raise HloEvalError(f"{step.instr.opcode} failed: {type(exc).__name__}: {exc}",
                               instruction=step.instr.name) from exc
        return np.asarray(value) if isinstance(value, np.generic) else value

    def _own_step(self, comp, index, k):
        return self.alone[k]._plan(comp)[0][index]

    def _each(self, comp, index, step, ops, quiet):
        """The op run once per run (each run's own prepared step: its called
        computations run in that run's interpreter), then perturbed run by run."""
        values = []
        sums = not quiet and self.perturbers[0].sums_freely(comp, step.instr)
        for k, perturb in enumerate(self.perturbers):
            mine = [at(o, k) for o in ops]
            own = self._own_step(comp, index, k)
            value = self._evaluate(own, mine)
            if not quiet:
                summed = perturb.summed(comp, step.instr, value) if sums and \
                    type(value) is np.ndarray and value.dtype in _WIDE and \
                    not perturb.keeps_unrounded() else None
                value = summed if summed is not None else \
                    perturb(comp, step.instr, mine, value, _recompute(own))
            values.append(value)
        return gather(values)

    def _perturbed(self, comp, index, step, ops, value):
        """``value`` (lockstep) perturbed by each run's perturber."""
        if step.instr.opcode in _ROUNDED:
            out = self._rounded_f32(comp, step.instr, ops, value)
            if out is not None:
                return out
        given = [at(value, k) for k in range(self.runs)]
        out = []
        for k in range(self.runs):
            own = self._own_step(comp, index, k)
            out.append(self.perturbers[k](comp, step.instr, [at(o, k) for o in ops], given[k],
                                          _recompute(own)))
        if all(o is g for o, g in zip(out, given)):
            return value
        return gather(out)

    def _rounded_f32(self, comp, instr, ops, value):
        """An f32 add, subtract, multiply, divide or sqrt perturbed run by run through
        ``Perturber.rounded_f32`` (what the whole hook does there, without the checks
        that cannot apply: one subnormal scan of the stacked operands instead of one per
        run), or None when that does not apply."""
        first = self.perturbers[0]
        if not first.rounds_in_f32(comp, instr) or \
                any(p.keeps_unrounded() for p in self.perturbers):
            return None
        runs = self.runs
        arrays = [_stacked(o, runs, None) for o in (*ops, value)]
        if any(a is None or a.dtype != np.float32 for a in arrays) or \
                any(a.shape != arrays[-1].shape for a in arrays):
            return None
        if first.freedoms.ftz and instr.opcode in _DAZ_READERS:
            for o in ops:  # a subnormal operand: the run's DAZ choice matters
                whole = o.value if type(o) is Same else o.array
                if has_subnormal(whole) is not False:
                    return None
        out = [p.rounded_f32(comp, instr, [a[k, ...] for a in arrays[:-1]],
                             arrays[-1][k, ...]) for k, p in enumerate(self.perturbers)]
        return Stacked(np.stack(out))

    # -- control flow -----------------------------------------------------------
    def _while(self, comp, index, step, state):
        cond, body = step.kwargs["condition"].computation, step.kwargs["body"].computation
        limit = self.limits.max_while_iterations
        iterations = 0
        while True:
            pred = self.lockstep_call(cond, [state])
            go = _flags(pred, self.runs)
            if any(g != go[0] for g in go):  # the runs part: each finishes alone
                return self._part(state, go, cond, body, iterations, step.instr.name)
            if not go[0]:
                return state
            _check_limit(iterations, limit, step.instr.name, cond, body)
            args, state = [state], None  # the body may update what only it holds in place
            state = self.lockstep_call(body, args)
            iterations += 1

    def _part(self, state, go, cond, body, iterations, name):
        return gather([self._finish_while(k, at(state, k), go[k], cond, body, iterations, name)
                       for k in range(self.runs)])

    def _finish_while(self, k, state, go, cond, body, iterations, name):
        alone = self.alone[k]
        while go:
            _check_limit(iterations, alone.limits.max_while_iterations, name, cond, body)
            state = alone.call(body, [state])
            iterations += 1
            go = bool(np.asarray(alone.call(cond, [state])))
        return state

    def _conditional(self, comp, index, step, ops):
        kw = step.kwargs
        branches = kw.get("branch_computations")
        if branches is None:
            branches = (kw["true_computation"], kw["false_computation"])
        pick = [lambda arg, i=i: i for i in range(len(branches))]
        chosen = [run_conditional(
            np.asarray(at(ops[0], k)), [None] * (len(ops) - 1), instruction_name=step.instr.name,
            **({"branch_computations": pick} if kw.get("branch_computations") is not None else
               {"true_computation": pick[0], "false_computation": pick[1]}))
            for k in range(self.runs)]
        if all(c == chosen[0] for c in chosen):
            return self.lockstep_call(branches[chosen[0]].computation, [ops[1 + chosen[0]]])
        return gather([self.alone[k].call(branches[c].computation, [at(ops[1 + c], k)])
                       for k, c in enumerate(chosen)])


#: f32 results ``LockstepInterpreter._rounded_f32`` may perturb, and the ops whose
#: subnormal operands XLA:CPU may read as zero.
_ROUNDED = frozenset(values_of("random-rounded", str))
_DAZ_READERS = opcodes_with("daz-reader")

#: Accumulation results ``Perturber.summed`` perturbs (the narrow ones may be folded or
#: kept in f32: the whole hook decides).
_WIDE = (np.dtype(np.float32), np.dtype(np.float64))

#: Ops evaluated once per run even when every run holds the same operands: their value
#: is not a function of the operands alone.
_PER_RUN_ALWAYS = opcodes_with("lockstep-per-run")


#: The references to a stacked operand that only the step reading it holds (its slot in
#: the computation's values is released before the step): the step's operand list,
#: ``_in_place``'s local name and ``sys.getrefcount``'s argument.
_SOLE_REFERENCES = 3


def _in_place(step, ops, runs) -> bool:
    """A dynamic-update-slice of a stacked array nothing else holds (no other value, no
    view, no perturber's record: by its reference counts) whose last use this is,
    with the same start indices in every run: the update written into it in place
    (``evaluator/indexing.py``'s op copies the operand first; the values are the same)."""
    import sys
    target = ops[0]
    if sys.version_info >= (3, 14):  # its counts may leave out borrowed references
        return False
    if type(target) is not Stacked or sys.getrefcount(target) > _SOLE_REFERENCES:
        return False
    array = target.array
    if array.base is not None or not array.flags.writeable or sys.getrefcount(array) > 3:
        return False
    update, starts = ops[1], ops[2:]
    if not starts or not all(type(s) is Same and np.ndim(s.value) == 0 for s in starts):
        return False
    data = _stacked(update, runs, None)
    if data is None or data.dtype != array.dtype or data.ndim != array.ndim:
        return False
    dims, sizes = array.shape[1:], data.shape[1:]
    if len(starts) != len(dims):
        return False
    at_ = [min(max(scalar_index(s.value), 0), max(d - n, 0))
           for s, d, n in zip(starts, dims, sizes)]
    array[(slice(None),) + tuple(slice(a, a + n) for a, n in zip(at_, sizes))] = data
    return True


def _flags(pred, runs: int) -> list:
    """Each run's value of a scalar predicate."""
    return [bool(np.asarray(at(pred, k))) for k in range(runs)]


def _recompute(step):
    return lambda *ops, _s=step, **kw: _s.fn(*ops, **{**_s.kwargs, **kw})


def _check_limit(iterations, limit, name, cond, body):
    if iterations >= limit:
        raise HloLimitError(
            f"while loop still running after {limit} iterations (condition %{cond.name}, "
            f"body %{body.name}): endless, or it needs a higher limit "
            f"(Limits.max_while_iterations)", instruction=name)


def run_lockstep(module: Module, args: list, perturbers: list, *, limits=None,
                 op_overrides: dict | None = None) -> list:
    """The results of the perturbed runs that ``perturbers`` (one per run) make of
    ``module`` on ``args``, each as it would be evaluated alone."""
    return LockstepInterpreter(module, perturbers, limits=limits,
                               op_overrides=op_overrides).run(list(args))
