"""The control-flow mutations: an instruction moves into a ``call``, both branches of a
``conditional``, or the body of a ``while`` loop (``fuzz/mutations.py`` has the others
and the registry)."""

from __future__ import annotations

from hypothesis import strategies as st

from hloref.attrs import Enum, SliceDim
from hloref.ir import Computation, Instruction
from hloref.op_properties import opcodes_with
from hloref.opcodes import SIDE_EFFECTING
from hloref.shapes import ArrayShape, TupleShape
from hloref.types import ELEMENT_TYPES

from .mutation_context import MutationContext, candidates, pick
from .mutation_graph import Editor, is_array

__all__ = ["wrap_in_call", "wrap_in_conditional", "wrap_in_while"]

#: opcodes never wrapped in a call/conditional/while
_NOT_WRAPPED = SIDE_EFFECTING | opcodes_with("never-wrapped")


def _control_computations(ed: Editor) -> set:
    """The entry and the computations run as loop bodies and conditions, branches and
    callees: where control flow may go (not reducers, comparators, scatter updates:
    XLA:CPU aborts on a while loop in a reduce-window's reducer)."""
    names = {ed.module.entry_name}
    for _, i in ed.module.instructions():
        if i.opcode in opcodes_with("control-flow"):
            names.update(i.called_computation_names())
    return names


def _wrappable(_c, i: Instruction) -> bool:
    return (i.opcode not in _NOT_WRAPPED and not i.control_predecessors and bool(i.operands)
            and all(not getattr(o.shape, "is_token", False) for o in i.operands))


def wrap_in_call(draw, ed: Editor, ctx: MutationContext):
    """An instruction moves into a called computation (``call``)."""
    control = _control_computations(ed)
    comp, instr = pick(draw, candidates(
        ed, lambda c, i: c.name in control and _wrappable(c, i))) or (None, None)
    if instr is None:
        return None
    ref = ed.add_computation(ed.wrap(instr, "wrapped"), comp)
    new = ed.make("call", list(instr.operands), {"to_apply": ref}, shape=instr.shape)
    ed.insert_after(comp, instr, [new])
    ed.redirect(comp, instr, new)
    comp.instructions = [i for i in comp.instructions if i is not instr]
    return f"%{instr.name} ({instr.opcode}) wrapped in call"


def wrap_in_conditional(draw, ed: Editor, ctx: MutationContext):
    """An instruction moves into both branches of a ``conditional`` whose predicate is
    a constant or computed from an operand (``x[0] == x[0]``: false only for NaN)."""
    control = _control_computations(ed)
    comp, instr = pick(draw, candidates(
        ed, lambda c, i: c.name in control and _wrappable(c, i))) or (None, None)
    if instr is None:
        return None
    new: list[Instruction] = []
    first = next((o for o in instr.operands if is_array(o) and o.shape.size > 0), None)
    if first is not None and draw(st.booleans()):
        s = ed.make("slice", [first], {"slice": [SliceDim(0, 1, 1) for _ in first.shape.dims]})
        r = ed.make("reshape", [s], shape=ArrayShape(first.shape.element_type, ()))
        pred = ed.make("compare", [r, r], {"direction": Enum("EQ")})
        new += [s, r, pred]
    else:
        pred = ed.constant("pred", draw(st.booleans()))
        new.append(pred)
    tup = ed.make("tuple", list(instr.operands))
    ref_t = ed.add_computation(ed.tuple_wrap(instr, "branch_true"), comp)
    ref_f = ed.add_computation(ed.tuple_wrap(instr, "branch_false"), comp)
    cond = ed.make("conditional", [pred, tup, tup],
                   {"true_computation": ref_t, "false_computation": ref_f}, shape=instr.shape)
    new += [tup, cond]
    ed.insert_after(comp, instr, new)
    ed.redirect(comp, instr, cond)
    comp.instructions = [i for i in comp.instructions if i is not instr]
    return f"%{instr.name} ({instr.opcode}) wrapped in conditional"


def wrap_in_while(draw, ed: Editor, ctx: MutationContext):
    """An instruction moves into the body of a ``while`` loop of 1 to 3 trips; the loop
    carries a counter, the operands and the result."""
    control = _control_computations(ed)

    def ok(c, i):
        return c.name in control and _wrappable(c, i) and is_array(i)
    comp, instr = pick(draw, candidates(ed, ok)) or (None, None)
    if instr is None:
        return None
    trips = draw(st.integers(1, 3))
    s32 = ArrayShape(ELEMENT_TYPES["s32"], ())
    state = TupleShape((s32,) + tuple(o.shape for o in instr.operands) + (instr.shape,))
    # condition: i < trips
    cp = Instruction(ed.fresh("p"), "parameter", state, parameter_number=0)
    ci = Instruction(ed.fresh("i"), "get-tuple-element", s32, [cp], {"index": 0})
    cn = ed.constant("s32", trips)
    lt = ed.make("compare", [ci, cn], {"direction": Enum("LT")})
    cond = Computation(ed.fresh("loop_condition"), [cp, ci, cn, lt], lt)
    # body: i + 1, the operands, the instruction on them
    bp = Instruction(ed.fresh("p"), "parameter", state, parameter_number=0)
    gtes = [Instruction(ed.fresh("gte"), "get-tuple-element", s, [bp], {"index": k})
            for k, s in enumerate(state.elements[:-1])]
    one = ed.constant("s32", 1)
    inc = ed.make("add", [gtes[0], one])
    clone = Instruction(ed.fresh(instr.opcode), instr.opcode, instr.shape, gtes[1:],
                        dict(instr.attrs), literal=instr.literal)
    out = ed.make("tuple", [inc] + gtes[1:] + [clone], shape=state)
    body = Computation(ed.fresh("loop_body"), [bp] + gtes + [one, inc, clone, out], out)
    ref_c, ref_b = ed.add_computation(cond, comp), ed.add_computation(body, comp)
    zero = ed.constant("s32", 0)
    acc = ed.scalar_broadcast(instr.shape.element_type.name, 0, instr.shape.dims)
    init = ed.make("tuple", [zero] + list(instr.operands) + [acc[-1]], shape=state)
    loop = ed.make("while", [init], {"condition": ref_c, "body": ref_b}, shape=state)
    result = ed.make("get-tuple-element", [loop], {"index": len(state.elements) - 1},
                     shape=instr.shape)
    ed.insert_after(comp, instr, [zero] + acc + [init, loop, result])
    ed.redirect(comp, instr, result)
    comp.instructions = [i for i in comp.instructions if i is not instr]
    return f"%{instr.name} ({instr.opcode}) wrapped in a while loop of {trips} trips"
