"""reduce-window, select-and-scatter, map and scan against XLA:CPU (jaxlib 0.10.2)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

pytest.importorskip("jax")
ml_dtypes = pytest.importorskip("ml_dtypes")

from hloref.api import evaluate  # noqa: E402
from hloref.fuzz.compare import accumulation_atol, compare_values  # noqa: E402
from hloref.fuzz.oracles.xla import run_hlo  # noqa: E402
from hloref.types import element_type  # noqa: E402

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                    suppress_health_check=list(HealthCheck))

TYPES = ["f32", "bf16", "f16", "s32", "pred", "f8e4m3fn"]


def _values(rng, et_name, shape):
    et = element_type(et_name)
    if et.is_pred:
        return rng.integers(0, 2, shape).astype(bool)
    if et.is_integer:
        return rng.integers(-50, 50, shape).astype(et.dtype)
    scale = 4.0 if et_name == "f8e4m3fn" else 100.0
    v = rng.uniform(-scale, scale, shape)
    # ties for max/min and some signed zeros
    v[rng.random(shape) < 0.15] = 0.0
    v[rng.random(shape) < 0.1] = -0.0
    return v.astype(et.dtype)


def _scalar(et_name, value):
    return np.asarray(value).astype(element_type(et_name).dtype)


def _dims(dims):
    return ",".join(str(d) for d in dims)


@st.composite
def window_case(draw, max_rank=3, allow_dilation=True):
    rank = draw(st.integers(1, max_rank))
    shape, wins = [], []
    for _ in range(rank):
        n = draw(st.integers(1, 5))
        size = draw(st.integers(1, 3))
        stride = draw(st.integers(1, 3))
        base = draw(st.integers(1, 2)) if allow_dilation else 1
        wdil = draw(st.integers(1, 2)) if allow_dilation else 1
        lo = draw(st.integers(-1, 2))
        hi = draw(st.integers(-1, 2))
        padded = n + (n - 1) * (base - 1) + lo + hi
        span = (size - 1) * wdil + 1
        if padded < span:  # make it valid: grow the high padding
            hi += span - padded
            padded = span
        out = (padded - span) // stride + 1
        shape.append(n)
        wins.append((size, stride, lo, hi, base, wdil, out))
    return tuple(shape), wins


def _window_text(wins, dilation=True):
    x = lambda i: "x".join(str(w[i]) for w in wins)  # noqa: E731
    text = f"size={x(0)} stride={x(1)} pad=" + "x".join(f"{w[2]}_{w[3]}" for w in wins)
    if dilation:
        text += f" lhs_dilate={x(4)} rhs_dilate={x(5)}"
    return text


def _reducer(name, ty, op):
    return (f"{name} {{\n  a = {ty}[] parameter(0)\n  b = {ty}[] parameter(1)\n"
            f"  ROOT r = {ty}[] {op}(a, b)\n}}\n")


def _reduce_window_module(ty, op, shape, wins) -> str:
    """``reduce-window(x, c)`` of ``ty[shape]`` with reducer ``op`` and window ``wins``."""
    out = tuple(w[6] for w in wins)
    return (f"HloModule rw\n{_reducer('r', ty, op)}\nENTRY main {{\n"
            f"  x = {ty}[{_dims(shape)}] parameter(0)\n  c = {ty}[] parameter(1)\n"
            f"  ROOT s = {ty}[{_dims(out)}] reduce-window(x, c), to_apply=r, "
            f"window={{{_window_text(wins)}}}\n}}\n")


def _check(text, args, opcode, atol=None):
    xla = run_hlo(text, *args)
    ours = evaluate(text, *args)
    verdict = compare_values(xla, ours, opcode=opcode, atol=atol)
    assert verdict.ok, f"{verdict}\n{text}\nxla={xla}\nours={ours}"
    return xla, ours


# ---------------------------------------------------------------------------
# reduce-window
# ---------------------------------------------------------------------------

@seed(1)
@SETTINGS
@given(case=window_case(), ty=st.sampled_from(TYPES),
       kind=st.sampled_from(["add", "max", "min", "add_init"]), vseed=st.integers(0, 2**16))
def test_reduce_window_vs_xla(case, ty, kind, vseed):
    shape, wins = case
    rng = np.random.default_rng(vseed)
    et = element_type(ty)
    if et.is_pred:
        op, init = {"add": ("or", False), "add_init": ("or", True), "max": ("and", True),
                    "min": ("and", False)}[kind]
    elif kind in ("add", "add_init"):
        op, init = "add", (0 if kind == "add" else 3)
    else:
        op = "maximum" if kind == "max" else "minimum"
        if et.is_integer:
            init = np.iinfo(et.dtype).min if kind == "max" else np.iinfo(et.dtype).max
        elif ty == "f8e4m3fn":
            init = -448.0 if kind == "max" else 448.0
        else:
            init = -np.inf if kind == "max" else np.inf
    text = _reduce_window_module(ty, op, shape, wins)
    x = _values(rng, ty, shape)
    c = _scalar(ty, init)
    atol = None
    if op == "add" and (et.is_float):
        k = int(np.prod([w[0] for w in wins]))
        atol = float(accumulation_atol(k + 1, np.abs(x.astype(np.float64)).sum() * 2 + abs(init),
                                       et))
    _check(text, (x, c), "reduce-window", atol=atol)


@pytest.mark.parametrize("ty,kind", [("f32", "max"), ("f32", "min"), ("bf16", "max"),
                                     ("s32", "max"), ("s32", "min"), ("s32", "add"),
                                     ("pred", "max"), ("pred", "min"), ("pred", "add")])
@seed(2)
@settings(max_examples=4, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(case=window_case(), vseed=st.integers(0, 2**16))
def test_reduce_window_folded_one_window_position_at_a_time_vs_xla(case, vseed, ty, kind):
    """Windows too large to copy (XLA's cost-analysis test: a 2,047-wide max window over
    2x3x1024x1024, 51 GB) are folded position by position when the reducer does not care
    about the order (max/min with NaN and signed zeros, integer and bool arithmetic):
    forced here with WINDOW_BYTES = 0, against XLA:CPU."""
    from hloref.evaluator import windows
    shape, wins = case
    rng = np.random.default_rng(vseed)
    et = element_type(ty)
    if et.is_pred:
        op, init = {"add": ("xor", False), "max": ("or", False), "min": ("and", True)}[kind]
    elif kind == "add":
        op, init = "add", 0
    else:
        op = "maximum" if kind == "max" else "minimum"
        init = (np.iinfo(et.dtype).min if kind == "max" else np.iinfo(et.dtype).max) \
            if et.is_integer else (-np.inf if kind == "max" else np.inf)
    text = _reduce_window_module(ty, op, shape, wins)
    x = _values(rng, ty, shape)
    if et.is_float and x.size > 1:
        x.flat[rng.integers(0, x.size)] = np.nan
    saved, windows.WINDOW_BYTES = windows.WINDOW_BYTES, 0
    try:
        xla, ours = _check(text, (x, _scalar(ty, init)), "reduce-window")
    finally:
        windows.WINDOW_BYTES = saved
    zeros = np.asarray(xla, np.float64) == 0  # a zero's sign (a NaN's is unspecified)
    np.testing.assert_array_equal(np.signbit(np.asarray(xla, np.float64))[zeros],
                                  np.signbit(np.asarray(ours, np.float64))[zeros])


def test_reduce_window_padding_is_skipped_not_init():
    """A non-identity init counts once per window, padding adds nothing (XLA's rule)."""
    text = (f"HloModule rw\n{_reducer('r', 'f32', 'add')}\nENTRY main {{\n"
            "  x = f32[4] parameter(0)\n  c = f32[] parameter(1)\n"
            "  ROOT s = f32[4] reduce-window(x, c), to_apply=r, window={size=3 pad=1_1}\n}\n")
    x = np.array([1, 2, 3, 4], np.float32)
    xla, ours = _check(text, (x, np.float32(100)), "reduce-window")
    np.testing.assert_array_equal(ours, [103, 106, 109, 107])


ARGMAX = """HloModule argmax
r {
  av = {ty}[] parameter(0)
  ai = s32[] parameter(1)
  bv = {ty}[] parameter(2)
  bi = s32[] parameter(3)
  gt = pred[] compare(av, bv), direction=GT
  eq = pred[] compare(av, bv), direction=EQ
  lt = pred[] compare(ai, bi), direction=LT
  tie = pred[] and(eq, lt)
  pick = pred[] or(gt, tie)
  v = {ty}[] select(pick, av, bv)
  i = s32[] select(pick, ai, bi)
  ROOT t = ({ty}[], s32[]) tuple(v, i)
}
ENTRY main {
  x = {ty}[{dims}] parameter(0)
  ix = s32[{dims}] parameter(1)
  c = {ty}[] parameter(2)
  ci = s32[] parameter(3)
  ROOT s = ({ty}[{out}], s32[{out}]) reduce-window(x, ix, c, ci), to_apply=r, window={{win}}
}
"""


@seed(2)
@SETTINGS
@given(case=window_case(max_rank=2), ty=st.sampled_from(["f32", "bf16", "s32", "f8e4m3fn"]),
       vseed=st.integers(0, 2**16))
def test_reduce_window_variadic_argmax_vs_xla(case, ty, vseed):
    shape, wins = case
    rng = np.random.default_rng(vseed)
    et = element_type(ty)
    out = tuple(w[6] for w in wins)
    text = (ARGMAX.replace("{ty}", ty).replace("{dims}", _dims(shape))
            .replace("{out}", _dims(out)).replace("{win}", _window_text(wins)))
    x = _values(rng, ty, shape)
    x = np.abs(x.astype(np.float64)).round().astype(et.dtype) if not et.is_integer else x
    ix = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    low = np.iinfo(np.int32).min if et.is_integer else (-448.0 if ty == "f8e4m3fn" else -np.inf)
    _check(text, (x, ix, _scalar(ty, low), np.int32(-1)), "reduce-window")


def test_reduce_window_non_vectorizable_reducer():
    """A reducer with a nested call of a non-elementwise op runs sequentially."""
    text = """HloModule rw
inner {
  p = f32[1] parameter(0)
  ROOT q = f32[1] reverse(p), dimensions={0}
}
r {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  m = f32[] maximum(a, b)
  bm = f32[1] broadcast(m), dimensions={}
  c = f32[1] call(bm), to_apply=inner
  ROOT s = f32[] reshape(c)
}
ENTRY main {
  x = f32[3,5] parameter(0)
  c = f32[] parameter(1)
  ROOT s = f32[2,2] reduce-window(x, c), to_apply=r, window={size=2x3 stride=1x2 pad=0_0x0_1}
}
"""
    x = np.random.default_rng(3).standard_normal((3, 5)).astype(np.float32)
    _check(text, (x, np.float32(-np.inf)), "reduce-window")


# ---------------------------------------------------------------------------
# select-and-scatter (max-pool gradient as JAX lowers it)
# ---------------------------------------------------------------------------

def _maxpool_grad_hlo(shape, window, strides, padding, dtype):
    import jax
    import jax.numpy as jnp

    def pool(x):
        return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, window, strides, padding)

    def loss(x, g):
        return jnp.sum(pool(x) * g)

    x = jnp.zeros(shape, dtype)
    g = pool(x)
    return jax.jit(jax.grad(loss)).lower(x, g).as_text(dialect="hlo"), g.shape


@seed(4)
@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(case=window_case(max_rank=3, allow_dilation=False), dtype=st.sampled_from(["float32", "bfloat16"]),
       vseed=st.integers(0, 2**16))
def test_select_and_scatter_maxpool_grad_vs_xla(case, dtype, vseed):
    shape, wins = case
    window = tuple(w[0] for w in wins)
    strides = tuple(w[1] for w in wins)
    padding = tuple((max(w[2], 0), max(w[3], 0)) for w in wins)
    text, gshape = _maxpool_grad_hlo(shape, window, strides, padding, dtype)
    if "select-and-scatter" not in text:
        pytest.skip("JAX did not lower to select-and-scatter")
    rng = np.random.default_rng(vseed)
    dt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(np.float32)
    # few distinct values, so ties exercise the first-in-window rule
    x = rng.integers(-3, 4, shape).astype(dt)
    g = rng.integers(-8, 9, gshape).astype(dt)
    k = int(np.prod(window))
    _check(text, (x, g), "select-and-scatter",
           atol=float(accumulation_atol(k, 8.0 * k, element_type("bf16" if dtype == "bfloat16" else "f32"))))


def test_select_and_scatter_padding_and_overlap():
    text = """HloModule sas
ge {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GE
}
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
ENTRY main {
  x = f32[4,5] parameter(0)
  s = f32[3,3] parameter(1)
  i = f32[] constant(0.5)
  ROOT r = f32[4,5] select-and-scatter(x, s, i), select=ge, scatter=add,
      window={size=2x3 stride=1x2 pad=0_0x1_1}
}
"""
    x = np.array([[1, 1, 2, 0, 2], [3, 0, 3, 1, 0], [1, 1, 1, 1, 1], [0, 5, 0, 5, 0]], np.float32)
    s = np.arange(1, 10, dtype=np.float32).reshape(3, 3)
    xla, ours = _check(text, (x, s), "select-and-scatter")
    # hand check: window (0,0) covers pad,x[0,0:2],pad,x[1,0:2] -> first max is x[1,0]=3
    assert ours[1, 0] == 0.5 + 1 + 4  # chosen by windows (0,0) and (1,0)


# ---------------------------------------------------------------------------
# map
# ---------------------------------------------------------------------------

MAP = """HloModule mp
f {
  a = {ty}[] parameter(0)
  b = {ty}[] parameter(1)
  m = {ty}[] multiply(a, b)
  c = {ty}[] constant(3)
  s = {ty}[] subtract(m, c)
  g = pred[] compare(a, b), direction=GT
  ROOT r = {ty}[] select(g, s, b)
}
ENTRY main {
  x = {ty}[{dims}] parameter(0)
  y = {ty}[{dims}] parameter(1)
  ROOT m = {ty}[{dims}] map(x, y), dimensions={{alldims}}, to_apply=f
}
"""


@seed(5)
@SETTINGS
@given(shape=st.lists(st.integers(0, 4), min_size=0, max_size=3),
       ty=st.sampled_from(["f32", "bf16", "f16", "s32", "f8e4m3fn"]), vseed=st.integers(0, 2**16))
def test_map_vs_xla(shape, ty, vseed):
    rng = np.random.default_rng(vseed)
    dims = _dims(shape)
    text = (MAP.replace("{ty}", ty).replace("{dims}", dims)
            .replace("{alldims}", ",".join(str(i) for i in range(len(shape)))))
    x, y = _values(rng, ty, shape), _values(rng, ty, shape)
    if ty == "f8e4m3fn":
        x, y = (np.clip(v.astype(np.float32), -12, 12).astype(v.dtype) for v in (x, y))
    _check(text, (x, y), "map")


def test_map_pred_and_non_vectorizable():
    text = """HloModule mp
add {
  x = s32[] parameter(0)
  y = s32[] parameter(1)
  ROOT z = s32[] add(x, y)
}
inner {
  p = s32[2] parameter(0)
  ROOT q = s32[2] reverse(p), dimensions={0}
}
f {
  a = pred[] parameter(0)
  b = s32[] parameter(1)
  c = s32[] convert(a)
  s = s32[] add(b, c)
  t = s32[2] broadcast(s), dimensions={}
  u = s32[2] call(t), to_apply=inner
  ROOT r = s32[] reduce(u, c), dimensions={0}, to_apply=add
}
ENTRY main {
  x = pred[2,3] parameter(0)
  y = s32[2,3] parameter(1)
  ROOT m = s32[2,3] map(x, y), dimensions={0,1}, to_apply=f
}
"""
    rng = np.random.default_rng(6)
    x = rng.integers(0, 2, (2, 3)).astype(bool)
    y = rng.integers(-100, 100, (2, 3)).astype(np.int32)
    xla, ours = _check(text, (x, y), "map")
    np.testing.assert_array_equal(ours, 2 * (y + x) + x)


# ---------------------------------------------------------------------------
# scan (XLA:CPU accepts the opcode in text; jaxlib 0.10.2)
# ---------------------------------------------------------------------------

SCAN = """HloModule sc
f {
  a = {ty}[{inner}] parameter(0)
  c = {ty}[{inner}] parameter(1)
  s = {ty}[{inner}] add(a, c)
  m = {ty}[{inner}] maximum(a, c)
  d = {ty}[{inner}] subtract(a, c)
  ROOT t = ({ty}[{inner}], {ty}[{inner}], {ty}[{inner}]) tuple(s, d, m)
}
ENTRY main {
  x = {ty}[{dims}] parameter(0)
  c = {ty}[{inner}] parameter(1)
  ROOT s = ({ty}[{dims}], {ty}[{dims}], {ty}[{inner}]) scan(x, c), to_apply=f, dimensions={{d}}, num_carries=1{rev}
}
"""


@seed(7)
@SETTINGS
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3), data=st.data(),
       ty=st.sampled_from(["f32", "s32", "bf16"]), reverse=st.booleans(),
       vseed=st.integers(0, 2**16))
def test_scan_vs_xla_and_numpy(shape, data, ty, reverse, vseed):
    d = data.draw(st.integers(0, len(shape) - 1))
    inner = [n for i, n in enumerate(shape) if i != d]
    rng = np.random.default_rng(vseed)
    text = (SCAN.replace("{ty}", ty).replace("{dims}", _dims(shape)).replace("{inner}", _dims(inner))
            .replace("{d}", str(d)).replace("{rev}", ", is_reverse=true" if reverse else ""))
    x = _values(rng, ty, shape)
    c = _values(rng, ty, inner)
    _check(text, (x, c), "scan")
    # numpy: the carry is a running maximum; output 0 is x + carry-before-step
    ours = evaluate(text, x, c)
    xs = np.moveaxis(x.astype(np.float64), d, 0)
    order = range(xs.shape[0] - 1, -1, -1) if reverse else range(xs.shape[0])
    carry = c.astype(np.float64)
    want = np.empty_like(xs)
    for i in order:
        want[i] = xs[i] + carry
        carry = np.maximum(xs[i], carry)
    if ty == "s32":
        np.testing.assert_array_equal(np.moveaxis(ours[0].astype(np.float64), d, 0), want)
    np.testing.assert_array_equal(ours[2].astype(np.float64), carry)


def test_scan_no_carries_and_several_inputs():
    text = """HloModule sc
f {
  a = f32[2] parameter(0)
  b = s32[2] parameter(1)
  c = f32[2] convert(b)
  d = f32[2] add(a, c)
  ROOT t = (f32[2]) tuple(d)
}
ENTRY main {
  x = f32[2,3] parameter(0)
  y = s32[2,3] parameter(1)
  ROOT s = (f32[2,3]) scan(x, y), to_apply=f, dimensions={1}, num_carries=0
}
"""
    x = np.full((2, 3), 0.5, np.float32)
    y = np.arange(6, dtype=np.int32).reshape(2, 3)
    xla, ours = _check(text, (x, y), "scan")
    np.testing.assert_array_equal(ours[0], y.astype(np.float32) + 0.5)


def test_reduce_window_per_element_reducer_skips_padding():
    # a reducer with an op that is not elementwise-vectorisable (reduce-precision) runs
    # per output element; the padding positions are skipped (XLA:CPU's rule, see
    # docs/semantics.md). By hand: windows of 3 over [pad, 1, 2, 4, pad]
    text = """HloModule m
add_rp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  s = f32[] add(a, b)
  ROOT r = f32[] reduce-precision(s), exponent_bits=8, mantissa_bits=23
}
ENTRY e {
  x = f32[3] parameter(0)
  z = f32[] constant(0)
  ROOT w = f32[3] reduce-window(x, z), window={size=3 pad=1_1}, to_apply=add_rp
}
"""
    out = evaluate(text, np.array([1, 2, 4], np.float32))
    np.testing.assert_array_equal(out, [3, 7, 6])
