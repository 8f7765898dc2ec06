"""Mutations of a real HLO module that keep it valid.

Each mutation is a function ``(draw, editor, ctx) -> str | None``: it edits the module
of ``editor`` (``fuzz/mutation_graph.py``) in place and returns what it did, or
``None`` when the module offers it nothing to work on. Every choice goes through
``draw`` (Hypothesis), so a mutant shrinks towards fewer and simpler mutations of the
first seed. Result shapes are inferred; where a mutation changes a value's shape,
the value is adapted back (slice, pad, convert) to what its users expect. The
mutant strategy (``fuzz/mutants.py``) runs hloref's verifier on every mutant and
drops a mutation the verifier rejects.

``MUTATIONS``: name → function. What each targets in XLA is in
``fuzz/pass_patterns.py``.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
from hypothesis import strategies as st

from hloref.attrs import ConvDimensionNumbers, PaddingDim, SliceDim, Window
from hloref.ir import Computation, Instruction
from hloref.op_properties import opcodes_with, values_of
from hloref.opcodes import ELEMENTWISE
from hloref.shape_inference import ShapeError, infer_shape
from hloref.shapes import ArrayShape, Layout, TupleShape
from hloref.types import ELEMENT_TYPES

from .mutation_context import FLOAT_TARGETS, INT_TARGETS, MutationContext, candidates, pick
from .mutation_graph import Editor, called_programs, is_array
from .mutations_control import wrap_in_call, wrap_in_conditional, wrap_in_while

__all__ = ["MUTATIONS", "MutationContext", "FLOAT_TARGETS", "INT_TARGETS", "SIZES"]

#: dimension sizes ``resize_parameter`` picks: small, powers of two and just above
SIZES = (1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 31, 32, 33, 64, 65, 128, 129)
#: elementwise opcodes whose operands and result share one element type
_SAME_TYPE = ELEMENTWISE - opcodes_with("not-same-type")


def _float_or_int(et) -> bool:
    return et.kind in ("float", "sint", "uint")


def _loop_computations(ed: Editor) -> set:
    """Names of the computations while loops run as condition or body, and the ids of
    the values a loop starts from (its initial tuple's elements, or the operand itself)."""
    out: set = set()
    for _, i in ed.module.instructions():
        if i.opcode == "while":
            out |= {str(i.attrs[k]) for k in ("condition", "body") if k in i.attrs}
            init = i.operands[0]
            out |= {id(init)} | ({id(o) for o in init.operands} if init.opcode == "tuple"
                                 else set())
    return out


def _counter_like(ed: Editor, comp: Computation, i: Instruction, loops: set) -> bool:
    """An integer scalar in a loop's condition or body, or one a loop starts from (its
    counter's start: a special value there, INT_MIN, makes a loop of 3 trips run 2^31):
    changing it may make the loop run forever."""
    return ((comp.name in loops or id(i) in loops) and isinstance(i.shape, ArrayShape)
            and i.shape.rank == 0 and i.shape.element_type.kind in ("sint", "uint"))


# ------------------------------------------------------------------ retype a subgraph


def _retypable(_c, i: Instruction) -> bool:
    return (i.opcode in _SAME_TYPE and is_array(i) and _float_or_int(i.shape.element_type)
            and all(isinstance(o.shape, ArrayShape)
                    and o.shape.element_type == i.shape.element_type for o in i.operands))


def retype_subgraph(draw, ed: Editor, ctx: MutationContext):
    """A connected elementwise region computes in another element type (f32→bf16,
    s32→s8...): converts in at its inputs, back out at its outputs."""
    loops = _loop_computations(ed)
    comp, seed = pick(draw, candidates(
        ed, lambda c, i: _retypable(c, i) and not _counter_like(ed, c, i, loops))) or (None, None)
    if seed is None:
        return None
    et = seed.shape.element_type
    pool = FLOAT_TARGETS if et.kind == "float" else INT_TARGETS
    targets = [t for t in pool if t != et.name and t in ctx.types]
    if not targets:
        return None
    new_et = ELEMENT_TYPES[draw(st.sampled_from(targets))]
    region = [seed]
    for _ in range(draw(st.integers(0, 6))):
        frontier = [o for r in region for o in r.operands if _retypable(comp, o)
                    and o.shape.element_type == et and all(o is not r2 for r2 in region)]
        if not frontier:
            break
        region.append(pick(draw, frontier))
    ids = {id(r) for r in region}
    order = [i for i in comp.instructions if id(i) in ids]
    outside = {id(r): [u for u in ed.users(comp, r) if id(u) not in ids] for r in order}
    converted: dict = {}
    for r in order:
        for o in r.operands:
            if id(o) not in ids and id(o) not in converted:
                cv = ed.make("convert", [o], shape=ArrayShape(new_et, o.shape.dims))
                ed.insert_before(comp, r, [cv])
                converted[id(o)] = cv
        r.operands = [o if id(o) in ids else converted[id(o)] for o in r.operands]
    for r in order:
        old = r.shape
        r.shape = ArrayShape(new_et, old.dims, layout=old.layout)
        if outside[id(r)] or comp.root is r:
            back = ed.make("convert", [r], shape=old)
            ed.insert_after(comp, r, [back])
            ed.redirect(comp, r, back, users=outside[id(r)])
    return f"retype {len(order)} instructions from %{seed.name} {et.name}->{new_et.name}"


# ------------------------------------------------------------------ shapes and windows


def _reshape_in_place(ed: Editor, comp: Computation, instr: Instruction, attrs: dict) -> bool:
    """Give ``instr`` new attributes; its new shape is inferred and adapted back to the
    old one for its users. False (nothing changed) when the attributes are invalid."""
    old = instr.shape
    try:
        shape = infer_shape(instr.opcode, [o.shape for o in instr.operands], attrs,
                            called_programs(ed.module, attrs), declared=old)
    except (ShapeError, ValueError, TypeError):
        return False
    if not isinstance(shape, ArrayShape) or shape.rank != old.rank or 0 in shape.dims \
            or shape.size > (1 << 16):
        return False
    users = ed.users(comp, instr)
    instr.attrs = attrs
    instr.shape = ArrayShape(shape.element_type, shape.dims, layout=old.layout)
    adapters = ed.adapt(instr, old)
    if adapters:
        ed.insert_after(comp, instr, adapters)
        ed.redirect(comp, instr, adapters[-1], users=users)
    return True


def change_window(draw, ed: Editor, ctx: MutationContext):
    """A convolution's or reduce-window's window (size, stride, padding, dilation), a
    pad's padding or a slice's bounds change; the result is adapted back."""
    def ok(_c, i):
        return is_array(i) and ((i.opcode in ("convolution", "reduce-window")
                                 and isinstance(i.attrs.get("window"), Window))
                                or i.opcode in ("pad", "slice"))
    comp, instr = pick(draw, candidates(ed, ok)) or (None, None)
    if instr is None:
        return None
    attrs = dict(instr.attrs)
    if instr.opcode in ("convolution", "reduce-window"):
        dims = list(attrs["window"].dims)
        if not dims:
            return None
        k = draw(st.integers(0, len(dims) - 1))
        what = draw(st.sampled_from(["stride", "padding_low", "padding_high", "window_dilation",
                                     "base_dilation", "size"]))
        value = draw(st.integers(-1, 3) if what.startswith("padding") else st.integers(1, 3))
        if instr.opcode == "convolution" and what == "size":
            return None  # the kernel's shape fixes it
        dims[k] = type(dims[k])(**{**dims[k].__dict__, what: value})
        attrs["window"] = Window(tuple(dims))
        desc = f"window dim {k} {what}={value}"
    elif instr.opcode == "pad":
        pads = list(attrs["padding"])
        k = draw(st.integers(0, len(pads) - 1)) if pads else None
        if k is None:
            return None
        p = pads[k]
        pads[k] = PaddingDim(draw(st.integers(-2, 3)), draw(st.integers(-2, 3)),
                             draw(st.integers(0, 2)))
        attrs["padding"] = pads
        desc = f"padding dim {k} {p.low}_{p.high}_{p.interior}->" \
               f"{pads[k].low}_{pads[k].high}_{pads[k].interior}"
    else:
        sl = list(attrs["slice"])
        if not sl:
            return None
        k = draw(st.integers(0, len(sl) - 1))
        n = instr.operands[0].shape.dims[k]
        start = draw(st.integers(0, max(0, n - 1)))
        sl[k] = SliceDim(start, draw(st.integers(start + 1, max(start + 1, n))),
                         draw(st.integers(1, 3)))
        attrs["slice"] = sl
        desc = f"slice dim {k} -> [{sl[k].start}:{sl[k].limit}:{sl[k].stride}]"
    if not _reshape_in_place(ed, comp, instr, attrs):
        return None
    return f"%{instr.name}: {desc}"


def resize_parameter(draw, ed: Editor, ctx: MutationContext):
    """An entry parameter's dimension takes another size (powers of two and just
    above); the program sees it sliced or padded back."""
    comp = ed.module.entry
    params = [p for p in comp.parameters if is_array(p) and p.shape.rank >= 1]
    p = pick(draw, params)
    if p is None:
        return None
    k = draw(st.integers(0, p.shape.rank - 1))
    size = draw(st.sampled_from(SIZES))
    dims = list(p.shape.dims)
    old = p.shape
    dims[k] = size
    if int(np.prod(dims)) > ctx.max_elements or size == old.dims[k]:
        return None
    users = ed.users(comp, p)
    root = comp.root is p
    p.shape = ArrayShape(old.element_type, tuple(dims), layout=old.layout)
    adapters = ed.adapt(p, old)
    ed.insert_after(comp, p, adapters)
    ed.redirect(comp, p, adapters[-1], users=users, root=root)
    return f"parameter %{p.name} dim {k}: {old.dims[k]}->{size}"


def _transposed_operand(draw, ed, comp, instr, k):
    """Insert a random transpose of operand ``k`` of ``instr``; the permutation (new
    dim j is old dim ``perm[j]``), or None."""
    operand = instr.operands[k]
    if not is_array(operand) or operand.shape.rank < 2:
        return None
    perm = tuple(draw(st.permutations(range(operand.shape.rank))))
    if perm == tuple(range(operand.shape.rank)):
        return None
    t = ed.make("transpose", [operand], {"dimensions": list(perm)})
    ed.insert_before(comp, instr, [t])
    instr.operands = [t if j == k else o for j, o in enumerate(instr.operands)]
    return perm


def _labels(c: ConvDimensionNumbers, in_rank: int, k_rank: int, out_rank: int) -> str:
    def side(rank, first, first_pos, second, second_pos, spatial):
        chars = ["?"] * rank
        chars[first_pos], chars[second_pos] = first, second
        for s, pos in enumerate(spatial):
            chars[pos] = str(s)
        return "".join(chars)
    return (side(in_rank, "b", c.input_batch_dimension, "f", c.input_feature_dimension,
                 c.input_spatial_dimensions) + "_" +
            side(k_rank, "i", c.kernel_input_feature_dimension, "o",
                 c.kernel_output_feature_dimension, c.kernel_spatial_dimensions) + "->" +
            side(out_rank, "b", c.output_batch_dimension, "f", c.output_feature_dimension,
                 c.output_spatial_dimensions))


def permute_dimension_numbers(draw, ed: Editor, ctx: MutationContext):
    """A dot's or convolution's operand is transposed and its dimension numbers follow
    (the same product, other dimension numbers and layouts for XLA to canonicalise)."""
    def ok(_c, i):
        return is_array(i) and i.opcode in ("dot", "convolution") and \
            isinstance(i.attrs.get("dim_labels", ConvDimensionNumbers(0, 0, (), 0, 0, (), 0, 0, ())),
                       ConvDimensionNumbers)
    comp, instr = pick(draw, candidates(ed, ok)) or (None, None)
    if instr is None:
        return None
    k = draw(st.integers(0, 1))
    old_operand = instr.operands[k]
    perm = _transposed_operand(draw, ed, comp, instr, k)
    if perm is None:
        return None
    where = {old: new for new, old in enumerate(perm)}
    attrs = dict(instr.attrs)
    if instr.opcode == "dot":
        side = "lhs" if k == 0 else "rhs"
        for name in (f"{side}_contracting_dims", f"{side}_batch_dims"):
            if name in attrs:
                attrs[name] = [where[d] for d in attrs[name]]
    else:
        c = attrs["dim_labels"]
        if k == 0:
            c = ConvDimensionNumbers(where[c.input_batch_dimension], where[c.input_feature_dimension],
                                     tuple(where[d] for d in c.input_spatial_dimensions),
                                     *list(c.__dict__.values())[3:9])
        else:
            c = ConvDimensionNumbers(c.input_batch_dimension, c.input_feature_dimension,
                                     c.input_spatial_dimensions,
                                     where[c.kernel_input_feature_dimension],
                                     where[c.kernel_output_feature_dimension],
                                     tuple(where[d] for d in c.kernel_spatial_dimensions),
                                     c.output_batch_dimension, c.output_feature_dimension,
                                     c.output_spatial_dimensions)
        attrs["dim_labels"] = ConvDimensionNumbers(
            *list(c.__dict__.values())[:9],
            labels=_labels(c, instr.operands[0].shape.rank, instr.operands[1].shape.rank,
                           instr.shape.rank))
    if not _reshape_in_place(ed, comp, instr, attrs):
        instr.operands[k] = old_operand
        return None
    return f"%{instr.name}: operand {k} transposed {list(perm)}"


# ------------------------------------------------------------------ constants


def _specials(et) -> list:
    if et.kind == "float":
        info = ml_dtypes.finfo(et.dtype)
        vals = [0.0, -0.0, 1.0, -1.0, float(info.max), -float(info.max), float(info.tiny),
                float(info.smallest_subnormal)]
        if et.float_format.has_inf:
            vals += [np.inf, -np.inf]
        if et.float_format.has_nan:
            vals += [np.nan]
        return vals
    info = ml_dtypes.iinfo(et.dtype)
    return [0, 1, -1 if et.kind == "sint" else 2, int(info.max), int(info.min)]


def special_constant(draw, ed: Editor, ctx: MutationContext):
    """Some or all elements of a constant become special or boundary values (±0, ±1,
    ±inf, NaN, the largest and smallest finite and subnormal values, integer limits)."""
    loops = _loop_computations(ed)

    def ok(c, i):
        return (i.opcode == "constant" and is_array(i) and isinstance(i.literal, np.ndarray)
                and _float_or_int(i.shape.element_type) and i.literal.size > 0
                and not _counter_like(ed, c, i, loops))
    _comp, instr = pick(draw, candidates(ed, ok)) or (None, None)
    if instr is None:
        return None
    et = instr.shape.element_type
    value = draw(st.sampled_from(_specials(et)))
    lit = np.array(instr.literal, copy=True)
    if lit.size == 1 or draw(st.booleans()):
        lit[...] = np.asarray(value).astype(et.dtype)
    else:
        flat = lit.reshape(-1)
        flat[draw(st.integers(0, flat.size - 1))] = np.asarray(value).astype(et.dtype)
    instr.literal = lit
    return f"constant %{instr.name} <- {value}"


def identity_operation(draw, ed: Editor, ctx: MutationContext):
    """A value meets a special constant in a binary op (``x+0``, ``x*1``, ``x*0``,
    ``max(x,-inf)``, ``x/1``, ``x-x``...): the patterns XLA's simplifiers rewrite."""
    loops = _loop_computations(ed)

    def ok(c, i):
        return (is_array(i) and _float_or_int(i.shape.element_type)
                and not _counter_like(ed, c, i, loops))
    comp, x = pick(draw, candidates(ed, ok)) or (None, None)
    if x is None:
        return None
    et = x.shape.element_type
    op = draw(st.sampled_from(list(values_of("special-value-op"))))
    value = draw(st.sampled_from(_specials(et)[:4] + [2]))
    users = ed.users(comp, x)
    root = comp.root is x
    c, b = ed.scalar_broadcast(et.name, value, x.shape.dims)
    operands = [x, b] if draw(st.booleans()) else [b, x]
    new = ed.make(op, operands)
    ed.insert_after(comp, x, [c, b, new])
    ed.redirect(comp, x, new, users=users, root=root)
    return f"%{x.name} -> {op} with {value}"


# ------------------------------------------------------------------ layouts


def layout_change(draw, ed: Editor, ctx: MutationContext):
    """A value passes through a copy to another layout, a transpose and its inverse, or
    a reshape that merges two dimensions (with a drawn layout) and back."""
    def ok(_c, i):
        return is_array(i) and i.shape.rank >= 2
    comp, x = pick(draw, candidates(ed, ok)) or (None, None)
    if x is None:
        return None
    users = ed.users(comp, x)
    root = comp.root is x
    rank = x.shape.rank
    kind = draw(st.sampled_from(list(values_of("relayout"))))
    if kind == "copy":
        perm = tuple(draw(st.permutations(range(rank))))
        new = [ed.make("copy", [x], shape=x.shape.with_layout(Layout(perm)))]
    elif kind == "transpose":
        perm = list(draw(st.permutations(range(rank))))
        inverse = [perm.index(d) for d in range(rank)]
        t = ed.make("transpose", [x], {"dimensions": perm})
        new = [t, ed.make("transpose", [t], {"dimensions": inverse})]
    else:
        k = draw(st.integers(0, rank - 2))
        dims = list(x.shape.dims)
        merged = dims[:k] + [dims[k] * dims[k + 1]] + dims[k + 2:]
        layout = None
        if len(merged) >= 2:
            layout = Layout(tuple(draw(st.permutations(range(len(merged))))))
        r = ed.make("reshape", [x], shape=ArrayShape(x.shape.element_type, tuple(merged),
                                                     layout=layout))
        new = [r, ed.make("reshape", [r], shape=ArrayShape(x.shape.element_type, tuple(dims)))]
    ed.insert_after(comp, x, new)
    ed.redirect(comp, x, new[-1], users=users, root=root)
    return f"%{x.name}: {kind}"


# ------------------------------------------------------------------ outputs and splicing


def _add_output(ed: Editor, value: Instruction) -> None:
    comp = ed.module.entry
    root = comp.root
    if root.opcode == "tuple" and not ed.users(comp, root):
        root.operands.append(value)
        root.shape = TupleShape(tuple(root.shape.elements) + (value.shape,))
        return
    t = ed.make("tuple", [root, value])
    comp.instructions.append(t)
    comp.root = t


def duplicate_output(draw, ed: Editor, ctx: MutationContext):
    """An intermediate value becomes an output too, so that a producer with users
    inside and outside a fusion forms a multi-output fusion."""
    def ok(c, i):
        return is_array(i) and i.opcode not in ("parameter", "constant") and c.root is not i
    _comp, x = pick(draw, candidates(ed, ok, entry_only=True)) or (None, None)
    if x is None:
        return None
    _add_output(ed, x)
    return f"%{x.name} ({x.opcode}) also an output"


def extract_subprogram(draw, ed: Editor, ctx: MutationContext):
    """The program is cut down to what one of its values needs (a smaller seed)."""
    def ok(c, i):
        return is_array(i) and i.opcode not in ("parameter", "constant") and c.root is not i
    comp, x = pick(draw, candidates(ed, ok, entry_only=True)) or (None, None)
    if x is None:
        return None
    comp.root = x
    ed.prune()
    return f"cut down to %{x.name} ({x.opcode})"


def splice(draw, ed: Editor, ctx: MutationContext):
    """A subgraph of another seed (a value and everything it needs; its parameters
    become new entry parameters) joins the program as another output."""
    donor = pick(draw, ctx.donors)
    if donor is None:
        return None
    dentry = donor.entry
    cands = [i for i in dentry.instructions if is_array(i) and i.opcode != "parameter"]
    v = pick(draw, cands)
    if v is None:
        return None
    need, todo = set(), [v]
    while todo:
        i = todo.pop()
        if id(i) not in need:
            need.add(id(i))
            todo += i.operands
    part = [i for i in dentry.instructions if id(i) in need]
    if len(part) > ctx.max_splice:
        return None
    renamed: dict = {}
    for i in part:
        for callee in i.called_computation_names():
            ed.import_computation(donor, callee, renamed)
    entry = ed.module.entry
    n = len(entry.parameters)
    mapping = ed.clone_instructions(part, {}, renamed)
    copies = [mapping[id(i)] for i in part]
    for c in copies:
        if c.opcode == "parameter":
            c.parameter_number = n
            n += 1
    last_param = entry.parameters[-1] if entry.parameters else None
    params = [c for c in copies if c.opcode == "parameter"]
    ed.insert_after(entry, last_param, params)
    pos = next(k for k, i in enumerate(entry.instructions) if i is entry.root)
    entry.instructions[pos:pos] = [c for c in copies if c.opcode != "parameter"]
    _add_output(ed, mapping[id(v)])
    return f"spliced %{v.name} ({v.opcode}, {len(part)} instructions) from {donor.name}"


MUTATIONS = {
    "retype_subgraph": retype_subgraph,
    "change_window": change_window,
    "resize_parameter": resize_parameter,
    "permute_dimension_numbers": permute_dimension_numbers,
    "special_constant": special_constant,
    "identity_operation": identity_operation,
    "layout_change": layout_change,
    "wrap_in_call": wrap_in_call,
    "wrap_in_conditional": wrap_in_conditional,
    "wrap_in_while": wrap_in_while,
    "duplicate_output": duplicate_output,
    "extract_subprogram": extract_subprogram,
    "splice": splice,
}
