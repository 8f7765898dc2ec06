"""One instruction run alone: a module whose entry computation applies the instruction
to parameters, one per operand, with the computations it calls (the culprit search of
``fuzz/differential.py`` and the contract's accumulation check both run instructions
alone)."""

from __future__ import annotations

import dataclasses

from hloref.ir import Computation, Instruction, Module

__all__ = ["isolated_module"]


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
