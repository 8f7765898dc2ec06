"""The tables ``hloref ops`` prints: each opcode's status per backend, and the
opcode × element-type table (which array types each opcode takes, by XLA's shape
rules as the ``hloref/shape_inference`` package implements them)."""

from __future__ import annotations

from .opcodes import ALL_OPCODES, CATALOGUE, FIXED_TYPES
from .types import ARRAY_TYPES

__all__ = ["ops_table", "format_ops_table", "element_types_for", "type_matrix",
           "format_type_matrix"]

#: Short column headers for the type table.
_SHORT = {"f8e5m2": "e5m2", "f8e4m3": "e4m3", "f8e4m3fn": "e4m3fn", "f8e4m3b11fnuz": "e4m3b11",
          "f8e5m2fnuz": "e5m2fnuz", "f8e4m3fnuz": "e4m3fnuz", "f8e3m4": "e3m4",
          "f4e2m1fn": "e2m1fn", "f8e8m0fnu": "e8m0fnu"}


def element_types_for(opcode: str) -> tuple[str, ...]:
    """Names of the array element types ``opcode`` takes (its main operand's, or its
    result's for opcodes without array operands), in ``ARRAY_TYPES`` order."""
    from .shape_inference import element_kind_ok
    if opcode in FIXED_TYPES:
        return FIXED_TYPES[opcode]
    if opcode == "complex":
        return ("f32", "f64")
    kinds = CATALOGUE[opcode].kinds  # the catalogue's operand kinds (XLA's shape rules)
    return tuple(t.name for t in ARRAY_TYPES if element_kind_ok(t, kinds))


def type_matrix() -> list[tuple[str, tuple[bool, ...]]]:
    """Rows ``(opcode, one flag per ARRAY_TYPES entry)``: the opcode takes that type and
    the cpu backend evaluates it."""
    supported = {row[0] for row in ops_table() if row[1] == "yes"}
    rows = []
    for opcode in ALL_OPCODES:
        names = set(element_types_for(opcode)) if opcode in supported else set()
        rows.append((opcode, tuple(t.name in names for t in ARRAY_TYPES)))
    return rows


def format_type_matrix() -> str:
    rows = type_matrix()
    width = max(len(r[0]) for r in rows)
    heads = [_SHORT.get(t.name, t.name) for t in ARRAY_TYPES]
    lines = ["opcode × element type (x: XLA's shape rules accept it and hloref's cpu backend "
             "evaluates it; .: XLA rejects it)",
             f"{'':<{width}} " + " ".join(heads)]
    for opcode, flags in rows:
        cells = " ".join(("x" if f else ".").center(len(h)) for f, h in zip(flags, heads))
        lines.append(f"{opcode:<{width}} {cells}")
    lines.append("after-all takes and gives tokens only; tuple-shaped ops take tuples of the "
                 "types shown.")
    return "\n".join(lines)


def ops_table() -> list[tuple[str, str, str]]:
    """Rows ``(opcode, cpu status, gpu status)`` for every XLA opcode."""
    from hloref.evaluator.registry import INTERPRETER_OPCODES, UNSUPPORTED, load_all
    cpu = load_all()
    try:
        from hloref.gpu import gpu_status
    except ImportError:
        def gpu_status(opcode):
            return "no (the GPU backend is not installed)"
    rows = []
    for opcode in ALL_OPCODES:
        if opcode in cpu or opcode in INTERPRETER_OPCODES:
            status = "yes"
        else:
            status = "no: " + UNSUPPORTED.get(opcode, "not implemented yet")
        rows.append((opcode, status, gpu_status(opcode)))
    return rows


def format_ops_table() -> str:
    rows = ops_table()
    width = max(len(r[0]) for r in rows)
    lines = [f"{'opcode':<{width}}  cpu / gpu", f"{'-' * width}  ---------"]
    for opcode, cpu, gpu in rows:
        lines.append(f"{opcode:<{width}}  cpu: {cpu}; gpu: {gpu}")
    n_cpu = sum(1 for r in rows if r[1] == "yes")
    lines.append("")
    lines.append(f"{n_cpu} of {len(rows)} opcodes evaluate on the cpu backend.")
    from hloref.evaluator.custom_call import CUSTOM_CALLS
    lapack = sorted(t for t in CUSTOM_CALLS if t.startswith("lapack_"))
    others = sorted(t for t in CUSTOM_CALLS if not t.startswith("lapack_"))
    lines.append(f"custom-call targets registered ({len(CUSTOM_CALLS)}; an unregistered target, "
                 f"or a form a target does not cover (e.g. fused-attention backward, dropout "
                 f"> 0), raises HloUnsupportedError with the reason): " + " ".join(others))
    lines.append(f"  and {len(lapack)} LAPACK targets lapack_{{s,d,c,z}}<routine>_ffi: "
                 + " ".join(sorted({t[len('lapack_') + 1:].removesuffix('_ffi') for t in lapack})))
    lines.append("element types (all backends): " + " ".join(t.name for t in ARRAY_TYPES)
                 + " token tuple")
    return "\n".join(lines)
