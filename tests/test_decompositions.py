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
