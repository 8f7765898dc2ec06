"""What XLA's algebraic simplifier sees of a module: the passes XLA:CPU runs before it
(or with it) that change which of ``rewrites.REWRITES``' patterns match, applied as a
way of looking at the module instead of a changed copy of it.

* **Calls are inlined.** On one device XLA:CPU flattens the call graph (every call site
  gets its own computation: ``FlattenCallGraph``, cpu_compiler.cc:670) and then runs
  ``CallInliner(/*single_call_site=*/true)`` (:775), which inlines every ``call`` that
  has no backend config and whose frontend attribute ``inlineable`` is not ``false`` or
  ``xla_late`` (call_inliner.cc:316, :246, :359); the simplifier runs later in the same
  pipeline (the simplification pipeline of :488, added at :936). So a pattern that
  reaches a ``call`` continues at the called computation's root, and one that reaches
  that computation's parameter ``i`` continues at the call's operand ``i``.
* **Loop-invariant constants are sunk into while bodies.** ``WhileLoopConstantSinking``
  (cpu_compiler.cc:544, default options: no broadcasts of constants, non-scalars too)
  runs in the simplifier's fixed-point pipeline (:498, the simplifier at :513): where a
  while's init is a ``tuple`` whose operand ``i`` is a constant, and the body's root
  tuple has as operand ``i`` a ``get-tuple-element(parameter(0)), index=i``, that
  element's other uses read the constant (while_loop_constant_sinking.cc:85-164,
  while_util.cc:461). Constant folding (:552, in the same fixed point) makes a convert,
  reshape, copy or bitcast of a constant a constant, but not a broadcast of one.
* **A broadcast of a scalar seen through reshapes.** The simplifier merges reshapes
  (algebraic_simplifier.cc:6705) and turns ``reshape(broadcast(x))`` into
  ``broadcast(x)`` where the reshape leaves ``x``'s dimensions alone (:6849), always so
  for a scalar ``x``; a copy to the same shape and layout is removed (:1838).

Line numbers are those of ROCm/xla main 183fa00 (2026-08-22, a mirror of openxla/xla):
``xla/service/cpu/cpu_compiler.cc``, ``xla/service/call_inliner.cc``,
``xla/service/while_loop_constant_sinking.cc``, ``xla/service/while_util.cc``,
``xla/hlo/transforms/simplifiers/algebraic_simplifier.cc``.

A *path* is the tuple of ``call`` instructions a match went through, outermost first.
"""

from __future__ import annotations

import re

from hloref.ir import Computation, Instruction, Module
from hloref.op_properties import opcodes_with

__all__ = ["XlaView", "inlined_call", "view_of"]

#: what constant folding leaves around a constant (op property ``constant-wrapper``)
_CONSTANT_WRAPPER = opcodes_with("constant-wrapper")
#: what constant folding folds into a constant: the wrappers but a broadcast
#: (HloConstantFolding does not fold broadcasts)
_FOLDED = _CONSTANT_WRAPPER - {"broadcast"}

_NOT_INLINED = re.compile(r'inlineable\s*=\s*"(false|xla_late)"')


def inlined_call(instr: Instruction, module: Module) -> Computation | None:
    """The computation XLA:CPU inlines in place of ``instr`` (a ``call`` without a
    backend config, not marked ``inlineable="false"``/``"xla_late"``), else None."""
    if instr.opcode != "call" or "backend_config" in instr.attrs:
        return None
    if _NOT_INLINED.search(str(instr.attrs.get("frontend_attributes", ""))):
        return None
    return module.computations.get(str(instr.attrs.get("to_apply")))


class XlaView:
    """One module as the simplifier sees it (the module docstring): ``through`` steps
    over calls and parameters, ``constant`` finds the constant an operand is to XLA,
    ``broadcast`` finds a broadcast of a scalar behind reshapes; ``users`` counts uses
    module-wide."""

    def __init__(self, module: Module):
        self.module = module
        #: id(call) -> the computation inlined in its place
        self.callees: dict[int, Computation] = {}
        #: callee name -> its inlined call sites: [(caller, call)]
        self.sites: dict[str, list] = {}
        #: id(get-tuple-element in a while body) -> the constant sunk in its place
        self.sunk: dict[int, Instruction] = {}
        self._users: dict[int, int] = {}
        #: computation name -> how many attribute slots name it
        self._references: dict[str, int] = {}
        bodies: dict[str, list] = {}
        for comp in module.computations.values():
            for instr in comp.instructions:
                for name in instr.called_computation_names():
                    self._references[name] = self._references.get(name, 0) + 1
                for o in instr.operands:
                    self._users[id(o)] = self._users.get(id(o), 0) + 1
                callee = inlined_call(instr, module)
                if callee is not None:
                    self.callees[id(instr)] = callee
                    self.sites.setdefault(callee.name, []).append((comp, instr))
                if instr.opcode == "while":
                    bodies.setdefault(str(instr.attrs.get("body")), []).append(instr)
        for comp in self._outermost_first():
            for instr in comp.instructions:
                if instr.opcode == "while" and len(bodies.get(str(instr.attrs.get("body")),
                                                              ())) == 1:
                    self._sink(instr)

    def _outermost_first(self) -> list:
        """The computations in the order the sinking pass visits them (the entry, then
        what it calls), so that a constant sunk into an outer loop is one for an inner
        loop too."""
        order, seen, stack = [], set(), [self.module.entry]
        while stack:
            comp = stack.pop(0)
            if comp.name in seen:
                continue
            seen.add(comp.name)
            order.append(comp)
            for instr in comp.instructions:
                for name in instr.called_computation_names():
                    if name in self.module.computations:
                        stack.append(self.module.computations[name])
        return order

    def _sink(self, loop: Instruction) -> None:
        body = self.module.computations.get(str(loop.attrs.get("body")))
        init = loop.operands[0] if loop.operands else None
        if body is None or init is None or init.opcode != "tuple" or \
                body.root.opcode != "tuple":
            return
        for i, gte in enumerate(body.root.operands):
            if gte.opcode != "get-tuple-element" or gte.attrs.get("index") != i or \
                    gte.operands[0].opcode != "parameter" or i >= len(init.operands):
                continue
            value = init.operands[i]
            while value.opcode in _FOLDED or id(value) in self.sunk:
                value = self.sunk.get(id(value)) or value.operands[0]
            if value.opcode == "constant" and value.literal is not None:
                self.sunk[id(gte)] = value

    def call_users(self, comp: Computation) -> list:
        """The opcodes of what reads ``comp``'s root once XLA has inlined its calls: the
        users of each of its calls (none where something other than an inlined call
        calls ``comp``, or a call is its caller's root, whose users are further out)."""
        sites = self.sites.get(comp.name, ())
        if not sites or self._references.get(comp.name, 0) != len(sites):
            return []
        opcodes = []
        for caller, call in sites:
            if call is caller.root:
                return []
            opcodes += [u.opcode for u in caller.instructions
                        for o in u.operands if o is call]
        return opcodes

    def users(self, instr: Instruction) -> int:
        """How many operand slots of the module read ``instr``."""
        return self._users.get(id(instr), 0)

    def through(self, instr: Instruction, path: tuple) -> tuple:
        """``(instruction, path)`` XLA sees in place of ``instr`` reached along ``path``:
        an inlined call's root (the call appended to the path), or a parameter's call
        operand (the call removed); unchanged where neither applies."""
        while True:
            callee = self.callees.get(id(instr))
            if callee is not None:
                instr, path = callee.root, path + (instr,)
                continue
            if instr.opcode == "parameter" and path and \
                    self.callees.get(id(path[-1])) is not None and \
                    instr.parameter_number is not None and \
                    instr.parameter_number < len(path[-1].operands) and \
                    any(p is instr for p in self.callees[id(path[-1])].parameters):
                instr, path = path[-1].operands[instr.parameter_number], path[:-1]
                continue
            return instr, path

    def constant(self, instr: Instruction, path: tuple = ()) -> Instruction | None:
        """The constant XLA's simplifier sees in place of ``instr`` (through what constant
        folding leaves around one, inlined calls and constants sunk into loops), or None."""
        for _ in range(10_000):  # a chain, never a cycle; bounded all the same
            instr, path = self.through(instr, path)
            if instr.opcode in _CONSTANT_WRAPPER:
                instr = instr.operands[0]
            elif id(instr) in self.sunk:
                instr, path = self.sunk[id(instr)], ()
            else:
                break
        return instr if instr.opcode == "constant" and instr.literal is not None else None

    def broadcast(self, instr: Instruction, path: tuple) -> tuple:
        """``(instruction, path)``: the ``broadcast`` of a scalar that ``instr`` becomes
        once the reshapes (and same-shape copies) over it are merged into it, else
        ``instr`` as ``through`` sees it. The reshapes below the outermost and the
        broadcast must have one use: else the old broadcast stays alive beside the new
        one and its operand has two uses."""
        start = self.through(instr, path)
        instr, path = start
        steps = 0
        while instr.opcode in ("reshape", "copy"):
            if instr.opcode == "copy" and instr.shape != instr.operands[0].shape:
                return start
            if steps and self.users(instr) != 1:
                return start
            instr, path = self.through(instr.operands[0], path)
            steps += 1
        if steps and instr.opcode == "broadcast" and self.users(instr) == 1 and \
                instr.operands and getattr(instr.operands[0].shape, "rank", None) == 0:
            return instr, path
        return start


def view_of(module: Module, shared: dict) -> XlaView:
    """``module``'s ``XlaView``, made once per ``shared`` (a sampling's shared dict)."""
    key = ("xla-view", id(module))
    view = shared.get(key)
    if view is None:
        view = shared[key] = XlaView(module)
    return view
