"""The convolution maker."""

from __future__ import annotations

from hypothesis import strategies as st

from hloref.attrs import ConvDimensionNumbers, Window, WindowDim

from .builder import Builder


def make_convolution(b: Builder):
    et = b.pick_type("fcs")
    ns = b.draw(st.integers(0, 2))
    groups = b.draw(st.sampled_from([1, 1, 1, 2]))
    batch_groups = b.draw(st.sampled_from([1, 1, 1, 2])) if groups == 1 else 1
    batch = batch_groups * b.draw(st.integers(1, 2))
    fin = groups * b.draw(st.integers(1, 3))
    fout = groups * batch_groups * b.draw(st.integers(1, 2))
    spatial = [b.draw(st.integers(1, 6)) for _ in range(ns)]
    window = []
    for s in spatial:
        ksz = b.draw(st.integers(1, 3))
        window.append(WindowDim(ksz, b.draw(st.integers(1, 2)), b.draw(st.integers(0, 2)),
                                b.draw(st.integers(0, 2)), b.draw(st.sampled_from([1, 1, 2])),
                                b.draw(st.sampled_from([1, 1, 2])),
                                b.draw(st.integers(0, 5)) == 0))
    n = ns + 2
    ip = b.draw(st.permutations(list(range(n))))
    kp = b.draw(st.permutations(list(range(n))))
    op = b.draw(st.permutations(list(range(n))))
    dn = ConvDimensionNumbers(ip[0], ip[1], tuple(ip[2:]), kp[0], kp[1], tuple(kp[2:]),
                              op[0], op[1], tuple(op[2:]))
    idims = [0] * n
    idims[ip[0]], idims[ip[1]] = batch, fin
    for i, s in enumerate(spatial):
        idims[ip[2 + i]] = s
    kdims = [0] * n
    kdims[kp[0]], kdims[kp[1]] = fin // groups, fout
    for i, w in enumerate(window):
        kdims[kp[2 + i]] = w.size
    lhs = b.operand(et=et, dims=tuple(idims))
    rhs = b.operand(et=et, dims=tuple(kdims))
    attrs = {}
    if ns:
        attrs["window"] = Window(tuple(window))
    attrs["dim_labels"] = dn
    if groups > 1:
        attrs["feature_group_count"] = groups
    if batch_groups > 1:
        attrs["batch_group_count"] = batch_groups
    return b.add("convolution", [lhs, rhs], attrs)
