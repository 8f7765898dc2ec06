"""Stored findings: hloref's reference values checked by hand, and each still
reproduces on the pinned jaxlib (``hloref replay``)."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import hloref
from hloref.cli_common import read_npz

ROOT = Path(__file__).resolve().parents[1] / "findings" / "xla-cpu-jaxlib-0.10.2"
RETIRED = Path(__file__).resolve().parents[1] / "findings" / "retired" / "xla-cpu-jaxlib-0.10.2"
#: findings already reported or fixed upstream (their upstream.json says where)
KNOWN = Path(__file__).resolve().parents[1] / "findings" / "known-upstream"


def _dir(name, group="xla-cpu-jaxlib-0.10.2"):
    """A stored finding's directory, open or known upstream."""
    d = ROOT.parent / group / name
    return d if d.is_dir() else KNOWN / group / name


def _load(name, root=None):
    d = root / name if root is not None else _dir(name)
    module = hloref.parse((d / "module.hlo").read_text())
    arrays = read_npz(str(d / "inputs.npz"))
    args = [a.view(p.shape.element_type.dtype) if a.dtype != p.shape.element_type.dtype else a
            for a, p in zip(arrays, module.entry.parameters)]
    return module, args


def test_sort_s2_reference_is_the_sorted_permutation():
    module, args = _load("sort-s2-not-a-permutation")
    out = hloref.evaluate(module, *args)
    row = args[0].astype(np.int8)[0]
    np.testing.assert_array_equal(out.astype(np.int8)[0], np.sort(row))


def test_convert_f4e2m1fn_reference_truncates():
    module, args = _load("convert-f4e2m1fn-to-s64-saturates")
    x = np.array([-6, 6, -1.5, 0.5, 4], ml_dtypes.float4_e2m1fn)
    text = "HloModule m\nENTRY e {\n  p = f4e2m1fn[5] parameter(0)\n  ROOT c = s64[5] convert(p)\n}\n"
    assert hloref.evaluate(text, x).tolist() == [-6, 6, -1, 0, 4]
    assert hloref.evaluate(module, *args).item() == int(np.trunc(float(args[0])))


def test_concatenate_and_divide_references():
    module, args = _load("concatenate-s2-aborts")
    out = hloref.evaluate(module, *args)
    np.testing.assert_array_equal(out.astype(np.int8),
                                  np.concatenate([args[0], args[0]], axis=1).astype(np.int8))
    module, args = _load("divide-u2-constant-zero-sigfpe")
    assert int(hloref.evaluate(module, *args)) == 3  # u2: 0 / 0 = all ones


def test_atan2_of_iota_reference():
    """atan2(+0, +0) = +0 (C99 F.9.1.4) and atan2(1, 1) = pi/4, by hand."""
    module, args = _load("atan2-iota-zero-zero-nan")
    out = np.asarray(hloref.evaluate(module, *args))
    np.testing.assert_array_equal(out, [[0.0, 0.0], [np.pi / 4, np.pi / 4]])
    assert not np.signbit(out[0]).any()


def test_convolution_u16_reference_wraps():
    """12 x 65535 = 786,420 wraps to 65,524 in u16; 5 x 65535 = 327,675 to 65,531; the
    padded positions and the dilation hole are 0 (by hand)."""
    module, args = _load("convolution-u16-constant-folding-saturates")
    out = np.asarray(hloref.evaluate(module, *args)).astype(np.int64)
    row0, row1 = [0, 65524, 0, 65524, 0], [0, 65531, 0, 65531, 0]
    assert 786420 % 2 ** 16 == 65524 and 327675 % 2 ** 16 == 65531
    assert out.tolist() == [[row0, row0], [row1, row1]]


def test_dynamic_update_slice_reference_reads_the_update_before_writing():
    """Row 1 of reshape(p) takes p's flat elements 2..4 (start (5, 4, 0) clamped to
    (1, 0, 0)): [6, -3, -5] then the kept -7, by hand with numpy."""
    module, args = _load("dynamic-update-slice-overlapping-update")
    p = args[0].astype(np.int64)
    want = p.reshape(2, 1, 4).copy()
    want[1, 0, 0:3] = p.reshape(8)[2:5]
    out = np.asarray(hloref.evaluate(module, *args)).astype(np.int64)
    np.testing.assert_array_equal(out, want)
    assert out[1, 0].tolist() == [6, -3, -5, -7]


def test_int_to_f8_to_unsigned_reference_is_zero_for_nan():
    """3e9 and 500 exceed f8e4m3fn's largest finite 448 (no infinity): NaN; NaN converts
    to integer 0; 5 is exact (by hand, and ml_dtypes for the f8 step)."""
    module, args = _load("convert-int-f8-unsigned-fused-nan-saturates")
    assert args[0].tolist() == [3000000000, 500, 5]
    f8 = args[0].astype(np.float64).astype(ml_dtypes.float8_e4m3fn)
    assert np.isnan(f8[:2].astype(np.float32)).all() and float(f8[2]) == 5.0
    assert hloref.evaluate(module, *args).tolist() == [0, 0, 5]


def test_rng_bit_generator_s32_reference_reads_the_words_signed():
    """ThreeFry-2x32, key 1, counters 1 and 2: the words XLA:CPU returns for a u32 result
    (measured; hloref's generator agrees bit for bit), read as s32 by two's complement."""
    module, args = _load("rng-bit-generator-signed-float-as-unsigned")
    words = [0x0EC66872, 0x2D84E7B1, 0x0296E954, 0x802FD53B]
    text = module.to_text().replace("s32[4]", "u32[4]")
    assert hloref.evaluate(text, *args).tolist() == words
    want = [w - 2 ** 32 if w >= 2 ** 31 else w for w in words]
    assert hloref.evaluate(module, *args).tolist() == want


def test_asin_of_an_out_of_domain_integer_is_nan():
    """asin is defined on [-1, 1]: -11 and 3 give NaN, NaN != NaN (by hand)."""
    module, args = _load("asin-acos-of-integer-never-nan")
    assert args[0].tolist() == [-11, 3, 0]
    assert hloref.evaluate(module, *args).tolist() == [True, True, False]


def test_acos_of_an_out_of_domain_f8e3m4_iota_is_nan():
    """acos is defined on [-1, 1]: acos(0) = pi/2, 1.5625 in f8e3m4 (the nearest of
    1 + k/16), acos(1) = 0, acos(2..4) NaN (by hand; f8e3m4 holds NaN)."""
    module, args = _load("acos-f8e3m4-iota-out-of-domain-inf")
    got = np.asarray(hloref.evaluate(module, *args)).astype(np.float64).ravel()
    assert got[:2].tolist() == [1.5625, 0.0] and np.isnan(got[2:]).all()


def test_findings_still_reproduce():
    pytest.importorskip("jax")
    from hloref.fuzz.campaign import replay
    results = replay([str(ROOT), str(KNOWN / "xla-cpu-jaxlib-0.10.2")])
    assert len(results) == 27
    # a finding seen only on some processors may not reproduce on a host without its
    # CPU flags (finding.json: host_cpu_flags); everywhere else a miss is a fix
    not_reproducing = [r["path"] for r in results if not r["reproduces"] and not r["host_lacks"]]
    assert not not_reproducing, f"fixed in this jaxlib? {not_reproducing}"


def test_a_finding_names_the_cpu_flags_a_host_lacks(tmp_path):
    from hloref.fuzz.findings import host_cpu_flags, missing_cpu_flags
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f\n")
    have = host_cpu_flags(str(cpuinfo))
    assert have == {"fpu", "sse2", "avx2", "avx512f"}
    meta = {"host_cpu_flags": ["avx512f", "avx512_bf16"]}
    assert missing_cpu_flags(meta, have) == ["avx512_bf16"]
    assert missing_cpu_flags({}, have) == []
    assert missing_cpu_flags(meta, None) == ["avx512f", "avx512_bf16"]  # unknown host
    assert host_cpu_flags(str(tmp_path / "absent")) is None


def test_bf16_to_pred_and_u16_reference_by_hand():
    module, args = _load("convert-bf16-to-pred-and-u16-llvm-cannot-select")
    x = args[0].astype(np.float64)
    want = (x != 0).astype(np.int64) + np.clip(np.trunc(x), 0, 65535).astype(np.int64)
    assert want.tolist() == [[1, 1, 1], [1, 0, 1], [2, 2, 3], [3, 4, 301]]
    np.testing.assert_array_equal(hloref.evaluate(module, *args).astype(np.int64), want)


def test_retired_findings_are_excess_precision():
    # XLA's default keeps the f8 intermediates in f32 (inside the envelope); with
    # xla_allow_excess_precision=false it rounds them and agrees with hloref
    pytest.importorskip("jax")
    from hloref.fuzz.campaign import replay
    results = replay([str(RETIRED)])
    assert len(results) == 2
    for r in results:
        assert r["verdict"] == "match" and r["verdict_without_excess_precision"] == "match", r


def test_log1p_reference_is_within_one_ulp_of_mpmath():
    import mpmath
    module, args = _load("log-plus-one-f64-15-ulp")
    got = hloref.evaluate(module, *args)
    mpmath.mp.prec = 200
    x = float(args[0].ravel()[0])
    exact = mpmath.log1p(mpmath.mpf(x))
    err = abs(mpmath.mpf(float(got.ravel()[0])) - exact) / mpmath.mpf(np.spacing(abs(float(exact))))
    assert err <= 1


def test_clz_and_s4_wrap_references():
    module, args = _load("clz-s8-constant-folding")
    assert int(hloref.evaluate(module, *args)) == 0  # -3 = 0b11111101: no leading zeros
    module, args = _load("s4-add-does-not-wrap")
    x = args[0].astype(np.int8)
    wrapped = ((x.astype(np.int16) * 2 + 8) % 16 - 8).astype(np.int8)  # two's complement, 4 bits
    np.testing.assert_array_equal(hloref.evaluate(module, *args), wrapped)


def test_convolution_f8_reference_is_f8_representable():
    module, args = _load("convolution-f8-convert-skips-f8-rounding", RETIRED)
    out = np.asarray(hloref.evaluate(module, *args)).astype(np.float32)
    # the convert sees the convolution's f8e4m3fn result: every value is an f8 value
    finite = np.isfinite(out)
    roundtrip = out[finite].astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
    np.testing.assert_array_equal(roundtrip, out[finite])
    stored = read_npz(str(RETIRED / "convolution-f8-convert-skips-f8-rounding" / "actual.npz"))[0]
    xla_values = np.asarray(stored).astype(np.float32)
    xla_values = xla_values[np.isfinite(xla_values)]
    assert np.any(xla_values.astype(ml_dtypes.float8_e4m3fn).astype(np.float32) != xla_values)


def test_atanh_f4_reference_saturates_inf():
    module, args = _load("atanh-f4e2m1fn-constant-folding")
    out = hloref.evaluate(module, *args)
    atanh = np.asarray(out[1]).astype(np.float32)
    # constant {0,1,0,0,0},{0,-1,0,2,2},{-2,0,1,0,0}: atanh(±1) = ±inf -> ±6 (f4e2m1fn max,
    # as XLA's runtime convert and ml_dtypes saturate), |x| > 1 -> NaN -> 0
    assert np.array(np.inf).astype(ml_dtypes.float4_e2m1fn).astype(np.float32) == 6
    np.testing.assert_array_equal(atanh, [[0, 6, 0, 0, 0], [0, -6, 0, 0, 0], [0, 0, 6, 0, 0]])


def test_tf_asin_f8e8m0fnu_reference_rounds_to_two():
    import mpmath
    d = _dir("asin-f8e8m0fnu-nan", "tf-2.21")
    module = hloref.parse((d / "module.hlo").read_text())
    args = [a.view(p.shape.element_type.dtype) if a.dtype != p.shape.element_type.dtype else a
            for a, p in zip(read_npz(str(d / "inputs.npz")), module.entry.parameters)]
    x = float(np.asarray(args[0]).astype(np.float32).ravel()[0])
    assert x == 1.0
    exact = float(mpmath.asin(1))  # pi/2: between 1 and 2, nearer 2 (powers of two only)
    assert abs(exact - 2) < abs(exact - 1)
    out = np.asarray(hloref.evaluate(module, *args)).astype(np.float32).ravel()
    assert out[0] == 2.0 == float(np.array(exact).astype(ml_dtypes.float8_e8m0fnu))


def test_reduce_s2_maximum_of_broadcast_reference():
    module, args = _load("reduce-s2-maximum-of-broadcast")
    v = int(np.asarray(args[0]).astype(np.int8))
    assert v == 1
    # max over three copies of v and the init -2 (the s2 minimum, the identity) is v
    assert np.asarray(hloref.evaluate(module, *args)).astype(np.int8).tolist() == [v, v, v]


def test_convert_f8e8m0fnu_negative_reference_is_nan():
    module, args = _load("convert-f8e8m0fnu-negative-constant-folding")
    out = np.asarray(hloref.evaluate(module, *args))
    # f8e8m0fnu has no sign bit: a negative value converts to NaN (0xFF), as ml_dtypes does
    assert np.isnan(np.array(-2147483648.0, np.float32).astype(ml_dtypes.float8_e8m0fnu).astype(np.float32))
    assert out.view(np.uint8).item() == 0xFF


def test_tf_atan2_zero_zero_reference_is_zero():
    d = _dir("atan2-zero-zero-nan", "tf-2.21")
    module = hloref.parse((d / "module.hlo").read_text())
    args = [a.view(p.shape.element_type.dtype) if a.dtype != p.shape.element_type.dtype else a
            for a, p in zip(read_npz(str(d / "inputs.npz")), module.entry.parameters)]
    out = np.asarray(hloref.evaluate(module, *args)).astype(np.float32)
    # xor(p, p) = 0 -> atan2(+0, +0) = +0 (C99 F.9.1.4)
    assert out.item() == 0.0 and not np.signbit(out.item())
    assert np.arctan2(np.float32(0), np.float32(0)) == 0


def test_multiply_f8e3m4_reference_is_f8_rounded():
    module, args = _load("multiply-f8e3m4-convert-skips-f8-rounding", RETIRED)
    x = args[0].astype(np.float64)
    # by hand: f8e3m4 has 4 mantissa bits (step 1/16 in [1, 2)) and max 15.5, with inf:
    # 1.3125^2 = 1.7227 -> 1.75; 1.1875^2 = 1.4102 -> 1.4375; 16 and 132.25 overflow
    assert x.tolist() == [[1.3125, 1.1875], [-4.0, -11.5]]
    out = hloref.evaluate(module, *args).astype(np.float64)
    assert out.tolist() == [[1.75, 1.4375], [np.inf, np.inf]]


def test_tf_atanh_f64_reference_is_within_half_an_ulp_and_tf_is_not():
    import mpmath
    mpmath.mp.prec = 200
    d = _dir("atanh-f64-104-ulp", "tf-2.21")
    module = hloref.parse((d / "module.hlo").read_text())
    (x,) = read_npz(str(d / "inputs.npz"))
    exact = mpmath.atanh(mpmath.mpf(float(x[0])))
    ours = float(hloref.evaluate(module, x)[0])
    (theirs,) = read_npz(str(d / "actual.npz"))  # what TF 2.21 returned
    ulp = float(np.spacing(ours))
    assert abs(float(mpmath.mpf(ours) - exact)) <= 0.5 * ulp
    assert abs(float(mpmath.mpf(float(theirs[0])) - exact)) > 100 * ulp


def test_round_nearest_afz_f8e3m4_reference_rounds_half_away_from_zero():
    module, args = _load("round-nearest-afz-f8e3m4-constant-folding")
    # by hand: 1.5 -> 2 and -2.5 -> -3 (ties away from zero); both are f8e3m4 values
    out = hloref.evaluate(module, *args).astype(np.float32)
    assert out.tolist() == [2.0, -3.0]
    assert np.array([2.0, -3.0], np.float32).astype(ml_dtypes.float8_e3m4).astype(
        np.float32).tolist() == [2.0, -3.0]
    from hloref.fuzz.oracles.xla import run_hlo
    param = ("HloModule m\nENTRY e {\n  p = f8e3m4[2] parameter(0)\n"
             "  ROOT r = f8e3m4[2] round-nearest-afz(p)\n}\n")
    x = np.array([1.5, -2.5], ml_dtypes.float8_e3m4)
    assert np.asarray(run_hlo(param, x)).astype(np.float32).tolist() == [2.0, -3.0]
    assert np.all(np.isnan(np.asarray(run_hlo(module.to_text())).astype(np.float32)))


def test_divide_c64_infinite_numerator_reference_is_an_infinity():
    # C99 G.5.1 recovery (XLA's EmitComplexDivide): Smith's quotient of (nan + inf i) by
    # (1 + i) is NaN in both parts, the numerator has an infinite part, the divisor is
    # finite: a' = (copysign(0, nan), copysign(1, inf)) = (±0, 1), and the result is
    # inf·(a'_r·1 + a'_i·1), inf·(a'_i·1 − a'_r·1) = (inf, inf)
    module, args = _load("divide-c64-constant-infinite-numerator")
    out = np.asarray(hloref.evaluate(module, *args))
    assert np.isposinf(out[4].real) and np.isposinf(out[4].imag)
    assert np.isposinf(out[0].real) and np.isposinf(out[0].imag)  # (1 + inf i)/(1 + i)


def test_fusion_extra_operand_reference_ignores_the_extra_operand():
    module, args = _load("fusion-extra-operand-aborts")
    assert len(args) == 2 and len(module.entry.root.operands) == 2
    np.testing.assert_array_equal(hloref.evaluate(module, *args), -args[0])  # negate(x)


def test_fusion_parameter_output_reference_is_the_fused_computation():
    module, args = _load("fusion-parameter-output-garbage")
    x, y = args
    first, second = hloref.evaluate(module, *args)
    np.testing.assert_array_equal(first, y)  # by hand: tuple(p1, add(p0, p1))
    np.testing.assert_array_equal(second, x + y)


def test_convolution_lhs_dilate_reference_by_hand():
    """All-ones inputs: one of the three padded taps of spatial dimension 0 and one of
    the two taps of the dilated dimension 1 read a real element, times 3 input features:
    every output element is 3 (the finding's triage)."""
    module, args = _load("convolution-lhs-dilate-simplifier-check-failure")
    assert all(np.all(a == 1) for a in args)
    out = hloref.evaluate(module, *args)
    assert out.shape == (1, 6, 2, 1) and np.all(out == 3.0)
