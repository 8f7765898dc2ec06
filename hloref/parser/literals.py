"""Literals: what goes inside ``constant(...)`` for a shape (nested braces, NaN
payloads, complex pairs, XLA's scalar-for-array and 64-bit wrap-around rules); the
per-type float constants (``float_info``) live in ``hloref.types``, shared with the
printer."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from ..lexer import NUMBER_RE
from ..shapes import UNBOUNDED, ArrayShape, Shape, TupleShape
from ..types import ELEMENT_TYPES, ElementType, float_info
from .shapes import ShapeParser

_NAN_RE = re.compile(r"-?nan(?:\(0x([0-9a-fA-F]+)\))?")
_IDENT_CHAR = re.compile(r"[A-Za-z0-9_.\-]")
_INT_TEXT_RE = re.compile(r"[-+]?\d+")
_AFTER_NUMBER_RE = re.compile(r"[A-Za-z0-9_]")


class LiteralParser(ShapeParser):
    def literal(self, shape: Shape):
        s = self.s
        s.skip_ws()
        save = s.pos
        if s.accept("{") and s.accept("...") and s.accept("}"):
            return None
        s.pos = save
        if isinstance(shape, TupleShape):
            s.expect("(", "to start tuple literal")
            elems = []
            for i, es in enumerate(shape.elements):
                if i:
                    s.expect(",", f"between tuple literal elements (tuple has {len(shape.elements)})")
                elems.append(self.literal(es))
            s.expect(")", f"after {len(shape.elements)} tuple literal elements")
            return tuple(elems)
        if not isinstance(shape, ArrayShape):
            raise s.error(f"constant of shape {shape} cannot have a literal", save)
        et = shape.element_type
        if any(d == UNBOUNDED for d in shape.dims):
            raise s.error("constant with an unbounded dimension", save)
        items: list[tuple[int, str, Any]] = []
        if shape.rank and not s.at("{"):
            # XLA reads one value for an array constant as its first element, the
            # others zero (``s32[2,2] constant(3)`` is {{3, 0}, {0, 0}}); not for
            # complex types, whose value starts with '('.
            if et.is_complex:
                raise s.error(f"expects nested array in rank {shape.rank}, but sees 0")
            first = self.scalar_token(et)
            n = math.prod(max(d, 0) for d in shape.dims)
            out = np.zeros(tuple(max(d, 0) for d in shape.dims), dtype=et.dtype)
            if n:  # convert the one value alone: a f32[4096,4096] constant(0) is 16M zeros
                out.reshape(-1)[:1] = self.convert([first], shape.with_dims((1,)))
            return out
        if shape.rank == 0:
            items.append(self.scalar_token(et))
        else:
            self.nested(shape.dims, 0, items)
        return self.convert(items, shape)

    def nested(self, dims, level: int, items: list) -> None:
        s = self.s
        s.skip_ws()
        open_pos = s.pos
        s.expect("{", f"to start dimension {level} of the literal (rank {len(dims)})")
        n = 0
        if level == len(dims) - 1:
            if not s.accept("}"):
                while True:
                    items.append(self.scalar_token(None))
                    n += 1
                    if s.accept(","):
                        continue
                    s.expect("}", f"after literal elements of dimension {level}")
                    break
        else:
            if not s.accept("}"):
                while True:
                    if not s.at("{"):
                        raise s.expected(f"'{{' for dimension {level + 1} of the literal "
                                         f"(rank {len(dims)})")
                    self.nested(dims, level + 1, items)
                    n += 1
                    if s.accept(",") or s.at("{"):  # XLA tolerates a missing ','
                        continue
                    s.expect("}", f"after literal elements of dimension {level}")
                    break
        if n != dims[level]:
            raise s.error(f"literal dimension {level} has {n} elements, but the shape says "
                          f"{dims[level]}", open_pos)

    def scalar_token(self, et: ElementType | None) -> tuple[int, str, Any]:
        """One literal element: (position, kind, value); kinds bool/int/float/nan/complex."""
        s = self.s
        s.skip_ws()
        pos = s.pos
        text = s.text
        if text.startswith("(", pos):
            s.pos += 1
            re_ = self.scalar_token(None)
            s.expect(",", "between real and imaginary parts")
            im = self.scalar_token(None)
            s.expect(")", "after imaginary part")
            for part in (re_, im):
                if part[1] not in ("int", "float", "nan"):
                    raise s.error("complex parts must be numbers", part[0])
            return pos, "complex", (re_, im)
        m = _NAN_RE.match(text, pos)
        if m and (m.group(1) or not _IDENT_CHAR.match(text, m.end())):
            s.pos = m.end()
            neg = m.group().startswith("-")
            payload = int(m.group(1), 16) if m.group(1) else None
            return pos, "nan", (neg, payload)
        for word, kind, value in (("true", "bool", True), ("false", "bool", False),
                                  ("inf", "float", math.inf), ("-inf", "float", -math.inf)):
            if text.startswith(word, pos) and not _IDENT_CHAR.match(text, pos + len(word)):
                s.pos = pos + len(word)
                return pos, kind, value
        m = NUMBER_RE.match(text, pos)
        if m is None or _AFTER_NUMBER_RE.match(text, m.end()):
            raise s.expected("literal value")
        s.pos = m.end()
        t = m.group()
        if _INT_TEXT_RE.fullmatch(t):
            return pos, "int", t
        return pos, "float", t

    def convert(self, items: list, shape: ArrayShape) -> np.ndarray:
        s = self.s
        et = shape.element_type
        dims = tuple(max(d, 0) for d in shape.dims)
        kind = et.kind
        if kind == "pred":
            vals = []
            for pos, k, v in items:
                if k == "bool":
                    vals.append(v)
                elif k == "int":
                    vals.append(int(v) != 0)
                else:
                    raise s.error(f"expected true, false or an integer for pred, found {s.describe(pos)}", pos)
            return np.array(vals, dtype=np.bool_).reshape(dims)
        if kind in ("sint", "uint"):
            lo, hi = et.min_value, et.max_value
            vals = []
            for pos, k, v in items:
                if k != "int":
                    raise s.error(f"expected an integer for {et.name}, found {s.describe(pos)}", pos)
                v = int(v)
                if et.bits == 64 and -(1 << 63) <= v < (1 << 64):
                    v &= (1 << 64) - 1  # XLA reads 64-bit literals modulo 2^64
                    if kind == "sint" and v > hi:
                        v -= 1 << 64
                if not lo <= v <= hi:
                    raise s.error(f"value {v} is out of range for {et.name} [{lo}, {hi}]", pos)
                vals.append(v)
            wide = np.int64 if kind == "sint" else np.uint64
            return np.array(vals, dtype=wide).astype(et.dtype).reshape(dims)
        if kind == "float":
            return self.float_array(items, et, dims)
        if kind == "complex":
            part = ELEMENT_TYPES["f32" if et.name == "c64" else "f64"]
            reals, imags = [], []
            for pos, k, v in items:
                if k == "complex":
                    reals.append(v[0])
                    imags.append(v[1])
                elif k in ("int", "float"):
                    reals.append((pos, k, v))
                    imags.append((pos, "int", "0"))
                else:
                    raise s.error(f"expected (real, imag) for {et.name}, found {s.describe(pos)}", pos)
            r = self.float_array(reals, part, dims)
            i = self.float_array(imags, part, dims)
            out = np.empty(dims, dtype=et.dtype)
            out.real = r
            out.imag = i
            return out
        raise s.error(f"element type {et.name} cannot have a literal", items[0][0] if items else s.pos)

    def float_array(self, items: list, et: ElementType, dims) -> np.ndarray:
        s = self.s
        info = float_info(et)
        vals = np.empty(len(items), dtype=np.float64)
        overrides: list[tuple[int, int]] = []
        for idx, (pos, k, v) in enumerate(items):
            if k in ("int", "float"):
                f = float(v)
                if math.isinf(f) and isinstance(v, str):
                    raise s.error(f"value {v} is out of range for {et.name}", pos)
            elif k == "nan":
                try:
                    bits = info.nan_with_payload(*v)
                except ValueError as e:
                    raise s.error(str(e), pos) from None
                overrides.append((idx, bits))
                f = 0.0
            else:
                raise s.error(f"expected a number for {et.name}, found {s.describe(pos)}", pos)
            if math.isfinite(f) and abs(f) >= info.threshold:
                raise s.error(f"value {v} is out of range for {et.name}", pos)
            if math.isinf(f) and not et.float_format.has_nan:
                raise s.error(f"{et.name} has no infinity or NaN", pos)
            vals[idx] = f
        with np.errstate(all="ignore"):
            arr = vals.astype(et.dtype)
        if et.float_format.nan_style in ("e8m0", "none") or not et.float_format.has_inf:
            bad = np.isnan(arr.astype(np.float64)) & np.isfinite(vals)
            for idx, _ in overrides:
                bad[idx] = False  # a NaN literal (0.0 holds its place until the bits go in)
            if bad.any():
                pos, _, v = items[int(np.argmax(bad))]
                raise s.error(f"value {v} cannot be represented in {et.name}", pos)
        if overrides:
            view = arr.view(info.udtype)
            for idx, bits in overrides:
                view[idx] = bits
        return arr.reshape(dims)
