"""LAPACK custom calls (evaluator/custom_call_lapack.py) against XLA:CPU.

Two levels, both with XLA:CPU (jaxlib's LAPACK FFI kernels) as the oracle:

* ``jnp.linalg`` / ``lax.linalg`` functions lowered with ``jax.jit(f).lower(x).as_text(
  dialect="hlo")`` as users hand them to hloref, evaluated by hloref and run by JAX on
  the same inputs. Unique results are compared within ``TOL_ULPS`` ulps of the result's
  largest magnitude times the input's condition number; non-unique ones (eigenvectors,
  singular vectors, Schur form, eigenvalue order) by their invariants.
* the bare custom call (every result, ``info`` and pivots included) in a one-instruction
  module run by ``run_hlo``, on regular and on singular / non-positive-definite inputs.
"""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("scipy")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

import hloref  # noqa: E402

#: ulps (of the result's largest magnitude) times cond(A) allowed for unique results.
#: Measured: below 16 for every case here (f32/c64: f64 LAPACK rounded once vs
#: XLA:CPU's single-precision LAPACK; f64/c128: 0, the same LAPACK).
TOL_ULPS = 200

DTYPES = ["float32", "float64", "complex64", "complex128"]


@pytest.fixture(scope="module", autouse=True)
def _lapack():
    import jax._src.lax.linalg  # noqa: F401
    from jaxlib import lapack
    lapack._lapack.initialize()


def _rand(rng, shape, dt):
    x = rng.standard_normal(shape)
    if np.dtype(dt).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x


def general(rng, shape, dt):
    """Well-conditioned general matrices (diagonally shifted)."""
    x = _rand(rng, shape, dt)
    m, n = shape[-2:]
    x = x + 2 * np.sqrt(max(m, n)) * np.eye(m, n)
    return x.astype(dt)


def hermitian_pd(rng, shape, dt):
    x = _rand(rng, shape, dt)
    x = x @ np.conj(np.swapaxes(x, -1, -2)) + shape[-1] * np.eye(shape[-1])
    return x.astype(dt)


def hermitian(rng, shape, dt):
    x = _rand(rng, shape, dt)
    return ((x + np.conj(np.swapaxes(x, -1, -2))) / 2).astype(dt)


def _eps(dt):
    return float(np.finfo(np.dtype(dt)).eps)


def _cond(a):
    a = np.asarray(a, np.complex128)
    return float(np.max(np.linalg.cond(a))) if a.shape[-1] == a.shape[-2] else \
        float(np.max(np.linalg.cond(a)))


def _close(got, ref, dt, scale=1.0, what=""):
    got, ref = np.asarray(got), np.asarray(ref)
    assert got.shape == ref.shape and got.dtype == ref.dtype, (what, got.shape, ref.shape,
                                                               got.dtype, ref.dtype)
    if ref.dtype.kind not in "fc":
        np.testing.assert_array_equal(got, ref, err_msg=what)
        return 0.0
    if ref.size == 0:
        return 0.0
    big = max(float(np.max(np.abs(ref[np.isfinite(ref)]), initial=0)), 1e-30)
    err = float(np.max(np.abs(got - ref))) / big / _eps(dt)
    assert err <= TOL_ULPS * scale, f"{what}: {err:.3g} ulps > {TOL_ULPS} x {scale:.3g}"
    return err


def _run(f, *args):
    with jax.enable_x64(True):
        lowered = jax.jit(f).lower(*args)
        text = lowered.as_text(dialect="hlo")
        ref = jax.tree.leaves(lowered.compile()(*args))
    got = hloref.evaluate(text, *args)
    got = list(got) if isinstance(got, (tuple, list)) else [got]
    assert len(got) == len(ref)
    return [np.asarray(r) for r in ref], [np.asarray(g) for g in got]


def _shapes(shapes, dt):
    """All shapes for f32; the first one only for the other types (XLA compile time)."""
    return shapes if dt == "float32" else shapes[:1]


def _adj(x):
    return np.conj(np.swapaxes(x, -1, -2))


# (the LAPACK calls of slogdet, pinv, eigvalsh, qr(mode="r") and the other trsm
# variants are the ones below / in test_raw_*)

# --- functions whose results are unique: compared value by value ------------------

UNIQUE = {
    "cholesky": (jnp.linalg.cholesky, hermitian_pd, [(2, 3, 3), (4, 4)]),
    "inv": (jnp.linalg.inv, general, [(2, 3, 3), (4, 4)]),
    "solve": (lambda a: jnp.linalg.solve(a, a[..., :2] + 1), general, [(2, 3, 3), (4, 4)]),
    "det": (jnp.linalg.det, general, [(2, 3, 3), (4, 4)]),
    "lu": (lax.linalg.lu, general, [(2, 3, 3), (3, 5)]),
    "qr": (jnp.linalg.qr, general, [(2, 5, 3), (3, 5)]),
    "qr_complete": (lambda a: jnp.linalg.qr(a, mode="complete"), general, [(5, 3), (3, 5)]),
    "qr_pivoting": (lambda a: lax.linalg.qr(a, pivoting=True), general, [(5, 4)]),
    "hessenberg": (lax.linalg.hessenberg, general, [(2, 3, 3), (4, 4)]),
    "tridiagonal": (lax.linalg.tridiagonal, hermitian, [(2, 3, 3), (4, 4)]),
    "triangular_solve": (lambda a: lax.linalg.triangular_solve(a, a[..., :2, :] + 1,
                                                               left_side=False, lower=False,
                                                               transpose_a=True,
                                                               conjugate_a=True), general,
                         [(2, 3, 3), (4, 4)]),
    "tridiagonal_solve": (lambda a: lax.linalg.tridiagonal_solve(
        a[..., 0].at[..., 0].set(0), a[..., 1], a[..., 2].at[..., -1].set(0), a), general,
        [(4, 4), (2, 3, 3), (1, 2)]),
    "tridiagonal_solve_perturbed": (lambda a: lax.linalg.tridiagonal_solve(
        a[..., 0].at[..., 0].set(0), a[..., 1], a[..., 2].at[..., -1].set(0), a,
        perturb_singular=True), general, [(2, 3, 3), (4, 4)]),
    "svdvals": (lambda a: jnp.linalg.svd(a, compute_uv=False), general, [(4, 4), (2, 5, 3)]),
    "ormqr": (lambda a: __import__("jax._src.lax.linalg", fromlist=["ormqr"]).ormqr(
        *__import__("jax._src.lax.linalg", fromlist=["geqrf"]).geqrf(a), a[..., :3, :] + 1,
        left=False, transpose=True), general, [(4, 4)]),
}


@pytest.mark.parametrize("dt", ["float32", "complex128"])  # f64, c64 targets: test_raw_*
@pytest.mark.parametrize("name", sorted(UNIQUE))
def test_unique_results_match_xla(name, dt):
    f, gen, shapes = UNIQUE[name]
    rng = np.random.default_rng(abs(hash((name, dt))) % 2**32)
    for shape in _shapes(shapes, dt):
        a = gen(rng, shape, dt)
        if name.startswith("tridiagonal_solve") and shape[-1] < 3:
            a = general(rng, shape[:-1] + (3,), dt)[..., :, :]
            a = a[..., :1, :] if shape[-2] == 1 else a
        ref, got = _run(f, a)
        sq = a.shape[-1] == a.shape[-2]
        cond = _cond(a) if sq else _cond(a)
        for i, (r, g) in enumerate(zip(ref, got)):
            _close(g, r, dt, scale=cond, what=f"{name} {shape} result {i}")


# --- non-unique results: invariants and the unique parts ---------------------------


def _check_eigh(a, w, v, dt, lower=True):
    a = np.asarray(a, np.complex128)
    w, v = np.asarray(w), np.asarray(v, np.complex128)
    n = a.shape[-1]
    tol = TOL_ULPS * _eps(dt) * max(1.0, float(np.max(np.abs(a)))) * n
    assert np.all(np.diff(w, axis=-1) >= 0), "eigenvalues ascending"
    np.testing.assert_allclose(a @ v, v * w[..., None, :], atol=tol)
    np.testing.assert_allclose(_adj(v) @ v, np.broadcast_to(np.eye(n), v.shape),
                               atol=TOL_ULPS * _eps(dt))


@pytest.mark.parametrize("dt", DTYPES)
def test_eigh(dt):
    rng = np.random.default_rng(1)
    for shape in _shapes([(2, 3, 3), (4, 4)], dt):
        a = hermitian(rng, shape, dt)
        (rw, rv), (gw, gv) = _run(jnp.linalg.eigh, a)
        _close(gw, rw, dt, scale=max(1.0, _cond(a) / 1e3), what="eigenvalues")
        _check_eigh(a, gw, gv, dt)
        # each eigenvector agrees with XLA's up to a phase (distinct eigenvalues)
        overlap = np.abs(np.sum(np.conj(rv.astype(np.complex128)) * gv, axis=-2))
        np.testing.assert_allclose(overlap, 1, atol=1e3 * _eps(dt))
        # upper triangle read
        (rv, rw), (gv, gw) = _run(lambda x: lax.linalg.eigh(x, lower=False), a)
        _close(gw, rw, dt, what="eigenvalues (upper)")


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("mode", ["full", "reduced", "qr_algorithm"])
def test_svd(dt, mode):
    rng = np.random.default_rng(2)
    if mode == "full":
        f = lambda x: jnp.linalg.svd(x, full_matrices=True)  # noqa: E731
    elif mode == "reduced":
        f = lambda x: jnp.linalg.svd(x, full_matrices=False)  # noqa: E731
    else:
        f = lambda x: lax.linalg.svd(x, algorithm=lax.linalg.SvdAlgorithm.QR)  # noqa: E731
    for shape in _shapes([(2, 5, 3), (3, 5)], dt):
        a = _rand(rng, shape, dt).astype(dt)
        (ru, rs, rvt), (gu, gs, gvt) = _run(f, a)
        _close(gs, rs, dt, what="singular values")
        assert np.all(np.diff(gs, axis=-1) <= 0)
        k = min(shape[-2:])
        tol = TOL_ULPS * _eps(dt) * max(1.0, float(np.max(rs)))
        ac = np.asarray(a, np.complex128)
        usv = (gu[..., :, :k] * gs[..., None, :]) @ gvt[..., :k, :]
        np.testing.assert_allclose(usv, ac, atol=tol)
        for q in (gu, np.swapaxes(gvt, -1, -2)):
            q = q.astype(np.complex128)
            np.testing.assert_allclose(_adj(q) @ q, np.broadcast_to(np.eye(q.shape[-1]),
                                                                    q.shape[:-2] + (q.shape[-1],) * 2),
                                       atol=TOL_ULPS * _eps(dt))
        # the first k singular vectors agree with XLA's up to a phase
        ov = np.abs(np.sum(np.conj(ru[..., :, :k]) * gu[..., :, :k], axis=-2))
        np.testing.assert_allclose(ov, 1, atol=1e3 * _eps(dt))


def _match_sets(got, ref, tol):
    got, ref = list(np.ravel(got)), list(np.ravel(ref))
    for g in got:
        j = int(np.argmin([abs(g - r) for r in ref]))
        assert abs(g - ref[j]) <= tol, (g, ref)
        ref.pop(j)


@pytest.mark.parametrize("dt", DTYPES)
def test_eig(dt):
    rng = np.random.default_rng(3)
    f = lambda x: lax.linalg.eig(x, compute_left_eigenvectors=True)  # noqa: E731
    for shape in _shapes([(2, 3, 3), (4, 4)], dt):
        a = _rand(rng, shape, dt).astype(dt)
        (rw, rvl, rvr), (gw, gvl, gvr) = _run(f, a)
        ac = np.asarray(a, np.complex128)
        scale = float(np.max(np.abs(ac)))
        tol = TOL_ULPS * _eps(dt) * scale * 10  # eigenvalue condition numbers of random A
        for idx in np.ndindex(*shape[:-2]):
            _match_sets(gw[idx], rw[idx], tol)
        np.testing.assert_allclose(ac @ gvr, gvr * gw[..., None, :], atol=tol)
        np.testing.assert_allclose(_adj(gvl) @ ac, gw[..., :, None] * _adj(gvl), atol=tol)
        np.testing.assert_allclose(np.linalg.norm(gvr, axis=-2), 1, atol=1e2 * _eps(dt))
        if np.dtype(dt).kind == "f":  # real input: conjugate pairs stay together
            for idx in np.ndindex(*shape[:-2]):
                w = gw[idx]
                for j in np.nonzero(w.imag > 0)[0]:
                    assert w[j + 1] == np.conj(w[j])
                    np.testing.assert_array_equal(gvr[idx][:, j + 1], np.conj(gvr[idx][:, j]))


@pytest.mark.parametrize("dt", DTYPES)
def test_schur(dt):
    rng = np.random.default_rng(4)
    for shape in _shapes([(2, 3, 3), (4, 4)], dt):
        a = _rand(rng, shape, dt).astype(dt)
        (rt, rvs), (gt, gvs) = _run(lax.linalg.schur, a)
        ac = np.asarray(a, np.complex128)
        tol = TOL_ULPS * _eps(dt) * float(np.max(np.abs(ac))) * 4
        np.testing.assert_allclose(gvs @ gt @ _adj(gvs), ac, atol=tol)
        n = shape[-1]
        np.testing.assert_allclose(_adj(gvs) @ gvs, np.broadcast_to(np.eye(n), gvs.shape),
                                   atol=TOL_ULPS * _eps(dt))
        below = 2 if np.dtype(dt).kind == "f" else 1  # quasi-triangular for real types
        assert np.all(np.tril(gt, -below) == 0)
        for idx in np.ndindex(*shape[:-2]):
            _match_sets(np.linalg.eigvals(gt[idx].astype(np.complex128)),
                        np.linalg.eigvals(rt[idx].astype(np.complex128)), tol * 10)
        if np.dtype(dt).itemsize in (8, 16) and np.dtype(dt) in (np.float64, np.complex128):
            _close(gt, rt, dt, scale=10, what="Schur form (same LAPACK path in f64)")


# --- bare custom calls: every result, info and pivots included ----------------------


_T = {"float32": ("s", "f32"), "float64": ("d", "f64"), "complex64": ("c", "c64"),
      "complex128": ("z", "c128")}


def _colmajor(s):
    """``f32[2,3,4]`` → ``f32[2,3,4]{1,2,0}`` (matrices column-major, as jaxlib needs)."""
    rank = s.count(",") + 1 if "[]" not in s else 0
    if rank < 2 or "{" in s:
        return s
    return s + "{" + ",".join(map(str, [rank - 2, rank - 1, *range(rank - 3, -1, -1)])) + "}"


def _raw_module(target, operand_shapes, result_shapes, config):
    params = "\n".join(f"  p{i} = {s} parameter({i})" for i, s in enumerate(operand_shapes))
    res = ", ".join(_colmajor(r) for r in result_shapes)
    res = f"({res})" if len(result_shapes) > 1 else res
    ops = ", ".join(f"p{i}" for i in range(len(operand_shapes)))
    constraints = ", ".join(_colmajor(s) for s in operand_shapes)
    return (f"HloModule m\nENTRY e {{\n{params}\n  ROOT r = {res} custom-call({ops}), "
            f"custom_call_target=\"{target}\", operand_layout_constraints={{{constraints}}}, "
            f"api_version=API_VERSION_TYPED_FFI, backend_config={{{config}}}\n}}\n")


def _raw(target, operands, result_shapes, config=""):
    from hloref.fuzz.oracles.xla import run_hlo

    def shp(x):
        et = {"float32": "f32", "float64": "f64", "complex64": "c64", "complex128": "c128",
              "int32": "s32"}[str(x.dtype)]
        return f"{et}[{','.join(map(str, x.shape))}]"

    text = _raw_module(target, [shp(x) for x in operands], result_shapes, config)
    ref = run_hlo(text, *operands)
    got = hloref.evaluate(text, *operands)
    return (list(ref) if isinstance(ref, tuple) else [ref]), \
        (list(got) if isinstance(got, tuple) else [got])


def test_raw_module_layouts():
    # the helper writes descending layouts for the parameters: check the text parses
    text = _raw_module("lapack_spotrf_ffi", ["f32[2,3,3]"], ["f32[2,3,3]", "s32[2]"],
                       "uplo = 76 : ui8")
    assert "operand_layout_constraints={f32[2,3,3]{1,2,0}}" in text
    assert "(f32[2,3,3]{1,2,0}, s32[2])" in text
    hloref.parse(text)


@pytest.mark.parametrize("dt", DTYPES)
def test_raw_potrf_info(dt):
    t, et = _T[dt]
    rng = np.random.default_rng(5)
    good = hermitian_pd(rng, (3, 3), dt)
    bad = np.array([[4, 1, 2], [1, -3, 0], [2, 0, 5]], dt)  # leading minor 2 not PD
    a = np.stack([good, bad])
    for uplo in (76, 85):
        ref, got = _raw(f"lapack_{t}potrf_ffi", [a], [f"{et}[2,3,3]{{1,2,0}}", "s32[2]"],
                        f"uplo = {uplo} : ui8")
        np.testing.assert_array_equal(got[1], ref[1])
        assert list(got[1]) == [0, 2]
        _close(got[0], ref[0], dt, scale=_cond(good), what="potrf factor (other triangle kept)")


@pytest.mark.parametrize("dt", DTYPES)
def test_raw_getrf_pivots_and_info(dt):
    t, et = _T[dt]
    rng = np.random.default_rng(6)
    a = np.stack([general(rng, (4, 4), dt),
                  np.array([[1, 2, 3, 4], [2, 4, 6, 8], [0, 1, 0, 1], [3, 1, 4, 1]], dt)])
    ref, got = _raw(f"lapack_{t}getrf_ffi", [a],
                    [f"{et}[2,4,4]{{1,2,0}}", "s32[2,4]{1,0}", "s32[2]"])
    np.testing.assert_array_equal(got[1], ref[1])
    np.testing.assert_array_equal(got[2], ref[2])
    assert got[2][1] > 0
    _close(got[0], ref[0], dt, scale=50, what="getrf factors")
    for shape in [(5, 3), (3, 5)]:  # rectangular
        b = general(rng, shape, dt)
        k = min(shape)
        ref, got = _raw(f"lapack_{t}getrf_ffi", [b],
                        [f"{et}[{shape[0]},{shape[1]}]{{0,1}}", f"s32[{k}]", "s32[]"])
        np.testing.assert_array_equal(got[1], ref[1])
        _close(got[0], ref[0], dt, scale=_cond(b), what="getrf rectangular")


@pytest.mark.parametrize("dt", DTYPES)
def test_raw_qr_family(dt):
    t, et = _T[dt]
    rng = np.random.default_rng(7)
    a = general(rng, (5, 3), dt)
    ref, got = _raw(f"lapack_{t}geqrf_ffi", [a], [f"{et}[5,3]{{0,1}}", f"{et}[3]"])
    for r, g in zip(ref, got):
        _close(g, r, dt, scale=_cond(a), what="geqrf (Householder vectors, tau)")
    orgqr = "orgqr" if t in "sd" else "ungqr"
    ref2, got2 = _raw(f"lapack_{t}{orgqr}_ffi", [ref[0], ref[1]], [f"{et}[5,3]{{0,1}}"])
    _close(got2[0], ref2[0], dt, scale=_cond(a), what="orgqr")
    jp = np.zeros(3, np.int32)
    ref3, got3 = _raw(f"lapack_{t}geqp3_ffi", [a, jp],
                      [f"{et}[5,3]{{0,1}}", "s32[3]", f"{et}[3]"])
    np.testing.assert_array_equal(got3[1], ref3[1])
    _close(got3[0], ref3[0], dt, scale=_cond(a), what="geqp3")
    _close(got3[2], ref3[2], dt, scale=_cond(a), what="geqp3 tau")


@pytest.mark.parametrize("dt", DTYPES)
def test_raw_singular_and_failure_info(dt):
    t, et = _T[dt]
    # gtsv on a singular tridiagonal system (row 1 is zero): info = the zero pivot
    dl = np.array([0, 0, 1], dt)
    d = np.array([1, 0, 1], dt)
    du = np.array([1, 0, 0], dt)
    b = np.ones((3, 2), dt)
    ref, got = _raw(f"lapack_{t}gtsv_ffi", [dl, d, du, b],
                    [f"{et}[3]", f"{et}[3]", f"{et}[3]", f"{et}[3,2]{{0,1}}", "s32[]"])
    assert int(ref[4]) > 0
    np.testing.assert_array_equal(got[4], ref[4])
    # geev on a non-finite matrix: jaxlib reports info = -4
    a = np.array([[1, np.nan], [0, 1]], dt)
    res = ([f"{et}[2]", f"{et}[2]", f"c{ {'s': 64, 'd': 128}[t]}[2,2]".replace(" ", ""),
            f"c{ {'s': 64, 'd': 128}[t]}[2,2]".replace(" ", "")] if t in "sd" else
           [f"{et}[2]", f"{et}[2,2]", f"{et}[2,2]"]) + ["s32[]"]
    ref, got = _raw(f"lapack_{t}geev_ffi", [a], res,
                    "compute_left = 78 : ui8, compute_right = 86 : ui8")
    assert int(ref[-1]) == -4
    np.testing.assert_array_equal(got[-1], ref[-1])


@pytest.mark.parametrize("dt", ["float32", "complex128"])
def test_raw_trsm_alpha_free_and_sides(dt):
    t, et = _T[dt]
    rng = np.random.default_rng(8)
    a = general(rng, (3, 3), dt)
    for side, shape in ((76, (3, 2)), (82, (2, 3))):
        b = _rand(rng, shape, dt).astype(dt)
        for trans in (78, 84, 67):
            ref, got = _raw(f"lapack_{t}trsm_ffi", [a, b],
                            [f"{et}[{shape[0]},{shape[1]}]{{0,1}}"],
                            f"diag = 78 : ui8, side = {side} : ui8, trans_x = {trans} : ui8, "
                            f"uplo = 85 : ui8")
            _close(got[0], ref[0], dt, scale=_cond(a), what=f"trsm side={side} trans={trans}")


def test_solve_from_cli(tmp_path):
    """``hloref run`` on a lowered ``jnp.linalg.solve`` module."""
    import subprocess
    import sys
    a = np.array([[4.0, 1.0], [2.0, 3.0]], np.float32)
    b = np.array([1.0, 2.0], np.float32)
    text = jax.jit(jnp.linalg.solve).lower(a, b).as_text(dialect="hlo")
    path = tmp_path / "solve.hlo"
    path.write_text(text)
    np.savez(tmp_path / "in.npz", a, b)
    proc = subprocess.run([sys.executable, "-m", "hloref", "run", str(path), "--inputs",
                           str(tmp_path / "in.npz"), "--output", str(tmp_path / "out.npz")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = np.load(tmp_path / "out.npz")["arr_0"]
    np.testing.assert_allclose(out, np.linalg.solve(a.astype(np.float64), b), rtol=1e-6)
