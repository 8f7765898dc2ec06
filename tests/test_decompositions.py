"""Decompositions judged by their identities (fuzz/decompositions.py): XLA:CPU's eigh and
eig answers differ from hloref's element by element (eigenvectors of a repeated
eigenvalue, rounding within LAPACK's backward error), and are right; answers built by
hand with numpy/scipy that break an identity are not."""

from __future__ import annotations

import numpy as np
import pytest

from hloref.fuzz.decompositions import identities_hold

RNG = np.random.default_rng(28)


def _repeated_eigenvalue() -> np.ndarray:
    q, _ = np.linalg.qr(RNG.standard_normal((4, 4)))
    return (q @ np.diag([1.0, 1.0, 2.0, 3.0]) @ q.T).astype(np.float32)


@pytest.mark.parametrize("name", ["eigh", "eig"])
def test_xla_cpus_decompositions_are_right_by_their_identities(name):
    """A repeated eigenvalue leaves its eigenvectors to LAPACK's arithmetic: XLA:CPU's
    (f32) and hloref's (f64, rounded) differ, and both satisfy A·V = V·Λ."""
    jnp = pytest.importorskip("jax.numpy")
    import hloref.jax as hj
    a = _repeated_eigenvalue() if name == "eigh" else \
        RNG.standard_normal((4, 4)).astype(np.float32)
    report = hj.check(jnp.linalg.eigh if name == "eigh" else jnp.linalg.eig, a)
    assert report.culprit is not None and report.culprit.opcode == "custom-call"
    assert report.verdict == "undetermined", report.summary()
    assert report.undetermined == "decomposition-choices"
    assert "identities held" in report.message and "A·V" in report.message.replace("vr", "V")


def _eigh_answer(a):
    w, v = np.linalg.eigh(a.astype(np.float64))
    return [v.astype(a.dtype), w.astype(a.dtype), np.int32(0)]


def test_eigh_identities_by_hand():
    a = _repeated_eigenvalue()
    ours = _eigh_answer(a)
    flipped = [ours[0] * np.array([-1, 1, -1, 1], np.float32), ours[1], ours[2]]
    assert identities_hold("lapack_ssyevd_ffi", {}, [a], ours, flipped)[0]
    # another basis of the repeated eigenvalue's space (a rotation of its two vectors)
    c, s = np.cos(0.3), np.sin(0.3)
    turned = ours[0].copy()
    turned[:, :2] = ours[0][:, :2] @ np.array([[c, -s], [s, c]], np.float32)
    assert identities_hold("lapack_ssyevd_ffi", {}, [a], ours, [turned, ours[1], ours[2]])[0]
    wrong = ours[0].copy()
    wrong[:, 3] = wrong[:, 2]  # not orthogonal, not an eigenvector of 3
    held, words = identities_hold("lapack_ssyevd_ffi", {}, [a], ours, [wrong, ours[1], ours[2]])
    assert not held and "identities fail" in words
    shifted = [ours[0], ours[1] + np.float32(1e-3), ours[2]]
    assert not identities_hold("lapack_ssyevd_ffi", {}, [a], ours, shifted)[0]


def test_svd_identities_by_hand():
    a = RNG.standard_normal((5, 3)).astype(np.float32)
    u, s, vt = np.linalg.svd(a.astype(np.float64), full_matrices=True)
    ours = [a, s.astype(np.float32), u.astype(np.float32), vt.astype(np.float32), np.int32(0)]
    signs = np.array([1, -1, -1], np.float32)
    theirs = [np.zeros_like(a), ours[1], ours[2].copy(), ours[3] * signs[:, None], np.int32(0)]
    theirs[2][:, :3] *= signs  # the same sign on u's column and vt's row
    assert identities_hold("lapack_sgesdd_ffi", {"mode": "A"}, [a], ours, theirs)[0]
    theirs[2][:, 0] *= -1  # one sign alone: U·Σ·Vᴴ is no longer A
    assert not identities_hold("lapack_sgesdd_ffi", {"mode": "A"}, [a], ours, theirs)[0]


def test_schur_identities_by_hand():
    scipy_linalg = pytest.importorskip("scipy.linalg")
    a = RNG.standard_normal((4, 4))
    t, q = scipy_linalg.schur(a)
    ours = [t, q, np.zeros(4), np.zeros(4), np.int32(0), np.int32(0)]
    d = np.diag([1.0, -1.0, 1.0, -1.0])
    # Q·D and D·T·D (D = diag(±1)) are a Schur form too: Q·D·(D·T·D)·D·Qᵀ = Q·T·Qᵀ
    theirs = [d @ t @ d, q @ d, ours[2], ours[3], np.int32(0), np.int32(0)]
    assert not np.allclose(theirs[0], t)
    assert identities_hold("lapack_dgees_ffi", {}, [a], ours, theirs)[0]
    bad = [t + np.tril(np.ones((4, 4)), -2), q, ours[2], ours[3], np.int32(0), np.int32(0)]
    assert not identities_hold("lapack_dgees_ffi", {}, [a], ours, bad)[0]


def test_other_targets_are_not_judged_so():
    assert identities_hold("lapack_spotrf_ffi", {}, [np.eye(2)], (np.eye(2),), (np.eye(2),)) \
        is None


# ---------------------------------------------------------------- QR


def _rank_two(m: int, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, 2)) @ rng.standard_normal((2, n))


def test_xla_cpus_qr_of_a_rank_deficient_matrix_is_right_by_its_identities():
    """Past the rank, the columns below the diagonal are rounding noise, and so are the
    reflectors LAPACK builds from them: XLA:CPU's f32 geqrf and hloref's (f64, rounded)
    differ, and both satisfy Q·R = A, QᴴQ = I."""
    jnp = pytest.importorskip("jax.numpy")
    import hloref.jax as hj
    report = hj.check(jnp.linalg.qr, _rank_two(6, 4, 0).astype(np.float32))
    assert report.culprit is not None and report.culprit.opcode == "custom-call"
    assert "geqrf" in report.culprit.text
    assert report.verdict == "undetermined", report.summary()
    assert report.undetermined == "decomposition-choices"
    assert "identities held: Q·R = A" in report.message and "QᴴQ = I" in report.message


def _geqrf_answer(routine: str, a: np.ndarray):
    got = getattr(scipy_lapack(), routine)(a)  # (qr, tau, [work,] info)
    assert got[-1] == 0
    return [got[0], got[1]]


def scipy_lapack():
    return pytest.importorskip("scipy.linalg.lapack")


def test_qr_identities_by_hand():
    """xGEQRFP's R has a non-negative diagonal (Reference-LAPACK dlarfgp.f), xGEQRF's the
    sign opposite to each pivot (dlarfg.f): two packed answers that differ, both QRs."""
    a = RNG.standard_normal((5, 3))
    ours = _geqrf_answer("dgeqrf", a)
    other = _geqrf_answer("dgeqrfp", a)
    assert not np.allclose(np.diag(ours[0]), np.diag(other[0]))
    assert np.all(np.diag(other[0]) >= 0)
    held, words = identities_hold("lapack_dgeqrf_ffi", {}, [a], ours, other)
    assert held and "Q·R = A" in words, words
    assert identities_hold("Qr", {}, [a], ours, other)[0]  # XLA's own QR custom call
    # complex: zgeqrfp against zgeqrf
    c = RNG.standard_normal((4, 4)) + 1j * RNG.standard_normal((4, 4))
    assert identities_hold("lapack_zgeqrf_ffi", {}, [c], _geqrf_answer("zgeqrf", c),
                           _geqrf_answer("zgeqrfp", c))[0]
    # an element of R changed: Q·R is no longer A
    wrong = [other[0].copy(), other[1]]
    wrong[0][0, 2] += 1e-6
    held, words = identities_hold("lapack_dgeqrf_ffi", {}, [a], ours, wrong)
    assert not held and "Q·R = A" in words
    # a τ that does not make its reflector orthogonal (1 ≤ τ ≤ 2 becomes τ/2)
    wrong = [other[0], other[1] * np.array([1, 0.5, 1])]
    held, words = identities_hold("lapack_dgeqrf_ffi", {}, [a], ours, wrong)
    assert not held and "QᴴQ = I" in words.split("identities fail: ")[1]


def test_rank_deficient_qr_by_hand():
    """A rank-two matrix and one within rounding of it: their reflectors past the rank
    have nothing in common, and each is a QR of both."""
    a = _rank_two(6, 4, 1)
    ours = _geqrf_answer("dgeqrf", a)
    nudged = a + 4e-16 * np.abs(a).max() * RNG.standard_normal(a.shape)
    other = _geqrf_answer("dgeqrf", nudged)
    assert not np.allclose(ours[0][3:, 2], other[0][3:, 2], rtol=1e-3)
    assert identities_hold("lapack_dgeqrf_ffi", {}, [a], ours, other)[0]


def test_pivoted_qr_identities_by_hand():
    a = RNG.standard_normal((5, 4))
    qr, jpvt, tau, _, info = scipy_lapack().dgeqp3(a)
    assert info == 0
    ours = [qr, jpvt.astype(np.int32), tau]
    jpvt_in = np.zeros(4, np.int32)
    held, words = identities_hold("lapack_dgeqp3_ffi", {}, [a, jpvt_in], ours, ours)
    assert held and "Q·R = A·P" in words and "|r₁₁| ≥ |r₂₂|" in words
    swapped = ours[1].copy()
    swapped[[0, 1]] = swapped[[1, 0]]
    assert not identities_hold("lapack_dgeqp3_ffi", {}, [a, jpvt_in], ours,
                               [qr, swapped, tau])[0]
    repeated = ours[1].copy()
    repeated[0] = repeated[1]
    held, words = identities_hold("lapack_dgeqp3_ffi", {}, [a, jpvt_in], ours,
                                  [qr, repeated, tau])
    assert not held and "permutation" in words


# ---------------------------------------------------------------- Householder products


def test_xla_cpus_householder_product_is_within_its_rounding_bound():
    """Reflectors that are not unitary (any τ, as jax's test draws them) make a product
    with much cancellation: XLA:CPU's f32 answer is off hloref's by more than the
    envelope allows, and within |H₁|⋯|H_k|'s rounding bound."""
    pytest.importorskip("jax")
    from jax import lax
    import hloref.jax as hj
    rng = np.random.default_rng(16)
    a = (3 * rng.standard_normal((10, 5))).astype(np.float32)
    taus = (3 * rng.standard_normal(4)).astype(np.float32)
    report = hj.check(lax.linalg.householder_product, a, taus)
    assert report.verdict == "undetermined", report.summary()
    assert report.undetermined == "decomposition-choices"
    assert "identities held: Q = H₁⋯H_k" in report.message


def test_householder_product_by_hand():
    a = RNG.standard_normal((6, 4))
    qr, tau = _geqrf_answer("dgeqrf", a)
    q, _, info = scipy_lapack().dorgqr(qr, tau)
    assert info == 0
    held, words = identities_hold("lapack_dorgqr_ffi", {}, [qr, tau], q, q)
    assert held, words
    assert identities_hold("ProductOfElementaryHouseholderReflectors", {}, [qr, tau], q, q)[0]
    off = q.copy()
    off[2, 1] += 1e-12
    held, words = identities_hold("lapack_dorgqr_ffi", {}, [qr, tau], q, off)
    assert not held and "Q = H₁⋯H_k" in words
    # ungqr: complex reflectors
    c = RNG.standard_normal((4, 3)) + 1j * RNG.standard_normal((4, 3))
    cqr, ctau = _geqrf_answer("zgeqrf", c)
    cq, _, info = scipy_lapack().zungqr(cqr, ctau)
    assert identities_hold("lapack_zungqr_ffi", {}, [cqr, ctau], cq, cq)[0]
    assert not identities_hold("lapack_zungqr_ffi", {}, [cqr, ctau], cq, cq.conj())[0]


# ---------------------------------------------------------------- what follows a choice


def test_the_outputs_that_follow_a_decomposition_are_checked_with_xlas_choice():
    """eigh's vectors times a vector: XLA:CPU's eigenvectors of the repeated eigenvalue
    differ from hloref's, so does the product; with XLA's eigenvectors in place of its
    own, hloref gives XLA's product (within the envelope). A product XLA did not compute
    from its eigenvectors (one element changed) is a mismatch, the eigh still right."""
    jax = pytest.importorskip("jax")
    jnp = pytest.importorskip("jax.numpy")
    from hloref.fuzz.differential import diff
    from hloref.fuzz.workers import OracleWorker
    a = _repeated_eigenvalue()
    text = jax.jit(lambda x: jnp.linalg.eigh(x)[1] @ jnp.arange(4.0, dtype=jnp.float32)) \
        .lower(a).as_text(dialect="hlo")
    with OracleWorker("xla") as worker:
        report = diff(text, [a], worker=worker)
        assert report.verdict == "undetermined", report.summary()
        assert "identities held" in report.message
        assert "with XLA's answer in its place" in report.message
        assert not np.allclose(report.actual, report.expected, atol=1e-3)
        wrong = np.array(report.actual, copy=True)
        wrong[1] += 1e-3
        bad = diff(text, [a], worker=worker, oracle_value=wrong)
    assert bad.culprit is not None and bad.culprit.innermost().opcode == "custom-call"
    assert bad.verdict == "mismatch", bad.summary()


# ---------------------------------------------------------------- tridiagonal solves


def _tridiagonal(seed: int):
    rng = np.random.default_rng(seed)
    dl, d, du = (rng.standard_normal((3, 8)).astype(np.float32) for _ in range(3))
    dl[:, 0] = 0
    du[:, -1] = 0
    return dl, d, du, rng.standard_normal((3, 8, 2)).astype(np.float32)


def test_xla_cpus_tridiagonal_solve_is_right_by_its_backward_error():
    """XLA:CPU's f32 gtsv and hloref's (f64, rounded) differ by tens of ULPs in X and in
    the factor; both solve T·X = B for a T within the backward error."""
    pytest.importorskip("jax")
    from jax import lax
    import hloref.jax as hj
    report = hj.check(lax.linalg.tridiagonal_solve, *_tridiagonal(21))
    assert report.culprit is not None and "gtsv" in report.culprit.text
    assert report.verdict == "undetermined", report.summary()
    assert "identities held: T·X = B" in report.message


def test_tridiagonal_solves_by_hand():
    dl, d, du, b = (x[0].astype(np.float64) for x in _tridiagonal(3))
    t = np.diag(d) + np.diag(dl[1:], -1) + np.diag(du[:-1], 1)
    x = np.linalg.solve(t, b)
    held, words = identities_hold("tridiagonal_solve_perturbed_ffi", {}, [dl, d, du, b], x, x)
    assert held and "T·X = B" in words, words
    off = x.copy()
    off[4, 1] *= 1 + 1e-9
    assert not identities_hold("tridiagonal_solve_perturbed_ffi", {}, [dl, d, du, b], x, off)[0]
    # LAPACK's gtsv: (dl, d, du) hold U's diagonals, b the solution, then info
    du2, d2, du1, xg, info = scipy_lapack().dgtsv(dl[1:], d, du[:-1], b)
    ours = [np.r_[0, du2], d2, np.r_[du1, 0], xg, np.int32(info)]
    assert identities_hold("lapack_dgtsv_ffi", {}, [dl, d, du, b], ours, ours)[0]
    theirs = list(ours)
    theirs[1] = d2 * (1 + 1e-6)  # another factor: not U
    held, words = identities_hold("lapack_dgtsv_ffi", {}, [dl, d, du, b], ours, theirs)
    assert not held and "U's diagonals" in words
    theirs = list(ours)
    theirs[4] = np.int32(1)
    assert not identities_hold("lapack_dgtsv_ffi", {}, [dl, d, du, b], ours, theirs)[0]


def test_the_answer_the_entry_shows_is_judged_when_it_is_not_the_one_run_alone():
    """XLA:CPU's LAPACK need not give the same answer twice: where the entry returns the
    decomposition's outputs, XLA's answer as they show it is judged. By hand: the Schur
    form Q·D, D·T·D (D = diag(±1)) of XLA's own is another right answer."""
    jax = pytest.importorskip("jax")
    from hloref.fuzz.differential import diff
    from hloref.fuzz.workers import OracleWorker
    import jax.scipy.linalg as jsl
    a = RNG.standard_normal((4, 4)).astype(np.float32)
    text = jax.jit(jsl.schur).lower(a).as_text(dialect="hlo")
    d = np.diag([1.0, -1.0, 1.0, -1.0]).astype(np.float32)
    with OracleWorker("xla") as worker:
        t, q = worker.run(text, [a]).value
        other = (d @ t @ d, q @ d)
        report = diff(text, [a], worker=worker, oracle_value=other)
        assert report.verdict == "undetermined", report.summary()
        assert "as the entry's outputs show it" in report.message
        assert "Q·T·Qᴴ = A" in report.message
        wrong = (other[0] + np.triu(np.ones((4, 4), np.float32), 2) * 1e-2, other[1])
        bad = diff(text, [a], worker=worker, oracle_value=wrong)
    assert bad.verdict == "mismatch", bad.summary()
