"""``custom-call``: a registry of targets whose semantics are public.

``CUSTOM_CALLS`` maps ``custom_call_target`` to a function ``(operands, shape,
attrs) -> value``; ``@custom_call("Name")`` adds one. An unknown target raises
``HloUnsupportedError`` naming it. Covered:

* annotation targets XLA treats as identities (``Sharding``,
  ``SPMDFullToShardShape``/``SPMDShardToFullShape`` with one partition,
  ``MoveToHost``, ``MoveToDevice``, ``annotate_device_placement``,
  ``LayoutConstraint``, ``OptimizationBarrier``...);
* ``TopK`` (as JAX's ``lax.top_k`` lowers on some backends): largest ``k`` along
  the last dimension, ties by lower index, ``(values, s32 indices)``;
* ``__op$block_scaled_dot``: (lhs, rhs, lhs_scale, rhs_scale[, global_scale]),
  both operands contracted on their last dimension, scales broadcast in blocks
  along it, leading dimensions batch (XLA's BlockScalingRewriter expansion);
* cuBLAS GEMM (``__cublas$gemm``, ``__cublas$lt$matmul``): ``alpha * dot +
  beta * C`` with the dot dimensions and epilogue (DEFAULT, RELU, BIAS, BIAS_RELU)
  of ``gemm_backend_config``; a trailing workspace result is zeros;
* cuDNN forward convolution (``__cudnn$convForward``,
  ``__cudnn$convBiasActivationForward``): the instruction's window/dim_labels/
  group counts, then ``conv_result_scale``, bias, side input and activation
  (kNone, kRelu) from ``cudnn_conv_backend_config``; a trailing scratch result is zeros.
"""

from __future__ import annotations

import json
from typing import Callable

import numpy as np

from hloref.errors import HloEvalError, HloUnsupportedError
from hloref.shapes import ArrayShape, TupleShape

from .numeric import contiguous, finish, to_float64
from .registry import op

OP_FAMILY = True

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


def _backend_config(text) -> dict:
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


def _zeros_like_shape(s):
    return np.zeros(s.dims, s.element_type.dtype)


def _split_result(shape):
    """(main result shape, trailing workspace shapes) of a cuBLAS/cuDNN call."""
    if isinstance(shape, TupleShape):
        return shape.elements[0], shape.elements[1:]
    return shape, ()


@custom_call("__cublas$gemm", "__cublas$lt$matmul", "__cublas$lt$matmul$f8")
def _cublas_gemm(operands, shape, attrs):
    from .dot import dot
    config = _backend_config(attrs.get("backend_config")).get("gemm_backend_config", {})
    dn = config.get("dot_dimension_numbers", {})

    def ints(key):
        return tuple(int(v) for v in dn.get(key, []))

    main, workspace = _split_result(shape)
    from hloref.types import F64
    wide = ArrayShape(F64 if not main.element_type.is_complex else main.element_type, main.dims)
    out = dot(operands[0], operands[1], shape=wide,
              lhs_contracting_dims=ints("lhs_contracting_dimensions"),
              rhs_contracting_dims=ints("rhs_contracting_dimensions"),
              lhs_batch_dims=ints("lhs_batch_dimensions"),
              rhs_batch_dims=ints("rhs_batch_dimensions"))
    out = out * float(config.get("alpha_real", 1.0))
    epilogue = config.get("epilogue", "DEFAULT")
    rest = list(operands[2:])
    beta = float(config.get("beta", 0.0))
    if beta and rest and epilogue in ("DEFAULT", "RELU"):
        out = out + beta * to_float64(rest.pop(0))
    if epilogue in ("BIAS", "BIAS_RELU"):
        if not rest:
            raise HloEvalError("cuBLAS epilogue BIAS without a bias operand")
        bias = to_float64(rest.pop(0))
        out = out + bias.reshape((1,) * (out.ndim - bias.ndim) + bias.shape)
    if epilogue in ("RELU", "BIAS_RELU"):
        out = np.maximum(out, 0)
    elif epilogue not in ("DEFAULT", "BIAS"):
        raise HloUnsupportedError("custom-call", "cpu", f"cuBLAS epilogue {epilogue}")
    result = contiguous(finish(out, main.element_type))
    return (result, *(_zeros_like_shape(w) for w in workspace)) if workspace else result


@custom_call("__cudnn$convForward", "__cudnn$convBiasActivationForward")
def _cudnn_conv(operands, shape, attrs):
    from .convolution import convolution
    from hloref.types import F64
    config = _backend_config(attrs.get("backend_config")).get("cudnn_conv_backend_config", {})
    main, workspace = _split_result(shape)
    wide = ArrayShape(F64, main.dims)
    out = convolution(operands[0], operands[1], shape=wide, dim_labels=attrs["dim_labels"],
                      window=attrs.get("window"),
                      feature_group_count=int(attrs.get("feature_group_count", 1)),
                      batch_group_count=int(attrs.get("batch_group_count", 1)))
    out = out * float(config.get("conv_result_scale", 1.0))
    rest = list(operands[2:])
    if rest:  # bias along the output feature dimension
        bias = to_float64(rest.pop(0))
        feature = attrs["dim_labels"].output_feature_dimension
        shape_ = [1] * out.ndim
        shape_[feature] = -1
        out = out + bias.reshape(shape_)
    side_scale = float(config.get("side_input_scale", 0.0))
    if rest and side_scale:
        out = out + side_scale * to_float64(rest.pop(0))
    mode = config.get("activation_mode", "kNone")
    if mode == "kRelu":
        out = np.maximum(out, 0)
    elif mode not in ("kNone", None):
        raise HloUnsupportedError("custom-call", "cpu", f"cuDNN activation {mode}")
    result = contiguous(finish(out, main.element_type))
    return (result, *(_zeros_like_shape(w) for w in workspace)) if workspace else result


@op("custom-call")
def custom_call_(*operands, shape, custom_call_target, instruction_name,
                 backend_config=None, dim_labels=None, window=None, feature_group_count=1,
                 batch_group_count=1):
    target = str(custom_call_target)
    fn = CUSTOM_CALLS.get(target)
    if fn is None:
        raise HloUnsupportedError("custom-call", "cpu",
                                  f"custom_call_target \"{target}\" has no registered semantics "
                                  f"(known: {', '.join(sorted(CUSTOM_CALLS))})",
                                  instruction=instruction_name)
    attrs = {"custom_call_target": target, "backend_config": backend_config,
             "dim_labels": dim_labels, "window": window,
             "feature_group_count": feature_group_count, "batch_group_count": batch_group_count}
    return fn(list(operands), shape, attrs)
