"""The project's error types: every bad definition surfaces as one of these, with its position."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


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
