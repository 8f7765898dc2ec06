"""Device values and the scalar building blocks every GPU kernel shares.

* :class:`DArray` is a device-resident array: a flat (1-D, C order) numba.cuda device
  array of the element type's *storage* dtype plus the logical shape and element type.
  Storage: pred -> uint8 (0/1); sub-byte integers (s1/s2/s4/u1/u2/u4) -> uint8 holding
  ml_dtypes' byte (the value in the low bits); every float narrower than f32 (f16,
  bf16, f8*, f4e2m1fn) -> its bit pattern (uint8/uint16); everything else its own dtype.
  Reshape is free (same buffer, new shape). Ops never write into their operands.
* :func:`device_fn` compiles a CPU function (a plain ``@numba.njit`` function from
  ``evaluator/kernels.py``, ``evaluator/narrow.py``, ``evaluator/sort.py``...) for
  numba.cuda: it takes the dispatcher's ``py_func`` and rebinds the other njit
  dispatchers it calls (``srem`` calls ``sdiv``...) to their device versions, so one
  Python body serves both targets.
* ``load_*`` / ``store_*``: storage value -> compute value and back, per type class
  (``sint``, ``uint``, ``pred``, ``f32``, ``f64``, ``narrow``). Integers compute in
  int64/uint64 and wrap to their width on store; narrow floats decode exactly to f32
  (``narrow.decode_scalar``) and encode from the exact f64 value of whatever was
  computed (``narrow.encode_scalar``: one round-to-nearest-even, the CPU's rule).
  Each takes a parameter tuple ``(bits, de, dm, dbias, style, flags)``
  (:func:`type_params`).
"""

from __future__ import annotations

import math
import types

import numba
import numpy as np
from numba import cuda

from hloref.evaluator import narrow
from hloref.types import ElementType, from_dtype

try:  # numba-cuda's own configuration (the target this backend is written for)
    from numba.cuda.core import config as _cuda_config
    SIMULATOR = bool(_cuda_config.ENABLE_CUDASIM)
except ImportError:  # pragma: no cover - older numba-cuda
    from numba import config as _cuda_config
    SIMULATOR = bool(getattr(_cuda_config, "ENABLE_CUDASIM", False))

if SIMULATOR:
    from .simulator import poll_politely
    poll_politely()
else:  # NVVM: no fused multiply-add unless the source has one (``gpu/contraction.py``)
    from .contraction import no_contraction
    no_contraction()

__all__ = ["DArray", "SIMULATOR", "device_copy", "device_fn", "storage_dtype", "type_class", "type_params",
           "to_device", "to_host", "empty", "available"]


def available() -> bool:
    """True when kernels can run: a CUDA device, or the simulator."""
    try:
        return bool(cuda.is_available())
    except Exception:  # pragma: no cover
        return False


# ----------------------------------------------------------------- device values


def storage_dtype(et: ElementType) -> np.dtype:
    if et.is_pred:
        return np.dtype(np.uint8)
    if et.is_narrow_float or (et.is_integer and et.bits < 8):
        return et.bits_dtype
    return et.dtype


class DArray:
    """A device-resident array: flat storage ``data``, logical ``shape``, element type ``et``."""

    __slots__ = ("data", "shape", "et")

    def __init__(self, data, shape, et: ElementType):
        self.data = data
        self.shape = tuple(int(d) for d in shape)
        self.et = et

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.et.dtype.itemsize

    def reshape(self, shape) -> "DArray":
        return DArray(self.data, shape, self.et)

    def to_host(self) -> np.ndarray:
        flat = self.data.copy_to_host() if self.size else np.empty(0, storage_dtype(self.et))
        return flat.view(self.et.dtype).reshape(self.shape)

    def __repr__(self) -> str:
        return f"DArray({self.et.name}{list(self.shape)})"


def empty(shape, et: ElementType) -> DArray:
    n = 1
    for d in shape:
        n *= int(d)
    return DArray(cuda.device_array(max(n, 0), dtype=storage_dtype(et)), shape, et)


def device_copy(x: DArray) -> DArray:
    """A fresh device array with ``x``'s elements (a device-to-device copy)."""
    out = empty(x.shape, x.et)
    if x.size:
        out.data.copy_to_device(x.data)
    return out


def to_device(value):
    """Host value (array, tuple of values, token) -> device value (arrays become DArray)."""
    if isinstance(value, tuple):
        return tuple(to_device(v) for v in value)
    if isinstance(value, np.ndarray):
        et = from_dtype(value.dtype)
        flat = np.ascontiguousarray(value).reshape(-1).view(storage_dtype(et))
        return DArray(cuda.to_device(flat), value.shape, et)
    if isinstance(value, np.generic):
        return to_device(np.asarray(value))
    return value  # token


def to_host(value):
    """Device value -> host value (the inverse of :func:`to_device`)."""
    if isinstance(value, tuple):
        return tuple(to_host(v) for v in value)
    if isinstance(value, DArray):
        return value.to_host()
    return value


def host_scalar(value: DArray):
    """The single element of a device scalar, read to the host (one small transfer)."""
    return value.to_host().reshape(-1)[0]


# ----------------------------------------------------------------- CPU scalar functions on the device

_DEVICE_FNS: dict = {}


def device_fn(fn, **overrides):
    """A numba.cuda device function with the body of ``fn`` (an njit dispatcher or a
    plain Python function); njit dispatchers it calls are rebound to device versions.
    ``overrides``: device functions that the global names given call instead, in ``fn``
    and in everything it calls (``sort``: the CPU's libstdc++ sorts with another
    comparison)."""
    key = (id(fn),) + tuple((name, id(v)) for name, v in sorted(overrides.items()))
    hit = _DEVICE_FNS.get(key)
    if hit is not None:
        return hit[-1]
    py = getattr(fn, "py_func", fn)
    globs = dict(py.__globals__)
    for name in py.__code__.co_names:
        target = globs.get(name)
        if name in overrides:
            globs[name] = overrides[name]
        elif isinstance(target, numba.core.registry.CPUDispatcher):
            globs[name] = device_fn(target, **overrides)
    clone = types.FunctionType(py.__code__, globs, py.__name__, py.__defaults__, py.__closure__)
    clone.__doc__ = py.__doc__
    dev = cuda.jit(device=True)(clone)
    # keep fn and the overrides alive so that their ids stay unique
    _DEVICE_FNS[key] = (fn, overrides, dev)
    return dev


# ----------------------------------------------------------------- float bits

if SIMULATOR:
    def _f32_bits(x):
        return np.int64(np.float32(x).view(np.uint32))

    def _bits_f32(b):
        return np.uint32(np.int64(b) & np.int64(0xFFFFFFFF)).view(np.float32)

    def _f64_bits(x):
        return np.float64(x).view(np.int64)
else:  # pragma: no cover - needs a GPU
    from numba.cuda import libdevice

    def _f32_bits(x):
        return np.int64(libdevice.float_as_int(np.float32(x))) & np.int64(0xFFFFFFFF)

    def _bits_f32(b):
        return libdevice.int_as_float(np.int32(b))

    def _f64_bits(x):
        return np.int64(libdevice.double_as_longlong(np.float64(x)))

f32_bits = cuda.jit(device=True)(_f32_bits)
bits_f32 = cuda.jit(device=True)(_bits_f32)
f64_bits = cuda.jit(device=True)(_f64_bits)
decode_scalar = device_fn(narrow.decode_scalar)
encode_scalar = device_fn(narrow.encode_scalar)


# ----------------------------------------------------------------- type classes, load / store

def type_class(et: ElementType) -> str:
    if et.is_pred:
        return "pred"
    if et.kind == "sint":
        return "sint"
    if et.kind == "uint":
        return "uint"
    if et.is_complex:
        return "complex"
    if et.dtype == np.dtype(np.float32):
        return "f32"
    if et.dtype == np.dtype(np.float64):
        return "f64"
    if et.is_narrow_float:
        return "narrow"
    return "other"


def type_params(et: ElementType) -> tuple[int, int, int, int, int, int]:
    """``(bits, exponent_bits, mantissa_bits, bias, style, flags)`` (zeros where unused)."""
    if et.is_narrow_float:
        return (et.bits,) + tuple(int(v) for v in narrow.format_params(et))
    return (int(et.bits), 0, 0, 0, 0, 0)


@cuda.jit(device=True)
def load_sint(x, p):
    bits = p[0]
    v = np.int64(x)
    if bits < 8:
        v = v & ((np.int64(1) << bits) - np.int64(1))
        if v >= (np.int64(1) << (bits - 1)):
            v = v - (np.int64(1) << bits)
    return v


@cuda.jit(device=True)
def load_uint(x, p):
    bits = p[0]
    v = np.uint64(x)
    if bits < 8:
        v = v & np.uint64((1 << bits) - 1)
    return v


@cuda.jit(device=True)
def load_pred(x, p):
    return np.int64(1) if x != 0 else np.int64(0)


@cuda.jit(device=True)
def load_f32(x, p):
    return np.float32(x)


@cuda.jit(device=True)
def load_f64(x, p):
    return np.float64(x)


@cuda.jit(device=True)
def load_narrow(x, p):
    return bits_f32(decode_scalar(x, p[1], p[2], p[3], p[4], p[5]))


@cuda.jit(device=True)
def store_sint(v, p):
    """int64 ``v`` wrapped to ``bits`` (sub-byte types: the low bits, ml_dtypes' byte)."""
    bits = p[0]
    v = np.int64(v)
    if bits >= 64:
        return v
    u = v & ((np.int64(1) << bits) - np.int64(1))
    if bits < 8:
        return u
    if u >= (np.int64(1) << (bits - 1)):
        u = u - (np.int64(1) << bits)
    return u


@cuda.jit(device=True)
def store_uint(v, p):
    bits = p[0]
    v = np.uint64(v)
    if bits >= 64:
        return v
    return v & np.uint64((1 << bits) - 1)


@cuda.jit(device=True)
def store_pred(v, p):
    return np.uint8(1) if v != 0 else np.uint8(0)


@cuda.jit(device=True)
def store_f32(v, p):
    return np.float32(v)


@cuda.jit(device=True)
def store_f64(v, p):
    return np.float64(v)


@cuda.jit(device=True)
def store_narrow(v, p):
    # exact f64 value of the computed f32/f64 result, rounded once (as the CPU does)
    return encode_scalar(f64_bits(np.float64(v)), 11, 52, p[1], p[2], p[3], p[4], p[5])


LOAD = {"sint": load_sint, "uint": load_uint, "pred": load_pred, "f32": load_f32,
        "f64": load_f64, "narrow": load_narrow}
STORE = {"sint": store_sint, "uint": store_uint, "pred": store_pred, "f32": store_f32,
         "f64": store_f64, "narrow": store_narrow}


# ----------------------------------------------------------------- float helpers shared by kernels

@cuda.jit(device=True)
def signbit(x):
    return math.copysign(1.0, x) < 0


@cuda.jit(device=True)
def rint64(x):
    """Round an f64 to the nearest integer, ties to even (exact; NaN/inf/huge unchanged)."""
    a = abs(x)
    if not (a < 4503599627370496.0):  # 2**52, NaN
        return x
    r = (a + 4503599627370496.0) - 4503599627370496.0
    return math.copysign(r, x)


@cuda.jit(device=True)
def trunc64(x):
    a = abs(x)
    if not (a < 4503599627370496.0):
        return x
    r = (a + 4503599627370496.0) - 4503599627370496.0
    if r > a:
        r = r - 1.0
    return math.copysign(r, x)


@cuda.jit(device=True)
def floor64(x):
    t = trunc64(x)
    if t > x:
        t = t - 1.0
    return t if t != 0 else math.copysign(0.0, x)


@cuda.jit(device=True)
def ceil64(x):
    t = trunc64(x)
    if t < x:
        t = t + 1.0
    return t if t != 0 else math.copysign(0.0, x)


@cuda.jit(device=True)
def load_raw(x, p):
    return x


@cuda.jit(device=True)
def store_raw(v, p):
    return v


#: "raw": the storage value itself (bit-exact moves of any element type)
LOAD["raw"] = load_raw
STORE["raw"] = store_raw
