"""The rng-bit-generator maker."""

from __future__ import annotations

from hypothesis import strategies as st

from hloref.attrs import Enum
from hloref.shapes import ArrayShape, TupleShape

from .builder import Builder


def make_rng_bit_generator(b: Builder):
    alg = b.draw(st.sampled_from(["rng_three_fry", "rng_philox"]))
    state_n = 2 if alg == "rng_three_fry" else b.draw(st.sampled_from([2, 3]))
    state = b.operand(et=b.et("u64"), dims=(state_n,))
    out_et = b.et(b.draw(st.sampled_from(["u32", "u64", "u8", "u16"])))
    dims = b.new_dims(max_rank=2, zero_ok=False)
    shape = TupleShape((ArrayShape(b.et("u64"), (state_n,)), ArrayShape(out_et, dims)))
    r = b.add("rng-bit-generator", [state], {"algorithm": Enum(alg)}, shape=shape, pool=False)
    b.add("get-tuple-element", [r], {"index": 0})
    return b.add("get-tuple-element", [r], {"index": 1})
