"""Complex triangular-solve of a 1x1 triangle inside a computation that ``map`` calls on
every element (``gpu/computation_formulas.py``: ``complex_triangular_solve``),
``fallback=False``: c64 and c128, left and right side, NO_TRANSPOSE, TRANSPOSE and
ADJOINT, with and without a unit diagonal, on random parts over a wide exponent range
and special parts (signed zeros, infinities, NaN, the largest and subnormal values).
Each result against the CPU backend bit for bit and against the CPU's written
arithmetic done by hand with numpy: the inverse ``(1 + 0i) / t`` by numpy's complex
division, then ``inv x b`` (or ``b x inv``) part by part plus 0, rounded once.

No XLA here: XLA:CPU (jaxlib 0.10.2) aborts compiling a map whose computation holds ops
its loop-fusion emitter cannot index (see test_gpu_computation_one_element.py).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from gpu_check import bits_equal, check

SPECIALS = [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e308, -3e-310, 5e-324, 1e-300,
            3e200, 1.5, 1e-160, 1e160]


def operands(dt, n):
    """``n`` pairs ``(a, b)``: random parts of exponents -30..30 (c128: -200..200),
    a quarter of the parts special values, then a block of special parts."""
    rng = np.random.default_rng(31)
    part = np.float32 if dt == np.complex64 else np.float64
    span = 30 if dt == np.complex64 else 200
    r = rng.standard_normal((n, 4)) * 10.0 ** rng.integers(-span, span, (n, 4))
    mask = rng.random((n, 4)) < 0.25
    r[mask] = rng.choice(np.array(SPECIALS), int(mask.sum()))
    pairs = np.array(list(itertools.product([0.0, -0.0, 1.0, np.inf, np.nan, 1e-300],
                                            repeat=2)))
    r[:len(pairs), :2] = pairs
    r[-len(pairs):, 2:] = pairs
    a, b = np.empty(n, dt), np.empty(n, dt)
    with np.errstate(all="ignore"):
        a.real, a.imag, b.real, b.imag = (r[:, k].astype(part) for k in range(4))
    return a, b


def by_hand(a, b, left, unit, trans, dt):
    """The CPU's c128 steps written out with numpy."""
    t = np.ones(len(a), np.complex128) if unit else a.astype(np.complex128)
    if trans == "ADJOINT":
        t = np.conj(t)
    with np.errstate(all="ignore"):
        inv = np.ones(len(a), np.complex128) / t  # numpy's Smith division
        b = b.astype(np.complex128)
        (xr, xi), (yr, yi) = ((inv.real, inv.imag), (b.real, b.imag)) if left else \
            ((b.real, b.imag), (inv.real, inv.imag))
        out = np.empty(len(a), np.complex128)
        out.real = (xr * yr - xi * yi) + 0.0
        out.imag = (xr * yi + xi * yr) + 0.0
    return out.astype(dt)


@pytest.mark.parametrize("t", ["c64", "c128"])
@pytest.mark.parametrize("left,unit,trans", [
    (True, False, "NO_TRANSPOSE"), (False, False, "TRANSPOSE"), (True, False, "ADJOINT"),
    (False, False, "ADJOINT"), (True, True, "ADJOINT"), (False, True, "NO_TRANSPOSE")])
def test_complex_triangular_solve_of_one_element(t, left, unit, trans):
    dt = np.complex64 if t == "c64" else np.complex128
    n = 96
    a, b = operands(dt, n)
    text = f"""HloModule m
body {{
  x = {t}[] parameter(0)
  y = {t}[] parameter(1)
  a = {t}[1,1] reshape(x)
  b = {t}[1,1] reshape(y)
  s = {t}[1,1] triangular-solve(a, b), left_side={str(left).lower()}, lower=true, unit_diagonal={str(unit).lower()}, transpose_a={trans}
  ROOT r = {t}[] reshape(s)
}}
ENTRY e {{
  p = {t}[{n}] parameter(0)
  q = {t}[{n}] parameter(1)
  ROOT m = {t}[{n}] map(p, q), dimensions={{0}}, to_apply=body
}}
"""
    got = np.asarray(check(text, a, b, xla=False))
    want = by_hand(a, b, left, unit, trans, dt)
    assert bits_equal(got.real, want.real) and bits_equal(got.imag, want.imag)
