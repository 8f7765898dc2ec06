"""The in-memory form of an HLO module: ``Module`` → ``Computation`` → ``Instruction``.

The IR is what the parser builds, the printer writes, the verifier checks and the
evaluator runs. It is plain data: instructions hold their operands as objects,
their attributes in a dict of typed values (``hloref.attrs``), and called
computations by name (``ComputationRef``), resolved through the module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

from .shapes import ProgramShape, Shape

__all__ = ["Instruction", "Computation", "Module", "ProgramShape"]


@dataclass(eq=False)
class Instruction:
    name: str
    opcode: str
    shape: Shape
    operands: list["Instruction"] = field(default_factory=list)
    #: Typed attributes keyed by their text name (``dimensions``, ``to_apply``...),
    #: in the order they were written.
    attrs: dict[str, Any] = field(default_factory=dict)
    #: ``constant``: the value (numpy array, or tuple of them for tuple constants);
    #: ``None`` when the text elides it as ``{...}``.
    literal: Any = None
    #: ``parameter``: its number.
    parameter_number: int | None = None
    control_predecessors: list["Instruction"] = field(default_factory=list)
    #: For async-wrapped ``X-start``/``X-update``/``X-done`` text: ``X``.
    async_wrapped_opcode: str | None = None
    #: 1-based line of the instruction in the parsed text, for error messages.
    line: int | None = None
    #: ``True`` when operands were written with their shapes (``f32[2] %x``); only
    #: affects printing.
    operands_with_shapes: bool = False

    def __repr__(self) -> str:
        return f"<Instruction %{self.name} = {self.opcode}>"

    def called_computation_names(self) -> list[str]:
        """Names of the computations this instruction calls, in attribute order."""
        from .attrs import ComputationRef
        names: list[str] = []
        for value in self.attrs.values():
            if isinstance(value, ComputationRef):
                names.append(str(value))
            elif isinstance(value, (list, tuple)):
                names.extend(str(v) for v in value if isinstance(v, ComputationRef))
        return names

    def structural_key(self) -> tuple:
        """Everything that defines the instruction, with operands by name."""
        return (
            self.name, self.opcode, self.shape, tuple(o.name for o in self.operands),
            tuple((k, _hashable(v)) for k, v in self.attrs.items()),
            _hashable(self.literal), self.parameter_number,
            tuple(c.name for c in self.control_predecessors), self.async_wrapped_opcode,
        )


def _hashable(value):
    if isinstance(value, np.ndarray):
        return ("ndarray", str(value.dtype), value.shape, value.tobytes())
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple((k, _hashable(v)) for k, v in value.items())
    return value


@dataclass(eq=False)
class Computation:
    name: str
    instructions: list[Instruction] = field(default_factory=list)
    root: Instruction | None = None
    is_entry: bool = False
    #: Other computation attributes (``execution_thread``), in text order.
    attrs: dict[str, Any] = field(default_factory=dict)
    #: ``True`` when the text carried a ``(p: shape, ...) -> shape`` signature.
    has_signature: bool = False

    def __repr__(self) -> str:
        return f"<Computation %{self.name}: {len(self.instructions)} instructions>"

    @property
    def parameters(self) -> list[Instruction]:
        """Parameter instructions ordered by parameter number."""
        params = [i for i in self.instructions if i.opcode == "parameter"]
        return sorted(params, key=lambda i: i.parameter_number)

    def instruction(self, name: str) -> Instruction:
        for instr in self.instructions:
            if instr.name == name:
                return instr
        raise KeyError(name)

    def structural_key(self) -> tuple:
        return (self.name, self.is_entry, self.root.name if self.root else None,
                tuple(i.structural_key() for i in self.instructions),
                tuple((k, _hashable(v)) for k, v in self.attrs.items()))


@dataclass(eq=False)
class Module:
    name: str
    computations: dict[str, Computation] = field(default_factory=dict)
    entry_name: str | None = None
    #: Header attributes after the name, in text order: typed where hloref reads
    #: them (``is_scheduled``: bool, ``replica_count``/``num_partitions``: int,
    #: ``entry_computation_layout``: ProgramShape), ``Raw`` text otherwise.
    attrs: dict[str, Any] = field(default_factory=dict)
    #: Sections XLA prints after the header that hloref does not interpret
    #: (``FileNames``, ``FunctionNames``, ``FileLocations``, ``StackFrames``), as
    #: ``(title, verbatim text of the section body)``.
    extra_sections: list[tuple[str, str]] = field(default_factory=list)
    #: Name of the file the module came from, if any (error messages).
    source_name: str | None = None

    def __repr__(self) -> str:
        return f"<Module {self.name}: {len(self.computations)} computations>"

    @property
    def entry(self) -> Computation:
        return self.computations[self.entry_name]

    def computation(self, name: str) -> Computation:
        return self.computations[name]

    def instructions(self) -> Iterator[tuple[Computation, Instruction]]:
        for comp in self.computations.values():
            for instr in comp.instructions:
                yield comp, instr

    @property
    def replica_count(self) -> int:
        return int(self.attrs.get("replica_count", 1))

    @property
    def num_partitions(self) -> int:
        return int(self.attrs.get("num_partitions", 1))

    def to_text(self) -> str:
        from .printer import module_to_text
        return module_to_text(self)

    def structural_key(self) -> tuple:
        return (self.name, self.entry_name,
                tuple((k, _hashable(v)) for k, v in self.attrs.items()),
                tuple(c.structural_key() for c in self.computations.values()),
                tuple(self.extra_sections))

    def __eq__(self, other) -> bool:
        return isinstance(other, Module) and self.structural_key() == other.structural_key()

    __hash__ = None  # type: ignore[assignment]
