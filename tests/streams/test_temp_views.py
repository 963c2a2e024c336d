"""A long-lived session keeps no temporary views.

The stream node's session serves runs for days. A computation reads its triggers and ``%%trows``
through temporary views, and a window query its rows; each view keeps its plan (and local rows) in
the driver's memory, so every view must go once the query reading it has run.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_stream_provider.streams.run import run as run_stream
from tests.conftest import sql

pytestmark = pytest.mark.spark

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def temporary_views(spark) -> set[str]:
    return {t.name for t in spark.catalog.listTables() if t.isTemporary}


def test_stream_runs_and_window_queries_leave_no_temporary_views(wh, spark):
    before = temporary_views(spark)
    sql(wh, "CREATE DATABASE d; USE d; CREATE TABLE t (ts TIMESTAMP, v INT)")
    sql(wh, "CREATE STREAM s INTERVAL(10s) SLIDING(10s) FROM t STREAM_OPTIONS(FORCE_OUTPUT) INTO s_out AS "
            "SELECT _twstart, count(*) n, sum(v) total FROM %%trows")
    values = " ".join(f"('{(T0 + timedelta(seconds=s)).isoformat()}', {s})" for s in (0, 5, 10, 15, 20, 25, 35))
    sql(wh, f"INSERT INTO t VALUES {values}")
    for _ in range(2):  # the second run finds nothing new
        run_stream(wh, "d", "s")
    out = {r["_twstart"]: (r["n"], r["total"]) for r in sql(wh, "SELECT * FROM s_out")[-1].table.to_pylist()}
    # the windows closed by the row at 35 s: [0, 10), [10, 20), [20, 30); [30, 40) is still open
    assert out == {T0: (2, 5), T0 + timedelta(seconds=10): (2, 25), T0 + timedelta(seconds=20): (2, 45)}
    filled = sql(wh, "SELECT _wstart, count(*) n FROM t INTERVAL(10s) FILL(VALUE, 0)")[-1].table.to_pylist()
    assert [r["n"] for r in filled] == [2, 2, 2, 1]
    assert temporary_views(spark) == before
