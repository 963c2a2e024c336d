"""SHOW [db.]STREAMS on real streams: every figure worked out by hand from the rows written."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from airflow_stream_provider import statements
from airflow_stream_provider.plan.state import StreamState
from airflow_stream_provider.streams.run import run as run_stream
from airflow_stream_provider.streams.status import like_pattern, record_sample, samples
from airflow_stream_provider.streams.store import StreamStore
from airflow_stream_provider.warehouse.catalog import WarehouseError
from tests.conftest import sql

pytestmark = pytest.mark.spark


@pytest.fixture
def wh(wh, monkeypatch):
    monkeypatch.setenv("AIRFLOW_STREAM_API_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AIRFLOW_STREAM_NOTIFY_CONN_IDS", "none")
    sql(wh, "CREATE DATABASE d; USE d; CREATE DATABASE other")
    return wh


def test_show_streams_reports_state_progress_windows_and_notifications(wh):
    list(statements.run(wh, """CREATE TABLE m (ts TIMESTAMP, v DOUBLE);
        CREATE STREAM s1 INTERVAL(1m) SLIDING(1m) FROM m NOTIFY('ws://127.0.0.1:9/nobody') ON (WINDOW_OPEN|WINDOW_CLOSE)
          INTO s1_out AS SELECT _twstart ts, sum(v) t FROM %%trows;
        CREATE STREAM s2 COUNT_WINDOW(2) FROM m INTO s2_out AS SELECT _twstart ts, count(*) n FROM %%trows;
        CREATE STREAM other.s3 PERIOD(1h) INTO other.s3_out AS SELECT cast(_tlocaltime / 1000000 AS timestamp) ts,
          count(*) n FROM d.m"""))
    list(statements.run(wh, "INSERT INTO m VALUES ('2025-01-01 00:00:10', 1) ('2025-01-01 00:00:50', 3) "
                "('2025-01-01 00:01:30', 8) ('2025-01-01 00:02:40', 2)"))
    run_stream(wh, "d", "s1")
    list(statements.run(wh, "STOP STREAM s2"))
    result = list(statements.run(wh, "SHOW STREAMS"))[-1]
    assert result.message == "2 streams in d"
    rows = {r["stream_name"]: r for r in result.table.to_pylist()}
    s1, s2 = rows["s1"], rows["s2"]
    # s1: windows [00:00], [00:01] closed and [00:02] open; two computed; 5 events dropped (no receiver)
    assert (s1["status"], s1["trigger"], s1["windows_opened"], s1["windows_closed"], s1["computations"]) == (
        "running", "INTERVAL(1m) SLIDING(1m)", 3, 2, 2)
    assert s1["progress"] == datetime(2025, 1, 1, 0, 2, tzinfo=UTC)  # the end of the last closed window
    assert s1["lag_s"] == 40.0  # the latest row, 00:02:40, is 40 s past it
    assert (s1["realtime_lag_ms"], s1["history_progress_pct"]) == (40_000, None)  # no FILL_HISTORY
    assert s1["output_rows_per_sec_1m"] == 2 / 60  # the run wrote windows [00:00] and [00:01] just now
    assert s1["input_rows_per_sec_1m"] == 4 / 60  # its detector read the 4 rows just now
    assert 0 <= s1["runner_result_latency_avg_1m_ms"] < 60_000  # found and committed by the one run
    (sample,) = samples(StreamStore().get("d", "s1"))  # the run's commit recorded the same, for the chart
    assert (sample["progress"], sample["lag_s"], sample["computed"]) == ("2025-01-01T00:02:00+00:00", 40.0, 2)
    assert (s1["notify_sent"], s1["notify_dropped"], s1["notify_pending"]) == (0, 5, 0)
    assert "ConnectionRefused" in s1["last_error"]
    assert s1["create_time"] <= datetime.now(UTC)
    assert (s2["status"], s2["computations"], s2["windows_closed"], s2["progress"]) == ("stopped", 0, 0, None)
    other = list(statements.run(wh, "SHOW other.STREAMS"))[-1].table.to_pylist()
    assert [(r["stream_name"], r["db_name"], r["trigger"]) for r in other] == [("s3", "other", "PERIOD(1h)")]
    with pytest.raises(WarehouseError, match="does not exist"):
        list(statements.run(wh, "SHOW nowhere.STREAMS"))
    list(statements.run(wh, "RECALCULATE STREAM s1 FROM '2025-01-01 00:00:00' TO '2025-01-01 00:02:00'"))
    again = {r["stream_name"]: r for r in list(statements.run(wh, "SHOW STREAMS"))[-1].table.to_pylist()}["s1"]
    assert (again["recalculations"], again["recalc_ratio"]) == (1, 1.0)  # two windows redone of two computed
    view = "SELECT reason, `start`, `end`, progress, status FROM information_schema.ins_stream_recalculates"
    (asked,) = list(statements.run(wh, view))[-1].table.to_pylist()  # recalculated here: Airflow is not there
    assert (asked["reason"], asked["start"], asked["end"], asked["progress"], asked["status"]) == (
        "RECALCULATE STREAM", datetime(2025, 1, 1, tzinfo=UTC), datetime(2025, 1, 1, 0, 2, tzinfo=UTC), "100%",
        "Finished")
    assert StreamStore().load_state("d", "s1").computed == 2
    # a late row in the closed window [00:00, 00:01) closes it again, live: one more recalculation,
    # and one more computation; 3 recalculated (2 + 1) of 3 computed
    list(statements.run(wh, "INSERT INTO m VALUES ('2025-01-01 00:00:20', 5)"))
    run_stream(wh, "d", "s1")
    late = {r["stream_name"]: r for r in list(statements.run(wh, "SHOW STREAMS"))[-1].table.to_pylist()}["s1"]
    assert (late["recalculations"], late["computations"], late["recalc_ratio"]) == (2, 3, 1.0)
    live = list(statements.run(wh, view))[-1].table.to_pylist()[-1]  # the window [00:00, 00:01) closed again
    assert (live["reason"], live["start"], live["end"], live["status"]) == (
        "late rows", datetime(2025, 1, 1, tzinfo=UTC), datetime(2025, 1, 1, 0, 1, tzinfo=UTC), "Finished")
    stored = StreamStore().get("d", "s1")
    record_sample(wh.catalog, stored, StreamState())
    count = len(samples(stored))
    record_sample(wh.catalog, stored, StreamState())  # right after another: at most one sample per 5 s
    assert len(samples(stored)) == count
    assert list(statements.run(wh, "SELECT t FROM s1_out WHERE ts = '2025-01-01 00:00:00'"))[-1].table.to_pylist() == [
        {"t": 9.0}]  # 1 + 3 + 5


def test_information_schema_tables_answer_select(wh):
    list(statements.run(wh, """CREATE TABLE m (ts TIMESTAMP, v DOUBLE);
        CREATE STREAM s1 INTERVAL(1m) SLIDING(1m) FROM m INTO s1_out AS SELECT _twstart ts, sum(v) t FROM %%trows;
        CREATE STREAM other.tick PERIOD(1h) INTO other.tick_out AS
          SELECT cast(_tlocaltime / 1000000 AS timestamp) ts, count(*) n FROM d.m;
        STOP STREAM other.tick"""))
    rows = list(statements.run(wh, "SELECT db_name, stream_name, status FROM information_schema.ins_streams "
                       "ORDER BY db_name"))[-1].table.to_pylist()
    assert rows == [{"db_name": "d", "stream_name": "s1", "status": "running"},
                    {"db_name": "other", "stream_name": "tick", "status": "stopped"}]
    tasks = list(statements.run(wh, "SELECT stream_name, task, runs_in, status, detail "
                                    "FROM information_schema.`ins_stream_tasks` t "
                                    "WHERE t.stream_name = 's1' ORDER BY task"))[-1].table.to_pylist()
    assert [(r["task"], r["runs_in"], r["status"]) for r in tasks] == [
        ("dag", "Airflow", "active"), ("detector", "compute task", "on demand"), ("recalc_dag", "Airflow", "active")]
    assert tasks[0]["detail"] == "stream__d__s1"
    tick = list(statements.run(wh, "SELECT task, runs_in, status FROM information_schema.ins_stream_tasks "
                                   "WHERE stream_name = 'tick' ORDER BY task"))[-1].table.to_pylist()
    assert [(r["task"], r["runs_in"], r["status"]) for r in tick] == [  # no node here: its task computes
        ("dag", "Airflow", "paused"), ("instants", "compute task", "stopped")]
    with pytest.raises(WarehouseError, match="information_schema.ins_vnodes does not exist; the system tables"):
        list(statements.run(wh, "SELECT * FROM information_schema.ins_vnodes"))


@pytest.mark.parametrize("pattern, name, matches", [
    ("mode%", "modes", True), ("mode%", "amodes", False), ("m_des", "modes", True), ("m\\_des", "modes", False),
    ("m\\_des", "m_des", True), ("MOD%", "modes", True), ("100\\%", "100%", True), ("100\\%", "1000", False),
    ("%s", "modes", True), ("a.b", "axb", False),
])
def test_show_streams_like_reads_the_pattern_as_sql_does(pattern, name, matches):
    assert bool(like_pattern(pattern).fullmatch(name)) is matches
