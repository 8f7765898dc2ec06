"""Shape rules of rng, rng-bit-generator, rng-get-and-update-state."""

from __future__ import annotations

from ..shapes import Shape, TupleShape
from ..types import ELEMENT_TYPES
from .common import (ShapeError, as_array, expect_kind, expect_same_type, infer, int_list,
                     make_array, required, shape_str)


@infer("rng")
def infer_rng(*operands: Shape, distribution=None, result_dims=None, **_):
    """``rng(a, b)``: two scalars of one type; result ``result_dims`` of that type."""
    d = str(required(distribution, "distribution"))
    if d not in ("rng_uniform", "rng_normal"):
        raise ShapeError(f"rng: distribution={d} is not rng_uniform or rng_normal")
    if len(operands) != 2:
        raise ShapeError(f"rng: expects 2 operands, got {len(operands)}")
    a = as_array(operands[0], "rng operand 0")
    b = as_array(operands[1], "rng operand 1")
    if a.dims or b.dims:
        raise ShapeError("rng: operands must be scalars")
    expect_same_type(a, b, "rng", "operand")
    if d == "rng_normal":
        expect_kind(a.element_type, "f", "rng rng_normal")
    else:
        expect_kind(a.element_type, "fsup", "rng rng_uniform")
    return make_array(a.element_type, int_list(required(result_dims, "result_dims"), "result_dims"))


@infer("rng-bit-generator")
def infer_rng_bit_generator(state: Shape, *, algorithm=None, output_shape=None, **_):
    """``rng-bit-generator(state)``: (state, output_shape); output integral or float."""
    s = as_array(state, "rng-bit-generator state")
    alg = str(required(algorithm, "algorithm"))
    if alg not in ("rng_default", "rng_three_fry", "rng_philox"):
        raise ShapeError(f"rng-bit-generator: algorithm={alg} unknown")
    if s.rank != 1:
        raise ShapeError(f"rng-bit-generator: state must be rank 1, got {shape_str(s)}")
    out = as_array(required(output_shape, "output_shape"), "rng-bit-generator output")
    return TupleShape((s, out))


@infer("rng-get-and-update-state")
def infer_rng_get_and_update_state(*, delta=None, **_):
    """``rng-get-and-update-state``: u64[2]."""
    required(delta, "delta")
    return make_array(ELEMENT_TYPES["u64"], (2,))
