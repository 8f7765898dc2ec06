"""Every op a vectorisable computation may hold runs in compiled computations
(gpu/computation.py) on the device: the width-specialised integer ops (shifts, mulhi,
popcnt, count-leading-zeros), real/imag of real values, tuples and get-tuple-element,
nested call/fusion, and complex values (arithmetic, transcendentals, compare EQ/NE,
complex(), convert, clamp, select). Fallback disabled; against the cpu backend (bit for
bit unless a formula differs by an ulp) and XLA:CPU, and hand-derived values."""

from __future__ import annotations

import numpy as np
import pytest

from hloref.fuzz.compare import accumulation_atol
from hloref.types import element_type

from gpu_check import RNG, bits_equal, check, module, values


def _map_text(t, n_in, body_root, out_t=None, extra_lines=""):
    out_t = out_t or t
    params = "\n".join(f"  a{i} = {t}[] parameter({i})" for i in range(n_in))
    body = f"body {{\n{params}\n{extra_lines}  ROOT r = {out_t}[] {body_root}\n}}\n"
    args = ", ".join(f"p{i}" for i in range(n_in))
    return module([f"{t}[5,7]"] * n_in, f"map({args}), dimensions={{0,1}}, to_apply=body",
                  f"{out_t}[5,7]", extra=body)


@pytest.mark.parametrize("t", ["s8", "u16", "s32", "u64", "s64"])
@pytest.mark.parametrize("op", ["shift-left", "shift-right-logical", "shift-right-arithmetic"])
def test_map_shifts(t, op):
    a = values(t, (5, 7))
    b = values(t, (5, 7), kind="small")
    b.reshape(-1)[-6:] = np.array([element_type(t).bits - 1, element_type(t).bits, 1, 2, 3, 0],
                                  np.int64).astype(b.dtype)  # shift counts at and past the width
    check(_map_text(t, 2, f"{op}(a0, a1)"), a, b, xla="required")


@pytest.mark.parametrize("t", ["u8", "s16", "s32", "u64"])
def test_map_popcnt_clz_and_mulhi(t):
    a = values(t, (5, 7))
    check(_map_text(t, 1, "popcnt(a0)"), a, xla="required")
    check(_map_text(t, 1, "count-leading-zeros(a0)"), a, xla="required")
    b = values(t, (5, 7))
    out = check(_map_text(t, 2, "mulhi(a0, a1)"), a, b)
    bits = element_type(t).bits
    # by hand: the high half of the double-width product
    wide = [(int(x) * int(y)) >> bits for x, y in zip(a.reshape(-1), b.reshape(-1))]
    want = np.array([w & ((1 << bits) - 1) for w in wide], np.uint64)
    assert np.array_equal(out.reshape(-1).astype(np.uint64) & np.uint64((1 << bits) - 1)
                          if bits < 64 else out.reshape(-1).view(np.uint64), want)


SHIFT_REDUCER = """
red {
  a = u32[] parameter(0)
  b = u32[] parameter(1)
  c = u32[] constant(1)
  s = u32[] shift-left(a, c)
  ROOT r = u32[] xor(s, b)
}
"""


def test_reduce_with_shift_reducer_by_hand():
    # the tree order of the cpu: r(r(x0, x1), r(x2, x3)), then r(init, tree)
    x = RNG.integers(0, 2**32, (3, 4), dtype=np.uint64).astype(np.uint32)
    init = np.array(5, np.uint32)
    text = module(["u32[3,4]", "u32[]"], "reduce(p0, p1), dimensions={1}, to_apply=red",
                  "u32[3]", extra=SHIFT_REDUCER)
    # not associative: XLA:CPU reduces in another order (its result differs); by hand
    out = check(text, x, init, xla=False)

    def r(a, b):
        return ((int(a) << 1) ^ int(b)) & 0xFFFFFFFF
    want = [r(init, r(r(row[0], row[1]), r(row[2], row[3]))) for row in x]
    assert out.tolist() == want


NESTED = """
fused {
  f0 = f32[] parameter(0)
  f1 = f32[] parameter(1)
  ROOT fm = f32[] maximum(f0, f1)
}
inner {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  m = f32[] maximum(x, y)
  i = f32[] imag(x)
  re = f32[] real(y)
  ROOT t = (f32[], f32[], f32[]) tuple(m, i, re)
}
red {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = (f32[], f32[], f32[]) call(a, b), to_apply=inner
  g0 = f32[] get-tuple-element(c), index=0
  g1 = f32[] get-tuple-element(c), index=1
  s = f32[] add(g0, g1)
  ROOT out = f32[] fusion(s, b), kind=kLoop, calls=fused
}
"""


@pytest.mark.parametrize("real_imag", [True, False])
def test_reducer_with_call_fusion_tuple_and_real_imag(real_imag):
    # max(max(a, b) + imag(a), b) == max(a, b) for finite values: a max reduce
    x = values("f32", (4, 9), kind="unit")
    init = np.array(-1, np.float32)  # finite: subtract(x, x) stands for imag below
    text = module(["f32[4,9]", "f32[]"], "reduce(p0, p1), dimensions={1}, to_apply=red",
                  "f32[4]", extra=NESTED)
    if not real_imag:  # XLA:CPU aborts on real/imag of real values and on a fusion
        # outside a fused computation: compared without them
        text = text.replace("imag(x)", "subtract(x, x)").replace("real(y)", "copy(y)")
        text = text.replace("fusion(s, b), kind=kLoop, calls=fused", "call(s, b), to_apply=fused")
    out = check(text, x, init, xla=not real_imag and "required")
    assert np.array_equal(out, x.max(axis=1))


def cvalues(t, shape):
    dt = np.complex64 if t == "c64" else np.complex128
    n = int(np.prod(shape))
    v = (RNG.standard_normal(n) * 2 + 1j * RNG.standard_normal(n) * 2).astype(dt)
    v[: n // 4] = v[n // 4: 2 * (n // 4)].real  # ties of the real parts
    return v.reshape(shape)


MAXRED = """
red {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT r = {t}[] {op}(a, b)
}}
"""


@pytest.mark.parametrize("t", ["c64", "c128"])
@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_complex_max_min_reduce(t, op):
    # the CPU's lexicographic order on (real, imag)
    x = cvalues(t, (4, 8))
    init = np.array(-100 if op == "maximum" else 100, x.dtype)
    text = module([f"{t}[4,8]", f"{t}[]"], "reduce(p0, p1), dimensions={1}, to_apply=red",
                  f"{t}[4]", extra=MAXRED.format(t=t, op=op))
    out = check(text, x, init)
    for row, got in zip(x, out):
        key = sorted(row.tolist(), key=lambda z: (z.real, z.imag))
        assert got == (key[-1] if op == "maximum" else key[0])


COMPLEX_BODY = """
body {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  d = {t}[] divide(a, b)
  s = {t}[] subtract(d, a)
  n = {t}[] negate(s)
  e = pred[] compare(a, b), direction=EQ
  ab = {p}[] abs(a)
  ra = {p}[] real(b)
  z = {t}[] complex(ab, ra)
  sel = {t}[] select(e, z, n)
  lo = {t}[] constant((-1, -1))
  hi = {t}[] constant((1, 1))
  c = {t}[] clamp(lo, sel, hi)
  ROOT r = {t}[] add(c, z)
}}
"""


@pytest.mark.parametrize("t", ["c64", "c128"])
def test_complex_map(t):
    p = "f32" if t == "c64" else "f64"
    a, b = cvalues(t, (5, 7)), cvalues(t, (5, 7))
    b.reshape(-1)[::6] = a.reshape(-1)[::6]
    text = module([f"{t}[5,7]"] * 2, "map(p0, p1), dimensions={0,1}, to_apply=body",
                  f"{t}[5,7]", extra=COMPLEX_BODY.format(t=t, p=p))
    # abs: the cpu's SIMD hypot and the GPU's may differ by an ulp
    out = check(text, a, b, exact=False, opcode="map",
                atol=accumulation_atol(4, 4 + np.abs(a) * 4, element_type(t)))
    # by hand where a == b: select takes z = complex(|a|, re(a)); clamp in the lexicographic
    # order keeps z when |a| < 1 and gives hi = 1+1j otherwise; then c + z
    fa = a.reshape(-1)[::6].astype(np.complex128)
    z = np.abs(fa) + 1j * fa.real
    want = np.where(np.abs(fa) < 1, 2 * z, (1 + 1j) + z)
    np.testing.assert_allclose(out.reshape(-1)[::6], want, rtol=1e-6)


CONVERTS = """
body {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  x = c128[] convert(a)
  y = f64[] convert(x)
  q = pred[] convert(b)
  i = s32[] convert(b)
  f = c64[] convert(i)
  w = c64[] convert(q)
  s = c64[] add(f, w)
  k = c128[] convert(s)
  m = c128[] multiply(k, x)
  yy = c128[] convert(y)
  ROOT r = c128[] add(m, yy)
}}
"""


@pytest.mark.parametrize("t", ["c64", "f32", "s16"])
def test_complex_converts_in_a_map(t):
    if t[0] == "c":
        a, b = cvalues(t, (5, 7)), cvalues(t, (5, 7))
        b.reshape(-1)[:5] = [0, 1j, 1, -0.0, 3.7 - 2j]
    else:
        a, b = values(t, (5, 7), kind="small"), values(t, (5, 7), kind="small")
    text = module([f"{t}[5,7]"] * 2, "map(p0, p1), dimensions={0,1}, to_apply=body",
                  "c128[5,7]", extra=CONVERTS.format(t=t))
    # XLA:CPU crashes compiling these converts: against the cpu backend and by hand
    out = check(text, a, b, exact=False, opcode="map", xla=False,
                atol=accumulation_atol(3, 4 + np.abs(a.astype(np.complex128)) * 40,
                                       element_type("c128")))
    # by hand: real(a) + (s32(b) + (b != 0)) * a
    ac = a.astype(np.complex128)
    i = (b.real if t[0] == "c" else b).astype(np.float64).astype(np.int32) if t != "s16" else \
        b.astype(np.int32)
    want = ac.real + (i + (b != 0)).astype(np.complex64).astype(np.complex128) * ac
    np.testing.assert_allclose(out, want, rtol=1e-6)


TREE = """
red {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  m = {t}[] multiply(a, b)
  ROOT r = {t}[] copy(m)
}}
"""


@pytest.mark.parametrize("t", ["c64", "c128"])
def test_complex_reducer_not_one_op(t):
    # copy(multiply) runs compiled in the CPU's tree order
    x = (cvalues(t, (3, 6)) * 0.5).astype(np.complex64 if t == "c64" else np.complex128)
    init = np.array(1 - 0.5j, x.dtype)
    text = module([f"{t}[3,6]", f"{t}[]"], "reduce(p0, p1), dimensions={1}, to_apply=red",
                  f"{t}[3]", extra=TREE.format(t=t))
    mag = np.abs(x.astype(np.complex128)).prod(axis=1) * abs(init)
    got = check(text, x, init, exact=False, opcode="reduce", xla="required",
                atol=accumulation_atol(14, 2 * mag, element_type(t)))
    np.testing.assert_allclose(got, x.astype(np.complex128).prod(axis=1) * init, rtol=1e-5)


def test_pred_subtract_is_an_error_on_both_backends():
    # no kernel to add: the verifier and XLA reject pred operands, and unverified the cpu
    # backend fails (numpy has no boolean subtract); the gpu backend raises the same kind
    # of error, no fallback
    import hloref
    text = module(["pred[4]", "pred[4]"], "subtract(p0, p1)", "pred[4]")
    a, b = np.array([0, 0, 1, 1], bool), np.array([0, 1, 0, 1], bool)
    for backend in ("cpu", "gpu"):
        kw = {"fallback": False} if backend == "gpu" else {}
        with pytest.raises(hloref.HloEvalError, match="subtract") as info:
            hloref.evaluate(text, a, b, backend=backend, verify=False, **kw)
        assert not isinstance(info.value, hloref.HloUnsupportedError)


SEQUENTIAL = """
red {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ra = {t}[1] reshape(a)
  bb = {t}[1,1] broadcast(b), dimensions={{}}
  rb = {t}[1] reshape(bb)
  s = {t}[1] subtract(ra, rb)
  h = {t}[1] constant({{0.5}})
  m = {t}[1] multiply(s, h)
  p = {t}[1] reduce-precision(m), exponent_bits=8, mantissa_bits=7
  ROOT r = {t}[] reshape(p)
}}
"""


def _seq_fold(init, row, t):
    """By hand: acc = r(acc, x) left to right, r(a, b) = rp((a - b) * 0.5) where
    reduce-precision to e8m7 rounds to 8 significant bits, ties to even (these values
    stay far inside the e8 exponent range)."""
    dt = element_type(t).dtype
    acc = dt.type(init)
    for x in row:
        m = dt.type(dt.type(acc - dt.type(x)) * dt.type(0.5))
        frac, exp = np.frexp(np.float64(m))
        acc = dt.type(np.ldexp(np.round(np.ldexp(frac, 8)), exp - 8))
    return np.asarray(acc)


@pytest.mark.parametrize("t", ["f32", "f64"])
def test_reduce_with_shape_ops_folds_sequentially(t):
    # reshape/broadcast of one-element arrays and reduce-precision: not elementwise on
    # the cpu (it folds left to right, one element at a time); the gpu compiles the
    # reducer and folds the same way. Not associative, so the order shows.
    x = (values(t, (3, 7), kind="unit") * 4).astype(element_type(t).dtype)
    init = np.asarray(1.0).astype(x.dtype)
    text = module([f"{t}[3,7]", f"{t}[]"], "reduce(p0, p1), dimensions={1}, to_apply=red",
                  f"{t}[3]", extra=SEQUENTIAL.format(t=t))
    out = check(text, x, init, xla="required")
    for r in range(3):
        assert bits_equal(out[r], _seq_fold(init, x[r], t))
    # reduce-window: the same fold over each window's valid positions
    text = module([f"{t}[3,7]", f"{t}[]"], "reduce-window(p0, p1), window={size=1x3 stride=1x2 "
                  "pad=0_0x1_1}, to_apply=red", f"{t}[3,4]", extra=SEQUENTIAL.format(t=t))
    out = check(text, x, init, xla="required")
    padded = [None] + list(x[1]) + [None]
    for o in range(4):
        window = [v for v in padded[2 * o: 2 * o + 3] if v is not None]
        assert bits_equal(out[1, o], _seq_fold(init, window, t))


NEXTAFTER = """
body {{
  a = {t}[] parameter(0)
  i = {it}[] bitcast-convert(a)
  one = {it}[] constant(1)
  j = {it}[] add(i, one)
  f = {t}[] bitcast-convert(j)
  ff = {t}[1] reshape(f)
  rp = {t}[1] reduce-precision(ff), exponent_bits=8, mantissa_bits=23
  ROOT r = {t}[] reshape(rp)
}}
"""


@pytest.mark.parametrize("t,it", [("f32", "s32"), ("bf16", "u16"), ("f16", "s16")])
def test_map_bitcast_convert_and_reduce_precision(t, it):
    # one ulp up through the bit pattern, then reduce-precision to e8m23 (a no-op here)
    x = np.abs(values(t, (4, 5), kind="positive"))
    text = module([f"{t}[4,5]"], "map(p0), dimensions={0,1}, to_apply=body", f"{t}[4,5]",
                  extra=NEXTAFTER.format(t=t, it=it))
    out = check(text, x, xla="required")
    bits = x.view(np.dtype(f"u{x.dtype.itemsize}")).astype(np.uint64) + 1
    up = bits.astype(np.dtype(f"u{x.dtype.itemsize}")).view(x.dtype)
    assert bits_equal(out, up)  # e8m23 holds f32, bf16 and f16 values: unchanged


DOT_REDUCER = """
red {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  d = {t}[] dot(a, b)
  ROOT r = {t}[] copy(d)
}}
"""


@pytest.mark.parametrize("t", ["f32", "bf16", "s32", "u8", "pred", "c64", "c128"])
def test_reducer_with_a_scalar_dot(t):
    # a dot of scalars is their product under dot's rules: a multiply reduce, in the
    # cpu's tree order (exact for these values: small integers, or booleans)
    if t == "pred":
        x = RNG.integers(0, 2, (3, 5)).astype(bool)
        x[0] = True
    elif t[0] == "c":
        x = (RNG.integers(-2, 3, (3, 5)) + 1j * RNG.integers(-1, 2, (3, 5))).astype(
            np.complex64 if t == "c64" else np.complex128)
    else:
        x = RNG.integers(1, 4, (3, 5)).astype(element_type(t).dtype)
    init = np.asarray(1).astype(x.dtype)
    text = module([f"{t}[3,5]", f"{t}[]"], "reduce(p0, p1), dimensions={1}, to_apply=red",
                  f"{t}[3]", extra=DOT_REDUCER.format(t=t))
    out = check(text, x, init, xla="required" if t not in ("u8", "pred") else True)
    want = np.prod(x.astype(np.complex128 if t[0] == "c" else np.float64), axis=1)
    if t == "pred":
        assert out.tolist() == x.all(axis=1).tolist()
    else:  # products of at most 3**5 = 243: exact in every type here
        np.testing.assert_array_equal(out.astype(want.dtype), want)


MIXED_DOT = """
body {
  a = s8[] parameter(0)
  b = f64[] parameter(1)
  ROOT d = c64[] dot(a, b)
}
"""


def test_map_mixed_scalar_dot():
    # s8 converts to c64 first, f64 is taken exactly (c128 product, rounded once)
    a = RNG.integers(-100, 100, (4, 5)).astype(np.int8)
    b = RNG.standard_normal((4, 5))
    text = module(["s8[4,5]", "f64[4,5]"], "map(p0, p1), dimensions={0,1}, to_apply=body",
                  "c64[4,5]", extra=MIXED_DOT)
    out = check(text, a, b, xla=False)  # XLA:CPU has no mixed-type dot in a map
    np.testing.assert_array_equal(out, (a.astype(np.float64) * b).astype(np.complex64))


COND = """
neg {{
  p = {t}[] parameter(0)
  ROOT n = {t}[] negate(p)
}}
dbl {{
  p = ({t}[], {t}[]) parameter(0)
  a = {t}[] get-tuple-element(p), index=0
  b = {t}[] get-tuple-element(p), index=1
  ROOT s = {t}[] add(a, b)
}}
keep {{
  p = {t}[] parameter(0)
  ROOT q = {t}[] copy(p)
}}
body {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  gt = pred[] compare(a, b), direction=GT
  x = {t}[] conditional(gt, a, b), true_computation=neg, false_computation=keep
  i = s32[] convert(b)
  ab = ({t}[], {t}[]) tuple(a, b)
  ROOT y = {t}[] conditional(i, x, ab, a), branch_computations={{keep, dbl, neg}}
}}
"""


@pytest.mark.parametrize("t", ["f32", "s16", "c64"])
def test_map_with_conditionals(t):
    # pred and indexed conditionals (an index outside [0, 3) takes the last branch):
    # every branch is computed on the device, the selected one kept
    if t == "c64":
        a = (RNG.integers(-3, 4, (4, 6)) + 1j * RNG.integers(-3, 4, (4, 6))).astype(np.complex64)
        b = RNG.integers(-2, 5, (4, 6)).astype(np.complex64)
        text = COND.format(t=t).replace("compare(a, b), direction=GT",
                                        "compare(a, b), direction=NE")
    else:
        a = RNG.integers(-3, 4, (4, 6)).astype(element_type(t).dtype)
        b = RNG.integers(-2, 5, (4, 6)).astype(element_type(t).dtype)
        text = COND.format(t=t)
    text = module([f"{t}[4,6]"] * 2, "map(p0, p1), dimensions={0,1}, to_apply=body",
                  f"{t}[4,6]", extra=text)
    # XLA:CPU aborts compiling a conditional inside a map's computation: by hand
    out = check(text, a, b, xla=False)
    for va, vb, got in zip(a.reshape(-1), b.reshape(-1), out.reshape(-1)):  # by hand
        sel = (va != vb) if t == "c64" else (va > vb)
        x = -va if sel else vb
        i = int(vb.real)
        want = x if i == 0 else (va + vb if i == 1 else -va)
        assert got == want
