"""Where a module's inputs leave XLA's contract (docs/semantics.md, "What XLA leaves
undefined or implementation-defined").

A finding is only worth filing where it breaks a contract XLA makes. XLA's maintainers
treat signed integer overflow as undefined behaviour (openxla/xla#41784), its documents
leave integer division by zero, shifts by the bit width or more, float-to-integer
conversion of NaN and out-of-range values, a NaN's sign and payload, the order of ties
of an unstable sort and the default RNG algorithm to the implementation, and a
reduce's init value must be its reducer's identity.
``contract_breaches(module, inputs)`` evaluates the module with hloref, watching every
instruction's operands, and lists where these inputs step outside;
``unsigned_variant(module)`` is the same module with its signed integer types made
unsigned (where wrap-around is defined), for reduction to prefer.

Each check is one entry of ``CHECKS`` (opcode -> functions of the instruction, its
operand values and its value, returning ``(kind, detail, mask)``), not a branch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from hloref.ir import Instruction, Module
from hloref.op_properties import values_of
from hloref.opcodes import ACCUMULATING
from hloref.shapes import ArrayShape, TupleShape
from hloref.types import ELEMENT_TYPES, ElementType, from_dtype


__all__ = ["Breach", "CHECKS", "contract_breaches", "unsigned_variant", "unsigned_arguments",
           "unstable_tie_mask"]


@dataclass(frozen=True)
class Breach:
    """One instruction whose inputs leave the contract: ``kind`` (``signed-overflow``,
    ``integer-division-by-zero``...), a ``detail`` with the operand values, the first
    element ``index`` (``None`` where the breach is not an element's: the RNG
    algorithm), ``count`` elements in all (in its first evaluation), and the
    computation it is in."""

    instruction: str
    opcode: str
    kind: str
    detail: str
    index: tuple | None
    count: int = 1
    computation: str = ""


# ---------------------------------------------------------------- element helpers


def _et(x) -> ElementType | None:
    try:
        return from_dtype(np.asarray(x).dtype)
    except Exception:  # noqa: BLE001 - not an HLO element type (a tuple, a token)
        return None


def _signed(x) -> bool:
    et = _et(x)
    return et is not None and et.is_integer and et.kind == "sint"


def _exact(x):
    """Python-exact integers: int64 for types below 64 bits (their products fit), Python
    ints (object arrays) for 64-bit types."""
    a = np.asarray(x)
    return a.astype(object) if a.dtype.itemsize >= 8 else a.astype(np.int64)


def _bounds(et: ElementType) -> tuple[int, int]:
    if et.kind == "sint":
        return -(1 << (et.bits - 1)), (1 << (et.bits - 1)) - 1
    return 0, (1 << et.bits) - 1


def _outside(exact, et: ElementType) -> np.ndarray:
    lo, hi = _bounds(et)
    return np.asarray((exact < lo) | (exact > hi), bool)


def _signed_overflow(fn: Callable, arity: int) -> Callable:
    """``fn`` of the operands computed exactly leaves the signed type's range."""
    def check(instr, operands, value):
        if not operands or not _signed(operands[0]):
            return []
        ops = np.broadcast_arrays(*[_exact(o) for o in operands[:arity]])
        mask = _outside(fn(*ops), _et(operands[0]))
        return [("signed-overflow", "the exact result leaves the signed type's range", mask)]
    return check


def _division(instr, operands, value):
    a, b = operands[0], operands[1]
    et = _et(a)
    if et is None or not et.is_integer:
        return []
    x, y = np.broadcast_arrays(_exact(a), _exact(b))
    found = [("integer-division-by-zero", "the divisor is 0 (XLA gives -1 / all ones for "
              "divide, the dividend for remainder)", np.asarray(y == 0, bool))]
    if et.kind == "sint":
        lo, _ = _bounds(et)
        found.append(("integer-division-overflow", "INT_MIN divided by -1",
                      np.asarray((x == lo) & (y == -1), bool)))
    return found


def _shift(instr, operands, value):
    et = _et(operands[0])
    if et is None or not et.is_integer:
        return []
    amount = np.asarray(operands[1]).astype(np.int64) & ((1 << et.bits) - 1) \
        if et.bits < 64 else np.asarray(operands[1]).view(np.uint64).astype(object)
    return [("shift-out-of-range", f"a shift amount (read as unsigned) >= the bit width "
             f"{et.bits}", np.asarray(amount >= et.bits, bool))]


def _convert(instr, operands, value):
    src, dst = _et(operands[0]), _et(value)
    if src is None or dst is None or not (src.is_float and dst.is_integer):
        return []
    x = np.asarray(operands[0]).astype(np.float64)
    lo, hi = _bounds(dst)
    with np.errstate(invalid="ignore"):
        t = np.trunc(x)
        out = (t < lo) | (t > hi)
    return [("convert-nan-to-integer", "a NaN converted to an integer", np.isnan(x)),
            ("convert-out-of-range", f"a value whose integer part is outside "
             f"[{lo}, {hi}]", np.asarray(out, bool))]


def _power(instr, operands, value):
    a, b = operands[0], operands[1]
    if not _signed(a):
        return []
    x, y = np.broadcast_arrays(np.asarray(a).astype(np.int64), np.asarray(b).astype(np.int64))
    lo, hi = _bounds(_et(a))
    over = np.zeros(x.shape, bool)
    big = (np.abs(x) >= 2) & (y > 0)
    for idx in zip(*np.nonzero(big)):
        e = int(y[idx])
        r = int(x[idx]) ** e if e < 128 else None
        over[idx] = r is None or not lo <= r <= hi
    return [("signed-overflow", "the exact power leaves the signed type's range", over),
            ("integer-negative-exponent", "an integer power with a negative exponent",
             np.asarray((y < 0) & (np.abs(x) != 1), bool))]


def _nan_bits(instr, operands, value):
    """A NaN's sign and payload (IEEE 754 leaves them open; LLVM's are non-deterministic)
    made visible: bitcast-convert of a float NaN, or a TOTALORDER compare of one."""
    et = _et(operands[0]) if operands else None
    if et is None or not (et.is_float or et.is_complex):
        return []
    if instr.opcode == "compare" and str(instr.attrs.get("type", "")) != "TOTALORDER":
        return []
    with np.errstate(invalid="ignore"):
        nan = np.zeros(np.shape(value), bool)
        for o in operands[:2]:
            a = np.asarray(o)
            if a.shape == nan.shape:
                nan |= np.isnan(a.astype(np.complex128 if et.is_complex else np.float64))
    return [("nan-bits-observed", "the sign or payload of a NaN is read (unspecified)", nan)]


def _rng_default(instr, operands, value):
    algorithm = str(instr.attrs.get("algorithm", "rng_default"))
    if algorithm != "rng_default":
        return []
    return [("rng-default-algorithm", "rng-bit-generator's default algorithm is the "
             "backend's choice (Philox on XLA:CPU)", None)]


#: Identities of the single-op reducers (``simple_reducer``): an init that is not one
#: breaks reduce's precondition.
def _is_identity(op: str, init: np.ndarray) -> bool:
    et = _et(init)
    v = np.asarray(init)
    if et is None:
        return True
    if values_of("reducer-identity").get(op) == "0":  # add, or, xor
        return bool(np.all(v == 0))
    if op == "multiply":
        return bool(np.all(v == 1))
    if op == "and":
        if et.is_integer:
            return bool(np.all(_exact(v) == (-1 if et.kind == "sint" else _bounds(et)[1])))
        return bool(np.all(v))
    if op in ("maximum", "minimum"):
        if et.is_float:
            target = -np.inf if op == "maximum" else np.inf
            return bool(np.all(v.astype(np.float64) == target))
        if et.is_integer:
            lo, hi = _bounds(et)
            return bool(np.all(_exact(v) == (lo if op == "maximum" else hi)))
        return bool(np.all(v == (op == "minimum")))
    return True


def _reduce_init(module: Module) -> Callable:
    def check(instr, operands, value):
        from hloref.evaluator.reduce import simple_reducer
        comp = module.computations.get(str(instr.attrs.get("to_apply")))
        op = simple_reducer(comp) if comp is not None else None
        n = len(operands) // 2
        if op is None or n != 1 or _is_identity(op, operands[1]):
            return []
        return [("reduce-init-not-identity", f"the init value {np.asarray(operands[1]).item()!r} "
                 f"is not the identity of {op}", None)]
    return check


def _unstable_ties(module: Module) -> Callable:
    """An unstable sort whose sorted output has neighbours the comparator calls equal but
    that differ (in any operand, bit for bit): their order is the implementation's."""
    def check(instr, operands, value):
        from hloref.evaluator.interpreter import Interpreter
        if instr.attrs.get("is_stable") in (True, "true") or not operands:
            return []
        comp = module.computations.get(str(instr.attrs.get("to_apply")))
        outs = list(value) if isinstance(value, tuple) else [value]
        dim = int((instr.attrs.get("dimensions") or [0])[0])
        if comp is None or outs[0].shape[dim] < 2:
            return []
        interp = Interpreter(module)
        moved = [np.moveaxis(np.asarray(o), dim, -1) for o in outs]
        mask = np.zeros(moved[0].shape, bool)
        for idx in np.ndindex(*moved[0].shape[:-1]):
            for j in range(moved[0].shape[-1] - 1):
                a = [m[idx + (j,)] for m in moved]
                b = [m[idx + (j + 1,)] for m in moved]
                if all(x.tobytes() == y.tobytes() for x, y in zip(a, b)):
                    continue
                ab = interp.call(comp, [v for pair in zip(a, b) for v in pair])
                ba = interp.call(comp, [v for pair in zip(b, a) for v in pair])
                if not bool(ab) and not bool(ba):
                    mask[idx + (j,)] = True
            if mask.sum() > 0 and mask.size > 4096:
                break
        return [("unstable-sort-ties", "is_stable=false and elements the comparator calls "
                 "equal differ: their order is implementation-defined", np.moveaxis(mask, -1, dim))]
    return check


def _checks(module: Module) -> dict[str, list[Callable]]:
    """opcode -> checks (``CHECKS`` plus those that read the module's computations)."""
    out = {k: list(v) for k, v in CHECKS.items()}
    out.setdefault("reduce", []).append(_reduce_init(module))
    out.setdefault("sort", []).append(_unstable_ties(module))
    overflow = _accumulation_overflow(module)
    for opcode in ACCUMULATING:
        out.setdefault(opcode, []).append(overflow)
    return out


#: opcode -> checks of the operands; each returns ``[(kind, detail, mask or None)]``.
CHECKS: dict[str, tuple[Callable, ...]] = {
    "add": (_signed_overflow(lambda a, b: a + b, 2),),
    "subtract": (_signed_overflow(lambda a, b: a - b, 2),),
    "multiply": (_signed_overflow(lambda a, b: a * b, 2),),
    "negate": (_signed_overflow(lambda a: -a, 1),),
    "abs": (_signed_overflow(np.abs, 1),),
    "divide": (_division,),
    "remainder": (_division,),
    "shift-left": (_shift,),
    "shift-right-logical": (_shift,),
    "shift-right-arithmetic": (_shift,),
    "convert": (_convert,),
    "power": (_power,),
    "rng-bit-generator": (_rng_default,),
    "bitcast-convert": (_nan_bits,),
    "compare": (_nan_bits,),
}


# ---------------------------------------------------------------- the walk


def _element(operand, idx: tuple, shape: tuple) -> str:
    """The operand's element at ``idx`` (a scalar operand's value; '...' otherwise)."""
    a = np.asarray(operand)
    if a.shape == shape:
        return repr(a[idx].item())
    return repr(a.item()) if a.ndim == 0 else "..."


def contract_breaches(module: Module | str, inputs: list, *, limits=None) -> list[Breach]:
    """The places where evaluating ``module`` on ``inputs`` leaves XLA's contract: one
    ``Breach`` per instruction and kind (its first evaluation that breaches), in the order
    the evaluation meets them."""
    import hloref
    from hloref import api
    from hloref.evaluator.interpreter import Interpreter
    if isinstance(module, str):
        module = hloref.parse(module)
    api.verified(module)
    checks = _checks(module)
    watched = {(c.name, o.name) for c in module.computations.values()
               for i in c.instructions if i.opcode in checks for o in i.operands}
    last: dict = {}
    found: dict = {}

    def observe(comp, instr: Instruction, value):
        if (comp.name, instr.name) in watched:
            last[(comp.name, instr.name)] = value
        fns = checks.get(instr.opcode)
        if not fns:
            return
        operands = [last.get((comp.name, o.name)) for o in instr.operands]
        if any(o is None for o in operands):
            return
        for fn in fns:
            for kind, detail, mask in fn(instr, operands, value):
                key = (comp.name, instr.name, kind)
                if key in found:
                    continue
                if mask is None:
                    found[key] = Breach(instr.name, instr.opcode, kind, detail, None, 1, comp.name)
                elif np.any(mask):
                    idx = tuple(int(i) for i in np.argwhere(mask)[0])
                    values = ", ".join(_element(o, idx, np.shape(mask)) for o in operands)
                    found[key] = Breach(instr.name, instr.opcode, kind,
                                        f"{detail} (operands {values})", idx,
                                        int(np.count_nonzero(mask)), comp.name)

    params = module.entry.parameters
    args = [api.coerce_argument(a, p.shape, f"argument {i}")
            for i, (a, p) in enumerate(zip(inputs, params))]
    Interpreter(module, limits=limits, observer=observe).run(args)
    return list(found.values())


# ---------------------------------------------------------------- unsigned variant


_UNSIGNED = {f"s{b}": f"u{b}" for b in (1, 2, 4, 8, 16, 32, 64)}
#: the signed types an accumulation is recomputed in s64 for (s64 itself is not checked)
_WIDE = {f"s{b}": "s64" for b in (1, 2, 4, 8, 16, 32)}


def _mapped_shape(shape, types: dict[str, str]):
    if isinstance(shape, ArrayShape) and shape.element_type.name in types:
        return shape.with_element_type(ELEMENT_TYPES[types[shape.element_type.name]])
    if isinstance(shape, TupleShape):
        return TupleShape(tuple(_mapped_shape(s, types) for s in shape.elements))
    return shape


def _unsigned_value(value):
    if isinstance(value, tuple):
        return tuple(_unsigned_value(v) for v in value)
    if not isinstance(value, np.ndarray) or not _signed(value):
        return value
    et = _et(value)
    target = ELEMENT_TYPES[_UNSIGNED[et.name]]
    bits = value.astype(np.int64).astype(np.uint64) & np.uint64((1 << et.bits) - 1 if et.bits < 64
                                                                else 0xFFFFFFFFFFFFFFFF)
    return bits.astype(target.dtype)


def _wide_value(value):
    if isinstance(value, tuple):
        return tuple(_wide_value(v) for v in value)
    a = np.asarray(value)
    return a.astype(np.int64) if _signed(a) and _et(a).name in _WIDE else a


def unsigned_arguments(args: list) -> list:
    """``args`` with every signed integer array as the unsigned type of its width (the
    same bits), for ``unsigned_variant``'s parameters."""
    return [_unsigned_value(np.asarray(a)) if isinstance(a, (np.ndarray, np.generic)) else a
            for a in args]


def _retyped(module: Module, types: dict[str, str], value: Callable, *,
             unsigned_compare: bool = False) -> Module | None:
    """``module`` with the element types ``types`` names replaced (``value`` converts
    its constants; ``unsigned_compare``: a ``compare`` of type SIGNED becomes
    UNSIGNED); ``None`` when nothing changes or the result does not verify."""
    import hloref
    from hloref.attrs import Enum
    from hloref.errors import HloError
    from hloref.verifier import verify_module
    from hloref.shapes import ProgramShape
    variant = hloref.parse(module.to_text())
    changed = False
    layout = variant.attrs.get("entry_computation_layout")
    if isinstance(layout, ProgramShape):
        variant.attrs["entry_computation_layout"] = ProgramShape(
            tuple(_mapped_shape(s, types) for s in layout.parameters),
            _mapped_shape(layout.result, types))
    for _, instr in variant.instructions():
        shape = _mapped_shape(instr.shape, types)
        if shape != instr.shape:
            instr.shape, changed = shape, True
        if instr.opcode == "constant" and instr.literal is not None:
            instr.literal = value(instr.literal)
        if unsigned_compare and instr.opcode == "compare" and \
                str(instr.attrs.get("type", "")) == "SIGNED":
            instr.attrs["type"] = Enum("UNSIGNED")
    if not changed:
        return None
    try:
        variant = hloref.parse(variant.to_text())
        verify_module(variant)
    except HloError:
        return None
    return variant


def unsigned_variant(module: Module) -> Module | None:
    """``module`` with every signed integer element type made the unsigned type of the
    same width (constants keep their bits; a ``compare`` of type SIGNED becomes
    UNSIGNED), where wrap-around is defined; ``None`` when the module has no signed
    integer or the variant does not verify. Its parameters take ``unsigned_arguments``."""
    return _retyped(module, _UNSIGNED, _unsigned_value, unsigned_compare=True)


# ---------------------------------------------------------------- accumulations


def _leaves(value) -> list:
    if isinstance(value, tuple):
        return [leaf for v in value for leaf in _leaves(v)]
    return [np.asarray(value)]


def _accumulation_overflow(module: Module) -> Callable:
    """Signed overflow inside an accumulation (the catalogue's ``accumulating`` group: a
    ``dot``, ``convolution``, ``reduce``, ``scatter``... of a signed type of at most 32
    bits): undefined as for an ``add`` (openxla/xla#41784). Exact: the instruction is
    run alone (``isolation.isolated_module``) with those types widened to s64 on the
    same operand values, and the result compared with the type's range. Only an exact
    result outside the range counts: a partial sum that overflows in some order while
    the result fits is wrapped back by two's complement on every backend."""
    def check(instr, operands, value):
        leaves = _leaves(value)
        if not any(_signed(a) and _et(a).name in _WIDE for a in leaves):
            return []
        import hloref
        from hloref.errors import HloError

        from .isolation import isolated_module
        wide = _retyped(isolated_module(module, instr), _WIDE, _wide_value)
        if wide is None:
            return []
        try:
            exact = _leaves(hloref.evaluate(wide, *[_wide_value(o) for o in operands]))
        except HloError:
            return []
        for got, want in zip(leaves, exact):
            if _signed(got) and _et(got).name in _WIDE:
                return [("signed-overflow", "the exact accumulated result leaves the signed "
                         "type's range", _outside(want, _et(got)))]
        return []
    return check


def unstable_tie_mask(module: Module, instr: Instruction, value) -> np.ndarray | None:
    """Where the output ``value`` of ``instr``, an unstable ``sort`` of ``module``, has an
    element the comparator calls equal to the next one along the sorted dimension though
    they differ (the ``unstable-sort-ties`` check's mask), or None where there is none."""
    found = _unstable_ties(module)(instr, [value], value)
    return found[0][2] if found and np.any(found[0][2]) else None
