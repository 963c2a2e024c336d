"""The kernel's change feed and snapshot reads of a table a delta-rs writer outside the project
wrote: ``timestamp_ntz`` times, a compaction (``dataChange=false``), a column added by a schema
merge, a delete, and a VACUUM that removed versions a reader had not read. No JVM: delta-rs writes,
the project's readers read, the expected rows are worked out by hand."""

from __future__ import annotations

from datetime import datetime

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from airflow_stream_provider.warehouse import snapshots
from airflow_stream_provider.warehouse.catalog import WarehouseError
from airflow_stream_provider.warehouse.features import check_table_features, table_features
from airflow_stream_provider.windows.changes import ChangeFeed

CDF = {"delta.enableChangeDataFeed": "true"}


def rows(minutes: list[int], values: list[int], extra: list[float] | None = None) -> pa.Table:
    columns = {"ts": pa.array([datetime(2025, 1, 1, 0, m) for m in minutes], pa.timestamp("us")),  # naive: ntz
               "tbname": pa.array(["t1"] * len(minutes)), "v": pa.array(values, pa.int32())}
    if extra is not None:
        columns["extra"] = pa.array(extra, pa.float64())
    return pa.table(columns)


@pytest.fixture
def table(tmp_path) -> str:
    path = str(tmp_path / "foreign")
    write_deltalake(path, rows([0, 1], [1, 2]), configuration=CDF)  # version 0
    write_deltalake(path, rows([2], [3]), mode="append")  # 1
    return path


def test_timestamp_ntz_rows_and_changes(table):
    found = table_features(table)
    assert "timestampNtz" in found.reader_features
    check_table_features(table)
    feed = ChangeFeed(table)
    changes = feed.changes(0, 1)
    assert changes.schema.field("ts").type == pa.timestamp("us")  # wall clock, read as UTC downstream
    assert [(r["ts"].minute, r["v"], r["_change_type"]) for r in changes.to_pylist()] == [
        (0, 1, "insert"), (1, 2, "insert"), (2, 3, "insert")]
    assert sorted(snapshots.rows(table, 1, ["v"]).column("v").to_pylist()) == [1, 2, 3]


def test_compaction_changes_nothing_and_an_added_column_reads_as_null_before(table):
    DeltaTable(table).optimize.compact()  # 2: the two files as one, dataChange=false
    write_deltalake(table, rows([3], [4], [0.5]), mode="append", schema_mode="merge")  # 3
    DeltaTable(table).delete("v = 2")  # 4
    feed = ChangeFeed(table)
    assert feed.latest() == 4
    assert feed.changes(2, 2) is None  # the compaction: no change, nothing fires again
    assert [feed.files(v) for v in (1, 2, 3)] == [1, 0, 1]  # nor counts toward MAX_FILES_PER_TRIGGER
    changes = feed.changes(1, 4)
    got = [(r["_commit_version"], r["v"], r["extra"], r["_change_type"]) for r in changes.to_pylist()]
    assert got == [(1, 3, None, "insert"), (3, 4, 0.5, "insert"), (4, 2, None, "delete")]
    assert sorted(snapshots.rows(table, 4, ["v"]).column("v").to_pylist()) == [1, 3, 4]


def test_a_version_whose_files_vacuum_removed_is_a_clear_error(table):
    feed = ChangeFeed(table)
    assert feed.changes(1, 1) is not None
    DeltaTable(table).optimize.compact()
    DeltaTable(table).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    with pytest.raises(WarehouseError, match="removed by VACUUM"):
        ChangeFeed(table).changes(0, 1)
    # the version read before the VACUUM was kept: a reader ahead of it is not stopped
    assert feed.changes(1, 1).num_rows == 1
