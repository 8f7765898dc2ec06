"""What a mutant costs hloref to judge, estimated before it runs: the applications of
called computations that hloref's evaluator makes one element at a time.

hloref applies a reducer, comparator or scatter combiner to whole arrays when it is
made of scalar elementwise ops (``evaluator/reduce.py``'s ``is_vectorizable``); any
other (one holding a ``broadcast``, a ``call`` of a non-elementwise computation, a
``while``) runs once per element in Python (unless it is a single op in disguise). A mutant
can make such a computation out of a realistic one (a reduce-window's reducer
wrapped in a call, the reduce-window moved into a loop), and one such mutant held a
campaign worker for about twenty minutes. ``sequential_calls``
counts those calls from the shapes: per instruction that calls a computation hloref
cannot vectorize, the elements it applies it to (a reduce's input, a reduce-window's
output times its window, a scatter's updates, a sort's n log2 n comparisons), times
the trips of the loops around it (a loop's trips: the largest integer constant of
its condition, at most ``MAX_TRIPS``; ``DEFAULT_TRIPS`` when it has none).
``instruction_steps`` counts the instructions hloref runs, loops' bodies once per trip
(the interpreter's cost per step is about the same whatever the sizes).
"""

from __future__ import annotations

import math

import numpy as np

from hloref.evaluator.reduce import VECTORIZABLE
from hloref.op_properties import values_of
from hloref.shapes import ArrayShape, TupleShape

__all__ = ["judging_cost", "sequential_calls", "instruction_steps", "SEQUENTIAL_LIMIT",
           "STEP_LIMIT", "DEFAULT_TRIPS", "MAX_TRIPS"]

#: mutants whose estimate is above this are dropped (none of the 269 mainstream seeds
#: makes any such call)
SEQUENTIAL_LIMIT = 2000
#: mutants whose loops would run more instructions than this are dropped (the seeds run
#: at most 16)
STEP_LIMIT = 20_000
DEFAULT_TRIPS = 16
MAX_TRIPS = 10_000
#: opcode -> the attributes naming the computations it applies per element
_PER_ELEMENT = values_of("applies-per-element", lambda v: tuple(v.split(",")))
#: opcode -> the attributes naming the computations it runs once per execution
_ONCE = ("to_apply", "calls", "true_computation", "false_computation", "branch_computations")


def _elements(shape) -> int:
    if isinstance(shape, TupleShape):
        return max((_elements(e) for e in shape.elements), default=1)
    return shape.size if isinstance(shape, ArrayShape) else 1


def _names(value) -> list:
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [str(value)]


def _vectorizable(module, name: str, seen: dict) -> bool:
    """``is_vectorizable`` of the evaluator, uncached (a mutant is judged once)."""
    if name in seen:
        return seen[name]
    seen[name] = True  # a cycle is not valid HLO; guard anyway
    ok = True
    for instr in module.computation(name).instructions:
        if instr.opcode in ("call", "fusion"):
            ok = all(_vectorizable(module, n, seen) for n in instr.called_computation_names())
        else:
            shapes = instr.shape.elements if isinstance(instr.shape, TupleShape) else \
                (instr.shape,)
            ok = instr.opcode in VECTORIZABLE and all(
                isinstance(s, ArrayShape) and s.rank == 0 for s in shapes)
        if not ok:
            break
    seen[name] = ok
    return ok


def _trips(module, condition: str) -> int:
    """A loop's trips as far as its condition says: its largest integer constant."""
    best = None
    for instr in module.computation(condition).instructions:
        if instr.opcode == "constant" and isinstance(instr.shape, ArrayShape) and \
                instr.shape.element_type.kind in ("sint", "uint") and instr.literal is not None:
            value = np.asarray(instr.literal)
            if value.size:
                best = max(best or 0, int(value.max()))
    return DEFAULT_TRIPS if best is None else max(1, min(best, MAX_TRIPS))


def _calls(instr) -> int:
    """The per-element calls of ``instr``'s computation."""
    op = instr.opcode
    if op == "reduce-window" or op == "select-and-scatter":
        window = instr.attrs.get("window")
        size = math.prod(d.size for d in window.dims) if window is not None else 1
        base = instr.operands[1] if op == "select-and-scatter" else instr
        return _elements(base.shape) * size
    if op == "scatter":
        return _elements(instr.operands[-1].shape)
    if op == "sort":
        n = _elements(instr.operands[0].shape)
        return n * max(1, math.ceil(math.log2(max(n, 2))))
    if op == "reduce":
        return _elements(instr.operands[0].shape)
    return _elements(instr.shape)


def judging_cost(module) -> tuple[int, int]:
    """``(sequential calls, instruction steps)``: the steps are the instructions hloref
    runs, each computation's counted once per run (a loop's body once per trip, a
    reducer once per call when it is applied element by element)."""
    vector: dict = {}
    calls = 0
    todo = [(module.entry_name, 1)]
    weight: dict = {}
    while todo:
        name, times = todo.pop()
        if weight.get(name, 0) >= times:
            continue
        weight[name] = times
        comp = module.computation(name)
        for instr in comp.instructions:
            if instr.opcode == "while":
                trips = _trips(module, str(instr.attrs["condition"]))
                todo += [(str(instr.attrs[k]), times * trips) for k in ("condition", "body")]
                continue
            per_element = _PER_ELEMENT.get(instr.opcode, ())
            for key in per_element:
                if key in instr.attrs and not _vectorizable(module, str(instr.attrs[key]),
                                                            vector):
                    n = times * _calls(instr)
                    calls += n
                    todo.append((str(instr.attrs[key]), n))
            for key in _ONCE:
                if key in instr.attrs and key not in per_element:
                    todo += [(n, times) for n in _names(instr.attrs[key])]
    steps = sum(len(module.computation(n).instructions) * t for n, t in weight.items())
    return calls, steps


def sequential_calls(module) -> int:
    """The estimated calls hloref makes element by element to judge ``module``."""
    return judging_cost(module)[0]


def instruction_steps(module) -> int:
    """The estimated instructions hloref runs to judge ``module`` (loops' bodies once
    per trip): its interpreter costs tens of microseconds a step whatever the sizes."""
    return judging_cost(module)[1]
