"""Tokens of the stream language, each with its offset, line and column in the source text."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from airflow_stream_provider.exceptions import StreamSyntaxError


class Kind(Enum):
    IDENT = "identifier"
    QUOTED_IDENT = "quoted identifier"
    STRING = "string"
    NUMBER = "number"
    DURATION = "duration"
    DATETIME = "date and time"  # an unquoted ISO 8601 timestamp (IoTDB)
    REF = "%% reference"
    OP = "symbol"
    EOF = "end of input"


@dataclass(frozen=True)
class Token:
    kind: Kind
    text: str
    start: int
    end: int  # exclusive
    line: int
    column: int

    @property
    def upper(self) -> str:
        return self.text.upper() if self.kind is Kind.IDENT else ""

    @property
    def value(self) -> str:
        """The identifier or string without its quotes, escapes resolved."""
        if self.kind is Kind.QUOTED_IDENT:
            return self.text[1:-1].replace("``", "`")
        if self.kind is Kind.STRING:
            return string_value(self.text)
        return self.text

    def describe(self) -> str:
        return "end of input" if self.kind is Kind.EOF else repr(self.text)


def string_value(text: str) -> str:
    """A quoted string's value: without its quotes, doubled quotes and backslash escapes resolved."""
    quote = text[0]
    body = text[1:-1].replace(quote * 2, quote)
    return _ESCAPE.sub(r"\1", body)


_ESCAPE = re.compile(r"\\(.)")
_DIGITS = frozenset("0123456789")
_NUMBER = re.compile(r"(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
_IDENT = re.compile(r"[A-Za-z_\u0080-\uffff][A-Za-z0-9_$\u0080-\uffff]*")
_SYMBOLS = ("<=>", "<>", "!=", ">=", "<=", "||", "->", "::", "<<", ">>")
_REF = re.compile(r"%%(?:[A-Za-z_][A-Za-z0-9_]*|\d+)")


class Lexer:
    def __init__(self, text: str) -> None:
        self.text = text
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def position(self, offset: int) -> tuple[int, int]:
        """1-based (line, column) of an offset."""
        lo, hi = 0, len(self._line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._line_starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1, offset - self._line_starts[lo] + 1

    def _error(self, message: str, offset: int) -> StreamSyntaxError:
        line, column = self.position(offset)
        return StreamSyntaxError(message, line=line, column=column)

    def tokens(self, start: int = 0, end: int | None = None) -> list[Token]:
        """The tokens of ``text[start:end]`` (all of it by default), positioned in the whole text,
        then an end-of-input token at ``end``."""
        text, out, i = self.text, [], start
        n = len(text) if end is None else end
        while i < n:
            ch = text[i]
            if ch.isspace():
                i += 1
                continue
            if text.startswith("--", i) or ch == "#":
                nl = text.find("\n", i)
                i = n if nl < 0 else nl + 1
                continue
            if text.startswith("/*", i):
                close = text.find("*/", i + 2)
                if close < 0:
                    raise self._error("comment is not closed", i)
                i = close + 2
                continue
            start = i
            if ch in "'\"":
                i = self._scan_quoted(i, ch)
                kind = Kind.STRING
            elif ch == "`":
                i = self._scan_quoted(i, "`")
                kind = Kind.QUOTED_IDENT
            elif ch in _DIGITS or (ch == "." and i + 1 < n and text[i + 1] in _DIGITS):
                i, kind = self.number(i)
            elif ch == "%" and text.startswith("%%", i):
                m = _REF.match(text, i)
                if not m:
                    raise self._error("'%%' must be followed by a name or a column number, as in %%tbname", i)
                i = m.end()
                kind = Kind.REF
            elif ident := _IDENT.match(text, i):
                i = ident.end()
                kind = Kind.IDENT
            else:
                sym = next((s for s in _SYMBOLS if text.startswith(s, i)), ch)
                i += len(sym)
                kind = Kind.OP
            line, column = self.position(start)
            out.append(Token(kind, text[start:i], start, i, line, column))
        line, column = self.position(n)
        out.append(Token(Kind.EOF, "", n, n, line, column))
        return out

    def number(self, i: int) -> tuple[int, Kind]:
        """The end and kind of the number or duration (``10s``) starting at ``i``."""
        text, start = self.text, i
        m = _NUMBER.match(text, i)
        assert m is not None  # a digit, or a dot before a digit, always starts a number
        i = m.end()
        unit = _IDENT.match(text, i)
        if not unit:
            return i, Kind.NUMBER
        if not re.fullmatch(r"[0-9]+[a-zA-Z]", text[start : unit.end()]):
            raise self._error(f"malformed number or duration {text[start:unit.end()]!r}", start)
        return unit.end(), Kind.DURATION

    def _scan_quoted(self, i: int, quote: str) -> int:
        text, n, j = self.text, len(self.text), i + 1
        while j < n:
            c = text[j]
            if c == "\\" and quote != "`":
                j += 2
                continue
            if c == quote:
                if j + 1 < n and text[j + 1] == quote:
                    j += 2
                    continue
                return j + 1
            j += 1
        what = "identifier" if quote == "`" else "string"
        raise self._error(f"{what} starting here is not closed (missing {quote})", i)
