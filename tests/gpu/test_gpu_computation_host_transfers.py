"""Host transfers inside per-element computations, on the device (one call at a time
through the GPU interpreter, ``gpu/calls.py``), ``fallback=False``: infeed, outfeed, host
send/recv (``is_host_transfer=true``) and one-device send/recv in map bodies, reducers,
sort comparators, scatter combiners, reduce-window reducers and select-and-scatter's
select and scatter, under a while loop and in a conditional's branches.

Each case runs the CPU backend and the GPU backend on the same queues and compares,
bit for bit, the result and the queues after the evaluation (what remains of the
infeed and host recv queues, the outfeed list, the host send lists, in order), and for
the failures (an empty queue, a value of the wrong shape) the error (type, text,
instruction) and the queues as the error left them. Some cases are derived by hand
from the written semantics (the CPU's call orders: map row-major, reduce's sequential
fold from the init, select-and-scatter's window walk; ``evaluator/collectives.py``'s
queues). No XLA: XLA:CPU (jaxlib 0.10.2) aborts compiling a map or reduce whose
computation holds infeed, outfeed or send (its loop-fusion emitter cannot index them).
(Written by a helper for a compiled host-transfer channel it built; that design was not
merged, these checks hold for this one. An error the GPU's op raises from a numpy
exception names the backend: "recv failed on the gpu backend: ValueError...".)
"""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest

import hloref
import hloref.api
from hloref.arguments import coerce_argument
from hloref.errors import HloEvalError, HloLimitError
from hloref.evaluator.collectives import DeviceIO, single_device
from hloref.evaluator.interpreter import Interpreter, Limits
from hloref.gpu import evaluate_gpu

from hlo_modules import MODULES, counted_loop, scatter_entry


def run(text, *args, backend, infeed=(), host_recv=None, limits=None):
    """``(value or the exception raised, io)`` of the module on fresh queues."""
    m = hloref.api.verified(hloref.parse(text))
    io = DeviceIO(infeed=deque(infeed), outfeed=[],
                  host_recv={k: list(v) for k, v in (host_recv or {}).items()}, host_send={})
    values = [coerce_argument(a, p.shape, "argument") for a, p in zip(args, m.entry.parameters)]
    try:
        if backend == "cpu":
            interp = Interpreter(m, limits=limits)
            interp.device = single_device(io)
            value = interp.run(values)
        else:
            value = evaluate_gpu(m, values, limits=limits, fallback=False, io=io)
    except HloEvalError as exc:
        value = exc
    return value, io


def same(a, b) -> bool:
    """The same values bit for bit: tuples element by element, arrays (or numpy scalars)
    of the same dtype, shape and bytes."""
    if isinstance(a, (tuple, list)) or isinstance(b, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def same_queue(a, b) -> bool:
    return len(a) == len(b) and all(
        same(x, y) if not isinstance(x, (int, float)) else (type(x) is type(y) and x == y)
        for x, y in zip(a, b))


def both(text, *args, **kw):
    """CPU and GPU on the same inputs: everything compared; the CPU's ``(value, io)``."""
    cpu, cio = run(text, *args, backend="cpu", **kw)
    gpu, gio = run(text, *args, backend="gpu", **kw)
    if isinstance(cpu, Exception):
        # the same error; the interpreter names the backend an op's own exception came
        # from ("recv failed on the gpu backend: ValueError...")
        assert type(gpu) is type(cpu), (gpu, cpu)
        gpu_text, cpu_text = str(gpu).replace(" on the gpu backend", ""), str(cpu)
        assert gpu_text == cpu_text, (gpu, cpu)  # a loop's limit: the whole message too
        assert gpu.instruction == cpu.instruction, (gpu, cpu)
    else:
        assert not isinstance(gpu, Exception), gpu
        assert same(gpu, cpu), (gpu, cpu)
    assert same_queue(list(gio.infeed), list(cio.infeed)), (gio.infeed, cio.infeed)
    assert same_queue(gio.outfeed, cio.outfeed), (gio.outfeed, cio.outfeed)
    assert gio.host_send.keys() == cio.host_send.keys()
    for k in cio.host_send:
        assert same_queue(gio.host_send[k], cio.host_send[k]), (k, gio.host_send, cio.host_send)
    assert gio.host_recv.keys() == cio.host_recv.keys()
    for k in cio.host_recv:
        assert same_queue(gio.host_recv[k], cio.host_recv[k]), (k, gio.host_recv, cio.host_recv)
    return cpu, cio


def f32(*v):
    return np.array(v, np.float32)


# ----------------------------------------------------------------- map: infeed, outfeed

MAP = MODULES["map-infeed-outfeed"]


def test_map_infeed_outfeed_by_hand():
    """x + infeed over [1, 2, 3] with infeed [10, 20, 30, 40]: [11, 22, 33], one value
    left, the outfeed receiving x in row-major order."""
    cpu, io = both(MAP, f32(1, 2, 3), infeed=[10.0, 20.0, 30.0, 40.0])
    assert same(cpu, f32(11, 22, 33))
    assert list(io.infeed) == [40.0]
    assert same_queue(io.outfeed, [np.float32(1), np.float32(2), np.float32(3)])


def test_map_infeed_empty():
    """The third call finds the queue empty: the CPU's error, the outfeed holding the
    two calls' values and the third's (its outfeed comes after the infeed in the text
    order, but the CPU's topological order is the text order: infeed first)."""
    err, io = both(MAP, f32(1, 2, 3), infeed=[10.0, 20.0])
    assert isinstance(err, HloEvalError) and "the infeed queue is empty" in str(err)
    assert len(io.outfeed) == 2 and not io.infeed


def test_map_infeed_wrong_shape():
    """The second item is not an f32[]: popped, the CPU's coercion error; the third item
    stays in the queue."""
    err, io = both(MAP, f32(1, 2, 3), infeed=[10.0, [1.0, 2.0], 30.0, 40.0])
    assert isinstance(err, HloEvalError) and "expected dimensions [] for f32[]" in str(err)
    assert list(io.infeed) == [30.0, 40.0] and len(io.outfeed) == 1


TUPLE = """HloModule m
body {
  x = s32[] parameter(0)
  tk = token[] after-all()
  inf = ((f32[], s32[1]), token[]) infeed(tk)
  d = (f32[], s32[1]) get-tuple-element(inf), index=0
  a = f32[] get-tuple-element(d), index=0
  b1 = s32[1] get-tuple-element(d), index=1
  b = s32[] reshape(b1)
  c = s32[] convert(a)
  y = s32[] add(x, b)
  z = s32[] multiply(y, c)
  t2 = token[] get-tuple-element(inf), index=1
  o = (s32[], f32[]) tuple(z, a)
  of = token[] outfeed(o, t2), outfeed_shape=(s32[], f32[])
  ROOT r = s32[] add(z, x)
}
ENTRY e {
  x = s32[2,2] parameter(0)
  ROOT m = s32[2,2] map(x), dimensions={0,1}, to_apply=body
}
"""


def test_map_tuple_infeed_outfeed():
    """Tuple data both ways: infeed of ``(f32[], s32[1])`` and outfeed of ``(s32[], f32[])``
    (the CPU's tuples of arrays); a wrong tuple is the CPU's error."""
    x = np.array([[1, 2], [3, -4]], np.int32)
    feed = [(np.float32(2.5), np.array([k], np.int32)) for k in (5, -6, 7, 8)] + [(1.0, [2])]
    cpu, io = both(TUPLE, x, infeed=feed)
    want = [(x.flat[i] + k) * 2 for i, k in enumerate((5, -6, 7, 8))]
    assert same(cpu, (np.array(want, np.int32) + x.reshape(-1)).reshape(2, 2))
    assert len(io.outfeed) == 4 and same(io.outfeed[1], (np.array(want[1], np.int32),
                                                         np.array(2.5, np.float32)))
    assert len(io.infeed) == 1
    err, _ = both(TUPLE, x, infeed=feed[:2] + [(1.0, 2.0, 3.0)] + feed[2:])
    assert isinstance(err, HloEvalError) and "expected a tuple of 2 values" in str(err)


# ----------------------------------------------------------------- reduce: outfeed, host send

REDUCE = """HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  tk = token[] after-all()
  o = (f32[], f32[]) tuple(a, b)
  of = token[] outfeed(o, tk), outfeed_shape=(f32[], f32[])
  s = f32[] add(a, b)
  sd = (f32[], u32[], token[]) send(s, tk), channel_id=7, is_host_transfer=true
  done = token[] send-done(sd), channel_id=7, is_host_transfer=true
  one = f32[] constant(1)
  ROOT r = f32[] multiply(s, one)
}
ENTRY e {
  x = f32[2,3] parameter(0)
  z = f32[] constant(0.5)
  ROOT red = f32[2] reduce(x, z), dimensions={1}, to_apply=add
}
"""


def test_reduce_outfeed_host_send_by_hand():
    """The CPU folds output by output from the init over the reduced elements in order:
    the outfeed gets (accumulator, element) pairs, host_send[7] the partial sums. (The
    root is ``(a + b) x 1``: a root ``add(a, b)`` is the CPU's fast path, which makes
    no calls at all.)"""
    x = f32(1, 2, 3, 10, 20, 30).reshape(2, 3)
    cpu, io = both(REDUCE, x)
    pairs, sums = [], []
    for row in x:
        acc = np.float32(0.5)
        for v in row:
            pairs.append((acc, v))
            acc = np.float32(acc + v)
            sums.append(acc)
    assert same(cpu, f32(6.5, 60.5))
    assert same_queue(io.outfeed, [(np.asarray(a), np.asarray(b)) for a, b in pairs])
    assert same_queue(io.host_send[7], [np.asarray(s) for s in sums])


# ----------------------------------------------------------------- sort: comparator outfeed

SORT = """HloModule m
less {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  tk = token[] after-all()
  o = (s32[], s32[]) tuple(a, b)
  of = token[] outfeed(o, tk), outfeed_shape=(s32[], s32[])
  lt = pred[] compare(a, b), direction=LT
  t = pred[] constant(true)
  ROOT r = pred[] and(lt, t)
}
ENTRY e {
  x = s32[2,5] parameter(0)
  ROOT s = s32[2,5] sort(x), dimensions={1}, to_apply=less
}
"""


def test_sort_comparator_outfeed():
    """Every comparison the CPU's stable sort makes, in its order, on the outfeed. (The
    root is ``(a < b) and true``: a root ``compare(a, b)`` is the CPU's fast path,
    which makes no calls.)"""
    x = np.array([[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]], np.int32)
    cpu, io = both(SORT, x)
    assert same(cpu, np.sort(x, axis=1))
    assert len(io.outfeed) > 8


# ----------------------------------------------------------------- scatter: host recv

SCATTER = """HloModule m
comb {
  old = f32[] parameter(0)
  upd = f32[] parameter(1)
  tk = token[] after-all()
  rv = (f32[], u32[], token[]) recv(tk), channel_id=3, is_host_transfer=true
  rd = (f32[], token[]) recv-done(rv), channel_id=3, is_host_transfer=true
  v = f32[] get-tuple-element(rd), index=0
  w = f32[] multiply(upd, v)
  ROOT r = f32[] add(old, w)
}
""" + scatter_entry("f32", 4, 3, "comb")


def test_scatter_host_recv_by_hand():
    """Updates in order (index 7 is out of bounds: skipped, no call): x[i] + u * recv."""
    x, i, u = f32(1, 2, 3, 4), np.array([[2], [7], [0]], np.int32), f32(10, 20, 30)
    cpu, io = both(SCATTER, x, i, u, host_recv={3: [2, 3.5, 99.0]})
    assert same(cpu, f32(1 + 30 * 3.5, 2, 3 + 10 * 2, 4))
    assert io.host_recv[3] == [99.0]
    err, io = both(SCATTER, x, i, u, host_recv={3: [2.0, [1.0, 2.0], 5.0]})
    assert isinstance(err, HloEvalError) and "recv failed: ValueError" in str(err)
    assert err.instruction == "rv" and io.host_recv[3] == [5.0]
    err, _ = both(SCATTER, x, i, u, host_recv={3: [2.0]})
    assert isinstance(err, HloEvalError) and "the host queue is empty" in str(err)


# ------------------------------------------------------------ reduce-window, select-and-scatter

WINDOW = """HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  s = f32[] add(a, b)
  tk = token[] after-all()
  sd = (f32[], u32[], token[]) send(s, tk), channel_id=2, is_host_transfer=true
  one = f32[] constant(1)
  ROOT r = f32[] multiply(s, one)
}
ENTRY e {
  x = f32[5] parameter(0)
  z = f32[] constant(0)
  ROOT w = f32[5] reduce-window(x, z), window={size=2 pad=1_0}, to_apply=add
}
"""


def test_reduce_window_host_send():
    x = f32(1, 2, 4, 8, 16)
    cpu, io = both(WINDOW, x)
    assert same(cpu, f32(1, 3, 6, 12, 24))
    assert len(io.host_send[2]) >= 5


SELECT = """HloModule m
ge {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  tk = token[] after-all()
  o = (f32[], f32[]) tuple(a, b)
  of = token[] outfeed(o, tk), outfeed_shape=(f32[], f32[])
  ROOT c = pred[] compare(a, b), direction=GE
}
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  tk = token[] after-all()
  inf = (f32[1], token[]) infeed(tk)
  v1 = f32[1] get-tuple-element(inf), index=0
  v = f32[] reshape(v1)
  w = f32[] multiply(b, v)
  ROOT r = f32[] add(a, w)
}
ENTRY e {
  x = f32[6] parameter(0)
  src = f32[3] parameter(1)
  z = f32[] constant(0)
  ROOT s = f32[6] select-and-scatter(x, src, z), window={size=2 stride=2}, select=ge,
      scatter=add
}
"""


def test_select_and_scatter_by_hand():
    """Select phase first (window by window, the element against each later one),
    then the scatter calls (source order): out[chosen] = 0 + src * infeed."""
    x, src = f32(1, 5, 7, 2, 3, 3), f32(10, 20, 30)
    feed = [np.array([k], np.float32) for k in (2.0, 3.0, 4.0, 5.0)]
    cpu, io = both(SELECT, x, src, infeed=feed)
    assert same(cpu, f32(0, 20, 60, 0, 120, 0))
    assert same_queue(io.outfeed, [(np.asarray(np.float32(a)), np.asarray(np.float32(b)))
                                   for a, b in ((1, 5), (7, 2), (3, 3))])
    assert len(io.infeed) == 1


# ----------------------------------------------------------------- loops, conditionals, capacity

LOOP = "HloModule m\n" + counted_loop(
    "  tk = token[] after-all()\n  of = token[] outfeed(i, tk), outfeed_shape=s32[]\n",
    t="s32") + """\
body {
  x = s32[] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], s32[]) tuple(zero, x)
  loop = (s32[], s32[]) while(init), condition=cond, body=step
  ROOT k = s32[] get-tuple-element(loop), index=0
}
ENTRY e {
  x = s32[4] parameter(0)
  ROOT m = s32[4] map(x), dimensions={0}, to_apply=body
}
"""


def test_while_outfeed_of_many_values_by_hand():
    """Element x's loop outfeeds 0..x-1: 150 values in all; the outfeed gets each
    loop's counts, element by element."""
    x = np.array([40, 0, 70, 40], np.int32)
    cpu, io = both(LOOP, x)
    assert same(cpu, x)
    assert same_queue(io.outfeed, [np.asarray(np.int32(i)) for n in x for i in range(n)])


def test_while_limit_stops_the_outfeed():
    """Element 2's loop passes the iteration limit: the CPU raises there, the outfeed
    holding the values before (element 3's loop never runs)."""
    x = np.array([3, 2, 9, 1], np.int32)
    err, io = both(LOOP, x, limits=Limits(max_while_iterations=5))
    assert isinstance(err, HloLimitError) and err.instruction == "loop"
    assert len(io.outfeed) == 3 + 2 + 5


COND = """HloModule m
take {
  p = f32[] parameter(0)
  tk = token[] after-all()
  inf = (f32[], token[]) infeed(tk)
  v = f32[] get-tuple-element(inf), index=0
  ROOT r = f32[] add(p, v)
}
give {
  p = f32[] parameter(0)
  tk = token[] after-all()
  of = token[] outfeed(p, tk), outfeed_shape=f32[]
  ROOT r = f32[] negate(p)
}
body {
  x = f32[] parameter(0)
  zero = f32[] constant(0)
  c = pred[] compare(x, zero), direction=GT
  ROOT r = f32[] conditional(c, x, x), true_computation=take, false_computation=give
}
ENTRY e {
  x = f32[2,2] parameter(0)
  ROOT m = f32[2,2] map(x), dimensions={0,1}, to_apply=body
}
"""


def test_conditional_branches_by_hand():
    """Only the selected branch runs: positive x take an infeed value, the others go
    to the outfeed, in row-major order."""
    x = f32(1, -2, 3, -4).reshape(2, 2)
    cpu, io = both(COND, x, infeed=[100.0, 200.0, 300.0])
    assert same(cpu, f32(101, 2, 203, 4).reshape(2, 2))
    assert list(io.infeed) == [300.0]
    assert same_queue(io.outfeed, [np.asarray(np.float32(-2)), np.asarray(np.float32(-4))])


INFEED_LOOP = LOOP.replace(
    "  tk = token[] after-all()\n  of = token[] outfeed(i, tk), outfeed_shape=s32[]\n",
    "  tk = token[] after-all()\n  inf = (s32[], token[]) infeed(tk)\n"
    "  v = s32[] get-tuple-element(inf), index=0\n").replace(
    "  j = s32[] add(i, one)\n", "  w = s32[] add(i, v)\n  j = s32[] add(w, one)\n"
    "  d = s32[] subtract(j, v)\n").replace("tuple(j, n)", "tuple(d, n)")


def test_infeed_read_in_loops():
    """130 infeed reads in loops, in the CPU's order; 2 items stay."""
    x = np.array([50, 0, 80, 0], np.int32)
    cpu, io = both(INFEED_LOOP, x, infeed=list(range(132)))
    assert same(cpu, x) and list(io.infeed) == [130, 131]


SCATTER_LOOP = """HloModule m
cond {
  st = (f32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(st), index=1
  n = s32[] constant(30)
  ROOT lt = pred[] compare(i, n), direction=LT
}
step {
  st = (f32[], s32[]) parameter(0)
  a = f32[] get-tuple-element(st), index=0
  i = s32[] get-tuple-element(st), index=1
  tk = token[] after-all()
  of = token[] outfeed(a, tk), outfeed_shape=f32[]
  h = f32[] constant(0.5)
  b = f32[] multiply(a, h)
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT r = (f32[], s32[]) tuple(b, j)
}
comb {
  old = f32[] parameter(0)
  upd = f32[] parameter(1)
  s = f32[] add(old, upd)
  zero = s32[] constant(0)
  init = (f32[], s32[]) tuple(s, zero)
  loop = (f32[], s32[]) while(init), condition=cond, body=step
  ROOT r = f32[] get-tuple-element(loop), index=0
}
""" + scatter_entry("f32", 3, 4, "comb")


def test_scatter_combiner_with_a_loop_of_outfeeds():
    """A scatter whose combiner outfeeds 30 values a call, 120 in all: the same results
    as the CPU's, each update combined once."""
    x, i, u = f32(1, 2, 3), np.array([[0], [2], [0], [1]], np.int32), f32(4, 8, 16, 32)
    cpu, io = both(SCATTER_LOOP, x, i, u)
    assert len(io.outfeed) == 120


# ----------------------------------------------------------------- one-device send/recv

CHANNELS = """HloModule m
body {
  x = f32[] parameter(0)
  tk = token[] after-all()
  rv = (f32[], u32[], token[]) recv(tk), channel_id=1
  rd = (f32[], token[]) recv-done(rv), channel_id=1
  v = f32[] get-tuple-element(rd), index=0
  y = f32[] add(x, v)
  sd = (f32[], u32[], token[]) send(y, tk), channel_id=2
  done = token[] send-done(sd), channel_id=2
  sx = (f32[], u32[], token[]) send(x, tk), channel_id=4
  rx = (f32[], u32[], token[]) recv(tk), channel_id=4
  rxd = (f32[], token[]) recv-done(rx), channel_id=4
  w = f32[] get-tuple-element(rxd), index=0
  ROOT r = f32[] multiply(y, w)
}
ENTRY e {
  x = f32[3] parameter(0)
  tk = token[] after-all()
  c = f32[] constant(5)
  sa = (f32[], u32[], token[]) send(c, tk), channel_id=1
  d = f32[1] constant({6})
  sb = (f32[1], u32[], token[]) send(d, tk), channel_id=1
  g = f32[] constant(7)
  sc = (f32[], u32[], token[]) send(g, tk), channel_id=1
  m = f32[3] map(x), dimensions={0}, to_apply=body
  r = (f32[], u32[], token[]) recv(tk), channel_id=2
  rd = (f32[], token[]) recv-done(r), channel_id=2
  v = f32[] get-tuple-element(rd), index=0
  b = f32[1] broadcast(v), dimensions={}
  r2 = (f32[], u32[], token[]) recv(tk), channel_id=2
  rd2 = (f32[], token[]) recv-done(r2), channel_id=2
  v2 = f32[] get-tuple-element(rd2), index=0
  b2 = f32[1] broadcast(v2), dimensions={}
  ROOT o = f32[5] concatenate(m, b, b2), dimensions={0}
}
"""


def test_one_device_send_recv_by_hand():
    """Each call receives what a send before the map posted on channel 1 (5, 6, 7, one
    each), sends x + that on channel 2 (read by the recvs after the map: the first two),
    and sends x on channel 4 that its own recv then takes: (x + v) * x."""
    cpu, _ = both(CHANNELS, f32(1, 2, 3))
    assert same(cpu, f32(6 * 1, 8 * 2, 10 * 3, 6, 8))


def test_one_device_recv_without_send():
    """The fourth call has nothing to receive on channel 1: the CPU's error."""
    err, _ = both(CHANNELS.replace("f32[3] parameter", "f32[4] parameter")
                  .replace("f32[3] map", "f32[4] map").replace("f32[5] concatenate",
                                                             "f32[6] concatenate"),
                  f32(1, 2, 3, 4))
    assert isinstance(err, HloEvalError) and "no matching send ran before it" in str(err)


# ----------------------------------------------------------------- several devices

def test_two_devices_own_queues():
    """On two replicas each device's map reads its own infeed and fills its own outfeed."""
    m = hloref.parse(MAP.replace("HloModule m", "HloModule m, replica_count=2"))
    x = [f32(1, 2, 3), f32(-1, -2, -3)]
    feeds = [[10.0, 20.0, 30.0], [1.5, 2.5, 3.5, 4.5]]
    outs = {}
    for backend in ("cpu", "gpu"):
        outfeed = [[], []]
        kw = {"fallback": False} if backend == "gpu" else {}
        value = hloref.evaluate(m, x, backend=backend, infeed=feeds, outfeed=outfeed, **kw)
        outs[backend] = (value, outfeed)
    (cv, co), (gv, go) = outs["cpu"], outs["gpu"]
    assert all(same(a, b) for a, b in zip(gv, cv))
    assert same(cv[1], f32(0.5, 0.5, 0.5))
    assert all(same_queue(a, b) for a, b in zip(go, co))


# ----------------------------------------------------------------- element types, other channels

TYPES = """HloModule m
body {
  x = s8[] parameter(0)
  tk = token[] after-all()
  inf = ((bf16[], pred[], c64[]), token[]) infeed(tk)
  d = (bf16[], pred[], c64[]) get-tuple-element(inf), index=0
  h = bf16[] get-tuple-element(d), index=0
  p = pred[] get-tuple-element(d), index=1
  c = c64[] get-tuple-element(d), index=2
  xc = c64[] convert(x)
  y = c64[] multiply(c, xc)
  hx = bf16[] convert(x)
  g = bf16[] add(h, hx)
  o = (c64[], bf16[], pred[], s8[]) tuple(y, g, p, x)
  of = token[] outfeed(o, tk), outfeed_shape=(c64[], bf16[], pred[], s8[])
  n = s8[] negate(x)
  ROOT r = s8[] select(p, x, n)
}
ENTRY e {
  x = s8[3] parameter(0)
  ROOT m = s8[3] map(x), dimensions={0}, to_apply=body
}
"""


def test_element_types_through_the_queues():
    """bf16, pred and c64 (two words: its parts) in, c64, bf16, pred and s8 out, bit
    for bit (-0 and NaN payloads included)."""
    import ml_dtypes
    bf = ml_dtypes.bfloat16
    feed = [(np.array(-0.0, bf), True, np.complex64(1.5 - 2j)),
            (np.array(np.nan, bf), False, np.complex64(complex(-0.0, np.inf))),
            (np.array(3.25, bf), True, np.complex64(0.25 + 0.5j))]
    x = np.array([-128, 7, -1], np.int8)
    cpu, io = both(TYPES, x, infeed=feed)
    assert same(cpu, np.array([-128, -7, -1], np.int8))
    assert same(io.outfeed[2], (np.asarray(np.complex64(-0.25 - 0.5j)),
                                np.asarray(bf(2.25)), np.asarray(True), np.asarray(np.int8(-1))))


MAILBOX = """HloModule m
body {
  x = f32[] parameter(0)
  tk = token[] after-all()
  rv = (f32[1], u32[], token[]) recv(tk), channel_id=5
  rd = (f32[1], token[]) recv-done(rv), channel_id=5
  v1 = f32[1] get-tuple-element(rd), index=0
  v = f32[] reshape(v1)
  ROOT r = f32[] add(x, v)
}
ENTRY e {
  x = f32[2] parameter(0)
  tk = token[] after-all()
  a = s32[] constant(-3)
  sa = (s32[], u32[], token[]) send(a, tk), channel_id=5
  b = %(b)s constant(%(v)s)
  sb = (%(b)s, u32[], token[]) send(b, tk), channel_id=5
  ROOT m = f32[2] map(x), dimensions={0}, to_apply=body
}
"""


def test_mailbox_items_converted_as_the_cpu():
    """Values a send before the map posted are taken as the CPU's recv takes them: an
    s32 converted to f32 (numpy's astype), and a value of two elements is its reshape
    error, naming the recv."""
    cpu, _ = both(MAILBOX % {"b": "u8[]", "v": "250"}, f32(0.5, 1))
    assert same(cpu, f32(-2.5, 251))
    err, _ = both(MAILBOX % {"b": "f32[2]", "v": "{1, 2}"}, f32(0.5, 1))
    assert isinstance(err, HloEvalError) and err.instruction == "rv"
    assert "recv failed: ValueError: cannot reshape" in str(err)


STATE = """HloModule m
body {
  x = u64[] parameter(0)
  s = u64[2] rng-get-and-update-state(), delta=3
  lo1 = u64[1] slice(s), slice={[0:1]}
  lo = u64[] reshape(lo1)
  tk = token[] after-all()
  of = token[] outfeed(lo, tk), outfeed_shape=u64[]
  ROOT r = u64[] add(x, lo)
}
ENTRY e {
  x = u64[3] parameter(0)
  ROOT m = u64[3] map(x), dimensions={0}, to_apply=body
}
"""


def test_with_the_rng_state_channel():
    """A computation with both channels (the rng state's and the host's): each call's
    state read goes to the outfeed, in call order."""
    cpu, io = both(STATE, np.array([1, 2, 3], np.uint64))
    lows = [int(np.asarray(v)) for v in io.outfeed]
    assert lows[1] - lows[0] == 3 and lows[2] - lows[1] == 3


EARLIER = """HloModule m
cond {
  i = s32[] parameter(0)
  z = s32[] constant(0)
  ROOT c = pred[] compare(i, z), direction=GE
}
step {
  i = s32[] parameter(0)
  one = s32[] constant(1)
  ROOT j = s32[] add(i, one)
}
spin {
  x = s32[] parameter(0)
  ROOT w = s32[] while(x), condition=cond, body=step
}
give {
  x = s32[] parameter(0)
  tk = token[] after-all()
  of = token[] outfeed(x, tk), outfeed_shape=s32[]
  ROOT r = s32[] add(x, x)
}
ENTRY e {
  x = s32[3] parameter(0)
  a = s32[3] map(x), dimensions={0}, to_apply=spin
  ROOT b = s32[3] map(a), dimensions={0}, to_apply=give
}
"""


def test_earlier_loop_failure_stops_before_the_queues():
    """The first map's loop passes the limit (x >= 0 counts up): the CPU raises there and
    the second map's outfeed never runs; the device's loop error, read late for pure
    ops, is raised before the host transfers' launch."""
    limits = Limits(max_while_iterations=4)
    cpu, io = both(EARLIER, np.array([-9, -1, -3], np.int32), limits=limits)
    assert same(cpu, np.array([-18, -2, -6], np.int32)) and len(io.outfeed) == 3
    err, io = both(EARLIER, np.array([-9, 0, 1], np.int32), limits=limits)
    assert isinstance(err, HloLimitError) and not io.outfeed
