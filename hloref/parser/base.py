"""The bottom layer of the HLO parser: the reading state shared by every layer (a
``Scanner`` over the text, what the module layer collects while reading) and
``parse_all``, which turns any escaping exception into ``HloParseError``."""

from __future__ import annotations

from ..errors import HloParseError
from ..ir import Computation, Instruction
from ..lexer import Scanner


class BaseParser:
    def __init__(self, text: str, filename: str | None = None):
        if not isinstance(text, str):
            raise HloParseError(f"expected HLO text (str), got {type(text).__name__}",
                                filename=filename)
        self.s = Scanner(text, filename)
        self.filename = filename
        # (instruction, attr key, index or None, computation name, position) to resolve
        self.comp_refs: list[tuple[str, int]] = []
        #: computations written inline as attribute values (``to_apply={...}``)
        self.inline_comps: dict[str, Computation] = {}
        #: position of each instruction whose shape is inferred (error messages)
        self.positions: dict[int, int] = {}
        #: instructions created while reading the current one (nested operands,
        #: ``%x#0`` tuple-element operands), in the order they must precede it
        self.created: list[Instruction] = []
        self._nested_refs: list = []
        self.anon = 0

    def decl_name(self) -> str | None:
        """A declared name, which XLA also accepts as ``name:``."""
        n = self.s.name()
        if n is not None and self.s.peek_char() == ":":
            self.s.pos += 1
        return n


    def parse_all(self, fn):
        s = self.s
        try:
            value = fn()
            if not s.at_end():
                raise s.expected("end of input")
            return value
        except HloParseError:
            raise
        except RecursionError:
            raise s.error("input nested too deeply") from None
        except Exception as e:  # safety net: never leak another exception type
            raise s.error(f"internal parser error: {type(e).__name__}: {e}") from e

