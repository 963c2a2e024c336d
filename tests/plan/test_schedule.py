"""PERIOD/SLIDING instants: every worked example of reference 000, "Scheduled Trigger"."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from airflow_stream_provider.plan.schedule import Schedule

H, M = timedelta(hours=1), timedelta(minutes=1)


def _times(schedule: Schedule, after: datetime, count: int) -> list[str]:
    out = []
    for at in schedule.instants(after):
        out.append(at.astimezone(schedule.tz).strftime("%m-%d %H:%M"))
        if len(out) == count:
            return out
    return out


def test_sub_day_period_restarts_at_midnight():
    created = datetime(2025, 5, 1, 0, 0, tzinfo=UTC) - timedelta(microseconds=1)
    s = Schedule(5 * H + 30 * M, timedelta(0), UTC, created)
    assert _times(s, created, 6) == ["05-01 00:00", "05-01 05:30", "05-01 11:00", "05-01 16:30", "05-01 22:00",
                                     "05-02 00:00"]


def test_sub_day_period_with_offset():
    created = datetime(2025, 5, 1, tzinfo=UTC) - timedelta(microseconds=1)
    s = Schedule(5 * H + 30 * M, M, UTC, created)
    assert _times(s, created, 6) == ["05-01 00:01", "05-01 05:31", "05-01 11:01", "05-01 16:31", "05-01 22:01",
                                     "05-02 00:01"]


def test_created_at_noon_fires_only_later_instants_that_day():
    created = datetime(2025, 5, 1, 12, 0, tzinfo=UTC)
    s = Schedule(5 * H + 30 * M, M, UTC, created)
    assert _times(s, created, 7) == ["05-01 16:31", "05-01 22:01", "05-02 00:01", "05-02 05:31", "05-02 11:01",
                                     "05-02 16:31", "05-02 22:01"]


@pytest.mark.parametrize("offset, expected", [
    (timedelta(0), ["05-02 01:00", "05-03 02:00", "05-04 03:00", "05-05 04:00"]),
    (M, ["05-02 01:01", "05-03 02:02", "05-04 03:03", "05-05 04:04"]),
])
def test_periods_of_a_day_or_more_never_reset(offset, expected):
    created = datetime(2025, 5, 1, 12, 0, tzinfo=UTC)
    s = Schedule(timedelta(days=1) + H, offset, UTC, created)
    assert _times(s, created, 4) == expected


def test_days_are_those_of_the_time_zone():
    tz = ZoneInfo("Asia/Shanghai")  # UTC+8: local midnight is 16:00 UTC
    created = datetime(2025, 5, 1, 12, 0, tzinfo=tz)
    s = Schedule(5 * H + 30 * M, timedelta(0), tz, created)
    first = next(s.instants(created))
    assert first == datetime(2025, 5, 1, 16, 30, tzinfo=tz)
    assert first.astimezone(UTC) == datetime(2025, 5, 1, 8, 30, tzinfo=UTC)
    assert _times(s, created, 3) == ["05-01 16:30", "05-01 22:00", "05-02 00:00"]


def test_previous_and_next_instants():
    created = datetime(2025, 5, 1, 12, 0, tzinfo=UTC)
    s = Schedule(5 * H + 30 * M, M, UTC, created)
    at = datetime(2025, 5, 2, 0, 1, tzinfo=UTC)
    assert s.previous(at) == datetime(2025, 5, 1, 22, 1, tzinfo=UTC)
    assert s.next_after(at) == datetime(2025, 5, 2, 5, 31, tzinfo=UTC)
    long = Schedule(timedelta(days=1) + H, M, UTC, created)
    assert long.previous(datetime(2025, 5, 3, 2, 2, tzinfo=UTC)) == datetime(2025, 5, 2, 1, 1, tzinfo=UTC)


def test_until_bounds_the_instants():
    created = datetime(2025, 5, 1, 12, 0, tzinfo=UTC)
    s = Schedule(H, timedelta(0), UTC, created)
    got = list(s.instants(created, datetime(2025, 5, 1, 15, 0, tzinfo=UTC)))
    assert got == [datetime(2025, 5, 1, h, tzinfo=UTC) for h in (13, 14, 15)]
