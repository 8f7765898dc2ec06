"""Printer of ``hloref.ir`` modules as XLA HLO text.

``module_to_text(module)`` writes text that XLA's own parser accepts and that
``hloref.parser.parse_module`` reads back into a structurally equal module.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import attrs as A
from .lexer import escape
from .shapes import (ArrayShape, ProgramShape, Shape, TupleShape,
                     layout_to_text, shape_to_text)  # noqa: F401 (layout_to_text re-exported)
from .types import ELEMENT_TYPES, ElementType, float_info

__all__ = ["module_to_text", "computation_to_text", "instruction_to_text", "shape_to_text",
           "layout_to_text", "literal_to_text", "attr_to_text"]


# -- shapes ----------------------------------------------------------------------------------

# -- literals --------------------------------------------------------------------------------

def _shortest_float(value: float, dtype: np.dtype, bits: int, udtype: np.dtype) -> str:
    """Shortest decimal text that converts back to exactly ``bits`` in ``dtype``."""
    for p in range(1, 18):
        text = "%.*g" % (p, value)
        with np.errstate(all="ignore"):
            back = np.array([float(text)]).astype(dtype).view(udtype)[0]
        if int(back) == bits:
            return text
    return repr(value)


def _float_strings(flat: np.ndarray, et: ElementType) -> list[str]:
    info = float_info(et)
    bits_arr = np.ascontiguousarray(flat).view(info.udtype)
    with np.errstate(all="ignore"):
        as64 = np.ascontiguousarray(flat).astype(np.float64)
    fmt = et.float_format
    cache: dict[int, str] = {}
    out = []
    for b, v in zip(bits_arr.tolist(), as64.tolist()):
        text = cache.get(b)
        if text is None:
            if v != v:  # NaN
                if b == info.nan_bits:
                    text = "nan"
                elif b == info.neg_nan_bits:
                    text = "-nan"
                elif fmt.nan_style == "ieee":
                    sign = "-" if b >> (info.bits - 1) else ""
                    text = f"{sign}nan(0x{b & info.mant_mask:x})"
                else:
                    text = "nan"
            elif v == float("inf"):
                text = "inf"
            elif v == float("-inf"):
                text = "-inf"
            elif et.name == "f64":
                text = repr(v)
            elif et.name == "f32":
                text = str(np.float32(v))
            elif et.name == "f16":
                text = str(np.float16(v))
            else:
                text = _shortest_float(v, info.dtype, b, info.udtype)
            if text.endswith(".0"):
                text = text[:-2]
            cache[b] = text
        out.append(text)
    return out


def _element_strings(arr: np.ndarray, et: ElementType) -> list[str]:
    flat = np.asarray(arr).reshape(-1)
    if et.kind == "pred":
        return ["true" if v else "false" for v in flat.tolist()]
    if et.kind == "sint":
        return [str(v) for v in flat.astype(np.int64).tolist()]
    if et.kind == "uint":
        return [str(v) for v in flat.astype(np.uint64).tolist()]
    if et.kind == "float":
        return _float_strings(flat, et)
    if et.kind == "complex":
        part = ELEMENT_TYPES["f32" if et.name == "c64" else "f64"]
        re_ = _float_strings(np.ascontiguousarray(flat.real), part)
        im = _float_strings(np.ascontiguousarray(flat.imag), part)
        return [f"({r}, {i})" for r, i in zip(re_, im)]
    raise TypeError(f"no literal for element type {et.name}")


def _nest(strs: list[str], dims: tuple[int, ...], level: int, offset: int) -> str:
    if level == len(dims) - 1:
        return "{" + ", ".join(strs[offset:offset + dims[level]]) + "}"
    step = 1
    for d in dims[level + 1:]:
        step *= d
    inner = [_nest(strs, dims, level + 1, offset + i * step) for i in range(dims[level])]
    return "{ " + ", ".join(inner) + " }" if inner else "{}"


def literal_to_text(value: Any, shape: Shape) -> str:
    """Text of a constant's literal (what goes inside ``constant(...)``)."""
    if value is None:
        return "{...}"
    if isinstance(shape, TupleShape):
        return "(" + ", ".join(literal_to_text(v, s) for v, s in zip(value, shape.elements)) + ")"
    if not isinstance(shape, ArrayShape):
        raise TypeError(f"no literal for shape {shape}")
    arr = np.asarray(value)
    if shape.rank and arr.size >= COMPACT_LITERAL_MIN and not shape.element_type.is_complex \
            and _zero_after_first(arr):
        # XLA's parser reads one value for an array as its first element, the others
        # zero: a large constant(0) prints as written instead of as megabytes of zeros
        return _element_strings(arr.reshape(-1)[:1], shape.element_type)[0]
    strs = _element_strings(arr, shape.element_type)
    if shape.rank == 0:
        return strs[0]
    dims = tuple(max(d, 0) for d in shape.dims)
    return _nest(strs, dims, 0, 0)


#: Array literals with at least this many elements, all zero (bit for bit) after the
#: first, print as their first element alone (``f32[4096,4096] constant(0)``).
COMPACT_LITERAL_MIN = 1024


def _zero_after_first(arr: np.ndarray) -> bool:
    rest = np.ascontiguousarray(arr.reshape(-1)[1:])
    return not rest.view(np.uint8).any()


# -- attributes ------------------------------------------------------------------------------

def _window_to_text(w: A.Window) -> str:
    dims = w.dims
    if not dims:
        return "{}"

    def dxd(vals):
        return "x".join(str(v) for v in vals)

    parts = [f"size={dxd(d.size for d in dims)}"]
    if any(d.stride != 1 for d in dims):
        parts.append(f"stride={dxd(d.stride for d in dims)}")
    if any(d.padding_low or d.padding_high for d in dims):
        parts.append("pad=" + "x".join(f"{d.padding_low}_{d.padding_high}" for d in dims))
    if any(d.base_dilation != 1 for d in dims):
        parts.append(f"lhs_dilate={dxd(d.base_dilation for d in dims)}")
    if any(d.window_dilation != 1 for d in dims):
        parts.append(f"rhs_dilate={dxd(d.window_dilation for d in dims)}")
    if any(d.window_reversal for d in dims):
        parts.append(f"rhs_reversal={dxd(int(d.window_reversal) for d in dims)}")
    return "{" + " ".join(parts) + "}"


def _dim_labels_to_text(c: A.ConvDimensionNumbers) -> str:
    if c.labels:
        return c.labels

    def part(a, b, ca, cb, spatial):
        n = len(spatial) + 2
        chars = ["?"] * n
        chars[a], chars[b] = ca, cb
        for i, p in enumerate(spatial):
            chars[p] = str(i)
        return "".join(chars)

    return (part(c.input_batch_dimension, c.input_feature_dimension, "b", "f", c.input_spatial_dimensions)
            + "_" + part(c.kernel_input_feature_dimension, c.kernel_output_feature_dimension, "i", "o",
                         c.kernel_spatial_dimensions)
            + "->" + part(c.output_batch_dimension, c.output_feature_dimension, "b", "f",
                          c.output_spatial_dimensions))


def attr_to_text(key: str, value: Any) -> str:
    """Text of one attribute value (what follows ``key=``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (A.Raw, A.Enum)):
        return str(value)
    if isinstance(value, A.ComputationRef):
        return "%" + str(value)
    if isinstance(value, str):
        return '"' + escape(value) + '"'
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, A.ReplicaGroups):
        if value.text:
            return value.text
        return "{" + ",".join("{" + ",".join(map(str, g)) + "}" for g in value.groups or ()) + "}"
    if isinstance(value, A.Window):
        return _window_to_text(value)
    if isinstance(value, A.ConvDimensionNumbers):
        return _dim_labels_to_text(value)
    if isinstance(value, A.LiteralAttr):
        return shape_to_text(value.shape) + " " + literal_to_text(value.value, value.shape)
    if isinstance(value, (tuple, list)):
        if key == "padding" or (value and isinstance(value[0], A.PaddingDim)):
            return "x".join(f"{p.low}_{p.high}" + (f"_{p.interior}" if p.interior else "")
                            for p in value)
        if key == "slice" or (value and isinstance(value[0], A.SliceDim)):
            return "{" + ", ".join(
                f"[{d.start}:{d.limit}" + (f":{d.stride}]" if d.stride != 1 else "]") for d in value) + "}"
        if value and isinstance(value[0], A.ComputationRef):
            return "{" + ", ".join("%" + str(v) for v in value) + "}"
        if value and isinstance(value[0], (tuple, list)):
            return "{" + ",".join("{" + ",".join(str(int(x)) for x in v) + "}" for v in value) + "}"
        return "{" + ",".join(attr_to_text(key, v) for v in value) + "}"
    return str(value)


# -- instructions, computations, modules -----------------------------------------------------

def _opcode_text(instr) -> str:
    if instr.async_wrapped_opcode:
        suffix = instr.opcode[len("async"):]  # -start / -update / -done
        return instr.async_wrapped_opcode + suffix
    return instr.opcode


def instruction_to_text(instr, is_root: bool = False) -> str:
    head = f"{'ROOT ' if is_root else ''}%{instr.name} = {shape_to_text(instr.shape)} {_opcode_text(instr)}"
    if instr.opcode == "constant":
        args = literal_to_text(instr.literal, instr.shape)
    elif instr.opcode == "parameter":
        args = str(instr.parameter_number)
    elif instr.operands_with_shapes:
        args = ", ".join(f"{shape_to_text(o.shape)} %{o.name}" for o in instr.operands)
    else:
        args = ", ".join(f"%{o.name}" for o in instr.operands)
    parts = [f"{head}({args})"]
    for key, value in instr.attrs.items():
        parts.append(f"{key}={attr_to_text(key, value)}")
    if instr.control_predecessors:
        parts.append("control-predecessors={" + ", ".join(f"%{c.name}" for c in instr.control_predecessors) + "}")
    return ", ".join(parts)


def computation_to_text(comp) -> str:
    head = ("ENTRY " if comp.is_entry else "") + "%" + comp.name
    if comp.has_signature:
        params = ", ".join(f"{p.name}: {shape_to_text(p.shape, layout=False)}" for p in comp.parameters)
        result = shape_to_text(comp.root.shape, layout=False) if comp.root is not None else "()"
        head += f" ({params}) -> {result}"
    lines = [head + " {"]
    for instr in comp.instructions:
        lines.append("  " + instruction_to_text(instr, instr is comp.root))
    tail = "}"
    for key, value in comp.attrs.items():
        tail += f", {key}={attr_to_text(key, value)}"
    lines.append(tail)
    return "\n".join(lines)


def _module_attr_text(key: str, value: Any) -> str:
    if isinstance(value, ProgramShape):
        params = ", ".join(shape_to_text(p) for p in value.parameters)
        return "{(" + params + ")->" + shape_to_text(value.result) + "}"
    return attr_to_text(key, value)


def module_to_text(module) -> str:
    header = f"HloModule {module.name}"
    for key, value in module.attrs.items():
        header += f", {key}={_module_attr_text(key, value)}"
    chunks = [header + "\n"]
    for title, body in module.extra_sections:
        chunks.append(f"{title}\n{body}\n" if body else f"{title}\n")
    for comp in module.computations.values():
        chunks.append(computation_to_text(comp) + "\n")
    return "\n".join(chunks)
