"""The Airflow half on real Spark, Delta and Airflow objects: the checkpoint trigger and its
sensor's checks, the DAG file through Airflow's DagBag, STOP/START and recalculation.

Expected windows are worked by hand from the rows each test writes: INTERVAL(5m) over
t1 = {00:00 → 1, 00:01 → 3, 00:06 → 10, 00:11 → 5} closes [00:00, 00:05) (avg 2) and
[00:05, 00:10) (avg 10); [00:10, 00:15) stays open until a row at 00:15 or later arrives.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

import airflow_stream_provider
from airflow_stream_provider import statements
from airflow_stream_provider.exceptions import StreamError
from airflow_stream_provider.streams.recalculate import recalculate
from airflow_stream_provider.streams.run import commit_progress
from airflow_stream_provider.streams.run import run as run_stream
from airflow_stream_provider.streams.run_request import RunRequest
from airflow_stream_provider.streams.runtime import StreamStopped
from airflow_stream_provider.streams.store import StreamStore, detector_lock
from airflow_stream_provider.triggers import (
    CheckpointCommitTrigger,
    EventTimeTrigger,
    check_windows,
)
from airflow_stream_provider.warehouse import Warehouse

pytestmark = [pytest.mark.spark, pytest.mark.airflow]

STREAM = """CREATE STREAM avg5 INTERVAL(5m) SLIDING(5m) FROM t1 INTO avg5_out
AS SELECT _twstart ts, avg(col1) AS a, count(*) AS n FROM %%trows"""


@pytest.fixture
def wh(spark, tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(tmp_path))
    monkeypatch.setenv("AIRFLOW_STREAM_API_URL", "http://127.0.0.1:9")  # nothing listens: Airflow is away
    wh = Warehouse(tmp_path / "warehouse", spark=spark)
    sql(wh, """CREATE DATABASE d; USE d;
               CREATE STABLE stb1 (ts TIMESTAMP, col1 INT) TAGS (loc VARCHAR(20));
               CREATE TABLE t1 USING stb1 TAGS ('a');""")
    return wh


def sql(wh, text: str):
    return list(statements.run(wh, text))


def outputs(wh) -> dict[str, tuple]:
    rows = sql(wh, "SELECT ts, a, n FROM avg5_out ORDER BY ts")[-1].table.to_pylist()
    return {r["ts"].strftime("%H:%M"): (r["a"], r["n"]) for r in rows}


def state_dir(tmp_path: Path) -> Path:
    return StreamStore(tmp_path).state_dir("d", "avg5")


def first_event(trigger, timeout: float):
    async def first():
        async for event in trigger.run():
            return event.payload
    return asyncio.run(asyncio.wait_for(first(), timeout))


def test_trigger_serializes_to_json_safe_kwargs(tmp_path):
    trigger = CheckpointCommitTrigger(str(tmp_path), "/data/t", 0.5)
    path, kwargs = trigger.serialize()
    assert path == "airflow_stream_provider.triggers.CheckpointCommitTrigger"
    import json
    assert json.loads(json.dumps(kwargs)) == kwargs
    assert CheckpointCommitTrigger(**kwargs).serialize() == (path, kwargs)
    sliding = EventTimeTrigger(str(tmp_path), "/data/t", "ts", "2025-01-01T00:00:00+00:00", 5.0)
    assert EventTimeTrigger(**sliding.serialize()[1]).serialize() == sliding.serialize()


def test_checkpoint_trigger_follows_the_detector(wh, tmp_path):
    sql(wh, STREAM)
    table = str(tmp_path / "warehouse" / "d" / "stb1")
    folder = state_dir(tmp_path)
    assert check_windows(folder, table) is None  # nothing written since creation
    sql(wh, "INSERT INTO t1 VALUES ('2025-01-01 00:00:00', 1) ('2025-01-01 00:01:00', 3) "
            "('2025-01-01 00:06:00', 10) ('2025-01-01 00:11:00', 5)")
    event = first_event(CheckpointCommitTrigger(str(folder), table, 0.1), timeout=10)
    assert event["status"] == "detect"  # no live detector: the compute task detects

    report = run_stream(wh, "d", "avg5", RunRequest(detect=True, commit=False))
    assert report.triggers == 2 and report.progress["consumed_batch"] >= 0
    assert outputs(wh) == {"00:00": (2.0, 2), "00:05": (10.0, 1)}
    # not committed yet: the detector's commit is past the consumed batch
    pending = check_windows(folder, table)
    assert pending["status"] == "committed" and pending["from_batch"] == 0
    commit_progress("d", "avg5", report.progress)
    assert check_windows(folder, table) is None

    # a live detector elsewhere holds the lock: the table changing is its business, not the task's
    stored = StreamStore().get("d", "avg5")
    sql(wh, "INSERT INTO t1 VALUES ('2025-01-01 00:16:00', 2)")
    with detector_lock(stored) as mine:
        assert mine
        assert check_windows(folder, table) is None
    assert check_windows(folder, table)["status"] == "detect"

    # the trigger waits while nothing is pending, and never while the stream is stopped
    sql(wh, "STOP STREAM avg5")
    with pytest.raises(TimeoutError):
        first_event(CheckpointCommitTrigger(str(folder), table, 0.1), timeout=1.5)
    with pytest.raises(StreamStopped, match="START STREAM d.avg5"):
        run_stream(wh, "d", "avg5")
    sql(wh, "START STREAM avg5")
    report = run_stream(wh, "d", "avg5")
    assert report.triggers == 1  # [00:10, 00:15): the row at 00:16 closed it
    assert outputs(wh)["00:10"] == (5.0, 1)


def test_stop_persists_and_start_ignore_untreated_skips_what_was_written_meanwhile(wh, tmp_path):
    sql(wh, STREAM.replace("INTO avg5_out", "STREAM_OPTIONS(IGNORE_NODATA_TRIGGER) INTO avg5_out"))
    sql(wh, "INSERT INTO t1 VALUES ('2025-01-01 00:00:00', 1) ('2025-01-01 00:06:00', 10)")
    run_stream(wh, "d", "avg5")
    assert outputs(wh) == {"00:00": (1.0, 1)}
    result = sql(wh, "STOP STREAM avg5")[-1]
    assert "stopped stream d.avg5" in result.message and "not paused" in result.message
    assert StreamStore().load_state("d", "avg5").stopped is True
    assert "already stopped" in sql(wh, "STOP STREAM avg5")[-1].message
    sql(wh, "INSERT INTO t1 VALUES ('2025-01-01 00:07:00', 1000) ('2025-01-01 00:12:00', 1000)")
    sql(wh, "START STREAM IGNORE UNTREATED avg5")
    sql(wh, "INSERT INTO t1 VALUES ('2025-01-01 00:21:00', 4)")
    run_stream(wh, "d", "avg5")
    # [00:05, 00:10), closed by the row at 00:21, holds only the row written before the stop, and
    # [00:10, 00:15) holds only ignored rows: it has no data and does not fire
    assert outputs(wh) == {"00:00": (1.0, 1), "00:05": (10.0, 1)}
    assert sql(wh, "STOP STREAM IF EXISTS nope")[-1].message == "nothing to stop"
    with pytest.raises(StreamError, match="does not exist"):
        sql(wh, "START STREAM nope")


def test_recalculate_overwrites_earlier_results(wh):
    sql(wh, STREAM)
    sql(wh, "INSERT INTO t1 VALUES ('2025-01-01 00:00:00', 1) ('2025-01-01 00:01:00', 3) "
            "('2025-01-01 00:06:00', 10) ('2025-01-01 00:11:00', 5)")
    run_stream(wh, "d", "avg5")
    # an update of a closed window's row beyond any watermark, then a manual recalculation
    sql(wh, "INSERT INTO t1 VALUES ('2025-01-01 00:01:00', 7)")
    report = recalculate(wh, "d", "avg5", datetime(2025, 1, 1, tzinfo=UTC),
                                 datetime(2025, 1, 1, 0, 10, tzinfo=UTC))
    assert report.triggers == 2
    assert outputs(wh) == {"00:00": (4.0, 2), "00:05": (10.0, 1)}
    assert StreamStore().load_state("d", "avg5").recalculations == 1
    # through SQL, with Airflow away, it recalculates here and says so
    result = sql(wh, "RECALCULATE STREAM avg5 FROM '2025-01-01 00:00:00' TO '2025-01-01 00:05:00'")[-1]
    assert "recalculated here" in result.message


def test_recalculate_refusals(wh):
    sql(wh, "CREATE STREAM p1 PERIOD(10s) FROM t1 INTO p1_out AS SELECT cast(_tlocaltime/1000000 as timestamp) ts, "
            "count(*) c FROM t1")
    with pytest.raises(StreamError, match="PERIOD trigger"):
        sql(wh, "RECALCULATE STREAM p1 FROM '2025-01-01 00:00:00'")
    sql(wh, "CREATE STREAM c1 COUNT_WINDOW(2) FROM t1 INTO c1_out AS SELECT _twstart ts, count(*) n FROM %%trows")
    with pytest.raises(StreamError, match="COUNT_WINDOW trigger, which needs both FROM and TO"):
        sql(wh, "RECALCULATE STREAM c1 FROM '2025-01-01 00:00:00'")


def test_dag_file_renders_every_stream_without_import_errors(wh, tmp_path, monkeypatch):
    from airflow.dag_processing.dagbag import DagBag

    sql(wh, STREAM)
    sql(wh, "CREATE STREAM p1 PERIOD(330m, 1m) FROM t1 INTO p1_out AS SELECT "
            "cast(_tlocaltime/1000000 as timestamp) ts, count(*) c FROM t1")
    sql(wh, "CREATE STREAM s1 SLIDING(1m) FROM t1 INTO s1_out AS SELECT _tcurrent_ts ts, count(*) c FROM %%trows")
    sql(wh, "CREATE CQ cq1 RESAMPLE EVERY 20s RANGE 40s TIMEOUT POLICY DISCARD BEGIN SELECT max_value(s1) "
            "INTO root.sg.d(s1_max) FROM root.sg.d GROUP BY(10s) END")
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow"))
    folder = Path(airflow_stream_provider.__file__).parent / "dags"
    bag = DagBag(dag_folder=str(folder))
    assert bag.import_errors == {}
    assert set(bag.dag_ids) == {"stream__d__avg5", "stream__d__avg5__recalc", "stream__d__p1",
                                "stream__d__s1", "stream__d__s1__recalc", "stream__root__cq1"}
    window = bag.dags["stream__d__avg5"]
    assert [t.task_id for t in window.topological_sort()] == ["compute", "commit"]
    assert window.get_task("compute").wait  # compute itself defers until the detector commits
    assert "INTERVAL(5m) SLIDING(5m)" in window.doc_md and "stream:d.avg5" in window.tags
    assert window.max_active_runs == 1 and not window.is_paused_upon_creation
    assert bag.dags["stream__d__p1"].timetable.summary == "PERIOD(5h30m, 1m)"
    assert bag.dags["stream__d__s1"].timetable.summary == "SLIDING(1m)"
    assert bag.dags["stream__d__avg5__recalc"].timetable.summary == "RECALCULATE(5m) on backfill"
    # a continuous query: its own timetable, no recalculation DAG (a backfill recomputes its ranges)
    cq = bag.dags["stream__root__cq1"]
    assert cq.timetable.summary == "RESAMPLE EVERY 20s" and cq.timetable.policy == "DISCARD"
    assert [t.task_id for t in cq.topological_sort()] == ["compute", "commit"]
    assert cq.get_task("compute").kind == "resample" and not cq.catchup
    # a stopped stream's DAGs are created paused
    sql(wh, "STOP STREAM p1")
    again = DagBag(dag_folder=str(folder))
    assert again.dags["stream__d__p1"].is_paused_upon_creation
    # Airflow parses the file in a new process every few seconds, and again for every task a
    # trigger ends (a task callback), which imports what rendering these DAGs imports: neither the
    # query engine nor Arrow, Delta or the WebSocket client (about 0.3 s of CPU a parse together)
    code = ("import runpy, sys; dags = runpy.run_path(sys.argv[1]); print(len([d for d in dags if "
            "d.startswith('stream__')]), sorted(m for m in ('pandas', 'duckdb', 'pyspark', 'pyarrow', 'numpy', "
            "'deltalake', 'websocket', 'airflow_stream_provider.warehouse.warehouse') if m in sys.modules))")
    parsed = subprocess.run([sys.executable, "-c", code, str(folder / "streams.py")], capture_output=True, text=True,
                            env={**os.environ, "AIRFLOW_STREAM_HOME": str(tmp_path)}, timeout=120)
    assert parsed.returncode == 0, parsed.stderr
    assert parsed.stdout.split("\n")[-2] == "6 []", parsed.stdout
