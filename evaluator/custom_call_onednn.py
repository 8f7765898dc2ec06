"""oneDNN ``custom-call`` targets of XLA:CPU.

XLA:CPU (``xla/service/cpu/onednn_*.cc``, ``onednn_config.proto`` as compiled into
jaxlib 0.10.2; jaxlib 0.10.2's pip build never emits these custom calls, so they are
implemented from the source and tested against values derived with numpy):

* ``__onednn$matmul``: (src, weights, fused operands...). ``lhs``/``rhs``/``result``
  ``tensor.dimensions`` (1-based) permute each operand into oneDNN's logical order,
  ``transpose_a``/``transpose_b`` swap the last two logical dims, batch dims broadcast;
  then the ``fusions.ops`` chain: BIAS (added first, right-aligned broadcast), BINARY_ADD
  and SUM (add the next fused operand), LINEAR (× the next ``alpha``), RELU, TANH,
  GELU_TANH, GELU_ERF, ELU (α=1), RELU6, SIGMOID, SWISH (α=1). Prepacked weights
  (``weights_prepacked``, an opaque oneDNN layout) are unsupported.
* ``__onednn$convolution``: (input, kernel, fused operands...), geometry from
  ``onednn_conv_config`` (spatial dims, pads, strides stored +1, window dilations +1
  with oneDNN's dilation = value - 2), ``feature_groups``; same post-op chain, bias along
  the output feature dimension.
* ``__onednn$layernorm``: (x, scale, shift) normalized over the last dimension,
  ε from ``epsilon_typecast`` (the float's bit pattern as int32).
* ``__onednn$softmax``: softmax along ``softmax_axis`` (the last axis when the
  instruction has no ``onednn_softmax_config``).

Each function reads the instruction's ``backend_config`` (JSON of XLA's
``BackendConfig`` / ``GpuBackendConfig`` protos) and computes in f64, rounding once
to the result type. Trailing workspace/scratch results are zeros.
"""

from __future__ import annotations

import numpy as np

from hloref.attrs import ConvDimensionNumbers, Window, WindowDim
from hloref.errors import HloEvalError
from hloref.shapes import ArrayShape
from hloref.types import F64

from .custom_call import parse_backend_config, split_result, custom_call
from .numeric import to_float64
from .custom_call_vendor import (elu, enum_name, float_from_bits, gelu_erf, gelu_tanh, int_list,
                                 pack, round_to, sigmoid,
                                 unsupported)


_FUSION_KINDS = ("UNDEFINED", "BIAS", "RELU", "TANH", "GELU_ERF", "GELU_TANH", "BINARY_ADD",
                 "LINEAR", "ELU", "RELU6", "SIGMOID", "SUM", "SWISH")


def _fusion_alphas(fusions: dict) -> list[float]:
    if "alpha" in fusions:
        return [float(a) for a in fusions["alpha"]]
    if "alpha_typecast" in fusions:  # older protos: a float's bits stored as int32
        return [float_from_bits(fusions["alpha_typecast"])]
    return []


def _broadcast_to(addend, like, target):
    """Right-aligned broadcast of ``addend`` against ``like`` (oneDNN's implicit
    broadcasting of size-1 dims; missing leading dims are 1)."""
    a = np.asarray(addend)
    if a.ndim < like.ndim:
        a = a.reshape((1,) * (like.ndim - a.ndim) + a.shape)
    try:
        np.broadcast_shapes(a.shape, like.shape)
    except ValueError:
        if a.size == like.size:
            return a.reshape(like.shape)
        raise HloEvalError(f"{target}: fused operand of shape {list(np.shape(addend))} does not "
                           f"broadcast to the result {list(like.shape)}") from None
    return a


def _post_ops(out, fusions: dict, fused: list, target: str, *, bias_fn, addend_fn):
    ops = [enum_name(o, _FUSION_KINDS) for o in fusions.get("ops", [])]
    alphas = _fusion_alphas(fusions)
    fused = list(fused)
    # oneDNN applies the bias inside the primitive, before every post-op.
    idx = 0
    pending = []
    for op_ in ops:
        if op_ in ("BIAS", "BINARY_ADD", "SUM"):
            if idx >= len(fused):
                raise HloEvalError(f"{target}: fusion {op_} has no fused operand")
            pending.append((op_, fused[idx]))
            idx += 1
        else:
            pending.append((op_, None))
    for op_, operand in pending:
        if op_ == "BIAS":
            out = out + bias_fn(to_float64(operand), out)
    linear = 0
    for op_, operand in pending:
        if op_ == "BIAS":
            continue
        if op_ in ("BINARY_ADD", "SUM"):
            out = out + addend_fn(to_float64(operand), out)
        elif op_ == "LINEAR":
            if linear >= len(alphas):
                raise HloEvalError(f"{target}: LINEAR fusion without an alpha")
            out = out * alphas[linear]
            linear += 1
        elif op_ == "RELU":
            out = np.maximum(out, 0.0)
        elif op_ == "TANH":
            out = np.tanh(out)
        elif op_ == "GELU_TANH":
            out = gelu_tanh(out)
        elif op_ == "GELU_ERF":
            out = gelu_erf(out)
        elif op_ == "ELU":
            out = elu(out)
        elif op_ == "RELU6":
            out = np.clip(out, 0.0, 6.0)
        elif op_ == "SIGMOID":
            out = sigmoid(out)
        elif op_ == "SWISH":
            out = out * sigmoid(out)
        else:
            raise unsupported(target, f"fusion kind {op_}")
    return out


def _cpu_config(attrs, key: str) -> dict | None:
    cfg = parse_backend_config(attrs.get("backend_config"))
    return cfg.get(key) if key in cfg else None


def _tensor_perm(layout: dict | None, ndim: int):
    dims = int_list(((layout or {}).get("tensor") or {}).get("dimensions"))
    if not dims:
        return None
    perm = [d - 1 for d in dims]
    if sorted(perm) != list(range(ndim)):
        raise HloEvalError(f"oneDNN tensor dimensions {dims} are not a permutation of 1..{ndim}")
    return perm


def _swap_last_two(x, flag):
    return np.swapaxes(x, -1, -2) if flag and x.ndim >= 2 else x


@custom_call("__onednn$matmul")
def _onednn_matmul(operands, shape, attrs):
    target = "__onednn$matmul"
    cfg = _cpu_config(attrs, "onednn_matmul_config") or {}
    if (cfg.get("optimization_config") or {}).get("weights_prepacked"):
        raise unsupported(target, "weights_prepacked: the weights are in an opaque "
                                   "oneDNN-blocked layout")
    main, extra = split_result(shape)
    lhs, rhs = to_float64(operands[0]), to_float64(operands[1])
    lp, rp = _tensor_perm(cfg.get("lhs"), lhs.ndim), _tensor_perm(cfg.get("rhs"), rhs.ndim)
    if lp:
        lhs = np.transpose(lhs, lp)
    if rp:
        rhs = np.transpose(rhs, rp)
    lhs = _swap_last_two(lhs, bool(cfg.get("transpose_a")))
    rhs = _swap_last_two(rhs, bool(cfg.get("transpose_b")))
    if lhs.ndim == 1:
        lhs = lhs[None, :]
    if rhs.ndim == 1:
        rhs = rhs[:, None]
    out = np.matmul(lhs, rhs)
    dims = tuple(main.dims)
    resp = _tensor_perm(cfg.get("result"), len(dims))
    logical_dims = tuple(dims[p] for p in resp) if resp else dims
    if out.shape != logical_dims:
        if out.size != int(np.prod(logical_dims, dtype=np.int64)):
            raise HloEvalError(f"{target}: product {list(out.shape)} does not fit the result "
                               f"{list(dims)}")
        out = out.reshape(logical_dims)

    def to_logical(a, like):
        if resp and a.ndim == like.ndim and a.shape == dims:
            a = np.transpose(a, resp)
        return _broadcast_to(a, like, target)

    out = _post_ops(out, cfg.get("fusions") or {}, operands[2:], target,
                    bias_fn=lambda b, like: _broadcast_to(b, like, target), addend_fn=to_logical)
    if resp:
        out = np.transpose(out, np.argsort(resp))
    return pack(round_to(out, main.element_type), extra)


@custom_call("__onednn$matmul_reorder")
def _onednn_matmul_reorder(operands, shape, attrs):
    raise unsupported("__onednn$matmul_reorder", "packs weights into an opaque oneDNN-blocked "
                                                  "layout whose element order is not specified")


def _data_layout(t: dict | None, key: str) -> dict:
    return ((t or {}).get(key) or {})


@custom_call("__onednn$convolution")
def _onednn_convolution(operands, shape, attrs):
    from .convolution import convolution
    target = "__onednn$convolution"
    cfg = _cpu_config(attrs, "onednn_conv_config")
    if cfg is None:
        raise HloEvalError(f"{target} without an onednn_conv_config")
    main, extra = split_result(shape)
    inp = _data_layout(cfg.get("input"), "data")
    ker = _data_layout(cfg.get("kernel"), "filter")
    res = _data_layout(cfg.get("output"), "data")
    ksp = [d - 1 for d in int_list(ker.get("spatial_dims"))]
    dn = ConvDimensionNumbers(
        input_batch_dimension=int(inp.get("batch_dim", 0)),
        input_feature_dimension=int(inp.get("feature_dim", 0)),
        input_spatial_dimensions=tuple(d - 1 for d in int_list(inp.get("spatial_dims"))),
        kernel_input_feature_dimension=int(ker.get("input_feature_dim", 0)),
        kernel_output_feature_dimension=int(ker.get("output_feature_dim", 0)),
        kernel_spatial_dimensions=tuple(ksp),
        output_batch_dimension=int(res.get("batch_dim", 0)),
        output_feature_dimension=int(res.get("feature_dim", 0)),
        output_spatial_dimensions=tuple(d - 1 for d in int_list(res.get("spatial_dims"))))
    win = cfg.get("window") or {}
    n = len(ksp)

    def field(name, offset, default):
        vals = int_list(win.get(name))
        return [v - offset for v in vals] if vals else [default] * n

    strides, lo, hi = field("strides", 1, 1), field("pad_left", 1, 0), field("pad_right", 1, 0)
    wdil = field("window_dilations", 1, 1)
    kernel = operands[1]
    window = Window(tuple(WindowDim(size=int(kernel.shape[ksp[i]]), stride=strides[i],
                                    padding_low=lo[i], padding_high=hi[i],
                                    window_dilation=wdil[i]) for i in range(n)))
    groups = int(cfg.get("feature_groups", 1) or 1)
    out = convolution(operands[0], kernel, shape=ArrayShape(F64, main.dims), dim_labels=dn,
                      window=window, feature_group_count=groups)
    feature = dn.output_feature_dimension

    def bias_fn(b, like):
        s = [1] * like.ndim
        s[feature] = -1
        return b.reshape(s) if b.size == like.shape[feature] else _broadcast_to(b, like, target)

    out = _post_ops(np.asarray(out, np.float64), cfg.get("fusions") or {}, operands[2:], target,
                    bias_fn=bias_fn, addend_fn=lambda a, like: _broadcast_to(a, like, target))
    return pack(round_to(out, main.element_type), extra)


@custom_call("__onednn$layernorm")
def _onednn_layernorm(operands, shape, attrs):
    target = "__onednn$layernorm"
    cfg = _cpu_config(attrs, "onednn_layer_norm_config") or {}
    if (cfg.get("fusions") or {}).get("ops"):
        raise unsupported(target, "post-op fusions on layer norm")
    main, extra = split_result(shape)
    x = to_float64(operands[0])
    eps = float_from_bits(cfg.get("epsilon_typecast", 0))
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    out = (x - mean) / np.sqrt(var + eps)
    if len(operands) > 1:
        out = out * to_float64(operands[1]).reshape(-1)
    if len(operands) > 2:
        out = out + to_float64(operands[2]).reshape(-1)
    return pack(round_to(out, main.element_type), extra)


@custom_call("__onednn$softmax")
def _onednn_softmax(operands, shape, attrs):
    cfg = _cpu_config(attrs, "onednn_softmax_config")
    main, extra = split_result(shape)
    x = to_float64(operands[0])
    axis = int(cfg.get("softmax_axis", 0)) if cfg is not None else x.ndim - 1
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(x - m)
    return pack(round_to(e / e.sum(axis=axis, keepdims=True), main.element_type), extra)
