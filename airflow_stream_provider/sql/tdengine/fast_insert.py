"""A fast reading of the common INSERT: ``INSERT INTO t [USING st [(tags)] TAGS (...)] [(cols)]
VALUES (...) (...) ... [t2 ...]`` with literal values, one statement.

The statement is checked whole by regular expressions and its values are cut out in one pass, so
a batch of thousands of rows costs a few string scans instead of a token each. Anything else (a
comment, an expression such as ``now - 1d``, a blank other than space, tab or newline, a name the
name rules refuse, rows of different widths, an IoTDB path, several statements, any error) makes
:func:`parse_insert` answer None, and the full parser reads the text: it alone reports errors, so
every error keeps its message and position. What it returns equals the full parser's statement.
"""

from __future__ import annotations

import json
import re

from airflow_stream_provider import model as m
from airflow_stream_provider.model import names
from airflow_stream_provider.sql.grammar.lexer import string_value

_WS = r"[ \t\r\n]*"
_END = r"(?![A-Za-z0-9_$\u0080-\uffff])"  # where an identifier, number or keyword stops
_NAME = r"(?>[A-Za-z_\u0080-\uffff][A-Za-z0-9_$\u0080-\uffff]*+|`(?:[^`]|``)*+`)"
_STRING = r"'(?:[^'\\]|\\.|'')*+'|\"(?:[^\"\\]|\\.|\"\")*+\""
_NUMBER = rf"[-+]?(?>[0-9]++\.[0-9]*+|\.[0-9]++|[0-9]++)(?:[eE][+-]?[0-9]++)?+{_END}"
_WORD = rf"(?i:NULL|TRUE|FALSE){_END}|(?i:NOW){_END}(?:{_WS}\({_WS}\))?+"
_VALUE = rf"(?:{_STRING}|{_NUMBER}|{_WORD})"
_LIST = rf"\({_WS}{_VALUE}(?:{_WS},{_WS}{_VALUE})*+{_WS}\)"
_NAMES = rf"\({_WS}{_NAME}(?:{_WS},{_WS}{_NAME})*+{_WS}\)"

_HEAD = re.compile(rf"{_WS}(?i:INSERT){_END}{_WS}(?i:INTO){_END}{_WS}")
_TABLE = re.compile(rf"({_NAME})(?:\.({_NAME}))?{_WS}")
_USING = re.compile(rf"(?i:USING){_END}{_WS}")
_TAGS = re.compile(rf"(?:({_NAMES}){_WS})?(?i:TAGS){_END}{_WS}({_LIST}){_WS}")
_COLUMNS = re.compile(rf"({_NAMES}){_WS}")
_VALUES = re.compile(rf"(?i:VALUES){_END}{_WS}({_LIST}(?:{_WS}{_LIST})*+){_WS}")
_STOP = re.compile(rf"(?:;{_WS})*+\Z")
#: the values and row ends of a checked VALUES clause, in order (``(`` and ``,`` are skipped)
_TOKEN = re.compile(rf"\)|{_STRING}|{_NUMBER}|{_WORD}", re.DOTALL)
_NAME_TOKEN = re.compile(_NAME)
#: value lists of numbers only, and the numbers JSON spells otherwise (+5, .5, 5., 05)
_NUMBERS_ONLY = re.compile(r"[0-9eE.,()+\- \t\r\n]*")
_NOT_JSON = [re.compile(r"\+(?<![eE]\+)"), re.compile(r"\.(?:(?<=[^0-9]\.)|(?![0-9]))"),
             re.compile(r"0(?:(?<=[(,\s]0)|(?<=[(,\s]-0))[0-9]")]  # each starts with its character: quick
_ROOT = "root"  # ``INSERT INTO root.x``: a path of IoTDB's (see ``sql.iotdb.route``)
_WORDS = {"NULL": None, "TRUE": True, "FALSE": False}
_NOW = m.TimePoint(now_offset_micros=0)


def parse_insert(text: str) -> list[m.Statement] | None:
    """The statement of ``text`` when it is an INSERT of the common shape, or None."""
    head = _HEAD.match(text)
    if head is None:
        return None
    start, i, first = len(text) - len(text.lstrip(" \t\r\n")), head.end(), True
    targets: list[m.InsertTarget] = []
    end = i
    while True:
        found = _target(text, i, first)
        if found is None:
            return None
        target, i, end = found
        targets.append(target)
        first = False
        if _STOP.match(text, i):
            break
    line = text.count("\n", 0, start) + 1
    column = start - text.rfind("\n", 0, start)
    return [m.Insert(tuple(targets), position=m.Position(line, column), text=text[start:end])]


def _target(text: str, i: int, first: bool) -> tuple[m.InsertTarget, int, int] | None:
    """One target at ``i``: it, the offset after it and the end of its last row."""
    table = _TABLE.match(text, i)
    if table is None:
        return None
    if first and table.group(2) is not None and table.group(1).lower() == _ROOT:
        return None
    name = _table_name(table)
    if name is None:
        return None
    i = table.end()
    args: dict = {}
    if using := _USING.match(text, i):
        stable = _TABLE.match(text, using.end())
        if stable is None or (args_using := _table_name(stable)) is None:
            return None
        args["using"] = args_using
        tags = _TAGS.match(text, stable.end())
        if tags is None:
            return None
        if tags.group(1) is not None:
            args["tag_names"] = _names(tags.group(1))
        try:
            values = _rows(tags.group(2))
        except ValueError:
            return None
        if values is None:
            return None
        args["tag_values"] = values[0]
        i = tags.end()
    if columns := _COLUMNS.match(text, i):
        args["columns"] = _names(columns.group(1))
        i = columns.end()
    clause = _VALUES.match(text, i)
    if clause is None:
        return None
    try:
        rows = _rows(clause.group(1))
    except ValueError:  # an integer too long for int(): the full parser says so
        return None
    if rows is None:
        return None
    width = len(args.get("columns") or rows[0])
    if any(len(row) != width for row in rows):
        return None
    return m.InsertTarget(name, rows, **args), clause.end(), clause.end(1)


def _table_name(found: re.Match[str]) -> m.TableName | None:
    first, second = found.group(1), found.group(2)
    if second is None:
        name = _ident(first)
        return None if names.name_problem(name, names.TABLE) else m.TableName(name)
    db, name = _ident(first), _ident(second)
    if names.name_problem(db, names.DATABASE) or names.name_problem(name, names.TABLE):
        return None
    return m.TableName(name, db=db)


def _ident(text: str) -> str:
    return text[1:-1].replace("``", "`") if text[0] == "`" else text


def _names(text: str) -> tuple[str, ...]:
    return tuple(_ident(name) for name in _NAME_TOKEN.findall(text))


def _rows(text: str) -> tuple[tuple[m.Value, ...], ...] | None:
    """The rows of checked value lists, in one pass over their tokens."""
    if _NUMBERS_ONLY.fullmatch(text) and not any(rule.search(text) for rule in _NOT_JSON):
        # numbers as JSON writes them: JSON's reader makes the ints and floats the lexer's rules make
        return tuple(map(tuple, json.loads("[" + text.replace(")", "]").replace("(", ",[")[1:] + "]")))
    rows: list[tuple[m.Value, ...]] = []
    row: list[m.Value] = []
    append = row.append
    for token in _TOKEN.findall(text):
        c = token[0]
        if c == ")":
            rows.append(tuple(row))
            row.clear()
        elif c == "'" or c == '"':
            body = token[1:-1]
            append(string_value(token) if "\\" in body or c in body else body)
        elif c in "0123456789":
            append(int(token) if token.isdigit() else float(token))
        elif c in "-+.":
            digits = token[1:] if c != "." else token
            sign = -1 if c == "-" else 1
            append(sign * int(digits) if digits.isdigit() else sign * float(digits))
        else:
            word = token.upper()
            if word.startswith("NOW"):
                append(_NOW)
            elif word in _WORDS:
                append(_WORDS[word])
            else:
                return None
    return tuple(rows)
