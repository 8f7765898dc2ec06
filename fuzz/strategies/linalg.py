"""Makers of the linear-algebra ops: fft, cholesky, triangular-solve and the
batch-norm family (hinted inputs: symmetric positive definite, triangular,
positive variances)."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from hloref.attrs import Enum
from hloref.ir import Instruction
from hloref.shapes import ArrayShape, TupleShape

from .builder import Builder


def make_fft(b: Builder):
    kind = b.draw(st.sampled_from(["FFT", "IFFT", "RFFT", "IRFFT"]))
    k = b.draw(st.integers(1, 2))
    lengths = tuple(b.draw(st.integers(1, 5)) for _ in range(k))
    lead = tuple(b.draw(st.integers(1, 2)) for _ in range(b.draw(st.integers(0, 1))))
    if kind == "RFFT":
        et = b.et(b.draw(st.sampled_from(b.allowed(["f32", "f64"]))))
        x = b.operand(et=et, dims=lead + lengths)
    elif kind == "IRFFT":
        d = lengths[:-1] + (lengths[-1] // 2 + 1,)
        x = b.operand(et=b.et(b.draw(st.sampled_from(["c64", "c128"]))), dims=lead + d)
    else:
        x = b.operand(et=b.et(b.draw(st.sampled_from(["c64", "c128"]))), dims=lead + lengths)
    return b.add("fft", [x], {"fft_type": Enum(kind), "fft_length": lengths})


def _tri_mask(b: Builder, x: Instruction, lower: bool) -> Instruction:
    """Zero the triangle cholesky leaves implementation-defined (as jax does)."""
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
    return b.add("select", [keep, x, zeros])


def make_cholesky(b: Builder):
    et = b.et(b.draw(st.sampled_from(b.allowed(["f32", "f64"]))))
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


def make_triangular_solve(b: Builder):
    et = b.et(b.draw(st.sampled_from(b.allowed(["f32", "f64"]))))
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


def make_batch_norm(kind):
    def make(b: Builder):
        et = b.et(b.draw(st.sampled_from(b.allowed(["f32", "f32", "f64", "f16", "bf16"]))))
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
