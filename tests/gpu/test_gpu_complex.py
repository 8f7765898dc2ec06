"""Complex elementwise arithmetic on the GPU backend (fallback disabled) against the cpu
backend and XLA:CPU, on c64 and c128, special values (zeros, infinities, NaN) included."""

from __future__ import annotations

import numpy as np
import pytest

import hloref

from hloref.fuzz.compare import Tolerance, accumulation_atol, compare_values
from hloref.fuzz.error_bounds import COMPLEX_FORMULA_OPS, complex_formula_atol
from hloref.types import element_type

from gpu_check import HAVE_XLA, RNG, check, module, run_hlo, values

PARTS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.5, -2.0, 1e-30, 3e30]


def cvalues(t, n):
    """``n`` complex values: random, then every pair of special parts."""
    dt = np.complex64 if t == "c64" else np.complex128
    re = RNG.standard_normal(n) * 3
    im = RNG.standard_normal(n) * 3
    pairs = [(a, b) for a in PARTS for b in PARTS]
    k = min(len(pairs), n // 2)
    for j, pick in enumerate(RNG.permutation(len(pairs))[:k]):
        re[j], im[j] = pairs[pick]
    out = np.empty(n, dt)
    out.real, out.imag = re, im
    return out


def finite(t, n):
    dt = np.complex64 if t == "c64" else np.complex128
    return (RNG.standard_normal(n) * 3 + 1j * RNG.standard_normal(n) * 3).astype(dt)


#: op -> bit-exact with the cpu backend: every one. multiply, abs and sign were not
#: while the cpu backend used numpy's complex loops (their SIMD code contracts multiply's
#: products to FMA and computes abs as ``l * sqrt(fma(s/l, s/l, 1))`` on AVX2/AVX-512
#: machines); both backends now multiply part by part and take hypot of the parts
EXACT = {"add": True, "subtract": True, "divide": True, "multiply": True, "negate": True,
         "sign": True, "abs": True, "real": True, "imag": True}


@pytest.mark.parametrize("t", ["c64", "c128"])
def test_complex_binary(t):
    specials_a, specials_b = cvalues(t, 160), cvalues(t, 160)
    specials_b[::7] = specials_a[::7]
    a, b = finite(t, 64), finite(t, 64)
    b[::5] = a[::5]
    for op in ["add", "subtract", "divide", "multiply"]:
        # special values against the cpu backend only: XLA:CPU's complex divide differs
        # from it on infinities (x / ±0 takes the zero's sign in XLA, not in numpy)
        check(module([f"{t}[160]"] * 2, f"{op}(p0, p1)", f"{t}[160]"), specials_a,
              specials_b, opcode=op, exact=EXACT[op], xla=False)
        # XLA:CPU divides and multiplies by other formulas: a few ulps of the parts'
        # magnitudes (relative to |result|, a part near 0 may differ by more ulps)
        with np.errstate(all="ignore"):
            mag = np.abs(a.astype(np.complex128)) * (np.abs(b.astype(np.complex128)) if op ==
                                                     "multiply" else 1 / np.abs(b.astype(np.complex128)))
        eps = 2.0 ** (-23 if t == "c64" else -52)
        check(module([f"{t}[64]"] * 2, f"{op}(p0, p1)", f"{t}[64]"), a, b, opcode=op,
              exact=EXACT[op], xla="required", atol=8 * eps * mag)
    for d in ["EQ", "NE"]:
        check(module([f"{t}[160]"] * 2, f"compare(p0, p1), direction={d}", "pred[160]"),
              specials_a, specials_b, xla="required")
    # a scalar operand broadcasts (unverified: the verifier, like XLA's, rejects the
    # implicit broadcast; both backends evaluate it)
    check(module([f"{t}[64]", f"{t}[]"], "divide(p0, p1)", f"{t}[64]"), a, b[3].reshape(()),
          xla=False, verify=False)


@pytest.mark.parametrize("t", ["c64", "c128"])
def test_complex_unary(t):
    part = "f32" if t == "c64" else "f64"
    z, w = cvalues(t, 120), finite(t, 64)
    for op, out in [("negate", t), ("sign", t), ("abs", part), ("real", part), ("imag", part)]:
        # XLA:CPU's abs(inf + i NaN) is NaN (C99 and both backends: inf): specials of
        # abs and sign against the cpu backend only
        # sign (|values| <= 1): a 1-ulp |z| moves z/|z| by ~2 ulp; XLA:CPU computes c64
        # sign in f32
        atol = ({"c64": 3e-7, "c128": 1e-15}[t]) if op == "sign" else None
        check(module([f"{t}[120]"], f"{op}(p0)", f"{out}[120]"), z, opcode=op, exact=EXACT[op],
              xla="required" if op not in ("sign", "abs") else False, atol=atol)
        check(module([f"{t}[64]"], f"{op}(p0)", f"{out}[64]"), w, opcode=op, exact=EXACT[op],
              xla="required", atol=atol)
    re = z.real.copy()
    im = z.imag[::-1].copy()
    check(module([f"{part}[120]"] * 2, "complex(p0, p1)", f"{t}[120]"), re, im, xla="required")
    # real/imag of a real operand: the value and zeros
    check(module([f"{part}[120]"], "real(p0)", f"{part}[120]"), re, xla="required")
    check(module([f"{part}[120]"], "imag(p0)", f"{part}[120]"), re, xla="required")


def test_complex_by_hand():
    text = module(["c64[3]", "c64[3]"], "divide(p0, p1)", "c64[3]")
    a = np.array([1 + 2j, 1 + 1j, 5 + 0j], np.complex64)
    b = np.array([3 + 4j, 0j, complex(np.inf, 0)], np.complex64)
    out = hloref.evaluate(text, a, b, backend="gpu", fallback=False)
    assert out[0] == np.complex64(0.44 + 0.08j)
    assert np.isinf(out[1].real) and np.isinf(out[1].imag)  # Annex G: x / 0 is infinite
    assert out[2] == 0  # finite / infinite is zero
    text = module(["c128[2]"], "sign(p0)", "c128[2]")
    out = hloref.evaluate(text, np.array([3 + 4j, 0j]), backend="gpu", fallback=False)
    assert np.allclose(out, [0.6 + 0.8j, 0])


def test_complex_convert_and_iota():
    z64, z128 = cvalues("c64", 40), cvalues("c128", 40)
    z128[::3] = [complex(1e300, -1e-300)] * len(z128[::3])  # overflows / underflows c64 parts
    for src, z in [("c64", z64), ("c128", z128)]:
        for dst in ["c64", "c128", "f32", "f64", "bf16", "s32", "u8"]:
            # complex -> real: XLA:CPU keeps the real part as the cpu backend does
            check(module([f"{src}[40]"], "convert(p0)", f"{dst}[40]"), z,
                  xla="required" if dst not in ("s32", "u8") else False)
        # complex -> pred: XLA:CPU (jaxlib 0.10.2) crashes compiling it (segmentation
        # fault): checked against the cpu backend and by hand
        out = check(module([f"{src}[40]"], "convert(p0)", "pred[40]"), z, xla=False)
        assert np.array_equal(out, z != 0)
    for src in ["f32", "f64", "bf16", "s32", "u8", "pred", "s64"]:
        x = values(src, (40,))
        for dst in ["c64", "c128"]:
            check(module([f"{src}[40]"], "convert(p0)", f"{dst}[40]"), x, xla="required")
    for t in ["c64", "c128"]:
        check(module([], "iota(), iota_dimension=1", f"{t}[3,5]"), xla="required")


#: complex transcendentals: c128 in both backends, rounded once to c64 (so c64 agrees
#: bit for bit nearly always); the simulator calls numpy per element, the cpu backend
#: numpy's SIMD array loops, which differ by an ulp of f64 here and there. The first
#: group XLA:CPU runs; the second it does not (no asin... opcodes, no complex cbrt).
XLA_TRANSCENDENTALS = ["exponential", "log", "sqrt", "sine", "cosine", "tan", "tanh",
                       "exponential-minus-one", "log-plus-one", "rsqrt", "logistic"]
OTHER_TRANSCENDENTALS = ["cbrt", "sinh", "cosh", "asin", "acos", "atan", "asinh", "acosh", "atanh"]
NUMPY = {"sinh": np.sinh, "cosh": np.cosh, "asin": np.arcsin, "acos": np.arccos,
         "atan": np.arctan, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
         "cbrt": lambda z: z ** (1.0 / 3.0), "exponential": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh}


def _all_ops(t, ops):
    body = "\n".join(f"  r{k} = {t}[12] {op}(p0)" for k, op in enumerate(ops))
    roots = ", ".join(f"r{k}" for k in range(len(ops)))
    tup = ", ".join([f"{t}[12]"] * len(ops))
    return (f"HloModule m\nENTRY e {{\n  p0 = {t}[12] parameter(0)\n{body}\n"
            f"  ROOT r = ({tup}) tuple({roots})\n}}\n")


@pytest.mark.parametrize("t", ["c64", "c128"])
@pytest.mark.parametrize("group", ["xla", "other"])
def test_complex_transcendentals(t, group):
    """Each group in one module: finite values against the cpu backend, XLA:CPU (its
    opcodes, within the policy) and numpy's c128 functions; then special values
    (infinities, NaN, signed zeros) against the cpu backend."""
    ops = XLA_TRANSCENDENTALS if group == "xla" else OTHER_TRANSCENDENTALS
    draw = np.random.default_rng(15)  # the same values whatever ran before
    x = (draw.standard_normal(12) * 3 + 1j * draw.standard_normal(12) * 3).astype(
        np.complex64 if t == "c64" else np.complex128)
    text = _all_ops(t, ops)
    other = group == "other"  # complex cbrt: XLA's verifier refuses it (InferUnaryOpShape)
    out = check(text, x, exact=False, xla=False, verify=not other)
    if group == "xla":  # leaf by leaf, each within its opcode's policy
        assert HAVE_XLA, "XLA:CPU (jaxlib) is not available"
        for op, ref, got in zip(ops, run_hlo(text, x), out):
            # XLA:CPU's complex rsqrt computes in the type (measured: 2.06 ulp of |z| from
            # the correctly rounded c128 result, the cpu backend's too)
            # sine/cosine: XLA builds them from real functions (the policy's bound)
            atol = complex_formula_atol(op, [x], element_type(t)) \
                if op in COMPLEX_FORMULA_OPS else None
            # tan/tanh: XLA:CPU builds them from real functions too (measured: 3.0 ulp of
            # |z| from numpy's correctly rounded c128 tan; the policy has no bound for it)
            verdict = compare_values(ref, got, opcode=op, atol=atol,
                                     tolerance=Tolerance(4) if op == "rsqrt" else
                                     Tolerance(8) if op in ("tan", "tanh") else None)
            assert verdict.ok, f"{op}: {verdict}"
    for op, got in zip(ops, out):
        if op in NUMPY:
            want = NUMPY[op](x.astype(np.complex128))
            np.testing.assert_allclose(got, want, rtol=1e-6 if t == "c64" else 1e-13, err_msg=op)
    check(text, cvalues(t, 12), exact=False, xla=False, verify=not other)


@pytest.mark.parametrize("t", ["c64", "c128"])
def test_complex_power(t):
    x, y = finite(t, 10), finite(t, 10) * 0.3
    out = check(module([f"{t}[10]", f"{t}[10]"], "power(p0, p1)", f"{t}[10]"), x, y,
                exact=False, opcode="power", xla="required",
                atol=complex_formula_atol("power", [x, y], element_type(t)))
    np.testing.assert_allclose(out, x.astype(np.complex128) ** y, rtol=1e-4 if t == "c64" else 1e-11)


#: complex dot: (lhs, rhs, result, dimension numbers)
DOTS = [
    ("c64[3,4]", "c64[4,2]", "c64[3,2]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    ("c128[2,3,4]", "c128[2,4,5]", "c128[2,3,5]",
     "lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}"),
    ("c64[6]", "c64[6]", "c64[]", "lhs_contracting_dims={0}, rhs_contracting_dims={0}"),
    ("f32[3,4]", "c64[4,2]", "c64[3,2]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
]


def _operand(spec):
    t, dims = spec.split("[")
    dims = [int(d) for d in dims[:-1].split(",") if d]
    x = RNG.standard_normal(dims) * 2
    if t.startswith("c"):
        x = x + 1j * RNG.standard_normal(dims) * 2
    return np.asarray(x).astype(element_type(t).dtype)


@pytest.mark.parametrize("lhs,rhs,out,dnums", DOTS)
def test_complex_dot(lhs, rhs, out, dnums):
    a, b = _operand(lhs), _operand(rhs)
    text = module([lhs, rhs], f"dot(p0, p1), {dnums}", out)
    # |products| summed over the contraction: numpy's matmul of magnitudes (times 2 for
    # the two products of each part)
    mag = np.abs(a.astype(np.complex128)) @ np.abs(b.astype(np.complex128)) \
        if a.ndim < 3 else np.einsum("bij,bjk->bik", np.abs(a), np.abs(b))
    k = a.shape[-1]
    got = check(text, a, b, exact=False, opcode="dot", xla="required" if lhs[0] == "c" else True,
                atol=accumulation_atol(2 * k, 2 * mag, element_type(out.split("[")[0])))
    want = np.einsum("bij,bjk->bik", a.astype(np.complex128), b.astype(np.complex128)) \
        if a.ndim == 3 else a.astype(np.complex128) @ b.astype(np.complex128)
    np.testing.assert_allclose(got, want, rtol=1e-5 if "c64" in out else 1e-12, atol=1e-5)


@pytest.mark.parametrize("t", ["c64", "c128"])
def test_complex_max_min_clamp_atan2(t):
    """maximum/minimum/clamp: lexicographic on (real, imag), bit-exact with the cpu
    backend and by hand; atan2: the cpu's formula, against the cpu backend and XLA:CPU
    within the policy's bound."""
    x, y = cvalues(t, 24), cvalues(t, 24)
    y[:4] = x[:4].real + 1j * (x[:4].imag + 1)  # equal real parts: the imaginary decides
    for op, pick in (("maximum", True), ("minimum", False)):
        out = check(module([f"{t}[24]", f"{t}[24]"], f"{op}(p0, p1)", f"{t}[24]"), x, y,
                    xla=False)
        gt = (x.real > y.real) | ((x.real == y.real) & (x.imag > y.imag))
        np.testing.assert_array_equal(out, np.where(gt if pick else ~gt, x, y))
    lo, hi = np.array(-1 - 1j, x.dtype), np.array(1 + 1j, x.dtype)
    out = check(module([f"{t}[]", f"{t}[24]", f"{t}[]"], "clamp(p0, p1, p2)", f"{t}[24]"),
                lo, x, hi, xla=False)
    assert np.all((out.real >= -1) | np.isnan(out.real)) and np.all(out.real <= 1)
    a, b = finite(t, 10), finite(t, 10)
    check(module([f"{t}[10]", f"{t}[10]"], "atan2(p0, p1)", f"{t}[10]"), a, b, exact=False,
          opcode="atan2", xla="required", atol=complex_formula_atol("atan2", [a, b], element_type(t)))


@pytest.mark.parametrize("t,kind,dims", [("c64", "add", "{1}"), ("c128", "add", "{0,2}"),
                                         ("c64", "multiply", "{2}")])
def test_complex_reduce(t, kind, dims):
    """add/multiply reduce of complex values: against the cpu backend and XLA:CPU within
    the accumulation bound, and numpy."""
    x = (finite(t, 24) * (0.4 if kind == "multiply" else 1)).reshape(2, 3, 4)
    init = np.array(1 + 0.5j if kind == "multiply" else 0.25 - 1j, x.dtype)
    axes = tuple(int(d) for d in dims.strip("{}").split(","))
    out_dims = [n for d, n in enumerate(x.shape) if d not in axes]
    comp = (f"red {{\n  a = {t}[] parameter(0)\n  b = {t}[] parameter(1)\n"
            f"  ROOT r = {t}[] {kind}(a, b)\n}}\n")
    text = module([f"{t}[2,3,4]", f"{t}[]"], f"reduce(p0, p1), dimensions={dims}, to_apply=red",
                  f"{t}[{','.join(map(str, out_dims))}]", extra=comp)
    w = x.astype(np.complex128)
    if kind == "add":
        want = w.sum(axis=axes) + init
        mag = np.abs(w).sum(axis=axes) + abs(init)
        n = int(np.prod([x.shape[a] for a in axes])) + 1
    else:
        want = w.prod(axis=axes) * init
        mag = np.abs(w).prod(axis=axes) * abs(init)
        n = 2 * (int(np.prod([x.shape[a] for a in axes])) + 1)  # two products per part
    got = check(text, x, init, exact=False, opcode="reduce", xla="required",
                atol=accumulation_atol(n, 2 * mag, element_type(t)))
    np.testing.assert_allclose(got, want, rtol=1e-5 if t == "c64" else 1e-12, atol=1e-6)
