"""Editing an HLO module in place, for the mutations (``fuzz/mutations.py``): fresh
names, users, inserting instructions, redirecting uses, adapting a value back to the
shape its users expect, cloning computations. Every result shape comes from
``hloref.shape_inference.infer_shape``; nothing here checks the whole module (the
mutant strategy, ``fuzz/mutants.py``, runs hloref's verifier on every mutant)."""

from __future__ import annotations

import numpy as np

from hloref.attrs import ComputationRef, PaddingDim, SliceDim
from hloref.ir import Computation, Instruction, Module
from hloref.shape_inference import infer_shape
from hloref.shapes import ArrayShape, ProgramShape, Shape, TupleShape
from hloref.types import ELEMENT_TYPES

__all__ = ["Editor", "program_shape", "is_array", "called_programs"]


def is_array(instr: Instruction) -> bool:
    return isinstance(instr.shape, ArrayShape) and instr.shape.is_static


def program_shape(comp: Computation) -> ProgramShape:
    return ProgramShape(tuple(p.shape for p in comp.parameters), comp.root.shape)


def called_programs(module: Module, attrs: dict) -> dict:
    """attribute name -> program shape of the computations ``attrs`` call."""
    out = {}
    for k, v in attrs.items():
        if isinstance(v, ComputationRef):
            out[k] = program_shape(module.computation(str(v)))
        elif isinstance(v, (list, tuple)) and v and all(isinstance(x, ComputationRef) for x in v):
            out[k] = [program_shape(module.computation(str(x))) for x in v]
    return out


class Editor:
    """In-place edits of one module; names it makes are unique in the module."""

    def __init__(self, module: Module):
        self.module = module
        self.names = {i.name for _, i in module.instructions()} | set(module.computations)
        self.counter = 0

    # -- names and lookups ---------------------------------------------------------------
    def fresh(self, stem: str) -> str:
        stem = stem.replace("-", "_").split(".")[0]
        while True:
            self.counter += 1
            name = f"{stem}.m{self.counter}"
            if name not in self.names:
                self.names.add(name)
                return name

    def users(self, comp: Computation, value: Instruction) -> list[Instruction]:
        return [i for i in comp.instructions if any(o is value for o in i.operands)]

    def computation_of(self, instr: Instruction) -> Computation:
        for comp in self.module.computations.values():
            if any(i is instr for i in comp.instructions):
                return comp
        raise KeyError(instr.name)

    # -- building ------------------------------------------------------------------------
    def make(self, opcode: str, operands, attrs=None, *, shape: Shape | None = None,
             literal=None) -> Instruction:
        """A new instruction (not yet in a computation); its shape inferred unless given."""
        attrs = dict(attrs or {})
        if shape is None:
            shape = infer_shape(opcode, [o.shape for o in operands], attrs,
                                called_programs(self.module, attrs))
        return Instruction(self.fresh(opcode), opcode, shape, list(operands), attrs,
                           literal=literal)

    def insert_after(self, comp: Computation, anchor: Instruction | None,
                     new: list[Instruction]) -> None:
        """Put ``new`` (in order) after ``anchor`` (at the start when ``None``)."""
        pos = 0 if anchor is None else next(
            k for k, i in enumerate(comp.instructions) if i is anchor) + 1
        comp.instructions[pos:pos] = new

    def insert_before(self, comp: Computation, anchor: Instruction, new: list[Instruction]) -> None:
        pos = next(k for k, i in enumerate(comp.instructions) if i is anchor)
        comp.instructions[pos:pos] = new

    def redirect(self, comp: Computation, old: Instruction, new: Instruction, *,
                 users: list[Instruction] | None = None, root: bool = True) -> None:
        """Uses of ``old`` (by ``users``, default all but ``new`` itself) read ``new``."""
        targets = self.users(comp, old) if users is None else users
        for u in targets:
            if u is new:
                continue
            u.operands = [new if o is old else o for o in u.operands]
        if root and comp.root is old:
            comp.root = new

    def constant(self, et_name: str, value) -> Instruction:
        et = ELEMENT_TYPES[et_name]
        arr = np.asarray(value).astype(et.dtype)
        return self.make("constant", [], shape=ArrayShape(et, ()), literal=arr)

    def scalar_broadcast(self, et_name: str, value, dims) -> list[Instruction]:
        c = self.constant(et_name, value)
        b = self.make("broadcast", [c], {"dimensions": []},
                      shape=ArrayShape(c.shape.element_type, tuple(dims)))
        return [c, b]

    def adapt(self, value: Instruction, target: ArrayShape) -> list[Instruction]:
        """Instructions that turn ``value`` (an array of the same rank) into an array of
        ``target``'s dimensions and element type: slices what is too long, pads what
        is too short with zeros, converts the element type. Empty when it fits."""
        shape = value.shape
        out: list[Instruction] = []
        cur = value
        if shape.rank != target.rank:
            raise ValueError("adapt: ranks differ")
        if any(d > t for d, t in zip(shape.dims, target.dims)):
            sl = [SliceDim(0, min(d, t), 1) for d, t in zip(cur.shape.dims, target.dims)]
            cur = self.make("slice", [cur], {"slice": sl})
            out.append(cur)
        if any(d < t for d, t in zip(cur.shape.dims, target.dims)):
            zero = self.constant(cur.shape.element_type.name, 0)
            pads = [PaddingDim(0, t - d, 0) for d, t in zip(cur.shape.dims, target.dims)]
            cur = self.make("pad", [cur, zero], {"padding": pads})
            out += [zero, cur]
        if cur.shape.element_type != target.element_type:
            cur = self.make("convert", [cur], shape=ArrayShape(target.element_type, target.dims))
            out.append(cur)
        return out

    # -- computations --------------------------------------------------------------------
    def add_computation(self, comp: Computation, caller: Computation | None = None
                        ) -> ComputationRef:
        """Register ``comp`` just before ``caller`` (default: the entry), as XLA's parser
        wants callees before their callers."""
        items = list(self.module.computations.items())
        before = caller.name if caller is not None else self.module.entry_name
        entry_pos = next(k for k, (n, _) in enumerate(items) if n == before)
        items.insert(entry_pos, (comp.name, comp))
        self.module.computations = dict(items)
        return ComputationRef(comp.name)

    def wrap(self, instr: Instruction, stem: str) -> Computation:
        """A computation whose parameters are ``instr``'s operands and whose root is a
        copy of ``instr`` on them."""
        params = [Instruction(self.fresh("p"), "parameter", o.shape, parameter_number=k)
                  for k, o in enumerate(instr.operands)]
        clone = Instruction(self.fresh(instr.opcode), instr.opcode, instr.shape, list(params),
                            dict(instr.attrs), literal=instr.literal)
        return Computation(self.fresh(stem), params + [clone], clone)

    def tuple_wrap(self, instr: Instruction, stem: str) -> Computation:
        """Like ``wrap``, but with one tuple parameter holding the operands."""
        tshape = TupleShape(tuple(o.shape for o in instr.operands))
        param = Instruction(self.fresh("p"), "parameter", tshape, parameter_number=0)
        gtes = [Instruction(self.fresh("gte"), "get-tuple-element", o.shape, [param], {"index": k})
                for k, o in enumerate(instr.operands)]
        clone = Instruction(self.fresh(instr.opcode), instr.opcode, instr.shape, list(gtes),
                            dict(instr.attrs), literal=instr.literal)
        return Computation(self.fresh(stem), [param] + gtes + [clone], clone)

    def import_computation(self, donor: Module, name: str, done: dict) -> str:
        """Copy ``donor``'s computation ``name`` (and what it calls) into the module under
        fresh names; ``done`` maps donor names to the copies' names."""
        if name in done:
            return done[name]
        comp = donor.computation(name)
        for instr in comp.instructions:
            for callee in instr.called_computation_names():
                self.import_computation(donor, callee, done)
        copies = self.clone_instructions(comp.instructions, {}, done)
        new = Computation(self.fresh(comp.name), [copies[id(i)] for i in comp.instructions],
                          copies[id(comp.root)])
        self.add_computation(new)
        done[name] = new.name
        return new.name

    def clone_instructions(self, instrs, mapping: dict, renamed: dict) -> dict:
        """Copies of ``instrs`` (in order) with fresh names; operands through ``mapping``
        (id → copy, extended here), called computations through ``renamed``."""
        for i in instrs:
            attrs = {}
            for k, v in i.attrs.items():
                if isinstance(v, ComputationRef):
                    v = ComputationRef(renamed.get(str(v), str(v)))
                elif isinstance(v, (list, tuple)) and v and all(isinstance(x, ComputationRef)
                                                         for x in v):
                    v = type(v)(ComputationRef(renamed.get(str(x), str(x))) for x in v)
                attrs[k] = v
            mapping[id(i)] = Instruction(self.fresh(i.name), i.opcode, i.shape,
                                         [mapping[id(o)] for o in i.operands], attrs,
                                         literal=i.literal, parameter_number=i.parameter_number)
        return mapping

    def prune(self) -> None:
        """Drop the instructions no root needs (parameters stay) and the computations
        nothing calls."""
        for comp in self.module.computations.values():
            live, todo = set(), [comp.root]
            while todo:
                i = todo.pop()
                if id(i) in live:
                    continue
                live.add(id(i))
                todo += i.operands + i.control_predecessors
            comp.instructions = [i for i in comp.instructions
                                 if id(i) in live or i.opcode == "parameter"]
        reach, todo = set(), [self.module.entry_name]
        while todo:
            n = todo.pop()
            if n in reach:
                continue
            reach.add(n)
            for i in self.module.computation(n).instructions:
                todo += i.called_computation_names()
        self.module.computations = {n: c for n, c in self.module.computations.items()
                                    if n in reach}
