"""Makers of sort (one or two operands, a comparator) and topk."""

from __future__ import annotations

from hypothesis import strategies as st

from .builder import Builder


def make_sort(b: Builder):
    x = b.operand("fsu", min_rank=1)
    ops = [x]
    if b.draw(st.booleans()):
        ops.append(b.operand(dims=x.shape.dims))
    ref = b.comparator([o.shape.element_type for o in ops], b.draw(st.sampled_from(["LT", "GT"])))
    dim = b.draw(st.integers(0, x.shape.rank - 1))
    s = b.add("sort", ops, {"dimensions": (dim,), "is_stable": True, "to_apply": ref},
              called={"to_apply": ref}, pool=len(ops) == 1)
    if len(ops) > 1:
        b.add("get-tuple-element", [s], {"index": 1})
        return b.add("get-tuple-element", [s], {"index": 0})
    return s


def make_topk(b: Builder):
    x = b.operand("fsu", min_rank=1, max_rank=2)
    if 0 in x.shape.dims:
        x = b.operand(et=x.shape.element_type, dims=b.new_dims(min_rank=1, max_rank=2,
                                                                zero_ok=False))
    k = b.draw(st.integers(0, x.shape.dims[-1]))
    t = b.add("topk", [x], {"k": k, "largest": b.draw(st.booleans())}, pool=False)
    b.add("get-tuple-element", [t], {"index": 1})
    return b.add("get-tuple-element", [t], {"index": 0})
