"""The instants of PERIOD and SLIDING triggers (reference 000, "Scheduled Trigger", "Sliding Trigger").

- A period under one day restarts every local day at midnight + offset: the day's instants are
  ``base, base + p, base + 2p, ...`` before the next day's base.
- A period of one day or more counts from midnight of the creation day and never resets; the
  reference's worked examples step by period + offset (``1d1h`` with offset ``1m`` created on 05-01
  fires at 05-02 01:01, 05-03 02:02, 05-04 03:03).
- Only instants after the creation time fire.

SLIDING follows the same rules over event time. Times are aware datetimes; days are those of ``tz``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta, tzinfo

from airflow_stream_provider import model as m

DAY = timedelta(days=1)


@dataclass(frozen=True)
class Schedule:
    period: timedelta
    offset: timedelta
    tz: tzinfo
    created: datetime  # instants at or before it never fire

    def __post_init__(self) -> None:
        if self.period <= timedelta(0):
            raise ValueError(f"a schedule period must be positive, not {self.period}")
        if not timedelta(0) <= self.offset < DAY:
            raise ValueError(f"a schedule offset must be in [0, 1 day), not {self.offset}")
        if self.created.tzinfo is None:
            raise ValueError("the creation time of a schedule needs a time zone")

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
        if self.period < DAY:
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
    if isinstance(trig, m.IntervalWindow):
        return (trig.sliding or trig.interval).to_timedelta()
    if isinstance(trig, m.SlidingTrigger):
        return trig.sliding.to_timedelta()
    return timedelta(hours=1)


def schedule_of(stmt: m.CreateStream, anchor: datetime, tz: tzinfo) -> Schedule | ResampleSchedule | None:
    """The instants of a PERIOD or SLIDING trigger, none at or before ``anchor`` (the stream's
    creation, or for SLIDING the start of a group's or a recalculation's event time), or of a
    continuous query's RESAMPLE; None for window triggers, which a detector fires."""
    trig = stmt.trigger
    if isinstance(trig, m.ResampleTrigger):
        return resample_schedule(trig, anchor)
    if isinstance(trig, m.PeriodTrigger):
        step = trig.period
    elif isinstance(trig, m.SlidingTrigger):
        step = trig.sliding
    else:
        return None
    return Schedule(step.to_timedelta(), trig.offset.to_timedelta() if trig.offset else timedelta(0), tz, anchor)
