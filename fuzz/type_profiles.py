"""``hloref fuzz --types``: the element types a campaign's programs use.

``mainstream`` is what most users' programs are made of (f32, bf16, f16, s32, pred):
a campaign that CI runs, whose findings users would hit. A comma-separated list of
type names is accepted too. The generator's makers that only make sense with other
types (``fft``, ``complex``: complex numbers; ``rng-bit-generator`` and ``stochastic-convert``: unsigned
random bits) are left out of a profile without them; index operands of
``dynamic-slice``/``gather``/``scatter`` may still be s8/s64/u32.
"""

from __future__ import annotations

from hloref.op_properties import values_of
from hloref.types import ARRAY_TYPES

#: every array element type (as fuzz/strategies/shapes.py derives it, without Hypothesis)
ALL_ELEMENT_TYPES: tuple[str, ...] = tuple(t.name for t in ARRAY_TYPES)

__all__ = ["TYPE_PROFILES", "ALL_ELEMENT_TYPES", "parse_types", "ops_for_types", "TypesError"]

TYPE_PROFILES: dict[str, tuple[str, ...]] = {
    "mainstream": ("f32", "bf16", "f16", "s32", "pred"),
}

#: opcode -> the element type kinds its maker needs (kind letters as in ``element_types``)
_NEEDS = values_of("maker-needs-kind")


class TypesError(ValueError):
    """``--types`` names an unknown profile or element type."""


def parse_types(text: str | None) -> tuple[str, ...] | None:
    """``mainstream`` or ``f32,bf16,...`` → type names; ``None``/``all``: every type."""
    if text is None or text.strip() in ("", "all"):
        return None
    text = text.strip()
    if text in TYPE_PROFILES:
        return TYPE_PROFILES[text]
    names = tuple(t for t in (p.strip() for p in text.split(",")) if t)
    bad = [t for t in names if t not in ALL_ELEMENT_TYPES]
    if bad or not names:
        raise TypesError(f"--types {text}: expected a profile ({', '.join(TYPE_PROFILES)}, all) "
                         f"or element types from {', '.join(ALL_ELEMENT_TYPES)}; "
                         f"unknown: {', '.join(bad) or '(none given)'}")
    return names


def ops_for_types(ops, types) -> list | None:
    """``ops`` (``None``: every generatable opcode) without the opcodes whose makers
    need element type kinds ``types`` lacks; ``None`` when nothing is left out."""
    if types is None:
        return ops
    from hloref.types import ELEMENT_TYPES

    from .strategies import GENERATABLE_OPCODES
    from .strategies.shapes import kind_letter
    kinds = {kind_letter(ELEMENT_TYPES[t]) for t in types}
    base = sorted(GENERATABLE_OPCODES - {"parameter"}) if ops is None else list(ops)
    kept = [o for o in base if set(_NEEDS.get(o, "")) <= kinds]
    return kept if (ops is not None or len(kept) != len(base)) else None
