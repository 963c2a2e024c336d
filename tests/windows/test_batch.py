"""Batch window detection on a real Spark session, checked against Spark's own window functions
and against the row-at-a-time reference."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F

from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.sql import parse
from airflow_stream_provider.windows.batch import detect, scan_groups
from airflow_stream_provider.windows.trigger_plan import TriggerPlan
from tests.windows import reference as ref

pytestmark = pytest.mark.spark

S = 1_000_000
COLUMNS = ["ts", "current", "voltage", "phase", "tbname", "location", "groupid"]


def meters(seed: int = 0, n: int = 400) -> pd.DataFrame:
    """Three subtables in two locations with irregular timestamps and some NULLs."""
    rng = np.random.default_rng(seed)
    parts = []
    for i, (name, location) in enumerate([("d1", "SF"), ("d2", "SF"), ("d3", "LA")]):
        ts = np.cumsum(rng.integers(1, 15, size=n)) * S + i * 7 * S
        current = rng.uniform(0, 20, size=n).round(1)
        current[rng.random(n) < 0.05] = np.nan
        parts.append(pd.DataFrame({
            "ts": pd.to_datetime(ts, unit="us", utc=True),
            "current": current,
            "voltage": rng.integers(218, 222, size=n),
            "phase": rng.uniform(0, 1, size=n),
            "tbname": name,
            "location": location,
            "groupid": i,
        }))
    return pd.concat(parts, ignore_index=True)


def plan_of(sql: str) -> TriggerPlan:
    (stmt,) = parse(sql)
    return TriggerPlan.build(stmt, "power.meters", path="unused", columns=COLUMNS, ts_column="ts")


def stream(trigger: str, partition: str = "PARTITION BY tbname", options: str = "") -> str:
    return (f"CREATE STREAM s {trigger} FROM meters {partition} {options} "
            "INTO out AS SELECT _twstart, count(*) FROM meters")


def closes(events: pd.DataFrame, key: str | None = "tbname") -> list[tuple]:
    e = events[events["event_type"] == "WINDOW_CLOSE"]
    out = []
    for row in e.itertuples(index=False):
        group = pd.read_json(pd.io.common.StringIO(row.group_keys), typ="series").get(key) if key else None
        out.append((group, int(row.window_start.value // 1000), int(row.window_end.value // 1000), row.row_count))
    return sorted(out)


def per_table(pdf: pd.DataFrame, row_fields, windows_of) -> list[tuple]:
    """Reference windows of every subtable: (tbname, start, end, rows)."""
    expected = []
    for name, part in pdf.groupby("tbname"):
        rows = [{"ts": int(r.ts.value // 1000), **row_fields(r)} for r in part.sort_values("ts").itertuples()]
        expected += [(name, *w[:3]) for w in windows_of(rows)]
    return sorted(expected)


@pytest.fixture(scope="module")
def data(spark):
    pdf = meters()
    return pdf, spark.createDataFrame(pdf)


def test_interval_windows_match_spark_window(data):
    pdf, df = data
    for trigger, size, step in [("INTERVAL(10s) SLIDING(10s)", "10 seconds", "10 seconds"),
                                ("INTERVAL(30s) SLIDING(10s)", "30 seconds", "10 seconds")]:
        plan = plan_of(stream(trigger, options="STREAM_OPTIONS(IGNORE_NODATA_TRIGGER)"))
        got = closes(detect(df, plan, final=True).toPandas())
        native = (df.groupBy("tbname", F.window("ts", size, step)).count()
                  .select("tbname", F.unix_micros("window.start").alias("s"), F.unix_micros("window.end").alias("e"),
                          "count").toPandas())
        expected = sorted((r.tbname, r.s, r.e, r.count) for r in native.itertuples(index=False))
        assert got == expected


@pytest.mark.parametrize("trigger", ["INTERVAL(10s) SLIDING(10s)", "INTERVAL(45s, 7s) SLIDING(15s)",
                                     "INTERVAL(1m) SLIDING(20s)", "INTERVAL(25s, 3s) SLIDING(10s)"])
@pytest.mark.parametrize("options", ["", "STREAM_OPTIONS(IGNORE_NODATA_TRIGGER|EVENT_TYPE(WINDOW_OPEN|WINDOW_CLOSE))"])
@pytest.mark.parametrize("partition", ["PARTITION BY location", "", "PARTITION BY location, tbname"])
def test_interval_counts_in_spark_equal_the_row_scan(data, trigger, options, partition):
    """Finished INTERVAL data is counted by Spark per pane (25 s windows every 10 s: 5 s panes)
    before the core adds panes up into windows, and all groups of a partition go through the core
    in one call; the events are those of the row-by-row scan (itself
    checked against Spark's window() above), empty windows included. d3's location is NULL: a NULL
    group key is a group of its own."""
    _, df = data
    df = df.withColumn("location", F.when(F.col("tbname") != "d3", F.col("location")))
    plan = plan_of(stream(trigger, partition=partition, options=options))
    fast = detect(df, plan, final=True).toPandas()
    rows = scan_groups(df, plan, final=True).toPandas()
    order = ["group_id", "window_start", "event_type"]
    assert len(fast) > 0
    pd.testing.assert_frame_equal(fast.sort_values(order).reset_index(drop=True),
                                  rows.sort_values(order).reset_index(drop=True))


def test_interval_with_offset_matches_spark_window_start_time(data):
    _, df = data
    plan = plan_of(stream("INTERVAL(20s, 5s) SLIDING(20s)", options="STREAM_OPTIONS(IGNORE_NODATA_TRIGGER)"))
    got = closes(detect(df, plan, final=True).toPandas())
    native = (df.groupBy("tbname", F.window("ts", "20 seconds", "20 seconds", "5 seconds")).count()
              .select("tbname", F.unix_micros("window.start").alias("s"), F.unix_micros("window.end").alias("e"),
                      "count").toPandas())
    assert got == sorted((r.tbname, r.s, r.e, r.count) for r in native.itertuples(index=False))


def test_session_windows_match_spark_session_window_with_inclusive_gap(data):
    _, df = data
    plan = plan_of(stream("SESSION(ts, 10s)", partition="PARTITION BY location"))
    got = closes(detect(df, plan, final=True).toPandas(), key="location")
    # TDengine joins rows whose gap is <= 10s; Spark's session_window joins gaps < its duration,
    # so 10s + 1us is the same rule. Spark's end is last row + gap; TDengine's is the last row.
    native = (df.groupBy("location", F.session_window("ts", "10 seconds 1 microsecond"))
              .agg(F.count("*").alias("n"), F.max(F.unix_micros("ts")).alias("last"))
              .select("location", F.unix_micros("session_window.start").alias("s"), "last", "n").toPandas())
    assert got == sorted((r.location, r.s, r.last, r.n) for r in native.itertuples(index=False))


def test_state_windows_with_pre_filter_and_true_for_match_reference(data):
    pdf, df = data
    plan = plan_of(stream("STATE_WINDOW(voltage) TRUE_FOR(3s OR COUNT 2)",
                          options="STREAM_OPTIONS(PRE_FILTER(current > 2))"))
    events = detect(df, plan, final=True).toPandas()
    expected = per_table(pdf[pdf["current"] > 2],  # NULL current is not > 2
                         lambda r: {"_state": int(r.voltage)}, lambda rows: ref.state(rows, 3 * S, 2, "OR"))
    assert closes(events) == expected
    close = events[events["event_type"] == "WINDOW_CLOSE"].iloc[0]
    assert close.trigger_type == "State" and close.cur_state is not None


def test_state_windows_over_a_cast_match_reference(data):
    # TDengine cannot cast in a state window trigger yet; here cast truncates toward zero as C does,
    # and a NULL current gives a NULL state, which is skipped
    pdf, df = data
    plan = plan_of(stream("STATE_WINDOW(cast(current / 5 AS INT))"))
    events = detect(df, plan, final=True).toPandas()
    expected = per_table(pdf, lambda r: {"_state": None if np.isnan(r.current) else int(np.trunc(r.current / 5))},
                         ref.state)
    assert closes(events) == expected
    assert len(expected) > 50  # currents 0..20 in buckets of 5 change state often


def test_event_windows_match_reference_and_carry_conditions(data):
    pdf, df = data
    plan = plan_of(stream("EVENT_WINDOW(START WITH current > 15 END WITH current < 5 OR voltage = 221)",
                          options="STREAM_OPTIONS(EVENT_TYPE(WINDOW_OPEN|WINDOW_CLOSE))"))
    events = detect(df, plan, final=True).toPandas()
    expected = per_table(pdf,
                         lambda r: {"_start": bool(r.current > 15), "_end": bool(r.current < 5 or r.voltage == 221)},
                         ref.event)
    assert closes(events) == expected
    opens = events[events["event_type"] == "WINDOW_OPEN"]
    assert len(opens) == len(expected)
    first = opens.iloc[0]
    assert first.condition_index == 0 and float(pd.read_json(
        pd.io.common.StringIO(first.field_values), typ="series")["current"]) > 15


def test_count_windows_with_trigger_column_match_reference(data):
    pdf, df = data
    plan = plan_of(stream("COUNT_WINDOW(5, 2, current)"))
    events = detect(df, plan, final=True).toPandas()
    expected = []
    for name, part in pdf.groupby("tbname"):
        part = part.sort_values("ts")
        rows = [{"ts": int(t.value // 1000), "_valid": not np.isnan(c)} for t, c in zip(part["ts"], part["current"])]
        expected += [(name, s, e, n) for s, e, n, _ in ref.count_windows(rows, 5, 2)]
    assert closes(events) == sorted(expected)


def test_grouping_by_a_regular_column(data):
    pdf, df = data
    plan = plan_of(stream("COUNT_WINDOW(10)", partition="PARTITION BY voltage"))
    events = detect(df, plan, final=True).toPandas()
    expected = []
    for voltage, part in pdf.groupby("voltage"):
        part = part.sort_values(["ts", "tbname"])
        rows = [{"ts": int(t.value // 1000)} for t in part["ts"]]
        expected += [(int(voltage), s, e, n) for s, e, n, _ in ref.count_windows(rows, 10, 10)]
    assert closes(events, key="voltage") == sorted(expected)


def test_trigger_ids_are_stable_and_distinct(data):
    _, df = data
    plan = plan_of(stream("INTERVAL(10s) SLIDING(10s)", options="STREAM_OPTIONS(EVENT_TYPE(WINDOW_OPEN|WINDOW_CLOSE))"))
    first = detect(df, plan).toPandas()
    again = detect(df.repartition(3), plan).toPandas()
    key = ["group_id", "window_start", "event_type"]
    a = first.sort_values(key)[key + ["trigger_id"]].reset_index(drop=True)
    b = again.sort_values(key)[key + ["trigger_id"]].reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)
    per_window = first.groupby(["group_id", "window_start"])["trigger_id"].nunique()
    assert (per_window == 1).all()  # open and close of one window share the id
    assert first.drop_duplicates(["group_id", "window_start"])["trigger_id"].is_unique


def test_windows_close_only_behind_the_watermark_without_final(data):
    pdf, df = data
    plan = plan_of(stream("SESSION(ts, 10s)", options="STREAM_OPTIONS(WATERMARK(30s))"))
    events = detect(df, plan).toPandas()
    final = detect(df, plan, final=True).toPandas()
    assert 0 < len(events) < len(final)
    latest = pdf.groupby("tbname")["ts"].max()
    for row in events.itertuples(index=False):
        name = pd.read_json(pd.io.common.StringIO(row.group_keys), typ="series")["tbname"]
        watermark = latest[name] - pd.Timedelta(seconds=30)
        # closed: the watermark is more than the gap past the session's last row
        end = pd.Timestamp(row.window_end)
        end = end.tz_localize("UTC") if end.tzinfo is None else end
        assert watermark - end > pd.Timedelta(seconds=10)


def test_unknown_columns_and_functions_are_rejected_by_name():
    with pytest.raises(StreamDefinitionError, match="column volts is not in power.meters") as err:
        plan_of(stream("STATE_WINDOW(volts)"))
    assert "did you mean" in (err.value.hint or "")
    with pytest.raises(StreamDefinitionError, match="function csum is not supported"):
        plan_of(stream("EVENT_WINDOW(START WITH csum(current) > 1 END WITH current < 1)"))
