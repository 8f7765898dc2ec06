"""The walk shared by the JAX and TF user-program translators (fuzz/user_jax.py,
fuzz/user_tf.py): one Python statement per entry instruction, in dependency order.

A translator subclass gives ``op(instr, args) -> str`` (the expression of one instruction
from its operands' variable names) and the program's frame (imports, decorator, how an
input literal and a constant are written). It raises :class:`Unexpressible` naming the
op or element type the API cannot write, and calls ``note`` when what it writes computes
the op's value by other HLO instructions than the module's (the API lowers it so), so
that the program does not reach the op itself.

Layouts are not written: the oracles compile through StableHLO, which drops them too.
"""

from __future__ import annotations

import keyword
import re

__all__ = ["Unexpressible", "Translator", "python_name", "leaf_array_shapes"]


class Unexpressible(Exception):
    """The user API cannot write the module; the message names the op or type."""


def python_name(name: str) -> str:
    """A Python identifier for an HLO instruction name (``count_leading_zeros.6`` ->
    ``count_leading_zeros_6``)."""
    text = re.sub(r"\W", "_", name)
    if not text or text[0].isdigit() or keyword.iskeyword(text):
        text = "v_" + text
    return text


def leaf_array_shapes(shape) -> list:
    from hloref.shapes import flatten_shape
    return list(flatten_shape(shape))


_RESERVED = {"jax", "jnp", "np", "lax", "tf", "ml_dtypes", "f", "result", "print"}


class Translator:
    """Writes the entry computation of ``module`` as a function ``f`` of its parameters,
    the inputs as literals, and ``result = f(...)`` then ``print(result)``."""

    api = ""

    def __init__(self, module, inputs: list):
        self.module = module
        self.inputs = list(inputs)
        self.notes: list[str] = []
        self._names: dict[int, str] = {}
        self._taken: set[str] = set(_RESERVED)

    # -- to be given by the API's translator -----------------------------------------

    def op(self, instr, args: list[str]) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def header(self) -> list[str]:  # pragma: no cover - abstract
        raise NotImplementedError

    def decorator(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def input_literal(self, value) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def constant(self, instr) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def prologue(self) -> list[str]:
        """Lines at the top of ``f`` (the API's conversions of its arguments)."""
        return []

    # -- shared ----------------------------------------------------------------------

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def var(self, instr) -> str:
        key = id(instr)
        if key not in self._names:
            base = python_name(instr.name)
            name, k = base, 2
            while name in self._taken:
                name, k = f"{base}_{k}", k + 1
            self._taken.add(name)
            self._names[key] = name
        return self._names[key]

    def order(self) -> list:
        """The entry's instructions the root depends on, operands first."""
        seen: set[int] = set()
        out: list = []
        stack = [(self.module.entry.root, False)]
        while stack:
            instr, done = stack.pop()
            if done:
                out.append(instr)
                continue
            if id(instr) in seen:
                continue
            seen.add(id(instr))
            stack.append((instr, True))
            for o in reversed(instr.operands):
                if id(o) not in seen:
                    stack.append((o, False))
        return out

    def statement(self, instr) -> str | None:
        if instr.opcode == "parameter":
            return None
        if instr.opcode == "constant":
            if instr.literal is None:
                raise Unexpressible(f"constant %{instr.name} has its value elided ({{...}})")
            return self.constant(instr)
        args = [self.var(o) for o in instr.operands]
        if instr.opcode == "tuple":
            return "(" + "".join(f"{a}, " for a in args).rstrip(" ") + ")"
        if instr.opcode == "get-tuple-element":
            return f"{args[0]}[{instr.attrs['index']}]"
        return self.op(instr, args)

    def code(self) -> str:
        entry = self.module.entry
        if self.module.replica_count * self.module.num_partitions > 1:
            raise Unexpressible("the module runs on several devices (replica_count/"
                                "num_partitions > 1)")
        params = [self.var(p) for p in entry.parameters]
        body = self.prologue()
        for instr in self.order():
            expr = self.statement(instr)
            if expr is not None:
                body.append(f"    {self.var(instr)} = {expr}")
        body.append(f"    return {self.var(entry.root)}")
        lines = self.header() + ["", "", self.decorator(), f"def f({', '.join(params)}):"]
        lines += body + [""]
        for name, value in zip(params, self.inputs):
            lines.append(f"{name} = {self.input_literal(value)}")
        lines += [f"result = f({', '.join(params)})", "print(result)"]
        return "\n".join(lines) + "\n"

    def computation(self, name: str):
        return self.module.computation(str(name))

    def binary_body(self, name: str) -> str | None:
        """The opcode of a computation that is one binary op of its two parameters
        (``p0 op p1`` or ``p1 op p0``), else None."""
        comp = self.computation(name)
        root = comp.root
        params = comp.parameters
        if len(params) != 2 or len(root.operands) != 2:
            return None
        if {id(o) for o in root.operands} != {id(p) for p in params}:
            return None
        return root.opcode

    def comparator(self, name: str) -> tuple[str, str] | None:
        """``(direction, type)`` of a sort comparator ``compare(p0, p1)``, else None."""
        comp = self.computation(name)
        root = comp.root
        params = comp.parameters
        if root.opcode != "compare" or len(params) < 2:
            return None
        if [id(o) for o in root.operands] != [id(params[0]), id(params[1])]:
            return None
        return str(root.attrs["direction"]), str(root.attrs.get("type", ""))
