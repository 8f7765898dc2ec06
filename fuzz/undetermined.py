"""Where the module and its inputs determine no single value: the ``undetermined``
records (``KnownClass`` of kind ``undetermined``). Each names its cause and the elements
concerned (``detail``) and, where it can, checks the part the text does determine: a
tied unstable sort must still give each row's multiset, and the same values outside the
tied groups; otherwise the difference is a mismatch after all.

The conditions come from ``fuzz/contract.py`` (unstable-sort ties, the default RNG
algorithm), read from one ``contract_breaches`` walk per case; the reducer classes
(non-associative reducers, non-identity inits) are in ``fuzz/known_gaps.py``. Elided
constants and loops still running at hloref's limit are seen where hloref stops
(verdict ``error`` in :class:`~fuzz.known_record.Case`, ``case.error``).
"""

from __future__ import annotations

import numpy as np

from .known_record import SIGNATURE, Case, KnownClass, leaves_of

__all__ = ["RECORDS", "elided_constants", "tied_sort_check"]

_CONTRACT = "the semantics (the text leaves it open)"


def _breaches(case: Case) -> list:
    """``contract.contract_breaches`` of the case's module and inputs (once per case)."""
    def walk():
        from .contract import contract_breaches
        try:
            return contract_breaches(case.module, list(case.args or []))
        except Exception:  # noqa: BLE001 - hloref cannot walk it: no condition seen
            return []
    if case.module is None or case.args is None:
        return []
    return case.shared("breaches", walk)


#: the opcode each contract kind read here is about (no such instruction: no walk)
_OPCODE = {"unstable-sort-ties": "sort", "rng-default-algorithm": "rng-bit-generator"}


def _of_kind(case: Case, kind: str) -> list:
    if not any(i.opcode == _OPCODE[kind] for _, i in case.instructions()):
        return []
    return [b for b in _breaches(case) if b.kind == kind]


# ---------------------------------------------------------------- unstable sort ties


def tied_sort_check(case: Case) -> tuple[bool, str]:
    """Whether the oracle's result is one hloref's tied unstable sort allows: where the
    sort is the entry's root, each row along the sorted dimension holds the same multiset
    of (key, values...) tuples, and every element outside the tied groups agrees bit for
    bit. Returns (held, what was checked)."""
    from .contract import unstable_tie_mask
    root = _sort_returned(case.module.entry.root)
    if root is None:
        return True, "not checked (the tied sort is not the entry's root)"
    ours = list(leaves_of(case.expected))
    theirs = list(leaves_of(case.actual))
    if not ours or len(ours) != len(theirs) or any(
            a.shape != b.shape or a.dtype != b.dtype for a, b in zip(ours, theirs)):
        return False, "the results' shapes differ"
    dim = int((root.attrs.get("dimensions") or [0])[0])
    value = tuple(ours) if len(ours) > 1 else ours[0]
    mask = unstable_tie_mask(case.module, root, value)
    if mask is None:
        return False, "hloref's output has no tied neighbours"
    moved = np.moveaxis(mask, dim, -1)
    tied = moved.copy()
    tied[..., 1:] |= moved[..., :-1]  # an element tied to the one before it
    rows_e = [np.moveaxis(x, dim, -1) for x in ours]
    rows_a = [np.moveaxis(x, dim, -1) for x in theirs]
    width = tied.shape[-1]
    for idx in np.ndindex(*tied.shape[:-1]):
        # a tied group is a run of positions each tied to the one before it; its elements
        # may come in any order, but only within the group's own positions
        start = 0
        for j in range(1, width + 1):
            if j < width and moved[idx + (j - 1,)]:
                continue
            group_e = sorted(tuple(r[idx + (i,)].tobytes() for r in rows_e)
                             for i in range(start, j))
            group_a = sorted(tuple(r[idx + (i,)].tobytes() for r in rows_a)
                             for i in range(start, j))
            if group_e != group_a:
                what = "tied group" if j - start > 1 else "element outside the tied groups"
                return False, f"the {what} at {idx + (start,)} holds other values"
            start = j
    n = int(np.count_nonzero(tied))
    return True, (f"checked: each tied group holds the same multiset of values in its own "
                  f"positions, and the {tied.size - n} elements outside the {n} tied ones "
                  f"agree")


def _sort_returned(root):
    """The sort whose result the entry returns whole: the root itself, or a tuple of its
    get-tuple-elements 0, 1, ... in order; else None."""
    if root.opcode == "sort":
        return root
    if root.opcode != "tuple" or not root.operands or any(
            o.opcode != "get-tuple-element" for o in root.operands):
        return None
    sources = {id(o.operands[0]) for o in root.operands}
    sort = root.operands[0].operands[0]
    indices = [o.attrs.get("index") for o in root.operands]
    if len(sources) != 1 or sort.opcode != "sort" or indices != list(range(len(indices))) \
            or len(indices) != len(sort.operands):
        return None
    return sort


def _sort_ties(case: Case) -> bool:
    return bool(_of_kind(case, "unstable-sort-ties")) and tied_sort_check(case)[0]


def _sort_ties_detail(case: Case) -> str:
    where = "; ".join(f"%{b.instruction}: {b.count} neighbour pairs tied, the first at {b.index}"
                      for b in _of_kind(case, "unstable-sort-ties"))
    return f"{where}; {tied_sort_check(case)[1]}"


# ---------------------------------------------------------------- rng


def _rng_instructions(case: Case) -> list:
    return [i for _, i in case.instructions() if i.opcode == "rng"]


def _rng_unfixed(case: Case) -> bool:
    return bool(_rng_instructions(case)) or bool(_of_kind(case, "rng-default-algorithm"))


def _rng_detail(case: Case) -> str:
    names = [f"%{i.name} (rng)" for i in _rng_instructions(case)] + \
        [f"%{b.instruction} (rng-bit-generator, rng_default)"
         for b in _of_kind(case, "rng-default-algorithm")]
    same = [a.shape == b.shape and a.dtype == b.dtype
            for a, b in zip(leaves_of(case.expected), leaves_of(case.actual))]
    checked = "checked: the results' shapes and types agree" if same and all(same) else \
        "the results' shapes or types differ"
    return f"the drawn values of {', '.join(names)} are the backend's; {checked}"


# ---------------------------------------------------------------- where hloref stops


def elided_constants(module) -> list:
    """The constants whose data the text elides (``constant({...})``)."""
    if module is None:
        return []
    return [i for c in module.computations.values() for i in c.instructions
            if i.opcode == "constant" and i.literal is None]


def _elided(case: Case) -> bool:
    return bool(elided_constants(case.module))


def _elided_detail(case: Case) -> str:
    return "the data of " + ", ".join(f"%{i.name}" for i in elided_constants(case.module)) + \
        " is elided ({...}): every value that reads it is open"


def _runaway_loop(case: Case) -> bool:
    return type(case.error).__name__ == "HloLimitError" and "while loop" in str(case.error)


def _loop_detail(case: Case) -> str:
    return f"{case.error}: a loop that does not end within hloref's limit has no value"


# ---------------------------------------------------------------- decompositions


def _decomposition(case: Case):
    """``decompositions.identities_hold`` of the culprit, a LAPACK custom call, on XLA's
    outputs run alone (once per case), or None."""
    def judge():
        from hloref.evaluator.custom_call_lapack import backend_char
        from .decompositions import identities_hold
        instr, c = case.culprit_instruction, case.culprit
        if instr is None or c.opcode != "custom-call":
            return None
        config = {k: backend_char(instr.attrs.get("backend_config"), k, d)
                  for k, d in (("uplo", "L"), ("mode", "A"), ("compute_left", "N"),
                               ("compute_right", "V"))}
        return identities_hold(str(instr.attrs.get("custom_call_target", "")), config,
                               list(c.operands), c.expected, c.actual)
    if case.culprit is None:
        return None
    return case.shared("decomposition", judge)


def _decomposition_held(case: Case) -> bool:
    found = _decomposition(case)
    return found is not None and found[0]


def _decomposition_detail(case: Case) -> str:
    c = case.culprit
    return f"%{c.name}'s answer on XLA:CPU: {_decomposition(case)[1]}"


_HLOREF_STOPS = frozenset({"error"})

RECORDS: tuple[KnownClass, ...] = (
    KnownClass(
        "decomposition-choices", "undetermined", "LAPACK (the custom call's routine)",
        "an eigen-, singular-value, Schur or QR decomposition has several right answers "
        "(eigenvector signs and phases, the basis of a repeated eigenvalue's space, the "
        "order of eigenvalues, Householder reflectors past a rank deficiency, any answer "
        "exact for a matrix within LAPACK's backward error), and a product of Householder "
        "reflectors (orgqr) is fixed only to its rounding bound: XLA's is judged by the "
        "identities that define it (fuzz/decompositions.py), and the outputs that follow "
        "from it are its choice",
        _decomposition_held, specificity=SIGNATURE, detail=_decomposition_detail),
    KnownClass(
        "unstable-sort-ties", "undetermined", _CONTRACT,
        "a sort with is_stable=false whose comparator calls elements equal that differ: "
        "their order is the implementation's (operation_semantics.md, Sort); the text "
        "still fixes each row's multiset and the elements outside the tied groups",
        _sort_ties, specificity=SIGNATURE, detail=_sort_ties_detail),
    KnownClass(
        "rng-state-unfixed", "undetermined", _CONTRACT,
        "rng (its way of drawing is implementation-defined) or rng-bit-generator with "
        "rng_default (a backend-specific algorithm): the text does not fix the values drawn",
        _rng_unfixed, specificity=SIGNATURE, detail=_rng_detail),
    KnownClass(
        "elided-constant", "undetermined", _CONTRACT,
        "a constant written constant({...}): the text does not hold its data",
        _elided, verdicts=_HLOREF_STOPS | {"mismatch"}, specificity=SIGNATURE,
        detail=_elided_detail),
    KnownClass(
        "loop-never-ends", "undetermined", _CONTRACT,
        "a while loop still running at hloref's iteration limit (Limits.max_while_iterations): "
        "a loop that never terminates determines no value",
        _runaway_loop, verdicts=_HLOREF_STOPS, specificity=SIGNATURE, detail=_loop_detail),
)
