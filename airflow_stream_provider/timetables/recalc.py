"""``RecalcTimetable``: the event-time slices of a stream's recalculation DAG, run by backfills."""

from __future__ import annotations

from airflow.timetables.base import DagRunInfo, DataInterval, TimeRestriction

from airflow_stream_provider.timetables.schedule import CLASSPATH_MODULE, ScheduleTimetable


class RecalcTimetable(ScheduleTimetable):
    """The event-time slices of a stream's recalculation DAG. It schedules nothing by itself: its
    runs are created by backfills (``RECALCULATE STREAM``, ``airflow backfill create`` or the UI's
    Backfill dialog), each recalculating the windows that start in its data interval.

    :param period: the length of one run's slice of event time:
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
    keyword = "RECALCULATE"

    @property
    def summary(self) -> str:
        return f"{super().summary} on backfill"

    def next_dagrun_info(self, *, last_automated_data_interval: DataInterval | None,
                         restriction: TimeRestriction) -> DagRunInfo | None:
        if restriction.latest is None:  # the scheduler asking: runs come from backfills only
            return None
        return super().next_dagrun_info(last_automated_data_interval=last_automated_data_interval,
                                        restriction=restriction._replace(catchup=True))
