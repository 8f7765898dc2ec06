"""Linear algebra: ``cholesky``, ``triangular-solve``, ``fft`` and the three ``batch-norm-*``.

Every op here computes in f64 (c128 for complex types) from the exact operand values
and rounds the results once to the element type (f16 and bf16 included). XLA:CPU
computes in the element type (cholesky, triangular-solve and batch-norm are expanded
into HLO by ``CholeskyExpander``, ``TriangularSolveExpander`` or LAPACK/Eigen, and
``BatchNormExpander``), so its results differ from ours by rounding only.

``cholesky`` (``lower=``; operation_semantics §Cholesky, ``xla/service/
cholesky_expander.cc``)
    Batch dims lead; only the selected triangle (diagonal included) is read, and of the
    diagonal only the real part. ``lower=true``: ``a = L L^H``, result ``L``.
    ``lower=false``: the factor of ``transpose(a)`` (the upper triangle read as lower),
    transposed back, i.e. ``U`` with ``a = U^H U``. A complex diagonal entry's imaginary
    part (zero for a Hermitian matrix) does not enter the factorisation, but as in
    XLA:CPU's unblocked kernel (blocks of 128 columns) it leaves ``imag(a_jj) / L_jj``
    in the imaginary part of ``L_jj`` (except in a one-column block: ``n == 1``, or
    the last column when ``n % 128 == 1``). That kernel also computes the diagonal as
    ``d / sqrt(d)`` for the pivot ``d``, so a zero (or infinite) pivot leaves NaN on the
    diagonal only (not an "error": ``sqrt(0)`` is not NaN), except in a one-column block
    (``sqrt(d)``); hloref does the same. The other triangle of the result is
    **zero** (XLA:CPU builds the factor in a zero matrix). When a pivot's square root is
    NaN (the matrix, as read, is not positive definite, or holds NaN), the **whole
    matrix of that batch element is NaN**, as XLA:CPU's expander does
    (``Select(seen_error, NaN, l)``); a zero pivot is not an error by itself (see above;
    the quotients below it become inf/NaN and the next pivot then fails).
``triangular-solve`` (``left_side``, ``lower``, ``unit_diagonal``, ``transpose_a``)
    Solves ``op(a) x = b`` (left) or ``x op(a) = b`` (right), ``op`` one of identity,
    transpose, conjugate transpose (ADJOINT). Only the ``lower``/upper triangle of ``a``
    is read; with ``unit_diagonal`` the diagonal is not read either (taken as 1). As
    XLA:CPU's ``TriangularSolveExpander`` does for a single diagonal block (n <= 128),
    the triangle is inverted (substitution on the identity, vectorised over the batch)
    and ``b`` multiplied by the inverse (``einsum``, no BLAS zero-skipping), so inf/NaN in
    ``b`` or a zero diagonal spread as in XLA:CPU (checked: a NaN in ``b`` poisons its
    whole column; a zero pivot makes every row that depends on it NaN). For n > 128 XLA
    works block by block; finite results agree up to rounding, non-finite patterns may
    differ.
``fft`` (``fft_type``, ``fft_length`` over the 1-3 innermost dims)
    ``numpy.fft`` (pocketfft) in c128/f64: FFT ``fftn``, IFFT ``ifftn`` (1/N scaled),
    RFFT ``rfftn`` (last dim ``n // 2 + 1``), IRFFT ``irfftn`` with ``s=fft_length``
    (C2R: the imaginary parts of the self-conjugate bins are ignored). Zero-sized
    transforms give zeros.
``batch-norm-training`` / ``-inference`` / ``-grad`` (``epsilon``, ``feature_index``)
    operation_semantics §BatchNorm*: per feature ``c`` over all other dims (``N``
    elements): ``mean``, biased ``var = mean((x - mean)^2)`` (two-pass, in f64;
    XLA:CPU's expander computes ``E[x^2] - E[x]^2`` in the type, which loses accuracy
    when ``|mean| >> std``); ``y = (x - mean) * scale / sqrt(var + eps) + offset``.
    Training returns ``(y, mean, var)``; inference uses the given mean/variance; grad
    (operands ``operand, scale, mean, variance, grad_output``) returns
    ``(grad_operand, grad_scale, grad_offset)`` with ``grad_offset = sum(dy)``,
    ``grad_scale = sum(dy * (x - mean)) / sqrt(var + eps)`` and ``grad_operand =
    scale / sqrt(var + eps) / N * (N dy - sum(dy) - (x - mean) * sum(dy (x - mean)) /
    (var + eps))``. ``epsilon`` is what XLA holds: the text value rounded to f32 (the
    instruction stores a C++ ``float``), then rounded to the element type
    (``BatchNormExpander`` converts it to the operand type), e.g. ``epsilon=0.001`` on
    f64 data is ``0.0010000000474974513``.
"""

from __future__ import annotations

import numpy as np

from hloref.errors import HloEvalError

from .numeric import contiguous, element_type_of, from_float64, to_float64
from .registry import op


def _flag(value, default: bool = False) -> bool:
    """A boolean attribute (typed by the parser); ``None`` when absent."""
    return default if value is None else bool(value)


def _wide(x: np.ndarray) -> np.ndarray:
    """The exact value of ``x`` in f64 or c128 (copied)."""
    return np.array(to_float64(x), copy=True)


def _round(values: np.ndarray, et) -> np.ndarray:
    with np.errstate(all="ignore"):
        if et.is_complex:
            return contiguous(np.asarray(values).astype(et.dtype))
        return contiguous(from_float64(np.asarray(np.real(values), np.float64), et))


# ---------------------------------------------------------------------------
# cholesky
# ---------------------------------------------------------------------------

#: CholeskyExpander's block size: blocks of one column take only the real root.
_BLOCK = 128


def _cholesky_lower(a: np.ndarray) -> np.ndarray:
    """Lower Cholesky factor of the lower triangles of the ``[batch, n, n]`` f64/c128
    matrices ``a``; batch elements with a NaN pivot root become all-NaN."""
    b, n, _ = a.shape
    complex_ = np.iscomplexobj(a)
    L = np.zeros_like(a)
    error = np.zeros(b, bool)
    with np.errstate(all="ignore"):
        for j in range(n):
            row = L[:, j, :j]
            if complex_:
                d = a[:, j, j].real - np.sum((row * row.conj()).real, axis=1)
            else:
                d = a[:, j, j] - np.sum(row * row, axis=1)
            root = np.sqrt(d)
            error |= np.isnan(root)
            if j == n - 1 and n % _BLOCK == 1:
                L[:, j, j] = root  # a one-column block: the root itself
            elif complex_:
                # XLA's unblocked kernel divides the whole pivot, imaginary part
                # included, by the real root: L[j, j] = d / sqrt(d) + i imag(a[j, j]) / sqrt(d)
                L[:, j, j] = d / root + 1j * (a[:, j, j].imag / root)
            else:
                L[:, j, j] = d / root  # NaN for d == 0 or inf, as in XLA
            if j + 1 < n:
                below = a[:, j + 1:, j] - np.einsum("bik,bk->bi", L[:, j + 1:, :j],
                                                    row.conj() if complex_ else row)
                L[:, j + 1:, j] = below / root[:, None]
    L[error] = np.nan
    return L


@op("cholesky")
def cholesky(a, *, shape, lower=True):
    et = shape.element_type
    x = _wide(a)
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise HloEvalError(f"cholesky needs batched square matrices, got {list(x.shape)}")
    low = _flag(lower, True)
    if not low:
        x = np.swapaxes(x, -1, -2)
    n = x.shape[-1]
    batch = x.shape[:-2]
    if x.size == 0:
        return np.zeros(tuple(shape.dims), dtype=et.dtype)
    L = _cholesky_lower(x.reshape((-1, n, n)))
    L = L.reshape(batch + (n, n))
    if not low:
        L = np.swapaxes(L, -1, -2)
    return _round(L, et)


# ---------------------------------------------------------------------------
# triangular-solve
# ---------------------------------------------------------------------------

def _substitute(M: np.ndarray, B: np.ndarray, lower: bool) -> np.ndarray:
    """Solve ``M X = B`` for triangular ``M`` ([batch, n, n]) and ``B`` ([batch, n, k])."""
    n = M.shape[-1]
    X = np.zeros(B.shape, dtype=np.result_type(M, B))
    order = range(n) if lower else range(n - 1, -1, -1)
    with np.errstate(all="ignore"):
        for i in order:
            if lower:
                coeff, known = M[:, i, :i], X[:, :i, :]
            else:
                coeff, known = M[:, i, i + 1:], X[:, i + 1:, :]
            acc = B[:, i, :] - np.einsum("bj,bjk->bk", coeff, known)
            X[:, i, :] = acc / M[:, i, i][:, None]
    return X


def check_square(a_dims) -> None:
    """triangular-solve's ``a``: batched square matrices."""
    if len(a_dims) < 2 or a_dims[-1] != a_dims[-2]:
        raise HloEvalError(f"triangular-solve needs batched square matrices a, got "
                           f"{list(a_dims)}")


def transpose_mode(transpose_a) -> str:
    """triangular-solve's ``transpose_a``: NO_TRANSPOSE, TRANSPOSE or ADJOINT."""
    trans = str(transpose_a).strip().upper()
    if trans not in ("NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"):
        raise HloEvalError(f"unknown transpose_a={transpose_a}")
    return trans


@op("triangular-solve")
def triangular_solve(a, b, *, shape, left_side=False, lower=False, unit_diagonal=False,
                     transpose_a="NO_TRANSPOSE"):
    et = shape.element_type
    A = _wide(a)
    B = _wide(b)
    check_square(A.shape)
    left = _flag(left_side)
    low = _flag(lower)
    unit = _flag(unit_diagonal)
    trans = transpose_mode(transpose_a)
    n = A.shape[-1]
    batch = A.shape[:-2]
    if B.shape[:-2] != batch:
        raise HloEvalError(f"triangular-solve batch dims differ: {list(A.shape)} vs "
                           f"{list(B.shape)}")
    if A.size == 0 or B.size == 0:
        return np.zeros(tuple(shape.dims), dtype=et.dtype)
    A = A.reshape((-1, n, n))
    B = B.reshape((-1,) + B.shape[-2:])
    # the triangle that is read, with a unit diagonal substituted when asked
    mask = np.tril(np.ones((n, n), bool)) if low else np.triu(np.ones((n, n), bool))
    if unit:
        mask &= ~np.eye(n, dtype=bool)
    T = np.where(mask, A, 0)
    if unit:
        T = T + np.eye(n, dtype=T.dtype)
    M_lower = low
    if trans != "NO_TRANSPOSE":
        T = np.swapaxes(T, -1, -2)
        if trans == "ADJOINT":
            T = T.conj()
        M_lower = not low
    if np.iscomplexobj(B) or np.iscomplexobj(T):
        T, B = T.astype(np.complex128), B.astype(np.complex128)
    # XLA:CPU (TriangularSolveExpander, one diagonal block up to 128) multiplies b by the
    # inverse of the triangle; doing the same keeps its inf/NaN patterns (0 * inf).
    eye = np.broadcast_to(np.eye(n, dtype=T.dtype), T.shape)
    inv = _substitute(T, np.array(eye), M_lower)
    with np.errstate(all="ignore"):
        if left:
            X = np.einsum("bij,bjk->bik", inv, B, optimize=False)
        else:
            X = np.einsum("bij,bjk->bik", B, inv, optimize=False)
    return _round(X.reshape(tuple(shape.dims)), et)


# ---------------------------------------------------------------------------
# fft
# ---------------------------------------------------------------------------

def fft_axes(ndim: int, fft_length) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``(lengths, axes)`` of an fft of a rank-``ndim`` operand: ``fft_length`` names
    the 1 to 3 innermost dimensions."""
    lengths = tuple(int(v) for v in fft_length)
    k = len(lengths)
    if not 1 <= k <= 3 or k > ndim:
        raise HloEvalError(f"fft_length={list(lengths)} needs 1 to 3 innermost dims of a "
                           f"rank-{ndim} operand")
    return lengths, tuple(range(ndim - k, ndim))


@op("fft")
def fft(x, *, shape, fft_type, fft_length):
    et = shape.element_type
    lengths, axes = fft_axes(x.ndim, fft_length)
    kind = str(fft_type).upper()
    dims = tuple(shape.dims)
    if x.size == 0 or int(np.prod(dims, dtype=np.int64)) == 0 or 0 in lengths:
        return np.zeros(dims, dtype=et.dtype)
    w = to_float64(x)
    with np.errstate(all="ignore"):
        if kind == "FFT":
            out = np.fft.fftn(w.astype(np.complex128), axes=axes)
        elif kind == "IFFT":
            out = np.fft.ifftn(w.astype(np.complex128), axes=axes)
        elif kind == "RFFT":
            if element_type_of(x).is_complex:
                raise HloEvalError("RFFT takes a real operand")
            out = np.fft.rfftn(w, s=lengths, axes=axes)
        elif kind == "IRFFT":
            out = np.fft.irfftn(w.astype(np.complex128), s=lengths, axes=axes)
        else:
            raise HloEvalError(f"unknown fft_type={fft_type}")
    if tuple(out.shape) != dims:
        raise HloEvalError(f"fft result has dims {list(out.shape)}, the instruction says "
                           f"{list(dims)}")
    return _round(out, et)


# ---------------------------------------------------------------------------
# batch norm
# ---------------------------------------------------------------------------

def _feature_view(v: np.ndarray, ndim: int, feature_index: int) -> np.ndarray:
    """A per-feature vector shaped to broadcast against the operand."""
    shape = [1] * ndim
    shape[feature_index] = -1
    return v.reshape(shape)


def xla_epsilon(epsilon, et) -> float:
    """``epsilon`` as XLA uses it: a C++ float, converted to the element type."""
    eps32 = np.array([float(epsilon)], np.float64).astype(np.float32).astype(np.float64)
    return float(to_float64(from_float64(eps32, et))[0])


def _check_feature(x, feature_index):
    fi = int(feature_index)
    if not 0 <= fi < x.ndim:
        raise HloEvalError(f"feature_index={fi} out of range for a rank-{x.ndim} operand")
    return fi, tuple(d for d in range(x.ndim) if d != fi)


@op("batch-norm-training")
def batch_norm_training(operand, scale, offset, *, shape, epsilon, feature_index):
    et = shape.elements[0].element_type
    fi, axes = _check_feature(operand, feature_index)
    x = to_float64(operand)
    with np.errstate(all="ignore"):
        mean = np.mean(x, axis=axes) if x.size else np.full(x.shape[fi], np.nan)
        centred = x - _feature_view(mean, x.ndim, fi)
        var = np.mean(centred * centred, axis=axes) if x.size else np.full(x.shape[fi], np.nan)
        inv = 1.0 / np.sqrt(var + xla_epsilon(epsilon, et))
        y = (centred * _feature_view(inv * to_float64(scale), x.ndim, fi)
             + _feature_view(to_float64(offset), x.ndim, fi))
    return (_round(y, et), _round(mean, et), _round(var, et))


@op("batch-norm-inference")
def batch_norm_inference(operand, scale, offset, mean, variance, *, shape, epsilon,
                         feature_index):
    et = shape.element_type
    fi, _ = _check_feature(operand, feature_index)
    x = to_float64(operand)
    nd = x.ndim
    with np.errstate(all="ignore"):
        inv = 1.0 / np.sqrt(to_float64(variance) + xla_epsilon(epsilon, et))
        y = ((x - _feature_view(to_float64(mean), nd, fi))
             * _feature_view(inv * to_float64(scale), nd, fi)
             + _feature_view(to_float64(offset), nd, fi))
    return _round(y, et)


@op("batch-norm-grad")
def batch_norm_grad(operand, scale, mean, variance, grad_output, *, shape, epsilon,
                    feature_index):
    et = shape.elements[0].element_type
    fi, axes = _check_feature(operand, feature_index)
    x = to_float64(operand)
    dy = to_float64(grad_output)
    nd = x.ndim
    n = x.size // x.shape[fi] if x.shape[fi] else 0
    with np.errstate(all="ignore"):
        var_eps = to_float64(variance) + xla_epsilon(epsilon, et)
        inv = 1.0 / np.sqrt(var_eps)
        centred = x - _feature_view(to_float64(mean), nd, fi)
        sum_dy = np.sum(dy, axis=axes)
        sum_dy_c = np.sum(dy * centred, axis=axes)
        grad_scale = sum_dy_c * inv
        grad_offset = sum_dy
        grad_operand = (_feature_view(to_float64(scale) * inv / n if n else inv * np.nan,
                                      nd, fi)
                        * (n * dy - _feature_view(sum_dy, nd, fi)
                           - centred * _feature_view(sum_dy_c / var_eps, nd, fi)))
    return (_round(grad_operand, et), _round(grad_scale, et), _round(grad_offset, et))
