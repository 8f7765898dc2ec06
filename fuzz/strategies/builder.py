"""The program builder: ``Builder`` makes one computation, drawing operands from a
pool of earlier values (fan-out), adapting them with glue (reshape, slice, broadcast,
transpose, convert) or making new parameters and constants; ``ModuleCtx`` holds what
the computations of one module share (called computations, fresh names, ``fuzz_hints``,
the makers). The makers (``registry.MAKERS``) reach the builder through ``ctx.makers``,
so this module imports none of them."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

from hloref.attrs import ComputationRef, Enum, SliceDim
from hloref.ir import Computation, Instruction, ProgramShape
from hloref.op_properties import values_of
from hloref.shape_inference import infer_shape
from hloref.shapes import ArrayShape, Shape, TupleShape
from hloref.types import ELEMENT_TYPES, ElementType

from .inputs import random_array
from .shapes import KIND_DEFAULT, draw_dims, kind_letter, random_layout

#: What the bodies of called computations (loops, branches, callees) are made of (op
#: property ``body-op``, in its order).
BODY_OPS = list(values_of("body-op"))
#: Added to ``BODY_OPS`` while the nesting is below ``max_depth`` (op property
#: ``control-flow``, in its order).
NESTING_OPS = list(values_of("control-flow"))


@dataclass
class Config:
    types: tuple[str, ...]
    max_elements: int = 64
    max_dim: int = 5
    max_rank: int = 3
    layouts: bool = True
    zero_size: bool = True
    max_trip_count: int = 4
    max_depth: int = 2
    #: every type the campaign allows (``types`` is one module's subset of them); a
    #: maker whose kinds the subset lacks falls back to ``KIND_DEFAULT`` types in it
    universe: tuple | None = None


@dataclass
class ModuleCtx:
    cfg: Config
    computations: dict = field(default_factory=dict)  # name -> Computation (callees first)
    programs: dict = field(default_factory=dict)  # name -> ProgramShape
    counter: int = 0
    cache: dict = field(default_factory=dict)
    hints: dict = field(default_factory=dict)  # entry parameter number -> role
    makers: dict = field(default_factory=dict)  # opcode -> maker (registry.MAKERS)

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"{stem.replace('-', '_')}.{self.counter}"

    def register(self, comp: Computation) -> ComputationRef:
        self.computations[comp.name] = comp
        self.programs[comp.name] = ProgramShape(tuple(p.shape for p in comp.parameters),
                                                comp.root.shape)
        return ComputationRef(comp.name)


def no_layout(shape: Shape) -> Shape:
    if isinstance(shape, ArrayShape):
        return ArrayShape(shape.element_type, shape.dims)
    if isinstance(shape, TupleShape):
        return TupleShape(tuple(no_layout(e) for e in shape.elements))
    return shape


class Builder:
    """Builds one computation. ``fixed`` computations (bodies, branches, reducers) take
    a given signature and make new values from constants instead of parameters."""

    def __init__(self, draw, ctx: ModuleCtx, *, param_shapes=(), fixed=False, depth=0,
                 entry=False, ops=None, weights=None):
        self.draw = draw
        self.ctx = ctx
        self.cfg = ctx.cfg
        self.fixed = fixed
        self.depth = depth
        self.entry = entry
        self.instructions: list[Instruction] = []
        self.params: list[Instruction] = []
        self.pool: list[Instruction] = []  # array values usable as operands
        self.used: set[int] = set()
        self.ops = ops
        self.weights = weights
        for s in param_shapes:
            p = self._param(s)
            if isinstance(s, ArrayShape):
                self.pool.append(p)

    # -- basics -------------------------------------------------------------------------
    def _param(self, shape: Shape, hint: str | None = None) -> Instruction:
        p = Instruction(self.ctx.fresh("p"), "parameter", shape, parameter_number=len(self.params))
        self.params.append(p)
        self.instructions.append(p)
        if hint and self.entry:
            self.ctx.hints[p.parameter_number] = hint
        return p

    def add(self, opcode: str, operands, attrs=None, *, shape: Shape | None = None, called=None,
            literal=None, pool: bool = True) -> Instruction:
        attrs = dict(attrs or {})
        if shape is None:
            shape = infer_shape(opcode, [o.shape for o in operands], attrs,
                                {k: self.ctx.programs[str(v)] if not isinstance(v, list) else
                                 [self.ctx.programs[str(x)] for x in v]
                                 for k, v in (called or {}).items()})
        if (self.cfg.layouts and isinstance(shape, ArrayShape) and shape.rank >= 2
                and self.draw(st.integers(0, 9)) == 0):
            shape = shape.with_layout(random_layout(self.draw, shape.rank))
        instr = Instruction(self.ctx.fresh(opcode), opcode, shape, list(operands), attrs,
                            literal=literal)
        for o in operands:
            self.used.add(id(o))
        self.instructions.append(instr)
        if pool and isinstance(shape, ArrayShape):
            self.pool.append(instr)
        return instr

    def et(self, name: str) -> ElementType:
        return ELEMENT_TYPES[name]

    def allowed(self, names) -> list:
        """``names`` that the campaign's types allow (all of them when none is)."""
        u = self.cfg.universe
        return [n for n in names if u is None or n in u] or list(names)

    def pick_type(self, kinds: str = "fcsup") -> ElementType:
        opts = [t for t in self.cfg.types if kind_letter(ELEMENT_TYPES[t]) in kinds]
        if not opts:
            opts = [KIND_DEFAULT[k] for k in kinds]
            if self.cfg.universe is not None:
                opts = [t for t in opts if t in self.cfg.universe] or opts
        return ELEMENT_TYPES[self.draw(st.sampled_from(opts))]

    def new_dims(self, *, min_rank=0, max_rank=None, zero_ok=None):
        return draw_dims(self.draw, min_rank=min_rank,
                     max_rank=self.cfg.max_rank if max_rank is None else max_rank,
                     max_dim=self.cfg.max_dim, max_elements=self.cfg.max_elements,
                     zero_ok=self.cfg.zero_size if zero_ok is None else zero_ok)

    def constant(self, et: ElementType, dims=(), value=None) -> Instruction:
        if value is None:
            rng = np.random.default_rng(self.draw(st.integers(0, 2**32 - 1)))
            arr = random_array(ArrayShape(et, tuple(dims)), rng, "normal")
        else:
            arr = np.full(tuple(dims), value).astype(et.dtype) if not isinstance(value, np.ndarray) \
                else value.astype(et.dtype)
        return self.add("constant", [], shape=ArrayShape(et, tuple(dims)), literal=arr)

    def fresh_value(self, et: ElementType, dims, hint=None) -> Instruction:
        if self.fixed or (self.instructions and self.draw(st.integers(0, 4)) == 0):
            if self.fixed or hint is None:
                if et.is_integer and self.draw(st.booleans()) and dims:
                    return self.add("iota", [], {"iota_dimension": self.draw(
                        st.integers(0, len(dims) - 1))}, shape=ArrayShape(et, tuple(dims)))
                return self.constant(et, dims)
        shape = ArrayShape(et, tuple(dims))
        if self.cfg.layouts and len(dims) >= 2 and self.draw(st.integers(0, 3)) == 0:
            shape = shape.with_layout(random_layout(self.draw, len(dims)))
        p = self._param(shape, hint)
        self.pool.append(p)
        return p

    # -- operands -----------------------------------------------------------------------
    def operand(self, kinds: str = "fcsup", *, et: ElementType | None = None, dims=None,
                min_rank=0, max_rank=None, hint=None) -> Instruction:
        """A pool value fitting the constraints, or one adapted by glue, or a new one."""
        max_rank = self.cfg.max_rank if max_rank is None else max_rank

        def fits(v):
            s = v.shape
            if et is not None and s.element_type != et:
                return False
            if et is None and kind_letter(s.element_type) not in kinds:
                return False
            if dims is not None:
                return s.dims == tuple(dims)
            return min_rank <= s.rank <= max_rank

        if hint is None:
            cands = [v for v in self.pool if fits(v)]
            if cands and self.draw(st.integers(0, 3)) != 0:
                return self.draw(st.sampled_from(cands))
        target_et = et if et is not None else self.pick_type(kinds)
        if hint is not None or not self.pool or self.draw(st.integers(0, 2)) == 0:
            d = tuple(dims) if dims is not None else self.new_dims(min_rank=min_rank,
                                                                    max_rank=max_rank)
            return self.fresh_value(target_et, d, hint)
        v = self.draw(st.sampled_from(self.pool))
        if v.shape.element_type != target_et:
            if v.shape.element_type.is_complex and not target_et.is_complex:
                v = self.add("real", [v])  # XLA has no complex -> real convert
            if v.shape.element_type != target_et:
                v = self.add("convert", [v], shape=ArrayShape(target_et, v.shape.dims))
        if dims is not None:
            return self.reshape_to(v, tuple(dims))
        if not (min_rank <= v.shape.rank <= max_rank):
            return self.reshape_to(v, self.new_dims(min_rank=min_rank, max_rank=max_rank))
        return v

    def reshape_to(self, v: Instruction, dims: tuple) -> Instruction:
        """Glue: reshape / slice / broadcast ``v`` to ``dims`` (same element type)."""
        et = v.shape.element_type
        if v.shape.dims == dims:
            return v
        n, want = v.shape.size, math.prod(dims)
        if n == want:
            if v.shape.rank == len(dims) and self.draw(st.booleans()):
                perm = self.draw(st.permutations(list(range(len(dims)))))
                out = tuple(v.shape.dims[p] for p in perm)
                if out == dims:
                    return self.add("transpose", [v], {"dimensions": tuple(perm)})
            return self.add("reshape", [v], shape=ArrayShape(et, dims))
        if n > want and want > 0 and v.shape.rank == len(dims) and all(
                a >= b for a, b in zip(v.shape.dims, dims)):
            sl = []
            for a, b in zip(v.shape.dims, dims):
                start = self.draw(st.integers(0, a - b))
                sl.append(SliceDim(start, start + b, 1))
            return self.add("slice", [v], {"slice": tuple(sl)})
        if n > want and want > 0:
            flat = self.add("reshape", [v], shape=ArrayShape(et, (n,))) if v.shape.rank != 1 else v
            start = self.draw(st.integers(0, n - want))
            stride = 1
            if n - start >= 2 * want - 1 and self.draw(st.booleans()):
                stride = 2
            s = self.add("slice", [flat], {"slice": (SliceDim(start, start + stride * (want - 1) + 1,
                                                               stride),)})
            return self.add("reshape", [s], shape=ArrayShape(et, dims))
        # grow: broadcast a scalar or a matching sub-shape
        if n >= 1:
            sub = None
            if v.shape.rank <= len(dims):
                # broadcast v along new dims when its dims are a subsequence of ``dims``
                positions, j = [], 0
                for i, d in enumerate(dims):
                    if j < v.shape.rank and v.shape.dims[j] == d:
                        positions.append(i)
                        j += 1
                if j == v.shape.rank:
                    sub = tuple(positions)
            if sub is not None:
                return self.add("broadcast", [v], {"dimensions": sub},
                                shape=ArrayShape(et, dims))
            flat = self.add("reshape", [v], shape=ArrayShape(et, (n,))) if v.shape.rank != 1 else v
            i = self.draw(st.integers(0, n - 1))
            s = self.add("slice", [flat], {"slice": (SliceDim(i, i + 1, 1),)})
            sc = self.add("reshape", [s], shape=ArrayShape(et, ()))
            return self.add("broadcast", [sc], {"dimensions": ()}, shape=ArrayShape(et, dims))
        return self.fresh_value(et, dims)

    def scalar_of(self, et: ElementType) -> Instruction:
        return self.operand(et=et, dims=())

    # -- computations -------------------------------------------------------------------
    def sub_builder(self, param_shapes, *, fixed=True, ops=None) -> "Builder":
        return Builder(self.draw, self.ctx, param_shapes=param_shapes, fixed=fixed,
                       depth=self.depth + 1, ops=ops)

    def finish_computation(self, b: "Builder", root: Instruction, stem: str) -> ComputationRef:
        # ROOT need not be the last line in HLO text; moving it would break def-before-use
        if root not in b.instructions or root.opcode == "parameter":
            root = b.add("copy", [root]) if isinstance(root.shape, ArrayShape) else \
                b.add("tuple", [b.add("get-tuple-element", [root], {"index": i}, pool=False)
                                for i in range(len(root.shape.elements))], pool=False)
        comp = Computation(self.ctx.fresh(stem), b.instructions, root)
        return self.ctx.register(comp)

    def random_body(self, b: "Builder", n_ops: int) -> None:
        ops = BODY_OPS if self.depth + 1 >= self.cfg.max_depth else BODY_OPS + NESTING_OPS
        for _ in range(n_ops):
            op = self.draw(st.sampled_from(ops))
            self.ctx.makers[op](b)

    def scalar_computation(self, et: ElementType, kind: str) -> ComputationRef:
        """A binary reducer ``(et, et) -> et``: add, multiply, maximum, minimum, and, or."""
        key = ("reducer", et.name, kind)
        if key in self.ctx.cache:
            return self.ctx.cache[key]
        b = Builder(self.draw, self.ctx, param_shapes=[ArrayShape(et, ())] * 2, fixed=True)
        root = b.add(kind, list(b.params))
        ref = self.finish_computation(b, root, f"{kind}_{et.name}")
        self.ctx.cache[key] = ref
        return ref

    def comparator(self, ets, direction: str) -> ComputationRef:
        """Sort comparator on operand 0 (TOTALORDER for floats: a strict weak order)."""
        b = Builder(self.draw, self.ctx,
                    param_shapes=[ArrayShape(e, ()) for e in ets for _ in (0, 1)], fixed=True)
        attrs = {"direction": Enum(direction)}
        if ets[0].is_float:
            attrs["type"] = Enum("TOTALORDER")
        root = b.add("compare", [b.params[0], b.params[1]], attrs)
        return self.finish_computation(b, root, "cmp")


def adapt(b: Builder, v: Instruction, shape: ArrayShape) -> Instruction:
    """Glue: ``v`` converted to ``shape``'s element type and reshaped to its dims."""
    if v.shape.element_type != shape.element_type:
        src = v
        if src.shape.element_type.is_complex and not shape.element_type.is_complex:
            src = b.add("real", [src])
        v = b.add("convert", [src], shape=ArrayShape(shape.element_type, src.shape.dims))
    return b.reshape_to(v, shape.dims)
