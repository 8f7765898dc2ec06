"""Opcodes whose result shape is the declared one, and which keyword of each rule
``infer_shape`` fills from the declared result shape (``FREE_PARTS``)."""

from __future__ import annotations

from ..shapes import Shape
from .common import infer, required


def infer_declared(*operands: Shape, shape=None, **_):
    """Ops whose result is whatever the instruction declares (parameter, constant,
    custom-call, bitcast, infeed, recv, async ops, ...)."""
    return required(shape, "shape")


#: Opcodes whose result shape is taken from the declaration (no constraint checked).
DECLARED = frozenset({
    "parameter", "constant", "custom-call", "bitcast", "infeed", "outfeed", "recv", "recv-done",
    "send", "send-done", "async-start", "async-update", "async-done", "all-reduce-start",
    "all-reduce-done", "all-gather-start", "all-gather-done", "collective-permute-start",
    "collective-permute-done", "copy-start", "copy-done", "ragged-all-to-all", "ragged-dot",
    "scaled-dot", "scan",
})

#: Opcode → which keyword ``infer_shape`` fills from the declared result shape.
FREE_PARTS: dict[str, str] = {
    "convert": "result_element_type", "bitcast-convert": "result_element_type",
    "stochastic-convert": "result_element_type", "dot": "result_element_type",
    "convolution": "result_element_type",
    "broadcast": "result_dims", "reshape": "result_dims", "dynamic-reshape": "result_dims",
    "rng": "result_dims", "iota": "shape", "rng-bit-generator": "output_shape",
    "all-gather": "shard_count", "reduce-scatter": "shard_count",
    **{op: "shape" for op in DECLARED},
}

#: Opcodes with a free result element type: the verifier compares dims only.
FREE_ELEMENT_TYPE = frozenset({"convert", "bitcast-convert", "stochastic-convert", "dot",
                               "convolution"})

for _opcode in DECLARED:
    infer(_opcode)(infer_declared)
del _opcode
