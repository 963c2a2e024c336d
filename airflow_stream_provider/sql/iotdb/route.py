"""Which statements of a text are IoTDB's, by their shape, so that one text (a file, a DAG, a
``sql`` argument) can hold TDengine and IoTDB statements with no flag.

A statement is IoTDB's when it starts with a statement only IoTDB has (``CREATE TIMESERIES``,
``CREATE CQ``, ``CREATE TRIGGER``, ``SHOW DEVICES``...), or names a path under ``root`` where TDengine names a
database or table: ``CREATE DATABASE root.ln``, ``INSERT INTO root.ln.wf01(...)``, ``DELETE FROM
root...``, ``SELECT ... FROM root...``; and ``SHOW DATABASES`` (the project runs no TDengine one).
A TDengine database called ``root`` is written with backquotes (`` `root`.t ``) to keep its
TDengine meaning.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

_ROOT = r"root\s*\."
_IOTDB_HEAD = re.compile(
    r"(?:(?:CREATE\s+(?:ALIGNED\s+)?TIMESERIES|CREATE\s+(?:CQ|CONTINUOUS\s+QUERY)|CREATE\s+STORAGE\s+GROUP"
    r"|CREATE\s+DEVICES\s+root\b|CREATE\s+(?:(?:STATELESS|STATEFUL)\s+)?TRIGGER|DROP\s+TRIGGER"
    r"|(?:DROP|DELETE)\s+(?:TIMESERIES|CQ|CONTINUOUS\s+QUERY)|VERIFY\s+(?:CQ|CONTINUOUS\s+QUERY)|(?:UN)?SET\s+TTL|DELETE\s+DATABASE"
    r"|SHOW\s+(?:TIMESERIES|DEVICES|DATABASES|CQS|CONTINUOUS\s+QUERIES|STORAGE\s+GROUP|TRIGGERS))\b"
    rf"|(?:CREATE|DROP|DELETE)\s+DATABASE\s+{_ROOT}"
    rf"|INSERT\s+INTO\s+{_ROOT}|DELETE\s+FROM\s+{_ROOT})",
    re.IGNORECASE)
_SELECT = re.compile(r"SELECT\b", re.IGNORECASE)
_FROM_ROOT = re.compile(rf"\bFROM\s+{_ROOT}", re.IGNORECASE)


def recognises(statement: str) -> bool:
    """Whether ``statement`` (one statement, comments and strings included) is IoTDB's."""
    code = _code(statement).lstrip()
    if _IOTDB_HEAD.match(code):
        return True
    return bool(_SELECT.match(code) and _FROM_ROOT.search(code))


def statement_spans(text: str) -> Iterator[tuple[int, int]]:
    """The ``(start, end)`` of each statement of ``text``, split at ``;`` outside strings, quoted
    names and comments (each span keeps its ``;``); spans of only blanks and comments are left out."""
    start, i, n = 0, 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "'\"`":
            i = _after_quoted(text, i)
            continue
        if text.startswith("--", i):
            nl = text.find("\n", i)
            i = n if nl < 0 else nl + 1
            continue
        if text.startswith("/*", i):
            close = text.find("*/", i + 2)
            i = n if close < 0 else close + 2
            continue
        i += 1
        if ch == ";":
            if _code(text[start:i]).strip(" \t\r\n;"):
                yield start, i
            start = i
    if _code(text[start:]).strip(" \t\r\n;"):
        yield start, n


def _after_quoted(text: str, i: int) -> int:
    quote, j, n = text[i], i + 1, len(text)
    while j < n:
        if text[j] == "\\" and quote != "`":
            j += 2
            continue
        if text[j] == quote:
            if j + 1 < n and text[j + 1] == quote:
                j += 2
                continue
            return j + 1
        j += 1
    return n


def _code(text: str) -> str:
    """``text`` with its comments blanked and its strings emptied (quoted names kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "'\"":
            end = _after_quoted(text, i)
            out.append("''")
            i = end
        elif ch == "`":
            end = _after_quoted(text, i)
            out.append(text[i:end])
            i = end
        elif text.startswith("--", i):
            nl = text.find("\n", i)
            i = n if nl < 0 else nl + 1
            out.append(" ")
        elif text.startswith("/*", i):
            close = text.find("*/", i + 2)
            i = n if close < 0 else close + 2
            out.append(" ")
        else:
            out.append(ch)
            i += 1
    return "".join(out)
