"""Error bounds of the ops XLA:CPU expands into element-type arithmetic.

XLA:CPU rewrites batch norm, cholesky and triangular-solve into elementwise ops,
reductions and dots in the element type (batchnorm_expander, cholesky_expander,
triangular_solve_expander); hloref evaluates the definitions in f64. The bounds
below are first-order rounding-error bounds of the *expanded* formulas (Higham,
"Accuracy and Stability of Numerical Algorithms", 2nd ed.), evaluated in f64 on the
operands' magnitudes, so that an expansion's legitimate rounding is not a mismatch
while anything larger still is. ``u`` is the type's epsilon (2^-mantissa_bits,
twice the unit roundoff: one budget per side).
"""

from __future__ import annotations

import re

import numpy as np

from hloref.ir import Instruction
from hloref.op_properties import opcodes_with
from hloref.opcodes import EXPANDED
from hloref.shapes import ArrayShape, TupleShape, flatten_shape
from hloref.types import ElementType

from .compare import part_format

__all__ = ["batch_norm_atol", "cholesky_atol", "triangular_solve_atol", "expander_atol",
           "complex_formula_atol", "lapack_atol", "is_single_precision_lapack",
           "COMPLEX_FORMULA_OPS", "EXPANDED_OPS"]

#: Ops XLA:CPU expands into element-type arithmetic (bounds below): the catalogue's group.
EXPANDED_OPS = EXPANDED

_LOCAL = 8.0  # roundings of the elementwise steps: rsqrt (2 ulp budget) + ~6 ops


def _eps(et: ElementType) -> float:
    return 2.0 ** -part_format(et).mantissa_bits


def _flag(value, default=False) -> bool:
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("true", "1")


def _bn_epsilon(epsilon, et) -> float:
    return float(np.float32(float(epsilon)))


def batch_norm_atol(opcode: str, operands: list, *, epsilon, feature_index,
                    et: ElementType) -> list:
    """Absolute error bounds, one per output, for XLA's expansion of batch norm.

    Training: mean = Σx/N and var = E[x²] − E[x]², each an N-term sum (error ≤ N·u·Σ|t|,
    Higham (4.4)); so δmean ≤ 2N·u·E|x| and δvar ≤ 2N·u·E[x²] + 4N·u·|mean|·E|x| +
    4u·E[x²]: the cancellation in E[x²] − E[x]² makes δvar/var as large as
    ~6N·u·E[x²]/var. The normalized output y = (x − mean)·scale·rsqrt(var + ε) + offset
    then has δy ≤ |scale|·r·δmean + |x − mean|·|scale|·r·δvar/(var + ε) + 8u·(|x| +
    |mean|)·|scale|·r + 2u·|offset| (r = rsqrt(var + ε); δr/r ≤ δvar/(var + ε) while
    δvar ≤ (var + ε)/2). When δvar > (var + ε)/2 the expansion has no correct bits in
    the variance and the channel's y and var are unconstrained (atol = inf; a NaN on
    one side still mismatches). Inference: XLA computes x·ts + (offset − mean·ts) with
    ts = scale·rsqrt(var + ε): δy ≤ 8u·(|x| + |mean|)·|scale|·r + 2u·|offset| (the
    cancellation of x·ts against mean·ts). Grad: grad_offset = Σdy (2N·u·Σ|dy|),
    grad_scale = r·(Σdy·x − mean·Σdy) (4N·u·r·(Σ|dy·x| + |mean|·Σ|dy|)), and
    grad_operand propagates both plus local roundings."""
    u = _eps(et)
    f64 = [np.asarray(o).astype(np.float64) for o in operands]
    x = f64[0]
    fi = int(feature_index)
    axes = tuple(d for d in range(x.ndim) if d != fi)
    n = max(1, x.size // max(1, x.shape[fi])) if x.ndim else 1
    eps_v = _bn_epsilon(epsilon, et)

    def fv(v):
        shape = [1] * x.ndim
        shape[fi] = -1
        return np.asarray(v).reshape(shape)

    with np.errstate(all="ignore"):
        ax = np.abs(x)
        if opcode == "batch-norm-inference":
            scale, offset, mean, var = f64[1:5]
            r = 1.0 / np.sqrt(np.abs(var + eps_v))
            dy = _LOCAL * u * (ax + fv(np.abs(mean))) * fv(np.abs(scale) * r) + \
                2 * u * fv(np.abs(offset))
            return [dy]
        if opcode == "batch-norm-training":
            scale, offset = f64[1:3]
            mean = np.mean(x, axis=axes)
            ex2 = np.mean(x * x, axis=axes)
            eabs = np.mean(ax, axis=axes)
            var = np.mean((x - fv(mean)) ** 2, axis=axes)
            dmean = 2 * n * u * eabs
            dvar = 2 * n * u * ex2 + 4 * n * u * np.abs(mean) * eabs + 4 * u * ex2
            v = var + eps_v
            r = 1.0 / np.sqrt(v)
            lost = ~(dvar <= v / 2)
            rel = np.where(lost, np.inf, dvar / v)
            dy = fv(np.abs(scale) * r * dmean) + np.abs(x - fv(mean)) * fv(np.abs(scale) * r * rel) \
                + _LOCAL * u * (ax + fv(np.abs(mean))) * fv(np.abs(scale) * r) \
                + 2 * u * fv(np.abs(offset))
            return [np.nan_to_num(dy, nan=np.inf), dmean, np.where(lost, np.inf, dvar)]
        if opcode == "batch-norm-grad":
            scale, mean, var, g = f64[1:5]
            r = 1.0 / np.sqrt(np.abs(var + eps_v))
            ag = np.abs(g)
            centred = x - fv(mean)
            go = np.sum(g, axis=axes)
            gs = r * np.sum(g * centred, axis=axes)
            dgo = 2 * n * u * np.sum(ag, axis=axes)
            dgs = 4 * n * u * r * (np.sum(ag * ax, axis=axes) + np.abs(mean) * np.sum(ag, axis=axes))
            axm = ax + fv(np.abs(mean))
            dgx = fv(np.abs(scale) * r) * (fv(dgo / n) + axm * fv(r * dgs / n)) + \
                _LOCAL * u * fv(np.abs(scale) * r) * (ag + fv(np.abs(go) / n) +
                                                      axm * fv(r * np.abs(gs) / n))
            return [dgx, dgs + _LOCAL * u * np.abs(gs), dgo]
    return []


def _tri(m: np.ndarray, lower: bool, unit: bool) -> np.ndarray:
    t = np.tril(m) if lower else np.triu(m)
    if unit:
        idx = np.arange(m.shape[-1])
        t = t.copy()
        t[..., idx, idx] = 1
    return t


def _abs_inv(m: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        try:
            return np.abs(np.linalg.inv(m))
        except np.linalg.LinAlgError:
            return np.full(m.shape, np.inf)


def cholesky_atol(a: np.ndarray, result: np.ndarray, *, lower, et: ElementType) -> np.ndarray:
    """Bound for a cholesky computed by any column algorithm in the element type.

    Backward error (Higham Thm 10.3): L̂L̂ᵀ = A + ΔA, |ΔA| ≤ γ_{n+1}·|L̂||L̂ᵀ|. First-order
    forward perturbation (Higham §10.1, Sun 1991): ΔL = L·Φ(L⁻¹ΔA L⁻ᵀ), Φ = lower
    triangle with halved diagonal, so |ΔL| ≤ |L|·Φ(|L⁻¹|·|ΔA|·|L⁻ᵀ|): the factor's
    conditioning enters through |L⁻¹|. Doubled for the two implementations."""
    u = _eps(et)
    low = _flag(lower, True)
    L = np.asarray(result).astype(np.complex128 if et.is_complex else np.float64)
    if not low:
        L = np.conj(np.swapaxes(L, -1, -2))
    L = np.tril(L)
    n = L.shape[-1]
    with np.errstate(all="ignore"):
        aL = np.abs(L)
        dA = 2 * (n + 1) * u * (aL @ np.swapaxes(aL, -1, -2))
        iL = _abs_inv(L)
        E = iL @ dA @ np.swapaxes(iL, -1, -2)
        phi = np.tril(E) - 0.5 * np.eye(n) * E
        bound = aL @ phi
    bound = np.nan_to_num(bound, nan=np.inf)
    return bound if low else np.swapaxes(bound, -1, -2)


def triangular_solve_atol(a: np.ndarray, x: np.ndarray, *, left_side, lower, unit_diagonal,
                          transpose_a, et: ElementType) -> np.ndarray:
    """Bound for a triangular solve op(A)·X = B (or X·op(A) = B) by substitution or
    blocked inversion in the element type: backward error (A + ΔA)x̂ = b with
    |ΔA| ≤ γ_n·|A| (Higham Thm 8.5), so |x − x̂| ≤ γ_n·|A⁻¹|·|A|·|x̂| (Skeel's
    condition number, Higham (7.13)). The expander inverts diagonal blocks and
    multiplies (Higham §8.2/§14.2 give the same form with a constant ~n), so the
    budget is 4n·u·|op(A)⁻¹|·|op(A)|·|X|."""
    u = _eps(et)
    A = np.asarray(a).astype(np.complex128 if et.is_complex else np.float64)
    X = np.abs(np.asarray(x).astype(np.complex128 if et.is_complex else np.float64))
    M = _tri(A, _flag(lower), _flag(unit_diagonal))
    trans = str(transpose_a).strip().upper()
    if trans in ("TRANSPOSE", "ADJOINT"):
        M = np.swapaxes(M, -1, -2)
    n = M.shape[-1]
    with np.errstate(all="ignore"):
        aM, iM = np.abs(M), _abs_inv(M)
        if _flag(left_side):
            bound = 4 * n * u * (iM @ (aM @ X))
        else:
            bound = 4 * n * u * ((X @ aM) @ iM)
    return np.nan_to_num(bound, nan=np.inf)


#: Complex transcendentals XLA:CPU builds from real formulas (elementwise_ir_emitter).
COMPLEX_FORMULA_OPS = opcodes_with("complex-formula")


def complex_formula_atol(opcode: str, operands: list, et: ElementType):
    """Absolute error bound for complex ``opcode`` computed as XLA does, from real
    functions of the components, each within its own budget; the error is measured
    normwise, so what matters is the size of the real intermediates, not of |result|.

    * sine/cosine: sin(x+iy) = sin x·cosh y + i·cos x·sinh y with sinh y = (e^y − e^-y)/2
      (cosine alike): each component carries ~u·cosh y of absolute error whatever the
      result's size (cancellation in e^y − e^-y when |y| is small): 8u·cosh y.
    * power: x^y = exp(y·log x); log's absolute error ~u·|w| in w = y·log x (exp's
      condition number is |w|) becomes a relative error of the result: 4u·(1 + |w|)·|x^y|.
    * atan2(a, b) = −i·log((b + ia)/sqrt(a² + b²)): the log's imaginary part is an angle
      in [−π, π] with absolute error ~u·π, the real part ~u: 4u·π.
    """
    u = _eps(et)
    z = [np.asarray(o).astype(np.complex128) for o in operands]
    with np.errstate(all="ignore"):
        if opcode in ("sine", "cosine"):
            return 8 * u * np.cosh(z[0].imag)
        if opcode == "power":
            w = z[1] * np.log(z[0])
            return 4 * u * (1 + np.abs(w)) * np.abs(np.exp(w))
        if opcode == "atan2":
            return np.full(np.broadcast(z[0], z[1]).shape, 4 * u * np.pi)
    return None


def expander_atol(instr: Instruction, operands: list, expected):
    """Error bounds for ops XLA:CPU expands into element-type arithmetic
    (``batch_norm_atol``, ``cholesky_atol``, ``triangular_solve_atol``)."""
    shapes = flatten_shape(instr.shape)
    if not shapes or not isinstance(shapes[0], ArrayShape):
        return None
    et = shapes[0].element_type
    if not (et.is_float or et.is_complex):
        return None
    a = instr.attrs
    try:
        if instr.opcode.startswith("batch-norm"):
            if et.is_complex:
                return None
            bounds = batch_norm_atol(instr.opcode, operands, epsilon=a.get("epsilon", 0.0),
                                             feature_index=a.get("feature_index", 0), et=et)
        elif instr.opcode == "cholesky":
            bounds = [cholesky_atol(operands[0], expected, lower=a.get("lower", True), et=et)]
        else:
            bounds = [triangular_solve_atol(
                operands[0], expected, left_side=a.get("left_side", False),
                lower=a.get("lower", False), unit_diagonal=a.get("unit_diagonal", False),
                transpose_a=a.get("transpose_a", "NO_TRANSPOSE"), et=et)]
    except Exception:  # noqa: BLE001 - a bound is best effort
        return None
    if isinstance(instr.shape, TupleShape):
        return {(i,): np.asarray(b, np.float64) for i, b in enumerate(bounds)}
    return {(): np.asarray(bounds[0], np.float64)} if bounds else None


# ---------------------------------------------------------------- LAPACK custom calls

_LAPACK = re.compile(r"^lapack_([sc])([a-z0-9]+)_ffi$")


#: XLA's own QR custom calls (``xla/hlo/builder/lib/qr.cc``): XLA expands them into
#: element-type arithmetic (QrExpander), hloref computes them with LAPACK in f64
_XLA_QR = {"Qr": "geqrf", "ProductOfElementaryHouseholderReflectors": "orgqr"}


def _routine(instr: Instruction) -> str | None:
    target = str(instr.attrs.get("custom_call_target", ""))
    m = _LAPACK.match(target)
    return m.group(2) if m else _XLA_QR.get(target)


def is_single_precision_lapack(instr: Instruction) -> bool:
    """A ``lapack_s*_ffi`` / ``lapack_c*_ffi`` custom call (jaxlib's f32/c64 kernels), or
    one of XLA's QR custom calls (expanded by XLA in the element type)."""
    return instr.opcode == "custom-call" and _routine(instr) is not None


def _lapack_char(instr: Instruction, name: str, default: str) -> str:
    from hloref.evaluator.custom_call_lapack import backend_char
    return backend_char(instr.attrs.get("backend_config"), name, default)


def _packed_parts(instr: Instruction, routine: str, shape: tuple) -> list | None:
    """The masks (over the last two dimensions) of the factors a LAPACK routine packs
    into one output matrix, or None: U and the multipliers of L (getrf), R and the
    Householder vectors (geqrf, XLA's Qr), the Hessenberg matrix and the reflectors
    (gehrd), the tridiagonal part and the reflectors (sytrd/hetrd by ``uplo``)."""
    if len(shape) < 2:
        return None
    ones = np.ones(shape[-2:], bool)
    if routine in ("getrf", "geqrf", "Qr"):
        below = np.tril(ones, -1)
    elif routine == "gehrd":
        below = np.tril(ones, -2)
    elif routine in ("sytrd", "hetrd"):
        below = np.tril(ones, -2) if _lapack_char(instr, "uplo", "L") == "L" else \
            np.triu(ones, 2)
    else:
        return None
    return [below, ~below]


def lapack_atol(instr: Instruction, operands: list, value):
    """Per-output error bounds of a single-precision LAPACK custom call (f32/c64), or of
    XLA's ``Qr``/``ProductOfElementaryHouseholderReflectors`` (any float type: XLA's
    expansion is another algorithm than LAPACK's), or None. hloref computes each matrix in f64 and rounds once; XLA:CPU runs the f32/c64
    routine, whose rounding errors are the backward-stable ones (Higham; LAPACK Users'
    Guide §4): ``potrf`` and ``trsm`` get the cholesky and triangular-solve bounds
    above; every other floating-point result (singular values and eigenvalues, whose
    error is at most p(n)·u·‖A‖₂, Higham Thm 19.4 / Weyl; vectors and factors) gets
    the normwise ``2n·u·max|result|`` of its matrix (n its largest dimension, the max
    over each batch element's last two dimensions, or the last for a vector result),
    where a routine packs two factors into one matrix (``_packed_parts``) of each
    factor apart.
    Integer results (``info``, pivots) and the input LAPACK destroys (output 0 of
    ``gesdd``/``gesvd``/``syevd``: undefined) get none. Eigenvector and singular vector
    errors also grow with 1/gap between their values: not covered (close values may
    still show as a mismatch)."""
    routine = _routine(instr)
    if routine is None or not operands:
        return None
    leaves = list(value) if isinstance(value, tuple) else [value]
    shapes = flatten_shape(instr.shape)
    if len(shapes) != len(leaves):
        return None
    a = np.asarray(operands[0])
    n = max(a.shape[-2:]) if a.ndim >= 2 else max(1, a.size)
    out: list = []
    try:
        for i, (leaf, sh) in enumerate(zip(leaves, shapes)):
            et = getattr(sh, "element_type", None)
            leaf = np.asarray(leaf)
            if et is None or not (et.is_float or et.is_complex) or \
                    (i == 0 and routine in ("gesdd", "gesvd", "syevd", "heevd")):
                out.append(None)
                continue
            if routine == "potrf" and i == 0:
                out.append(cholesky_atol(a, leaf, lower=_lapack_char(instr, "uplo", "L") == "L",
                                         et=et))
                continue
            if routine == "trsm" and i == 0:
                trans = {"N": "NO_TRANSPOSE", "T": "TRANSPOSE", "C": "ADJOINT"}[
                    _lapack_char(instr, "trans_x", "N")]
                out.append(triangular_solve_atol(
                    a, leaf, left_side=_lapack_char(instr, "side", "L") == "L",
                    lower=_lapack_char(instr, "uplo", "L") == "L",
                    unit_diagonal=_lapack_char(instr, "diag", "N") == "U", transpose_a=trans,
                    et=et))
                continue
            mag = np.abs(leaf.astype(np.complex128 if et.is_complex else np.float64))
            axes = (-2, -1) if leaf.ndim >= 2 else (-1,) if leaf.ndim == 1 else ()
            parts = _packed_parts(instr, routine, leaf.shape) if i == 0 else None
            with np.errstate(all="ignore"):
                if parts is not None and leaf.size:
                    # each factor normwise by its own size: getrf's multipliers (at
                    # most 1) are not perturbed by the size of U
                    bound = np.zeros(leaf.shape)
                    for part in parts:
                        top = np.max(np.where(part, mag, 0.0), axis=axes, keepdims=True)
                        bound = np.where(part, 2 * n * _eps(et) * top, bound)
                else:
                    top = np.max(mag, axis=axes, keepdims=True) if axes and leaf.size else mag
                    bound = np.broadcast_to(2 * n * _eps(et) * top, leaf.shape)
            out.append(np.nan_to_num(np.array(bound), nan=np.inf))
    except Exception:  # noqa: BLE001 - a bound is best effort
        return None
    if all(b is None for b in out):
        return None
    return tuple(out) if isinstance(value, tuple) else out[0]
