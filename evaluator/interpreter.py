"""The interpreter loop: evaluates computations instruction by instruction.

Values are numpy arrays (of the element type's numpy/ml_dtypes dtype), Python
tuples of values, and ``Token``. Each instruction's attributes are unpacked once
(``PreparedStep``) and its op function called with operand values; a value is
released after its last use so that the memory budget counts live buffers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hloref.attrs import ComputationRef
from hloref.errors import HloEvalError, HloLimitError, HloUnsupportedError
from hloref.ir import Computation, Instruction, Module
from hloref.opcodes import SIDE_EFFECTING
from hloref.shapes import ArrayShape, TupleShape, byte_size

from . import plan_cache
from .control import run_conditional, run_while
from .dynamic import CONTROL_OPCODES, DYNAMIC_SOURCES, HOST_ARRAYS, is_partial, trim, dynamic_step
from .registry import OPS, UNSUPPORTED, Called, load_all

__all__ = ["Limits", "Interpreter", "PreparedStep", "NOT_READY", "topological_order",
           "live_instructions", "forwarded"]


@dataclass(frozen=True)
class Limits:
    """Resource limits, enforced before the damage is done.

    ``max_bytes``: the most bytes of live values (parameters included) an
    evaluation may hold; an instruction whose result would exceed it is refused
    before it is allocated. ``max_while_iterations``: a ``while`` that has not
    finished after this many iterations stops with ``HloLimitError``.
    """

    max_bytes: int = 8 << 30
    #: an endless scalar loop stops within a minute: 1,000,000 iterations took 14 s (a
    #: one-add body) and 30 s (a six-instruction tuple body) on the 2-core CI machine
    #: (``hloref run`` of tests/test_messages.py's ENDLESS)
    max_while_iterations: int = 1_000_000


_DEFAULT_LIMITS = Limits()  # frozen: one instance serves every interpreter


class PreparedStep:
    """An instruction with its op function and keyword arguments resolved once.

    ``_plan`` adds what the loop needs per step: ``need`` (result bytes, checked
    against the budget), ``release`` (operands whose last use this is) and
    ``parameter`` (the parameter number, or ``None``)."""

    __slots__ = ("instr", "fn", "kwargs", "operand_index", "need", "release", "parameter")

    def __init__(self, instr, fn, kwargs, operand_index):
        self.instr = instr
        self.fn = fn
        self.kwargs = kwargs
        self.operand_index = operand_index
        self.need = 0
        self.release = ()
        self.parameter = None


class Interpreter:
    #: the array operations of runtime dimension sizes (``evaluator/dynamic.py``) and the
    #: host read of a while predicate or conditional selector on that path: numpy here,
    #: device kernels in the GPU interpreter
    arrays = HOST_ARRAYS

    def __init__(self, module: Module, *, limits: Limits | None = None, backend: str = "cpu",
                 observer=None, perturb=None, op_overrides: dict | None = None, record=None):
        """``observer(computation, instruction, value)``, if given, sees every value computed
        (parameters included), e.g. to record intermediate results for localisation.
        ``perturb(computation, instruction, operands, value, recompute)``, if given, may
        replace each computed value (never a parameter) before anything else sees it:
        the numerical envelope (``hloref.fuzz.envelope``) samples legitimate rounding
        this way; ``recompute(*operands, **attributes)`` runs the same op on other
        operand values (and, if given, other attributes, e.g. ``shape``). ``record``: the
        module's ``plan_cache.ModuleRecord`` to use without checking the module against
        it (``hloref.compile``'s, from ``prepare``)."""
        load_all()
        self.module = module
        self.observer = observer
        self.perturb = perturb
        #: extra keyword arguments per opcode, for op functions that take them (the
        #: envelope's perturbed runs: ``{"dot": {"accumulate": "native"}}``)
        self.op_overrides = op_overrides or {}
        self.limits = limits or _DEFAULT_LIMITS
        self.backend = backend
        self.live_bytes = 0
        self._plans: dict[str, tuple[list[PreparedStep], int, int]] = {}
        self._dynamic: bool | None = None
        self._record = record  # the module's plan_cache.ModuleRecord (``_shared_record``)

    # -- public -------------------------------------------------------------
    def run(self, args: list, sizes: list | None = None) -> object:
        """Evaluate the entry computation. ``sizes`` (one side-table entry per argument,
        see ``evaluator/dynamic.py``) gives runtime sizes of bounded dynamic parameters;
        a result with runtime sizes below its bounds is returned cut to them."""
        entry = self.module.entry
        for a in args:
            self.live_bytes += a.nbytes if type(a) is np.ndarray else _value_bytes(a)
        if self.live_bytes > self.limits.max_bytes:
            raise HloLimitError(
                f"the arguments take {self.live_bytes} bytes, over the memory budget of "
                f"{self.limits.max_bytes} bytes (Limits.max_bytes)")
        value, entry_sizes = self.call_sized(entry, args, sizes)
        return trim(value, entry_sizes, self.arrays)

    def run_ready(self, args) -> object:
        """``run(list(args))`` when the module runs on one device and every argument is
        a C-ordered numpy array of its parameter's static shape and dtype (what
        ``hloref.arguments.coerce_argument`` would pass on unchanged: ``hloref.evaluate``'s
        common call, checked here against the module's record instead of the
        parameters); else ``NOT_READY``, for the caller's general path."""
        record = self._shared_record()
        if record is None:
            return NOT_READY
        specs = record.derived.get("entry")
        if specs is None:
            specs = record.derived["entry"] = _entry_specs(self.module)
        if not specs or len(args) != len(specs):
            return NOT_READY
        for a, (dtype, dims) in zip(args, specs):
            if type(a) is not np.ndarray or (a.dtype is not dtype and a.dtype != dtype) or \
                    a.shape != dims or not a.flags.c_contiguous:
                return NOT_READY
        return self.run(list(args))

    def prepare(self):
        """Plan the entry computation; returns the module record the plans are kept in
        (``None`` for an interpreter that plans for itself, see ``_shared_record``)."""
        self._plan(self.module.entry)
        return self._shared_record()

    def call(self, comp: Computation, args: list) -> object:
        """Evaluate ``comp`` on argument values (one per parameter)."""
        result, sizes = self.call_sized(comp, args, None)
        if is_partial(sizes):
            raise HloUnsupportedError(
                comp.root.opcode, self.backend, "a called computation returning a value with a "
                "runtime dynamic size below its bound, called by an op that does not carry "
                "runtime sizes", instruction=comp.root.name)
        return result

    def call_sized(self, comp: Computation, args: list, arg_sizes: list | None):
        """Evaluate ``comp``; ``arg_sizes`` are the arguments' runtime-size entries
        (``None``: all static). Returns ``(value, the root's runtime-size entry)``."""
        plan, n_params, root_index = self._plan(comp)
        if len(args) != n_params:
            raise HloEvalError(
                f"computation {comp.name} takes {n_params} arguments, got {len(args)}")
        env: list = [None] * len(plan)
        held: list = [0] * len(plan)  # bytes each computed value added to live_bytes
        #: runtime dimension sizes per value (``dynamic.dynamic_step``); only when needed
        tracked = self._has_dynamic(comp) or is_partial(arg_sizes)
        dyn: list | None = [None] * len(plan) if tracked else None
        budget = self.limits.max_bytes
        observer, perturb = self.observer, self.perturb
        for index, step in enumerate(plan):
            if step.parameter is not None:
                env[index] = args[step.parameter]
                if dyn is not None and arg_sizes is not None:
                    dyn[index] = arg_sizes[step.parameter]
                if observer is not None:
                    observer(comp, step.instr, env[index])
                continue
            if self.live_bytes + step.need > budget:
                raise HloLimitError(
                    f"its result needs {step.need} bytes while {self.live_bytes} bytes are "
                    f"live: over the memory budget of {budget} bytes (Limits.max_bytes)",
                    instruction=step.instr.name)
            operand_index = step.operand_index
            operands = [env[i] for i in operand_index]
            fn = step.fn
            try:
                if dyn is None:  # static sizes: the op itself (a forwarded element as is)
                    value = operands[0] if fn is _same else fn(*operands, **step.kwargs)
                elif fn is _same:  # a forwarded tuple element: its value and sizes
                    value = operands[0]
                    dyn[index] = dyn[operand_index[0]]
                elif step.instr.opcode in CONTROL_OPCODES:
                    value, dyn[index] = self._control_step(
                        step, operands, [dyn[i] for i in operand_index])
                elif step.instr.opcode in DYNAMIC_SOURCES or any(
                        dyn[i] is not None for i in operand_index):
                    # runtime dimension sizes (set-dimension-size): a side table
                    value, dyn[index] = dynamic_step(
                        step.instr, fn, step.kwargs, operands,
                        [dyn[i] for i in operand_index], backend=self.backend,
                        arrays=self.arrays)
                else:
                    value = fn(*operands, **step.kwargs)
            except (HloEvalError, HloUnsupportedError):
                raise
            except HloLimitError:
                raise
            except Exception as exc:  # an op body failed: name the instruction
                if getattr(exc, "__module__", "").startswith("hloref"):
                    raise
                where = "" if self.backend == "cpu" else f" on the {self.backend} backend"
                instr = step.instr
                raise HloEvalError(f"{instr.opcode} failed{where}: {type(exc).__name__}: {exc}",
                                   instruction=instr.name) from exc
            if type(value) is np.ndarray:
                nbytes = value.nbytes
            else:
                if isinstance(value, np.generic):
                    value = np.asarray(value)
                nbytes = -1
            if perturb is not None:
                value = perturb(comp, step.instr, operands, value,
                                lambda *ops, _s=step, **kw: _s.fn(*ops, **{**_s.kwargs, **kw}))
                nbytes = -1
            env[index] = value
            if observer is not None:
                observer(comp, step.instr, value)
            if nbytes < 0:
                nbytes = _value_bytes(value)
            held[index] = nbytes
            self.live_bytes += nbytes
            for i in step.release:
                if env[i] is not None:
                    self.live_bytes -= held[i]  # 0 for parameters: the caller holds them
                    env[i] = None
        result = env[root_index]
        root_sizes = dyn[root_index] if dyn is not None else None
        # everything computed here is released, the root too: the caller counts the
        # result as its own instruction's value (or, in a loop, as the next argument)
        for i, v in enumerate(env):
            if v is not None:
                self.live_bytes -= held[i]
        return result, root_sizes

    def _has_dynamic(self, comp: Computation) -> bool:
        """Whether runtime sizes are tracked: the module has a source of them
        (``set-dimension-size``, ``dynamic-reshape``) in any computation."""
        dynamic = self._dynamic
        if dynamic is None:
            record = self._shared_record()
            dynamic = None if record is None else record.derived.get("dynamic")
            if dynamic is None:
                dynamic = any(i.opcode in DYNAMIC_SOURCES
                              for c in self.module.computations.values()
                              for i in c.instructions)
                if record is not None:
                    record.derived["dynamic"] = dynamic
            self._dynamic = dynamic
        return dynamic

    def _control_step(self, step: PreparedStep, operands: list, sizes: list):
        """call / fusion / while / conditional with runtime sizes passed into the called
        computations' parameters and read back from their roots."""
        instr, kw = step.instr, step.kwargs
        opcode = instr.opcode
        if opcode in ("call", "fusion"):
            called = kw["to_apply" if opcode == "call" else "calls"]
            n = len(called.computation.parameters)
            return self.call_sized(called.computation, operands[:n], sizes[:n])
        if opcode == "while":
            # the loop state is the value, as in control.while_; its runtime sizes are
            # those of the last body run (of the operand before the first)
            cond, body = kw["condition"].computation, kw["body"].computation
            state_sizes = sizes[0]

            def run_body(state):
                nonlocal state_sizes
                state, state_sizes = self.call_sized(body, [state], [state_sizes])
                return state

            value = run_while(
                operands[0], lambda state: self.call_sized(cond, [state], [state_sizes])[0],
                run_body, limit=self.limits.max_while_iterations, instruction_name=instr.name,
                condition_computation=cond, to_host=self.arrays.to_host)
            return value, state_sizes

        def sized(computation, index):  # branch ``index`` gets its operand's sizes
            return lambda arg: self.call_sized(computation.computation, [arg], [sizes[1 + index]])

        branches = kw.get("branch_computations")
        return run_conditional(
            operands[0], operands[1:], instruction_name=instr.name, to_host=self.arrays.to_host,
            true_computation=kw.get("true_computation") and sized(kw["true_computation"], 0),
            false_computation=kw.get("false_computation") and sized(kw["false_computation"], 1),
            branch_computations=None if branches is None else
            [sized(b, i) for i, b in enumerate(branches)])

    # -- planning -------------------------------------------------------------
    def _plan(self, comp: Computation):
        cached = self._plans.get(comp.name)
        if cached is not None:
            return cached
        record = self._shared_record()
        if record is not None and self.module.computations.get(comp.name) is comp:
            result = self._shared_plan(comp, record)
        else:
            result = self._build_plan(comp)[:3]
        self._plans[comp.name] = result
        return result

    def _shared_record(self):
        """The module's ``plan_cache.ModuleRecord``, taken (and checked against the
        module) once per interpreter; ``None`` when this interpreter plans for itself:
        subclasses bind their own closures in ``_prepare``, and overrides that are not
        plain data could hold per-run state (and would key a new plan per run)."""
        record = self._record
        if record is None and type(self) is Interpreter and (
                not self.op_overrides or _plain(self.op_overrides)):
            record = self._record = plan_cache.record(self.module)
        return record

    def fact(self, computation: Computation, name: str, compute):
        """``compute(computation)`` remembered for the module as it is (the record's
        facts, checked once per evaluation), or per computation (``plan_cache.derived``)
        for an interpreter without a record; for ops that recognise a called
        computation (a reducer that is ``ROOT add(p0, p1)``)."""
        record = self._shared_record()
        if record is not None and self.module.computations.get(computation.name) is computation:
            return record.fact(computation, name, compute)
        return plan_cache.derived(computation, name, compute)

    def _shared_plan(self, comp: Computation, record):
        """The plan of ``comp`` from the module's record (``plan_cache``), planned and
        stored there on a miss; the steps bound to an interpreter (``ctx``, called
        computations, ``async-start`` closures) are bound again to this one."""
        key = (comp.name, self.backend,
               repr(sorted(self.op_overrides.items())) if self.op_overrides else None)
        template = record.plans.get(key)
        if template is None:
            plan, n_params, root_index, position = self._build_plan(comp)
            bound = tuple((i, keys) for i, step in enumerate(plan)
                          if (keys := self._bound_keys(step)) != ())
            shared = list(plan)
            for i, keys in bound:  # the cache must not keep this interpreter alive
                shared[i] = _unbound(plan[i], keys)
            record.plans[key] = (shared, n_params, root_index, position, bound)
            return plan, n_params, root_index
        plan, n_params, root_index, position, bound = template
        if bound:
            plan = list(plan)
            for i, keys in bound:
                old = plan[i]
                if keys is None:  # a closure over the interpreter: prepared again
                    step = self._prepare(old.instr, position)
                else:
                    kwargs = dict(old.kwargs)
                    for name in keys:
                        kwargs[name] = self if name == "ctx" else self._bind(old.instr.attrs[name])
                    step = PreparedStep(old.instr, old.fn, kwargs, old.operand_index)
                step.need, step.release, step.parameter = old.need, old.release, old.parameter
                plan[i] = step
        return plan, n_params, root_index

    def _bound_keys(self, step: PreparedStep):
        """The keyword arguments of ``step`` that hold this interpreter (``ctx``, called
        computations): ``()`` if none, ``None`` if the step is a closure over it."""
        if step.instr.opcode == "async-start":
            return None
        keys = []
        for name, value in step.kwargs.items():
            if name == "ctx" and value is self:
                keys.append(name)
            elif isinstance(value, Called) or (
                    isinstance(value, tuple) and any(isinstance(v, Called) for v in value)):
                if name not in step.instr.attrs:
                    return None
                keys.append(name)
            elif value is self:
                return None
        return tuple(keys)

    def _build_plan(self, comp: Computation):
        """``(steps, number of parameters, root index, position of each instruction)``."""
        live = live_instructions(self.module, comp, forward_tuples=True)
        order = [i for i in topological_order(comp) if id(i) in live]
        position = {id(instr): i for i, instr in enumerate(order)}
        plan = [self._prepare(instr, position) for instr in order]
        last_use = list(range(len(order)))
        for i, step in enumerate(plan):
            for j in step.operand_index:
                last_use[j] = max(last_use[j], i)
        root_index = position[id(comp.root)]
        n_params = 0
        for i, step in enumerate(plan):
            if step.instr.opcode == "parameter":
                step.parameter = step.instr.parameter_number
                n_params += 1
            else:
                step.need = byte_size(step.instr.shape)
            step.release = tuple(sorted({j for j in step.operand_index
                                         if last_use[j] == i and j != root_index}))
        numbers = sorted(step.parameter for step in plan if step.parameter is not None)
        if numbers != list(range(n_params)):
            bad = next(n for i, n in enumerate(numbers) if n != i)
            raise HloEvalError(f"computation {comp.name} has {n_params} parameters, numbered "
                               f"{numbers[:8]}{'...' if n_params > 8 else ''}: parameter numbers "
                               f"must be 0..{n_params - 1} (found {bad})",
                               instruction=next(s.instr.name for s in plan if s.parameter == bad))
        return plan, n_params, root_index, position

    def _prepare(self, instr: Instruction, position) -> PreparedStep:
        target = forwarded(instr)
        if target is not None:  # the element itself (the tuple may be dead code)
            return PreparedStep(instr, _same, {}, [position[id(target)]])
        operand_index = [position[id(o)] for o in instr.operands]
        if instr.opcode == "parameter":
            return PreparedStep(instr, None, {}, operand_index)
        if instr.opcode == "async-start":
            return self._prepare_async_start(instr, position, operand_index)
        entry = OPS.get(instr.opcode)
        if entry is None:
            reason = UNSUPPORTED.get(instr.opcode, "no evaluator is registered for this opcode")
            raise HloUnsupportedError(instr.opcode, self.backend, reason, instruction=instr.name)
        kwargs = {}
        for name, has_default in entry.keywords:
            if name == "shape":
                kwargs[name] = instr.shape
            elif name == "ctx":
                kwargs[name] = self
            elif name == "literal":
                kwargs[name] = instr.literal
            elif name == "instruction_name":
                kwargs[name] = instr.name
            elif name == "operand_shapes":
                kwargs[name] = [o.shape for o in instr.operands]
            elif name == "opcode":
                kwargs[name] = instr.opcode
            elif name in instr.attrs:
                kwargs[name] = self._bind(instr.attrs[name])
            elif not has_default:
                raise HloEvalError(f"{instr.opcode} needs attribute '{name}'", instruction=instr.name)
        for name, value in self.op_overrides.get(instr.opcode, {}).items():
            if any(name == k for k, _ in entry.keywords):
                kwargs[name] = value
        return PreparedStep(instr, entry.fn, kwargs, operand_index)

    def _prepare_async_start(self, instr: Instruction, position, operand_index) -> PreparedStep:
        """``async-start`` runs the wrapped op (sugared ``X-start``) or the called
        computation (``calls=``) and returns ``((operands...), result, context...)``."""
        from .async_ops import context_values
        shape = instr.shape
        if not isinstance(shape, TupleShape) or len(shape.elements) < 2:
            raise HloEvalError("async-start must have a tuple shape ((operands...), result, "
                               "context...)", instruction=instr.name)
        contexts = context_values(shape)
        if instr.async_wrapped_opcode:
            import dataclasses
            inner_instr = dataclasses.replace(instr, opcode=instr.async_wrapped_opcode,
                                              shape=shape.elements[1], async_wrapped_opcode=None)
            inner = self._prepare(inner_instr, position)

            def run(*operands):
                return (tuple(operands), inner.fn(*operands, **inner.kwargs), *contexts)
        else:
            calls = instr.attrs.get("calls")
            if calls is None:
                raise HloEvalError("async-start needs calls= or a wrapped opcode",
                                   instruction=instr.name)
            called = self._bind(calls)

            def run(*operands):
                return (tuple(operands), called(*operands), *contexts)
        return PreparedStep(instr, run, {}, operand_index)

    def _bind(self, value):
        if isinstance(value, ComputationRef):
            return Called(self.module.computations[str(value)], self)
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, ComputationRef) for v in value):
            return tuple(Called(self.module.computations[str(v)], self) for v in value)
        return value


#: ``run_ready``'s answer when the arguments need the general path
NOT_READY = object()


def _entry_specs(module: Module):
    """``(dtype, dims)`` per entry parameter, by number, when the module runs on one
    device and every parameter is an array of static shape; else ``False``."""
    if module.replica_count * module.num_partitions != 1:
        return False
    specs = []
    for number, param in enumerate(module.entry.parameters):
        shape = param.shape
        if type(shape) is not ArrayShape or True in shape.dynamic or \
                param.parameter_number != number:
            return False
        specs.append((shape.element_type.dtype, tuple(shape.dims)))
    return tuple(specs)


def _value_bytes(value) -> int:
    """Bytes held by a value: host arrays, device arrays (anything with ``nbytes``),
    tuples of them; tokens hold none."""
    if isinstance(value, tuple):
        return sum(_value_bytes(v) for v in value)
    return int(getattr(value, "nbytes", 0))


#: Opcodes with effects beyond their value (XLA's ``HasSideEffectNoRecurse``, the
#: catalogue's side-effecting group): kept even when nothing uses them.
_SIDE_EFFECTS = SIDE_EFFECTING


def _has_side_effect(module: Module, instr: Instruction, memo: dict) -> bool:
    if instr.opcode in _SIDE_EFFECTS:
        return True
    if instr.opcode == "custom-call" and instr.attrs.get("custom_call_has_side_effect") is True:
        return True
    for name in instr.called_computation_names():
        if name not in memo:
            memo[name] = False  # recursion guard
            callee = module.computations.get(name)
            memo[name] = callee is not None and any(
                _has_side_effect(module, i, memo) for i in callee.instructions)
        if memo[name]:
            return True
    return False


def _same(value):
    return value


def _plain(overrides: dict) -> bool:
    """Whether ``op_overrides`` holds only strings, numbers, booleans and ``None``."""
    return all(isinstance(v, (str, int, float, bool, type(None)))
               for per_op in overrides.values() for v in per_op.values())


def _unbound(step: PreparedStep, keys) -> PreparedStep:
    """``step`` without what binds it to its interpreter (its observer, perturb hooks
    and values): the bound keyword arguments dropped, a closure (``keys`` None) kept
    only as its instruction. ``_shared_plan`` binds them again."""
    if keys is None:
        copy = PreparedStep(step.instr, None, {}, step.operand_index)
    else:
        copy = PreparedStep(step.instr, step.fn,
                            {k: v for k, v in step.kwargs.items() if k not in keys},
                            step.operand_index)
    copy.need, copy.release, copy.parameter = step.need, step.release, step.parameter
    return copy


def forwarded(instr: Instruction) -> Instruction | None:
    """The instruction a ``get-tuple-element`` of a ``tuple`` instruction reads (through
    nested ones), or ``None`` for any other instruction: its value is that operand's."""
    if instr.opcode != "get-tuple-element" or not instr.operands:
        return None
    source = instr.operands[0]
    source = forwarded(source) or source  # itself an element of a tuple instruction
    index = int(instr.attrs.get("index", -1))
    if source.opcode != "tuple" or not 0 <= index < len(source.operands):
        return None
    target = source.operands[index]
    return forwarded(target) or target


def live_instructions(module: Module, comp: Computation, *,
                      forward_tuples: bool = False) -> set[int]:
    """Ids of the instructions evaluation needs: what the root and the instructions
    with side effects depend on (operands and control predecessors), and every
    parameter. Dead code is not evaluated, as XLA removes it (an unused infinite
    ``while`` must not hang). ``forward_tuples``: a ``get-tuple-element`` of a
    ``tuple`` instruction needs only the element it reads (``forwarded``), as XLA's
    simplifier makes it, so the tuple's other operands may be dead."""
    memo: dict = {}
    stack = [comp.root] + [i for i in comp.instructions
                           if i.opcode == "parameter" or _has_side_effect(module, i, memo)]
    live: set[int] = set()
    while stack:
        instr = stack.pop()
        if instr is None or id(instr) in live:
            continue
        live.add(id(instr))
        target = forwarded(instr) if forward_tuples else None
        stack.extend([target] if target is not None else instr.operands)
        stack.extend(instr.control_predecessors)
    return live


def topological_order(comp: Computation) -> list[Instruction]:
    """Instructions in an order where operands (and control predecessors) come first,
    keeping the text order wherever it already is one."""
    seen: set[int] = set()
    order: list[Instruction] = []
    for start in comp.instructions:
        if id(start) in seen:
            continue
        stack = [(start, False)]
        while stack:
            instr, expanded = stack.pop()
            if expanded:
                order.append(instr)
                continue
            if id(instr) in seen:
                continue
            seen.add(id(instr))
            stack.append((instr, True))
            deps = list(instr.operands) + list(instr.control_predecessors)
            for dep in reversed(deps):
                if id(dep) not in seen:
                    stack.append((dep, False))
    return order
