"""Timetables of PERIOD and SLIDING triggers: :class:`ScheduleTimetable` and its two kinds.

The instants follow reference 000 "Scheduled Trigger" and "Sliding Trigger" through
:class:`~airflow_stream_provider.plan.schedule.Schedule`:

- a period under one day restarts at local midnight + offset every day;
- a period of one day or more counts from the creation day's midnight + offset and never resets;
- only instants after creation fire.

A run's data interval is ``(previous instant, instant]``: ``_tprev_localtime`` and
``_tlocaltime`` of the TDengine placeholders. Under the DAG's start date (the creation time, which
Airflow passes as ``restriction.earliest``) the first run's interval starts at the creation time, so
that its logical date is not before the start date. The timetables are registered through the
provider's plugin, so the scheduler and the API server can deserialize them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pendulum
from airflow.timetables.base import DagRunInfo, DataInterval, TimeRestriction, Timetable

from airflow_stream_provider.plan.schedule import Schedule
from airflow_stream_provider.timetables.time import duration, format_duration, utc_datetime

#: the module serialized DAGs name these classes by: the package, which re-exports them, so that a
#: DAG serialized before a module moved still deserializes (Airflow looks timetables up by this path)
CLASSPATH_MODULE = "airflow_stream_provider.timetables"

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _aware(value: datetime | str | None, default: datetime) -> datetime:
    if value is None:
        return default
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:
        raise ValueError(f"the creation time {value} needs a time zone")
    return value


def _pendulum(at: datetime) -> pendulum.DateTime:
    return pendulum.instance(at.astimezone(UTC))


class ScheduleTimetable(Timetable):
    """Runs at the instants of a :class:`Schedule`; each run's data interval ends at its instant.

    :param period: the time between two instants:
        a ``timedelta`` or a TDengine duration such as ``10s`` or ``5h30m``.
    :param offset: how long after local midnight the instants start, under one day:
        a ``timedelta`` or a TDengine duration such as ``10s`` or ``5h30m``; default 0.
    :param timezone: the IANA time zone whose midnight the instants count from; default ``UTC``.
    :param created: the creation time, a time-zone-aware ``datetime`` or ISO 8601 text: only instants
        after it fire; default None, the Unix epoch.
    :param months: a calendar period of this many months (``PERIOD(1n)``, ``PERIOD(1q)`` is 3,
        ``PERIOD(1y)`` 12), fired on the first of every ``months``-th month from January 1970 plus the
        offset (which may then be days); ``period`` is ignored. Default 0: ``period`` is fixed.
    :param aligned: a period of a day or more fires at whole periods from the epoch, weeks from
        Monday 1970-01-05 (TDengine 3.4); default False, from the creation day (TDengine 3.3.7).
    """

    keyword = ""
    periodic = True
    run_ordering = ("data_interval_end", "logical_date")

    def __init__(self, period: timedelta | str, offset: timedelta | str = timedelta(0), timezone: str = "UTC",
                 created: datetime | str | None = None, *, months: int = 0, aligned: bool = False) -> None:
        self.offset = duration(offset)
        self.timezone = str(timezone)
        self.created = _aware(created, _EPOCH)
        self.months = int(months)
        self.aligned = bool(aligned) or self.months > 0
        if self.months:
            self.schedule = Schedule.calendar(self.months, self.offset, ZoneInfo(self.timezone), self.created)
        else:
            self.schedule = Schedule(duration(period), self.offset, ZoneInfo(self.timezone), self.created,
                                     aligned=self.aligned)
        self.period = self.schedule.period

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.serialize() == self.serialize()

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.period, self.offset, self.timezone, self.created, self.months))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.summary}, timezone={self.timezone!r}, created={self.created.isoformat()})"

    # --- display ------------------------------------------------------------------------------

    @property
    def summary(self) -> str:
        inner = f"{self.months}n" if self.months else format_duration(self.period)
        if self.offset:
            inner += f", {format_duration(self.offset)}"
        return f"{self.keyword}({inner})"

    @property
    def description(self) -> str:  # type: ignore[override]  # Airflow declares a str attribute, not a property
        if self.months:
            origin = f"on the first of every {self.months}th month from 1970-01" if self.months > 1 else \
                "on the first of every month"
            every = f"{self.months} month{'s' if self.months > 1 else ''}"
            offset = f" + {format_duration(self.offset)}" if self.offset else ""
            return f"every {every}, {origin}{offset} ({self.timezone})"
        if self.aligned and self.period >= timedelta(days=1):
            origin = "counting whole periods from the epoch (weeks from Monday 1970-01-05)"
        elif self.period < timedelta(days=1):
            origin = "restarting every day at local midnight"
        else:
            origin = f"counting from {self.created.astimezone(ZoneInfo(self.timezone)):%Y-%m-%d} local midnight"
        offset = f" + {format_duration(self.offset)}" if self.offset else ""
        return f"every {format_duration(self.period)}, {origin}{offset} ({self.timezone})"

    # --- (de)serialization --------------------------------------------------------------------

    def serialize(self) -> dict[str, Any]:
        out = {"period": self.period.total_seconds(), "offset": self.offset.total_seconds(),
               "timezone": self.timezone, "created": self.created.isoformat()}
        if self.months:
            out["months"] = self.months
        elif self.aligned:
            out["aligned"] = True
        return out

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> Timetable:
        return cls(timedelta(seconds=data["period"]), timedelta(seconds=data["offset"]), data["timezone"],
                   data["created"], months=data.get("months", 0), aligned=data.get("aligned", False))

    def validate(self) -> None:
        from airflow.exceptions import AirflowTimetableInvalid

        if self.period <= timedelta(0):
            raise AirflowTimetableInvalid(f"{self.keyword} period must be positive")

    # --- scheduling ---------------------------------------------------------------------------

    def _interval(self, at: datetime) -> DataInterval:
        """The data interval of the run at ``at``: from the previous instant to ``at``."""
        start = self.schedule.previous(at) or max(self.created, at - self.period)
        return DataInterval(_pendulum(start), _pendulum(at))

    def _latest_due(self, now: datetime) -> datetime | None:
        """The last instant at or before ``now`` that fires (after creation)."""
        at = now if self._fires(now) else self.schedule.previous(now)
        return at if at is not None and at > self.created else None

    def _fires(self, at: datetime) -> bool:
        before = self.schedule.previous(at)
        return self.schedule.next_after(before if before is not None else at - self.period) == at

    def infer_manual_data_interval(self, *, run_after: pendulum.DateTime) -> DataInterval:
        at = self._latest_due(utc_datetime(run_after)) or utc_datetime(run_after)
        return self._interval(at)

    def next_dagrun_info(self, *, last_automated_data_interval: DataInterval | None,
                         restriction: TimeRestriction) -> DagRunInfo | None:
        after = self.created
        if last_automated_data_interval is not None:
            after = max(after, utc_datetime(last_automated_data_interval.end))
        if not restriction.catchup:
            latest_due = self._latest_due(datetime.now(UTC))
            if latest_due is not None:
                after = max(after, latest_due - timedelta(microseconds=1))
        earliest = utc_datetime(restriction.earliest) if restriction.earliest is not None else None
        if earliest is not None:
            after = max(after, earliest - timedelta(microseconds=1))
        at = self.schedule.next_after(after)
        if earliest is None:
            interval = self._interval(at)
        else:  # the first run whose logical date (its data interval's start) is not before it
            while (interval := self._restricted_interval(at)).start < earliest:
                at = self.schedule.next_after(at)
        if restriction.latest is not None and interval.start > restriction.latest:
            return None
        return DagRunInfo(run_after=_pendulum(at), data_interval=interval)

    def _restricted_interval(self, at: datetime) -> DataInterval:
        """The data interval of the run at ``at`` when the DAG has a start date: the first run
        after creation covers ``(created, at]``.

        Airflow passes the DAG's start date (the stream's creation time) as ``restriction.earliest``
        and creates no task of a run whose logical date is before it. The first instant's previous
        instant is before creation (PERIOD(5h30m, 1m) created at 12:00 fires first at 16:31, whose
        previous instant is 11:01), so that run starts at the creation time instead, or it would
        never run (reference 000: created at 12:00, the day's triggers are 16:31 and 22:01).
        ``_tprev_localtime`` still comes from the schedule: the compute reads only the interval's end.
        """
        interval = self._interval(at)
        return interval if interval.start >= self.created else DataInterval(_pendulum(self.created), _pendulum(at))


class PeriodTimetable(ScheduleTimetable):
    """``PERIOD(period[, offset])``: wall-clock instants in ``timezone`` after ``created``.

    :param period: PERIOD's period, the time between two instants:
        a ``timedelta`` or a TDengine duration such as ``10s`` or ``5h30m``.
    :param offset: how long after local midnight the instants start, under one day:
        a ``timedelta`` or a TDengine duration such as ``10s`` or ``5h30m``; default 0.
    :param timezone: the IANA time zone whose midnight the instants count from; default ``UTC``.
    :param created: the creation time, a time-zone-aware ``datetime`` or ISO 8601 text: only instants
        after it fire; default None, the Unix epoch.
    :param months: a calendar period of this many months (0: ``period`` is fixed); see
        :class:`ScheduleTimetable`.
    :param aligned: a period of a day or more counts from the epoch (TDengine 3.4); default False.
    """

    __module__ = CLASSPATH_MODULE
    keyword = "PERIOD"


class SlidingTimetable(ScheduleTimetable):
    """``SLIDING(period[, offset])`` without INTERVAL: the instants over event time. Each run waits
    (a deferrable sensor) until the trigger table's event time minus WATERMARK passes its instant.

    :param period: SLIDING's period, the time between two instants:
        a ``timedelta`` or a TDengine duration such as ``10s`` or ``5h30m``.
    :param offset: how long after local midnight the instants start, under one day:
        a ``timedelta`` or a TDengine duration such as ``10s`` or ``5h30m``; default 0.
    :param timezone: the IANA time zone whose midnight the instants count from; default ``UTC``.
    :param created: the creation time, a time-zone-aware ``datetime`` or ISO 8601 text: only instants
        after it fire; default None, the Unix epoch.
    :param months: a calendar period of this many months (0: ``period`` is fixed); see
        :class:`ScheduleTimetable`.
    :param aligned: a period of a day or more counts from the epoch (TDengine 3.4); default False.
    """

    __module__ = CLASSPATH_MODULE
    keyword = "SLIDING"
