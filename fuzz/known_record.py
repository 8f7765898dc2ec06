"""What a known class is, and what its test reads: a ``KnownClass`` record (name, kind,
component, reason, stored finding, upstream link, predicate) and the ``Case`` its
predicate receives (the module, hloref's values, the culprit instruction and its operand
values, the two results). ``fuzz/known_classes.py`` holds the table and checks it.

The rule that decides between two records matching the same case, stated once
(:func:`rank`): an ``undetermined`` record first (no value is wrong where the text
determines none), then a ``gap`` (an implementation-defined answer is no bug), then an
``xla-difference``; within a kind the greater ``specificity`` the record declares; then
the name, so that the table's order never matters.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable

import numpy as np

__all__ = ["KnownClass", "Case", "KINDS", "SIGNATURE", "OPERATION", "NUMERIC", "FLUSH",
           "rank", "leaves_of"]

#: the kinds of record, in the order :func:`rank` prefers them
KINDS = ("undetermined", "gap", "xla-difference")

#: specificity levels a record declares (greater wins within a kind):
#: the signature of one pass's, folder's or emitter's fault, or of one attribute's effect
SIGNATURE = 3
#: a documented behaviour of an operation family (complex functions, accumulations)
OPERATION = 2
#: a numerical effect any instruction of a family can show (complex special values)
NUMERIC = 1
#: subnormals flushed: the broadest explanation, taken when nothing names it better
FLUSH = 0


@dataclass(frozen=True)
class KnownClass:
    """One known class: ``kind`` (``gap``: the answer is implementation-defined and XLA's
    differs from hloref's on purpose; ``xla-difference``: a known bug or limitation of
    XLA's, still a mismatch; ``undetermined``: the module and inputs determine no single
    value), the ``component`` whose behaviour it is, its ``reason``, the ``finding``
    stored under ``findings/`` (a path, or ``None``), the ``upstream`` thread (a URL, or
    ``None``), the ``verdicts`` it explains (``mismatch``, ``crash``), its
    ``specificity`` (:data:`SIGNATURE`...), and ``predicate(case) -> bool``."""

    name: str
    kind: str
    component: str
    reason: str
    predicate: Callable[["Case"], bool] = field(repr=False, compare=False)
    finding: str | None = None
    upstream: str | None = None
    verdicts: frozenset = frozenset({"mismatch"})
    specificity: int = SIGNATURE
    #: for ``undetermined``: ``detail(case) -> str`` naming the elements concerned and what
    #: the text still determines (checked)
    detail: Callable[["Case"], str] | None = field(default=None, repr=False, compare=False)

    def explain(self, case: "Case") -> str:
        """What the record says of ``case``: its ``detail`` where it has one, else its
        reason."""
        return self.detail(case) if self.detail is not None else self.reason

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"known class {self.name}: kind {self.kind!r} is not one of {KINDS}")


def rank(record: KnownClass) -> tuple:
    """The sort key of :func:`fuzz.known_classes.known_class`'s rule: smaller wins."""
    return (KINDS.index(record.kind), -record.specificity, record.name)


def leaves_of(value):
    """The arrays of a (nested tuple) value, depth first."""
    if isinstance(value, (tuple, list)):
        for v in value:
            yield from leaves_of(v)
    elif isinstance(value, np.ndarray):
        yield value
    elif isinstance(value, np.generic):
        yield np.asarray(value)


@dataclass
class Case:
    """What a predicate reads. ``verdict``: what the comparison found (``mismatch`` or
    ``crash``); ``module``: the parsed module (or ``None``); ``values``: hloref's value of
    every entry instruction, keyed ``(computation, name)``; ``args``: the inputs;
    ``report``: the ``DiffReport`` (or a stand-in with ``expected``, ``actual``,
    ``culprit``, ``message``); ``oracle``: ``xla`` or ``tf``."""

    verdict: str = "mismatch"
    module: object = None
    values: dict = field(default_factory=dict)
    args: list | None = None
    report: object = None
    oracle: str = "xla"
    #: the error hloref stopped with (verdict ``error``), or None
    error: object = None

    # ------------------------------------------------------------ the report's parts

    @property
    def expected(self):
        return getattr(self.report, "expected", None)

    @property
    def actual(self):
        return getattr(self.report, "actual", None)

    @property
    def message(self) -> str:
        return getattr(self.report, "message", "") or ""

    @property
    def stderr_tail(self) -> str:
        return getattr(getattr(self.report, "oracle_result", None), "stderr_tail", "") or ""

    @cached_property
    def culprit(self):
        """The innermost instruction outside its own envelope when run alone, or None."""
        c = getattr(self.report, "culprit", None)
        return c.innermost() if c is not None else None

    @cached_property
    def culprit_operands(self) -> list:
        """The culprit's operand arrays (hloref's values), leaf by leaf."""
        c = self.culprit
        return [x for o in (c.operands if c is not None else []) for x in leaves_of(o)]

    @cached_property
    def culprit_instruction(self):
        """The culprit as an ``Instruction`` (with its attributes and called computations):
        the module's own where the case has the module, else the root of the
        one-instruction module the culprit was run as (parsed once, here); ``None`` where
        there is neither."""
        c = self.culprit
        if c is None:
            return None
        comp = self.module.computations.get(getattr(c, "computation", None)) \
            if self.module is not None else None
        found = [i for i in comp.instructions if i.name == getattr(c, "name", None)] \
            if comp is not None else []
        if found and found[0].opcode == c.opcode:
            return found[0]
        isolated = self.isolated_module
        return isolated.entry.root if isolated is not None else None

    @cached_property
    def culprit_module(self):
        """The module that holds :attr:`culprit_instruction` (and its called
        computations), or None."""
        instr = self.culprit_instruction
        if instr is None:
            return None
        if self.module is not None and any(i is instr for _, i in self.instructions()):
            return self.module
        return self.isolated_module

    @cached_property
    def isolated_module(self):
        """The one-instruction module the culprit was run as, parsed, or None."""
        c = self.culprit
        try:
            from hloref import parse
            return parse(c.text) if c is not None and getattr(c, "text", "") else None
        except Exception:  # noqa: BLE001 - no module at hand: predicates see None
            return None

    # ------------------------------------------------------------ the module's parts

    def instructions(self):
        """``(computation, instruction)`` of every instruction of the module."""
        if self.module is None:
            return
        for comp in self.module.computations.values():
            for instr in comp.instructions:
                yield comp, instr

    def value_of(self, comp, instr):
        """hloref's value of ``instr`` (a constant's literal), or None where unknown."""
        if instr.opcode == "constant":
            return instr.literal
        return self.values.get((comp.name, instr.name))

    #: cache for predicates that share one costly analysis of the module (keyed by name)
    memo: dict = field(default_factory=dict, repr=False)

    def shared(self, key: str, compute: Callable[[], object]):
        """``compute()`` once per case: what several predicates read (the fixpoint of
        values constant folding evaluates, one evaluation of the module...)."""
        if key not in self.memo:
            self.memo[key] = compute()
        return self.memo[key]
