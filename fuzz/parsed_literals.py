"""The constants XLA's HLO parser built, read from its ``HloModuleProto``: what
confirms (or clears) the ``parse`` stage of a mismatch.

Stage attribution (``fuzz/stages.py``) judges XLA's parsed module *printed back*, so a
value lost there may be the parser's or the printer's. The module's serialized proto
(``HloModule.as_serialized_hlo_module_proto()``) holds each constant's literal as
binary data, before any printing: a constant whose proto literal differs from the
value the text writes was changed by the parser.

The proto is read without protobuf (``memory_proto.proto_fields``). Field numbers are
``xla/service/hlo.proto`` and ``xla/xla_data.proto`` (``HloModuleProto.computations``
3, ``HloComputationProto.name`` 1 / ``instructions`` 2, ``HloInstructionProto.name`` 1
/ ``opcode`` 2 / ``shape`` 3 / ``literal`` 8, ``ShapeProto.element_type`` 2 /
``dimensions`` 3 / ``layout`` 5, ``LayoutProto.minor_to_major`` 1, and
``LiteralProto``'s per-type fields below), checked against TensorFlow's ``hlo_pb2`` in
tests/test_parsed_literals.py. Types XLA stores one byte per element (8-bit and
narrower) are read as those bytes (``Literal::ToProto``, xla/literal.cc).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from .memory_proto import proto_fields

__all__ = ["ConstantDifference", "parsed_constants", "constant_differences"]


def _ml(name: str):
    import ml_dtypes
    return np.dtype(getattr(ml_dtypes, name))


# PrimitiveType number -> (LiteralProto field, how its data is stored, numpy dtype)
# "varint": packed varints; "bytes": the field's bytes are the little-endian elements
# (or, for 8-bit and narrower types, one byte each, "signed"/"unsigned" values or
# "bits" of a float).
_TYPES = {
    1: (2, "varint", lambda: np.dtype(np.bool_)),
    2: (15, "signed", lambda: np.dtype(np.int8)),
    3: (17, "bytes", lambda: np.dtype("<i2")),
    4: (4, "varint", lambda: np.dtype(np.int32)),
    5: (5, "varint", lambda: np.dtype(np.int64)),
    6: (3, "unsigned", lambda: np.dtype(np.uint8)),
    7: (16, "bytes", lambda: np.dtype("<u2")),
    8: (6, "varint", lambda: np.dtype(np.uint32)),
    9: (7, "varint", lambda: np.dtype(np.uint64)),
    10: (11, "bytes", lambda: np.dtype("<f2")),
    11: (8, "bytes", lambda: np.dtype("<f4")),
    12: (9, "bytes", lambda: np.dtype("<f8")),
    15: (12, "bytes", lambda: np.dtype("<c8")),
    16: (13, "bytes", lambda: _ml("bfloat16")),
    18: (18, "bytes", lambda: np.dtype("<c16")),
    19: (19, "bits", lambda: _ml("float8_e5m2")),
    20: (20, "bits", lambda: _ml("float8_e4m3fn")),
    21: (21, "signed", lambda: _ml("int4")),
    22: (22, "unsigned", lambda: _ml("uint4")),
    23: (23, "bits", lambda: _ml("float8_e4m3b11fnuz")),
    24: (24, "bits", lambda: _ml("float8_e5m2fnuz")),
    25: (25, "bits", lambda: _ml("float8_e4m3fnuz")),
    26: (26, "signed", lambda: _ml("int2")),
    27: (27, "unsigned", lambda: _ml("uint2")),
    28: (28, "bits", lambda: _ml("float8_e4m3")),
    29: (29, "bits", lambda: _ml("float8_e3m4")),
    32: (32, "bits", lambda: _ml("float4_e2m1fn")),
    33: (33, "bits", lambda: _ml("float8_e8m0fnu")),
}


def _varints(data: bytes) -> list[int]:
    out, value, shift = [], 0, 0
    for byte in data:
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            out.append(value)
            value = shift = 0
    return out


def _field(message: bytes, number: int):
    return [v for n, v in proto_fields(message) if n == number]


def _literal(shape: bytes, literal: bytes):
    """The literal's value as a numpy array of its shape (row-major), or None for a
    type or form this reader does not take (tuples, token, dynamic shapes)."""
    fields = proto_fields(shape)
    etype = next((v for n, v in fields if n == 2), 0)
    if etype not in _TYPES:
        return None
    dims: list[int] = []
    for n, v in fields:
        if n == 3:
            dims.extend(_varints(v) if isinstance(v, bytes) else [v])
    layout = next((v for n, v in fields if n == 5), None)
    minor_to_major: list[int] = []
    for v in _field(layout, 1) if layout is not None else []:
        minor_to_major.extend(_varints(v) if isinstance(v, bytes) else [v])
    number, form, make = _TYPES[etype]
    dtype = make()
    parts = _field(literal, number)
    if form == "varint":
        values = [x for p in parts for x in (_varints(p) if isinstance(p, bytes) else [p])]
        if dtype.kind == "i":
            bits = dtype.itemsize * 8
            values = [v - (1 << 64) if v >= 1 << 63 else v for v in values]
            values = [((v + (1 << (bits - 1))) % (1 << bits)) - (1 << (bits - 1)) for v in values]
        flat = np.array(values, dtype=dtype)
    else:
        raw = b"".join(p if isinstance(p, bytes) else struct.pack("<Q", p) for p in parts)
        if form == "signed":
            flat = np.frombuffer(raw, np.int8).astype(dtype)
        elif form == "unsigned":
            flat = np.frombuffer(raw, np.uint8).astype(dtype)
        elif form == "bits":
            flat = np.frombuffer(raw, np.uint8).view(dtype)
        else:
            flat = np.frombuffer(raw, dtype)
    count = int(np.prod(dims)) if dims else 1
    if flat.size != count:
        return None
    if minor_to_major and list(minor_to_major) != list(range(len(dims)))[::-1]:
        major_first = list(reversed(minor_to_major))
        stored = flat.reshape([dims[d] for d in major_first])
        return np.ascontiguousarray(stored.transpose(np.argsort(major_first)))
    return flat.reshape(dims)


def parsed_constants(proto: bytes) -> dict[tuple[str, str], np.ndarray]:
    """``{(computation name, instruction name): value}`` of every constant in a
    serialized ``HloModuleProto`` whose type this reader takes."""
    out = {}
    for computation in _field(proto, 3):
        comp_name = (_field(computation, 1) or [b""])[0].decode()
        for instruction in _field(computation, 2):
            fields = dict(proto_fields(instruction))
            if fields.get(2) != b"constant" or 8 not in fields or 3 not in fields:
                continue
            value = _literal(fields[3], fields[8])
            if value is not None:
                out[(comp_name, fields[1].decode())] = value
    return out


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    if a.dtype.kind == "c":  # (..., 2): the real and the imaginary part
        a = np.ascontiguousarray(np.stack([a.real, a.imag], axis=-1))
    return a.view(f"u{a.dtype.itemsize}") if a.dtype.itemsize in (1, 2, 4, 8) else a


def _show(a: np.ndarray, limit: int = 6) -> str:
    flat = a.reshape(-1)
    text = ", ".join(repr(x.item()) if hasattr(x, "item") else repr(x) for x in flat[:limit])
    return "{" + text + (", ..." if flat.size > limit else "") + "}"


def _class(x) -> str:
    """A float's class as a cause tells it: -0, +0, nan, inf, -inf, finite."""
    x = float(x)
    if x == 0:
        return "-0" if np.signbit(x) else "+0"
    if np.isnan(x):
        return "nan"
    if np.isinf(x):
        return "inf" if x > 0 else "-inf"
    return "finite"


def _kind(dtype: np.dtype, ours, theirs) -> str:
    """What kind of change a cause is: the element type's class (the float types are
    variants of one fault, as in root keys) and the value classes before and after, per
    complex part (``float: -0 -> +0``, ``complex: (nan, inf) -> (nan, nan)``)."""
    if dtype.kind == "c":
        return (f"complex: ({_class(ours.real)}, {_class(ours.imag)}) -> "
                f"({_class(theirs.real)}, {_class(theirs.imag)})")
    if dtype.kind in "iub":
        return "integer"
    try:
        return f"float: {_class(ours)} -> {_class(theirs)}"
    except (TypeError, ValueError):
        return str(dtype)


@dataclass(frozen=True)
class ConstantDifference:
    """A constant whose value in XLA's parsed proto is not the text's."""

    computation: str
    instruction: str
    #: the change's kind, stable across values of the same class (root keys group by it)
    kind: str
    #: the instruction, the text's value and XLA's, for a report
    text: str


def constant_differences(module, proto: bytes) -> list[ConstantDifference]:
    """Each constant of ``module`` (hloref's parse of the text) whose value in XLA's
    parsed ``proto`` differs, bit for bit (a zero's sign and a NaN's place count)."""
    xla = parsed_constants(proto)
    by_name = {name: v for (_, name), v in xla.items()}
    out = []
    for comp, instr in module.instructions():
        ours = instr.literal
        if instr.opcode != "constant" or not isinstance(ours, np.ndarray):
            continue
        theirs = xla.get((comp.name, instr.name), by_name.get(instr.name))
        if theirs is None or theirs.shape != ours.shape or theirs.dtype != ours.dtype:
            continue
        differ = _bits(theirs) != _bits(ours)
        if differ.ndim > ours.ndim:  # a complex number's two parts
            differ = differ.any(axis=-1)
        if not differ.any():
            continue
        first = tuple(int(i) for i in np.argwhere(differ)[0])
        a, b = ours[first].item(), theirs[first].item()
        out.append(ConstantDifference(
            comp.name, instr.name, _kind(ours.dtype, a, b),
            f"%{instr.name} ({comp.name}): the text writes {_show(ours)}, XLA's parser built "
            f"{_show(theirs)} (first difference at {list(first)}: {a!r} became {b!r})"))
    return out
