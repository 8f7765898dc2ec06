"""``dot`` with general dimension numbers (operation_semantics §DotGeneral).

Result dimensions: batch dims, then lhs free dims, then rhs free dims. The result
element type (``preferred_element_type`` in JAX) decides the arithmetic:

* float results (any width): operands are taken exactly in f64 (integer operands
  are first converted to the result type), products are summed in f64 by BLAS
  ``dgemm`` and the sum is rounded once to the result type;
* complex results: c128, rounded once;
* integer results: operands are converted (wrapped) to the result type, products
  summed in int64/uint64 with wrap-around, the sum wrapped to the result width;
* pred results: logical OR of ANDs.
"""

from __future__ import annotations

import numpy as np

from .convert import convert_array
from .numeric import contiguous, element_type_of, finish, int_compute_dtype, to_float64
from .registry import op

OP_FAMILY = True


def _arrange(x: np.ndarray, batch, contracting, contract_last: bool):
    """Transpose ``x`` to (batch, free, contracting) or (batch, contracting, free) and
    flatten to rank 3."""
    batch, contracting = list(batch), list(contracting)
    free = [d for d in range(x.ndim) if d not in batch and d not in contracting]
    b = int(np.prod([x.shape[d] for d in batch], dtype=np.int64))
    f = int(np.prod([x.shape[d] for d in free], dtype=np.int64))
    k = int(np.prod([x.shape[d] for d in contracting], dtype=np.int64))
    if contract_last:
        arranged = np.transpose(x, batch + free + contracting).reshape(b, f, k)
    else:
        arranged = np.transpose(x, batch + contracting + free).reshape(b, k, f)
    return arranged, [x.shape[d] for d in free]


def _operand(x: np.ndarray, et) -> np.ndarray:
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


@op("dot")
def dot(lhs, rhs, *, shape, lhs_batch_dims=(), rhs_batch_dims=(), lhs_contracting_dims=(),
        rhs_contracting_dims=(), operand_precision=None, algorithm=None):
    et = shape.element_type
    a, lhs_free = _arrange(_operand(lhs, et), lhs_batch_dims, lhs_contracting_dims, True)
    b, rhs_free = _arrange(_operand(rhs, et), rhs_batch_dims, rhs_contracting_dims, False)
    with np.errstate(all="ignore"):
        # numpy's stacked matmul with a batch of one is much slower than the 2-D BLAS call
        product = np.matmul(a[0], b[0])[None] if a.shape[0] == 1 else np.matmul(a, b)
    batch_dims = [lhs.shape[d] for d in lhs_batch_dims]
    product = product.reshape(batch_dims + lhs_free + rhs_free)
    if et.is_pred:
        return product != 0
    return contiguous(finish(product, et))
