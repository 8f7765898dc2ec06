"""Vendor-library ``custom-call`` targets that XLA's CPU and GPU pipelines emit.

Each function reads the instruction's ``backend_config`` (JSON of XLA's
``BackendConfig`` / ``GpuBackendConfig`` protos) and computes in f64, rounding once
to the result type. Trailing workspace/scratch results are zeros.

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

XLA:GPU (``xla/service/gpu/backend_configs.proto``, ``cublas_cudnn.cc``):

* cuBLAS GEMM (``__cublas$gemm``, ``__cublas$lt$matmul``, ``__cublas$lt$matmul$f8``):
  ``alpha · dot + beta · C`` with ``gemm_backend_config``'s dot dimensions; epilogues
  DEFAULT, BIAS, RELU, BIAS_RELU, GELU, GELU_AUX, BIAS_GELU, BIAS_GELU_AUX (GELU is
  cublasLt's tanh approximation; the ``_AUX`` forms also return the pre-GELU value as
  the second tuple element). ``__cublas$lt$matmul$f8`` with scale operands is
  unsupported (their order and meaning changed between XLA versions).
* cuDNN convolutions: ``__cudnn$convForward``, ``__cudnn$convBiasActivationForward``
  (``conv_result_scale``, bias, ``side_input_scale``, activations kNone, kRelu, kRelu6,
  kElu, kLeakyRelu, kTanh, kSigmoid, kGeluExact) and the gradients
  ``__cudnn$convBackwardInput`` (operands: output gradient, filter) and
  ``__cudnn$convBackwardFilter`` (operands: input, output gradient), whose
  ``window``/``dim_labels``/``feature_group_count`` describe the *forward* convolution
  (as GpuConvRewriter writes them).
* ``__cudnn$norm`` (layer norm forward, ``cudnn_norm_backend_config``): x is
  [N, ...], normalized over all but dimension 0, ``Y = (x - mean) / sqrt(var + ε) ·
  scale + bias``; with four results also the mean and ``1 / sqrt(var + ε)`` ([N,1,1,1]).
* fused attention forward ``__cudnn$fmhaSoftmax``, ``__cudnn$fmhaScaleBiasSoftmax`` and
  the ``...Dropout`` forms with ``dropout_rate`` 0: ``P = softmax(fmha_scale · Q·K
  [+ bias] [causal mask])``, ``O = P·V`` with ``bmm1``/``bmm2_dot_dimension_numbers``;
  a training call's second result is the softmax statistics ``logsumexp`` (f32).
"""

from __future__ import annotations

import math
import struct

import numpy as np

from hloref.attrs import ConvDimensionNumbers, Window, WindowDim
from hloref.errors import HloEvalError, HloUnsupportedError
from hloref.geometry import (dilate_pad_slices, padded_size, window_positions, window_span,
                             window_tap_slice)
from hloref.shapes import ArrayShape, TupleShape
from hloref.types import F64

from .custom_call import _backend_config, _split_result, _zeros_like_shape, custom_call
from .numeric import contiguous, finish, to_float64

OP_FAMILY = True


def _unsupported(target: str, reason: str):
    return HloUnsupportedError("custom-call", "cpu", f"{target}: {reason}")


def _round(out, et):
    return contiguous(finish(np.asarray(out, np.float64), et))


def _pack(result, extra):
    return (result, *(_zeros_like_shape(w) for w in extra)) if extra else result


def _ints(values) -> list[int]:
    return [int(v) for v in (values or [])]


# -- element-wise activations ---------------------------------------------------------

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x ** 3)))


def _gelu_erf(x):
    from scipy.special import erf
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def _sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _elu(x, alpha=1.0):
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


# -- general dot (f64) ----------------------------------------------------------------


def _general_dot(a, b, dn: dict):
    """XLA dot: result dims are batch, lhs free, rhs free."""
    lb, rb = _ints(dn.get("lhs_batch_dimensions")), _ints(dn.get("rhs_batch_dimensions"))
    lc, rc = _ints(dn.get("lhs_contracting_dimensions")), _ints(dn.get("rhs_contracting_dimensions"))
    lf = [d for d in range(a.ndim) if d not in lb and d not in lc]
    rf = [d for d in range(b.ndim) if d not in rb and d not in rc]
    at = np.transpose(a, lb + lf + lc)
    bt = np.transpose(b, rb + rc + rf)
    bshape = [a.shape[d] for d in lb]
    m = int(np.prod([a.shape[d] for d in lf], dtype=np.int64))
    k = int(np.prod([a.shape[d] for d in lc], dtype=np.int64))
    n = int(np.prod([b.shape[d] for d in rf], dtype=np.int64))
    out = np.matmul(at.reshape(bshape + [m, k]), bt.reshape(bshape + [k, n]))
    return out.reshape(bshape + [a.shape[d] for d in lf] + [b.shape[d] for d in rf])


# ======================================================================================
# oneDNN (XLA:CPU)
# ======================================================================================


def _enum_name(value, names: tuple[str, ...]) -> str:
    if isinstance(value, (int, float)) or (isinstance(value, str) and value.isdigit()):
        i = int(value)
        return names[i] if 0 <= i < len(names) else str(i)
    return str(value)


_FUSION_KINDS = ("UNDEFINED", "BIAS", "RELU", "TANH", "GELU_ERF", "GELU_TANH", "BINARY_ADD",
                 "LINEAR", "ELU", "RELU6", "SIGMOID", "SUM", "SWISH")


def _fusion_alphas(fusions: dict) -> list[float]:
    if "alpha" in fusions:
        return [float(a) for a in fusions["alpha"]]
    if "alpha_typecast" in fusions:  # older protos: a float's bits stored as int32
        return [_float_from_bits(fusions["alpha_typecast"])]
    return []


def _float_from_bits(bits) -> float:
    return struct.unpack("<f", struct.pack("<i", int(bits)))[0]


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
    ops = [_enum_name(o, _FUSION_KINDS) for o in fusions.get("ops", [])]
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
            out = _gelu_tanh(out)
        elif op_ == "GELU_ERF":
            out = _gelu_erf(out)
        elif op_ == "ELU":
            out = _elu(out)
        elif op_ == "RELU6":
            out = np.clip(out, 0.0, 6.0)
        elif op_ == "SIGMOID":
            out = _sigmoid(out)
        elif op_ == "SWISH":
            out = out * _sigmoid(out)
        else:
            raise _unsupported(target, f"fusion kind {op_}")
    return out


def _cpu_config(attrs, key: str) -> dict | None:
    cfg = _backend_config(attrs.get("backend_config"))
    return cfg.get(key) if key in cfg else None


def _tensor_perm(layout: dict | None, ndim: int):
    dims = _ints(((layout or {}).get("tensor") or {}).get("dimensions"))
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
        raise _unsupported(target, "weights_prepacked: the weights are in an opaque "
                                   "oneDNN-blocked layout")
    main, extra = _split_result(shape)
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
    return _pack(_round(out, main.element_type), extra)


@custom_call("__onednn$matmul_reorder")
def _onednn_matmul_reorder(operands, shape, attrs):
    raise _unsupported("__onednn$matmul_reorder", "packs weights into an opaque oneDNN-blocked "
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
    main, extra = _split_result(shape)
    inp = _data_layout(cfg.get("input"), "data")
    ker = _data_layout(cfg.get("kernel"), "filter")
    res = _data_layout(cfg.get("output"), "data")
    ksp = [d - 1 for d in _ints(ker.get("spatial_dims"))]
    dn = ConvDimensionNumbers(
        input_batch_dimension=int(inp.get("batch_dim", 0)),
        input_feature_dimension=int(inp.get("feature_dim", 0)),
        input_spatial_dimensions=tuple(d - 1 for d in _ints(inp.get("spatial_dims"))),
        kernel_input_feature_dimension=int(ker.get("input_feature_dim", 0)),
        kernel_output_feature_dimension=int(ker.get("output_feature_dim", 0)),
        kernel_spatial_dimensions=tuple(ksp),
        output_batch_dimension=int(res.get("batch_dim", 0)),
        output_feature_dimension=int(res.get("feature_dim", 0)),
        output_spatial_dimensions=tuple(d - 1 for d in _ints(res.get("spatial_dims"))))
    win = cfg.get("window") or {}
    n = len(ksp)

    def field(name, offset, default):
        vals = _ints(win.get(name))
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
    return _pack(_round(out, main.element_type), extra)


@custom_call("__onednn$layernorm")
def _onednn_layernorm(operands, shape, attrs):
    target = "__onednn$layernorm"
    cfg = _cpu_config(attrs, "onednn_layer_norm_config") or {}
    if (cfg.get("fusions") or {}).get("ops"):
        raise _unsupported(target, "post-op fusions on layer norm")
    main, extra = _split_result(shape)
    x = to_float64(operands[0])
    eps = _float_from_bits(cfg.get("epsilon_typecast", 0))
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    out = (x - mean) / np.sqrt(var + eps)
    if len(operands) > 1:
        out = out * to_float64(operands[1]).reshape(-1)
    if len(operands) > 2:
        out = out + to_float64(operands[2]).reshape(-1)
    return _pack(_round(out, main.element_type), extra)


@custom_call("__onednn$softmax")
def _onednn_softmax(operands, shape, attrs):
    cfg = _cpu_config(attrs, "onednn_softmax_config")
    main, extra = _split_result(shape)
    x = to_float64(operands[0])
    axis = int(cfg.get("softmax_axis", 0)) if cfg is not None else x.ndim - 1
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(x - m)
    return _pack(_round(e / e.sum(axis=axis, keepdims=True), main.element_type), extra)


# ======================================================================================
# cuBLAS / cuDNN (XLA:GPU)
# ======================================================================================

_EPILOGUES = ("DEFAULT", "BIAS", "RELU", "BIAS_RELU", "GELU", "GELU_AUX", "BIAS_GELU",
              "BIAS_GELU_AUX")


def _gpu_config(attrs, key: str) -> dict:
    return _backend_config(attrs.get("backend_config")).get(key, {}) or {}


@custom_call("__cublas$gemm", "__cublas$lt$matmul", "__cublas$lt$matmul$f8")
def _cublas_gemm(operands, shape, attrs):
    target = attrs["custom_call_target"]
    config = _gpu_config(attrs, "gemm_backend_config")
    main, extra = _split_result(shape)
    epilogue = _enum_name(config.get("epilogue", "DEFAULT"), _EPILOGUES)
    if epilogue not in _EPILOGUES:
        raise _unsupported(target, f"cuBLAS epilogue {epilogue}")
    if target.endswith("$f8") and len(operands) > 2:
        raise _unsupported(target, "the FP8 GEMM's scale operands (a/b/c/d scales, whose "
                                   "order and meaning vary between XLA versions) are not "
                                   "implemented")
    a, b = operands[0], operands[1]
    if main.element_type.is_complex:
        a, b = np.asarray(a, np.complex128), np.asarray(b, np.complex128)
        alpha = complex(float(config.get("alpha_real", 1.0)), float(config.get("alpha_imag", 0.0)))
    else:
        a, b = to_float64(a), to_float64(b)
        alpha = float(config.get("alpha_real", 1.0))
    out = _general_dot(a, b, config.get("dot_dimension_numbers", {})) * alpha
    out = out.reshape(main.dims)
    rest = list(operands[2:])
    beta = float(config.get("beta", 0.0))
    if beta and rest:
        c = rest.pop(0)
        out = out + beta * (np.asarray(c, np.complex128) if np.iscomplexobj(c) else to_float64(c))
    if epilogue.startswith("BIAS"):
        if not rest:
            raise HloEvalError(f"cuBLAS epilogue {epilogue} without a bias operand")
        bias = to_float64(rest.pop(0))
        out = out + bias.reshape((1,) * (out.ndim - bias.ndim) + bias.shape)
    aux = None
    if epilogue.endswith("_AUX"):
        aux = out
    if "RELU" in epilogue:
        out = np.maximum(out, 0)
    elif "GELU" in epilogue:
        out = _gelu_tanh(out)
    result = _round(out, main.element_type) if not main.element_type.is_complex else \
        contiguous(finish(out, main.element_type))
    if aux is not None:
        if not extra:
            raise HloEvalError(f"cuBLAS epilogue {epilogue} needs a tuple result with the "
                               f"auxiliary output")
        return (result, _round(aux.reshape(extra[0].dims), extra[0].element_type),
                *(_zeros_like_shape(w) for w in extra[1:]))
    return _pack(result, extra)


def _activation(out, mode, config, target):
    mode = str(mode or "kNone")
    if mode in ("kNone", "0"):
        return out
    if mode == "kRelu":
        return np.maximum(out, 0)
    if mode == "kRelu6":
        return np.clip(out, 0, 6)
    if mode == "kElu":
        return _elu(out)
    if mode == "kLeakyRelu":
        alpha = float(config.get("leakyrelu_alpha", 0.0))
        return np.where(out > 0, out, alpha * out)
    if mode == "kTanh":
        return np.tanh(out)
    if mode == "kSigmoid":
        return _sigmoid(out)
    if mode == "kGeluExact":
        return _gelu_erf(out)
    raise _unsupported(target, f"cuDNN activation {mode}")


@custom_call("__cudnn$convForward", "__cudnn$convBiasActivationForward")
def _cudnn_conv(operands, shape, attrs):
    from .convolution import convolution
    target = attrs["custom_call_target"]
    config = _gpu_config(attrs, "cudnn_conv_backend_config")
    main, extra = _split_result(shape)
    out = convolution(operands[0], operands[1], shape=ArrayShape(F64, main.dims),
                      dim_labels=attrs["dim_labels"], window=attrs.get("window"),
                      feature_group_count=int(attrs.get("feature_group_count") or 1),
                      batch_group_count=int(attrs.get("batch_group_count") or 1))
    out = np.asarray(out, np.float64) * float(config.get("conv_result_scale", 1.0))
    rest = list(operands[2:])
    if rest:  # bias along the output feature dimension
        bias = to_float64(rest.pop(0))
        s = [1] * out.ndim
        s[attrs["dim_labels"].output_feature_dimension] = -1
        out = out + bias.reshape(s)
    side_scale = float(config.get("side_input_scale", 0.0))
    if rest and side_scale:
        out = out + side_scale * to_float64(rest.pop(0))
    out = _activation(out, config.get("activation_mode", "kNone"), config, target)
    return _pack(_round(out, main.element_type), extra)


# -- cuDNN convolution gradients -------------------------------------------------------


class _Geometry:
    """The forward convolution in canonical order: x [N, C, *S], w [O, I, *K], y [N, O, *P]."""

    def __init__(self, dn: ConvDimensionNumbers, window, x_spatial, k_spatial, y_spatial,
                 target):
        n = len(dn.input_spatial_dimensions)
        dims = window.dims if isinstance(window, Window) else tuple(
            WindowDim(size=k) for k in k_spatial)
        if len(dims) != n:
            raise HloEvalError(f"{target}: window has {len(dims)} dims, dim_labels {n}")
        if any(d.window_reversal for d in dims):
            raise _unsupported(target, "window reversal")
        self.dims = dims
        self.x_spatial, self.k_spatial, self.y_spatial = x_spatial, k_spatial, y_spatial
        self.padded = [padded_size(x, d.padding_low, d.padding_high, d.base_dilation - 1)
                       for x, d in zip(x_spatial, dims)]
        for i, d in enumerate(dims):
            want = window_positions(self.padded[i], window_span(k_spatial[i], d.window_dilation),
                                    d.stride)
            if want != y_spatial[i]:
                raise HloEvalError(f"{target}: output spatial size {y_spatial[i]} does not match "
                                   f"the forward convolution ({want})")
        self.placement = [dilate_pad_slices(x, d.padding_low, d.padding_high, d.base_dilation)
                          for x, d in zip(x_spatial, dims)]

    def pad(self, xc):
        """x (canonical) → the padded, base-dilated frame."""
        out = np.zeros(xc.shape[:2] + tuple(self.padded), np.float64)
        dst = tuple(p[1] for p in self.placement)
        src = tuple(p[2] for p in self.placement)
        out[(slice(None), slice(None)) + dst] = xc[(slice(None), slice(None)) + src]
        return out

    def unpad(self, dxp):
        """Adjoint of ``pad``."""
        out = np.zeros(dxp.shape[:2] + tuple(self.x_spatial), dxp.dtype)
        dst = tuple(p[1] for p in self.placement)
        src = tuple(p[2] for p in self.placement)
        out[(slice(None), slice(None)) + src] = dxp[(slice(None), slice(None)) + dst]
        return out

    def window_slices(self, k):
        return (slice(None), slice(None)) + tuple(
            window_tap_slice(k[a], self.y_spatial[a], d.stride, d.window_dilation)
            for a, d in enumerate(self.dims))


def _canon(x, batch, feature, spatial):
    return np.transpose(x, (batch, feature, *spatial))


def _uncanon(xc, batch, feature, spatial):
    return np.transpose(xc, np.argsort((batch, feature, *spatial)))


def _backward_conv_setup(target, shape, attrs):
    """(dim_labels, cudnn_conv_backend_config, main result shape, scratch shapes,
    feature_group_count) of a cuDNN backward convolution."""
    dn = attrs["dim_labels"]
    if dn is None:
        raise HloEvalError(f"{target} needs dim_labels")
    if int(attrs.get("batch_group_count") or 1) != 1:
        raise _unsupported(target, "batch_group_count > 1")
    main, extra = _split_result(shape)
    return (dn, _gpu_config(attrs, "cudnn_conv_backend_config"), main, extra,
            int(attrs.get("feature_group_count") or 1))


@custom_call("__cudnn$convBackwardInput")
def _cudnn_conv_backward_input(operands, shape, attrs):
    target = "__cudnn$convBackwardInput"
    dn, config, main, extra, g = _backward_conv_setup(target, shape, attrs)
    dy = _canon(to_float64(operands[0]), dn.output_batch_dimension, dn.output_feature_dimension,
                dn.output_spatial_dimensions)
    w = _canon(to_float64(operands[1]), dn.kernel_output_feature_dimension,
               dn.kernel_input_feature_dimension, dn.kernel_spatial_dimensions)
    xdims = main.dims
    x_spatial = [xdims[d] for d in dn.input_spatial_dimensions]
    geo = _Geometry(dn, attrs.get("window"), x_spatial, list(w.shape[2:]), list(dy.shape[2:]),
                    target)
    n, c = xdims[dn.input_batch_dimension], xdims[dn.input_feature_dimension]
    o, i = w.shape[0], w.shape[1]
    if c != i * g or o % g:
        raise HloEvalError(f"{target}: {c} input features, kernel {i}×{o} and {g} groups "
                           f"do not agree")
    dxp = np.zeros((n, c) + tuple(geo.padded), np.float64)
    dyg = dy.reshape((n, g, o // g) + dy.shape[2:])
    for k in np.ndindex(*w.shape[2:]):
        wk = w[(slice(None), slice(None)) + k].reshape(g, o // g, i)
        contrib = np.einsum("ngo...,goi->ngi...", dyg, wk).reshape((n, c) + dy.shape[2:])
        dxp[geo.window_slices(k)] += contrib
    dx = geo.unpad(dxp) * float(config.get("conv_result_scale", 1.0))
    dx = _uncanon(dx, dn.input_batch_dimension, dn.input_feature_dimension,
                  dn.input_spatial_dimensions)
    return _pack(_round(dx, main.element_type), extra)


@custom_call("__cudnn$convBackwardFilter")
def _cudnn_conv_backward_filter(operands, shape, attrs):
    target = "__cudnn$convBackwardFilter"
    dn, config, main, extra, g = _backward_conv_setup(target, shape, attrs)
    x = _canon(to_float64(operands[0]), dn.input_batch_dimension, dn.input_feature_dimension,
               dn.input_spatial_dimensions)
    dy = _canon(to_float64(operands[1]), dn.output_batch_dimension, dn.output_feature_dimension,
                dn.output_spatial_dimensions)
    wdims = main.dims
    o, i = wdims[dn.kernel_output_feature_dimension], wdims[dn.kernel_input_feature_dimension]
    k_spatial = [wdims[d] for d in dn.kernel_spatial_dimensions]
    geo = _Geometry(dn, attrs.get("window"), list(x.shape[2:]), k_spatial, list(dy.shape[2:]),
                    target)
    n, c = x.shape[0], x.shape[1]
    if c != i * g or o % g:
        raise HloEvalError(f"{target}: {c} input features, kernel {i}×{o} and {g} groups "
                           f"do not agree")
    xp = geo.pad(x)
    npos = int(np.prod(dy.shape[2:], dtype=np.int64))
    dyg = dy.reshape(n, g, o // g, npos)
    dw = np.zeros((o, i) + tuple(k_spatial), np.float64)
    for k in np.ndindex(*k_spatial):
        xs = xp[geo.window_slices(k)].reshape(n, g, i, npos)
        dw[(slice(None), slice(None)) + k] = np.einsum(
            "ngip,ngop->goi", xs, dyg).reshape(o, i)
    dw = dw * float(config.get("conv_result_scale", 1.0))
    dw = _uncanon(dw, dn.kernel_output_feature_dimension, dn.kernel_input_feature_dimension,
                  dn.kernel_spatial_dimensions)
    return _pack(_round(dw, main.element_type), extra)


# -- cuDNN layer norm ------------------------------------------------------------------

_NORM_KINDS = ("LAYER_FWD_INFER", "LAYER_FWD_TRAIN", "LAYER_BWD")


@custom_call("__cudnn$norm")
def _cudnn_norm(operands, shape, attrs):
    target = "__cudnn$norm"
    config = _gpu_config(attrs, "cudnn_norm_backend_config")
    kind = _enum_name(config.get("kind", "LAYER_FWD_INFER"), _NORM_KINDS)
    if kind == "LAYER_BWD":
        raise _unsupported(target, "the layer norm backward (LAYER_BWD) is not implemented")
    if len(operands) != 3:
        raise HloEvalError(f"{target} takes (input, scale, bias), got {len(operands)} operands")
    elements = shape.elements if isinstance(shape, TupleShape) else (shape,)
    main = elements[0]
    stats = [e for e in elements[1:] if e.element_type.name != "u8"]
    workspace = [e for e in elements[1:] if e.element_type.name == "u8"]
    if stats and len(stats) != 2:
        raise HloEvalError(f"{target}: expected (Y, [mean, inv_stddev], workspace) results")
    x = to_float64(operands[0])
    n = x.shape[0]
    flat = x.reshape(n, -1)
    eps = float(config.get("epsilon", 0.0))
    mean = flat.mean(axis=1, keepdims=True)
    var = ((flat - mean) ** 2).mean(axis=1, keepdims=True)
    inv = 1.0 / np.sqrt(var + eps)
    scale = to_float64(operands[1]).reshape(1, -1)
    bias = to_float64(operands[2]).reshape(1, -1)
    y = ((flat - mean) * inv * scale + bias).reshape(x.shape)
    results = [_round(y, main.element_type)]
    if stats:
        results.append(_round(mean.reshape(stats[0].dims), stats[0].element_type))
        results.append(_round(inv.reshape(stats[1].dims), stats[1].element_type))
    results.extend(_zeros_like_shape(w) for w in workspace)
    return tuple(results) if isinstance(shape, TupleShape) else results[0]


# -- cuDNN fused attention -------------------------------------------------------------

_MASK_TYPES = ("NO_MASK", "PADDING", "CAUSAL", "PADDING_CAUSAL", "ALIBI")
_FMHA_FORWARD = ("__cudnn$fmhaSoftmax", "__cudnn$fmhaScaleBiasSoftmax",
                 "__cudnn$fmhaSoftmaxDropout", "__cudnn$fmhaScaleBiasSoftmaxDropout")
_FMHA_BACKWARD = ("__cudnn$fmhaSoftmaxBackward", "__cudnn$fmhaScaleBiasSoftmaxBackward",
                  "__cudnn$fmhaSoftmaxDropoutBackward",
                  "__cudnn$fmhaScaleBiasSoftmaxDropoutBackward")


@custom_call(*_FMHA_FORWARD)
def _cudnn_fmha(operands, shape, attrs):
    target = attrs["custom_call_target"]
    config = _gpu_config(attrs, "cudnn_fmha_backend_config")
    rate = float(config.get("dropout_rate", 0.0) or 0.0)
    if rate != 0.0:
        raise _unsupported(target, f"dropout_rate {rate}: dropout draws cuDNN's Philox stream, "
                                   f"which is not specified")
    mask = _enum_name(config.get("mask_type", "NO_MASK"), _MASK_TYPES)
    if mask not in ("NO_MASK", "CAUSAL"):
        raise _unsupported(target, f"mask_type {mask}")
    causal = mask == "CAUSAL" or bool(config.get("is_causal_mask"))
    if int(config.get("sliding_window_length", 0) or 0) > 0:
        raise _unsupported(target, "sliding_window_length")
    if int(config.get("max_seg_per_batch", 1) or 1) > 1 or config.get("is_paged_attention"):
        raise _unsupported(target, "packed or paged attention")
    has_bias = "Bias" in target
    if len(operands) != (4 if has_bias else 3):
        raise HloEvalError(f"{target} takes (Q, K, V{', bias' if has_bias else ''}), got "
                           f"{len(operands)} operands")
    q, k, v = (to_float64(o) for o in operands[:3])
    s = _general_dot(q, k, config.get("bmm1_dot_dimension_numbers", {}))
    s = s * float(config.get("fmha_scale", 1.0))
    if has_bias:
        bias = to_float64(operands[3])
        s = s + bias.reshape((1,) * (s.ndim - bias.ndim) + bias.shape)
    if causal:
        t, kv = s.shape[-2], s.shape[-1]
        s = np.where(np.arange(kv)[None, :] > np.arange(t)[:, None], -np.inf, s)
    m = np.max(s, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    z = e.sum(axis=-1, keepdims=True)
    p = e / z
    lse = (m + np.log(z))[..., 0]
    out = _general_dot(p, v, config.get("bmm2_dot_dimension_numbers", {}))
    elements = shape.elements if isinstance(shape, TupleShape) else (shape,)
    main = elements[0]
    if tuple(out.shape) != tuple(main.dims):
        raise HloEvalError(f"{target}: BMM2 gives {list(out.shape)}, the result is "
                           f"{list(main.dims)}")
    results = [_round(out, main.element_type)]
    rest = list(elements[1:])
    if rest and rest[0].element_type.name != "u8":
        st = rest.pop(0)
        results.append(_round(lse.reshape(st.dims), st.element_type))
    results.extend(_zeros_like_shape(w) for w in rest)
    return tuple(results) if isinstance(shape, TupleShape) else results[0]


@custom_call(*_FMHA_BACKWARD)
def _cudnn_fmha_backward(operands, shape, attrs):
    raise _unsupported(attrs["custom_call_target"], "fused attention backward is not implemented "
                                                    "(evaluate the unfused gradient instead)")
