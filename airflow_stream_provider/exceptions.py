"""The project's error types: every bad definition surfaces as one of these, with its position."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """A hint naming the closest choice, compared case-insensitively, or None."""
    upper = {c.upper(): c for c in choices}
    close = difflib.get_close_matches(word.upper(), list(upper), n=1, cutoff=0.6)
    return f"did you mean {upper[close[0]]}?" if close else None


class StreamError(Exception):
    """Base of every error this package raises on purpose."""


class StreamDefinitionError(StreamError, ValueError):
    """A statement breaks the grammar or a rule of the stream language.

    ``line`` and ``column`` are 1-based positions in the text given to the parser; ``clause`` names
    the clause the rule belongs to (``STREAM_OPTIONS``, ``NOTIFY``, ``COUNT_WINDOW``...).
    """

    def __init__(
        self,
        message: str,
        *,
        line: int | None = None,
        column: int | None = None,
        clause: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.message = message
        self.line = line
        self.column = column
        self.clause = clause
        self.hint = hint
        super().__init__(self._render())

    def _render(self) -> str:
        where = f"line {self.line}, col {self.column}: " if self.line is not None else ""
        clause = f"{self.clause}: " if self.clause and not self.message.startswith(self.clause) else ""
        hint = f" ({self.hint})" if self.hint else ""
        return f"{where}{clause}{self.message}{hint}"


class StreamSyntaxError(StreamDefinitionError):
    """The text is not a statement of the language at all."""


class CorruptStateError(StreamError):
    """A file the project wrote cannot be read back (cut short, emptied, not JSON, or missing a
    key): the error names the file, so it can be restored, repaired or removed."""

    def __init__(self, path: object, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"corrupt state file {path}: {problem}")


def read_json_object(path: Path, keys: Sequence[str] = ()) -> dict[str, Any]:
    """The JSON object in ``path``, which must hold ``keys``; :class:`CorruptStateError` naming the
    file when it is empty, cut short, not JSON, not an object or without one of ``keys``. A missing
    file raises FileNotFoundError as usual: callers decide what absence means. (It lives beside
    the error because every layer reads its own state files and the base modules stay independent.)"""
    data = path.read_bytes()
    try:
        value = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise CorruptStateError(path, f"not UTF-8 ({err.reason} at byte {err.start})") from None
    except ValueError as err:
        problem = "empty" if not data.strip() else f"not valid JSON ({err})"
        raise CorruptStateError(path, problem) from None
    if not isinstance(value, dict):
        raise CorruptStateError(path, f"holds a JSON {type(value).__name__}, not an object")
    missing = [k for k in keys if k not in value]
    if missing:
        raise CorruptStateError(path, f"has no {', '.join(missing)}")
    return value
