"""sort and topk (``hloref.evaluator.sort``) against XLA:CPU.

Single-operand sorts are compared whatever ``is_stable`` says (equal keys are equal
values, ±0 compare equal); sorts that carry a payload use ``is_stable=true`` or
distinct keys, since an unstable sort may order equal keys either way. FLOAT
comparators on NaN-holding keys (not a strict weak ordering) are compared with
XLA:CPU's observable result, which hloref replays (libstdc++ sort algorithms).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

import hloref
from hloref.types import from_dtype

pytest.importorskip("jax")
from hloref.fuzz.compare import compare_values  # noqa: E402
from hloref.fuzz.oracles.xla import run_hlo  # noqa: E402

SETTINGS = dict(max_examples=25, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

DTYPES = [np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16), np.dtype(np.int32),
          np.dtype(np.uint8), np.dtype(np.bool_), np.dtype(ml_dtypes.float8_e4m3fn)]


def tname(dtype) -> str:
    return from_dtype(dtype).name


def shape_text(dtype, dims) -> str:
    return f"{tname(dtype)}[{','.join(map(str, dims))}]"


def values(rng, dtype, dims, nan=0.0):
    dims = tuple(dims)
    if dtype == np.bool_:
        return rng.random(dims) < 0.5
    if dtype.kind in "iu":
        return rng.integers(0, 6, dims).astype(dtype)
    x = rng.integers(-4, 5, dims).astype(np.float32)
    x[rng.random(dims) < 0.1] = -0.0
    x[rng.random(dims) < 0.05] = np.inf
    if nan:
        m = rng.random(dims) < nan
        x[m] = np.where(rng.random(dims) < 0.5, np.nan, -np.nan)[m]
    return x.astype(dtype)


def check(text, *args):
    want = run_hlo(text, *args)
    got = hloref.evaluate(text, *args)
    verdict = compare_values(want, got)
    assert verdict.ok, f"{verdict}\n{text}\nargs={args}"
    return got


def sort_text(dtypes, dims, d, comparator, is_stable):
    n = len(dtypes)
    params = "\n".join(f"  x{j} = {shape_text(dt, dims)} parameter({j})" for j, dt in enumerate(dtypes))
    result = (shape_text(dtypes[0], dims) if n == 1 else
              "(" + ", ".join(shape_text(dt, dims) for dt in dtypes) + ")")
    stable = ", is_stable=true" if is_stable else ""
    names = ", ".join(f"x{j}" for j in range(n))
    return f"""HloModule s

{comparator}
ENTRY main {{
{params}
  ROOT s = {result} sort({names}), dimensions={{{d}}}{stable}, to_apply=cmp
}}
"""


def simple_comparator(dtypes, key, direction, kind=None, swap=False):
    lines = []
    for j, dt in enumerate(dtypes):
        lines.append(f"  p{2 * j} = {tname(dt)}[] parameter({2 * j})")
        lines.append(f"  p{2 * j + 1} = {tname(dt)}[] parameter({2 * j + 1})")
    a, b = (2 * key + 1, 2 * key) if swap else (2 * key, 2 * key + 1)
    typ = f", type={kind}" if kind else ""
    lines.append(f"  ROOT r = pred[] compare(p{a}, p{b}), direction={direction}{typ}")
    return "cmp {\n" + "\n".join(lines) + "\n}\n"


shapes = st.lists(st.integers(0, 6), min_size=1, max_size=3)


@seed(21)
@settings(**SETTINGS)
@given(dims=shapes, dt=st.sampled_from(DTYPES), s=st.integers(0, 2**31),
       direction=st.sampled_from(["LT", "GT"]), stable=st.booleans(), swap=st.booleans(),
       total=st.booleans())
def test_sort_single_operand(dims, dt, s, direction, stable, swap, total):
    rng = np.random.default_rng(s)
    d = s % len(dims)
    is_float = dt.kind == "f" or dt.kind == "V"
    kind = "TOTALORDER" if (total and is_float) else None
    x = values(rng, dt, dims, nan=0.15 if is_float else 0)
    check(sort_text([dt], dims, d, simple_comparator([dt], 0, direction, kind, swap), stable), x)


@seed(22)
@settings(**SETTINGS)
@given(dims=shapes, dt=st.sampled_from(DTYPES), s=st.integers(0, 2**31),
       direction=st.sampled_from(["LT", "GT"]), total=st.booleans(), key=st.integers(0, 1))
def test_sort_variadic_stable(dims, dt, s, direction, total, key):
    """Key plus payload, sorted together stably (ties keep the payload order)."""
    rng = np.random.default_rng(s)
    d = s % len(dims)
    is_float = dt.kind == "f" or dt.kind == "V"
    kind = "TOTALORDER" if (total and is_float) else None
    dts = [dt, np.dtype(np.int32)] if key == 0 else [np.dtype(np.int32), dt]
    xs = [values(rng, t, dims, nan=0.15 if (t == dt and total and is_float) else 0)
          for t in dts]
    xs[1 - key] = rng.integers(-100, 100, dims).astype(dts[1 - key])
    check(sort_text(dts, dims, d, simple_comparator(dts, key, direction, kind), True), *xs)


@seed(23)
@settings(**SETTINGS)
@given(n=st.integers(1, 70), rows=st.integers(1, 3), s=st.integers(0, 2**31),
       direction=st.sampled_from(["LT", "GT"]), stable=st.booleans(),
       dt=st.sampled_from([np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16)]))
def test_sort_float_comparator_with_nans_matches_xla(n, rows, s, direction, stable, dt):
    """FLOAT LT/GT is no strict weak ordering with NaNs: hloref replays XLA:CPU."""
    rng = np.random.default_rng(s)
    x = values(rng, dt, (rows, n), nan=0.3)
    check(sort_text([dt], (rows, n), 1, simple_comparator([dt], 0, direction), stable), x)
    idx = np.broadcast_to(np.arange(n, dtype=np.int32), (rows, n)).copy()
    dts = [dt, np.dtype(np.int32)]
    check(sort_text(dts, (rows, n), 1, simple_comparator(dts, 0, direction), stable), x, idx)


LEXICOGRAPHIC = """cmp {
  a0 = s32[] parameter(0)
  b0 = s32[] parameter(1)
  a1 = f32[] parameter(2)
  b1 = f32[] parameter(3)
  eq = pred[] compare(a0, b0), direction=EQ
  gt = pred[] compare(a0, b0), direction=GT
  lt1 = pred[] compare(a1, b1), direction=LT, type=TOTALORDER
  ROOT r = pred[] select(eq, lt1, gt)
}
"""

NON_VECTORIZABLE = """cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  r1 = f32[1] reshape(a)
  a2 = f32[] reshape(r1)
  na = f32[] negate(a2)
  nb = f32[] negate(b)
  ROOT r = pred[] compare(na, nb), direction=LT
}
"""


@seed(24)
@settings(**SETTINGS)
@given(dims=st.lists(st.integers(0, 40), min_size=1, max_size=2), s=st.integers(0, 2**31))
def test_sort_general_comparators(dims, s):
    rng = np.random.default_rng(s)
    d = s % len(dims)
    a = rng.integers(0, 4, dims).astype(np.int32)
    b = values(rng, np.dtype(np.float32), dims, nan=0.1)
    check(sort_text([np.dtype(np.int32), np.dtype(np.float32)], dims, d, LEXICOGRAPHIC, True), a, b)
    c = rng.integers(-9, 9, dims).astype(np.float32)
    check(sort_text([np.dtype(np.float32)], dims, d, NON_VECTORIZABLE, True), c)


# --------------------------------------------------------------------------- topk

@seed(25)
@settings(**SETTINGS)
@given(dims=st.lists(st.integers(1, 9), min_size=1, max_size=3), dt=st.sampled_from(DTYPES),
       s=st.integers(0, 2**31), largest=st.booleans())
def test_topk_matches_xla(dims, dt, s, largest):
    rng = np.random.default_rng(s)
    k = int(rng.integers(0, dims[-1] + 1))
    is_float = dt.kind == "f" or dt.kind == "V"
    x = values(rng, dt, dims, nan=0.15 if is_float else 0)  # small ranges: many ties
    out = list(dims[:-1]) + [k]
    text = f"""HloModule t

ENTRY main {{
  x = {shape_text(dt, dims)} parameter(0)
  ROOT t = ({shape_text(dt, out)}, s32[{','.join(map(str, out))}]) topk(x), k={k}, largest={'true' if largest else 'false'}
}}
"""
    got = check(text, x)
    # ties go to the lower index: indices of equal values increase
    vals, idx = got
    if k > 1 and not is_float:
        same = vals[..., 1:] == vals[..., :-1]
        assert np.all(idx[..., 1:][same] > idx[..., :-1][same])


def test_topk_total_order_by_hand():
    x = np.array([1, np.nan, -np.nan, np.inf, 3, 3, -0.0, 0.0], np.float32)
    text = """HloModule t

ENTRY main {
  x = f32[8] parameter(0)
  ROOT t = (f32[8], s32[8]) topk(x), k=8, largest=true
}
"""
    vals, idx = hloref.evaluate(text, x)
    np.testing.assert_array_equal(idx, np.array([1, 3, 4, 5, 0, 7, 6, 2], np.int32))
    vals, idx = hloref.evaluate(text.replace("largest=true", "largest=false"), x)
    np.testing.assert_array_equal(idx, np.array([2, 6, 7, 0, 4, 5, 3, 1], np.int32))


# --------------------------------------------------------------------------- as JAX lowers them

def test_jax_lowered_sorts():
    import jax
    import jax.numpy as jnp
    rng = np.random.default_rng(3)
    x = rng.integers(-3, 4, (6, 9)).astype(np.float32)
    x[0, 0], x[1, 1], x[2, 2], x[2, 3], x[3, 4] = np.nan, -np.nan, -0.0, 0.0, np.inf
    k = rng.integers(0, 3, (6, 9)).astype(np.int32)
    cases = [
        (lambda x: jnp.sort(x, axis=0), (x,)),
        (lambda x: jnp.sort(x, axis=1, descending=True), (x,)),
        (lambda x: jnp.argsort(x, axis=1), (x,)),
        (lambda x: jnp.argsort(x, axis=0, descending=True), (x,)),
        (lambda x: jax.lax.top_k(x, 4), (x,)),
        (lambda k: jax.lax.top_k(k, 9), (k,)),
        (lambda x, k: jax.lax.sort((k, x), num_keys=2), (x, k)),
        (lambda x: jnp.sort(x.astype(jnp.bfloat16), axis=1), (x,)),
        (lambda k: jnp.argsort(k.astype(jnp.uint8), axis=1), (k,)),
        (lambda x: jnp.sort(x.reshape(-1)), (x,)),
    ]
    for fn, args in cases:
        text = jax.jit(fn).lower(*args).as_text(dialect="hlo")
        check(text, *args)


def test_large_sort_is_vectorised():
    """A JAX-style (non-simple) comparator on a 20000-element row runs in well under
    a second per call thanks to the vectorised merge."""
    import time

    import jax
    import jax.numpy as jnp
    x = np.random.default_rng(0).standard_normal((2, 20000)).astype(np.float32)
    text = jax.jit(lambda x: jnp.argsort(x, axis=1)).lower(x).as_text(dialect="hlo")
    t0 = time.perf_counter()
    got = hloref.evaluate(text, x)
    assert time.perf_counter() - t0 < 20
    np.testing.assert_array_equal(got, np.argsort(x, axis=1, kind="stable"))
