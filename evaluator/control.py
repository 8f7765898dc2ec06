"""Constants, calls and control flow: constant, call, fusion, while, conditional,
opt-barrier, after-all, add-dependency (operation_semantics §Call, §While,
§Conditional, §OptimizationBarrier, §AfterAll)."""

from __future__ import annotations


import numpy as np

from hloref.errors import HloEvalError, HloLimitError
from hloref.op_properties import opcodes_with
from hloref.values import TOKEN_VALUE

from .registry import op


@op("constant")
def constant(*, shape, literal, instruction_name):
    if literal is None:
        raise HloEvalError("the constant's data is elided ({...}) in the text, so its value is "
                           "unknown; print the module with full constants "
                           "(XLA: --xla_dump_large_constants / print_large_constants)",
                           instruction=instruction_name)
    return literal


@op("call")
def call(*args, shape, to_apply):
    return to_apply(*args)


@op("fusion")
def fusion(*args, shape, calls, kind=None):
    """What the fused computation computes, whatever the kind. Operands past its
    parameters are unused (XLA's HandleFusion allows more operands than parameters)."""
    return calls(*args[:fused_arity(calls, len(args))])


def fused_arity(calls, given: int) -> int:
    """How many of a fusion's ``given`` operands its fused computation takes."""
    comp = getattr(calls, "computation", None)
    return min(given, len(comp.parameters)) if comp is not None else given


def loop_limit_error(limit: int, instruction: str, condition: str | None = None,
                     body: str | None = None) -> HloLimitError:
    """The error of a ``while`` still running after ``limit`` iterations, naming its
    condition and body computations: the CPU's and the GPU's (``gpu/computation.py``,
    a loop in a compiled computation) say the same."""
    names = [f"{what} %{name}" for what, name in (("condition", condition), ("body", body))
             if name is not None]
    where = f" ({', '.join(names)})" if names else ""
    return HloLimitError(f"while loop still running after {limit} iterations{where}: "
                         f"endless, or it needs a higher limit (Limits.max_while_iterations)",
                         instruction=instruction)


def run_while(init, condition, body, *, limit: int, instruction_name: str, to_host=np.asarray,
              condition_computation=None):
    """``while condition(state): state = body(state)``; stops past ``limit`` iterations.
    ``to_host`` reads the predicate (the GPU backend passes its device-to-host read).
    ``condition_computation``: the condition's ``Computation`` when ``condition`` is not
    a bound computation (``.computation``) but a function running it (the interpreter's
    runtime-size path), so that the check below sees it.

    A body that hands back unchanged (the same objects, or, when it computes them from
    those parts alone, small host arrays with the same bits) every part of the state
    that a condition without side effects reads, while it holds, never terminates (memory_space_assignment_test: a pred flag passed
    through; sharding_propagation_test: a counter plus 0): that is reported at once
    instead of after ``limit`` iterations (XLA's while-loop simplifier may remove such
    a loop and return its initial state; the written semantics has no value)."""
    state = init
    iterations = 0
    comp = condition_computation or getattr(condition, "computation", None)
    pure = comp is not None and _is_pure(comp)
    read = _elements_read(comp) if pure else None
    # equal contents (not only the same objects) prove a loop endless only when the
    # body computes the parts the condition reads from those parts alone
    by_content = pure and read is not None and \
        _reads_closed(getattr(body, "computation", None), read)
    while bool(to_host(condition(state))):
        if iterations >= limit:
            raise loop_limit_error(limit, instruction_name, getattr(comp, "name", None),
                                   getattr(getattr(body, "computation", None), "name", None))
        new = body(state)
        if pure and _same_read_values(new, state, read, by_content):
            raise HloEvalError("while loop does not terminate: the body returns the part of "
                               "its state the condition reads unchanged, and the condition "
                               "still holds",
                               instruction=instruction_name)
        state = new
        iterations += 1
    return state


#: Opcodes whose value does not depend on the operands alone (or that call others).
_IMPURE_OPCODES = opcodes_with("impure")


def _is_pure(comp) -> bool:
    """Whether a condition computation is a function of its parameter only."""
    return all(i.opcode not in _IMPURE_OPCODES for i in comp.instructions)


def _elements_read(comp) -> frozenset | None:
    """Tuple indices of its parameter that a condition computation reads, when it reads
    the parameter only through ``get-tuple-element``; None: the whole state."""
    params = comp.parameters
    if len(params) != 1:
        return None
    param = params[0]
    read = set()
    for instr in comp.instructions:
        if any(o is param for o in instr.operands):
            if instr.opcode != "get-tuple-element":
                return None
            read.add(int(instr.attrs["index"]))
    if comp.root is param:
        return None
    return frozenset(read)


def _reads_closed(body, read: frozenset) -> bool:
    """Whether ``body``'s root tuple computes each element in ``read`` from the state's
    elements in ``read`` only (through get-tuple-element), with pure ops."""
    if body is None or len(body.parameters) != 1 or body.root is None or \
            body.root.opcode != "tuple":
        return False
    param = body.parameters[0]
    seen: set = set()
    stack = [body.root.operands[k] for k in read if k < len(body.root.operands)]
    while stack:
        instr = stack.pop()
        if id(instr) in seen:
            continue
        seen.add(id(instr))
        if instr is param or instr.opcode in _IMPURE_OPCODES:
            return False
        if instr.opcode == "get-tuple-element" and instr.operands[0] is param:
            if int(instr.attrs["index"]) not in read:
                return False
            continue
        stack.extend(instr.operands)
    return True


def _same_read_values(new, old, read, by_content: bool = False) -> bool:
    if read is None or not (isinstance(new, tuple) and isinstance(old, tuple)):
        return _same_values(new, old, False)
    return len(new) == len(old) and all(_same_values(new[k], old[k], by_content)
                                        for k in read)


#: Host arrays up to this size are compared by content (bit for bit); larger ones, and
#: device arrays, by identity only.
_COMPARED_BYTES = 1 << 16


def _same_values(a, b, by_content: bool = False) -> bool:
    """The same values, leaf by leaf: the same objects, or (``by_content``) host arrays
    of the same dtype and shape with the same bits (``x + 0`` hands back an equal
    counter)."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same_values(x, y, by_content) for x, y in zip(a, b))
    if a is b:
        return True
    if by_content and isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype and \
            a.shape == b.shape and a.nbytes <= _COMPARED_BYTES:
        return a.tobytes() == b.tobytes()
    return False


def run_conditional(selector, args, *, true_computation=None, false_computation=None,
                    branch_computations=None, to_host=np.asarray,
                    instruction_name: str | None = None):
    """pred selector: true → ``true_computation(args[0])``, false →
    ``false_computation(args[1])``; s32 selector: ``branch_computations[i](args[i])``, and
    an index outside [0, N) runs the last branch. Each branch is called with its
    operand and its index among the operands after the selector."""
    if branch_computations is None:
        if true_computation is None or false_computation is None:
            raise HloEvalError("conditional needs true_computation and false_computation, "
                               "or branch_computations", instruction=instruction_name)
        if len(args) != 2:
            raise HloEvalError(f"a pred conditional takes a true and a false operand, got "
                               f"{len(args)}", instruction=instruction_name)
        if bool(to_host(selector)):
            return true_computation(args[0])
        return false_computation(args[1])
    n = len(branch_computations)
    index = int(to_host(selector))
    if index < 0 or index >= n:
        index = n - 1
    return branch_computations[index](args[index])


@op("while")
def while_(init, *, shape, condition, body, ctx, instruction_name):
    return run_while(init, condition, body, limit=ctx.limits.max_while_iterations,
                     instruction_name=instruction_name)


@op("conditional")
def conditional(selector, *args, shape, true_computation=None, false_computation=None,
                branch_computations=None):
    return run_conditional(selector, args, true_computation=true_computation,
                           false_computation=false_computation,
                           branch_computations=branch_computations)


@op("opt-barrier")
def opt_barrier(x, *, shape):
    """Forwards its operand unchanged (tuples included)."""
    return x


@op("after-all")
def after_all(*tokens, shape):
    return TOKEN_VALUE


@op("add-dependency")
def add_dependency(x, token, *, shape):
    return x


@op("domain")
def domain(x, *, shape, domain=None):
    return x
