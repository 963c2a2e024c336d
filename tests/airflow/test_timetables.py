"""PERIOD/SLIDING timetables: the worked examples of reference 000 "Scheduled Trigger", run by
Airflow's own scheduling calls, and their round trip through Airflow's serializer."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pendulum
import pytest
from airflow.timetables.base import TimeRestriction

from airflow_stream_provider.timetables import (
    PeriodTimetable,
    RecalcTimetable,
    SlidingTimetable,
    duration,
    format_duration,
)

CATCHUP = TimeRestriction(earliest=None, latest=None, catchup=True)


def _runs(timetable, count, restriction=CATCHUP, tz=UTC):
    out, info = [], None
    while len(out) < count:
        info = timetable.next_dagrun_info(last_automated_data_interval=info and info.data_interval,
                                          restriction=restriction)
        if info is None:
            break
        out.append(info.run_after.astimezone(tz).strftime("%m-%d %H:%M"))
    return out


MIDNIGHT = datetime(2025, 5, 1, tzinfo=UTC) - timedelta(microseconds=1)
NOON = datetime(2025, 5, 1, 12, tzinfo=UTC)


@pytest.mark.parametrize("period, offset, created, expected", [
    ("5h30m", "0s", MIDNIGHT, ["05-01 00:00", "05-01 05:30", "05-01 11:00", "05-01 16:30", "05-01 22:00",
                               "05-02 00:00", "05-02 05:30"]),
    ("5h30m", "1m", MIDNIGHT, ["05-01 00:01", "05-01 05:31", "05-01 11:01", "05-01 16:31", "05-01 22:01",
                               "05-02 00:01", "05-02 05:31"]),
    ("5h30m", "1m", NOON, ["05-01 16:31", "05-01 22:01", "05-02 00:01", "05-02 05:31", "05-02 11:01",
                           "05-02 16:31", "05-02 22:01"]),
    ("1d1h", "0s", NOON, ["05-02 01:00", "05-03 02:00", "05-04 03:00", "05-05 04:00"]),
    ("1d1h", "1m", NOON, ["05-02 01:01", "05-03 02:02", "05-04 03:03", "05-05 04:04"]),
])
def test_reference_worked_examples(period, offset, created, expected):
    """Reference 000, "Scheduled Trigger": each example's listed trigger times, in order."""
    assert _runs(PeriodTimetable(period, offset, "UTC", created), len(expected)) == expected


def test_timedelta_arguments_equal_duration_strings():
    a = PeriodTimetable(timedelta(hours=5, minutes=30), timedelta(minutes=1), "UTC", NOON)
    b = PeriodTimetable("5h30m", "1m", "UTC", NOON)
    assert a == b and _runs(a, 3) == _runs(b, 3)


def test_days_are_those_of_the_time_zone():
    created = datetime(2025, 5, 1, 12, tzinfo=ZoneInfo("Asia/Shanghai"))
    tt = PeriodTimetable("5h30m", "0s", "Asia/Shanghai", created)
    tz = ZoneInfo("Asia/Shanghai")
    assert _runs(tt, 3, tz=tz) == ["05-01 16:30", "05-01 22:00", "05-02 00:00"]
    first = tt.next_dagrun_info(last_automated_data_interval=None, restriction=CATCHUP)
    assert first.run_after == pendulum.datetime(2025, 5, 1, 8, 30, tz="UTC")  # 16:30 at UTC+8


def test_data_interval_runs_from_the_previous_instant():
    tt = PeriodTimetable("5h30m", "1m", "UTC", NOON)
    info = tt.next_dagrun_info(last_automated_data_interval=None, restriction=CATCHUP)
    assert info.data_interval.start == pendulum.datetime(2025, 5, 1, 11, 1, tz="UTC")
    assert info.data_interval.end == info.run_after == pendulum.datetime(2025, 5, 1, 16, 31, tz="UTC")


def test_without_catchup_the_next_run_is_the_latest_due_instant():
    tt = PeriodTimetable("1h", "0s", "UTC", NOON)
    info = tt.next_dagrun_info(last_automated_data_interval=None,
                               restriction=TimeRestriction(None, None, catchup=False))
    now = pendulum.now("UTC")
    assert now - timedelta(hours=1) < info.run_after <= now
    assert info.run_after.minute == 0 and info.run_after.second == 0


def test_restriction_bounds_the_runs():
    tt = PeriodTimetable("5h30m", "1m", "UTC", NOON)
    earliest = pendulum.datetime(2025, 5, 2, tz="UTC")
    bounded = TimeRestriction(earliest, pendulum.datetime(2025, 5, 2, 12, tz="UTC"), catchup=True)
    assert _runs(tt, 10, bounded) == ["05-02 05:31", "05-02 11:01", "05-02 16:31"]


def test_manual_run_covers_the_latest_instant():
    tt = PeriodTimetable("1h", "0s", "UTC", NOON)
    interval = tt.infer_manual_data_interval(run_after=pendulum.datetime(2025, 5, 1, 15, 20, tz="UTC"))
    assert (interval.start, interval.end) == (pendulum.datetime(2025, 5, 1, 14, tz="UTC"),
                                              pendulum.datetime(2025, 5, 1, 15, tz="UTC"))


def test_summary_and_description():
    assert PeriodTimetable("5h30m", "1m", "UTC", NOON).summary == "PERIOD(5h30m, 1m)"
    assert SlidingTimetable("10s", "0s", "UTC", NOON).summary == "SLIDING(10s)"
    assert "restarting every day at local midnight + 1m" in PeriodTimetable("5h30m", "1m").description
    assert "counting from 2025-05-01" in PeriodTimetable("1d1h", "0s", "UTC", NOON).description


@pytest.mark.parametrize("cls", [PeriodTimetable, SlidingTimetable, RecalcTimetable])
def test_airflow_serializer_round_trip(cls):
    """Airflow encodes a custom timetable only when a plugin registers it, and decodes it by name."""
    from airflow.serialization.decoders import decode_timetable
    from airflow.serialization.encoders import encode_timetable

    tt = cls("1d1h", "1m", "Asia/Shanghai", NOON)
    assert cls.deserialize(tt.serialize()) == tt
    encoded = encode_timetable(tt)
    # serialized DAGs of running deployments name the class by this path: it must not move
    assert encoded["__type"] == f"airflow_stream_provider.timetables.{cls.__name__}"
    decoded = decode_timetable(encoded)
    assert type(decoded) is cls and decoded == tt
    assert _runs(decoded, 2) == _runs(tt, 2)
    assert decoded.periodic


def test_recalculation_runs_only_in_backfills():
    tt = RecalcTimetable("10m", "0s", "UTC")
    assert tt.next_dagrun_info(last_automated_data_interval=None, restriction=CATCHUP) is None
    window = TimeRestriction(pendulum.datetime(2025, 5, 1, tz="UTC"), pendulum.datetime(2025, 5, 1, 0, 30, tz="UTC"),
                             catchup=False)
    runs, info = [], None
    while (info := tt.next_dagrun_info(last_automated_data_interval=info and info.data_interval,
                                       restriction=window)) is not None:
        runs.append((info.data_interval.start.strftime("%H:%M"), info.data_interval.end.strftime("%H:%M")))
    assert runs == [("00:00", "00:10"), ("00:10", "00:20"), ("00:20", "00:30"), ("00:30", "00:40")]


@pytest.mark.parametrize("text, expected", [("10s", timedelta(seconds=10)),
                                            ("5h30m", timedelta(hours=5, minutes=30)),
                                            ("1d1h", timedelta(days=1, hours=1)),
                                            ("500a", timedelta(milliseconds=500))])
def test_durations(text, expected):
    assert duration(text) == expected
    assert duration(format_duration(expected)) == expected


@pytest.mark.parametrize("bad", ["", "5x", "h5", "5h 30m", "-1s"])
def test_bad_durations_are_rejected_by_value(bad):
    with pytest.raises(ValueError, match="is not a duration"):
        duration(bad)


def _as_scheduled(created: datetime, catchup: bool = True) -> TimeRestriction:
    """The restriction the scheduler passes: the DAG's start date, which is the creation time."""
    return TimeRestriction(earliest=pendulum.instance(created), latest=None, catchup=catchup)


LATE = datetime(2025, 5, 1, 23, 59, tzinfo=UTC)


@pytest.mark.parametrize("period, offset, created, expected", [
    # reference 000: created at 12:00, the day's triggers are 16:31 and 22:01
    ("5h30m", "1m", NOON, ["05-01 16:31", "05-01 22:01", "05-02 00:01", "05-02 05:31"]),
    ("5h30m", "0s", NOON, ["05-01 16:30", "05-01 22:00", "05-02 00:00"]),
    # created a minute before midnight: the first trigger is the next day's 00:00
    ("5h30m", "0s", LATE, ["05-02 00:00", "05-02 05:30", "05-02 11:00"]),
    ("1d1h", "0s", NOON, ["05-02 01:00", "05-03 02:00", "05-04 03:00"]),
    ("1d1h", "1m", NOON, ["05-02 01:01", "05-03 02:02"]),
])
def test_first_instant_fires_under_the_dags_start_date(period, offset, created, expected):
    """Airflow passes the DAG's start date (the creation time) as ``earliest`` and creates no task
    of a run whose logical date is before it: the first run starts at the creation time."""
    tt = PeriodTimetable(period, offset, "UTC", created)
    assert _runs(tt, len(expected), _as_scheduled(created)) == expected
    first = tt.next_dagrun_info(last_automated_data_interval=None, restriction=_as_scheduled(created))
    assert first.logical_date == first.data_interval.start == pendulum.instance(created)
    assert first.data_interval.end == first.run_after
    second = tt.next_dagrun_info(last_automated_data_interval=first.data_interval, restriction=_as_scheduled(created))
    assert second.data_interval.start == first.run_after  # from then on, from the previous instant


@pytest.mark.parametrize("period, offset, since_created, first_due", [
    ("5h30m", "1m", timedelta(hours=1), "05-01 16:31"),   # nothing due yet: the first instant
    ("5h30m", "1m", timedelta(hours=5), "05-01 16:31"),   # 16:31 is due now: it runs
    ("5h30m", "1m", timedelta(hours=11), "05-01 22:01"),  # without catchup, only the latest due instant
    ("5h30m", "0s", timedelta(minutes=2), "05-02 00:00"),
])
def test_first_instant_fires_without_catchup(period, offset, since_created, first_due, monkeypatch):
    """``catchup=False``: the scheduler's restriction with the clock at ``created + since_created``."""
    from airflow_stream_provider.timetables import schedule

    created = NOON if offset == "1m" else LATE
    now = created + since_created

    class Clock(datetime):
        @classmethod
        def now(cls, tz=None):
            return now

    monkeypatch.setattr(schedule, "datetime", Clock)
    tt = PeriodTimetable(period, offset, "UTC", created)
    info = tt.next_dagrun_info(last_automated_data_interval=None, restriction=_as_scheduled(created, False))
    assert info.run_after.strftime("%m-%d %H:%M") == first_due
    assert info.logical_date >= pendulum.instance(created)  # Airflow creates the run's tasks


def test_sliding_under_the_dags_start_date():
    created = datetime(2025, 5, 1, 12, 0, 5, tzinfo=UTC)
    tt = SlidingTimetable("10s", "0s", "UTC", created)
    first = tt.next_dagrun_info(last_automated_data_interval=None, restriction=_as_scheduled(created))
    assert first.run_after == pendulum.datetime(2025, 5, 1, 12, 0, 10, tz="UTC")
    assert first.data_interval.start == pendulum.instance(created)
