"""Shape inference against XLA as the oracle: Hypothesis builds HLO text from
hloref's inferred shapes (broadcast, transpose, slice, pad, dot, reduce, concatenate) and
XLA must accept it; the inferred shapes of more opcodes are accepted by XLA too.
"""

from __future__ import annotations

import pytest

jax = pytest.importorskip("jax")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import hloref  # noqa: E402
from hloref.attrs import PaddingDim, SliceDim  # noqa: E402
from hloref.shape_inference import (infer_broadcast, infer_concatenate, infer_dot,  # noqa: E402
                                    infer_pad, infer_reduce, infer_shape,
                                    infer_slice, infer_transpose, shape_str)
from hloref.shapes import ArrayShape, array_shape  # noqa: E402

from verifier_common import REDUCER, verify_text, xla_accepts  # noqa: E402


def _text(s) -> str:
    return shape_str(s)


def _check_agrees(body_lines: list[str], params: list[ArrayShape], root_shape, extra: str = ""):
    ps = "\n  ".join(f"p{i} = {_text(s)} parameter({i})" for i, s in enumerate(params))
    text = f"HloModule h\n\n{extra}\nENTRY main {{\n  {ps}\n  " + "\n  ".join(body_lines) + "\n}\n"
    ok, why = xla_accepts(text)
    assert ok, f"XLA rejects hloref's inferred shape {_text(root_shape)}:\n{text}\n{why}"
    assert verify_text(text) == []


dims_st = st.lists(st.integers(0, 4), min_size=0, max_size=4)


HYP = settings(max_examples=30, deadline=None, derandomize=True,
               suppress_health_check=list(HealthCheck))


@HYP
@given(dims_st, st.data())
def test_hyp_broadcast(dims, data):
    out_rank = data.draw(st.integers(len(dims), len(dims) + 2))
    mapping = sorted(data.draw(st.lists(st.integers(0, out_rank - 1), min_size=len(dims),
                                        max_size=len(dims), unique=True))) if dims else []
    out = [data.draw(st.integers(0, 3)) for _ in range(out_rank)]
    for i, d in enumerate(mapping):
        out[d] = dims[i]
    s = array_shape("f32", dims)
    r = infer_broadcast(s, dimensions=tuple(mapping), result_dims=tuple(out))
    dtext = ",".join(map(str, mapping))
    _check_agrees([f"ROOT r = {_text(r)} broadcast(p0), dimensions={{{dtext}}}"], [s], r)


@HYP
@given(dims_st, st.data())
def test_hyp_transpose(dims, data):
    perm = data.draw(st.permutations(list(range(len(dims)))))
    s = array_shape("s32", dims)
    r = infer_transpose(s, dimensions=tuple(perm))
    _check_agrees([f"ROOT r = {_text(r)} transpose(p0), dimensions={{{','.join(map(str, perm))}}}"],
                  [s], r)


@HYP
@given(st.lists(st.integers(0, 6), min_size=1, max_size=3), st.data())
def test_hyp_slice(dims, data):
    sl = []
    for d in dims:
        start = data.draw(st.integers(0, d))
        limit = data.draw(st.integers(start, d))
        sl.append(SliceDim(start, limit, data.draw(st.integers(1, 3))))
    s = array_shape("f32", dims)
    r = infer_slice(s, slice=tuple(sl))
    txt = ", ".join(f"[{x.start}:{x.limit}:{x.stride}]" for x in sl)
    _check_agrees([f"ROOT r = {_text(r)} slice(p0), slice={{{txt}}}"], [s], r)


@HYP
@given(st.lists(st.integers(0, 5), min_size=1, max_size=3), st.data())
def test_hyp_pad(dims, data):
    cfg = []
    for d in dims:
        interior = data.draw(st.integers(0, 2))
        full = d + max(d - 1, 0) * interior
        lo = data.draw(st.integers(-full, 3))
        hi = data.draw(st.integers(-(full + lo) if full + lo > 0 else 0, 3))
        cfg.append(PaddingDim(lo, hi, interior))
    s = array_shape("f32", dims)
    r = infer_pad(s, array_shape("f32", ()), padding=tuple(cfg))
    txt = "x".join(f"{p.low}_{p.high}_{p.interior}" for p in cfg)
    _check_agrees(["z = f32[] constant(0)", f"ROOT r = {_text(r)} pad(p0, z), padding={txt}"],
                  [s], r)


@HYP
@given(st.data())
def test_hyp_dot(data):
    nb, nc = data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))
    lf, rf = data.draw(st.integers(0, 2)), data.draw(st.integers(0, 2))
    size = st.integers(1, 3)
    batch = [data.draw(size) for _ in range(nb)]
    contr = [data.draw(size) for _ in range(nc)]
    lroles = data.draw(st.permutations(["b"] * nb + ["c"] * nc + ["f"] * lf))
    rroles = data.draw(st.permutations(["b"] * nb + ["c"] * nc + ["f"] * rf))

    def build(roles):
        dims, bd, cd, bi, ci = [], [], [], 0, 0
        for pos, r in enumerate(roles):
            if r == "b":
                dims.append(batch[bi]); bd.append(pos); bi += 1
            elif r == "c":
                dims.append(contr[ci]); cd.append(pos); ci += 1
            else:
                dims.append(data.draw(size))
        return dims, bd, cd

    ld, lb, lc = build(lroles)
    rd, rb, rc = build(rroles)
    a, b = array_shape("f32", ld), array_shape("f32", rd)
    r = infer_dot(a, b, lhs_batch_dims=tuple(lb), rhs_batch_dims=tuple(rb),
                  lhs_contracting_dims=tuple(lc), rhs_contracting_dims=tuple(rc))
    j = lambda xs: ",".join(map(str, xs))
    _check_agrees([f"ROOT r = {_text(r)} dot(p0, p1), lhs_batch_dims={{{j(lb)}}}, "
                   f"rhs_batch_dims={{{j(rb)}}}, lhs_contracting_dims={{{j(lc)}}}, "
                   f"rhs_contracting_dims={{{j(rc)}}}"], [a, b], r)


@HYP
@given(st.lists(st.integers(0, 4), min_size=1, max_size=4), st.data())
def test_hyp_reduce(dims, data):
    red = sorted(data.draw(st.lists(st.integers(0, len(dims) - 1), unique=True)))
    s = array_shape("f32", dims)
    z = array_shape("f32", ())
    r = infer_reduce(s, z, dimensions=tuple(red), to_apply=((z, z), z))
    _check_agrees(["z = f32[] constant(0)",
                   f"ROOT r = {_text(r)} reduce(p0, z), dimensions={{{','.join(map(str, red))}}}, "
                   "to_apply=add_f32"], [s], r, extra=REDUCER)


@HYP
@given(st.lists(st.integers(0, 4), min_size=1, max_size=3), st.data())
def test_hyp_concatenate(dims, data):
    d = data.draw(st.integers(0, len(dims) - 1))
    n = data.draw(st.integers(1, 3))
    shapes = []
    for _ in range(n):
        dd = list(dims)
        dd[d] = data.draw(st.integers(0, 4))
        shapes.append(array_shape("f32", dd))
    r = infer_concatenate(*shapes, dimensions=(d,))
    ops = ", ".join(f"p{i}" for i in range(n))
    _check_agrees([f"ROOT r = {_text(r)} concatenate({ops}), dimensions={{{d}}}"], shapes, r)


MORE = {
"conv_bgc": ("lhs = f32[4,5,5,2] parameter(0)\n  rhs = f32[3,3,2,6] parameter(1)", "convolution(lhs, rhs), window={size=3x3 stride=2x1 pad=1_1x0_2 lhs_dilate=1x2 rhs_dilate=2x1}, dim_labels=b01f_01io->b01f, batch_group_count=2"),
"conv_fgc": ("lhs = f32[4,5,5,6] parameter(0)\n  rhs = f32[3,3,2,6] parameter(1)", "convolution(lhs, rhs), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->bf01, feature_group_count=3"),
"gather_batching": ("p = f32[3,4,5] parameter(0)\n  i = s32[3,2,1] parameter(1)", "gather(p, i), offset_dims={2}, collapsed_slice_dims={1}, operand_batching_dims={0}, start_indices_batching_dims={0}, start_index_map={1}, index_vector_dim=2, slice_sizes={1,1,5}"),
"reduce_window": ("p = f32[7,9] parameter(0)\n  z = f32[] constant(0)", "reduce-window(p, z), window={size=2x3 stride=2x2 pad=1_0x2_2 lhs_dilate=2x1 rhs_dilate=1x2}, to_apply=add_f32"),
"dynamic_slice": ("p = f32[7,9] parameter(0)\n  i = s32[] parameter(1)", "dynamic-slice(p, i, i), dynamic_slice_sizes={3,0}"),
"tri": ("a = f32[2,4,4] parameter(0)\n  b = f32[2,3,4] parameter(1)", "triangular-solve(a, b), left_side=false, lower=true, transpose_a=NO_TRANSPOSE"),
"chol": ("a = f32[2,4,4] parameter(0)", "cholesky(a), lower=true"),
"bn": ("a = f32[2,4,3] parameter(0)\n  s = f32[4] parameter(1)", "batch-norm-training(a, s, s), epsilon=0.001, feature_index=1"),
"bng": ("a = f32[2,4,3] parameter(0)\n  s = f32[4] parameter(1)", "batch-norm-grad(a, s, s, s, a), epsilon=0.001, feature_index=1"),
"irfft": ("a = c64[2,3,5] parameter(0)", "fft(a), fft_type=IRFFT, fft_length={3,8}"),
"rfft": ("a = f32[2,3,8] parameter(0)", "fft(a), fft_type=RFFT, fft_length={3,8}"),
"topk": ("a = f32[2,9] parameter(0)", "topk(a), k=4, largest=true"),
"map": ("a = f32[2,9] parameter(0)", "map(a, a), dimensions={0,1}, to_apply=add_f32"),
"rng": ("a = f32[] parameter(0)", "rng(a, a), distribution=rng_uniform", "f32[3,4]"),
"allreduce": ("a = f32[2,9] parameter(0)\n  b = s32[3] parameter(1)", "all-reduce(a, a), replica_groups={}, to_apply=add_f32"),
"sort2": ("a = f32[2,9] parameter(0)\n  b = s32[2,9] parameter(1)", "sort(a, b), dimensions={1}, to_apply=cmp"),
"bcc": ("a = f32[2,3] parameter(0)", "bitcast-convert(a), ", "u16[2,3,2]"),
"bcc2": ("a = u8[2,4] parameter(0)", "bitcast-convert(a), ", "f32[2]"),
"scatter2": ("o = f32[5,3] parameter(0)\n  i = s32[2,1] parameter(1)\n  u = f32[2,3] parameter(2)", "scatter(o, o, i, u, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add2"),
"sas": ("o = f32[6,6] parameter(0)\n  s = f32[3,2] parameter(1)\n  z = f32[] constant(0)", "select-and-scatter(o, s, z), window={size=2x3 stride=2x3}, select=ge, scatter=add_f32"),
}


MORE_CALLEES = """add_f32 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ge {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = pred[] compare(a, b), direction=GE
}
cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT s = pred[] compare(a, b), direction=LT
}
add2 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = f32[] parameter(2)
  d = f32[] parameter(3)
  x = f32[] add(a, c)
  y = f32[] add(b, d)
  ROOT t = (f32[], f32[]) tuple(x, y)
}
"""


@pytest.mark.parametrize("name", sorted(MORE))
def test_more_opcodes_inferred_shape_accepted_by_xla(name):
    """Infer the result of each op with hloref, write it as the declared shape,
    and check XLA compiles the module (and hloref verifies it clean)."""
    from hloref.verifier import _Verifier
    case = MORE[name]
    params, op = case[0], case[1].rstrip(", ")
    placeholder = case[2] if len(case) > 2 else "f32[]"
    text = f"HloModule m\n{MORE_CALLEES}\nENTRY main {{\n  {params}\n  ROOT r = {placeholder} {op}\n}}\n"
    module = hloref.parse(text)
    root = module.entry.root
    called = _Verifier(module, True).resolve_called(module.entry, root)
    inferred = infer_shape(root.opcode, [o.shape for o in root.operands], root.attrs, called,
                           declared=root.shape)
    text = text.replace(f"ROOT r = {placeholder}", f"ROOT r = {shape_str(inferred)}")
    ok, why = xla_accepts(text)
    assert ok, f"XLA rejects hloref's inferred {shape_str(inferred)}:\n{text}\n{why}"
    assert verify_text(text) == []
