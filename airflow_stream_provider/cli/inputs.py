"""What ``airflow-stream`` reads (a STATEMENT, ``-f FILE`` or standard input) and how it quotes a
statement's error: the line, a caret under the column, every character printable."""

from __future__ import annotations

import argparse
import sys
import unicodedata
from typing import NoReturn

from airflow_stream_provider.exceptions import StreamDefinitionError


def read_input(args: argparse.Namespace) -> tuple[str, str]:
    if args.file and args.statement:
        raise SystemExit("airflow-stream: give either -f FILE or a STATEMENT, not both")
    if args.file:
        if args.file == "-":
            return sys.stdin.read(), "<stdin>"
        try:
            with open(args.file, encoding="utf-8") as handle:
                return handle.read(), args.file
        except UnicodeDecodeError as err:
            _input_error(f"{args.file} is not UTF-8 text (byte {err.start}: {err.reason})")
        except OSError as err:
            _input_error(f"{args.file} cannot be read: {err.strerror or err}")
    if args.statement:
        return args.statement, "<statement>"
    if not sys.stdin.isatty():
        return sys.stdin.read(), "<stdin>"
    raise SystemExit("airflow-stream: give a STATEMENT, -f FILE, or statements on standard input")


def _input_error(message: str) -> NoReturn:
    """A bad ``-f`` file: nothing ran; exit status 2, as for a statement that does not parse."""
    print(f"error: {message}\n  nothing was executed", file=sys.stderr)
    raise SystemExit(2)


def printable(text: str) -> str:
    """``text`` with each control or format character shown as one visible character, so an echoed
    statement cannot move the terminal's cursor or colour it, and a caret under it stays in its column:
    C0 controls and DEL as their Unicode control pictures, a tab as a space, other controls and format
    characters (bidirectional overrides) as the replacement character."""
    out = []
    for char in text:
        if char == "\t":
            out.append(" ")
        elif ord(char) < 0x20:
            out.append(chr(0x2400 + ord(char)))
        elif char == "\x7f":
            out.append("\u2421")
        elif unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp"):
            out.append("\ufffd")
        else:
            out.append(char)
    return "".join(out)


def quote_source(lines: list[str], text: str, line: int | None, source: str, column: int | None = None) -> str:
    """``lines``, then line ``line`` of ``text`` (with a caret under ``column``) and the file name, all of it
    :func:`printable`."""
    src_lines = text.splitlines() or [""]
    if line is not None and 1 <= line <= len(src_lines):
        lines.append(f"  {src_lines[line - 1]}")
        if column is not None:
            lines.append("  " + " " * (max(column, 1) - 1) + "^")
    if source and source not in ("<statement>", "<stdin>"):
        lines.append(f"  in {source}")
    return "\n".join(printable(part) for entry in lines for part in entry.split("\n"))


def format_error(err: StreamDefinitionError, text: str, source: str = "") -> str:
    """``error: line L, col C: message``, then the offending line and a caret under the column."""
    column = (err.column or 1) if err.line is not None else None
    return quote_source([f"error: {err}"], text, err.line, source, column)
