"""Op properties: what the rest of hloref knows about an opcode beyond its catalogue row,
written once, each with its reason.

``hloref/opcodes.py`` holds one row per opcode (arity, family, kinds, groups). The
properties here are the facts that used to be hand-typed sets of opcode names next to
the code that read them (the envelope's exact ops, the reducer's vectorizable
combiners, ULP budgets, the generator's deliberate narrowing, ...). Every such set is
derived from here: ``tests/test_opcode_literals.py`` fails on a collection of three or
more opcode names anywhere else.

Format of the tables below: a property starts with a line ``[name] reason`` (the
reason continues on following lines that start with ``|``); then lines of opcodes,
each either ``opcode`` or ``opcode=value`` (a property with values maps each opcode to
its value as text; ``value_of`` converts it). Lines starting with ``#`` are comments.
The tables are split by the part of hloref that reads them, so that each part's facts
sit together; a property name is unique across all of them.
"""

from __future__ import annotations

from dataclasses import dataclass

from hloref.opcodes import CATALOGUE

__all__ = ["Property", "PROPERTIES", "opcodes_with", "values_of", "has_property"]


@dataclass(frozen=True)
class Property:
    name: str
    reason: str
    values: dict[str, str]          # opcode -> value text ("" for a plain set)
    table: str                      # which table below states it

    @property
    def opcodes(self) -> frozenset[str]:
        return frozenset(self.values)


#: Properties the evaluator and the GPU backend read.
_EVALUATOR = """
"""

#: Properties the verdict wing reads: comparison, known classes, reduction, strategies,
#: mutations, the user-program translations.
_VERDICT = """
"""

#: Properties the envelope (``fuzz/perturb.py`` and its parts) reads.
_ENVELOPE = """
"""


def _parse(table_name: str, text: str, out: dict[str, Property]) -> None:
    name = reason = None
    values: dict[str, str] = {}

    def close() -> None:
        if name is not None:
            out[name] = Property(name, " ".join(reason.split()), dict(values), table_name)

    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            close()
            end = line.index("]")
            name, reason, values = line[1:end], line[end + 1:], {}
            if name in out:
                raise ValueError(f"op property {name!r} is stated twice")
        elif line.startswith("|"):
            reason += " " + line[1:]
        else:
            if name is None:
                raise ValueError(f"{table_name}: opcodes before the first [property]: {line!r}")
            for word in line.split():
                opcode, _, value = word.partition("=")
                if opcode not in CATALOGUE:
                    raise ValueError(f"op property {name!r} names unknown opcode {opcode!r}")
                values[opcode] = value
    close()


PROPERTIES: dict[str, Property] = {}
for _table_name, _text in (("evaluator", _EVALUATOR), ("verdict", _VERDICT),
                           ("envelope", _ENVELOPE)):
    _parse(_table_name, _text, PROPERTIES)
del _table_name, _text


def opcodes_with(name: str) -> frozenset[str]:
    """The opcodes that have property ``name`` (KeyError for an unknown property)."""
    return PROPERTIES[name].opcodes


def has_property(opcode: str, name: str) -> bool:
    return opcode in PROPERTIES[name].values


def values_of(name: str, convert=str) -> dict[str, object]:
    """Opcode → value of property ``name``, each value passed through ``convert``."""
    return {op: convert(v) for op, v in PROPERTIES[name].values.items()}
