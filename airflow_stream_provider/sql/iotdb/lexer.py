"""Tokens of IoTDB's SQL: the shared lexer, with IoTDB's numbers, durations and unquoted times.

- an unquoted timestamp, ``2021-05-11T22:18:14.598+08:00`` (also ``2021/05/11 22:18:14`` and
  ``2021.05.11 22:18:14``, or a date alone), is one :attr:`Kind.DATETIME` token;
- a duration is one or more ``<digits><unit>`` with the units ``y mo w d h m s ms us ns``
  (``1d2h``, ``500ms``), one :attr:`Kind.DURATION` token.
"""

from __future__ import annotations

import re

from airflow_stream_provider.model import Duration
from airflow_stream_provider.sql.grammar.lexer import Kind, Lexer

_DATETIME = re.compile(
    r"\d{4}(?P<sep>[-/])\d{1,2}(?P=sep)\d{1,2}"  # a date with - or /
    r"(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
    r"|\d{4}\.\d{1,2}\.\d{1,2}[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?",
)
_DURATION = re.compile(r"(?:\d+(?:mo|ms|us|ns|y|w|d|h|m|s))+", re.IGNORECASE)
_DURATION_PART = re.compile(r"(\d+)(mo|ms|us|ns|y|w|d|h|m|s)", re.IGNORECASE)
_NUMBER = re.compile(r"(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][+-]?[0-9]+)?")
_NAME_CHAR = re.compile(r"[A-Za-z0-9_\u0080-\uffff]")
_MICROS = {"w": 604_800_000_000, "d": 86_400_000_000, "h": 3_600_000_000, "m": 60_000_000, "s": 1_000_000,
           "ms": 1_000, "us": 1}


class IotdbLexer(Lexer):
    def number(self, i: int) -> tuple[int, Kind]:
        text = self.text
        for pattern, kind in ((_DATETIME, Kind.DATETIME), (_DURATION, Kind.DURATION), (_NUMBER, Kind.NUMBER)):
            found = pattern.match(text, i)
            if found and not _NAME_CHAR.match(text, found.end()):
                return found.end(), kind
        word = re.compile(r"[0-9.]+[A-Za-z0-9_]*").match(text, i)
        assert word is not None  # a digit or a dot before a digit starts a number
        raise self._error(f"malformed number or duration {word.group()!r}: a duration is digits and a unit, "
                          "one of y, mo, w, d, h, m, s, ms, us, ns (as in 1d2h or 500ms)", i)


class DurationError(ValueError):
    pass


def duration_micros(text: str) -> int | None:
    """Microseconds of a fixed-length duration token (``1d2h``, ``500ms``, ``3000ns``); None when it
    holds a calendar unit (``mo``, ``y``). Raises :class:`DurationError` for nanoseconds that are
    not whole microseconds."""
    total_ns = 0
    for count, unit in _DURATION_PART.findall(text):
        unit = unit.lower()
        if unit in ("mo", "y"):
            return None
        total_ns += int(count) * (1 if unit == "ns" else _MICROS[unit] * 1000)
    if total_ns % 1000:
        raise DurationError(f"{text} is not a whole number of microseconds, the finest time this "
                            "warehouse keeps")
    return total_ns // 1000


def to_duration(text: str) -> Duration | None:
    """The project's :class:`Duration` of a fixed-length duration token, in the largest unit that
    holds it exactly; None for a calendar duration (``mo``, ``y``), which has no fixed length."""
    micros = duration_micros(text)
    return None if micros is None else micros_duration(micros)


def micros_duration(micros: int) -> Duration:
    """``micros`` as a :class:`Duration` in the largest unit that holds it exactly."""
    for unit, size in (("w", 604_800_000_000), ("d", 86_400_000_000), ("h", 3_600_000_000), ("m", 60_000_000),
                       ("s", 1_000_000), ("a", 1_000)):
        if micros % size == 0:
            return Duration(micros // size, unit)
    return Duration(micros, "u")


def shown_duration(micros: int) -> str:
    """``micros`` as IoTDB writes a duration (``500ms``, ``20s``, ``1h30m``)."""
    if micros == 0:
        return "0ms"
    parts = []
    for unit, size in (("d", 86_400_000_000), ("h", 3_600_000_000), ("m", 60_000_000), ("s", 1_000_000),
                       ("ms", 1_000), ("us", 1)):
        if micros >= size:
            parts.append(f"{micros // size}{unit}")
            micros %= size
    return "".join(parts)
