"""Shape inference for HLO instructions, one public function per opcode (or family).

The rules live in one module per op family (mirroring ``evaluator/``); each registers
itself with ``@infer("opcode", ...)`` in ``INFER``. This module fills in the free
parts of a result from the declared shape and dispatches (``infer_shape``).

Every ``infer_<opcode>`` function (``-`` → ``_``) takes the operand shapes
positionally and the instruction's attributes as keyword arguments named as in
HLO text (``dimensions=``, ``slice=``, ``padding=``, ``window=``,
``dim_labels=``, ``lhs_contracting_dims=``, ...), with the typed values of
``hloref.attrs``. It returns the result ``Shape`` or raises ``ShapeError`` saying
which constraint failed, on which value, and what was expected. The functions
need no IR objects, so the fuzzer can call them to build valid programs.

Called computations (``to_apply``, ``condition``, ``body``, ``calls``,
``select``/``scatter``, ``true_computation``/``false_computation``,
``branch_computations``) are passed as *program shapes*: an
``hloref.ir.ProgramShape`` or a ``(parameter_shapes, result_shape)`` pair (a
list of them for ``branch_computations``). Passing the bare ``ComputationRef``
name (or nothing) skips the checks that need the callee's signature.

**Results the operands do not determine.** HLO writes the result shape on every
instruction, and for some opcodes part of it is free. Those functions take the
free part as a keyword argument, and ``infer_shape(..., declared=shape)`` fills
it in from the declared result shape (see ``FREE_PARTS``):

* ``result_element_type=``: ``convert``, ``bitcast-convert``,
  ``stochastic-convert`` (required); ``dot``, ``convolution``, ``ragged-dot``
  (optional; XLA's ``preferred_element_type``, default: the lhs type). The
  verifier therefore compares only the dimensions' consequences of the
  operands for these ops, and accepts the declared element type.
* ``result_dims=``: ``broadcast``, ``reshape``, ``dynamic-reshape``, ``rng``
  (the added / new dimensions cannot be inferred).
* ``shape=`` (the whole declared shape, checked for well-formedness only):
  ``parameter``, ``constant``, ``iota``, ``custom-call``, ``bitcast``,
  ``infeed``, ``recv``, the async and ``*-start``/``*-done`` ops, and the
  other opcodes listed in ``DECLARED``.
* ``output_shape=``: the bits output of ``rng-bit-generator``.
* ``shard_count=``: ``all-gather`` / ``reduce-scatter`` group size (taken
  from ``replica_groups`` when explicit, else from the declared shape).
"""

from __future__ import annotations

from typing import Any, Sequence

from ..shapes import ArrayShape, Shape, TupleShape
from . import (collectives, control, convert, convolution, declared, dot, dynamic,  # noqa: F401
               elementwise, indexing, linalg, reduce, rng, shape_ops, sort, windows)
from .common import (INFER, KIND_WORDS, ShapeError, element_kind_ok, infer, int_list, same_shape,
                     shape_str, window_output_dim)
from .collectives import group_size
from .declared import DECLARED, FREE_ELEMENT_TYPE, FREE_PARTS, infer_declared
from .elementwise import (BINARY_KINDS, BINARY_OPCODES, COMPARE_DIRECTIONS, COMPARE_TYPES,
                          UNARY_KINDS, UNARY_OPCODES)

__all__ = ["ShapeError", "INFER", "infer", "infer_shape", "FREE_PARTS", "FREE_ELEMENT_TYPE",
           "DECLARED", "shape_str", "same_shape", "window_output_dim", "element_kind_ok",
           "KIND_WORDS", "UNARY_KINDS", "BINARY_KINDS", "UNARY_OPCODES", "BINARY_OPCODES",
           "COMPARE_DIRECTIONS", "COMPARE_TYPES", "flatten_shape_arrays", "infer_declared"]

# Every rule is importable from here under its function name (``infer_broadcast``, ...).
for _fn in set(INFER.values()):
    globals()[_fn.__name__] = _fn
__all__ += sorted({f.__name__ for f in INFER.values()} - set(__all__))
for _name in ("domain", "opt_barrier", "partition_id", "collective_broadcast"):
    globals()["infer_" + _name] = INFER[_name.replace("_", "-")]
    __all__.append("infer_" + _name)
del _fn, _name


def _fill_free(opcode: str, kwargs: dict, declared: Shape | None) -> None:
    part = FREE_PARTS.get(opcode)
    if part is None or declared is None or kwargs.get(part) is not None:
        return
    if part == "shape":
        kwargs["shape"] = declared
    elif part == "result_element_type" and isinstance(declared, ArrayShape):
        kwargs[part] = declared.element_type
    elif part == "result_dims" and isinstance(declared, ArrayShape):
        kwargs[part] = declared.dims
    elif part == "output_shape" and isinstance(declared, TupleShape) and len(declared.elements) == 2:
        kwargs[part] = declared.elements[1]
    elif part == "shard_count":
        if group_size(kwargs.get("replica_groups")) is not None:
            return
        outs = flatten_shape_arrays(declared)
        ins = kwargs.get("_operands", ())
        dims = int_list(kwargs.get("dimensions"), "dimensions")
        if outs and ins and len(dims) == 1 and isinstance(ins[0], ArrayShape) \
                and 0 <= dims[0] < min(ins[0].rank, outs[0].rank):
            o, i = outs[0].dims[dims[0]], ins[0].dims[dims[0]]
            if opcode == "all-gather" and i and o % i == 0:
                kwargs[part] = o // i
            elif opcode == "reduce-scatter" and o and i % o == 0:
                kwargs[part] = i // o


def flatten_shape_arrays(shape: Shape) -> list[ArrayShape]:
    if isinstance(shape, TupleShape):
        return [x for e in shape.elements for x in flatten_shape_arrays(e)]
    return [shape] if isinstance(shape, ArrayShape) else []


def infer_shape(opcode: str, operand_shapes: Sequence[Shape], attrs: dict[str, Any] | None = None,
                called: dict[str, Any] | None = None, *, declared: Shape | None = None) -> Shape:
    """Infer the result shape of ``opcode``.

    ``attrs``: attributes by text name (typed values). ``called``: attribute name →
    program shape of the called computation(s) (``ProgramShape`` or ``(params, root)``;
    a list for ``branch_computations``); these replace the ``ComputationRef`` names.
    ``declared``: the instruction's declared shape, used only for the parts the
    operands leave free (``FREE_PARTS``).
    """
    fn = INFER.get(opcode)
    if fn is None:
        raise ShapeError(f"no shape inference for opcode '{opcode}'")
    kwargs = {k.replace("-", "_"): v for k, v in (attrs or {}).items()}
    for k, v in (called or {}).items():
        kwargs[k] = v
    kwargs["_operands"] = tuple(operand_shapes)
    _fill_free(opcode, kwargs, declared)
    del kwargs["_operands"]
    return fn(*operand_shapes, **kwargs)
