"""scaled-dot and the __op$block_scaled_dot custom call (fp8/fp4 operands, e8m0 and fp8
block scales) on the GPU backend (fallback disabled), against the cpu backend and a
numpy f64 reference written from the semantics (XLA:CPU runs neither: scaled-dot does
not convert to StableHLO and the custom call has no host implementation)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import hloref

from gpu_check import RNG, check
from hlo_modules import MODULES
from ragged_dot_reference import ragged_contracting, ragged_non_contracting

#: (operand type, scale type, block size): MXFP8, MXFP8 e5m2, MXFP4, NVFP4
FORMATS = [("f8e4m3fn", "f8e8m0fnu", 32), ("f8e5m2", "f8e8m0fnu", 32),
           ("f4e2m1fn", "f8e8m0fnu", 32), ("f4e2m1fn", "f8e4m3fn", 16)]


DTYPES = {"f8e4m3fn": ml_dtypes.float8_e4m3fn, "f8e5m2": ml_dtypes.float8_e5m2,
          "f4e2m1fn": ml_dtypes.float4_e2m1fn}


def quantized(t, dims):
    return (RNG.standard_normal(dims) * 2).astype(DTYPES[t])


def scales(t, dims):
    if t == "f8e8m0fnu":
        return np.exp2(RNG.integers(-3, 4, dims)).astype(ml_dtypes.float8_e8m0fnu)
    return (np.abs(RNG.standard_normal(dims)) + 0.25).astype(ml_dtypes.float8_e4m3fn)


def f64(x):
    return np.asarray(x).astype(np.float64)


@pytest.mark.parametrize("t,st,block", FORMATS)
@pytest.mark.parametrize("out", ["f32", "bf16"])
def test_scaled_dot(t, st, block, out):
    k = 2 * block
    a, b = quantized(t, (2, 3, k)), quantized(t, (2, k, 5))
    sa, sb = scales(st, (2, 3, 2)), scales(st, (2, 2, 5))
    text = f"""HloModule m
ENTRY e {{
  a = {t}[2,3,{k}] parameter(0)
  b = {t}[2,{k},5] parameter(1)
  sa = {st}[2,3,2] parameter(2)
  sb = {st}[2,2,5] parameter(3)
  ROOT r = {out}[2,3,5] scaled-dot(a, b, sa, sb), lhs_batch_dims={{0}}, rhs_batch_dims={{0}}, lhs_contracting_dims={{2}}, rhs_contracting_dims={{1}}
}}"""
    got = check(text, a, b, sa, sb, xla=False)
    lhs = f64(a) * np.repeat(f64(sa), block, axis=2)
    rhs = f64(b) * np.repeat(f64(sb), block, axis=1)
    want = np.matmul(lhs, rhs).astype(ml_dtypes.bfloat16 if out == "bf16" else np.float32)
    np.testing.assert_array_equal(got, want)  # products and sums are exact in f64 here


@pytest.mark.parametrize("t,st,block", FORMATS)
def test_block_scaled_dot_custom_call(t, st, block):
    k = 2 * block
    a, b = quantized(t, (3, 4, k)), quantized(t, (3, 6, k))
    sa, sb = scales(st, (3, 4, 2)), scales(st, (3, 6, 2))
    g = np.float32(0.375)
    for with_global in (False, True):
        extra = ", g" if with_global else ""
        param = "\n  g = f32[] parameter(4)" if with_global else ""
        text = f"""HloModule m
ENTRY e {{
  a = {t}[3,4,{k}] parameter(0)
  b = {t}[3,6,{k}] parameter(1)
  sa = {st}[3,4,2] parameter(2)
  sb = {st}[3,6,2] parameter(3){param}
  ROOT r = f32[3,4,6] custom-call(a, b, sa, sb{extra}), custom_call_target="__op$block_scaled_dot"
}}"""
        args = (a, b, sa, sb) + ((g,) if with_global else ())
        got = check(text, *args, xla=False)
        lhs = f64(a) * np.repeat(f64(sa), block, axis=2)
        rhs = f64(b) * np.repeat(f64(sb), block, axis=2)
        want = np.einsum("bmk,bnk->bmn", lhs, rhs) * (0.375 if with_global else 1.0)
        np.testing.assert_array_equal(got, want.astype(np.float32))


def test_custom_call_identity_topk_and_fallback():
    x = ((RNG.standard_normal((3, 7)) * 3).round() + 0.5).astype(np.float32)  # ties, no ±0
    text = """HloModule m
ENTRY e {
  x = f32[3,7] parameter(0)
  s = f32[3,7] custom-call(x), custom_call_target="Sharding", sharding={replicated}
  ROOT t = (f32[3,7], s32[3,7]) custom-call(s), custom_call_target="TopK"
}"""
    vals, idx = check(text, x, xla=False)
    order = np.argsort(-x, axis=1, kind="stable")  # largest first, ties to the lower index
    assert np.array_equal(idx, order) and np.array_equal(vals, np.take_along_axis(x, order, 1))
    # a target without a device version runs on the CPU, visibly
    lapack = """HloModule m
ENTRY e {
  x = f32[] parameter(0)
  ROOT t = f32[] custom-call(x), custom_call_target="no_such_target_on_any_backend"
}"""
    with pytest.raises(hloref.errors.HloUnsupportedError, match="no GPU version"):
        hloref.evaluate(lapack, np.float32(1), backend="gpu", fallback=False)


RAGGED_NON_CONTRACTING = MODULES["ragged-dot-non-contracting"]

RAGGED_CONTRACTING = MODULES["ragged-dot-contracting"]


@pytest.mark.parametrize("sizes", [[3, 2, 4], [0, 10, 0], [2, 2, 2]])
def test_ragged_dot_non_contracting(sizes):
    lhs = RNG.standard_normal((10, 4)).astype(np.float32)
    rhs = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    got = check(RAGGED_NON_CONTRACTING, lhs, rhs, np.array(sizes, np.int64), opcode="dot",
                exact=False, atol=1e-6, xla=False)  # XLA:CPU has no ragged-dot
    expected = ragged_non_contracting(lhs, rhs, sizes)
    np.testing.assert_allclose(got, expected.astype(np.float32), rtol=1e-6, atol=1e-6)


def test_ragged_dot_contracting_and_integer():
    lhs = RNG.standard_normal((6, 9)).astype(np.float32)
    rhs = RNG.standard_normal((9, 5)).astype(np.float32)
    sizes = [2, 3, 3]  # the 9th contracting index is in no group
    got = check(RAGGED_CONTRACTING, lhs, rhs, np.array(sizes, np.int32), opcode="dot",
                exact=False, atol=1e-6, xla=False)
    expected = ragged_contracting(lhs, rhs, sizes)
    np.testing.assert_allclose(got, expected.astype(np.float32), rtol=1e-6, atol=1e-6)
    text = RAGGED_NON_CONTRACTING.replace("f32[10,4]", "s8[10,4]").replace("f32[3,4,5]", "s8[3,4,5]") \
        .replace("f32[10,5]", "s32[10,5]")
    a = RNG.integers(-128, 128, (10, 4)).astype(np.int8)
    b = RNG.integers(-128, 128, (3, 4, 5)).astype(np.int8)
    out = check(text, a, b, np.array([4, 4, 1], np.int64), xla=False)
    want = np.zeros((10, 5), np.int64)
    for i, (s0, s1) in enumerate([(0, 4), (4, 8), (8, 9)]):
        want[s0:s1] = a[s0:s1].astype(np.int64) @ b[i].astype(np.int64)
    assert np.array_equal(out, want)


def _operand(t, dims):
    if t[0] == "c":
        v = RNG.standard_normal(dims) + 1j * RNG.standard_normal(dims)
        return v.astype(np.complex64 if t == "c64" else np.complex128)
    return RNG.standard_normal(dims).astype(np.float32)


def _like(want, got):
    """The complex128 reference ``want`` in ``got``'s type (its real part for reals)."""
    return (want if np.iscomplexobj(got) else want.real).astype(got.dtype)


RAGGED_BATCHED = """HloModule m
ENTRY e {{
  a = {t}[2,10,4] parameter(0)
  b = {t}[2,3,4,5] parameter(1)
  g = s32[2,3] parameter(2)
  ROOT r = {t}[2,10,5] ragged-dot(a, b, g), lhs_batch_dims={{0}}, rhs_batch_dims={{0}}, lhs_contracting_dims={{2}}, rhs_contracting_dims={{2}}, lhs_ragged_dims={{1}}, rhs_group_dims={{1}}
}}"""


@pytest.mark.parametrize("t", ["f32", "c64", "c128"])
def test_ragged_dot_group_sizes_per_batch(t):
    # group sizes [batch, groups]: each batch element has its own partition of the rows
    a, b = _operand(t, (2, 10, 4)), _operand(t, (2, 3, 4, 5))
    sizes = np.array([[3, 2, 4], [0, 7, 3]], np.int32)
    got = check(RAGGED_BATCHED.format(t=t), a, b, sizes, opcode="dot", exact=False,
                atol=1e-5, xla=False)  # XLA:CPU has no ragged-dot
    want = np.zeros((2, 10, 5), np.complex128)
    for n in range(2):
        start = 0
        for g, size in enumerate(sizes[n]):
            rows = slice(start, min(start + size, 10))
            want[n, rows] = a[n, rows].astype(np.complex128) @ b[n, g]
            start += size
    np.testing.assert_allclose(got, _like(want, got), rtol=1e-5, atol=1e-5)


RAGGED_FREE_PREFIX = """HloModule m
ENTRY e {{
  a = {t}[3,6,4] parameter(0)
  b = {t}[2,4,5] parameter(1)
  g = s64[3,2] parameter(2)
  ROOT r = {t}[3,6,5] ragged-dot(a, b, g), lhs_contracting_dims={{2}}, rhs_contracting_dims={{1}}, lhs_ragged_dims={{1}}, rhs_group_dims={{0}}
}}"""

RAGGED_CONTRACTING_PREFIX = """HloModule m
ENTRY e {{
  a = {t}[4,3,6] parameter(0)
  b = {t}[3,6,5] parameter(1)
  g = u8[3,2] parameter(2)
  ROOT r = {t}[2,4,5] ragged-dot(a, b, g), lhs_contracting_dims={{1,2}}, rhs_contracting_dims={{0,1}}, lhs_ragged_dims={{2}}
}}"""


@pytest.mark.parametrize("t", ["f32", "c64"])
def test_ragged_dot_group_sizes_with_leading_dims(t):
    # a non-contracting lhs dim before the ragged one indexes the group sizes' rows
    a, b = _operand(t, (3, 6, 4)), _operand(t, (2, 4, 5))
    sizes = np.array([[2, 4], [6, 0], [1, 3]], np.int64)
    got = check(RAGGED_FREE_PREFIX.format(t=t), a, b, sizes, opcode="dot", exact=False,
                atol=1e-5, xla=False)
    want = np.zeros((3, 6, 5), np.complex128)
    for x in range(3):
        start = 0
        for g, size in enumerate(sizes[x]):
            want[x, start:start + size] = a[x, start:start + size].astype(np.complex128) @ b[g]
            start += size
    np.testing.assert_allclose(got, _like(want, got), rtol=1e-5, atol=1e-5)
    # ragged contracting dim after another contracting dim: its index picks the row
    a, b = _operand(t, (4, 3, 6)), _operand(t, (3, 6, 5))
    sizes = np.array([[2, 4], [5, 1], [0, 3]], np.uint8)
    got = check(RAGGED_CONTRACTING_PREFIX.format(t=t), a, b, sizes, opcode="dot", exact=False,
                atol=1e-5, xla=False)
    want = np.zeros((2, 4, 5), np.complex128)
    for k0 in range(3):
        start = 0
        for g, size in enumerate(sizes[k0].astype(int)):
            ks = slice(start, start + size)
            want[g] += a[:, k0, ks].astype(np.complex128) @ b[k0, ks]
            start += size
    np.testing.assert_allclose(got, _like(want, got), rtol=1e-5, atol=1e-5)


def test_ragged_dot_complex_rank1_and_mixed():
    # complex ragged-dot with rank-1 group sizes, and a real lhs with a complex rhs
    a, b = _operand("c64", (10, 4)), _operand("c64", (3, 4, 5))
    text = RAGGED_NON_CONTRACTING.replace("f32", "c64")
    sizes = np.array([3, 2, 4], np.int64)
    got = check(text, a, b, sizes, opcode="dot", exact=False, atol=1e-5, xla=False)
    want = np.zeros((10, 5), np.complex128)
    for i, (s0, s1) in enumerate([(0, 3), (3, 5), (5, 9)]):
        want[s0:s1] = a[s0:s1].astype(np.complex128) @ b[i]
    np.testing.assert_allclose(got, want.astype(np.complex64), rtol=1e-5, atol=1e-5)
    ar = RNG.standard_normal((6, 9)).astype(np.float32)
    br = _operand("c128", (9, 5))
    text = RAGGED_CONTRACTING.replace("f32[6,9]", "f32[6,9]").replace("f32[9,5]", "c128[9,5]") \
        .replace("f32[3,6,5]", "c128[3,6,5]")
    got = check(text, ar, br, np.array([2, 3, 3], np.int32), opcode="dot", exact=False,
                atol=1e-12, xla=False)
    want = np.stack([ar[:, s0:s1].astype(np.float64) @ br[s0:s1]
                     for s0, s1 in [(0, 2), (2, 5), (5, 8)]])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


SCALED_MIXED = """HloModule m
ENTRY e {{
  a = {lt}[2,4] parameter(0)
  b = {lt}[4,3] parameter(1)
  sa = {st}{sad} parameter(2)
  sb = {st}{sbd} parameter(3)
  ROOT r = {ot}[2,3] scaled-dot(a, b, sa, sb), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}"""


def _ints(t, shape):
    if t == "pred":
        return RNG.integers(0, 2, shape).astype(bool)
    return RNG.integers(-3 if t[0] == "s" else 0, 5, shape).astype(
        hloref.types.element_type(t).dtype)


@pytest.mark.parametrize("lt,st,ot", [("s8", "f32", "f32"), ("u8", "bf16", "f32"),
                                      ("pred", "f32", "f32"), ("f32", "s8", "f32"),
                                      ("s8", "s8", "s32"), ("f32", "f32", "c64"),
                                      ("s8", "f32", "c128"), ("f32", "f32", "s16")])
@pytest.mark.parametrize("rank0", [False, True])
def test_scaled_dot_integer_operands_and_any_result(lt, st, ot, rank0):
    # the cpu's rule: operands and scales in f64 (integers by value), x * scale in blocks
    # (a rank-0 scale counts as 1), then dot into the result type; float operands with an
    # integer result: the dot into f32, then converted
    a = _ints(lt, (2, 4)) if lt != "f32" else RNG.standard_normal((2, 4)).astype(np.float32)
    b = _ints(lt, (4, 3)) if lt != "f32" else RNG.standard_normal((4, 3)).astype(np.float32)
    sad, sbd = ("[]", "[]") if rank0 else ("[2,2]", "[2,3]")
    sa = _ints(st, () if rank0 else (2, 2)) if st[0] in "su" else \
        np.asarray(RNG.integers(1, 4, () if rank0 else (2, 2))).astype(
            hloref.types.element_type(st).dtype)
    sb = _ints(st, () if rank0 else (2, 3)) if st[0] in "su" else \
        np.asarray(RNG.integers(1, 4, () if rank0 else (2, 3))).astype(
            hloref.types.element_type(st).dtype)
    text = SCALED_MIXED.format(lt=lt, st=st, ot=ot, sad=sad, sbd=sbd)
    got = check(text, a, b, sa, sb, exact=ot[0] != "c", opcode="dot", atol=1e-6, xla=False)
    fa, fb = a.astype(np.float64), b.astype(np.float64)
    if not rank0:
        fa = fa * np.repeat(sa.astype(np.float64), 2, axis=1)
        fb = fb * np.repeat(sb.astype(np.float64), 2, axis=0)
    want = fa @ fb
    if ot[0] in "su" and lt == "f32":  # float operands, integer result: the scaled dot
        # in f32, then converted toward zero (XLA's ConvolutionTypeCanonicalizer)
        np.testing.assert_array_equal(got, np.trunc(want.astype(np.float32)))
    elif ot[0] in "su":  # float -> integer conversion truncates (no saturation here)
        np.testing.assert_array_equal(got, np.trunc(fa) @ np.trunc(fb))
    else:
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
