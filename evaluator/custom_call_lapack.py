"""LAPACK custom calls as JAX lowers ``jnp.linalg`` / ``lax.linalg`` on CPU.

Targets are jaxlib's typed-FFI kernels (``api_version=API_VERSION_TYPED_FFI``),
``lapack_<t><routine>_ffi`` with ``<t>`` one of ``s d c z`` (f32 f64 c64 c128).
Attributes come in ``backend_config={uplo = 76 : ui8, ...}`` (chars as their code,
``L``=76, ``U``=85, ``N``=78, ``T``=84, ``C``=67, ``V``=86, ``A``=65, ``S``=83, ``R``=82).
Leading dimensions are batch; every result is the LAPACK routine's documented output
for each matrix, with ``info`` (s32) as LAPACK sets it. hloref values are logical
arrays (the ``{0,1}`` column-major layouts XLA asks for only change the buffer order),
so matrices go to LAPACK as they are.

Each matrix is computed by SciPy's LAPACK (``scipy.linalg.lapack``, the library
jaxlib itself calls) in f64 / c128 (the ``d``/``z`` routine) from the exact operand
values and rounded once to the result type. So f64/c128 results are the LAPACK
results; f32/c64 ones are the more accurate f64 results rounded, and differ from
XLA:CPU's single-precision LAPACK by its rounding error. Consequences:

* Non-unique outputs follow LAPACK's conventions (Householder vectors and ``tau``
  of ``xLARFG``, eigenvectors of ``xSYEVD``/``xGEEV`` normalised to unit norm with
  LAPACK's choice of sign/phase, SVD signs of ``xGESDD``/``xGESVD``, the Schur form
  of ``xGEES``), but where the single-precision routine takes a different path
  (near-tied pivots in ``getrf``/``geqp3``, ill-separated eigenvalues) a sign, a
  phase, a pivot or a basis of an invariant subspace may differ from XLA:CPU's.
* ``info`` can differ on inputs that are singular / not positive definite in one
  precision only (e.g. a matrix positive definite in f64 but not in f32).
* Outputs LAPACK leaves undefined (``a`` after ``gesdd``/``gesvd``/``syevd``, ``u``
  and ``vt`` with ``mode=N``, left/right eigenvectors not asked for, Schur vectors
  with ``mode=N``) are: the input (for ``a``) or zeros. Outputs after a failure
  (``info != 0``) are LAPACK's partial results; JAX replaces them with NaN.

Targets (``_ffi`` suffix, each in the four types unless said):
``potrf`` (uplo; other triangle kept from the input), ``getrf`` (1-based ``ipiv``),
``trsm`` (side, uplo, trans_x, diag; optional scalar ``alpha`` third operand),
``geqrf`` (no info result), ``geqp3`` (jpvt operand must be zeros: free columns),
``orgqr``/``ungqr``, ``ormqr``/``unmqr`` (left, transpose: ``T`` real, ``C``
complex), ``syevd``/``heevd`` (mode, uplo; eigenvalues ascending), ``gesdd`` and
``gesvd`` (mode A/S/N; results ``(a, s, u, vt, info)``), ``geev`` (compute_left,
compute_right; real types return ``(wr, wi, vl, vr, info)`` with the packed
conjugate-pair eigenvectors unpacked to complex as jaxlib does; a non-finite input
gives ``info=-4``), ``gees`` (mode, sort=N only; real ``(t, vs, wr, wi, sdim,
info)``, complex ``(t, vs, w, sdim, info)``), ``gehrd`` (low, high: 1-based
``ilo``/``ihi``), ``sytrd``/``hetrd`` (uplo), ``gtsv`` (``dl`` of length n with
``dl[0]`` unused and ``du[n-1]`` unused, as jaxlib passes ``dl + 1``), and
``Qr`` and ``ProductOfElementaryHouseholderReflectors`` (XLA's own QR custom calls,
``xla/hlo/builder/lib/qr.cc``, which XLA's QrExpander expands with LAPACK's Householder
conventions: ``geqrf``'s ``(a, taus)`` and ``orgqr``'s ``Q``; any float type), and
``tridiagonal_solve_perturbed_ffi`` (jaxlib's LAPACK-``xLAGTF``/``xLAGTS``-style
solve that perturbs tiny pivots, ported; its perturbation constants are the element
type's ``eps``/``tiny``).
"""

from __future__ import annotations

import functools
import re

import numpy as np

from hloref.errors import HloEvalError, HloUnsupportedError
from hloref.shapes import TupleShape

from .blas_threads import blas_call
from .custom_call import custom_call


_TYPES = "sdcz"


def _names(real: str, complex_: str | None = None) -> list[str]:
    complex_ = complex_ or real
    return [f"lapack_{t}{real if t in 'sd' else complex_}_ffi" for t in _TYPES]


_ATTR = re.compile(r"([A-Za-z_][\w.]*)\s*=\s*([^,}]+)")


def _config(attrs) -> dict:
    """``{uplo = 76 : ui8, high = 4 : i32, left = true}`` → {name: int/bool}."""
    text = attrs.get("backend_config")
    out = {}
    if text is None:
        return out
    for name, value in _ATTR.findall(str(text)):
        value = value.split(":")[0].strip()
        if value in ("true", "false"):
            out[name] = value == "true"
        else:
            try:
                out[name] = int(value)
            except ValueError:
                out[name] = value.strip('"')
    return out


def backend_char(backend_config, name: str, default: str) -> str:
    """Attribute ``name`` of a LAPACK call's ``backend_config`` (``{uplo = 76 : ui8,
    ...}``) as its character (``"L"``), or ``default``; for readers of the instruction
    outside this module (the envelope's error bounds)."""
    return _char(_config({"backend_config": backend_config}), name, default)


def _char(cfg, name, default):
    v = cfg.get(name, default)
    return chr(v) if isinstance(v, int) and not isinstance(v, bool) else str(v)


def _lapack(x: np.ndarray, real: str, complex_: str | None = None):
    try:
        from scipy.linalg import lapack
    except ImportError:  # pragma: no cover - scipy comes with jax
        raise HloUnsupportedError("custom-call", "cpu",
                                  "LAPACK custom calls need scipy (scipy.linalg.lapack)") from None
    routine = getattr(lapack, ("z" + (complex_ or real)) if x.dtype.kind == "c" else "d" + real)
    # on hloref's BLAS threads; this call (after the import) also finds scipy's OpenBLAS
    return functools.partial(blas_call, routine)


def _wide(x: np.ndarray) -> np.ndarray:
    if x.dtype.kind == "c":
        return x.astype(np.complex128)
    if x.dtype.kind != "f":
        raise HloEvalError(f"LAPACK custom call on {x.dtype} operand")
    return x.astype(np.float64)


def _results(shape):
    elems = shape.elements if isinstance(shape, TupleShape) else (shape,)
    return [np.zeros(e.dims, e.element_type.dtype) for e in elems]


def _batch(x: np.ndarray, core: int = 2):
    return np.ndindex(*x.shape[: x.ndim - core])


def _put(out: np.ndarray, idx, value):
    value = np.asarray(value)
    if out.dtype.kind != "c" and value.dtype.kind == "c":
        value = value.real
    out[idx] = value.astype(out.dtype)


def _check(info, routine):
    if info < 0:
        raise HloEvalError(f"LAPACK {routine}: illegal argument {-info}")


def _empty(x):
    return 0 in x.shape[-2:]


# --- Cholesky, LU, triangular solve ------------------------------------------------


@custom_call(*_names("potrf"))
def _potrf(operands, shape, attrs):
    (a,) = operands
    lower = _char(_config(attrs), "uplo", "L") == "L"
    out, info = _results(shape)
    out[...] = a
    if _empty(a):
        return out, info
    fn = _lapack(a, "potrf")
    for idx in _batch(a):
        c, inf = fn(_wide(a[idx]), lower=lower, clean=0)
        _check(inf, "potrf")
        _put(out, idx, c)
        info[idx] = inf
    return out, info


@custom_call(*_names("getrf"))
def _getrf(operands, shape, attrs):
    (a,) = operands
    out, ipiv, info = _results(shape)
    out[...] = a
    if _empty(a):
        return out, ipiv, info
    fn = _lapack(a, "getrf")
    for idx in _batch(a):
        lu, piv, inf = fn(_wide(a[idx]))
        _check(inf, "getrf")
        _put(out, idx, lu)
        ipiv[idx] = np.asarray(piv) + 1  # scipy reports 0-based pivots
        info[idx] = inf
    return out, ipiv, info


@custom_call(*_names("trsm"))
def _trsm(operands, shape, attrs):
    from scipy.linalg import blas
    a, b = operands[:2]
    cfg = _config(attrs)
    side = _char(cfg, "side", "L")
    lower = _char(cfg, "uplo", "L") == "L"
    trans = {"N": 0, "T": 1, "C": 2}[_char(cfg, "trans_x", "N")]
    unit = _char(cfg, "diag", "N") == "U"
    (out,) = _results(shape)
    out[...] = b
    if _empty(b):
        return out
    alpha = 1.0
    if len(operands) > 2:
        alpha = complex(operands[2]) if b.dtype.kind == "c" else float(operands[2])
    fn = functools.partial(blas_call, blas.ztrsm if b.dtype.kind == "c" else blas.dtrsm)
    for idx in _batch(b):
        x = fn(alpha, _wide(a[idx]), _wide(b[idx]), side=int(side == "R"), lower=int(lower),
               trans_a=trans, diag=int(unit))
        _put(out, idx, x)
    return out


# --- QR ------------------------------------------------------------------------------


@custom_call(*_names("geqrf"), "Qr")
def _geqrf(operands, shape, attrs):
    (a,) = operands
    out, tau = _results(shape)
    out[...] = a
    if _empty(a):
        return out, tau
    fn = _lapack(a, "geqrf")
    for idx in _batch(a):
        qr, t, _, inf = fn(_wide(a[idx]))
        _check(inf, "geqrf")
        _put(out, idx, qr)
        _put(tau, idx, t)
    return out, tau


@custom_call(*_names("geqp3"))
def _geqp3(operands, shape, attrs):
    a, jpvt_in = operands
    out, jpvt, tau = _results(shape)
    out[...] = a
    jpvt[...] = jpvt_in
    if _empty(a):
        return out, jpvt, tau
    if np.any(jpvt_in != 0):
        raise HloUnsupportedError("custom-call", "cpu",
                                  f"{attrs['custom_call_target']} with fixed (non-zero jpvt) "
                                  f"columns; JAX passes zeros")
    fn = _lapack(a, "geqp3")
    for idx in _batch(a):
        qr, p, t, _, inf = fn(_wide(a[idx]))
        _check(inf, "geqp3")
        _put(out, idx, qr)
        jpvt[idx] = p  # scipy's wrapper keeps LAPACK's 1-based column numbers
        _put(tau, idx, t)
    return out, jpvt, tau


@custom_call(*_names("orgqr", "ungqr"), "ProductOfElementaryHouseholderReflectors")
def _orgqr(operands, shape, attrs):
    a, tau = operands
    (out,) = _results(shape)
    out[...] = a
    if _empty(a):
        return out
    fn = _lapack(a, "orgqr", "ungqr")
    for idx in _batch(a):
        q, _, inf = fn(_wide(a[idx]), _wide(tau[idx]))
        _check(inf, "orgqr")
        _put(out, idx, q)
    return out


@custom_call(*_names("ormqr", "unmqr"))
def _ormqr(operands, shape, attrs):
    a, tau, c = operands
    cfg = _config(attrs)
    left = bool(cfg.get("left", True))
    transpose = bool(cfg.get("transpose", False))
    (out,) = _results(shape)
    out[...] = c
    if _empty(c) or tau.shape[-1] == 0:
        return out
    fn = _lapack(a, "ormqr", "unmqr")
    trans = ("C" if c.dtype.kind == "c" else "T") if transpose else "N"
    lwork = max(1, 64 * max(c.shape[-2:]))
    for idx in _batch(c):
        cq, _, inf = fn("L" if left else "R", trans, _wide(a[idx]), _wide(tau[idx]),
                        _wide(c[idx]), lwork)
        _check(inf, "ormqr")
        _put(out, idx, cq)
    return out


# --- Eigen / singular value decompositions -------------------------------------------


@custom_call(*_names("syevd", "heevd"))
def _syevd(operands, shape, attrs):
    (a,) = operands
    cfg = _config(attrs)
    vectors = _char(cfg, "mode", "V") == "V"
    lower = _char(cfg, "uplo", "L") == "L"
    v, w, info = _results(shape)
    v[...] = a
    if _empty(a):
        return v, w, info
    fn = _lapack(a, "syevd", "heevd")
    for idx in _batch(a):
        ww, vv, inf = fn(_wide(a[idx]), compute_v=int(vectors), lower=int(lower))
        _check(inf, "syevd")
        _put(w, idx, ww)
        if vectors:
            _put(v, idx, vv)
        info[idx] = inf
    return v, w, info


def _svd(routine):
    def impl(operands, shape, attrs):
        (a,) = operands
        mode = _char(_config(attrs), "mode", "A")
        if mode not in "ASN":
            raise HloUnsupportedError("custom-call", "cpu",
                                      f"{attrs['custom_call_target']} mode {mode!r}")
        out, s, u, vt, info = _results(shape)
        out[...] = a  # LAPACK destroys a; hloref leaves the input
        if _empty(a):
            return out, s, u, vt, info
        fn = _lapack(a, routine)
        for idx in _batch(a):
            uu, ss, vv, inf = fn(_wide(a[idx]), compute_uv=int(mode != "N"),
                                 full_matrices=int(mode == "A"))
            _check(inf, routine)
            _put(s, idx, ss)
            if mode != "N":
                _put(u, idx, uu)
                _put(vt, idx, vv)
            info[idx] = inf
        return out, s, u, vt, info
    return impl


custom_call(*_names("gesdd"))(_svd("gesdd"))
custom_call(*_names("gesvd"))(_svd("gesvd"))


def _unpack(wi: np.ndarray, packed: np.ndarray) -> np.ndarray:
    """jaxlib's UnpackEigenvectors: conjugate pairs (re in column j, im in j+1)."""
    n = wi.shape[0]
    out = packed.astype(np.complex128)
    j = 0
    while j < n:
        if wi[j] == 0 or np.isnan(wi[j]) or j + 1 >= n:
            j += 1
            continue
        re, im = packed[:, j], packed[:, j + 1]
        out[:, j] = re + 1j * im
        out[:, j + 1] = re - 1j * im
        j += 2
    return out


@custom_call(*_names("geev"))
def _geev(operands, shape, attrs):
    (a,) = operands
    cfg = _config(attrs)
    left = _char(cfg, "compute_left", "N") == "V"
    right = _char(cfg, "compute_right", "V") == "V"
    outs = _results(shape)
    real = a.dtype.kind != "c"
    info = outs[-1]
    vl, vr = outs[-3], outs[-2]
    if _empty(a):
        return tuple(outs)
    fn = _lapack(a, "geev")
    for idx in _batch(a):
        x = _wide(a[idx])
        if not np.all(np.isfinite(x)):
            info[idx] = -4  # jaxlib checks before calling LAPACK; outputs undefined
            for o in outs[:-1]:
                o[idx] = np.nan
            continue
        if real:
            wr, wi, l, r, inf = fn(x, compute_vl=int(left), compute_vr=int(right))
            _put(outs[0], idx, wr)
            _put(outs[1], idx, wi)
            if inf == 0:
                if left:
                    _put(vl, idx, _unpack(wi, l))
                if right:
                    _put(vr, idx, _unpack(wi, r))
        else:
            w, l, r, inf = fn(x, compute_vl=int(left), compute_vr=int(right))
            _put(outs[0], idx, w)
            if left:
                _put(vl, idx, l)
            if right:
                _put(vr, idx, r)
        _check(inf, "geev")
        info[idx] = inf
    return tuple(outs)


@custom_call(*_names("gees"))
def _gees(operands, shape, attrs):
    (a,) = operands
    cfg = _config(attrs)
    vectors = _char(cfg, "mode", "V") == "V"
    if _char(cfg, "sort", "N") != "N":
        raise HloUnsupportedError("custom-call", "cpu", f"{attrs['custom_call_target']} with "
                                  f"sort=S (jaxlib does not implement it either)")
    outs = _results(shape)
    real = a.dtype.kind != "c"
    t_out, vs_out = outs[0], outs[1]
    t_out[...] = a
    info = outs[-1]
    if _empty(a):
        return tuple(outs)
    fn = _lapack(a, "gees")
    for idx in _batch(a):
        if real:
            t, sdim, wr, wi, vs, _, inf = fn(lambda *_: None, _wide(a[idx]),
                                             compute_v=int(vectors), sort_t=0)
            _put(outs[2], idx, wr)
            _put(outs[3], idx, wi)
        else:
            t, sdim, w, vs, _, inf = fn(lambda *_: None, _wide(a[idx]),
                                        compute_v=int(vectors), sort_t=0)
            _put(outs[2], idx, w)
        _check(inf, "gees")
        _put(t_out, idx, t)
        if vectors:
            _put(vs_out, idx, vs)
        outs[-2][idx] = sdim
        info[idx] = inf
    return tuple(outs)


# --- Hessenberg and tridiagonal reductions, tridiagonal solves -----------------------


@custom_call(*_names("gehrd"))
def _gehrd(operands, shape, attrs):
    (a,) = operands
    cfg = _config(attrs)
    n = a.shape[-1]
    low, high = int(cfg.get("low", 1)), int(cfg.get("high", n))
    out, tau, info = _results(shape)
    out[...] = a
    if _empty(a) or n < 2:
        return out, tau, info
    fn = _lapack(a, "gehrd")
    for idx in _batch(a):
        ht, t, inf = fn(_wide(a[idx]), lo=low - 1, hi=high - 1, lwork=max(1, 64 * n))
        _check(inf, "gehrd")
        _put(out, idx, ht)
        _put(tau, idx, t)
        info[idx] = inf
    return out, tau, info


@custom_call(*_names("sytrd", "hetrd"))
def _sytrd(operands, shape, attrs):
    (a,) = operands
    lower = _char(_config(attrs), "uplo", "L") == "L"
    out, d, e, tau, info = _results(shape)
    out[...] = a
    if _empty(a):
        return out, d, e, tau, info
    fn = _lapack(a, "sytrd", "hetrd")
    n = a.shape[-1]
    for idx in _batch(a):
        c, dd, ee, t, inf = fn(_wide(a[idx]), lower=int(lower), lwork=max(1, 64 * n))
        _check(inf, "sytrd")
        _put(out, idx, c)
        _put(d, idx, dd)
        _put(e, idx, ee)
        _put(tau, idx, t)
        info[idx] = inf
    return out, d, e, tau, info


@custom_call(*_names("gtsv"))
def _gtsv(operands, shape, attrs):
    dl, d, du, b = operands
    dl_o, d_o, du_o, b_o, info = _results(shape)
    dl_o[...], d_o[...], du_o[...], b_o[...] = dl, d, du, b
    n = b.shape[-2]
    if n == 0 or b.shape[-1] == 0:
        return dl_o, d_o, du_o, b_o, info
    fn = _lapack(b, "gtsv")
    for idx in _batch(b):
        bb = _wide(b[idx])
        dd = _wide(d[idx])
        if n == 1:  # scipy cannot take the empty off-diagonals
            inf = 1 if dd[0] == 0 else 0
            if not inf:
                _put(b_o, idx, bb / dd[0])
            info[idx] = inf
            continue
        du2, d2, du1, x, inf = fn(_wide(dl[idx])[1:], dd, _wide(du[idx])[:-1], bb)
        _check(inf, "gtsv")
        dl_o[idx + (slice(1, None),)] = np.asarray(du2).astype(dl_o.dtype)
        _put(d_o, idx, d2)
        du_o[idx + (slice(0, n - 1),)] = np.asarray(du1).astype(du_o.dtype)
        _put(b_o, idx, x)
        info[idx] = inf
    return dl_o, d_o, du_o, b_o, info


def _perturb_pivot(perturb, pivot, row, fin):
    """jaxlib's MaybePerturbPivot (from LAPACK xLAGTS)."""
    one = 1.0
    tiny = float(fin.tiny)
    small = one / float(fin.max)
    safemin = tiny if small < tiny else small * (one + float(fin.eps))
    bignum = one / safemin
    abs_pivot = abs(pivot)
    if abs_pivot >= one:
        return pivot, row
    perturb = max(abs(perturb), safemin)
    perturb = float(np.copysign(perturb, np.real(pivot)))
    max_factor = float(np.max(np.abs(row))) if row.size else 0.0
    stop = False
    while abs_pivot < one and not stop:
        if abs_pivot < safemin:
            if abs_pivot == 0 or max_factor * safemin > abs_pivot:
                pivot += perturb
                perturb *= 2.0
            else:
                pivot *= bignum
                row = row * bignum
                stop = True
        elif max_factor > abs_pivot * bignum:
            pivot += perturb
            perturb *= 2.0
        else:
            stop = True
        abs_pivot = abs(pivot)
    return pivot, row


def _solve_perturbed(sub, diag, sup, rhs, fin):
    """jaxlib's SolveWithGaussianEliminationWithPivotingAndPerturbSingular."""
    n = diag.shape[0]
    eps = float(fin.eps)
    x = np.zeros_like(rhs)
    if n == 0:
        return x
    if n == 1:
        p, row = _perturb_pivot(eps * abs(diag[0]), diag[0], rhs[0].copy(), fin)
        x[0] = row / p
        return x
    u = np.zeros((n, 3), rhs.dtype)
    u[0, 0], u[0, 1] = diag[0], sup[0]
    max_abs_u = max(abs(u[0, 0]), abs(u[0, 1]))
    scale1 = abs(u[0, 0]) + abs(u[0, 1])
    x[0] = rhs[0]
    for k in range(n - 1):
        u[k + 1, 0] = diag[k + 1]
        scale2 = abs(sub[k + 1]) + abs(u[k + 1, 0])
        if k < n - 2:
            scale2 += abs(sup[k + 1])
        if sub[k + 1] == 0:
            scale1 = scale2
            u[k + 1, 1] = sup[k + 1]
            u[k, 2] = 0
            x[k + 1] = rhs[k + 1]
        else:
            piv1 = 0.0 if u[k, 0] == 0 else abs(u[k, 0]) / scale1
            piv2 = abs(sub[k + 1]) / scale2
            if piv2 <= piv1:
                scale1 = scale2
                factor = sub[k + 1] / u[k, 0]
                u[k + 1, 0] -= factor * u[k, 1]
                u[k + 1, 1] = sup[k + 1]
                u[k, 2] = 0
                x[k + 1] = rhs[k + 1] - factor * x[k]
            else:
                factor = u[k, 0] / sub[k + 1]
                utmp = u[k, 1]
                u[k, 0] = sub[k + 1]
                u[k + 1, 0] = utmp - factor * diag[k + 1]
                u[k, 1] = diag[k + 1]
                if k < n - 2:
                    u[k, 2] = sup[k + 1]
                    u[k + 1, 1] = -factor * sup[k + 1]
                x[k + 1] = x[k] - factor * rhs[k + 1]
                x[k] = rhs[k + 1]
                scale1 = abs(u[k + 1, 0]) + abs(u[k + 1, 1])
        if k < n - 2:
            max_abs_u = max(max_abs_u, *np.abs(u[k]))
    max_abs_u = max(max_abs_u, abs(u[n - 1, 0]))
    perturb = eps * max_abs_u
    p, row = _perturb_pivot(perturb, u[n - 1, 0], x[n - 1].copy(), fin)
    x[n - 1] = row * (1.0 / p)
    p = u[n - 2, 0]
    row = x[n - 2] - u[n - 2, 1] * x[n - 1]
    p, row = _perturb_pivot(float(np.copysign(perturb, np.real(p))), p, row, fin)
    x[n - 2] = row * (1.0 / p)
    for k in range(n - 3, -1, -1):
        p = u[k, 0]
        row = x[k] - u[k, 1] * x[k + 1] - u[k, 2] * x[k + 2]
        p, row = _perturb_pivot(float(np.copysign(perturb, np.real(p))), p, row, fin)
        x[k] = row * (1.0 / p)
    return x


@custom_call("tridiagonal_solve_perturbed_ffi")
def _tridiagonal_solve_perturbed(operands, shape, attrs):
    dl, d, du, b = operands
    (out,) = _results(shape)
    fin = np.finfo(b.dtype)
    for idx in _batch(b):
        _put(out, idx, _solve_perturbed(_wide(dl[idx]), _wide(d[idx]), _wide(du[idx]),
                                        _wide(b[idx]), fin))
    return out
