"""What the vendor-library ``custom-call`` modules share: activations, the f64 general
dot, enum and config decoding, rounding and packing of results.

One module per library registers its targets: ``custom_call_onednn`` (XLA:CPU),
``custom_call_cublas`` and ``custom_call_cudnn`` (XLA:GPU).
"""

from __future__ import annotations

import math
import struct

import numpy as np

from hloref.errors import HloUnsupportedError

from .custom_call import parse_backend_config, zeros_like_shape
from .numeric import contiguous, finish


def unsupported(target: str, reason: str):
    return HloUnsupportedError("custom-call", "cpu", f"{target}: {reason}")


def round_to(out, et):
    return contiguous(finish(np.asarray(out, np.float64), et))


def pack(result, extra):
    return (result, *(zeros_like_shape(w) for w in extra)) if extra else result


def int_list(values) -> list[int]:
    return [int(v) for v in (values or [])]


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x ** 3)))


def gelu_erf(x):
    from scipy.special import erf
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def elu(x, alpha=1.0):
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


def general_dot(a, b, dn: dict):
    """XLA dot: result dims are batch, lhs free, rhs free."""
    lb, rb = int_list(dn.get("lhs_batch_dimensions")), int_list(dn.get("rhs_batch_dimensions"))
    lc = int_list(dn.get("lhs_contracting_dimensions"))
    rc = int_list(dn.get("rhs_contracting_dimensions"))
    lf = [d for d in range(a.ndim) if d not in lb and d not in lc]
    rf = [d for d in range(b.ndim) if d not in rb and d not in rc]
    at = np.transpose(a, lb + lf + lc)
    bt = np.transpose(b, rb + rc + rf)
    bshape = [a.shape[d] for d in lb]
    m = int(np.prod([a.shape[d] for d in lf], dtype=np.int64))
    k = int(np.prod([a.shape[d] for d in lc], dtype=np.int64))
    n = int(np.prod([b.shape[d] for d in rf], dtype=np.int64))
    out = np.matmul(at.reshape(bshape + [m, k]), bt.reshape(bshape + [k, n]))
    return out.reshape(bshape + [a.shape[d] for d in lf] + [b.shape[d] for d in rf])


def enum_name(value, names: tuple[str, ...]) -> str:
    if isinstance(value, (int, float)) or (isinstance(value, str) and value.isdigit()):
        i = int(value)
        return names[i] if 0 <= i < len(names) else str(i)
    return str(value)


def float_from_bits(bits) -> float:
    return struct.unpack("<f", struct.pack("<i", int(bits)))[0]


def gpu_config(attrs, key: str) -> dict:
    return parse_backend_config(attrs.get("backend_config")).get(key, {}) or {}
