"""Character-level scanner for HLO text.

HLO's tokens depend on context (``3x3`` is one token after ``size=``,
``b01f_01io->b01f`` after ``dim_labels=``, ``[2,2]<=[4]`` after
``replica_groups=``), so the parser drives a ``Scanner`` that reads the token it
expects at the current position instead of a context-free token stream. The
scanner skips whitespace and ``/* ... */`` and ``// ...`` comments, reads
identifiers, names, numbers and strings, and reports errors as
``HloParseError`` with the 1-based line and column of the offending text.
"""

from __future__ import annotations

import bisect
import re

from .errors import HloParseError

__all__ = ["Scanner", "IDENT_RE", "NAME_RE", "NUMBER_RE", "INT_RE", "unescape", "escape"]

#: Identifier: opcodes, attribute names, bare instruction names, type names.
IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")
#: What may follow ``%`` in a name.
NAME_RE = re.compile(r"[A-Za-z0-9_.\-]+")
#: A decimal number (integer or float).
NUMBER_RE = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
INT_RE = re.compile(r"-?\d+")
_WS_RE = re.compile(r"(?:\s+|/\*.*?\*/|//[^\n]*)+", re.S)

_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'",
                   "a": "\a", "b": "\b", "f": "\f", "v": "\v", "?": "?"}


def unescape(body: str) -> str:
    """C-style unescape of the inside of a string literal (``absl::CUnescape``)."""
    if "\\" not in body:
        return body
    out = bytearray()
    i = 0
    n = len(body)
    while i < n:
        c = body[i]
        if c != "\\":
            out += c.encode("utf-8")
            i += 1
            continue
        i += 1
        if i >= n:
            raise ValueError("string ends with a backslash")
        c = body[i]
        if c in _SIMPLE_ESCAPES:
            out += _SIMPLE_ESCAPES[c].encode()
            i += 1
        elif c in "01234567":
            j = i
            while j < n and j < i + 3 and body[j] in "01234567":
                j += 1
            v = int(body[i:j], 8)
            if v > 255:
                raise ValueError("octal escape out of range")
            out.append(v)
            i = j
        elif c == "x":
            j = i + 1
            while j < n and body[j] in "0123456789abcdefABCDEF":
                j += 1
            if j == i + 1:
                raise ValueError("\\x with no hex digits")
            v = int(body[i + 1:j], 16)
            if v > 255:
                raise ValueError("hex escape out of range")
            out.append(v)
            i = j
        else:
            raise ValueError(f"unknown escape \\{c}")
    return out.decode("utf-8", errors="surrogateescape")


def escape(value: str) -> str:
    """C-style escape for printing inside double quotes."""
    out = []
    for ch in value:
        o = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif 0xDC80 <= o <= 0xDCFF:  # surrogate-escaped raw byte
            out.append("\\%03o" % (o - 0xDC00))
        elif o < 0x20 or o == 0x7F:
            out.append("\\%03o" % o)
        else:
            out.append(ch)
    return "".join(out)


class Scanner:
    """A position in HLO text plus the reading primitives the parser needs."""

    def __init__(self, text: str, filename: str | None = None):
        self.text = text
        self.pos = 0
        self.filename = filename
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    # -- positions and errors ---------------------------------------------------------
    def line_col(self, pos: int) -> tuple[int, int]:
        idx = bisect.bisect_right(self._line_starts, pos) - 1
        return idx + 1, pos - self._line_starts[idx] + 1

    def source_line(self, line: int) -> str:
        start = self._line_starts[line - 1]
        end = self.text.find("\n", start)
        return self.text[start:] if end < 0 else self.text[start:end]

    def error(self, message: str, pos: int | None = None) -> HloParseError:
        if pos is None:
            self.skip_ws()
            pos = self.pos
        pos = max(0, min(pos, len(self.text)))
        line, col = self.line_col(pos)
        return HloParseError(message, line, col, self.source_line(line), self.filename)

    def describe(self, pos: int | None = None) -> str:
        """The token at ``pos`` (default: the next one), for 'found ...' messages."""
        if pos is None:
            self.skip_ws()
            pos = self.pos
        if pos >= len(self.text):
            return "end of input (is the file cut off?)"
        c = self.text[pos]
        if c == "%":
            m = NAME_RE.match(self.text, pos + 1)
            return repr("%" + (m.group() if m else ""))
        m = IDENT_RE.match(self.text, pos) or NUMBER_RE.match(self.text, pos)
        if m:
            return repr(m.group())
        if c == '"':
            return "string"
        return repr(c)

    def expected(self, what: str, pos: int | None = None) -> HloParseError:
        return self.error(f"expected {what}, found {self.describe(pos)}", pos)

    # -- reading ----------------------------------------------------------------------
    def skip_ws(self) -> None:
        text = self.text
        pos = self.pos
        if pos < len(text) and (text[pos].isspace() or text[pos] == "/"):
            if text.startswith("/*", pos) and text.find("*/", pos + 2) < 0:
                raise self.error("unterminated comment", pos)
            m = _WS_RE.match(text, pos)
            if m:
                self.pos = m.end()

    def at_end(self) -> bool:
        self.skip_ws()
        return self.pos >= len(self.text)

    def peek(self, n: int = 1) -> str:
        self.skip_ws()
        return self.text[self.pos:self.pos + n]

    def peek_char(self) -> str:
        """The character at the raw position (no whitespace skipping)."""
        return self.text[self.pos:self.pos + 1]

    def at(self, s: str) -> bool:
        self.skip_ws()
        return self.text.startswith(s, self.pos)

    def accept(self, s: str) -> bool:
        if self.at(s):
            self.pos += len(s)
            return True
        return False

    def expect(self, s: str, context: str = "") -> int:
        """Consume ``s`` or raise "expected 's' <context>, found ..."; returns its position."""
        self.skip_ws()
        if not self.text.startswith(s, self.pos):
            raise self.expected(f"'{s}'" + (f" {context}" if context else ""))
        start = self.pos
        self.pos += len(s)
        return start

    def match(self, regex: re.Pattern) -> str | None:
        self.skip_ws()
        m = regex.match(self.text, self.pos)
        if m is None or m.end() == self.pos:
            return None
        self.pos = m.end()
        return m.group()

    def ident(self) -> str | None:
        """An identifier; a trailing ``-`` that starts ``->`` is not part of it."""
        self.skip_ws()
        return self._word(IDENT_RE, self.pos)

    def _word(self, pattern, start: int) -> str | None:
        """``pattern`` matched at ``start`` (consumed), without a trailing ``-`` that
        begins ``->``."""
        m = pattern.match(self.text, start)
        if m is None:
            return None
        s = m.group()
        end = m.end()
        if end < len(self.text) and self.text[end] == ">" and s.endswith("-"):
            s = s[:-1]
            end -= 1
        self.pos = end
        return s

    def peek_ident(self) -> str | None:
        save = self.pos
        s = self.ident()
        self.pos = save
        return s

    def expect_ident(self, what: str) -> str:
        s = self.ident()
        if s is None:
            raise self.expected(what)
        return s

    def name(self) -> str | None:
        """An instruction or computation name, ``%name`` or bare; returned without ``%``."""
        self.skip_ws()
        if self.text.startswith("%", self.pos):
            return self._word(NAME_RE, self.pos + 1)
        return self.ident()

    def int_(self, what: str = "an integer") -> int:
        self.skip_ws()
        m = INT_RE.match(self.text, self.pos)
        if m is None:
            raise self.expected(what)
        end = m.end()
        # reject "1.5" or "1e3" where an integer is required
        if end < len(self.text) and (self.text[end] in ".eE" and NUMBER_RE.match(self.text, self.pos).end() > end):
            raise self.expected(what)
        self.pos = end
        return int(m.group())

    def string(self) -> tuple[str, str]:
        """A double-quoted string: (decoded value, verbatim text with quotes)."""
        self.skip_ws()
        start = self.pos
        if not self.text.startswith('"', start):
            raise self.expected("string")
        end = self._string_end(start)
        raw = self.text[start:end]
        try:
            value = unescape(raw[1:-1])
        except ValueError as e:
            raise self.error(f"bad string literal: {e}", start) from None
        self.pos = end
        return value, raw

    def _string_end(self, start: int) -> int:
        """Position just after the closing quote of the string opening at ``start``."""
        text = self.text
        i = start + 1
        n = len(text)
        while i < n:
            c = text[i]
            if c == "\\":
                i += 2
                continue
            if c == '"':
                return i + 1
            i += 1
        raise self.error("unterminated string", start)

    def balanced_raw(self, stop_at_newline: bool = True, stop_at_comma: bool = True) -> str:
        """Verbatim text of one attribute value.

        Reads until a ``,`` at bracket depth 0, an unmatched closing bracket, or
        (when ``stop_at_newline``) a newline at depth 0. Strings and nested
        ``{}``/``[]``/``()`` are skipped as wholes.
        """
        self.skip_ws()
        text = self.text
        start = self.pos
        i = start
        n = len(text)
        stack: list[tuple[str, int]] = []
        closing = {"{": "}", "[": "]", "(": ")"}
        while i < n:
            c = text[i]
            if c == '"':
                i = self._string_end(i)
                continue
            if c in closing:
                stack.append((closing[c], i))
            elif c in "}])":
                if not stack:
                    break
                want, at = stack.pop()
                if c != want:
                    raise self.error(f"expected '{want}' to close '{text[at]}' opened at "
                                     f"{':'.join(map(str, self.line_col(at)))}, found '{c}'", i)
            elif not stack and ((stop_at_comma and c == ",") or (stop_at_newline and c == "\n")):
                break
            i += 1
        if stack:
            want, at = stack[-1]
            raise self.error(f"unterminated '{text[at]}': expected '{want}' before end of input", at)
        raw = text[start:i].rstrip()
        self.pos = start + len(raw)
        return raw
