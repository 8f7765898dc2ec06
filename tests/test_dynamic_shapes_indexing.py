"""Bounded dynamic shapes through reshape, gather and scatter, by XLA's rules
(dynamic_dimension_inference.cc HandleReshape / HandleGather / HandleScatter): the
modules and expected values of dynamic_padder_test.cc (ExecutionTest) by hand, and the
same modules (and variations) against XLA:CPU.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import hloref
from hloref.errors import HloUnsupportedError

pytest.importorskip("jax")
from hloref.fuzz.oracles.xla import run_hlo  # noqa: E402

from dynamic_shapes_common import slice_module as _slice_module  # noqa: E402


UPDATE_S32 = """update_s32 {
  lhs = s32[] parameter(0)
  rhs = s32[] parameter(1)
  ROOT add = s32[] add(lhs, rhs)
}
"""


ASSIGN_S32 = """assign_s32 {
  lhs = s32[] parameter(0)
  ROOT rhs = s32[] parameter(1)
}
"""


def _entry(body):
    return f"HloModule m\n{UPDATE_S32}{ASSIGN_S32}ENTRY main {{\n{body}\n}}\n"


_OP4 = np.array([[[[1], [2], [3], [4], [5]], [[2], [4], [6], [7], [8]]]], np.int32)


_PADDED_M1 = np.array([[[0, -1], [1, -1]], [[2, -1], [3, -1]], [[-1, -1], [-1, -1]],
                       [[-1, -1], [-1, -1]]], np.int32)


_COMPLICATED = np.array([[[1, 2, 3, 4], [5, 6, 7, 8], [-1] * 4, [-1] * 4],
                         [[9, 10, 11, 12], [13, 14, 15, 16], [-1] * 4, [-1] * 4]], np.int32)


#: name: (body, argument, the C++ test's expected value)
_PADDER_RESHAPES = {
    # InputMinorDimensionReshape: [1,2,<=5(3),1] -> [<=10]: the 6 valid elements
    "input_minor": ("""  param = s32[1, 2, 5, 1] parameter(0)
  const = s32[] constant(3)
  param_padded = s32[1, 2, <=5, 1] set-dimension-size(param, const), dimensions={2}
  reshaped = s32[<=10] reshape(param_padded)
  init = s32[] constant(0)
  ROOT reduce = s32[] reduce(reshaped, init), dimensions={0}, to_apply=update_s32""",
                    _OP4, 18),
    # OutputMinorDimensionReshape: [<=12(8)] -> [2,<=3,2], inferred_dimension=1
    "output_minor": ("""  param = s32[12] parameter(0)
  const = s32[] constant(8)
  param_padded = s32[<=12] set-dimension-size(param, const), dimensions={0}
  reshaped = s32[2, <=3, 2] reshape(param_padded), inferred_dimension=1
  init = s32[] constant(0)
  ROOT reduce = s32[2, 2] reduce(reshaped, init), dimensions={1}, to_apply=update_s32""",
                     np.arange(12, dtype=np.int32), [[2, 4], [10, 12]]),
    "output_minor_unchanged_major": ("""  param = s32[2, 6] parameter(0)
  const = s32[] constant(4)
  param_padded = s32[2, <=6] set-dimension-size(param, const), dimensions={1}
  reshaped = s32[2, 2, <=3] reshape(param_padded), inferred_dimension=2
  init = s32[] constant(0)
  ROOT reduce = s32[2, 2] reduce(reshaped, init), dimensions={2}, to_apply=update_s32""",
                                     np.arange(12, dtype=np.int32).reshape(2, 6),
                                     [[1, 5], [13, 17]]),
    "output_minor_unchanged_minor": ("""  param = s32[6, 2] parameter(0)
  const = s32[] constant(4)
  param_padded = s32[<=6, 2] set-dimension-size(param, const), dimensions={0}
  reshaped = s32[2, <=3, 2] reshape(param_padded), inferred_dimension=1
  init = s32[] constant(0)
  ROOT reduce = s32[2, 2] reduce(reshaped, init), dimensions={1}, to_apply=update_s32""",
                                     np.arange(12, dtype=np.int32).reshape(6, 2),
                                     [[2, 4], [10, 12]]),
    "unchanged": ("""  param = s32[1, 2, 5, 1] parameter(0)
  const = s32[] constant(3)
  param_padded = s32[1, 2, <=5, 1] set-dimension-size(param, const), dimensions={2}
  reshaped = s32[2, <=5] reshape(param_padded)
  init = s32[] constant(0)
  ROOT reduce = s32[2] reduce(reshaped, init), dimensions={1}, to_apply=update_s32""",
                  _OP4, [6, 12]),
    # DegeneratedDimension: [<=1(0),2,5,1] -> [<=10] has no element
    "degenerate": ("""  param = s32[1, 2, 5, 1] parameter(0)
  size = s32[] constant(0)
  param_padded = s32[<=1, 2, 5, 1] set-dimension-size(param, size), dimensions={0}
  reshaped = s32[<=10] reshape(param_padded)
  init = s32[] constant(0)
  ROOT reduce = s32[] reduce(reshaped, init), dimensions={0}, to_apply=update_s32""",
                   _OP4, 0),
    # ReshapeSplitCombineSameTime: [<=4(2),2,<=2(1)] -> [2,<=2,<=4]
    "split_combine": ("""  param = s32[4, 2, 2] parameter(0)
  two = s32[] constant(2)
  one = s32[] constant(1)
  pp = s32[<=4, 2, 2] set-dimension-size(param, two), dimensions={0}
  pd = s32[<=4, 2, <=2] set-dimension-size(pp, one), dimensions={2}
  reshaped = s32[2, <=2, <=4] reshape(pd), inferred_dimension=1
  init = s32[] constant(0)
  ROOT reduce = s32[] reduce(reshaped, init), dimensions={0, 1, 2}, to_apply=update_s32""",
                      _PADDED_M1, 6),
    # ReshapeComplicated: [2,<=4(2),4] -> [<=16,2] (flatten-unflatten, inferred_dimension=0)
    "complicated": ("""  param = s32[2, 4, 4] parameter(0)
  two = s32[] constant(2)
  pd = s32[2, <=4, 4] set-dimension-size(param, two), dimensions={1}
  reshaped = s32[<=16, 2] reshape(pd), inferred_dimension=0
  init = s32[] constant(0)
  ROOT reduce = s32[] reduce(reshaped, init), dimensions={0, 1}, to_apply=update_s32""",
                    _COMPLICATED, 136),
}


@pytest.mark.parametrize("name", sorted(_PADDER_RESHAPES))
def test_reshape_of_dynamic_dims_as_dynamic_padder_test(name):
    body, arg, want = _PADDER_RESHAPES[name]
    text = _entry(body)
    got = hloref.evaluate(text, arg)
    np.testing.assert_array_equal(got, np.asarray(want, np.int32))
    if name in _XLA_CPU_AGREES:
        np.testing.assert_array_equal(np.asarray(run_hlo(text, arg)), np.asarray(want, np.int32))


#: The modules XLA:CPU, as the oracle runs it (HLO -> StableHLO -> XLA), answers as the
#: C++ tests expect: a dynamic dimension merged or kept whole. Where one is split its
#: runtime size is lost on that path (get-dimension-size answers the bound, reductions
#: see the padding: output_minor gives [[6, 9], [24, 27]]), two bounded result dims are
#: refused by StableHLO's verifier (split_combine), and ``inferred_dimension`` is dropped
#: (complicated: "both splitted and combined is not supported"); there the C++ tests'
#: expected values, computed by XLA's padder, are the oracle.
_XLA_CPU_AGREES = {"input_minor", "unchanged", "degenerate"}


#: (operand dims, dynamic dim, result type text, inferred_dimension or None, compared
#: with XLA:CPU: see _XLA_CPU_AGREES for the split cases; [2,<=3,4] -> [2,<=12] comes
#: back from XLA:CPU with its second row uninitialised, an XLA:CPU bug on that path)
_RESHAPE_LAYOUTS = [
    ((4, 3), 0, "s32[<=12]", None, True),            # merge, major dynamic
    ((3, 4), 1, "s32[<=12]", None, True),            # merge, minor dynamic
    ((2, 3, 4), 1, "s32[2,<=12]", None, False),      # merge of the two minor
    ((12,), 0, "s32[<=6,2]", None, False),           # split, the declared dynamic dim
    ((12,), 0, "s32[2,<=6]", None, False),
    ((12,), 0, "s32[<=3,2,2]", 0, False),
    ((4, 6), 1, "s32[4,<=3,2]", 1, False),
    ((6, 4), 0, "s32[<=6,2,2]", None, True),         # dynamic dim kept whole
    ((2, 6, 2), 1, "s32[<=12,2]", 0, False),         # flatten-unflatten
    ((6, 4), 0, "s32[2,<=12]", 1, False),            # flatten-unflatten
]


@pytest.mark.parametrize("dims,dyn,result,inferred,xla", _RESHAPE_LAYOUTS)
def test_reshape_layout_of_valid_elements(dims, dyn, result, inferred, xla):
    """The result's runtime sizes (get-dimension-size) and its valid part: the operand's
    valid elements in row-major order in the result's runtime sizes (XLA's padder
    rewrites), by hand, and as XLA:CPU where it keeps the size."""
    import re
    out_dims = [int(v) for v in re.findall(r"\d+", result.split("[")[1])]
    bound = dims[dyn]
    dyn_text = ",".join(f"<={d}" if i == dyn else str(d) for i, d in enumerate(dims))
    attr = "" if inferred is None else f", inferred_dimension={inferred}"
    gets = "\n".join(f"  g{k} = s32[] get-dimension-size(r), dimensions={{{k}}}"
                     for k in range(len(out_dims)))
    gnames = ", ".join(f"g{k}" for k in range(len(out_dims)))
    text = _entry(f"""  p = s32[{",".join(map(str, dims))}] parameter(0)
  n = s32[] parameter(1)
  s = s32[{dyn_text}] set-dimension-size(p, n), dimensions={{{dyn}}}
  r = {result} reshape(s){attr}
{gets}
  ROOT o = ({result}, {", ".join(["s32[]"] * len(out_dims))}) tuple(r, {gnames})""")
    p = np.arange(1, math.prod(dims) + 1, dtype=np.int32).reshape(dims)
    tested = 0
    for n in range(bound + 1):
        valid = p[tuple(slice(0, n) if i == dyn else slice(None) for i in range(len(dims)))]
        try:
            got = hloref.evaluate(text, p, np.int32(n))
        except HloUnsupportedError:
            # refused only where the valid elements do not fill the result's rows
            picked = inferred if inferred is not None else _first_dyn(result)
            rest = math.prod(d for k, d in enumerate(out_dims) if k != picked)
            assert valid.size % rest, (n, rest)
            continue
        r, *g = got
        g = [int(v) for v in g]
        assert math.prod(g) == valid.size
        want = valid.reshape(-1).reshape(g)
        cut = tuple(slice(0, v) for v in g)
        np.testing.assert_array_equal(np.asarray(r)[cut], want)
        if xla:
            xr, *xg = run_hlo(text, p, np.int32(n))
            assert g == [int(v) for v in xg], n
            np.testing.assert_array_equal(np.asarray(xr)[cut], want)
        tested += 1
    assert tested >= 2


def _first_dyn(result):
    return [i for i, t in enumerate(result.split("[")[1].rstrip("]").split(","))
            if t.startswith("<=")][0]


@pytest.mark.parametrize("result,attr", [
    ("f32[2,3]", ""),                         # split, no dimension marked dynamic
    ("f32[3,2]", ""),
    ("f32[<=6,1]", ", inferred_dimension=1"),  # flatten on a degenerate inferred dim
])
def test_reshape_refusals_where_xla_cannot_tell(result, attr):
    text = _slice_module(f"ROOT r = {result} reshape(s){attr}")
    with pytest.raises(HloUnsupportedError) as info:
        hloref.evaluate(text, np.arange(6, dtype=np.float32), np.int32(4))
    assert info.value.opcode == "reshape"


def test_reshape_size_that_does_not_divide_is_refused():
    text = _entry("""  p = s32[12] parameter(0)
  n = s32[] parameter(1)
  s = s32[<=12] set-dimension-size(p, n), dimensions={0}
  ROOT r = s32[2,<=3,2] reshape(s), inferred_dimension=1""")
    p = np.arange(12, dtype=np.int32)
    with pytest.raises(HloUnsupportedError):
        hloref.evaluate(text, p, np.int32(7))
    r = hloref.evaluate(text, p, np.int32(8))
    np.testing.assert_array_equal(r[:, :2, :], np.arange(8).reshape(2, 2, 2))


def test_whole_dimension_gather_as_dynamic_padder_test():
    """WholeDimensionGather: a whole dynamic dimension gathered keeps its size (3)."""
    text = _entry("""  param = s32[3, 2, 1] parameter(0)
  size = s32[] constant(1)
  param_padded = s32[3, <=2, 1] set-dimension-size(param, size), dimensions={1}
  index = s32[] constant(1)
  gather = s32[<=2,1]{1,0} gather(param_padded, index), offset_dims={0,1},
    collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=0, slice_sizes={1,2,1}
  init = s32[] constant(0)
  ROOT reduce = s32[] reduce(gather, init), dimensions={0, 1}, to_apply=update_s32""")
    operand = np.array([[[1], [2]], [[3], [4]], [[5], [6]]], np.int32)
    assert int(hloref.evaluate(text, operand)) == 3
    assert int(run_hlo(text, operand)) == 3


def test_gather_dynamic_indices_and_size_one_slices_against_xla():
    """Dynamic indices (a batch dimension): the result's batch dimension has their size;
    a size-1 slice of a dynamic operand dimension is static, evaluated when every valid
    index reads a valid row and refused when one reads padding."""
    text = _entry("""  p = s32[6,3] parameter(0)
  i = s32[4] parameter(1)
  n = s32[] parameter(2)
  k = s32[] parameter(3)
  s = s32[<=6,3] set-dimension-size(p, n), dimensions={0}
  j = s32[<=4] set-dimension-size(i, k), dimensions={0}
  g = s32[<=4,3] gather(s, j), offset_dims={1}, collapsed_slice_dims={0},
    start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}
  c = s32[] get-dimension-size(g), dimensions={0}
  z = s32[] constant(0)
  t = s32[3] reduce(g, z), dimensions={0}, to_apply=update_s32
  ROOT o = (s32[<=4,3], s32[], s32[3]) tuple(g, c, t)""")
    p = np.arange(18, dtype=np.int32).reshape(6, 3)
    idx = np.array([2, 0, 3, 5], np.int32)
    for n, k in [(4, 3), (4, 2), (6, 4), (3, 2), (4, 0)]:
        g, c, t = hloref.evaluate(text, p, idx, np.int32(n), np.int32(k))
        xg, xc, xt = run_hlo(text, p, idx, np.int32(n), np.int32(k))
        want = p[idx[:k]]
        assert int(c) == int(xc) == k
        np.testing.assert_array_equal(g[:k], want)
        np.testing.assert_array_equal(np.asarray(xg)[:k], want)
        np.testing.assert_array_equal(t, want.sum(0))
        np.testing.assert_array_equal(np.asarray(xt), want.sum(0))
    with pytest.raises(HloUnsupportedError) as info:  # index 3 reads padding (n = 3)
        hloref.evaluate(text, p, idx, np.int32(3), np.int32(3))
    assert info.value.opcode == "gather"


def test_gather_partial_slice_of_a_dynamic_dim_is_refused():
    text = _entry("""  p = s32[6] parameter(0)
  n = s32[] parameter(1)
  s = s32[<=6] set-dimension-size(p, n), dimensions={0}
  i = s32[1] constant({1})
  ROOT g = s32[2] gather(s, i), offset_dims={0}, collapsed_slice_dims={},
    start_index_map={0}, index_vector_dim=0, slice_sizes={2}""")
    with pytest.raises(HloUnsupportedError) as info:
        hloref.evaluate(text, np.arange(6, dtype=np.int32), np.int32(4))
    assert info.value.opcode == "gather"


_SCATTER_V1 = """  operand = s32[3,3] parameter(0)
  indices = s32[{b}] parameter(1)
  updates = s32[{b},3] parameter(2)
  dynamic_size = s32[] parameter(3)
  indices_dynamic = s32[<={b}] set-dimension-size(indices, dynamic_size), dimensions={{0}}
  updates_dynamic = s32[<={b},3] set-dimension-size(updates, dynamic_size), dimensions={{0}}
  ROOT scatter = s32[3,3] scatter(operand, indices_dynamic, updates_dynamic),
      to_apply={f}, update_window_dims={{1}}, inserted_window_dims={{0}},
      scatter_dims_to_operand_dims={{0}}, index_vector_dim=1"""


@pytest.mark.parametrize("combiner", ["assign_s32", "update_s32"])
def test_scatter_update_as_dynamic_padder_test(combiner):
    """ScatterUpdate / ScatterUpdateF32: only the valid index vectors scatter (garbage
    indices and updates in the padding, as the C++ test pads them)."""
    operand = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]], np.int32)
    plain = _entry(_SCATTER_V1.format(b=2, f=combiner))
    padded = _entry(_SCATTER_V1.format(b=4, f=combiner))
    idx2 = np.array([0, 2], np.int32)
    upd2 = np.array([[10, 20, 30], [70, 80, 90]], np.int32)
    idx4 = np.array([0, 2, 0, 4], np.int32)
    upd4 = np.array([[10, 20, 30], [70, 80, 90], [30, 22, 11], [-1, 20, -1]], np.int32)
    for n in range(3):
        want = hloref.evaluate(plain, operand, idx2, upd2, np.int32(n))
        got = hloref.evaluate(padded, operand, idx4, upd4, np.int32(n))
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.asarray(run_hlo(padded, operand, idx4, upd4,
                                                         np.int32(n))), want)
    if combiner == "assign_s32":  # ScatterUpdateF32's expectation (size 1 of 2)
        np.testing.assert_array_equal(
            hloref.evaluate(plain, operand, idx2, upd2, np.int32(1)),
            [[10, 20, 30], [4, 5, 6], [7, 8, 9]])


def test_scatter_update_window_dim_as_dynamic_padder_test():
    """ScatterUpdateWindowDim: a dynamic update window dimension matching the operand's
    dynamic dimension; the result keeps the operand's size."""
    text = _entry("""  operand = s32[1,2,3] parameter(0)
  indices = s32[1] parameter(1)
  updates = s32[2,3,1] parameter(2)
  dynamic_size = s32[] constant(1)
  operand_dynamic = s32[1, <=2, 3] set-dimension-size(operand, dynamic_size), dimensions={1}
  updates_dynamic = s32[<=2, 3, 1] set-dimension-size(updates, dynamic_size), dimensions={0}
  r = s32[1, <=2, 3] scatter(operand_dynamic, indices, updates_dynamic),
      to_apply=assign_s32, update_window_dims={0, 1}, inserted_window_dims={0},
      scatter_dims_to_operand_dims={0}, index_vector_dim=1
  g = s32[] get-dimension-size(r), dimensions={1}
  ROOT o = (s32[1, <=2, 3], s32[]) tuple(r, g)""")
    operand = np.zeros((1, 2, 3), np.int32)
    idx = np.array([0], np.int32)
    upd = np.array([[[10], [20], [30]], [[70], [80], [90]]], np.int32)
    r, g = hloref.evaluate(text, operand, idx, upd)
    xr, xg = run_hlo(text, operand, idx, upd)
    assert int(g) == int(xg) == 1
    # the C++ test expects the padded result {{{10,20,30},{70,80,90}}}; row 1 is padding
    np.testing.assert_array_equal(r[:, :1], [[[10, 20, 30]]])
    np.testing.assert_array_equal(np.asarray(xr)[:, :1], [[[10, 20, 30]]])


def test_scatter_update_padding_into_valid_elements_is_refused():
    text = _entry("""  operand = s32[3,3] parameter(0)
  indices = s32[2] parameter(1)
  updates = s32[2,3] parameter(2)
  n = s32[] parameter(3)
  u = s32[<=2,3] set-dimension-size(updates, n), dimensions={0}
  ROOT r = s32[3,3] scatter(operand, indices, u), to_apply=assign_s32,
      update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0},
      index_vector_dim=1""")
    args = (np.zeros((3, 3), np.int32), np.array([0, 2], np.int32),
            np.ones((2, 3), np.int32))
    with pytest.raises(HloUnsupportedError) as info:
        hloref.evaluate(text, *args, np.int32(1))
    assert info.value.opcode == "scatter"
