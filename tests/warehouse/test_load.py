"""Bulk load semantics, read back through the Delta kernel (no Spark needed)."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, QueryBuilder

from airflow_stream_provider.model import TableName
from airflow_stream_provider.warehouse import Warehouse, WarehouseError
from airflow_stream_provider.warehouse.load import load
from tests.conftest import sql


def read(wh: Warehouse, db: str, table: str, query: str) -> list[dict]:
    delta = DeltaTable(str(wh.catalog.root / db / table))
    return pa.table(QueryBuilder().register("t", delta).execute(query).read_all()).to_pylist()


@pytest.fixture
def wh(tmp_path):
    # no Spark session: these statements and the load write through delta-rs, so this module needs no JVM
    warehouse = Warehouse(tmp_path / "warehouse")
    sql(warehouse, "CREATE DATABASE fine PRECISION 'us'; CREATE TABLE fine.readings (ts TIMESTAMP, v INT);"
                   "INSERT INTO fine.readings VALUES (1, 100) (2, 200)")
    return warehouse


def test_load_replaces_existing_keys_and_the_last_duplicate_wins(wh, tmp_path):
    path = tmp_path / "r.parquet"
    # epoch numbers in a 'us' database are microseconds; key 2 exists, key 3 appears twice
    pq.write_table(pa.table({"ts": pa.array([2, 3, 3], pa.int64()), "v": pa.array([201, 300, 301], pa.int32())}), path)
    report = load(wh, path, TableName("readings", "fine"), batch_rows=2)
    assert (report.rows, report.commits) == (3, 2)
    got = read(wh, "fine", "readings", "SELECT ts, v FROM t ORDER BY ts")
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    assert [(r["ts"] - epoch).microseconds for r in got] == [1, 2, 3]
    assert [r["v"] for r in got] == [100, 201, 301]


def test_a_bad_value_in_a_later_batch_writes_nothing(wh, tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("ts,v\n10,1\n11,2\n12,99999999999\n")
    before = DeltaTable(str(wh.catalog.root / "fine" / "readings")).version()
    with pytest.raises(WarehouseError, match=r"load into fine.readings: column v \(INT\) in r.csv"):
        load(wh, path, TableName("readings", "fine"), batch_rows=1)
    assert DeltaTable(str(wh.catalog.root / "fine" / "readings")).version() == before


def test_unknown_file_types_and_tables_are_refused(wh, tmp_path):
    path = tmp_path / "r.json"
    path.write_text("{}")
    with pytest.raises(WarehouseError, match="load reads .csv"):
        load(wh, path, TableName("readings", "fine"))
    with pytest.raises(WarehouseError, match="table fine.nosuch does not exist"):
        load(wh, path, TableName("nosuch", "fine"))


def test_a_csv_without_its_header_line_is_refused_with_the_reason(wh, tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("10,1\n11,2\n")  # the first row would be read as the column names
    before = DeltaTable(str(wh.catalog.root / "fine" / "readings")).version()
    with pytest.raises(WarehouseError) as info:
        load(wh, path, TableName("readings", "fine"))
    assert "r.csv has column '10', which fine.readings does not have" in str(info.value)
    assert "the first line of a CSV file names its columns (ts, v); is the header line missing?" in str(info.value)
    assert DeltaTable(str(wh.catalog.root / "fine" / "readings")).version() == before


def test_a_file_with_tbname_loaded_into_a_subtable_says_where_it_belongs(wh, tmp_path):
    sql(wh, "CREATE STABLE fine.meters (ts TIMESTAMP, v INT) TAGS (site VARCHAR(8));"
            "INSERT INTO fine.d1 USING fine.meters TAGS ('a') VALUES (1, 1)")
    path = tmp_path / "m.parquet"
    pq.write_table(pa.table({"tbname": ["d1"], "ts": pa.array([2], pa.int64()), "v": pa.array([2], pa.int32())}),
                   path)
    with pytest.raises(WarehouseError) as info:
        load(wh, path, TableName("d1", "fine"))
    # the supertable has a tbname: the subtable fixes it (the review found "which fine.meters does not have")
    assert "m.parquet has column 'tbname', but fine.d1 is one subtable of fine.meters" in str(info.value)
    assert "load the file into fine.meters" in str(info.value)
    assert read(wh, "fine", "meters", "SELECT count(*) AS n FROM t") == [{"n": 1}]
