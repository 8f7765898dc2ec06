"""Constants, calls and control flow on the GPU (mirrors ``evaluator/control.py``).

Called computations run in the GPU interpreter on device values. ``while`` reads
only its predicate (one scalar) to the host per iteration; ``conditional`` reads its
selector. Constants are copied to the device once per interpreter (cached per
instruction, so a constant inside a loop body is not re-sent every iteration).
"""

from __future__ import annotations

from hloref.evaluator import control as cpu_control

from .device import host_scalar, to_device
from .registry import gpu_op


@gpu_op("constant")
def constant(*, shape, literal, instruction_name, ctx):
    key = id(literal)
    hit = ctx.constants.get(key)
    if hit is None or hit[0] is not literal:
        value = cpu_control.constant(shape=shape, literal=literal, instruction_name=instruction_name)
        hit = (literal, to_device(value))
        ctx.constants[key] = hit
    return hit[1]


gpu_op("call")(cpu_control.call)  # the CPU's: the callee runs in this interpreter


@gpu_op("fusion")
def fusion(*args, shape, calls, kind=None):
    """The CPU's rule: operands past the fused computation's parameters are unused."""
    return calls(*args[:cpu_control.fused_arity(calls, len(args))])


@gpu_op("while")
def while_(init, *, shape, condition, body, ctx, instruction_name):
    return cpu_control.run_while(init, condition, body, limit=ctx.limits.max_while_iterations,
                                 instruction_name=instruction_name, to_host=host_scalar)


@gpu_op("conditional")
def conditional(selector, *args, shape, true_computation=None, false_computation=None,
                branch_computations=None):
    return cpu_control.run_conditional(selector, args, true_computation=true_computation,
                                       false_computation=false_computation,
                                       branch_computations=branch_computations,
                                       to_host=host_scalar)


# the CPU's: they forward an operand (or return a token), whatever holds its arrays
gpu_op("opt-barrier")(cpu_control.opt_barrier)
gpu_op("after-all")(cpu_control.after_all)
gpu_op("add-dependency")(cpu_control.add_dependency)
gpu_op("domain")(cpu_control.domain)
