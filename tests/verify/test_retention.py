"""Retention end to end: a database's KEEP (and an IoTDB database's TTL) enforced by the retention
run, the horizon it records, and every path that rewrites or judges windows leaving alone those
whose source rows are partly gone.

The oracle: the rows and windows worked out by hand from the hourly rows the test writes (value
``h`` at hour ``h`` from T0), and the output as it was before retention ran.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_stream_provider.dag_factory import RETENTION_DAG_ID, render_retention
from airflow_stream_provider.exceptions import StreamError
from airflow_stream_provider.streams.recalculate import recalculate
from airflow_stream_provider.streams.retention import run_retention
from airflow_stream_provider.streams.run import run as run_stream
from airflow_stream_provider.streams.store import StreamStore
from airflow_stream_provider.streams.verify import verify
from tests.conftest import sql

pytestmark = pytest.mark.spark

T0 = datetime(2025, 1, 1, tzinfo=UTC)
HOURS = 72  # three days of hourly rows


def stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%S")


def output(wh) -> dict[datetime, tuple]:
    return {r["_twstart"]: (r["total"], r["n"]) for r in sql(wh, "SELECT * FROM daily")[-1].table.to_pylist()}


def test_keep_deletes_old_rows_and_records_the_horizon(wh):
    sql(wh, "CREATE DATABASE d KEEP 1d; USE d")
    sql(wh, "CREATE TABLE m (ts TIMESTAMP, v INT)")
    sql(wh, "CREATE STREAM s INTERVAL(1d) SLIDING(1d) FROM m STREAM_OPTIONS(DELETE_RECALC) INTO daily (_twstart, "
            "total, n) AS SELECT _twstart, sum(v), count(*) FROM %%trows")
    sql(wh, "INSERT INTO m VALUES " + " ".join(f"('{stamp(T0 + timedelta(hours=h))}', {h})" for h in range(HOURS)))
    run_stream(wh, "d", "s")
    before = output(wh)
    # by hand: day 0 holds hours 0..23 (sum 276), day 1 hours 24..47 (sum 852); day 2 is still open
    assert before == {T0: (276, 24), T0 + timedelta(days=1): (852, 24)}

    now = T0 + timedelta(days=2, hours=12)
    report = run_retention(wh, now, vacuum_hours=0)
    horizon = now - timedelta(days=1)  # KEEP 1d
    # by hand: hours 0..35 of m are before the horizon, and both daily rows (the output's database keeps 1d too)
    assert {(e.table, e.deleted) for e in report.expired} == {("m", 36), ("daily", 2)}
    assert all(e.horizon == horizon for e in report.expired)
    assert any(e.vacuumed for e in report.expired if e.table == "m")
    left = sql(wh, "SELECT min(ts), count(*) FROM m")[-1].table.to_pylist()[0]
    assert list(left.values()) == [horizon, HOURS - 36]
    state = StreamStore().load_state("d", "s")
    assert state.source_horizon == horizon and report.streams == {"d.s": horizon}
    shown = sql(wh, "SHOW STREAMS")[-1].table.to_pylist()[0]
    assert shown["source_horizon"] == horizon

    # the version the stream verified at lost its files to VACUUM: refused, saying so
    with pytest.raises(StreamError, match="was vacuumed"):
        verify(wh, "d", "s")


def test_windows_before_the_horizon_are_skipped_by_every_path(wh):
    sql(wh, "CREATE DATABASE d KEEP 1d; USE d")
    sql(wh, "CREATE TABLE m (ts TIMESTAMP, v INT)")
    sql(wh, "CREATE DATABASE o; CREATE TABLE o.keep_all (ts TIMESTAMP, total BIGINT, n BIGINT)")
    sql(wh, "CREATE STREAM s INTERVAL(1d) SLIDING(1d) FROM m STREAM_OPTIONS(DELETE_RECALC) INTO o.keep_all "
            "(ts, total, n) AS SELECT _twstart, sum(v), count(*) FROM %%trows")
    sql(wh, "INSERT INTO m VALUES " + " ".join(f"('{stamp(T0 + timedelta(hours=h))}', {h})" for h in range(HOURS)))
    run_stream(wh, "d", "s")
    out = {r["ts"]: (r["total"], r["n"]) for r in sql(wh, "SELECT * FROM o.keep_all")[-1].table.to_pylist()}
    assert out == {T0: (276, 24), T0 + timedelta(days=1): (852, 24)}

    now = T0 + timedelta(days=2, hours=12)
    run_retention(wh, now)  # the files stay for the table's own retention: time travel still reads them
    horizon = now - timedelta(days=1)
    # the retention's deletes, then a late row into day 1 (partly gone): no path rewrites days 0 and 1
    sql(wh, f"INSERT INTO m VALUES ('{stamp(T0 + timedelta(days=1, hours=20, minutes=30))}', 1000)")
    live = run_stream(wh, "d", "s")
    assert live.expired >= 1 and "source rows partly gone" in live.summary()
    kept = {r["ts"]: (r["total"], r["n"]) for r in sql(wh, "SELECT * FROM o.keep_all")[-1].table.to_pylist()}
    assert kept == out
    # the rows left close day 1 only (day 0 has none, day 2 is open): day 1 starts before the horizon
    again = recalculate(wh, "d", "s", T0, T0 + timedelta(days=3))
    assert again.expired == 1 and again.triggers == 0
    checked = verify(wh, "d", "s")
    assert checked.equal and checked.expired == 1 and checked.horizon == horizon
    assert "not judged" in checked.summary()
    state = StreamStore().load_state("d", "s")
    assert state.expired_windows >= 2

    # CREATE STREAM warns when FILL_HISTORY reaches before what the source keeps
    (created,) = sql(wh, "CREATE STREAM h INTERVAL(1h) SLIDING(1h) FROM m STREAM_OPTIONS(FILL_HISTORY) INTO h_out AS "
                         "SELECT _twstart, count(*) FROM %%trows")
    assert "warning: FILL_HISTORY reaches back to the first row" in created.message


def test_iotdb_ttl_and_the_retention_dag(wh):
    sql(wh, "CREATE DATABASE root.sg")
    sql(wh, "CREATE TIMESERIES root.sg.d1.s1 WITH DATATYPE=INT64")
    base = int(T0.timestamp() * 1000)
    sql(wh, "INSERT INTO root.sg.d1(time, s1) VALUES " + ", ".join(f"({base + i * 60_000}, {i})" for i in range(10)))
    assert render_retention() == {}  # no database has a retention: no DAG
    sql(wh, "SET TTL TO root.sg 300000")  # five minutes
    dags = render_retention()
    assert list(dags) == [RETENTION_DAG_ID] and [t.task_id for t in dags[RETENTION_DAG_ID].tasks] == ["expire"]
    run_retention(wh, T0 + timedelta(minutes=9, seconds=30))
    (result,) = sql(wh, "SELECT s1 FROM root.sg.d1")
    # by hand: points at minutes 0..9, the horizon at 4:30: minutes 5..9 remain
    assert [r["root.sg.d1.s1"] for r in result.table.to_pylist()] == [5, 6, 7, 8, 9]
    sql(wh, "UNSET TTL TO root.sg")
    assert render_retention() == {}
