"""``rng`` (``distribution=rng_uniform|rng_normal``) inside computations that ops call on
every element (map bodies, reducers, scatter combiners): a device form in
``gpu/computation.py`` (a Philox counter per draw, ``gpu/rng.py``), ``fallback=False``
throughout, launches of 8 threads x 4 blocks (conftest), so threads draw many times.

Draws are implementation-defined (XLA: values from the distribution; the CPU backend
takes them from its stream in call order, the GPU from per-thread counters), so no test
compares GPU values with CPU values: each backend's values are checked against the
written distribution, the same checks for both: every value in [a, b) (uniform), the
values differ from element to element, and sample statistics within bounds derived by
hand below (the generators are deterministic, so each check is a fixed outcome; the
bounds are 6 standard errors, a chance of about 2e-9 for a true generator to miss).

(XLA:CPU, jaxlib 0.10.2, aborts compiling a reduce or a map whose computation holds an
``rng``: "ComputeOutputToInputIndexing is not implemented for opcode
rng-get-and-update-state", then ``std::length_error`` from a SmallVector: no XLA here.)
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import hloref

from gpu_check import module

BACKENDS = ["gpu", "cpu"]


def run(text, *args, backend):
    kw = {"fallback": False} if backend == "gpu" else {}
    return np.asarray(hloref.evaluate(text, *args, backend=backend, **kw))


def map_rng(t, n, dist, a, b):
    """``map`` over ``t[n]`` zeros whose body is ``x + rng(a, b)``: the draws themselves."""
    body = f"""
body {{
  x = {t}[] parameter(0)
  lo = {t}[] constant({a})
  hi = {t}[] constant({b})
  r = {t}[] rng(lo, hi), distribution={dist}
  ROOT s = {t}[] add(x, r)
}}
"""
    return module([f"{t}[{n}]"], "map(p0), dimensions={0}, to_apply=body", f"{t}[{n}]",
                  extra=body)


def as_f64(x):
    return np.asarray(x).astype(np.float64)


# uniform over [a, b): every value inside, the values spread (mean within 6 standard
# errors: sd of U[a, b) is (b - a) / sqrt(12), of the mean sd / sqrt(n)), and different
# elements draw different values (f32 in [2, 5) has ~10.5M values: the birthday count of
# equal pairs among 2048 draws is ~0.2, so a few at most; f64: none)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("t,dtype", [("f32", np.float32), ("f64", np.float64)])
def test_uniform_float_in_a_map(backend, t, dtype):
    n, a, b = 2048, 2.0, 5.0
    out = run(map_rng(t, n, "rng_uniform", a, b), np.zeros(n, dtype), backend=backend)
    assert out.dtype == dtype and out.shape == (n,)
    assert (out >= a).all() and (out < b).all()
    sd = (b - a) / math.sqrt(12)
    assert abs(out.mean() - (a + b) / 2) < 6 * sd / math.sqrt(n)
    assert len(np.unique(out)) >= (n - 4 if t == "f32" else n)
    # each third of [a, b) holds about n / 3 draws (binomial sd sqrt(n 1/3 2/3) ~ 21)
    thirds = np.histogram(out, bins=3, range=(a, b))[0]
    assert (abs(thirds - n / 3) < 6 * math.sqrt(n * 2 / 9)).all()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("t,dtype,a,b", [
    ("s32", np.int32, -3, 4),
    ("u8", np.uint8, 250, 255),
    ("s8", np.int8, -128, 127),
])
def test_uniform_integer_in_a_map(backend, t, dtype, a, b):
    """Integers: each value of [a, b) about n / (b - a) times (binomial sd
    sqrt(n p (1 - p)), 6 of them), nothing outside."""
    n = 2048
    out = run(map_rng(t, n, "rng_uniform", a, b), np.zeros(n, dtype), backend=backend)
    assert out.dtype == dtype
    wide = out.astype(np.int64)
    assert (wide >= a).all() and (wide < b).all()
    k = b - a
    counts = np.bincount(wide - a, minlength=k)
    p = 1 / k
    assert (abs(counts - n * p) < 6 * math.sqrt(n * p * (1 - p))).all()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("t,dtype,a,b", [
    ("s64", np.int64, -2 ** 63, 2 ** 63 - 1),  # b - a = 2**64 - 1: the rejection bound
    ("u64", np.uint64, 0, 2 ** 64 - 1),
    ("s64", np.int64, -5, 2 ** 62),
])
def test_uniform_wide_integers(backend, t, dtype, a, b):
    """64-bit spans: values inside [a, b), all different (2048 draws from >= 2**62
    values), both halves of the range hit about equally (sd sqrt(n) / 2)."""
    n = 2048
    out = run(map_rng(t, n, "rng_uniform", a, b), np.zeros(n, dtype), backend=backend)
    vals = [int(v) for v in out]
    assert all(a <= v < b for v in vals)
    assert len(set(vals)) == n
    mid = (a + b) // 2
    low = sum(v < mid for v in vals)
    assert abs(low - n / 2) < 6 * math.sqrt(n) / 2


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("t,dtype", [("f32", np.float32), ("f64", np.float64),
                                     ("bf16", ml_dtypes.bfloat16)])
def test_normal_in_a_map(backend, t, dtype):
    """N(mu, sigma): the sample mean within 6 sigma / sqrt(n) of mu, the sample sd within
    6 sigma / sqrt(2 n) of sigma (its standard error for a normal), 1.96 sigma around mu
    holding 95% (binomial sd sqrt(n 0.95 0.05)). bf16 rounds each value to 8 bits
    (relative 2**-9): well inside these bounds."""
    n, mu, sigma = 2048, 1.5, 2.0
    out = as_f64(run(map_rng(t, n, "rng_normal", mu, sigma), np.zeros(n, dtype),
                     backend=backend))
    assert np.isfinite(out).all()
    assert abs(out.mean() - mu) < 6 * sigma / math.sqrt(n)
    assert abs(out.std() - sigma) < 6 * sigma / math.sqrt(2 * n)
    inside = np.mean(abs(out - mu) < 1.96 * sigma)
    assert abs(inside - 0.95) < 6 * math.sqrt(0.95 * 0.05 / n)
    if t != "bf16":
        assert len(np.unique(out)) == n


REDUCE = """
red {{
  x = {t}[] parameter(0)
  y = {t}[] parameter(1)
  lo = {t}[] constant({a})
  hi = {t}[] constant({b})
  r = {t}[] rng(lo, hi), distribution=rng_uniform
  s = {t}[] add(x, y)
  ROOT u = {t}[] add(s, r)
}}
"""


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("t,dtype,a,b", [("f32", np.float32, 0.0, 1.0),
                                         ("s32", np.int32, 10, 20)])
def test_uniform_in_a_reducer(backend, t, dtype, a, b):
    """A reduce of zeros over k = 9 elements calls the reducer 9 times (in any order),
    each adding one draw: every row's result in [9 a, 9 b) (floats: the sum rounded in
    f32, within a few ulps), the rows (64) different, their mean near 9 (a + b) / 2
    (sd of a sum of 9 draws: 3 (b - a) / sqrt(12), of the mean over 64 rows / 8; the
    integers' sd: 3 sqrt(((b - a)**2 - 1) / 12))."""
    rows, k = 64, 9
    text = module([f"{t}[{rows},{k}]", f"{t}[]"], "reduce(p0, p1), dimensions={1}, to_apply=red",
                  f"{t}[{rows}]", extra=REDUCE.format(t=t, a=a, b=b))
    out = run(text, np.zeros((rows, k), dtype), dtype(0), backend=backend)
    wide = as_f64(out)
    slack = 1e-5 if t == "f32" else 0
    assert (wide >= k * a - slack).all() and (wide < k * b + slack).all()
    if t == "s32":
        assert (wide <= k * (b - 1)).all()
    # f32 sums differ row to row; s32 sums take ~80 values with sd ~8.6: many of them
    assert len(np.unique(out)) >= (rows - 2 if t == "f32" else 12)
    span = b - a
    var = (span ** 2 - 1) / 12 if t == "s32" else span ** 2 / 12
    sd = 3 * math.sqrt(var) / math.sqrt(rows)
    mean = k * ((a + b - 1) / 2 if t == "s32" else (a + b) / 2)
    assert abs(wide.mean() - mean) < 6 * sd


@pytest.mark.parametrize("backend", BACKENDS)
def test_bounds_from_the_operands_and_a_scatter_combiner(backend):
    """Runtime bounds: ``rng(lo[i], hi[i])`` in a map of two arrays (each value inside
    its own [lo, hi); lo >= hi gives lo, the CPU's rule); and a scatter whose combiner
    adds a draw in [0, 1) to the update: each updated element in [u, u + 1)."""
    body = """
body {
  lo = f64[] parameter(0)
  hi = f64[] parameter(1)
  ROOT r = f64[] rng(lo, hi), distribution=rng_uniform
}
"""
    n = 512
    text = module(["f64[512]", "f64[512]"], "map(p0, p1), dimensions={0}, to_apply=body",
                  "f64[512]", extra=body)
    lo = np.linspace(-100, 100, n)
    hi = lo + np.linspace(0.5, 3, n)
    hi[::7] = lo[::7]  # empty ranges: lo
    hi[3::11] = lo[3::11] - 1
    out = run(text, lo, hi, backend=backend)
    empty = ~(lo < hi)
    assert (out[empty] == lo[empty]).all()
    assert (out[~empty] >= lo[~empty]).all() and (out[~empty] < hi[~empty]).all()
    assert len(np.unique(out[~empty])) == int((~empty).sum())

    comb = """
comb {
  old = f32[] parameter(0)
  upd = f32[] parameter(1)
  z = f32[] constant(0)
  o = f32[] constant(1)
  r = f32[] rng(z, o), distribution=rng_uniform
  ROOT s = f32[] add(upd, r)
}
"""
    text = module(["f32[40]", "s32[30,1]", "f32[30]"],
                  "scatter(p0, p1, p2), update_window_dims={}, inserted_window_dims={0}, "
                  "scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=comb",
                  "f32[40]", extra=comb)
    idx = np.arange(30, dtype=np.int32).reshape(30, 1) + 5  # unique indices 5..34
    upd = np.arange(30, dtype=np.float32) * 2
    out = run(text, np.full(40, -7, np.float32), idx, upd, backend=backend)
    assert (out[:5] == -7).all() and (out[35:] == -7).all()
    got = out[5:35]
    assert (got >= upd).all() and (got < upd + 1).all()
    assert len(np.unique(got - upd)) >= 29


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_loop_that_draws_until_zero(backend):
    """``while r != 0: r = rng(0, 3)`` in a map body: its state can come back unchanged
    with the condition holding (a 1 drawn twice), which is no endless loop when the body
    draws; every element ends at 0 (a run of 200 non-zeros has chance (2/3)**200)."""
    extra = """
cond {
  r = s32[] parameter(0)
  z = s32[] constant(0)
  ROOT c = pred[] compare(r, z), direction=NE
}
step {
  r = s32[] parameter(0)
  z = s32[] constant(0)
  three = s32[] constant(3)
  ROOT d = s32[] rng(z, three), distribution=rng_uniform
}
body {
  x = s32[] parameter(0)
  ROOT w = s32[] while(x), condition=cond, body=step
}
"""
    text = module(["s32[256]"], "map(p0), dimensions={0}, to_apply=body", "s32[256]",
                  extra=extra)
    out = run(text, np.ones(256, np.int32), backend=backend)
    assert (out == 0).all()


def test_gpu_draws_are_the_same_in_each_evaluation():
    """A fresh evaluation of the same module draws the same values (as the CPU's fresh
    interpreter does), and the two rng instructions of one body draw differently."""
    body = """
body {
  x = f32[] parameter(0)
  lo = f32[] constant(0)
  hi = f32[] constant(1)
  r1 = f32[] rng(lo, hi), distribution=rng_uniform
  r2 = f32[] rng(lo, hi), distribution=rng_uniform
  ROOT s = f32[] subtract(r1, r2)
}
"""
    text = module(["f32[300]"], "map(p0), dimensions={0}, to_apply=body", "f32[300]",
                  extra=body)
    x = np.zeros(300, np.float32)
    first = run(text, x, backend="gpu")
    assert (first == run(text, x, backend="gpu")).all()
    assert (first != 0).all() and (abs(first) < 1).all()
