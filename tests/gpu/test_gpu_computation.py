"""Computations compiled for the device (gpu/computation.py): general and variadic
reducers (jax's argmax/argmin), reducers that are not one op, and map, on the GPU backend
(fallback disabled) against the cpu backend (bit for bit) and XLA:CPU."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hloref
from hloref.fuzz.compare import accumulation_atol
from hloref.types import element_type

from gpu_check import RNG, check, module, values


@pytest.mark.parametrize("t", ["float32", "bfloat16", "int32", "uint8"])
def test_jax_argmax_argmin(t):
    x = values({"float32": "f32", "bfloat16": "bf16", "int32": "s32", "uint8": "u8"}[t], (6, 9))
    if x.dtype.kind == "f" or t == "bfloat16":
        x.reshape(-1)[10:19] = x.reshape(-1)[1]  # ties
    fn = jax.jit(lambda a: (jnp.argmax(a, axis=1), jnp.argmin(a, axis=0),
                            jnp.argmax(a.reshape(-1))))
    text = fn.lower(x).as_text(dialect="hlo")
    out = check(text, x, xla="required")
    ref = fn(x)
    for got, want in zip(out, ref):
        assert np.array_equal(got, np.asarray(want))  # jax itself, independent


ADD_COPY = """
red {{
  x = {t}[] parameter(0)
  y = {t}[] parameter(1)
  s = {t}[] add(x, y)
  ROOT r = {t}[] copy(s)
}}
"""


@pytest.mark.parametrize("t", ["f32", "bf16", "f16", "s8"])
def test_reducer_not_one_op_runs_in_tree_order(t):
    # ``copy(add)`` is not recognised as a plain add: the general kernel runs it, rounding
    # each step to the type in the cpu's pairwise tree order (bit-exact with the cpu)
    x = values(t, (5, 13, 4), kind="unit" if t[0] in "fb" else "small")
    text = module([f"{t}[5,13,4]", f"{t}[]"], "reduce(p0, p1), dimensions={1,2}, to_apply=red",
                  f"{t}[5]", extra=ADD_COPY.format(t=t))
    init = np.asarray(0).astype(x.dtype)
    atol = None
    if element_type(t).is_float:  # XLA:CPU adds in another order (each step rounded)
        atol = accumulation_atol(52, np.abs(x.astype(np.float64)).sum(axis=(1, 2)), element_type(t))
    check(text, x, init, opcode="reduce", xla="required", atol=atol)


VARIADIC = """HloModule v
red {
  a = s32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = f32[] parameter(3)
  s = s32[] add(a, c)
  m = f32[] maximum(b, d)
  ROOT t = (s32[], f32[]) tuple(s, m)
}
ENTRY e {
  x = s32[4,6] parameter(0)
  y = f32[4,6] parameter(1)
  z = s32[] constant(7)
  w = f32[] constant(-1)
  ROOT r = (s32[6], f32[6]) reduce(x, y, z, w), dimensions={0}, to_apply=red
}
"""


def test_variadic_reduce_by_hand():
    x = values("s32", (4, 6), kind="small")
    y = values("f32", (4, 6))
    s, m = check(VARIADIC, x, y, xla="required")
    assert np.array_equal(s, (x.astype(np.int64).sum(axis=0) + 7).astype(np.int32))  # wraps
    ref = np.max(np.concatenate([y, np.full((1, 6), -1, np.float32)]), axis=0)
    assert np.array_equal(m, ref, equal_nan=True)


MAP_BODY = """
body {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  c = {t}[] constant(1.5)
  p = {t}[] multiply(a, b)
  s = {t}[] add(p, c)
  g = pred[] compare(a, b), direction=GT
  ROOT r = {t}[] select(g, s, a)
}}
"""


@pytest.mark.parametrize("t", ["f32", "bf16", "f64", "f16"])
def test_map(t):
    a, b = values(t, (4, 5)), values(t, (4, 5))
    text = module([f"{t}[4,5]"] * 2, "map(p0, p1), dimensions={0,1}, to_apply=body", f"{t}[4,5]",
                  extra=MAP_BODY.format(t=t))
    # XLA:CPU may fuse a * b + 1.5 (one rounding instead of two): a bound on the
    # difference, which cancellation makes large relative to the result
    with np.errstate(all="ignore"):
        terms = np.abs(a.astype(np.float64) * b.astype(np.float64)) + 1.5
    atol = accumulation_atol(2, np.where(np.isfinite(terms), terms, 0), element_type(t))
    check(text, a, b, xla="required", atol=atol)


def test_map_integer_by_hand():
    body = """
body {
  a = s8[] parameter(0)
  c = s8[] constant(100)
  ROOT s = s8[] add(a, c)
}
"""
    text = module(["s8[4]"], "map(p0), dimensions={0}, to_apply=body", "s8[4]", extra=body)
    out = check(text, np.array([0, 27, 28, -128], np.int8), xla="required")
    assert out.tolist() == [100, 127, -128, -28]  # wraps at 8 bits


def test_fusion_with_an_extra_operand_ignores_it():
    # XLA's verifier accepts more operands than the fused computation's parameters
    # (findings/xla-cpu-jaxlib-0.10.2/fusion-extra-operand-aborts); by hand: negate(x)
    import numpy as np
    import hloref
    text = """HloModule m
fused { p = f32[3] parameter(0) ROOT n = f32[3] negate(p) }
ENTRY e { x = f32[3] parameter(0) y = f32[3] parameter(1)
  ROOT f = f32[3] fusion(x, y), kind=kLoop, calls=fused }"""
    x = np.array([1, -2, 3.5], np.float32)
    out = hloref.evaluate(text, x, np.zeros(3, np.float32), backend="gpu", fallback=False)
    np.testing.assert_array_equal(np.asarray(out), -x)
