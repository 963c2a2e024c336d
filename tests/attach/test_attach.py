"""Attaching an existing Delta table (``CREATE STABLE ... FROM DELTA ... MAP (...)``): a stream over it
computes the windows pandas computes from the table's rows, from its history and live as another
writer appends; the table is never rewritten, read-only unless attached WRITABLE, and DROP detaches."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest
from deltalake import DeltaTable

from airflow_stream_provider.streams.run import run as run_stream
from airflow_stream_provider.streams.run_request import RunRequest
from airflow_stream_provider.warehouse import WarehouseError
from tests.attach.oracle import closed_windows
from tests.conftest import sql
from tests.test_examples import EXAMPLES, section

pytestmark = pytest.mark.spark

T0 = datetime(2025, 3, 1, tzinfo=UTC)
SCHEMA = "event_time TIMESTAMP, device_id STRING, site STRING, voltage INT, current DOUBLE"
MAP = "MAP (TIMESTAMP event_time, TBNAME device_id, TAGS (location = site), COLUMNS (voltage, current))"
STREAM = """CREATE STREAM power.s1 INTERVAL(10s) SLIDING(10s) FROM power.meters PARTITION BY tbname {options}
            INTO power.out AS
            SELECT _twstart, avg(voltage) AS v, sum(current) AS c, count(*) AS n FROM %%tbname
            WHERE _c0 >= _twstart AND _c0 < _twend"""


def values(rows: list[tuple]) -> str:
    def stamp(s: int) -> str:
        return (T0 + timedelta(seconds=s)).strftime("%Y-%m-%d %H:%M:%S")

    return ", ".join(f"(TIMESTAMP '{stamp(s)}', '{d}', '{site}', {v}, {c})" for s, d, site, v, c in rows)


@pytest.fixture
def readings(spark, tmp_path):
    """A team's own table, made with plain Spark SQL; no change data feed."""
    path = tmp_path / "owner" / "readings"
    spark.sql(f"CREATE TABLE delta.`{path}` ({SCHEMA}) USING delta TBLPROPERTIES (delta.enableChangeDataFeed = false)")
    return path


def append(spark, path, rows: list[tuple]) -> None:
    spark.sql(f"INSERT INTO delta.`{path}` VALUES {values(rows)}")


def table_rows(path) -> pd.DataFrame:
    return DeltaTable(str(path)).to_pandas()


def outputs(wh) -> dict:
    rows = sql(wh, "SELECT tag_tbname, _twstart, v, c, n FROM power.out")[-1].table.to_pylist()
    return {(r["tag_tbname"], pd.Timestamp(r["_twstart"])): (r["v"], r["c"], r["n"]) for r in rows}


def log_files(path) -> list[str]:
    return sorted(os.listdir(path / "_delta_log"))


FIRST = [(1, "d1", "north", 220, 1.5), (4, "d1", "north", 224, 2.5), (12, "d1", "north", 230, 1.0),
         (3, "d2", "south", 110, 0.5), (15, "d2", "south", 120, 0.25), (27, "d2", "south", 100, 1.0)]
LATER = [(21, "d1", "north", 210, 3.0), (33, "d1", "north", 200, 1.0), (41, "d2", "south", 90, 2.0),
         (5, "d3", "east", 50, 5.0), (19, "d3", "east", 70, 1.0)]


def test_history_before_the_feed_and_live_rows_of_another_writer(wh, spark, readings):
    """The statements of ``examples/tdengine/attach.sql``, over a table made by plain Spark SQL."""
    append(spark, readings, FIRST)  # written before the change data feed was on
    assert DeltaTable(str(readings)).metadata().configuration["delta.enableChangeDataFeed"] == "false"
    example = EXAMPLES / "tdengine" / "attach.sql"
    res = sql(wh, section(example, "attach").replace("/data/readings", str(readings)))[-1]
    assert "attached supertable power.meters" in res.message and "read-only" in res.message
    assert DeltaTable(str(readings)).metadata().configuration["delta.enableChangeDataFeed"] == "true"
    sql(wh, section(example, "stream"))
    run_stream(wh, "power", "s1", RunRequest.everything())
    assert outputs(wh) == closed_windows(table_rows(readings))
    assert len(outputs(wh)) == 3  # d1 [0,10); d2 [0,10), [10,20)
    append(spark, readings, LATER)  # the owner's writer goes on
    run_stream(wh, "power", "s1", RunRequest.everything())
    expected = closed_windows(table_rows(readings))
    assert outputs(wh) == expected and len(expected) == 8
    # queries read the model's names: the tag and tbname, and the columns the map names only
    rows = sql(wh, "SELECT tbname, location, count(*) AS n FROM power.meters GROUP BY tbname, location "
                   "ORDER BY tbname")[-1].table.to_pylist()
    assert rows == [{"tbname": "d1", "location": "north", "n": 5}, {"tbname": "d2", "location": "south", "n": 4},
                    {"tbname": "d3", "location": "east", "n": 2}]


def test_read_only_by_default_and_drop_detaches(wh, spark, readings):
    append(spark, readings, FIRST)
    spark.sql(f"ALTER TABLE delta.`{readings}` SET TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    sql(wh, f"CREATE DATABASE power; CREATE STABLE power.meters FROM DELTA '{readings}' {MAP}")
    before = log_files(readings)
    with pytest.raises(WarehouseError, match="attached read-only.*INSERT"):
        sql(wh, "INSERT INTO power.meters (tbname, location, event_time, voltage, current) "
                "VALUES ('d9', 'x', '2025-03-01 00:00:01', 1, 1.0)")
    with pytest.raises(WarehouseError, match="attached read-only.*DELETE"):
        sql(wh, "DELETE FROM power.meters WHERE voltage > 0")
    (res,) = sql(wh, "DROP STABLE power.meters")
    assert "detached" in res.message and str(readings) in res.message
    assert log_files(readings) == before and len(table_rows(readings)) == len(FIRST)
    with pytest.raises(WarehouseError, match="does not exist"):
        sql(wh, "SELECT * FROM power.meters")


def test_writable_attach_inserts_and_deletes_under_the_owners_names(wh, spark, readings):
    append(spark, readings, FIRST)
    sql(wh, f"CREATE DATABASE power; CREATE STABLE power.meters FROM DELTA '{readings}' {MAP} WRITABLE "
            "ENABLE CHANGE FEED")
    sql(wh, "INSERT INTO power.meters (tbname, location, event_time, voltage, current) "
            "VALUES ('d9', 'west', '2025-03-01 00:00:02', 7, 0.5)")
    sql(wh, "DELETE FROM power.meters WHERE tbname = 'd2'")
    rows = table_rows(readings)
    assert sorted(rows["device_id"]) == ["d1", "d1", "d1", "d9"]
    written = rows.loc[rows["device_id"] == "d9", ["site", "voltage"]].to_dict("records")
    assert written == [{"site": "west", "voltage": 7}]


def test_regular_table_attach(wh, spark, tmp_path):
    path = tmp_path / "owner" / "totals"
    spark.sql(f"CREATE TABLE delta.`{path}` (at TIMESTAMP, amount BIGINT, note STRING) USING delta "
              "TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (TIMESTAMP '2025-03-01 00:00:00', 5, 'a'), "
              "(TIMESTAMP '2025-03-01 00:00:07', 7, 'b')")
    (res,) = sql(wh, f"CREATE DATABASE shop; CREATE TABLE shop.totals FROM DELTA '{path}' "
                     "MAP (TIMESTAMP at, COLUMNS (amount))")[-1:]
    assert "attached table shop.totals" in res.message
    rows = sql(wh, "SELECT * FROM shop.totals ORDER BY at")[-1].table
    assert rows.column_names == ["at", "amount"] and rows.column("amount").to_pylist() == [5, 7]


def test_a_renamed_time_column_in_the_status_and_the_event_time_sensor(wh, spark, readings):
    """``MAP (TIMESTAMP ts = event_time ...)``: the stream's lag in ``ins_streams`` and its DAG's
    event-time sensor read the table's own time column, which has another name than the model's."""
    from airflow_stream_provider.streams.probes import max_event_time
    from airflow_stream_provider.streams.store import StreamStore

    append(spark, readings, [(1, "d1", "north", 220, 1.5), (12, "d1", "north", 230, 1.0), (25, "d1", "north", 1, 0)])
    renamed = MAP.replace("TIMESTAMP event_time", "TIMESTAMP ts = event_time")
    sql(wh, f"CREATE DATABASE power; CREATE STABLE power.meters FROM DELTA '{readings}' {renamed} ENABLE CHANGE FEED")
    sql(wh, "CREATE STREAM power.s1 INTERVAL(10s) SLIDING(10s) FROM power.meters PARTITION BY tbname "
            "STREAM_OPTIONS(FILL_HISTORY) INTO power.out AS SELECT _twstart, count(*) AS n FROM %%trows")
    run_stream(wh, "power", "s1", RunRequest.everything())
    (row,) = sql(wh, "SELECT * FROM information_schema.ins_streams WHERE stream_name = 's1'")[-1].table.to_pylist()
    # by hand: the windows [0, 10) and [10, 20) closed; the latest row is at 25 s, the progress at 20 s
    assert row["status"] == "running" and row["lag_s"] == pytest.approx(5.0), row
    recorded = StreamStore().load_state("power", "s1").trigger_table
    assert recorded is not None and recorded["ts_column"] == "event_time"
    assert max_event_time(recorded["path"], recorded["ts_column"]) == T0 + timedelta(seconds=25)
