# jaxlib XLA:CPU reproducer: needs only jax/jaxlib, numpy and ml_dtypes.
import json

import jax
import jaxlib._jax as jaxlib_ext
import ml_dtypes
import numpy as np
from jax.extend import backend
from jaxlib import xla_client as xc

HLO = r"""
HloModule jit_f16_attention

ENTRY %main.3 {
  %dot_general.2.cut = f16[2,16,16]{2,1,0} parameter(0)
  %constant.5 = f16[] constant(-0)
  %div.6 = f16[2,16,16]{2,1,0} broadcast(%constant.5), dimensions={}
  ROOT %div.7 = f16[2,16,16]{2,1,0} divide(%dot_general.2.cut, %div.6)
}
"""

# One array per entry parameter leaf (tuple parameters flattened), in order.
INPUTS = [
    np.array([[[2.723, 11.484, 0.92, 3.809, 10.57, -0.00141, 7.453, 4.805, -0.677, -3.34, 2.643, 9.64, -2.53, -11.18, 5.51, 7.406], [-2.008, -2.365, 0.1938, 8.81, -5.85, -6.215, 9.37, 4.996, -4.484, -9.29, 7.906, 6.207, -1.806, -5.402, 12.11, 4.33], [-9.65, -8.53, 8.88, 1.27, 1.585, -4.99, 0.9014, 2.92, 6.285, 2.082, -4.71, -2.336, -1.255, -6.152, 2.113, 11.66], [-1.3125, 6.87, 6.777, -0.601, -4.11, -14.016, -4.883, 0.927, 9.1, 1.775, -6.426, -0.2086, -1.854, 8.41, 7.87, 3.47], [-0.6646, 2.154, 15.45, 9.17, -2.11, 0.7144, -5.43, -5.832, -2.35, 5.082, -3.307, 5.434, -7.48, -3.56, 14.88, 2.191], [4.47, -4.965, -0.788, -4.465, 1.862, -0.3765, -4.766, -1.915, -4.777, 4.47, -3.164, 5.45, 1.356, -0.9683, 1.668, 0.3914], [-1.995, -0.3032, 2.785, -2.99, 1.329, -2.248, -11.57, -1.713, 3.26, 2.566, -7.03, 2.426, -1.922, 2.91, 6.375, -2.13], [3.598, -9.39, 2.994, 2.098, 1.615, 5.223, 6.023, -0.1537, -8.39, -3.256, -5.766, -8.81, -5.36, -1.071, -5.895, 0.5884], [5.49, 5.855, 2.465, 1.026, -6.934, -8.13, -4.27, 3.416, 4.176, -1.699, 6.523, -9.375, 5.613, -6.94, 9.164, -5.53], [1.444, -3.549, -12.63, -0.5503, 3.656, 13.625, 5.77, 0.8477, -5.867, -16.58, -0.2715, -6.55, -4.22, 1.922, -9.625, 2.676], [10.03, 8.17, -3.498, -8.875, 10.695, -6.344, -9.33, -4.258, 3.787, -7.734, 9.15, -4.14, 0.922, 11.26, -4.887, -8.91], [-3.443, -4.414, -7.195, 0.9067, -7.18, 0.423, 7.29, 3.207, 2.734, -11.57, 5.68, -4.812, -3.275, 3.29, -5.38, -1.488], [8.02, -1.737, -2.799, 5.984, 0.301, 3.33, -4.258, 0.04303, -11.734, -2.17, 5.074, -10.18, 8.234, 6.117, 1.491, -0.58], [-8.52, -2.322, -2.654, 1.524, -2.055, 5.605, 0.8105, -2.516, 6.957, -2.67, -5.54, 4.99, -5.934, 2.498, -5.04, -4.09], [-3.125, -10.83, 12.86, 2.383, -9.12, 3.908, -1.608, 11.31, 14.38, 6.81, -2.756, -12.79, -4.918, -1.219, -4.78, -1.118], [-4.824, 8.74, 6.52, 3.494, 0.9966, -6.55, -1.7295, 0.871, 5.94, -8.836, -7.28, 4.24, -5.895, 6.12, 2.96, 2.568]], [[-0.9346, -8.6, -2.99, 4.477, -0.10693, -3.938, -1.115, 8.3, 1.8, -6.695, 7.457, 11.61, -5.977, -1.59, 9.45, 1.586], [6.19, 9.63, 5.652, -1.639, -1.256, 6.62, 0.624, 7.473, -7.086, -5.727, 3.848, -2.686, 6.273, -8.66, -5.23, -6.82], [1.516, 5.055, 2.805, 5.57, 0.03613, 1.5205, 0.07056, 0.451, 5.094, -5.91, 1.176, 4.37, 6.97, 3.627, 0.2089, 3.2], [-6.19, 8.164, 6.56, -7.184, 3.57, 7.47, -4.152, 7.984, 4.504, 1.217, -6.81, 3.99, 7.93, -4.832, 2.662, 1.51], [0.7085, -2.408, -0.1487, 1.27, 0.662, 1.794, -2.795, 4.438, -6.953, -4.023, -2.584, -5.684, -5.16, 1.059, 8.25, -5.54], [7.81, 1.309, 1.787, -5.703, -1.705, 6.47, -4.523, -0.8306, 4.566, -9.055, -2.887, -11.03, -1.051, -5.28, -17.52, 6.285], [5.938, 4.855, -3.219, -3.64, -13.31, -8.49, 5.098, 4.176, 2.598, 5.473, 5.0, -6.594, 12.02, -0.5396, -5.617, -0.14], [-3.236, -1.928, 1.14, 0.03445, 3.277, -2.328, -7.004, 7.06, -1.901, 0.819, -12.86, 0.6597, 4.43, -5.73, 2.365, -2.111], [20.72, 0.503, 15.875, 3.283, -12.586, -1.214, 3.496, -3.137, -0.3035, -18.88, -1.869, -7.566, -6.33, 2.258, 3.123, 7.207], [-5.207, -1.14, 5.566, 0.633, 3.438, 0.1569, -4.555, 3.654, 5.9, -4.973, -6.668, 2.705, -4.01, 3.748, 1.373, 9.375], [11.01, -2.129, -7.01, 5.36, 6.0, -6.0, -3.285, -0.1138, 2.436, -1.16, 2.904, -0.889, -4.434, 3.273, -5.79, 3.287], [1.9, 0.4272, -6.656, -2.617, 4.66, 0.8975, -1.559, 8.53, 4.254, 3.703, -2.77, -1.094, -0.3862, -6.91, 3.57, -1.119], [6.875, -1.667, 7.59, 3.344, -4.605, -6.832, 3.945, -6.25, 6.723, -11.9, -1.944, -7.41, -3.506, 5.695, -0.411, 3.264], [4.098, -10.34, -2.14, 4.15, -9.91, 3.969, 6.387, 2.559, 13.16, -8.54, 4.266, -11.42, 2.064, 7.332, -6.8, -9.16], [-4.93, 7.02, -7.42, -6.457, 3.5, -6.523, -2.35, 4.273, -0.03093, 5.184, -5.973, 4.348, -10.6, -0.408, 1.912, -3.682], [-1.822, 4.86, 1.141, 4.684, -3.133, -3.885, -3.908, 1.088, -1.268, -6.85, 1.563, -1.574, -11.0, 2.74, -0.5015, -0.5273]]], np.float16),
]

DEBUG_OPTIONS = {}


def run(inputs):
    """Compile and run as jax's XLA:CPU client does: HLO text -> HloModule ->
    StableHLO -> compile_and_load, with DEBUG_OPTIONS (the DebugOptions fields the
    Python binding exposes are set there, any other as an option override)."""
    module = xc.hlo.hlo_module_from_text(HLO)
    stablehlo = jaxlib_ext.mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
    options = xc.CompileOptions()
    debug = options.executable_build_options.debug_options
    overrides = []
    for name, value in DEBUG_OPTIONS.items():
        if hasattr(debug, name):
            setattr(debug, name, value)
        else:
            overrides.append((name, value))
    if overrides:
        options.env_option_overrides = overrides
    cpu = backend.get_backend("cpu")
    device = cpu.local_devices()[0]
    with jax.enable_x64(True):  # keep 64-bit inputs and results as they are
        executable = cpu.compile_and_load(stablehlo, [device], options)
        outputs = executable.execute([jax.device_put(x, device) for x in inputs])
        return [np.array(o) for o in outputs]

# The value the semantics give (None: not compared).
EXPECTED = [
    np.array([[[-np.inf, -np.inf, -np.inf, -np.inf, -np.inf, np.inf, -np.inf, -np.inf, np.inf, np.inf, -np.inf, -np.inf, np.inf, np.inf, -np.inf, -np.inf], [np.inf, np.inf, -np.inf, -np.inf, np.inf, np.inf, -np.inf, -np.inf, np.inf, np.inf, -np.inf, -np.inf, np.inf, np.inf, -np.inf, -np.inf], [np.inf, np.inf, -np.inf, -np.inf, -np.inf, np.inf, -np.inf, -np.inf, -np.inf, -np.inf, np.inf, np.inf, np.inf, np.inf, -np.inf, -np.inf], [np.inf, -np.inf, -np.inf, np.inf, np.inf, np.inf, np.inf, -np.inf, -np.inf, -np.inf, np.inf, np.inf, np.inf, -np.inf, -np.inf, -np.inf], [np.inf, -np.inf, -np.inf, -np.inf, np.inf, -np.inf, np.inf, np.inf, np.inf, -np.inf, np.inf, -np.inf, np.inf, np.inf, -np.inf, -np.inf], [-np.inf, np.inf, np.inf, np.inf, -np.inf, np.inf, np.inf, np.inf, np.inf, -np.inf, np.inf, -np.inf, -np.inf, np.inf, -np.inf, -np.inf], [np.inf, np.inf, -np.inf, np.inf, -np.inf, np.inf, np.inf, np.inf, -np.inf, -np.inf, np.inf, -np.inf, np.inf, -np.inf, -np.inf, np.inf], [-np.inf, np.inf, -np.inf, -np.inf, -np.inf, -np.inf, -np.inf, np.inf, np.inf, np.inf, np.inf, np.inf, np.inf, np.inf, np.inf, -np.inf], [-np.inf, -np.inf, -np.inf, -np.inf, np.inf, np.inf, np.inf, -np.inf, -np.inf, np.inf, -np.inf, np.inf, -np.inf, np.inf, -np.inf, np.inf], [-np.inf, np.inf, np.inf, np.inf, -np.inf, -np.inf, -np.inf, -np.inf, np.inf, np.inf, np.inf, np.inf, np.inf, -np.inf, np.inf, -np.inf], [-np.inf, -np.inf, np.inf, np.inf, -np.inf, np.inf, np.inf, np.inf, -np.inf, np.inf, -np.inf, np.inf, -np.inf, -np.inf, np.inf, np.inf], [np.inf, np.inf, np.inf, -np.inf, np.inf, -np.inf, -np.inf, -np.inf, -np.inf, np.inf, -np.inf, np.inf, np.inf, -np.inf, np.inf, np.inf], [-np.inf, np.inf, np.inf, -np.inf, -np.inf, -np.inf, np.inf, -np.inf, np.inf, np.inf, -np.inf, np.inf, -np.inf, -np.inf, -np.inf, np.inf], [np.inf, np.inf, np.inf, -np.inf, np.inf, -np.inf, -np.inf, np.inf, -np.inf, np.inf, np.inf, -np.inf, np.inf, -np.inf, np.inf, np.inf], [np.inf, np.inf, -np.inf, -np.inf, np.inf, -np.inf, np.inf, -np.inf, -np.inf, -np.inf, np.inf, np.inf, np.inf, np.inf, np.inf, np.inf], [np.inf, -np.inf, -np.inf, -np.inf, -np.inf, np.inf, np.inf, -np.inf, -np.inf, np.inf, np.inf, -np.inf, np.inf, -np.inf, -np.inf, -np.inf]], [[np.inf, np.inf, np.inf, -np.inf, np.inf, np.inf, np.inf, -np.inf, -np.inf, np.inf, -np.inf, -np.inf, np.inf, np.inf, -np.inf, -np.inf], [-np.inf, -np.inf, -np.inf, np.inf, np.inf, -np.inf, -np.inf, -np.inf, np.inf, np.inf, -np.inf, np.inf, -np.inf, np.inf, np.inf, np.inf], [-np.inf, -np.inf, -np.inf, -np.inf, -np.inf, -np.inf, -np.inf, -np.inf, -np.inf, np.inf, -np.inf, -np.inf, -np.inf, -np.inf, -np.inf, -np.inf], [np.inf, -np.inf, -np.inf, np.inf, -np.inf, -np.inf, np.inf, -np.inf, -np.inf, -np.inf, np.inf, -np.inf, -np.inf, np.inf, -np.inf, -np.inf], [-np.inf, np.inf, np.inf, -np.inf, -np.inf, -np.inf, np.inf, -np.inf, np.inf, np.inf, np.inf, np.inf, np.inf, -np.inf, -np.inf, np.inf], [-np.inf, -np.inf, -np.inf, np.inf, np.inf, -np.inf, np.inf, np.inf, -np.inf, np.inf, np.inf, np.inf, np.inf, np.inf, np.inf, -np.inf], [-np.inf, -np.inf, np.inf, np.inf, np.inf, np.inf, -np.inf, -np.inf, -np.inf, -np.inf, -np.inf, np.inf, -np.inf, np.inf, np.inf, np.inf], [np.inf, np.inf, -np.inf, -np.inf, -np.inf, np.inf, np.inf, -np.inf, np.inf, -np.inf, np.inf, -np.inf, -np.inf, np.inf, -np.inf, np.inf], [-np.inf, -np.inf, -np.inf, -np.inf, np.inf, np.inf, -np.inf, np.inf, np.inf, np.inf, np.inf, np.inf, np.inf, -np.inf, -np.inf, -np.inf], [np.inf, np.inf, -np.inf, -np.inf, -np.inf, -np.inf, np.inf, -np.inf, -np.inf, np.inf, np.inf, -np.inf, np.inf, -np.inf, -np.inf, -np.inf], [-np.inf, np.inf, np.inf, -np.inf, -np.inf, np.inf, np.inf, np.inf, -np.inf, np.inf, -np.inf, np.inf, np.inf, -np.inf, np.inf, -np.inf], [-np.inf, -np.inf, np.inf, np.inf, -np.inf, -np.inf, np.inf, -np.inf, -np.inf, -np.inf, np.inf, np.inf, np.inf, np.inf, -np.inf, np.inf], [-np.inf, np.inf, -np.inf, -np.inf, np.inf, np.inf, -np.inf, np.inf, -np.inf, np.inf, np.inf, np.inf, np.inf, -np.inf, np.inf, -np.inf], [-np.inf, np.inf, np.inf, -np.inf, np.inf, -np.inf, -np.inf, -np.inf, -np.inf, np.inf, -np.inf, np.inf, -np.inf, -np.inf, np.inf, np.inf], [np.inf, -np.inf, np.inf, np.inf, -np.inf, np.inf, np.inf, -np.inf, np.inf, -np.inf, np.inf, -np.inf, np.inf, np.inf, -np.inf, np.inf], [np.inf, -np.inf, -np.inf, -np.inf, np.inf, np.inf, np.inf, -np.inf, np.inf, np.inf, -np.inf, np.inf, np.inf, -np.inf, np.inf, np.inf]]], np.float16),
]


def value_differs(got, want):
    """Elementwise: not the same value (a float's sign counts; NaN equals NaN)."""
    if got.dtype.kind == "c":
        return value_differs(got.real, want.real) | value_differs(got.imag, want.imag)
    if "float" in got.dtype.name:
        g, w = got.astype(np.float64), want.astype(np.float64)
        same = (g == w) & (np.signbit(g) == np.signbit(w))
        return ~(same | (np.isnan(g) & np.isnan(w)))
    return got.astype(np.int64) != want.astype(np.int64)


def first_difference(got, want):
    """None when the result leaves ``got`` are the values ``want``, else where they differ."""
    if len(got) != len(want):
        return f"{len(got)} result leaves, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        if g.dtype != w.dtype or g.shape != w.shape:
            return f"result[{i}] is {g.dtype}{list(g.shape)}, expected {w.dtype}{list(w.shape)}"
        bad = np.argwhere(value_differs(g, w))
        if len(bad):
            at = tuple(int(k) for k in bad[0])
            return f"result[{i}] at index {at}: got {g[at]!r}, expected {w[at]!r}"
    return None


def report_results(results, expected):
    """Print each result leaf (readable, then its ``@leaf`` line) and the comparison."""
    for i, r in enumerate(results):
        print(f"result[{i}] {r.dtype.name}{list(r.shape)} = {r.tolist()!r}")
        print("@leaf", json.dumps({"i": i, "dtype": r.dtype.name, "shape": list(r.shape),
                                   "hex": r.tobytes().hex()}))
    if expected is not None:
        where = first_difference(results, expected)
        print("MATCH" if where is None else f"MISMATCH {where}")


if EXPECTED is not None:
    for i, e in enumerate(EXPECTED):
        print(f"expected[{i}] {e.dtype.name}{list(e.shape)} = {e.tolist()!r}", flush=True)
report_results(run(INPUTS), EXPECTED)
