"""Shape inference for HLO instructions, one public function per opcode (or family).

Every ``infer_<opcode>`` function (``-`` → ``_``) takes the operand shapes
positionally and the instruction's attributes as keyword arguments named as in
HLO text (``dimensions=``, ``slice=``, ``padding=``, ``window=``,
``dim_labels=``, ``lhs_contracting_dims=``, ...), with the typed values of
``hloref.attrs``. It returns the result ``Shape`` or raises ``ShapeError`` saying
which constraint failed, on which value, and what was expected. The functions
need no IR objects, so the fuzzer can call them to build valid programs.

Called computations (``to_apply``, ``condition``, ``body``, ``calls``,
``select``/``scatter``, ``true_computation``/``false_computation``,
``branch_computations``) are passed as *program shapes*: an
``hloref.ir.ProgramShape`` or a ``(parameter_shapes, result_shape)`` pair (a
list of them for ``branch_computations``). Passing the bare ``ComputationRef``
name (or nothing) skips the checks that need the callee's signature.

**Results the operands do not determine.** HLO writes the result shape on every
instruction, and for some opcodes part of it is free. Those functions take the
free part as a keyword argument, and ``infer_shape(..., declared=shape)`` fills
it in from the declared result shape (see ``FREE_PARTS``):

* ``result_element_type=``: ``convert``, ``bitcast-convert``,
  ``stochastic-convert`` (required); ``dot``, ``convolution``, ``ragged-dot``
  (optional; XLA's ``preferred_element_type``, default: the lhs type). The
  verifier therefore compares only the dimensions' consequences of the
  operands for these ops, and accepts the declared element type.
* ``result_dims=``: ``broadcast``, ``reshape``, ``dynamic-reshape``, ``rng``
  (the added / new dimensions cannot be inferred).
* ``shape=`` (the whole declared shape, checked for well-formedness only):
  ``parameter``, ``constant``, ``iota``, ``custom-call``, ``bitcast``,
  ``infeed``, ``recv``, the async and ``*-start``/``*-done`` ops, and the
  other opcodes listed in ``DECLARED``.
* ``output_shape=``: the bits output of ``rng-bit-generator``.
* ``shard_count=``: ``all-gather`` / ``reduce-scatter`` group size (taken
  from ``replica_groups`` when explicit, else from the declared shape).
"""

from __future__ import annotations

from math import prod
from typing import Any, Callable, Iterable, Sequence

from .attrs import ComputationRef, ConvDimensionNumbers, PaddingDim, SliceDim, Window, WindowDim
from .shapes import ArrayShape, BufferShape, OpaqueShape, Shape, TokenShape, TupleShape
from .types import ELEMENT_TYPES, PRED, S32, U32, ElementType

__all__ = ["ShapeError", "INFER", "infer_shape", "FREE_PARTS", "DECLARED", "shape_str",
           "same_shape", "window_output_dim"]


class ShapeError(ValueError):
    """An instruction's operands/attributes violate a shape constraint."""


# --------------------------------------------------------------------------- helpers

def shape_str(shape: Shape) -> str:
    """``f32[2,3]`` / ``(f32[], s32[2])`` without layouts (no printer needed)."""
    if isinstance(shape, ArrayShape):
        return f"{shape.element_type.name}[{','.join(str(d) for d in shape.dims)}]"
    if isinstance(shape, TupleShape):
        return "(" + ", ".join(shape_str(e) for e in shape.elements) + ")"
    if isinstance(shape, TokenShape):
        return "token[]"
    if isinstance(shape, OpaqueShape):
        return "opaque[]"
    if isinstance(shape, BufferShape):
        return f"b({shape_str(shape.inner)})"
    return str(shape)


def same_shape(a: Shape, b: Shape, *, ignore_element_type: bool = False,
               ignore_fp_precision: bool = False) -> bool:
    """Structural equality ignoring layouts and dynamic markers."""
    if isinstance(a, ArrayShape) and isinstance(b, ArrayShape):
        if a.dims != b.dims:
            return False
        if ignore_element_type or a.element_type == b.element_type:
            return True
        return ignore_fp_precision and a.element_type.is_float and b.element_type.is_float
    if isinstance(a, TupleShape) and isinstance(b, TupleShape):
        return len(a.elements) == len(b.elements) and all(
            same_shape(x, y, ignore_element_type=ignore_element_type,
                       ignore_fp_precision=ignore_fp_precision)
            for x, y in zip(a.elements, b.elements))
    if isinstance(a, BufferShape) and isinstance(b, BufferShape):
        return same_shape(a.inner, b.inner, ignore_element_type=ignore_element_type)
    return type(a) is type(b) and not isinstance(a, (ArrayShape, TupleShape, BufferShape))


def _arr(shape: Shape, what: str) -> ArrayShape:
    if not isinstance(shape, ArrayShape):
        raise ShapeError(f"{what} must be an array, got {shape_str(shape)}")
    return shape


def _mk(et: ElementType, dims: Iterable[int]) -> ArrayShape:
    return ArrayShape(et, tuple(int(d) for d in dims))


def _ints(value, name: str) -> tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, int):
        return (int(value),)
    try:
        return tuple(int(v) for v in value)
    except (TypeError, ValueError):
        raise ShapeError(f"attribute {name} must be a list of integers, got {value!r}") from None


def _req(value, name: str):
    if value is None:
        raise ShapeError(f"missing required attribute {name}")
    return value


def _dims_in_range(dims: Sequence[int], rank: int, name: str, *, unique: bool = True,
                   sorted_: bool = False) -> None:
    for d in dims:
        if not 0 <= d < rank:
            raise ShapeError(f"{name}={{{','.join(map(str, dims))}}}: dimension {d} is out of "
                             f"range [0, {rank})")
    if unique and len(set(dims)) != len(dims):
        raise ShapeError(f"{name}={{{','.join(map(str, dims))}}} has a repeated dimension")
    if sorted_ and list(dims) != sorted(dims):
        raise ShapeError(f"{name}={{{','.join(map(str, dims))}}} must be sorted ascending")


def _tuple_or_single(shapes: list[Shape]) -> Shape:
    return shapes[0] if len(shapes) == 1 else TupleShape(tuple(shapes))


def _program(ps) -> tuple[tuple[Shape, ...], Shape] | None:
    """Normalize a program shape argument; None when unknown (a bare name)."""
    if ps is None or isinstance(ps, (str, ComputationRef)):
        return None
    if hasattr(ps, "parameters") and hasattr(ps, "result"):
        return tuple(ps.parameters), ps.result
    params, result = ps
    return tuple(params), result


def _element_kind_ok(et: ElementType, kinds: str) -> bool:
    """kinds: letters f(loat) c(omplex) s(igned int) u(nsigned int) p(red)."""
    return ((et.is_float and "f" in kinds) or (et.is_complex and "c" in kinds)
            or (et.is_signed_integer and "s" in kinds)
            or (et.is_unsigned_integer and "u" in kinds) or (et.is_pred and "p" in kinds))


_KIND_WORDS = {"f": "floating", "c": "complex", "s": "signed integer",
               "u": "unsigned integer", "p": "pred"}


def _expect_kind(et: ElementType, kinds: str, op: str, what: str = "operand") -> None:
    if not _element_kind_ok(et, kinds):
        words = " or ".join(_KIND_WORDS[k] for k in kinds)
        raise ShapeError(f"{op}: {what} element type must be {words}, got {et.name}")


def _same_type(a: ArrayShape, b: ArrayShape, op: str, what: str) -> None:
    if a.element_type != b.element_type:
        raise ShapeError(f"{op}: {what} element types differ: {a.element_type.name} vs "
                         f"{b.element_type.name}")


def _complex_component(et: ElementType) -> ElementType:
    return ELEMENT_TYPES["f32"] if et.name == "c64" else ELEMENT_TYPES["f64"]


def window_output_dim(size: int, wd: WindowDim) -> int:
    """Output extent of one window dimension over a base dimension of ``size``."""
    if wd.size <= 0:
        raise ShapeError(f"window size must be positive, got {wd.size}")
    if wd.stride <= 0:
        raise ShapeError(f"window stride must be positive, got {wd.stride}")
    if wd.base_dilation < 1 or wd.window_dilation < 1:
        raise ShapeError(f"window dilations must be >= 1, got lhs_dilate={wd.base_dilation} "
                         f"rhs_dilate={wd.window_dilation}")
    dilated_base = 0 if size == 0 else (size - 1) * wd.base_dilation + 1
    padded = wd.padding_low + dilated_base + wd.padding_high
    dilated_window = (wd.size - 1) * wd.window_dilation + 1
    if padded < dilated_window:
        return 0
    return (padded - dilated_window) // wd.stride + 1


def _window_dims(window) -> tuple[WindowDim, ...]:
    if window is None:
        return ()
    if isinstance(window, Window):
        return tuple(window.dims)
    return tuple(window)


# --------------------------------------------------------------------------- elementwise

#: unary opcode → (allowed element kinds, result rule)
_UNARY_KINDS: dict[str, str] = {
    **{op: "f" for op in ("floor", "ceil", "round-nearest-afz", "round-nearest-even",
                          "is-finite", "erf")},
    **{op: "fc" for op in ("cosine", "sine", "tan", "exponential", "exponential-minus-one",
                           "log", "log-plus-one", "logistic", "rsqrt", "sqrt",
                           "tanh", "acos", "acosh", "asin", "asinh", "atan", "atanh",
                           "cosh", "sinh")},
    # XLA's InferUnaryOpShape: "Expected element type in shape to be floating for cbrt"
    "cbrt": "f",
    "real": "fc", "imag": "fc", "abs": "fcs", "sign": "fcs", "negate": "fcsu",
    "count-leading-zeros": "su", "popcnt": "su", "not": "psu",
}
UNARY_OPCODES = frozenset(_UNARY_KINDS)
UNARY_KINDS = dict(_UNARY_KINDS)  # public copy (hloref ops' type table)


def _make_unary(opcode: str) -> Callable[..., Shape]:
    kinds = _UNARY_KINDS[opcode]

    def infer(operand: Shape, **_attrs) -> Shape:
        a = _arr(operand, f"{opcode} operand")
        _expect_kind(a.element_type, kinds, opcode)
        if opcode == "is-finite":
            return _mk(PRED, a.dims)
        if opcode in ("real", "imag", "abs") and a.element_type.is_complex:
            return _mk(_complex_component(a.element_type), a.dims)
        return _mk(a.element_type, a.dims)

    infer.__name__ = "infer_" + opcode.replace("-", "_")
    infer.__doc__ = (f"``{opcode}``: one array operand ({'/'.join(_KIND_WORDS[k] for k in kinds)}); "
                     "same shape" + (", pred result" if opcode == "is-finite" else "")
                     + (" (complex → component float type)" if opcode in ("real", "imag", "abs")
                        else "") + ".")
    return infer


_BINARY_KINDS: dict[str, str] = {
    "add": "fcsup", "subtract": "fcsu", "multiply": "fcsup", "divide": "fcsu",
    "remainder": "fsu", "power": "fcsu", "atan2": "fc", "maximum": "fcsup",
    "minimum": "fcsup", "and": "psu", "or": "psu", "xor": "psu", "shift-left": "su",
    "shift-right-arithmetic": "su", "shift-right-logical": "su", "complex": "f",
    "mulhi": "su",
}
BINARY_OPCODES = frozenset(_BINARY_KINDS)
BINARY_KINDS = dict(_BINARY_KINDS)  # public copy (hloref ops' type table)


def _make_binary(opcode: str) -> Callable[..., Shape]:
    kinds = _BINARY_KINDS[opcode]

    def infer(lhs: Shape, rhs: Shape, **_attrs) -> Shape:
        a = _arr(lhs, f"{opcode} lhs")
        b = _arr(rhs, f"{opcode} rhs")
        if a.dims != b.dims:
            raise ShapeError(f"{opcode}: operand dimensions differ: {shape_str(a)} vs {shape_str(b)} "
                             "(HLO has no implicit broadcasting)")
        _same_type(a, b, opcode, "operand")
        _expect_kind(a.element_type, kinds, opcode)
        if opcode == "complex":
            if a.element_type.name not in ("f32", "f64"):
                raise ShapeError(f"complex: operands must be f32 or f64, got {a.element_type.name}")
            return _mk(ELEMENT_TYPES["c64" if a.element_type.name == "f32" else "c128"], a.dims)
        return _mk(a.element_type, a.dims)

    infer.__name__ = "infer_" + opcode.replace("-", "_")
    infer.__doc__ = f"``{opcode}``: two arrays of equal shape and element type; same shape."
    return infer


COMPARE_DIRECTIONS = ("EQ", "NE", "GE", "GT", "LE", "LT")
COMPARE_TYPES = ("FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED")


def infer_compare(lhs: Shape, rhs: Shape, *, direction=None, type=None, **_):
    """``compare``: equal shapes and types; ``direction`` required; pred result."""
    a = _arr(lhs, "compare lhs")
    b = _arr(rhs, "compare rhs")
    if a.dims != b.dims:
        raise ShapeError(f"compare: operand dimensions differ: {shape_str(a)} vs {shape_str(b)}")
    _same_type(a, b, "compare", "operand")
    if direction is None:
        raise ShapeError("compare: missing required attribute direction")
    if str(direction) not in COMPARE_DIRECTIONS:
        raise ShapeError(f"compare: direction={direction} is not one of {', '.join(COMPARE_DIRECTIONS)}")
    if type is not None and str(type) not in COMPARE_TYPES:
        raise ShapeError(f"compare: type={type} is not one of {', '.join(COMPARE_TYPES)}")
    return _mk(PRED, a.dims)


def infer_select(pred: Shape, on_true: Shape, on_false: Shape, **_):
    """``select``: pred with the dims of on_true, or a scalar pred (current XLA's
    ``InferSelectShape`` accepts it again); on_true/on_false equal shapes."""
    p = _arr(pred, "select predicate")
    t = _arr(on_true, "select on_true")
    f = _arr(on_false, "select on_false")
    if p.element_type != PRED:
        raise ShapeError(f"select: predicate element type must be pred, got {p.element_type.name}")
    if t.dims != f.dims or t.element_type != f.element_type:
        raise ShapeError(f"select: on_true and on_false shapes differ: {shape_str(t)} vs {shape_str(f)}")
    if p.dims and p.dims != t.dims:
        raise ShapeError(f"select: predicate dimensions {list(p.dims)} must be scalar or equal "
                         f"the operands' {list(t.dims)}")
    return _mk(t.element_type, t.dims)


def infer_clamp(min: Shape, operand: Shape, max: Shape, **_):
    """``clamp(min, operand, max)``: min/max scalars or the operand's shape; same type."""
    x = _arr(operand, "clamp operand")
    for name, s in (("min", min), ("max", max)):
        b = _arr(s, f"clamp {name}")
        _same_type(b, x, "clamp", f"{name} and operand")
        if b.dims != () and b.dims != x.dims:
            raise ShapeError(f"clamp: {name} must be a scalar or have the operand's dimensions "
                             f"{list(x.dims)}, got {shape_str(b)}")
    return _mk(x.element_type, x.dims)


def infer_convert(operand: Shape, *, result_element_type: ElementType | None = None, **_):
    """``convert``: any array type to ``result_element_type`` (required); same dims."""
    a = _arr(operand, "convert operand")
    et = _req(result_element_type, "result_element_type")
    if not et.is_array:
        raise ShapeError(f"convert: result element type must be an array type, got {et.name}")
    if a.element_type.is_complex and not et.is_complex:
        # XLA's ShapeInference::InferConvertShape: complex -> real needs real()/imag()
        raise ShapeError(f"convert: cannot convert complex {a.element_type.name} to "
                         f"{et.name}; use real or imag first")
    return _mk(et, a.dims)


def infer_bitcast_convert(operand: Shape, *, result_element_type: ElementType | None = None, **_):
    """``bitcast-convert``: equal bit widths keep dims; a narrower result adds a minor
    dimension of size in_bits/out_bits; a wider result drops the minor dimension,
    which must be out_bits/in_bits."""
    a = _arr(operand, "bitcast-convert operand")
    et = _req(result_element_type, "result_element_type")
    if not et.is_array:
        raise ShapeError(f"bitcast-convert: result element type must be an array type, got {et.name}")
    ib, ob = a.element_type.bits, et.bits
    if ib == ob:
        return _mk(et, a.dims)
    if ib > ob:
        if ib % ob:
            raise ShapeError(f"bitcast-convert: {ib} bits is not a multiple of {ob} bits")
        return _mk(et, a.dims + (ib // ob,))
    if ob % ib:
        raise ShapeError(f"bitcast-convert: {ob} bits is not a multiple of {ib} bits")
    if not a.dims or a.dims[-1] != ob // ib:
        raise ShapeError(f"bitcast-convert from {a.element_type.name} to {et.name}: the operand's "
                         f"minor dimension must be {ob // ib}, got {shape_str(a)}")
    return _mk(et, a.dims[:-1])


def infer_stochastic_convert(operand: Shape, random: Shape, *,
                             result_element_type: ElementType | None = None, **_):
    """``stochastic-convert(operand, random)``: float operand, unsigned random bits of
    the same width and dims; result dims of the operand."""
    a = _arr(operand, "stochastic-convert operand")
    r = _arr(random, "stochastic-convert random")
    et = _req(result_element_type, "result_element_type")
    _expect_kind(a.element_type, "f", "stochastic-convert")
    if not r.element_type.is_unsigned_integer or r.element_type.bits != a.element_type.bits:
        raise ShapeError(f"stochastic-convert: random bits must be u{a.element_type.bits}, "
                         f"got {r.element_type.name}")
    if r.dims != a.dims:
        raise ShapeError(f"stochastic-convert: random dims {list(r.dims)} must equal operand dims "
                         f"{list(a.dims)}")
    return _mk(et, a.dims)


def infer_reduce_precision(operand: Shape, *, exponent_bits=None, mantissa_bits=None, **_):
    """``reduce-precision``: float operand, exponent_bits >= 1, mantissa_bits >= 0."""
    a = _arr(operand, "reduce-precision operand")
    _expect_kind(a.element_type, "f", "reduce-precision")
    e = _req(exponent_bits, "exponent_bits")
    m = _req(mantissa_bits, "mantissa_bits")
    if int(e) < 1:
        raise ShapeError(f"reduce-precision: exponent_bits must be >= 1, got {e}")
    if int(m) < 0:
        raise ShapeError(f"reduce-precision: mantissa_bits must be >= 0, got {m}")
    return _mk(a.element_type, a.dims)


# --------------------------------------------------------------------------- shape ops

def infer_broadcast(operand: Shape, *, dimensions=None, result_dims=None, **_):
    """``broadcast``: ``dimensions[i]`` is the result dim of operand dim ``i`` (strictly
    increasing, sizes equal); ``result_dims`` are the result's dimensions."""
    a = _arr(operand, "broadcast operand")
    out = _ints(_req(result_dims, "result_dims"), "result_dims")
    dims = _ints(dimensions, "dimensions")
    if dimensions is None and a.rank:
        raise ShapeError("broadcast: missing required attribute dimensions (operand is not a scalar)")
    if len(dims) != a.rank:
        raise ShapeError(f"broadcast: dimensions has {len(dims)} entries but the operand has rank "
                         f"{a.rank}")
    _dims_in_range(dims, len(out), "broadcast dimensions")
    for i, d in enumerate(dims):
        if i and d <= dims[i - 1]:
            raise ShapeError(f"broadcast: dimensions={{{','.join(map(str, dims))}}} must be strictly "
                             "increasing")
        if a.dims[i] != out[d]:
            raise ShapeError(f"broadcast: operand dimension {i} has size {a.dims[i]} but result "
                             f"dimension {d} has size {out[d]}")
    return _mk(a.element_type, out)


def infer_reshape(operand: Shape, *, result_dims=None, inferred_dimension=None, **_):
    """``reshape``: same element count as ``result_dims``."""
    a = _arr(operand, "reshape operand")
    out = _ints(_req(result_dims, "result_dims"), "result_dims")
    if any(d < 0 for d in a.dims + out):  # unbounded dynamic (``?``): count unknown
        return _mk(a.element_type, out)
    if prod(out) != prod(a.dims):
        raise ShapeError(f"reshape: element count differs: operand {shape_str(a)} has "
                         f"{prod(a.dims)}, result dims {list(out)} have {prod(out)}")
    if inferred_dimension is not None and not 0 <= int(inferred_dimension) < len(out):
        raise ShapeError(f"reshape: inferred_dimension={inferred_dimension} out of range")
    return _mk(a.element_type, out)


def infer_dynamic_reshape(operand: Shape, *dim_sizes: Shape, result_dims=None, **_):
    """``dynamic-reshape(operand, sizes...)``: one s32 scalar per result dimension."""
    a = _arr(operand, "dynamic-reshape operand")
    out = _ints(_req(result_dims, "result_dims"), "result_dims")
    if len(dim_sizes) != len(out):
        raise ShapeError(f"dynamic-reshape: expected {len(out)} size operands, got {len(dim_sizes)}")
    for s in dim_sizes:
        s = _arr(s, "dynamic-reshape size")
        if s.dims or not s.element_type.is_integer:
            raise ShapeError(f"dynamic-reshape: sizes must be integer scalars, got {shape_str(s)}")
    return _mk(a.element_type, out)


def infer_transpose(operand: Shape, *, dimensions=None, **_):
    """``transpose``: ``dimensions`` is a permutation; result dim i = operand dim perm[i]."""
    a = _arr(operand, "transpose operand")
    perm = _ints(_req(dimensions, "dimensions"), "dimensions")
    if sorted(perm) != list(range(a.rank)):
        raise ShapeError(f"transpose: dimensions={{{','.join(map(str, perm))}}} is not a permutation "
                         f"of 0..{a.rank - 1}")
    return _mk(a.element_type, (a.dims[p] for p in perm))


def infer_reverse(operand: Shape, *, dimensions=None, **_):
    """``reverse``: unique dimensions within rank; same shape."""
    a = _arr(operand, "reverse operand")
    _dims_in_range(_ints(_req(dimensions, "dimensions"), "dimensions"), a.rank, "reverse dimensions")
    return _mk(a.element_type, a.dims)


def infer_copy(operand: Shape, **_):
    """``copy``: any shape (tuples too), unchanged."""
    return operand


infer_domain = infer_copy
infer_opt_barrier = infer_copy


def infer_slice(operand: Shape, *, slice=None, **_):
    """``slice``: per dimension 0 <= start <= limit <= size, stride >= 1;
    result ceil((limit - start) / stride)."""
    a = _arr(operand, "slice operand")
    sl = tuple(_req(slice, "slice"))
    if len(sl) != a.rank:
        raise ShapeError(f"slice: {len(sl)} slice dimensions for an operand of rank {a.rank}")
    out = []
    for i, s in enumerate(sl):
        if not isinstance(s, SliceDim):
            s = SliceDim(*s)
        if s.stride < 1:
            raise ShapeError(f"slice: dimension {i}: stride must be >= 1, got {s.stride}")
        if not 0 <= s.start <= s.limit <= a.dims[i]:
            raise ShapeError(f"slice: dimension {i}: [{s.start}:{s.limit}] is not within "
                             f"[0:{a.dims[i]}] with start <= limit")
        out.append(-(-(s.limit - s.start) // s.stride))
    return _mk(a.element_type, out)


def infer_concatenate(*operands: Shape, dimensions=None, **_):
    """``concatenate``: >= 1 arrays of equal rank/type, equal except in ``dimensions={d}``."""
    if not operands:
        raise ShapeError("concatenate: expects at least one operand")
    arrs = [_arr(o, f"concatenate operand {i}") for i, o in enumerate(operands)]
    dims = _ints(_req(dimensions, "dimensions"), "dimensions")
    if len(dims) != 1:
        raise ShapeError(f"concatenate: dimensions must have exactly one entry, got {list(dims)}")
    d = dims[0]
    first = arrs[0]
    if not 0 <= d < first.rank:
        raise ShapeError(f"concatenate: dimension {d} out of range [0, {first.rank})")
    total = 0
    for i, a in enumerate(arrs):
        if a.rank != first.rank:
            raise ShapeError(f"concatenate: operand {i} has rank {a.rank}, operand 0 has rank {first.rank}")
        _same_type(first, a, "concatenate", f"operand 0 and operand {i}")
        for k in range(a.rank):
            if k != d and a.dims[k] != first.dims[k]:
                raise ShapeError(f"concatenate: operand {i} {shape_str(a)} differs from operand 0 "
                                 f"{shape_str(first)} in dimension {k} (only dimension {d} may differ)")
        total += a.dims[d]
    out = list(first.dims)
    out[d] = total
    return _mk(first.element_type, out)


def infer_pad(operand: Shape, padding_value: Shape, *, padding=None, **_):
    """``pad``: scalar padding value of the operand's type; per dimension
    result = low + high + d + max(d - 1, 0) * interior, interior >= 0, result >= 0."""
    a = _arr(operand, "pad operand")
    v = _arr(padding_value, "pad padding value")
    if v.dims:
        raise ShapeError(f"pad: padding value must be a scalar, got {shape_str(v)}")
    _same_type(a, v, "pad", "operand and padding value")
    cfg = tuple(_req(padding, "padding"))
    if len(cfg) != a.rank:
        raise ShapeError(f"pad: padding has {len(cfg)} dimensions, operand has rank {a.rank}")
    out = []
    for i, p in enumerate(cfg):
        if not isinstance(p, PaddingDim):
            p = PaddingDim(*p)
        if p.interior < 0:
            raise ShapeError(f"pad: dimension {i}: interior padding must be >= 0, got {p.interior}")
        d = a.dims[i]
        r = p.low + p.high + d + max(d - 1, 0) * p.interior
        if r < 0:
            raise ShapeError(f"pad: dimension {i}: padding {p.low}_{p.high}_{p.interior} of size {d} "
                             f"gives negative size {r}")
        out.append(r)
    return _mk(a.element_type, out)


def infer_iota(*, shape=None, iota_dimension=None, **_):
    """``iota``: declared array shape of rank >= 1, ``iota_dimension`` < rank."""
    s = _arr(_req(shape, "shape"), "iota result")
    d = _req(iota_dimension, "iota_dimension")
    if s.rank == 0:
        raise ShapeError("iota: result must have rank >= 1")
    if not 0 <= int(d) < s.rank:
        raise ShapeError(f"iota: iota_dimension={d} out of range [0, {s.rank})")
    return s


def _check_scalar_indices(indices: Sequence[Shape], rank: int, op: str) -> None:
    if len(indices) != rank:
        raise ShapeError(f"{op}: expected {rank} scalar start indices (one per operand dimension), "
                         f"got {len(indices)}")
    first = None
    for i, s in enumerate(indices):
        s = _arr(s, f"{op} start index {i}")
        if s.dims or not s.element_type.is_integer:
            raise ShapeError(f"{op}: start index {i} must be an integer scalar, got {shape_str(s)}")
        if first is not None and s.element_type != first:
            raise ShapeError(f"{op}: start indices must all have the same type, got "
                             f"{first.name} and {s.element_type.name}")
        first = s.element_type


def infer_dynamic_slice(operand: Shape, *start_indices: Shape, dynamic_slice_sizes=None, **_):
    """``dynamic-slice(operand, i0, ..., i{r-1})``: 0 <= size <= operand dim."""
    a = _arr(operand, "dynamic-slice operand")
    _check_scalar_indices(start_indices, a.rank, "dynamic-slice")
    sizes = _ints(_req(dynamic_slice_sizes, "dynamic_slice_sizes"), "dynamic_slice_sizes")
    if len(sizes) != a.rank:
        raise ShapeError(f"dynamic-slice: dynamic_slice_sizes has {len(sizes)} entries, operand rank "
                         f"is {a.rank}")
    for i, (s, d) in enumerate(zip(sizes, a.dims)):
        if not 0 <= s <= d:
            raise ShapeError(f"dynamic-slice: slice size {s} of dimension {i} not in [0, {d}]")
    return _mk(a.element_type, sizes)


def infer_dynamic_update_slice(operand: Shape, update: Shape, *start_indices: Shape, **_):
    """``dynamic-update-slice(operand, update, i0, ...)``: update fits in operand; operand's shape."""
    a = _arr(operand, "dynamic-update-slice operand")
    u = _arr(update, "dynamic-update-slice update")
    if u.rank != a.rank:
        raise ShapeError(f"dynamic-update-slice: update rank {u.rank} != operand rank {a.rank}")
    _same_type(a, u, "dynamic-update-slice", "operand and update")
    for i, (ud, od) in enumerate(zip(u.dims, a.dims)):
        if ud > od:
            raise ShapeError(f"dynamic-update-slice: update dimension {i} ({ud}) exceeds operand "
                             f"dimension ({od})")
    _check_scalar_indices(start_indices, a.rank, "dynamic-update-slice")
    return _mk(a.element_type, a.dims)


def infer_get_dimension_size(operand: Shape, *, dimensions=None, **_):
    """``get-dimension-size``: ``dimensions={d}`` within rank; s32[] result."""
    a = _arr(operand, "get-dimension-size operand")
    dims = _ints(_req(dimensions, "dimensions"), "dimensions")
    if len(dims) != 1:
        raise ShapeError(f"get-dimension-size: dimensions must have one entry, got {list(dims)}")
    _dims_in_range(dims, a.rank, "get-dimension-size dimensions")
    return _mk(S32, ())


def infer_set_dimension_size(operand: Shape, size: Shape, *, dimensions=None, **_):
    """``set-dimension-size(operand, s32[] size)``: operand's shape (that dim dynamic)."""
    a = _arr(operand, "set-dimension-size operand")
    s = _arr(size, "set-dimension-size size")
    if s.dims or s.element_type != S32:
        raise ShapeError(f"set-dimension-size: size must be s32[], got {shape_str(s)}")
    dims = _ints(_req(dimensions, "dimensions"), "dimensions")
    if len(dims) != 1:
        raise ShapeError(f"set-dimension-size: dimensions must have one entry, got {list(dims)}")
    _dims_in_range(dims, a.rank, "set-dimension-size dimensions")
    return _mk(a.element_type, a.dims)


# --------------------------------------------------------------------------- tuples, calls

def infer_tuple(*operands: Shape, **_):
    """``tuple``: the tuple of the operand shapes."""
    return TupleShape(tuple(operands))


def infer_get_tuple_element(operand: Shape, *, index=None, **_):
    """``get-tuple-element``: 0 <= index < tuple size."""
    if not isinstance(operand, TupleShape):
        raise ShapeError(f"get-tuple-element: operand must be a tuple, got {shape_str(operand)}")
    i = int(_req(index, "index"))
    if not 0 <= i < len(operand.elements):
        raise ShapeError(f"get-tuple-element: index {i} out of range for a tuple of "
                         f"{len(operand.elements)} elements {shape_str(operand)}")
    return operand.elements[i]


def _check_call_params(prog, operands: Sequence[Shape], op: str, what: str) -> None:
    params, _ = prog
    if len(params) != len(operands):
        raise ShapeError(f"{op}: {what} takes {len(params)} parameters but {len(operands)} "
                         "operands are passed")
    for i, (p, o) in enumerate(zip(params, operands)):
        if not same_shape(p, o):
            raise ShapeError(f"{op}: {what} parameter {i} has shape {shape_str(p)}, operand is "
                             f"{shape_str(o)}")


def infer_call(*operands: Shape, to_apply=None, **_):
    """``call``: operands match the callee's parameters; result is its root shape."""
    prog = _program(_req(to_apply, "to_apply"))
    if prog is None:
        raise ShapeError("call: the callee's program shape is needed to infer the result")
    _check_call_params(prog, operands, "call", "to_apply")
    return prog[1]


def infer_fusion(*operands: Shape, calls=None, kind=None, **_):
    """``fusion``: operands match the fused computation's parameters; its root shape."""
    prog = _program(_req(calls, "calls"))
    if prog is None:
        raise ShapeError("fusion: the fused computation's program shape is needed")
    if kind is not None and str(kind) not in ("kLoop", "kInput", "kOutput", "kCustom"):
        raise ShapeError(f"fusion: kind={kind} is not one of kLoop, kInput, kOutput, kCustom")
    _check_call_params(prog, operands, "fusion", "calls")
    return prog[1]


def infer_while(init: Shape, *, condition=None, body=None, **_):
    """``while``: condition (init) -> pred[], body (init) -> init; result init's shape."""
    cond = _program(_req(condition, "condition"))
    bod = _program(_req(body, "body"))
    if cond is not None:
        _check_call_params(cond, [init], "while", "condition")
        r = cond[1]
        if not (isinstance(r, ArrayShape) and r.element_type == PRED and r.dims == ()):
            raise ShapeError(f"while: condition must return pred[], returns {shape_str(r)}")
    if bod is not None:
        _check_call_params(bod, [init], "while", "body")
        if not same_shape(bod[1], init):
            raise ShapeError(f"while: body returns {shape_str(bod[1])}, expected the init shape "
                             f"{shape_str(init)}")
    return init


def infer_conditional(index: Shape, *branch_operands: Shape, true_computation=None,
                      false_computation=None, branch_computations=None, **_):
    """``conditional``: pred[] with true/false computations or s32[] with
    ``branch_computations``; branch i takes operand i+1; all roots agree."""
    p = _arr(index, "conditional branch index")
    if p.dims or p.element_type not in (PRED, S32):
        raise ShapeError(f"conditional: branch index must be pred[] or s32[], got {shape_str(p)}")
    if p.element_type == PRED:
        if true_computation is None or false_computation is None:
            raise ShapeError("conditional: a pred index needs true_computation and false_computation")
        branches = [true_computation, false_computation]
    else:
        if branch_computations is None:
            raise ShapeError("conditional: an s32 index needs branch_computations")
        branches = list(branch_computations)
    if len(branches) < 1:
        raise ShapeError("conditional: needs at least one branch")
    if len(branch_operands) != len(branches):
        raise ShapeError(f"conditional: {len(branches)} branches but {len(branch_operands)} branch "
                         "operands")
    result = None
    for i, (b, o) in enumerate(zip(branches, branch_operands)):
        prog = _program(b)
        if prog is None:
            continue
        _check_call_params(prog, [o], "conditional", f"branch {i}")
        if result is None:
            result = prog[1]
        elif not same_shape(result, prog[1]):
            raise ShapeError(f"conditional: branch {i} returns {shape_str(prog[1])}, branch 0 "
                             f"returns {shape_str(result)}")
    if result is None:
        raise ShapeError("conditional: the branches' program shapes are needed")
    return result


def infer_after_all(*operands: Shape, **_):
    """``after-all``: token operands; token result."""
    for i, o in enumerate(operands):
        if not isinstance(o, TokenShape):
            raise ShapeError(f"after-all: operand {i} must be a token, got {shape_str(o)}")
    return TokenShape()


def infer_add_dependency(operand: Shape, token: Shape, **_):
    """``add-dependency(data, token)``: the data's shape."""
    if not isinstance(token, TokenShape):
        raise ShapeError(f"add-dependency: operand 1 must be a token, got {shape_str(token)}")
    return operand


def infer_map(*operands: Shape, to_apply=None, dimensions=None, **_):
    """``map``: arrays of equal dims; to_apply takes one scalar per operand and
    returns a scalar; result has the operands' dims and the scalar's type."""
    if not operands:
        raise ShapeError("map: expects at least one operand")
    arrs = [_arr(o, f"map operand {i}") for i, o in enumerate(operands)]
    for i, a in enumerate(arrs):
        if a.dims != arrs[0].dims:
            raise ShapeError(f"map: operand {i} dims {list(a.dims)} differ from operand 0 "
                             f"{list(arrs[0].dims)}")
    if dimensions is not None and list(_ints(dimensions, "dimensions")) != list(range(arrs[0].rank)):
        raise ShapeError(f"map: dimensions must be {{0..{arrs[0].rank - 1}}}, got {dimensions}")
    prog = _program(_req(to_apply, "to_apply"))
    if prog is None:
        raise ShapeError("map: the to_apply program shape is needed")
    params, root = prog
    if len(params) != len(arrs):
        raise ShapeError(f"map: to_apply takes {len(params)} parameters, expected {len(arrs)}")
    for i, (p, a) in enumerate(zip(params, arrs)):
        if not (isinstance(p, ArrayShape) and p.dims == () and p.element_type == a.element_type):
            raise ShapeError(f"map: to_apply parameter {i} must be {a.element_type.name}[], got "
                             f"{shape_str(p)}")
    r = _arr(root, "map to_apply result")
    if r.dims:
        raise ShapeError(f"map: to_apply must return a scalar, returns {shape_str(r)}")
    return _mk(r.element_type, arrs[0].dims)


# --------------------------------------------------------------------------- reductions

def _check_reducer(prog, inits: Sequence[ArrayShape], inputs: Sequence[ArrayShape], op: str,
                   what: str = "to_apply") -> list[ElementType]:
    """XLA's reducer check (fp precision ignored); returns the accumulator types."""
    n = len(inits)
    if prog is None:
        return [i.element_type for i in inits]
    params, result = prog
    if len(params) != 2 * n:
        raise ShapeError(f"{op}: {what} must take {2 * n} parameters, takes {len(params)}")
    accs = list(result.elements) if isinstance(result, TupleShape) else [result]
    if len(accs) != n or (n > 1 and not isinstance(result, TupleShape)):
        raise ShapeError(f"{op}: {what} must return {'a scalar' if n == 1 else f'a tuple of {n} scalars'}"
                         f", returns {shape_str(result)}")
    for i in range(n):
        acc = accs[i]
        if not (isinstance(acc, ArrayShape) and acc.dims == ()):
            raise ShapeError(f"{op}: {what} must return scalars, returns {shape_str(result)}")
        if not same_shape(acc, params[i]):
            raise ShapeError(f"{op}: {what} parameter {i} {shape_str(params[i])} differs from its "
                             f"result {shape_str(acc)}")
        if not same_shape(acc, inits[i], ignore_fp_precision=True):
            raise ShapeError(f"{op}: {what} accumulator {shape_str(acc)} differs from init value "
                             f"{i} {shape_str(inits[i])}")
        elem = _mk(inputs[i].element_type, ())
        if not same_shape(elem, params[n + i], ignore_fp_precision=True):
            raise ShapeError(f"{op}: {what} parameter {n + i} {shape_str(params[n + i])} differs from "
                             f"input {i}'s element type {inputs[i].element_type.name}")
    return [a.element_type for a in accs]


def _split_inputs_inits(operands: Sequence[Shape], op: str):
    if len(operands) < 2 or len(operands) % 2:
        raise ShapeError(f"{op}: expects N inputs and N init values (an even number >= 2 of "
                         f"operands), got {len(operands)}")
    n = len(operands) // 2
    inputs = [_arr(o, f"{op} input {i}") for i, o in enumerate(operands[:n])]
    inits = [_arr(o, f"{op} init value {i}") for i, o in enumerate(operands[n:])]
    for i, s in enumerate(inits):
        if s.dims:
            raise ShapeError(f"{op}: init value {i} must be a scalar, got {shape_str(s)}")
    for i, s in enumerate(inputs):
        if s.dims != inputs[0].dims:
            raise ShapeError(f"{op}: input {i} dims {list(s.dims)} differ from input 0 "
                             f"{list(inputs[0].dims)}")
    return inputs, inits


def infer_reduce(*operands: Shape, dimensions=None, to_apply=None, **_):
    """``reduce(in..., init...)``: removes ``dimensions``; tuple result when N > 1."""
    inputs, inits = _split_inputs_inits(operands, "reduce")
    dims = _ints(_req(dimensions, "dimensions"), "dimensions")
    _dims_in_range(dims, inputs[0].rank, "reduce dimensions")
    ets = _check_reducer(_program(to_apply), inits, inputs, "reduce")
    kept = [d for i, d in enumerate(inputs[0].dims) if i not in dims]
    return _tuple_or_single([_mk(et, kept) for et in ets])


def infer_reduce_window(*operands: Shape, window=None, to_apply=None, **_):
    """``reduce-window(in..., init...)``: window over every dimension."""
    inputs, inits = _split_inputs_inits(operands, "reduce-window")
    wdims = _window_dims(window)
    rank = inputs[0].rank
    if window is None:
        wdims = tuple(WindowDim(1) for _ in range(rank))
    if len(wdims) != rank:
        raise ShapeError(f"reduce-window: window has {len(wdims)} dimensions, operand rank is {rank}")
    ets = _check_reducer(_program(to_apply), inits, inputs, "reduce-window")
    out = [window_output_dim(d, w) for d, w in zip(inputs[0].dims, wdims)]
    return _tuple_or_single([_mk(et, out) for et in ets])


def infer_select_and_scatter(operand: Shape, source: Shape, init_value: Shape, *, window=None,
                             select=None, scatter=None, **_):
    """``select-and-scatter``: source has the windowed shape of operand; operand's shape."""
    a = _arr(operand, "select-and-scatter operand")
    s = _arr(source, "select-and-scatter source")
    i = _arr(init_value, "select-and-scatter init value")
    if i.dims:
        raise ShapeError(f"select-and-scatter: init value must be a scalar, got {shape_str(i)}")
    _same_type(s, i, "select-and-scatter", "source and init value")
    wdims = _window_dims(window) if window is not None else tuple(WindowDim(1) for _ in a.dims)
    if len(wdims) != a.rank:
        raise ShapeError(f"select-and-scatter: window has {len(wdims)} dimensions, operand rank is "
                         f"{a.rank}")
    expect = tuple(window_output_dim(d, w) for d, w in zip(a.dims, wdims))
    if s.dims != expect:
        raise ShapeError(f"select-and-scatter: source dims {list(s.dims)} must equal the windowed "
                         f"operand dims {list(expect)}")
    sel = _program(_req(select, "select"))
    if sel is not None:
        params, r = sel
        elem = _mk(a.element_type, ())
        if len(params) != 2 or not all(same_shape(p, elem) for p in params):
            raise ShapeError(f"select-and-scatter: select must take two {shape_str(elem)} parameters")
        if not (isinstance(r, ArrayShape) and r.dims == () and r.element_type == PRED):
            raise ShapeError(f"select-and-scatter: select must return pred[], returns {shape_str(r)}")
    _check_reducer(_program(_req(scatter, "scatter")), [i], [s], "select-and-scatter", "scatter")
    return _mk(a.element_type, a.dims)


def infer_sort(*operands: Shape, dimensions=None, to_apply=None, is_stable=None, **_):
    """``sort``: arrays of equal dims; comparator takes 2N scalars, returns pred[]."""
    if not operands:
        raise ShapeError("sort: expects at least one operand")
    arrs = [_arr(o, f"sort operand {i}") for i, o in enumerate(operands)]
    for i, a in enumerate(arrs):
        if a.dims != arrs[0].dims:
            raise ShapeError(f"sort: operand {i} dims {list(a.dims)} differ from operand 0 "
                             f"{list(arrs[0].dims)}")
    dims = _ints(_req(dimensions, "dimensions"), "dimensions")
    if len(dims) != 1:
        raise ShapeError(f"sort: dimensions must have one entry, got {list(dims)}")
    _dims_in_range(dims, arrs[0].rank, "sort dimensions")
    prog = _program(_req(to_apply, "to_apply"))
    if prog is not None:
        params, r = prog
        if len(params) != 2 * len(arrs):
            raise ShapeError(f"sort: comparator must take {2 * len(arrs)} parameters, takes "
                             f"{len(params)}")
        for k, p in enumerate(params):
            want = _mk(arrs[k // 2].element_type, ())
            if not same_shape(p, want):
                raise ShapeError(f"sort: comparator parameter {k} must be {shape_str(want)}, got "
                                 f"{shape_str(p)}")
        if not (isinstance(r, ArrayShape) and r.dims == () and r.element_type == PRED):
            raise ShapeError(f"sort: comparator must return pred[], returns {shape_str(r)}")
    return _tuple_or_single([_mk(a.element_type, a.dims) for a in arrs])


def infer_topk(operand: Shape, *, k=None, largest=None, **_):
    """``topk``: rank >= 1, 0 <= k <= last dim; (values[..., k], s32[..., k])."""
    a = _arr(operand, "topk operand")
    kk = int(_req(k, "k"))
    if a.rank < 1:
        raise ShapeError("topk: operand must have rank >= 1")
    if not 0 <= kk <= a.dims[-1]:
        raise ShapeError(f"topk: k={kk} must be within [0, {a.dims[-1]}] (the last dimension)")
    dims = a.dims[:-1] + (kk,)
    return TupleShape((_mk(a.element_type, dims), _mk(S32, dims)))


# --------------------------------------------------------------------------- gather / scatter

def _expanded_indices(idx: ArrayShape, ivd: int, op: str) -> list[int]:
    if not idx.element_type.is_integer:
        raise ShapeError(f"{op}: indices must be integers, got {idx.element_type.name}")
    if not 0 <= ivd <= idx.rank:
        raise ShapeError(f"{op}: index_vector_dim={ivd} out of range [0, {idx.rank}]")
    dims = list(idx.dims)
    if ivd == idx.rank:
        dims.append(1)
    return dims


def infer_gather(operand: Shape, start_indices: Shape, *, offset_dims=None,
                 collapsed_slice_dims=None, start_index_map=None, index_vector_dim=None,
                 slice_sizes=None, operand_batching_dims=(), start_indices_batching_dims=(),
                 indices_are_sorted=None, **_):
    """``gather`` (with batching dims): result = offset dims at ``offset_dims``, batch
    dims of the indices (without ``index_vector_dim``) elsewhere."""
    a = _arr(operand, "gather operand")
    idx = _arr(start_indices, "gather start indices")
    offset = _ints(_req(offset_dims, "offset_dims"), "offset_dims")
    collapsed = _ints(_req(collapsed_slice_dims, "collapsed_slice_dims"), "collapsed_slice_dims")
    sim = _ints(_req(start_index_map, "start_index_map"), "start_index_map")
    ivd = int(_req(index_vector_dim, "index_vector_dim"))
    sizes = _ints(_req(slice_sizes, "slice_sizes"), "slice_sizes")
    obd = _ints(operand_batching_dims, "operand_batching_dims")
    sibd = _ints(start_indices_batching_dims, "start_indices_batching_dims")
    exp = _expanded_indices(idx, ivd, "gather")
    batch = [d for i, d in enumerate(exp) if i != ivd]
    out_rank = len(offset) + len(batch)
    _dims_in_range(offset, out_rank, "gather offset_dims", sorted_=True)
    _dims_in_range(collapsed, a.rank, "gather collapsed_slice_dims", sorted_=True)
    _dims_in_range(obd, a.rank, "gather operand_batching_dims", sorted_=True)
    _dims_in_range(sim, a.rank, "gather start_index_map")
    _dims_in_range(sibd, len(exp), "gather start_indices_batching_dims")
    if ivd in sibd:
        raise ShapeError("gather: start_indices_batching_dims must not contain index_vector_dim")
    if set(collapsed) & set(obd):
        raise ShapeError("gather: collapsed_slice_dims and operand_batching_dims overlap")
    if len(obd) != len(sibd):
        raise ShapeError(f"gather: operand_batching_dims ({len(obd)}) and "
                         f"start_indices_batching_dims ({len(sibd)}) differ in length")
    if len(sim) != exp[ivd]:
        raise ShapeError(f"gather: start_index_map has {len(sim)} entries but the index vector "
                         f"dimension has size {exp[ivd]}")
    if len(sizes) != a.rank:
        raise ShapeError(f"gather: slice_sizes has {len(sizes)} entries, operand rank is {a.rank}")
    if len(offset) + len(collapsed) + len(obd) != a.rank:
        raise ShapeError(f"gather: offset_dims ({len(offset)}) + collapsed_slice_dims "
                         f"({len(collapsed)}) + operand_batching_dims ({len(obd)}) must equal the "
                         f"operand rank {a.rank}")
    for i, (s, d) in enumerate(zip(sizes, a.dims)):
        if not 0 <= s <= d:
            raise ShapeError(f"gather: slice_sizes[{i}]={s} not within [0, {d}]")
    for d in collapsed + obd:
        if sizes[d] > 1:
            raise ShapeError(f"gather: slice_sizes[{d}]={sizes[d]} must be <= 1 for a collapsed or "
                             "batching dimension")
    offset_sizes = [s for i, s in enumerate(sizes) if i not in collapsed and i not in obd]
    out, oi, bi = [], 0, 0
    for i in range(out_rank):
        if i in offset:
            out.append(offset_sizes[oi])
            oi += 1
        else:
            out.append(batch[bi])
            bi += 1
    return _mk(a.element_type, out)


def infer_scatter(*operands: Shape, update_window_dims=None, inserted_window_dims=None,
                  scatter_dims_to_operand_dims=None, index_vector_dim=None, to_apply=None,
                  input_batching_dims=(), scatter_indices_batching_dims=(),
                  indices_are_sorted=None, unique_indices=None, **_):
    """``scatter(operands..., indices, updates...)``: result = the operands' shapes."""
    if len(operands) < 3 or len(operands) % 2 == 0:
        raise ShapeError(f"scatter: expects N operands, indices and N updates (an odd count >= 3), "
                         f"got {len(operands)}")
    n = (len(operands) - 1) // 2
    ops = [_arr(o, f"scatter operand {i}") for i, o in enumerate(operands[:n])]
    idx = _arr(operands[n], "scatter indices")
    ups = [_arr(o, f"scatter update {i}") for i, o in enumerate(operands[n + 1:])]
    uwd = _ints(_req(update_window_dims, "update_window_dims"), "update_window_dims")
    iwd = _ints(_req(inserted_window_dims, "inserted_window_dims"), "inserted_window_dims")
    sdod = _ints(_req(scatter_dims_to_operand_dims, "scatter_dims_to_operand_dims"),
                 "scatter_dims_to_operand_dims")
    ivd = int(_req(index_vector_dim, "index_vector_dim"))
    ibd = _ints(input_batching_dims, "input_batching_dims")
    sibd = _ints(scatter_indices_batching_dims, "scatter_indices_batching_dims")
    a = ops[0]
    for i, o in enumerate(ops):
        if o.dims != a.dims:
            raise ShapeError(f"scatter: operand {i} dims {list(o.dims)} differ from operand 0 "
                             f"{list(a.dims)}")
    exp = _expanded_indices(idx, ivd, "scatter")
    scatter_batch = [d for i, d in enumerate(exp) if i != ivd]
    for i, u in enumerate(ups):
        if u.dims != ups[0].dims:
            raise ShapeError(f"scatter: update {i} dims differ from update 0")
        if u.element_type != ops[i].element_type:
            raise ShapeError(f"scatter: update {i} type {u.element_type.name} differs from operand "
                             f"{i} type {ops[i].element_type.name}")
    u = ups[0]
    if u.rank != len(uwd) + len(scatter_batch):
        raise ShapeError(f"scatter: updates rank {u.rank} must equal len(update_window_dims) "
                         f"{len(uwd)} + scatter batch rank {len(scatter_batch)}")
    _dims_in_range(uwd, u.rank, "scatter update_window_dims", sorted_=True)
    _dims_in_range(iwd, a.rank, "scatter inserted_window_dims", sorted_=True)
    _dims_in_range(ibd, a.rank, "scatter input_batching_dims", sorted_=True)
    _dims_in_range(sdod, a.rank, "scatter scatter_dims_to_operand_dims")
    _dims_in_range(sibd, len(exp), "scatter scatter_indices_batching_dims")
    if set(iwd) & set(ibd):
        raise ShapeError("scatter: inserted_window_dims and input_batching_dims overlap")
    if len(ibd) != len(sibd):
        raise ShapeError("scatter: input_batching_dims and scatter_indices_batching_dims differ in "
                         "length")
    if len(sdod) != exp[ivd]:
        raise ShapeError(f"scatter: scatter_dims_to_operand_dims has {len(sdod)} entries but the "
                         f"index vector dimension has size {exp[ivd]}")
    if len(uwd) + len(iwd) + len(ibd) != a.rank:
        raise ShapeError(f"scatter: update_window_dims ({len(uwd)}) + inserted_window_dims "
                         f"({len(iwd)}) + input_batching_dims ({len(ibd)}) must equal the operand "
                         f"rank {a.rank}")
    window_operand_dims = [i for i in range(a.rank) if i not in iwd and i not in ibd]
    for k, ud in enumerate(uwd):
        od = window_operand_dims[k]
        if u.dims[ud] > a.dims[od]:
            raise ShapeError(f"scatter: update window dimension {ud} ({u.dims[ud]}) exceeds operand "
                             f"dimension {od} ({a.dims[od]})")
    ubatch = [d for i, d in enumerate(u.dims) if i not in uwd]
    if ubatch != scatter_batch:
        raise ShapeError(f"scatter: update scatter dims {ubatch} must equal the indices' batch dims "
                         f"{scatter_batch}")
    prog = _program(_req(to_apply, "to_apply"))
    inits = [_mk(o.element_type, ()) for o in ops]
    _check_reducer(prog, inits, ops, "scatter")
    return _tuple_or_single([_mk(o.element_type, o.dims) for o in ops])


# --------------------------------------------------------------------------- dot / conv

def infer_dot(lhs: Shape, rhs: Shape, *, lhs_batch_dims=(), rhs_batch_dims=(),
              lhs_contracting_dims=(), rhs_contracting_dims=(),
              result_element_type: ElementType | None = None, **_):
    """``dot``: result dims = batch dims, lhs free dims, rhs free dims. The element
    type is free (mixed types allowed): ``result_element_type`` or the lhs type."""
    a = _arr(lhs, "dot lhs")
    b = _arr(rhs, "dot rhs")
    lb, rb = _ints(lhs_batch_dims, "lhs_batch_dims"), _ints(rhs_batch_dims, "rhs_batch_dims")
    lc = _ints(lhs_contracting_dims, "lhs_contracting_dims")
    rc = _ints(rhs_contracting_dims, "rhs_contracting_dims")
    _dims_in_range(lb, a.rank, "dot lhs_batch_dims")
    _dims_in_range(rb, b.rank, "dot rhs_batch_dims")
    _dims_in_range(lc, a.rank, "dot lhs_contracting_dims")
    _dims_in_range(rc, b.rank, "dot rhs_contracting_dims")
    if set(lb) & set(lc) or set(rb) & set(rc):
        raise ShapeError("dot: a dimension is both batch and contracting")
    if len(lb) != len(rb):
        raise ShapeError(f"dot: lhs_batch_dims {list(lb)} and rhs_batch_dims {list(rb)} differ in "
                         "length")
    if len(lc) != len(rc):
        raise ShapeError(f"dot: lhs_contracting_dims {list(lc)} and rhs_contracting_dims {list(rc)} "
                         "differ in length")
    for x, y in zip(lb, rb):
        if a.dims[x] != b.dims[y]:
            raise ShapeError(f"dot: batch dimension sizes differ: lhs dim {x} is {a.dims[x]}, rhs "
                             f"dim {y} is {b.dims[y]}")
    for x, y in zip(lc, rc):
        if a.dims[x] != b.dims[y]:
            raise ShapeError(f"dot: contracting dimension sizes differ: lhs dim {x} is {a.dims[x]}, "
                             f"rhs dim {y} is {b.dims[y]}")
    out = [a.dims[d] for d in lb]
    out += [d for i, d in enumerate(a.dims) if i not in lb and i not in lc]
    out += [d for i, d in enumerate(b.dims) if i not in rb and i not in rc]
    return _mk(result_element_type or a.element_type, out)


def infer_convolution(lhs: Shape, rhs: Shape, *extra: Shape, dim_labels=None, window=None,
                      feature_group_count=1, batch_group_count=1,
                      result_element_type: ElementType | None = None, **_):
    """``convolution``: XLA's rules for ``dim_labels``, window, feature/batch groups.
    Element type free: ``result_element_type`` or the lhs type."""
    a = _arr(lhs, "convolution lhs")
    k = _arr(rhs, "convolution rhs")
    dn = _req(dim_labels, "dim_labels")
    if not isinstance(dn, ConvDimensionNumbers):
        raise ShapeError(f"convolution: dim_labels must be parsed dimension numbers, got {dn!r}")
    fgc, bgc = int(feature_group_count or 1), int(batch_group_count or 1)
    ns = len(dn.input_spatial_dimensions)
    if len(dn.kernel_spatial_dimensions) != ns or len(dn.output_spatial_dimensions) != ns:
        raise ShapeError("convolution: dim_labels parts have different numbers of spatial dims")
    if a.rank != ns + 2 or k.rank != ns + 2:
        raise ShapeError(f"convolution: lhs rank {a.rank} and rhs rank {k.rank} must both be "
                         f"{ns + 2} ({ns} spatial dims + 2)")
    for name, dims in (("input", (dn.input_batch_dimension, dn.input_feature_dimension,
                                  *dn.input_spatial_dimensions)),
                       ("kernel", (dn.kernel_input_feature_dimension,
                                   dn.kernel_output_feature_dimension,
                                   *dn.kernel_spatial_dimensions)),
                       ("output", (dn.output_batch_dimension, dn.output_feature_dimension,
                                   *dn.output_spatial_dimensions))):
        if sorted(dims) != list(range(ns + 2)):
            raise ShapeError(f"convolution: {name} dimension numbers {list(dims)} are not a "
                             f"permutation of 0..{ns + 1}")
    if fgc < 1 or bgc < 1:
        raise ShapeError(f"convolution: group counts must be >= 1 (feature_group_count={fgc}, "
                         f"batch_group_count={bgc})")
    if fgc > 1 and bgc > 1:
        raise ShapeError("convolution: feature_group_count and batch_group_count cannot both be > 1")
    in_f = a.dims[dn.input_feature_dimension]
    batch = a.dims[dn.input_batch_dimension]
    k_in = k.dims[dn.kernel_input_feature_dimension]
    k_out = k.dims[dn.kernel_output_feature_dimension]
    if in_f % fgc:
        raise ShapeError(f"convolution: input features {in_f} not divisible by "
                         f"feature_group_count={fgc}")
    if in_f // fgc != k_in:
        raise ShapeError(f"convolution: input features {in_f} / feature_group_count {fgc} = "
                         f"{in_f // fgc} must equal the kernel input features {k_in}")
    if k_out % fgc:
        raise ShapeError(f"convolution: kernel output features {k_out} not divisible by "
                         f"feature_group_count={fgc}")
    if batch % bgc:
        raise ShapeError(f"convolution: batch {batch} not divisible by batch_group_count={bgc}")
    if k_out % bgc:
        raise ShapeError(f"convolution: kernel output features {k_out} not divisible by "
                         f"batch_group_count={bgc}")
    wdims = _window_dims(window)
    if window is None:
        wdims = tuple(WindowDim(k.dims[d]) for d in dn.kernel_spatial_dimensions)
    if len(wdims) != ns:
        raise ShapeError(f"convolution: window has {len(wdims)} dimensions, expected {ns}")
    out = [0] * (ns + 2)
    out[dn.output_batch_dimension] = batch // bgc
    out[dn.output_feature_dimension] = k_out
    for i in range(ns):
        ksz = k.dims[dn.kernel_spatial_dimensions[i]]
        if wdims[i].size != ksz:
            raise ShapeError(f"convolution: window size {wdims[i].size} of spatial dim {i} must equal "
                             f"the kernel's spatial size {ksz}")
        out[dn.output_spatial_dimensions[i]] = window_output_dim(
            a.dims[dn.input_spatial_dimensions[i]], wdims[i])
    return _mk(result_element_type or a.element_type, out)


# --------------------------------------------------------------------------- linear algebra etc

_FFT_TYPES = ("FFT", "IFFT", "RFFT", "IRFFT")


def infer_fft(operand: Shape, *, fft_type=None, fft_length=None, **_):
    """``fft``: FFT/IFFT complex → same; RFFT float → complex with last dim n//2+1;
    IRFFT complex → float with the last dims = fft_length."""
    a = _arr(operand, "fft operand")
    t = str(_req(fft_type, "fft_type"))
    if t not in _FFT_TYPES:
        raise ShapeError(f"fft: fft_type={t} is not one of {', '.join(_FFT_TYPES)}")
    ln = _ints(_req(fft_length, "fft_length"), "fft_length")
    if not 1 <= len(ln) <= 3:
        raise ShapeError(f"fft: fft_length must have 1 to 3 entries, got {list(ln)}")
    if a.rank < len(ln):
        raise ShapeError(f"fft: operand rank {a.rank} is less than len(fft_length) {len(ln)}")
    tail = a.dims[a.rank - len(ln):]
    if t in ("FFT", "IFFT"):
        _expect_kind(a.element_type, "c", f"fft {t}")
        if tuple(tail) != ln:
            raise ShapeError(f"fft {t}: the operand's last dims {list(tail)} must equal fft_length "
                             f"{list(ln)}")
        return _mk(a.element_type, a.dims)
    if t == "RFFT":
        if a.element_type.name not in ("f32", "f64"):
            raise ShapeError(f"fft RFFT: operand must be f32 or f64, got {a.element_type.name}")
        if tuple(tail) != ln:
            raise ShapeError(f"fft RFFT: the operand's last dims {list(tail)} must equal fft_length "
                             f"{list(ln)}")
        et = ELEMENT_TYPES["c64" if a.element_type.name == "f32" else "c128"]
        return _mk(et, a.dims[:-1] + (ln[-1] // 2 + 1 if ln[-1] else 0,))
    if a.element_type.name not in ("c64", "c128"):
        raise ShapeError(f"fft IRFFT: operand must be c64 or c128, got {a.element_type.name}")
    want = ln[:-1] + (ln[-1] // 2 + 1 if ln[-1] else 0,)
    if tuple(tail) != want:
        raise ShapeError(f"fft IRFFT: the operand's last dims {list(tail)} must be {list(want)}")
    return _mk(_complex_component(a.element_type), a.dims[:a.rank - len(ln)] + ln)


def infer_cholesky(operand: Shape, *, lower=None, **_):
    """``cholesky``: float/complex, rank >= 2, square minor matrix; same shape."""
    a = _arr(operand, "cholesky operand")
    _expect_kind(a.element_type, "fc", "cholesky")
    if a.rank < 2 or a.dims[-1] != a.dims[-2]:
        raise ShapeError(f"cholesky: operand must be (batches of) square matrices, got {shape_str(a)}")
    return _mk(a.element_type, a.dims)


def infer_triangular_solve(a: Shape, b: Shape, *, left_side=None, lower=None, unit_diagonal=None,
                           transpose_a=None, **_):
    """``triangular-solve(a, b)``: a square; batch dims equal; b's shape."""
    x = _arr(a, "triangular-solve a")
    y = _arr(b, "triangular-solve b")
    _same_type(x, y, "triangular-solve", "a and b")
    _expect_kind(x.element_type, "fc", "triangular-solve")
    if x.rank < 2 or x.dims[-1] != x.dims[-2]:
        raise ShapeError(f"triangular-solve: a must be (batches of) square matrices, got {shape_str(x)}")
    if y.rank != x.rank or y.dims[:-2] != x.dims[:-2]:
        raise ShapeError(f"triangular-solve: a {shape_str(x)} and b {shape_str(y)} must have the "
                         "same rank and batch dims")
    left = bool(left_side) if left_side is not None else False
    solve_dim = y.dims[-2] if left else y.dims[-1]
    if solve_dim != x.dims[-1]:
        raise ShapeError(f"triangular-solve: b dimension {'-2' if left else '-1'} ({solve_dim}) "
                         f"must equal a's size {x.dims[-1]} (left_side={left})")
    return _mk(y.element_type, y.dims)


def _feature_dim(operand: ArrayShape, feature_index, op: str) -> int:
    fi = int(_req(feature_index, "feature_index"))
    if not 0 <= fi < operand.rank:
        raise ShapeError(f"{op}: feature_index={fi} out of range [0, {operand.rank})")
    return operand.dims[fi]


def _check_vectors(op: str, names: Sequence[str], shapes: Sequence[Shape], et, f: int) -> None:
    for name, s in zip(names, shapes):
        s = _arr(s, f"{op} {name}")
        if s.dims != (f,) or s.element_type != et:
            raise ShapeError(f"{op}: {name} must be {et.name}[{f}], got {shape_str(s)}")


def infer_batch_norm_training(operand: Shape, scale: Shape, offset: Shape, *, epsilon=None,
                              feature_index=None, **_):
    """``batch-norm-training``: (operand, mean[F], variance[F])."""
    a = _arr(operand, "batch-norm-training operand")
    _expect_kind(a.element_type, "f", "batch-norm-training")
    _req(epsilon, "epsilon")
    f = _feature_dim(a, feature_index, "batch-norm-training")
    _check_vectors("batch-norm-training", ("scale", "offset"), (scale, offset), a.element_type, f)
    v = _mk(a.element_type, (f,))
    return TupleShape((_mk(a.element_type, a.dims), v, v))


def infer_batch_norm_inference(operand: Shape, scale: Shape, offset: Shape, mean: Shape,
                               variance: Shape, *, epsilon=None, feature_index=None, **_):
    """``batch-norm-inference``: operand's shape."""
    a = _arr(operand, "batch-norm-inference operand")
    _expect_kind(a.element_type, "f", "batch-norm-inference")
    _req(epsilon, "epsilon")
    f = _feature_dim(a, feature_index, "batch-norm-inference")
    _check_vectors("batch-norm-inference", ("scale", "offset", "mean", "variance"),
                   (scale, offset, mean, variance), a.element_type, f)
    return _mk(a.element_type, a.dims)


def infer_batch_norm_grad(operand: Shape, scale: Shape, mean: Shape, variance: Shape,
                          grad_output: Shape, *, epsilon=None, feature_index=None, **_):
    """``batch-norm-grad``: (grad_operand, grad_scale[F], grad_offset[F])."""
    a = _arr(operand, "batch-norm-grad operand")
    _expect_kind(a.element_type, "f", "batch-norm-grad")
    _req(epsilon, "epsilon")
    f = _feature_dim(a, feature_index, "batch-norm-grad")
    _check_vectors("batch-norm-grad", ("scale", "mean", "variance"), (scale, mean, variance),
                   a.element_type, f)
    g = _arr(grad_output, "batch-norm-grad grad_output")
    if not same_shape(g, a):
        raise ShapeError(f"batch-norm-grad: grad_output {shape_str(g)} must equal operand "
                         f"{shape_str(a)}")
    v = _mk(a.element_type, (f,))
    return TupleShape((_mk(a.element_type, a.dims), v, v))


def infer_rng(*operands: Shape, distribution=None, result_dims=None, **_):
    """``rng(a, b)``: two scalars of one type; result ``result_dims`` of that type."""
    d = str(_req(distribution, "distribution"))
    if d not in ("rng_uniform", "rng_normal"):
        raise ShapeError(f"rng: distribution={d} is not rng_uniform or rng_normal")
    if len(operands) != 2:
        raise ShapeError(f"rng: expects 2 operands, got {len(operands)}")
    a = _arr(operands[0], "rng operand 0")
    b = _arr(operands[1], "rng operand 1")
    if a.dims or b.dims:
        raise ShapeError("rng: operands must be scalars")
    _same_type(a, b, "rng", "operand")
    if d == "rng_normal":
        _expect_kind(a.element_type, "f", "rng rng_normal")
    else:
        _expect_kind(a.element_type, "fsup", "rng rng_uniform")
    return _mk(a.element_type, _ints(_req(result_dims, "result_dims"), "result_dims"))


def infer_rng_bit_generator(state: Shape, *, algorithm=None, output_shape=None, **_):
    """``rng-bit-generator(state)``: (state, output_shape); output integral or float."""
    s = _arr(state, "rng-bit-generator state")
    alg = str(_req(algorithm, "algorithm"))
    if alg not in ("rng_default", "rng_three_fry", "rng_philox"):
        raise ShapeError(f"rng-bit-generator: algorithm={alg} unknown")
    if s.rank != 1:
        raise ShapeError(f"rng-bit-generator: state must be rank 1, got {shape_str(s)}")
    out = _arr(_req(output_shape, "output_shape"), "rng-bit-generator output")
    return TupleShape((s, out))


def infer_rng_get_and_update_state(*, delta=None, **_):
    """``rng-get-and-update-state``: u64[2]."""
    _req(delta, "delta")
    return _mk(ELEMENT_TYPES["u64"], (2,))


# --------------------------------------------------------------------------- collectives

def _group_size(replica_groups) -> int | None:
    groups = getattr(replica_groups, "groups", None)
    if groups:
        return len(groups[0])
    return None


def infer_all_reduce(*operands: Shape, to_apply=None, **_):
    """``all-reduce``: operand shapes (tuple when > 1 operand)."""
    arrs = [_arr(o, f"all-reduce operand {i}") for i, o in enumerate(operands)]
    if not arrs:
        raise ShapeError("all-reduce: expects at least one operand")
    prog = _program(_req(to_apply, "to_apply"))
    for a in arrs:
        _check_reducer(prog, [_mk(a.element_type, ())], [a], "all-reduce")
    return _tuple_or_single([_mk(a.element_type, a.dims) for a in arrs])


def _gather_scatter_dim(op, operands, dimensions, shard_count, replica_groups, multiply):
    arrs = [_arr(o, f"{op} operand {i}") for i, o in enumerate(operands)]
    if not arrs:
        raise ShapeError(f"{op}: expects at least one operand")
    dims = _ints(_req(dimensions, "dimensions"), "dimensions")
    if len(dims) != 1:
        raise ShapeError(f"{op}: dimensions must have one entry, got {list(dims)}")
    d = dims[0]
    n = shard_count if shard_count is not None else _group_size(replica_groups)
    if n is None:
        raise ShapeError(f"{op}: shard_count unknown (no explicit replica_groups)")
    out = []
    for a in arrs:
        if not 0 <= d < a.rank:
            raise ShapeError(f"{op}: dimension {d} out of range [0, {a.rank})")
        dd = list(a.dims)
        if multiply:
            dd[d] *= n
        else:
            if dd[d] % n:
                raise ShapeError(f"{op}: dimension {d} of size {dd[d]} is not divisible by the "
                                 f"shard count {n}")
            dd[d] //= n
        out.append(_mk(a.element_type, dd))
    return _tuple_or_single(out)


def infer_all_gather(*operands: Shape, dimensions=None, shard_count=None, replica_groups=None, **_):
    """``all-gather``: dimension ``d`` multiplied by the shard count."""
    return _gather_scatter_dim("all-gather", operands, dimensions, shard_count, replica_groups, True)


def infer_reduce_scatter(*operands: Shape, dimensions=None, shard_count=None, replica_groups=None,
                         to_apply=None, **_):
    """``reduce-scatter``: dimension ``d`` divided by the shard count."""
    _req(to_apply, "to_apply")
    return _gather_scatter_dim("reduce-scatter", operands, dimensions, shard_count, replica_groups,
                               False)


def infer_all_to_all(*operands: Shape, dimensions=None, replica_groups=None, **_):
    """``all-to-all``: the array form (``dimensions={split}``) keeps the shape; the
    tuple form returns the tuple of operand shapes."""
    arrs = [_arr(o, f"all-to-all operand {i}") for i, o in enumerate(operands)]
    if not arrs:
        raise ShapeError("all-to-all: expects at least one operand")
    if dimensions is not None:
        dims = _ints(dimensions, "dimensions")
        if len(dims) != 1 or len(arrs) != 1:
            raise ShapeError("all-to-all: the array form takes one operand and one split dimension")
        _dims_in_range(dims, arrs[0].rank, "all-to-all dimensions")
        n = _group_size(replica_groups)
        if n and arrs[0].dims[dims[0]] % n:
            raise ShapeError(f"all-to-all: split dimension size {arrs[0].dims[dims[0]]} is not "
                             f"divisible by the group size {n}")
        return arrs[0]
    return TupleShape(tuple(_mk(a.element_type, a.dims) for a in arrs))


def infer_collective_permute(*operands: Shape, source_target_pairs=None, **_):
    """``collective-permute``: the operand's shape."""
    if len(operands) != 1:
        # In-place form (operand, output, input_start, output_start): output's shape.
        if len(operands) == 4:
            return operands[1]
        raise ShapeError(f"collective-permute: expects 1 (or 4) operands, got {len(operands)}")
    return operands[0]


infer_collective_broadcast = infer_copy


def infer_collective_reduce(*operands: Shape, to_apply=None, has_dynamic_root=None, **_):
    """``collective-reduce``: the shapes of the reduced operands, as ``all-reduce``; with
    ``has_dynamic_root=true`` the last operand is the s32 array of root ranks (one per
    reduced operand) and is not part of the result (upstream
    ``collective_reduce_thunk.cc``)."""
    data = list(operands)
    if has_dynamic_root is True:
        if len(data) < 2:
            raise ShapeError("collective-reduce: has_dynamic_root=true needs the reduced "
                             "operands and a trailing s32 root operand")
        root = _arr(data.pop(), "collective-reduce root operand")
        if root.element_type != S32:
            raise ShapeError(f"collective-reduce: the root operand must be s32, got "
                             f"{shape_str(root)}")
    try:
        return infer_all_reduce(*data, to_apply=to_apply)
    except ShapeError as exc:
        raise ShapeError(str(exc).replace("all-reduce", "collective-reduce")) from None


def _permute_indices_shape(operand: ArrayShape, dims: tuple[int, ...], indices) -> None:
    """``indices`` hold, for every element of the result, the coordinates (along
    ``dims``, in that order) of the operand element it takes: dims of the operand
    (or 1, shared along that dimension) plus a trailing dimension of ``len(dims)``
    coordinates, which may be left out when one dimension is shuffled
    (``shuffle_expander.cc``, ``MakeShuffleStartIndices``)."""
    shape = getattr(indices, "shape", None)
    if not isinstance(shape, ArrayShape):
        raise ShapeError("shuffle: mode=permute needs indices=<integer array literal>")
    if not shape.element_type.is_integer:
        raise ShapeError(f"shuffle: indices must be integers, got {shape_str(shape)}")
    lead = shape.dims
    if shape.rank == operand.rank + 1:
        if shape.dims[-1] != len(dims):
            raise ShapeError(f"shuffle: the last dimension of indices {shape_str(shape)} must hold "
                             f"{len(dims)} coordinates (one per shuffled dimension)")
        lead = shape.dims[:-1]
    elif not (shape.rank == operand.rank and len(dims) == 1):
        raise ShapeError(f"shuffle: indices {shape_str(shape)} must have rank "
                         f"{operand.rank + 1} (operand rank + 1)"
                         + (f" or {operand.rank}" if len(dims) == 1 else ""))
    for d, (i, o) in enumerate(zip(lead, operand.dims)):
        if i not in (o, 1):
            raise ShapeError(f"shuffle: dimension {d} of indices {shape_str(shape)} is {i}; it "
                             f"must be the operand's {o} or 1")


def infer_shuffle(operand: Shape, *, dimensions=None, mode=None, shifts=None, indices=None,
                  **_):
    """``shuffle``: the operand's shape; ``dimensions`` are the shuffled dimensions;
    ``mode=rotate`` takes one shift per dimension, ``mode=permute`` an indices literal.
    Other modes (upstream also declares multi-rotate) are accepted unchecked."""
    a = _arr(operand, "shuffle operand")
    dims = _ints(_req(dimensions, "dimensions"), "dimensions")
    _dims_in_range(dims, a.rank, "dimensions")
    mode = str(_req(mode, "mode"))
    if mode == "rotate":
        n = len(_ints(_req(shifts, "shifts"), "shifts"))
        if n != len(dims):
            raise ShapeError(f"shuffle: mode=rotate takes one shift per dimension: "
                             f"{len(dims)} dimensions, {n} shifts")
    elif mode == "permute":
        _permute_indices_shape(a, dims, _req(indices, "indices"))
    return a


def infer_replica_id(**_):
    """``replica-id``: u32[]."""
    return _mk(U32, ())


infer_partition_id = infer_replica_id


# --------------------------------------------------------------------------- declared shapes

def infer_declared(*operands: Shape, shape=None, **_):
    """Ops whose result is whatever the instruction declares (parameter, constant,
    custom-call, bitcast, infeed, recv, async ops, ...)."""
    return _req(shape, "shape")


#: Opcodes whose result shape is taken from the declaration (no constraint checked).
DECLARED = frozenset({
    "parameter", "constant", "custom-call", "bitcast", "infeed", "outfeed", "recv", "recv-done",
    "send", "send-done", "async-start", "async-update", "async-done", "all-reduce-start",
    "all-reduce-done", "all-gather-start", "all-gather-done", "collective-permute-start",
    "collective-permute-done", "copy-start", "copy-done", "ragged-all-to-all", "ragged-dot",
    "scaled-dot", "scan",
})

#: Opcode → which keyword ``infer_shape`` fills from the declared result shape.
FREE_PARTS: dict[str, str] = {
    "convert": "result_element_type", "bitcast-convert": "result_element_type",
    "stochastic-convert": "result_element_type", "dot": "result_element_type",
    "convolution": "result_element_type",
    "broadcast": "result_dims", "reshape": "result_dims", "dynamic-reshape": "result_dims",
    "rng": "result_dims", "iota": "shape", "rng-bit-generator": "output_shape",
    "all-gather": "shard_count", "reduce-scatter": "shard_count",
    **{op: "shape" for op in DECLARED},
}

#: Opcodes with a free result element type: the verifier compares dims only.
FREE_ELEMENT_TYPE = frozenset({"convert", "bitcast-convert", "stochastic-convert", "dot",
                               "convolution"})


INFER: dict[str, Callable[..., Shape]] = {}
for _op in UNARY_OPCODES:
    INFER[_op] = _make_unary(_op)
    globals()[INFER[_op].__name__] = INFER[_op]
for _op in BINARY_OPCODES:
    INFER[_op] = _make_binary(_op)
    globals()[INFER[_op].__name__] = INFER[_op]
for _op in ("compare", "select", "clamp", "convert", "bitcast-convert", "stochastic-convert",
            "reduce-precision", "broadcast", "reshape", "dynamic-reshape", "transpose", "reverse",
            "copy", "domain", "opt-barrier", "slice", "concatenate", "pad", "iota",
            "dynamic-slice", "dynamic-update-slice", "get-dimension-size", "set-dimension-size",
            "tuple", "get-tuple-element", "call", "fusion", "while", "conditional", "after-all",
            "add-dependency", "map", "reduce", "reduce-window", "select-and-scatter", "sort",
            "topk", "gather", "scatter", "dot", "convolution", "fft", "cholesky",
            "triangular-solve", "batch-norm-training", "batch-norm-inference", "batch-norm-grad",
            "rng", "rng-bit-generator", "rng-get-and-update-state", "all-reduce", "all-gather",
            "reduce-scatter", "all-to-all", "collective-permute", "collective-broadcast",
            "collective-reduce", "shuffle", "replica-id", "partition-id"):
    INFER[_op] = globals()["infer_" + _op.replace("-", "_")]
for _op in DECLARED:
    INFER[_op] = infer_declared
del _op

__all__ += sorted({f.__name__ for f in INFER.values()})


def _fill_free(opcode: str, kwargs: dict, declared: Shape | None) -> None:
    part = FREE_PARTS.get(opcode)
    if part is None or declared is None or kwargs.get(part) is not None:
        return
    if part == "shape":
        kwargs["shape"] = declared
    elif part == "result_element_type" and isinstance(declared, ArrayShape):
        kwargs[part] = declared.element_type
    elif part == "result_dims" and isinstance(declared, ArrayShape):
        kwargs[part] = declared.dims
    elif part == "output_shape" and isinstance(declared, TupleShape) and len(declared.elements) == 2:
        kwargs[part] = declared.elements[1]
    elif part == "shard_count":
        if _group_size(kwargs.get("replica_groups")) is not None:
            return
        outs = flatten_shape_arrays(declared)
        ins = kwargs.get("_operands", ())
        dims = _ints(kwargs.get("dimensions"), "dimensions")
        if outs and ins and len(dims) == 1 and isinstance(ins[0], ArrayShape) \
                and 0 <= dims[0] < min(ins[0].rank, outs[0].rank):
            o, i = outs[0].dims[dims[0]], ins[0].dims[dims[0]]
            if opcode == "all-gather" and i and o % i == 0:
                kwargs[part] = o // i
            elif opcode == "reduce-scatter" and o and i % o == 0:
                kwargs[part] = i // o


def flatten_shape_arrays(shape: Shape) -> list[ArrayShape]:
    if isinstance(shape, TupleShape):
        return [x for e in shape.elements for x in flatten_shape_arrays(e)]
    return [shape] if isinstance(shape, ArrayShape) else []


def infer_shape(opcode: str, operand_shapes: Sequence[Shape], attrs: dict[str, Any] | None = None,
                called: dict[str, Any] | None = None, *, declared: Shape | None = None) -> Shape:
    """Infer the result shape of ``opcode``.

    ``attrs``: attributes by text name (typed values). ``called``: attribute name →
    program shape of the called computation(s) (``ProgramShape`` or ``(params, root)``;
    a list for ``branch_computations``); these replace the ``ComputationRef`` names.
    ``declared``: the instruction's declared shape, used only for the parts the
    operands leave free (``FREE_PARTS``).
    """
    fn = INFER.get(opcode)
    if fn is None:
        raise ShapeError(f"no shape inference for opcode '{opcode}'")
    kwargs = {k.replace("-", "_"): v for k, v in (attrs or {}).items()}
    for k, v in (called or {}).items():
        kwargs[k] = v
    kwargs["_operands"] = tuple(operand_shapes)
    _fill_free(opcode, kwargs, declared)
    del kwargs["_operands"]
    return fn(*operand_shapes, **kwargs)
