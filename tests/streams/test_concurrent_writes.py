"""Rows written while a run detects its windows.

A run that detects itself (no stream node holds the detector) starts the detector, which reads the
trigger table up to its latest version, and then computes the windows found. The computation must
read ``%%trows`` at a version that holds every row the detector saw: rows keep coming while the
detector starts.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from airflow_stream_provider.streams.run import run as run_stream
from tests.conftest import sql

pytestmark = pytest.mark.spark

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def test_windows_found_from_rows_written_during_detection_are_computed_with_them(wh):
    sql(wh, "CREATE DATABASE d; USE d; CREATE TABLE t (ts TIMESTAMP, v INT)")
    # every row is a window of its own, closed by the row itself
    sql(wh, "CREATE STREAM s COUNT_WINDOW(1) FROM t INTO s_out AS SELECT _twstart, count(*) n, sum(v) total "
            "FROM %%trows")
    written: list[int] = []
    stop = threading.Event()

    def write() -> None:
        while not stop.is_set() and len(written) < 60:
            i = len(written)
            sql(wh, f"INSERT INTO d.t VALUES ('{(T0 + timedelta(seconds=i)).isoformat()}', {i})")
            written.append(i)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        while len(written) < 3:
            stop.wait(0.1)
        for _ in range(3):  # runs that detect while the writer commits
            run_stream(wh, "d", "s")
    finally:
        stop.set()
        writer.join(120)
    run_stream(wh, "d", "s")  # the rows written after the last run
    out = {r["_twstart"]: (r["n"], r["total"]) for r in sql(wh, "SELECT * FROM s_out")[-1].table.to_pylist()}
    assert out == {T0 + timedelta(seconds=i): (1, i) for i in written}
