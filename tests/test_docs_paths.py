"""docs/architecture.md names only what exists: every path, every ``path:name``
(a top-level definition, or ``path:Class.member``), every dotted ``hloref.x.y`` name,
every "``NAME`` of/in ``path.py``", and every Python-looking identifier it quotes
(defined somewhere) is checked against the source tree,
read with ``ast`` (nothing is imported). Refactors that move or rename a file or a
function fail here until the map is updated.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "docs" / "architecture.md"]
SOURCE_DIRS = ("hloref", "evaluator", "gpu", "fuzz", "tests", "ci")
#: Installed package prefix -> folder (pyproject.toml ``package-dir``), longest first.
PACKAGE_DIRS = (("hloref.evaluator", "evaluator"), ("hloref.gpu", "gpu"),
                ("hloref.fuzz", "fuzz"), ("hloref", "hloref"))
#: Quoted identifiers that are not Python names of this tree, with the reason.
NOT_PYTHON = {
    "TopK": "a custom-call target name (a string in HLO text)",
}

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_PATH_TOKEN = re.compile(r"^\.?[\w.-]+(?:/[\w.-]*)*(?::" + _IDENT + r"(?:\." + _IDENT + r")?)?$")
_NAME_TOKEN = re.compile(r"^" + _IDENT + r"(?:\." + _IDENT + r")*$")
_FILE_IN_BLOCK = re.compile(r"(?<![\w/.-])([\w/]+/\{[\w,]+\}\.py|(?:[\w.-]+/)*(?:[\w.-]+\.py|[\w-]+/))")


def _definitions(tree: ast.Module) -> tuple[set[str], set[str], dict[str, set[str]]]:
    """The module's top-level names; names defined anywhere in it (functions at any
    depth, classes, assigned names at module and class level); each class's members."""
    names: set[str] = set()
    members: dict[str, set[str]] = {}

    def targets(body):
        out = set()
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.add(node.name)
            elif isinstance(node, ast.Assign):
                out |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                out.add(node.target.id)
        return out

    top = targets(tree.body)
    names |= top
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names.add(node.name)
            members.setdefault(node.name, set()).update(targets(node.body))
    return top, names, members


class Tree:
    def __init__(self):
        self.top: dict[Path, set[str]] = {}
        self.members: dict[Path, dict[str, set[str]]] = {}
        self.anywhere: set[str] = set()
        self.classes: dict[str, set[str]] = {}
        for folder in SOURCE_DIRS:
            for path in (ROOT / folder).rglob("*.py"):
                tree = ast.parse(path.read_text(encoding="utf-8"))
                top, names, members = _definitions(tree)
                self.top[path] = top
                self.members[path] = members
                self.anywhere |= names
                for cls, m in members.items():
                    self.classes.setdefault(cls, set()).update(m)

    def defines(self, path: Path, dotted: str) -> bool:
        first, _, rest = dotted.partition(".")
        if path not in self.top:
            return False
        if not rest:
            return first in self.top[path]
        return rest in self.members[path].get(first, set())


def _module_file(dotted: str) -> tuple[Path, str] | None:
    """``hloref.fuzz.compare.compare_values`` -> (fuzz/compare.py, "compare_values")."""
    for prefix, folder in PACKAGE_DIRS:
        if dotted == prefix or dotted.startswith(prefix + "."):
            parts = dotted[len(prefix):].lstrip(".").split(".") if dotted != prefix else []
            for cut in range(len(parts), -1, -1):
                base = ROOT / folder / Path(*parts[:cut]) if cut else ROOT / folder
                for candidate in (base.with_suffix(".py") if cut else None, base / "__init__.py"):
                    if candidate is not None and candidate.is_file():
                        return candidate, ".".join(parts[cut:])
            return None
    return None


def _exists(path_text: str) -> bool:
    """A path from the repository root, or (in a sentence about one folder, ``dot.py``
    of ``evaluator/``) from one of the source folders."""
    return any((ROOT / base / path_text).exists() for base in ("", *SOURCE_DIRS))


def _split(doc: Path) -> tuple[list[str], list[str]]:
    """Inline code spans outside fenced blocks, and the lines of fenced blocks."""
    spans, block_lines, inside = [], [], False
    for line in doc.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            inside = not inside
            continue
        if inside:
            block_lines.append(line)
        else:
            spans += re.findall(r"`([^`]+)`", line)
    return spans, block_lines


#: "`NAME` of `path.py`" / "`NAME` in `path.py`": NAME must be defined in that file.
_NAME_IN_FILE = re.compile(r"`(" + _IDENT + r")` (?:of|in) `([\w./-]+\.py)`")


def problems(doc: Path, tree: Tree) -> list[str]:
    spans, block_lines = _split(doc)
    bad = []
    for name, path_text in _NAME_IN_FILE.findall(doc.read_text(encoding="utf-8")):
        path = ROOT / path_text
        if path in tree.top and name not in tree.top[path] \
                and not any(name in m for m in tree.members[path].values()):
            bad.append(f"`{name}` of `{path_text}`: not defined there")
    for token in spans:
        if token in NOT_PYTHON:
            continue
        if "/" in token or re.search(r"\.(py|md|sh|yml|toml|hlo)(:|$)", token):
            if not _PATH_TOKEN.match(token):
                continue  # placeholders (<name>, *), commands with spaces
            path_text, _, name = token.partition(":")
            path = ROOT / path_text
            if name:  # path:name: the path is from the repository root
                if not path.is_file():
                    bad.append(f"{token}: no such file")
                elif not tree.defines(path, name):
                    bad.append(f"{token}: {path_text} does not define {name}")
            elif not _exists(path_text):
                bad.append(f"{token}: no such path")
        elif _NAME_TOKEN.match(token) and (token.startswith("hloref.")
                                           or re.search(r"[_A-Z.]", token)):
            if token.startswith("hloref.") or token == "hloref":
                found = _module_file(token)
                if found is None or (found[1] and not tree.defines(*found)):
                    bad.append(f"{token}: no such module or name")
            elif "." in token:
                cls, _, member = token.partition(".")
                if member not in tree.classes.get(cls, set()):
                    bad.append(f"{token}: no class {cls} with member {member}")
            elif token not in tree.anywhere:
                bad.append(f"{token}: defined nowhere in {', '.join(SOURCE_DIRS)}")
    for line in block_lines:
        for token in _FILE_IN_BLOCK.findall(line):
            expanded = [token]
            m = re.match(r"(.*)\{([\w,]+)\}(.*)", token)
            if m:
                expanded = [m.group(1) + part + m.group(3) for part in m.group(2).split(",")]
            for t in expanded:
                if not _exists(t):
                    bad.append(f"{t} (code block): no such file in the tree")
    return bad


@pytest.fixture(scope="module")
def tree():
    return Tree()


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_cited_path_and_name_exists(doc, tree):
    assert doc.exists()
    bad = problems(doc, tree)
    assert not bad, "\n".join(bad)


def test_the_checker_flags_what_does_not_exist(tmp_path, tree):
    doc = tmp_path / "doc.md"
    doc.write_text("`hloref/api.py:evaluate` `hloref/api.py:no_such_function`\n"
                   "`evaluator/nowhere.py` `hloref/nowhere.py:main` `Interpreter.run` `Interpreter.no_such_member`\n"
                   "`hloref.fuzz.compare.compare_values` `hloref.fuzz.compare.nothing`\n"
                   "`NoSuchName_anywhere` `topk` `OPS` of `hloref/api.py`\n"
                   "```\n  fuzz/  compare.py  nowhere_at_all.py  oracles/{xla,nope}.py\n```\n")
    assert sorted(problems(doc, tree)) == sorted([
        "hloref/api.py:no_such_function: hloref/api.py does not define no_such_function",
        "evaluator/nowhere.py: no such path",
        "hloref/nowhere.py:main: no such file",
        "Interpreter.no_such_member: no class Interpreter with member no_such_member",
        "hloref.fuzz.compare.nothing: no such module or name",
        "NoSuchName_anywhere: defined nowhere in " + ", ".join(SOURCE_DIRS),
        "`OPS` of `hloref/api.py`: not defined there",
        "nowhere_at_all.py (code block): no such file in the tree",
        "oracles/nope.py (code block): no such file in the tree",
    ])
