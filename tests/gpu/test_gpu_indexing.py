"""gather, scatter, dynamic-slice and dynamic-update-slice on the GPU backend (fallback
disabled) against the cpu backend (bit for bit) and XLA:CPU, in the element types the
cpu backend supports, with indices of several integer types, out of range included."""

from __future__ import annotations

import numpy as np
import pytest

import hloref
from hloref.errors import HloEvalError
from hloref.fuzz.compare import accumulation_atol
from hloref.types import element_type

from gpu_check import RNG, check, module, values

#: element types moved as storage bits (one row per storage class); XLA:CPU runs all
#: but the sub-byte integer (s4), checked against the cpu backend only
MOVE_TYPES = ["f32", "bf16", "f8e4m3fn", "f64", "s8", "u64", "pred", "c64", "s4"]
#: index types, with values outside the operand (negative, too large, u64 above 2**62)
INDEX_CASES = [("s32", [-2, 3]), ("u8", [4, 250]), ("s64", [1, -7]),
               ("u64", [2, 2 ** 63 + 5]), ("s8", [127, 0])]


def _xla(t):
    return "required" if t != "s4" else False


def _index(t, v):
    return np.asarray(v, dtype=element_type(t).dtype)


@pytest.mark.parametrize("t", MOVE_TYPES)
def test_dynamic_slice_and_update(t):
    x = values(t, (5, 6))
    upd = values(t, (2, 3))
    for it, (i0, i1) in INDEX_CASES:
        a, b = _index(it, i0), _index(it, i1)
        ds = module([f"{t}[5,6]", f"{it}[]", f"{it}[]"],
                    "dynamic-slice(p0, p1, p2), dynamic_slice_sizes={3,4}", f"{t}[3,4]")
        check(ds, x, a, b, xla=_xla(t))
        dus = module([f"{t}[5,6]", f"{t}[2,3]", f"{it}[]", f"{it}[]"],
                     "dynamic-update-slice(p0, p1, p2, p3)", f"{t}[5,6]")
        check(dus, x, upd, a, b, xla=_xla(t))


def test_dynamic_slice_rank0_and_whole():
    x = values("f32", ())
    check(module(["f32[]"], "dynamic-slice(p0), dynamic_slice_sizes={}", "f32[]"), x,
          xla="required")
    y = values("s32", (4,))
    check(module(["s32[4]", "s32[]"], "dynamic-slice(p0, p1), dynamic_slice_sizes={4}", "s32[4]"),
          y, np.int32(3), xla="required")
    check(module(["s32[4]", "s32[0]", "s32[]"], "dynamic-update-slice(p0, p1, p2)", "s32[4]"),
          y, np.zeros(0, np.int32), np.int32(2), xla="required")


def test_dynamic_slice_by_hand():
    # values derived from the semantics: starts clamped to [0, dim - size]
    x = np.arange(30, dtype=np.int32).reshape(5, 6)
    text = module(["s32[5,6]", "s32[]", "s32[]"],
                  "dynamic-slice(p0, p1, p2), dynamic_slice_sizes={2,2}", "s32[2,2]")
    out = hloref.evaluate(text, x, np.int32(9), np.int32(-4), backend="gpu", fallback=False)
    assert out.tolist() == [[18, 19], [24, 25]]


# ---------------------------------------------------------------- gather

GATHERS = [
    # embedding lookup: rows of a [6,4] table
    ("[6,4]", "s32[5,1]", "[5,4]", "offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, "
     "index_vector_dim=1, slice_sizes={1,4}", [[0], [5], [7], [-1], [2]]),
    # 2-D windows at 2-D starts, index vector in the middle of the indices
    ("[6,4]", "s32[2,2,3]", "[2,3,3,2]", "offset_dims={1,3}, collapsed_slice_dims={}, "
     "start_index_map={1,0}, index_vector_dim=1, slice_sizes={3,2}",
     [[[0, 1, 3], [5, 2, -2]], [[2, 2, 9], [1, 0, 4]]]),
    # implicit trailing index vector dimension (index_vector_dim = rank)
    ("[6,4]", "u8[3]", "[3,2,4]", "offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={0}, "
     "index_vector_dim=1, slice_sizes={2,4}", [1, 255, 4]),
    # batching dims: each batch row gathers from its own operand row
    ("[3,5,2]", "s64[3,4,1]", "[3,4,2]", "offset_dims={2}, collapsed_slice_dims={1}, "
     "start_index_map={1}, operand_batching_dims={0}, start_indices_batching_dims={0}, "
     "index_vector_dim=2, slice_sizes={1,1,2}", [[[0], [4], [2], [9]], [[1], [1], [3], [-3]],
                                                 [[4], [0], [2], [2]]]),
]


@pytest.mark.parametrize("case", range(len(GATHERS)))
@pytest.mark.parametrize("t", ["f32", "bf16", "s8", "pred", "c64", "u64"])
def test_gather(t, case):
    odims, itype, rdims, attrs, idx = GATHERS[case]
    dims = tuple(int(v) for v in odims.strip("[]").split(","))
    x = values(t, dims)
    ind = np.asarray(idx).astype(element_type(itype[:itype.index("[")]).dtype)
    text = module([f"{t}{odims}", itype], f"gather(p0, p1), {attrs}", f"{t}{rdims}")
    check(text, x, ind, xla="required")


def test_gather_by_hand():
    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    text = module(["f32[4,3]", "s32[3]"], "gather(p0, p1), offset_dims={1}, collapsed_slice_dims={0}, "
                  "start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}", "f32[3,3]")
    out = hloref.evaluate(text, table, np.array([3, -1, 10], np.int32), backend="gpu",
                          fallback=False)
    assert out.tolist() == [[9, 10, 11], [0, 1, 2], [9, 10, 11]]


def test_gather_float_indices_rejected():
    text = module(["f32[4,3]", "f32[3]"], "gather(p0, p1), offset_dims={1}, collapsed_slice_dims={0}, "
                  "start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}", "f32[3,3]")
    # the verifier rejects it first; unverified, the gpu op rejects it as the cpu's does
    with pytest.raises(HloEvalError, match="indices must be integers"):
        hloref.evaluate(text, np.zeros((4, 3), np.float32), np.zeros(3, np.float32),
                        backend="gpu", fallback=False, verify=False)


# ---------------------------------------------------------------- scatter

COMBINER = """
comb {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT r = {t}[] {op}(a, b)
}}
"""
OVERWRITE = """
comb {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT r = {t}[] copy(b)
}}
"""

#: (operand dims, indices, updates dims, attributes, index values)
SCATTERS = [
    # row updates with duplicate rows and an out-of-bounds row (skipped whole)
    ("[6,4]", "s32[5,1]", "[5,4]", "update_window_dims={1}, inserted_window_dims={0}, "
     "scatter_dims_to_operand_dims={0}, index_vector_dim=1", [[1], [4], [1], [6], [1]]),
    # 2x2 windows at 2-D starts; windows overlap; one crosses the edge (skipped)
    ("[5,5]", "u8[4,2]", "[4,2,2]", "update_window_dims={1,2}, inserted_window_dims={}, "
     "scatter_dims_to_operand_dims={0,1}, index_vector_dim=1", [[0, 0], [1, 1], [0, 1], [4, 2]]),
    # scalar updates into a 1-D operand, negative index skipped
    ("[7]", "s64[6]", "[6]", "update_window_dims={}, inserted_window_dims={0}, "
     "scatter_dims_to_operand_dims={0}, index_vector_dim=1", [3, 3, -1, 6, 0, 3]),
    # batching dims: each batch row scatters into its own operand row
    ("[2,5]", "s32[2,3,1]", "[2,3]", "update_window_dims={}, inserted_window_dims={1}, "
     "input_batching_dims={0}, scatter_indices_batching_dims={0}, "
     "scatter_dims_to_operand_dims={1}, index_vector_dim=2", [[[0], [4], [0]], [[2], [2], [7]]]),
]

SCATTER_TYPES = {
    "add": ["f32", "bf16", "f64", "s32", "u8", "s8", "pred"],
    "multiply": ["s32", "f16"],
    "maximum": ["f32", "f8e4m3fn", "s64"],
    "minimum": ["bf16", "u16"],
    "or": ["pred", "u32"],
    "xor": ["s16"],
    "overwrite": ["f32", "c64", "s4", "pred"],
}


def _scatter_text(t, op, case):
    odims, itype, udims, attrs, _ = SCATTERS[case]
    extra = (OVERWRITE if op == "overwrite" else COMBINER).format(t=t, op=op)
    return module([f"{t}{odims}", itype, f"{t}{udims}"], f"scatter(p0, p1, p2), {attrs}, to_apply=comb",
                  f"{t}{odims}", extra=extra)


@pytest.mark.parametrize("op", list(SCATTER_TYPES))
def test_scatter(op):
    for t in SCATTER_TYPES[op]:
        for case, (odims, itype, udims, _, idx) in enumerate(SCATTERS):
            dims = tuple(int(v) for v in odims.strip("[]").split(","))
            ud = tuple(int(v) for v in udims.strip("[]").split(","))
            kind = "small" if op == "multiply" and t[0] in "su" else "normal"
            x, u = values(t, dims, kind=kind), values(t, ud, kind=kind)
            if op == "multiply" and t[0] == "f":
                x = values(t, dims, kind="unit")
                u = values(t, ud, kind="unit")
            ind = np.asarray(idx).astype(element_type(itype[:itype.index("[")]).dtype)
            check(_scatter_text(t, op, case), x, ind, u, opcode="scatter",
                  xla="required" if t not in ("s4",) else False)


def test_scatter_by_hand():
    # duplicates combine in order; the out-of-bounds window is skipped whole
    text = _scatter_text("s32", "add", 0)
    x = np.zeros((6, 4), np.int32)
    u = np.arange(20, dtype=np.int32).reshape(5, 4)
    out = hloref.evaluate(text, x, np.array([[1], [4], [1], [6], [1]], np.int32), u,
                          backend="gpu", fallback=False)
    want = np.zeros((6, 4), np.int32)
    want[1] = u[0] + u[2] + u[4]
    want[4] = u[1]
    assert np.array_equal(out, want)
    # overwrite: the last update in order wins
    text = _scatter_text("f32", "overwrite", 2)
    out = hloref.evaluate(text, np.zeros(7, np.float32), np.array([3, 3, -1, 6, 0, 3], np.int64),
                          np.arange(1, 7, dtype=np.float32), backend="gpu", fallback=False)
    assert out.tolist() == [5, 0, 0, 6, 0, 0, 4]


VARIADIC = """HloModule v
comb {
  a0 = f32[] parameter(0)
  a1 = s32[] parameter(1)
  b0 = f32[] parameter(2)
  b1 = s32[] parameter(3)
  ROOT t = (f32[], s32[]) tuple(b0, b1)
}
ENTRY e {
  x = f32[6] parameter(0)
  y = s32[6] parameter(1)
  i = s32[4,1] parameter(2)
  u = f32[4] parameter(3)
  v = s32[4] parameter(4)
  ROOT s = (f32[6], s32[6]) scatter(x, y, i, u, v), update_window_dims={}, inserted_window_dims={0},
      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=comb
}
"""


def test_scatter_variadic_overwrite():
    idx = np.array([[2], [5], [2], [9]], np.int32)
    check(VARIADIC, values("f32", (6,)), values("s32", (6,)), idx, values("f32", (4,)),
          values("s32", (4,)), xla="required")


def test_scatter_general_combiner():
    # subtract is not commutative: the combiner runs compiled (gpu/computation.py), each
    # target's updates in order: current - u0 - u2 - u4 for row 1
    text = _scatter_text("f32", "subtract", 0)
    x, u = values("f32", (6, 4)), values("f32", (5, 4))
    idx = np.array([[1], [4], [1], [6], [1]], np.int32)
    out = check(text, x, idx, u, opcode="scatter", xla="required")
    assert np.array_equal(out[1], ((x[1] - u[0]) - u[2]) - u[4], equal_nan=True)


def test_scatter_combiner_with_shift_runs_on_device():
    # shift-left has a width-specialised element function: the combiner is compiled
    shift = """
comb {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  s = s32[] add(a, b)
  ROOT r = s32[] shift-left(s, b)
}
"""
    text = module(["s32[6,4]", "s32[5,1]", "s32[5,4]"],
                  "scatter(p0, p1, p2), " + SCATTERS[0][3] + ", to_apply=comb", "s32[6,4]",
                  extra=shift)
    idx = np.array([[1], [4], [1], [6], [1]], np.int32)
    x, u = values("s32", (6, 4), kind="small"), values("s32", (5, 4), kind="small")
    out = check(text, x, idx, u, xla="required")

    def comb(a, b):  # by hand, wrapping to s32 (shift counts >= 32 or negative give 0)
        s = (int(a) + int(b)) & 0xFFFFFFFF
        n = int(b) & 0xFFFFFFFF
        r = (s << n) & 0xFFFFFFFF if n < 32 else 0
        return r - (1 << 32) if r >= 1 << 31 else r
    row = x[1].astype(np.int64).tolist()
    for k in (0, 2, 4):
        row = [comb(a, b) for a, b in zip(row, u[k])]
    assert out[1].tolist() == row


VARIADIC_ARGMAX = """HloModule v
comb {
  a0 = f32[] parameter(0)
  a1 = s32[] parameter(1)
  b0 = f32[] parameter(2)
  b1 = s32[] parameter(3)
  gt = pred[] compare(b0, a0), direction=GT
  eq = pred[] compare(b0, a0), direction=EQ
  lt = pred[] compare(b1, a1), direction=LT
  tie = pred[] and(eq, lt)
  take = pred[] or(gt, tie)
  v = f32[] select(take, b0, a0)
  i = s32[] select(take, b1, a1)
  ROOT t = (f32[], s32[]) tuple(v, i)
}
ENTRY e {
  x = f32[6] parameter(0)
  y = s32[6] parameter(1)
  i = s32[7,1] parameter(2)
  u = f32[7] parameter(3)
  v = s32[7] parameter(4)
  ROOT s = (f32[6], s32[6]) scatter(x, y, i, u, v), update_window_dims={},
      inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1,
      to_apply=comb
}
"""


def test_scatter_variadic_argmax_combiner():
    # a variadic combiner that is not an overwrite (scatter-argmax): compiled, one thread
    # per element of both operands, updates in index order
    x = np.full(6, -np.inf, np.float32)
    y = np.full(6, -1, np.int32)
    idx = np.array([[2], [5], [2], [9], [0], [2], [5]], np.int32)
    u = np.array([1.0, 3.0, 4.0, 9.0, -2.0, 4.0, 3.0], np.float32)
    v = np.arange(7, dtype=np.int32) * 10
    vals, ids = check(VARIADIC_ARGMAX, x, y, idx, u, v, xla="required")
    # by hand: element 2 sees 1.0 (0), 4.0 (20), 4.0 (50, a tie with a larger index);
    # element 5 sees 3.0 (10) then 3.0 (60); index 9 is out of bounds
    assert vals.tolist() == [-2.0, -np.inf, 4.0, -np.inf, -np.inf, 3.0]
    assert ids.tolist() == [40, -1, 20, -1, -1, 10]


@pytest.mark.parametrize("t", ["c64", "c128"])
@pytest.mark.parametrize("op", ["add", "multiply"])
def test_scatter_complex_combiner(t, op):
    # complex add/multiply combiners run compiled, each combine rounded to the type as the
    # cpu does (multiply: the cpu's numpy loop may fuse a product: an ulp)
    dt = np.complex64 if t == "c64" else np.complex128
    x = (RNG.standard_normal((6, 4)) + 1j * RNG.standard_normal((6, 4))).astype(dt)
    u = (RNG.standard_normal((5, 4)) + 1j * RNG.standard_normal((5, 4))).astype(dt)
    idx = np.array([[1], [4], [1], [6], [1]], np.int32)
    text = _scatter_text(t, op, 0)
    atol = accumulation_atol(8, 8 * (np.abs(x) + 1) ** 4, element_type(t)) \
        if op == "multiply" else None
    out = check(text, x, idx, u, opcode="scatter", exact=op == "add", atol=atol,
                xla="required")
    w = x.astype(np.complex128)
    for k in (0, 2, 4):
        w[1] = w[1] + u[k] if op == "add" else w[1] * u[k]
    w[4] = w[4] + u[1] if op == "add" else w[4] * u[1]
    np.testing.assert_allclose(out, w, rtol=1e-5)
