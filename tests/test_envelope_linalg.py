"""The numerical envelope (fuzz/envelope.py) on complex values and linear algebra:
complex infinities and moduli, and the backward error of LAPACK results.

Independent references: XLA:CPU's own results and values derived by hand."""

from __future__ import annotations

import numpy as np
import pytest

import hloref
from hloref.fuzz.differential import diff
from hloref.fuzz.envelope import EnvelopePolicy, sample

from envelope_common import worker


COMPLEX_DIVIDE = """HloModule m
ENTRY e {
  a = c64[4] parameter(0)
  b = c64[4] parameter(1)
  ROOT q = c64[4] divide(a, b)
}
"""


def test_complex_infinities_match_whatever_their_other_part(worker):
    # C99 G.3: a complex value with an infinite part is an infinity. XLA:CPU's divide
    # gives (inf, -inf) where Smith's quotient is (inf, NaN) (its ratio b_r/b_i is
    # subnormal and flushed, so its Annex G recovery runs), and (NaN, -inf) where
    # hloref's is (inf, -inf): all the same complex infinity (2 mismatches in jax's
    # FunctionAccuracyTest sinc before). A finite value against an infinity, or a
    # finite one off by 1e-3, is still flagged.
    inf = np.inf
    a = np.array([complex(-inf, -inf), complex(inf, 1), 1 + 2j, 3 - 1j], np.complex64)
    b = np.array([complex(-1.4191163e-07, -2.4145012e+31), complex(1e-30, 1e30), 3 + 4j, 1j],
                 np.complex64)
    report = diff(COMPLEX_DIVIDE, [a, b], worker=worker)
    assert report.verdict == "match", report.summary()
    theirs = np.array(report.actual, copy=True)
    assert np.isinf(theirs[0].imag) and np.isinf(theirs[1].imag)  # XLA's own infinities
    bad = np.array(theirs, copy=True)
    bad[0] = complex(3e38, 0)
    assert diff(COMPLEX_DIVIDE, [a, b], worker=worker, oracle_value=bad).verdict == "mismatch"
    bad = np.array(theirs, copy=True)
    bad[2] *= np.complex64(1.001)
    assert diff(COMPLEX_DIVIDE, [a, b], worker=worker, oracle_value=bad).verdict == "mismatch"


def _svd_values_module(x):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    def f(x):
        xc = x - jnp.mean(x, axis=0)
        return jnp.linalg.svd(xc, compute_uv=False), jnp.linalg.eigvalsh(xc.T @ xc)
    return jax.jit(f).lower(x).as_text(dialect="hlo")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_single_precision_lapack_results_carry_their_backward_error(worker, seed):
    """jnp.linalg.svd / eigvalsh lower to lapack_sgesdd_ffi / lapack_ssyevd_ffi: XLA:CPU
    runs the f32 routines, hloref the f64 ones rounded once, so XLA's values carry the
    f32 algorithm's error, up to p(n)·u·‖A‖₂ (Weyl; Higham Thm 19.4): the envelope
    allows 2n·u·max|values| (fuzz/error_bounds.lapack_atol). Before, the tuple results
    of these custom calls got no freedom at all (a singular value 8 ULPs off was a
    mismatch). The values by hand (numpy's f64 SVD) agree with both; a value 0.2 % off
    is still flagged."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((50, 6)) @ rng.standard_normal((6, 6))).astype(np.float32)
    text = _svd_values_module(x)
    good = diff(text, [x], worker=worker)
    assert good.verdict == "match", good.summary()
    xc = x.astype(np.float64) - x.astype(np.float64).mean(axis=0)
    np.testing.assert_allclose(good.expected[0], np.linalg.svd(xc, compute_uv=False),
                               rtol=1e-4, atol=1e-4 * np.abs(good.expected[0]).max())
    for out in (0, 1):
        bad = [np.array(v, copy=True) for v in good.expected]
        # the median value (the bound is relative to the largest: a value far below it,
        # e.g. the smallest singular value here, is not known to 0.2 % by the f32 routine)
        k = int(np.argsort(np.abs(bad[out]))[len(bad[out]) // 2])
        bad[out][k] = np.float32(bad[out][k] * 1.002)
        report = diff(text, [x], worker=worker, oracle_value=tuple(bad))
        assert report.verdict == "mismatch", (out, report.summary())


def _solve_module(a, b):
    jax = pytest.importorskip("jax")
    return jax.jit(lambda a, b: jax.numpy.linalg.solve(a, b)).lower(a, b).as_text(dialect="hlo")


@pytest.mark.parametrize("scale", [1.0, 1.5e7])
def test_an_lu_factor_keeps_its_multipliers_apart_from_the_size_of_u(worker, scale):
    """jnp.linalg.solve lowers to lapack_sgetrf_ffi (U and L's multipliers packed in one
    matrix) and two lapack_strsm_ffi. The packed matrix's budget was normwise over both
    factors, so for a matrix of entries ~1e7 (scipy's expm solves one: its Pade
    denominator) each multiplier, at most 1 with partial pivoting, was perturbed by
    2n·u·max|U| ~ 40, and every perturbed run of jax.scipy.linalg.expm overflowed. Now
    each factor has its own: XLA's solution is inside, the values agree with numpy's f64
    solve, and the largest element 0.2 % off is flagged."""
    rng = np.random.default_rng(3)
    a = (scale * (np.eye(12) + 0.3 * rng.standard_normal((12, 12)))).astype(np.float32)
    b = (scale * rng.standard_normal((12, 5))).astype(np.float32)
    text = _solve_module(a, b)
    s = sample(hloref.parse(text), [a, b], EnvelopePolicy())
    assert all(np.all(np.isfinite(np.asarray(run))) for run in s.samples)
    good = diff(text, [a, b], worker=worker)
    assert good.verdict == "match", good.summary()
    exact = np.linalg.solve(a.astype(np.float64), b.astype(np.float64))
    np.testing.assert_allclose(np.asarray(good.expected), exact, rtol=1e-4, atol=1e-5)
    bad = np.array(good.expected, copy=True)
    # the largest element (the bounds are normwise: a small one is not known to 0.2 %)
    k = np.unravel_index(np.argmax(np.abs(bad)), bad.shape)
    bad[k] = np.float32(bad[k] * 1.002)
    assert diff(text, [a, b], worker=worker, oracle_value=bad).verdict == "mismatch"


def test_a_complex_modulus_carries_xla_cpus_accuracy_budget(worker):
    """XLA:CPU's c64 abs is up to 1.84 ULP off the exact modulus (here: within
    COMPLEX_ABS_ULPS = 2 on 20,000 N(0,1) values, and over 1 ULP somewhere), so the
    envelope may not take it for exact: a campaign (seed 53) fed it to cosine, where
    abs(-0.665 + 1.223i) = 1.392, one ULP of it moves cos by 8 of its own ULPs, and
    XLA's fused value was called a mismatch. It is inside now; a wrong element is not."""
    from hloref.fuzz.oracles import xla
    from hloref.fuzz.perturb import COMPLEX_ABS_ULPS
    rng = np.random.default_rng(1)
    z = (rng.standard_normal(20000) + 1j * rng.standard_normal(20000)).astype(np.complex64)
    alone = np.asarray(xla.run_hlo("HloModule m\nENTRY e {\n  p = c64[20000] parameter(0)\n"
                                   "  ROOT a = f32[20000] abs(p)\n}\n", z)).astype(np.float64)
    exact = np.abs(z.astype(np.complex128))
    ulps = np.abs(alone - exact) / np.spacing(exact.astype(np.float32)).astype(np.float64)
    assert 1.0 < ulps.max() <= COMPLEX_ABS_ULPS
    text = ("HloModule m\n\nENTRY e {\n  p = c64[4,2] parameter(0)\n"
            "  a = f32[4,2]{0,1} abs(p)\n  ROOT c = f32[4,2]{1,0} cosine(a)\n}\n")
    x = np.array([[-0.665213 + 1.2231387j, 0.11272575 - 0.71259964j],
                  [-0.36596224 - 1.0234301j, -2.1003788 - 1.531952j],
                  [0.6850284 + 0.32037514j, -0.7726343 - 0.7196077j],
                  [1.947841 - 1.3351508j, 0.7257541 + 1.4670398j]], np.complex64)
    report = diff(text, [x], worker=worker)
    assert report.verdict == "match", report.summary()
    wrong = np.asarray(report.expected).copy()
    wrong[0, 0] += 1e-5  # ~650 ULP of 0.1775: no modulus within 2 ULP gives it
    assert diff(text, [x], worker=worker, oracle_value=wrong).verdict == "mismatch"
