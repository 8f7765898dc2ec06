"""Shapes and layouts: ``f32[2,<=3]{1,0:T(8,128)}``, ``(s32[], token[])``, ``b(f32[4])``."""

from __future__ import annotations

import re

from ..shapes import (UNBOUNDED, ArrayShape, BufferShape, Layout, OpaqueShape, Shape, TokenShape,
                      TupleShape)
from ..types import ELEMENT_TYPES
from .base import BaseParser

_WORD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ShapeParser(BaseParser):
    def _at_shape(self) -> bool:
        """Whether the next token starts a shape (vs an operand name)."""
        s = self.s
        text, pos = s.text, s.pos
        if text.startswith("(", pos):
            return True
        m = _WORD_RE.match(text, pos)
        if m is None:
            return False
        nxt = text[m.end():m.end() + 1]
        if nxt.isspace() and m.group() in ELEMENT_TYPES:  # XLA reads `s32 [2]`
            nxt = text[m.end():].lstrip()[:1]
        return nxt == "[" or (m.group() == "b" and nxt == "(")


    def shape_list(self, what: str) -> tuple[Shape, ...]:
        """``shape, shape, ... )`` after an opening parenthesis."""
        s = self.s
        shapes = []
        if not s.accept(")"):
            while True:
                shapes.append(self.shape())
                if s.accept(","):
                    continue
                s.expect(")", what)
                break
        return tuple(shapes)

    def shape(self) -> Shape:
        s = self.s
        s.skip_ws()
        if s.accept("("):
            return TupleShape(self.shape_list("after tuple element shapes"))
        pos = s.pos
        name = s.ident()
        if name is None:
            raise s.expected("shape")
        if name == "b" and s.peek_char() == "(":
            s.pos += 1
            inner_pos = s.pos
            inner = self.shape()
            if not isinstance(inner, ArrayShape):
                raise s.error("buffer shape b(...) must hold an array shape", inner_pos)
            s.expect(")", "after buffer shape")
            return BufferShape(inner)
        et = ELEMENT_TYPES.get(name)
        if et is None:
            raise s.error(f"unknown element type '{name}'", pos)
        s.expect("[", f"after element type '{name}'")
        dims: list[int] = []
        dynamic: list[bool] = []
        if not s.accept("]"):
            while True:
                if s.accept("<="):
                    dims.append(s.int_("dimension bound"))
                    dynamic.append(True)
                elif s.accept("?"):
                    dims.append(UNBOUNDED)
                    dynamic.append(True)
                else:
                    dpos = s.pos
                    d = s.int_("dimension size")
                    if d < 0:
                        raise s.error(f"negative dimension size {d}", dpos)
                    dims.append(d)
                    dynamic.append(False)
                if s.accept(","):
                    continue
                s.expect("]", "after dimensions")
                break
        if et.name == "token":
            if dims:
                raise s.error("token shape must be written token[]", pos)
            return TokenShape()
        if et.kind == "opaque":
            if dims:
                raise s.error("opaque shape must be written opaque[]", pos)
            return OpaqueShape()
        layout = None
        if self._at_layout():
            layout = self.layout(len(dims))
        return ArrayShape(et, tuple(dims), tuple(dynamic), layout)

    def _at_layout(self) -> bool:
        s = self.s
        save = s.pos
        s.skip_ws()
        if not s.text.startswith("{", s.pos):
            s.pos = save
            return False
        s.pos += 1
        s.skip_ws()
        c = s.peek_char()
        s.pos = save
        return c.isdigit() or c in ("}", ":")

    def layout(self, rank: int) -> Layout:
        s = self.s
        s.expect("{", "to start layout")
        m2m: list[int] = []
        if not s.at(":") and not s.at("}"):
            while True:
                m2m.append(s.int_("layout dimension"))
                if s.accept(","):
                    continue
                break
        tiles: list[tuple[int, ...]] = []
        esb = 0
        ms = 0
        other: list[tuple[str, str]] = []
        if s.accept(":"):
            while not s.at("}"):
                s.skip_ws()
                if s.accept("SC"):
                    letter = "SC"
                else:
                    letter = s.peek_char()
                    if letter not in "DTL#*ESPM" or not letter:
                        raise s.expected("layout suffix (D, T, L, #, *, E, S, SC, P, M) or '}'")
                    s.pos += 1
                if letter == "T":
                    if not s.at("("):
                        raise s.expected("'(' after 'T' in layout")
                    while s.accept("("):
                        tile: list[int] = []
                        if not s.accept(")"):
                            while True:
                                if s.accept("*"):
                                    tile.append(-1)
                                else:
                                    tile.append(s.int_("tile dimension"))
                                if s.accept(","):
                                    continue
                                s.expect(")", "after tile dimensions")
                                break
                        tiles.append(tuple(tile))
                elif letter in ("E", "S"):
                    s.expect("(", f"after '{letter}' in layout")
                    v = s.int_()
                    s.expect(")", f"after '{letter}(' value in layout")
                    if letter == "E":
                        esb = v
                    else:
                        ms = v
                else:
                    s.expect("(", f"after '{letter}' in layout")
                    inner = s.balanced_raw(stop_at_newline=False, stop_at_comma=False)
                    s.expect(")", f"after '{letter}(' in layout")
                    other.append((letter, inner))
        s.expect("}", "to end layout")
        if m2m and len(m2m) != rank:
            raise s.error(f"layout has {len(m2m)} dimensions but the shape has rank {rank}", s.pos - 1)
        if m2m and sorted(m2m) != list(range(rank)):
            raise s.error(f"layout {{{','.join(map(str, m2m))}}} is not a permutation of 0..{rank - 1}",
                          s.pos - 1)
        if not m2m and rank:
            raise s.error(f"layout has no dimensions but the shape has rank {rank}", s.pos - 1)
        return Layout(tuple(m2m), tuple(tiles), esb, ms, tuple(other))

    # -- literals ------------------------------------------------------------------------
