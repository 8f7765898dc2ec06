"""Bounded dynamic shapes on the GPU backend (``gpu/dynamic.py``): runtime sizes tracked
on the host beside device buffers, the data work on the device, no CPU fallback.

Every test of the CPU's dynamic shapes (``tests/test_dynamic_shapes.py``,
``tests/test_dynamic_shapes_ops.py``, ``tests/test_dynamic_shapes_indexing.py`` and
``tests/test_dynamic_implicit_broadcast.py``: by hand and against XLA:CPU) runs again
with ``hloref.evaluate`` evaluating each module on both backends: the GPU backend with
``fallback=False`` (a fallback fails), its result bit-identical to the CPU backend's
(or the same error class where the CPU refuses), and the GPU's value is the one the CPU
test then checks by hand and against XLA.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import numpy as np
import pytest

import hloref
from hloref.fuzz.compare import compare_values
from hloref.errors import HloUnsupportedError

from gpu_check import bits_equal, check, module, values

pytest.importorskip("jax")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import test_dynamic_implicit_broadcast as cpu_broadcast_tests  # noqa: E402
import test_dynamic_shapes as cpu_tests  # noqa: E402
import test_dynamic_shapes_indexing as cpu_indexing_tests  # noqa: E402
import test_dynamic_shapes_ops as cpu_ops_tests  # noqa: E402

_EVALUATE = hloref.evaluate


def _both(*args, **kwargs):
    """``hloref.evaluate`` on the cpu backend and on the gpu backend (no fallback):
    the same bits, or the same error class; returns the gpu's value."""
    kwargs.pop("backend", None)
    try:
        cpu = _EVALUATE(*args, **kwargs)
    except Exception as exc:
        with pytest.raises(type(exc)):
            _EVALUATE(*args, backend="gpu", fallback=False, **kwargs)
        raise
    gpu = _EVALUATE(*args, backend="gpu", fallback=False, **kwargs)
    assert not hloref.gpu.last_report, str(hloref.gpu.last_report)
    # bit for bit, but for the one module with an fft (not bit-exact on the device)
    assert bits_equal(gpu, cpu) or compare_values(gpu, cpu, opcode="fft").ok, \
        f"gpu {gpu!r}\ncpu {cpu!r}"
    return gpu


_CPU_MODULES = {"shapes": cpu_tests, "shapes_ops": cpu_ops_tests,
                "shapes_indexing": cpu_indexing_tests, "broadcast": cpu_broadcast_tests}


def _cpu_test_cases():
    out = []
    for key, mod in _CPU_MODULES.items():
        out += _cases_of(key, mod)
    return out


def _cases_of(key, mod):
    out = []
    for name, fn in sorted(vars(mod).items()):
        if not name.startswith("test_") or not callable(fn):
            continue
        marks = [m for m in getattr(fn, "pytestmark", []) if m.name == "parametrize"]
        if not marks:
            out.append(pytest.param(key, name, {}, id=name))
            continue
        (mark,) = marks
        names = [n.strip() for n in mark.args[0].split(",")] if isinstance(mark.args[0], str) \
            else list(mark.args[0])
        for k, row in enumerate(mark.args[1]):
            row = row if len(names) > 1 else (row,)
            out.append(pytest.param(key, name, dict(zip(names, row)), id=f"{name}[{k}]"))
    return out


@pytest.mark.parametrize("module_key,name,params", _cpu_test_cases())
def test_cpu_dynamic_test_on_the_gpu(module_key, name, params, monkeypatch):
    monkeypatch.setattr(hloref, "evaluate", _both)
    fn = getattr(_CPU_MODULES[module_key], name)
    assert set(params) <= set(inspect.signature(fn).parameters)
    fn(**params)


ADD = "add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }\n"


@pytest.mark.parametrize("tname", ["f32", "bf16", "s8", "u16", "pred", "c64", "f8e4m3fn", "s4"])
def test_sized_ops_in_every_type(tname):
    """set-dimension-size, the valid-part ops and dynamic-reshape in several element
    types (the data moves are bit copies; sort and reverse of the valid part), against
    the CPU backend bit for bit, grids over several blocks."""
    sort = "" if tname in ("c64",) else (
        f"lt {{ a = {tname}[] parameter(0)  b = {tname}[] parameter(1)\n"
        f"  ROOT c = pred[] compare(a, b), direction=LT }}\n")
    body = [f"  s = {tname}[<=5,<=7] set-dimension-size(p0, p1), dimensions={{1}}",
            f"  t = {tname}[<=5,<=7] set-dimension-size(s, p2), dimensions={{0}}",
            f"  v = {tname}[<=5,<=7] reverse(t), dimensions={{0,1}}",
            f"  c = {tname}[<=10,<=7] concatenate(t, v), dimensions={{0}}",
            f"  l = {tname}[<=5,<=3] slice(t), slice={{[0:5], [1:7:2]}}",
            f"  d = {tname}[<=35] dynamic-reshape(t, p3)",
            "  g = s32[] get-dimension-size(d), dimensions={0}"]
    outs = ["v", "c", "l", "d", "g"]
    types = [f"{tname}[<=5,<=7]", f"{tname}[<=10,<=7]", f"{tname}[<=5,<=3]", f"{tname}[<=35]",
             "s32[]"]
    if sort:
        body.append(f"  o = {tname}[<=5,<=7] sort(t), dimensions={{1}}, to_apply=lt")
        outs.append("o")
        types.append(f"{tname}[<=5,<=7]")
    text = ("HloModule m\n" + sort + "ENTRY e {\n"
            f"  p0 = {tname}[5,7] parameter(0)\n  p1 = s32[] parameter(1)\n"
            f"  p2 = s32[] parameter(2)\n  p3 = s32[] parameter(3)\n"
            + "\n".join(b for b in body if b)
            + f"\n  ROOT r = ({', '.join(types)}) tuple({', '.join(outs)})\n}}\n")
    x = values(tname, (5, 7), kind="small" if tname[0] in "su" else "unit")
    for rows, cols in [(5, 7), (3, 4), (0, 6), (4, 0), (1, 1)]:
        out = check(text, x, np.int32(cols), np.int32(rows), np.int32(rows * cols), xla=False)
        assert int(out[4]) == rows * cols


def test_elementwise_size_one_broadcast_and_reduce_window_on_the_device():
    """Operands of an elementwise op whose runtime sizes differ (1 against n: the
    element repeated; else the smaller size) and a reduce-window over a dynamic
    dimension, against the CPU backend."""
    text = ("HloModule m\n" + ADD + """ENTRY e {
  p = f32[4,6] parameter(0)
  q = f32[4,6] parameter(1)
  n = s32[] parameter(2)
  k = s32[] parameter(3)
  a = f32[<=4,<=6] set-dimension-size(p, n), dimensions={1}
  b = f32[<=4,<=6] set-dimension-size(q, k), dimensions={1}
  s = f32[<=4,<=6] add(a, b)
  z = f32[] constant(0)
  w = f32[<=4,<=5] reduce-window(s, z), window={size=1x2}, to_apply=add
  r = f32[<=4] reduce(s, z), dimensions={1}, to_apply=add
  ROOT t = (f32[<=4,<=6], f32[<=4,<=5], f32[<=4]) tuple(s, w, r)
}
""")
    p, q = values("f32", (4, 6), kind="unit"), values("f32", (4, 6), kind="unit")
    for n, k in [(6, 1), (1, 5), (3, 5), (2, 2), (0, 4)]:
        check(text, p, q, np.int32(n), np.int32(k), xla=False, exact=False, opcode="reduce")


def test_entry_argument_shorter_than_its_bound_on_the_device():
    text = module(["f32[<=8]"], "negate(p0)", "f32[<=8]")
    x = values("f32", (5,))
    out = hloref.evaluate(text, x, backend="gpu", fallback=False)
    assert out.shape == (5,)
    assert bits_equal(out, hloref.evaluate(text, x))


def test_while_with_sizes_on_the_device_reads_only_its_predicate():
    """A while loop carrying a dynamic value whose size changes per iteration."""
    text = ("HloModule m\n" + ADD + """cond {
  s = (s32[], f32[<=8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  c = s32[] constant(4)
  ROOT lt = pred[] compare(i, c), direction=LT
}
body {
  s = (s32[], f32[<=8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[<=8] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  y = f32[<=8] negate(x)
  n = s32[] get-dimension-size(x), dimensions={0}
  m = s32[] subtract(n, one)
  z = f32[<=8] set-dimension-size(y, m), dimensions={0}
  ROOT t = (s32[], f32[<=8]) tuple(j, z)
}
ENTRY e {
  p = f32[8] parameter(0)
  n = s32[] parameter(1)
  s = f32[<=8] set-dimension-size(p, n), dimensions={0}
  zero = s32[] constant(0)
  t = (s32[], f32[<=8]) tuple(zero, s)
  w = (s32[], f32[<=8]) while(t), condition=cond, body=body
  x = f32[<=8] get-tuple-element(w), index=1
  z = f32[] constant(0)
  ROOT r = f32[] reduce(x, z), dimensions={0}, to_apply=add
}
""")
    p = values("f32", (8,), kind="unit")
    out = check(text, p, np.int32(7), xla=False)
    assert float(out) == float(np.float32(p[:3].astype(np.float64).sum()))  # f32 add in f64


def test_no_runtime_size_fallback_left():
    for op in ("set-dimension-size", "dynamic-reshape", "get-dimension-size"):
        assert hloref.gpu.gpu_status(op) == "yes"
    with pytest.raises(HloUnsupportedError, match="fft"):
        hloref.evaluate(cpu_tests._slice_module(
            "c = c64[<=6] convert(s)\n  ROOT r = c64[<=6] fft(c), fft_type=FFT, "
            "fft_length={6}"), np.zeros(6, np.float32), np.int32(4), backend="gpu",
            fallback=False)


def test_a_comparator_the_compiler_refuses_sorts_a_valid_part_on_the_device():
    """A comparator with an array inside (no scalar device form) runs one comparison at a
    time through the GPU interpreter (``gpu/calls.py``) on the valid part: the first
    four elements sorted, by hand."""
    text = """HloModule m
lt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  v = f32[2] broadcast(a), dimensions={}
  w = f32[1] slice(v), slice={[1:2]}
  d = f32[] reshape(w)
  ROOT l = pred[] compare(d, b), direction=LT
}
ENTRY e {
  p = f32[7] parameter(0)
  n = s32[] parameter(1)
  s = f32[<=7] set-dimension-size(p, n), dimensions={0}
  ROOT r = f32[<=7] sort(s), dimensions={0}, to_apply=lt
}
"""
    p = values("f32", (7,), kind="unit")
    out = check(text, p, np.int32(4), xla=False)
    np.testing.assert_array_equal(out, np.sort(p[:4]))
