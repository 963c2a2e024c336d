"""Calendar PERIOD/SLIDING units, TIMEZONE and the 3.3.7/3.4 semantics switch of PERIOD schedules.

Expected instants are worked out by hand from the calendar: month lengths (January 31 days,
February 28 or 29), leap years (2024 yes, 2100 no), Europe/Berlin's daylight saving changes (last
Sunday of March at 02:00 +01:00, last Sunday of October at 03:00 +02:00), and TDengine's own unit
tests of natural units (weeks start on Monday; ``PERIOD(2w)`` has a boundary on 2026-03-02;
``PERIOD(3n)`` on 2026-01-01; ``PERIOD(1w, 1d)`` fires on Tuesdays).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.plan.schedule import Schedule, schedule_of
from airflow_stream_provider.sql import parse
from airflow_stream_provider.sql.tdengine.versions import changes_under_3_4

BERLIN = ZoneInfo("Europe/Berlin")
SHANGHAI = ZoneInfo("Asia/Shanghai")


def _stream(trigger: str, tail: str = "") -> m.CreateStream:
    stmt = parse(f"CREATE STREAM s {trigger} {tail} INTO o AS SELECT now() AS ts, 1 AS v")[0]
    assert isinstance(stmt, m.CreateStream)
    return stmt


def _local(schedule: Schedule, after: datetime, count: int, tz=BERLIN) -> list[str]:
    out = []
    for at in schedule.instants(after):
        out.append(at.astimezone(tz).strftime("%Y-%m-%d %H:%M %z"))
        if len(out) == count:
            return out
    return out


@pytest.mark.parametrize(("trigger", "created", "expected"), [
    # the first of every month at local midnight; Berlin is +01:00 in winter, +02:00 from the end of March
    ("PERIOD(1n)", datetime(2024, 1, 20, tzinfo=UTC),
     ["2024-02-01 00:00 +0100", "2024-03-01 00:00 +0100", "2024-04-01 00:00 +0200", "2024-05-01 00:00 +0200"]),
    # 14 days after the first: the 15th of each month, whatever the month's length
    ("PERIOD(1n, 14d)", datetime(2024, 1, 20, tzinfo=UTC),
     ["2024-02-15 00:00 +0100", "2024-03-15 00:00 +0100", "2024-04-15 00:00 +0200"]),
    # 27 days after the first of a leap February is the 28th; 2024-02-28 comes after the 20th of February
    ("PERIOD(1n, 27d)", datetime(2024, 2, 20, tzinfo=UTC),
     ["2024-02-28 00:00 +0100", "2024-03-28 00:00 +0100", "2024-04-28 00:00 +0200"]),
    # quarters count from January 1970: January, April, July, October
    ("PERIOD(1q)", datetime(2024, 2, 10, tzinfo=UTC),
     ["2024-04-01 00:00 +0200", "2024-07-01 00:00 +0200", "2024-10-01 00:00 +0200", "2025-01-01 00:00 +0100"]),
    ("PERIOD(3n, 1h)", datetime(2024, 2, 10, tzinfo=UTC), ["2024-04-01 01:00 +0200", "2024-07-01 01:00 +0200"]),
    # whole years from 1970: 2y falls on even years
    ("PERIOD(2y)", datetime(2025, 6, 1, tzinfo=UTC), ["2026-01-01 00:00 +0100", "2028-01-01 00:00 +0100"]),
    # 59 days after January 1st is March 1st in 2023, February 29th in 2024
    ("PERIOD(1y, 59d)", datetime(2023, 1, 1, tzinfo=UTC), ["2023-03-01 00:00 +0100", "2024-02-29 00:00 +0100"]),
])
def test_calendar_periods_fire_on_month_boundaries(trigger: str, created: datetime, expected: list[str]) -> None:
    stmt = _stream(trigger, "TIMEZONE 'Europe/Berlin'")
    schedule = schedule_of(stmt, created, ZoneInfo("UTC"))
    assert isinstance(schedule, Schedule)
    assert _local(schedule, created, len(expected)) == expected


def test_previous_instant_of_a_calendar_period_is_the_month_before() -> None:
    schedule = schedule_of(_stream("PERIOD(1n)", "TIMEZONE 'Europe/Berlin'"), datetime(2020, 1, 1, tzinfo=UTC), UTC)
    assert isinstance(schedule, Schedule)
    # 2024-03-01 00:00 Berlin is 2024-02-29 23:00 UTC: the instant before it is 2024-02-01 00:00 Berlin
    assert schedule.previous(datetime(2024, 2, 29, 23, 0, tzinfo=UTC)) == datetime(2024, 1, 31, 23, 0, tzinfo=UTC)
    assert schedule.next_after(datetime(2024, 2, 29, 22, 59, tzinfo=UTC)) == datetime(2024, 2, 29, 23, 0, tzinfo=UTC)


def test_the_timezone_clause_moves_the_instants_not_the_home_zone() -> None:
    created = datetime(2026, 2, 15, tzinfo=UTC)
    home = ZoneInfo("America/New_York")
    shanghai = schedule_of(_stream("PERIOD(1n)", "TIMEZONE 'Asia/Shanghai'"), created, home)
    plain = schedule_of(_stream("PERIOD(1n)"), created, home)
    # midnight of March 1st in Shanghai (+08:00) is 16:00 UTC the day before; in New York (-05:00) 05:00 UTC
    assert shanghai.next_after(created) == datetime(2026, 2, 28, 16, 0, tzinfo=UTC)
    assert plain.next_after(created) == datetime(2026, 3, 1, 5, 0, tzinfo=UTC)


@pytest.mark.parametrize(("semantics", "expected"), [
    # 3.3.7: from midnight of the creation day (Wednesday 2026-03-04), never reset: every 7 days from it
    ("3.3.7", ["2026-03-11 00:00 +0100", "2026-03-18 00:00 +0100", "2026-03-25 00:00 +0100"]),
    # 3.4: Mondays; the weeks keep local midnight across the change to summer time on 2026-03-29
    ("3.4", ["2026-03-09 00:00 +0100", "2026-03-16 00:00 +0100", "2026-03-23 00:00 +0100",
             "2026-03-30 00:00 +0200"]),
])
def test_a_week_period_follows_the_semantics_of_its_version(semantics: str, expected: list[str]) -> None:
    created = datetime(2026, 3, 4, 9, 0, tzinfo=BERLIN)
    schedule = schedule_of(_stream("PERIOD(1w)", "TIMEZONE 'Europe/Berlin'"), created, UTC, semantics)
    assert _local(schedule, created, len(expected)) == expected


def test_semantics_option_of_the_stream_overrides_the_home() -> None:
    created = datetime(2026, 3, 4, 9, 0, tzinfo=BERLIN)
    stmt = _stream("PERIOD(2w, 1d)", "TIMEZONE 'Europe/Berlin' STREAM_OPTIONS(SEMANTICS('3.4'))")
    schedule = schedule_of(stmt, created, UTC, "3.3.7")
    # 2w boundaries: Monday 2026-03-02 (TDengine's own test), then 03-16; one day later: Tuesdays
    assert _local(schedule, created, 2) == ["2026-03-17 00:00 +0100", "2026-03-31 00:00 +0200"]


def test_a_day_period_under_3_4_counts_from_the_epoch() -> None:
    created = datetime(2026, 3, 4, 9, 0, tzinfo=SHANGHAI)
    stmt = _stream("PERIOD(2d)", "TIMEZONE 'Asia/Shanghai'")
    # days since 1970-01-01: 2026-03-05 is day 20517 (odd), 2026-03-06 day 20518 (even)
    assert _local(schedule_of(stmt, created, UTC, "3.4"), created, 2, SHANGHAI) == [
        "2026-03-06 00:00 +0800", "2026-03-08 00:00 +0800"]
    assert _local(schedule_of(stmt, created, UTC, "3.3.7"), created, 2, SHANGHAI) == [
        "2026-03-06 00:00 +0800", "2026-03-08 00:00 +0800"]
    stmt = _stream("PERIOD(2d)", "TIMEZONE 'Asia/Shanghai'")
    created = datetime(2026, 3, 5, 9, 0, tzinfo=SHANGHAI)
    assert _local(schedule_of(stmt, created, UTC, "3.4"), created, 1, SHANGHAI) == ["2026-03-06 00:00 +0800"]
    assert _local(schedule_of(stmt, created, UTC, "3.3.7"), created, 1, SHANGHAI) == ["2026-03-07 00:00 +0800"]


def test_sliding_takes_calendar_units_over_event_time() -> None:
    stmt = parse("CREATE STREAM s SLIDING(1n) FROM t INTO o AS SELECT _tcurrent_ts AS ts, count(*) AS c FROM t")[0]
    schedule = schedule_of(stmt, datetime(2023, 12, 31, tzinfo=UTC), UTC)
    assert [at.date().isoformat() for at in schedule.instants(datetime(2023, 12, 31, tzinfo=UTC),
                                                              datetime(2024, 4, 1, tzinfo=UTC))] == [
        "2024-01-01", "2024-02-01", "2024-03-01", "2024-04-01"]


@pytest.mark.parametrize(("statement", "clause", "needle"), [
    ("CREATE STREAM s PERIOD(121n) INTO o AS SELECT now() AS ts, 1 AS v", "PERIOD", "longer than the largest"),
    ("CREATE STREAM s PERIOD(11y) INTO o AS SELECT now() AS ts, 1 AS v", "PERIOD", "longer than the largest"),
    ("CREATE STREAM s PERIOD(1n, 28d) INTO o AS SELECT now() AS ts, 1 AS v", "PERIOD", "less than 28d"),
    ("CREATE STREAM s PERIOD(2n, 56d) INTO o AS SELECT now() AS ts, 1 AS v", "PERIOD", "less than 56d"),
    ("CREATE STREAM s PERIOD(1n, 1w) INTO o AS SELECT now() AS ts, 1 AS v", "PERIOD", "in days or less"),
    ("CREATE STREAM s PERIOD(1y, 1n) INTO o AS SELECT now() AS ts, 1 AS v", "PERIOD", "calendar"),
    ("CREATE STREAM s PERIOD(1w, 1d) INTO o AS SELECT now() AS ts, 1 AS v", "PERIOD", "SEMANTICS('3.4')"),
    ("CREATE STREAM s PERIOD(1w, 7d) STREAM_OPTIONS(SEMANTICS('3.4')) INTO o AS SELECT now() AS ts, 1 AS v",
     "PERIOD", "less than the period"),
    ("CREATE STREAM s PERIOD(1d) TIMEZONE 'Mars/Olympus' INTO o AS SELECT now() AS ts, 1 AS v", "TIMEZONE",
     "not a known IANA time zone"),
    ("CREATE STREAM s PERIOD(1d) TIMEZONE UTC INTO o AS SELECT now() AS ts, 1 AS v", "TIMEZONE", "quoted"),
    ("CREATE STREAM s PERIOD(1d) STREAM_OPTIONS(SEMANTICS('3.5')) INTO o AS SELECT now() AS ts, 1 AS v",
     "SEMANTICS", "names no TDengine version"),
    ("CREATE STREAM s INTERVAL(1y, 1n) SLIDING(1y) FROM t INTO o AS SELECT _twstart AS ts, count(*) AS c FROM t",
     "INTERVAL", "calendar"),
])
def test_misuse_is_refused_at_its_clause(statement: str, clause: str, needle: str) -> None:
    with pytest.raises(StreamDefinitionError) as info:
        parse(statement)
    assert info.value.clause == clause
    assert needle in str(info.value)
    assert info.value.line == 1 and info.value.column is not None


def test_check_to_3_4_names_the_periods_that_change() -> None:
    (week,) = changes_under_3_4(_stream("PERIOD(1w)"))
    assert "Monday 1970-01-05" in week and "(on Mondays)" in week
    assert changes_under_3_4(_stream("PERIOD(1d, 1h)"))
    assert changes_under_3_4(_stream("PERIOD(6h, 1m)")) == []  # under a day: the same daily restart
    assert changes_under_3_4(_stream("PERIOD(1n)")) == []  # calendar units exist since 3.4.1 only
    assert changes_under_3_4(_stream("PERIOD(1w)", "STREAM_OPTIONS(SEMANTICS('3.4'))")) == []


def test_calendar_timetable_round_trips_and_fires_monthly() -> None:
    pytest.importorskip("airflow")
    from airflow_stream_provider.timetables import PeriodTimetable

    table = PeriodTimetable(timedelta(0), timedelta(days=14), "Europe/Berlin", "2024-01-20T00:00:00+00:00",
                            months=1)
    again = PeriodTimetable.deserialize(table.serialize())
    assert again == table and again.summary == "PERIOD(1n, 2w)"
    assert [at.astimezone(BERLIN).day for at in again.schedule.instants(again.created,
                                                                         datetime(2024, 4, 30, tzinfo=UTC))] == [
        15, 15, 15]


def test_check_to_3_4_prints_a_comment_per_statement(capsys: pytest.CaptureFixture[str]) -> None:
    from airflow_stream_provider.cli.commands import main

    code = main(["check", "--to", "3.4", "CREATE STREAM s PERIOD(1w) INTO o AS SELECT now() AS ts, 1 AS v; "
                 "CREATE STREAM s2 PERIOD(1h) INTO o2 AS SELECT now() AS ts, 1 AS v"])
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert out[0].startswith("-- s: changes under TDengine 3.4") and "on Mondays" in out[1]
    assert out[2] == "-- s2: the same under TDengine 3.4"
