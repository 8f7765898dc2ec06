"""``dot`` with general dimension numbers (operation_semantics §DotGeneral).

Result dimensions: batch dims, then lhs free dims, then rhs free dims. The result
element type (``preferred_element_type`` in JAX) decides the arithmetic:

* float results (any width): operands are taken exactly in f64 (integer operands
  are first converted to the result type), products are summed in f64 by BLAS
  ``dgemm`` on one OpenBLAS thread (``blas_threads``: the order of the sums, and so
  the bits, do not depend on the machine's cores) and the sum is rounded once to the
  result type;
* complex results: c128, rounded once;
* integer results: operands are converted (wrapped) to the result type, products
  summed in int64/uint64 with wrap-around, the sum wrapped to the result width;
* pred results: logical OR of ANDs.

Floating-point operands with an integer result (dot, convolution, ragged-dot,
scaled-dot) are the op computed in f32 and converted to the integer type, as XLA's
``ConvolutionTypeCanonicalizer`` rewrites them (``integer_result_in_f32``).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from hloref.types import F32

from .blas_threads import blas_call
from .convert import convert_array
from .numeric import (contiguous, element_type_of, finish, int_compute_dtype, quiet, scratch,
                      to_float64)
from .registry import op


def integer_result_in_f32(element_type=element_type_of, convert=convert_array):
    """Decorator of a dot-like op ``fn(lhs, rhs, *rest, shape=..., **attrs)``: with
    floating-point operands and an integer result (not pred) the op is computed with an
    f32 result and converted to the integer type (XLA's ConvolutionTypeCanonicalizer,
    convolution_type_canonicalizer.cc: the instruction cloned with an F32 shape, then a
    convert; XLA:CPU and XLA:GPU run it). ``element_type`` and ``convert`` read and
    convert the backend's arrays (numpy here; the GPU passes its device versions)."""
    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(lhs, rhs, *rest, shape, **attrs):
            et = shape.element_type
            if et.is_integer and element_type(lhs).is_float and element_type(rhs).is_float:
                return convert(fn(lhs, rhs, *rest, shape=shape.with_element_type(F32), **attrs), et)
            return fn(lhs, rhs, *rest, shape=shape, **attrs)
        return wrapper
    return decorate


def _arrange(x: np.ndarray, batch, contracting, contract_last: bool):
    """Transpose ``x`` to (batch, free, contracting) or (batch, contracting, free) and
    flatten to rank 3."""
    batch, contracting = list(batch), list(contracting)
    free = [d for d in range(x.ndim) if d not in batch and d not in contracting]
    b = math.prod([x.shape[d] for d in batch])
    f = math.prod([x.shape[d] for d in free])
    k = math.prod([x.shape[d] for d in contracting])
    if contract_last:
        arranged = np.transpose(x, batch + free + contracting).reshape(b, f, k)
    else:
        arranged = np.transpose(x, batch + contracting + free).reshape(b, k, f)
    return arranged, [x.shape[d] for d in free]


def dot_operand(x: np.ndarray, et) -> np.ndarray:
    """``x`` converted to result type ``et`` and widened to the type the products are
    computed in (f64 / complex128 for floats, the integer compute dtype, int64 for
    pred); shared by dot, convolution and the dot variants."""
    src = element_type_of(x)
    if et.is_float or et.is_complex:
        if not (src.is_float or src.is_complex):
            x = convert_array(x, et) if not et.is_complex else x.astype(et.dtype)
        wide = to_float64(x)
        return wide.astype(np.complex128) if et.is_complex else wide
    if et.is_pred:
        return (x != 0).astype(np.int64)
    if src != et:
        x = convert_array(x, et)
    return x.astype(int_compute_dtype(et))


def _round_bf16(x: np.ndarray) -> np.ndarray:
    """f64 values rounded to bf16 (once, to nearest even), back in f64."""
    from hloref.types import BF16
    from . import narrow
    return narrow.to_f64(narrow.from_float(x, BF16))


def _round_tf32(x: np.ndarray) -> np.ndarray:
    """f64 values rounded to f32, then to TF32 (10 mantissa bits, nearest even), in f64."""
    f = x.astype(np.float32)
    bits = f.view(np.uint32)
    finite = np.isfinite(f)
    rounded = (bits + np.uint32(0x0FFF) + ((bits >> np.uint32(13)) & np.uint32(1))) & \
        np.uint32(0xFFFFE000)
    return np.where(finite, rounded.view(np.float32), f).astype(np.float64)


def _split(x: np.ndarray, rnd, parts: int) -> list[np.ndarray]:
    """``x`` as a sum of ``parts`` terms, each rounded by ``rnd`` (hi, mid, lo...)."""
    out = []
    rest = x
    for _ in range(parts):
        term = rnd(rest)
        out.append(term)
        rest = rest - term
    return out


#: dot algorithms (``algorithm=``, xla_data.proto PrecisionConfig.Algorithm): how the
#: operands are rounded and which partial products are summed. (rounding, parts,
#: product index pairs); ``None`` means a plain dot.
_ALGORITHMS = {
    "dot_bf16_bf16_f32": ("bf16", 1, [(0, 0)]),
    "dot_bf16_bf16_bf16": ("bf16", 1, [(0, 0)]),
    "dot_bf16_bf16_f32_x3": ("bf16", 2, [(0, 0), (0, 1), (1, 0)]),
    "dot_bf16_bf16_f32_x6": ("bf16", 3, [(0, 0), (0, 1), (1, 0), (0, 2), (1, 1), (2, 0)]),
    "dot_bf16_bf16_f32_x9": ("bf16", 3, [(i, j) for i in range(3) for j in range(3)]),
    "dot_tf32_tf32_f32": ("tf32", 1, [(0, 0)]),
    "dot_tf32_tf32_f32_x3": ("tf32", 2, [(0, 0), (0, 1), (1, 0)]),
    "dot_f16_f16_f32": ("f16", 1, [(0, 0)]),
    "dot_f16_f16_f16": ("f16", 1, [(0, 0)]),
}


def _matmul(a, b):
    """``a @ b`` on hloref's BLAS threads (``blas_threads``: one by default)."""
    if a.shape[0] == 1:
        # numpy's stacked matmul with a batch of one is much slower than the 2-D BLAS call
        return blas_call(quiet, np.matmul, a[0], b[0])[None]
    return blas_call(quiet, np.matmul, a, b)


@op("dot")
@integer_result_in_f32()
def dot(lhs, rhs, *, shape, lhs_batch_dims=(), rhs_batch_dims=(), lhs_contracting_dims=(),
        rhs_contracting_dims=(), operand_precision=None, algorithm=None, accumulate="f64"):
    """``algorithm=`` is emulated: operands are split into the algorithm's bf16/TF32/f16
    parts and the algorithm's partial products summed (in f64, rounded once), e.g.
    ``dot_bf16_bf16_f32_x3`` = hi·hi + hi·lo + lo·hi. ``operand_precision`` does not
    change the reference value (it only permits cheaper arithmetic).

    ``accumulate="native"`` (not an HLO attribute: the envelope's perturbed runs ask
    for it through ``Interpreter(op_overrides=...)``) sums an f32 dot in f32 with
    BLAS, as XLA does; the reference value always accumulates in f64."""
    et = shape.element_type
    if accumulate == "native" and algorithm is None and et.dtype == np.float32 and \
            lhs.dtype == np.float32 and rhs.dtype == np.float32:
        a, lhs_free = _arrange(lhs, lhs_batch_dims, lhs_contracting_dims, True)
        b, rhs_free = _arrange(rhs, rhs_batch_dims, rhs_contracting_dims, False)
        product = _matmul(a, b)
        # ``contiguous``, not ``np.ascontiguousarray``: a vector-vector dot is rank 0
        return contiguous(product.reshape(
            [lhs.shape[d] for d in lhs_batch_dims] + lhs_free + rhs_free))
    if algorithm is None and et.dtype in _F32_F64 and lhs.dtype in _F32_F64 and \
            rhs.dtype in _F32_F64:
        return _dot_f64(lhs, rhs, et, lhs_batch_dims, rhs_batch_dims, lhs_contracting_dims,
                        rhs_contracting_dims)
    a, lhs_free = _arrange(dot_operand(lhs, et), lhs_batch_dims, lhs_contracting_dims, True)
    b, rhs_free = _arrange(dot_operand(rhs, et), rhs_batch_dims, rhs_contracting_dims, False)
    spec = _ALGORITHMS.get(str(algorithm)) if algorithm is not None else None
    if spec is not None and a.dtype == np.float64:
        kind, parts, pairs = spec
        rnd = {"bf16": _round_bf16, "tf32": _round_tf32,
               "f16": lambda v: v.astype(np.float16).astype(np.float64)}[kind]
        a_parts, b_parts = _split(a, rnd, parts), _split(b, rnd, parts)
        # smallest terms first, so the large ones are added last
        product = sum(_matmul(a_parts[i], b_parts[j]) for i, j in reversed(pairs))
    else:
        product = _matmul(a, b)
    batch_dims = [lhs.shape[d] for d in lhs_batch_dims]
    product = product.reshape(batch_dims + lhs_free + rhs_free)
    if et.is_pred:
        return product != 0
    return contiguous(finish(product, et))


_F32_F64 = (np.dtype(np.float32), np.dtype(np.float64))
#: operands up to this size (bytes, both together) are widened by ``astype``: below it
#: a fresh allocation costs no page faults worth avoiding (``numeric.scratch``)
_SMALL_BYTES = 1 << 17


def _product_rounded(a, b, product, dtype):
    """``a @ b`` (into ``product``, or a fresh array for ``None``) rounded to ``dtype``."""
    return np.matmul(a, b, out=product).astype(dtype)


def _widened(x, batch, contracting, contract_last: bool, slot: int):
    """``_arrange`` of an f32/f64 operand, widened exactly to f64 in one copy into a
    scratch buffer."""
    batch, contracting = list(batch), list(contracting)
    free = [d for d in range(x.ndim) if d not in batch and d not in contracting]
    order = batch + free + contracting if contract_last else batch + contracting + free
    view = x.transpose(order)  # the method: np.transpose's wrapper costs ~1 µs
    buf = scratch(view.shape, np.float64, slot)
    np.copyto(buf, view)
    shape = x.shape
    b = math.prod([shape[d] for d in batch])
    f = math.prod([shape[d] for d in free])
    k = math.prod([shape[d] for d in contracting])
    return buf.reshape((b, f, k) if contract_last else (b, k, f)), [shape[d] for d in free]


def _dot_f64(lhs, rhs, et, lhs_batch, rhs_batch, lhs_contracting, rhs_contracting):
    """The plain f32/f64 dot: f64 operands and product in scratch buffers (no fresh
    multi-megabyte temporaries), one rounding into the new result array."""
    if lhs.ndim == 2 and rhs.ndim == 2 and not lhs_batch and tuple(lhs_contracting) == (1,) \
            and tuple(rhs_contracting) == (0,) and lhs.nbytes + rhs.nbytes <= _SMALL_BYTES:
        # [m,k]·[k,n] of small operands: the same widened C-order operands by astype,
        # without _widened's bookkeeping (~2 µs each); a small product in a fresh array
        # (no page faults worth the scratch buffer's bookkeeping); same dgemm, same
        # rounding. f64 -> f32 overflow is inf; one warnings state for both steps
        a = lhs.astype(np.float64, order="C")
        b = rhs.astype(np.float64, order="C")
        m, n = a.shape[0], b.shape[1]
        product = None if m * n * 8 <= _SMALL_BYTES else scratch((m, n), np.float64, 2)
        return blas_call(quiet, _product_rounded, a, b, product, et.dtype)
    a, lhs_free = _widened(lhs, lhs_batch, lhs_contracting, True, 0)
    b, rhs_free = _widened(rhs, rhs_batch, rhs_contracting, False, 1)
    product = scratch((a.shape[0], a.shape[1], b.shape[2]), np.float64, 2)
    if a.shape[0] == 1:  # the 2-D BLAS call: much faster than a stacked batch of one
        blas_call(quiet, np.matmul, a[0], b[0], out=product[0])
    else:
        blas_call(quiet, np.matmul, a, b, out=product)
    shape = [lhs.shape[d] for d in lhs_batch] + lhs_free + rhs_free
    with np.errstate(over="ignore", invalid="ignore"):  # f64 -> f32 overflow is inf
        return product.reshape(shape).astype(et.dtype)  # one rounding, a new C-order array
