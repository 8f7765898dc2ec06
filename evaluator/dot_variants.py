"""``ragged-dot`` and ``scaled-dot`` (operation_semantics §RaggedDot, §ScaledDot).

Both reduce to ``dot``'s arithmetic (f64 accumulation, one rounding to the result
type).

``ragged-dot(lhs, rhs, group_sizes)``: the lhs ragged dimension is cut into
consecutive groups of ``group_sizes[i]`` elements (elements past the total belong
to no group). Three modes, by where the ragged dimension sits:

* non-contracting: rows of group ``i`` multiply ``rhs[i]`` (``rhs_group_dims``
  names the group dimension, which the result drops); rows in no group give 0;
* contracting: the result gains a leading group dimension; result ``[i]`` sums
  only over the contracting indices in group ``i``;
* batch: like ``dot`` (the groups only partition the batch).

``group_sizes`` of rank > 1 (``[b..., x..., g]``, as ``jax.lax.ragged_dot_general``
defines it, ``ragged_group_prefix``): its leading dimensions index the lhs batch dimensions
(in ``lhs_batch_dims`` order), then the lhs dimensions of the ragged dimension's kind
that precede it; each such index has its own partition of the ragged dimension.
Checked against jax's reference expansion run by XLA:CPU.

``scaled-dot(lhs, rhs, lhs_scale, rhs_scale)`` (operand order as the instruction
has it): each operand is multiplied by its scale broadcast in blocks (block size
per dimension = operand size / scale size), then ``dot``. A rank-0 scale is 1.
"""

from __future__ import annotations

import numpy as np

from hloref.errors import HloEvalError, HloUnsupportedError

from .dot import dot_operand, dot, integer_result_in_f32
from .numeric import contiguous, finish, to_float64
from .registry import op


@op("ragged-dot")
@integer_result_in_f32()
def ragged_dot(lhs, rhs, group_sizes, *, shape, lhs_batch_dims=(), rhs_batch_dims=(),
               lhs_contracting_dims=(), rhs_contracting_dims=(), lhs_ragged_dims=(),
               rhs_group_dims=(), operand_precision=None, algorithm=None):
    (ragged,) = tuple(lhs_ragged_dims)
    et = shape.element_type
    a = dot_operand(lhs, et)
    b = dot_operand(rhs, et)
    dims = dict(lhs_batch_dims=lhs_batch_dims, rhs_batch_dims=rhs_batch_dims,
                lhs_contracting_dims=lhs_contracting_dims, rhs_contracting_dims=rhs_contracting_dims)
    lead = ragged_group_prefix(lhs.ndim, ragged, lhs_batch_dims, lhs_contracting_dims) \
        if group_sizes.ndim > 1 else ()
    if group_sizes.ndim > 1:
        # per-batch group sizes [b..., x..., g] (jax.lax.ragged_dot_general): the leading
        # dims index the lhs batch dims, then the lhs dims of the ragged dim's kind that
        # precede it; each such index has its own partition of the ragged dimension
        want = tuple(lhs.shape[d] for d in lead)
        if tuple(group_sizes.shape[:-1]) != want:
            raise HloUnsupportedError("ragged-dot", "cpu", f"group_sizes of shape "
                                      f"{list(group_sizes.shape)}: expected {list(want)} + "
                                      f"[groups] (lhs dims {list(lead)}, then the groups)")
    sizes = group_sizes.astype(np.int64)
    starts = np.concatenate([np.zeros(sizes.shape[:-1] + (1,), np.int64),
                             np.cumsum(sizes, axis=-1)], axis=-1)
    ngroups = sizes.shape[-1]
    positions = np.arange(a.shape[ragged])
    axes = list(lead) + [ragged]
    order = np.argsort(axes)
    expand = [1] * a.ndim
    for d in axes:
        expand[d] = a.shape[d]

    def restrict(x, i):
        """``x`` (the lhs) with the elements outside group ``i`` zeroed."""
        mask = (starts[..., i, None] <= positions) & (positions < starts[..., i + 1, None])
        return np.where(np.transpose(mask, order).reshape(expand), x, 0)

    from hloref.shapes import ArrayShape
    from hloref.types import from_dtype
    wide_et = from_dtype(a.dtype)
    if ragged in lhs_contracting_dims:
        out_dims = shape.dims[1:]
        parts = [dot(restrict(a, i), b,
                     shape=ArrayShape(wide_et, out_dims), **dims) for i in range(ngroups)]
        result = np.stack(parts) if parts else np.zeros((0,) + tuple(out_dims), a.dtype)
    elif ragged in lhs_batch_dims:
        # the groups only partition the batch: every batch element is multiplied (also
        # those past the total of group_sizes), as jax's ragged_dot_general does
        result = dot(a, b, shape=ArrayShape(wide_et, shape.dims), **dims)
    else:
        (group_dim,) = tuple(rhs_group_dims)
        # shift rhs dims past the group dim, which the plain dot must not see
        def shift(ds):
            return tuple(d - (d > group_dim) for d in ds)
        sub_dims = dict(dims, rhs_batch_dims=shift(rhs_batch_dims),
                        rhs_contracting_dims=shift(rhs_contracting_dims))
        result = np.zeros(shape.dims, a.dtype)
        for i in range(ngroups):
            rows = restrict(a, i)
            result = result + dot(rows, np.take(b, i, axis=group_dim),
                                  shape=ArrayShape(wide_et, shape.dims), **sub_dims)
    if tuple(result.shape) != tuple(shape.dims):
        raise HloEvalError(f"ragged-dot computed {list(result.shape)}, expected {list(shape.dims)}")
    return contiguous(finish(result, et))


def ragged_group_prefix(rank, ragged, batch, contracting):
    """The lhs dims indexed by group_sizes' leading dims (``[b..., x..., g]``, JAX's
    ``_ragged_dot_prefix_dims``): the batch dims in ``lhs_batch_dims`` order, then, by
    the ragged dim's kind, the non-contracting dims before it (in dimension order), the
    contracting dims before it (in ``lhs_contracting_dims`` order), or for a ragged batch
    dim only the batch dims before it."""
    batch, contracting = list(batch), list(contracting)
    if ragged in batch:
        return tuple(batch[:batch.index(ragged)])
    if ragged in contracting:
        return tuple(batch + contracting[:contracting.index(ragged)])
    free = [d for d in range(rank) if d not in batch and d not in contracting]
    return tuple(batch + free[:free.index(ragged)])


def _apply_scale(x: np.ndarray, scale: np.ndarray) -> np.ndarray:
    wide = to_float64(x)
    if scale.ndim == 0:
        return wide
    if scale.ndim != x.ndim:
        raise HloEvalError(f"scaled-dot: scale of rank {scale.ndim} for an operand of rank {x.ndim}")
    s = to_float64(scale)
    for axis, (n, m) in enumerate(zip(x.shape, scale.shape)):
        if m == 0 or n % m:
            raise HloEvalError(f"scaled-dot: operand dimension {n} is not a multiple of the "
                               f"scale's {m}")
        s = np.repeat(s, n // m, axis=axis)
    return wide * s


@op("scaled-dot")
@integer_result_in_f32()
def scaled_dot(lhs, rhs, lhs_scale, rhs_scale, *, shape, lhs_batch_dims=(), rhs_batch_dims=(),
               lhs_contracting_dims=(), rhs_contracting_dims=(), operand_precision=None,
               algorithm=None):
    return dot(_apply_scale(lhs, lhs_scale), _apply_scale(rhs, rhs_scale), shape=shape,
               lhs_batch_dims=lhs_batch_dims, rhs_batch_dims=rhs_batch_dims,
               lhs_contracting_dims=lhs_contracting_dims, rhs_contracting_dims=rhs_contracting_dims)

