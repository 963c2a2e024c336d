"""The timetable of an IoTDB continuous query (reference 004; IoTDB's ``CQScheduleTask``).

Runs at the instants ``boundary + k * every`` (no daily restart; the first is the boundary when
the query was created at or before it, else the first instant at or after the creation). The run
at instant ``i`` has the data interval ``[i - start_offset, i - end_offset)``: the range the query
computes, taken from the scheduled instant even when the run starts late. Its logical date is the
interval's start, so ``airflow backfill create --from-date --to-date`` recomputes past ranges, also
those before the query was created. The DAG's start date is its first range's start.

TIMEOUT POLICY:

- ``BLOCKED``: every instant runs, one at a time, behind if need be (the DAG catches up);
- ``DISCARD``: after a late run (or a pause, or a scheduler that was down) the next run is the
  first instant at or after now; the instants in between are skipped. A backfill still runs every
  instant of its range (Airflow asks with ``catchup`` then).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pendulum
from airflow.timetables.base import DagRunInfo, DataInterval, TimeRestriction, Timetable

from airflow_stream_provider.plan.schedule import ResampleSchedule
from airflow_stream_provider.timetables.time import duration, format_duration, utc_datetime

CLASSPATH_MODULE = "airflow_stream_provider.timetables"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _pendulum(at: datetime) -> pendulum.DateTime:
    return pendulum.instance(at.astimezone(UTC))


def _aware(value: datetime | str) -> datetime:
    value = datetime.fromisoformat(value) if isinstance(value, str) else value
    if value.tzinfo is None:
        raise ValueError(f"{value} needs a time zone")
    return value


class ResampleTimetable(Timetable):
    """``RESAMPLE EVERY e BOUNDARY b RANGE s, t TIMEOUT POLICY p`` of a continuous query.

    :param every: EVERY, the time between two instants:
        a ``timedelta`` or a TDengine duration such as ``10s`` or ``5h30m``.
    :param boundary: BOUNDARY, the instant the grid ``boundary + k * every`` is laid from: a
        time-zone-aware ``datetime`` or ISO 8601 text.
    :param start_offset: RANGE's start: a run at instant ``i`` computes from ``i - start_offset``;
        a ``timedelta`` or a TDengine duration such as ``10s`` or ``5h30m``.
    :param end_offset: RANGE's end: the run computes up to ``i - end_offset``, excluded; default 0.
    :param policy: TIMEOUT POLICY, ``BLOCKED`` (the default) or ``DISCARD``, in any case (see the
        module's text).
    :param created: the query's creation time, a time-zone-aware ``datetime`` or ISO 8601 text; the
        first instant is the boundary, or the first one at or after it; default the Unix epoch.
    """

    __module__ = CLASSPATH_MODULE
    periodic = True
    run_ordering = ("data_interval_end", "logical_date")

    def __init__(self, every: timedelta | str, boundary: datetime | str, start_offset: timedelta | str,
                 end_offset: timedelta | str = timedelta(0), policy: str = "BLOCKED",
                 created: datetime | str = _EPOCH) -> None:
        self.every = duration(every)
        self.boundary = _aware(boundary)
        self.start_offset = duration(start_offset)
        self.end_offset = duration(end_offset)
        self.policy = policy.upper()
        if self.policy not in ("BLOCKED", "DISCARD"):
            raise ValueError(f"TIMEOUT POLICY is BLOCKED or DISCARD, not {policy!r}")
        self.created = _aware(created)
        self.schedule = ResampleSchedule(self.every, self.boundary, self.created)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.serialize() == self.serialize()

    def __hash__(self) -> int:
        return hash((type(self).__name__, *self.serialize().values()))

    def __repr__(self) -> str:
        return f"ResampleTimetable({self.summary}, created={self.created.isoformat()})"

    @property
    def summary(self) -> str:
        return f"RESAMPLE EVERY {format_duration(self.every)}"

    @property
    def description(self) -> str:  # type: ignore[override]  # Airflow declares a str attribute, not a property
        return (f"every {format_duration(self.every)} from {self.boundary.isoformat()}, each run over "
                f"[instant - {format_duration(self.start_offset)}, instant - {format_duration(self.end_offset)}), "
                f"TIMEOUT POLICY {self.policy}")

    # --- (de)serialization --------------------------------------------------------------------

    def serialize(self) -> dict[str, Any]:
        return {"every": self.every.total_seconds(), "boundary": self.boundary.isoformat(),
                "start_offset": self.start_offset.total_seconds(), "end_offset": self.end_offset.total_seconds(),
                "policy": self.policy, "created": self.created.isoformat()}

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> Timetable:
        return cls(timedelta(seconds=data["every"]), data["boundary"], timedelta(seconds=data["start_offset"]),
                   timedelta(seconds=data["end_offset"]), data["policy"], data["created"])

    def validate(self) -> None:
        from airflow.exceptions import AirflowTimetableInvalid

        if self.every <= timedelta(0) or self.start_offset <= self.end_offset:
            raise AirflowTimetableInvalid("EVERY must be positive and RANGE's start above its end")

    # --- scheduling ---------------------------------------------------------------------------

    def interval(self, at: datetime) -> DataInterval:
        """The range the run at instant ``at`` computes."""
        return DataInterval(_pendulum(at - self.start_offset), _pendulum(at - self.end_offset))

    def instant(self, interval: DataInterval) -> datetime:
        """The instant of the run with data interval ``interval``."""
        return utc_datetime(interval.end) + self.end_offset

    def infer_manual_data_interval(self, *, run_after: pendulum.DateTime) -> DataInterval:
        at = utc_datetime(run_after)
        latest = at if self.schedule.at_or_after(at) == at else self.schedule.previous(at)
        return self.interval(latest or self.schedule.first)

    def next_dagrun_info(self, *, last_automated_data_interval: DataInterval | None,
                         restriction: TimeRestriction) -> DagRunInfo | None:
        return self.next_instant_info(last_automated_data_interval, restriction, datetime.now(UTC))

    def next_instant_info(self, last: DataInterval | None, restriction: TimeRestriction,
                          now: datetime) -> DagRunInfo | None:
        """:meth:`next_dagrun_info` at the wall-clock time ``now``."""
        if last is not None:
            at = self.instant(last) + self.every  # on the grid, also before the first (a backfill)
        elif restriction.earliest is not None:  # the first range starting at the DAG's start date or a backfill's
            at = self.schedule.on_grid(utc_datetime(restriction.earliest) + self.start_offset)
        else:
            at = self.schedule.first
        if self.policy == "DISCARD" and not restriction.catchup and at < now:
            at = self.schedule.at_or_after(now)  # the missed instants are discarded
        if restriction.earliest is not None:
            earliest = utc_datetime(restriction.earliest)
            while at - self.start_offset < earliest:
                at = self.schedule.next_after(at)
        interval = self.interval(at)
        if restriction.latest is not None and utc_datetime(interval.start) > utc_datetime(restriction.latest):
            return None
        return DagRunInfo(run_after=_pendulum(at), data_interval=interval)
