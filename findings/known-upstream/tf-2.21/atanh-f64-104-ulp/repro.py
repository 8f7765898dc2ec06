# TensorFlow XLA:CPU reproducer: needs only tensorflow, numpy and ml_dtypes.
# When found, it returned [0.4366406370115513].
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import ml_dtypes
import numpy as np
import tensorflow as tf
from tensorflow.compiler.tf2xla.python import xla as tfxla

# The HLO module; TF takes no HLO text, so it runs the StableHLO that jaxlib converts it to
# (hlo_to_stablehlo), printed below.
# HloModule fuzz_3
#
# ENTRY %main.3 {
#   %x0 = f64[1] parameter(0)
#   ROOT %atanh.2 = f64[1] atanh(%x0)
# }

STABLEHLO = r"""
module @fuzz_3 attributes {mhlo.cross_program_prefetches = [], mhlo.input_output_alias = [], mhlo.is_dynamic = false, mhlo.use_auto_spmd_partitioning = false} {
  func.func @main(%arg0: tensor<1xf64>) -> tensor<1xf64> {
    %0 = stablehlo.custom_call @mhlo.atanh(%arg0) {mhlo.attributes = {}, mhlo.version = 1 : i64} : (tensor<1xf64>) -> tensor<1xf64>
    return %0 : tensor<1xf64>
  }
}
"""

# One array per entry parameter leaf (tuple parameters flattened), in order.
INPUTS = [
    np.array([0.41085600773100933], np.float64),
]

# Types TF has no usable dtype for cross as a carrier type (main converts).
TO_TF = [lambda x: x]
FROM_TF = [lambda x: x]
TOUT = [np.float64]
SOUT = [(1,)]


def run(inputs):
    """TF's XLA:CPU runs the StableHLO through XlaCallModule under jit_compile=True."""
    args = [tf.constant(to_tf(x)) for x, to_tf in zip(inputs, TO_TF)]
    version = min(10, int(tfxla.call_module_maximum_supported_version()))

    @tf.function(jit_compile=True, autograph=False)
    def call(*xs):
        return tfxla.call_module(
            list(xs), version=version, module=STABLEHLO, Tout=[tf.as_dtype(t) for t in TOUT],
            Sout=SOUT, platforms=["CPU"], function_list=[], has_token_input_output=False,
            disabled_checks=[])

    with tf.device("/CPU:0"):
        outputs = call(*args)
    return [from_tf(np.asarray(o.numpy())) for o, from_tf in zip(outputs, FROM_TF)]

# The value the semantics give (None: not compared).
EXPECTED = [
    np.array([0.4366406370115571], np.float64),
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
