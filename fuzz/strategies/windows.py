"""Makers of windowed ops: reduce-window and select-and-scatter."""

from __future__ import annotations

from hypothesis import strategies as st

from hloref.attrs import Enum, Window, WindowDim
from hloref.shapes import ArrayShape

from .builder import Builder, adapt
from .reduce import identity, reducer_kinds


def _window(b: Builder, dims, *, dilations=True, padding=True) -> Window:
    wd = []
    for d in dims:
        size = b.draw(st.integers(1, max(1, min(3, d + 1))))
        stride = b.draw(st.integers(1, 2))
        lo = b.draw(st.integers(0, 1)) if padding else 0
        hi = b.draw(st.integers(0, 1)) if padding else 0
        bd = b.draw(st.sampled_from([1, 1, 1, 2])) if dilations else 1
        wdl = b.draw(st.sampled_from([1, 1, 1, 2])) if dilations else 1
        wd.append(WindowDim(size, stride, lo, hi, wdl, bd))
    return Window(tuple(wd))


def make_reduce_window(b: Builder):
    x = b.operand("fsup", min_rank=1)
    et = x.shape.element_type
    kind = b.draw(st.sampled_from(reducer_kinds(et)))
    ref = b.scalar_computation(et, kind)
    init = b.constant(et, (), identity(et, kind))
    w = _window(b, x.shape.dims)
    return b.add("reduce-window", [x, init], {"window": w, "to_apply": ref},
                 called={"to_apply": ref})


def make_select_and_scatter(b: Builder):
    x = b.operand("fsu", min_rank=1, max_rank=3)
    et = x.shape.element_type
    if et.name == "f8e8m0fnu":
        x = adapt(b, x, ArrayShape(b.et("f32"), x.shape.dims))
        et = x.shape.element_type
    w = _window(b, x.shape.dims, dilations=False)
    from hloref.shape_inference import window_output_dim
    src_dims = tuple(window_output_dim(d, wd) for d, wd in zip(x.shape.dims, w.dims))
    src = b.operand(et=et, dims=src_dims)
    init = b.constant(et, (), 0)
    sb = Builder(b.draw, b.ctx, param_shapes=[ArrayShape(et, ())] * 2, fixed=True)
    attrs = {"direction": Enum(b.draw(st.sampled_from(["GE", "LE", "GT"])))}
    if et.is_float:
        attrs["type"] = Enum("TOTALORDER")
    sroot = sb.add("compare", list(sb.params), attrs)
    sel = b.finish_computation(sb, sroot, "select")
    sc = b.scalar_computation(et, "add")
    return b.add("select-and-scatter", [x, src, init],
                 {"window": w, "select": sel, "scatter": sc},
                 called={"select": sel, "scatter": sc})
