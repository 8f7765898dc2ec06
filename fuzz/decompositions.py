"""Decompositions with several right answers, judged by what defines them.

An eigen- or singular-value decomposition is not one array: eigenvectors have a sign
(a phase, for complex ones) of their own, the vectors of a repeated eigenvalue any basis
of its space, and every LAPACK answer is exact only for a nearby matrix. So XLA's answer
to a LAPACK custom call (``evaluator/custom_call_lapack.py``) is right when the
identities that define the decomposition hold within a backward-error bound, not when
its elements are hloref's:

* ``syevd``/``heevd`` (eigh): A·V = V·diag(w), VᴴV = I, w the eigenvalues of hloref's
  answer (Weyl: |Δλ| ≤ ‖E‖₂);
* ``geev`` (eig): A·vr = vr·diag(w), vlᴴ·A = diag(w)·vlᴴ, w hloref's eigenvalues as a
  multiset within Bauer–Fike's κ(V)·‖E‖₂;
* ``gesdd``/``gesvd`` (svd): A = U·diag(s)·Vᴴ, UᴴU = I, VᴴV = I, s hloref's (Weyl);
* ``gees`` (schur): A = Q·T·Qᴴ, QᴴQ = I, T quasi upper triangular, its eigenvalues
  hloref's;
* ``geqrf`` and XLA's ``Qr`` (QR): Q·R = A with Q = H₁⋯H_k the product of the
  elementary reflectors Hᵢ = I − τᵢ·vᵢ·vᵢᴴ the packed answer holds and R its upper
  triangle, QᴴQ = I; ``geqp3`` (pivoted QR): the same for A·P, P a permutation, and
  |r₁₁| ≥ |r₂₂| ≥ … (the pivoting's order; an exact tie may go either way);
* ``orgqr``/``ungqr`` and XLA's ``ProductOfElementaryHouseholderReflectors``: the
  reflectors are its input, so Q is determined, but only to the rounding of a product
  of k rank-one updates: |Q̂ − H₁⋯H_k| ≤ γ_{k(m+3)+1}·|H₁|⋯|H_k| elementwise, γ_j =
  j·u/(1 − j·u) (each update Q − τ·v·(vᴴQ) is within γ_{m+3}·|Hᵢ|·|Q| with
  |Hᵢ| ≤ I + |τᵢ|·|vᵢ|·|vᵢ|ᵀ, the inner product's bound of Higham, Accuracy and Stability
  of Numerical Algorithms, 2nd ed., §3.1 and §3.5 (3.13), and one more rounding to the
  result type), H₁⋯H_k computed in f64/c128. jax passes any τ
  (``householder_product``), so Hᵢ need not be unitary and QᴴQ = I is not asked.

* jaxlib's ``tridiagonal_solve_perturbed_ffi`` (Gaussian elimination with partial
  pivoting, tiny pivots replaced by eps·max|U| as LAPACK's ``xLAGTS`` does): X solves
  T·X = B for a T within the backward error, ‖T·x̂ − b‖∞ ≤ c·n·u·(‖T‖∞·‖x̂‖∞ + ‖b‖∞)
  for each column (the normwise backward error of Rigal and Gaches; LAPACK Users'
  Guide, 3rd ed., §4.4, bounds it by p(n)·u for the tridiagonal solvers); LAPACK's
  ``gtsv`` the same for X, and its factor U (the three diagonals it returns in dl, d,
  du) within c·n·u·‖T‖∞ of hloref's, elementwise (partial pivoting on a tridiagonal
  matrix grows its elements by at most 2, Higham, §9.9), info hloref's.

LAPACK's Householder convention fixes QR's signs only up to the sign of a computed
value: ``xLARFG`` (Reference-LAPACK ``SRC/dlarfg.f``, ``zlarfg.f``) makes
β = −sign(Re α)·‖(α, x)‖₂ (so R's diagonal is real and opposite in sign to the pivot
α, the diagonal element of the column after the previous reflections) and takes H = I
(τ = 0, β = α) where x, the column below the diagonal, is exactly zero. Where α is
within rounding of zero its sign, and so the signs of R's row and Q's column, is the
arithmetic's; where the column below the diagonal is within rounding of zero (a
rank-deficient A), the reflector itself is. Either way another answer satisfies the
identities, so QR is judged by them.

‖E‖₂ is the backward error LAPACK's algorithms guarantee, p(n)·u·‖A‖₂ (LAPACK Users'
Guide, 3rd ed., §4.7 to §4.9, the error bounds of the symmetric and nonsymmetric
eigenproblems and of the SVD), taken as c·n·u·‖A‖₂ with c = 32 here. Outputs that only hold workspace (the destroyed input of ``gesdd``)
are not compared. :func:`identities_hold` returns whether they all held and which.
"""

from __future__ import annotations

import numpy as np

__all__ = ["DECOMPOSITIONS", "identities_hold"]

#: the backward-error constant c of c·n·u·‖A‖
_C = 32


def _routine(target: str) -> str | None:
    """``lapack_ssyevd_ffi`` -> ``syevd``; None for other targets."""
    if target in _XLA_TARGETS:
        return _XLA_TARGETS[target]
    if not (target.startswith("lapack_") and target.endswith("_ffi")):
        return None
    name = target[len("lapack_") + 1:-len("_ffi")]
    return {"heevd": "syevd", "ungqr": "orgqr"}.get(name, name)


#: XLA's own QR custom calls (``xla/hlo/builder/lib/qr.cc``), with LAPACK's conventions,
#: and jaxlib's tridiagonal solve
_XLA_TARGETS = {"Qr": "geqrf", "ProductOfElementaryHouseholderReflectors": "orgqr",
                "tridiagonal_solve_perturbed_ffi": "gtsv-perturbed"}

#: the routines judged by their identities
DECOMPOSITIONS = ("syevd", "geev", "gesdd", "gesvd", "gees", "geqrf", "geqp3", "orgqr",
                  "gtsv", "gtsv-perturbed")


def _u(x: np.ndarray) -> float:
    return float(np.finfo(np.real(np.asarray(x)).dtype).eps) / 2


def _wide(x) -> np.ndarray:
    x = np.asarray(x)
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


def _matrices(x) -> np.ndarray:
    x = _wide(x)
    return x.reshape((-1,) + x.shape[-2:])


def _vectors(x) -> np.ndarray:
    x = _wide(x)
    return x.reshape((-1, x.shape[-1]))


def _norm2(a: np.ndarray) -> float:
    return float(np.linalg.norm(a, 2)) if a.size else 0.0


def _orthonormal(q: np.ndarray, u: float) -> float:
    """‖QᴴQ − I‖ max over elements, in units of n·u."""
    n = q.shape[-1]
    err = float(np.max(np.abs(q.conj().T @ q - np.eye(n)))) if q.size else 0.0
    return err / (max(q.shape) * u)


def _matched(ours: np.ndarray, theirs: np.ndarray, tol: float) -> bool:
    """Whether each of ``theirs`` lies within ``tol`` of its own element of ``ours``
    (greedy nearest matching, the closest pairs first)."""
    free = list(range(len(ours)))
    for t in sorted(theirs, key=lambda z: (np.real(z), np.imag(z))):
        if not free:
            return False
        k = min(free, key=lambda j: abs(ours[j] - t))
        if not abs(ours[k] - t) <= tol:
            return False
        free.remove(k)
    return True


def _hermitian(a: np.ndarray, lower: bool) -> np.ndarray:
    tri = np.tril(a) if lower else np.triu(a)
    strict = np.tril(a, -1) if lower else np.triu(a, 1)
    h = tri + strict.conj().T
    return h - np.diag(np.imag(np.diag(h)) * 1j) if np.iscomplexobj(h) else h


def _eigh(a, lower: bool, expected, actual) -> tuple[bool, str]:
    v, w, info = actual
    _, w_ours, _ = expected
    u = _u(v)
    worst = {"residual": 0.0, "orthogonality": 0.0, "eigenvalues": 0.0}
    for A, V, W, Wo, i in zip(_matrices(a), _matrices(v), _vectors(w), _vectors(w_ours),
                              np.ravel(info)):
        if int(i) != 0:
            return False, "XLA's info is not 0"
        A = _hermitian(A, lower)
        n = A.shape[-1]
        scale = _C * n * u * max(_norm2(A), np.finfo(np.float64).tiny)
        worst["residual"] = max(worst["residual"],
                                float(np.max(np.abs(A @ V - V * W), initial=0)) / scale)
        worst["orthogonality"] = max(worst["orthogonality"], _orthonormal(V, u) / _C)
        worst["eigenvalues"] = max(worst["eigenvalues"],
                                   float(np.max(np.abs(np.sort(W) - np.sort(Wo)), initial=0))
                                   / scale)
    return _verdict(worst, {"residual": "A·V = V·diag(w)", "orthogonality": "VᴴV = I",
                            "eigenvalues": "w = hloref's eigenvalues (Weyl)"})


def _geev(a, real: bool, left: bool, right: bool, expected, actual) -> tuple[bool, str]:
    """Vectors not asked for (compute_left/right = N) hold whatever XLA left there."""
    if real:
        wr, wi, vl, vr, info = actual
        w = _wide(wr) + 1j * _wide(wi)
        w_ours = _wide(expected[0]) + 1j * _wide(expected[1])
        vr_ours = expected[3]
    else:
        w, vl, vr, info = actual
        w_ours, vr_ours = expected[0], expected[2]
    u = _u(a)
    worst = {"right": 0.0, "left": 0.0, "eigenvalues": 0.0}
    for A, W, Wo, L, R, Ro, i in zip(_matrices(a), _vectors(w), _vectors(w_ours),
                                     _matrices(vl), _matrices(vr), _matrices(vr_ours),
                                     np.ravel(info)):
        if int(i) != 0:
            return False, "XLA's info is not 0"
        n = A.shape[-1]
        scale = _C * n * u * max(_norm2(A), np.finfo(np.float64).tiny)
        if right:
            worst["right"] = max(worst["right"], float(np.max(np.abs(A @ R - R * W))) / scale)
        if left:
            worst["left"] = max(worst["left"], float(np.max(
                np.abs(L.conj().T @ A - W[:, None] * L.conj().T))) / scale)
        # Bauer–Fike: |Δλ| ≤ κ(V)·‖E‖ with hloref's eigenvectors
        kappa = float(np.linalg.cond(Ro)) if right and np.all(np.isfinite(Ro)) else 1.0
        if not _matched(np.asarray(Wo), np.asarray(W), max(kappa, 1.0) * scale):
            worst["eigenvalues"] = np.inf
    for side, asked in (("right", right), ("left", left)):
        if not asked:
            del worst[side]
    return _verdict(worst, {"right": "A·vr = vr·diag(w)", "left": "vlᴴ·A = diag(w)·vlᴴ",
                            "eigenvalues": "w = hloref's eigenvalues (Bauer–Fike)"})


def _svd(a, mode: str, expected, actual) -> tuple[bool, str]:
    _, s, U, Vt, info = actual
    s_ours = expected[1]
    u = _u(s)
    worst = {"reconstruction": 0.0, "orthogonality": 0.0, "singular values": 0.0}
    for A, S, So, Um, Vm, i in zip(_matrices(a), _vectors(s), _vectors(s_ours),
                                   _matrices(U), _matrices(Vt), np.ravel(info)):
        if int(i) != 0:
            return False, "XLA's info is not 0"
        m, n = A.shape
        k = min(m, n)
        scale = _C * max(m, n) * u * max(_norm2(A), np.finfo(np.float64).tiny)
        worst["singular values"] = max(worst["singular values"], float(
            np.max(np.abs(np.sort(S) - np.sort(So)), initial=0)) / scale)
        if mode == "N":
            continue
        rebuilt = (Um[:, :k] * S) @ Vm[:k, :]
        worst["reconstruction"] = max(worst["reconstruction"],
                                      float(np.max(np.abs(A - rebuilt), initial=0)) / scale)
        worst["orthogonality"] = max(worst["orthogonality"], _orthonormal(Um, u) / _C,
                                     _orthonormal(Vm.conj().T, u) / _C)
    return _verdict(worst, {"reconstruction": "U·diag(s)·Vᴴ = A",
                            "orthogonality": "UᴴU = I, VᴴV = I",
                            "singular values": "s = hloref's (Weyl)"})


def _gees(a, expected, actual) -> tuple[bool, str]:
    t, q = actual[0], actual[1]
    info = actual[-1]
    u = _u(t)
    worst = {"reconstruction": 0.0, "orthogonality": 0.0, "form": 0.0, "eigenvalues": 0.0}
    for A, T, Q, To, i in zip(_matrices(a), _matrices(t), _matrices(q),
                              _matrices(expected[0]), np.ravel(info)):
        if int(i) != 0:
            return False, "XLA's info is not 0"
        n = A.shape[-1]
        scale = _C * n * u * max(_norm2(A), np.finfo(np.float64).tiny)
        worst["reconstruction"] = max(worst["reconstruction"], float(
            np.max(np.abs(Q @ T @ Q.conj().T - A), initial=0)) / scale)
        worst["orthogonality"] = max(worst["orthogonality"], _orthonormal(Q, u) / _C)
        worst["form"] = max(worst["form"], float(np.max(np.abs(np.tril(T, -2)), initial=0))
                            / scale)
        if not _matched(np.linalg.eigvals(To), np.linalg.eigvals(T),
                        max(float(np.sqrt(scale * max(_norm2(A), 1e-300))), scale)):
            worst["eigenvalues"] = np.inf
    return _verdict(worst, {"reconstruction": "Q·T·Qᴴ = A", "orthogonality": "QᴴQ = I",
                            "form": "T quasi upper triangular",
                            "eigenvalues": "eig(T) = hloref's"})


def _reflectors(packed: np.ndarray, tau: np.ndarray, m: int) -> np.ndarray:
    """H₁·H₂⋯H_k (m × m), Hᵢ = I − τᵢ·vᵢ·vᵢᴴ with vᵢ = (0, …, 0, 1, packed[i+1:, i])
    (LAPACK's packed form, ``xGEQRF``'s and ``xORGQR``'s)."""
    q = np.eye(m, dtype=np.result_type(packed, tau))
    for i in reversed(range(len(tau))):
        v = np.zeros(m, dtype=q.dtype)
        v[i] = 1
        v[i + 1:] = packed[i + 1:, i]
        q = q - tau[i] * np.outer(v, v.conj() @ q)
    return q


def _geqrf(a, actual, pivoted: bool) -> tuple[bool, str]:
    """``(packed, tau)``, or ``(packed, jpvt, tau)`` of ``geqp3``: Q·R = A·P."""
    packed, tau = actual[0], actual[-1]
    jpvt = actual[1] if pivoted else None
    u = _u(packed)
    worst = {"reconstruction": 0.0, "orthogonality": 0.0}
    if pivoted:
        worst["pivot order"] = 0.0
    jpvts = np.asarray(jpvt).reshape(-1, np.shape(jpvt)[-1]) if pivoted else None
    for b, (A, P, T) in enumerate(zip(_matrices(a), _matrices(packed), _vectors(tau))):
        m, n = A.shape
        k = min(m, n)
        scale = _C * max(m, n) * u * max(_norm2(A), np.finfo(np.float64).tiny)
        if pivoted:
            order = jpvts[b].astype(np.int64) - 1
            if sorted(order.tolist()) != list(range(n)):
                return False, "identities fail: jpvt is not a permutation of the columns"
            A = A[:, order]
            d = np.abs(np.diag(P)[:k])
            worst["pivot order"] = max(worst["pivot order"], float(
                np.max(d[1:] - d[:-1], initial=0)) / scale)
        Q = _reflectors(P, T[:k], m)
        R = np.triu(P)[:k, :]
        worst["reconstruction"] = max(worst["reconstruction"], float(
            np.max(np.abs(Q[:, :k] @ R - A), initial=0)) / scale)
        worst["orthogonality"] = max(worst["orthogonality"], _orthonormal(Q, u) / _C)
    return _verdict(worst, {"reconstruction": "Q·R = A·P" if pivoted else "Q·R = A",
                            "orthogonality": "QᴴQ = I (Q = H₁⋯H_k)",
                            "pivot order": "|r₁₁| ≥ |r₂₂| ≥ …"})


def _orgqr(a, tau, actual) -> tuple[bool, str]:
    """Q = the first n columns of H₁⋯H_k, the reflectors ``a`` and ``tau`` hold (any τ:
    jax's ``householder_product`` takes reflectors that are not unitary too)."""
    q_all = actual[0] if isinstance(actual, (tuple, list)) else actual
    u = _u(q_all)
    worst = {"product": 0.0}
    for P, T, Q in zip(_matrices(a), _vectors(tau), _matrices(q_all)):
        m, n = Q.shape
        k = T.shape[-1]
        exact = _reflectors(P, T, m)[:, :n]
        # |H₁|⋯|H_k| (elementwise absolute values, |Hᵢ| ≤ I + |τᵢ|·|vᵢ|·|vᵢ|ᵀ)
        size = _reflectors(np.abs(np.tril(P, -1)) + np.eye(*P.shape), -np.abs(T), m)[:, :n]
        gamma = (k * (m + 3) + 1) * u
        bound = gamma / (1 - gamma) * np.maximum(np.abs(size), np.finfo(np.float64).tiny)
        worst["product"] = max(worst["product"],
                               float(np.max(np.abs(Q - exact) / bound, initial=0)))
    return _verdict(worst, {"product": "Q = H₁⋯H_k (within the rounding bound of the "
                                       "product)"})


def _tridiagonal_solve(dl, d, du, b, actual, expected=None) -> tuple[bool, str]:
    """X with T·X = B, T = tridiag(dl[1:], d, du[:-1]) (jax's convention: dl[0] and
    du[n-1] unused); for ``gtsv`` (``actual`` its five outputs) also the factor's
    diagonals near hloref's (``expected``) and the same info."""
    factors = isinstance(actual, (tuple, list)) and len(actual) == 5
    x_all = actual[3] if factors else actual[0] if isinstance(actual, (tuple, list)) else actual
    u = _u(x_all)
    worst = {"residual": 0.0}
    if factors:
        if not np.array_equal(np.asarray(actual[4]), np.asarray(expected[4])):
            return False, "identities fail: XLA's info is not hloref's"
        n = np.shape(d)[-1]
        norm_t = float(np.max(np.abs(_vectors(dl)) + np.abs(_vectors(d)) + np.abs(_vectors(du)),
                              initial=0))
        scale = _C * max(n, 1) * u * max(norm_t, np.finfo(np.float64).tiny)
        worst["factor"] = max(float(np.max(np.abs(_wide(t) - _wide(o)), initial=0))
                              for t, o in zip(actual[:3], expected[:3])) / scale
    for L, D, U, B, X in zip(_vectors(dl), _vectors(d), _vectors(du), _matrices(b),
                             _matrices(x_all)):
        n = D.shape[-1]
        T = np.diag(D) + np.diag(L[1:], -1) + np.diag(U[:-1], 1) if n else np.zeros((0, 0))
        norm_t = float(np.max(np.sum(np.abs(T), axis=1), initial=0))
        for j in range(B.shape[-1]):
            x, y = X[:, j], B[:, j]
            scale = _C * max(n, 1) * u * max(
                norm_t * float(np.max(np.abs(x), initial=0)) + float(np.max(np.abs(y), initial=0)),
                np.finfo(np.float64).tiny)
            worst["residual"] = max(worst["residual"],
                                    float(np.max(np.abs(T @ x - y), initial=0)) / scale)
    return _verdict(worst, {"residual": "T·X = B (backward error)",
                            "factor": "U's diagonals = hloref's (c·n·u·‖T‖)"})


def _verdict(worst: dict, names: dict) -> tuple[bool, str]:
    """All ratios ≤ 1 (within c·n·u·‖A‖): held; the words list each identity and its
    worst ratio to the bound."""
    held = all(v <= 1.0 for v in worst.values())
    words = ", ".join(f"{names[k]} ({v:.2g} of the bound)" for k, v in worst.items())
    return held, ("identities held: " if held else "identities fail: ") + words


def identities_hold(target: str, config: dict, operands: list, expected, actual):
    """Whether XLA's answer ``actual`` to the LAPACK call ``target`` on ``operands``
    satisfies the identities that define it (hloref's answer ``expected`` gives the
    eigen- or singular values to match), and which: ``(held, words)``, or None where
    ``target`` is no decomposition judged so. ``config``: the call's backend_config
    characters (``uplo``, ``mode``, ``compute_left``, ``compute_right``)."""
    routine = _routine(target)
    if routine not in DECOMPOSITIONS or not operands:
        return None
    a = operands[0]
    try:
        with np.errstate(all="ignore"):
            if routine == "orgqr":
                return _orgqr(a, operands[1], actual) if len(operands) == 2 else None
            if routine in ("gtsv", "gtsv-perturbed"):
                return _tridiagonal_solve(*operands, actual, expected) \
                    if len(operands) == 4 else None
            if not isinstance(actual, (tuple, list)):
                return None
            if routine in ("geqrf", "geqp3"):
                return _geqrf(a, actual, routine == "geqp3")
            if len(operands) != 1 or not isinstance(expected, (tuple, list)):
                return None
            if routine == "syevd":
                return _eigh(a, config.get("uplo", "L") == "L", expected, actual)
            if routine == "geev":
                return _geev(a, np.asarray(a).dtype.kind != "c",
                             config.get("compute_left", "N") == "V",
                             config.get("compute_right", "V") == "V", expected, actual)
            if routine in ("gesdd", "gesvd"):
                return _svd(a, config.get("mode", "A"), expected, actual)
            return _gees(a, expected, actual)
    except (ValueError, IndexError, np.linalg.LinAlgError) as exc:
        return False, f"the identities could not be checked ({exc})"
