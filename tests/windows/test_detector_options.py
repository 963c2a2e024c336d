"""Detector options that depend on where the query starts and on processing time:
FILL_HISTORY[_FIRST], the default start at the stream's creation, and MAX_DELAY."""

from __future__ import annotations

import time
from dataclasses import replace

import pandas as pd
import pytest
from deltalake import DeltaTable

from airflow_stream_provider.windows import detector, live
from airflow_stream_provider.windows.batch import detect
from tests.windows.test_detector import (
    TRIGGERS,
    S,
    events_table,
    key,
    make_rows,
    setup,
    write,
)

pytestmark = pytest.mark.spark


def history_run(spark, plan, opts) -> pd.DataFrame:
    detector.Detector(plan, opts).run_available()
    return events_table(opts)


@pytest.mark.parametrize("option", ["FILL_HISTORY", "FILL_HISTORY_FIRST"])
def test_fill_history_processes_rows_written_before_the_stream(spark, tmp_path, option):
    wh, info, plan, opts = setup(spark, tmp_path, "h", TRIGGERS["event"], f"STREAM_OPTIONS({option})")
    rows = make_rows(21, n=80)
    write(info, rows.iloc[:70])
    write(info, rows.iloc[70:])
    assert plan.history
    streamed = history_run(spark, plan, opts)
    batch = detect(spark.read.format("delta").load(plan.path), plan).toPandas()
    assert len(batch) and key(streamed) == key(batch)


def test_fill_history_from_a_start_time_reads_nothing_before_it(spark, tmp_path):
    rows = make_rows(22, n=80)
    since = int(rows["ts"].median()) // 1000  # epoch milliseconds, as TDengine writes them
    wh, info, plan, opts = setup(spark, tmp_path, "f", "SESSION(ts, 3s)", f"STREAM_OPTIONS(FILL_HISTORY({since}))")
    write(info, rows)
    streamed = history_run(spark, plan, opts)
    kept = spark.read.format("delta").load(plan.path).where(f"ts >= timestamp_millis({since})")
    batch = detect(kept, plan).toPandas()
    assert len(batch) and key(streamed) == key(batch)
    assert streamed["window_start"].min() >= pd.Timestamp(since, unit="ms", tz="UTC")


def test_without_fill_history_only_rows_after_the_start_count(spark, tmp_path):
    wh, info, plan, opts = setup(spark, tmp_path, "n", TRIGGERS["state"])
    rows = make_rows(23, n=80).sort_values("ts", kind="stable")
    old, new = rows.iloc[:100], rows.iloc[100:]
    write(info, old)
    # the stream is created now: what the table holds at this version is history
    created = replace(opts, created_version=DeltaTable(str(info.path)).version())
    assert history_run(spark, plan, created).empty
    write(info, new)
    streamed = history_run(spark, plan, created)
    batch = detect(spark.createDataFrame(new), plan).toPandas()
    assert len(batch) and key(streamed) == key(batch)


def test_max_delay_triggers_open_windows_until_they_close(spark, tmp_path):
    """SESSION(ts, 1h) stays open while no row comes; MAX_DELAY(3s) reports it every 3 s of
    processing time with the rows so far and the trigger id its close will have."""
    wh, info, plan, opts = setup(spark, tmp_path, "x", "SESSION(ts, 1h)", "STREAM_OPTIONS(MAX_DELAY(3s))")
    rows = make_rows(24, n=10)
    write(info, rows)
    query = live.LiveDetector(detector.Detector(plan, opts), name="x").start()
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            assert query.isActive, query.exception()
            events = events_table(opts)
            if (events["event_type"] == "MAX_DELAY").sum() >= 4:  # two per group
                break
            time.sleep(1)
        delayed = events_table(opts)
        assert set(delayed["event_type"]) == {"MAX_DELAY"}
        per_group = delayed.groupby("trigger_id")
        assert per_group.size().min() >= 2 and len(per_group) == 2
        assert sorted(delayed.groupby("trigger_id")["row_count"].max()) == [10, 10]
        # processing-time spacing: the next trigger of a window is never due less than 3 s after it was seen
        for _, g in per_group:
            stamps = pd.to_datetime(g["event_time"]).sort_values()
            assert (stamps.diff().dropna() > pd.Timedelta(0)).all()
            assert stamps.iloc[-1] - stamps.iloc[0] >= pd.Timedelta(seconds=3) * (len(stamps) - 2)
        last = rows.groupby("tbname")["ts"].max()
        write(info, pd.DataFrame({"ts": [int(last.max()) + 3 * 3600 * S] * 2, "current": 1.0, "voltage": 220,
                                  "tbname": ["d1", "d2"], "location": ["SF", "LA"]}))
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and (events_table(opts)["event_type"] == "WINDOW_CLOSE").sum() < 2:
            assert query.isActive, query.exception()
            time.sleep(1)
    finally:
        query.stop()
    events = events_table(opts)
    closed = events[events["event_type"] == "WINDOW_CLOSE"]
    assert set(closed["trigger_id"]) == set(delayed["trigger_id"])
    assert list(closed["row_count"]) == [10, 10]
