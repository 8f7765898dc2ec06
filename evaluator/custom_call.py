"""``custom-call``: a registry of targets whose semantics are public.

``CUSTOM_CALLS`` maps ``custom_call_target`` to a function ``(operands, shape,
attrs) -> value``; ``@custom_call("Name")`` adds one. An unknown target raises
``HloUnsupportedError`` naming it. Covered:

* annotation targets XLA treats as identities (``Sharding``,
  ``SPMDFullToShardShape``/``SPMDShardToFullShape`` with one partition,
  ``MoveToHost``, ``MoveToDevice``, ``annotate_device_placement``,
  ``LayoutConstraint``, ``OptimizationBarrier``...);
* ``GetRngSeed`` (a seed, implementation-defined: hloref's rng state, another per call) and
  ``AllocateBuffer`` (undefined contents: zeros); any target whose result has no
  elements (its only possible value);
* ``TopK`` (as JAX's ``lax.top_k`` lowers on some backends): largest ``k`` along
  the last dimension, ties by lower index, ``(values, s32 indices)``;
* ``__op$block_scaled_dot``: (lhs, rhs, lhs_scale, rhs_scale[, global_scale]),
  both operands contracted on their last dimension, scales broadcast in blocks
  along it, leading dimensions batch (XLA's BlockScalingRewriter expansion);
* vendor-library targets that XLA:CPU and XLA:GPU emit in optimized modules
  (oneDNN ``__onednn$matmul``/``convolution``/``layernorm``/``softmax``; cuBLAS GEMM
  with its epilogues; cuDNN forward and backward convolutions, ``__cudnn$norm`` and the
  forward fused-attention ``__cudnn$fmha*`` calls) live in ``custom_call_onednn.py``,
  ``custom_call_cublas.py`` and ``custom_call_cudnn.py`` (shared helpers in
  ``custom_call_vendor.py``);
  LAPACK targets in ``custom_call_lapack.py``.

``kind=kCustom`` fusions that XLA:CPU emits (``__ynn_fusion``, ``__onednn_fusion``,
``__xnn_fusion`` backend configs) are not custom calls: they compute their fused
computation and are evaluated by ``fusion``.
"""

from __future__ import annotations

import json
from typing import Callable

import numpy as np

from hloref.errors import HloEvalError, HloUnsupportedError
from hloref.shapes import ArrayShape, TupleShape

from .blas_threads import blas_call
from .numeric import contiguous, finish, to_float64
from .registry import op


CUSTOM_CALLS: dict[str, Callable] = {}

_IDENTITY_TARGETS = (
    "Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "MoveToHost", "MoveToDevice",
    "annotate_device_placement", "LayoutConstraint", "OptimizationBarrier", "X64Combine",
    "InspectSharding", "ShardBarrierFrom", "ShardBarrierTo", "xla.sdy.FuncResultSharding",
    "xla.sdy.GlobalToLocalShape", "xla.sdy.LocalToGlobalShape", "local_to_global_shape",
    "global_to_local_shape", "mhlo.sharding",
)


def custom_call(*targets: str):
    def register(fn):
        for t in targets:
            CUSTOM_CALLS[t] = fn
        return fn
    return register


def parse_backend_config(text) -> dict:
    """An instruction's ``backend_config`` (JSON, possibly quoted) as a dict; ``{}``
    when absent, empty or not an object."""
    if text is None:
        return {}
    s = str(text).strip()
    if not s:
        return {}
    if s.startswith('"') and s.endswith('"'):
        s = json.loads(s)
    try:
        value = json.loads(s) if s else {}
    except json.JSONDecodeError as exc:
        raise HloEvalError(f"custom-call backend_config is not JSON: {exc}") from None
    return value if isinstance(value, dict) else {}


@custom_call(*_IDENTITY_TARGETS)
def _identity(operands, shape, attrs):
    if len(operands) == 1:
        value = operands[0]
        if isinstance(shape, ArrayShape) and isinstance(value, np.ndarray) and \
                tuple(value.shape) != tuple(shape.dims):
            raise HloUnsupportedError("custom-call", "cpu",
                                      f"{attrs['custom_call_target']} changes the shape "
                                      f"{list(value.shape)} → {list(shape.dims)} (more than one "
                                      f"partition): evaluate the partitioned module instead")
        return value
    return tuple(operands)


@custom_call("GetRngSeed")
def _get_rng_seed(operands, shape, attrs):
    """A seed for random numbers (``RngExpander`` builds its Philox keys from it):
    implementation-defined. XLA:CPU (jaxlib 0.10.2) gives each call of a run another
    value; hloref gives the low word of its ``rng-get-and-update-state`` state, advanced
    by one at each call (so each call differs too)."""
    if operands or not isinstance(shape, ArrayShape) or shape.rank != 0 or \
            shape.element_type.name != "u64":
        raise HloEvalError("GetRngSeed takes no operands and returns u64[] (XLA's verifier)")
    from .rng import next_rng_state
    return np.asarray(next_rng_state(attrs["ctx"], 1)[0], np.uint64)


@custom_call("AllocateBuffer")
def _allocate_buffer(operands, shape, attrs):
    """A fresh buffer (host offloading's ``AllocateBuffer``): its contents are undefined
    until written; hloref gives zeros."""
    if isinstance(shape, TupleShape):
        raise HloEvalError("AllocateBuffer returns one array")
    return zeros_like_shape(shape)


@custom_call("TopK")
def _topk(operands, shape, attrs):
    from .compare import total_order_keys
    (x,) = operands
    values_shape = shape.elements[0]
    k = values_shape.dims[-1]
    keys = total_order_keys(x) if x.dtype.kind not in "iub" else x.astype(np.int64)
    order = np.argsort(-keys, axis=-1, kind="stable")[..., :k]
    return (np.take_along_axis(x, order, axis=-1), order.astype(np.int32))


def _dot_last(lhs, rhs, et):
    """Contract the last dims; leading dims before the last two are batch."""
    batch = tuple(range(lhs.ndim - 2)) if lhs.ndim > 2 else ()
    return np.einsum("...mk,...nk->...mn", lhs, rhs) if batch or lhs.ndim == 2 else \
        np.einsum("k,k->", lhs, rhs)


@custom_call("__op$block_scaled_dot")
def _block_scaled_dot(operands, shape, attrs):
    if len(operands) not in (4, 5):
        raise HloEvalError("__op$block_scaled_dot takes lhs, rhs, lhs_scale, rhs_scale"
                           "[, global_scale]")
    lhs, rhs, ls, rs = (to_float64(o) for o in operands[:4])

    def dequant(x, s):
        block = x.shape[-1] // s.shape[-1]
        return x * np.repeat(s, block, axis=-1)

    out = _dot_last(dequant(lhs, ls), dequant(rhs, rs), shape.element_type)
    if len(operands) == 5:
        out = out * to_float64(operands[4])
    return contiguous(finish(out, shape.element_type))


def zeros_like_shape(s):
    """A zero array of array shape ``s`` (a vendor call's workspace result)."""
    return np.zeros(s.dims, s.element_type.dtype)


def split_result(shape):
    """(main result shape, trailing workspace shapes) of a cuBLAS/cuDNN call."""
    if isinstance(shape, TupleShape):
        return shape.elements[0], shape.elements[1:]
    return shape, ()


def _no_elements(shape) -> bool:
    if isinstance(shape, TupleShape):
        return all(_no_elements(e) for e in shape.elements)
    return isinstance(shape, ArrayShape) and any(d == 0 for d in shape.dims)


def _empty(shape):
    if isinstance(shape, TupleShape):
        return tuple(_empty(e) for e in shape.elements)
    return zeros_like_shape(shape)


@op("custom-call")
def custom_call_(*operands, shape, custom_call_target, instruction_name, ctx,
                 backend_config=None, dim_labels=None, window=None, feature_group_count=1,
                 batch_group_count=1):
    target = str(custom_call_target)
    fn = CUSTOM_CALLS.get(target)
    if fn is None and _no_elements(shape):
        # whatever the target does, a result without elements has one value
        return _empty(shape)
    if fn is None:
        raise HloUnsupportedError("custom-call", "cpu",
                                  f"custom_call_target \"{target}\" has no registered semantics "
                                  f"(known: {', '.join(sorted(CUSTOM_CALLS))})",
                                  instruction=instruction_name)
    attrs = {"custom_call_target": target, "backend_config": backend_config, "ctx": ctx,
             "dim_labels": dim_labels, "window": window,
             "feature_group_count": feature_group_count, "batch_group_count": batch_group_count}
    # the targets' matrix products and LAPACK routines on hloref's BLAS threads
    return blas_call(fn, list(operands), shape, attrs)
