"""Where the module and its inputs determine no single value: the ``undetermined``
records (``KnownClass`` of kind ``undetermined``). Each names its cause and the elements
concerned (``detail``) and, where it can, checks the part the text does determine: a
tied unstable sort's result must still be a valid result of that sort (each slice a
permutation of its rows, in the comparator's order: ``tie_order_valid``, which
``ci/conformance_judge.py`` calls too); otherwise the difference is a mismatch after all.

The conditions come from ``fuzz/contract.py`` (unstable-sort ties, the default RNG
algorithm), read from one ``contract_breaches`` walk per case; the reducer classes
(non-associative reducers, non-identity inits) are in ``fuzz/known_gaps.py``. Elided
constants, loops still running at hloref's limit and reads of a dynamic value's padding
inside the module (``HloUnsupportedError.reads_padding``) are seen where hloref stops
(verdict ``error`` in :class:`~fuzz.known_record.Case`, ``case.error``); collectives
naming devices the run does not have, in the module itself
(``fuzz/collective_domain.py``).
"""

from __future__ import annotations

import numpy as np

from .collective_domain import outside_domain
from .known_record import SIGNATURE, Case, KnownClass, leaves_of

__all__ = ["RECORDS", "comparator_fn", "elided_constants", "follows_choice",
           "sort_result_valid", "tie_order_valid", "tied_sort_check", "unstable_sorts"]

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


def unstable_sorts(module) -> list:
    """The entry's ``sort`` instructions without is_stable=true."""
    return [i for i in module.entry.instructions
            if i.opcode == "sort" and not i.attrs.get("is_stable")]


def comparator_fn(module, computation, limits=None):
    """``compare(*pairs) -> bool array``: hloref's evaluation of a sort comparator on
    arrays of pairs (lhs0, rhs0, lhs1, rhs1, ...), elementwise where the comparator is
    (``is_vectorizable``), else pair by pair (at most 200,000 pairs)."""
    from hloref.evaluator.interpreter import Interpreter
    from hloref.evaluator.reduce import is_vectorizable
    interp = Interpreter(module, limits=limits)
    vectorized = is_vectorizable(computation, module)

    def compare(*args):
        n = np.shape(args[0])[0] if np.ndim(args[0]) else 1
        if vectorized:
            return np.broadcast_to(np.asarray(interp.call(computation, list(args))), (n,)).astype(bool)
        if n > 200_000:
            raise ValueError(f"a comparator that is not elementwise on {n} pairs")
        return np.array([bool(np.asarray(interp.call(computation, [np.asarray(a[i]) for a in args])))
                         for i in range(n)], dtype=bool)
    return compare


def sort_result_valid(operands, result, dimension: int, compare) -> tuple[bool, str]:
    """Whether ``result`` (one array per operand) is a valid result of ``sort`` of
    ``operands`` along ``dimension`` with comparator ``compare`` when the sort need not
    be stable: in every slice along ``dimension`` (a row: the elements of all operands
    at one position), the result's rows are a permutation of the operands' rows, bit
    for bit, and no row is less than the one before it (``compare(next, prev)`` is
    false for every neighbour pair; for a strict weak ordering exactly the orders that
    differ from the stable sort only among equivalent rows). (ok, why)."""
    if len(operands) != len(result):
        return False, "a different number of outputs"
    for k, (x, y) in enumerate(zip(operands, result)):
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape or x.dtype != y.dtype:
            return False, f"output {k}: {y.dtype}{list(y.shape)} for {x.dtype}{list(x.shape)}"
    shape = np.shape(operands[0])
    n = shape[dimension] if shape else 1
    rows = int(np.prod(shape, dtype=np.int64)) // max(n, 1)
    if n <= 1 or rows == 0:
        same = all(np.array_equal(np.asarray(x).view(np.uint8), np.asarray(y).view(np.uint8))
                   for x, y in zip(operands, result))
        return same, "" if same else "a result differs from its only order"

    def flat(x):
        return np.ascontiguousarray(np.moveaxis(np.asarray(x), dimension, -1)).reshape(rows, n)

    def row_bytes(arrays):
        parts = [np.ascontiguousarray(flat(a)).view(np.uint8).reshape(rows, n, -1)
                 for a in arrays]
        b = np.ascontiguousarray(np.concatenate(parts, axis=2))
        return b.view(f"V{b.shape[2]}").reshape(rows, n)

    before, after = row_bytes(operands), row_bytes(result)
    bad = np.nonzero((np.sort(before, axis=1) != np.sort(after, axis=1)).any(axis=1))[0]
    if bad.size:
        return False, f"{bad.size} slice(s) whose rows are not a permutation of the input's"
    args = []
    for y in result:
        f = flat(y)
        args += [f[:, 1:].reshape(-1), f[:, :-1].reshape(-1)]  # compare(next, prev)
    out_of_order = np.asarray(compare(*args)).reshape(-1)
    if out_of_order.any():
        return False, f"{int(out_of_order.sum())} neighbour pair(s) out of the comparator's order"
    return True, f"{rows} slice(s) of {n}: a permutation of the input rows, in order"


def tie_order_valid(module, args, expected, limits=None):
    """(ok, why) when the root's outputs come straight from ``sort`` instructions without
    is_stable=true (the root is one, a get-tuple-element of one, or a tuple of those):
    XLA:CPU's outputs, with any output of such a sort the root does not return taken
    from hloref's, must be a valid result of that sort on hloref's operands
    (``sort_result_valid``, the comparator evaluated by hloref); then hloref evaluates
    the module with those sort results in place of its own, and the value must match
    XLA:CPU's within the ULP floor. None when no output comes straight from an
    unstable sort."""
    import hloref
    from .compare import compare_values
    from hloref.shapes import TupleShape
    unstable = {id(i) for i in unstable_sorts(module)}
    root = module.entry.root

    def origin(instr):
        if instr.opcode == "sort" and id(instr) in unstable and not isinstance(instr.shape, TupleShape):
            return (instr, 0)
        if instr.opcode == "get-tuple-element" and id(instr.operands[0]) in unstable:
            return (instr.operands[0], int(instr.attrs.get("index")))
        return None

    if root.opcode == "sort" and id(root) in unstable and isinstance(root.shape, TupleShape):
        origins = [(root, k) for k in range(len(root.operands))]
        leaves = list(expected) if isinstance(expected, (tuple, list)) else None
    elif root.opcode == "tuple":
        origins = [origin(o) for o in root.operands]
        leaves = list(expected) if isinstance(expected, (tuple, list)) else None
    else:
        origins, leaves = [origin(root)], [expected]
    if leaves is None or len(leaves) != len(origins) or not any(origins):
        return None
    visible: dict = {}
    for o, leaf in zip(origins, leaves):
        if o is not None:
            visible.setdefault(id(o[0]), {}).setdefault(o[1], []).append(np.asarray(leaf))
    verdicts: dict = {}

    def replace(comp, instr, operands, value, recompute):
        if comp is not module.entry or id(instr) not in visible:
            return value
        mine = list(value) if isinstance(value, (tuple, list)) else [value]
        theirs = []
        for k, m in enumerate(mine):
            got = visible[id(instr)].get(k)
            if not got:
                theirs.append(np.asarray(m))
                continue
            if any(g.shape != got[0].shape or g.dtype != got[0].dtype or g.tobytes() != got[0].tobytes()
                   for g in got[1:]):
                verdicts[id(instr)] = (False, f"two outputs of %{instr.name} differ")
                return value
            theirs.append(got[0])
        comp_fn = comparator_fn(module, module.computations[str(instr.attrs.get("to_apply"))],
                                limits)
        (d,) = tuple(instr.attrs.get("dimensions"))
        verdicts[id(instr)] = sort_result_valid([np.asarray(x) for x in operands], theirs, d, comp_fn)
        if not verdicts[id(instr)][0]:
            return value
        return tuple(theirs) if isinstance(value, (tuple, list)) else theirs[0]

    try:
        ours = hloref.evaluate(module, *args, limits=limits,
                               interpreter_options=lambda d: {"perturb": replace})
    except Exception as e:  # noqa: BLE001 - no judgement then
        return False, f"evaluation with XLA:CPU's sort results failed: {type(e).__name__}: {e}"
    if len(verdicts) != len(visible):
        return False, "a sort the root returns was not evaluated"
    for ok, why in verdicts.values():
        if not ok:
            return False, why
    plain = compare_values(expected, ours)
    if not plain.ok:
        return False, f"with XLA:CPU's sort results: {plain}"
    return True, "; ".join(why for _, why in verdicts.values())


def tied_sort_check(case: Case) -> tuple[bool, str]:
    """Whether XLA's result is one the tied unstable sort allows (:func:`tie_order_valid`
    on hloref's operands: a permutation of each slice's rows in the comparator's order,
    and with those sort results hloref's value of the entry is XLA's). Returns (held,
    what was checked); where no output comes straight from an unstable sort, (True,
    not checked)."""
    found = tie_order_valid(case.module, list(case.args or []), case.actual)
    if found is None:
        return True, "not checked (no output of the entry comes straight from the sort)"
    return found[0], ("checked: " if found[0] else "") + found[1]


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


# ---------------------------------------------------------------- collectives


def _collectives_outside(case: Case) -> list:
    return case.shared("outside-domain", lambda: outside_domain(case.module))


def _outside_domain(case: Case) -> bool:
    return bool(_collectives_outside(case))


def _domain_detail(case: Case) -> str:
    return "; ".join(why for _, why in _collectives_outside(case)) + \
        ": the spec's constraints on the groups do not hold, and no value is defined"


# ---------------------------------------------------------------- dynamic sizes


def _padded_region(case: Case):
    """XLA's value cut to hloref's runtime sizes (``dynamic_region.valid_region``), and
    whether that region is hloref's value within the ULP floor; None where no result is
    cut so."""
    def cut():
        from .compare import compare_values
        from .dynamic_region import valid_region
        if case.module is None or case.expected is None or case.actual is None:
            return None
        region = valid_region(case.module, case.actual, case.expected)
        return None if region is None else (region, compare_values(region, case.expected))
    return case.shared("padded-region", cut)


def _dynamic_padding(case: Case) -> bool:
    found = _padded_region(case)
    return found is not None and found[1].ok


def _padding_detail(case: Case) -> str:
    region, _ = _padded_region(case)
    sizes = ", ".join("x".join(map(str, np.shape(r))) for r in leaves_of(region))
    bounds = ", ".join("x".join(map(str, np.shape(a))) for a in leaves_of(case.actual))
    return (f"the entry's result has dynamic dimensions: XLA:CPU returns the bound-sized "
            f"buffer ({bounds}), the runtime-sized value first and then padding no text "
            f"defines; checked: its first elements, as the runtime sizes ({sizes}), are "
            f"hloref's value")


def _padding_read(case: Case) -> bool:
    return bool(getattr(case.error, "reads_padding", False))


def _padding_read_detail(case: Case) -> str:
    e = case.error
    return (f"%{e.instruction} ({e.opcode}) reads the padding of a bounded dynamic value: "
            f"{e.reason.split(': ', 1)[-1]}; the text defines no value there, hloref stops "
            f"and nothing is compared")


# ---------------------------------------------------------------- decompositions


def _answers(case: Case) -> list:
    """XLA's answers of the culprit to judge: the one it gave run alone, then, where it
    differs, the one the entry's outputs show: each output of the culprit that hloref's
    entry returns unchanged (a leaf of more than one element equal, bit for bit, to one of
    hloref's entry outputs) taken from XLA's entry output, the others from the run
    alone. XLA:CPU's LAPACK need not give the same answer twice (its threads: a Schur
    form of a 100 x 100 matrix differed between two runs of one program)."""
    c = case.culprit
    mine, theirs = list(leaves_of(case.expected)), list(leaves_of(case.actual))
    if len(mine) != len(theirs):
        return [c.actual]
    shown, changed = [], False
    for ours, alone in zip(leaves_of(c.expected), leaves_of(c.actual)):
        same = [t for m, t in zip(mine, theirs) if ours.size > 1 and m.shape == ours.shape
                and m.dtype == ours.dtype and m.tobytes() == ours.tobytes()
                and np.shape(t) == ours.shape]
        shown.append(np.asarray(same[0]) if same else alone)
        changed |= bool(same) and np.asarray(same[0]).tobytes() != np.asarray(alone).tobytes()
    if not changed:
        return [c.actual]
    return [c.actual, tuple(shown) if isinstance(c.actual, (tuple, list)) else shown[0]]


def _decomposition(case: Case):
    """Whether an answer of XLA's to the culprit, a LAPACK custom call (:func:`_answers`),
    satisfies ``decompositions.identities_hold`` and the outputs that follow are XLA's
    with it (:func:`follows_choice`): ``(held, words)`` (once per case), or None."""
    def judge():
        from types import SimpleNamespace
        from hloref.evaluator.custom_call_lapack import backend_char
        from .decompositions import identities_hold
        instr, c = case.culprit_instruction, case.culprit
        if instr is None or c.opcode != "custom-call":
            return None
        config = {k: backend_char(instr.attrs.get("backend_config"), k, d)
                  for k, d in (("uplo", "L"), ("mode", "A"), ("compute_left", "N"),
                               ("compute_right", "V"))}
        found = None
        for k, answer in enumerate(_answers(case)):
            which = "run alone" if k == 0 else "as the entry's outputs show it"
            held = identities_hold(str(instr.attrs.get("custom_call_target", "")), config,
                                   list(c.operands), c.expected, answer)
            if held is None:
                return None
            found = (False, f"%{c.name}'s answer on XLA:CPU ({which}): {held[1]}")
            if not held[0]:
                continue
            follows = None
            if case.module is not None and case.args is not None and case.actual is not None:
                follows = follows_choice(case.module, list(case.args), SimpleNamespace(
                    computation=c.computation, name=c.name, operands=c.operands,
                    actual=answer), case.actual)
            then = "the outputs that follow not checked (the instruction does not meet " \
                "those operands in the entry's evaluation)" if follows is None else follows[1]
            found = (follows is None or follows[0], f"{found[1]}; {then}")
            if found[0]:
                return found
        return found
    if case.culprit is None:
        return None
    return case.shared("decomposition", judge)


def _same_leaves(a, b) -> bool:
    x, y = list(leaves_of(a)), list(leaves_of(b))
    return len(x) == len(y) and all(
        np.shape(p) == np.shape(q) and np.asarray(p).dtype == np.asarray(q).dtype
        and np.asarray(p).tobytes() == np.asarray(q).tobytes() for p, q in zip(x, y))


def _in_place_of(theirs, value):
    """XLA's answer ``theirs`` in the structure and element types of hloref's ``value``."""
    if isinstance(value, (tuple, list)):
        return type(value)(np.asarray(t, dtype=np.asarray(v).dtype) for v, t in zip(value, theirs))
    return np.asarray(theirs, dtype=np.asarray(value).dtype)


def follows_choice(module, args, culprit, actual, policy=None):
    """Whether the outputs that follow from a decomposition are XLA's once its choice is
    aligned: hloref evaluates ``module`` on ``args`` with XLA's answer ``culprit.actual``
    in place of its own wherever the culprit instruction (``culprit.computation``,
    ``culprit.name``) meets the operands it was run alone on, and XLA's value ``actual``
    must lie within the ULP floor or the numerical envelope of that evaluation (its
    perturbed runs take XLA's answer at the same executions of the instruction, with the
    rounding freedom hloref's own answer gets there: XLA's LAPACK need not give the same
    bits twice; what follows is perturbed as usual). ``(held, words)``, or None where the instruction
    never meets those operands (not checked)."""
    from hloref.evaluator.interpreter import Interpreter
    from .compare import compare_values
    from .envelope import Envelope
    from .freedoms import EnvelopePolicy
    from .sampling import sample_program
    theirs, placed = culprit.actual, set()
    shapes = [np.shape(t) for t in leaves_of(theirs)]

    def run(hooks):
        options = hooks.interpreter_options(module)
        perturb, seen = options["perturb"], [0]

        def hook(comp, instr, operands, value, recompute):
            if comp.name == culprit.computation and instr.name == culprit.name:
                k, seen[0] = seen[0], seen[0] + 1
                if hooks.index is None and \
                        _same_leaves(list(operands), list(culprit.operands)) and \
                        [np.shape(v) for v in leaves_of(value)] == shapes:
                    placed.add(k)
                if k in placed:  # XLA's answer, perturbed as hloref's own would be
                    value = _in_place_of(theirs, value)
            return perturb(comp, instr, operands, value, recompute)
        options["perturb"] = hook
        return Interpreter(module, **options).run(list(args))

    policy = policy or EnvelopePolicy()
    try:
        runs = sample_program(run, policy)
    except Exception as exc:  # noqa: BLE001 - no evaluation with XLA's choice: a failure
        return False, f"hloref with XLA's answer in its place failed ({type(exc).__name__}: {exc})"
    if not placed:
        return None
    plain = compare_values(actual, runs.nominal)
    inside = plain if plain.ok else Envelope.of(runs, policy, module).check(actual)
    return inside.ok, ("with XLA's answer in its place, hloref's value of the entry is XLA's"
                       if plain.ok else "with XLA's answer in its place, XLA's value of the "
                       f"entry is {'inside' if inside.ok else 'outside'} hloref's envelope: "
                       f"{inside}")


def _decomposition_held(case: Case) -> bool:
    found = _decomposition(case)
    return found is not None and found[0]


def _decomposition_detail(case: Case) -> str:
    return _decomposition(case)[1]


_HLOREF_STOPS = frozenset({"error"})

RECORDS: tuple[KnownClass, ...] = (
    KnownClass(
        "decomposition-choices", "undetermined", "LAPACK (the custom call's routine)",
        "an eigen-, singular-value, Schur or QR decomposition has several right answers "
        "(eigenvector signs and phases, the basis of a repeated eigenvalue's space, the "
        "order of eigenvalues, Householder reflectors past a rank deficiency, any answer "
        "exact for a matrix within LAPACK's backward error); a tridiagonal solve is right "
        "for any matrix within its backward error, and a product of Householder "
        "reflectors (orgqr) is fixed only to its rounding bound: XLA's is judged by the "
        "identities that define it (fuzz/decompositions.py), and the outputs that follow "
        "from it are its choice",
        _decomposition_held, specificity=SIGNATURE, detail=_decomposition_detail),
    KnownClass(
        "dynamic-padding", "undetermined", _CONTRACT,
        "a result with bounded dynamic dimensions: past its runtime sizes the buffer holds "
        "padding the text does not define (XLA:CPU returns the bound-sized buffer, the "
        "runtime-sized value densely first); the region the sizes cover must be hloref's",
        _dynamic_padding, specificity=SIGNATURE, detail=_padding_detail),
    KnownClass(
        "dynamic-padding-read", "undetermined", _CONTRACT,
        "an instruction inside the module reads the padding of a bounded dynamic value "
        "(past its runtime size: a dynamic-slice window or a gather position past it, a "
        "result dimension the instruction declares static with fewer elements defined, a "
        "scatter whose updates are shorter at runtime than its indices): the text defines "
        "no value there (XLA:CPU returns whatever the buffer holds); hloref stops",
        _padding_read, verdicts=_HLOREF_STOPS, specificity=SIGNATURE,
        detail=_padding_read_detail),
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
        "collective-outside-domain", "undetermined", _CONTRACT,
        "a collective whose replica_groups or source_target_pairs name a device the run "
        "does not have (an id at or past replica_count, num_partitions or their product, "
        "which XLA's verifier lets through where that count is 1), or, for "
        "collective-broadcast and collective-reduce, name one twice: outside the op's "
        "domain in the StableHLO spec (0 <= replica_groups < N, is_unique), so the text "
        "defines no value (XLA:CPU returns the operand of such an all-reduce, zeros for "
        "such a collective-permute, or fails at run time; hloref stops)",
        _outside_domain, verdicts=_HLOREF_STOPS | {"mismatch"}, specificity=SIGNATURE,
        detail=_domain_detail),
    KnownClass(
        "loop-never-ends", "undetermined", _CONTRACT,
        "a while loop still running at hloref's iteration limit (Limits.max_while_iterations): "
        "a loop that never terminates determines no value",
        _runaway_loop, verdicts=_HLOREF_STOPS, specificity=SIGNATURE, detail=_loop_detail),
)
