"""batch-norm-inference on the GPU backend (fallback disabled) against the cpu backend (bit
for bit), XLA:CPU and a numpy f64 reference; batch-norm-training/-grad, cholesky and
triangular-solve against the cpu backend, XLA:CPU and numpy within the envelope."""

from __future__ import annotations

import numpy as np
import pytest

from hloref.fuzz.compare import accumulation_atol
from hloref.fuzz.error_bounds import cholesky_atol, triangular_solve_atol
from hloref.types import element_type

from gpu_check import RNG, check, values

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


# ----------------------------------------------------------------- cholesky, triangular-solve

CHOLESKY = """HloModule c
ENTRY e {{
  a = {t}[3,4,4] parameter(0)
  ROOT l = {t}[3,4,4] cholesky(a), lower={lower}
}}
"""

TRSV = """HloModule t
ENTRY e {{
  a = {t}[2,3,3] parameter(0)
  b = {t}{bdims} parameter(1)
  ROOT x = {t}{bdims} triangular-solve(a, b), left_side={left}, lower={lower}, unit_diagonal={unit}, transpose_a={trans}
}}
"""


def _matrices(t, dims):
    et = element_type(t)
    x = RNG.standard_normal(dims)
    if et.is_complex:
        x = x + 1j * RNG.standard_normal(dims)
    return x


def _spd(t, batch, n):
    x = _matrices(t, (batch, n, n))
    return (x @ np.conj(np.swapaxes(x, -1, -2)) + n * np.eye(n)).astype(element_type(t).dtype)


@pytest.mark.parametrize("t", ["f32", "f64", "c64", "c128"])
@pytest.mark.parametrize("lower", ["true", "false"])
def test_cholesky(t, lower):
    a = _spd(t, 3, 4)
    et = element_type(t)
    want = np.linalg.cholesky(a.astype(np.complex128))  # numpy: independent of both
    want = want if et.is_complex else want.real
    if lower == "false":
        want = np.conj(np.swapaxes(want, -1, -2))
    bound = cholesky_atol(a, want, lower=lower == "true", et=et)
    out = check(CHOLESKY.format(t=t, lower=lower), a, exact=False, opcode="cholesky",
                atol=bound, xla="required")
    assert np.all(np.abs(out - want) <= bound)


def test_cholesky_not_positive_definite_is_nan():
    """A negative pivot: the whole matrix of that batch element is NaN, the other stays."""
    a = _spd("f32", 3, 4)
    a[1, 2, 2] = -100.0
    want = np.full(a.shape, np.nan)
    want[[0, 2]] = np.linalg.cholesky(a[[0, 2]].astype(np.float64))
    bound = cholesky_atol(a, want, lower=True, et=element_type("f32"))
    out = check(CHOLESKY.format(t="f32", lower="true"), a, exact=False, opcode="cholesky",
                atol=bound, xla="required")
    assert np.all(np.isnan(out[1])) and not np.any(np.isnan(out[[0, 2]]))


#: (type, left_side, lower, unit_diagonal, transpose_a)
TRSV_CASES = [
    ("f32", "true", "true", "false", "NO_TRANSPOSE"),
    ("f32", "false", "false", "true", "TRANSPOSE"),
    ("f64", "true", "false", "false", "TRANSPOSE"),
    ("f64", "false", "true", "false", "NO_TRANSPOSE"),
    ("c64", "true", "true", "true", "ADJOINT"),
    ("c64", "false", "true", "false", "TRANSPOSE"),
    ("c128", "true", "false", "false", "ADJOINT"),
    ("c128", "false", "false", "false", "NO_TRANSPOSE"),
]


@pytest.mark.parametrize("t,left,lower,unit,trans", TRSV_CASES)
def test_triangular_solve(t, left, lower, unit, trans):
    et = element_type(t)
    a = _spd(t, 2, 3)  # well conditioned in both triangles
    bdims = (2, 3, 5) if left == "true" else (2, 5, 3)
    b = _matrices(t, bdims).astype(et.dtype)
    # numpy's solve on the triangle as read (independent of both backends)
    m = np.where(np.tril(np.ones((3, 3), bool)) if lower == "true" else
                 np.triu(np.ones((3, 3), bool)), a.astype(np.complex128), 0)
    if unit == "true":
        m[:, range(3), range(3)] = 1
    if trans != "NO_TRANSPOSE":
        m = np.swapaxes(m, -1, -2)
        m = np.conj(m) if trans == "ADJOINT" else m
    want = np.linalg.solve(m, b) if left == "true" else \
        np.swapaxes(np.linalg.solve(np.swapaxes(m, -1, -2), np.swapaxes(b, -1, -2)), -1, -2)
    want = want if et.is_complex else want.real
    bound = triangular_solve_atol(a, want, left_side=left == "true", lower=lower == "true",
                                  unit_diagonal=unit == "true", transpose_a=trans, et=et)
    text = TRSV.format(t=t, bdims="[" + ",".join(map(str, bdims)) + "]", left=left,
                       lower=lower, unit=unit, trans=trans)
    out = check(text, a, b, exact=False, opcode="triangular-solve", atol=bound, xla="required")
    assert np.all(np.abs(out - want) <= bound)


CBN = """HloModule b
ENTRY e {{
  x = {t}[3,4,5] parameter(0)
  a = {t}[{c}] parameter(1)
  b = {t}[{c}] parameter(2)
  m = {t}[{c}] parameter(3)
  v = {t}[{c}] parameter(4)
  dy = {t}[3,4,5] parameter(5)
  inf = {t}[3,4,5] batch-norm-inference(x, a, b, m, v), epsilon=0.001, feature_index={fi}
  tr = ({t}[3,4,5], {t}[{c}], {t}[{c}]) batch-norm-training(x, a, b), epsilon=0.001, feature_index={fi}
  gr = ({t}[3,4,5], {t}[{c}], {t}[{c}]) batch-norm-grad(x, a, m, v, dy), epsilon=0.001, feature_index={fi}
  ROOT r = ({t}[3,4,5], ({t}[3,4,5], {t}[{c}], {t}[{c}]), ({t}[3,4,5], {t}[{c}], {t}[{c}])) tuple(inf, tr, gr)
}}
"""


def _cnormal(t, shape):
    v = RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)
    return v.astype(np.complex64 if t == "c64" else np.complex128)


@pytest.mark.parametrize("t", ["c64", "c128"])
@pytest.mark.parametrize("fi", [0, 2])
def test_batch_norm_complex_unverified(t, fi):
    """The verifier (and XLA) take real floats only; unverified, the cpu backend runs its
    formulas in c128, and so does the gpu backend (fallback disabled): against the cpu
    backend within a few ulps and a numpy c128 derivation of the formulas."""
    import warnings
    import hloref
    from hloref.fuzz.compare import compare_values
    c = (3, 4, 5)[fi]
    x, a, b, m, dy = (_cnormal(t, s) for s in ((3, 4, 5), (c,), (c,), (c,), (3, 4, 5)))
    v = (np.abs(_cnormal(t, (c,))) + 0.5 + 0.25j).astype(x.dtype)
    text = CBN.format(t=t, c=c, fi=fi)
    args = (x, a, b, m, v, dy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the cpu's epsilon of a complex type warns
        cpu = hloref.evaluate(text, *args, verify=False)
        gpu = hloref.evaluate(text, *args, verify=False, backend="gpu", fallback=False)
    assert hloref.gpu.last_report.total == 0
    atol = accumulation_atol(60, 200.0, element_type(t))

    def leaves(v):
        return [w for u in v for w in (leaves(u) if isinstance(u, tuple) else [u])]
    for g, cc in zip(leaves(gpu), leaves(cpu)):
        verdict = compare_values(g, cc, opcode="batch-norm-training", atol=atol)
        assert verdict.ok, str(verdict)
    # by hand (c128): inference and the training mean
    eps = float(np.float32(0.001))
    sh = [1, 1, 1]
    sh[fi] = c
    w = x.astype(np.complex128)
    inv = 1.0 / np.sqrt(v.astype(np.complex128) + eps)
    want = (w - m.reshape(sh)) * (inv * a).reshape(sh) + b.reshape(sh)
    np.testing.assert_allclose(gpu[0], want.astype(x.dtype), rtol=1e-4, atol=1e-4)
    axes = tuple(d for d in range(3) if d != fi)
    np.testing.assert_allclose(gpu[1][1], w.mean(axis=axes), rtol=1e-5, atol=1e-6)
