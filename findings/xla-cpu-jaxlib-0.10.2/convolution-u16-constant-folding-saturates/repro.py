# jaxlib XLA:CPU reproducer: needs only jax/jaxlib, numpy and ml_dtypes.
# When found, it returned [[[0, 65535, 0, 65535, 0], [0, 65535, 0, 65535, 0]], [[0, 65535, 0, 65535, 0], [0, 65535, 0, 65535, 0]]].
import json

import jax
import jaxlib._jax as jaxlib_ext
import ml_dtypes
import numpy as np
from jax.extend import backend
from jaxlib import xla_client as xc

HLO = r"""
HloModule fuzz_14

ENTRY %main.14 {
  %constant.6 = u16[] constant(65535)
  %broadcast.8 = u16[2,2,4] broadcast(%constant.6), dimensions={}
  %constant.9 = u16[2,2,1] constant({ { {6}, {6} }, { {3}, {2} } })
  ROOT %convolution.10 = u16[2,2,5] convolution(%broadcast.8, %constant.9), window={size=1 pad=1_1 lhs_dilate=2}, dim_labels=f0b_oi0->fb0, batch_group_count=2
}
"""

# One array per entry parameter leaf (tuple parameters flattened), in order.
INPUTS = []

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
    np.array([[[0, 65524, 0, 65524, 0], [0, 65524, 0, 65524, 0]], [[0, 65531, 0, 65531, 0], [0, 65531, 0, 65531, 0]]], np.uint16),
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
