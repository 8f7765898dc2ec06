"""sort and topk on the GPU backend (fallback disabled) against the cpu backend (bit for
bit) and XLA:CPU: keys of every real element type, FLOAT and TOTALORDER comparisons,
NaN rows replayed as XLA:CPU's libstdc++ sorts do, key/value sorts, any sorted dimension."""

from __future__ import annotations

import jax
import ml_dtypes
import numpy as np
import pytest

import hloref
from hloref.types import element_type

from gpu_check import RNG, check, values

CMP = """
cmp {{
{params}
  ROOT c = pred[] compare(q{a}, q{b}), direction={d}{extra}
}}
"""


def sort_module(types, dims, d, *, key=0, direction="LT", kind=None, swap=False, stable=True):
    """A sort of operands of ``types`` (all ``dims``) along ``d`` whose comparator compares
    operand ``key`` (``swap``: written ``compare(q2k+1, q2k)``)."""
    params = "\n".join(f"  q{2 * i + j} = {t}[] parameter({2 * i + j})"
                       for i, t in enumerate(types) for j in range(2))
    a, b = 2 * key, 2 * key + 1
    if swap:
        a, b = b, a
    extra = f", type={kind}" if kind else ""
    comp = CMP.format(params=params, a=a, b=b, d=direction, extra=extra)
    shp = ",".join(str(v) for v in dims)
    arrays = [f"{t}[{shp}]" for t in types]
    result = arrays[0] if len(types) == 1 else "(" + ", ".join(arrays) + ")"
    lines = [f"  p{i} = {s} parameter({i})" for i, s in enumerate(arrays)]
    ops = ", ".join(f"p{i}" for i in range(len(types)))
    stable_attr = ", is_stable=true" if stable else ""
    return ("HloModule s\n" + comp + "\nENTRY e {\n" + "\n".join(lines) +
            f"\n  ROOT r = {result} sort({ops}), dimensions={{{d}}}{stable_attr}, to_apply=cmp\n}}\n")


def keys_with_ties(t, dims):
    """Keys with many equal values (so stability is visible), specials for floats."""
    et = element_type(t)
    if et.is_float:
        v = values(t, dims, kind="normal").astype(np.float32)
        v = np.round(v)  # ties
        v.reshape(-1)[:4] = [0.0, -0.0, np.inf, -np.inf]
        return v.astype(et.dtype)
    return values(t, dims, kind="small" if not et.is_pred else "normal")


#: (key type, comparison type) rows; the comparison type's default when None
SORT_KEYS = [("f32", None), ("f32", "TOTALORDER"), ("bf16", "TOTALORDER"), ("f16", None),
             ("f8e4m3fn", "FLOAT"), ("f64", "TOTALORDER"), ("s32", None), ("u8", None),
             ("s64", "SIGNED"), ("u64", None), ("pred", None), ("s4", None),
             ("f8e4m3fnuz", "TOTALORDER")]


@pytest.mark.parametrize("t,kind", SORT_KEYS)
def test_sort_keys(t, kind):
    for dims, d in [((3, 9), 1), ((6, 2, 3), 0), ((20,), 0)]:
        x = keys_with_ties(t, dims)
        for direction in ("LT", "GT"):
            text = sort_module([t], dims, d, direction=direction, kind=kind)
            check(text, x, xla="required" if t not in ("s4",) else False)


def test_sort_key_value_and_swapped_comparator():
    dims = (4, 11)
    k = keys_with_ties("s32", dims)
    v = values("f32", dims)
    w = values("bf16", dims)
    # keys are operand 0; the values follow
    check(sort_module(["s32", "f32"], dims, 1), k, v, xla="required")
    # keys are operand 2, written compare(q5, q4), direction=GT (i.e. ascending)
    check(sort_module(["f32", "bf16", "s32"], dims, 1, key=2, direction="GT", swap=True),
          v, w, k, xla="required")
    # argsort: an iota of indices as the value operand
    idx = np.broadcast_to(np.arange(11, dtype=np.int32), dims).copy()
    check(sort_module(["f32", "s32"], dims, 1, kind="TOTALORDER"), v, idx, xla="required")
    finite = (np.round(RNG.standard_normal(dims) * 3) + 0.5).astype(np.float32)  # no ±0
    out = check(sort_module(["f32", "s32"], dims, 1, kind="TOTALORDER"), finite, idx,
                xla="required")
    assert np.array_equal(out[1], np.argsort(finite, axis=1, kind="stable").astype(np.int32))


@pytest.mark.parametrize("stable", [True, False])
def test_sort_nan_rows_replay_xla(stable):
    # FLOAT LT is not a strict weak ordering with NaN: rows of 40 (> 16, so introsort's
    # partitions run for is_stable=false) replay XLA:CPU's libstdc++ sorts. Values are
    # distinct: the order of equal keys in an unstable sort is unspecified (hloref keeps
    # them stable, XLA:CPU's std::sort does not)
    dims = (3, 40)
    x = (RNG.permutation(120).reshape(dims) - 60).astype(np.float32)
    x[0, ::7] = np.nan
    x[2, 5] = np.nan
    idx = np.broadcast_to(np.arange(40, dtype=np.int32), dims).copy()
    for direction in ("LT", "GT"):
        check(sort_module(["f32", "s32"], dims, 1, direction=direction, stable=stable), x, idx,
              xla="required")


def test_sort_by_hand():
    text = sort_module(["s32", "s32"], (6,), 0)
    out = hloref.evaluate(text, np.array([3, 1, 3, 0, 1, 3], np.int32),
                          np.arange(6, dtype=np.int32), backend="gpu", fallback=False)
    assert out[0].tolist() == [0, 1, 1, 3, 3, 3] and out[1].tolist() == [3, 1, 4, 0, 2, 5]


def test_compare_totalorder_fnuz_nan():
    # f8e4m3fnuz's single NaN (0x80) sorts below every negative value (XLA:CPU)
    x = np.array([0x80, 0x80, 0x01, 0x81], np.uint8).view(ml_dtypes.float8_e4m3fnuz)
    y = np.array([0x81, 0xFF, 0x80, 0x80], np.uint8).view(ml_dtypes.float8_e4m3fnuz)
    text = ("HloModule m\nENTRY e {\n  p0 = f8e4m3fnuz[4] parameter(0)\n  p1 = f8e4m3fnuz[4] "
            "parameter(1)\n  ROOT r = pred[4] compare(p0, p1), direction=LT, type=TOTALORDER\n}\n")
    out = check(text, x, y, xla="required")
    assert out.tolist() == [True, True, False, False]


# ---------------------------------------------------------------- topk

def topk_module(t, dims, k, largest):
    shp = ",".join(str(v) for v in dims)
    odims = ",".join(str(v) for v in dims[:-1] + (k,))
    return (f"HloModule t\nENTRY e {{\n  p0 = {t}[{shp}] parameter(0)\n"
            f"  ROOT r = ({t}[{odims}], s32[{odims}]) topk(p0), k={k}, largest={str(largest).lower()}\n}}\n")


@pytest.mark.parametrize("t", ["f32", "bf16", "s32", "u8", "f64", "pred"])
def test_topk(t):
    for dims, k in [((4, 10), 3), ((13,), 13), ((2, 3, 5), 1)]:
        x = keys_with_ties(t, dims)
        if element_type(t).is_float:
            x.reshape(-1)[4:6] = np.array([np.nan, -np.nan], np.float32).astype(x.dtype)
        for largest in (True, False):
            check(topk_module(t, dims, k, largest), x, xla="required")


def test_topk_by_hand():
    x = np.array([1.0, np.nan, 3.0, -0.0, 0.0, 3.0], np.float32)
    vals, idx = hloref.evaluate(topk_module("f32", (6,), 4, True), x, backend="gpu", fallback=False)
    assert idx.tolist() == [1, 2, 5, 0]
    vals, idx = hloref.evaluate(topk_module("f32", (6,), 3, False), x, backend="gpu", fallback=False)
    assert idx.tolist() == [3, 4, 0]


def test_sort_lexicographic_comparator_from_jax():
    # lax.sort with num_keys=2: a comparator chain (compare, and, or) run compiled
    a = np.round(RNG.standard_normal((3, 12)) * 1.5).astype(np.float32)
    b = RNG.integers(-3, 4, (3, 12)).astype(np.int32)
    c = np.arange(36, dtype=np.int32).reshape(3, 12)
    fn = jax.jit(lambda a, b, c: jax.lax.sort((a, b, c), dimension=1, num_keys=2))
    text = fn.lower(a, b, c).as_text(dialect="hlo")
    out = check(text, a, b, c, xla="required")
    ref = fn(a, b, c)
    for got, want in zip(out, ref):
        assert np.array_equal(got, np.asarray(want))  # jax itself


CPLX_CMP = """HloModule c
cmp {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  x = s32[] parameter(2)
  y = s32[] parameter(3)
  ra = {p}[] real(a)
  rb = {p}[] real(b)
  lt = pred[] compare(ra, rb), direction=LT
  eq = pred[] compare(ra, rb), direction=EQ
  ia = {p}[] imag(a)
  ib = {p}[] imag(b)
  ilt = pred[] compare(ia, ib), direction=LT
  both = pred[] and(eq, ilt)
  ROOT r = pred[] or(lt, both)
}}
ENTRY e {{
  p0 = {t}[3,9] parameter(0)
  p1 = s32[3,9] parameter(1)
  ROOT s = ({t}[3,9], s32[3,9]) sort(p0, p1), dimensions={{1}}, is_stable=true, to_apply=cmp
}}
"""


@pytest.mark.parametrize("t", ["c64", "c128"])
def test_sort_complex_keys_lexicographic_comparator(t):
    # complex keys ordered by (real, imag) through real/imag and compares: compiled
    x = (np.round(RNG.standard_normal((3, 9))) + 1j * np.round(RNG.standard_normal((3, 9))))
    x = x.astype(np.complex64 if t == "c64" else np.complex128)
    idx = np.arange(27, dtype=np.int32).reshape(3, 9)
    text = CPLX_CMP.format(t=t, p="f32" if t == "c64" else "f64")
    keys, perm = check(text, x, idx, xla="required")
    for r, row in enumerate(x):  # by hand: a stable sort
        order = sorted(range(9), key=lambda j: (row[j].real, row[j].imag, j))
        assert perm[r].tolist() == [9 * r + j for j in order]
        assert np.array_equal(keys[r], row[order])


@pytest.mark.parametrize("t", ["c64", "c128"])
def test_complex_order_is_an_error_on_both_backends(t):
    # no order on complex values: LT comparators and topk raise the cpu's error, never a
    # silent fallback
    x = np.array([1 + 2j, 0, -1j], np.complex64 if t == "c64" else np.complex128)
    for text in (sort_module([t], (3,), 0), topk_module(t, (3,), 2, True)):
        for backend in ("cpu", "gpu"):
            kw = {"fallback": False} if backend == "gpu" else {}
            with pytest.raises(hloref.HloEvalError, match="not defined on c|complex values"):
                hloref.evaluate(text, x, backend=backend, verify=False, **kw)
