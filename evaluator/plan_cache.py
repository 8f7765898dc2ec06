"""Plans shared by every ``Interpreter`` of one module object.

``hloref.evaluate`` makes a new ``Interpreter`` per call, and planning a computation
(liveness, topological order, last uses, attribute unpacking) cost more than the
arithmetic of a small module: about 65 µs of the 100 µs of a 64k-element ``add``
(``docs/benchmarks.md``, "Fixed costs"). What is derived from a module (its plans, the
entry's parameter types, facts such as "this reducer is ``ROOT add(p0, p1)``") is kept
in a ``ModuleRecord``, keyed by the module object (weakly: it goes with the module).

An interpreter takes the record once, when it plans its first computation
(``record``): the record is checked against a ``snapshot`` of the whole module, and
replaced by an empty one if anything changed. A module edited in place (``fuzz/reduce.py``
rewires operands and roots) is therefore planned again; within one evaluation nothing
is checked again (a module is not edited while it runs). The snapshot holds the fields
of the module, of each computation (instruction list, root, attributes) and of each
instruction (opcode, name, shape, operands, control predecessors, attributes, literal,
parameter number...), their lists and dicts copied; the check compares the live
fields' dicts with it, with no Python step per field (about 0.3 µs per instruction):
objects compare by identity first, then by value (equal shapes and attributes plan
alike); a comparison that fails (numpy literals) counts as a change.
"""

from __future__ import annotations

import weakref

__all__ = ["ModuleRecord", "record", "snapshot", "unchanged", "derived"]


def _fields(obj) -> dict:
    """``obj``'s fields with its lists and dicts copied (one level: the objects in them
    are kept, not copied)."""
    fields = dict(vars(obj))
    for name, value in fields.items():
        kind = type(value)
        if kind is list or kind is dict:
            fields[name] = kind(value)
    return fields


def snapshot(comp) -> tuple:
    """Everything a computation's plan is derived from: its fields and its instructions'
    (``_fields``). It keeps the objects alive, so a new object can never pass for a
    freed one."""
    return _fields(comp), list(map(_fields, comp.instructions))


def unchanged(comp, snap: tuple) -> bool:
    """Whether ``comp`` is as ``snapshot`` saw it."""
    try:
        return bool(vars(comp) == snap[0] and list(map(vars, comp.instructions)) == snap[1])
    except Exception:  # e.g. two numpy literals compared by value: call it a change
        return False


def _module_snapshot(module) -> tuple:
    """``(the module's _fields, objects, their _fields)``, the objects being the
    module's computations and their instructions (not the module: the record must not
    keep it alive)."""
    comps = list(module.computations.values())
    objects = [*comps, *(i for c in comps for i in c.instructions)]
    return _fields(module), objects, list(map(_fields, objects))


def _module_unchanged(module, snap: tuple) -> bool:
    """The module's fields, then every recorded object's, compared with the snapshot's
    in one comparison. The recorded objects are the module's own while it is
    unchanged: equal module fields mean the same computation objects (compared by
    identity), equal computation fields the same instruction objects."""
    own, objects, fields = snap
    try:
        return bool(vars(module) == own and list(map(vars, objects)) == fields)
    except Exception:  # as in ``unchanged``
        return False


class ModuleRecord:
    """What is derived from one state of a module: ``plans`` (the interpreter's, by
    computation name, backend and op overrides), ``facts`` (by computation name and
    fact name) and ``derived`` (anything else the interpreter keeps: the entry's
    parameter types, whether runtime sizes are tracked)."""

    __slots__ = ("snap", "plans", "facts", "derived", "__weakref__")

    def __init__(self, snap):
        self.snap = snap
        self.plans: dict = {}
        self.facts: dict = {}
        self.derived: dict = {}

    def fact(self, computation, name: str, compute):
        """``compute(computation)`` for a computation of the recorded module, computed
        once per module state."""
        key = (computation.name, name)
        try:
            return self.facts[key]
        except KeyError:
            value = self.facts[key] = compute(computation)
            return value


#: id(module object) → (weak reference to it, its ModuleRecord); keyed by id because
#: modules compare by value and are unhashable; the entry goes when the module does
_CACHE: dict = {}


def record(module) -> ModuleRecord | None:
    """The record of ``module`` as it is now (a new, empty one if the module changed
    since the last), or ``None`` for an object that cannot be weakly referenced."""
    held = _CACHE.get(id(module))
    if held is not None and held[0]() is module and _module_unchanged(module, held[1].snap):
        return held[1]
    ident = id(module)
    try:
        ref = weakref.ref(module, lambda _, ident=ident: _forget(ident))
    except TypeError:  # cannot be weakly referenced: not cached
        return None
    fresh = ModuleRecord(_module_snapshot(module))
    _CACHE[ident] = (ref, fresh)
    return fresh


def _forget(ident: int) -> None:
    held = _CACHE.get(ident)
    if held is not None and held[0]() is None:
        del _CACHE[ident]


#: computation → {name: (snapshot, value)}: facts derived from one computation, for
#: callers without an interpreter's record
_DERIVED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def derived(computation, name: str, compute):
    """``compute(computation)``, remembered per computation object while it is
    ``unchanged`` (e.g. whether a reducer is ``ROOT add(p0, p1)``)."""
    facts = _DERIVED.get(computation)
    if facts is None:
        facts = _DERIVED[computation] = {}
    held = facts.get(name)
    if held is not None and unchanged(computation, held[0]):
        return held[1]
    snap = snapshot(computation)
    value = compute(computation)
    facts[name] = (snap, value)
    return value
