"""Random convolution configurations against XLA:CPU, bit for bit.

Each case draws (``hloref.fuzz.strategies.conv_configs``, the fuzzer's convolution
geometry) the rank (1-3 spatial dims), a permutation of every ``dim_labels`` part,
stride, base (lhs) and window (rhs) dilation, negative and positive padding, reversal,
and feature or batch groups. Operands hold small integers, so every sum is exact in
f32/f64 and both implementations must agree exactly whatever their summation order;
s32 checks the integer path and bf16 -> f32 the widening path.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hlo_builders import module, run_both, shape_text
from hloref.fuzz.strategies import conv_configs

_DTYPES = {"f32": np.float32, "s32": np.int32, "bf16": ml_dtypes.bfloat16, "f64": np.float64}


def _labels(positions: dict[str, int], n: int) -> str:
    out = [""] * n
    for ch, p in positions.items():
        out[p] = ch
    return "".join(out)


@st.composite
def _config(draw):
    c = draw(conv_configs(min_spatial=1, max_spatial=3, max_stride=3, min_padding=-2,
                          max_padding=2, max_base_dilation=3))
    dn, window = c.dim_labels, c.window.dims
    nsp = len(window)
    digits = [str(i) for i in range(nsp)]
    inp = _labels({"b": dn.input_batch_dimension, "f": dn.input_feature_dimension,
                   **dict(zip(digits, dn.input_spatial_dimensions))}, nsp + 2)
    ker = _labels({"i": dn.kernel_input_feature_dimension, "o": dn.kernel_output_feature_dimension,
                   **dict(zip(digits, dn.kernel_spatial_dimensions))}, nsp + 2)
    out = _labels({"b": dn.output_batch_dimension, "f": dn.output_feature_dimension,
                   **dict(zip(digits, dn.output_spatial_dimensions))}, nsp + 2)
    n = c.lhs_dims[dn.input_batch_dimension]
    o = c.rhs_dims[dn.kernel_output_feature_dimension]
    spatial = [c.lhs_dims[p] for p in dn.input_spatial_dimensions]
    out_spatial = []
    for size, w in zip(spatial, window):  # the convolution shape rule, by hand
        full = (size - 1) * w.base_dilation + 1 + w.padding_low + w.padding_high
        span = (w.size - 1) * w.window_dilation + 1
        out_spatial.append((full - span) // w.stride + 1 if full >= span else 0)
    od = [dict(b=n // c.batch_group_count, f=o, **dict(zip(digits, out_spatial)))[ch] for ch in out]

    def field(key):
        return "x".join(str(int(getattr(w, key))) for w in window)

    pads = "x".join(f"{w.padding_low}_{w.padding_high}" for w in window)
    text_window = (f"size={field('size')} stride={field('stride')} pad={pads} "
                   f"lhs_dilate={field('base_dilation')} rhs_dilate={field('window_dilation')} "
                   f"rhs_reversal={field('window_reversal')}")
    t = draw(st.sampled_from(["f32", "f32", "s32", "bf16", "f64"]))
    ot = "f32" if t == "bf16" else t
    ld, rd = c.lhs_dims, c.rhs_dims
    text = module(f"  a = {shape_text(t, ld)} parameter(0)\n  b = {shape_text(t, rd)} parameter(1)\n"
                  f"  ROOT c = {shape_text(ot, od)} convolution(a, b), window={{{text_window}}}, "
                  f"dim_labels={inp}_{ker}->{out}, "
                  f"feature_group_count={c.feature_group_count}, "
                  f"batch_group_count={c.batch_group_count}")
    values = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    a = values.integers(-4, 5, ld).astype(_DTYPES[t])
    b = values.integers(-4, 5, rd).astype(_DTYPES[t])
    return text, a, b


@settings(max_examples=48, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(_config())
def test_random_convolution_matches_xla_exactly(case):
    text, a, b = case
    ours, theirs = run_both(text, a, b)
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype, text
    np.testing.assert_array_equal(np.asarray(ours, np.float64), np.asarray(theirs, np.float64),
                                  err_msg=text)


@settings(max_examples=24, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(_config())
def test_the_per_window_position_path_matches_xla_exactly(case):
    """Convolutions whose windows would not fit in memory (im2col past
    ``PATCH_BYTES``; XLA's convolution benchmark needed 101 GiB) sum one GEMM per window
    position: forced here on the same random configurations, still bit for bit XLA's."""
    from hloref.evaluator import convolution as conv
    text, a, b = case
    saved, conv.PATCH_BYTES = conv.PATCH_BYTES, 0
    try:
        ours, theirs = run_both(text, a, b)
    finally:
        conv.PATCH_BYTES = saved
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype, text
    np.testing.assert_array_equal(np.asarray(ours, np.float64), np.asarray(theirs, np.float64),
                                  err_msg=text)
