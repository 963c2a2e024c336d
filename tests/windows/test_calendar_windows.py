"""INTERVAL windows in calendar units (TDengine 3.4.1) and in local days of a TIMEZONE (3.4.3).

Every boundary below is worked out by hand from the calendar: month lengths (February 2024 has 29
days, 2023 has 28), quarters, years, and the daylight saving changes of Europe/Berlin (2024-03-31
02:00 CET -> 03:00 CEST, a 23-hour day; 2024-10-27 03:00 CEST -> 02:00 CET, a 25-hour day).
TDengine's own tests (``test_timezone_interval``) count the same way: a spring-forward month of 743
hourly rows, a fall-back day of 25.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd
import pytest

from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.sql import parse
from airflow_stream_provider.windows.core import open_windows, scan
from airflow_stream_provider.windows.spec import WindowSpec

BERLIN = ZoneInfo("Europe/Berlin")
H = 3_600_000_000


def us(text: str, tz=UTC) -> int:
    at = datetime.fromisoformat(text)
    at = at if at.tzinfo else at.replace(tzinfo=tz)
    return int((at - datetime(1970, 1, 1, tzinfo=UTC)) / timedelta(microseconds=1))


def spec_of(trigger: str, zone: str | None = None) -> WindowSpec:
    tz = f" TIMEZONE '{zone}'" if zone else ""
    stmt = parse(f"CREATE STREAM s {trigger} FROM t{tz} INTO o AS SELECT _twstart ts, count(*) c FROM %%trows")[0]
    return WindowSpec.from_trigger(stmt.trigger, stmt.emit, zone=stmt.timezone or "UTC",
                                   local_days=bool(stmt.timezone))


def windows(spec: WindowSpec, ts: list[int], **kw) -> list[tuple[int, int, int]]:
    found, _ = scan(spec, pd.DataFrame({"ts": np.array(sorted(ts), np.int64)}), None, final=True, **kw)
    found = found[found["closed"]]
    return list(zip(found["wstart"].tolist(), found["wend"].tolist(), found["rows"].tolist(), strict=True))


def hourly(start: str, end: str, tz=UTC) -> list[int]:
    return list(range(us(start, tz), us(end, tz), H))


def test_month_windows_follow_month_lengths_and_the_leap_day():
    spec = spec_of("INTERVAL(1n) SLIDING(1n)")
    rows = [us("2024-01-31 23:59:59"), us("2024-02-29 12:00:00"), us("2024-03-01 00:00:00"), us("2023-02-28 00:00:00")]
    got = windows(spec, rows)
    # the empty months between February 2023 and January 2024 are windows too (no IGNORE_NODATA_TRIGGER)
    assert got[0] == (us("2023-02-01"), us("2023-03-01"), 1)
    assert [w for w in got if w[2]] == [
        (us("2023-02-01"), us("2023-03-01"), 1),
        (us("2024-01-01"), us("2024-02-01"), 1),
        (us("2024-02-01"), us("2024-03-01"), 1),  # 29 days: 2024 is a leap year
        (us("2024-03-01"), us("2024-04-01"), 1),
    ]
    assert len(got) == 14  # February 2023 .. March 2024
    assert (us("2024-03-01") - us("2024-02-01")) == 29 * 24 * H


def test_an_offset_moves_month_windows_to_the_15th():
    spec = spec_of("INTERVAL(1n, 14d) SLIDING(1n)")
    got = windows(spec, [us("2024-02-14 23:00:00"), us("2024-02-15 00:00:00"), us("2024-03-14 00:00:00")])
    assert got == [(us("2024-01-15"), us("2024-02-15"), 1), (us("2024-02-15"), us("2024-03-15"), 2)]


def test_quarter_and_year_windows():
    q = spec_of("INTERVAL(1q) SLIDING(1q)")
    assert windows(q, [us("2024-03-31 23:00:00"), us("2024-04-01"), us("2024-09-30")]) == [
        (us("2024-01-01"), us("2024-04-01"), 1),
        (us("2024-04-01"), us("2024-07-01"), 1),
        (us("2024-07-01"), us("2024-10-01"), 1),
    ]
    assert windows(spec_of("INTERVAL(3n) SLIDING(3n)"), [us("2024-05-05")]) == windows(q, [us("2024-05-05")])
    y = spec_of("INTERVAL(1y) SLIDING(1y)")
    assert windows(y, [us("2024-12-31 23:59:59"), us("2025-01-01")]) == [
        (us("2024-01-01"), us("2025-01-01"), 1), (us("2025-01-01"), us("2026-01-01"), 1)]


def test_a_year_sliding_by_quarters_holds_each_row_four_times():
    spec = spec_of("INTERVAL(1y) SLIDING(1q)")
    got = windows(spec, [us("2024-05-10")])
    # the windows holding 2024-05-10 start on 2023-07-01, 2023-10-01, 2024-01-01 and 2024-04-01
    assert [(s, e) for s, e, n in got if n] == [
        (us("2023-07-01"), us("2024-07-01")), (us("2023-10-01"), us("2024-10-01")),
        (us("2024-01-01"), us("2025-01-01")), (us("2024-04-01"), us("2025-04-01"))]


def test_a_month_sliding_by_days_ends_a_calendar_month_after_each_start():
    spec = spec_of("INTERVAL(1n) SLIDING(1d)")
    got = windows(spec, [us("2024-01-31 12:00:00")])
    holding = [(s, e) for s, e, n in got if n]
    # every day from January 1st to 31st starts a window that holds the row (Jan 1 + 1 month = Feb 1)
    assert len(holding) == 31 and holding[0] == (us("2024-01-01"), us("2024-02-01"))
    # January 31st + one month runs past February's 29 days into March 2nd (mktime's arithmetic)
    assert holding[-1] == (us("2024-01-31"), us("2024-03-02"))


def test_month_windows_are_counted_in_the_stream_zone():
    spec = spec_of("INTERVAL(1n) SLIDING(1n)", "Europe/Berlin")
    rows = hourly("2024-03-01 00:00", "2024-04-01 00:00", BERLIN)
    # March 2024 in Berlin: 31 days less the hour skipped on the 31st, 743 hours
    assert windows(spec, rows) == [(us("2024-03-01", BERLIN), us("2024-04-01", BERLIN), 743)]
    assert us("2024-03-01", BERLIN) == us("2024-02-29 23:00:00")  # midnight CET is 23:00 UTC


def test_local_days_of_a_timezone_last_23_and_25_hours_across_daylight_saving():
    spec = spec_of("INTERVAL(1d) SLIDING(1d)", "Europe/Berlin")
    spring = windows(spec, hourly("2024-03-30 00:00", "2024-04-01 00:00", BERLIN))
    assert [(e - s) // H for s, e, _ in spring] == [24, 23]
    assert [n for *_, n in spring] == [24, 23]
    assert spring[1][:2] == (us("2024-03-30 23:00:00"), us("2024-03-31 22:00:00"))
    fall = windows(spec, hourly("2024-10-27 00:00", "2024-10-28 00:00", BERLIN))
    assert fall == [(us("2024-10-26 22:00:00"), us("2024-10-27 23:00:00"), 25)]
    # without a TIMEZONE a day stays 24 hours from the epoch (UTC midnights), as in TDengine 3.3.7
    fixed = spec_of("INTERVAL(1d) SLIDING(1d)")
    assert fixed.grid is None
    assert {(e - s) // H for s, e, _ in windows(fixed, hourly("2024-03-30 00:00", "2024-04-01 00:00", BERLIN))} == {24}


def test_local_weeks_start_on_monday_midnight_of_the_zone():
    spec = spec_of("INTERVAL(1w) SLIDING(1w)", "Europe/Berlin")
    # 2024-03-25 is a Monday; its week holds the 23-hour day of March 31st
    got = windows(spec, [us("2024-03-27 12:00", BERLIN)])
    assert got == [(us("2024-03-25", BERLIN), us("2024-04-01", BERLIN), 1)]
    assert (got[0][1] - got[0][0]) // H == 167


def test_live_scans_close_a_month_only_when_the_watermark_passes_its_end():
    spec = spec_of("INTERVAL(1n) SLIDING(1n)")
    rows = [us("2024-02-10"), us("2024-02-28 23:00:00"), us("2024-02-29 23:59:59"), us("2024-03-01 00:00:00"),
            us("2024-03-20"), us("2024-04-02")]
    carry, seen = None, []
    for chunk in ([rows[0]], rows[1:3], [rows[3]], rows[4:]):
        found, carry = scan(spec, pd.DataFrame({"ts": np.array(chunk, np.int64)}), carry)
        seen.append([(s, n) for s, n, c in zip(found["wstart"], found["rows"], found["closed"], strict=True) if c])
    # February closes with the first row of March, not before: 2024-02-29 still belongs to it
    assert seen[:3] == [[], [], [(us("2024-02-01"), 3)]]
    assert seen[3] == [(us("2024-03-01"), 2)]
    still = open_windows(spec, carry)
    assert still[["wstart", "wend", "rows"]].values.tolist() == [[us("2024-04-01"), us("2024-05-01"), 1]]


@pytest.mark.parametrize(("trigger", "clause", "needle"), [
    ("INTERVAL(1n) SLIDING(2n)", "SLIDING", "must not be greater"),
    ("INTERVAL(1d) SLIDING(1n)", "SLIDING", "calendar sliding needs an interval in months"),
    ("INTERVAL(1n, 1w) SLIDING(1n)", "INTERVAL", "days or less"),
    ("INTERVAL(1n, 28d) SLIDING(1n)", "INTERVAL", "less than 28d"),
    ("INTERVAL(121n) SLIDING(1n)", "INTERVAL", "longer than the largest"),
    ("INTERVAL(1n) SLIDING(29d)", "SLIDING", "at least 28d"),
])
def test_calendar_interval_misuse_is_refused_at_its_clause(trigger, clause, needle):
    with pytest.raises(StreamDefinitionError) as err:
        parse(f"CREATE STREAM s {trigger} FROM t INTO o AS SELECT _twstart ts, count(*) c FROM %%trows")
    assert err.value.clause == clause and needle in str(err.value)
    assert err.value.line == 1 and err.value.column > 1
