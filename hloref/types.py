"""Element types: every ``PrimitiveType`` of ``xla/xla_data.proto`` that HLO text can name.

Each array type maps to the numpy or ml_dtypes dtype that the public API takes and
returns. Narrow floats also carry their bit format, which the Numba conversion
kernels (``hloref.evaluator.narrow``) read: Numba has no float16/bfloat16/fp8 on the
CPU, so those values travel through kernels as their bit patterns.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import ml_dtypes
import numpy as np

__all__ = [
    "ElementType", "FloatFormat", "element_type", "ELEMENT_TYPES", "ARRAY_TYPES",
    "PRED", "S32", "S64", "U32", "U64", "F16", "BF16", "F32", "F64", "C64", "C128",
    "TOKEN", "from_dtype", "FloatInfo", "float_info",
]


@dataclass(frozen=True)
class FloatFormat:
    """Bit layout and special-value rules of a binary floating-point format.

    ``nan_style``: ``"ieee"`` (all-ones exponent, non-zero mantissa; all-ones
    exponent with zero mantissa is infinity), ``"fn"`` (no infinity; only the
    all-ones pattern is NaN), ``"fnuz"`` (no infinity, no negative zero; NaN is the
    negative-zero pattern), ``"none"`` (no NaN and no infinity: f4e2m1fn), or
    ``"e8m0"`` (unsigned, exponent only, 0xFF is NaN).
    """

    exponent_bits: int
    mantissa_bits: int
    bias: int
    nan_style: str
    signed: bool = True

    @property
    def bits(self) -> int:
        return int(self.signed) + self.exponent_bits + self.mantissa_bits

    @property
    def has_inf(self) -> bool:
        return self.nan_style == "ieee"

    @property
    def has_nan(self) -> bool:
        return self.nan_style != "none"

    @property
    def has_negative_zero(self) -> bool:
        return self.signed and self.nan_style not in ("fnuz",)


@dataclass(frozen=True)
class ElementType:
    """One HLO element type. ``kind`` is one of pred, sint, uint, float, complex, token, opaque."""

    name: str
    enum: int
    bits: int
    kind: str
    dtype: np.dtype | None
    float_format: FloatFormat | None = None

    def __repr__(self) -> str:
        return self.name

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_complex(self) -> bool:
        return self.kind == "complex"

    @property
    def is_integer(self) -> bool:
        return self.kind in ("sint", "uint")

    @property
    def is_signed_integer(self) -> bool:
        return self.kind == "sint"

    @property
    def is_unsigned_integer(self) -> bool:
        return self.kind == "uint"

    @property
    def is_pred(self) -> bool:
        return self.kind == "pred"

    @property
    def is_array(self) -> bool:
        return self.dtype is not None

    @property
    def is_narrow_float(self) -> bool:
        """Floats that Numba cannot compute in natively (everything below f32)."""
        return self.kind == "float" and self.bits < 32

    @property
    def storage_bits(self) -> int:
        """Bits of one element in a numpy array (sub-byte types use a whole byte)."""
        return self.dtype.itemsize * 8 if self.dtype is not None else 0

    @property
    def bits_dtype(self) -> np.dtype:
        """Unsigned integer dtype of the element's storage, for bit-pattern views."""
        return np.dtype(f"u{self.dtype.itemsize}")

    @property
    def min_value(self):
        if self.is_integer:
            return -(1 << (self.bits - 1)) if self.kind == "sint" else 0
        raise TypeError(f"{self.name} has no integer range")

    @property
    def max_value(self):
        if self.is_integer:
            return (1 << (self.bits - 1)) - 1 if self.kind == "sint" else (1 << self.bits) - 1
        raise TypeError(f"{self.name} has no integer range")


def _t(name, enum, bits, kind, dtype, fmt=None):
    return ElementType(name, enum, bits, kind, None if dtype is None else np.dtype(dtype), fmt)


_TYPES = [
    _t("pred", 1, 8, "pred", np.bool_),
    _t("s1", 30, 1, "sint", ml_dtypes.int1),
    _t("s2", 26, 2, "sint", ml_dtypes.int2),
    _t("s4", 21, 4, "sint", ml_dtypes.int4),
    _t("s8", 2, 8, "sint", np.int8),
    _t("s16", 3, 16, "sint", np.int16),
    _t("s32", 4, 32, "sint", np.int32),
    _t("s64", 5, 64, "sint", np.int64),
    _t("u1", 31, 1, "uint", ml_dtypes.uint1),
    _t("u2", 27, 2, "uint", ml_dtypes.uint2),
    _t("u4", 22, 4, "uint", ml_dtypes.uint4),
    _t("u8", 6, 8, "uint", np.uint8),
    _t("u16", 7, 16, "uint", np.uint16),
    _t("u32", 8, 32, "uint", np.uint32),
    _t("u64", 9, 64, "uint", np.uint64),
    _t("f16", 10, 16, "float", np.float16, FloatFormat(5, 10, 15, "ieee")),
    _t("bf16", 16, 16, "float", ml_dtypes.bfloat16, FloatFormat(8, 7, 127, "ieee")),
    _t("f32", 11, 32, "float", np.float32, FloatFormat(8, 23, 127, "ieee")),
    _t("f64", 12, 64, "float", np.float64, FloatFormat(11, 52, 1023, "ieee")),
    _t("f8e5m2", 19, 8, "float", ml_dtypes.float8_e5m2, FloatFormat(5, 2, 15, "ieee")),
    _t("f8e4m3", 28, 8, "float", ml_dtypes.float8_e4m3, FloatFormat(4, 3, 7, "ieee")),
    _t("f8e4m3fn", 20, 8, "float", ml_dtypes.float8_e4m3fn, FloatFormat(4, 3, 7, "fn")),
    _t("f8e4m3b11fnuz", 23, 8, "float", ml_dtypes.float8_e4m3b11fnuz, FloatFormat(4, 3, 11, "fnuz")),
    _t("f8e5m2fnuz", 24, 8, "float", ml_dtypes.float8_e5m2fnuz, FloatFormat(5, 2, 16, "fnuz")),
    _t("f8e4m3fnuz", 25, 8, "float", ml_dtypes.float8_e4m3fnuz, FloatFormat(4, 3, 8, "fnuz")),
    _t("f8e3m4", 29, 8, "float", ml_dtypes.float8_e3m4, FloatFormat(3, 4, 3, "ieee")),
    _t("f4e2m1fn", 32, 4, "float", ml_dtypes.float4_e2m1fn, FloatFormat(2, 1, 1, "none")),
    _t("f8e8m0fnu", 33, 8, "float", ml_dtypes.float8_e8m0fnu, FloatFormat(8, 0, 127, "e8m0", signed=False)),
    _t("c64", 15, 64, "complex", np.complex64),
    _t("c128", 18, 128, "complex", np.complex128),
    _t("token", 17, 0, "token", None),
    _t("opaque", 14, 0, "opaque", None),
]

ELEMENT_TYPES: dict[str, ElementType] = {t.name: t for t in _TYPES}
ELEMENT_TYPES["opaque_type"] = ELEMENT_TYPES["opaque"]
#: The 30 array types, in enum order of the table above.
ARRAY_TYPES: tuple[ElementType, ...] = tuple(t for t in _TYPES if t.is_array)

PRED = ELEMENT_TYPES["pred"]
S32 = ELEMENT_TYPES["s32"]
S64 = ELEMENT_TYPES["s64"]
U32 = ELEMENT_TYPES["u32"]
U64 = ELEMENT_TYPES["u64"]
F16 = ELEMENT_TYPES["f16"]
BF16 = ELEMENT_TYPES["bf16"]
F32 = ELEMENT_TYPES["f32"]
F64 = ELEMENT_TYPES["f64"]
C64 = ELEMENT_TYPES["c64"]
C128 = ELEMENT_TYPES["c128"]
TOKEN = ELEMENT_TYPES["token"]

_BY_DTYPE = {t.dtype: t for t in ARRAY_TYPES}


def element_type(name: str) -> ElementType:
    """The element type with HLO text name ``name`` (``KeyError`` if there is none)."""
    return ELEMENT_TYPES[name]


def from_dtype(dtype) -> ElementType:
    """The element type whose numpy/ml_dtypes dtype is ``dtype``."""
    return _BY_DTYPE[np.dtype(dtype)]


# -- per-type float constants (literal parsing and printing) -----------------------------

class FloatInfo:
    """Per-type constants for literal conversion: overflow threshold, NaN bit patterns."""

    def __init__(self, et: ElementType):
        self.et = et
        self.dtype = et.dtype
        fmt = et.float_format
        self.fmt = fmt
        self.bits = fmt.bits
        self.mant_mask = (1 << fmt.mantissa_bits) - 1
        self.udtype = et.bits_dtype
        if et.name == "f64":
            self.threshold = math.inf
        else:
            fmax = float(ml_dtypes.finfo(self.dtype).max)
            ulp = 2.0 ** (math.floor(math.log2(fmax)) - fmt.mantissa_bits)
            self.threshold = fmax + ulp / 2
        with np.errstate(all="ignore"):
            self.nan_bits = int(np.array([np.nan]).astype(self.dtype).view(self.udtype)[0])
            self.neg_nan_bits = int(np.array([-np.nan]).astype(self.dtype).view(self.udtype)[0])

    def nan_with_payload(self, negative: bool, payload: int | None) -> int:
        """Bit pattern of ``[-]nan[(0xpayload)]``; raises ValueError when impossible."""
        fmt = self.fmt
        if not fmt.has_nan:
            raise ValueError(f"{self.et.name} has no NaN")
        default = self.neg_nan_bits if negative else self.nan_bits
        if payload is None:
            return default
        if fmt.nan_style != "ieee":
            if payload != (default & self.mant_mask):
                raise ValueError(f"{self.et.name} has no NaN payload bits; "
                                 f"payload 0x{payload:x} is not allowed")
            return default
        if payload == 0 or payload > self.mant_mask:
            raise ValueError(f"NaN payload 0x{payload:x} does not fit in the "
                             f"{fmt.mantissa_bits} mantissa bits of {self.et.name}")
        exp_mask = ((1 << fmt.exponent_bits) - 1) << fmt.mantissa_bits
        sign = (1 << (self.bits - 1)) if negative else 0
        return sign | exp_mask | payload


_FLOAT_INFO: dict[str, FloatInfo] = {}


def float_info(et: ElementType) -> FloatInfo:
    info = _FLOAT_INFO.get(et.name)
    if info is None:
        info = _FLOAT_INFO[et.name] = FloatInfo(et)
    return info
