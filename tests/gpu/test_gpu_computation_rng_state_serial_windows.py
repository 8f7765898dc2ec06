"""rng-get-and-update-state in the computations of reduce-window and select-and-scatter,
on the device in the serial mode (``gpu/serial.py``), ``fallback=False``: the op makes
every call from one thread in the CPU's call order (``evaluator/windows.py``); each site
reads the state before the op plus the deltas consumed so far, and the op advances the
evaluation's state by all of them. Results against the CPU backend bit for bit, and by
hand from the written semantics (see test_gpu_computation_rng_state_serial.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from gpu_check import bits_equal

from hlo_modules import parameters, random_bit_compare, state_bracket
from rng_state_common import M32, M64, S0, both, read_low, words


REDUCE_WINDOW = """HloModule m
red {
  a = u64[] parameter(0)
  b = u64[] parameter(1)
%(l)s  c = u64[] multiply(a, b)
  ROOT r = u64[] add(c, l)
}
ENTRY e {
  p = u64[3,4] parameter(0)
  z = u64[] constant(7)
  a = u64[2] rng-get-and-update-state(), delta=100
  r = u64[%(out)s] reduce-window(p, z), window={%(window)s}, to_apply=red
  b = u64[2] rng-get-and-update-state(), delta=100
  f = u64[%(n)d] reshape(r)
  ROOT t = u64[%(n4)d] concatenate(a, f, b), dimensions={0}
}
"""


#: (window, result dims): 2x3 windows over the 3x4 operand padded by a row above and a
#: column each side; 2x2 windows at strides 2 and 3 over it base-dilated 2 along rows
#: (holes between them) and padded by a column on the left
WINDOWS = [("size=2x3 pad=1_0x1_1", "3,4"),
           ("size=2x2 stride=2x3 lhs_dilate=2x1 pad=0_0x1_0", "2,2")]


def _window_positions(window_text, out_dims):
    """The operand positions (flat) of each window, row-major, padding and holes left
    out: by hand from the window's written geometry (size, stride, padding low,
    base dilation), for the two windows of ``WINDOWS``."""
    if window_text.startswith("size=2x3"):
        size, stride, low, bdil = (2, 3), (1, 1), (1, 1), (1, 1)
    else:
        size, stride, low, bdil = (2, 2), (2, 3), (0, 1), (2, 1)
    dims = (3, 4)
    out = []
    for o0 in range(out_dims[0]):
        for o1 in range(out_dims[1]):
            pos = []
            for k0 in range(size[0]):
                for k1 in range(size[1]):
                    c = [o0 * stride[0] + k0 - low[0], o1 * stride[1] + k1 - low[1]]
                    if any(v < 0 or v % b for v, b in zip(c, bdil)):
                        continue
                    c = [v // b for v, b in zip(c, bdil)]
                    if all(v < n for v, n in zip(c, dims)):
                        pos.append(c[0] * 4 + c[1])
            out.append(pos)
    return out


@pytest.mark.parametrize("window,out", WINDOWS)
def test_reduce_window_by_hand(window, out):
    """The CPU's sequential fold: windows row-major, each from the init over its
    positions on the operand (padding and holes call nothing): ``acc = acc x v + low
    word``; the state moves 3 per call."""
    out_dims = tuple(int(v) for v in out.split(","))
    n = out_dims[0] * out_dims[1]
    text = REDUCE_WINDOW % {"l": read_low("l", 3), "out": out, "window": window, "n": n,
                            "n4": n + 4}
    p = (np.arange(12, dtype=np.uint64) * np.uint64(2**40 + 3) + np.uint64(1)).reshape(3, 4)
    cpu, gpu = both(text, p)
    assert bits_equal(gpu, cpu), (gpu, cpu)
    flat = p.reshape(-1).tolist()
    s = S0 + 100
    want = words(S0)
    for pos in _window_positions(window, out_dims):
        acc = 7
        for q in pos:
            acc = (acc * flat[q] + words(s)[0]) & M64
            s += 3
        want.append(acc)
    want += words(s)
    assert bits_equal(cpu, np.array(want, np.uint64)), cpu


VARIADIC_WINDOW = """HloModule m
red {
  a = f32[] parameter(0)
  i = s32[] parameter(1)
  b = f32[] parameter(2)
  j = s32[] parameter(3)
  s = u64[2] rng-get-and-update-state(), delta=%d
  lo = u64[1] slice(s), slice={[0:1]}
  l = u64[] reshape(lo)
  k = s32[] convert(l)
  ge = pred[] compare(a, b), direction=GE
  m = f32[] select(ge, a, b)
  x = s32[] select(ge, i, j)
  ROOT r = (f32[], s32[]) tuple(m, k)
}
""" + state_bracket(parameters("p = f32[4,5]") + """\
  q = s32[4,5] iota(), iota_dimension=1
  z = f32[] constant(-inf)
  y = s32[] constant(-1)
""",
                    """\
  r = (f32[3,2], s32[3,2]) reduce-window(p, q, z, y), window={size=2x3 stride=1x2 pad=0_0x1_0}, to_apply=red
""",
                    [("r", "(f32[3,2], s32[3,2])")])


def test_reduce_window_variadic():
    """Two inputs, a tuple-valued reducer (argmax-like, its second result the state's
    low word): CPU bit for bit, state after and before."""
    delta = 2**64 + 2**63
    p = np.random.default_rng(2).standard_normal((4, 5)).astype(np.float32)
    cpu, gpu = both(VARIADIC_WINDOW % delta, p)
    assert bits_equal(gpu, cpu), (gpu, cpu)
    # 6 windows of 2 x 3 positions, the first column's windows on the padding column
    calls = 3 * (2 * 2) + 3 * (2 * 3)
    assert [int(v) for v in cpu[2]] == words(S0 + 100 + calls * delta)


SELECT_AND_SCATTER = """HloModule m
sel {
  a = u32[] parameter(0)
  b = u32[] parameter(1)
%(sel)s  ROOT p = pred[] compare(a, b), direction=GE
}
sct {
  a = u32[] parameter(0)
  b = u32[] parameter(1)
%(sct)s  c = u32[] add(a, b)
  k = u32[] convert(sct)
  ROOT r = u32[] add(c, k)
}
""" + state_bracket(parameters("x = u32[5]", "src = u32[3]") + "  i = u32[] constant(1000)\n",
                    """\
  r = u32[5] select-and-scatter(x, src, i), window={size=3 stride=2 pad=1_1}, select=sel, scatter=sct
""",
                    [("rc", "u64[5]")],
                    tail="  rc = u64[5] convert(r)\n")


SITE_FREE = "  {0} = u64[] constant(0)\n"


@pytest.mark.parametrize("serial", ["select", "scatter", "both"])
def test_select_and_scatter_by_hand(serial):
    """x = [0, 1, 2, 3, 4], windows of 3 at stride 2 over one padding each side: window
    0 holds (pad, 0, 1), window 1 (1, 2, 3), window 2 (3, 4, pad). The CPU's select loop
    runs window position 1 over all windows, then position 2; a window calls select at
    each position after its first one on the operand (that one is its first choice):
    window 1 at position 1 (call 0), window 2 at 1 (call 1), window 0 at 2 (call 2),
    window 1 at 2 (3), window 2 at 2 (4, the candidate the padding's zero): 5 calls.
    GE keeps the larger: windows choose 1, 3, 4, all distinct, so one scatter round in
    source order: 3 calls of delta 2**64 + 7, each adding its low word (mod 2**32)."""
    ds, dc = 5, 2**64 + 7
    text = SELECT_AND_SCATTER % {
        "sel": read_low("sel", ds) if serial != "scatter" else SITE_FREE.format("sel"),
        "sct": read_low("sct", dc) if serial != "select" else SITE_FREE.format("sct")}
    x = np.arange(5, dtype=np.uint32)
    src = np.array([10, 20, 30], np.uint32)
    cpu, gpu = both(text, x, src)
    assert bits_equal(gpu, cpu), (gpu, cpu)
    s = S0 + 100 + (5 * ds if serial != "scatter" else 0)
    out = [1000] * 5
    for target, v in zip((1, 3, 4), src.tolist()):
        low = words(s)[0] if serial != "select" else 0
        out[target] = (1000 + v + low) & M32
        s += dc if serial != "select" else 0
    want = words(S0) + out + words(s)
    assert bits_equal(cpu, np.array(want, np.uint64)), cpu


SELECT_RANDOM = "HloModule m\n" + random_bit_compare(
    "sel", ("a = f32[]", "b = f32[]"), "%d") + """\
sct {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  s = u64[2] rng-get-and-update-state(), delta=7
  hi = u64[1] slice(s), slice={[1:2]}
  h = u64[] reshape(hi)
  c = f32[] convert(h)
  ab = f32[] multiply(a, b)
  ROOT r = f32[] add(ab, c)
}
""" + state_bracket(parameters("x = f32[4,5]", "src = f32[2,3]") +
                    "  i = f32[] constant(0.5)\n",
                    """\
  r = f32[4,5] select-and-scatter(x, src, i), window={size=3x3 stride=2x2 pad=0_1x1_1}, select=sel, scatter=sct
""",
                    [("r", "f32[4,5]")])


def test_select_and_scatter_random_choices():
    """A select answering the low bit of the state it reads (choices depend on the call
    order), overlapping 2-D windows (several choose the same element: scatter rounds), a
    scatter adding the high word: CPU bit for bit."""
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    src = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    cpu, gpu = both(SELECT_RANDOM % (2**63 + 1), x, src)
    assert bits_equal(gpu, cpu), (gpu, cpu)
    assert int(cpu[2][0]) != int(cpu[0][0]) + 100
