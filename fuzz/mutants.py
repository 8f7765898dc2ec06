"""Mutants of real programs as a Hypothesis strategy: ``mutants(seeds)`` draws a seed,
then one to ``max_mutations`` mutations (``fuzz/mutations.py``), each checked by
hloref's verifier; a mutation the verifier rejects is dropped (counted in
``MutantStats``) and the next one starts from the last valid module. Every choice is
a draw, so Hypothesis shrinks a mutant towards fewer mutations of the first seed and
keeps it in its example database like any other example.

A drawn module carries ``module.mutations`` (the seed's name and what each mutation
did) and empty ``fuzz_hints``.
"""

from __future__ import annotations

import copy
from collections import Counter, OrderedDict
from dataclasses import dataclass, field

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

import hloref
from hloref.errors import HloError

from .corpus import Seed
from .mutation_cost import SEQUENTIAL_LIMIT, STEP_LIMIT, judging_cost
from .mutation_graph import Editor
from .mutations import MUTATIONS, MutationContext

__all__ = ["Seed", "MutantStats", "mutants", "apply_mutation", "mutate_parsed", "donor_module"]


@dataclass
class MutantStats:
    """Mutations applied, not applicable, rejected by the verifier, and dropped for
    making the mutant larger than ``MutationContext.max_instructions`` or slower for
    hloref to judge than ``MutationContext.max_sequential_calls``, by name."""

    applied: Counter = field(default_factory=Counter)
    not_applicable: Counter = field(default_factory=Counter)
    invalid: Counter = field(default_factory=Counter)
    too_large: Counter = field(default_factory=Counter)
    too_slow: Counter = field(default_factory=Counter)

    def to_json(self) -> dict:
        return {"applied": dict(self.applied), "not_applicable": dict(self.not_applicable),
                "invalid": dict(self.invalid), "too_large": dict(self.too_large),
                "too_slow": dict(self.too_slow)}


def _parse(text: str):
    return hloref.parse(text, verify=True)


#: parsed seeds and donors by text, kept across the strategies a campaign makes (one
#: per Hypothesis run); mutations edit copies, a splice copies from its donor
_DONORS: OrderedDict = OrderedDict()
_DONORS_KEPT = 1024


def donor_module(text: str):
    """The verified module of ``text``, parsed once (the last ``_DONORS_KEPT`` kept)."""
    module = _DONORS.get(text)
    if module is None:
        module = _DONORS[text] = _parse(text)
        if len(_DONORS) > _DONORS_KEPT:
            _DONORS.popitem(last=False)
    else:
        _DONORS.move_to_end(text)
    return module


def _immutable(value) -> bool:
    """Strings, numbers and frozen dataclasses (shapes, windows, dimension numbers), and
    tuples of them: what a copy of a module may share with the original."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return True
    params = getattr(type(value), "__dataclass_params__", None)
    if params is not None:
        return params.frozen
    return isinstance(value, tuple) and all(_immutable(v) for v in value)


def _copy(module):
    """A deep copy of ``module`` that shares its immutable parts (shapes, attribute
    values): a mutation edits the copy, never the module (a seed parsed once)."""
    memo: dict = {}
    for _, instr in module.instructions():
        memo[id(instr.shape)] = instr.shape
        for value in instr.attrs.values():
            if _immutable(value):
                memo[id(value)] = value
    return copy.deepcopy(module, memo)


def apply_mutation(draw, text: str, name: str, ctx: MutationContext,
                   stats: MutantStats | None = None) -> tuple[str, str | None]:
    """Apply mutation ``name`` to the module ``text``; ``(new text, description)``, or
    ``(text, None)`` when it did not apply or the verifier rejected the result."""
    new, desc, _ = mutate_parsed(draw, text, None, name, ctx, stats)
    return new, desc


def mutate_parsed(draw, text: str, module, name: str, ctx: MutationContext,
                  stats: MutantStats | None = None):
    """``apply_mutation`` on ``module``, the verified module of ``text`` (``None``: parsed
    here), which is not changed: the mutation edits a copy. ``(new text, description,
    verified module of the new text)``, or ``(text, None, module)`` when the mutation did
    not apply or its result was dropped, so a chain of mutations parses each mutant once,
    its verification being the next mutation's start (a copy costs a fifth of a parse
    and its verification)."""
    module = module if module is not None else _parse(text)

    def dropped(why: str):
        if stats is not None:
            getattr(stats, why)[name] += 1
        return text, None, module
    work = _copy(module)
    work.attrs.pop("entry_computation_layout", None)  # the signature may change
    ed = Editor(work)
    try:
        desc = MUTATIONS[name](draw, ed, ctx)
    except (HloError, ValueError, KeyError, IndexError, TypeError):
        # a mutation that cannot build its instructions here (shape inference refused)
        return dropped("invalid")
    if desc is None:
        return dropped("not_applicable")
    # the size is the edited module's (the printed text parses to the same
    # instructions): a mutant too large is dropped before it is printed and parsed
    if ctx.max_instructions is not None and \
            sum(len(c.instructions) for c in work.computations.values()) > ctx.max_instructions:
        return dropped("too_large")
    new = work.to_text()
    try:
        verified = _parse(new)
    except HloError:
        return dropped("invalid")
    calls, steps = judging_cost(verified)
    if (ctx.max_sequential_calls is not None and calls > ctx.max_sequential_calls) or (
            ctx.max_instruction_steps is not None and steps > ctx.max_instruction_steps):
        return dropped("too_slow")
    if stats is not None:
        stats.applied[name] += 1
    return new, desc, verified


def mutants(seeds, *, max_mutations: int = 4, kinds=None, weights=None, types=None,
            donors: bool = True, stats: MutantStats | None = None,
            max_instructions: int | None = None, max_splice: int = 80,
            max_sequential_calls: int | None = SEQUENTIAL_LIMIT,
            max_instruction_steps: int | None = STEP_LIMIT):
    """Modules made by mutating ``seeds`` (a non-empty list of ``Seed``; the list as it
    is when the strategy is made: the campaign makes one per Hypothesis run, with the
    mutants that reached new passes added).

    ``kinds``: the mutations to use (default all of ``MUTATIONS``); ``weights``: name →
    relative weight; ``types``: element types a retype may pick; ``donors``: whether
    ``splice`` may take subgraphs from the other seeds (of at most ``max_splice``
    instructions); ``stats``: counts what was applied and rejected;
    ``max_instructions``: a mutation that makes the mutant larger is dropped (XLA's
    compile and hloref's judgement cost about the same per instruction, so the size of
    the mutants sets a campaign's speed); ``max_sequential_calls``: a mutation after
    which hloref would call a computation element by element more often than this
    (``fuzz/mutation_cost.py``) is dropped, and so is one after which it would run more
    than ``max_instruction_steps`` instructions (loops counted per trip; ``None``: no
    limit)."""
    if not seeds:
        raise InvalidArgument("mutants needs at least one seed")
    kinds = list(kinds or MUTATIONS)
    bad = [k for k in kinds if k not in MUTATIONS]
    if bad:
        raise InvalidArgument(f"unknown mutations {bad}; known: {sorted(MUTATIONS)}")
    if not isinstance(max_mutations, int) or max_mutations < 0:
        raise InvalidArgument(f"max_mutations={max_mutations!r} must be an integer >= 0")
    weights = dict(weights or {})
    # heaviest first: Hypothesis shrinks towards index 0
    kinds.sort(key=lambda k: (-weights.get(k, 1.0), k))
    scale = [max(0, int(round(10 * weights.get(k, 1.0)))) for k in kinds]
    if sum(scale) <= 0:
        raise InvalidArgument("every mutation has weight 0")
    if max_instructions is not None and max_instructions < 1:
        raise InvalidArgument(f"max_instructions={max_instructions!r} must be >= 1")
    ctx = MutationContext(**({"types": tuple(types)} if types else {}),
                          max_splice=max_splice, max_instructions=max_instructions,
                          max_sequential_calls=max_sequential_calls,
                          max_instruction_steps=max_instruction_steps)

    # the seeds as they are now: seeds added later join the next strategy made (a
    # pool that changed between draws would make Hypothesis' replays flaky); smallest
    # first, as Hypothesis draws the index 0 far more often than any other and
    # shrinks towards it
    pool = sorted(seeds, key=lambda s: len(s.text))
    cum, total = [], 0
    for s in pool:
        total += max(1, int(round(10 * s.weight)))
        cum.append(total)

    @st.composite
    def strategy(draw):
        r = draw(st.integers(0, total - 1))
        seed = pool[next(k for k, c in enumerate(cum) if r < c)]
        if donors and len(pool) > 1:
            k = draw(st.integers(0, len(pool) - 1))
            ctx.donors = [donor_module(pool[k].text)]
        else:
            ctx.donors = []
        # the seed's module is shared (parsed once, never edited: mutations edit copies)
        text, module, done = seed.text, donor_module(seed.text), []
        for _ in range(draw(st.integers(1 if max_mutations else 0, max_mutations))):
            r = draw(st.integers(0, sum(scale) - 1))
            acc = 0
            for name, w in zip(kinds, scale):
                acc += w
                if r < acc:
                    break
            text, desc, module = mutate_parsed(draw, text, module, name, ctx, stats)
            if desc:
                done.append(f"{name}: {desc}")
        if not done:  # the seed itself: the campaign gets its own copy
            module = _copy(module)
        module.fuzz_hints = {}
        module.mutations = {"seed": seed.name, "mutations": done}
        return module

    return strategy()
