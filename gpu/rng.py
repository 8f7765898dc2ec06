"""``rng-bit-generator`` and ``rng-get-and-update-state`` on the GPU (mirrors
``evaluator/rng.py``, whose docstring fixes the algorithms; bit-exact with it and so
with XLA:CPU).

The state stays on the device: every thread reads the key and counter from the state
buffer, computes the counter of its element (128-bit add for Philox, 64-bit for
ThreeFry), runs the counter-based generator (Philox-4x32, 10 rounds; ThreeFry-2x32, 20
rounds) and keeps the word(s) of its element, in the CPU's layout: Philox words in
order (pairs for 64-bit results); ThreeFry one counter per 64-bit element, or for
narrower results the shape split in half along its first even dimension (else its
largest), word 0 at even and word 1 at odd positions. One more single-thread kernel
writes the new state. Results narrower than 32 bits are the low bits of the words.

``rng-get-and-update-state`` takes no operands: its 128-bit state is the interpreter's
(one per evaluation, as on the CPU), and the result is sent to the device once.
``rng``: hloref's own stream with redraws, on the device (below).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numba import cuda

from hloref.errors import HloEvalError
from hloref.evaluator.rng import (RNG_KEY, bit_generator_algorithm, bit_generator_shapes,
                                  next_rng_state, philox4x32_words, philox_counters,
                                  scalar_f64, take_stream_counter, threefry2x32_words,
                                  threefry_halves)

from .bitwise_convert import from_bits
from .device import (LOAD, SIMULATOR, STORE, device_fn, empty, to_device, type_class,
                     type_params)
from .elementwise import launch
from .registry import GpuFallback, gpu_op
from .serial import Channel


_M32 = 0xFFFFFFFF


# the CPU's generators of one counter, compiled from its source (bit for bit the same)
philox4x32 = device_fn(philox4x32_words)
threefry2x32 = device_fn(threefry2x32_words)


@cuda.jit(device=True)
def _word(w, x0, x1, x2, x3):
    if w == 0:
        return x0
    if w == 1:
        return x1
    if w == 2:
        return x2
    return x3


@cuda.jit(device=True)
def _philox_counter(state, k, c):
    """``(key, lo + c, hi + carry)`` from the device state (``k`` words)."""
    key = state[0]
    lo = state[1]
    hi = state[2] if k == 3 else state[0]
    new_lo = lo + np.uint64(c)
    if new_lo < lo:
        hi = hi + np.uint64(1)
    return key, new_lo, hi


@functools.cache  # one kernel per (algorithm, result type)
def _bits_kernel(algorithm, et):
    put = from_bits(et)
    wide = et.bits == 64
    m = np.uint64(_M32)

    if algorithm == "rng_philox":
        @cuda.jit
        def k(state, nstate, out, n, p, pre, d, post, h):
            i = cuda.grid(1)
            step = cuda.gridsize(1)
            while i < n:
                if wide:
                    key, lo, hi = _philox_counter(state, nstate, i // 2)
                    x0, x1, x2, x3 = philox4x32(lo, hi, key & m, key >> np.uint64(32))
                    w = 2 * (i % 2)
                    b = _word(w, x0, x1, x2, x3) | (_word(w + 1, x0, x1, x2, x3) << np.uint64(32))
                else:
                    key, lo, hi = _philox_counter(state, nstate, i // 4)
                    x0, x1, x2, x3 = philox4x32(lo, hi, key & m, key >> np.uint64(32))
                    b = _word(i % 4, x0, x1, x2, x3)
                out[i] = put(b, p)
                i += step
    else:
        @cuda.jit
        def k(state, nstate, out, n, p, pre, d, post, h):
            i = cuda.grid(1)
            step = cuda.gridsize(1)
            while i < n:
                key = state[0]
                k0 = key & m
                k1 = key >> np.uint64(32)
                if wide:
                    x0, x1 = threefry2x32(state[1] + np.uint64(i), k0, k1)
                    b = x0 | (x1 << np.uint64(32))
                else:
                    t = i // post
                    dpos = t % d
                    c = ((t // d) * h + dpos // 2) * post + i % post
                    x0, x1 = threefry2x32(state[1] + np.uint64(c), k0, k1)
                    b = x0 if dpos % 2 == 0 else x1
                out[i] = put(b, p)
                i += step

    return k


@cuda.jit
def _new_state(state, nstate, out, used, philox):
    if cuda.grid(1) == 0:
        out[0] = state[0]
        if philox:
            key, lo, hi = _philox_counter(state, nstate, used)
            out[1] = lo
            if nstate == 3:
                out[2] = hi
        else:
            out[1] = state[1] + np.uint64(used)


@gpu_op("rng-bit-generator")
def rng_bit_generator(state, *, shape, algorithm="rng_default"):
    state_shape, out_shape = bit_generator_shapes(shape)
    et = out_shape.element_type
    if state.et.name != "u64" or (state_shape is not None
                                  and state_shape.element_type.name != "u64"):
        raise GpuFallback("rng-bit-generator state that is not u64")
    k = state.size
    alg = bit_generator_algorithm(algorithm, k)
    dims = tuple(out_shape.dims)
    n = int(np.prod(dims, dtype=np.int64))
    width = 64 if et.bits == 64 else 32
    pre = d = post = h = 1
    if alg == "rng_three_fry":
        if width == 64 or not dims:
            used = n if width == 64 else 1
        else:
            pre, d, post, h = threefry_halves(dims)
            used = pre * h * post
    else:  # rng_philox
        used = philox_counters(n, width)
    out = empty(dims, et)
    launch(_bits_kernel(alg, et), n, state.data, k, out.data, n, type_params(et), pre,
           max(d, 1), max(post, 1), h)
    if state_shape is None:
        return out
    new_state = empty((k,), state.et)
    _new_state[1, 1](state.data, k, new_state.data, used % 2 ** 64, alg == "rng_philox")
    return new_state, out


@gpu_op("rng-get-and-update-state")
def rng_get_and_update_state(*, ctx, delta):
    return to_device(next_rng_state(ctx, delta))


# The value of an rng-get-and-update-state inside a computation that ``map`` calls once
# per element (``gpu/computation.py``): call ``k`` (row-major) reads the state the
# evaluation had before the map, plus ``k`` times the deltas of one call, plus the deltas
# of the call's earlier sites. 128-bit arithmetic on 32-bit halves (no uint64 overflow).

@cuda.jit(device=True)
def _add64(a, b):
    """``a + b`` of uint64 values: (the sum mod 2**64, the carry 0 or 1)."""
    m, s = np.uint64(_M32), np.uint64(32)
    lo = (a & m) + (b & m)
    hi = (a >> s) + (b >> s) + (lo >> s)
    return ((hi & m) << s) | (lo & m), hi >> s


@cuda.jit(device=True)
def _mul64(a, b):
    """``a * b`` of uint64 values: the 128-bit product (low, high)."""
    m, s = np.uint64(_M32), np.uint64(32)
    a0, a1, b0, b1 = a & m, a >> s, b & m, b >> s
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p00 >> s) + (p01 & m) + (p10 & m)
    return (p00 & m) | ((mid & m) << s), p11 + (p01 >> s) + (p10 >> s) + (mid >> s)


@cuda.jit(device=True)
def state_at(k, slo, shi, dlo, dhi, olo, ohi):
    """``s + o + k d`` mod 2**128 (each a (low, high) pair of uint64 words, ``k`` the
    call index): the state call ``k`` of a map reads at a site ``o`` past its first."""
    lo, hi = _mul64(np.uint64(k), dlo)
    kh, _ = _mul64(np.uint64(k), dhi)
    hi, _ = _add64(hi, kh)
    lo, c = _add64(lo, olo)
    hi, _ = _add64(hi, ohi)
    hi, _ = _add64(hi, c)
    lo, c = _add64(lo, slo)
    hi, _ = _add64(hi, shi)
    hi, _ = _add64(hi, c)
    return lo, hi


# The serial call mode (``gpu/serial.py``): a computation whose calls the op makes from
# one thread in the CPU's order reads the state at each site from a channel buffer.

@cuda.jit(device=True)
def take_state(io, dlo, dhi):
    """One rng-get-and-update-state of ``delta = (dlo, dhi)`` in a serial computation:
    ``io`` is ``u64[4]`` ``[state low, high, consumed low, high]`` (the evaluation's state
    before the op, and the deltas of the calls so far); returns the state it reads
    (``state + consumed`` mod 2**128) and adds ``delta`` to ``consumed``."""
    lo, c = _add64(io[0], io[2])
    hi, _ = _add64(io[1], io[3])
    hi, _ = _add64(hi, c)
    nlo, c = _add64(io[2], dlo)
    nhi, _ = _add64(io[3], dhi)
    nhi, _ = _add64(nhi, c)
    io[2] = nlo
    io[3] = nhi
    return lo, hi


class StateChannel(Channel):
    """rng-get-and-update-state's channel: ``begin`` sends ``[state low, high, 0, 0]``
    (the evaluation's state, not advanced) to a fresh ``u64[4]`` device buffer that the
    sites read and count in (``take_state``); ``finish`` reads back the two consumed
    words (16 bytes: the sum of the deltas of the calls made, a count, not data) and
    advances the evaluation's state by it, as the CPU's calls did one by one."""

    name = "state_io"

    def __init__(self):
        self.buffer = None

    def begin(self, ctx):
        lo, hi = next_rng_state(ctx, 0)
        self.buffer = cuda.to_device(np.array([lo, hi, 0, 0], np.uint64))
        return self.buffer

    def finish(self, ctx):
        words = self.buffer.copy_to_host()
        self.buffer = None
        next_rng_state(ctx, int(words[2]) | (int(words[3]) << 64))


# ----------------------------------------------------------------- rng (hloref's own stream)
#
# The CPU's stream (``evaluator/rng.py``: Philox-4x32 under ``RNG_KEY`` from the
# interpreter's 128-bit op counter, value ``t`` = the words (0, 1) or (2, 3) of counter
# ``t // 2``), drawn on the device: one thread per value. Redraws (integers past the
# last whole multiple of the span, floats that round up to ``hi``) take fresh values in
# index order, as the CPU: a single-thread kernel ranks the rejected elements and the
# count (one scalar) comes back to advance the host's counter. The bounds are read as
# scalars too. Integer and uniform results are bit-exact with the CPU; normal results
# use log/cos/sqrt (the host's numpy functions in the simulator, bit-exact there;
# libdevice's on a GPU, within an ulp or two).

if SIMULATOR:
    _log, _cos, _sqrt = np.log, np.cos, np.sqrt
else:  # pragma: no cover - needs a GPU
    _log, _cos, _sqrt = math.log, math.cos, math.sqrt

_M63 = 0x7FFFFFFFFFFFFFFF


@cuda.jit(device=True)
def _stream_value(clo, chi, t, k0, k1):
    """Value ``t`` of the stream from the 128-bit counter ``(clo, chi)``: a u64."""
    lo = clo + np.uint64(t // 2)
    hi = chi + np.uint64(1) if lo < clo else chi
    w0, w1, w2, w3 = philox4x32(lo, hi, k0, k1)
    if t % 2 == 0:
        return w0 | (w1 << np.uint64(32))
    return w2 | (w3 << np.uint64(32))


@cuda.jit
def _draw_kernel(bits, n, clo, chi, k0, k1):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < n:
        bits[i] = _stream_value(clo, chi, i, k0, k1)
        i += step


@cuda.jit
def _redraw_kernel(bits, rank, n, clo, chi, k0, k1):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < n:
        if rank[i] >= 0:
            bits[i] = _stream_value(clo, chi, rank[i], k0, k1)
        i += step


@cuda.jit
def _rank_kernel(bad, rank, count, n):
    """One thread: ``rank[i]`` = the number of rejected elements before ``i`` (or -1)."""
    if cuda.grid(1) == 0:
        c = 0
        for i in range(n):
            if bad[i]:
                rank[i] = c
                c += 1
            else:
                rank[i] = -1
        count[0] = c


@cuda.jit
def _int_reject_kernel(bits, bad, n, limit):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < n:
        bad[i] = 1 if bits[i] >= limit else 0
        i += step


@functools.cache
def _int_finish_kernel(cls):
    store = STORE[cls]
    signed = cls == "sint"

    @cuda.jit
    def k(bits, out, n, span, whole, lo, p):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            offs = bits[i] if whole else bits[i] % span
            wide = offs + lo  # wraps mod 2**64: exact in range
            if signed:
                v = np.int64(wide & np.uint64(_M63))
                if wide >> np.uint64(63):
                    v += np.int64(-9223372036854775807 - 1)
                out[i] = store(v, p)
            else:
                out[i] = store(wide, p)
            i += step

    return k


@functools.cache
def _uniform_kernel(cls):
    store = STORE[cls]

    @cuda.jit
    def k(bits, out, rank, n, lo, hi, p):
        """Element ``i`` (every one, or where ``rank[i] >= 0``) from its bits."""
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            if rank[i] >= 0:
                u = np.float64(bits[i] >> np.uint64(11)) * 2.0 ** -53
                out[i] = store(lo + (hi - lo) * u, p)
            i += step

    return k


@functools.cache
def _float_reject_kernel(cls):
    load = LOAD[cls]

    @cuda.jit
    def k(out, bad, n, hi, p):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            bad[i] = 0 if np.float64(load(out[i], p)) < hi else 1
            i += step

    return k


@functools.cache
def _fill_kernel(cls):
    store = STORE[cls]

    @cuda.jit
    def k(out, rank, n, value, p):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            if rank[i] >= 0:
                out[i] = store(value, p)
            i += step

    return k


@functools.cache
def _normal_kernel(cls):
    store = STORE[cls]

    @cuda.jit
    def k(out, n, clo, chi, k0, k1, mu, sigma, p):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < n:
            b1 = _stream_value(clo, chi, 2 * i, k0, k1)
            b2 = _stream_value(clo, chi, 2 * i + 1, k0, k1)
            u1 = (np.float64(b1 >> np.uint64(11)) + 1.0) * 2.0 ** -53
            u2 = np.float64(b2 >> np.uint64(11)) * 2.0 ** -53
            z = _sqrt(-2.0 * _log(u1)) * _cos(2.0 * np.pi * u2)
            out[i] = store(mu + sigma * z, p)
            i += step

    return k


class _DeviceStream:
    """The interpreter's op counter (``ctx._rng_op_counter``, shared with the CPU's rng)."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.k0, self.k1 = RNG_KEY & _M32, (RNG_KEY >> 32) & _M32

    def take(self, n: int):
        """The counter ``(lo, hi)`` of the next ``n`` values, advanced past them."""
        return take_stream_counter(self.ctx, n)


def _scalar(x):
    return scalar_f64(x.to_host())


def _rejections(stream, bad, rank, count, n, redraw):
    """Up to 64 rounds: rank the rejected elements, redraw them; the count left."""
    for _ in range(64):
        _rank_kernel[1, 1](bad, rank, count, n)
        c = int(count.copy_to_host()[0])
        if c == 0:
            return 0
        redraw(c)
    _rank_kernel[1, 1](bad, rank, count, n)
    return int(count.copy_to_host()[0])


@gpu_op("rng")
def rng(a, b, *, shape, ctx, distribution):
    et = shape.element_type
    dims = tuple(shape.dims)
    n = int(np.prod(dims, dtype=np.int64))
    dist = str(distribution)
    if et.is_pred or et.is_complex:
        raise HloEvalError(f"rng does not support element type {et.name}")
    cls = type_class(et)
    if cls not in ("sint", "uint", "f32", "f64", "narrow"):
        raise GpuFallback(f"rng of {et.name} has no GPU kernel")
    stream = _DeviceStream(ctx)
    out = empty(dims, et)
    p = type_params(et)
    if dist == "rng_uniform" and et.is_integer:
        lo = int(a.to_host().reshape(-1)[0])
        span = int(b.to_host().reshape(-1)[0]) - lo
        if span <= 0:
            span, n_draw = 1, 0  # every element lo
        else:
            n_draw = n
        bits = cuda.device_array(max(n, 1), dtype=np.uint64)
        if n_draw:
            clo, chi = stream.take(n)
            launch(_draw_kernel, n, bits, n, np.uint64(clo), np.uint64(chi), np.uint64(stream.k0),
                   np.uint64(stream.k1))
            limit = 2 ** 64 - (2 ** 64 % span)
            if limit < 2 ** 64:
                bad = cuda.device_array(n, dtype=np.uint8)
                rank = cuda.device_array(n, dtype=np.int64)
                count = cuda.device_array(1, dtype=np.int64)

                def redraw(c):
                    rlo, rhi = stream.take(c)
                    launch(_redraw_kernel, n, bits, rank, n, np.uint64(rlo), np.uint64(rhi),
                           np.uint64(stream.k0), np.uint64(stream.k1))
                    launch(_int_reject_kernel, n, bits, bad, n, np.uint64(limit))

                launch(_int_reject_kernel, n, bits, bad, n, np.uint64(limit))
                _rejections(stream, bad, rank, count, n, redraw)
        else:
            launch(_fill, n, bits, n, np.uint64(0))
        launch(_int_finish_kernel(cls), n, bits, out.data, n,
               np.uint64(span % 2 ** 64), span >= 2 ** 64, np.uint64(lo % 2 ** 64), p)
        return out
    if dist == "rng_uniform":
        lo, hi = _scalar(a), _scalar(b)
        rank = cuda.device_array(max(n, 1), dtype=np.int64)
        launch(_fill, n, rank, n, 0)
        if not lo < hi:
            launch(_fill_kernel(cls), n, out.data, rank, n, lo, p)
            return out
        bits = cuda.device_array(max(n, 1), dtype=np.uint64)
        clo, chi = stream.take(n)
        keys = np.uint64(stream.k0), np.uint64(stream.k1)
        launch(_draw_kernel, n, bits, n, np.uint64(clo), np.uint64(chi), *keys)
        launch(_uniform_kernel(cls), n, bits, out.data, rank, n, lo, hi, p)
        bad = cuda.device_array(max(n, 1), dtype=np.uint8)
        count = cuda.device_array(1, dtype=np.int64)

        def redraw(c):
            rlo, rhi = stream.take(c)
            launch(_redraw_kernel, n, bits, rank, n, np.uint64(rlo), np.uint64(rhi), *keys)
            launch(_uniform_kernel(cls), n, bits, out.data, rank, n, lo, hi, p)
            launch(_float_reject_kernel(cls), n, out.data, bad, n, hi, p)

        launch(_float_reject_kernel(cls), n, out.data, bad, n, hi, p)
        if _rejections(stream, bad, rank, count, n, redraw):
            launch(_fill_kernel(cls), n, out.data, rank, n, lo, p)
        return out
    if dist == "rng_normal":
        if not et.is_float:
            raise HloEvalError(f"rng_normal needs a floating-point result, got {et.name}")
        mu, sigma = _scalar(a), _scalar(b)
        clo, chi = stream.take(2 * n)
        launch(_normal_kernel(cls), n, out.data, n, np.uint64(clo), np.uint64(chi),
               np.uint64(stream.k0), np.uint64(stream.k1), mu, sigma, p)
        return out
    raise HloEvalError(f"unknown rng distribution {dist}")


@cuda.jit
def _fill(a, n, value):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < n:
        a[i] = value
        i += step


# ---------------------------------------------------------------------------
# ``rng`` inside a computation that an op calls per element (gpu/computation.py)
# ---------------------------------------------------------------------------
#
# The computation runs once per element (or per combine) in every thread, so it cannot
# take counters from the interpreter's stream in call order as the CPU does. Each draw
# is a counter of its own for the same Philox-4x32 (key ``RNG_KEY``): the 128-bit
# counter ``(lo, hi)`` is ``lo`` = the thread's draw count (one more at every draw, kept
# in a device array slot per thread; the atomic add makes it unique even where two
# threads share a slot) and ``hi = 2**63 | site << 32 | thread``, ``site`` naming the
# ``rng`` instruction (31 bits). The interpreter's own stream uses counters below 2**64
# (``hi == 0``), so the two never meet. A draw gives two 64-bit values (words 0-1 and
# 2-3, low word first), turned into values by the CPU's rules (``evaluator/rng.py``):
# uniform floats ``a + (b - a) * u`` rounded once with the same redraws, uniform
# integers ``a + bits mod (b - a)`` with the same rejection, normals by the same
# Box-Muller.

_HI = np.uint64(1 << 63)


@cuda.jit(device=True)
def thread_index():
    """This thread's linear index in the whole launch (grids of any rank)."""
    block = (cuda.blockIdx.z * cuda.gridDim.y + cuda.blockIdx.y) * cuda.gridDim.x + cuda.blockIdx.x
    threads = cuda.blockDim.x * cuda.blockDim.y * cuda.blockDim.z
    inner = (cuda.threadIdx.z * cuda.blockDim.y + cuda.threadIdx.y) * cuda.blockDim.x + \
        cuda.threadIdx.x
    return np.uint64(block) * np.uint64(threads) + np.uint64(inner)


@cuda.jit(device=True)
def site_draw(counts, site):
    """Two fresh u64 values for the ``rng`` instruction ``site`` in this thread."""
    t = thread_index()
    c = cuda.atomic.add(counts, t % np.uint64(counts.shape[0]), np.uint64(1))
    hi = _HI | (np.uint64(site) << np.uint64(32)) | (t & np.uint64(_M32))
    w0, w1, w2, w3 = philox4x32(np.uint64(c), hi, np.uint64(RNG_KEY & _M32),
                                np.uint64((RNG_KEY >> 32) & _M32))
    return w0 | (w1 << np.uint64(32)), w2 | (w3 << np.uint64(32))


@functools.cache
def site_uniform_float(cls):
    """``(a, b, counts, site, p) -> storage value`` of float class ``cls`` in [a, b): the
    CPU's rule (``a >= b`` or NaN bounds: ``a``; a value rounding up to ``b`` is redrawn,
    64 times at most, then ``a``). ``a``, ``b``: the bounds' f64 values."""
    store, load = STORE[cls], LOAD[cls]

    @cuda.jit(device=True)
    def f(a, b, counts, site, p):
        lo = np.float64(a)
        hi = np.float64(b)
        if not lo < hi:
            return store(lo, p)
        for _ in range(65):
            bits, _unused = site_draw(counts, site)
            u = np.float64(bits >> np.uint64(11)) * 2.0 ** -53
            v = store(lo + (hi - lo) * u, p)
            if np.float64(load(v, p)) < hi:
                return v
        return store(lo, p)

    return f


@functools.cache
def site_uniform_int(cls):
    """``(a, b, counts, site, p) -> storage value`` of integer class ``cls`` in [a, b):
    ``a + bits mod (b - a)`` (mod 2**64), bits redrawn while ``bits >= 2**64 - 2**64 mod
    (b - a)`` (64 redraws at most, as the CPU); ``b <= a`` gives ``a``. ``a``, ``b``:
    loaded values (int64 for signed, uint64 for unsigned types)."""
    store = STORE[cls]
    signed = cls == "sint"

    @cuda.jit(device=True)
    def f(a, b, counts, site, p):
        if not a < b:
            return store(a, p)
        ua = np.uint64(a)
        span = np.uint64(b) - ua  # b - a in [1, 2**64 - 1]: exact mod 2**64
        rest = (np.uint64(0) - span) % span  # 2**64 mod span
        bits, _unused = site_draw(counts, site)
        for _ in range(64):
            if rest == 0 or bits < np.uint64(0) - rest:
                break
            bits, _unused = site_draw(counts, site)
        wide = ua + bits % span  # wraps mod 2**64: exact in range
        if signed:
            v = np.int64(wide & np.uint64(_M63))
            if wide >> np.uint64(63):
                v += np.int64(-9223372036854775807 - 1)
            return store(v, p)
        return store(wide, p)

    return f


@functools.cache
def site_normal(cls):
    """``(mu, sigma, counts, site, p) -> storage value``: the CPU's Box-Muller
    ``mu + sigma * sqrt(-2 ln u1) cos(2 pi u2)`` in f64, rounded once."""
    store = STORE[cls]

    @cuda.jit(device=True)
    def f(mu, sigma, counts, site, p):
        b1, b2 = site_draw(counts, site)
        u1 = (np.float64(b1 >> np.uint64(11)) + 1.0) * 2.0 ** -53
        u2 = np.float64(b2 >> np.uint64(11)) * 2.0 ** -53
        z = _sqrt(-2.0 * _log(u1)) * _cos(2.0 * np.pi * u2)
        return store(np.float64(mu) + np.float64(sigma) * z, p)

    return f
