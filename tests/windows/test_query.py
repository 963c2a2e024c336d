"""TDengine window clauses in SELECT, run by the warehouse on real Delta tables: checked against
Spark's own window functions, the brute-force reference, and hand calculations for FILL."""

from __future__ import annotations

import math

import pandas as pd
import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.sql import parse
from airflow_stream_provider.warehouse import Warehouse, writer
from airflow_stream_provider.windows import select as window_select
from tests.conftest import sql
from tests.windows import reference as ref
from tests.windows.test_batch import S, meters

pytestmark = pytest.mark.spark

SCHEMA = """
CREATE DATABASE IF NOT EXISTS power PRECISION 'ms';
CREATE STABLE IF NOT EXISTS power.meters (ts TIMESTAMP, current DOUBLE, voltage INT, phase DOUBLE)
    TAGS (location VARCHAR(16), groupid INT);
CREATE TABLE IF NOT EXISTS power.d9 USING power.meters TAGS ('NY', 9);
"""


@pytest.fixture(scope="module")
def wh(spark, tmp_path_factory):
    wh = Warehouse(tmp_path_factory.mktemp("query") / "warehouse", spark=spark)
    sql(wh, SCHEMA)
    info = wh.catalog.resolve(m.TableName("meters", "power"), "power")
    pdf = meters()
    writer.upsert(info.path, pa.Table.from_pandas(pdf[["ts", "current", "voltage", "phase", "tbname", "location",
                                                        "groupid"]], preserve_index=False).cast(info.arrow_schema()),
                  info.key_columns)
    # d9: a hand-made subtable for FILL: rows at 0 s (1.0) and 25 s (5.0)
    sql(wh, "INSERT INTO power.d9 VALUES (0, 1.0, 220, 0.5) (25000, 5.0, 220, 0.5)")
    wh.meters = pdf
    return wh


def select(wh, sql: str) -> pd.DataFrame:
    (stmt,) = parse(sql)
    return window_select.table(wh, stmt.query).to_pandas()


def micros(values) -> list[int]:
    return [int(pd.Timestamp(v).value // 1000) for v in values]


def test_interval_with_sliding_matches_spark_window(wh, spark):
    got = select(wh, "SELECT tbname, _wstart, _wend, _wduration, count(*), avg(current) FROM power.meters "
                     "WHERE tbname <> 'd9' PARTITION BY tbname INTERVAL(30s) SLIDING(10s)")
    native = (spark.createDataFrame(wh.meters).groupBy("tbname", F.window("ts", "30 seconds", "10 seconds"))
              .agg(F.count("*").alias("n"), F.avg("current").alias("a"))
              .select("tbname", F.col("window.start").alias("ws"), "n", "a").toPandas())
    expected = sorted((r.tbname, int(pd.Timestamp(r.ws).value // 1000), r.n,
                       None if pd.isna(r.a) else round(r.a, 9)) for r in native.itertuples())
    actual = sorted((r[0], s, n, None if pd.isna(a) else round(a, 9)) for r, s, n, a in zip(
        got.itertuples(index=False), micros(got["_wstart"]), got["count(*)"], got["avg(current)"]))
    assert actual == expected
    assert set(got["_wduration"]) == {30_000}  # milliseconds, the database precision
    assert (pd.to_datetime(got["_wend"]) - pd.to_datetime(got["_wstart"]) == pd.Timedelta(seconds=30)).all()


def test_session_matches_spark_session_window_with_inclusive_gap(wh, spark):
    got = select(wh, "SELECT tbname, _wstart, _wend, count(*) FROM power.meters WHERE tbname <> 'd9' "
                     "PARTITION BY tbname SESSION(ts, 10s)")
    native = (spark.createDataFrame(wh.meters)
              .groupBy("tbname", F.session_window("ts", "10 seconds 1 microsecond"))
              .agg(F.count("*").alias("n"), F.max("ts").alias("last"))
              .select("tbname", F.col("session_window.start").alias("ws"), "n", "last").toPandas())
    expected = sorted((r.tbname, int(pd.Timestamp(r.ws).value // 1000),
                       int(pd.Timestamp(r.last).value // 1000), r.n) for r in native.itertuples())
    actual = sorted(zip(got["tbname"], micros(got["_wstart"]), micros(got["_wend"]), got["count(*)"]))
    assert actual == expected


@pytest.mark.parametrize(("clause", "fields", "windows"), [
    ("STATE_WINDOW(voltage)", lambda r: {"_state": int(r.voltage)}, ref.state),
    ("EVENT_WINDOW START WITH current > 15 END WITH current < 5",
     lambda r: {"_start": bool(r.current > 15), "_end": bool(r.current < 5)}, ref.event),
    ("COUNT_WINDOW(5, 3)", lambda r: {}, lambda rows: ref.count_windows(rows, 5, 3)),
    ("COUNT_WINDOW(4, 4, current)", lambda r: {"_valid": not math.isnan(r.current)},
     lambda rows: ref.count_windows(rows, 4, 4)),
])
def test_row_windows_match_the_reference(wh, clause, fields, windows):
    got = select(wh, f"SELECT tbname, _wstart, _wend, count(*) FROM power.meters WHERE tbname <> 'd9' "
                     f"PARTITION BY tbname {clause}")
    expected = []
    for name, part in wh.meters.groupby("tbname"):
        rows = [{"ts": int(r.ts.value // 1000), **fields(r)} for r in part.sort_values("ts").itertuples()]
        expected += [(name, *w[:3]) for w in windows(rows)]
    actual = sorted(zip(got["tbname"], micros(got["_wstart"]), micros(got["_wend"]), got["count(*)"]))
    assert actual == sorted(expected)


def test_aggregates_over_state_windows_match_pandas(wh):
    got = select(wh, "SELECT tbname, _wstart, max(current) AS top, sum(voltage) AS volts FROM power.meters "
                     "WHERE tbname = 'd1' PARTITION BY tbname STATE_WINDOW(voltage)")
    d1 = wh.meters[wh.meters["tbname"] == "d1"].sort_values("ts").reset_index(drop=True)
    run = (d1["voltage"] != d1["voltage"].shift()).cumsum()
    expected = d1.groupby(run).agg(start=("ts", "first"), top=("current", "max"), volts=("voltage", "sum"))
    assert micros(got["_wstart"]) == micros(expected["start"])
    assert list(got["volts"]) == list(expected["volts"])
    assert [None if pd.isna(v) else v for v in got["top"]] == [None if pd.isna(v) else v for v in expected["top"]]


@pytest.mark.parametrize(("fill", "values"), [
    ("", [1.0, 5.0]),
    ("FILL(NONE)", [1.0, 5.0]),
    ("FILL(NULL)", [1.0, None, 5.0]),
    ("FILL(VALUE, 0)", [1.0, 0.0, 5.0]),
    ("FILL(PREV)", [1.0, 1.0, 5.0]),
    ("FILL(NEXT)", [1.0, 5.0, 5.0]),
    ("FILL(LINEAR)", [1.0, 3.0, 5.0]),  # halfway (10 s) between 1.0 at 0 s and 5.0 at 20 s
])
def test_fill_of_an_empty_interval_window(wh, fill, values):
    got = select(wh, f"SELECT _wstart, avg(current) FROM power.d9 INTERVAL(10s) {fill}")
    assert [None if pd.isna(v) else v for v in got["avg(current)"]] == values
    starts = [0, 10, 20] if len(values) == 3 else [0, 20]
    assert micros(got["_wstart"]) == [s * S for s in starts]


def test_window_clause_errors_name_the_clause(wh):
    with pytest.raises(StreamDefinitionError, match="line 1, col 57"):  # FILL after SESSION does not parse
        select(wh, "SELECT _wstart, count(*) FROM power.d9 SESSION(ts, 10s) FILL(NULL)")
    with pytest.raises(StreamDefinitionError, match="FILL.*needs 1 value"):
        select(wh, "SELECT _wstart, count(*) FROM power.d9 INTERVAL(10s) FILL(VALUE, 1, 2)")
    with pytest.raises(StreamDefinitionError, match="PARTITION BY.*not a column"):
        select(wh, "SELECT _wstart, count(*) FROM power.meters PARTITION BY voltage + 1 INTERVAL(10s)")
    with pytest.raises(StreamDefinitionError, match="function tan is not supported"):
        select(wh, "SELECT _wstart, count(*) FROM power.d9 STATE_WINDOW(tan(voltage))")
    with pytest.raises(StreamDefinitionError, match="EVENT_WINDOW: colour is not a column"):
        select(wh, "SELECT _wstart, count(*) FROM power.d9 EVENT_WINDOW START WITH colour > 1 END WITH voltage < 2")
    with pytest.raises(StreamDefinitionError, match="SESSION needs the timestamp column"):
        select(wh, "SELECT _wstart, count(*) FROM power.d9 SESSION(voltage, 10s)")
    # windows of no length would divide by zero
    with pytest.raises(StreamDefinitionError, match="INTERVAL must be positive, found 0s"):
        select(wh, "SELECT _wstart, count(*) FROM power.d9 INTERVAL(0s)")
    with pytest.raises(StreamDefinitionError, match="SESSION must be positive, found 0s"):
        select(wh, "SELECT _wstart, count(*) FROM power.d9 SESSION(ts, 0s)")
    with pytest.raises(StreamDefinitionError, match="the INTERVAL offset must be shorter than the interval"):
        select(wh, "SELECT _wstart, count(*) FROM power.d9 INTERVAL(10s, 10s)")
    # a window clause without its arguments
    for clause in ("INTERVAL() FILL(NULL)", "SESSION(ts)", "COUNT_WINDOW()"):
        keyword = clause.split("(")[0]
        with pytest.raises(StreamDefinitionError, match=f"{keyword} needs"):
            select(wh, f"SELECT _wstart, count(*) FROM power.d9 {clause}")
    with pytest.raises(StreamDefinitionError, match="FILL\\(\\) names no fill mode"):
        select(wh, "SELECT _wstart, count(*) FROM power.d9 INTERVAL(10s) FILL()")
