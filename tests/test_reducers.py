"""``fuzz/reducers.reorder_free``: which written reducers may be applied in any order.

Expected values by hand from each reducer's algebra: logaddexp (log(e^x + e^y)) and
hypot (sqrt(x^2 + y^2)) are associative and commutative in exact arithmetic; x - y,
(x + y) / 2 and x + 2|y| are not (r(r(a, b), c) = a - b - c but r(a, r(b, c)) =
a - b + c; (a + b)/4 + c/2 but a/2 + (b + c)/4; a + 2|b| + 2|c| but a + 2|b + 2|c||);
max and integer add are exact and free; a variadic reducer is never called free here.
"""

from __future__ import annotations

import pytest

import hloref
from hloref.fuzz.reducers import reorder_free

LOGADDEXP = """  sub = T[] subtract(x, y)
  ne = pred[] compare(sub, sub), direction=NE
  add = T[] add(x, y)
  mx = T[] maximum(x, y)
  ab = T[] abs(sub)
  ng = T[] negate(ab)
  ex = T[] exponential(ng)
  l1 = T[] log-plus-one(ex)
  a3 = T[] add(mx, l1)
  ROOT s = T[] select(ne, add, a3)"""

CASES = [  # (name, element type, body with T for the type, free?)
    ("logaddexp", "f32", LOGADDEXP, True),
    ("logaddexp", "f64", LOGADDEXP, True),
    ("logaddexp", "bf16", LOGADDEXP, True),
    ("hypot", "f32", "  xx = T[] multiply(x, x)\n  yy = T[] multiply(y, y)\n"
                     "  s = T[] add(xx, yy)\n  ROOT h = T[] sqrt(s)", True),
    ("maximum", "f32", "  ROOT m = T[] maximum(x, y)", True),
    ("add", "s32", "  ROOT m = T[] add(x, y)", True),
    ("subtract", "f32", "  ROOT m = T[] subtract(x, y)", False),
    ("subtract", "s32", "  ROOT m = T[] subtract(x, y)", False),
    ("mean of two", "f32", "  s = T[] add(x, y)\n  h = T[] constant(0.5)\n"
                           "  ROOT m = T[] multiply(s, h)", False),
    ("x + 2|y|", "f32", "  a = T[] abs(y)\n  two = T[] constant(2)\n  m = T[] multiply(two, a)\n"
                        "  ROOT s = T[] add(x, m)", False),
    ("first argument", "f32", "  ROOT c = T[] copy(x)", False),
]


def _module(t, body):
    return hloref.parse(f"""HloModule m
r {{
  x = {t}[] parameter(0)
  y = {t}[] parameter(1)
{body.replace("T[]", t + "[]")}
}}
ENTRY e {{
  p = {t}[8] parameter(0)
  z = {t}[] parameter(1)
  ROOT o = {t}[] reduce(p, z), dimensions={{0}}, to_apply=r
}}
""")


@pytest.mark.parametrize("name,t,body,free", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_reorder_free(name, t, body, free):
    module = _module(t, body)
    assert reorder_free(module, module.computations["r"]) is free


def test_a_variadic_reducer_is_not_called_free():
    module = hloref.parse("""HloModule m
r {
  a = f32[] parameter(0)
  b = s32[] parameter(1)
  c = f32[] parameter(2)
  d = s32[] parameter(3)
  m = f32[] maximum(a, c)
  i = s32[] minimum(b, d)
  ROOT t = (f32[], s32[]) tuple(m, i)
}
ENTRY e {
  p = f32[8] parameter(0)
  q = s32[8] parameter(1)
  z = f32[] constant(0)
  k = s32[] constant(0)
  ROOT o = (f32[], s32[]) reduce(p, q, z, k), dimensions={0}, to_apply=r
}
""")
    assert reorder_free(module, module.computations["r"]) is False
