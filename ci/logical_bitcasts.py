"""A module's ``bitcast`` instructions rewritten as the logical ops they stand for, so
that XLA:CPU can run hand-written bitcasts through jaxlib (whose route through
StableHLO loses layouts, and XLA rejects a bitcast before layout assignment).

A bitcast reinterprets the operand's memory, read in the operand's layout, as the
result shape in its layout. With ``perm(s)`` the dimensions of ``s`` from major to
minor (its minor_to_major reversed), that is::

    transpose(x, perm(in))            # the operand's elements in memory order
    -> reshape to [out.dims[d] for d in perm(out)]
    -> transpose(inverse of perm(out))  # memory order of the result back to logical
    -> bitcast-convert                # when the element types differ (same width)

which is the reading ``tests/test_bitcast_layouts_xla.py`` checks against the bitcasts
XLA:CPU's own optimizer writes. Bitcasts between element types of different widths,
packed ``E(n)`` layouts, dynamic dimensions or tuples are left alone (the module then
still cannot run on XLA:CPU)."""

from __future__ import annotations

import numpy as np

from hloref.ir import Instruction, Module
from hloref.shapes import ArrayShape


def _perm(shape: ArrayShape) -> tuple[int, ...]:
    return tuple(reversed(shape.minor_to_major()))


def _plain(shape: ArrayShape, dims, element_type=None) -> ArrayShape:
    return ArrayShape(element_type or shape.element_type, tuple(dims))


def _rewritable(instr: Instruction) -> bool:
    if instr.opcode != "bitcast" or len(instr.operands) != 1:
        return False
    a, b = instr.operands[0].shape, instr.shape
    if not (isinstance(a, ArrayShape) and isinstance(b, ArrayShape)):
        return False
    if any(a.dynamic) or any(b.dynamic) or a.size != b.size:
        return False
    for s in (a, b):
        if s.layout is not None and getattr(s.layout, "element_size_bits", 0):
            return False
    return a.element_type.bits == b.element_type.bits


def rewrite(module: Module) -> int:
    """Rewrite every bitcast of ``module`` in place; the number left as it was."""
    left = 0
    # each bitcast reads its operand in the layout the text gives it, even when that
    # operand is a bitcast rewritten (and so re-shaped) earlier
    written = {id(i): i.shape for _, i in module.instructions()}
    for comp in module.computations.values():
        out: list[Instruction] = []
        for instr in comp.instructions:
            if instr.opcode != "bitcast":
                out.append(instr)
                continue
            if not _rewritable(instr):
                left += 1
                out.append(instr)
                continue
            x = instr.operands[0]
            a, b = written[id(x)], instr.shape
            pa, pb = _perm(a), _perm(b)
            memory_in = Instruction(f"{instr.name}.memory", "transpose",
                                    _plain(a, [a.dims[d] for d in pa]), [x],
                                    {"dimensions": pa})
            memory_out = Instruction(f"{instr.name}.reshaped", "reshape",
                                     _plain(a, [b.dims[d] for d in pb]), [memory_in])
            inverse = tuple(int(i) for i in np.argsort(pb))
            logical = Instruction(f"{instr.name}.logical", "transpose",
                                  _plain(a, b.dims), [memory_out], {"dimensions": inverse})
            out += [memory_in, memory_out, logical]
            # the bitcast itself becomes the last op, so its users and name stay
            if a.element_type == b.element_type:
                instr.opcode, instr.operands, instr.attrs = "copy", [logical], {}
            else:
                instr.opcode, instr.operands, instr.attrs = "bitcast-convert", [logical], {}
            instr.shape = _plain(b, b.dims)
            out.append(instr)
        comp.instructions[:] = out
    return left
