"""Plans shared by every ``Interpreter`` of one module object.

``hloref.evaluate`` makes a new ``Interpreter`` per call, and planning a computation
(liveness, topological order, last uses, attribute unpacking) cost more than the
arithmetic of a small module: about 65 µs of the 100 µs of a 64k-element ``add``
(``docs/benchmarks.md``, "Fixed costs"). The plan of a computation is kept here, keyed
by the module object (weakly: it goes with the module), and reused while the
computation's structure is unchanged.

A cached plan is checked against a ``fingerprint`` of the computation before each new
interpreter uses it: its instruction objects, root, and per instruction the opcode,
name, shape, operands, control predecessors, attribute values, literal and parameter
number. A module edited in place (``fuzz/reduce.py`` rewires operands and roots) is
therefore planned again. Objects are compared by identity first, then by value (equal
shapes and attributes plan alike); a comparison that fails (numpy literals) counts as a
change.
"""

from __future__ import annotations

import weakref

__all__ = ["fingerprint", "lookup", "store", "derived"]

#: id(module object) → (weak reference to it, {key: (computation, fingerprint, template)});
#: keyed by id because modules compare by value and are unhashable; the entry goes when
#: the module does
_CACHE: dict = {}


def fingerprint(comp) -> tuple:
    """Everything a computation's plan is derived from, as objects (not ids: the tuple
    keeps them alive, so a new object can never pass for a freed one)."""
    return (comp.root, tuple(
        (i, i.opcode, i.name, i.shape, tuple(i.operands), tuple(i.control_predecessors),
         tuple(i.attrs.items()), i.literal, i.parameter_number, i.async_wrapped_opcode)
        for i in comp.instructions))


def _same(a: tuple, b: tuple) -> bool:
    try:
        return bool(a == b)
    except Exception:  # e.g. two numpy literals compared by value: call it a change
        return False


def lookup(module, key, comp, print_: tuple):
    """The template stored for ``(module, key)`` if it was planned from ``comp`` with an
    equal fingerprint, else ``None``."""
    held = _CACHE.get(id(module))
    if held is None or held[0]() is not module:
        return None
    entry = held[1].get(key)
    if entry is None or entry[0] is not comp or not _same(entry[1], print_):
        return None
    return entry[2]


def store(module, key, comp, print_: tuple, template) -> None:
    held = _CACHE.get(id(module))
    if held is None or held[0]() is not module:
        ident = id(module)
        try:
            ref = weakref.ref(module, lambda _, ident=ident: _forget(ident))
        except TypeError:  # cannot be weakly referenced: not cached
            return
        held = _CACHE[ident] = (ref, {})
    held[1][key] = (comp, print_, template)


def _forget(ident: int) -> None:
    held = _CACHE.get(ident)
    if held is not None and held[0]() is None:
        del _CACHE[ident]


#: computation → {name: (fingerprint, value)}: facts derived from one computation
_DERIVED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def derived(computation, name: str, compute):
    """``compute(computation)``, remembered per computation object while its
    ``fingerprint`` is unchanged (e.g. whether a reducer is ``ROOT add(p0, p1)``:
    asked at every execution of the reduce, inside loops too)."""
    print_ = fingerprint(computation)
    facts = _DERIVED.get(computation)
    if facts is None:
        facts = _DERIVED[computation] = {}
    held = facts.get(name)
    if held is not None and _same(held[0], print_):
        return held[1]
    value = compute(computation)
    facts[name] = (print_, value)
    return value
