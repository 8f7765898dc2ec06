"""docs/architecture.md's "Add an opcode" says where a new opcode is written; this test
holds it to the code, so the list cannot silently rot.

The source (``hloref/``, ``evaluator/``, ``gpu/``, ``fuzz/``) is read with ``ast``: every
assignment whose value names three or more opcodes of the catalogue's ``elementwise``
group is a hand-typed collection a new elementwise opcode may have to join (the
catalogue ``hloref/opcodes.py`` itself holds its rows as one text, ``_OPS``, and the
derived groups are not literals); so is every op property of ``hloref/op_properties.py``
naming three or more (``hloref/op_properties.py:[name]``). The section has two tables, each row a collection as
``path:NAME`` (``NAME``: the assigned name at module level, else the top-level function
or class the assignment sits in):

* ``| collection | holds | except | if it is missing |``: the places a new elementwise
  opcode must join. ``holds`` names the catalogue groups whose every opcode the
  collection has, ``except`` the opcodes of those groups it leaves out (each must
  really be missing); a new opcode of those groups belongs there.
* ``| collection | what it names |``: collections of ops with one property, which a new
  opcode joins only if it has that property.

Both ways fail: a collection the code has and the doc does not name (derive it from the
catalogue, or name it in the doc), and a row whose collection is gone or whose
``holds``/``except`` no longer match (update the doc).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from hloref.opcodes import CATALOGUE, GROUPS

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
SOURCE_DIRS = ("hloref", "evaluator", "gpu", "fuzz")
ELEMENTWISE = GROUPS["elementwise"]


def _collections() -> dict[str, set[str]]:
    """``path:NAME`` -> the opcode names (of any group) its assignments hold."""
    found: dict[str, set[str]] = {}
    for folder in SOURCE_DIRS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            rel = path.relative_to(ROOT).as_posix()
            for top in tree.body:
                for node in ast.walk(top):
                    if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
                        continue
                    names = {n.value for n in ast.walk(node.value)
                             if isinstance(n, ast.Constant) and isinstance(n.value, str)}
                    if len(names & ELEMENTWISE) < 3:
                        continue
                    if node is top:
                        target = node.targets[0] if isinstance(node, ast.Assign) else node.target
                        if not isinstance(target, ast.Name):
                            continue
                        key = target.id
                    else:
                        key = top.name
                    found.setdefault(f"{rel}:{key}", set()).update(names & set(CATALOGUE))
    from hloref.op_properties import PROPERTIES
    for name, prop in PROPERTIES.items():
        if len(prop.opcodes & ELEMENTWISE) >= 3:
            found[f"hloref/op_properties.py:[{name}]"] = set(prop.opcodes)
    return found


def _section() -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("### Add an opcode")
    end = text.index("\n### ", start + 1)
    return text[start:end]


def _tables() -> tuple[list[list[str]], list[list[str]]]:
    """The rows of the must-join table and of the one-property table."""
    joins, properties, current = [], [], None
    for line in _section().splitlines():
        if not line.startswith("|"):
            current = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == "collection":
            current = joins if cells[1] == "holds" else properties
        elif current is not None and not set(cells[0]) <= set("-: "):
            current.append(cells)
    return joins, properties


def _ticked(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def test_the_doc_has_both_tables():
    joins, properties = _tables()
    assert joins and properties


def test_every_hand_typed_collection_of_elementwise_opcodes_is_in_the_doc():
    joins, properties = _tables()
    documented = {_ticked(row[0])[0] for row in joins + properties}
    missing = sorted(set(_collections()) - documented)
    assert not missing, ("collections of elementwise opcode names the 'Add an opcode' "
                         f"section of docs/architecture.md does not list: {missing}")


def test_every_collection_the_doc_lists_exists():
    joins, properties = _tables()
    documented = [_ticked(row[0])[0] for row in joins + properties]
    assert len(documented) == len(set(documented)), "a collection listed twice"
    gone = sorted(set(documented) - set(_collections()))
    assert not gone, f"listed in docs/architecture.md but not in the code: {gone}"


@pytest.mark.parametrize("row", _tables()[0], ids=lambda row: _ticked(row[0])[0])
def test_a_must_join_collection_holds_its_groups_but_the_listed_exceptions(row):
    key, holds, exceptions = _ticked(row[0])[0], _ticked(row[1]), set(_ticked(row[2]))
    assert holds, f"{key}: no catalogue group named"
    wanted = set().union(*(GROUPS[g] for g in holds))
    has = _collections()[key]
    assert exceptions <= wanted, f"{key}: exceptions outside its groups: {exceptions - wanted}"
    assert not (has & exceptions), f"{key} now holds {sorted(has & exceptions)}: update the doc"
    assert wanted - exceptions <= has, (f"{key} lacks {sorted(wanted - exceptions - has)} of "
                                        f"{'+'.join(holds)}: add them, or list them in the doc")


def test_every_elementwise_opcode_has_an_evaluator_function():
    """The one place every opcode needs besides its catalogue row: the CPU registry."""
    from hloref.evaluator.registry import load_all
    assert ELEMENTWISE <= set(load_all())


def _files_to_touch(groups: set[str]) -> set[str]:
    """The source files a new elementwise opcode of ``groups`` is written into: its
    catalogue row, its evaluator function (``evaluator/elementwise.py``, the family's
    module) and every must-join collection holding one of ``groups`` (the GPU's are
    optional)."""
    joins, _ = _tables()
    files = {"hloref/opcodes.py", "evaluator/elementwise.py"}
    for row in joins:
        path = _ticked(row[0])[0].split(":")[0]
        if set(_ticked(row[1])) & groups and not path.startswith("gpu/"):
            files.add(path)
    return files


def test_the_doc_counts_the_files_a_new_elementwise_opcode_touches():
    section = " ".join(_section().split())
    float_op = re.search(r"transcendental float op touches (\d+) source files", section)
    int_op = re.search(r"integer or bitwise op (\d+)", section)
    assert float_op and int_op, "the section no longer states the counts"
    transcendental = _files_to_touch({"unary", "elementwise", "transcendental"})
    integer = _files_to_touch({"unary", "elementwise"})
    assert int(float_op.group(1)) == len(transcendental), sorted(transcendental)
    assert int(int_op.group(1)) == len(integer), sorted(integer)
