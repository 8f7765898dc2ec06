"""cuDNN ``custom-call`` targets of XLA:GPU
(``xla/service/gpu/backend_configs.proto``, ``cublas_cudnn.cc``).

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

Each function reads the instruction's ``backend_config`` (JSON of XLA's
``BackendConfig`` / ``GpuBackendConfig`` protos) and computes in f64, rounding once
to the result type. Trailing workspace/scratch results are zeros.
"""

from __future__ import annotations

import numpy as np

from hloref.attrs import ConvDimensionNumbers, Window, WindowDim
from hloref.errors import HloEvalError
from hloref.geometry import (dilate_pad_slices, padded_size, window_positions, window_span,
                             window_tap_slice)
from hloref.shapes import ArrayShape, TupleShape
from hloref.types import F64

from .custom_call import split_result, zeros_like_shape, custom_call
from .numeric import to_float64
from .custom_call_vendor import (elu, enum_name, gelu_erf, general_dot, gpu_config, pack, round_to,
                                 sigmoid, unsupported)


def _activation(out, mode, config, target):
    mode = str(mode or "kNone")
    if mode in ("kNone", "0"):
        return out
    if mode == "kRelu":
        return np.maximum(out, 0)
    if mode == "kRelu6":
        return np.clip(out, 0, 6)
    if mode == "kElu":
        return elu(out)
    if mode == "kLeakyRelu":
        alpha = float(config.get("leakyrelu_alpha", 0.0))
        return np.where(out > 0, out, alpha * out)
    if mode == "kTanh":
        return np.tanh(out)
    if mode == "kSigmoid":
        return sigmoid(out)
    if mode == "kGeluExact":
        return gelu_erf(out)
    raise unsupported(target, f"cuDNN activation {mode}")


@custom_call("__cudnn$convForward", "__cudnn$convBiasActivationForward")
def _cudnn_conv(operands, shape, attrs):
    from .convolution import convolution
    target = attrs["custom_call_target"]
    config = gpu_config(attrs, "cudnn_conv_backend_config")
    main, extra = split_result(shape)
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
    return pack(round_to(out, main.element_type), extra)


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
            raise unsupported(target, "window reversal")
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
        raise unsupported(target, "batch_group_count > 1")
    main, extra = split_result(shape)
    return (dn, gpu_config(attrs, "cudnn_conv_backend_config"), main, extra,
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
    return pack(round_to(dx, main.element_type), extra)


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
    return pack(round_to(dw, main.element_type), extra)


_NORM_KINDS = ("LAYER_FWD_INFER", "LAYER_FWD_TRAIN", "LAYER_BWD")


@custom_call("__cudnn$norm")
def _cudnn_norm(operands, shape, attrs):
    target = "__cudnn$norm"
    config = gpu_config(attrs, "cudnn_norm_backend_config")
    kind = enum_name(config.get("kind", "LAYER_FWD_INFER"), _NORM_KINDS)
    if kind == "LAYER_BWD":
        raise unsupported(target, "the layer norm backward (LAYER_BWD) is not implemented")
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
    results = [round_to(y, main.element_type)]
    if stats:
        results.append(round_to(mean.reshape(stats[0].dims), stats[0].element_type))
        results.append(round_to(inv.reshape(stats[1].dims), stats[1].element_type))
    results.extend(zeros_like_shape(w) for w in workspace)
    return tuple(results) if isinstance(shape, TupleShape) else results[0]


_MASK_TYPES = ("NO_MASK", "PADDING", "CAUSAL", "PADDING_CAUSAL", "ALIBI")


_FMHA_FORWARD = ("__cudnn$fmhaSoftmax", "__cudnn$fmhaScaleBiasSoftmax",
                 "__cudnn$fmhaSoftmaxDropout", "__cudnn$fmhaScaleBiasSoftmaxDropout")


_FMHA_BACKWARD = ("__cudnn$fmhaSoftmaxBackward", "__cudnn$fmhaScaleBiasSoftmaxBackward",
                  "__cudnn$fmhaSoftmaxDropoutBackward",
                  "__cudnn$fmhaScaleBiasSoftmaxDropoutBackward")


@custom_call(*_FMHA_FORWARD)
def _cudnn_fmha(operands, shape, attrs):
    target = attrs["custom_call_target"]
    config = gpu_config(attrs, "cudnn_fmha_backend_config")
    rate = float(config.get("dropout_rate", 0.0) or 0.0)
    if rate != 0.0:
        raise unsupported(target, f"dropout_rate {rate}: dropout draws cuDNN's Philox stream, "
                                   f"which is not specified")
    mask = enum_name(config.get("mask_type", "NO_MASK"), _MASK_TYPES)
    if mask not in ("NO_MASK", "CAUSAL"):
        raise unsupported(target, f"mask_type {mask}")
    causal = mask == "CAUSAL" or bool(config.get("is_causal_mask"))
    if int(config.get("sliding_window_length", 0) or 0) > 0:
        raise unsupported(target, "sliding_window_length")
    if int(config.get("max_seg_per_batch", 1) or 1) > 1 or config.get("is_paged_attention"):
        raise unsupported(target, "packed or paged attention")
    has_bias = "Bias" in target
    if len(operands) != (4 if has_bias else 3):
        raise HloEvalError(f"{target} takes (Q, K, V{', bias' if has_bias else ''}), got "
                           f"{len(operands)} operands")
    q, k, v = (to_float64(o) for o in operands[:3])
    s = general_dot(q, k, config.get("bmm1_dot_dimension_numbers", {}))
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
    out = general_dot(p, v, config.get("bmm2_dot_dimension_numbers", {}))
    elements = shape.elements if isinstance(shape, TupleShape) else (shape,)
    main = elements[0]
    if tuple(out.shape) != tuple(main.dims):
        raise HloEvalError(f"{target}: BMM2 gives {list(out.shape)}, the result is "
                           f"{list(main.dims)}")
    results = [round_to(out, main.element_type)]
    rest = list(elements[1:])
    if rest and rest[0].element_type.name != "u8":
        st = rest.pop(0)
        results.append(round_to(lse.reshape(st.dims), st.element_type))
    results.extend(zeros_like_shape(w) for w in rest)
    return tuple(results) if isinstance(shape, TupleShape) else results[0]


@custom_call(*_FMHA_BACKWARD)
def _cudnn_fmha_backward(operands, shape, attrs):
    raise unsupported(attrs["custom_call_target"], "fused attention backward is not implemented "
                                                    "(evaluate the unfused gradient instead)")
