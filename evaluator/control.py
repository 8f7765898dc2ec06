"""Constants, calls and control flow: constant, call, fusion, while, conditional,
opt-barrier, after-all, add-dependency (operation_semantics §Call, §While,
§Conditional, §OptimizationBarrier, §AfterAll)."""

from __future__ import annotations

import numpy as np

from hloref.errors import HloEvalError, HloLimitError
from hloref.values import TOKEN_VALUE

from .registry import op

OP_FAMILY = True


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
    # Any fusion kind computes what its fused computation computes.
    return calls(*args)


def run_while(init, condition, body, *, limit: int, instruction_name: str, to_host=np.asarray):
    """``while condition(state): state = body(state)``; stops past ``limit`` iterations.
    ``to_host`` reads the predicate (the GPU backend passes its device-to-host read)."""
    state = init
    iterations = 0
    while bool(to_host(condition(state))):
        if iterations >= limit:
            raise HloLimitError(f"while loop still running after {limit} iterations "
                                f"(Limits.max_while_iterations)", instruction=instruction_name)
        state = body(state)
        iterations += 1
    return state


def run_conditional(selector, args, *, true_computation=None, false_computation=None,
                    branch_computations=None, to_host=np.asarray):
    """pred selector: true → ``true_computation(args[0])``, false →
    ``false_computation(args[1])``; s32 selector: ``branch_computations[i](args[i])``, and
    an index outside [0, N) runs the last branch."""
    if branch_computations is None:
        if true_computation is None or false_computation is None:
            raise HloEvalError("conditional needs true_computation and false_computation, "
                               "or branch_computations")
        if len(args) != 2:
            raise HloEvalError(f"a pred conditional takes a true and a false operand, got "
                               f"{len(args)}")
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
