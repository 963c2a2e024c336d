"""Rows handed to Spark as Arrow keep every batch.

Spark reads the Arrow batches of ``createDataFrame(pyarrow.Table)`` up to the first one without rows
and drops the rest. A window's ``%%trows`` read by delta-rs yields such a batch for each file whose
statistics overlap the window but whose rows all fall outside it (here: another subtable's rows
before and after it), so the rows of the files after it went missing from the window.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest

from airflow_stream_provider.spark.session import arrow_frame
from airflow_stream_provider.streams.run import run as run_stream
from tests.conftest import sql

pytestmark = pytest.mark.spark

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def at(seconds: int) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat()


def test_a_table_with_an_empty_batch_in_the_middle_keeps_every_row(spark):
    table = pa.Table.from_batches([pa.record_batch({"x": [1, 2]}), pa.record_batch({"x": pa.array([], pa.int64())}),
                                   pa.record_batch({"x": [3]})])
    assert sorted(r.x for r in arrow_frame(spark, table).collect()) == [1, 2, 3]
    empty = pa.table({"x": pa.array([], pa.int64())})
    assert arrow_frame(spark, empty).count() == 0


def test_a_window_reads_the_rows_of_every_file(wh):
    sql(wh, "CREATE DATABASE d; USE d; CREATE STABLE m (ts TIMESTAMP, v INT) TAGS (g INT); "
            "CREATE TABLE d1 USING m TAGS (1); CREATE TABLE d2 USING m TAGS (2)")
    sql(wh, "CREATE STREAM s INTERVAL(10s) SLIDING(10s) FROM d1 INTO s_out AS "
            "SELECT _twstart, count(*) n, sum(v) total FROM %%trows")
    # one file per INSERT: d1's first row; d2's rows around the window (its statistics span the window,
    # none of its rows is in it); then d1's second row of [0 s, 10 s) and the row that closes it
    sql(wh, f"INSERT INTO d1 VALUES ('{at(1)}', 1)")
    sql(wh, f"INSERT INTO d2 VALUES ('{at(-100)}', 1000) ('{at(100)}', 1000)")
    sql(wh, f"INSERT INTO d1 VALUES ('{at(2)}', 2) ('{at(12)}', 12)")
    run_stream(wh, "d", "s")
    out = {r["_twstart"]: (r["n"], r["total"]) for r in sql(wh, "SELECT * FROM s_out")[-1].table.to_pylist()}
    assert out == {T0: (2, 3)}  # 1 s and 2 s; [10 s, 20 s) is still open
