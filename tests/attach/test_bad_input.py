"""Bad input around attached tables: a path that is no Delta table, a mapping naming a missing column
or a column of the wrong type, a table without its change data feed, and a table its owner retypes
or deletes under a running stream. Each is a clear error; the stream is shown failed with its
last_error, nothing is written, and it computes again once the table fits its mapping."""

from __future__ import annotations

import shutil

import pytest
from deltalake import DeltaTable

from airflow_stream_provider.streams.run import run as run_stream
from airflow_stream_provider.streams.run_request import RunRequest
from airflow_stream_provider.warehouse import WarehouseError
from tests.attach.test_attach import FIRST, MAP, SCHEMA, STREAM, append
from tests.conftest import sql

pytestmark = pytest.mark.spark


@pytest.fixture
def readings(spark, tmp_path):
    path = tmp_path / "owner" / "readings"
    spark.sql(f"CREATE TABLE delta.`{path}` ({SCHEMA}) USING delta TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    append(spark, path, FIRST)
    return path


@pytest.fixture
def wh(wh):
    sql(wh, "CREATE DATABASE power")
    return wh


@pytest.mark.parametrize(("mapping", "message"), [
    ("MAP (TIMESTAMP event_time, TBNAME device_id, TAGS (location = sitte))",
     r"MAP TAGS names column sitte, which .* does not have \(did you mean site"),
    ("MAP (TIMESTAMP device_id, TBNAME site)",
     "MAP TIMESTAMP device_id is string; the timestamp column must be a timestamp"),
    ("MAP (TIMESTAMP event_time, TBNAME voltage)",
     "MAP TBNAME voltage is integer; the subtable name column must be a string"),
    ("MAP (TIMESTAMP event_time, TBNAME device_id, COLUMNS (voltage, amps))", "MAP COLUMNS names column amps"),
])
def test_a_mapping_that_does_not_fit_is_refused(wh, readings, mapping, message):
    with pytest.raises(WarehouseError, match=message):
        sql(wh, f"CREATE STABLE power.meters FROM DELTA '{readings}' {mapping}")
    assert "meters" not in str(sql(wh, "SHOW power.STABLES")[-1].table.to_pylist())


def test_a_path_that_is_not_a_delta_table(wh, tmp_path):
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "a.csv").write_text("x\n1\n")
    for path in (tmp_path / "plain", tmp_path / "nowhere"):
        with pytest.raises(WarehouseError, match="is not a Delta table"):
            sql(wh, f"CREATE STABLE power.meters FROM DELTA '{path}' {MAP}")


def test_a_table_with_a_feature_no_reader_reads_is_refused_at_the_attach(wh, spark, tmp_path):
    path = tmp_path / "owner" / "widened"
    spark.sql(f"CREATE TABLE delta.`{path}` ({SCHEMA}) USING delta TBLPROPERTIES (delta.enableChangeDataFeed = true, "
              "delta.enableTypeWidening = true)")
    with pytest.raises(WarehouseError, match="typeWidening"):
        sql(wh, f"CREATE STABLE power.meters FROM DELTA '{path}' {MAP}")
    assert sql(wh, "SHOW power.STABLES")[-1].table.num_rows == 0  # nothing recorded


def test_a_table_without_the_change_feed_names_the_statement_that_turns_it_on(wh, spark, tmp_path):
    path = tmp_path / "owner" / "plain"
    spark.sql(f"CREATE TABLE delta.`{path}` ({SCHEMA}) USING delta TBLPROPERTIES (delta.enableChangeDataFeed = false)")
    version = DeltaTable(str(path)).version()
    with pytest.raises(WarehouseError) as caught:
        sql(wh, f"CREATE STABLE power.meters FROM DELTA '{path}' {MAP}")
    assert "delta.enableChangeDataFeed" in str(caught.value)
    assert f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES (delta.enableChangeDataFeed = true)" in str(caught.value)
    assert DeltaTable(str(path)).version() == version  # nothing committed


def test_show_stables_describe_and_information_schema(wh, readings):
    sql(wh, f"CREATE STABLE power.meters FROM DELTA '{readings}' {MAP}")
    (row,) = sql(wh, "SHOW power.STABLES")[-1].table.to_pylist()
    assert row["table_name"] == "meters" and row["source"] == str(readings) and row["access"] == "read-only"
    described = sql(wh, "DESCRIBE power.meters")[-1].table.to_pylist()
    assert [(r["field"], r["note"], r["source"]) for r in described] == [
        ("event_time", "", "event_time"), ("voltage", "", "voltage"), ("current", "", "current"),
        ("tbname", "TBNAME", "device_id"), ("location", "TAG", "site")]
    assert [r["type"] for r in described][:3] == ["TIMESTAMP", "INT", "DOUBLE"]
    rows = sql(wh, "SELECT db_name, table_name, source FROM information_schema.ins_stables")[-1].table.to_pylist()
    assert rows == [{"db_name": "power", "table_name": "meters", "source": str(readings)}]


def stream_row(wh) -> dict:
    (row,) = [r for r in sql(wh, "SHOW power.STREAMS")[-1].table.to_pylist() if r["stream_name"] == "s1"]
    return row


def output_rows(wh) -> list:
    return sorted(sql(wh, "SELECT * FROM power.out")[-1].table.to_pylist(), key=str)


@pytest.mark.parametrize("change", ["retype", "delete"])
def test_the_owner_changes_the_table_under_a_running_stream(wh, spark, readings, change):
    sql(wh, f"CREATE STABLE power.meters FROM DELTA '{readings}' {MAP}")
    sql(wh, STREAM.format(options="STREAM_OPTIONS(FILL_HISTORY)"))
    run_stream(wh, "power", "s1", RunRequest.everything())
    before = output_rows(wh)
    assert len(before) == 3
    if change == "retype":  # voltage becomes a string column
        retyped = spark.sql(f"SELECT event_time, device_id, site, CAST(voltage AS STRING) AS voltage, current "
                            f"FROM delta.`{readings}`")
        retyped.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(str(readings))
        expected = "voltage was integer when the table was attached and is string now"
    else:
        shutil.rmtree(readings)
        expected = "is not a Delta table"
    with pytest.raises(WarehouseError, match=expected):
        run_stream(wh, "power", "s1", RunRequest.everything())
    row = stream_row(wh)
    assert row["status"] == "failed" and expected in row["last_error"] and "power.meters" in row["last_error"]
    assert output_rows(wh) == before  # nothing written, nothing lost


def test_a_table_of_the_warehouse_is_not_attached(wh):
    sql(wh, "CREATE STABLE power.own (ts TIMESTAMP, v INT) TAGS (g INT)")
    own = wh.catalog.table_path("power", "own")
    with pytest.raises(WarehouseError, match="inside the warehouse"):
        sql(wh, f"CREATE STABLE power.again FROM DELTA '{own}' MAP (TIMESTAMP ts, TBNAME tbname)")
