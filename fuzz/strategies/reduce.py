"""The reduce maker, and the reducers every reducing maker shares: which kinds suit an
element type (``reducer_kinds``) and their identity values (``identity``)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from hypothesis import strategies as st

from hloref.op_properties import values_of
from hloref.shapes import ArrayShape
from hloref.types import ElementType

from .builder import Builder
from .shapes import kind_letter


def identity(et: ElementType, kind: str):
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


def reducer_kinds(et: ElementType) -> list[str]:
    """The single-op reducers drawn for ``et`` (op property ``generated-reducer``): float
    add twice, f8e8m0fnu without add."""
    letter = kind_letter(et)
    kinds = [op for op, letters in values_of("generated-reducer").items()
             if letter in letters and not (op == "add" and et.name == "f8e8m0fnu")]
    if et.is_float and "add" in kinds:
        kinds.insert(0, "add")
    return kinds


def make_reduce(b: Builder):
    x = b.operand("fcsup", min_rank=1)
    et = x.shape.element_type
    dims = tuple(sorted(b.draw(st.sets(st.integers(0, x.shape.rank - 1), min_size=0))))
    if b.draw(st.integers(0, 3)) == 0 and not et.is_complex:
        # variadic: (max, min) of two inputs at once, an independent reducer per operand
        y = b.operand(dims=x.shape.dims, kinds="fsu")
        e2 = y.shape.element_type
        kinds = [b.draw(st.sampled_from(["maximum", "minimum"])) for _ in range(2)]
        sb = Builder(b.draw, b.ctx, param_shapes=[ArrayShape(et, ()), ArrayShape(e2, ()),
                                                    ArrayShape(et, ()), ArrayShape(e2, ())],
                      fixed=True)
        p = sb.params
        r0 = sb.add(kinds[0], [p[0], p[2]])
        r1 = sb.add(kinds[1], [p[1], p[3]])
        root = sb.add("tuple", [r0, r1], pool=False)
        ref = b.finish_computation(sb, root, "reducer2")
        inits = [b.constant(et, (), identity(et, kinds[0])),
                 b.constant(e2, (), identity(e2, kinds[1]))]
        r = b.add("reduce", [x, y] + inits, {"dimensions": dims, "to_apply": ref},
                  called={"to_apply": ref}, pool=False)
        b.add("get-tuple-element", [r], {"index": 1})
        return b.add("get-tuple-element", [r], {"index": 0})
    kind = b.draw(st.sampled_from(reducer_kinds(et)))
    ref = b.scalar_computation(et, kind)
    init = b.constant(et, (), identity(et, kind))
    return b.add("reduce", [x, init], {"dimensions": dims, "to_apply": ref},
                 called={"to_apply": ref})
