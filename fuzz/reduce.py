"""Delta-debugging reduction of a failing module, and the finding it hands back.

``reduce_failure(module, args, fails)`` shrinks a module while ``fails(module,
args)`` stays true, greedily, until no step helps:

1. *prefix*: make an earlier instruction the root (everything after it goes);
2. *cut*: replace an instruction by a new parameter fed with hloref's value of it
   (everything only it used goes);
3. *inline*: replace a ``call`` by its callee's body;
4. *element*: for an elementwise root, keep only the first differing element.

Each candidate is rebuilt from printed text, dead code is removed and parameters
renumbered, so every step yields a module XLA's own parser accepts.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from hloref.ir import Computation, Instruction, Module
from hloref.opcodes import ELEMENTWISE
from hloref.shapes import ArrayShape, TupleShape

__all__ = ["reduce_failure", "dead_code_eliminated", "trace_entry"]


def _copy(module: Module) -> Module:
    import hloref
    return hloref.parse(module.to_text())


def trace_entry(module: Module, args) -> dict[str, object]:
    """hloref's value of every entry instruction, by name."""
    from hloref.evaluator.interpreter import Interpreter
    values: dict[str, object] = {}

    def observe(comp, instr, value):
        if comp is module.entry:
            values[instr.name] = value

    Interpreter(module, observer=observe).run(list(args))
    return values


def dead_code_eliminated(module: Module, args: list) -> tuple[Module, list]:
    """Drop entry instructions the root does not need; renumber parameters (and args)."""
    entry = module.entry
    live: set[int] = set()
    stack = [entry.root]
    while stack:
        instr = stack.pop()
        if id(instr) in live:
            continue
        live.add(id(instr))
        stack.extend(instr.operands)
        stack.extend(instr.control_predecessors)
    kept = [i for i in entry.instructions if id(i) in live]
    params = sorted((i for i in kept if i.opcode == "parameter"), key=lambda i: i.parameter_number)
    new_args = [args[p.parameter_number] for p in params]
    for number, p in enumerate(params):
        p.parameter_number = number
    entry.instructions = kept
    # drop computations nobody calls any more
    called: set[str] = set()

    def visit(comp: Computation):
        for instr in comp.instructions:
            for name in instr.called_computation_names():
                if name not in called:
                    called.add(name)
                    visit(module.computations[name])

    visit(entry)
    module.computations = {k: v for k, v in module.computations.items()
                           if k in called or k == module.entry_name}
    module.attrs.pop("entry_computation_layout", None)
    module.attrs.pop("input_output_alias", None)
    module.attrs.pop("buffer_donor", None)
    return module, new_args


def _with_root(module: Module, args: list, name: str) -> tuple[Module, list]:
    m = _copy(module)
    entry = m.entry
    entry.root = entry.instruction(name)
    return dead_code_eliminated(m, list(args))


def _cut(module: Module, args: list, name: str, value) -> tuple[Module, list]:
    m = _copy(module)
    entry = m.entry
    target = entry.instruction(name)
    number = len(entry.parameters)
    param = Instruction(name=f"{name}.cut", opcode="parameter", shape=target.shape,
                        parameter_number=number)
    for instr in entry.instructions:
        instr.operands = [param if o is target else o for o in instr.operands]
        instr.control_predecessors = [c for c in instr.control_predecessors if c is not target]
    if entry.root is target:
        entry.root = param
    index = entry.instructions.index(target)
    entry.instructions[index] = param
    return dead_code_eliminated(m, list(args) + [value])


def _inline_call(module: Module, args: list, name: str) -> tuple[Module, list]:
    m = _copy(module)
    entry = m.entry
    call = entry.instruction(name)
    callee = m.computations[call.called_computation_names()[0]]
    mapping: dict[int, Instruction] = {}
    new_instrs: list[Instruction] = []
    for instr in callee.instructions:
        if instr.opcode == "parameter":
            mapping[id(instr)] = call.operands[instr.parameter_number]
            continue
        clone = dataclasses.replace(instr, name=f"{name}.{instr.name}",
                                    operands=[mapping[id(o)] for o in instr.operands],
                                    control_predecessors=[])
        mapping[id(instr)] = clone
        new_instrs.append(clone)
    result = mapping[id(callee.root)]
    for instr in entry.instructions:
        instr.operands = [result if o is call else o for o in instr.operands]
    if entry.root is call:
        entry.root = result
    index = entry.instructions.index(call)
    entry.instructions[index:index + 1] = new_instrs
    return dead_code_eliminated(m, list(args))


def _first_bad_element(module: Module, args: list, fails) -> tuple[Module, list] | None:
    """Shrink an elementwise root on same-shape operands to one element."""
    root = module.entry.root
    if root.opcode not in ELEMENTWISE or not isinstance(root.shape, ArrayShape) or root.shape.size <= 1:
        return None
    if not all(isinstance(o.shape, ArrayShape) and o.shape.dims == root.shape.dims
               for o in root.operands):
        return None
    values = trace_entry(module, args)
    for flat in range(min(root.shape.size, 64)):
        index = np.unravel_index(flat, root.shape.dims)
        m = _copy(module)
        entry = m.entry
        new_params = []
        new_args = []
        for i, o in enumerate(entry.root.operands):
            shape = ArrayShape(o.shape.element_type, (1,))
            new_params.append(Instruction(name=f"x{i}", opcode="parameter", shape=shape,
                                          parameter_number=i))
            new_args.append(np.asarray(values[o.name][index]).reshape(1))
        new_root = dataclasses.replace(entry.root, operands=new_params,
                                       shape=ArrayShape(root.shape.element_type, (1,)))
        entry.instructions = new_params + [new_root]
        entry.root = new_root
        m, new_args = dead_code_eliminated(m, new_args)
        if fails(m, new_args):
            return m, new_args
    return None


def reduce_failure(module: Module, args: list, fails: Callable[[Module, list], bool], *,
                   max_attempts: int = 400) -> tuple[Module, list]:
    """The smallest module (and inputs) found for which ``fails`` still holds."""
    module, args = dead_code_eliminated(_copy(module), list(args))
    attempts = 0
    progress = True
    while progress and attempts < max_attempts:
        progress = False
        names = [i.name for i in module.entry.instructions if i.opcode != "parameter"]
        # 1. prefix: earliest root that still fails
        for name in names[:-1]:
            attempts += 1
            candidate = _with_root(module, args, name)
            if fails(*candidate):
                module, args = candidate
                progress = True
                break
        if progress:
            continue
        # 2. cut inputs of the root's cone, latest first
        values = trace_entry(module, args)
        for name in reversed(names[:-1]):
            instr = module.entry.instruction(name)
            if isinstance(instr.shape, TupleShape) and not instr.shape.elements:
                continue
            attempts += 1
            candidate = _cut(module, args, name, values[name])
            if fails(*candidate):
                module, args = candidate
                progress = True
                break
            if attempts >= max_attempts:
                break
        if progress:
            continue
        # 3. inline calls
        for name in names:
            if module.entry.instruction(name).opcode == "call":
                attempts += 1
                candidate = _inline_call(module, args, name)
                if fails(*candidate):
                    module, args = candidate
                    progress = True
                    break
    shrunk = _first_bad_element(module, args, fails)
    if shrunk is not None:
        module, args = shrunk
    return module, args
