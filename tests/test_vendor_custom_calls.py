"""Vendor-library custom calls (evaluator/custom_call_onednn.py, custom_call_cublas.py,
custom_call_cudnn.py) and XLA:CPU's
library fusions.

* XLA:CPU (jaxlib 0.10.2) library fusions (``__ynn_fusion``, ``__onednn_fusion``):
  hloref evaluates XLA's *optimized* module and is compared with XLA running it.
* oneDNN custom calls (never emitted by jaxlib 0.10.2's pip build): hand-written
  modules, expectations from numpy (convolution geometry: XLA:CPU on the plain
  ``convolution``).
* cuDNN convolution gradients: against ``jax.vjp`` of ``lax.conv_general_dilated`` run
  by XLA:CPU. cuBLAS GELU epilogues: against ``jax.nn.gelu(approximate=True)``.
  ``__cudnn$norm`` and fused attention: against numpy.
"""

from __future__ import annotations

import json
import math
import struct

import numpy as np
import pytest

import hloref
from hloref.errors import HloUnsupportedError

xla = pytest.importorskip("fuzz.oracles.xla")
jax = pytest.importorskip("jax")
jnp = jax.numpy

RNG = np.random.default_rng(1234)


def _sh(a, et="f32"):
    return f"{et}[" + ",".join(map(str, np.shape(a))) + "]"


def _rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _close(got, want, rtol=2e-5, atol=2e-5):
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                               rtol=rtol, atol=atol)


def _call(target, args, result_shape, config=None, extra="", operand_names=None):
    """A module whose root is one custom call on parameters."""
    names = operand_names or [f"p{i}" for i in range(len(args))]
    params = "\n".join(f"  {n} = {_sh(a)} parameter({i})" for i, (n, a) in enumerate(zip(names, args)))
    bc = f", backend_config={json.dumps(config)}" if config is not None else ""
    return (f"HloModule m\nENTRY e {{\n{params}\n  ROOT c = {result_shape} custom-call("
            f"{', '.join(names)}), custom_call_target=\"{target}\"{extra}{bc}\n}}\n")


# -- XLA:CPU library fusions, checked against XLA itself --------------------------------

_DOT_BIAS_RELU = """HloModule m
ENTRY e {
  x = f32[64,128] parameter(0)
  w = f32[128,96] parameter(1)
  b = f32[96] parameter(2)
  d = f32[64,96] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bb = f32[64,96] broadcast(b), dimensions={1}
  a = f32[64,96] add(d, bb)
  z = f32[64,96] broadcast(f32[] constant(0)), dimensions={}
  ROOT r = f32[64,96] maximum(a, z)
}
"""

_CONV_TANH = """HloModule m
ENTRY e {
  x = f32[2,12,12,8] parameter(0)
  k = f32[3,3,8,16] parameter(1)
  c = f32[2,12,12,16] convolution(x, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  ROOT t = f32[2,12,12,16] tanh(c)
}
"""

_YNN = {"xla_cpu_experimental_ynn_fusion_type":
        "LIBRARY_FUSION_TYPE_DOT,LIBRARY_FUSION_TYPE_ELTWISE"}
_ONEDNN = {"xla_cpu_use_onednn": True, "xla_cpu_use_xnnpack": False,
           "xla_cpu_experimental_ynn_fusion_type": "",
           "xla_cpu_experimental_onednn_fusion_type":
           "LIBRARY_FUSION_TYPE_DOT,LIBRARY_FUSION_TYPE_ELTWISE"}


@pytest.mark.parametrize("text,options,kind", [
    (_DOT_BIAS_RELU, None, "__ynn_fusion"),
    (_DOT_BIAS_RELU, _YNN, "__ynn_fusion"),
    (_CONV_TANH, _YNN, "__ynn_fusion"),
    (_DOT_BIAS_RELU, _ONEDNN, "__onednn_fusion"),
])
def test_xla_cpu_library_fusions_match_xla(text, options, kind):
    exe = xla.compile_hlo(text, debug_options=options)
    optimized = exe.optimized_hlo()
    assert f'"kind":"{kind}"' in optimized and "kind=kCustom" in optimized
    args = [_rand(*tuple(s.dimensions())) for s in exe.parameter_shapes]
    _close(hloref.evaluate(optimized, *args), exe.run(*args), rtol=1e-4, atol=1e-4)


# -- oneDNN matmul -----------------------------------------------------------------------


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


_ELTWISE = {
    "RELU": lambda x: np.maximum(x, 0),
    "TANH": np.tanh,
    "GELU_TANH": _gelu_tanh,
    "GELU_ERF": lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2))),
    "ELU": lambda x: np.where(x > 0, x, np.exp(np.minimum(x, 0)) - 1),
    "RELU6": lambda x: np.minimum(np.maximum(x, 0), 6),
    "SIGMOID": lambda x: 1 / (1 + np.exp(-x)),
    "SWISH": lambda x: x / (1 + np.exp(-x)),
}


def _mm_config(**kw):
    return {"onednn_matmul_config": kw}


@pytest.mark.parametrize("kind", sorted(_ELTWISE))
def test_onednn_matmul_bias_eltwise(kind):
    x, w, b = _rand(5, 7), _rand(6, 7) * 2, _rand(6)  # transpose_b: w is [N, K]
    cfg = _mm_config(transpose_a=False, transpose_b=True, fusions={"ops": ["BIAS", kind]})
    got = hloref.evaluate(_call("__onednn$matmul", [x, w, b], "f32[5,6]", cfg), x, w, b)
    want = _ELTWISE[kind](x.astype(np.float64) @ w.T.astype(np.float64) + b)
    _close(got, want)


def test_onednn_matmul_batched_transpose_a_binary_add_linear():
    x, w, add = _rand(3, 7, 4), _rand(3, 7, 5), _rand(3, 4, 5)  # transpose_a: x is [B, K, M]
    cfg = _mm_config(transpose_a=True, fusions={"ops": ["BINARY_ADD", "LINEAR", "RELU6"],
                                                "alpha": [0.5]})
    got = hloref.evaluate(_call("__onednn$matmul", [x, w, add], "f32[3,4,5]", cfg), x, w, add)
    want = np.clip((np.einsum("bkm,bkn->bmn", x, w) + add) * 0.5, 0, 6)
    _close(got, want)


def test_onednn_matmul_tensor_dimensions_sum_and_scratch():
    # lhs stored [K, M]; dimensions {2,1} make it logically [M, K]
    x, w, s = _rand(7, 4), _rand(7, 5), _rand(4, 5)
    cfg = _mm_config(lhs={"tensor": {"dimensions": ["2", "1"]}},
                     fusions={"ops": ["SUM"]}, optimization_config={"user_scratchpad": True})
    got = hloref.evaluate(_call("__onednn$matmul", [x, w, s], "(f32[4,5], u8[32])", cfg), x, w, s)
    _close(got[0], x.T.astype(np.float64) @ w + s)
    assert got[1].shape == (32,) and got[1].dtype == np.uint8


def test_onednn_matmul_prepacked_is_unsupported():
    x, w = _rand(2, 3), _rand(3, 4)
    cfg = _mm_config(optimization_config={"weights_prepacked": True})
    with pytest.raises(HloUnsupportedError, match="weights_prepacked"):
        hloref.evaluate(_call("__onednn$matmul", [x, w], "f32[2,4]", cfg), x, w)


# -- oneDNN convolution, layer norm, softmax -----------------------------------------------


def test_onednn_convolution_matches_xla_conv():
    x, k, b = _rand(2, 9, 8, 4), _rand(3, 2, 2, 6), _rand(6)  # b01f, 01io with 2 groups
    plain = f"""HloModule m
ENTRY e {{
  x = {_sh(x)} parameter(0)
  k = {_sh(k)} parameter(1)
  ROOT c = f32[2,5,7,6] convolution(x, k), window={{size=3x2 stride=2x1 pad=1_1x0_1 rhs_dilate=1x2}}, dim_labels=b01f_01io->b01f, feature_group_count=2
}}
"""
    conv = xla.run_hlo(plain, x, k).astype(np.float64)
    cfg = {"onednn_conv_config": {
        "dims": "4", "feature_groups": "2",
        "input": {"data": {"batch_dim": "0", "feature_dim": "3", "spatial_dims": ["2", "3"]}},
        "kernel": {"filter": {"input_feature_dim": "2", "output_feature_dim": "3",
                              "spatial_dims": ["1", "2"]}},
        "output": {"data": {"batch_dim": "0", "feature_dim": "3", "spatial_dims": ["2", "3"]}},
        "window": {"pad_left": ["2", "1"], "pad_right": ["2", "2"], "strides": ["3", "2"],
                   "window_dilations": ["2", "3"]},
        "fusions": {"ops": ["BIAS", "RELU"]}}}
    got = hloref.evaluate(_call("__onednn$convolution", [x, k, b], "f32[2,5,7,6]", cfg), x, k, b)
    _close(got, np.maximum(conv + b, 0), rtol=1e-4, atol=1e-4)


def test_onednn_layernorm_and_softmax():
    x, g, s = _rand(3, 4, 10), _rand(10), _rand(10)
    eps = struct.unpack("<i", struct.pack("<f", 1e-3))[0]
    cfg = {"onednn_layer_norm_config": {"rescale": "SCALE_AND_SHIFT", "epsilon_typecast": eps}}
    got = hloref.evaluate(_call("__onednn$layernorm", [x, g, s], "f32[3,4,10]", cfg), x, g, s)
    xd = x.astype(np.float64)
    m, v = xd.mean(-1, keepdims=True), xd.var(-1, keepdims=True)
    _close(got, (xd - m) / np.sqrt(v + np.float32(1e-3)) * g + s, rtol=1e-5, atol=1e-5)

    def softmax(a, axis):
        e = np.exp(a - a.max(axis, keepdims=True))
        return e / e.sum(axis, keepdims=True)
    cfg = {"onednn_softmax_config": {"softmax_axis": 1}}
    _close(hloref.evaluate(_call("__onednn$softmax", [x], "f32[3,4,10]", cfg), x), softmax(xd, 1))
    _close(hloref.evaluate(_call("__onednn$softmax", [x], "f32[3,4,10]"), x), softmax(xd, 2))


# -- cuBLAS GELU epilogues ---------------------------------------------------------------


def _gemm_config(epilogue, beta=0.0):
    return {"gemm_backend_config": {
        "alpha_real": 1, "beta": beta, "epilogue": epilogue,
        "dot_dimension_numbers": {"lhs_contracting_dimensions": ["1"],
                                  "rhs_contracting_dimensions": ["0"],
                                  "lhs_batch_dimensions": [], "rhs_batch_dimensions": []}}}


@pytest.mark.parametrize("epilogue", ["GELU", "BIAS_GELU", "GELU_AUX", "BIAS_GELU_AUX"])
def test_cublas_gelu_epilogues_match_jax_gelu(epilogue):
    a, b, bias = _rand(6, 8), _rand(8, 5), _rand(5)
    args = [a, b, bias] if "BIAS" in epilogue else [a, b]
    aux = "AUX" in epilogue
    result = "(f32[6,5], f32[6,5], s8[64])" if aux else "(f32[6,5], s8[64])"
    got = hloref.evaluate(_call("__cublas$lt$matmul", args, result, _gemm_config(epilogue)), *args)
    pre = a.astype(np.float64) @ b + (bias if "BIAS" in epilogue else 0)
    want = np.asarray(jax.nn.gelu(jnp.asarray(pre, jnp.float32), approximate=True))
    _close(got[0], want, rtol=1e-5, atol=1e-6)
    if aux:
        _close(got[1], pre, rtol=1e-6, atol=1e-6)
    assert not got[-1].any()


def test_cublas_beta_and_bias_relu():
    a, b, c = _rand(4, 3), _rand(3, 2), _rand(4, 2)
    got = hloref.evaluate(_call("__cublas$gemm", [a, b, c], "f32[4,2]",
                                _gemm_config("DEFAULT", beta=0.5)), a, b, c)
    _close(got, a.astype(np.float64) @ b + 0.5 * c)


# -- cuDNN convolution gradients ---------------------------------------------------------


_CONV_CASES = [
    # (lhs spec, rhs spec, dim_labels, x shape, w shape, strides, padding, rhs_dil, lhs_dil, groups)
    ("NCHW", "OIHW", "bf01_oi01->bf01", (2, 4, 7, 6), (6, 4, 3, 2), (1, 1), [(1, 1), (0, 1)],
     (1, 1), (1, 1), 1),
    ("NHWC", "HWIO", "b01f_01io->b01f", (2, 9, 8, 4), (3, 3, 2, 6), (2, 3), [(1, 2), (2, 0)],
     (2, 1), (1, 1), 2),
    ("NHWC", "HWIO", "b01f_01io->b01f", (1, 5, 5, 3), (2, 2, 3, 4), (1, 2), [(-1, 2), (1, 1)],
     (1, 2), (2, 1), 1),
]


@pytest.mark.parametrize("case", _CONV_CASES)
def test_cudnn_conv_backward_matches_jax_vjp(case):
    lspec, rspec, labels, xshape, wshape, strides, padding, rdil, ldil, groups = case
    x, w = _rand(*xshape), _rand(*wshape)

    def f(x, w):
        return jax.lax.conv_general_dilated(
            x, w, strides, padding, lhs_dilation=ldil, rhs_dilation=rdil,
            dimension_numbers=(lspec, rspec, lspec), feature_group_count=groups,
            precision=jax.lax.Precision.HIGHEST)
    y, vjp = jax.vjp(f, x, w)
    dy = _rand(*y.shape)
    dx, dw = (np.asarray(t) for t in vjp(dy))
    size = "x".join(str(wshape[rspec.index(c)]) for c in rspec if c not in "OI")
    window = (f", window={{size={size} stride={'x'.join(map(str, strides))} "
              f"pad={'x'.join(f'{a}_{b}' for a, b in padding)} "
              f"lhs_dilate={'x'.join(map(str, ldil))} rhs_dilate={'x'.join(map(str, rdil))}}}, "
              f"dim_labels={labels}, feature_group_count={groups}")
    cfg = {"cudnn_conv_backend_config": {"conv_result_scale": 1, "activation_mode": "kNone"}}
    got = hloref.evaluate(_call("__cudnn$convBackwardInput", [dy, w],
                                f"({_sh(dx)}, u8[0])", cfg, window), dy, w)
    _close(got[0], dx, rtol=1e-4, atol=1e-4)
    got = hloref.evaluate(_call("__cudnn$convBackwardFilter", [x, dy],
                                f"({_sh(dw)}, u8[0])", cfg, window), x, dy)
    _close(got[0], dw, rtol=1e-4, atol=1e-4)


# -- cuDNN layer norm --------------------------------------------------------------------


@pytest.mark.parametrize("train", [False, True])
def test_cudnn_norm(train):
    x, g, b = _rand(6, 5, 3, 1), _rand(5, 3, 1, 1), _rand(5, 3, 1, 1)
    cfg = {"cudnn_norm_backend_config": {"epsilon": 0.01,
                                         "kind": "LAYER_FWD_TRAIN" if train else "LAYER_FWD_INFER"}}
    result = ("(f32[6,5,3,1], f32[6,1,1,1], f32[6,1,1,1], u8[100])" if train
              else "(f32[6,5,3,1], u8[100])")
    got = hloref.evaluate(_call("__cudnn$norm", [x, g, b], result, cfg), x, g, b)
    flat = x.reshape(6, -1).astype(np.float64)
    mean, var = flat.mean(1, keepdims=True), flat.var(1, keepdims=True)
    y = (flat - mean) / np.sqrt(var + 0.01) * g.reshape(1, -1) + b.reshape(1, -1)
    _close(got[0], y.reshape(x.shape), rtol=1e-5, atol=1e-5)
    if train:
        _close(got[1].reshape(6), mean[:, 0], rtol=1e-6, atol=1e-6)
        _close(got[2].reshape(6), 1 / np.sqrt(var[:, 0] + 0.01), rtol=1e-5, atol=1e-5)


# -- cuDNN fused attention (forward) -----------------------------------------------------

# BTNH layout, as jax._src.cudnn.fused_attention_stablehlo writes the dimension numbers.
_BMM1 = {"lhs_contracting_dimensions": ["3"], "rhs_contracting_dimensions": ["3"],
         "lhs_batch_dimensions": ["0", "2"], "rhs_batch_dimensions": ["0", "2"]}
_BMM2 = {"lhs_contracting_dimensions": ["3"], "rhs_contracting_dimensions": ["1"],
         "lhs_batch_dimensions": ["0", "1"], "rhs_batch_dimensions": ["0", "2"]}


def _fmha_config(scale, mask="NO_MASK", dropout=0.0):
    return {"operation_queue_id": "0", "cudnn_fmha_backend_config": {
        "fmha_scale": scale, "dropout_rate": dropout, "mask_type": mask, "seed": 42,
        "is_flash_attention": True, "bmm1_dot_dimension_numbers": _BMM1,
        "bmm2_dot_dimension_numbers": _BMM2, "sliding_window_length": 0}}


def _attention_reference(q, k, v, scale, bias=None, causal=False):
    """Loops over batch and head: softmax(scale·q·kᵀ + bias) · v, [B, N, T, H]."""
    B, T, N, H = q.shape
    S = k.shape[1]
    out = np.zeros((B, N, T, v.shape[3]))
    lse = np.zeros((B, N, T))
    for bb in range(B):
        for n in range(N):
            logits = scale * (q[bb, :, n, :].astype(np.float64) @ k[bb, :, n, :].T)
            if bias is not None:
                logits = logits + bias[bb if bias.shape[0] > 1 else 0, n]
            if causal:
                logits[np.triu(np.ones((T, S), bool), 1)] = -np.inf
            mx = logits.max(1, keepdims=True)
            p = np.exp(logits - mx)
            lse[bb, n] = (mx + np.log(p.sum(1, keepdims=True)))[:, 0]
            out[bb, n] = (p / p.sum(1, keepdims=True)) @ v[bb, :, n, :]
    return out, lse


@pytest.mark.parametrize("bias,causal,train", [(False, False, False), (True, True, True),
                                               (False, True, True)])
def test_cudnn_fmha_forward(bias, causal, train):
    B, T, S, N, H = 2, 5, 6, 3, 4
    q, k, v = _rand(B, T, N, H), _rand(B, S, N, H), _rand(B, S, N, H)
    args = [q, k, v]
    bias_v = None
    if bias:
        bias_v = _rand(1, N, T, S)
        args.append(bias_v)
    target = "__cudnn$fmhaScaleBiasSoftmax" if bias else "__cudnn$fmhaSoftmaxDropout"
    result = (f"(f32[{B},{N},{T},{H}], f32[{B},{N},{T}], u8[0])" if train
              else f"(f32[{B},{N},{T},{H}], u8[0])")
    cfg = _fmha_config(0.3, "CAUSAL" if causal else "NO_MASK")
    got = hloref.evaluate(_call(target, args, result, cfg), *args)
    out, lse = _attention_reference(q, k, v, 0.3, bias_v, causal)
    _close(got[0], out, rtol=1e-5, atol=1e-5)
    if train:
        _close(got[1], lse, rtol=1e-5, atol=1e-5)


def test_cudnn_fmha_unsupported_forms():
    q = _rand(1, 2, 1, 2)
    cfg = _fmha_config(1.0, dropout=0.1)
    with pytest.raises(HloUnsupportedError, match=r"fmhaSoftmaxDropout.*dropout_rate"):
        hloref.evaluate(_call("__cudnn$fmhaSoftmaxDropout", [q, q, q],
                              "(f32[1,1,2,2], u8[0])", cfg), q, q, q)
    with pytest.raises(HloUnsupportedError, match="fmhaSoftmaxBackward"):
        hloref.evaluate(_call("__cudnn$fmhaSoftmaxBackward", [q, q, q],
                              "(f32[1,2,1,2], u8[0])", _fmha_config(1.0)), q, q, q)


def test_unknown_target_names_it():
    x = _rand(2)
    with pytest.raises(HloUnsupportedError, match=r"__onednn\$frobnicate"):
        hloref.evaluate(_call("__onednn$frobnicate", [x], "f32[2]"), x)


def test_cudnn_conv_bias_activation_forward_matches_xla_conv():
    x, k, b, side = _rand(2, 3, 6, 6), _rand(4, 3, 3, 3), _rand(4), _rand(2, 4, 6, 6)
    geometry = "window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01"
    plain = (f"HloModule m\nENTRY e {{\n  x = {_sh(x)} parameter(0)\n  k = {_sh(k)} parameter(1)\n"
             f"  ROOT c = f32[2,4,6,6] convolution(x, k), {geometry}\n}}\n")
    conv = xla.run_hlo(plain, x, k).astype(np.float64)
    cfg = {"cudnn_conv_backend_config": {"conv_result_scale": 0.5, "side_input_scale": 2,
                                         "activation_mode": "kElu"}}
    got = hloref.evaluate(_call("__cudnn$convBiasActivationForward", [x, k, b, side],
                                "(f32[2,4,6,6], u8[0])", cfg, ", " + geometry), x, k, b, side)
    pre = 0.5 * conv + b.reshape(1, 4, 1, 1) + 2 * side
    _close(got[0], np.where(pre > 0, pre, np.expm1(np.minimum(pre, 0))), rtol=1e-4, atol=1e-4)
