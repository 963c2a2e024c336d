"""The instants of PERIOD and SLIDING triggers (reference 000, "Scheduled Trigger", "Sliding Trigger").

- A period under one day restarts every local day at midnight + offset: the day's instants are
  ``base, base + p, base + 2p, ...`` before the next day's base.
- A period of one day or more counts from midnight of the creation day and never resets; the
  reference's worked examples step by period + offset (``1d1h`` with offset ``1m`` created on 05-01
  fires at 05-02 01:01, 05-03 02:02, 05-04 03:03).
- Only instants after the creation time fire.

SLIDING follows the same rules over event time. Times are aware datetimes; days are those of ``tz``.

Aligned schedules (TDengine 3.4): calendar periods (``n`` months, ``q`` quarters, ``y`` years, 3.4.1)
fire at the first of every ``months``-th month counted from January 1970, plus the offset; under
3.4's semantics a fixed period of a day or more fires at whole multiples of the period from the
epoch's local midnight, and one of whole weeks from Monday 1970-01-05 (``PERIOD(1w)`` on Mondays,
``PERIOD(1w, 1d)`` on Tuesdays). Both count on the wall clock of ``tz``, so a day is a local day
across daylight saving changes.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta, tzinfo
from zoneinfo import ZoneInfo

from airflow_stream_provider import model as m

DAY = timedelta(days=1)


#: Monday 1970-01-05, where the weeks of an aligned schedule begin (1970-01-01 was a Thursday)
WEEK_ORIGIN = datetime(1970, 1, 5)
DAY_ORIGIN = datetime(1970, 1, 1)
WEEK = timedelta(weeks=1)
#: the shortest month: a calendar schedule's offset stays under this many days a month
SHORTEST_MONTH = timedelta(days=28)


@dataclass(frozen=True)
class Schedule:
    """``months``: a calendar period of that many months (``period`` then only stands for its
    shortest length); ``aligned``: fixed periods of a day or more follow TDengine 3.4."""

    period: timedelta
    offset: timedelta
    tz: tzinfo
    created: datetime  # instants at or before it never fire
    months: int = 0
    aligned: bool = False

    def __post_init__(self) -> None:
        if self.period <= timedelta(0):
            raise ValueError(f"a schedule period must be positive, not {self.period}")
        if self.months < 0:
            raise ValueError(f"a calendar schedule counts whole months, not {self.months}")
        limit = self.period if self.on_grid else DAY
        if not timedelta(0) <= self.offset < limit:
            raise ValueError(f"a schedule offset must be in [0, {limit}), not {self.offset}")
        if self.created.tzinfo is None:
            raise ValueError("the creation time of a schedule needs a time zone")

    @classmethod
    def calendar(cls, months: int, offset: timedelta, tz: tzinfo, created: datetime) -> Schedule:
        return cls(SHORTEST_MONTH * months, offset, tz, created, months=months, aligned=True)

    @property
    def on_grid(self) -> bool:
        """The instants are whole periods from an epoch origin (a calendar or an aligned long period)."""
        return self.months > 0 or (self.aligned and self.period >= DAY)

    # --- aligned schedules: instant k is a wall-clock time of tz ------------------------------

    def _grid_wall(self, k: int) -> datetime:
        """The naive wall-clock time of the ``k``-th instant of an aligned schedule."""
        if self.months:
            index = k * self.months
            return datetime(1970 + index // 12, index % 12 + 1, 1) + self.offset
        origin = WEEK_ORIGIN if self.period % WEEK == timedelta(0) else DAY_ORIGIN
        return origin + k * self.period + self.offset

    def _grid_at(self, k: int) -> datetime:
        return self._grid_wall(k).replace(tzinfo=self.tz).astimezone(UTC)

    def _grid_index(self, at: datetime) -> int:
        """A ``k`` whose instant is at or before ``at`` (one step early at most)."""
        wall = at.astimezone(self.tz).replace(tzinfo=None) - self.offset
        if self.months:
            return ((wall.year - 1970) * 12 + wall.month - 1) // self.months - 1
        origin = WEEK_ORIGIN if self.period % WEEK == timedelta(0) else DAY_ORIGIN
        return (wall - origin) // self.period - 1

    def _grid_after(self, start: datetime, until: datetime | None) -> Iterator[datetime]:
        k = self._grid_index(start)
        while True:
            at = self._grid_at(k)
            if until is not None and at > until:
                return
            if at > start:
                yield at
            k += 1

    def _grid_before(self, at: datetime) -> datetime:
        k = self._grid_index(at) + 2
        while self._grid_at(k) >= at:
            k -= 1
        return self._grid_at(k)

    def _midnight(self, at: datetime) -> datetime:
        local = at.astimezone(self.tz)
        return datetime.combine(local.date(), time(0), tzinfo=self.tz)

    def _day_instants(self, midnight: datetime) -> Iterator[datetime]:
        """The instants of one local day (periods under one day), in order."""
        base = midnight + self.offset
        next_base = self._next_midnight(midnight) + self.offset
        at = base
        while at < next_base:
            yield at
            at = at + self.period

    def _next_midnight(self, midnight: datetime) -> datetime:
        # wall-clock arithmetic, then re-anchored: DST days are 23 or 25 hours long
        nxt = (midnight.replace(tzinfo=None) + DAY)
        return datetime.combine(nxt.date(), time(0), tzinfo=self.tz)

    def _long_step(self) -> timedelta:
        return self.period + self.offset

    def instants(self, after: datetime, until: datetime | None = None) -> Iterator[datetime]:
        """Instants strictly after ``after`` (and after creation), up to ``until`` inclusive."""
        start = max(after, self.created)
        if self.on_grid:
            yield from self._grid_after(start, until)
        elif self.period < DAY:
            midnight = self._midnight(start) - DAY  # an offset can put a day's last instant after midnight
            midnight = self._midnight(midnight)
            while True:
                for at in self._day_instants(midnight):
                    if until is not None and at > until:
                        return
                    if at > start:
                        yield at
                midnight = self._next_midnight(midnight)
        else:
            origin = self._midnight(self.created)
            step = self._long_step()
            k = max(1, int((start - origin) / step))
            while True:
                at = origin + k * step
                if until is not None and at > until:
                    return
                if at > start:
                    yield at
                k += 1

    def next_after(self, at: datetime) -> datetime:
        return next(self.instants(at))

    def previous(self, at: datetime) -> datetime | None:
        """The schedule's instant before ``at`` (creation not considered), or None at its origin."""
        if self.on_grid:
            return self._grid_before(at)
        if self.period < DAY:
            midnight = self._midnight(at)
            for _ in range(2):
                candidates = [t for t in self._day_instants(midnight) if t < at]
                if candidates:
                    return candidates[-1]
                midnight = self._midnight(midnight - timedelta(hours=12))
            return None
        origin = self._midnight(self.created)
        step = self._long_step()
        k = int((at - origin) / step)
        while k >= 1 and origin + k * step >= at:
            k -= 1
        return origin + k * step if k >= 1 else None


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class ResampleSchedule:
    """The instants of an IoTDB continuous query (reference 004, IoTDB's ``CQScheduleTask``):
    ``boundary + k * every`` with no daily restart. The first is the boundary when the query was
    created at or before it, else the first ``boundary + k * every`` at or after the creation."""

    every: timedelta
    boundary: datetime
    created: datetime

    def __post_init__(self) -> None:
        if self.every <= timedelta(0):
            raise ValueError(f"EVERY must be positive, not {self.every}")
        if self.created.tzinfo is None or self.boundary.tzinfo is None:
            raise ValueError("the boundary and creation time of a schedule need a time zone")

    @property
    def period(self) -> timedelta:
        return self.every

    @property
    def first(self) -> datetime:
        if self.created <= self.boundary:
            return self.boundary
        return self.boundary + -(-(self.created - self.boundary) // self.every) * self.every

    def at_or_after(self, at: datetime) -> datetime:
        """The first instant at or after ``at`` (not before the first)."""
        return max(self.first, self.on_grid(at))

    def on_grid(self, at: datetime) -> datetime:
        """The first ``boundary + k * every`` at or after ``at``, even before the query was created
        (a backfill recomputes such ranges)."""
        return self.boundary + -(-(at - self.boundary) // self.every) * self.every

    def instants(self, after: datetime, until: datetime | None = None) -> Iterator[datetime]:
        """Instants strictly after ``after``, up to ``until`` inclusive."""
        at = self.at_or_after(after)
        if at <= after:
            at += self.every
        while until is None or at <= until:
            yield at
            at += self.every

    def next_after(self, at: datetime) -> datetime:
        return next(self.instants(at))

    def previous(self, at: datetime) -> datetime | None:
        """The instant before ``at``, or None when ``at`` is at or before the first."""
        if at <= self.first:
            return None
        return self.at_or_after(at) - self.every


def resample_schedule(trigger: m.ResampleTrigger, created: datetime) -> ResampleSchedule:
    return ResampleSchedule(trigger.every.to_timedelta(), _EPOCH + timedelta(microseconds=trigger.boundary),
                            created)


def recalc_step(stmt: m.CreateStream) -> timedelta:
    """The event-time slice of one recalculation run: the window's step for INTERVAL and
    SLIDING, an hour for the data-driven windows."""
    trig = stmt.trigger
    if isinstance(trig, (m.IntervalWindow, m.SlidingTrigger)):
        return SHORTEST_MONTH * trig.sliding.months if trig.sliding.is_calendar else trig.sliding.to_timedelta()
    return timedelta(hours=1)


def stream_zone(stmt: m.CreateStream, default: tzinfo) -> tzinfo:
    """The zone of a stream's instants: its TIMEZONE clause (TDengine 3.4.3), else ``default``."""
    return ZoneInfo(stmt.timezone) if stmt.timezone else default


def schedule_of(stmt: m.CreateStream, anchor: datetime, tz: tzinfo, semantics: str = "3.3.7"
                ) -> Schedule | ResampleSchedule | None:
    """The instants of a PERIOD or SLIDING trigger, none at or before ``anchor`` (the stream's
    creation, or for SLIDING the start of a group's or a recalculation's event time), or of a
    continuous query's RESAMPLE; None for window triggers, which a detector fires. ``tz`` is the
    home's zone, which the stream's TIMEZONE overrides; ``semantics`` the TDengine version the
    stream follows (its SEMANTICS option overrides it)."""
    trig = stmt.trigger
    if isinstance(trig, m.ResampleTrigger):
        return resample_schedule(trig, anchor)
    if isinstance(trig, m.PeriodTrigger):
        step = trig.period
    elif isinstance(trig, m.SlidingTrigger):
        step = trig.sliding
    else:
        return None
    zone = stream_zone(stmt, tz)
    offset = trig.offset.to_timedelta() if trig.offset else timedelta(0)
    if step.is_calendar:
        return Schedule.calendar(step.months, offset, zone, anchor)
    aligned = isinstance(trig, m.PeriodTrigger) and (stmt.options.semantics or semantics) == "3.4"
    return Schedule(step.to_timedelta(), offset, zone, anchor, aligned=aligned)
