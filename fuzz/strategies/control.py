"""Makers of ops that call computations: call, while (a counter in the loop-carried
tuple bounds the trip count), conditional, map; and opt-barrier. Their bodies are
drawn by ``Builder.random_body``."""

from __future__ import annotations

from hypothesis import strategies as st

from hloref.attrs import Enum
from hloref.op_properties import values_of
from hloref.opcodes import CATALOGUE
from hloref.shapes import ArrayShape, TupleShape

from .builder import Builder, adapt, no_layout
from .shapes import kind_letter


def make_opt_barrier(b: Builder):
    vals = [b.operand() for _ in range(b.draw(st.integers(1, 2)))]
    t = b.add("tuple", vals, pool=False)
    ob = b.add("opt-barrier", [t], pool=False)
    last = None
    for i in range(len(vals)):
        last = b.add("get-tuple-element", [ob], {"index": i})
    return last


def make_call(b: Builder):
    args = [b.operand() for _ in range(b.draw(st.integers(1, 3)))]
    sub = b.sub_builder([no_layout(a.shape) for a in args], fixed=False)
    b.random_body(sub, b.draw(st.integers(1, 5)))
    outs = [sub.draw(st.sampled_from(sub.pool)) for _ in range(b.draw(st.integers(1, 2)))]
    if len(outs) == 1:
        root = outs[0]
    else:
        root = sub.add("tuple", outs, pool=False)
    # a call body with new parameters: feed them from the caller
    extra = sub.params[len(args):]
    for p in extra:
        args.append(b.operand(et=p.shape.element_type, dims=p.shape.dims))
    ref = b.finish_computation(sub, root, "callee")
    c = b.add("call", args, {"to_apply": ref}, called={"to_apply": ref})
    if isinstance(c.shape, TupleShape):
        last = None
        for i in range(len(c.shape.elements)):
            last = b.add("get-tuple-element", [c], {"index": i})
        return last
    return c


def make_while(b: Builder):
    n_state = b.draw(st.integers(1, 3))
    state_vals = [b.operand("fcsup", max_rank=2) for _ in range(n_state)]
    trip = b.draw(st.integers(0, b.cfg.max_trip_count))
    start = b.draw(st.integers(-1, 1))
    counter_init = b.constant(b.et("s32"), (), start)
    init = b.add("tuple", [counter_init] + state_vals, pool=False)
    tshape = no_layout(init.shape)
    # condition: counter < start + trip
    cb = b.sub_builder([tshape])
    c = cb.add("get-tuple-element", [cb.params[0]], {"index": 0})
    lim = cb.constant(b.et("s32"), (), start + trip)
    croot = cb.add("compare", [c, lim], {"direction": Enum("LT")})
    cref = b.finish_computation(cb, croot, "cond")
    # body: counter + 1, state' = f(state)
    bb = b.sub_builder([tshape])
    elems = [bb.add("get-tuple-element", [bb.params[0]], {"index": i})
             for i in range(len(tshape.elements))]
    one = bb.constant(b.et("s32"), (), 1)
    nc = bb.add("add", [elems[0], one], pool=False)
    bb.pool = [e for e in elems[1:]] + [v for v in bb.pool if v not in elems]
    b.random_body(bb, b.draw(st.integers(1, 4)))
    new = [nc]
    for s in tshape.elements[1:]:
        cands = [v for v in bb.pool if v.shape.element_type == s.element_type
                 and v.shape.dims == s.dims]
        v = bb.draw(st.sampled_from(cands)) if cands else bb.draw(st.sampled_from(bb.pool))
        new.append(adapt(bb, v, s))
    broot = bb.add("tuple", new, pool=False)
    bref = b.finish_computation(bb, broot, "body")
    w = b.add("while", [init], {"condition": cref, "body": bref},
              called={"condition": cref, "body": bref}, pool=False)
    last = None
    for i in range(1, len(tshape.elements)):
        last = b.add("get-tuple-element", [w], {"index": i})
    if b.draw(st.integers(0, 3)) == 0:
        b.add("get-tuple-element", [w], {"index": 0})
    return last


def make_conditional(b: Builder):
    n = b.draw(st.integers(1, 3))
    use_pred = n == 2 and b.draw(st.booleans())
    operands = [b.operand() for _ in range(n)]
    out = no_layout(b.draw(st.sampled_from(operands)).shape)
    refs = []
    for o in operands:
        sb = b.sub_builder([no_layout(o.shape)])
        b.random_body(sb, b.draw(st.integers(0, 3)))
        v = sb.draw(st.sampled_from(sb.pool))
        r = adapt(sb, v, out)
        if r.opcode == "parameter":
            r = sb.add("copy", [r])
        refs.append(b.finish_computation(sb, r, "branch"))
    if use_pred:
        idx = b.operand(et=b.et("pred"), dims=())
        return b.add("conditional", [idx] + operands,
                     {"true_computation": refs[0], "false_computation": refs[1]},
                     called={"true_computation": refs[0], "false_computation": refs[1]})
    if b.fixed or b.draw(st.booleans()):
        idx = b.constant(b.et("s32"), (), b.draw(st.integers(-1, n)))
    else:
        idx = b.fresh_value(b.et("s32"), (), hint="index")
    return b.add("conditional", [idx] + operands, {"branch_computations": list(refs)},
                 called={"branch_computations": list(refs)})


def make_map(b: Builder):
    x = b.operand("fsu", min_rank=1)
    k = b.draw(st.integers(1, 2))
    args = [x] + [b.operand(et=x.shape.element_type, dims=x.shape.dims) for _ in range(k - 1)]
    sb = b.sub_builder([ArrayShape(x.shape.element_type, ())] * k)
    letter = kind_letter(x.shape.element_type)
    body = [op for op in values_of("generated-map-body") if letter in CATALOGUE[op].kinds]
    for _ in range(b.draw(st.integers(1, 3))):
        op = b.draw(st.sampled_from(body))
        sb.ctx.makers[op](sb)
    root = sb.pool[-1] if sb.pool[-1].opcode != "parameter" else sb.add("copy", [sb.pool[-1]])
    root = adapt(sb, root, ArrayShape(x.shape.element_type, ()))
    if root.opcode == "parameter":
        root = sb.add("copy", [root])
    ref = b.finish_computation(sb, root, "mapper")
    return b.add("map", args, {"dimensions": tuple(range(x.shape.rank)), "to_apply": ref},
                 called={"to_apply": ref})
