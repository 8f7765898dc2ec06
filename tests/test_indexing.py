"""gather, scatter, dynamic-slice, dynamic-update-slice, get/set-dimension-size
(``hloref.evaluator.indexing``) against XLA:CPU and against a per-element reference
written from the StableHLO spec text (with XLA's per-window out-of-bounds skip).

Dimension numbers are built valid by construction; index values include negative and
out-of-bounds ones. Scatter with duplicate targets is compared with XLA only for
combiners whose result does not depend on the order (integer add/max/min, pred or,
exact float add of small integers, max); overwrite with duplicates is checked against
the documented hloref rule (last update in row-major update order wins).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

import hloref
from hloref.fuzz.strategies import gather_dims, scatter_dims
from hloref.types import ARRAY_TYPES, element_type, from_dtype

pytest.importorskip("jax")
from hloref.fuzz.compare import compare_values  # noqa: E402
from hloref.fuzz.oracles.xla import run_hlo  # noqa: E402

SETTINGS = dict(max_examples=25, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

DTYPES = [np.dtype(np.float32), np.dtype(ml_dtypes.bfloat16), np.dtype(np.int32),
          np.dtype(np.uint8), np.dtype(np.bool_), np.dtype(ml_dtypes.float8_e4m3fn)]
INDEX_DTYPES = [np.dtype(np.int32), np.dtype(np.int8), np.dtype(np.int64), np.dtype(np.uint8),
                np.dtype(np.uint32), np.dtype(np.int16)]


def tname(dtype) -> str:
    return from_dtype(dtype).name


def shape_text(dtype, dims) -> str:
    return f"{tname(dtype)}[{','.join(map(str, dims))}]"


def ints(xs) -> str:
    return "{" + ",".join(map(str, xs)) + "}"


def values(rng, dtype, dims, nan=False):
    dims = tuple(dims)
    if dtype == np.bool_:
        return rng.random(dims) < 0.5
    if dtype.kind in "iu":
        return rng.integers(0, 50, dims).astype(dtype)
    x = rng.integers(-8, 9, dims).astype(np.float32)
    if nan and x.size:
        x[rng.random(dims) < 0.1] = np.nan
    return x.astype(dtype)


def index_values(rng, dtype, dims, hi):
    lo = -3 if dtype.kind == "i" else 0
    return rng.integers(lo, hi + 3, dims).astype(dtype)


def check(text, *args, opcode=None):
    want = run_hlo(text, *args)
    got = hloref.evaluate(text, *args)
    verdict = compare_values(want, got, opcode=opcode)
    assert verdict.ok, f"{verdict}\n{text}"
    return got


# --------------------------------------------------------------------------- dimension numbers

@st.composite
def gather_case(draw):
    rank = draw(st.integers(1, 3))
    dims = [draw(st.integers(1, 5)) for _ in range(rank)]
    g = draw(gather_dims(dims, batch_dims=st.lists(st.integers(0, 3), max_size=2),
                         max_batching_dims=1, collapse_unindexed=True,
                         implicit_index_vector=True, min_index_vector_size=0))
    return dict(dims=dims, idx_dims=g.indices_dims, ivd=g.index_vector_dim,
                collapsed=g.collapsed_slice_dims, start_map=g.start_index_map,
                batching=g.operand_batching_dims, idx_batching=g.start_indices_batching_dims,
                sizes=g.slice_sizes, offset_dims=g.offset_dims, out=g.result_dims)


def gather_text(c, dtype, idx_dtype):
    batch_attrs = ""
    if c["batching"]:
        batch_attrs = (f", operand_batching_dims={ints(c['batching'])}, "
                       f"start_indices_batching_dims={ints(c['idx_batching'])}")
    return f"""HloModule g

ENTRY main {{
  x = {shape_text(dtype, c['dims'])} parameter(0)
  i = {shape_text(idx_dtype, c['idx_dims'])} parameter(1)
  ROOT g = {shape_text(dtype, c['out'])} gather(x, i), offset_dims={ints(c['offset_dims'])}, collapsed_slice_dims={ints(c['collapsed'])}, start_index_map={ints(c['start_map'])}, index_vector_dim={c['ivd']}, slice_sizes={ints(c['sizes'])}{batch_attrs}
}}
"""


@seed(1234)
@settings(**SETTINGS)
@given(c=gather_case(), dt=st.sampled_from(DTYPES), it=st.sampled_from(INDEX_DTYPES),
       s=st.integers(0, 2**31))
def test_gather_matches_xla(c, dt, it, s):
    rng = np.random.default_rng(s)
    x = values(rng, dt, c["dims"], nan=True)
    i = index_values(rng, it, c["idx_dims"], max(c["dims"]))
    check(gather_text(c, dt, it), x, i)


# --------------------------------------------------------------------------- scatter

@st.composite
def scatter_case(draw):
    rank = draw(st.integers(1, 3))
    dims = [draw(st.integers(1, 4)) for _ in range(rank)]
    c = draw(scatter_dims(dims, batch_dims=st.lists(st.integers(0, 3), max_size=2),
                          max_batching_dims=1, inserted_unindexed=True,
                          implicit_index_vector=True))
    return dict(dims=dims, idx_dims=c.indices_dims, ivd=c.index_vector_dim,
                inserted=c.inserted_window_dims, to_operand=c.scatter_dims_to_operand_dims,
                batching=c.input_batching_dims, idx_batching=c.scatter_indices_batching_dims,
                uwd=c.update_window_dims, upd=c.updates_dims)


def combiner_text(name, dtypes, body):
    params = "\n".join(f"  p{j} = {tname(dt)}[] parameter({j})"
                       for j, dt in enumerate(list(dtypes) * 2))
    return f"{name} {{\n{params}\n{body}\n}}\n"


def simple_combiner(op, dtype):
    if op == "overwrite":
        return combiner_text("comb", [dtype], "  ROOT r = " + tname(dtype) + "[] copy(p1)")
    return combiner_text("comb", [dtype], f"  ROOT r = {tname(dtype)}[] {op}(p0, p1)")


def scatter_text(c, dtypes, idx_dtype, combiner, comb_name="comb", extra=""):
    n = len(dtypes)
    ops = "\n".join(f"  x{j} = {shape_text(dt, c['dims'])} parameter({j})" for j, dt in enumerate(dtypes))
    ups = "\n".join(f"  upd{j} = {shape_text(dt, c['upd'])} parameter({n + 1 + j})"
                    for j, dt in enumerate(dtypes))
    result = (shape_text(dtypes[0], c["dims"]) if n == 1 else
              "(" + ", ".join(shape_text(dt, c["dims"]) for dt in dtypes) + ")")
    names = ", ".join([f"x{j}" for j in range(n)] + ["i"] + [f"upd{j}" for j in range(n)])
    batch_attrs = ""
    if c["batching"]:
        batch_attrs = (f", input_batching_dims={ints(c['batching'])}, "
                       f"scatter_indices_batching_dims={ints(c['idx_batching'])}")
    return f"""HloModule s

{combiner}
ENTRY main {{
{ops}
  i = {shape_text(idx_dtype, c['idx_dims'])} parameter({n})
{ups}
  ROOT s = {result} scatter({names}), update_window_dims={ints(c['uwd'])}, inserted_window_dims={ints(c['inserted'])}, scatter_dims_to_operand_dims={ints(c['to_operand'])}, index_vector_dim={c['ivd']}{batch_attrs}, to_apply={comb_name}{extra}
}}
"""


def reference_scatter(c, operands, indices, updates, combine):
    """Per element, straight from the StableHLO text, windows skipped whole when any
    element is out of bounds. Returns (results, number of writes per operand element)."""
    outs = [np.array(o, copy=True) for o in operands]
    writes = np.zeros(outs[0].shape, dtype=np.int64)
    dims = c["dims"]
    rank = len(dims)
    uwd = c["uwd"]
    window_operand = [d for d in range(rank) if d not in c["inserted"] and d not in c["batching"]]
    window_size = [1] * rank
    for d, ud in zip(window_operand, uwd):
        window_size[d] = updates[0].shape[ud]
    idx = indices if c["ivd"] < indices.ndim else indices[..., None]
    for uidx in np.ndindex(*updates[0].shape):
        usi = [uidx[d] for d in range(len(uidx)) if d not in uwd]
        sel = list(usi)
        sel.insert(c["ivd"], slice(None))
        start_vec = [int(v) for v in idx[tuple(sel)]]
        start = [0] * rank
        for k, d in enumerate(c["to_operand"]):
            start[d] += start_vec[k]
        for od, sd in zip(c["batching"], c["idx_batching"]):
            start[od] += usi[sd if sd < c["ivd"] else sd - 1]
        if any(s < 0 or s + w > n for s, w, n in zip(start, window_size, dims)):
            continue
        full = list(start)
        for d, ud in zip(window_operand, uwd):
            full[d] += uidx[ud]
        full = tuple(full)
        cur = [o[full] for o in outs]
        new = combine(*cur, *[u[uidx] for u in updates])
        for o, v in zip(outs, new):
            o[full] = v
        writes[full] += 1
    return outs, writes


def _scatter_inputs(rng, c, dtypes, it):
    operands = [values(rng, dt, c["dims"]) for dt in dtypes]
    indices = index_values(rng, it, c["idx_dims"], max(c["dims"]))
    updates = [values(rng, dt, c["upd"]) for dt in dtypes]
    return operands, indices, updates


def _combine_ref(op, dt):
    """Scalar reference combiners (floats: computed in f32, rounded to the type)."""
    def f(a, b):
        if dt == np.bool_:
            return {"or": a | b, "and": a & b, "xor": a ^ b}[op]
        if dt.kind in "iu":
            r = {"add": int(a) + int(b), "minimum": min(int(a), int(b)),
                 "maximum": max(int(a), int(b))}[op]
            return np.array(r).astype(dt)
        a32, b32 = np.float32(a), np.float32(b)
        r = {"add": a32 + b32, "maximum": np.maximum(a32, b32), "minimum": np.minimum(a32, b32)}[op]
        return np.array(r, np.float32).astype(dt)
    return f


@seed(99)
@settings(**SETTINGS)
@given(c=scatter_case(), dt=st.sampled_from(DTYPES), it=st.sampled_from(INDEX_DTYPES),
       s=st.integers(0, 2**31), dup=st.booleans())
def test_scatter_matches_xla(c, dt, it, s, dup):
    """Order-independent combiners (exact here), duplicates included."""
    rng = np.random.default_rng(s)
    if dt == np.bool_:
        op = "or"
    elif dt == np.dtype(ml_dtypes.float8_e4m3fn):
        op = ("maximum", "minimum")[s % 2]
    else:
        op = ("add", "minimum", "add", "maximum")[s % 4]
    operands, indices, updates = _scatter_inputs(rng, c, [dt], it)
    if dup and indices.size:  # make all scatter indices equal
        indices[...] = indices.reshape(-1)[0]
    text = scatter_text(c, [dt], it, simple_combiner(op, dt))
    got = check(text, *operands, indices, *updates)
    fn = _combine_ref(op, dt)
    ref, _ = reference_scatter(c, operands, indices, updates, lambda a, b: (fn(a, b),))
    assert compare_values(ref[0], got).ok


def overwrite_combiner(dtype, via_copy):
    t = tname(dtype)
    if via_copy:
        return simple_combiner("overwrite", dtype)
    return f"comb {{\n  p0 = {t}[] parameter(0)\n  ROOT p1 = {t}[] parameter(1)\n}}\n"


@seed(7)
@settings(**SETTINGS)
@given(c=scatter_case(), dt=st.sampled_from(DTYPES), it=st.sampled_from(INDEX_DTYPES),
       s=st.integers(0, 2**31), via_copy=st.booleans())
def test_scatter_overwrite(c, dt, it, s, via_copy):
    """Overwrite: against XLA when every operand element is written at most once, and
    always against the documented rule (last update in row-major order wins)."""
    rng = np.random.default_rng(s)
    operands, indices, updates = _scatter_inputs(rng, c, [dt], it)
    if s % 2 and indices.size:
        indices[...] = indices.reshape(-1)[0]
    text = scatter_text(c, [dt], it, overwrite_combiner(dt, via_copy))
    got = hloref.evaluate(text, *operands, indices, *updates)
    ref, writes = reference_scatter(c, operands, indices, updates, lambda a, b: (b,))
    assert compare_values(ref[0], got).ok
    if writes.max(initial=0) <= 1:
        assert compare_values(run_hlo(text, *operands, indices, *updates), got).ok


VARIADIC_COMB = """comb {
  a0 = s32[] parameter(0)
  a1 = f32[] parameter(1)
  b0 = s32[] parameter(2)
  b1 = f32[] parameter(3)
  s = s32[] add(a0, b0)
  m = f32[] maximum(a1, b1)
  ROOT t = (s32[], f32[]) tuple(s, m)
}
"""

ORDERED_COMB = """comb {
  a0 = s32[] parameter(0)
  a1 = f32[] parameter(1)
  b0 = s32[] parameter(2)
  b1 = f32[] parameter(3)
  two = s32[] constant(2)
  s = s32[] multiply(a0, two)
  sum2 = s32[] add(s, b0)
  d = f32[] subtract(a1, b1)
  ROOT t = (s32[], f32[]) tuple(sum2, d)
}
"""


@seed(5)
@settings(**SETTINGS)
@given(c=scatter_case(), it=st.sampled_from(INDEX_DTYPES), s=st.integers(0, 2**31))
def test_variadic_scatter(c, it, s):
    rng = np.random.default_rng(s)
    dts = [np.dtype(np.int32), np.dtype(np.float32)]
    operands, indices, updates = _scatter_inputs(rng, c, dts, it)
    # order-independent combiner: against XLA, duplicates included
    text = scatter_text(c, dts, it, VARIADIC_COMB)
    got = check(text, *operands, indices, *updates)
    ref, _ = reference_scatter(c, operands, indices, updates,
                               lambda a0, a1, b0, b1: (np.int32(a0 + b0), max(a1, b1)))
    assert compare_values(tuple(ref), got).ok
    # order-dependent combiner: against the reference (row-major order), and XLA if unique
    text = scatter_text(c, dts, it, ORDERED_COMB)
    got = hloref.evaluate(text, *operands, indices, *updates)
    ref, writes = reference_scatter(
        c, operands, indices, updates,
        lambda a0, a1, b0, b1: (np.int32(2 * int(a0) + int(b0)), np.float32(a1 - b1)))
    assert compare_values(tuple(ref), got).ok
    if writes.max(initial=0) <= 1:
        assert compare_values(run_hlo(text, *operands, indices, *updates), got).ok


def test_scatter_out_of_bounds_window_is_skipped_whole():
    """XLA:CPU skips a window that is partly out of bounds (not per element)."""
    text = scatter_text(dict(dims=[6], idx_dims=[3, 1], ivd=1, inserted=[], to_operand=[0],
                             batching=[], idx_batching=[], uwd=[1], upd=[3, 2]),
                        [np.dtype(np.int32)], np.dtype(np.int32),
                        simple_combiner("add", np.dtype(np.int32)))
    args = (np.zeros(6, np.int32), np.array([[5], [-1], [2]], np.int32),
            np.array([[1, 2], [10, 20], [100, 200]], np.int32))
    want = np.array([0, 0, 100, 200, 0, 0], np.int32)
    np.testing.assert_array_equal(run_hlo(text, *args), want)
    np.testing.assert_array_equal(hloref.evaluate(text, *args), want)


def test_scatter_overwrite_duplicates_last_wins():
    c = dict(dims=[4], idx_dims=[5], ivd=1, inserted=[0], to_operand=[0], batching=[],
             idx_batching=[], uwd=[], upd=[5])
    dt = np.dtype(np.float32)
    text = scatter_text(c, [dt], np.dtype(np.int32), simple_combiner("overwrite", dt))
    got = hloref.evaluate(text, np.zeros(4, np.float32), np.array([1, 3, 1, 1, 3], np.int32),
                          np.array([10, 20, 30, 40, 50], np.float32))
    np.testing.assert_array_equal(got, np.array([0, 40, 0, 50], np.float32))


NON_VECTORIZABLE_COMB = """comb {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  r = f32[1] reshape(b)
  s = f32[] reshape(r)
  ROOT t = f32[] add(a, s)
}
"""


def test_scatter_per_element_combiner_and_pred_and_heavy_duplicates():
    c = dict(dims=[5, 3], idx_dims=[40, 1], ivd=1, inserted=[0], to_operand=[0], batching=[],
             idx_batching=[], uwd=[1], upd=[40, 3])
    rng = np.random.default_rng(0)
    dt = np.dtype(np.float32)
    x = values(rng, dt, c["dims"])
    i = rng.integers(-1, 6, (40, 1)).astype(np.int32)
    u = values(rng, dt, c["upd"])
    check(scatter_text(c, [dt], np.dtype(np.int32), NON_VECTORIZABLE_COMB), x, i, u)
    for op in ("add", "multiply", "maximum", "minimum"):
        check(scatter_text(c, [dt], np.dtype(np.int32), simple_combiner(op, dt)), x, i,
              np.sign(u).astype(dt) if op == "multiply" else u)
    bt = np.dtype(ml_dtypes.bfloat16)
    for op in ("add", "maximum", "minimum"):
        check(scatter_text(c, [bt], np.dtype(np.int32), simple_combiner(op, bt)),
              x.astype(bt), i, u.astype(bt))
    for op in ("and", "or", "xor"):
        pt = np.dtype(np.bool_)
        check(scatter_text(c, [pt], np.dtype(np.int32), simple_combiner(op, pt)),
              x > 0, i, u > 0)
        ut = np.dtype(np.uint8)
        check(scatter_text(c, [ut], np.dtype(np.int32), simple_combiner(op, ut)),
              x.astype(ut), i, u.astype(ut))
    # s32 add that wraps
    st_ = np.dtype(np.int32)
    big = np.full(c["upd"], 2**30, np.int32)
    check(scatter_text(c, [st_], np.dtype(np.int32), simple_combiner("add", st_)),
          np.zeros(c["dims"], np.int32), i, big)


def test_float_max_scatter_nan_and_signed_zero():
    c = dict(dims=[3], idx_dims=[6, 1], ivd=1, inserted=[0], to_operand=[0], batching=[],
             idx_batching=[], uwd=[], upd=[6])
    dt = np.dtype(np.float32)
    x = np.array([-0.0, 1.0, 0.0], np.float32)
    i = np.array([[0], [0], [1], [1], [2], [2]], np.int32)
    u = np.array([0.0, -1.0, np.nan, 5.0, -0.0, -3.0], np.float32)
    got = check(scatter_text(c, [dt], np.dtype(np.int32), simple_combiner("maximum", dt)), x, i, u)
    assert not np.signbit(got[0]) and np.isnan(got[1]) and got[2] == 0
    got = hloref.evaluate(scatter_text(c, [dt], np.dtype(np.int32), simple_combiner("minimum", dt)),
                          x, i, u)
    assert np.signbit(got[0]) and got[0] == -1 or got[0] == -1.0


# --------------------------------------------------------------------------- dynamic slices

@seed(3)
@settings(**SETTINGS)
@given(dims=st.lists(st.integers(1, 5), min_size=1, max_size=3), dt=st.sampled_from(DTYPES),
       it=st.sampled_from(INDEX_DTYPES), s=st.integers(0, 2**31))
def test_dynamic_slice_and_update(dims, dt, it, s):
    rng = np.random.default_rng(s)
    sizes = [int(rng.integers(0, d + 1)) for d in dims]
    x = values(rng, dt, dims, nan=True)
    u = values(rng, dt, sizes, nan=True)
    starts = [index_values(rng, it, (), d + 2) for d in dims]
    idx_params = "\n".join(f"  i{k} = {tname(it)}[] parameter({k + 2})" for k in range(len(dims)))
    names = ", ".join(f"i{k}" for k in range(len(dims)))
    text = f"""HloModule d

ENTRY main {{
  x = {shape_text(dt, dims)} parameter(0)
  u = {shape_text(dt, sizes)} parameter(1)
{idx_params}
  ds = {shape_text(dt, sizes)} dynamic-slice(x, {names}), dynamic_slice_sizes={ints(sizes)}
  dus = {shape_text(dt, dims)} dynamic-update-slice(x, u, {names})
  ROOT t = ({shape_text(dt, sizes)}, {shape_text(dt, dims)}) tuple(ds, dus)
}}
"""
    got = check(text, x, u, *starts)
    # by hand: clamped starts
    cl = [min(max(int(i), 0), d - n) for i, d, n in zip(starts, dims, sizes)]
    sl = tuple(slice(a, a + n) for a, n in zip(cl, sizes))
    assert compare_values(x[sl], got[0]).ok
    want = x.copy()
    want[sl] = u
    assert compare_values(want, got[1]).ok


def test_dimension_sizes():
    text = """HloModule d

ENTRY main {
  x = f32[3,4] parameter(0)
  n = s32[] parameter(1)
  g = s32[] get-dimension-size(x), dimensions={1}
  s = f32[3,4] set-dimension-size(x, n), dimensions={0}
  ROOT t = (s32[], f32[3,4]) tuple(g, s)
}
"""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    g, s = hloref.evaluate(text, x, np.int32(3))
    assert g.dtype == np.int32 and g.shape == () and int(g) == 4
    np.testing.assert_array_equal(s, x)
    assert s is not x


# --------------------------------------------------------------------------- as JAX lowers them

def _jax_text(fn, *args):
    import jax
    return jax.jit(fn).lower(*args).as_text(dialect="hlo")


def test_jax_lowered_gather_scatter():
    import jax
    import jax.numpy as jnp
    rng = np.random.default_rng(11)
    x = rng.standard_normal((6, 4)).astype(np.float32)
    i = np.array([0, 5, -1, 3, 9, -8, 3], np.int32)
    u = rng.standard_normal((7, 4)).astype(np.float32)
    j = np.array([[0, 1], [5, 3], [2, 9], [-1, 0]], np.int32)
    cases = [
        (lambda x, i: x[i], (x, i)),
        (lambda x, i: x[:, i % 4], (x, i)),
        (lambda x, j: x[j[:, 0], j[:, 1]], (x, j)),
        (lambda x, i, u: x.at[i].add(u), (x, i, u)),
        (lambda x, i, u: x.at[i].set(u), (x, i[:1], u[:1])),
        (lambda x, i, u: x.at[i].max(u), (x, i, u)),
        (lambda x, i, u: x.at[i].mul(u, mode="drop"), (x, i, np.sign(u).astype(np.float32))),
        (lambda x, i, u: x.at[i, 1:3].add(u[:, :2], mode="drop"), (x, i, u)),
        (lambda x, i: x.at[i].get(mode="fill", fill_value=-1.0), (x, i)),
        (lambda x, j: jnp.take_along_axis(x, j % 4, axis=1), (x[:4], j)),
        (lambda x, i: jax.lax.dynamic_slice(x, (i[0], i[0] - 7), (3, 2)), (x, np.array([4], np.int32))),
        (lambda x, i: jax.lax.dynamic_update_slice(x, x[:2, :3] * 2, (i[0], -i[0])),
         (x, np.array([5], np.int32))),
        (lambda x, i: jnp.zeros((8, 4), x.dtype).at[i[0]].set(x[0]), (x, np.array([9], np.int32))),
    ]
    for fn, args in cases:
        check(_jax_text(fn, *args), *args)
    # batched gather (vmap lowers to batching dims)
    xb = rng.standard_normal((3, 5, 2)).astype(np.float32)
    ib = np.array([[0, 4], [2, 2], [7, -3]], np.int32)
    ub = rng.standard_normal((3, 2, 2)).astype(np.float32)
    check(_jax_text(jax.vmap(lambda x, i: x[i]), xb, ib), xb, ib)
    check(_jax_text(jax.vmap(lambda x, i, u: x.at[i].add(u)), xb, ib, ub), xb, ib, ub)


def test_gather_speed_sanity():
    """Large gathers are vectorised (this would take minutes per element)."""
    text = """HloModule g

ENTRY main {
  x = f32[1000,64] parameter(0)
  i = s32[20000,1] parameter(1)
  ROOT g = f32[20000,64] gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,64}
}
"""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1000, 64)).astype(np.float32)
    i = rng.integers(0, 1000, (20000, 1)).astype(np.int32)
    np.testing.assert_array_equal(hloref.evaluate(text, x, i), x[i[:, 0]])


@pytest.mark.parametrize("t", [t.name for t in ARRAY_TYPES])
def test_gather_rows_every_element_type_against_numpy_indexing(t):
    from hloref.evaluator.numeric import as_type
    et = element_type(t)
    raw = np.arange(18).reshape(6, 3) % (2 if et.is_pred or et.bits < 4 else 7)
    table = as_type(raw.astype(np.float64) if et.is_float or et.is_complex else raw, et)
    idx = np.array([[5], [0], [3], [3], [-2], [9]], np.int32)  # last two clamp to 0 and 5
    text = (f"HloModule m\nENTRY e {{\n  t = {t}[6,3] parameter(0)\n  i = s32[6,1] parameter(1)\n"
            f"  ROOT g = {t}[6,2] gather(t, i), offset_dims={{1}}, collapsed_slice_dims={{0}}, "
            f"start_index_map={{0}}, index_vector_dim=1, slice_sizes={{1,2}}\n}}\n")
    out = hloref.evaluate(text, table, idx)
    expected = table[np.clip(idx[:, 0], 0, 5), :2]
    assert out.dtype == table.dtype and out.tobytes() == expected.tobytes()


@pytest.mark.parametrize("starts, clamped", [([1, 3], (1, 2)), ([3, 4], (2, 2)),
                                             ([-2, 1], (0, 1))])
def test_legacy_rank1_start_index_array_by_hand(starts, clamped):
    # The legacy dynamic-slice/dynamic-update-slice form with every start in one rank-1
    # array (XLA's InferDynamicSliceShape accepts it; DynamicIndexSplitter splits it; the
    # StableHLO route refuses it, so by hand): starts clamped to [0, dim - size].
    text = """HloModule m
ENTRY e {
  x = f32[4,5] parameter(0)
  i = s32[2] parameter(1)
  u = f32[2,2] parameter(2)
  ds = f32[2,3] dynamic-slice(x, i), dynamic_slice_sizes={2,3}
  dus = f32[4,5] dynamic-update-slice(x, u, i)
  ROOT t = (f32[2,3], f32[4,5]) tuple(ds, dus)
}
"""
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    u = -np.ones((2, 2), np.float32)
    ds, dus = hloref.evaluate(text, x, np.array(starts, np.int32), u)
    r, c = clamped
    np.testing.assert_array_equal(ds, x[r:r + 2, c:c + 3])
    r2, c2 = min(max(starts[0], 0), 2), min(max(starts[1], 0), 3)  # the update is 2x2
    want = x.copy()
    want[r2:r2 + 2, c2:c2 + 2] = u
    np.testing.assert_array_equal(dus, want)
