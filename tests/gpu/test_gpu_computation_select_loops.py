"""select-and-scatter of one element inside a computation that ``map`` calls on every
element, its ``select`` holding a loop or a draw (``gpu/computation_one_element.py``:
``select_and_scatter``, ``select_calls``), ``fallback=False``. The CPU calls
such a select for each window position after the element (the candidate a padding
zero) and drops its answers (one candidate), so the result is ``scatter(init, source)``
where the window holds the element, else the init; a loop in the select that passes
``Limits.max_while_iterations`` is an error on both backends exactly where the CPU calls
the select. Results against the CPU backend bit for bit and by hand.

No XLA here: XLA:CPU (jaxlib 0.10.2) aborts compiling a map whose computation holds a
while or rng (see test_gpu_computation_one_element.py).
"""

from __future__ import annotations

import numpy as np
import pytest

import hloref
from hloref.errors import HloLimitError
from hloref.evaluator.interpreter import Limits
from hloref.gpu.computation import compile_computation

from gpu_check import bits_equal, check
from hlo_modules import counted_loop

SELECTS = "\n" + counted_loop(t="s32") + """\
slow_ge {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  z = s32[] constant(0)
  t = (s32[], s32[]) tuple(z, a)
  w = (s32[], s32[]) while(t), condition=cond, body=step
  k = s32[] get-tuple-element(w), index=0
  ROOT c = pred[] compare(k, b), direction=GE
}
draw_ge {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  lo = f32[] constant(0)
  hi = f32[] constant(1)
  r = f32[] rng(lo, hi), distribution=rng_uniform
  s = f32[] add(b, r)
  ROOT c = pred[] compare(a, s), direction=GE
}
add {
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT s = {t}[] add(a, b)
}
"""

# (window, dims of the operand, whether it holds the element, the CPU's select calls)
WINDOWS = [("size=1", "1", True, 0), ("size=3 pad=1_1", "1", True, 1),
           ("size=2 pad=1_0", "1", True, 0), ("size=2 pad=0_1", "1", True, 1),
           ("size=1 pad=1_-1", "1", False, 0), ("size=2x3 pad=0_1x1_1", "1,1", True, 4),
           ("size=2x2 pad=1_0x-1_2", "1,1", False, 0)]


def map_module(t, select, window, dims, n):
    return f"""HloModule m
{SELECTS.replace("{t}", t)}
body {{
  x = {t}[] parameter(0)
  r = {t}[{dims}] reshape(x)
  i = {t}[] constant(2)
  q = {t}[{dims}] select-and-scatter(r, r, i), window={{{window}}}, select={select}, scatter=add
  ROOT y = {t}[] reshape(q)
}}
ENTRY e {{
  p = {t}[{n}] parameter(0)
  ROOT m = {t}[{n}] map(p), dimensions={{0}}, to_apply=body
}}
"""


@pytest.mark.parametrize("window,dims,covers,calls", WINDOWS)
def test_select_with_a_loop(window, dims, covers, calls):
    """``slow_ge`` counts to its first operand (the element): under the limit of 8 the
    result is ``2 + x`` (or 2); an element of 50 passes the limit on both backends where
    the CPU calls the select, and nowhere else."""
    text = map_module("s32", "slow_ge", window, dims, 8)
    x = np.array([0, 1, 3, 8, -5, 7, 2, 6], np.int32)
    limits = Limits(max_while_iterations=8)
    cpu = hloref.evaluate(text, x, limits=limits)
    gpu = hloref.evaluate(text, x, backend="gpu", fallback=False, limits=limits)
    assert bits_equal(gpu, cpu)
    assert bits_equal(gpu, x + 2 if covers else np.full(8, 2, np.int32))
    m = hloref.parse(text)
    source = compile_computation(m.computations["body"], m).source
    assert (f"in range({calls}):" in source) == (calls > 0)
    x[5] = 50
    for backend in ("cpu", "gpu"):
        kw = {"fallback": False} if backend == "gpu" else {}
        if calls:
            with pytest.raises(HloLimitError, match="8 iterations"):
                hloref.evaluate(text, x, backend=backend, limits=limits, **kw)
        else:
            out = hloref.evaluate(text, x, backend=backend, limits=limits, **kw)
            assert bits_equal(out, x + 2 if covers else np.full(8, 2, np.int32))


@pytest.mark.parametrize("window,dims,covers,calls", [WINDOWS[1], WINDOWS[4], WINDOWS[5]])
def test_select_with_a_draw(window, dims, covers, calls):
    """``draw_ge`` compares with a uniform draw: its answers are dropped, so the result is
    ``2 + x`` (or 2) whatever is drawn; the draws are made where the CPU calls it."""
    text = map_module("f32", "draw_ge", window, dims, 12)
    x = np.array([0.0, -0.0, 1.5, -2.5, np.inf, np.nan, 1e-30, 3.0, -7.0, 0.5, 8.0, 1e30],
                 np.float32)
    got = check(text, x, xla=False)
    assert bits_equal(got, x + np.float32(2) if covers else np.full(12, 2, np.float32))
    m = hloref.parse(text)
    compiled = compile_computation(m.computations["body"], m)
    assert (compiled.rng_counts is not None) == (calls > 0)
