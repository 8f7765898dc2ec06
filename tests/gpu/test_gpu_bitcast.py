"""``bitcast`` on the GPU backend (fallback disabled): layout-changing, type-changing and
``E(n)``-packed bitcasts, against the cpu backend (bit for bit), numpy derivations of
the memory reinterpretation, and XLA:CPU's own optimized modules (whose bitcasts
change layouts; a hand-written bitcast does not survive the trip through StableHLO)."""

from __future__ import annotations

import numpy as np
import pytest

import hloref

from gpu_check import HAVE_XLA, bits_equal, check, values


def _module(param, root):
    return f"HloModule m\nENTRY e {{\n  x = {param} parameter(0)\n  ROOT r = {root} bitcast(x)\n}}\n"


def _memory(x, layout):
    """``x``'s elements in the memory order of minor_to_major ``layout``."""
    return np.transpose(x, tuple(reversed(layout))).ravel()


def _from_memory(flat, dims, layout):
    major_to_minor = tuple(reversed(layout))
    return np.ascontiguousarray(np.transpose(flat.reshape([dims[d] for d in major_to_minor]),
                                             np.argsort(major_to_minor)))


def _lay(layout, extra=""):
    return "{" + ",".join(map(str, layout)) + extra + "}"


@pytest.mark.parametrize("t", ["f32", "bf16", "s4", "c64", "pred", "u64"])
@pytest.mark.parametrize("in_layout,out_dims,out_layout", [
    ((0, 1), (4, 3), (1, 0)),
    ((1, 0), (4, 3), (0, 1)),
    ((0, 1), (3, 4), (0, 1)),
    ((0, 1), (2, 6), (0, 1)),
])
def test_bitcast_layouts(t, in_layout, out_dims, out_layout):
    x = values(t, (3, 4))
    if t == "c64":
        x = (values("f32", (3, 4)) + 1j * values("f32", (3, 4))).astype(np.complex64)
    text = _module(f"{t}[3,4]{_lay(in_layout)}",
                   f"{t}[{out_dims[0]},{out_dims[1]}]{_lay(out_layout)}")
    out = check(text, x, xla=False)  # XLA:CPU refuses hand-written bitcasts
    want = _from_memory(_memory(x, in_layout), out_dims, out_layout)
    assert bits_equal(out, want)


@pytest.mark.parametrize("src,dst", [("f32", "s32"), ("bf16", "f16"), ("u8", "s8"),
                                     ("c64", "f64"), ("f64", "c64"), ("s8", "f8e4m3fn"),
                                     ("u16", "bf16"), ("s4", "u4"), ("pred", "u8")])
def test_bitcast_element_types(src, dst):
    x = values(src, (2, 3, 4)) if src != "c64" else \
        (values("f32", (2, 3, 4)) + 1j * values("f32", (2, 3, 4))).astype(np.complex64)
    # with a layout change as well: memory is the transposed order
    text = _module(f"{src}[2,3,4]{{0,2,1}}", f"{dst}[4,6]{{1,0}}")
    out = check(text, x, xla=False)
    dst_dtype = hloref.types.element_type(dst).dtype
    want = _memory(x, (0, 2, 1)).view(dst_dtype).reshape(4, 6)
    assert bits_equal(out, want)


def _pack(elements, bits):
    """XLA's PackIntN by hand: the first element in the most significant bits."""
    per = 8 // bits
    raw = [int(v) & ((1 << bits) - 1) for v in elements]
    raw += [0] * (-len(raw) % per)
    return np.array([sum(raw[i + j] << (bits * (per - 1 - j)) for j in range(per))
                     for i in range(0, len(raw), per)], np.uint8)


@pytest.mark.parametrize("t,bits", [("s4", 4), ("u4", 4), ("u2", 2), ("s2", 2), ("u1", 1)])
def test_bitcast_packed_sub_byte(t, bits):
    n = 8 * 3
    x = values(t, (n,))
    raw = x.view(np.uint8)
    per = 8 // bits
    text = _module(f"{t}[{n}]{{0:E({bits})}}", f"u8[{n // per}]")
    out = check(text, x, xla=False)
    assert out.tolist() == _pack(raw, bits).tolist()
    # and back, through a column-major layout of the packed result
    data = np.arange(n // per, dtype=np.uint8) * 37
    rows = n // 4
    text = _module(f"u8[{n // per}]", f"{t}[{rows},4]{{0,1:E({bits})}}")
    out = check(text, data, xla=False)
    mask = (1 << bits) - 1
    unpacked = np.array([(int(data[j // per]) >> (bits * (per - 1 - j % per))) & mask
                         for j in range(n)], np.uint8).view(x.dtype)
    assert bits_equal(out, _from_memory(unpacked, (rows, 4), (0, 1)))
    # a partial last byte is zero-filled at the bottom
    if per > 1:
        text = _module(f"{t}[{per + 1}]{{0:E({bits})}}", "u8[2]")
        y = x[:per + 1]
        out = check(text, y, xla=False)
        assert out.tolist() == _pack(y.view(np.uint8), bits).tolist()


def test_bitcast_errors_match_the_cpu():
    cases = [(_module("f32[4]", "f16[8]"), values("f32", (4,))),  # widths differ
             (_module("s4[6]{0:E(4)}", "u8[2]"), values("s4", (6,)))]  # 3 bytes, not 2
    for text, x in cases:
        for backend in ("cpu", "gpu"):
            kw = {"fallback": False} if backend == "gpu" else {}
            with pytest.raises(hloref.HloError) as info:
                hloref.evaluate(text, x, backend=backend, verify=False, **kw)
            assert not isinstance(info.value, hloref.HloUnsupportedError)


XLA_PROGRAMS = [
    """HloModule m
ENTRY e {
  x = f32[4,6]{1,0} parameter(0)
  t = f32[6,4]{0,1} transpose(x), dimensions={1,0}
  c = f32[4,6]{0,1} copy(x)
  n = f32[4,6]{0,1} negate(c)
  t2 = f32[6,4]{1,0} transpose(n), dimensions={1,0}
  r2 = f32[2,12]{1,0} reshape(t2)
  ROOT o = (f32[6,4]{0,1}, f32[2,12]{1,0}) tuple(t, r2)
}
""",
    """HloModule m
ENTRY e {
  x = s32[2,3,4]{2,1,0} parameter(0)
  t = s32[4,2,3]{0,2,1} transpose(x), dimensions={2,0,1}
  a = s32[4,2,3]{0,2,1} abs(t)
  ROOT o = (s32[4,2,3]{0,2,1}, s32[4,2,3]{0,2,1}) tuple(t, a)
}
""",
]


@pytest.mark.parametrize("k", range(len(XLA_PROGRAMS)))
def test_xla_optimized_layout_bitcasts(k):
    if not HAVE_XLA:
        pytest.skip("no XLA:CPU")
    from hloref.fuzz.oracles import xla
    text = XLA_PROGRAMS[k]
    exe = xla.compile_hlo(text)
    optimized = hloref.parse(exe.optimized_hlo())
    assert any(instr.opcode == "bitcast" and (
        tuple(instr.shape.minor_to_major()) != tuple(reversed(range(instr.shape.rank))) or
        tuple(instr.operands[0].shape.minor_to_major()) !=
        tuple(reversed(range(instr.operands[0].shape.rank))))
        for _, instr in optimized.instructions()), exe.optimized_hlo()
    param = hloref.parse(text).entry.parameters[0].shape
    x = np.arange(int(np.prod(param.dims))).reshape(param.dims).astype(param.element_type.dtype)
    want = exe.run(x)
    got = hloref.evaluate(optimized, x, backend="gpu", fallback=False)
    for g, w in zip(got, want):
        assert bits_equal(g, np.asarray(w))
