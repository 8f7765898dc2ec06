"""What the mutations (``fuzz/mutations.py``, ``fuzz/mutations_control.py``) share: the
``MutationContext`` and drawing one of a module's instructions."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

__all__ = ["MutationContext", "pick", "candidates", "FLOAT_TARGETS", "INT_TARGETS"]

#: element types a float / integer subgraph may be retyped to
FLOAT_TARGETS = ("f32", "bf16", "f16", "f64", "f8e4m3fn", "f8e5m2")
INT_TARGETS = ("s32", "s8", "s16", "s64", "u32", "u8")


@dataclass
class MutationContext:
    """What mutations may use: the element types retypes may pick, other seeds to
    splice from (parsed modules), the largest number of elements a new value has, the
    largest subgraph a splice takes, the largest mutant (instructions, all
    computations; a mutation that makes it larger is dropped), and the most calls
    hloref may make element by element, and the most instructions it may run (loops
counted per trip), to judge it (``fuzz/mutation_cost.py``)."""

    types: tuple = FLOAT_TARGETS + INT_TARGETS
    donors: list = field(default_factory=list)
    max_elements: int = 1 << 16
    max_splice: int = 80
    max_instructions: int | None = None
    max_sequential_calls: int | None = None
    max_instruction_steps: int | None = None


def pick(draw, items):
    """One of ``items`` (``None`` when empty), drawn."""
    return items[draw(st.integers(0, len(items) - 1))] if items else None


def candidates(ed, pred, *, entry_only: bool = False):
    """``(computation, instruction)`` pairs of the module of ``ed`` (an ``Editor``)
    that ``pred`` accepts."""
    comps = [ed.module.entry] if entry_only else list(ed.module.computations.values())
    return [(c, i) for c in comps for i in c.instructions if pred(c, i)]


