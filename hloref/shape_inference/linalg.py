"""Shape rules of fft, cholesky, triangular-solve and the batch-norm ops."""

from __future__ import annotations

from ..shapes import ArrayShape, Shape, TupleShape
from ..types import ELEMENT_TYPES
from .common import (ShapeError, as_array, complex_component, expect_kind, expect_same_type, infer,
                     int_list, make_array, required, same_shape, shape_str)


_FFT_TYPES = ("FFT", "IFFT", "RFFT", "IRFFT")


@infer("fft")
def infer_fft(operand: Shape, *, fft_type=None, fft_length=None, **_):
    """``fft``: FFT/IFFT complex → same; RFFT float → complex with last dim n//2+1;
    IRFFT complex → float with the last dims = fft_length."""
    a = as_array(operand, "fft operand")
    t = str(required(fft_type, "fft_type"))
    if t not in _FFT_TYPES:
        raise ShapeError(f"fft: fft_type={t} is not one of {', '.join(_FFT_TYPES)}")
    ln = int_list(required(fft_length, "fft_length"), "fft_length")
    if not 1 <= len(ln) <= 3:
        raise ShapeError(f"fft: fft_length must have 1 to 3 entries, got {list(ln)}")
    if a.rank < len(ln):
        raise ShapeError(f"fft: operand rank {a.rank} is less than len(fft_length) {len(ln)}")
    tail = a.dims[a.rank - len(ln):]
    if t in ("FFT", "IFFT"):
        # XLA's InferFftShape compares neither the last dims with fft_length here (the
        # evaluator transforms the operand's own extents)
        expect_kind(a.element_type, "c", f"fft {t}")
        return make_array(a.element_type, a.dims)
    if t == "RFFT":
        if a.element_type.name not in ("f32", "f64"):
            raise ShapeError(f"fft RFFT: operand must be f32 or f64, got {a.element_type.name}")
        if tuple(tail) != ln:
            raise ShapeError(f"fft RFFT: the operand's last dims {list(tail)} must equal fft_length "
                             f"{list(ln)}")
        et = ELEMENT_TYPES["c64" if a.element_type.name == "f32" else "c128"]
        return make_array(et, a.dims[:-1] + (ln[-1] // 2 + 1 if ln[-1] else 0,))
    if a.element_type.name not in ("c64", "c128"):
        raise ShapeError(f"fft IRFFT: operand must be c64 or c128, got {a.element_type.name}")
    want = ln[:-1] + (ln[-1] // 2 + 1,)
    # XLA: the innermost dim is fft_length[-1] // 2 + 1, or 0 when fft_length[-1] is 0
    if tuple(tail) != want and not (tuple(tail[:-1]) == ln[:-1] and tail[-1] == 0 == ln[-1]):
        raise ShapeError(f"fft IRFFT: the operand's last dims {list(tail)} must be {list(want)}")
    return make_array(complex_component(a.element_type), a.dims[:a.rank - len(ln)] + ln)


@infer("cholesky")
def infer_cholesky(operand: Shape, *, lower=None, **_):
    """``cholesky``: float/complex, rank >= 2, square minor matrix; same shape."""
    a = as_array(operand, "cholesky operand")
    expect_kind(a.element_type, "fc", "cholesky")
    if a.rank < 2 or a.dims[-1] != a.dims[-2]:
        raise ShapeError(f"cholesky: operand must be (batches of) square matrices, got {shape_str(a)}")
    return make_array(a.element_type, a.dims)


@infer("triangular-solve")
def infer_triangular_solve(a: Shape, b: Shape, *, left_side=None, lower=None, unit_diagonal=None,
                           transpose_a=None, **_):
    """``triangular-solve(a, b)``: a square; batch dims equal; b's shape."""
    x = as_array(a, "triangular-solve a")
    y = as_array(b, "triangular-solve b")
    expect_same_type(x, y, "triangular-solve", "a and b")
    expect_kind(x.element_type, "fc", "triangular-solve")
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
    return make_array(y.element_type, y.dims)


def _batch_norm_operand(op: str, operand: Shape, epsilon, feature_index,
                        vectors: dict[str, Shape]) -> tuple[ArrayShape, int]:
    """What the three batch-norm ops require alike: a floating-point operand, an
    ``epsilon``, a ``feature_index`` in range, and per-feature vectors (``vectors``, by
    name) of the operand's type and the feature count; the operand and that count."""
    a = as_array(operand, f"{op} operand")
    expect_kind(a.element_type, "f", op)
    required(epsilon, "epsilon")
    fi = int(required(feature_index, "feature_index"))
    if not 0 <= fi < a.rank:
        raise ShapeError(f"{op}: feature_index={fi} out of range [0, {a.rank})")
    f = a.dims[fi]
    for name, s in vectors.items():
        s = as_array(s, f"{op} {name}")
        if s.dims != (f,) or s.element_type != a.element_type:
            raise ShapeError(f"{op}: {name} must be {a.element_type.name}[{f}], got {shape_str(s)}")
    return a, f


@infer("batch-norm-training")
def infer_batch_norm_training(operand: Shape, scale: Shape, offset: Shape, *, epsilon=None,
                              feature_index=None, **_):
    """``batch-norm-training``: (operand, mean[F], variance[F])."""
    a, f = _batch_norm_operand("batch-norm-training", operand, epsilon, feature_index,
                               {"scale": scale, "offset": offset})
    v = make_array(a.element_type, (f,))
    return TupleShape((make_array(a.element_type, a.dims), v, v))


@infer("batch-norm-inference")
def infer_batch_norm_inference(operand: Shape, scale: Shape, offset: Shape, mean: Shape,
                               variance: Shape, *, epsilon=None, feature_index=None, **_):
    """``batch-norm-inference``: operand's shape."""
    a, _ = _batch_norm_operand("batch-norm-inference", operand, epsilon, feature_index,
                               {"scale": scale, "offset": offset, "mean": mean,
                                "variance": variance})
    return make_array(a.element_type, a.dims)


@infer("batch-norm-grad")
def infer_batch_norm_grad(operand: Shape, scale: Shape, mean: Shape, variance: Shape,
                          grad_output: Shape, *, epsilon=None, feature_index=None, **_):
    """``batch-norm-grad``: (grad_operand, grad_scale[F], grad_offset[F])."""
    a, f = _batch_norm_operand("batch-norm-grad", operand, epsilon, feature_index,
                               {"scale": scale, "mean": mean, "variance": variance})
    g = as_array(grad_output, "batch-norm-grad grad_output")
    if not same_shape(g, a):
        raise ShapeError(f"batch-norm-grad: grad_output {shape_str(g)} must equal operand "
                         f"{shape_str(a)}")
    v = make_array(a.element_type, (f,))
    return TupleShape((make_array(a.element_type, a.dims), v, v))
