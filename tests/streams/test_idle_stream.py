"""A stream computing IDLE and RESUME events (TDengine 3.4.1) end to end: CREATE STREAM, runs that
detect and compute, and the output table, on real Spark and Delta. TDengine's scenario (a meter
writes, goes quiet past IDLE_TIMEOUT, writes again) with our own rows; the expected spans are the
wall-clock moments the test itself measures."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from airflow_stream_provider.exceptions import StreamError
from airflow_stream_provider.streams.run import run as run_stream
from airflow_stream_provider.streams.run_request import RunRequest
from airflow_stream_provider.streams.verify import verify
from tests.conftest import sql

pytestmark = pytest.mark.spark


def now() -> datetime:
    return datetime.now(UTC)


def test_idle_and_resume_compute_their_span(wh):
    sql(wh, """CREATE DATABASE d; USE d;
               CREATE STABLE meters (ts TIMESTAMP, v INT) TAGS (site VARCHAR(8));
               CREATE TABLE m1 USING meters TAGS ('a');
               CREATE STREAM offline SESSION(ts, 1h) FROM meters PARTITION BY tbname
                   STREAM_OPTIONS(IDLE_TIMEOUT(1s) | EVENT_TYPE(IDLE | RESUME)) INTO offline_log AS
                   SELECT cast(_tidleend / 1000000 AS timestamp) AS ts,
                          cast(_tidlestart / 1000000 AS timestamp) AS quiet_since,
                          cast((_tidleend - _tidlestart) / 1000000 AS bigint) AS quiet_ms,
                          count(*) AS rows_meanwhile
                   FROM %%trows""")
    sql(wh, "INSERT INTO m1 VALUES ('2025-01-01 00:00:00', 1)")
    before = now()
    assert run_stream(wh, "d", "offline", RunRequest.everything()).triggers == 0  # the row is seen: active
    seen_by = now()
    time.sleep(1.2)
    assert run_stream(wh, "d", "offline", RunRequest.everything()).triggers == 1  # IDLE
    idle_by = now()
    sql(wh, "INSERT INTO m1 VALUES ('2025-01-01 00:00:01', 2)")
    back = now()
    assert run_stream(wh, "d", "offline", RunRequest.everything()).triggers == 1  # RESUME
    rows = sorted(sql(wh, "SELECT * FROM offline_log")[-1].table.to_pylist(), key=lambda r: r["ts"])
    assert len(rows) == 2
    idle, resume = rows
    ms = timedelta(milliseconds=1)
    assert before - ms <= idle["quiet_since"] <= seen_by  # the batch that last brought rows
    assert idle["quiet_since"] == resume["quiet_since"]  # the same span start, so the same trigger id
    assert idle["quiet_since"] + timedelta(seconds=1) <= idle["ts"] <= idle_by
    assert back - ms <= resume["ts"] and idle["ts"] < resume["ts"]
    assert abs(idle["quiet_ms"] - (idle["ts"] - idle["quiet_since"]) / ms) <= 1
    assert idle["rows_meanwhile"] == resume["rows_meanwhile"] == 0  # no row's time lies in the span
    with pytest.raises(StreamError, match="IDLE and RESUME events, which processing time decided"):
        verify(wh, "d", "offline")
