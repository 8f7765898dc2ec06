"""Which maker makes each opcode (``MAKERS``), how often the generator picks it
(``DEFAULT_WEIGHTS``), and what it can reach (``GENERATABLE_OPCODES``)."""

from __future__ import annotations

from typing import Callable

from hloref.ir import Instruction
from hloref.op_properties import values_of

from . import (control, convert, convolution, dot, elementwise, indexing, linalg, reduce, rng,
               shape_ops, sort, windows)
from .builder import Builder
from .elementwise import BINARY, UNARY

#: Default relative weights of the opcodes the generator picks (op property
#: ``generator-weight``; an elementwise op it does not list: 1 unary, 1.5 binary).
DEFAULT_WEIGHTS: dict[str, float] = {**dict.fromkeys(UNARY, 1.0), **dict.fromkeys(BINARY, 1.5),
                                     **values_of("generator-weight", float)}

#: Opcodes hloref evaluates that XLA's HLO parser does not know (jaxlib 0.10.2): the
#: generator makes them only when ``ops=`` names them.
NOT_IN_XLA = frozenset({"atan"})

#: Every opcode some maker can produce (the glue ops included).
GENERATABLE_OPCODES: frozenset[str] = (frozenset(DEFAULT_WEIGHTS) | {"parameter"}) - NOT_IN_XLA


def reachable_opcodes(backend: str = "cpu") -> frozenset[str]:
    """Opcodes the generator can produce that hloref evaluates on ``backend``."""
    import hloref
    return GENERATABLE_OPCODES & hloref.supported_opcodes(backend)


#: opcode -> the function that makes one (and the glue its operands need) in a Builder.
MAKERS: dict[str, Callable[[Builder], Instruction]] = {
    **{op: elementwise.make_unary(op) for op in UNARY},
    **{op: elementwise.make_binary(op) for op in BINARY},
    "compare": elementwise.make_compare, "select": elementwise.make_select,
    "clamp": elementwise.make_clamp, "convert": convert.make_convert,
    "bitcast-convert": convert.make_bitcast_convert,
    "reduce-precision": convert.make_reduce_precision,
    "broadcast": shape_ops.make_broadcast, "reshape": shape_ops.make_reshape,
    "transpose": shape_ops.make_transpose, "reverse": shape_ops.make_reverse,
    "slice": shape_ops.make_slice, "concatenate": shape_ops.make_concatenate,
    "pad": shape_ops.make_pad, "iota": shape_ops.make_iota, "constant": shape_ops.make_constant,
    "dynamic-slice": indexing.make_dynamic_slice,
    "dynamic-update-slice": indexing.make_dynamic_update_slice, "tuple": shape_ops.make_tuple,
    "get-tuple-element": shape_ops.make_tuple, "call": control.make_call,
    "while": control.make_while, "conditional": control.make_conditional,
    "map": control.make_map, "opt-barrier": control.make_opt_barrier,
    "reduce": reduce.make_reduce, "reduce-window": windows.make_reduce_window,
    "select-and-scatter": windows.make_select_and_scatter, "sort": sort.make_sort,
    "gather": indexing.make_gather, "scatter": indexing.make_scatter, "dot": dot.make_dot,
    "convolution": convolution.make_convolution, "fft": linalg.make_fft,
    "cholesky": linalg.make_cholesky, "triangular-solve": linalg.make_triangular_solve,
    "batch-norm-inference": linalg.make_batch_norm("batch-norm-inference"),
    "batch-norm-training": linalg.make_batch_norm("batch-norm-training"),
    "batch-norm-grad": linalg.make_batch_norm("batch-norm-grad"), "topk": sort.make_topk,
    "rng-bit-generator": rng.make_rng_bit_generator,
    "stochastic-convert": convert.make_stochastic_convert,
}
