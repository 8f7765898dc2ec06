"""``bitcast`` between shapes with different layouts is a physical reinterpretation.

XLA:CPU cannot run a hand-written ``bitcast`` through jaxlib (layouts are lost on the
way through StableHLO), but its own optimizer writes them: layout assignment and the
algebraic simplifier turn transposes, reshapes and copies whose physical order is
unchanged into ``bitcast`` instructions between different layouts
(``f32[6,4]{0,1} bitcast(f32[4,6]{1,0} x)``). hloref evaluates XLA's optimized
module, layouts as XLA wrote them, and must give XLA:CPU's answer bit for bit; each
program must yield at least one bitcast whose operand and result layouts differ, so
the check cannot pass vacuously."""

from __future__ import annotations

import numpy as np
import pytest

import hloref

xla = pytest.importorskip("hloref.fuzz.oracles.xla")

#: Programs whose results are transposes: XLA:CPU writes each as a bitcast to the
#: transposed layout followed by a copy to the default one.
PROGRAMS = {
    "transposes_as_outputs": """HloModule m
ENTRY e {
  x = f32[4,6]{1,0} parameter(0)
  t = f32[6,4]{0,1} transpose(x), dimensions={1,0}
  r = f32[24]{0} reshape(x)
  c = f32[4,6]{0,1} copy(x)
  n = f32[4,6]{0,1} negate(c)
  t2 = f32[6,4]{1,0} transpose(n), dimensions={1,0}
  r2 = f32[2,12]{1,0} reshape(t2)
  ROOT o = (f32[6,4]{0,1}, f32[24]{0}, f32[2,12]{1,0}) tuple(t, r, r2)
}
""",
    "transpose_3d": """HloModule m
ENTRY e {
  x = f32[2,3,4]{2,1,0} parameter(0)
  t = f32[4,2,3]{0,2,1} transpose(x), dimensions={2,0,1}
  a = f32[4,2,3]{0,2,1} abs(t)
  ROOT o = (f32[4,2,3]{0,2,1}, f32[4,2,3]{0,2,1}) tuple(t, a)
}
""",
    "transpose_3d_s32": """HloModule m
ENTRY e {
  x = s32[2,3,4]{2,1,0} parameter(0)
  t = s32[3,4,2]{2,1,0} transpose(x), dimensions={1,2,0}
  r = s32[12,2]{1,0} reshape(t)
  n = s32[12,2]{1,0} negate(r)
  ROOT o = (s32[3,4,2]{2,1,0}, s32[12,2]{1,0}) tuple(t, n)
}
""",
}


def _layout_changing_bitcasts(module) -> int:
    """Bitcasts that are not a row-major reshape: an operand or result of rank 2 or more
    whose layout is not the default major-to-minor one."""
    def non_default(shape):
        return len(shape.dims) > 1 and tuple(shape.minor_to_major()) != tuple(
            reversed(range(len(shape.dims))))
    return sum(1 for _, instr in module.instructions() if instr.opcode == "bitcast" and
               (non_default(instr.operands[0].shape) or non_default(instr.shape)))


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_xla_optimized_bitcasts_evaluate_like_xla(name):
    if not xla.available():
        pytest.skip("no XLA:CPU")
    text = PROGRAMS[name]
    exe = xla.compile_hlo(text)
    optimized = hloref.parse(exe.optimized_hlo())
    assert _layout_changing_bitcasts(optimized) >= 1, exe.optimized_hlo()
    param = hloref.parse(text).entry.parameters[0].shape
    rng = np.random.default_rng(0)
    x = (rng.integers(-100, 100, param.dims).astype(param.element_type.dtype)
         if param.element_type.is_integer else
         rng.standard_normal(param.dims).astype(param.element_type.dtype))
    want = exe.run(x)
    for got in (hloref.evaluate(optimized, x), hloref.evaluate(text, x)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
