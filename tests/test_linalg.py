"""cholesky, triangular-solve, fft and batch-norm-* (hloref.evaluator.linalg) against XLA:CPU.

XLA:CPU is the oracle (``run_hlo``); it computes in the element type, hloref in f64 and
rounds once, so floats are compared with an absolute tolerance scaled by the size of the
problem and the magnitude of the result. Matrices are well conditioned (SPD as
``A A^H + n I``; triangular with a dominant diagonal).
"""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("jax")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import hloref  # noqa: E402
from hloref.fuzz.compare import compare_values  # noqa: E402
from hloref.fuzz.oracles.xla import run_hlo  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

def SETTINGS_N(n):
    return settings(max_examples=n, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


SETTINGS = SETTINGS_N(20)

DTYPES = {"f32": np.float32, "f64": np.float64, "c64": np.complex64, "c128": np.complex128,
          "f16": np.float16, "bf16": ml_dtypes.bfloat16}
EPS = {"f32": 2.0**-23, "f64": 2.0**-52, "c64": 2.0**-23, "c128": 2.0**-52, "f16": 2.0**-10,
       "bf16": 2.0**-7}


def module(body: str, name: str = "m") -> str:
    return f"HloModule {name}\n\nENTRY main {{\n{body}\n}}\n"


def dims_text(shape) -> str:
    return ",".join(str(d) for d in shape)


def check(text, args, opcode, atol):
    xla = run_hlo(text, *args)
    ours = hloref.evaluate(text, *args)
    verdict = compare_values(xla, ours, opcode=opcode, atol=atol)
    assert verdict.ok, f"{verdict}\n{text}\nxla={xla}\nhloref={ours}"
    return xla, ours


def random_array(rng, shape, t):
    x = rng.standard_normal(shape)
    if t.startswith("c"):
        x = x + 1j * rng.standard_normal(shape)
    return x


def spd(rng, batch, n, t):
    a = random_array(rng, batch + (n, n), t)
    return a @ np.swapaxes(a.conj(), -1, -2) + n * np.eye(n)


batch_dims = st.lists(st.integers(1, 3), min_size=0, max_size=2).map(tuple)


# ---------------------------------------------------------------------------
# cholesky
# ---------------------------------------------------------------------------

@SETTINGS_N(12)
@given(t=st.sampled_from(["f32", "f64", "c64", "c128"]), batch=batch_dims,
       n=st.integers(1, 8), lower=st.booleans(), seed=st.integers(0, 2**31))
def test_cholesky_against_xla(t, batch, n, lower, seed):
    rng = np.random.default_rng(seed)
    a = spd(rng, batch, n, t)
    # the unread triangle holds garbage
    read = np.tril(np.ones((n, n), bool)) if lower else np.triu(np.ones((n, n), bool))
    a = np.where(read, a, 1e3 * random_array(rng, a.shape, t)).astype(DTYPES[t])
    d = dims_text(a.shape)
    text = module(f"  a = {t}[{d}] parameter(0)\n"
                  f"  ROOT c = {t}[{d}] cholesky(a), lower={'true' if lower else 'false'}")
    scale = float(np.sqrt(np.abs(a).max()))
    xla, ours = check(text, [a], "cholesky", atol=16 * n * EPS[t] * scale)
    other = ~read
    assert np.all(ours[..., other] == 0)  # the other triangle is zero, as in XLA
    # and the factor is a factor (of the Hermitian matrix the triangle describes)
    w = ours.astype(np.complex128)
    full = np.where(read, a, np.swapaxes(a, -1, -2).conj()).astype(np.complex128)
    rebuilt = (w @ np.swapaxes(w.conj(), -1, -2) if lower
               else np.swapaxes(w.conj(), -1, -2) @ w)
    np.testing.assert_allclose(rebuilt, full, atol=64 * n * EPS[t] * np.abs(full).max())


def test_cholesky_not_positive_definite_gives_nan_per_batch_element():
    rng = np.random.default_rng(0)
    a = spd(rng, (3,), 3, "f32").astype(np.float32)
    a[1] = -a[1]
    text = module("  a = f32[3,3,3] parameter(0)\n  ROOT c = f32[3,3,3] cholesky(a), lower=true")
    xla, ours = check(text, [a], "cholesky", atol=1e-5)
    assert np.isnan(ours[1]).all() and not np.isnan(ours[[0, 2]]).any()


@pytest.mark.parametrize("lower", ["true", "false"])
def test_cholesky_edge_cases(lower):
    # zero pivot at the end is not an error; a zero first pivot of a larger matrix is
    a = np.array([[[4, 2], [2, 1]], [[0, 0], [0, 1]], [[1, 0], [0, 0]]], np.float64)
    text = module(f"  a = f64[3,2,2] parameter(0)\n  ROOT c = f64[3,2,2] cholesky(a), lower={lower}")
    xla, ours = check(text, [a], "cholesky", atol=1e-15)
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(xla))
    one = module("  a = f32[1,1] parameter(0)\n  ROOT c = f32[1,1] cholesky(a), lower=true")
    for v in (0.0, -1.0, 9.0, np.nan):
        check(one, [np.array([[v]], np.float32)], "cholesky", atol=0)


def test_cholesky_complex_diagonal_imaginary_part_matches_xla():
    # Not Hermitian: the diagonal's imaginary part leaks into L's diagonal in XLA:CPU
    # (except for one-column blocks).
    rng = np.random.default_rng(3)
    for n in (1, 4):
        a = (spd(rng, (2,), n, "c64") + 1j * np.eye(n)).astype(np.complex64)
        for lower in ("true", "false"):
            text = module(f"  a = c64[2,{n},{n}] parameter(0)\n"
                          f"  ROOT c = c64[2,{n},{n}] cholesky(a), lower={lower}")
            check(text, [a], "cholesky", atol=1e-5)


@pytest.mark.parametrize("t", ["f16", "bf16"])
def test_cholesky_narrow(t):
    rng = np.random.default_rng(5)
    a = spd(rng, (2,), 4, "f32").astype(DTYPES[t])
    text = module(f"  a = {t}[2,4,4] parameter(0)\n  ROOT c = {t}[2,4,4] cholesky(a), lower=true")
    check(text, [a], "cholesky", atol=8 * EPS[t] * 4)


def test_cholesky_zero_size():
    text = module("  a = f32[0,3,3] parameter(0)\n  ROOT c = f32[0,3,3] cholesky(a), lower=true")
    assert hloref.evaluate(text, np.zeros((0, 3, 3), np.float32)).shape == (0, 3, 3)


# ---------------------------------------------------------------------------
# triangular-solve
# ---------------------------------------------------------------------------

def triangular_a(rng, batch, n, t):
    a = random_array(rng, batch + (n, n), t)
    return a + (2 * n) * np.eye(n)


@SETTINGS_N(15)
@given(t=st.sampled_from(["f32", "f64", "c64", "c128"]), batch=batch_dims,
       n=st.integers(1, 8), k=st.integers(1, 8), left=st.booleans(), lower=st.booleans(),
       unit=st.booleans(), trans=st.sampled_from(["NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"]),
       seed=st.integers(0, 2**31))
def test_triangular_solve_against_xla(t, batch, n, k, left, lower, unit, trans, seed):
    rng = np.random.default_rng(seed)
    a = triangular_a(rng, batch, n, t)
    if unit:  # the diagonal is not read: put garbage there
        a = a + 1e3 * np.eye(n)
    a = a.astype(DTYPES[t])
    b = random_array(rng, batch + ((n, k) if left else (k, n)), t).astype(DTYPES[t])
    text = module(
        f"  a = {t}[{dims_text(a.shape)}] parameter(0)\n"
        f"  b = {t}[{dims_text(b.shape)}] parameter(1)\n"
        f"  ROOT x = {t}[{dims_text(b.shape)}] triangular-solve(a, b), "
        f"left_side={str(left).lower()}, lower={str(lower).lower()}, "
        f"unit_diagonal={str(unit).lower()}, transpose_a={trans}")
    xla, ours = check(text, [a, b], "triangular-solve",
                      atol=64 * n * EPS[t] * max(1.0, float(np.abs(b).max())))
    # the residual, with the triangle as read
    mask = np.tril(np.ones((n, n), bool)) if lower else np.triu(np.ones((n, n), bool))
    T = np.where(mask, a, 0).astype(np.complex128)
    if unit:
        T = np.where(np.eye(n, dtype=bool), 1, T)
    if trans == "TRANSPOSE":
        T = np.swapaxes(T, -1, -2)
    elif trans == "ADJOINT":
        T = np.swapaxes(T, -1, -2).conj()
    x = ours.astype(np.complex128)
    got = T @ x if left else x @ T
    np.testing.assert_allclose(got, b, atol=64 * n * EPS[t] * max(1.0, np.abs(b).max()))


@pytest.mark.parametrize("t", ["f16", "bf16"])
def test_triangular_solve_narrow(t):
    rng = np.random.default_rng(2)
    a = triangular_a(rng, (), 4, "f32").astype(DTYPES[t])
    b = rng.standard_normal((4, 3)).astype(DTYPES[t])
    text = module(f"  a = {t}[4,4] parameter(0)\n  b = {t}[4,3] parameter(1)\n"
                  f"  ROOT x = {t}[4,3] triangular-solve(a, b), left_side=true, lower=true, "
                  f"unit_diagonal=false, transpose_a=NO_TRANSPOSE")
    check(text, [a, b], "triangular-solve", atol=8 * EPS[t])


@pytest.mark.parametrize("left", ["true", "false"])
@pytest.mark.parametrize("lower", ["true", "false"])
def test_triangular_solve_non_finite_like_xla(left, lower):
    # XLA multiplies by the inverse triangle: NaN/inf spread along whole columns/rows
    a = np.array([[2, 3, 1], [1, 4, 2], [1, 1, 5]], np.float32)
    b = np.array([[np.inf, 1, 1], [1, np.nan, 1], [1, 1, 1]], np.float32)
    singular = a.copy()
    singular[1, 1] = 0
    text = module("  a = f32[3,3] parameter(0)\n  b = f32[3,3] parameter(1)\n"
                  f"  ROOT x = f32[3,3] triangular-solve(a, b), left_side={left}, "
                  f"lower={lower}, unit_diagonal=false, transpose_a=NO_TRANSPOSE")
    for args in ([a, b], [singular, np.ones((3, 3), np.float32)]):
        xla, ours = check(text, args, "triangular-solve", atol=1e-5)
        np.testing.assert_array_equal(np.isnan(ours), np.isnan(xla))
        np.testing.assert_array_equal(np.isinf(ours), np.isinf(xla))


def test_triangular_solve_exact_small():
    # [[2, 0], [1, 4]] x = [[2], [9]] -> x = [[1], [2]]; the upper triangle is garbage
    a = np.array([[2, 99], [1, 4]], np.float64)
    b = np.array([[2], [9]], np.float64)
    text = module("  a = f64[2,2] parameter(0)\n  b = f64[2,1] parameter(1)\n"
                  "  ROOT x = f64[2,1] triangular-solve(a, b), left_side=true, lower=true, "
                  "unit_diagonal=false, transpose_a=NO_TRANSPOSE")
    np.testing.assert_array_equal(hloref.evaluate(text, a, b), [[1.0], [2.0]])


# ---------------------------------------------------------------------------
# fft
# ---------------------------------------------------------------------------

fft_case = st.tuples(st.sampled_from(["FFT", "IFFT", "RFFT", "IRFFT"]),
                     st.sampled_from(["single", "double"]),
                     st.lists(st.integers(1, 8), min_size=0, max_size=2),
                     st.lists(st.integers(1, 8), min_size=1, max_size=3),
                     st.integers(0, 2**31))


@SETTINGS
@given(case=fft_case)
def test_fft_against_xla(case):
    kind, width, batch, lengths, seed = case
    rng = np.random.default_rng(seed)
    real, cplx = ("f32", "c64") if width == "single" else ("f64", "c128")
    shape = tuple(batch) + tuple(lengths)
    half = tuple(batch) + tuple(lengths[:-1]) + (lengths[-1] // 2 + 1,)
    if kind in ("FFT", "IFFT"):
        in_t, in_shape, out_t, out_shape = cplx, shape, cplx, shape
    elif kind == "RFFT":
        in_t, in_shape, out_t, out_shape = real, shape, cplx, half
    else:
        in_t, in_shape, out_t, out_shape = cplx, half, real, shape
    x = random_array(rng, in_shape, in_t).astype(DTYPES[in_t])
    text = module(f"  a = {in_t}[{dims_text(in_shape)}] parameter(0)\n"
                  f"  ROOT f = {out_t}[{dims_text(out_shape)}] fft(a), fft_type={kind}, "
                  f"fft_length={{{dims_text(lengths)}}}")
    size = int(np.prod(lengths))
    check(text, [x], "fft", atol=8 * EPS[in_t] * np.log2(size + 1) * np.sqrt(size) + 1e-300)


def test_fft_lowered_by_jax():
    import jax
    import jax.numpy as jnp
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((3, 4, 5)) + 1j * rng.standard_normal((3, 4, 5))).astype(np.complex64)
    r = rng.standard_normal((3, 4, 6)).astype(np.float32)
    cases = [(jnp.fft.fft, x), (jnp.fft.ifft2, x), (jnp.fft.fftn, x), (jnp.fft.rfft, r),
             (jnp.fft.rfft2, r), (jnp.fft.irfft, x), (jnp.fft.irfftn, x)]
    for fn, arg in cases:
        text = jax.jit(fn).lower(arg).as_text(dialect="hlo")
        assert " fft(" in text
        check(text, [arg], "fft", atol=1e-5)


def test_fft_zero_size_and_known_values():
    text = module("  a = c64[0,4] parameter(0)\n  ROOT f = c64[0,4] fft(a), fft_type=FFT, "
                  "fft_length={4}")
    assert hloref.evaluate(text, np.zeros((0, 4), np.complex64)).shape == (0, 4)
    text = module("  a = f64[4] parameter(0)\n  ROOT f = c128[3] fft(a), fft_type=RFFT, "
                  "fft_length={4}")
    np.testing.assert_array_equal(hloref.evaluate(text, np.array([1.0, 2, 3, 4])),
                                  [10, -2 + 2j, -2])


# ---------------------------------------------------------------------------
# batch norm
# ---------------------------------------------------------------------------

bn_case = st.tuples(st.sampled_from(["f32", "f64", "f16", "bf16"]),
                    st.lists(st.integers(1, 6), min_size=1, max_size=4),
                    st.integers(0, 3), st.sampled_from([0.001, 0.1, 1e-5]),
                    st.integers(0, 2**31))


def bn_tolerance(t, n):
    return (4 if t in ("f16", "bf16") else 64 * n) * EPS[t] * 8


@SETTINGS_N(8)
@given(case=bn_case)
def test_batch_norm_against_xla(case):
    t, shape, fi, eps, seed = case
    shape = tuple(shape)
    fi = fi % len(shape)
    rng = np.random.default_rng(seed)
    dt = DTYPES[t]
    C = shape[fi]
    n = int(np.prod(shape)) // C
    d = dims_text(shape)
    x = (rng.standard_normal(shape) * 2 + 0.5).astype(dt)
    scale = rng.standard_normal(C).astype(dt)
    offset = rng.standard_normal(C).astype(dt)
    tol = bn_tolerance(t, n)
    text = module(f"  x = {t}[{d}] parameter(0)\n  s = {t}[{C}] parameter(1)\n"
                  f"  o = {t}[{C}] parameter(2)\n"
                  f"  ROOT r = ({t}[{d}], {t}[{C}], {t}[{C}]) batch-norm-training(x, s, o), "
                  f"epsilon={eps}, feature_index={fi}")
    # y is normalised (|y| ~ |scale| * few); var's error scales with var
    xla, ours = check(text, [x, scale, offset], "batch-norm-training",
                      atol={(0,): 16 * tol, (1,): tol * 4, (2,): tol * 16})
    mean = rng.standard_normal(C).astype(dt)
    var = (rng.random(C) + 0.5).astype(dt)
    text = module(f"  x = {t}[{d}] parameter(0)\n  s = {t}[{C}] parameter(1)\n"
                  f"  o = {t}[{C}] parameter(2)\n  m = {t}[{C}] parameter(3)\n"
                  f"  v = {t}[{C}] parameter(4)\n"
                  f"  ROOT r = {t}[{d}] batch-norm-inference(x, s, o, m, v), "
                  f"epsilon={eps}, feature_index={fi}")
    check(text, [x, scale, offset, mean, var], "batch-norm-inference", atol=16 * tol)
    dy = rng.standard_normal(shape).astype(dt)
    text = module(f"  x = {t}[{d}] parameter(0)\n  s = {t}[{C}] parameter(1)\n"
                  f"  m = {t}[{C}] parameter(2)\n  v = {t}[{C}] parameter(3)\n"
                  f"  dy = {t}[{d}] parameter(4)\n"
                  f"  ROOT r = ({t}[{d}], {t}[{C}], {t}[{C}]) batch-norm-grad(x, s, m, v, dy), "
                  f"epsilon={eps}, feature_index={fi}")
    big = 64 * tol * n
    check(text, [x, scale, mean, var, dy], "batch-norm-grad",
          atol={(0,): big, (1,): big, (2,): big})


def test_batch_norm_training_by_hand():
    # feature dim 1; per feature c: values {c, c + 2} -> mean c + 1, biased var 1
    x = np.array([[0.0, 1.0], [2.0, 3.0]])
    text = module("  x = f64[2,2] parameter(0)\n  s = f64[2] parameter(1)\n"
                  "  o = f64[2] parameter(2)\n"
                  "  ROOT r = (f64[2,2], f64[2], f64[2]) batch-norm-training(x, s, o), "
                  "epsilon=0, feature_index=1")
    y, mean, var = hloref.evaluate(text, x, np.array([2.0, 1.0]), np.array([0.0, 10.0]))
    np.testing.assert_array_equal(mean, [1.0, 2.0])
    np.testing.assert_array_equal(var, [1.0, 1.0])
    np.testing.assert_array_equal(y, [[-2.0, 9.0], [2.0, 11.0]])


def test_batch_norm_grad_matches_autodiff_of_training():
    """grad_operand/grad_scale/grad_offset equal JAX's autodiff of the training formula."""
    import jax
    import jax.numpy as jnp
    with jax.enable_x64(True):
        rng = np.random.default_rng(9)
        x = rng.standard_normal((3, 4, 2))
        scale = rng.standard_normal(4)
        offset = rng.standard_normal(4)
        dy = rng.standard_normal((3, 4, 2))
        eps = float(np.float32(0.01))

        def f(x, s, o):
            m = jnp.mean(x, axis=(0, 2), keepdims=True)
            v = jnp.mean((x - m) ** 2, axis=(0, 2), keepdims=True)
            return (x - m) / jnp.sqrt(v + eps) * s[None, :, None] + o[None, :, None]

        _, vjp = jax.vjp(f, x, scale, offset)
        gx, gs, go = (np.asarray(g) for g in vjp(dy))
        mean = x.mean(axis=(0, 2))
        var = x.var(axis=(0, 2))
    text = module("  x = f64[3,4,2] parameter(0)\n  s = f64[4] parameter(1)\n"
                  "  m = f64[4] parameter(2)\n  v = f64[4] parameter(3)\n"
                  "  dy = f64[3,4,2] parameter(4)\n"
                  "  ROOT r = (f64[3,4,2], f64[4], f64[4]) batch-norm-grad(x, s, m, v, dy), "
                  "epsilon=0.01, feature_index=1")
    ours = hloref.evaluate(text, x, scale, mean, var, dy)
    for got, want in zip(ours, (gx, gs, go)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_attribute_spellings():
    # every transpose_a value and both bool spellings parse and evaluate
    a = np.eye(2)
    b = np.ones((2, 2))
    for trans, lower in itertools.product(["NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"],
                                          ["true", "false"]):
        text = module("  a = f64[2,2] parameter(0)\n  b = f64[2,2] parameter(1)\n"
                      f"  ROOT x = f64[2,2] triangular-solve(a, b), left_side=false, "
                      f"lower={lower}, unit_diagonal=true, transpose_a={trans}")
        np.testing.assert_array_equal(hloref.evaluate(text, a, b), b)
