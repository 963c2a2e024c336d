"""Time values of a statement: duration units, durations and timestamps (absolute or from now)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from airflow_stream_provider.values import FIRST_MICROS, LAST_MICROS

#: microseconds per unit; ``b`` (nanoseconds) has no exact value at Spark's microsecond precision,
#: and ``n``/``y`` (calendar month/year) have no fixed length.
UNIT_MICROS = {
    "u": 1,
    "a": 1_000,
    "s": 1_000_000,
    "m": 60_000_000,
    "h": 3_600_000_000,
    "d": 86_400_000_000,
    "w": 604_800_000_000,
}
CALENDAR_UNITS = {"n": "MONTH", "q": "QUARTER", "y": "YEAR"}
#: calendar months per calendar unit (TDengine 3.4.1: ``n`` month, ``q`` quarter, ``y`` year)
UNIT_MONTHS = {"n": 1, "q": 3, "y": 12}
#: the span of the timestamps a table can hold, in microseconds: no longer duration means anything
TIMESTAMP_SPAN_MICROS = LAST_MICROS - FIRST_MICROS
ALL_UNITS = set(UNIT_MICROS) | set(CALENDAR_UNITS) | {"b"}


@dataclass(frozen=True)
class Duration:
    """A duration such as ``5m``: ``unit`` is one of ``u a s m h d w``, or a calendar unit ``n q y``
    (months, quarters, years), which has no fixed length: :attr:`months` counts it instead."""

    count: int
    unit: str

    @property
    def micros(self) -> int:
        if self.unit in CALENDAR_UNITS:
            raise ValueError(f"{self} is a calendar duration: it has no fixed length in microseconds")
        return self.count * UNIT_MICROS[self.unit]

    @property
    def months(self) -> int:
        """The calendar months of a calendar duration (``1q`` is 3), 0 for a fixed one."""
        return self.count * UNIT_MONTHS.get(self.unit, 0)

    @property
    def is_calendar(self) -> bool:
        return self.unit in CALENDAR_UNITS

    def shortest(self) -> timedelta:
        """The least time it can span: itself when fixed; 28 days a month, 365 days a year."""
        if self.unit == "y":
            return timedelta(days=365 * self.count)
        return timedelta(days=28 * self.months) if self.is_calendar else self.to_timedelta()

    def longest(self) -> timedelta:
        """The most time it can span: itself when fixed; 31 days a month, 366 days a year."""
        if self.unit == "y":
            return timedelta(days=366 * self.count)
        return timedelta(days=31 * self.months) if self.is_calendar else self.to_timedelta()

    def to_timedelta(self) -> timedelta:
        return timedelta(microseconds=self.micros)

    def __str__(self) -> str:
        return f"{self.count}{self.unit}"


@dataclass(frozen=True)
class TimePoint:
    """A timestamp written in a statement: an absolute instant, or ``now`` plus a signed offset."""

    at: datetime | None = None
    now_offset_micros: int | None = None

    @property
    def is_relative(self) -> bool:
        return self.at is None

    def resolve(self, now: datetime) -> datetime:
        if self.at is not None:
            return self.at
        return now + timedelta(microseconds=self.now_offset_micros or 0)

    def __str__(self) -> str:
        if self.at is not None:
            return self.at.isoformat()
        off = self.now_offset_micros or 0
        return "now" if off == 0 else f"now {'+' if off > 0 else '-'} {abs(off)}u"
