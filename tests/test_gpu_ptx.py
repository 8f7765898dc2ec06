"""The GPU backend's device code as NVVM compiles it for a real GPU (PTX for sm_80, no
GPU needed: ``numba.cuda.compile_ptx`` with libNVVM and NVRTC from the ``ptx`` extra).

Checked against the PTX instruction set: every HLO multiply and add rounds once, as
the CPU backend's numba code does, so a multiply feeding an add must compile to
``mul.rn`` then ``add.rn``, not to one ``fma.rn`` (``gpu/contraction.py``: NVVM
contracts them by default). The detector itself is checked: with ``fastmath=True``
(which asks for contraction) the same source gives ``fma.rn``.

Runs in the CPU test process: under the simulator (``tests/gpu``) there is no NVVM.
"""

from __future__ import annotations

import re

import pytest
from numba import cuda, float32, float64

import hloref
import hloref.gpu  # noqa: F401  (applies gpu/contraction.py)
from hloref.gpu.computation import compile_computation

CC = (8, 0)


def fused(a, b, c):
    return a * b + c


def arithmetic(ptx: str) -> list[str]:
    """The floating-point multiply/add/fma instructions of ``ptx``."""
    return re.findall(r"\b((?:fma|mul|add)\.rn(?:\.ftz)?\.f(?:32|64))\b", ptx)


@pytest.mark.parametrize("t, w", [(float32, "f32"), (float64, "f64")])
def test_a_multiply_then_add_rounds_twice(t, w):
    ptx, _ = cuda.compile_ptx(fused, (t, t, t), device=True, cc=CC)
    assert arithmetic(ptx) == [f"mul.rn.{w}", f"add.rn.{w}"]


@pytest.mark.parametrize("t, w", [(float32, "f32"), (float64, "f64")])
def test_fast_math_still_contracts(t, w):
    """The check can fail: asking for fast math gives the fused instruction."""
    ptx, _ = cuda.compile_ptx(fused, (t, t, t), device=True, cc=CC, fastmath=True)
    assert any(o.startswith("fma.rn.") and o.endswith(w) for o in arithmetic(ptx))


@pytest.mark.parametrize("ty, w", [("f32", "f32"), ("f64", "f64")])
def test_a_compiled_hlo_computation_rounds_each_op(ty, w, monkeypatch):
    """``add(multiply(a, b), c)`` as ``gpu/computation.py`` compiles it for a reducer or
    a map body: the product is rounded before the sum. (The device functions it calls
    ask the current device for its compute capability when compiled: there is none
    here, so the test names sm_80's.)"""
    from numba.cuda import dispatcher

    class Device:
        compute_capability = CC

    monkeypatch.setattr(dispatcher, "get_current_device", lambda: Device())
    m = hloref.parse(f"""HloModule m
body {{
  a = {ty}[] parameter(0)
  b = {ty}[] parameter(1)
  c = {ty}[] parameter(2)
  p = {ty}[] multiply(a, b)
  ROOT s = {ty}[] add(p, c)
}}
ENTRY e {{
  x = {ty}[4] parameter(0)
  ROOT m = {ty}[4] map(x, x, x), dimensions={{0}}, to_apply=body
}}
""")
    compiled = compile_computation(m.computations["body"], m)
    assert compiled is not None
    t = float32 if ty == "f32" else float64
    ptx, _ = cuda.compile_ptx(compiled.fn.py_func, (t, t, t), device=True, cc=CC)
    ops = arithmetic(ptx)
    assert f"mul.rn.{w}" in ops and f"add.rn.{w}" in ops and not any(
        o.startswith("fma") for o in ops), ops
