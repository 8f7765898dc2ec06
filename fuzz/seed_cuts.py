"""Small seeds cut from real programs: a value of the entry computation and everything
it needs (operands, the computations they call), with that value as the root.

A mutant of a whole realistic program costs XLA:CPU seconds to compile (every fusion
is a kernel) and hloref as long to judge; a cut keeps the program's local patterns (a
softmax, a layer norm's reductions, a while loop and its body, a scatter with its
indices) at a tenth of the size. ``cut_seeds(seeds, max_instructions=N)`` replaces
every seed larger than ``N`` instructions (all computations counted) by up to
``per_seed`` cuts of ``min_instructions`` to ``N`` instructions, chosen from values
spread over the entry computation, largest first, no two with the same instruction
set (a value and its `get-tuple-element` give the same cut twice otherwise). A cut keeps
the entry parameters its value needs, renumbered in their order and under their names
(a realistic program's cut would otherwise carry every weight of the program as an
unused parameter: 6 of a cut's 17 instructions on average, drawn, sent to XLA and
counted against the mutants' size limit); the seed's argument of a parameter is the
cut's argument of the parameter of the same name.
"""

from __future__ import annotations

import dataclasses

import hloref
from hloref.errors import HloError
from hloref.ir import Computation, Module

from .corpus import Seed, element_types_of
from .mutation_graph import is_array

__all__ = ["cut_seeds", "needed", "module_size"]


def module_size(module) -> int:
    return sum(len(c.instructions) for c in module.computations.values())


def _called(module, names) -> set:
    """The computations ``names`` call, transitively, with themselves."""
    comps, todo = set(), list(names)
    while todo:
        n = todo.pop()
        if n in comps:
            continue
        comps.add(n)
        for i in module.computation(n).instructions:
            todo += i.called_computation_names()
    return comps


def needed(module, *, limit: int) -> dict:
    """Entry instruction name -> ``(instruction ids of the entry computation, names of
    the computations)`` it needs, for the values that need at most ``limit``
    instructions in all (entry and called computations; the others are left out)."""
    sizes = {n: len(c.instructions) for n, c in module.computations.items()}
    out: dict = {}
    by_id: dict = {}
    for i in module.entry.instructions:  # operands come first (the verifier's order)
        preds = i.operands + i.control_predecessors
        if any(id(o) not in by_id for o in preds):
            by_id[id(i)] = None
            continue
        parts = [by_id[id(o)] for o in preds]
        if any(p is None for p in parts):
            by_id[id(i)] = None
            continue
        instrs = {id(i)}.union(*(p[0] for p in parts)) if parts else {id(i)}
        comps = set().union(*(p[1] for p in parts)) if parts else set()
        comps |= _called(module, i.called_computation_names())
        if len(instrs) + sum(sizes[n] for n in comps) > limit:
            by_id[id(i)] = None
            continue
        by_id[id(i)] = (instrs, comps)
        out[i.name] = (instrs, comps)
    return out


def cut_seeds(seeds, *, max_instructions: int = 40, min_instructions: int = 6,
              per_seed: int = 4, types=None) -> tuple[list, dict]:
    """``(seeds, skipped)``: the seeds of at most ``max_instructions`` instructions as
    they are, the larger ones replaced by their cuts (named ``NAME#VALUE``); cuts (and
    seeds) whose element types are not all in ``types`` are left out, and so is a cut
    whose text another seed has already; ``skipped`` says why a seed gave nothing."""
    out, skipped, texts = [], {}, set()
    allowed = set(types) if types else None
    for s in seeds:
        module = hloref.parse(s.text, verify=True)
        if module_size(module) <= max_instructions:
            if allowed is None or element_types_of(s.text) <= allowed:
                out.append(s)
                texts.add(s.text)
            else:
                skipped[s.name] = "element types outside --types"
            continue
        entry = module.entry
        need = needed(module, limit=max_instructions)
        cands, seen = [], set()
        for pos, i in enumerate(entry.instructions):
            if i.name not in need or not is_array(i) or i.opcode in ("parameter", "constant"):
                continue
            instrs, comps = need[i.name]
            size = len(instrs) + sum(len(module.computation(n).instructions) for n in comps)
            key = (frozenset(x for x in instrs if x != id(i)), i.opcode)
            if size >= min_instructions and key not in seen:
                seen.add(key)
                cands.append((pos, size, i.name))
        # spread over the program: the largest cut of each of per_seed stretches
        got = 0
        n = min(per_seed, len(cands))
        for k in range(n):
            part = cands[k * len(cands) // n:(k + 1) * len(cands) // n]
            _, _, name = max(part, key=lambda c: (c[1], c[0]))
            cut = _cut(module, name, *need[name])
            if cut is None or cut in texts or (allowed is not None
                                                and not element_types_of(cut) <= allowed):
                continue
            texts.add(cut)
            out.append(Seed(f"{s.name}#{name}", cut, s.weight))
            got += 1
        if not got:
            skipped[s.name] = (f"no cut of {min_instructions} to {max_instructions} "
                               f"instructions" + (" within --types" if allowed else ""))
    return out, skipped


def _cut(module, name: str, instrs: set, comps: set) -> str | None:
    """The text of ``module`` cut down to its entry value ``name`` (``instrs``, ``comps``:
    what it needs, the parameters it reads included); ``None`` when it does not verify.
    The module itself is not changed: the cut is a shallow copy, its parameters copies
    renumbered in their order."""
    entry = module.entry
    kept = [i for i in entry.instructions if id(i) in instrs]
    params = sorted((i for i in kept if i.opcode == "parameter"),
                    key=lambda i: i.parameter_number)
    number = {id(p): k for k, p in enumerate(params)}
    kept = [dataclasses.replace(i, parameter_number=number[id(i)]) if id(i) in number else i
            for i in kept]
    (root,) = [i for i in kept if i.name == name]
    new_entry = Computation(entry.name, kept, root, True, dict(entry.attrs),
                            entry.has_signature)
    computations = {n: (new_entry if n == entry.name else c)
                    for n, c in module.computations.items() if n in comps or n == entry.name}
    attrs = {k: v for k, v in module.attrs.items() if k != "entry_computation_layout"}
    cut = Module(module.name, computations, module.entry_name, attrs)
    text = cut.to_text()
    try:
        hloref.parse(text, verify=True)
    except HloError:
        return None
    return text
