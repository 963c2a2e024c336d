"""Streams over tables whose files a writer outside the project wrote with the Delta features current
writers turn on: deletion vectors, column mapping (name mode), ``timestamp_ntz``, v2 checkpoints,
OPTIMIZE and REORG (``dataChange=false`` commits), VACUUM, a column added by the writer.

Each table is one ``airflow-stream sql`` created; Spark then turns the feature on (``ALTER TABLE
delta.`<path>` SET TBLPROPERTIES``) and writes, updates, deletes and compacts its rows, as another
team's job would. The streams run as ``airflow-stream run --until-idle`` runs them, and their output
windows are checked against windows worked out by hand from the rows written.
"""

from __future__ import annotations

import glob
import json
import os
from datetime import UTC, datetime, timedelta
from urllib.parse import unquote

import pyarrow as pa
import pytest

from airflow_stream_provider.model import TableName
from airflow_stream_provider.streams.run import run as run_stream
from airflow_stream_provider.streams.run_request import RunRequest
from airflow_stream_provider.warehouse.catalog import WarehouseError
from airflow_stream_provider.warehouse.features import check_table_features, table_features
from tests.conftest import sql

pytestmark = pytest.mark.spark

T0 = datetime(2025, 1, 1, tzinfo=UTC)
METERS = """CREATE DATABASE f; USE f;
CREATE STABLE stb1 (ts TIMESTAMP, col1 INT) TAGS (loc VARCHAR(20));
CREATE TABLE t1 USING stb1 TAGS ('a');
CREATE TABLE t2 USING stb1 TAGS ('b');"""
WINDOWS = """CREATE STREAM {name} INTERVAL(5m) SLIDING(5m) FROM stb1 PARTITION BY tbname
             STREAM_OPTIONS(DELETE_RECALC) INTO {out} AS
             SELECT _twstart, sum(col1) total, count(*) n FROM %%trows"""


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def run(wh, name: str):
    return run_stream(wh, "f", name, RunRequest.everything())


def windows(wh, out: str) -> dict:
    """(subtable, window start) -> (total, n) of the output table ``out``."""
    rows = sql(wh, f"SELECT * FROM {out}")[-1].table.to_pylist()
    return {(r["tag_tbname"], r["_twstart"]): (r["total"], r["n"]) for r in rows}


def insert(spark, path: str, rows: list[tuple[str, float, int]], ntz: bool = False) -> None:
    """Write ``rows`` (subtable, minute, value) as another team's Spark job would: straight to the
    Delta table, tags filled by the writer."""
    kind = "timestamp_ntz" if ntz else "timestamp"
    values = ", ".join(f"({kind} '{at(m).strftime('%Y-%m-%d %H:%M:%S')}', {v}, '{t}', '{'a' if t == 't1' else 'b'}')"
                       for t, m, v in rows)
    spark.sql(f"INSERT INTO delta.`{path}` (ts, col1, tbname, loc) VALUES {values}")


def actions(path: str) -> list[tuple[str, dict]]:
    """The table's commits' operation and their actions, version by version."""
    found = []
    for name in sorted(glob.glob(f"{path}/_delta_log/*.json")):
        if not os.path.basename(name)[:20].isdigit() or "checkpoint" in name:
            continue
        with open(name) as handle:
            entries = [json.loads(line) for line in handle if line.strip()]
        operation = next((e["commitInfo"].get("operation") for e in entries if "commitInfo" in e), "")
        found.append((operation, entries))
    return found


@pytest.fixture
def table(wh):
    """The supertable ``f.stb1`` made by ``airflow-stream sql``, and its Delta table's path."""
    sql(wh, METERS)
    return wh, str(wh.catalog.resolve(TableName("stb1"), "f").path)


@pytest.mark.parametrize("reader", ["kernel", "spark"])
def test_deletion_vectors_and_compaction(table, spark, monkeypatch, reader):
    """A DELETE through a deletion vector recalculates its window without the row; OPTIMIZE and
    REORG ... APPLY (PURGE), commits of ``dataChange=false`` actions only, fire nothing again. The
    windows' rows are read by the kernel's scan (few rows) or by Spark (``FEW_ROWS = 0``)."""
    from airflow_stream_provider.streams import compute, duckdb

    if reader == "spark":
        monkeypatch.setattr(compute, "FEW_ROWS", 0)
        monkeypatch.setattr(duckdb, "LOCAL_ROWS", 0)
    wh, path = table
    sql(wh, WINDOWS.format(name="dv", out="o_dv"))
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    insert(spark, path, [("t1", 0, 1), ("t1", 1, 3), ("t1", 2, 5), ("t2", 2, 7)])
    insert(spark, path, [("t1", 6, 10), ("t2", 7, 8), ("t1", 11, 5), ("t2", 12, 1)])
    run(wh, "dv")
    # by hand: t1 [00:00, 00:05) holds 1, 3, 5; [00:05, 00:10) holds 10; t2 holds 7, then 8;
    # the windows from 00:10 stay open
    assert windows(wh, "o_dv") == {("t1", at(0)): (9, 3), ("t1", at(5)): (10, 1),
                                   ("t2", at(0)): (7, 1), ("t2", at(5)): (8, 1)}

    spark.sql(f"DELETE FROM delta.`{path}` WHERE col1 = 3")
    operation, entries = actions(path)[-1]
    assert operation == "DELETE" and any(e.get("add", {}).get("deletionVector") for e in entries)
    again = run(wh, "dv")
    # the row of 3 is gone: t1's first window holds 1 and 5
    assert windows(wh, "o_dv")[("t1", at(0))] == (6, 2)
    # computed in the process from the kernel's scan of the table with its deletion vector, or by Spark
    assert (again.local > 0) == (reader == "kernel")

    spark.sql(f"OPTIMIZE delta.`{path}`")
    spark.sql(f"REORG TABLE delta.`{path}` APPLY (PURGE)")
    compactions = [entries for operation, entries in actions(path) if operation in ("OPTIMIZE", "REORG")]
    assert compactions and all(e[kind]["dataChange"] is False for entries in compactions for e in entries
                               for kind in ("add", "remove") if kind in e)
    before = windows(wh, "o_dv")
    assert run(wh, "dv").triggers == 0
    assert windows(wh, "o_dv") == before
    # the compacted files hold the same rows: a window closed after them reads the same t1 rows
    insert(spark, path, [("t1", 16, 2)])
    run(wh, "dv")
    assert windows(wh, "o_dv")[("t1", at(10))] == (5, 1)
    check_table_features(path)  # the table stays one the readers read


def test_column_mapping_and_an_added_column(table, spark):
    """Column mapping in name mode: the data files name the columns otherwise, the readers read the
    logical names (the change feed by Spark, the windows' rows by the kernel). A column the writer
    adds breaks no stream."""
    wh, path = table
    sql(wh, WINDOWS.format(name="cm", out="o_cm"))
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name')")
    assert table_features(path).column_mapping == "name"
    insert(spark, path, [("t1", 0, 1), ("t1", 1, 3), ("t2", 2, 7), ("t1", 6, 10)])
    spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMN (extra DOUBLE)")
    spark.sql(f"INSERT INTO delta.`{path}` (ts, col1, tbname, loc, extra) VALUES "
              "(timestamp '2025-01-01 00:07:00', 8, 't2', 'b', 0.5), "
              "(timestamp '2025-01-01 00:11:00', 5, 't1', 'a', 1.5), "
              "(timestamp '2025-01-01 00:12:00', 1, 't2', 'b', 2.5)")
    run(wh, "cm")
    assert windows(wh, "o_cm") == {("t1", at(0)): (4, 2), ("t1", at(5)): (10, 1),
                                   ("t2", at(0)): (7, 1), ("t2", at(5)): (8, 1)}
    spark.sql(f"DELETE FROM delta.`{path}` WHERE col1 = 1")  # t1's row at 00:00
    spark.sql(f"UPDATE delta.`{path}` SET col1 = 80 WHERE col1 = 8")  # t2's row at 00:07
    run(wh, "cm")
    got = windows(wh, "o_cm")
    assert got[("t1", at(0))] == (3, 1) and got[("t2", at(5))] == (80, 1)
    check_table_features(path)


def test_files_without_a_deletion_vector_are_read_as_they_are_under_their_physical_names(table, spark):
    """A table with column mapping by name and deletion vectors: a live window's few files are read
    as they are when none has a deletion vector (renamed from the names the files give the columns),
    and by the kernel's scan when one has; both read the rows the table holds."""
    from airflow_stream_provider.warehouse import snapshots

    wh, path = table
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name', "
              "'delta.enableDeletionVectors' = true)")
    spark.sql(f"ALTER TABLE delta.`{path}` RENAME COLUMN col1 TO reading")  # its files still say col1
    values = ("(timestamp '2025-01-01 00:00:00', 1, 't1', 'a'), (timestamp '2025-01-01 00:01:00', 2, 't1', 'a'), "
              "(timestamp '2025-01-01 00:02:00', 3, 't1', 'a') AS v(ts, reading, tbname, loc)")
    spark.sql(f"INSERT INTO delta.`{path}` (ts, reading, tbname, loc) SELECT /*+ COALESCE(1) */ * FROM VALUES {values}")
    spark.sql(f"INSERT INTO delta.`{path}` (ts, reading, tbname, loc) VALUES "
              "(timestamp '2025-01-01 00:10:00', 5, 't2', 'b')")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE reading = 2")  # a deletion vector on the first file
    _, last = actions(path)[-1]
    marked = {unquote(e["add"]["path"]) for e in last if e.get("add", {}).get("deletionVector")}
    assert len(marked) == 1  # the DELETE wrote a deletion vector, not a new file
    snap = snapshots.snapshot(path, None)
    names = [unquote(p) for p in snap.files["path"].to_pylist()]
    clean = snap.files.filter(pa.array([n not in marked for n in names]))
    assert clean.num_rows == 1 and snap.files_as_they_are(clean) and not snap.files_as_they_are(snap.files)
    assert snap.file_schema().names != snap.arrow_schema.names  # the files name the columns otherwise
    rows = snapshots.file_rows([f"{path}/{unquote(p)}" for p in clean["path"].to_pylist()], snap.file_schema())
    got = rows.rename_columns(snap.arrow_schema.names).select(["reading", "tbname", "loc"]).to_pylist()
    assert got == [{"reading": 5, "tbname": "t2", "loc": "b"}]


def test_timestamp_ntz_and_v2_checkpoints(table, spark):
    """A time column of ``timestamp_ntz`` is TDengine's TIMESTAMP with its wall clock read in UTC; a
    table checkpointed in v2 format (sidecar files) is read by the kernel from its checkpoint."""
    from pyspark.sql import types as T

    wh, path = table
    schema = spark.read.format("delta").load(path).schema
    ntz = T.StructType([T.StructField(f.name, T.TimestampNTZType(), f.nullable, f.metadata) if f.name == "ts" else f
                        for f in schema.fields])
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.feature.timestampNtz' = 'supported')")
    spark.createDataFrame([], ntz).write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(path)
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.checkpointPolicy' = 'v2', "
              "'delta.checkpointInterval' = '2')")
    wh.catalog.forget(path)
    sql(wh, WINDOWS.format(name="ntz", out="o_ntz"))
    for t, m, v in [("t1", 0, 1), ("t1", 1, 3), ("t2", 2, 7), ("t1", 6, 10), ("t2", 7, 8), ("t1", 11, 5),
                    ("t2", 12, 1)]:
        insert(spark, path, [(t, m, v)], ntz=True)
    found = table_features(path)
    assert {"timestampNtz", "v2Checkpoint"} <= found.reader_features
    assert glob.glob(f"{path}/_delta_log/_sidecars/*")
    run(wh, "ntz")
    assert windows(wh, "o_ntz") == {("t1", at(0)): (4, 2), ("t1", at(5)): (10, 1),
                                    ("t2", at(0)): (7, 1), ("t2", at(5)): (8, 1)}
    check_table_features(path)


def test_a_version_vacuum_removed_is_a_clear_error(table, spark):
    """A stream behind a VACUUM that removed the files of versions it has not read fails with an
    error that names VACUUM and what to do, rather than reading fewer rows."""
    wh, path = table
    sql(wh, WINDOWS.format(name="vac", out="o_vac"))
    insert(spark, path, [("t1", 0, 1)])
    insert(spark, path, [("t1", 6, 2)])
    spark.sql(f"OPTIMIZE delta.`{path}`")
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        spark.sql(f"VACUUM delta.`{path}` RETAIN 0 HOURS")
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    with pytest.raises(WarehouseError, match="removed by VACUUM") as err:
        run(wh, "vac")
    assert "FILL_HISTORY" in str(err.value)


@pytest.mark.parametrize(("properties", "named"), [
    ("'delta.enableTypeWidening' = 'true'", "typeWidening"),
    ("'delta.columnMapping.mode' = 'id'", "'id' mode"),
])
def test_features_the_readers_do_not_read_are_refused(spark, tmp_path, properties, named):
    path = str(tmp_path / "foreign")
    spark.sql(f"CREATE TABLE delta.`{path}` (ts TIMESTAMP, v INT) USING delta TBLPROPERTIES ({properties})")
    with pytest.raises(WarehouseError, match=named):
        check_table_features(path)


def test_a_folder_that_is_not_a_delta_table_is_refused(tmp_path):
    with pytest.raises(WarehouseError, match="is not a Delta table"):
        check_table_features(str(tmp_path))


def test_a_stream_without_a_window_over_deletion_vectors_compaction_and_an_added_column(table, spark):
    """The Structured Streaming change feed of a window-less stream: a row deleted through a deletion
    vector takes its output row with it, OPTIMIZE feeds no row again, a column the writer adds
    breaks nothing."""
    wh, path = table
    sql(wh, "CREATE STREAM each_row INTO each_row_out AS SELECT ts, col1 * 10 v10 FROM stb1 WHERE col1 > 1 "
            "PARTITION BY tbname")
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    insert(spark, path, [("t1", 0, 1), ("t1", 1, 3), ("t1", 2, 5), ("t2", 2, 7)])

    def outputs() -> list:
        return sorted(r["v10"] for r in sql(wh, "SELECT v10 FROM each_row_out")[-1].table.to_pylist())

    run(wh, "each_row")
    assert outputs() == [30, 50, 70]  # by hand: the rows above 1, times ten
    spark.sql(f"DELETE FROM delta.`{path}` WHERE col1 = 3")
    run(wh, "each_row")
    assert outputs() == [50, 70]
    spark.sql(f"OPTIMIZE delta.`{path}`")
    assert run(wh, "each_row").result_rows == 0
    assert outputs() == [50, 70]
    spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMN (extra DOUBLE)")
    spark.sql(f"INSERT INTO delta.`{path}` (ts, col1, tbname, loc, extra) VALUES "
              "(timestamp '2025-01-01 00:03:00', 9, 't1', 'a', 1.5)")
    run(wh, "each_row")
    assert outputs() == [50, 70, 90]


def test_the_change_feed_of_a_column_mapped_table_read_from_its_files_equals_spark(table, spark):
    """Column mapping (name mode) with deletion vectors: each version's changes read from the files
    its commit names (appends, a column added, Spark's DELETE, UPDATE and MERGE with their change
    files, an OPTIMIZE) equal Spark's own change feed of that version; what the file reader leaves to
    Spark is only what it cannot say."""
    from deltalake import DeltaTable

    from airflow_stream_provider.warehouse.change_files import version_changes
    from airflow_stream_provider.windows.changes import spark_changes

    wh, path = table
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name', "
              "'delta.enableDeletionVectors' = 'true')")
    first = DeltaTable(path).version() + 1
    insert(spark, path, [("t1", 0, 1), ("t1", 1, 3), ("t2", 2, 7)])
    insert(spark, path, [("t1", 6, 10), ("t2", 7, 8)])
    spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMN (extra DOUBLE)")
    spark.sql(f"INSERT INTO delta.`{path}` (ts, col1, tbname, loc, extra) VALUES "
              "(timestamp '2025-01-01 00:11:00', 5, 't1', 'a', 1.5)")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE col1 = 3")
    spark.sql(f"UPDATE delta.`{path}` SET col1 = 80 WHERE col1 = 8")
    spark.sql(f"MERGE INTO delta.`{path}` t USING (SELECT timestamp '2025-01-01 00:06:00' ts, 11 col1, 't1' tbname) s "
              "ON t.ts = s.ts AND t.tbname = s.tbname WHEN MATCHED THEN UPDATE SET col1 = s.col1")
    spark.sql(f"OPTIMIZE delta.`{path}`")
    kernel = DeltaTable(path)
    schema = pa.schema(kernel.schema().to_arrow())
    features = table_features(path)
    read_here = []
    for version in range(first, kernel.version() + 1):
        want = spark_changes(path, version)
        got = version_changes(path, version, schema, features)
        if got is None:
            continue
        read_here.append(version)

        def rows(t: pa.Table) -> list:
            named = ["ts", "col1", "tbname", "loc", "extra", "_change_type", "_commit_version"]
            return sorted(tuple(str(r.get(c)) for c in named) for r in t.to_pylist())

        assert rows(got) == rows(want), version
        stamps = {t.timestamp() for t in want.column("_commit_timestamp").to_pylist()}
        assert all(abs(t.replace(tzinfo=UTC).timestamp() - s) < 5  # the commit's own time, or its log file's
                   for t in got.column("_commit_timestamp").to_pylist() for s in stamps), version
    # the appends, the DML (its change files) and the OPTIMIZE (no change) are read from the files
    assert len(read_here) >= 7, (first, kernel.version(), read_here)
