"""INTERVAL windows whose lengths the calendar decides (TDengine 3.4.1 / 3.4.3): a
:class:`CalendarGrid` says where window ``k`` starts and ends when the interval or the sliding step
is in months (``n``), quarters (``q``) or years (``y``), or in local days and weeks (``d``, ``w``) of
a stream with a ``TIMEZONE``.

- Months are counted from January 1970: with a step of ``s`` months, window ``k`` starts on the
  first of month ``k * s`` (``INTERVAL(1q)`` on January, April, July and October 1st), at midnight
  of the grid's zone, plus the offset on the wall clock (``INTERVAL(1n, 14d)`` on every 15th).
- Local days are counted from 1970-01-01, weeks from Monday 1970-01-05 (a step of whole weeks),
  as the aligned PERIOD schedules count them: a day is 23 or 25 hours across a daylight saving
  change, and a week 167 or 169.
- A fixed step (``INTERVAL(1n) SLIDING(1d)`` without a zone's days) counts from the epoch as
  fixed windows do; the window then ends one calendar interval after its start, on the wall clock
  (a month after January 31st is March 3rd, or 2nd in a leap year: the day overflows into the
  next month as TDengine's ``mktime`` arithmetic does).

Window ``k`` spans ``[start(k), end(k))``; both grow with ``k``. The grid works in microseconds
since the epoch (UTC), as the window core does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

import numpy as np

from airflow_stream_provider import model as m

#: the units a grid counts its step and interval in
MONTH, DAY, FIXED = "month", "day", "fixed"
_EPOCH = datetime(1970, 1, 1)
_WEEK_ORIGIN = datetime(1970, 1, 5)  # a Monday
_UTC_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_DAY_MICROS = 86_400_000_000


def _count(duration: m.Duration, local_days: bool) -> tuple[int, str]:
    if duration.is_calendar:
        return duration.months, MONTH
    if local_days and duration.unit in ("d", "w"):
        return duration.micros // _DAY_MICROS, DAY
    return duration.micros, FIXED


@dataclass(frozen=True)
class CalendarGrid:
    """Where INTERVAL window ``k`` starts and ends: ``step`` and ``size`` are (count, unit) with unit
    :data:`MONTH`, :data:`DAY` (local days) or :data:`FIXED` (microseconds); ``offset`` is in
    microseconds, added on the wall clock of ``zone`` (an IANA name)."""

    step: tuple[int, str]
    size: tuple[int, str]
    offset: int
    zone: str

    @classmethod
    def of(cls, interval: m.Duration, sliding: m.Duration, offset: m.Duration | None, zone: str | None,
           local_days: bool) -> CalendarGrid | None:
        """The grid of ``INTERVAL(interval[, offset]) SLIDING(sliding)``, or None when both are fixed
        lengths (``local_days``: ``d`` and ``w`` are days of ``zone``, a stream's TIMEZONE)."""
        local_days = local_days and zone is not None
        step, size = _count(sliding, local_days), _count(interval, local_days)
        if step[1] == FIXED and size[1] == FIXED:
            return None
        return cls(step, size, offset.micros if offset else 0, zone or "UTC")

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.zone)

    def shortest(self, part: tuple[int, str]) -> int:
        """The least microseconds ``part`` can span (28 days a month, a 23-hour day)."""
        count, unit = part
        if unit == MONTH:
            return count * 28 * _DAY_MICROS
        if unit == DAY:
            return count * _DAY_MICROS - 3_600_000_000
        return count

    def longest(self, part: tuple[int, str]) -> int:
        count, unit = part
        if unit == MONTH:
            return count * 31 * _DAY_MICROS + 3_600_000_000
        if unit == DAY:
            return count * _DAY_MICROS + 3_600_000_000
        return count

    def step_fits(self) -> bool:
        """The step is no longer than the interval (in the same unit, by count)."""
        if self.step[1] == self.size[1]:
            return self.step[0] <= self.size[0]
        return self.longest(self.step) <= self.shortest(self.size)

    @property
    def overlap(self) -> int:
        """At most how many windows hold one instant."""
        return -(-self.longest(self.size) // self.shortest(self.step)) + 1

    # --- one window ----------------------------------------------------------------------------

    def start(self, k: int) -> int:
        return _start(self, k)

    def end(self, k: int) -> int:
        return _end(self, k)

    def index(self, ts: int) -> int:
        """The last window starting at or before ``ts``."""
        count, unit = self.step
        if unit == FIXED:
            return (ts - self.offset) // count
        wall = _local(ts, self.tz) - timedelta(microseconds=self.offset)
        if unit == MONTH:
            k = ((wall.year - 1970) * 12 + wall.month - 1) // count
        else:
            k = (wall - _day_origin(count)).days // count
        while _start(self, k) > ts:
            k -= 1
        while _start(self, k + 1) <= ts:
            k += 1
        return k

    def first(self, ts: int) -> int:
        """The first window ending after ``ts`` (the first that holds it, or the next to open)."""
        k = self.index(ts)
        while _end(self, k - 1) > ts:
            k -= 1
        while _end(self, k) <= ts:
            k += 1
        return k

    # --- many --------------------------------------------------------------------------------

    def starts(self, ks: np.ndarray) -> np.ndarray:
        return _each(_start, self, ks)

    def ends(self, ks: np.ndarray) -> np.ndarray:
        return _each(_end, self, ks)

    def indices(self, ts: np.ndarray) -> np.ndarray:
        """:meth:`index` of every time of a sorted or unsorted array."""
        if not len(ts):
            return np.empty(0, np.int64)
        lo, hi = self.index(int(ts.min())), self.index(int(ts.max()))
        bounds = self.starts(np.arange(lo, hi + 2, dtype=np.int64))
        return np.searchsorted(bounds, ts, side="right").astype(np.int64) - 1 + lo

    def memberships(self, ts: np.ndarray) -> np.ndarray:
        """The window index of every (row, window) pair where the window holds the row's time."""
        last = self.indices(ts)
        found = []
        for j in range(self.overlap + 1):
            k = last - j
            inside = self.ends(k) > ts
            if not inside.any():
                break
            found.append(k[inside])
        return np.concatenate(found) if found else np.empty(0, np.int64)


def _day_origin(days: int) -> datetime:
    return _WEEK_ORIGIN if days % 7 == 0 else _EPOCH


def _local(ts: int, tz: ZoneInfo) -> datetime:
    return (_UTC_EPOCH + timedelta(microseconds=ts)).astimezone(tz).replace(tzinfo=None)


def _micros(wall: datetime, tz: ZoneInfo) -> int:
    """The instant of a wall-clock time of ``tz`` (the earlier of a repeated hour)."""
    at = wall.replace(tzinfo=tz).astimezone(UTC)
    return (at - _UTC_EPOCH) // timedelta(microseconds=1)


def _add_months(wall: datetime, months: int) -> datetime:
    """``wall`` plus whole months; a day past the month's end runs into the next (mktime)."""
    index = wall.year * 12 + wall.month - 1 + months
    first = wall.replace(year=index // 12, month=index % 12 + 1, day=1)
    return first + timedelta(days=wall.day - 1)


def _start_wall(grid: CalendarGrid, k: int) -> datetime:
    """The wall-clock start of window ``k`` of a grid stepping in months or local days."""
    count, unit = grid.step
    wall = _add_months(_EPOCH, k * count) if unit == MONTH else _day_origin(count) + timedelta(days=k * count)
    return wall + timedelta(microseconds=grid.offset)


@lru_cache(maxsize=65536)
def _start(grid: CalendarGrid, k: int) -> int:
    count, unit = grid.step
    if unit == FIXED:
        return k * count + grid.offset
    return _micros(_start_wall(grid, k), grid.tz)


@lru_cache(maxsize=65536)
def _end(grid: CalendarGrid, k: int) -> int:
    count, unit = grid.size
    if unit == FIXED:
        return _start(grid, k) + count
    # on the wall clock from the start's wall time (not the instant: a start inside a skipped hour
    # keeps its written time)
    wall = _local(_start(grid, k), grid.tz) if grid.step[1] == FIXED else _start_wall(grid, k)
    wall = _add_months(wall, count) if unit == MONTH else wall + timedelta(days=count)
    return _micros(wall, grid.tz)


def _each(fn: Callable[[CalendarGrid, int], int], grid: CalendarGrid, ks: np.ndarray) -> np.ndarray:
    ks = np.asarray(ks, dtype=np.int64)
    if not len(ks):
        return np.empty(0, np.int64)
    uniq, at = np.unique(ks, return_inverse=True)
    values = np.fromiter((fn(grid, k) for k in uniq.tolist()), dtype=np.int64, count=len(uniq))
    return values[at.reshape(ks.shape)]
