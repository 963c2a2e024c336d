"""TDengine table semantics on Delta, on a real local Spark session and real Delta tables.

Expected rows are written out by hand from the statements, following TDengine's documented
behaviour: a write of an existing (subtable, timestamp) replaces the row, DELETE removes rows, a
supertable query shows tbname and the tags, and subtables are created on first insert.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from airflow_stream_provider import statements
from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.sql import parse
from airflow_stream_provider.warehouse import Warehouse, WarehouseError, tables
from tests.conftest import sql

pytestmark = pytest.mark.spark

SCHEMA = """
CREATE DATABASE power PRECISION 'ms';
USE power;
CREATE STABLE meters (ts TIMESTAMP, current FLOAT, voltage INT, phase FLOAT)
  TAGS (location VARCHAR(24), groupid INT);
CREATE TABLE d1001 USING meters TAGS ('California.SanFrancisco', 2);
"""


def t(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


@pytest.fixture
def wh(wh):
    sql(wh, SCHEMA)
    return wh


def rows(wh: Warehouse, query: str) -> list[tuple]:
    (result,) = list(statements.run(wh, query))
    return [tuple(r.values()) for r in result.table.to_pylist()]


def version(wh: Warehouse, table: str) -> int:
    return DeltaTable(str(wh.catalog.root / "power" / table)).version()


def test_supertable_query_returns_tbname_and_tags(wh):
    list(statements.run(wh, "INSERT INTO d1001 VALUES ('2018-10-03 14:38:05.000', 10.3, 219, 0.31) "
                "d1002 USING meters TAGS ('California.LosAngeles', 3) "
                "VALUES ('2018-10-03 14:38:16.650', 10.3, 218, 0.25)"))
    got = rows(wh, "SELECT tbname, location, groupid, ts, voltage FROM meters ORDER BY tbname")
    assert got == [
        ("d1001", "California.SanFrancisco", 2, t("2018-10-03 14:38:05"), 219),
        ("d1002", "California.LosAngeles", 3, t("2018-10-03 14:38:16.650"), 218),
    ]
    # a subtable reads only its own rows
    assert rows(wh, "SELECT ts, voltage FROM d1002") == [(t("2018-10-03 14:38:16.650"), 218)]


def test_a_write_of_an_existing_timestamp_replaces_the_row(wh):
    list(statements.run(wh, "INSERT INTO d1001 VALUES ('2018-10-03 14:38:05', 10.3, 219, 0.31) "
                            "('2018-10-03 14:38:15', 12.6, 218, 0.33)"))
    list(statements.run(wh, "INSERT INTO d1001 (ts, voltage) VALUES ('2018-10-03 14:38:05', 230)"))
    got = rows(wh, "SELECT ts, current, voltage FROM d1001 ORDER BY ts")
    # the whole row is replaced: the columns not written become NULL
    assert got == [(t("2018-10-03 14:38:05"), None, 230), (t("2018-10-03 14:38:15"), pytest.approx(12.6), 218)]


def test_the_last_row_of_a_key_wins_within_one_statement(wh):
    list(statements.run(wh, "INSERT INTO d1001 VALUES (1538548685000, 1, 1, 0) (1538548685000, 2, 2, 0)"))
    assert rows(wh, "SELECT voltage FROM d1001") == [(2,)]


def test_the_same_timestamp_in_two_subtables_is_two_rows(wh):
    list(statements.run(wh, "INSERT INTO d1001 VALUES (1538548685000, 1, 1, 0) "
                "d1002 USING meters TAGS ('LA', 3) VALUES (1538548685000, 2, 2, 0)"))
    assert rows(wh, "SELECT tbname, voltage FROM meters ORDER BY tbname") == [("d1001", 1), ("d1002", 2)]


def test_delete_removes_rows_and_the_change_feed_records_every_write(wh, spark):
    list(statements.run(wh, "INSERT INTO d1001 VALUES ('2018-10-03 14:38:05', 10.3, 219, 0.31) "
                            "('2018-10-03 14:38:15', 12.6, 218, 0.33)"))
    list(statements.run(wh, "INSERT INTO d1001 VALUES ('2018-10-03 14:38:15', 13.0, 221, 0.4)"))
    (deleted,) = list(statements.run(wh, "DELETE FROM d1001 WHERE ts < '2018-10-03 14:38:10'"))
    assert deleted.rows == 1
    assert rows(wh, "SELECT ts, voltage FROM meters") == [(t("2018-10-03 14:38:15"), 221)]
    changes = (
        spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 0)
        .load(str(wh.catalog.root / "power" / "meters")).groupBy("_change_type").count().collect()
    )
    assert {r["_change_type"]: r["count"] for r in changes} == {
        "insert": 2, "update_preimage": 1, "update_postimage": 1, "delete": 1}


@pytest.mark.parametrize("small", [10, 1], ids=["by key", "by Spark"])
def test_a_delete_of_a_few_rows_is_the_kernels_and_of_many_sparks(wh, monkeypatch, small):
    """A DELETE matching at most SMALL_DELETE rows is a kernel MERGE on the rows' keys, a larger one
    Spark's DELETE (each names itself in the table's history); both delete the same rows, and the
    change feed has a delete row for each."""
    monkeypatch.setattr(tables, "SMALL_DELETE", small)
    sql(wh, "CREATE TABLE d1002 USING meters TAGS ('California.LosAngeles', 3)")
    list(statements.run(wh, "INSERT INTO d1001 VALUES ('2018-10-03 14:38:05', 10.3, 219, 0.31) "
                            "('2018-10-03 14:38:15', 12.6, 218, 0.33) ('2018-10-03 14:38:25', 12.1, 220, 0.32) "
                            "d1002 VALUES ('2018-10-03 14:38:05', 11.0, 217, 0.30)"))
    path = str(wh.catalog.root / "power" / "meters")
    before = DeltaTable(path).version()
    (deleted,) = list(statements.run(wh, "DELETE FROM d1001 WHERE ts <= '2018-10-03 14:38:15'"))
    assert deleted.rows == 2
    assert rows(wh, "SELECT tbname, ts, voltage FROM meters ORDER BY tbname") == [
        ("d1001", t("2018-10-03 14:38:25"), 220), ("d1002", t("2018-10-03 14:38:05"), 217)]
    history = DeltaTable(path).history()
    assert [h["operation"] for h in history if h["version"] > before] == ["MERGE" if small >= 2 else "DELETE"]
    changes = pa.table(DeltaTable(path).load_cdf(starting_version=before + 1).read_all()).to_pylist()
    assert sorted((r["_change_type"], r["tbname"], r["ts"]) for r in changes) == [
        ("delete", "d1001", t("2018-10-03 14:38:05")), ("delete", "d1001", t("2018-10-03 14:38:15"))]


def test_files_rewritten_by_spark_keep_standard_timestamps(wh, monkeypatch):
    """Spark writes INT96 timestamps unless told otherwise: a file a DELETE rewrites must hold the same
    UTC microsecond timestamps as the files the kernel writes, for every Parquet reader."""
    monkeypatch.setattr(tables, "SMALL_DELETE", 0)  # the DELETE is Spark's
    list(statements.run(wh, "INSERT INTO d1001 VALUES ('2018-10-03 14:38:05', 10.3, 219, 0.31) "
                            "('2018-10-03 14:38:15', 12.6, 218, 0.33)"))
    list(statements.run(wh, "DELETE FROM d1001 WHERE ts < '2018-10-03 14:38:10'"))
    table = DeltaTable(str(wh.catalog.root / "power" / "meters"))
    kinds = {str(pq.read_schema(uri).field("ts").type) for uri in table.file_uris()}
    assert kinds == {"timestamp[us, tz=UTC]"}
    assert rows(wh, "SELECT ts, voltage FROM meters") == [(t("2018-10-03 14:38:15"), 218)]


def test_change_data_feed_is_on_for_every_table(wh):
    list(statements.run(wh, "CREATE TABLE plain (ts TIMESTAMP, v DOUBLE)"))
    for name in ("meters", "plain"):
        assert DeltaTable(str(wh.catalog.root / "power" / name)).metadata().configuration == {
            "delta.enableChangeDataFeed": "true"}


def test_insert_into_the_supertable_names_the_subtable_per_row(wh):
    list(statements.run(wh, "INSERT INTO meters (tbname, ts, voltage, location, groupid) "
                "VALUES ('d2001', '2025-01-01 00:00:00', 200, 'Tokyo', 7) "
                "('d1001', '2025-01-01 00:00:00', 201, 'ignored', 0)"))
    got = rows(wh, "SELECT tbname, location, groupid, voltage FROM meters ORDER BY tbname")
    # an existing subtable keeps its tags; a new one is created from the row's tags
    assert got == [("d1001", "California.SanFrancisco", 2, 201), ("d2001", "Tokyo", 7, 200)]


def test_regular_table_with_composite_key(wh):
    list(statements.run(wh, "CREATE TABLE readings (ts TIMESTAMP, sensor INT PRIMARY KEY, v DOUBLE);"
                "INSERT INTO readings VALUES (1000, 1, 0.5) (1000, 2, 0.6) (1000, 1, 0.7)"))
    assert rows(wh, "SELECT sensor, v FROM readings ORDER BY sensor") == [(1, 0.7), (2, 0.6)]


def test_microsecond_databases_keep_microseconds(wh):
    list(statements.run(wh, "CREATE DATABASE fine PRECISION 'us'; CREATE TABLE fine.t (ts TIMESTAMP, v INT);"
                "INSERT INTO fine.t VALUES (1538548685000001, 1) ('2018-10-03 06:38:05.000002', 2)"))
    got = rows(wh, "SELECT ts, v FROM fine.t ORDER BY ts")
    assert got == [(t("2018-10-03 06:38:05.000001"), 1), (t("2018-10-03 06:38:05.000002"), 2)]


def test_tdengine_functions_work_in_select(wh):
    list(statements.run(wh, "INSERT INTO d1001 VALUES (1000, 3, 10, 0) (2000, 5, 20, 0) (3000, 7, 30, 0)"))
    # SPREAD = max - min and ELAPSED in ms between first and last timestamps, both by hand
    got = rows(wh, "SELECT SPREAD(voltage), AVG(current), COUNT(*) FROM d1001")
    assert got == [(20.0, 5.0, 3)]


def test_drop_removes_subtables_supertables_and_databases(wh):
    list(statements.run(wh, "INSERT INTO d1001 VALUES (1000, 1, 1, 0) "
                            "d1002 USING meters TAGS ('LA', 3) VALUES (1000, 2, 2, 0)"))
    list(statements.run(wh, "DROP TABLE d1001"))
    assert rows(wh, "SELECT tbname FROM meters") == [("d1002",)]
    with pytest.raises(WarehouseError, match="power.d1001 does not exist"):
        list(statements.run(wh, "INSERT INTO d1001 VALUES (2000, 1, 1, 0)"))
    with pytest.raises(WarehouseError, match="is a supertable; use DROP STABLE"):
        list(statements.run(wh, "DROP TABLE meters"))
    list(statements.run(wh, "DROP STABLE meters"))
    assert not (wh.catalog.root / "power" / "meters").exists()
    assert wh.catalog.lookup(parse("DROP TABLE d1002")[0].names[0], "power") is None
    list(statements.run(wh, "DROP TABLE IF EXISTS d1002; DROP DATABASE power"))
    assert not (wh.catalog.root / "power").exists()


def test_precision_ns_is_rejected_because_spark_holds_microseconds(wh):
    with pytest.raises(StreamDefinitionError,
                       match="PRECISION 'ns' is not supported: Spark timestamps hold microseconds"):
        list(statements.run(wh, "CREATE DATABASE nano PRECISION 'ns'"))
    assert not (wh.catalog.root / "nano").exists()


def test_if_not_exists_and_existing_names(wh):
    list(statements.run(wh, "CREATE DATABASE IF NOT EXISTS power; "
                            "CREATE STABLE IF NOT EXISTS meters (ts TIMESTAMP, v INT) TAGS (g INT)"))
    with pytest.raises(WarehouseError, match="database power already exists"):
        list(statements.run(wh, "CREATE DATABASE power"))
    with pytest.raises(WarehouseError, match="table power.d1001 already exists"):
        list(statements.run(wh, "CREATE TABLE d1001 USING meters TAGS ('x', 1)"))
    with pytest.raises(WarehouseError, match="table power.d1001 already exists"):
        list(statements.run(wh, "CREATE TABLE d1001 (ts TIMESTAMP, v INT)"))


# --- bad input: the error names the table and column, and nothing is written -------------------


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        ("INSERT INTO d1001 VALUES (1000, 1.0, 2)",
         "power.d1001: 3 values for 4 columns (ts, current, voltage, phase)"),
        ("INSERT INTO d1001 VALUES (1000, 1.0, 'high', 0.1)",
         "power.d1001: column voltage (INT): 'high' is not an integer"),
        ("INSERT INTO d1001 (ts, volts) VALUES (1000, 1)",
         "power.d1001: power.meters has no column volts (did you mean voltage?)"),
        ("INSERT INTO d9 VALUES (1000, 1.0, 2, 0.1)", "table power.d9 does not exist"),
        ("INSERT INTO d9 USING meters TAGS ('LA', 'three') VALUES (1000, 1.0, 2, 0.1)",
         "power.d9: tag groupid (INT): 'three' is not an integer"),
        ("INSERT INTO d9 USING meters TAGS ('LA') VALUES (1000, 1.0, 2, 0.1)",
         "power.d9: power.meters has 2 tags (location, groupid), 1 values given"),
        ("INSERT INTO d1001 (voltage) VALUES (1)", "power.d1001: column ts (TIMESTAMP) is part of the key"),
        # the first target is fine; the second is not: the whole statement writes nothing
        ("INSERT INTO d1001 VALUES (1000, 1.0, 2, 0.1) "
         "d1002 USING meters TAGS ('LA', 3) VALUES (1000, 1.0, 99999999999, 0.1)",
         "power.d1002: column voltage (INT): 99999999999 is out of range"),
    ],
)
def test_bad_inserts_name_table_and_column_and_write_nothing(wh, statement, message):
    before = version(wh, "meters")
    with pytest.raises(WarehouseError) as info:
        list(statements.run(wh, statement))
    assert message in str(info.value)
    assert version(wh, "meters") == before
    assert wh.catalog.lookup(parse("DROP TABLE d9")[0].names[0], "power") is None
    assert wh.catalog.lookup(parse("DROP TABLE d1002")[0].names[0], "power") is None


def test_a_failed_commit_undoes_the_statements_earlier_commits(wh, monkeypatch):
    list(statements.run(wh, "CREATE TABLE plain (ts TIMESTAMP, v INT); INSERT INTO d1001 VALUES (1000, 1, 1, 0)"))
    meters_before, plain_before = version(wh, "meters"), version(wh, "plain")
    real_upsert = tables.writer.upsert
    calls = []

    def upsert_failing_second(path, rows, keys):
        calls.append(path)
        if len(calls) == 2:
            raise OSError("disk full")
        return real_upsert(path, rows, keys)

    monkeypatch.setattr(tables.writer, "upsert", upsert_failing_second)
    with pytest.raises(WarehouseError, match="failed .*disk full.*earlier writes were undone"):
        list(statements.run(wh, "INSERT INTO d1001 VALUES (2000, 2, 2, 0) plain VALUES (2000, 2)"))
    monkeypatch.undo()
    assert rows(wh, "SELECT ts, voltage FROM d1001") == [(datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC), 1)]
    assert rows(wh, "SELECT count(*) FROM plain") == [(0,)]
    assert version(wh, "meters") == meters_before + 2  # the commit and its restore
    assert version(wh, "plain") == plain_before


def test_unknown_database_and_missing_use(tmp_path, spark):
    warehouse = Warehouse(tmp_path / "wh", spark=spark)
    with pytest.raises(WarehouseError, match="no database selected for meters"):
        list(statements.run(warehouse, "CREATE STABLE meters (ts TIMESTAMP, v INT) TAGS (g INT)"))
    list(statements.run(warehouse, "CREATE DATABASE power"))
    with pytest.raises(WarehouseError, match=r"database powr does not exist \(did you mean power\?\)"):
        list(statements.run(warehouse, "USE powr"))


