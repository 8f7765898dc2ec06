"""Parser of XLA's HLO text format into ``hloref.ir``, split by layer as xDSL does:

* ``base``: the reading state and the safety net (``parse_all``);
* ``shapes``: shapes and layouts;
* ``literals``: constant literals, and the float constants the printer shares;
* ``attributes``: typed instruction attributes;
* ``module``: modules, computations, instructions, and the shape inference XLA's
  parser does for instructions written without a shape.

Each layer's class extends the one below; ``Parser`` is the top. Entry points:
``parse_module(text, filename=None) -> Module``, ``parse_shape(text) -> Shape`` and
``parse_literal(text, shape) -> value``. Every malformed input raises
``HloParseError`` with the line and column of the offending token; no other
exception escapes.
"""

from __future__ import annotations

from ..ir import Module
from ..shapes import Shape
from .attributes import (BOOL_ATTRS, COMP_ATTRS, COMP_LIST_ATTRS, ENUM_ATTRS, INT_ATTRS,
                         INT_LIST_ATTRS)
from ..types import FloatInfo, float_info
from .module import OPCODES, SECTION_TITLES, SHAPE_INFERABLE, ModuleParser

__all__ = ["parse_module", "parse_shape", "parse_literal", "OPCODES", "SECTION_TITLES",
           "SHAPE_INFERABLE", "Parser", "float_info", "FloatInfo", "BOOL_ATTRS", "ENUM_ATTRS",
           "INT_ATTRS", "INT_LIST_ATTRS", "COMP_ATTRS", "COMP_LIST_ATTRS"]

Parser = ModuleParser


def parse_module(text: str, filename: str | None = None) -> Module:
    """Parse HLO module text (as XLA prints or accepts it) into a ``Module``."""
    p = Parser(text, filename)
    return p.parse_all(p.module)


def parse_shape(text: str) -> Shape:
    """Parse one shape, e.g. ``f32[2,<=3]{1,0}`` or ``(s32[], token[])``."""
    p = Parser(text)
    return p.parse_all(p.shape)


def parse_literal(text: str, shape: Shape | str):
    """Parse a literal (what goes inside ``constant(...)``) of ``shape``."""
    if isinstance(shape, str):
        shape = parse_shape(shape)
    p = Parser(text)
    return p.parse_all(lambda: p.literal(shape))
