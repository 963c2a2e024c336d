"""Time values shared by the timetables and the tasks: TDengine durations, stdlib UTC datetimes."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

_UNITS = {"w": timedelta(weeks=1), "d": timedelta(days=1), "h": timedelta(hours=1), "m": timedelta(minutes=1),
          "s": timedelta(seconds=1), "a": timedelta(milliseconds=1), "u": timedelta(microseconds=1)}
_PART = re.compile(r"(\d+)([wdhmsau])")


def duration(value: timedelta | str) -> timedelta:
    """A ``timedelta``, or a TDengine duration such as ``10s``, ``5h30m`` or ``1d1h``
    (units ``w d h m s a u``: ``m`` is minutes, ``a`` milliseconds, ``u`` microseconds)."""
    if isinstance(value, timedelta):
        return value
    text = str(value).strip().lower()
    parts = _PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"{value!r} is not a duration such as 10s, 5h30m or 1d1h "
                         "(units: w d h m s a=milliseconds u=microseconds)")
    return sum((int(n) * _UNITS[u] for n, u in parts), timedelta(0))


def format_duration(value: timedelta) -> str:
    """The shortest TDengine spelling of ``value``: ``5h30m``, ``1d1h``, ``0s``."""
    micros = value // timedelta(microseconds=1)
    if micros == 0:
        return "0s"
    out = []
    for unit in "wdhmsau":
        size = _UNITS[unit] // timedelta(microseconds=1)
        if micros >= size:
            out.append(f"{micros // size}{unit}")
            micros %= size
    return "".join(out)


def utc_datetime(at: datetime) -> datetime:
    """A stdlib UTC datetime (Airflow passes pendulum's, whose arithmetic differs)."""
    at = at.astimezone(UTC)
    return datetime(at.year, at.month, at.day, at.hour, at.minute, at.second, at.microsecond, tzinfo=UTC)
