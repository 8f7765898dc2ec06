"""Window ops in every element type: the strided window view works for the ml_dtypes
types too (numpy's as_strided cannot rebuild float8_e5m2 from its array interface;
a campaign hit it in select-and-scatter). Expected values by hand."""

from __future__ import annotations

import numpy as np
import pytest

import hloref
from hloref.evaluator.numeric import as_type
from hloref.types import ARRAY_TYPES

# s1 cannot hold 1; f8e8m0fnu cannot hold 0
TYPES = [t for t in ARRAY_TYPES if not (t.is_pred or t.is_complex or t.name in ("s1", "f8e8m0fnu"))]


@pytest.mark.parametrize("t", TYPES, ids=lambda t: t.name)
def test_select_and_scatter_every_type(t):
    text = f"""HloModule m
ge {{
  a = {t.name}[] parameter(0)
  b = {t.name}[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GE
}}
add {{
  a = {t.name}[] parameter(0)
  b = {t.name}[] parameter(1)
  ROOT c = {t.name}[] add(a, b)
}}
ENTRY e {{
  x = {t.name}[4] parameter(0)
  s = {t.name}[2] parameter(1)
  z = {t.name}[] constant(0)
  ROOT r = {t.name}[4] select-and-scatter(x, s, z), window={{size=2 stride=2}}, select=ge, scatter=add
}}"""
    x, s = as_type(np.array([1, 0, 0, 1]), t), as_type(np.array([1, 1]), t)
    # window [1, 0]: 1 >= 0 keeps index 0; window [0, 1]: 0 >= 1 fails, index 3 wins
    out = hloref.evaluate(text, x, s)
    assert out.dtype == x.dtype and out.astype(np.float64).tolist() == [1, 0, 0, 1]


@pytest.mark.parametrize("t", TYPES, ids=lambda t: t.name)
def test_reduce_window_max_every_type(t):
    text = f"""HloModule m
mx {{
  a = {t.name}[] parameter(0)
  b = {t.name}[] parameter(1)
  ROOT c = {t.name}[] maximum(a, b)
}}
ENTRY e {{
  x = {t.name}[5] parameter(0)
  z = {t.name}[] parameter(1)
  ROOT r = {t.name}[4] reduce-window(x, z), window={{size=2}}, to_apply=mx
}}"""
    x = as_type(np.array([0, 1, 0, 0, 1]), t)
    z = as_type(np.array(0), t)
    out = hloref.evaluate(text, x, z)
    assert out.astype(np.float64).tolist() == [1, 1, 0, 1]
