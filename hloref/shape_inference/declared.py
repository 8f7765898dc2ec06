"""Opcodes whose result shape is the declared one, and which keyword of each rule
``infer_shape`` fills from the declared result shape (``FREE_PARTS``)."""

from __future__ import annotations

from ..op_properties import opcodes_with, values_of
from ..shapes import Shape
from .common import infer, required


def infer_declared(*operands: Shape, shape=None, **_):
    """Ops whose result is whatever the instruction declares (parameter, constant,
    custom-call, bitcast, infeed, recv, async ops, ...)."""
    return required(shape, "shape")


#: Opcodes whose result shape is taken from the declaration (no constraint checked).
DECLARED = opcodes_with("declared-shape")

#: Opcode → which keyword ``infer_shape`` fills from the declared result shape.
FREE_PARTS: dict[str, str] = {**values_of("free-part"), **{op: "shape" for op in DECLARED}}

#: Opcodes with a free result element type: the verifier compares dims only.
FREE_ELEMENT_TYPE = frozenset(op for op, part in FREE_PARTS.items()
                              if part == "result_element_type")

for _opcode in DECLARED:
    infer(_opcode)(infer_declared)
del _opcode
