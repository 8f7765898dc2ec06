"""The dot maker: batch and contracting dimensions at random positions."""

from __future__ import annotations

from hypothesis import strategies as st

from hloref.shape_inference import infer_shape

from .builder import Builder


def make_dot(b: Builder):
    et = b.pick_type("fcsu")
    nb, nc = b.draw(st.integers(0, 1)), b.draw(st.integers(0, 2))
    nl, nr = b.draw(st.integers(0, 1)), b.draw(st.integers(0, 1))
    sizes = lambda n: [b.draw(st.integers(1 if not b.cfg.zero_size else 0, 4))
                       if b.draw(st.integers(0, 7)) else b.draw(st.sampled_from([5, 9]))
                       for _ in range(n)]
    bs, cs, ls, rs = sizes(nb), sizes(nc), sizes(nl), sizes(nr)
    lrank, rrank = nb + nc + nl, nb + nc + nr
    lperm = b.draw(st.permutations(list(range(lrank))))
    rperm = b.draw(st.permutations(list(range(rrank))))
    ldims, rdims = [0] * lrank, [0] * rrank
    lb, lc = tuple(lperm[:nb]), tuple(lperm[nb:nb + nc])
    rb, rc = tuple(rperm[:nb]), tuple(rperm[nb:nb + nc])
    for i, s in enumerate(bs):
        ldims[lb[i]] = rdims[rb[i]] = s
    for i, s in enumerate(cs):
        ldims[lc[i]] = rdims[rc[i]] = s
    for p, s in zip(lperm[nb + nc:], ls):
        ldims[p] = s
    for p, s in zip(rperm[nb + nc:], rs):
        rdims[p] = s
    lhs = b.operand(et=et, dims=tuple(ldims))
    rhs = b.operand(et=et, dims=tuple(rdims))
    attrs = {}
    if lb:
        attrs["lhs_batch_dims"] = lb
        attrs["rhs_batch_dims"] = rb
    attrs["lhs_contracting_dims"] = lc
    attrs["rhs_contracting_dims"] = rc
    out_et = et
    if et.is_float and et.bits < 32 and b.draw(st.booleans()):
        out_et = b.et("f32")
    shape = infer_shape("dot", [lhs.shape, rhs.shape], {**attrs, "result_element_type": out_et})
    return b.add("dot", [lhs, rhs], attrs, shape=shape)
