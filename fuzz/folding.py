"""What XLA's constant folding evaluates in a module: the values that depend on no
parameter (:func:`free_values`), the instructions of a kind whose operands are all such
values (:func:`folded`), and hloref's operand values of chosen instructions
(:func:`operand_values`). The known classes of XLA's folders (``fuzz/known_bugs.py``)
read them."""

from __future__ import annotations

from hloref.op_properties import opcodes_with

__all__ = ["NOT_FOLDED", "free_values", "folded", "operand_values"]

#: ops without operands (or with only a state) that constant folding leaves alone (op
#: property ``not-folded``)
NOT_FOLDED = opcodes_with("not-folded")

def folded(module, keep, free: dict) -> dict:
    """``{(computation, name): instruction}`` of the instructions ``keep`` accepts whose
    operands all depend on no parameter (``free``: ``free_values``; what constant
    folding evaluates; an iota has none and folds, an rng or a parameter does not)."""
    suspects = {}
    for comp in module.computations.values():
        for instr in comp.instructions:
            if instr.opcode not in NOT_FOLDED and keep(instr) and \
                    all(free[comp.name].get(o.name) for o in instr.operands):
                suspects[(comp.name, instr.name)] = instr
    return suspects


def free_values(module) -> dict:
    """``{computation: {name: bool}}``: whether each value depends on no parameter of the
    entry (an array parameter of no elements is free). A parameter of a computation that
    ``call``, ``fusion`` or ``conditional``
    calls is free when every call site passes it a free operand (XLA inlines calls and
    may turn a conditional of cheap branches into a select, so constant folding reaches
    inside; a conditional branch k takes operand k + 1); loops and per-element calls
    (while, map, reduce...) are left out."""
    passed: dict = {}  # (callee, parameter number) -> free at every call site so far
    free: dict = {}
    for _ in range(4):  # nesting depth the fixpoint follows
        free = {}
        for comp in module.computations.values():
            f: dict = {}
            for instr in comp.instructions:  # operands come first in text order
                if instr.opcode == "parameter":
                    # an array of no elements holds no value: XLA folds what reads it
                    # (a reduce over an empty dimension is its init value)
                    f[instr.name] = _no_elements(instr) or (comp is not module.entry and
                                                            passed.get((comp.name,
                                                                        instr.parameter_number),
                                                                       False))
                    continue
                # xor(x, x), compare(x, x)...: constants whatever x (_self_cancelling)
                f[instr.name] = _self_cancelling(instr) or (
                    instr.opcode not in NOT_FOLDED and
                    all(f.get(o.name, False) for o in instr.operands))
            free[comp.name] = f
        sites: dict = {}
        for comp in module.computations.values():
            for instr in comp.instructions:
                if instr.opcode in ("call", "fusion"):
                    targets = [(name, instr.operands) for name in instr.called_computation_names()]
                elif instr.opcode == "conditional":
                    targets = [(name, [instr.operands[k + 1]]) for k, name in
                               enumerate(instr.called_computation_names())
                               if k + 1 < len(instr.operands)]
                else:
                    continue
                for name, args in targets:
                    for i, a in enumerate(args):
                        key = (name, i)
                        sites[key] = sites.get(key, True) and free[comp.name].get(a.name, False)
        if sites == passed:
            break
        passed = sites
    return free


def _no_elements(instr) -> bool:
    return getattr(instr.shape, "is_array", False) and instr.shape.size == 0


_SAME_SHAPE_FORWARD = opcodes_with("same-shape-forward")


def _through_copies(instr):
    """The value ``instr`` forwards unchanged: through copies and reshapes or bitcasts to
    its own shape (XLA's simplifier removes them first)."""
    while instr.opcode in _SAME_SHAPE_FORWARD and len(instr.operands) == 1 and \
            str(instr.operands[0].shape) == str(instr.shape):
        instr = instr.operands[0]
    return instr


def _self_cancelling(instr) -> bool:
    """Whether ``instr`` is a constant whatever its operand, which XLA's algebraic
    simplifier makes one before folding: integer or pred ``xor(x, x)``, integer
    ``subtract(x, x)`` (x also through a copy or a reshape to its own shape);
    ``compare(x, x)`` of integers or pred, with ``type=TOTALORDER``, or LT/GT (false even
    for NaN)."""
    if len(instr.operands) != 2 or _through_copies(instr.operands[0]) is not \
            _through_copies(instr.operands[1]):
        return False
    if instr.opcode in ("xor", "subtract"):
        et = getattr(instr.shape, "element_type", None)
        return bool(et is not None and (et.is_integer or (et.is_pred and instr.opcode == "xor")))
    if instr.opcode == "compare":
        et = getattr(instr.operands[0].shape, "element_type", None)
        direction = str(instr.attrs.get("direction", ""))
        kind = str(instr.attrs.get("type", ""))
        return bool(et is not None and (et.is_integer or et.is_pred)) or \
            kind == "TOTALORDER" or direction in ("LT", "GT")
    return False



def operand_values(module, args, instrs: dict, known: dict | None = None,
                   with_result=frozenset(), observed=None) -> dict:
    """``{key: [operand values]}`` of ``instrs`` (``{(computation, name): instruction}``)
    in hloref's evaluation of ``module`` on ``args``, for those whose operands were all
    seen, each followed by the instruction's own value where its key is in
    ``with_result``; empty when there are none or the evaluation fails. ``known``:
    values already computed (``DiffReport.entry_values``): the module is evaluated again
    only when a wanted value is not among them. ``observed()``: where given, returns
    every instruction's value of one evaluation, shared by several callers."""
    if not instrs:
        return {}

    def names(key, instr):
        out = [(key[0], o.name) for o in instr.operands]
        return out + [key] if key in with_result else out

    wanted = {n for key, instr in instrs.items() for n in names(key, instr)}
    if known and wanted <= known.keys():
        seen = known  # read only
    elif observed is not None:
        seen = observed()
    else:
        seen = evaluate_all(module, args, wanted)
    out = {}
    for key, instr in instrs.items():
        values = [seen.get(n) for n in names(key, instr)]
        if all(v is not None for v in values):
            out[key] = values
    return out


def evaluate_all(module, args, wanted=None) -> dict:
    """hloref's last value of every instruction (of those in ``wanted``, a set of
    ``(computation, name)``, where given) in one evaluation of ``module`` on ``args``;
    empty where the evaluation fails."""
    seen: dict = {}

    def observe(comp, instr, value):
        if wanted is None or (comp.name, instr.name) in wanted:
            seen[(comp.name, instr.name)] = value

    try:
        from hloref.evaluator.interpreter import Interpreter
        Interpreter(module, observer=observe).run(list(args))
    except Exception:  # noqa: BLE001 - no evaluation, no explanation
        return {}
    return seen
