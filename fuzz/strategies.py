"""Hypothesis strategies for HLO programs that are valid by construction.

The strategies build ``hloref.ir`` objects directly: shapes are drawn first,
attributes are derived from them, and every result shape comes from
``hloref.shape_inference.infer_shape``; nothing is filtered after the fact. The
programs look like what XLA's compiler sees:

* DAGs with reuse and fan-out (operands are taken from a pool of earlier values
  more often than not), mixed element types joined by ``convert``;
* glue (``reshape``/``slice``/``broadcast``/``transpose``/``convert``) inserted
  where an op needs an operand of a shape or type the pool does not hold;
* reductions with real reducer computations (identity init values), ``dot`` and
  ``convolution`` with random dimension numbers, ``gather``/``scatter`` with random
  dimension numbers, ``sort`` with comparators, ``while`` loops whose trip count
  is bounded (a counter in the loop-carried tuple compared with a constant),
  ``conditional``, ``call``, ``map``, ``opt-barrier``, constants;
* non-default layouts, zero-size dimensions, scalars, sizes just above powers of
  two, sub-byte integers and every float type including f8 and f4.

Public strategies (keyword-only bounds, validated with ``InvalidArgument``):

``element_types()``, ``shapes()``, ``instructions(opcode=...)``,
``computations()``, ``modules(...)`` and ``inputs_for(module)``.

``modules(ops=...)`` restricts the opcodes the generator picks (glue ops are still
used to connect values); ``weights={opcode: w}`` biases the choice. The opcodes a
module can reach are ``GENERATABLE_OPCODES``; ``reachable_opcodes()`` intersects
them with what hloref evaluates.

Generated modules carry ``module.fuzz_hints``: parameter number → role
(``index``, ``positive``, ``spd``, ``triangular``, ``state``), which
``inputs_for`` uses to pick sensible values (e.g. symmetric positive definite
matrices for ``cholesky``, possibly out-of-range starts for ``dynamic-slice``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import ml_dtypes
import numpy as np
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from hloref.attrs import (ComputationRef, ConvDimensionNumbers, Enum, PaddingDim, SliceDim, Window,
                          WindowDim)
from hloref.ir import Computation, Instruction, Module, ProgramShape
from hloref.shape_inference import infer_shape
from hloref.shapes import ArrayShape, Layout, Shape, TupleShape
from hloref.types import ARRAY_TYPES, ELEMENT_TYPES, ElementType

__all__ = [
    "element_types", "shapes", "instructions", "computations", "modules", "inputs_for",
    "GENERATABLE_OPCODES", "ORACLE_ELEMENT_TYPES", "ALL_ELEMENT_TYPES", "reachable_opcodes",
    "INPUT_MODES", "NOT_IN_XLA", "Inputs", "random_inputs",
]

# --------------------------------------------------------------------------- element types

ALL_ELEMENT_TYPES: tuple[str, ...] = tuple(t.name for t in ARRAY_TYPES)
#: Types the XLA oracle accepts (s1/u1 are mapped to pred by hlo_to_stablehlo).
ORACLE_ELEMENT_TYPES: tuple[str, ...] = tuple(t for t in ALL_ELEMENT_TYPES if t not in ("s1", "u1"))

_FLOATS = tuple(t.name for t in ARRAY_TYPES if t.is_float)
_KIND_DEFAULT = {"f": "f32", "c": "c64", "s": "s32", "u": "u32", "p": "pred"}


def _kind(et: ElementType) -> str:
    return {"float": "f", "complex": "c", "sint": "s", "uint": "u", "pred": "p"}[et.kind]


def _validate_bounds(name: str, lo, hi, *, minimum: int = 0) -> None:
    for label, v in ((f"min_{name}", lo), (f"max_{name}", hi)):
        if not isinstance(v, int) or isinstance(v, bool):
            raise InvalidArgument(f"{label}={v!r} must be an integer")
        if v < minimum:
            raise InvalidArgument(f"{label}={v} must be >= {minimum}")
    if lo > hi:
        raise InvalidArgument(f"min_{name}={lo} must be <= max_{name}={hi}")


def _validate_types(names) -> tuple[str, ...]:
    if names is None:
        return ORACLE_ELEMENT_TYPES
    names = tuple(names)
    if not names:
        raise InvalidArgument("element_types must not be empty")
    for n in names:
        if n not in ALL_ELEMENT_TYPES:
            raise InvalidArgument(f"unknown element type {n!r}; expected one of "
                                  f"{', '.join(ALL_ELEMENT_TYPES)}")
    return names


def element_types(*, allowed=None, kinds: str = "fcsup") -> st.SearchStrategy[ElementType]:
    """Array element types (``ElementType``); ``allowed``: names (default: every type
    the XLA oracle accepts); ``kinds``: letters f(loat) c(omplex) s(igned) u(nsigned)
    p(red)."""
    names = _validate_types(allowed)
    if not isinstance(kinds, str) or not kinds or set(kinds) - set("fcsup"):
        raise InvalidArgument(f"kinds={kinds!r} must be a non-empty string of letters from 'fcsup'")
    chosen = [ELEMENT_TYPES[n] for n in names if _kind(ELEMENT_TYPES[n]) in kinds]
    if not chosen:
        raise InvalidArgument(f"no element type of kinds {kinds!r} among {names}")
    return st.sampled_from(chosen)


# --------------------------------------------------------------------------- shapes

_ABOVE_POW2 = (3, 5, 9, 17, 33, 65, 129)


def _dim(draw, max_dim: int, zero_ok: bool) -> int:
    r = draw(st.integers(0, 15))
    if r == 0 and zero_ok:
        return 0
    if r == 1:
        opts = [d for d in _ABOVE_POW2 if d <= max_dim]
        if opts:
            return draw(st.sampled_from(opts))
    return draw(st.integers(1, max(1, min(max_dim, 4))))


def _dims(draw, *, min_rank=0, max_rank=3, max_dim=5, max_elements=64, zero_ok=True):
    rank = draw(st.integers(min_rank, max_rank))
    dims = []
    for _ in range(rank):
        size = math.prod(dims) if dims else 1
        room = max(1, max_elements // max(size, 1))
        dims.append(min(_dim(draw, max_dim, zero_ok), room) if room >= 1 else 1)
    return tuple(dims)


def _random_layout(draw, rank: int) -> Layout | None:
    if rank < 2:
        return None
    perm = draw(st.permutations(list(range(rank))))
    return Layout(tuple(perm))


@st.composite
def _shapes(draw, types, min_rank, max_rank, max_dim, max_elements, zero_ok, layouts):
    et = draw(element_types(allowed=types))
    dims = _dims(draw, min_rank=min_rank, max_rank=max_rank, max_dim=max_dim,
                 max_elements=max_elements, zero_ok=zero_ok)
    shape = ArrayShape(et, dims)
    if layouts and draw(st.integers(0, 3)) == 0:
        shape = shape.with_layout(_random_layout(draw, len(dims)))
    return shape


def shapes(*, element_types=None, min_rank: int = 0, max_rank: int = 3, max_dim: int = 5,
           max_elements: int = 64, zero_size: bool = True,
           layouts: bool = True) -> st.SearchStrategy[ArrayShape]:
    """Array shapes: rank in [min_rank, max_rank], dimensions up to ``max_dim``
    (occasionally 0 when ``zero_size``, or just above a power of two), at most
    ``max_elements`` elements, a random non-default layout now and then."""
    types = _validate_types(element_types)
    _validate_bounds("rank", min_rank, max_rank)
    if max_rank > 6:
        raise InvalidArgument(f"max_rank={max_rank} must be <= 6")
    _validate_bounds("dim", 1, max_dim, minimum=1)
    _validate_bounds("elements", 1, max_elements, minimum=1)
    return _shapes(types, min_rank, max_rank, max_dim, max_elements, zero_size, layouts)


# --------------------------------------------------------------------------- opcodes

_UNARY = {
    **{op: "f" for op in ("floor", "ceil", "round-nearest-afz", "round-nearest-even",
                          "is-finite", "erf")},
    **{op: "fc" for op in ("cosine", "sine", "tan", "exponential", "exponential-minus-one",
                           "log", "log-plus-one", "logistic", "rsqrt", "sqrt",
                           "tanh", "atan")},
    "cbrt": "f",  # XLA's shape inference refuses complex cbrt
    # complex forms: UNIMPLEMENTED on XLA:CPU (jaxlib 0.10.2), real operands only
    **{op: "f" for op in ("acos", "acosh", "asin", "asinh", "atanh", "cosh", "sinh")},
    "real": "fc", "imag": "fc", "abs": "fcs", "sign": "fcs", "negate": "fcsu",
    "count-leading-zeros": "su", "popcnt": "su", "not": "psu", "copy": "fcsup",
}
_BINARY = {
    "add": "fcsu", "subtract": "fcsu", "multiply": "fcsup", "divide": "fcsu",
    "remainder": "fsu", "power": "fcsu", "atan2": "fc", "maximum": "fcsup",
    "minimum": "fcsup", "and": "psu", "or": "psu", "xor": "psu", "shift-left": "su",
    "shift-right-arithmetic": "su", "shift-right-logical": "su", "complex": "f",
}
_ELEMENTWISE = set(_UNARY) | set(_BINARY) | {"compare", "select", "clamp", "convert"}

#: Default relative weights of the opcodes the generator picks.
DEFAULT_WEIGHTS: dict[str, float] = {
    **{op: 1.0 for op in _UNARY}, **{op: 1.5 for op in _BINARY},
    "add": 4, "multiply": 3, "subtract": 2, "maximum": 2, "exponential": 1.5, "tanh": 1.5,
    "compare": 3, "select": 3, "clamp": 1.5, "convert": 4, "bitcast-convert": 1.5,
    "reduce-precision": 1, "broadcast": 3, "reshape": 3, "transpose": 2.5, "reverse": 1,
    "slice": 2.5, "concatenate": 2, "pad": 2, "iota": 1.5, "constant": 2,
    "dynamic-slice": 2, "dynamic-update-slice": 2, "tuple": 1, "get-tuple-element": 1,
    "call": 1.5, "while": 2, "conditional": 1.5, "map": 1, "opt-barrier": 0.7,
    "reduce": 4, "reduce-window": 2, "select-and-scatter": 1, "sort": 2, "gather": 2,
    "scatter": 2, "dot": 4, "convolution": 2.5, "fft": 0.7, "cholesky": 0.5,
    "triangular-solve": 0.7, "batch-norm-inference": 0.6, "batch-norm-training": 0.6,
    "batch-norm-grad": 0.5, "topk": 0.8, "rng-bit-generator": 0.5, "stochastic-convert": 0.5,
}

#: Opcodes hloref evaluates that XLA's HLO parser does not know (jaxlib 0.10.2): the
#: generator makes them only when ``ops=`` names them.
NOT_IN_XLA = frozenset({"atan"})

#: Every opcode some maker can produce (the glue ops included).
GENERATABLE_OPCODES: frozenset[str] = (frozenset(DEFAULT_WEIGHTS) | {"parameter"}) - NOT_IN_XLA


def reachable_opcodes(backend: str = "cpu") -> frozenset[str]:
    """Opcodes the generator can produce that hloref evaluates on ``backend``."""
    import hloref
    return GENERATABLE_OPCODES & hloref.supported_opcodes(backend)


# --------------------------------------------------------------------------- builders


@dataclass
class _Config:
    types: tuple[str, ...]
    max_elements: int = 64
    max_dim: int = 5
    max_rank: int = 3
    layouts: bool = True
    zero_size: bool = True
    max_trip_count: int = 4
    max_depth: int = 2


@dataclass
class _ModuleCtx:
    cfg: _Config
    computations: dict = field(default_factory=dict)  # name -> Computation (callees first)
    programs: dict = field(default_factory=dict)  # name -> ProgramShape
    counter: int = 0
    cache: dict = field(default_factory=dict)
    hints: dict = field(default_factory=dict)  # entry parameter number -> role

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"{stem.replace('-', '_')}.{self.counter}"

    def register(self, comp: Computation) -> ComputationRef:
        self.computations[comp.name] = comp
        self.programs[comp.name] = ProgramShape(tuple(p.shape for p in comp.parameters),
                                                comp.root.shape)
        return ComputationRef(comp.name)


def _no_layout(shape: Shape) -> Shape:
    if isinstance(shape, ArrayShape):
        return ArrayShape(shape.element_type, shape.dims)
    if isinstance(shape, TupleShape):
        return TupleShape(tuple(_no_layout(e) for e in shape.elements))
    return shape


class _Builder:
    """Builds one computation. ``fixed`` computations (bodies, branches, reducers) take
    a given signature and make new values from constants instead of parameters."""

    def __init__(self, draw, ctx: _ModuleCtx, *, param_shapes=(), fixed=False, depth=0,
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
            shape = shape.with_layout(_random_layout(self.draw, shape.rank))
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

    def pick_type(self, kinds: str = "fcsup") -> ElementType:
        opts = [t for t in self.cfg.types if _kind(ELEMENT_TYPES[t]) in kinds]
        if not opts:
            opts = [_KIND_DEFAULT[k] for k in kinds]
        return ELEMENT_TYPES[self.draw(st.sampled_from(opts))]

    def new_dims(self, *, min_rank=0, max_rank=None, zero_ok=None):
        return _dims(self.draw, min_rank=min_rank,
                     max_rank=self.cfg.max_rank if max_rank is None else max_rank,
                     max_dim=self.cfg.max_dim, max_elements=self.cfg.max_elements,
                     zero_ok=self.cfg.zero_size if zero_ok is None else zero_ok)

    def constant(self, et: ElementType, dims=(), value=None) -> Instruction:
        if value is None:
            rng = np.random.default_rng(self.draw(st.integers(0, 2**32 - 1)))
            arr = _random_array(ArrayShape(et, tuple(dims)), rng, "normal")
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
            shape = shape.with_layout(_random_layout(self.draw, len(dims)))
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
            if et is None and _kind(s.element_type) not in kinds:
                return False
            if dims is not None:
                return s.dims == tuple(dims)
            return min_rank <= s.rank <= max_rank

        if hint is None:
            cands = [v for v in self.pool if fits(v)]
            if cands and self.draw(st.integers(0, 3)) != 0:
                return self.draw(st.sampled_from(cands))
        target_et = et or (None)
        if target_et is None:
            target_et = self.pick_type(kinds)
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
    def sub_builder(self, param_shapes, *, fixed=True, ops=None) -> "_Builder":
        return _Builder(self.draw, self.ctx, param_shapes=param_shapes, fixed=fixed,
                        depth=self.depth + 1, ops=ops)

    def finish_computation(self, b: "_Builder", root: Instruction, stem: str) -> ComputationRef:
        # ROOT need not be the last line in HLO text; moving it would break def-before-use
        if root not in b.instructions or root.opcode == "parameter":
            if True:
                root = b.add("copy", [root]) if isinstance(root.shape, ArrayShape) else \
                    b.add("tuple", [b.add("get-tuple-element", [root], {"index": i}, pool=False)
                                    for i in range(len(root.shape.elements))], pool=False)
        comp = Computation(self.ctx.fresh(stem), b.instructions, root)
        return self.ctx.register(comp)

    def random_body(self, b: "_Builder", n_ops: int) -> None:
        ops = _BODY_OPS if self.depth + 1 >= self.cfg.max_depth else _BODY_OPS + _NESTING_OPS
        for _ in range(n_ops):
            op = self.draw(st.sampled_from(ops))
            _MAKERS[op](b)

    def scalar_computation(self, et: ElementType, kind: str) -> ComputationRef:
        """A binary reducer ``(et, et) -> et``: add, multiply, maximum, minimum, and, or."""
        key = ("reducer", et.name, kind)
        if key in self.ctx.cache:
            return self.ctx.cache[key]
        b = _Builder(self.draw, self.ctx, param_shapes=[ArrayShape(et, ())] * 2, fixed=True)
        root = b.add(kind, list(b.params))
        ref = self.finish_computation(b, root, f"{kind}_{et.name}")
        self.ctx.cache[key] = ref
        return ref

    def comparator(self, ets, direction: str) -> ComputationRef:
        """Sort comparator on operand 0 (TOTALORDER for floats: a strict weak order)."""
        b = _Builder(self.draw, self.ctx,
                     param_shapes=[ArrayShape(e, ()) for e in ets for _ in (0, 1)], fixed=True)
        attrs = {"direction": Enum(direction)}
        if ets[0].is_float:
            attrs["type"] = Enum("TOTALORDER")
        root = b.add("compare", [b.params[0], b.params[1]], attrs)
        return self.finish_computation(b, root, "cmp")


# --------------------------------------------------------------------------- makers


def _identity(et: ElementType, kind: str):
    if kind == "add" or kind == "or":
        return 0 if not et.is_pred else False
    if kind == "and":  # all bits set
        return True if et.is_pred else (-1 if et.is_signed_integer else et.max_value)
    if kind == "multiply":
        return 1 if not et.is_pred else True
    if et.is_pred:
        return kind == "minimum"
    if et.is_integer:
        return et.min_value if kind == "maximum" else et.max_value
    fmt = et.float_format
    if fmt.has_inf:
        return -np.inf if kind == "maximum" else np.inf
    info = ml_dtypes.finfo(et.dtype) if et.bits < 32 else np.finfo(et.dtype)
    if not fmt.signed:
        return float(info.tiny) if kind == "maximum" else float(info.max)
    return float(-info.max) if kind == "maximum" else float(info.max)


def _reducer_kinds(et: ElementType) -> list[str]:
    if et.is_pred:
        return ["and", "or", "maximum", "minimum"]
    if et.is_integer:
        return ["add", "multiply", "maximum", "minimum", "and", "or"]
    if et.is_complex:
        return ["add"]
    if et.name == "f8e8m0fnu":
        return ["maximum", "minimum"]
    return ["add", "add", "maximum", "minimum"]


def _m_unary(op):
    def make(b: _Builder):
        x = b.operand(_UNARY[op])
        return b.add(op, [x])
    return make


def _m_binary(op):
    def make(b: _Builder):
        kinds = _BINARY[op]
        if op == "complex":
            x = b.operand(et=b.et(b.draw(st.sampled_from(["f32", "f64"]))))
        else:
            x = b.operand(kinds)
        y = b.operand(et=x.shape.element_type, dims=x.shape.dims)
        if b.draw(st.integers(0, 4)) == 0:
            y = x  # x op x: fan-out of one value
        return b.add(op, [x, y])
    return make


def _m_compare(b: _Builder):
    x = b.operand("fcsup")
    y = b.operand(et=x.shape.element_type, dims=x.shape.dims)
    et = x.shape.element_type
    dirs = ["EQ", "NE"] if et.is_complex else ["EQ", "NE", "LT", "LE", "GT", "GE"]
    attrs = {"direction": Enum(b.draw(st.sampled_from(dirs)))}
    if et.is_float and b.draw(st.booleans()):
        attrs["type"] = Enum("TOTALORDER")
    return b.add("compare", [x, y], attrs)


def _m_select(b: _Builder):
    x = b.operand("fcsup")
    y = b.operand(et=x.shape.element_type, dims=x.shape.dims)
    p = b.operand(et=ELEMENT_TYPES["pred"], dims=x.shape.dims)
    return b.add("select", [p, x, y])


def _m_clamp(b: _Builder):
    x = b.operand("fsu")
    scalar = b.draw(st.booleans())
    d = () if scalar else x.shape.dims
    lo = b.operand(et=x.shape.element_type, dims=d)
    hi = b.operand(et=x.shape.element_type, dims=d)
    return b.add("clamp", [lo, x, hi])


def _m_convert(b: _Builder):
    x = b.operand("fcsup")
    et = b.pick_type("fcsup") if b.draw(st.integers(0, 3)) else b.et(
        b.draw(st.sampled_from([t for t in b.cfg.types] or ["f32"])))
    if x.shape.element_type.is_complex and not et.is_complex:
        x = b.add("real", [x])
    return b.add("convert", [x], shape=ArrayShape(et, x.shape.dims))


def _m_bitcast_convert(b: _Builder):
    x = b.operand("fcsu")
    src = x.shape.element_type
    same = [t for t in b.cfg.types if ELEMENT_TYPES[t].bits == src.bits and not
            ELEMENT_TYPES[t].is_pred]
    smaller = [t for t in b.cfg.types if ELEMENT_TYPES[t].bits < src.bits and
               src.bits % ELEMENT_TYPES[t].bits == 0 and not ELEMENT_TYPES[t].is_pred
               and ELEMENT_TYPES[t].bits >= 8 and not ELEMENT_TYPES[t].is_complex]
    if smaller and not src.is_complex and b.draw(st.integers(0, 2)) == 0:
        et = b.et(b.draw(st.sampled_from(smaller)))
        dims = x.shape.dims + (src.bits // et.bits,)
        return b.add("bitcast-convert", [x], shape=ArrayShape(et, dims))
    et = b.et(b.draw(st.sampled_from(same))) if same else src
    return b.add("bitcast-convert", [x], shape=ArrayShape(et, x.shape.dims))


def _m_reduce_precision(b: _Builder):
    x = b.operand("f")
    fmt = x.shape.element_type.float_format
    e = b.draw(st.integers(1, max(1, fmt.exponent_bits)))
    m = b.draw(st.integers(0, fmt.mantissa_bits))
    return b.add("reduce-precision", [x], {"exponent_bits": e, "mantissa_bits": m})


def _m_broadcast(b: _Builder):
    x = b.operand("fcsup", max_rank=2)
    rank = b.draw(st.integers(x.shape.rank, min(x.shape.rank + 2, 4)))
    positions = sorted(b.draw(st.permutations(list(range(rank))))[:x.shape.rank])
    dims = [0] * rank
    for p, d in zip(positions, x.shape.dims):
        dims[p] = d
    size = max(x.shape.size, 1)
    for i in range(rank):
        if i not in positions:
            room = max(1, b.cfg.max_elements // size)
            dims[i] = b.draw(st.integers(1, max(1, min(4, room))))
            size *= dims[i]
    return b.add("broadcast", [x], {"dimensions": tuple(positions)},
                 shape=ArrayShape(x.shape.element_type, tuple(dims)))


def _factor(b: _Builder, n: int) -> tuple:
    if n == 0:
        dims = list(b.new_dims(min_rank=1))
        if 0 not in dims:
            dims[b.draw(st.integers(0, len(dims) - 1))] = 0
        return tuple(dims)
    dims = []
    rest = n
    for _ in range(b.draw(st.integers(0, 3))):
        divs = [d for d in range(1, rest + 1) if rest % d == 0]
        d = b.draw(st.sampled_from(divs))
        dims.append(d)
        rest //= d
    dims.append(rest)
    if b.draw(st.booleans()):
        dims.insert(b.draw(st.integers(0, len(dims))), 1)
    perm = b.draw(st.permutations(dims))
    return tuple(perm)


def _m_reshape(b: _Builder):
    x = b.operand("fcsup")
    return b.add("reshape", [x], shape=ArrayShape(x.shape.element_type, _factor(b, x.shape.size)))


def _m_transpose(b: _Builder):
    x = b.operand("fcsup", min_rank=1)
    perm = tuple(b.draw(st.permutations(list(range(x.shape.rank)))))
    return b.add("transpose", [x], {"dimensions": perm})


def _m_reverse(b: _Builder):
    x = b.operand("fcsup", min_rank=1)
    dims = tuple(sorted(b.draw(st.sets(st.integers(0, x.shape.rank - 1), min_size=1))))
    return b.add("reverse", [x], {"dimensions": dims})


def _m_slice(b: _Builder):
    x = b.operand("fcsup", min_rank=1)
    sl = []
    for d in x.shape.dims:
        start = b.draw(st.integers(0, d))
        limit = b.draw(st.integers(start, d))
        stride = b.draw(st.integers(1, 3))
        sl.append(SliceDim(start, limit, stride))
    return b.add("slice", [x], {"slice": tuple(sl)})


def _m_concatenate(b: _Builder):
    x = b.operand("fcsup", min_rank=1)
    dim = b.draw(st.integers(0, x.shape.rank - 1))
    parts = [x]
    for _ in range(b.draw(st.integers(1, 2))):
        dims = list(x.shape.dims)
        dims[dim] = b.draw(st.integers(0, 3))
        parts.append(b.operand(et=x.shape.element_type, dims=tuple(dims)))
    return b.add("concatenate", parts, {"dimensions": (dim,)})


def _m_pad(b: _Builder):
    # rank >= 1: hloref prints a rank-0 pad as ``padding=`` and cannot read it back
    x = b.operand("fcsup", min_rank=1)
    pv = b.scalar_of(x.shape.element_type)
    pads = []
    for d in x.shape.dims:
        interior = b.draw(st.integers(0, 2)) if d > 1 else 0
        full = d + max(d - 1, 0) * interior
        low = b.draw(st.integers(-min(2, full), 2))
        high = b.draw(st.integers(-min(2, full + low), 2)) if full + low >= 0 else 0
        pads.append(PaddingDim(low, high, interior))
    return b.add("pad", [x, pv], {"padding": tuple(pads)})


def _m_iota(b: _Builder):
    et = b.pick_type("fsu")
    dims = b.new_dims(min_rank=1)
    return b.add("iota", [], {"iota_dimension": b.draw(st.integers(0, len(dims) - 1))},
                 shape=ArrayShape(et, dims))


def _m_constant(b: _Builder):
    et = b.pick_type("fcsup")
    return b.constant(et, b.new_dims(max_rank=2))


def _index_scalars(b: _Builder, n: int, bound: int = 6) -> list[Instruction]:
    et = b.et(b.draw(st.sampled_from(["s32", "s32", "s64", "u32", "s8"])))
    out = []
    for _ in range(n):
        if b.fixed or b.draw(st.booleans()):
            lo = 0 if et.is_unsigned_integer else -2
            out.append(b.constant(et, (), b.draw(st.integers(lo, bound))))
        else:
            out.append(b.fresh_value(et, (), hint="index"))
    return out


def _m_dynamic_slice(b: _Builder):
    x = b.operand("fcsup", min_rank=1)
    sizes = tuple(b.draw(st.integers(0, d)) for d in x.shape.dims)
    idx = _index_scalars(b, x.shape.rank, max(x.shape.dims) + 2)
    return b.add("dynamic-slice", [x] + idx, {"dynamic_slice_sizes": sizes})


def _m_dynamic_update_slice(b: _Builder):
    x = b.operand("fcsup", min_rank=1)
    udims = tuple(b.draw(st.integers(0, d)) for d in x.shape.dims)
    u = b.operand(et=x.shape.element_type, dims=udims)
    idx = _index_scalars(b, x.shape.rank, max(x.shape.dims) + 2)
    return b.add("dynamic-update-slice", [x, u] + idx)


def _m_tuple(b: _Builder):
    vals = [b.operand() for _ in range(b.draw(st.integers(1, 3)))]
    t = b.add("tuple", vals, pool=False)
    i = b.draw(st.integers(0, len(vals) - 1))
    return b.add("get-tuple-element", [t], {"index": i})


def _m_opt_barrier(b: _Builder):
    vals = [b.operand() for _ in range(b.draw(st.integers(1, 2)))]
    t = b.add("tuple", vals, pool=False)
    ob = b.add("opt-barrier", [t], pool=False)
    last = None
    for i in range(len(vals)):
        last = b.add("get-tuple-element", [ob], {"index": i})
    return last


def _adapt(b: _Builder, v: Instruction, shape: ArrayShape) -> Instruction:
    if v.shape.element_type != shape.element_type:
        src = v
        if src.shape.element_type.is_complex and not shape.element_type.is_complex:
            src = b.add("real", [src])
        v = b.add("convert", [src], shape=ArrayShape(shape.element_type, src.shape.dims))
    return b.reshape_to(v, shape.dims)


def _m_call(b: _Builder):
    args = [b.operand() for _ in range(b.draw(st.integers(1, 3)))]
    sub = b.sub_builder([_no_layout(a.shape) for a in args], fixed=False)
    b.random_body(sub, b.draw(st.integers(1, 5)))
    outs = [sub.draw(st.sampled_from(sub.pool)) for _ in range(b.draw(st.integers(1, 2)))]
    if sub.params and not sub.fixed:
        pass
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


def _m_while(b: _Builder):
    n_state = b.draw(st.integers(1, 3))
    state_vals = [b.operand("fcsup", max_rank=2) for _ in range(n_state)]
    trip = b.draw(st.integers(0, b.cfg.max_trip_count))
    start = b.draw(st.integers(-1, 1))
    counter_init = b.constant(b.et("s32"), (), start)
    init = b.add("tuple", [counter_init] + state_vals, pool=False)
    tshape = _no_layout(init.shape)
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
        new.append(_adapt(bb, v, s))
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


def _m_conditional(b: _Builder):
    n = b.draw(st.integers(1, 3))
    use_pred = n == 2 and b.draw(st.booleans())
    operands = [b.operand() for _ in range(n)]
    out = _no_layout(b.draw(st.sampled_from(operands)).shape)
    refs = []
    for o in operands:
        sb = b.sub_builder([_no_layout(o.shape)])
        b.random_body(sb, b.draw(st.integers(0, 3)))
        v = sb.draw(st.sampled_from(sb.pool))
        r = _adapt(sb, v, out)
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


def _m_map(b: _Builder):
    x = b.operand("fsu", min_rank=1)
    k = b.draw(st.integers(1, 2))
    args = [x] + [b.operand(et=x.shape.element_type, dims=x.shape.dims) for _ in range(k - 1)]
    sb = b.sub_builder([ArrayShape(x.shape.element_type, ())] * k)
    for _ in range(b.draw(st.integers(1, 3))):
        op = b.draw(st.sampled_from(["add", "multiply", "maximum", "subtract", "negate", "abs"]
                                    if not x.shape.element_type.is_unsigned_integer else
                                    ["add", "multiply", "maximum", "subtract"]))
        _MAKERS[op](sb)
    root = sb.pool[-1] if sb.pool[-1].opcode != "parameter" else sb.add("copy", [sb.pool[-1]])
    root = _adapt(sb, root, ArrayShape(x.shape.element_type, ()))
    if root.opcode == "parameter":
        root = sb.add("copy", [root])
    ref = b.finish_computation(sb, root, "mapper")
    return b.add("map", args, {"dimensions": tuple(range(x.shape.rank)), "to_apply": ref},
                 called={"to_apply": ref})


def _m_reduce(b: _Builder):
    x = b.operand("fcsup", min_rank=1)
    et = x.shape.element_type
    dims = tuple(sorted(b.draw(st.sets(st.integers(0, x.shape.rank - 1), min_size=0))))
    if b.draw(st.integers(0, 3)) == 0 and not et.is_complex:
        # variadic: (max, min) of two inputs at once, an independent reducer per operand
        y = b.operand(dims=x.shape.dims, kinds="fsu")
        e2 = y.shape.element_type
        kinds = [b.draw(st.sampled_from(["maximum", "minimum"])) for _ in range(2)]
        sb = _Builder(b.draw, b.ctx, param_shapes=[ArrayShape(et, ()), ArrayShape(e2, ()),
                                                    ArrayShape(et, ()), ArrayShape(e2, ())],
                      fixed=True)
        p = sb.params
        r0 = sb.add(kinds[0], [p[0], p[2]])
        r1 = sb.add(kinds[1], [p[1], p[3]])
        root = sb.add("tuple", [r0, r1], pool=False)
        ref = b.finish_computation(sb, root, "reducer2")
        inits = [b.constant(et, (), _identity(et, kinds[0])),
                 b.constant(e2, (), _identity(e2, kinds[1]))]
        r = b.add("reduce", [x, y] + inits, {"dimensions": dims, "to_apply": ref},
                  called={"to_apply": ref}, pool=False)
        b.add("get-tuple-element", [r], {"index": 1})
        return b.add("get-tuple-element", [r], {"index": 0})
    kind = b.draw(st.sampled_from(_reducer_kinds(et)))
    ref = b.scalar_computation(et, kind)
    init = b.constant(et, (), _identity(et, kind))
    return b.add("reduce", [x, init], {"dimensions": dims, "to_apply": ref},
                 called={"to_apply": ref})


def _window(b: _Builder, dims, *, dilations=True, padding=True) -> Window:
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


def _m_reduce_window(b: _Builder):
    x = b.operand("fsup", min_rank=1)
    et = x.shape.element_type
    kind = b.draw(st.sampled_from(_reducer_kinds(et)))
    ref = b.scalar_computation(et, kind)
    init = b.constant(et, (), _identity(et, kind))
    w = _window(b, x.shape.dims)
    return b.add("reduce-window", [x, init], {"window": w, "to_apply": ref},
                 called={"to_apply": ref})


def _m_select_and_scatter(b: _Builder):
    x = b.operand("fsu", min_rank=1, max_rank=3)
    et = x.shape.element_type
    if et.name == "f8e8m0fnu":
        x = _adapt(b, x, ArrayShape(b.et("f32"), x.shape.dims))
        et = x.shape.element_type
    w = _window(b, x.shape.dims, dilations=False)
    from hloref.shape_inference import window_output_dim
    src_dims = tuple(window_output_dim(d, wd) for d, wd in zip(x.shape.dims, w.dims))
    src = b.operand(et=et, dims=src_dims)
    init = b.constant(et, (), 0)
    sb = _Builder(b.draw, b.ctx, param_shapes=[ArrayShape(et, ())] * 2, fixed=True)
    attrs = {"direction": Enum(b.draw(st.sampled_from(["GE", "LE", "GT"])))}
    if et.is_float:
        attrs["type"] = Enum("TOTALORDER")
    sroot = sb.add("compare", list(sb.params), attrs)
    sel = b.finish_computation(sb, sroot, "select")
    sc = b.scalar_computation(et, "add")
    return b.add("select-and-scatter", [x, src, init],
                 {"window": w, "select": sel, "scatter": sc},
                 called={"select": sel, "scatter": sc})


def _m_sort(b: _Builder):
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


def _indices(b: _Builder, dims, bound: int, *, unique: bool = False) -> Instruction:
    et = b.et(b.draw(st.sampled_from(["s32", "s32", "s64", "u32", "s8"])))
    n = math.prod(dims)
    if unique or b.fixed or b.draw(st.booleans()):
        rng = np.random.default_rng(b.draw(st.integers(0, 2**32 - 1)))
        lo = 0 if (unique or et.is_unsigned_integer) else -2
        if unique:
            vals = rng.permutation(max(bound, n))[:n] if n else np.zeros(0)
        else:
            vals = rng.integers(lo, bound + 2, size=n)
        return b.constant(et, dims, np.asarray(vals).reshape(dims))
    return b.fresh_value(et, dims, hint="index")


def _m_gather(b: _Builder):
    x = b.operand("fcsup", min_rank=1)
    r = x.shape.rank
    k = b.draw(st.integers(1, r))
    sim = tuple(b.draw(st.permutations(list(range(r))))[:k])
    # a collapsed dimension has slice size 1 (size 0 would leave the result undefined)
    collapsed = tuple(sorted(d for d in sim if x.shape.dims[d] >= 1 and b.draw(st.booleans())))
    sizes = tuple(1 if d in collapsed else b.draw(st.integers(0, x.shape.dims[d]))
                  for d in range(r))
    batch = b.new_dims(max_rank=2)
    ivd = b.draw(st.integers(0, len(batch)))
    idims = list(batch)
    vec_in_dims = b.draw(st.booleans()) or k > 1
    if vec_in_dims:
        idims.insert(ivd, k)
    else:
        ivd = len(idims)
    idx = _indices(b, tuple(idims), max(x.shape.dims) + 1)
    n_offset = r - len(collapsed)
    out_rank = n_offset + len(batch)
    offset = tuple(sorted(b.draw(st.permutations(list(range(out_rank))))[:n_offset]))
    return b.add("gather", [x, idx], {"offset_dims": offset, "collapsed_slice_dims": collapsed,
                                      "start_index_map": sim, "index_vector_dim": ivd,
                                      "slice_sizes": sizes})


def _m_scatter(b: _Builder):
    x = b.operand("fsup", min_rank=1)
    et = x.shape.element_type
    r = x.shape.rank
    k = b.draw(st.integers(1, r))
    sdod = tuple(b.draw(st.permutations(list(range(r))))[:k])
    inserted = tuple(sorted(d for d in sdod if b.draw(st.booleans())))
    window_sizes = [b.draw(st.integers(0, x.shape.dims[d])) for d in range(r) if d not in inserted]
    batch = b.new_dims(max_rank=2)
    ivd = b.draw(st.integers(0, len(batch)))
    idims = list(batch)
    idims.insert(ivd, k)
    n_win = len(window_sizes)
    u_rank = n_win + len(batch)
    uwd = tuple(sorted(b.draw(st.permutations(list(range(u_rank))))[:n_win]))
    udims, wi, bi = [], 0, 0
    for i in range(u_rank):
        if i in uwd:
            udims.append(window_sizes[wi])
            wi += 1
        else:
            udims.append(batch[bi])
            bi += 1
    # combiner: assignment needs unique indices; otherwise an order-independent one
    if et.is_float and et.name not in ("f8e8m0fnu",):
        kinds = ["maximum", "minimum", "assign", "add"]
    else:
        kinds = ["add", "maximum", "minimum", "assign"] if not et.is_pred else \
            ["maximum", "minimum", "or", "assign"]
    kind = b.draw(st.sampled_from(kinds))
    unique = kind == "assign" or (kind == "add" and et.is_float)
    idx = _indices(b, tuple(idims), max(x.shape.dims) + 1, unique=unique)
    u = b.operand(et=et, dims=tuple(udims))
    if kind == "assign":
        sb = _Builder(b.draw, b.ctx, param_shapes=[ArrayShape(et, ())] * 2, fixed=True)
        root = sb.add("copy", [sb.params[1]])
        ref = b.finish_computation(sb, root, "assign")
    else:
        ref = b.scalar_computation(et, kind)
    attrs = {"update_window_dims": uwd, "inserted_window_dims": inserted,
             "scatter_dims_to_operand_dims": sdod, "index_vector_dim": ivd, "to_apply": ref}
    if unique and b.draw(st.booleans()):
        attrs["unique_indices"] = True
    return b.add("scatter", [x, idx, u], attrs, called={"to_apply": ref})


def _m_dot(b: _Builder):
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


def _m_convolution(b: _Builder):
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


def _m_fft(b: _Builder):
    kind = b.draw(st.sampled_from(["FFT", "IFFT", "RFFT", "IRFFT"]))
    k = b.draw(st.integers(1, 2))
    lengths = tuple(b.draw(st.integers(1, 5)) for _ in range(k))
    lead = tuple(b.draw(st.integers(1, 2)) for _ in range(b.draw(st.integers(0, 1))))
    if kind == "RFFT":
        x = b.operand(et=b.et(b.draw(st.sampled_from(["f32", "f64"]))), dims=lead + lengths)
    elif kind == "IRFFT":
        d = lengths[:-1] + (lengths[-1] // 2 + 1,)
        x = b.operand(et=b.et(b.draw(st.sampled_from(["c64", "c128"]))), dims=lead + d)
    else:
        x = b.operand(et=b.et(b.draw(st.sampled_from(["c64", "c128"]))), dims=lead + lengths)
    return b.add("fft", [x], {"fft_type": Enum(kind), "fft_length": lengths})


def _tri_mask(b: _Builder, x: Instruction, lower: bool) -> Instruction:
    """Zero the triangle cholesky leaves implementation-defined (as jax does)."""
    n = x.shape.dims[-1]
    rank = x.shape.rank
    s32 = b.et("s32")
    rows = b.add("iota", [], {"iota_dimension": rank - 2}, shape=ArrayShape(s32, x.shape.dims),
                 pool=False)
    cols = b.add("iota", [], {"iota_dimension": rank - 1}, shape=ArrayShape(s32, x.shape.dims),
                 pool=False)
    keep = b.add("compare", [rows, cols], {"direction": Enum("GE" if lower else "LE")}, pool=False)
    zero = b.constant(x.shape.element_type, (), 0)
    zeros = b.add("broadcast", [zero], {"dimensions": ()}, shape=ArrayShape(
        x.shape.element_type, x.shape.dims), pool=False)
    del n
    return b.add("select", [keep, x, zeros])


def _m_cholesky(b: _Builder):
    et = b.et(b.draw(st.sampled_from(["f32", "f64"])))
    n = b.draw(st.integers(1, 4))
    lead = tuple(b.draw(st.integers(1, 2)) for _ in range(b.draw(st.integers(0, 1))))
    if b.fixed:
        x = b.constant(et, lead + (n, n), np.broadcast_to(
            np.eye(n) * 2 + 0.25, lead + (n, n)).copy())
    else:
        x = b.fresh_value(et, lead + (n, n), hint="spd")
    lower = b.draw(st.booleans())
    c = b.add("cholesky", [x], {"lower": lower}, pool=False)
    return _tri_mask(b, c, lower)


def _m_triangular_solve(b: _Builder):
    et = b.et(b.draw(st.sampled_from(["f32", "f64"])))
    n = b.draw(st.integers(1, 4))
    lead = tuple(b.draw(st.integers(1, 2)) for _ in range(b.draw(st.integers(0, 1))))
    if b.fixed:
        a = b.constant(et, lead + (n, n), np.broadcast_to(np.eye(n) * 2, lead + (n, n)).copy())
    else:
        a = b.fresh_value(et, lead + (n, n), hint="triangular")
    left = b.draw(st.booleans())
    m = b.draw(st.integers(1, 3))
    bdims = lead + ((n, m) if left else (m, n))
    rhs = b.operand(et=et, dims=bdims)
    attrs = {"left_side": left, "lower": b.draw(st.booleans()),
             "unit_diagonal": b.draw(st.booleans()),
             "transpose_a": Enum(b.draw(st.sampled_from(["NO_TRANSPOSE", "TRANSPOSE"])))}
    return b.add("triangular-solve", [a, rhs], attrs)


def _m_batch_norm(kind):
    def make(b: _Builder):
        et = b.et(b.draw(st.sampled_from(["f32", "f32", "f64", "f16", "bf16"])))
        x = b.operand(et=et, dims=b.new_dims(min_rank=2, max_rank=3, zero_ok=False))
        fi = b.draw(st.integers(0, x.shape.rank - 1))
        f = x.shape.dims[fi]
        vec = lambda hint=None: (b.operand(et=et, dims=(f,)) if hint is None or b.fixed
                                 else b.fresh_value(et, (f,), hint=hint))
        attrs = {"epsilon": b.draw(st.sampled_from([0.001, 0.5, 1.0])), "feature_index": fi}
        if kind == "batch-norm-inference":
            ops = [x, vec(), vec(), vec(), vec("positive")]
        elif kind == "batch-norm-training":
            ops = [x, vec(), vec()]
        else:
            ops = [x, vec(), vec(), vec("positive"), b.operand(et=et, dims=x.shape.dims)]
        r = b.add(kind, ops, attrs, pool=kind == "batch-norm-inference")
        if isinstance(r.shape, TupleShape):
            last = None
            for i in range(len(r.shape.elements)):
                last = b.add("get-tuple-element", [r], {"index": i})
            return last
        return r
    return make


def _m_topk(b: _Builder):
    x = b.operand("fsu", min_rank=1, max_rank=2)
    if 0 in x.shape.dims:
        x = b.operand(et=x.shape.element_type, dims=b.new_dims(min_rank=1, max_rank=2,
                                                                zero_ok=False))
    k = b.draw(st.integers(0, x.shape.dims[-1]))
    t = b.add("topk", [x], {"k": k, "largest": b.draw(st.booleans())}, pool=False)
    b.add("get-tuple-element", [t], {"index": 1})
    return b.add("get-tuple-element", [t], {"index": 0})


def _m_rng_bit_generator(b: _Builder):
    alg = b.draw(st.sampled_from(["rng_three_fry", "rng_philox"]))
    state_n = 2 if alg == "rng_three_fry" else b.draw(st.sampled_from([2, 3]))
    state = b.operand(et=b.et("u64"), dims=(state_n,))
    out_et = b.et(b.draw(st.sampled_from(["u32", "u64", "u8", "u16"])))
    dims = b.new_dims(max_rank=2, zero_ok=False)
    shape = TupleShape((ArrayShape(b.et("u64"), (state_n,)), ArrayShape(out_et, dims)))
    r = b.add("rng-bit-generator", [state], {"algorithm": Enum(alg)}, shape=shape, pool=False)
    b.add("get-tuple-element", [r], {"index": 0})
    return b.add("get-tuple-element", [r], {"index": 1})


def _m_stochastic_convert(b: _Builder):
    src = b.et(b.draw(st.sampled_from(["f32", "f16", "bf16", "f64"])))
    x = b.operand(et=src)
    bits = b.et({16: "u16", 32: "u32", 64: "u64"}[src.bits])
    r = b.operand(et=bits, dims=x.shape.dims)
    outs = [t for t in ("s8", "s16", "s32") if ELEMENT_TYPES[t].bits < src.bits]
    out = b.et(b.draw(st.sampled_from(outs or ["s8"])))
    return b.add("stochastic-convert", [x, r], shape=ArrayShape(out, x.shape.dims))


_MAKERS: dict[str, Callable[[_Builder], Instruction]] = {
    **{op: _m_unary(op) for op in _UNARY}, **{op: _m_binary(op) for op in _BINARY},
    "compare": _m_compare, "select": _m_select, "clamp": _m_clamp, "convert": _m_convert,
    "bitcast-convert": _m_bitcast_convert, "reduce-precision": _m_reduce_precision,
    "broadcast": _m_broadcast, "reshape": _m_reshape, "transpose": _m_transpose,
    "reverse": _m_reverse, "slice": _m_slice, "concatenate": _m_concatenate, "pad": _m_pad,
    "iota": _m_iota, "constant": _m_constant, "dynamic-slice": _m_dynamic_slice,
    "dynamic-update-slice": _m_dynamic_update_slice, "tuple": _m_tuple,
    "get-tuple-element": _m_tuple, "call": _m_call, "while": _m_while,
    "conditional": _m_conditional, "map": _m_map, "opt-barrier": _m_opt_barrier,
    "reduce": _m_reduce, "reduce-window": _m_reduce_window,
    "select-and-scatter": _m_select_and_scatter, "sort": _m_sort, "gather": _m_gather,
    "scatter": _m_scatter, "dot": _m_dot, "convolution": _m_convolution, "fft": _m_fft,
    "cholesky": _m_cholesky, "triangular-solve": _m_triangular_solve,
    "batch-norm-inference": _m_batch_norm("batch-norm-inference"),
    "batch-norm-training": _m_batch_norm("batch-norm-training"),
    "batch-norm-grad": _m_batch_norm("batch-norm-grad"), "topk": _m_topk,
    "rng-bit-generator": _m_rng_bit_generator, "stochastic-convert": _m_stochastic_convert,
}
_BODY_OPS = ["add", "multiply", "subtract", "maximum", "minimum", "negate", "abs", "convert",
             "select", "compare", "broadcast", "reshape", "transpose", "slice", "reduce",
             "dot", "exponential", "tanh", "dynamic-slice", "dynamic-update-slice", "concatenate",
             "and", "xor", "sort", "iota", "pad", "reverse", "clamp"]
_NESTING_OPS = ["call", "while", "conditional"]


# --------------------------------------------------------------------------- modules


def _build_module(draw, cfg: _Config, ops, weights, min_instructions, max_instructions,
                  force_opcode=None) -> Module:
    ctx = _ModuleCtx(cfg)
    b = _Builder(draw, ctx, entry=True, ops=ops, weights=weights)
    # heaviest first: Hypothesis leans towards small draws, so index 0 is the most common
    names = sorted(ops, key=lambda o: (-float(weights.get(o, DEFAULT_WEIGHTS.get(o, 1.0))), o))
    w = [max(0.0, float(weights.get(o, DEFAULT_WEIGHTS.get(o, 1.0)))) for o in names]
    scale = [int(round(x * 10)) for x in w]
    total = sum(scale)
    if total <= 0:
        raise InvalidArgument("every opcode has weight 0")
    cum = np.cumsum(scale)
    n = draw(st.integers(min_instructions, max_instructions))
    made = 0
    if force_opcode is not None:
        _MAKERS[force_opcode](b)
        made = len([i for i in b.instructions if i.opcode != "parameter"])
    while made < n:
        r = draw(st.integers(0, total - 1))
        op = names[int(np.searchsorted(cum, r, side="right"))]
        before = len(b.instructions)
        _MAKERS[op](b)
        made += max(1, len(b.instructions) - before)
    if not b.pool:
        b.operand()
    # root: the values nobody uses (keeps every instruction live), or the last one
    if force_opcode is not None:
        forced = [i for i in b.instructions if i.opcode == force_opcode]
        leaves = [forced[-1]] if forced else [b.pool[-1]]
        if isinstance(leaves[0].shape, TupleShape):
            leaves = [leaves[0]]
    else:
        leaves = [v for v in b.instructions if id(v) not in b.used and v.opcode not in
                  ("parameter",) and not (isinstance(v.shape, TupleShape))]
        if not leaves:
            leaves = [b.pool[-1]]
        leaves = leaves[-4:]
    if len(leaves) == 1 and leaves[0].opcode != "parameter":
        root = leaves[0]
    else:
        root = b.add("tuple", leaves, pool=False)
    entry = Computation(ctx.fresh("main"), b.instructions, root, is_entry=True)
    comps = dict(ctx.computations)
    comps[entry.name] = entry
    module = Module(name=f"fuzz_{ctx.counter}", computations=comps, entry_name=entry.name)
    module.fuzz_hints = dict(ctx.hints)
    return module


@st.composite
def _modules(draw, cfg, ops, weights, min_instructions, max_instructions, force_opcode=None):
    if cfg.types is None:
        raise InvalidArgument("no element types")
    n_types = draw(st.integers(1, 3))
    chosen = tuple(draw(st.sampled_from(cfg.types)) for _ in range(n_types))
    sub = _Config(**{**cfg.__dict__, "types": tuple(dict.fromkeys(chosen))})
    return _build_module(draw, sub, ops, weights, min_instructions, max_instructions, force_opcode)


def _check_ops(ops, weights):
    if ops is None:
        ops = [o for o in _MAKERS if o not in NOT_IN_XLA]
    ops = list(ops)
    if not ops:
        raise InvalidArgument("ops must not be empty")
    bad = [o for o in ops if o not in _MAKERS]
    if bad:
        raise InvalidArgument(f"the generator cannot produce {', '.join(bad)}; known opcodes: "
                              f"{', '.join(sorted(_MAKERS))}")
    weights = dict(weights or {})
    for k, v in weights.items():
        if k not in _MAKERS:
            raise InvalidArgument(f"weights: unknown opcode {k!r}")
        if not isinstance(v, (int, float)) or v < 0:
            raise InvalidArgument(f"weights[{k!r}]={v!r} must be a number >= 0")
    if all(weights.get(o, DEFAULT_WEIGHTS.get(o, 1.0)) == 0 for o in ops):
        raise InvalidArgument("every selected opcode has weight 0")
    return ops, weights


def modules(*, ops=None, weights=None, element_types=None, min_instructions: int = 1,
            max_instructions: int = 12, max_elements: int = 64, max_dim: int = 5,
            max_rank: int = 3, max_trip_count: int = 4, max_depth: int = 2,
            layouts: bool = True, zero_size: bool = True) -> st.SearchStrategy[Module]:
    """Whole HLO modules (``hloref.ir.Module``), valid by construction.

    ``ops``: the opcodes the generator picks (default: all of ``GENERATABLE_OPCODES``;
    glue ops are used regardless); ``weights``: opcode → relative weight;
    ``element_types``: type names the program may use (default ``ORACLE_ELEMENT_TYPES``);
    ``min/max_instructions``: picks of top-level ops (glue and nested computations
    add more instructions); ``max_elements``/``max_dim``/``max_rank``: value sizes;
    ``max_trip_count``: bound of while loops; ``max_depth``: nesting of called
    computations. The module has ``fuzz_hints`` for ``inputs_for``."""
    ops, weights = _check_ops(ops, weights)
    types = _validate_types(element_types)
    _validate_bounds("instructions", min_instructions, max_instructions, minimum=1)
    if max_instructions > 200:
        raise InvalidArgument(f"max_instructions={max_instructions} must be <= 200")
    _validate_bounds("elements", 1, max_elements, minimum=1)
    _validate_bounds("dim", 1, max_dim, minimum=1)
    _validate_bounds("rank", 0, max_rank)
    if max_rank > 5:
        raise InvalidArgument(f"max_rank={max_rank} must be <= 5")
    _validate_bounds("trip_count", 0, max_trip_count)
    _validate_bounds("depth", 0, max_depth)
    cfg = _Config(types=types, max_elements=max_elements, max_dim=max_dim, max_rank=max_rank,
                  layouts=layouts, zero_size=zero_size, max_trip_count=max_trip_count,
                  max_depth=max_depth)
    return _modules(cfg, ops, weights, min_instructions, max_instructions)


def instructions(*, opcode: str | None = None, element_types=None,
                 max_elements: int = 64) -> st.SearchStrategy[Module]:
    """A module whose root is one instruction of ``opcode`` (drawn when ``None``) on
    parameters, constants and the glue it needs."""
    if opcode is not None and opcode not in _MAKERS:
        raise InvalidArgument(f"the generator cannot produce {opcode!r}; known opcodes: "
                              f"{', '.join(sorted(_MAKERS))}")
    types = _validate_types(element_types)
    _validate_bounds("elements", 1, max_elements, minimum=1)
    cfg = _Config(types=types, max_elements=max_elements, max_depth=1)

    @st.composite
    def one(draw):
        op = opcode or draw(st.sampled_from(sorted(_MAKERS)))
        return draw(_modules(cfg, [op], {}, 1, 1, force_opcode=op))
    return one()


def computations(*, element_types=None, min_parameters: int = 1, max_parameters: int = 3,
                 max_instructions: int = 6) -> st.SearchStrategy[Computation]:
    """A standalone ``Computation`` (no calls): parameters of drawn shapes and a body of
    elementwise and shape ops. To run it, put it in a module as the entry."""
    types = _validate_types(element_types)
    _validate_bounds("parameters", min_parameters, max_parameters)
    _validate_bounds("instructions", 1, max_instructions, minimum=1)

    @st.composite
    def comp(draw):
        cfg = _Config(types=types, max_depth=0)
        ctx = _ModuleCtx(cfg)
        n = draw(st.integers(min_parameters, max_parameters))
        params = [draw(shapes(element_types=types, layouts=False)) for _ in range(n)]
        b = _Builder(draw, ctx, param_shapes=params, fixed=True)
        body = [o for o in _BODY_OPS if o not in ("reduce", "sort")]
        for _ in range(draw(st.integers(1, max_instructions))):
            _MAKERS[draw(st.sampled_from(body))](b)
        root = b.instructions[-1]
        if root.opcode == "parameter" or isinstance(root.shape, TupleShape):
            root = b.add("copy", [b.pool[-1]])
        return Computation(ctx.fresh("comp"), b.instructions, root)
    return comp()


# --------------------------------------------------------------------------- inputs

#: ``inputs_for`` modes: ``normal`` (finite, no subnormals, moderate magnitudes),
#: ``wide`` (integers over their whole range, floats over many binades),
#: ``special`` (±0, subnormals, ±inf, NaN, extremes, integer min/max mixed in).
INPUT_MODES = ("normal", "wide", "special")


def _float_info(et: ElementType):
    return ml_dtypes.finfo(et.dtype) if et.bits < 32 or et.dtype.type.__module__.startswith(
        "ml_dtypes") else np.finfo(et.dtype)


def _flush(values: np.ndarray, et: ElementType) -> np.ndarray:
    tiny = float(_float_info(et).smallest_normal)
    return np.where(np.abs(values) < tiny, 0.0, values)


def _random_array(shape: ArrayShape, rng: np.random.Generator, mode: str, hint=None):
    et = shape.element_type
    dims = tuple(max(d, 0) for d in shape.dims)
    n = math.prod(dims)
    if hint == "spd" and et.is_float:
        m = dims[-1]
        lead = dims[:-2]
        x = rng.standard_normal(lead + (m, m))
        a = x @ np.swapaxes(x, -1, -2) + m * np.eye(m)
        return a.astype(et.dtype)
    if hint == "triangular" and et.is_float:
        m = dims[-1]
        a = rng.uniform(-1, 1, dims) * 0.5
        a = a + np.eye(m) * np.where(rng.random(dims[:-1]) < 0.5, -2.0, 2.0)[..., None]
        return a.astype(et.dtype)
    if hint == "positive" and et.is_float:
        return (np.abs(rng.standard_normal(dims)) + 0.5).astype(et.dtype)
    if hint == "index" and et.is_integer:
        lo = 0 if et.is_unsigned_integer else -3
        hi = min(et.max_value, 12)
        vals = rng.integers(lo, hi, size=dims, endpoint=True)
        if mode == "special":
            pool = np.array([et.min_value, et.max_value, 0, 1], dtype=np.int64) \
                if et.bits < 64 else np.array([0, 1, 2**31 - 1], dtype=np.int64)
            vals = np.where(rng.random(dims) < 0.3, rng.choice(pool, size=dims), vals)
        return vals.astype(et.dtype)
    if et.is_pred:
        return rng.random(dims) < 0.5
    if et.is_integer:
        if mode == "normal":
            lo, hi = max(et.min_value, -8), min(et.max_value, 8)
            return rng.integers(lo, hi, size=dims, endpoint=True).astype(et.dtype)
        vals = rng.integers(et.min_value, et.max_value, size=dims, endpoint=True,
                            dtype=np.int64 if et.kind == "sint" or et.bits < 64 else np.uint64)
        if mode == "special":
            pool = [et.min_value, et.max_value, 0, 1]
            if et.is_signed_integer:
                pool.append(-1)
            choice = rng.integers(0, len(pool), size=dims)
            pick = np.array(pool, dtype=np.uint64 if et.kind == "uint" and et.bits == 64
                            else np.int64)[choice]
            vals = np.where(rng.random(dims) < 0.4, pick, vals)
        return vals.astype(et.dtype)
    if et.is_complex:
        scale = 1.0 if mode == "normal" else 8.0
        v = (rng.standard_normal(dims) + 1j * rng.standard_normal(dims)) * scale
        return v.astype(et.dtype)
    info = _float_info(et)
    if et.name == "f8e8m0fnu":
        e = np.round(rng.standard_normal(dims) * (2 if mode == "normal" else 20))
        v = np.exp2(np.clip(e, -126, 127))
        if mode == "special":
            v = np.where(rng.random(dims) < 0.1, np.nan, v)
        return v.astype(et.dtype)
    if mode == "normal":
        v = rng.standard_normal(dims) * rng.choice([1.0, 1.0, 4.0])
    else:
        expo = rng.uniform(np.log2(float(info.smallest_normal)), np.log2(float(info.max)) - 1,
                           size=dims)
        v = np.exp2(expo) * np.where(rng.random(dims) < 0.5, -1, 1)
        if et.float_format.signed is False:
            v = np.abs(v)
    v = _flush(np.asarray(v, np.float64), et).astype(et.dtype)
    if mode == "special" and n:
        specials = [0.0, -0.0, float(info.max), -float(info.max), float(info.smallest_normal),
                    float(info.smallest_subnormal), 1.0, -1.0]
        if et.float_format.has_inf:
            specials += [np.inf, -np.inf]
        if et.float_format.has_nan:
            specials += [np.nan]
        sp = np.asarray(rng.choice(np.array(specials, np.float64), size=dims)).astype(et.dtype)
        v = np.where(rng.random(dims) < 0.3, sp, v)
    return np.asarray(v).astype(et.dtype)


def random_inputs(module: Module, seed: int, mode: str = "normal") -> list:
    """Arguments for the module's entry parameters (``fuzz_hints`` honoured)."""
    if mode not in INPUT_MODES:
        raise InvalidArgument(f"mode={mode!r} must be one of {INPUT_MODES}")
    rng = np.random.default_rng(seed)
    hints = getattr(module, "fuzz_hints", {}) or {}
    out = []
    for p in module.entry.parameters:
        out.append(_value(p.shape, rng, mode, hints.get(p.parameter_number)))
    return out


def _value(shape: Shape, rng, mode, hint):
    if isinstance(shape, TupleShape):
        return tuple(_value(s, rng, mode, None) for s in shape.elements)
    # always an ndarray (numpy hands back scalars for 0-d draws), of the exact dtype
    return np.asarray(_random_array(shape, rng, mode, hint)).astype(shape.element_type.dtype)


def inputs_for(module: Module, *, modes=("normal", "normal", "normal", "wide", "special")
               ) -> st.SearchStrategy[list]:
    """Seeded arguments for ``module``'s entry computation: a mode from ``modes``
    (``INPUT_MODES``; repeat a mode to weight it) and a seed are drawn, the arrays
    are made with numpy from them (so shrinking acts on the seed, not on bytes)."""
    if not isinstance(module, Module):
        raise InvalidArgument(f"inputs_for expects an hloref Module, got {type(module).__name__}")
    modes = tuple(modes)
    if not modes or any(m not in INPUT_MODES for m in modes):
        raise InvalidArgument(f"modes={modes!r} must be a non-empty subset of {INPUT_MODES}")

    @st.composite
    def args(draw):
        mode = draw(st.sampled_from(modes))
        seed = draw(st.integers(0, 2**32 - 1))
        return Inputs(random_inputs(module, seed, mode), mode=mode, seed=seed)
    return args()


class Inputs(list):
    """The argument list ``inputs_for`` draws, with the ``mode`` and ``seed`` it came from."""

    def __init__(self, values, *, mode: str, seed: int):
        super().__init__(values)
        self.mode = mode
        self.seed = seed
