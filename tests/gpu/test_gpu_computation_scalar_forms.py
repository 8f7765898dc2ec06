"""Ops whose value on one-element operands is a scalar formula, inside computations that
ops call on every element (``gpu/computation_formulas.py``; ``gpu/computation_control.py``: the async pairs,
``domain``): each result against the CPU backend bit for bit and by hand (the value the
written semantics gives, with the CPU's arithmetic: sums from +0, f64 intermediates),
``fallback=False``, launches of 8 threads x 4 blocks (conftest).

No XLA here: XLA:CPU (jaxlib 0.10.2) aborts compiling a map or reduce whose computation
holds ops its loop-fusion emitter cannot index (see test_gpu_computation_one_element.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from hloref.types import element_type

from gpu_check import bits_equal, check
from hlo_modules import scalar_computation

X = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.5, 4.0, 0.1, 3.0, np.inf, -np.inf, np.nan,
              1e-30, 7e30, -3e-40, 0.75], np.float32)
N = len(X)

COMPS = "\n" + scalar_computation("add", "f32", "add") + scalar_computation(
    "sub", "f32", "subtract") + scalar_computation(
    "ge", "f32", "compare", "direction=GE", out="pred") + """\
step {
  a = f32[] parameter(0)
  c = f32[] parameter(1)
  s = f32[] add(a, c)
  m = f32[] multiply(a, c)
  ROOT t = (f32[], f32[]) tuple(m, s)
}
"""


def map_module(t, body, out=None, n=N):
    out = out or t
    return f"""HloModule m
{COMPS}
body {{
  x = {t}[] parameter(0)
{body}
}}
ENTRY e {{
  p = {t}[{n}] parameter(0)
  ROOT m = {out}[{n}] map(p), dimensions={{0}}, to_apply=body
}}
"""


def complex_of(re, im):
    """Complex values with these parts (``re + 1j * im`` would turn NaN parts both NaN)."""
    c = np.empty(len(re), np.complex64)
    c.real, c.imag = re, im
    return c


def f64(x):
    return np.asarray(x).astype(np.float64)


def test_domain_async_copy_and_one_device_collective_pairs():
    """domain, async-start/update/done with calls= and a sugared negate-start/done,
    copy-start/done (its u32 context is 0), and on one device all-reduce-start/done,
    all-gather-start/done, collective-permute-start/done: ``-(x - 0.5) + 0``."""
    body = """  c = f32[] constant(0.5)
  s = ((f32[], f32[]), f32[], u32[]) async-start(x, c), calls=sub
  u = ((f32[], f32[]), f32[], u32[]) async-update(s)
  d = f32[] async-done(u)
  ns = ((f32[]), f32[], s32[]) negate-start(d)
  nd = f32[] negate-done(ns)
  cs = (f32[], f32[], u32[]) copy-start(nd)
  cd = f32[] copy-done(cs)
  ctx = u32[] get-tuple-element(cs), index=2
  fc = f32[] convert(ctx)
  dm = f32[] domain(cd), domain={kind="sharding", entry={maximal device=0}, exit={maximal device=1}}
  ars = f32[] all-reduce-start(dm), replica_groups={}, to_apply=add
  ard = f32[] all-reduce-done(ars)
  g1 = f32[1] reshape(ard)
  ags = (f32[1], f32[1]) all-gather-start(g1), dimensions={0}, replica_groups={}
  agd = f32[1] all-gather-done(ags)
  cps = (f32[1], f32[1], u32[], u32[]) collective-permute-start(agd), source_target_pairs={{0,0}}
  cpd = f32[1] collective-permute-done(cps)
  cpr = f32[] reshape(cpd)
  ROOT y = f32[] add(cpr, fc)"""
    got = check(map_module("f32", body), X, xla=False)
    assert bits_equal(got, -(X - np.float32(0.5)) + np.float32(0))


@pytest.mark.parametrize("window,covers", [
    ("size=1", True), ("size=1 pad=1_-1", False), ("size=1 pad=-1_1", False),
    ("size=1 lhs_dilate=2 rhs_dilate=3 stride=2", True), ("size=1x1 pad=0_0x1_-1", False)])
def test_convolution_of_one_element(window, covers):
    """One tap: ``x x (-2)`` (f64, plus the sum's +0) where it lands on the element, else
    the padding zero times the kernel (+0); with x the kernel, ``0 x x`` (NaN for inf
    and NaN)."""
    sp = len(window.split()[0].split("=")[1].split("x"))
    dims = ",".join(["1"] * (sp + 2))
    lab = "b" + "01"[:sp] + "f_" + "01"[:sp] + "io->b" + "01"[:sp] + "f"
    k = "{" * (sp + 2) + "-2" + "}" * (sp + 2)
    for order, want in [("r, k", (f64(X) * -2 + 0).astype(np.float32) if covers else
                         np.zeros(N, np.float32)),
                        ("k, r", (f64(X) * -2 + 0).astype(np.float32) if covers else
                         (0.0 * f64(X) + 0).astype(np.float32))]:
        body = f"""  r = f32[{dims}] reshape(x)
  k = f32[{dims}] constant({k})
  c = f32[{dims}] convolution({order}), window={{{window}}}, dim_labels={lab}
  ROOT y = f32[] reshape(c)"""
        got = check(map_module("f32", body), X, xla=False)
        assert bits_equal(got, want)


@pytest.mark.parametrize("op", ["dot", "convolution"])
def test_float_operands_integer_result(op):
    """f32 operands, s32 result: the product in f32, converted (ConvolutionTypeCanonicalizer:
    1.5 x 1.5 = 2.25 gives 2, not 1 x 1); a -0 product sums to +0 in an f32 result."""
    x = np.array([1.5, -1.5, 2.5, 0.5, -0.75, 3.0, -0.0, 10.25], np.float32)
    if op == "dot":
        d = ("s32[1,1] dot(r, k), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
             "f32[1,1] dot(r, k), lhs_contracting_dims={1}, rhs_contracting_dims={0}")
    else:
        d = ("s32[1,1] convolution(r, k), dim_labels=bf_io->bf",
             "f32[1,1] convolution(r, k), dim_labels=bf_io->bf")
    body = f"""  r = f32[1,1] reshape(x)
  k = f32[1,1] constant({{{{1.5}}}})
  d = {d[0]}
  ROOT y = s32[] reshape(d)"""
    got = check(map_module("f32", body, "s32", n=8), x, xla=False)
    assert (np.asarray(got) == np.trunc(x * np.float32(1.5)).astype(np.int32)).all()
    body = f"""  r = f32[1,1] reshape(x)
  k = f32[1,1] constant({{{{1.5}}}})
  d = {d[1]}
  ROOT y = f32[] reshape(d)"""
    got = check(map_module("f32", body, n=8), x, xla=False)
    assert bits_equal(got, x * np.float32(1.5) + np.float32(0))  # -0 x 1.5 + 0 = +0


@pytest.mark.parametrize("t", ["f32", "bf16", "f64"])
@pytest.mark.parametrize("lower", ["true", "false"])
def test_cholesky_of_one_element(t, lower):
    """1x1: ``sqrt(x)``, NaN for a negative x (-0 gives -0)."""
    x = X.astype(element_type(t).dtype)
    body = f"""  r = {t}[1,1] reshape(x)
  c = {t}[1,1] cholesky(r), lower={lower}
  ROOT y = {t}[] reshape(c)"""
    got = check(map_module(t, body), x, xla=False)
    with np.errstate(invalid="ignore"):
        assert bits_equal(got, np.sqrt(f64(x)).astype(x.dtype))


def test_complex_cholesky_of_one_element():
    """Complex 1x1: the root of the real part, imaginary part 0."""
    c = complex_of(X, X[::-1])
    body = """  r = c64[1,1] reshape(x)
  f = c64[1,1] cholesky(r), lower=true
  ROOT y = c64[] reshape(f)"""
    got = check(map_module("c64", body), c, xla=False)
    with np.errstate(invalid="ignore"):
        want = np.sqrt(f64(X)).astype(np.float32)
    assert bits_equal(np.asarray(got).real, want) and (np.asarray(got).imag == 0).all()


@pytest.mark.parametrize("attrs,unit", [
    ("left_side=true, lower=true, transpose_a=NO_TRANSPOSE", False),
    ("left_side=false, lower=false, transpose_a=TRANSPOSE", False),
    ("left_side=true, lower=false, unit_diagonal=true, transpose_a=ADJOINT", True)])
def test_triangular_solve_of_one_element(attrs, unit):
    """``a = x``, ``b = -3``: ``(1 / x) x (-3) + 0`` in f64, rounded once (``b`` itself
    with a unit diagonal); then ``a = 3``, ``b = x``: ``(1 / 3) x x + 0``."""
    body = f"""  r = f32[1,1] reshape(x)
  b = f32[1,1] constant({{{{-3}}}})
  c = f32[1,1] triangular-solve(r, b), {attrs}
  ROOT y = f32[] reshape(c)"""
    got = check(map_module("f32", body), X, xla=False)
    with np.errstate(divide="ignore"):
        want = np.full(N, -3, np.float32) if unit else \
            ((1.0 / f64(X)) * -3.0 + 0.0).astype(np.float32)
    assert bits_equal(got, want)
    body = f"""  r = f32[1,1] reshape(x)
  a = f32[1,1] constant({{{{3}}}})
  c = f32[1,1] triangular-solve(a, r), {attrs}
  ROOT y = f32[] reshape(c)"""
    got = check(map_module("f32", body), X, xla=False)
    want = (f64(X) + 0.0).astype(np.float32) if unit else \
        ((1.0 / 3.0) * f64(X) + 0.0).astype(np.float32)
    assert bits_equal(got, want)


def test_fft_of_length_one():
    """FFT and IFFT of one element give it; RFFT ``(x, 0)``; IRFFT the real part."""
    c = complex_of(X, X[::-1])
    fft = """  r = c64[1,1] reshape(x)
  f = c64[1,1] fft(r), fft_type=FFT, fft_length={1,1}
  i = c64[1,1] fft(f), fft_type=IFFT, fft_length={1}
  ROOT y = c64[] reshape(i)"""
    assert bits_equal(check(map_module("c64", fft), c, xla=False), c)
    irfft = """  r = c64[1] reshape(x)
  f = f32[1] fft(r), fft_type=IRFFT, fft_length={1}
  ROOT y = f32[] reshape(f)"""
    assert bits_equal(check(map_module("c64", irfft, "f32"), c, xla=False), X)
    rfft = """  r = f32[1] reshape(x)
  f = c64[1] fft(r), fft_type=RFFT, fft_length={1}
  ROOT y = c64[] reshape(f)"""
    got = np.asarray(check(map_module("f32", rfft, "c64"), X, xla=False))
    assert bits_equal(got.real, X) and (got.imag == 0).all()


@pytest.mark.parametrize("t", ["f32", "bf16"])
def test_batch_norm_of_one_element(t):
    """inference: ``(x - 0.1) x (1 / sqrt(3 + eps) x 1.5) - 0.25`` in f64 (eps the f32
    0.001 as ``t`` holds it); training with offset x: mean ``x + 0``, variance
    ``(x - mean)^2`` (0, NaN for inf and NaN), output ``(x - mean) x ... + x`` (x)."""
    dt = element_type(t).dtype
    x = X.astype(dt)
    body = f"""  r = {t}[1,1] reshape(x)
  s = {t}[1] constant({{1.5}})
  o = {t}[1] constant({{-0.25}})
  m = {t}[1] constant({{0.1}})
  v = {t}[1] constant({{3}})
  b = {t}[1,1] batch-norm-inference(r, s, o, m, v), epsilon=0.001, feature_index=1
  ROOT y = {t}[] reshape(b)"""
    got = check(map_module(t, body), x, xla=False)
    eps = f64(np.array([np.float32(0.001)]).astype(dt))[0]
    k = 1.0 / np.sqrt(3.0 + eps) * 1.5
    with np.errstate(invalid="ignore"):
        want = ((f64(x) - f64(np.array([0.1], dt))[0]) * k - 0.25).astype(dt)
    assert bits_equal(got, want)
    for index, want in [(0, x), (1, (f64(x) + 0.0).astype(dt)),
                        (2, np.where(np.isfinite(f64(x)), 0.0, np.nan).astype(dt))]:
        body = f"""  r = {t}[1,1] reshape(x)
  s = {t}[1] constant({{1.5}})
  o = {t}[1] reshape(x)
  b = ({t}[1,1], {t}[1], {t}[1]) batch-norm-training(r, s, o), epsilon=0.5, feature_index=1
  g = {t}[{'1,1' if index == 0 else '1'}] get-tuple-element(b), index={index}
  ROOT y = {t}[] reshape(g)"""
        got = check(map_module(t, body), x, xla=False)
        if index == 0:  # finite x: 0 x k + x = x; inf and NaN: NaN
            want = np.where(np.isfinite(f64(x)), f64(x), np.nan).astype(dt)
        assert bits_equal(got, want)


def test_stochastic_convert_of_one_element():
    """f32 to s8 with random u32 bits: the whole part, plus 1 when the bits are below the
    fraction as a 32-bit fixed-point number (2.25: 2^30), the sign kept; saturated at
    127 / -128; NaN 0."""
    x = np.array([2.25, 2.25, 2.25, -2.25, -2.25, 1000.5, -np.inf, np.nan, 0.0, -0.5,
                  126.5, 3.0], np.float32)
    r = np.array([0, 2**30 - 1, 2**30, 0, 2**30, 0, 0, 0, 5, 2**31 - 1, 2**31 + 7, 9],
                 np.uint32)
    want = np.array([3, 3, 2, -3, -2, 127, -128, 0, 0, -1, 126, 3], np.int8)
    text = """HloModule m
body {
  x = f32[] parameter(0)
  r = u32[] parameter(1)
  ROOT y = s8[] stochastic-convert(x, r)
}
ENTRY e {
  p = f32[12] parameter(0)
  q = u32[12] parameter(1)
  ROOT m = s8[12] map(p, q), dimensions={0}, to_apply=body
}
"""
    got = check(text, x, r, xla=False)
    assert (np.asarray(got) == want).all()


def test_shuffle_and_scan_of_one_element():
    """shuffle of one element gives it; a scan of length 1 calls ``step`` once:
    outputs ``x x 1.5``, carry ``x + 1.5``: their difference."""
    body = """  r = f32[1] reshape(x)
  h = f32[1] shuffle(r), dimensions={0}, mode=rotate, shifts={3}
  c = f32[] constant(1.5)
  s = (f32[1], f32[]) scan(h, c), dimensions={0}, num_carries=1, to_apply=step
  o = f32[1] get-tuple-element(s), index=0
  k = f32[] get-tuple-element(s), index=1
  ro = f32[] reshape(o)
  ROOT y = f32[] subtract(ro, k)"""
    got = check(map_module("f32", body), X, xla=False)
    with np.errstate(invalid="ignore"):
        assert bits_equal(got, X * np.float32(1.5) - (X + np.float32(1.5)))


@pytest.mark.parametrize("window,covers", [("size=1", True), ("size=2 pad=1_0", True),
                                           ("size=3 pad=1_1", True),
                                           ("size=1 pad=1_-1", False),
                                           ("size=2 pad=-1_2", False)])
def test_select_and_scatter_of_one_element(window, covers):
    """The one window holds the element when some position ``k - low`` is 0: the result
    is ``add(init 2, source x)``, else the init."""
    body = f"""  r = f32[1] reshape(x)
  i = f32[] constant(2)
  q = f32[1] select-and-scatter(r, r, i), window={{{window}}}, select=ge, scatter=add
  ROOT y = f32[] reshape(q)"""
    got = check(map_module("f32", body), X, xla=False)
    assert bits_equal(got, X + np.float32(2) if covers else np.full(N, 2, np.float32))


@pytest.mark.parametrize("out", ["f32", "bf16", "s32"])
def test_scaled_dot_of_one_element(out):
    """``(x x 3) x (-1.25 x 0.1f) + 0`` in f64, rounded once (s32: to f32, converted);
    a rank-0 lhs scale is 1 (the CPU ignores its value): ``x x (-1.25 x 0.1f) + 0``."""
    x = np.array([1.5, -0.0, 2.0, -7.25, 0.1, 100.0, 3.0, -0.5], np.float32)
    body = f"""  r = f32[1,1] reshape(x)
  k = f32[1,1] constant({{{{-1.25}}}})
  ls = f32[1,1] constant({{{{3}}}})
  rs = f32[1,1] constant({{{{0.1}}}})
  d = {out}[1,1] scaled-dot(r, k, ls, rs), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  ROOT y = {out}[] reshape(d)"""
    got = check(map_module("f32", body, out, n=8), x, xla=False)
    wide = (f64(x) * 3.0) * (-1.25 * f64(np.float32(0.1))) + 0.0
    if out == "s32":
        want = np.trunc(wide.astype(np.float32)).astype(np.int32)
    else:
        want = wide.astype(element_type(out).dtype)
    assert bits_equal(got, want)
    scalar = body.replace("ls = f32[1,1] constant({{3}})", "ls = f32[] constant(3)")
    got = check(map_module("f32", scalar, out, n=8), x, xla=False)
    wide = f64(x) * (-1.25 * f64(np.float32(0.1))) + 0.0
    if out == "s32":
        want = np.trunc(wide.astype(np.float32)).astype(np.int32)
    else:
        want = wide.astype(element_type(out).dtype)
    assert bits_equal(got, want)


@pytest.mark.parametrize("mode", ["rows", "contracting", "batch"])
def test_ragged_dot_of_one_element(mode):
    """One group of rows starting at 0: the element is in it when the group size is at
    least 1, giving ``x x (-2) + 0``, else the zero times -2 (+0 after the sum); a ragged
    batch dimension only partitions the batch: the product whatever the size."""
    attrs, ls, rs, o = {
        "rows": ("lhs_contracting_dims={1}, rhs_contracting_dims={1}, lhs_ragged_dims={0}, "
                 "rhs_group_dims={0}", "1,1", "1,1,1", "1,1"),
        "contracting": ("lhs_contracting_dims={1}, rhs_contracting_dims={0}, "
                        "lhs_ragged_dims={1}", "1,1", "1,1", "1,1,1"),
        "batch": ("lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, "
                  "rhs_contracting_dims={1}, lhs_ragged_dims={0}", "1,1,1", "1,1,1", "1,1,1"),
    }[mode]
    x = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.5, np.inf, np.nan, 3.0, 1.5], np.float32)
    g = np.array([1, 0, 2, -1, 1, 1, 0, 1, 5, 0], np.int32)
    text = f"""HloModule m
body {{
  x = f32[] parameter(0)
  g = s32[] parameter(1)
  a = f32[{ls}] reshape(x)
  k = f32[] constant(-2)
  b = f32[{rs}] broadcast(k), dimensions={{}}
  gs = s32[1] reshape(g)
  d = f32[{o}] ragged-dot(a, b, gs), {attrs}
  ROOT y = f32[] reshape(d)
}}
ENTRY e {{
  p = f32[10] parameter(0)
  q = s32[10] parameter(1)
  ROOT m = f32[10] map(p, q), dimensions={{0}}, to_apply=body
}}
"""
    got = check(text, x, g, xla=False)
    inside = (g >= 1) | (mode == "batch")
    want = (np.where(inside, f64(x), 0.0) * -2.0 + 0.0).astype(np.float32)
    assert bits_equal(got, want)


def test_batch_norm_grad_of_one_element():
    """n = 1, variance x, mean 0.1f, scale 1.5, epsilon 0.5, grad_output ``dy``: with
    ``ve = x + 0.5``, ``c = x - 0.1f``, ``sdy = dy + 0`` and ``sdc = dy x c + 0`` (sums
    from +0), the results are ``(1.5 / sqrt(ve)) x (dy - sdy - c x sdc / ve)``,
    ``sdc / sqrt(ve)``, ``sdy``; dy = -0 gives a grad_offset of +0."""
    x = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.5, np.inf, np.nan, 3.0, 1.5, 7.0, 1e-30],
                 np.float32)
    for dy in ["r", "d"]:
        xv = f64(x)
        dyv = xv if dy == "r" else np.full(len(x), -0.0)
        with np.errstate(all="ignore"):
            ve = xv + 0.5
            inv = 1.0 / np.sqrt(ve)
            c = xv - f64(np.float32(0.1))
            sdy, sdc = dyv + 0.0, dyv * c + 0.0
            wants = [(1.5 * inv) * (dyv - sdy - c * (sdc / ve)), sdc * inv, sdy]
        for k, want in enumerate(wants):
            text = f"""HloModule m
body {{
  x = f32[] parameter(0)
  r = f32[1,1] reshape(x)
  s = f32[1] constant({{1.5}})
  m = f32[1] constant({{0.1}})
  v = f32[1] reshape(x)
  d = f32[1,1] constant({{{{-0.0}}}})
  b = (f32[1,1], f32[1], f32[1]) batch-norm-grad(r, s, m, v, {dy}), epsilon=0.5, feature_index=1
  g = f32[{'1,1' if k == 0 else '1'}] get-tuple-element(b), index={k}
  ROOT y = f32[] reshape(g)
}}
ENTRY e {{
  p = f32[12] parameter(0)
  ROOT q = f32[12] map(p), dimensions={{0}}, to_apply=body
}}
"""
            got = check(text, x, xla=False)
            assert bits_equal(got, want.astype(np.float32)), (dy, k)
