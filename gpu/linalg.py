"""``cholesky`` and ``triangular-solve`` on the GPU (mirror ``evaluator/linalg.py``): one
thread per batch matrix, the CPU's algorithms in f64 parts (below). Batch norm is in
``gpu/linalg_batch_norm.py``, fft in ``gpu/linalg_fft.py``.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numba import cuda

from hloref.errors import HloEvalError
from hloref.evaluator.linalg import check_square, transpose_mode

from .complex_elementwise import smith
from .device import SIMULATOR, empty, type_class
from .elementwise import launch
from .f64_buffers import rounded_parts, wide_parts, widen_parts_kernel
from .registry import GpuFallback, gpu_op


_sqrt = np.sqrt if SIMULATOR else math.sqrt


# ----------------------------------------------------------------- cholesky, triangular-solve
#
# One thread per batch matrix, in f64 parts (real types keep their imaginary parts 0 and
# never read them), the CPU's algorithms step by step: the same operations in the same
# order except that sums run sequentially (numpy's einsum/sum may pair terms), so
# results agree after rounding to the element type up to the envelope's accumulation
# freedom.


def _linalg_types(opname, et, *operands):
    for v in operands:
        c = type_class(v.et)
        if c not in ("f32", "f64", "narrow", "complex") or \
                (c == "complex" and v.et.name not in ("c64", "c128")):
            raise GpuFallback(f"{opname} of {v.et.name} has no GPU kernel")
    if type_class(et) not in ("f32", "f64", "narrow", "complex"):
        raise GpuFallback(f"{opname} to {et.name} has no GPU kernel")


#: CholeskyExpander's block size: blocks of one column take only the real root.
_BLOCK = 128


@functools.cache
def _cholesky_kernel(cplx):
    @cuda.jit
    def k(a, out, batch, n, low):
        b = cuda.grid(1)
        step = cuda.gridsize(1)
        nan = np.float64(np.nan)
        while b < batch:
            base = 2 * b * n * n
            for t in range(2 * n * n):
                out[base + t] = 0.0
            error = False
            for j in range(n):
                # L[i, k] lives at out[(i, k)] for lower, at out[(k, i)] for upper
                d = a[base + 2 * (j * n + j)]
                for kk in range(j):
                    at = base + 2 * ((j * n + kk) if low else (kk * n + j))
                    d -= out[at] * out[at] + (out[at + 1] * out[at + 1] if cplx else 0.0)
                root = _sqrt(d)
                if root != root:
                    error = True
                dj = base + 2 * (j * n + j)
                if j == n - 1 and n % _BLOCK == 1:
                    out[dj] = root
                    out[dj + 1] = 0.0
                else:
                    out[dj] = d / root
                    out[dj + 1] = a[dj + 1] / root if cplx else 0.0
                for i in range(j + 1, n):
                    src = base + 2 * ((i * n + j) if low else (j * n + i))
                    br = a[src]
                    bi = a[src + 1] if cplx else 0.0
                    for kk in range(j):
                        li = base + 2 * ((i * n + kk) if low else (kk * n + i))
                        lj = base + 2 * ((j * n + kk) if low else (kk * n + j))
                        if cplx:  # L[i, k] * conj(L[j, k])
                            br -= out[li] * out[lj] + out[li + 1] * out[lj + 1]
                            bi -= out[li + 1] * out[lj] - out[li] * out[lj + 1]
                        else:
                            br -= out[li] * out[lj]
                    out[src] = br / root
                    out[src + 1] = bi / root if cplx else 0.0
            if error:
                for t in range(n * n):
                    out[base + 2 * t] = nan
                    out[base + 2 * t + 1] = 0.0
            b += step

    return k


@gpu_op("cholesky")
def cholesky(a, *, shape, lower=True):
    et = shape.element_type
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise HloEvalError(f"cholesky needs batched square matrices, got {list(a.shape)}")
    _linalg_types("cholesky", et, a)
    n = a.shape[-1]
    out = empty(tuple(shape.dims), et)
    if out.size != a.size:
        raise HloEvalError(f"cholesky result {list(shape.dims)} differs from the operand "
                           f"{list(a.shape)}")
    low = True if lower is None else bool(lower)
    batch = a.size // (n * n) if n else 0
    buf = cuda.device_array(max(2 * a.size, 1), dtype=np.float64)
    if a.size:
        launch(_cholesky_kernel(a.et.is_complex), batch, wide_parts(a), buf, batch, n, low)
    return rounded_parts(buf, out)


@cuda.jit(device=True)
def _tri_entry(a, base, n, r, c, low, unit, trans, adjoint):
    """Entry (r, c) of op(T): the read triangle of ``a`` (unit diagonal substituted)."""
    if trans:
        r, c = c, r
    if r == c and unit:
        return 1.0, 0.0
    if r == c or (low and c < r) or (not low and c > r):
        at = base + 2 * (r * n + c)
        return a[at], (-a[at + 1] if adjoint else a[at + 1])
    return 0.0, 0.0


@functools.cache
def _triangular_solve_kernel(cplx):
    @cuda.jit
    def k(a, bm, inv, out, batch, n, rows, cols, left, low, unit, trans, adjoint):
        b = cuda.grid(1)
        step = cuda.gridsize(1)
        m_lower = low != trans
        while b < batch:
            ab = 2 * b * n * n
            # inverse of op(T) by substitution on the identity (XLA:CPU's one block)
            for s in range(n):
                i = s if m_lower else n - 1 - s
                dr, di = _tri_entry(a, ab, n, i, i, low, unit, trans, adjoint)
                for kk in range(n):
                    accr = 1.0 if i == kk else 0.0
                    acci = 0.0
                    lo = 0 if m_lower else i + 1
                    hi = i if m_lower else n
                    for j in range(lo, hi):
                        mr, mi = _tri_entry(a, ab, n, i, j, low, unit, trans, adjoint)
                        at = ab + 2 * (j * n + kk)
                        xr = inv[at]
                        xi = inv[at + 1]
                        if cplx:
                            accr -= mr * xr - mi * xi
                            acci -= mr * xi + mi * xr
                        else:
                            accr -= mr * xr
                    at = ab + 2 * (i * n + kk)
                    if cplx:
                        qr, qi = smith(accr, acci, dr, di)
                    else:
                        qr = accr / dr
                        qi = 0.0
                    inv[at] = qr
                    inv[at + 1] = qi
            # x = inv b (left) or b inv (right), every term summed (no zero skipping)
            bb = 2 * b * rows * cols
            for i in range(rows):
                for kk in range(cols):
                    sr = 0.0
                    si = 0.0
                    for j in range(n):
                        if left:
                            p = ab + 2 * (i * n + j)
                            q = bb + 2 * (j * cols + kk)
                        else:
                            p = bb + 2 * (i * cols + j)
                            q = ab + 2 * (j * n + kk)
                        src = inv if left else bm
                        oth = bm if left else inv
                        if cplx:
                            sr += src[p] * oth[q] - src[p + 1] * oth[q + 1]
                            si += src[p] * oth[q + 1] + src[p + 1] * oth[q]
                        else:
                            sr += src[p] * oth[q]
                    out[bb + 2 * (i * cols + kk)] = sr
                    out[bb + 2 * (i * cols + kk) + 1] = si
            b += step

    return k


@gpu_op("triangular-solve")
def triangular_solve(a, b, *, shape, left_side=False, lower=False, unit_diagonal=False,
                     transpose_a="NO_TRANSPOSE"):
    et = shape.element_type
    check_square(a.shape)
    trans = transpose_mode(transpose_a)
    n = a.shape[-1]
    if b.ndim < 2 or b.shape[:-2] != a.shape[:-2]:
        raise HloEvalError(f"triangular-solve batch dims differ: {list(a.shape)} vs "
                           f"{list(b.shape)}")
    _linalg_types("triangular-solve", et, a, b)
    out = empty(tuple(shape.dims), et)
    if out.size != b.size:
        raise HloEvalError(f"triangular-solve result {list(shape.dims)} differs from b "
                           f"{list(b.shape)}")
    buf = cuda.device_array(max(2 * b.size, 1), dtype=np.float64)
    if a.size == 0 or b.size == 0:
        launch(widen_parts_kernel, 2 * b.size, cuda.to_device(np.zeros(max(2 * b.size, 1))),
               buf, 2 * b.size)
        return rounded_parts(buf, out)
    batch = a.size // (n * n)
    left = bool(left_side)
    rows, cols = b.shape[-2], b.shape[-1]
    if (rows if left else cols) != n:
        raise HloEvalError(f"triangular-solve: b {list(b.shape)} does not fit a {n}x{n} "
                           f"matrix on the {'left' if left else 'right'}")
    inv = cuda.device_array(2 * a.size, dtype=np.float64)
    cplx = a.et.is_complex or b.et.is_complex
    launch(_triangular_solve_kernel(cplx), batch, wide_parts(a), wide_parts(b), inv, buf,
           batch, n, rows, cols, left, bool(lower), bool(unit_diagonal), trans != "NO_TRANSPOSE",
           trans == "ADJOINT")
    return rounded_parts(buf, out)
