"""Rows written while a run detects its windows, and two runs of one stream at once.

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
from airflow_stream_provider.streams.store import StreamStore, run_lock
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


def test_a_run_waits_while_another_run_of_the_stream_holds_it(wh):
    """Two runs of one stream (an Airflow task attempt left running beside its retry) take turns:
    the later one reads the progress and the table as the earlier one left them."""
    sql(wh, "CREATE DATABASE d; USE d; CREATE TABLE t (ts TIMESTAMP, v INT)")
    sql(wh, "CREATE STREAM s COUNT_WINDOW(1) FROM t INTO s_out AS SELECT _twstart, sum(v) total FROM %%trows")
    sql(wh, f"INSERT INTO d.t VALUES ('{T0.isoformat()}', 5)")
    store = StreamStore()
    done = threading.Event()

    def later() -> None:
        run_stream(wh, "d", "s")
        done.set()

    runner = threading.Thread(target=later)
    with run_lock(store.get("d", "s")):  # the other run, in the middle of its work
        runner.start()
        assert not done.wait(5)
        assert store.load_state("d", "s").consumed_batch is None
    runner.join(300)
    assert done.is_set()
    assert store.load_state("d", "s").consumed_batch == 0
    assert sql(wh, "SELECT * FROM s_out")[-1].table.to_pylist() == [{"_twstart": T0, "total": 5}]
