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

from collections import Counter
from dataclasses import dataclass, field

from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

import hloref
from hloref.errors import HloError

from .corpus import Seed
from .mutation_graph import Editor
from .mutations import MUTATIONS, MutationContext

__all__ = ["Seed", "MutantStats", "mutants", "apply_mutation", "mutate_parsed"]


@dataclass
class MutantStats:
    """Mutations applied, not applicable, rejected by the verifier, and dropped for
    making the mutant larger than ``MutationContext.max_instructions``, by name."""

    applied: Counter = field(default_factory=Counter)
    not_applicable: Counter = field(default_factory=Counter)
    invalid: Counter = field(default_factory=Counter)
    too_large: Counter = field(default_factory=Counter)

    def to_json(self) -> dict:
        return {"applied": dict(self.applied), "not_applicable": dict(self.not_applicable),
                "invalid": dict(self.invalid), "too_large": dict(self.too_large)}


def _parse(text: str):
    return hloref.parse(text, verify=True)


def apply_mutation(draw, text: str, name: str, ctx: MutationContext,
                   stats: MutantStats | None = None) -> tuple[str, str | None]:
    """Apply mutation ``name`` to the module ``text``; ``(new text, description)``, or
    ``(text, None)`` when it did not apply or the verifier rejected the result."""
    new, desc, _ = mutate_parsed(draw, text, None, name, ctx, stats)
    return new, desc


def mutate_parsed(draw, text: str, module, name: str, ctx: MutationContext,
                  stats: MutantStats | None = None):
    """``apply_mutation`` on ``module``, the parsed ``text`` (``None``: parsed here), which
    the mutation edits in place: ``(new text, description, verified module of the new
    text)``. The module comes back ``None`` when the mutation did not apply (the text is
    then the old one and its module must be parsed again), so a chain of mutations
    parses each mutant once, its verification being the next mutation's start."""
    module = module if module is not None else _parse(text)
    module.attrs.pop("entry_computation_layout", None)  # the signature may change
    ed = Editor(module)
    try:
        desc = MUTATIONS[name](draw, ed, ctx)
    except (HloError, ValueError, KeyError, IndexError, TypeError):
        # a mutation that cannot build its instructions here (shape inference refused)
        if stats is not None:
            stats.invalid[name] += 1
        return text, None, None
    if desc is None:
        if stats is not None:
            stats.not_applicable[name] += 1
        return text, None, None
    new = module.to_text()
    try:
        verified = _parse(new)
    except HloError:
        if stats is not None:
            stats.invalid[name] += 1
        return text, None, None
    if ctx.max_instructions is not None and \
            sum(len(c.instructions) for c in verified.computations.values()) > ctx.max_instructions:
        if stats is not None:
            stats.too_large[name] += 1
        return text, None, None
    if stats is not None:
        stats.applied[name] += 1
    return new, desc, verified


def mutants(seeds, *, max_mutations: int = 4, kinds=None, weights=None, types=None,
            donors: bool = True, stats: MutantStats | None = None,
            max_instructions: int | None = None, max_splice: int = 80):
    """Modules made by mutating ``seeds`` (a non-empty list of ``Seed``; the list as it
    is when the strategy is made: the campaign makes one per Hypothesis run, with the
    mutants that reached new passes added).

    ``kinds``: the mutations to use (default all of ``MUTATIONS``); ``weights``: name →
    relative weight; ``types``: element types a retype may pick; ``donors``: whether
    ``splice`` may take subgraphs from the other seeds (of at most ``max_splice``
    instructions); ``stats``: counts what was applied and rejected;
    ``max_instructions``: a mutation that makes the mutant larger is dropped (XLA's
    compile and hloref's judgement cost about the same per instruction, so the size of
    the mutants sets a campaign's speed)."""
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
                          max_splice=max_splice, max_instructions=max_instructions)
    parsed: dict = {}

    def seed_module(s: Seed):
        if s.name not in parsed:
            parsed[s.name] = _parse(s.text)
        return parsed[s.name]

    # the seeds as they are now: seeds added later join the next strategy made (a
    # pool that changed between draws would make Hypothesis' replays flaky)
    pool = list(seeds)
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
            ctx.donors = [seed_module(pool[k])]
        else:
            ctx.donors = []
        text, module, done = seed.text, None, []
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
        if module is None:
            module = _parse(text)
        module.fuzz_hints = {}
        module.mutations = {"seed": seed.name, "mutations": done}
        return module

    return strategy()
