"""batch-norm-inference on the GPU backend (fallback disabled) against the cpu backend (bit
for bit), XLA:CPU and a numpy f64 reference."""

from __future__ import annotations

import numpy as np
import pytest

from hloref.fuzz.compare import accumulation_atol
from hloref.types import element_type

from gpu_check import check, values

BN = """HloModule b
ENTRY e {{
  x = {t}{dims} parameter(0)
  s = {t}[{c}] parameter(1)
  o = {t}[{c}] parameter(2)
  m = {t}[{c}] parameter(3)
  v = {t}[{c}] parameter(4)
  ROOT y = {t}{dims} batch-norm-inference(x, s, o, m, v), epsilon=0.001, feature_index={fi}
}}
"""


@pytest.mark.parametrize("t", ["f32", "bf16", "f64", "f16"])
@pytest.mark.parametrize("fi", [0, 1, 2])
def test_batch_norm_inference(t, fi):
    dims = (2, 3, 4)
    c = dims[fi]
    x = values(t, dims, kind="unit")
    s, o, m = values(t, (c,), kind="unit"), values(t, (c,), kind="unit"), values(t, (c,), kind="unit")
    v = values(t, (c,), kind="positive")
    text = BN.format(t=t, dims="[" + ",".join(map(str, dims)) + "]", c=c, fi=fi)
    # XLA:CPU's expander computes in the element type (rounding each step): a few
    # roundings of the terms' magnitude
    f64 = [a.astype(np.float64) for a in (x, s, o, m, v)]
    shape = [1, 1, 1]
    shape[fi] = c
    sf, of, mf, vf = (a.reshape(shape) for a in f64[1:])
    terms = np.abs(f64[0] - mf) * np.abs(sf) / np.sqrt(vf + 0.001) + np.abs(of)
    out = check(text, x, s, o, m, v, xla="required",
                atol=accumulation_atol(4, terms, element_type(t)))
    want = (f64[0] - mf) * (1.0 / np.sqrt(vf + np.float64(np.float32(0.001)).astype(np.float64)
                                          .astype(x.dtype).astype(np.float64)) * sf) + of
    np.testing.assert_allclose(out.astype(np.float64), want, rtol=2 ** -7, atol=1e-2)


BN_TRAIN = """HloModule b
ENTRY e {{
  x = {t}[2,3,4] parameter(0)
  s = {t}[{c}] parameter(1)
  o = {t}[{c}] parameter(2)
  ROOT y = ({t}[2,3,4], {t}[{c}], {t}[{c}]) batch-norm-training(x, s, o), epsilon=0.001, feature_index={fi}
}}
"""

BN_GRAD = """HloModule g
ENTRY e {{
  x = {t}[2,3,4] parameter(0)
  s = {t}[{c}] parameter(1)
  m = {t}[{c}] parameter(2)
  v = {t}[{c}] parameter(3)
  dy = {t}[2,3,4] parameter(4)
  ROOT g = ({t}[2,3,4], {t}[{c}], {t}[{c}]) batch-norm-grad(x, s, m, v, dy), epsilon=0.001, feature_index={fi}
}}
"""


@pytest.mark.parametrize("t", ["f32", "bf16", "f64"])
@pytest.mark.parametrize("fi", [0, 2])
def test_batch_norm_training_and_grad(t, fi):
    c = (2, 3, 4)[fi]
    et = element_type(t)
    x, dy = values(t, (2, 3, 4), kind="unit"), values(t, (2, 3, 4), kind="unit")
    s, o, m = values(t, (c,), kind="unit"), values(t, (c,), kind="unit"), values(t, (c,), kind="unit")
    v = values(t, (c,), kind="positive")
    # sums of up to 12 terms in another order (hloref: f64 pairwise vs sequential; XLA:CPU
    # in the type, E[x^2] - E[x]^2): a few roundings of results of magnitude <= 5
    # (measured: at most 4.8e-7 from XLA in f32, 0 in bf16, 8.9e-16 from the cpu in f64)
    eps = 2.0 ** -(et.float_format.mantissa_bits)
    atol = 16 * eps
    train = BN_TRAIN.format(t=t, c=c, fi=fi)
    check(train, x, s, o, opcode="batch-norm-training", exact=False, xla="required", atol=atol)
    grad = BN_GRAD.format(t=t, c=c, fi=fi)
    check(grad, x, s, m, v, dy, opcode="batch-norm-grad", exact=False, xla="required", atol=atol)
    # by hand: the training mean and variance of each feature
    y, mean, var = check(train, x, s, o, opcode="batch-norm-training", exact=False, xla=False,
                         atol=atol)
    axes = tuple(d for d in range(3) if d != fi)
    xf = x.astype(np.float64)
    np.testing.assert_allclose(mean.astype(np.float64), xf.mean(axis=axes), rtol=4 * eps, atol=4 * eps)
    np.testing.assert_allclose(var.astype(np.float64), xf.var(axis=axes), rtol=4 * eps, atol=4 * eps)
