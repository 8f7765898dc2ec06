"""scaled-dot of one-element operands inside a computation that ``map`` calls on every
element (``gpu/computation_formulas.py``: ``scaled_dot``), ``fallback=False``: scales of
rank 0 (the CPU's rule: a rank-0 scale is 1, its value ignored) beside scales of the
operands' rank, integer and pred operands and scales (their values in f64), and every
result kind (float, narrow float, integer, pred, complex). Each result against the CPU
backend bit for bit and by hand (the written semantics with the CPU's arithmetic:
f64 scaled operands, a one-term sum from +0, one rounding; float operands with an
integer result through f32).

No XLA here: XLA:CPU (jaxlib 0.10.2) runs no scaled-dot (test_gpu_dot_variants.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from hloref.evaluator.numeric import finish
from hloref.types import element_type

from gpu_check import bits_equal, check

FLOAT_X = [0.0, -0.0, 1.5, -2.5, 3.0, 0.1, -7.0, 1e-30, np.inf, -np.inf, np.nan, 5.0e30]
INT_X = [0, 1, -1, 3, -7, 100, 127, -128, 2, -3, 5, 9]
FLOAT_S = [3.0, 0.5, -2.0, 0.1, 1e-3, 4.0, -0.0, 1.0, 2.0, -1.5, 0.25, 8.0]
INT_S = [3, -2, 1, 0, 5, -1, 2, 7, -4, 1, 3, 2]

# (operand dims, lhs scale dims, rhs scale dims, the operands' dot attributes)
LAYOUTS = {
    "rhs scale rank 0": ("1,1", "1,1", "", "lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    "lhs scale rank 0": ("1,1", "", "1,1", "lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    "rank-0 operands": ("", "", "", ""),
}


def inputs(t, floats, ints):
    et = element_type(t)
    if et.is_pred:
        return (np.asarray(ints) % 2 != 0)
    return np.asarray(floats if et.is_float else ints).astype(et.dtype)


def f64(x):
    return np.asarray(x).astype(np.float64)


@pytest.mark.parametrize("lt,st,ot", [("f32", "f32", "f32"), ("bf16", "f32", "bf16"),
                                      ("f8e4m3fn", "f8e8m0fnu", "f32"), ("s8", "f32", "f32"),
                                      ("pred", "bf16", "f32"), ("f32", "s8", "s16"),
                                      ("s8", "s8", "s32"), ("f32", "f32", "c64"),
                                      ("u8", "f32", "pred")])
def test_scaled_dot_with_scalar_scales(lt, st, ot):
    """``map`` of ``scaled-dot(x, k, s, 2)`` (k = 3; the lhs scale ``s`` a parameter, the
    rhs scale a constant 2), each scale applied (``x s``, ``3 x 2``) only where it has
    the operands' rank; rank-0 operands have rank-0 scales: both ignored."""
    x = inputs(lt, FLOAT_X, INT_X)
    s = inputs(st, FLOAT_S, INT_S)
    if lt == "f8e4m3fn":
        x = np.asarray([0.0, -0.0, 1.5, -2.5, 3.0, 0.125, -7.0, 448, np.nan, 0.5, 2, 6],
                       np.float32).astype(x.dtype)
    if st == "f8e8m0fnu":
        s = np.asarray([2.0 ** e for e in range(-6, 6)], np.float32).astype(s.dtype)
    n = len(x)
    k = "true" if lt == "pred" else "3"
    two = "true" if st == "pred" else "2"
    for name, (dims, sad, sbd, attrs) in LAYOUTS.items():
        text = f"""HloModule m
body {{
  x = {lt}[] parameter(0)
  s = {st}[] parameter(1)
  a = {lt}[{dims}] reshape(x)
  kk = {lt}[] constant({k})
  b = {lt}[{dims}] broadcast(kk), dimensions={{}}
  sa = {st}[{sad}] reshape(s)
  t = {st}[] constant({two})
  sb = {st}[{sbd}] broadcast(t), dimensions={{}}
  d = {ot}[{dims}] scaled-dot(a, b, sa, sb){', ' + attrs if attrs else ''}
  ROOT y = {ot}[] reshape(d)
}}
ENTRY e {{
  p = {lt}[{n}] parameter(0)
  q = {st}[{n}] parameter(1)
  ROOT m = {ot}[{n}] map(p, q), dimensions={{0}}, to_apply=body
}}
"""
        got = np.asarray(check(text, x, s, xla=False))
        lhs = f64(x) * f64(s) if sad else f64(x)
        rhs = f64(np.ones(n) if lt == "pred" else np.full(n, 3.0)) * (2.0 if sbd else 1.0)
        et = element_type(ot)
        with np.errstate(all="ignore"):
            wide = lhs * rhs + 0.0
            if et.is_complex:
                want = wide.astype(et.dtype)
                fin = np.isfinite(wide)
                assert bits_equal(got[fin], want[fin]), name
                continue
            if et.is_pred:
                want = (lhs != 0) & (rhs != 0)
            elif et.is_integer and element_type(lt).is_float:
                w32 = np.nan_to_num(wide.astype(np.float32), nan=0.0)  # saturated, NaN 0
                want = np.clip(np.trunc(w32), et.min_value, et.max_value).astype(et.dtype)
            elif et.is_integer:
                want = (np.trunc(lhs).astype(np.int64) * np.trunc(rhs).astype(np.int64)
                        ).astype(et.dtype)
            else:
                want = finish(wide, et)
        assert bits_equal(got, want), (name, got, want)
