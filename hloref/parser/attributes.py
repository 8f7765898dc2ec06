"""Instruction attributes: each known key parses into a typed value of ``hloref.attrs``
(or ``bool``/``int``/``tuple``); the others stay ``Raw`` text."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from .. import attrs as A
from ..ir import Computation
from ..lexer import NUMBER_RE
from ..opcodes import attributes_of_type
from ..shapes import ArrayShape
from .literals import LiteralParser

# The value type of each attribute is the catalogue's (hloref/opcodes.py ATTRIBUTE_TYPES).
INT_LIST_ATTRS = attributes_of_type("int_list")
INT_ATTRS = attributes_of_type("int")
BOOL_ATTRS = attributes_of_type("bool")
FLOAT_ATTRS = attributes_of_type("float")
ENUM_ATTRS = attributes_of_type("enum")
ENUM_LIST_ATTRS = attributes_of_type("enum_list")
STRING_ATTRS = attributes_of_type("string")
COMP_ATTRS = attributes_of_type("computation")
COMP_LIST_ATTRS = attributes_of_type("computation_list")
#: Attributes holding a shaped literal (``shuffle``'s ``indices=s32[4]{0} {3, 1, 0, 2}``).
LITERAL_ATTRS = attributes_of_type("literal")
CONTROL_PREDECESSORS = "control-predecessors"

_DXD_RE = re.compile(r"\d+(?:x\d+)*")
_PAD_RE = re.compile(r"-?\d+_-?\d+(?:x-?\d+_-?\d+)*")
_PADDING_RE = re.compile(r"-?\d+_-?\d+(?:_-?\d+)?(?:x-?\d+_-?\d+(?:_-?\d+)?)*")
_REVERSAL_RE = re.compile(r"[01](?:x[01])*")
_DIM_LABELS_RE = re.compile(r"[0-9bf?]{2,}_[0-9io?]{2,}->[0-9bf?]{2,}")
_IOTA_GROUPS_RE = re.compile(r"\[(\d+),(\d+)\]<=\[([\d,]+)\](?:T\(([\d,]*)\))?")
_NESTED_BRACE_RE = re.compile(r"\{\s*\{")
_MESH_TEXT_RE = re.compile(r"mesh\[[^\]]*\](?:\s*,\s*device_ids=\([\d,\s]*\))?\s*\{[^}]*\}")


class AttributeParser(LiteralParser):
    def braced(self, key: str, item) -> list:
        """The value of attribute ``key`` written ``{item, item, ...}`` (``{}``: none), each
        read by ``item()``."""
        s = self.s
        s.expect("{", f"to start '{key}'")
        out = []
        if s.accept("}"):
            return out
        while True:
            out.append(item())
            if s.accept(","):
                continue
            s.expect("}", f"to end '{key}'")
            return out

    def _located_name(self, what: str = "name") -> tuple[str, int]:
        s = self.s
        s.skip_ws()
        pos = s.pos
        n = s.name()
        if n is None:
            raise s.expected(what)
        return n, pos

    def keyword(self, what: str, seen, expected: str | None = None) -> tuple[str, int]:
        """``key=`` of a ``what`` (``attribute``, ``module attribute``, ``window
        sub-attribute``...) and where the key starts; a key already in ``seen`` is an
        error. ``expected`` is what the error names when no key stands there (default:
        ``what`` name)."""
        s = self.s
        s.skip_ws()
        pos = s.pos
        key = s.expect_ident(expected or f"{what} name")
        s.expect("=", f"after {what} '{key}'")
        if key in seen:
            raise s.error(f"duplicate {what} '{key}'", pos)
        return key, pos

    def name_list(self, key: str) -> list[tuple[str, int]]:
        return self.braced(key, self._located_name)


    def raw_value(self) -> A.Raw:
        s = self.s
        s.skip_ws()
        pos = s.pos
        raw = s.balanced_raw()
        if not raw:
            raise s.expected("attribute value", pos)
        return A.Raw(raw)

    def bool_value(self) -> bool:
        s = self.s
        s.skip_ws()
        pos = s.pos
        v = s.ident()
        if v == "true":
            return True
        if v == "false":
            return False
        raise s.expected("'true' or 'false'", pos)

    def int_list(self, key: str) -> tuple[int, ...]:
        return tuple(self.braced(key, self.s.int_))

    def comp_ref(self) -> A.ComputationRef:
        n, pos = self._located_name("computation name")
        self.comp_refs.append((n, pos))
        return A.ComputationRef(n)

    def attr_value(self, key: str) -> Any:
        s = self.s
        s.skip_ws()
        text, pos = s.text, s.pos
        if key in INT_LIST_ATTRS:
            if _NESTED_BRACE_RE.match(text, pos):  # e.g. collective-permute slice_sizes
                return self.raw_value()
            return self.int_list(key)
        if key in INT_ATTRS:
            return s.int_()
        if key in BOOL_ATTRS:
            return self.bool_value()
        if key in FLOAT_ATTRS:
            v = s.match(NUMBER_RE)
            if v is None:
                raise s.expected(f"a number for '{key}'")
            return float(v)
        if key in ENUM_ATTRS:
            return A.Enum(s.expect_ident(f"a value for '{key}'"))
        if key in ENUM_LIST_ATTRS:
            return tuple(self.braced(key, lambda: A.Enum(s.expect_ident(f"a value in '{key}'"))))
        if key in STRING_ATTRS:
            return s.string()[0]
        if key in COMP_ATTRS:
            if s.at("{") and self._at_inline_body():
                return self.inline_computation()
            if key == "calls" and s.at("{"):
                return tuple(self.comp_ref_list(key))
            return self.comp_ref()
        if key in COMP_LIST_ATTRS:
            return tuple(self.comp_ref_list(key))
        if key == "window":
            return self.window()
        if key == "dim_labels":
            return self.dim_labels()
        if key == "slice":
            return self.slice_attr()
        if key == "padding":
            v = s.match(_PADDING_RE)
            if v is None:
                raise s.expected("padding like 0_0x1_2_1")
            dims = []
            for part in v.split("x"):
                nums = [int(x) for x in re.findall(r"-?\d+", part)]
                dims.append(A.PaddingDim(*nums))
            return tuple(dims)
        if key == "replica_groups":
            # the mesh-axes form holds top-level commas: mesh[...], device_ids=(...) {...}
            raw = s.match(_MESH_TEXT_RE) if s.at("mesh") else None
            raw = raw if raw is not None else self.raw_value()
            return A.ReplicaGroups(_derive_groups(str(raw)), str(raw))
        if key == "source_target_pairs":
            return self.pairs(key)
        if key in LITERAL_ATTRS and self._at_shape():
            return self.literal_attr(key)
        return self.raw_value()

    def literal_attr(self, key: str) -> A.LiteralAttr:
        s = self.s
        s.skip_ws()
        pos = s.pos
        shape = self.shape()
        if not isinstance(shape, ArrayShape):
            raise s.error(f"'{key}' must hold an array literal, found shape {shape}", pos)
        return A.LiteralAttr(shape, self.literal(shape))

    def _at_inline_body(self) -> bool:
        """At ``{`` that opens instructions (``{ x = ...``, ``{ ROOT ...``), not names."""
        s = self.s
        save = s.pos
        s.expect("{")
        first = s.peek_ident()
        ok = first == "ROOT"
        if not ok and self.decl_name() is not None:
            ok = s.at("=")
        s.pos = save
        return ok

    def inline_computation(self) -> A.ComputationRef:
        """A computation written in place of a name (``to_apply={ ... }``): it becomes a
        computation of the module, named ``_inline.N``."""
        s = self.s
        s.skip_ws()
        pos = s.pos
        self.anon += 1
        comp = Computation(name=f"_inline.{self.anon}")
        self.computation_body(comp)
        self.inline_comps[comp.name] = comp
        self.comp_refs.append((comp.name, pos))
        return A.ComputationRef(comp.name)

    def comp_ref_list(self, key: str) -> list[A.ComputationRef]:
        s = self.s
        return self.braced(key, lambda: self.inline_computation() if s.at("{")
                           else self.comp_ref())

    def _pair(self) -> tuple[int, int]:
        s = self.s
        s.expect("{", "to start a source-target pair")
        a = s.int_()
        s.expect(",", "between source and target")
        b = s.int_()
        s.expect("}", "after source-target pair")
        return a, b

    def pairs(self, key: str) -> tuple[tuple[int, int], ...]:
        return tuple(self.braced(key, self._pair))

    def _slice_dim(self) -> A.SliceDim:
        s = self.s
        s.expect("[", "to start a slice dimension")
        start = s.int_()
        s.expect(":", "after slice start")
        limit = s.int_()
        stride = 1
        if s.accept(":"):
            stride = s.int_()
        s.expect("]", "to end a slice dimension")
        return A.SliceDim(start, limit, stride)

    def slice_attr(self) -> tuple[A.SliceDim, ...]:
        return tuple(self.braced("slice", self._slice_dim))

    def window(self) -> A.Window:
        s = self.s
        s.expect("{", "to start 'window'")
        fields: dict[str, list] = {}
        while not s.accept("}"):
            k, kpos = self.keyword("window sub-attribute", fields, "window sub-attribute or '}'")
            if k in ("size", "stride", "lhs_dilate", "rhs_dilate"):
                v = s.match(_DXD_RE)
                if v is None:
                    raise s.expected(f"sizes like 3x3 for '{k}'")
                fields[k] = [int(x) for x in v.split("x")]
            elif k == "pad":
                v = s.match(_PAD_RE)
                if v is None:
                    raise s.expected("padding like 0_1x1_1 for 'pad'")
                fields[k] = [tuple(int(x) for x in re.findall(r"-?\d+", p)) for p in v.split("x")]
            elif k == "rhs_reversal":
                v = s.match(_REVERSAL_RE)
                if v is None:
                    raise s.expected("flags like 0x1 for 'rhs_reversal'")
                fields[k] = [x == "1" for x in v.split("x")]
            else:
                raise s.error(f"unknown window sub-attribute '{k}'", kpos)
            if k != "size" and "size" in fields and len(fields[k]) != len(fields["size"]):
                raise s.error(f"window '{k}' has {len(fields[k])} dimensions but 'size' has "
                              f"{len(fields['size'])}", kpos)
        if not fields:
            return A.Window(())
        if "size" not in fields:
            raise s.error("window has no 'size'", s.pos - 1)
        n = len(fields["size"])
        for k, v in fields.items():
            if len(v) != n:
                raise s.error(f"window '{k}' has {len(v)} dimensions but 'size' has {n}", s.pos - 1)
        dims = []
        for i in range(n):
            pad = fields.get("pad", [(0, 0)] * n)[i]
            dims.append(A.WindowDim(
                size=fields["size"][i], stride=fields.get("stride", [1] * n)[i],
                padding_low=pad[0], padding_high=pad[1],
                window_dilation=fields.get("rhs_dilate", [1] * n)[i],
                base_dilation=fields.get("lhs_dilate", [1] * n)[i],
                window_reversal=fields.get("rhs_reversal", [False] * n)[i]))
        return A.Window(tuple(dims))

    def dim_labels(self) -> A.ConvDimensionNumbers:
        s = self.s
        s.skip_ws()
        pos = s.pos
        v = s.match(_DIM_LABELS_RE)
        if v is None:
            raise s.expected("dim_labels like b01f_01io->b01f")
        lhs, rest = v.split("_", 1)
        rhs, out = rest.split("->")

        def positions(part: str, a: str, b: str, what: str):
            if part.count(a) != 1 or part.count(b) != 1:
                raise s.error(f"dim_labels {what} '{part}' needs exactly one '{a}' and one '{b}'", pos)
            digits = [c for c in part if c.isdigit()]
            n = len(part) - 2 - part.count("?")
            if sorted(digits) != [str(i) for i in range(n)]:
                raise s.error(f"dim_labels {what} '{part}' must name spatial dimensions 0..{n - 1} "
                              f"once each", pos)
            return part.index(a), part.index(b), tuple(part.index(str(i)) for i in range(n))

        ib, if_, isp = positions(lhs, "b", "f", "input")
        ki, ko, ksp = positions(rhs, "i", "o", "kernel")
        ob, of, osp = positions(out, "b", "f", "output")
        if not (len(isp) == len(ksp) == len(osp)):
            raise s.error("dim_labels parts have different numbers of spatial dimensions", pos)
        return A.ConvDimensionNumbers(ib, if_, isp, ki, ko, ksp, ob, of, osp, labels=v)

    # -- shapes --------------------------------------------------------------------------


def _derive_groups(raw: str) -> tuple[tuple[int, ...], ...] | None:
    """Explicit groups for the legacy ``{{0,1},{2,3}}`` and iota ``[G,S]<=[...]`` forms."""
    t = re.sub(r"\s+", "", raw)
    if re.fullmatch(r"\{(?:\{[\d,]*\}(?:,\{[\d,]*\})*)?\}", t):
        groups = re.findall(r"\{([\d,]*)\}", t[1:-1]) if len(t) > 2 else []
        out = []
        for g in groups:
            if g and not re.fullmatch(r"\d+(?:,\d+)*", g):
                return None
            out.append(tuple(int(x) for x in g.split(",")) if g else ())
        return tuple(out)
    m = _IOTA_GROUPS_RE.fullmatch(t)
    if m:
        g, size = int(m.group(1)), int(m.group(2))
        try:
            reshape = [int(x) for x in m.group(3).split(",")]
            n = math.prod(reshape)
            if n != g * size or n > 1 << 20:
                return None
            ids = np.arange(n).reshape(reshape)
            if m.group(4) is not None:
                perm = [int(x) for x in m.group(4).split(",")] if m.group(4) else []
                if sorted(perm) != list(range(len(reshape))):
                    return None
                ids = ids.transpose(perm)
            ids = ids.reshape(g, size)
        except ValueError:
            return None
        return tuple(tuple(int(x) for x in row) for row in ids)
    return _mesh_groups(raw)


_MESH_RE = re.compile(r"mesh\[(?P<axes>[^\]]*?)(?:,\s*device_ids=\((?P<in_ids>[\d,\s]*)\))?\]"
                      r"(?:\s*,\s*device_ids=\((?P<ids>[\d,\s]*)\))?\s*\{(?P<group>[^}]*)\}")


def _mesh_groups(raw: str) -> tuple[tuple[int, ...], ...] | None:
    """The mesh-axes form ``mesh['x'=2,'y'=2] {'y'}`` (XLA's MeshAxesReplicaGroupList:
    the devices, ``device_ids`` or 0..n-1, laid out row-major over the mesh axes; a
    group varies the named axes, in the order named, and fixes the others). Sub-axes
    (``'x':(1)2``) are not expanded (None)."""
    m = _MESH_RE.fullmatch(raw.strip())
    if not m:
        return None
    axes = re.findall(r"'([^']*)'\s*=\s*(\d+)", m.group("axes"))
    names = [a for a, _ in axes]
    sizes = [int(n) for _, n in axes]
    grouped = [g.strip() for g in m.group("group").split(",") if g.strip()]
    if not axes or any(not re.fullmatch(r"'[^']*'", g) for g in grouped):
        return None  # a sub-axis or a malformed axis
    grouped = [g[1:-1] for g in grouped]
    if any(g not in names for g in grouped) or len(set(grouped)) != len(grouped):
        return None
    n = math.prod(sizes)
    if n > 1 << 20:
        return None
    text_ids = m.group("ids") or m.group("in_ids")
    ids = np.arange(n) if text_ids is None else \
        np.array([int(x) for x in text_ids.split(",") if x.strip()])
    if ids.size != n:
        return None
    index = [names.index(g) for g in grouped]
    perm = [i for i in range(len(sizes)) if i not in index] + index
    size = math.prod(sizes[i] for i in index)
    rows = ids.reshape(sizes).transpose(perm).reshape(n // size, size)
    return tuple(tuple(int(x) for x in row) for row in rows)
