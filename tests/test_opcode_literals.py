"""No collection of opcode names outside the op catalogue.

What hloref knows about an opcode is written once: its row in ``hloref/opcodes.py``
(arity, family, kinds, groups) or a property in ``hloref/op_properties.py``, each with
its reason. Code derives its sets from there (``GROUPS``, ``opcodes_with``,
``values_of``). This test reads every module of ``hloref/``, ``evaluator/``, ``gpu/``,
``fuzz/``, ``ci/`` and ``benchmarks/`` (the two scripts folders too: a set typed in a
CI script drifts from the catalogue as one in the package does) and fails on a
collection of three or more opcode names anywhere else:

* a set, tuple or list display, or the keys of a dict display (``frozenset({...})`` is a
  set display inside a call);
* a split string: ``"a b c".split()`` (any arguments to ``split``).

Two or fewer names stay allowed: ``op in ("call", "map")`` reads as code, not as a
property.

**Implementation tables are not properties.** A dict keyed by opcodes whose values
implement them (``{"add": np.add, ...}``) is the code itself, kept next to its code
(``evaluator/combiners.py``'s ``COMBINERS``, the ufunc tables of
``evaluator/elementwise.py`` and ``gpu/``). The rule that tells one apart: the dict
display is the value of a module-level assignment (or a value, at any depth, of a dict
display that is), and at import time every value of that dict is *callable*, or a tuple
or dataclass instance each of whose fields is callable or None. So no fact hides in such
a table as a constant: an identity element, a tolerance, a flag is a callable's result
or a property, never a value typed beside the function.

``ALLOWED`` lists files that still hold such collections, with who removes them; it is
to be empty. A file listed there that holds none any more fails too, so the list only
shrinks.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
from pathlib import Path

import pytest

from hloref.opcodes import ALL_OPCODES

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("hloref", "evaluator", "gpu", "fuzz", "ci", "benchmarks")
#: where opcode names are written down
CATALOGUE_FILES = ("hloref/opcodes.py", "hloref/op_properties.py")
#: the importable name of each package folder (for implementation tables)
PACKAGES = {"hloref": "hloref", "evaluator": "hloref.evaluator", "gpu": "hloref.gpu",
            "fuzz": "hloref.fuzz"}
OPCODES = frozenset(ALL_OPCODES)
LEAST = 3

#: Files still holding collections of opcode names, and who moves them (to be empty).
ALLOWED: dict[str, str] = {}


@dataclasses.dataclass(frozen=True)
class Found:
    path: str
    line: int
    names: tuple[str, ...]
    #: for a dict display inside a module-level assignment: (variable, key path)
    table: tuple[str, tuple] | None = None

    def __str__(self) -> str:
        shown = ", ".join(self.names[:4]) + (", ..." if len(self.names) > 4 else "")
        return f"{self.path}:{self.line}: {len(self.names)} opcode names ({shown})"


def _names(nodes) -> tuple[str, ...]:
    return tuple(n.value for n in nodes
                 if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in OPCODES)


def _split_words(node: ast.Call) -> list[str] | None:
    """The words of ``"..." .split(...)`` (None if ``node`` is not one)."""
    f = node.func
    if not (isinstance(f, ast.Attribute) and f.attr == "split" and isinstance(f.value, ast.Constant)
            and isinstance(f.value.value, str)):
        return None
    args = [a.value for a in node.args if isinstance(a, ast.Constant)]
    if len(args) != len(node.args) or node.keywords:
        return f.value.value.split()
    return f.value.value.split(*args)


def _tables(tree: ast.Module) -> dict[int, tuple[str, tuple]]:
    """id(dict display) → (module-level variable, key path) for the dict displays that
    are module-level assignments' values or nested values of those."""
    out: dict[int, tuple[str, tuple]] = {}

    def walk(node, var, path):
        if isinstance(node, ast.Dict):
            out[id(node)] = (var, path)
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant):
                    walk(v, var, path + (k.value,))

    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and \
                isinstance(stmt.targets[0], ast.Name):
            walk(stmt.value, stmt.targets[0].id, ())
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value:
            walk(stmt.value, stmt.target.id, ())
    return out


def scan_source(text: str, path: str = "<text>") -> list[Found]:
    """Every collection of ``LEAST`` or more opcode names in ``text``."""
    tree = ast.parse(text)
    tables = _tables(tree)
    found = []
    for node in ast.walk(tree):
        table = None
        if isinstance(node, (ast.Set, ast.Tuple, ast.List)):
            names = _names(node.elts)
        elif isinstance(node, ast.Dict):
            names = _names([k for k in node.keys if k is not None])
            table = tables.get(id(node))
        elif isinstance(node, ast.Call):
            words = _split_words(node)
            names = tuple(w for w in words if w in OPCODES) if words else ()
        else:
            continue
        if len(names) >= LEAST:
            found.append(Found(path, node.lineno, names, table))
    return sorted(found, key=lambda f: f.line)


def _implementation(value) -> bool:
    """Callable, or a tuple/dataclass instance of callables (None allowed)."""
    if callable(value):
        return True
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = [getattr(value, f.name) for f in dataclasses.fields(value)]
    elif isinstance(value, tuple):
        fields = list(value)
    else:
        return False
    return bool(fields) and all(f is None or callable(f) for f in fields) and \
        any(callable(f) for f in fields)


def is_implementation_table(found: Found) -> bool:
    """Whether ``found`` is a module-level dict whose every value implements its key."""
    if found.table is None:
        return False
    folder, _, rest = found.path.partition("/")
    if folder in PACKAGES:
        dotted = ".".join([PACKAGES[folder], *Path(rest).with_suffix("").parts])
        module = importlib.import_module(dotted.removesuffix(".__init__"))
    else:  # a script of ci/ or benchmarks/: loaded from its file, its folder importable
        module = _script(ROOT / found.path)
    obj = getattr(module, found.table[0])
    for key in found.table[1]:
        obj = obj[key]
    return isinstance(obj, dict) and all(_implementation(v) for v in obj.values())


def _script(path: Path):
    """The script at ``path`` imported as a module (its folder on sys.path, as when it
    runs), once."""
    import importlib.util
    import sys
    name = "_opcode_literals_" + "_".join(path.relative_to(ROOT).with_suffix("").parts)
    if name not in sys.modules:
        sys.path.insert(0, str(path.parent))
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def _files():
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel not in CATALOGUE_FILES:
                yield rel, path


@pytest.fixture(scope="module")
def collections() -> list[Found]:
    out = []
    for rel, path in _files():
        out += [f for f in scan_source(path.read_text(encoding="utf-8"), rel)
                if not is_implementation_table(f)]
    return out


def test_the_scanner_finds_each_form():
    text = '''
A = ("add", "multiply", "maximum")
B = frozenset({"add", "subtract", "negate"})
C = "sine cosine tan".split()
D = {"abs": 1, "real": 2, "imag": 3}
def f(op):
    return op in ["log", "sqrt", "rsqrt"]
E = ("add", "multiply")
F = "not an opcode list".split()
'''
    found = scan_source(text)
    assert [f.line for f in found] == [2, 3, 4, 5, 7]
    assert found[2].names == ("sine", "cosine", "tan")
    assert found[3].table == ("D", ())


def test_implementation_rule():
    import numpy as np

    @dataclasses.dataclass(frozen=True)
    class Impl:
        fn: object
        other: object

    assert _implementation(np.add) and _implementation((np.exp, None))
    assert _implementation(Impl(np.add, len))
    assert not _implementation(0) and not _implementation((np.add, -0.0))
    assert not _implementation(Impl(np.add, 1.0)) and not _implementation((None, None))


def test_a_dict_of_constants_is_a_property_not_a_table():
    # evaluator/combiners.py's COMBINERS is a table; the same keys mapping to identity
    # constants (what evaluator/windows.py once had) are a property typed in code
    (found,) = [f for f in scan_source((ROOT / "evaluator/combiners.py").read_text(),
                                       "evaluator/combiners.py")]
    assert is_implementation_table(found)
    (constants,) = scan_source('X = {"add": 0, "multiply": 1, "and": -1}', "evaluator/x.py")
    assert constants.table == ("X", ())  # a module-level dict display, but its values
    assert not any(_implementation(v) for v in (0, 1, -1))  # are facts, not code


def test_no_opcode_collections_outside_the_catalogue(collections):
    new = [str(f) for f in collections if f.path not in ALLOWED]
    assert not new, ("collections of opcode names outside hloref/opcodes.py and "
                     "hloref/op_properties.py (state the property there, with its reason, "
                     "and derive the set):\n" + "\n".join(new))


def test_the_allow_list_only_shrinks(collections):
    holding = {f.path for f in collections}
    stale = sorted(set(ALLOWED) - holding)
    assert not stale, f"files in ALLOWED that hold no collection any more (remove them): {stale}"


def test_tables_keyed_like_a_property_agree_with_it():
    """An implementation table whose keys restate a property or another table holds
    the same opcodes: the GPU's complex-to-real functions are the complex-to-component
    ops, and every combiner the evaluator applies with numpy has a GPU reduce kernel
    on integers and preds."""
    from hloref.evaluator.combiners import COMBINERS
    from hloref.gpu.complex_elementwise import TO_REAL
    from hloref.gpu.reduce import combiner
    from hloref.op_properties import opcodes_with
    from hloref.types import ELEMENT_TYPES
    assert set(TO_REAL) == opcodes_with("complex-to-component")
    for kind in COMBINERS:
        for et in ("s32", "u8", "pred"):
            op, widen = combiner(kind, ELEMENT_TYPES[et])
            assert callable(op) and callable(widen)
