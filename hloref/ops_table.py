"""The table ``hloref ops`` prints: opcodes and element types per backend."""

from __future__ import annotations

from .opcodes import ALL_OPCODES
from .types import ARRAY_TYPES

__all__ = ["ops_table", "format_ops_table"]


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
    lines.append("element types (all backends): " + " ".join(t.name for t in ARRAY_TYPES)
                 + " token tuple")
    return "\n".join(lines)
