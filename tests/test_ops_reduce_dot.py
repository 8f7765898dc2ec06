"""reduce, dot and convolution against XLA:CPU (accumulation tolerance: accumulation_atol)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import hloref

pytest.importorskip("jax")

from hlo_builders import (accumulation_atol, compare_values, dtype, et, module,  # noqa: E402
                          run_both, shape_text, values_for)

REDUCERS = ("add", "maximum", "minimum", "multiply", "and", "or")


def _reducer(name, t, op):
    return (f"{name} {{\n  a = {t}[] parameter(0)\n  b = {t}[] parameter(1)\n"
            f"  ROOT r = {t}[] {op}(a, b)\n}}\n")


def _vals(t, dims, seed, domain="small"):
    rng = np.random.default_rng(seed)
    if et(t).is_float:
        return values_for(t, dims, rng, domain=domain, specials=False)
    return values_for(t, dims, rng, specials=False)


@pytest.mark.parametrize("t", ["f32", "bf16", "f16", "s32", "pred"])
def test_reduce_reducers(t):
    """add/max/min/mul/and/or reducers (those the type takes) over several dim sets,
    including an empty reduced dimension, in one module."""
    dims, dims_e = (4, 6, 5), (4, 0, 3)
    ops = [o for o in REDUCERS if (o not in ("and", "or") or not et(t).is_float)
           and not (t == "pred" and o in ("multiply",))]
    comps = "".join(_reducer(f"r_{o}", t, o) for o in ops)
    s = lambda d: shape_text(t, d)  # noqa: E731
    inits = {"add": "0", "multiply": "1", "maximum": "-inf" if et(t).is_float else "0",
             "minimum": "inf" if et(t).is_float else "0", "and": "1", "or": "0"}
    if t == "pred":
        inits = {o: ("true" if o in ("and", "minimum") else "false") for o in ops}
    if t == "s32":
        inits["maximum"], inits["minimum"], inits["and"] = "-2147483648", "2147483647", "-1"
    body = [f"  x = {s(dims)} parameter(0)", f"  e = {s(dims_e)} parameter(1)"]
    outs = []
    for o in ops:
        body.append(f"  i_{o} = {t}[] constant({inits[o]})")
        for k, (rd, od) in enumerate([((1,), (4, 5)), ((0, 2), (6,)), ((0, 1, 2), ())]):
            body.append(f"  {o}{k} = {s(od)} reduce(x, i_{o}), dimensions={{{','.join(map(str, rd))}}}, "
                        f"to_apply=r_{o}")
            outs.append((f"{o}{k}", s(od), o, int(np.prod([dims[d] for d in rd]))))
        body.append(f"  {o}e = {s((4, 3))} reduce(e, i_{o}), dimensions={{1}}, to_apply=r_{o}")
        outs.append((f"{o}e", s((4, 3)), o, 0))
    body.append(f"  ROOT out = ({', '.join(o[1] for o in outs)}) tuple({', '.join(o[0] for o in outs)})")
    x = _vals(t, dims, 1, "small")
    if t != "pred" and et(t).is_float:
        x = (x.astype(np.float32) / 4).astype(dtype(t))  # keep products in range
    ev = _vals(t, dims_e, 2)
    ours, theirs = run_both(module("\n".join(body), computations=comps), x, ev)
    for (name, _, o, n), a, b in zip(outs, theirs, ours):
        atol = None
        if et(t).is_float and o == "add":
            atol = accumulation_atol(n, np.abs(x.astype(np.float64)).max() * n, et(t))
        if et(t).is_float and o == "multiply":
            atol = accumulation_atol(n, np.abs(b.astype(np.float64)), et(t))
        v = compare_values(a, b, opcode="reduce", atol=atol)
        assert v.ok, f"{name}: {v}"


def test_reduce_variadic_argmax_and_nontrivial_reducer():
    comps = """argmax {
  v0 = f32[] parameter(0)
  i0 = s32[] parameter(1)
  v1 = f32[] parameter(2)
  i1 = s32[] parameter(3)
  gt = pred[] compare(v0, v1), direction=GT
  eq = pred[] compare(v0, v1), direction=EQ
  lt = pred[] compare(i0, i1), direction=LT
  tie = pred[] and(eq, lt)
  keep = pred[] or(gt, tie)
  v = f32[] select(keep, v0, v1)
  i = s32[] select(keep, i0, i1)
  ROOT r = (f32[], s32[]) tuple(v, i)
}
maxabs {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  aa = f32[] abs(a)
  ba = f32[] abs(b)
  n = f32[] negate(ba)
  nn = f32[] negate(n)
  ROOT r = f32[] maximum(aa, nn)
}
"""
    body = """  x = f32[5,7] parameter(0)
  idx = s32[5,7] iota(), iota_dimension=1
  ninf = f32[] constant(-inf)
  zero = s32[] constant(0)
  am = (f32[5], s32[5]) reduce(x, idx, ninf, zero), dimensions={1}, to_apply=argmax
  z = f32[] constant(0)
  sq = f32[7] reduce(x, z), dimensions={0}, to_apply=maxabs
  ROOT out = ((f32[5], s32[5]), f32[7]) tuple(am, sq)"""
    x = _vals("f32", (5, 7), 3)
    x[2, 3] = x[2, 5] = 100.0  # a tie: lowest index wins
    ours, theirs = run_both(module(body, computations=comps), x)
    np.testing.assert_array_equal(ours[0][1], np.argmax(x, axis=1))
    np.testing.assert_array_equal(ours[0][0], np.max(x, axis=1))
    # a multi-instruction reducer (associative and commutative: the reduction order is
    # unspecified, and hloref's tree order differs from XLA's sequential one)
    np.testing.assert_array_equal(ours[1], np.abs(x).max(axis=0))
    assert compare_values(theirs, ours, opcode="reduce").ok


# ------------------------------------------------------------------ dot


def _dot_text(lt, rt, ot, ldims, rdims, lb, rb, lc, rc):
    lfree = [d for d in range(len(ldims)) if d not in lb + lc]
    rfree = [d for d in range(len(rdims)) if d not in rb + rc]
    odims = [ldims[d] for d in lb] + [ldims[d] for d in lfree] + [rdims[d] for d in rfree]
    j = lambda v: ",".join(map(str, v))  # noqa: E731
    attrs = (f"lhs_batch_dims={{{j(lb)}}}, rhs_batch_dims={{{j(rb)}}}, "
             f"lhs_contracting_dims={{{j(lc)}}}, rhs_contracting_dims={{{j(rc)}}}")
    attrs = "".join(", " + a for a in attrs.split(", ") if not a.endswith("{}"))
    return module(f"  a = {shape_text(lt, ldims)} parameter(0)\n"
                  f"  b = {shape_text(rt, rdims)} parameter(1)\n"
                  f"  ROOT d = {shape_text(ot, odims)} dot(a, b){attrs}"), odims


DOT_TYPES = [("f32", "f32", "f32"), ("bf16", "bf16", "f32"), ("f8e4m3fn", "f8e5m2", "f32"),
             ("s8", "s8", "s32"), ("c64", "c64", "c64"), ("f16", "f16", "f16"),
             ("bf16", "bf16", "bf16"), ("s32", "s32", "s32")]


@settings(max_examples=12, deadline=None, derandomize=True)
@given(data=st.data(), types=st.sampled_from(DOT_TYPES))
def test_dot_random_dimension_numbers(data, types):
    """Batch and contracting dims in random positions of both operands."""
    lt, rt, ot = types
    nb, nc = data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))
    nlf, nrf = data.draw(st.integers(0, 2)), data.draw(st.integers(0, 1))
    bsz = [data.draw(st.integers(1, 3)) for _ in range(nb)]
    csz = [data.draw(st.integers(1, 4)) for _ in range(nc)]
    lperm = data.draw(st.permutations(range(nb + nc + nlf)))
    rperm = data.draw(st.permutations(range(nb + nc + nrf)))
    lroles = [("b", i) for i in range(nb)] + [("c", i) for i in range(nc)] + \
        [("f", i) for i in range(nlf)]
    rroles = [("b", i) for i in range(nb)] + [("c", i) for i in range(nc)] + \
        [("f", i) for i in range(nrf)]
    lroles = [lroles[p] for p in lperm]
    rroles = [rroles[p] for p in rperm]
    size = lambda r: bsz[r[1]] if r[0] == "b" else csz[r[1]] if r[0] == "c" else 2 + r[1]  # noqa: E731
    ldims, rdims = [size(r) for r in lroles], [size(r) for r in rroles]
    lb = [lroles.index(("b", i)) for i in range(nb)]
    rb = [rroles.index(("b", i)) for i in range(nb)]
    lc = [lroles.index(("c", i)) for i in range(nc)]
    rc = [rroles.index(("c", i)) for i in range(nc)]
    text, odims = _dot_text(lt, rt, ot, ldims, rdims, lb, rb, lc, rc)
    seed = data.draw(st.integers(0, 1000))
    a, b = _vals(lt, ldims, seed), _vals(rt, rdims, seed + 1)
    ours, theirs = run_both(text, a, b)
    k = int(np.prod(csz)) if csz else 1
    mag = float(np.abs(a.astype(np.complex128)).max(initial=0) *
                np.abs(b.astype(np.complex128)).max(initial=0)) * k
    atol = accumulation_atol(k, mag, et(ot)) if not et(ot).is_integer else None
    if et(ot).name in ("bf16", "f16"):
        atol = accumulation_atol(k, mag, et("f32")) + np.abs(ours.astype(np.float64)) * 2.0**-8
    v = compare_values(theirs, ours, opcode="dot", atol=atol)
    assert v.ok, f"{text}\n{v}"


def test_dot_s8_wraps_into_s32_and_s32_wraps():
    text, _ = _dot_text("s32", "s32", "s32", (2, 3), (3, 2), [], [], [1], [0])
    a = np.full((2, 3), 2**30, np.int32)
    b = np.full((3, 2), 4, np.int32)
    ours, theirs = run_both(text, a, b)
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(ours, np.zeros((2, 2), np.int32))  # 3 * 2^32 wraps to 0


# ------------------------------------------------------------------ convolution

CONVS = [
    # (dim_labels, lhs dims, rhs dims, window, feature_group_count, batch_group_count)
    ("b01f_01io->b01f", (2, 6, 5, 3), (3, 2, 3, 4), "size=3x2 stride=2x1 pad=1_1x0_1", 1, 1),
    ("bf01_oi01->bf01", (1, 4, 7, 6), (6, 2, 3, 3), "size=3x3 pad=2_0x1_1 rhs_dilate=2x1", 2, 1),
    ("f01b_i01o->01bf", (3, 5, 5, 2), (3, 2, 2, 2), "size=2x2 lhs_dilate=2x1 pad=-1_0x0_0", 1, 1),
    ("b0f_0io->b0f", (4, 9, 2), (3, 2, 6), "size=3 stride=3 rhs_reversal=1", 1, 2),
    ("b0f_0io->b0f", (2, 5, 4), (2, 4, 3), "size=2", 1, 1),
]


def _conv_out(labels, ldims, rdims, window, fgc, bgc):
    """Output dims by the convolution shape rule (derived by hand)."""
    inp, ker_out = labels.split("_")
    ker, out = ker_out.split("->")
    nsp = len(inp) - 2
    attrs = dict(kv.split("=") for kv in window.split())
    def vec(k, default):
        return [int(v) for v in attrs[k].split("x")] if k in attrs else [default] * nsp
    size, stride = vec("size", 1), vec("stride", 1)
    ld, rd = vec("lhs_dilate", 1), vec("rhs_dilate", 1)
    pads = [tuple(int(p) for p in q.split("_")) for q in attrs["pad"].split("x")] \
        if "pad" in attrs else [(0, 0)] * nsp
    spatial_in = [ldims[inp.index(str(i))] for i in range(nsp)]
    o = []
    for i in range(nsp):
        n = (spatial_in[i] - 1) * ld[i] + 1 + pads[i][0] + pads[i][1]
        w = (size[i] - 1) * rd[i] + 1
        o.append(max((n - w) // stride[i] + 1, 0))
    n_out = ldims[inp.index("b")] // bgc
    f_out = rdims[ker.index("o")]
    dims = [0] * len(out)
    dims[out.index("b")] = n_out
    dims[out.index("f")] = f_out
    for i in range(nsp):
        dims[out.index(str(i))] = o[i]
    return dims


@pytest.mark.parametrize("t,ot", [("f32", "f32"), ("bf16", "f32"), ("s8", "s32")])
@pytest.mark.parametrize("cfg", range(len(CONVS)))
def test_convolution_configs(cfg, t, ot):
    labels, ldims, rdims, window, fgc, bgc = CONVS[cfg]
    odims = _conv_out(labels, ldims, rdims, window, fgc, bgc)
    text = module(f"  a = {shape_text(t, ldims)} parameter(0)\n"
                  f"  b = {shape_text(t, rdims)} parameter(1)\n"
                  f"  ROOT c = {shape_text(ot, odims)} convolution(a, b), window={{{window}}}, "
                  f"dim_labels={labels}, feature_group_count={fgc}, batch_group_count={bgc}")
    a, b = _vals(t, ldims, cfg), _vals(t, rdims, cfg + 7)
    if et(t).is_integer:  # small values: no integer overflow (saturate vs wrap, see docs)
        a, b = (a % 8).astype(dtype(t)), (b % 8).astype(dtype(t))
    ours, theirs = run_both(text, a, b)
    k = int(np.prod(rdims)) // max(rdims[labels.split("_")[1].index("o")], 1)
    mag = float(np.abs(a.astype(np.float64)).max() * np.abs(b.astype(np.float64)).max()) * k
    atol = accumulation_atol(k, mag, et(ot)) if et(ot).is_float else None
    v = compare_values(theirs, ours, opcode="convolution", atol=atol)
    assert v.ok, f"{text}\n{v}"


def test_dot_results_do_not_alias_scratch_buffers():
    # f32/f64 dots widen into reused per-thread buffers: a result must stay intact
    # after the next dot, and equal the exact f64 product rounded once (by numpy)
    text = module("  a = f64[64,64] parameter(0)\n  b = f64[64,64] parameter(1)\n"
                  "  ROOT d = f64[64,64] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}")
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((64, 64)), rng.standard_normal((64, 64))
    first = hloref.evaluate(text, a, b)
    kept = first.copy()
    second = hloref.evaluate(text, b, a)
    np.testing.assert_array_equal(first, kept)
    np.testing.assert_allclose(first, a @ b, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(second, b @ a, rtol=1e-12, atol=1e-12)


# ------------------------------------------- float operands, integer result

_FLOAT_TO_INT = [
    # (operand type, result type, op text)
    ("bf16", "s32", "dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    ("f32", "s32", "dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    ("f32", "s8", "dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    ("f16", "u16", "dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
]


@pytest.mark.parametrize("t,ot,op", _FLOAT_TO_INT)
def test_float_operands_integer_result_is_the_f32_op_converted(t, ot, op):
    """XLA's ConvolutionTypeCanonicalizer: a dot/convolution with floating-point operands
    and an integer result is the op in f32, then a convert (truncation toward zero).
    By hand: [[1.5, 2.25, -0.75], [3, 0.5, 1]] . [[1, 2], [0.5, -1.5], [2, 1.25]] =
    [[1.125, -1.3125], [5.25, 6.5]] -> [[1, -1], [5, 6]] (the operands converted to the
    integer type first would give [[1, 0], [5, 7]]); an unsigned result clamps -1.3125
    to 0, as XLA's f32 -> u16 convert saturates."""
    text = module(f"  a = {t}[2,3] parameter(0)\n  b = {t}[3,2] parameter(1)\n"
                  f"  ROOT d = {ot}[2,2] {op}")
    a = np.array([[1.5, 2.25, -0.75], [3.0, 0.5, 1.0]]).astype(dtype(t))
    b = np.array([[1.0, 2.0], [0.5, -1.5], [2.0, 1.25]]).astype(dtype(t))
    ours, theirs = run_both(text, a, b)
    expected = [[1, 0], [5, 6]] if ot.startswith("u") else [[1, -1], [5, 6]]
    np.testing.assert_array_equal(ours, np.array(expected, dtype(ot)))
    np.testing.assert_array_equal(ours, theirs)


def test_float_convolution_to_integer_matches_xla():
    """The same rule for convolution, on seeded values with fractional sums (f32
    operands: XLA:CPU computes in f32 and truncates)."""
    text = module("  a = f32[2,7,3] parameter(0)\n  b = f32[3,3,4] parameter(1)\n"
                  "  ROOT c = s32[2,5,4] convolution(a, b), window={size=3}, "
                  "dim_labels=b0f_0io->b0f")
    rng = np.random.default_rng(5)
    a = (rng.integers(-40, 40, (2, 7, 3)) / 8).astype(np.float32)
    b = (rng.integers(-40, 40, (3, 3, 4)) / 8).astype(np.float32)
    ours, theirs = run_both(text, a, b)
    exact = np.zeros((2, 5, 4))
    for i in range(5):
        exact[:, i, :] = np.einsum("bkf,kfo->bo", a[:, i:i + 3, :].astype(np.float64), b)
    np.testing.assert_array_equal(ours, np.trunc(exact).astype(np.int32))  # by hand: exact in f32
    np.testing.assert_array_equal(ours, theirs)
