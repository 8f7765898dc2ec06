"""``shuffle`` and ``collective-reduce``, two opcodes newer than any XLA hloref can run
(jaxlib 0.10.2). Expected values are derived by hand from upstream's definitions
(``xla/hlo/transforms/expanders/shuffle_expander.cc``, ``xla/shuffle.cc``,
``xla/backends/gpu/runtime/collective_reduce_thunk.cc``): ``np.roll`` for rotate,
explicit index loops for permute, hand sums for the reduction. The HLO texts are
upstream's own test inputs (``shuffle_expander_test.cc``, the parser round-trip
corpus)."""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest

import hloref
from hloref.errors import HloEvalError, HloParseError, HloUnsupportedError, HloVerifyError
from hloref.parser import parse_module
from hloref.printer import module_to_text

DTYPES = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f8e4m3fn": ml_dtypes.float8_e4m3fn,
          "s32": np.int32, "u8": np.uint8}


def _shuffle_module(et: str, dims: tuple[int, ...], attrs: str) -> str:
    shape = f"{et}[{','.join(map(str, dims))}]"
    return (f"HloModule m\n\nENTRY main {{\n  p0 = {shape} parameter(0)\n"
            f"  ROOT s = {shape} shuffle(p0), {attrs}\n}}\n")


def _values(et: str, dims) -> np.ndarray:
    # small distinct integers: exact in every type above
    n = int(np.prod(dims))
    return (np.arange(n) % 14 + 1).reshape(dims).astype(DTYPES[et])


# ------------------------------------------------------------------------------ rotate


@pytest.mark.parametrize("et", sorted(DTYPES))
@pytest.mark.parametrize("dims,shuffled,shifts", [
    ((4,), (0,), (1,)),
    ((4,), (0,), (0,)),
    ((5,), (0,), (-2,)),
    ((5,), (0,), (12,)),
    ((2, 3), (0, 1), (1, 2)),
    ((2, 3, 4), (2, 0), (3, -1)),
    ((3, 0), (1,), (5,)),
])
def test_rotate_is_a_left_roll(et, dims, shuffled, shifts):
    x = _values(et, dims)
    attrs = (f"dimensions={{{','.join(map(str, shuffled))}}}, mode=rotate, "
             f"shifts={{{','.join(map(str, shifts))}}}")
    got = hloref.evaluate(_shuffle_module(et, dims, attrs), x)
    want = x
    for d, s in zip(shuffled, shifts):
        want = np.roll(want, -s, axis=d)  # left rotation: result[i] = x[(i + s) mod n]
    assert got.dtype == x.dtype and got.shape == x.shape
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


def test_rotate_1d_by_hand():
    x = np.array([10, 20, 30, 40], np.int32)
    got = hloref.evaluate(_shuffle_module("s32", (4,), "dimensions={0}, mode=rotate, shifts={1}"), x)
    assert got.tolist() == [20, 30, 40, 10]  # slice [1:4] then [0:1], as the expander builds it


# ------------------------------------------------------------------------------ permute


def _permute_by_hand(x, shuffled, indices):
    """result[i] = x[j], j[shuffled[k]] = indices[i][k] (shared dims of size 1 broadcast)."""
    idx = np.asarray(indices)
    if idx.ndim == x.ndim:
        idx = idx[..., None]
    out = np.empty_like(x)
    for i in itertools.product(*(range(n) for n in x.shape)):
        at = tuple(0 if idx.shape[a] == 1 else i[a] for a in range(x.ndim))
        j = list(i)
        for k, d in enumerate(shuffled):
            j[d] = int(idx[at][k])
        out[i] = x[tuple(j)]
    return out


PERMUTES = [
    # upstream shuffle_expander_test.cc inputs
    ((3, 2), (0,), "s32[3,1]{1,0} { {2}, {0}, {1} }", [[2], [0], [1]]),
    ((3, 2), (0, 1), "s32[3,2,2]{2,1,0} { { {2,0}, {0,1} }, { {0,0}, {2,1} }, { {1,0}, {1,1} } }",
     [[[2, 0], [0, 1]], [[0, 0], [2, 1]], [[1, 0], [1, 1]]]),
    ((4,), (0,), "s32[4]{0} {3, 1, 0, 2}", [3, 1, 0, 2]),
    ((3, 2), (1, 0), "s32[3,2,2]{2,1,0} { { {0,2}, {1,0} }, { {0,0}, {1,2} }, { {0,1}, {1,1} } }",
     [[[0, 2], [1, 0]], [[0, 0], [1, 2]], [[0, 1], [1, 1]]]),
    ((2, 2, 2), (0, 2),
     "s32[2,1,2,2]{3,2,1,0} { { { {1,1}, {1,0} } }, { { {0,1}, {0,0} } } }",
     [[[[1, 1], [1, 0]]], [[[0, 1], [0, 0]]]]),
    ((3, 2), (0, 1), "s8[3,2,2]{2,1,0} { { {2,0}, {0,1} }, { {0,0}, {2,1} }, { {1,0}, {1,1} } }",
     [[[2, 0], [0, 1]], [[0, 0], [2, 1]], [[1, 0], [1, 1]]]),
]


@pytest.mark.parametrize("et", ["f32", "bf16", "f8e4m3fn", "s32"])
@pytest.mark.parametrize("dims,shuffled,text,indices", PERMUTES)
def test_permute_gathers_by_coordinates(et, dims, shuffled, text, indices):
    x = _values(et, dims)
    attrs = f"dimensions={{{','.join(map(str, shuffled))}}}, mode=permute, indices={text}"
    got = hloref.evaluate(_shuffle_module(et, dims, attrs), x)
    want = _permute_by_hand(x, shuffled, indices)
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


def test_permute_rank1_by_hand():
    x = np.array([1.5, 2.5, 3.5, 4.5], ml_dtypes.bfloat16)
    text = _shuffle_module("bf16", (4,), "dimensions={0}, mode=permute, indices=s32[4]{0} {3, 1, 0, 2}")
    assert hloref.evaluate(text, x).astype(float).tolist() == [4.5, 2.5, 1.5, 3.5]


def test_permute_out_of_range_coordinates_clamp_like_the_gather_expansion():
    x = np.array([1, 2, 3], np.int32)
    text = _shuffle_module("s32", (3,), "dimensions={0}, mode=permute, indices=s32[3]{0} {-4, 7, 1}")
    assert hloref.evaluate(text, x).tolist() == [1, 3, 2]


def test_other_mode_is_unsupported_by_name():
    text = _shuffle_module("f32", (4,), "dimensions={0}, mode=multi_rotate, shifts={1}")
    with pytest.raises(HloUnsupportedError, match="mode=multi_rotate"):
        hloref.evaluate(text, np.zeros(4, np.float32))


# ------------------------------------------------------------------------------ syntax


ROUND_TRIP = [
    _shuffle_module("f32", (2, 3), "dimensions={0,1}, mode=rotate, shifts={1,2}"),
    _shuffle_module("f32", (3, 2), "dimensions={0}, mode=permute, indices=s32[3,1]{1,0} "
                    "{ {2}, {0}, {1} }"),
    _shuffle_module("f32", (4,), "dimensions={0}, mode=permute, indices=s32[4]{0} {3, 1, 0, 2}"),
    """HloModule CR, replica_count=4

add {
  lhs = f32[] parameter(0)
  rhs = f32[] parameter(1)
  ROOT add = f32[] add(lhs, rhs)
}

ENTRY CR {
  input = f32[8]{0} parameter(0)
  ROOT cr = f32[8]{0} collective-reduce(input), replica_groups={{0,1},{2,3}}, has_dynamic_root=false, to_apply=add
}
""",
    """HloModule CR, replica_count=2

add {
  lhs = f32[] parameter(0)
  rhs = f32[] parameter(1)
  ROOT add = f32[] add(lhs, rhs)
}

ENTRY CR {
  input = f32[8]{0} parameter(0)
  ROOT cr = f32[8]{0} collective-reduce(input), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, has_dynamic_root=false, to_apply=add
}
""",
]


def _strip(text: str) -> str:
    return text.replace("%", "")


@pytest.mark.parametrize("text", ROUND_TRIP)
def test_round_trip(text):
    printed = module_to_text(parse_module(text))
    # the instruction lines come back as written (modulo the '%' the printer adds)
    for line in text.splitlines():
        if "shuffle(" in line or "collective-reduce(" in line:
            assert line.strip() in _strip(printed)
    assert module_to_text(parse_module(printed)) == printed


def test_parsed_attributes():
    m = parse_module(ROUND_TRIP[1])
    attrs = m.entry.root.attrs
    assert attrs["dimensions"] == (0,) and str(attrs["mode"]) == "permute"
    assert attrs["indices"].value.tolist() == [[2], [0], [1]]
    assert parse_module(ROUND_TRIP[0]).entry.root.attrs["shifts"] == (1, 2)
    assert parse_module(ROUND_TRIP[4]).entry.root.attrs["has_dynamic_root"] is False


@pytest.mark.parametrize("attrs,token,at", [
    ("dimensions={0}, mode=rotate, shifts={1,x}", "x}", 0),
    ("dimensions={0}, mode=permute, indices=s32[4]{0} {3, 1, 0}", "{3, 1, 0}", 0),
    ("dimensions={0}, mode=permute, indices=s32[4]{0} {3, 1, 0, 2.5}", "2.5", 0),
    ("dimensions={0}, mode=permute, indices=s32[4 {3, 1, 0, 2}", "{3", 0),
])
def test_bad_attribute_is_a_parse_error_with_position(attrs, token, at):
    text = _shuffle_module("f32", (4,), attrs)
    with pytest.raises(HloParseError) as info:
        parse_module(text)
    line = text.splitlines()[4]
    assert info.value.line == 5
    assert info.value.column == line.index(token) + 1 + at, str(info.value)


@pytest.mark.parametrize("attrs,message", [
    ("dimensions={0}, mode=rotate, shifts={1,2}", "one shift per dimension"),
    ("dimensions={1}, mode=rotate, shifts={1}", "out of range"),
    ("dimensions={0}, mode=rotate", "shifts"),
    ("dimensions={0}, shifts={1}", "mode"),
    ("dimensions={0}, mode=permute, indices=s32[3]{0} {1, 2, 0}", "must be the operand's 4"),
    ("dimensions={0}, mode=permute, indices=f32[4]{0} {1, 2, 0, 3}", "integers"),
])
def test_verifier_rejects(attrs, message):
    with pytest.raises(HloVerifyError, match=message):
        hloref.parse(_shuffle_module("f32", (4,), attrs), verify=True)


# ------------------------------------------------------------------------------ collective-reduce


def _reduce_module(et: str, n: int, groups: str, dynamic: bool, reducer: str = "add",
                   extra: str = "") -> str:
    root_param = "\n  root = s32[1]{0} parameter(1)" if dynamic else ""
    operands = "input, root" if dynamic else "input"
    return f"""HloModule CR, replica_count=4

red {{
  lhs = {et}[] parameter(0)
  rhs = {et}[] parameter(1)
  ROOT r = {et}[] {reducer}(lhs, rhs)
}}

ENTRY CR {{
  input = {et}[{n}]{{0}} parameter(0){root_param}
  ROOT cr = {et}[{n}]{{0}} collective-reduce({operands}), replica_groups={groups}, {extra}has_dynamic_root={'true' if dynamic else 'false'}, to_apply=red
}}
"""


def _inputs(et, n=5):
    return [((np.arange(n) + 1) * (d + 1) % 13).astype(DTYPES[et]) for d in range(4)]


@pytest.mark.parametrize("et", ["f32", "bf16", "f8e4m3fn", "s32"])
def test_collective_reduce_lands_on_rank_0_of_each_group(et):
    xs = _inputs(et)
    out = hloref.evaluate(_reduce_module(et, 5, "{{0,1},{2,3}}", False), xs)
    as64 = [x.astype(np.float64) for x in xs]
    for root, (a, b) in ((0, (0, 1)), (2, (2, 3))):
        # one addition: the exact sum rounded once to the element type
        want = (as64[a] + as64[b]).astype(xs[0].dtype).astype(np.float64)
        np.testing.assert_array_equal(out[root].astype(np.float64), want)
    for d in (1, 3):  # undefined upstream; zeros in hloref
        assert not out[d].astype(np.float64).any()
    assert all(o.dtype == xs[0].dtype for o in out)


def test_collective_reduce_group_order_sets_the_root():
    xs = _inputs("s32")
    out = hloref.evaluate(_reduce_module("s32", 5, "{{3,1,0,2}}", False, "maximum"), xs)
    assert out[3].tolist() == np.maximum.reduce([x for x in xs]).tolist()
    assert not any(out[d].any() for d in (0, 1, 2))


def test_collective_reduce_dynamic_root():
    xs = _inputs("f32")
    roots = [np.array([1], np.int32)] * 4
    out = hloref.evaluate(_reduce_module("f32", 5, "{{0,1},{2,3}}", True), xs, roots)
    np.testing.assert_array_equal(out[1], xs[0] + xs[1])
    np.testing.assert_array_equal(out[3], xs[2] + xs[3])
    assert not out[0].any() and not out[2].any()


def test_collective_reduce_dynamic_root_out_of_range():
    with pytest.raises(HloEvalError, match="out of range"):
        hloref.evaluate(_reduce_module("f32", 5, "{{0,1},{2,3}}", True), _inputs("f32"),
                        [np.array([2], np.int32)] * 4)


def test_collective_reduce_tuple_of_operands():
    text = """HloModule CR, replica_count=2

add {
  lhs = s32[] parameter(0)
  rhs = s32[] parameter(1)
  ROOT add = s32[] add(lhs, rhs)
}

ENTRY CR {
  a = s32[2]{0} parameter(0)
  b = s32[3]{0} parameter(1)
  ROOT cr = (s32[2]{0}, s32[3]{0}) collective-reduce(a, b), replica_groups={}, has_dynamic_root=false, to_apply=add
}
"""
    a = [np.array([1, 2], np.int32), np.array([10, 20], np.int32)]
    b = [np.array([1, 1, 1], np.int32), np.array([5, 6, 7], np.int32)]
    out = hloref.evaluate(text, a, b)
    assert out[0][0].tolist() == [11, 22] and out[0][1].tolist() == [6, 7, 8]
    assert not out[1][0].any() and not out[1][1].any()


def test_collective_reduce_verifier():
    bad = _reduce_module("f32", 5, "{{0,1},{2,3}}", False).replace("ROOT cr = f32[5]",
                                                                    "ROOT cr = f32[6]")
    with pytest.raises(HloVerifyError):
        hloref.parse(bad, verify=True)
    no_reducer = _reduce_module("f32", 5, "{{0,1},{2,3}}", False).replace(", to_apply=red", "")
    with pytest.raises(HloVerifyError, match="to_apply"):
        hloref.parse(no_reducer, verify=True)


def test_ops_table_lists_both_as_evaluated():
    from hloref.ops_table import ops_table
    rows = {r[0]: r for r in ops_table()}
    assert rows["shuffle"][1] == "yes" and rows["collective-reduce"][1] == "yes"
