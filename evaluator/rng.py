"""Random numbers: ``rng-bit-generator``, ``rng``, ``rng-get-and-update-state``.

``rng-bit-generator`` (bit-exact with XLA:CPU)
----------------------------------------------
XLA:CPU expands the op with ``RngBitGeneratorExpander`` (``xla/service/
rng_bit_generator_expander.cc``) into the generators of ``xla/hlo/builder/lib/prng.cc``;
``rng_default`` is Philox there (checked against XLA:CPU, jaxlib 0.10.2). The state is
a ``u64[k]``:

* ``rng_three_fry``: ``k == 2`` (XLA's verifier rejects other sizes, since the new state
  it builds has two words): ``key = state[0]``, ``counter = state[1]``. Counters are
  ``counter + i`` (wrapping u64) for the row-major index ``i`` of the elements produced,
  each fed to ThreeFry-2x32 (20 rounds) as ``(low32, high32)`` with the key split the same
  way. 64-bit results use both output words (``x0 | x1 << 32``), one counter per element.
  32-bit and narrower results use both words too: the shape is split in half along its
  first even dimension (else its largest), output word 0 fills the even and word 1 the
  odd positions of that dimension (``SplitShapeIntoHalves``/``CombineShapePair``), so
  ``ceil(d/2) * rest`` counters are used. New state: ``[key, counter + counters used]``.
* ``rng_philox`` / ``rng_default``: ``k == 2`` or ``3``: ``key = state[0]``; the 128-bit
  counter is ``(low, high) = (state[1], state[2])`` for ``k == 3`` but
  ``(state[1], state[0])`` for ``k == 2`` (XLA reverses the state). Philox-4x32 (10
  rounds, no key scrambling) of ``counter + i`` (128-bit add) gives 4 words per counter,
  used in order (``ceil(n/4)`` counters for n 32-bit-or-narrower elements; 64-bit
  elements take words pairwise, ``ceil(n/2)`` counters). New state: ``[key, counter +
  used]`` (``k == 3``) or ``[key, low64(counter + used)]`` (``k == 2``).
* Results narrower than 32 bits are the low bits of the 32-bit words; every result
  type (signed, float) is the unsigned bit pattern reinterpreted; pred and complex are
  rejected (as XLA does).

``rng`` (hloref's own generator; not bit-comparable with any XLA backend)
----------------------------------------------------------------------
Each ``Interpreter`` owns a Philox-4x32 stream: key ``RNG_KEY``, a 128-bit counter
starting at 0 (``ctx._rng_op_counter``), advanced by every ``rng`` evaluation by the
number of counters it used. Each element draws 64 bits (words ``2j, 2j+1`` of the
stream, low word first). So a fresh ``Interpreter`` on the same module gives the same
values, and successive ``rng`` evaluations give different ones.

* ``rng_uniform``, float types: ``u = (bits >> 11) * 2**-53`` in [0, 1), ``a + (b - a) * u``
  in f64 rounded once to the type; a value that rounds up to ``b`` is redrawn (more
  stream words), after 64 redraws it becomes ``a``. ``a >= b`` gives ``a``.
* ``rng_uniform``, integer types: ``a + (bits mod (b - a))`` in [a, b) with bits redrawn
  while ``bits >= 2**64 - 2**64 mod (b - a)`` (no modulo bias); ``b <= a`` gives ``a``.
  (HloEvaluator draws from [a, b - 1] too.)
* ``rng_normal``, float types: Box–Muller in f64, ``z = sqrt(-2 ln u1) * cos(2 pi u2)``
  with ``u1 = (k1 + 1) * 2**-53`` in (0, 1] and ``u2 = k2 * 2**-53`` (two 64-bit draws per
  element), ``mu + sigma * z`` rounded once. Integer normals are rejected (as in
  HloEvaluator).

``rng-get-and-update-state``
----------------------------
As XLA:CPU's ``RngGetAndUpdateStateThunk`` (``xla/backends/cpu/runtime/
rng_state_thunk.cc``): a 128-bit state starting at ``0x7012395``; the op returns the
current state as ``u64[2]`` ``[low, high]`` and then adds ``delta`` (mod 2**128). XLA
keeps one state per instruction per executable; hloref keeps one per ``Interpreter``
(``ctx._rng_state``), shared by every such instruction, so the first evaluation agrees
with XLA:CPU's first execution and a module with several of them differs.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from hloref.errors import HloEvalError
from hloref.shapes import TupleShape

from .numeric import element_type_of, finish, from_float64
from .registry import op


__all__ = ["threefry2x32", "philox4x32", "threefry2x32_words", "philox4x32_words", "RNG_KEY", "RNG_STATE_INITIAL", "split_dim",
           "threefry_halves", "philox_counters", "bit_generator_shapes",
           "bit_generator_algorithm", "next_rng_state", "take_stream_counter", "scalar_f64",
           "INTERPRETER_STATE"]

_U64 = np.uint64
#: Key of the per-interpreter stream behind the ``rng`` op.
RNG_KEY = 0x68C0_5EED_1234_ABCD
#: Initial 128-bit value of ``rng-get-and-update-state`` (as XLA:CPU).
RNG_STATE_INITIAL = 0x7012395


# ---------------------------------------------------------------------------
# Kernels (all counters at once). Arithmetic in uint64, masked to 32 bits.
# ---------------------------------------------------------------------------

# The generators of one counter are plain scalar functions compiled here with
# ``njit(cache=True)`` and by the GPU backend for numba.cuda (``gpu.device.device_fn``):
# one source, bit for bit the same on both. Hence the explicit uint64 constants and no
# tuple of key words indexed at run time.

@njit(cache=True)
def philox4x32_words(lo, hi, k0, k1):  # pragma: no cover - compiled
    """Philox-4x32, 10 rounds, of the 128-bit counter ``(lo, hi)`` (uint64 words) under
    key ``(k0, k1)`` (uint64, low 32 bits used): four 32-bit words (as uint64)."""
    m = np.uint64(0xFFFFFFFF)
    x0 = lo & m
    x1 = lo >> np.uint64(32)
    x2 = hi & m
    x3 = hi >> np.uint64(32)
    a = k0 & m
    b = k1 & m
    for _ in range(10):
        p0 = x0 * np.uint64(0xD2511F53)
        p1 = x2 * np.uint64(0xCD9E8D57)
        n0 = (p1 >> np.uint64(32)) ^ x1 ^ a
        n1 = p1 & m
        n2 = (p0 >> np.uint64(32)) ^ x3 ^ b
        n3 = p0 & m
        x0 = n0
        x1 = n1
        x2 = n2
        x3 = n3
        a = (a + np.uint64(0x9E3779B9)) & m
        b = (b + np.uint64(0xBB67AE85)) & m
    return x0, x1, x2, x3


@njit(cache=True)
def _key_word(i, k0, k1, k2):  # pragma: no cover - compiled
    if i == 0:
        return k0
    if i == 1:
        return k1
    return k2


@njit(cache=True)
def _rotation(block, r):  # pragma: no cover - compiled
    if block % 2 == 0:
        return (13, 15, 26, 6)[r]
    return (17, 29, 16, 24)[r]


@njit(cache=True)
def threefry2x32_words(c, k0, k1):  # pragma: no cover - compiled
    """ThreeFry-2x32, 20 rounds, of the 64-bit counter ``c`` (uint64, low word first)
    under key ``(k0, k1)`` (uint64, low 32 bits used): two 32-bit words (as uint64)."""
    m = np.uint64(0xFFFFFFFF)
    k0 = k0 & m
    k1 = k1 & m
    k2 = (np.uint64(0x1BD11BDA) ^ k0 ^ k1) & m
    x0 = ((c & m) + k0) & m
    x1 = ((c >> np.uint64(32)) + k1) & m
    for block in range(5):
        for r in range(4):
            rot = np.uint64(_rotation(block, r))
            x0 = (x0 + x1) & m
            x1 = ((x1 << rot) | (x1 >> (np.uint64(32) - rot))) & m
            x1 = x0 ^ x1
        x0 = (x0 + _key_word((block + 1) % 3, k0, k1, k2)) & m
        x1 = (x1 + _key_word((block + 2) % 3, k0, k1, k2) + np.uint64(block + 1)) & m
    return x0, x1


@njit(cache=True)
def _threefry_kernel(counters, k0, k1):  # pragma: no cover - compiled
    n = counters.shape[0]
    out0 = np.empty(n, np.uint32)
    out1 = np.empty(n, np.uint32)
    for i in range(n):
        x0, x1 = threefry2x32_words(counters[i], np.uint64(k0), np.uint64(k1))
        out0[i] = np.uint32(x0)
        out1[i] = np.uint32(x1)
    return out0, out1


@njit(cache=True)
def _philox_kernel(lo, hi, k0, k1):  # pragma: no cover - compiled
    n = lo.shape[0]
    out = np.empty((n, 4), np.uint32)
    for i in range(n):
        x0, x1, x2, x3 = philox4x32_words(lo[i], hi[i], np.uint64(k0), np.uint64(k1))
        out[i, 0] = np.uint32(x0)
        out[i, 1] = np.uint32(x1)
        out[i, 2] = np.uint32(x2)
        out[i, 3] = np.uint32(x3)
    return out


def threefry2x32(counters: np.ndarray, key: int) -> tuple[np.ndarray, np.ndarray]:
    """ThreeFry-2x32 (20 rounds) of u64 ``counters`` (low word first) under u64 ``key``."""
    c = np.ascontiguousarray(np.asarray(counters, np.uint64).reshape(-1))
    return _threefry_kernel(c, key & 0xFFFFFFFF, (key >> 32) & 0xFFFFFFFF)


def philox4x32(lo: np.ndarray, hi: np.ndarray, key: int) -> np.ndarray:
    """Philox-4x32 (10 rounds) of 128-bit counters ``(lo, hi)``: a ``[n, 4]`` u32 array."""
    lo = np.ascontiguousarray(np.asarray(lo, np.uint64).reshape(-1))
    hi = np.ascontiguousarray(np.asarray(hi, np.uint64).reshape(-1))
    return _philox_kernel(lo, hi, key & 0xFFFFFFFF, (key >> 32) & 0xFFFFFFFF)


def _u128_counters(lo: int, hi: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """``(lo, hi) + i`` for i in [0, n) as 128-bit adds (low and high u64 words)."""
    i = np.arange(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        new_lo = np.uint64(lo) + i
    new_hi = np.where(new_lo < np.uint64(lo), _U64((hi + 1) & (2**64 - 1)), _U64(hi))
    return new_lo, new_hi.astype(np.uint64)


# ---------------------------------------------------------------------------
# rng-bit-generator
# ---------------------------------------------------------------------------

def split_dim(dims: tuple[int, ...]) -> int:
    for i, d in enumerate(dims):
        if d % 2 == 0:
            return i
    best = 0
    for i, d in enumerate(dims):
        if d > dims[best]:
            best = i
    return best


def threefry_halves(dims: tuple[int, ...]) -> tuple[int, int, int, int]:
    """ThreeFry's split of a 32-bit-or-narrower result in halves along ``split_dim``:
    ``(elements before it, its length d, elements after it, ceil(d / 2))``."""
    sd = split_dim(dims)
    pre = int(np.prod(dims[:sd], dtype=np.int64))
    post = int(np.prod(dims[sd + 1:], dtype=np.int64))
    d = dims[sd]
    return pre, d, post, (d + 1) // 2


def philox_counters(n: int, width: int) -> int:
    """Philox counters used for ``n`` elements of ``width`` bits (4 words a counter)."""
    return ((n * 2 if width == 64 else n) + 3) // 4


def _threefry_bits(key: int, counter: int, dims: tuple[int, ...], width: int):
    """(bits as uint64 array of ``dims``, counters used)."""
    n = int(np.prod(dims, dtype=np.int64))
    if width == 64:
        with np.errstate(over="ignore"):
            ctr = np.uint64(counter) + np.arange(n, dtype=np.uint64)
        x0, x1 = threefry2x32(ctr, key)
        bits = x0.astype(np.uint64) | (x1.astype(np.uint64) << np.uint64(32))
        return bits.reshape(dims), n
    if len(dims) == 0:
        x0, _ = threefry2x32(np.array([counter], np.uint64), key)
        return x0.astype(np.uint64).reshape(()), 1
    pre, d, post, h = threefry_halves(dims)
    used = pre * h * post
    with np.errstate(over="ignore"):
        ctr = np.uint64(counter) + np.arange(used, dtype=np.uint64)
    x0, x1 = threefry2x32(ctr, key)
    both = np.stack([x0.reshape(pre, h, post), x1.reshape(pre, h, post)], axis=2)
    bits = both.reshape(pre, 2 * h, post)[:, :d, :]
    return bits.astype(np.uint64).reshape(dims), used


def _philox_bits(key: int, lo: int, hi: int, dims: tuple[int, ...], width: int):
    n = int(np.prod(dims, dtype=np.int64))
    nv = philox_counters(n, width)
    clo, chi = _u128_counters(lo, hi, nv)
    out = philox4x32(clo, chi, key).astype(np.uint64)
    if width == 64:
        pairs = out[:, 0::2] | (out[:, 1::2] << np.uint64(32))
        bits = pairs.reshape(-1)[:n]
    else:
        bits = out.reshape(-1)[:n]
    return bits.reshape(dims), nv


def _bits_as(bits: np.ndarray, et) -> np.ndarray:
    """Unsigned ``bits`` (u64 holding the low ``et.bits`` bits) reinterpreted as ``et``."""
    w = et.bits
    if et.is_integer:
        mask = np.uint64((1 << w) - 1) if w < 64 else np.uint64(2**64 - 1)
        u = bits & mask
        if w >= 8:
            return u.astype(np.dtype(f"u{w // 8}")).view(et.dtype)
        return finish(u.astype(np.int64), et)
    # floats (including sub-byte f4): the bit pattern in the storage width
    u = bits & np.uint64((1 << w) - 1)
    return u.astype(et.bits_dtype).view(et.dtype)


def bit_generator_shapes(shape):
    """``(state shape or None, bits shape)`` of rng-bit-generator's result (an array
    result is the bits alone), the bits' element type checked."""
    if isinstance(shape, TupleShape):
        state_shape, out_shape = shape.elements
    else:
        state_shape, out_shape = None, shape
    et = out_shape.element_type
    if et.is_pred or et.is_complex or not (et.is_integer or et.is_float):
        raise HloEvalError(f"rng-bit-generator cannot produce element type {et.name}")
    return state_shape, out_shape


def bit_generator_algorithm(algorithm, k: int) -> str:
    """``rng_three_fry`` or ``rng_philox`` (``rng_default``: XLA:CPU's default,
    RngBitGeneratorExpander(RNG_PHILOX)), its state size ``k`` checked."""
    alg = str(algorithm)
    if alg == "rng_default":
        alg = "rng_philox"
    if alg == "rng_three_fry":
        if k != 2:
            raise HloEvalError(f"rng_three_fry needs a u64[2] state, got u64[{k}]")
    elif alg == "rng_philox":
        if k not in (2, 3):
            raise HloEvalError(f"rng_philox needs a u64[2] or u64[3] state, got u64[{k}]")
    else:
        raise HloEvalError(f"unknown rng-bit-generator algorithm {alg}")
    return alg


@op("rng-bit-generator")
def rng_bit_generator(state, *, shape, algorithm="rng_default"):
    """``(new state, bits)``; a result declared as an array alone (XLA's parser and
    XLA:CPU accept ``u32[8] rng-bit-generator(s)``, sharding_propagation_test.cc) is the
    bits alone, as XLA:CPU returns them."""
    state_shape, out_shape = bit_generator_shapes(shape)
    et = out_shape.element_type
    dims = tuple(out_shape.dims)
    st = [int(v) for v in np.asarray(state).reshape(-1).astype(np.uint64)]
    k = len(st)
    width = 64 if et.bits == 64 else 32
    alg = bit_generator_algorithm(algorithm, k)
    if alg == "rng_three_fry":
        key, counter = st
        bits, used = _threefry_bits(key, counter, dims, width)
        new_state = [key, (counter + used) % 2**64]
    else:  # rng_philox
        key = st[0]
        lo, hi = (st[1], st[2]) if k == 3 else (st[1], st[0])
        bits, used = _philox_bits(key, lo, hi, dims, width)
        total = ((hi << 64) | lo) + used
        new_lo, new_hi = total & (2**64 - 1), (total >> 64) & (2**64 - 1)
        new_state = [key, new_lo, new_hi] if k == 3 else [key, new_lo]
    if state_shape is None:
        return _bits_as(bits, et)
    new_state_arr = np.array(new_state, dtype=np.uint64).astype(state_shape.element_type.dtype)
    return (new_state_arr, _bits_as(bits, et))


# ---------------------------------------------------------------------------
# rng-get-and-update-state
# ---------------------------------------------------------------------------

#: the attributes these ops keep on the evaluating interpreter (``ctx``): one state per
#: evaluation, which an interpreter lending it to another (the GPU's CPU fallback) copies
INTERPRETER_STATE = ("_rng_state", "_rng_op_counter")


def next_rng_state(ctx, delta) -> np.ndarray:
    """The interpreter's 128-bit state as ``u64[2]`` ``[low, high]``, then advanced by
    ``delta``."""
    state = getattr(ctx, "_rng_state", None)
    if state is None:
        state = RNG_STATE_INITIAL
    ctx._rng_state = (state + int(str(delta))) % 2**128
    return np.array([state & (2**64 - 1), state >> 64], dtype=np.uint64)


@op("rng-get-and-update-state")
def rng_get_and_update_state(*, ctx, delta):
    return next_rng_state(ctx, delta)


# ---------------------------------------------------------------------------
# rng
# ---------------------------------------------------------------------------

def take_stream_counter(ctx, n: int) -> tuple[int, int]:
    """The ``rng`` stream's 128-bit counter ``(low, high)`` for the next ``n`` values
    (two a counter), advanced past them."""
    counter = getattr(ctx, "_rng_op_counter", 0)
    ctx._rng_op_counter = (counter + (n + 1) // 2) % 2**128
    return counter & (2**64 - 1), counter >> 64


class _Stream:
    """The interpreter's ``rng`` stream: 64-bit draws from Philox-4x32 under ``RNG_KEY``."""

    def __init__(self, ctx):
        self.ctx = ctx

    def draw(self, n: int) -> np.ndarray:
        """``n`` fresh u64 values (two 32-bit words each, low first)."""
        if n == 0:
            return np.zeros(0, np.uint64)
        nv = (n + 1) // 2
        lo, hi = _u128_counters(*take_stream_counter(self.ctx, n), nv)
        out = philox4x32(lo, hi, RNG_KEY).astype(np.uint64)
        pairs = out[:, 0::2] | (out[:, 1::2] << np.uint64(32))
        return pairs.reshape(-1)[:n]


def _unit(bits: np.ndarray) -> np.ndarray:
    """u64 bits -> f64 in [0, 1) with 53 random bits."""
    return (bits >> np.uint64(11)).astype(np.float64) * 2.0**-53


def scalar_f64(x) -> float:
    """The value of a one-element host array ``x`` as a float."""
    a = np.asarray(x)
    et = element_type_of(a)
    if et.is_narrow_float:
        from .numeric import to_float64
        return float(to_float64(a.reshape(1))[0])
    return float(a.reshape(-1)[0])


@op("rng")
def rng(a, b, *, shape, ctx, distribution):
    et = shape.element_type
    dims = tuple(shape.dims)
    n = int(np.prod(dims, dtype=np.int64))
    stream = _Stream(ctx)
    dist = str(distribution)
    if et.is_pred or et.is_complex:
        raise HloEvalError(f"rng does not support element type {et.name}")
    if dist == "rng_uniform":
        if et.is_integer:
            lo = int(np.asarray(a).reshape(-1)[0])
            hi = int(np.asarray(b).reshape(-1)[0])
            span = hi - lo
            if span <= 0:
                return np.full(dims, lo, dtype=et.dtype)
            limit = 2**64 - (2**64 % span)  # accept bits < limit
            bits = stream.draw(n)
            for _ in range(64):
                bad = bits >= np.uint64(limit) if limit < 2**64 else np.zeros(n, bool)
                if not bad.any():
                    break
                bits[bad] = stream.draw(int(bad.sum()))
            offs = bits % np.uint64(span) if span < 2**64 else bits
            with np.errstate(over="ignore"):
                wide = offs + np.uint64(lo % 2**64)  # wraps mod 2**64: exact in range
            if et.is_signed_integer:
                wide = wide.view(np.int64)
            return finish(wide, et).reshape(dims)
        lo, hi = scalar_f64(a), scalar_f64(b)
        if not lo < hi:
            return from_float64(np.full(dims, lo, np.float64), et)
        out = from_float64(lo + (hi - lo) * _unit(stream.draw(n)), et)
        flat = out.reshape(-1)
        for _ in range(64):
            bad = ~(flat.astype(np.float64) < hi)
            if not bad.any():
                break
            flat[bad] = from_float64(lo + (hi - lo) * _unit(stream.draw(int(bad.sum()))), et)
        else:
            flat[~(flat.astype(np.float64) < hi)] = from_float64(np.array([lo]), et)[0]
        return flat.reshape(dims)
    if dist == "rng_normal":
        if not et.is_float:
            raise HloEvalError(f"rng_normal needs a floating-point result, got {et.name}")
        mu, sigma = scalar_f64(a), scalar_f64(b)
        bits = stream.draw(2 * n)
        u1 = ((bits[0::2] >> np.uint64(11)).astype(np.float64) + 1.0) * 2.0**-53
        u2 = _unit(bits[1::2])
        z = np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)
        with np.errstate(all="ignore"):
            return from_float64((mu + sigma * z).reshape(dims), et)
    raise HloEvalError(f"unknown rng distribution {dist}")
