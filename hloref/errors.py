"""Typed errors. Every error a user can cause is one of these; the CLI prints them
as one message (exit status 2), never a traceback."""

from __future__ import annotations


class HloError(Exception):
    """Base class of every error hloref raises on purpose."""


class HloParseError(HloError):
    """Malformed HLO text: carries line, column, the source line and a caret."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None,
                 source_line: str | None = None, filename: str | None = None):
        self.message = message
        self.line = line
        self.column = column
        self.source_line = source_line
        self.filename = filename
        super().__init__(self._format())

    def _format(self) -> str:
        where = self.filename or "<text>"
        if self.line is None:
            return f"{where}: {self.message}"
        text = f"{where}:{self.line}:{self.column}: {self.message}"
        if self.source_line is not None:
            caret = " " * max(0, (self.column or 1) - 1) + "^"
            text += f"\n  {self.source_line}\n  {caret}"
        return text


class HloVerifyError(HloError):
    """Well-formed text that breaks a constraint: names the instruction and the constraint."""

    def __init__(self, message: str, instruction: str | None = None, computation: str | None = None,
                 line: int | None = None, source_line: str | None = None):
        self.message = message
        self.instruction = instruction
        self.computation = computation
        self.line = line
        self.source_line = source_line
        where = []
        if computation:
            where.append(f"computation {computation}")
        if instruction:
            where.append(f"instruction %{instruction}")
        if line is not None:
            where.append(f"line {line}")
        prefix = (", ".join(where) + ": ") if where else ""
        text = prefix + message
        if source_line:
            text += f"\n  {source_line.strip()}"
        super().__init__(text)


class HloUnsupportedError(HloError):
    """An opcode, element type or attribute that a backend does not evaluate.
    ``reads_padding``: the op would read the padding of a bounded dynamic value, which no
    text defines (the ``dynamic-padding-read`` undetermined record reads it)."""

    def __init__(self, opcode: str, backend: str = "cpu", reason: str = "not implemented",
                 instruction: str | None = None, *, reads_padding: bool = False):
        self.opcode = opcode
        self.backend = backend
        self.reason = reason
        self.instruction = instruction
        self.reads_padding = reads_padding
        where = f" (instruction %{instruction})" if instruction else ""
        super().__init__(f"opcode '{opcode}'{where} is not supported by the {backend} backend: {reason}")


class HloEvalError(HloError):
    """Evaluation failed: bad arguments, elided constant data, and so on."""

    def __init__(self, message: str, instruction: str | None = None):
        self.instruction = instruction
        super().__init__(f"instruction %{instruction}: {message}" if instruction else message)


class HloLimitError(HloEvalError):
    """A configured limit (memory budget, while-loop iterations) would be exceeded."""
