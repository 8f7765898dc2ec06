"""ci/logical_bitcasts.py: a hand-written ``bitcast`` rewritten as transpose/reshape so
that XLA:CPU (through jaxlib, which cannot compile a bitcast) runs what it means. The
rewrite must give hloref's bitcast value on XLA:CPU, and the value derived by hand."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import hloref
from hloref.printer import module_to_text

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "ci"))
import logical_bitcasts  # noqa: E402

xla = pytest.importorskip("hloref.fuzz.oracles.xla")

CASES = {
    # f32[4,6] row-major read as f32[6,4] column-major: the transpose, by hand
    "transpose": ("""HloModule m
ENTRY e {
  x = f32[4,6]{1,0} parameter(0)
  ROOT b = f32[6,4]{0,1} bitcast(x)
}""", lambda x: x.T),
    # a chain: the second bitcast reads the first one's {0,2,1} layout, and the
    # element type changes (same width)
    "chain_and_type": ("""HloModule m
ENTRY e {
  x = f32[2,3,4]{2,1,0} parameter(0)
  b = s32[4,2,3]{0,2,1} bitcast(x)
  ROOT c = s32[24]{0} bitcast(b)
}""", lambda x: x.reshape(-1).view(np.int32)),
    # column-major operand split into three dimensions: memory order is x.T.ravel()
    "split": ("""HloModule m
ENTRY e {
  x = f32[6,4]{0,1} parameter(0)
  ROOT b = f32[3,2,4]{1,0,2} bitcast(x)
}""", lambda x: np.transpose(x.T.reshape(4, 3, 2), (1, 2, 0))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_rewrite_runs_on_xla_like_hloref_and_by_hand(name):
    text, by_hand = CASES[name]
    module = hloref.parse(text)
    p = module.entry.parameters[0].shape
    x = np.arange(np.prod(p.dims), dtype=np.float32).reshape(p.dims) * np.float32(1.5) - 7
    ours = hloref.evaluate(module, x)
    np.testing.assert_array_equal(ours, by_hand(x))
    assert logical_bitcasts.rewrite(module) == 0
    assert " bitcast(" not in module_to_text(module)
    if not xla.available():
        pytest.skip("no XLA:CPU")
    np.testing.assert_array_equal(xla.run_hlo(module_to_text(module), x), ours)


def test_different_widths_are_left_alone():
    module = hloref.parse("HloModule m\nENTRY e {\n  x = f32[2] parameter(0)\n"
                          "  ROOT b = s16[2,2] bitcast(x)\n}\n")
    assert logical_bitcasts.rewrite(module) == 1
    assert module.entry.root.opcode == "bitcast"
