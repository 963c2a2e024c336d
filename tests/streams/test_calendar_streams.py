"""A calendar PERIOD stream with TIMEZONE, created under a home that follows TDengine 3.4: the zone and
the semantics are recorded at CREATE and shown by SHOW CREATE STREAM and SHOW STREAMS; a later change
of the home's setting leaves the stream as it was created."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from airflow_stream_provider.plan.stream import plan_stream
from airflow_stream_provider.streams.store import StreamStore
from tests.conftest import sql

pytestmark = pytest.mark.spark


def test_timezone_and_semantics_are_recorded_at_create(wh, monkeypatch):
    sql(wh, "CREATE DATABASE cal; USE cal; CREATE TABLE src (ts TIMESTAMP, v INT)")
    monkeypatch.setenv("AIRFLOW_STREAM_TDENGINE_SEMANTICS", "3.4")
    sql(wh, "CREATE STREAM monthly PERIOD(1n, 14d) TIMEZONE 'Asia/Shanghai' INTO m_out "
            "AS SELECT cast(_tlocaltime/1000000 as timestamp) ts, count(*) c FROM src")
    sql(wh, "CREATE STREAM weekly PERIOD(1w) INTO w_out AS SELECT cast(_tlocaltime/1000000 as timestamp) ts, "
            "count(*) c FROM src")
    monkeypatch.setenv("AIRFLOW_STREAM_TDENGINE_SEMANTICS", "3.3.7")
    shown = sql(wh, "SHOW CREATE STREAM monthly")[0].table.to_pylist()[0]
    assert shown["timezone"] == "Asia/Shanghai" and shown["semantics"] == "3.4"
    assert "TIMEZONE 'Asia/Shanghai'" in shown["sql"]
    rows = {r["stream_name"]: r for r in sql(wh, "SHOW STREAMS")[0].table.to_pylist()}
    assert rows["monthly"]["timezone"] == "Asia/Shanghai" and rows["weekly"]["semantics"] == "3.4"
    store = StreamStore()
    stored = store.get("cal", "weekly")
    schedule = plan_stream(stored.statement, "cal", store.load_state("cal", "weekly")).schedule
    # recorded 3.4: the next instant is a Monday midnight (UTC, the home zone), whatever day it was created
    assert schedule.next_after(datetime.now(UTC)).weekday() == 0
    monthly = store.get("cal", "monthly")
    at = plan_stream(monthly.statement, "cal", store.load_state("cal", "monthly")).schedule.next_after(
        datetime.now(UTC))
    # the 15th at 00:00 in Shanghai (+08:00) is the 14th at 16:00 UTC
    assert (at.day, at.hour) == (14, 16)
