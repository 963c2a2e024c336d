"""The timetable of an IoTDB continuous query, by Airflow's own scheduling calls: the instants of
reference 004 and IoTDB's CQScheduleTask (the first from BOUNDARY and the creation time, then
+EVERY with no daily restart), each run's range, BLOCKED and DISCARD after an overrun and after a
restart, and the round trip through Airflow's serializer."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from airflow.timetables.base import DataInterval, TimeRestriction

from airflow_stream_provider.plan.schedule import ResampleSchedule
from airflow_stream_provider.timetables import ResampleTimetable

CATCHUP = TimeRestriction(earliest=None, latest=None, catchup=True)
SCHEDULED = TimeRestriction(earliest=None, latest=None, catchup=False)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
DAY = datetime(2025, 5, 1, tzinfo=UTC)


def hms(at) -> str:
    return at.astimezone(UTC).strftime("%H:%M:%S")


def runs(tt: ResampleTimetable, count: int, now: datetime, restriction=CATCHUP, last=None) -> list[str]:
    out = []
    for _ in range(count):
        info = tt.next_instant_info(last, restriction, now)
        if info is None:
            break
        out.append(hms(info.run_after))
        last = info.data_interval
    return out


@pytest.mark.parametrize(("boundary", "every", "created", "first"), [
    # CQScheduleTaskTest: boundary 0, every 30, now 100 -> 120; boundary 110, every 30, now 100 -> 110
    (EPOCH, timedelta(seconds=30), EPOCH + timedelta(seconds=100), EPOCH + timedelta(seconds=120)),
    (EPOCH + timedelta(seconds=110), timedelta(seconds=30), EPOCH + timedelta(seconds=100),
     EPOCH + timedelta(seconds=110)),
    # a creation exactly on an instant: that instant (the first boundary + k * every at or after now)
    (EPOCH, timedelta(seconds=20), DAY + timedelta(seconds=40), DAY + timedelta(seconds=40)),
    # a boundary in the past: instants keep its phase
    (DAY + timedelta(seconds=7), timedelta(minutes=1), DAY + timedelta(hours=5, seconds=30),
     DAY + timedelta(hours=5, minutes=1, seconds=7)),
])
def test_the_first_instant(boundary, every, created, first):
    assert ResampleSchedule(every, boundary, created).first == first


def test_every_not_dividing_a_day_never_restarts_at_midnight():
    """EVERY 7h from BOUNDARY 0 (multiples of 7 h since the epoch, which 2025-05-01 00:00 UTC is one
    of: 20209 days * 24 h = 485016 h = 69288 * 7 h): created at 15:00, the instants are 21:00, then
    04:00, 11:00, 18:00 the next day; a PERIOD stream would restart at midnight."""
    assert timedelta(hours=69288 * 7) == (DAY - EPOCH)
    tt = ResampleTimetable(timedelta(hours=7), EPOCH, timedelta(hours=7), created=DAY + timedelta(hours=15))
    assert runs(tt, 4, now=DAY) == ["21:00:00", "04:00:00", "11:00:00", "18:00:00"]


def test_each_run_computes_its_range_before_the_instant():
    """cq4: EVERY 20s RANGE 40s, 20s: the run at 22:18:40 computes [22:18:00, 22:18:20)."""
    created = datetime(2021, 5, 11, 14, 18, 30, tzinfo=UTC)
    tt = ResampleTimetable("20s", EPOCH, "40s", "20s", "BLOCKED", created)
    info = tt.next_instant_info(None, CATCHUP, created)
    assert hms(info.run_after) == "14:18:40"
    assert (hms(info.data_interval.start), hms(info.data_interval.end)) == ("14:18:00", "14:18:20")
    assert tt.instant(info.data_interval) == datetime(2021, 5, 11, 14, 18, 40, tzinfo=UTC)


def test_blocked_runs_every_missed_instant_after_an_overrun():
    """A run that took three periods: BLOCKED still runs every instant, in order."""
    tt = ResampleTimetable("10s", EPOCH, "10s", created=DAY)
    first = tt.next_instant_info(None, CATCHUP, DAY)
    late = DAY + timedelta(seconds=35)  # the first run ended here
    assert runs(tt, 4, late, CATCHUP, first.data_interval) == ["00:00:10", "00:00:20", "00:00:30", "00:00:40"]


def test_discard_skips_to_the_first_instant_at_or_after_now_after_an_overrun():
    tt = ResampleTimetable("10s", EPOCH, "10s", policy="DISCARD", created=DAY)
    first = tt.next_instant_info(None, SCHEDULED, DAY)
    assert hms(first.run_after) == "00:00:00"
    late = DAY + timedelta(seconds=35)
    assert runs(tt, 1, late, SCHEDULED, first.data_interval) == ["00:00:40"]
    on_time = DAY + timedelta(seconds=5)
    assert runs(tt, 1, on_time, SCHEDULED, first.data_interval) == ["00:00:10"]


def test_after_a_restart_blocked_catches_up_and_discard_does_not():
    """The scheduler was down from 00:01 to 01:00: the last run was at 00:01:00."""
    last = DataInterval(DAY, DAY + timedelta(minutes=1))  # RANGE 1m: the run at 00:01:00
    now = DAY + timedelta(hours=1, seconds=1)
    blocked = ResampleTimetable("1m", EPOCH, "1m", created=DAY)
    assert runs(blocked, 2, now, CATCHUP, last) == ["00:02:00", "00:03:00"]
    discard = ResampleTimetable("1m", EPOCH, "1m", policy="DISCARD", created=DAY)
    assert runs(discard, 2, now, SCHEDULED, last) == ["01:01:00", "01:02:00"]


def test_a_backfill_runs_every_instant_of_its_range_whatever_the_policy():
    discard = ResampleTimetable("1m", EPOCH, "1m", policy="DISCARD", created=DAY)
    window = TimeRestriction(earliest=DAY + timedelta(minutes=10), latest=DAY + timedelta(minutes=12), catchup=True)
    got = runs(discard, 10, DAY + timedelta(hours=5), window)
    # logical dates (range starts) 00:10, 00:11, 00:12: instants 00:11, 00:12, 00:13
    assert got == ["00:11:00", "00:12:00", "00:13:00"]


def test_a_backfill_recomputes_ranges_from_before_the_query_existed():
    tt = ResampleTimetable("20s", EPOCH, "40s", created=DAY + timedelta(hours=1))
    window = TimeRestriction(earliest=DAY, latest=DAY + timedelta(seconds=20), catchup=True)
    infos = []
    info = None
    while (info := tt.next_instant_info(info and info.data_interval, window, DAY + timedelta(hours=2))) is not None:
        infos.append((hms(info.data_interval.start), hms(info.data_interval.end)))
    assert infos == [("00:00:00", "00:00:40"), ("00:00:20", "00:01:00")]


def test_the_scheduler_starts_at_the_first_instant_from_the_dags_start_date():
    """The DAG's start date is the first range's start: the first run is the first instant."""
    tt = ResampleTimetable("20s", EPOCH, "40s", created=DAY + timedelta(seconds=5))
    start = TimeRestriction(earliest=tt.schedule.first - timedelta(seconds=40), latest=None, catchup=True)
    assert hms(tt.next_instant_info(None, start, DAY).run_after) == "00:00:20"


def test_manual_runs_cover_the_latest_instant():
    tt = ResampleTimetable("20s", EPOCH, "40s", created=DAY)
    interval = tt.infer_manual_data_interval(run_after=DAY + timedelta(seconds=45))
    assert (hms(interval.start), hms(interval.end)) == ("00:00:00", "00:00:40")


def test_airflow_serializer_round_trip():
    from airflow.serialization.decoders import decode_timetable
    from airflow.serialization.encoders import encode_timetable

    tt = ResampleTimetable("20s", datetime(2022, 1, 1, tzinfo=UTC), "40s", "20s", "DISCARD", DAY)
    assert ResampleTimetable.deserialize(tt.serialize()) == tt
    encoded = encode_timetable(tt)
    assert encoded["__type"] == "airflow_stream_provider.timetables.ResampleTimetable"
    decoded = decode_timetable(encoded)
    assert decoded == tt and decoded.periodic
    assert runs(decoded, 3, DAY, CATCHUP) == runs(tt, 3, DAY, CATCHUP)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="BLOCKED or DISCARD"):
        ResampleTimetable("20s", EPOCH, "20s", policy="SOMETIMES")
    with pytest.raises(ValueError, match="EVERY must be positive"):
        ResampleTimetable("0s", EPOCH, "20s")
