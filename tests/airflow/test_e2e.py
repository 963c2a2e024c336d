"""End to end with real Airflow components (db migrate, api-server, scheduler, dag-processor,
triggerer; LocalExecutor, parallelism 4), real Spark and Delta.

A PERIOD stream counts rows every 30 s; an INTERVAL(1m) stream averages meter values and notifies
a real WebSocket receiver of each closed window; two streams in TDengine's syntax before 3.3.7
run beside them, a window stream that recalculates expired rows (IGNORE EXPIRED 0) and a stream
without a window that writes each row at once; an IoTDB continuous query recomputes a past range
through `airflow backfill create`. The test feeds rows, waits for the outputs and
the notifications, stops and starts the window stream through SQL (its DAGs paused and unpaused
through Airflow's API), then recalculates late rows through two backfills of the recalculation
DAG: RECALCULATE STREAM and `airflow backfill create`. Expected values are worked by hand from the
rows written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from airflow_stream_provider import statements
from airflow_stream_provider.airflow_api import AirflowApi
from airflow_stream_provider.exceptions import StreamError
from airflow_stream_provider.local_airflow import LocalAirflow
from airflow_stream_provider.notify.message import validate
from airflow_stream_provider.processes import wait_for
from airflow_stream_provider.streams.store import StreamStore
from airflow_stream_provider.streams.verify import verify
from airflow_stream_provider.warehouse import Warehouse
from tests.iotdb.test_triggers import FILES as TRIGGER_FILES
from tests.notify.conftest import ReceiverProcess, events_of
from tests.tables import table_rows

pytestmark = [pytest.mark.spark, pytest.mark.airflow]

AIRFLOW = Path(sys.executable).with_name("airflow")


def rows(wh, query: str) -> list[dict]:
    return list(statements.run(wh, query))[-1].table.to_pylist()


def backfill_create(airflow: LocalAirflow, dag_id: str, start: str, end: str) -> subprocess.CompletedProcess:
    """`airflow backfill create`, as a user runs it. On SQLite, Airflow's metadata database takes one
    writer at a time, and a CLI write that meets the scheduler's can fail with "database is locked";
    Airflow then removes the partial backfill so that the command can be run again, which a user
    does (README, "Troubleshooting"): so does this, three times at most."""
    for _attempt in range(3):
        done = subprocess.run([str(AIRFLOW), "backfill", "create", "--dag-id", dag_id, "--from-date", start,
                               "--to-date", end], env=airflow.env, capture_output=True, text=True, timeout=120)
        if done.returncode == 0 or "database is locked" not in done.stderr:
            return done
        time.sleep(2)
    return done


def test_streams_run_as_airflow_dags(spark, tmp_path, monkeypatch):
    stream_home = tmp_path / "stream"
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(stream_home))
    wh = Warehouse(stream_home / "warehouse", spark=spark)
    receiver = ReceiverProcess(tmp_path).start()
    list(statements.run(wh, f"""
        CREATE DATABASE power; USE power;
        CREATE STABLE meters (ts TIMESTAMP, v DOUBLE) TAGS (site VARCHAR(16));
        CREATE TABLE m1 USING meters TAGS ('north');
        CREATE STREAM avg1m INTERVAL(1m) SLIDING(1m) FROM m1 STREAM_OPTIONS(IGNORE_DISORDER)
          NOTIFY('{receiver.url}') ON (WINDOW_CLOSE)
          INTO avg1m_out
          AS SELECT _twstart ts, avg(v) AS a, count(*) AS n FROM %%trows;
        CREATE STREAM tick PERIOD(30s) INTO tick_out
          AS SELECT cast(_tlocaltime / 1000000 AS timestamp) ts, count(*) AS c FROM meters;
        CREATE STREAM legacy_avg IGNORE EXPIRED 0 IGNORE UPDATE 0 INTO legacy_avg_out
          AS SELECT _wstart, avg(v) a, count(*) n FROM m1 INTERVAL(1m);
        CREATE STREAM doubled INTO doubled_out AS SELECT ts, v * 2 d FROM m1 WHERE v > 2;
        INSERT INTO root.farm.t1(time, temp) VALUES (2025-01-01T00:00:10Z, 1), (2025-01-01T00:00:40Z, 5),
          (2025-01-01T00:01:30Z, 9);
        CREATE TRIGGER maxima AFTER INSERT ON root.farm.**.temp_max AS 'counters.Recorder'
          USING URI '{TRIGGER_FILES / "counters.py"}' WITH ("dir" = "{stream_home}", "name" = "maxima");
        CREATE CQ cq_e2e RESAMPLE EVERY 1h BEGIN
          SELECT max_value(temp) INTO root.farm.t1(temp_max) FROM root.farm.t1 GROUP BY(1m)
        END;
    """))
    airflow = LocalAirflow(tmp_path / "airflow", stream_home)
    monkeypatch.setenv("AIRFLOW_STREAM_API_URL", airflow.url)
    try:
        airflow.start()
        list(statements.run(wh, "INSERT INTO m1 VALUES ('2025-01-01 00:00:10', 1) ('2025-01-01 00:00:50', 3) "
                    "('2025-01-01 00:01:30', 8) ('2025-01-01 00:02:05', 4)"))
        # [00:00, 00:01): avg(1, 3) = 2 over 2 rows; [00:01, 00:02): 8 over 1; [00:02, 00:03) stays open
        done = wait_for(lambda: len(table_rows(wh, "power", "avg1m_out")) >= 2, 240,
                        "the window stream's outputs\n" + airflow.log("scheduler"))
        assert done
        out = {r["ts"].strftime("%H:%M"): (r["a"], r["n"]) for r in rows(wh, "SELECT * FROM avg1m_out")}
        assert out == {"00:00": (2.0, 2), "00:01": (8.0, 1)}
        closes = wait_for(lambda: events_of(receiver.messages()) if len(events_of(receiver.messages())) >= 2
                          else None, 60, "the notifications of the notify task")
        for msg in receiver.messages():
            validate(msg)
        assert [(e["eventType"], e["windowStart"] % 3_600_000, e["result"]["a"]) for e in closes] == [
            ("WINDOW_CLOSE", 0, 2.0), ("WINDOW_CLOSE", 60_000, 8.0)]
        # the legacy streams, run by their DAGs like any stream: the same closed windows; each row
        # passing WHERE once, doubled
        wait_for(lambda: len(table_rows(wh, "power", "legacy_avg_out")) >= 2, 180, "the legacy window stream")
        legacy = {r["_wstart"].strftime("%H:%M"): (r["a"], r["n"]) for r in rows(wh, "SELECT * FROM legacy_avg_out")}
        assert legacy == {"00:00": (2.0, 2), "00:01": (8.0, 1)}
        wait_for(lambda: len(table_rows(wh, "power", "doubled_out")) >= 3, 180, "the legacy stream without a window")
        assert sorted(r["d"] for r in rows(wh, "SELECT * FROM doubled_out")) == [6.0, 8.0, 16.0]
        ticks = wait_for(lambda: table_rows(wh, "power", "tick_out"), 120, "the PERIOD stream's output")
        assert all(r["ts"].second % 30 == 0 for r in ticks)  # instants of PERIOD(30s)
        # each run's committing try is recorded with its progress, as Airflow numbers them (from 1): a
        # try left running after its supervisor died finds a later one there and does nothing
        tries = wait_for(lambda: StreamStore(stream_home).load_state("power", "tick").committed_tries, 60,
                         "the PERIOD runs' tries in the stream's progress")
        assert all(run.startswith("scheduled__") and tried >= 1 for run, tried in tries.items()), tries

        # STOP pauses the DAGs and holds the stream; START resumes it
        message = list(statements.run(wh, "STOP STREAM avg1m"))[-1].message
        assert "DAGs paused: stream__power__avg1m, stream__power__avg1m__recalc" in message
        assert airflow.api("/api/v2/dags/stream__power__avg1m")["is_paused"] is True
        list(statements.run(wh, "INSERT INTO m1 VALUES ('2025-01-01 00:03:10', 6)"))
        time.sleep(8)
        assert len(rows(wh, "SELECT * FROM avg1m_out")) == 2  # stopped: [00:02, 00:03) is not computed
        message = list(statements.run(wh, "START STREAM avg1m"))[-1].message
        assert "unpaused" in message
        wait_for(lambda: len(table_rows(wh, "power", "avg1m_out")) >= 3, 180, "the window after START")
        out = {r["ts"].strftime("%H:%M"): (r["a"], r["n"]) for r in rows(wh, "SELECT * FROM avg1m_out")}
        assert out["00:02"] == (4.0, 1)  # written while stopped, processed as history after START

        # late rows, ignored live (IGNORE_DISORDER), reach the outputs through recalculation backfills:
        # one from RECALCULATE STREAM (the REST API), one from `airflow backfill create`
        list(statements.run(wh, "INSERT INTO m1 VALUES ('2025-01-01 00:00:30', 11) ('2025-01-01 00:01:40', 2)"))
        message = list(statements.run(
            wh, "RECALCULATE STREAM avg1m FROM '2025-01-01 00:00:00' TO '2025-01-01 00:01:00'"))[-1]
        assert "backfill" in message.message and "stream__power__avg1m__recalc" in message.message
        wait_for(lambda: [b["completed_at"] for b in airflow.api(
            "/api/v2/backfills?dag_id=stream__power__avg1m__recalc")["backfills"]] == [None], 60, "the first backfill")
        with pytest.raises(StreamError, match="still running"):  # Airflow runs one backfill per DAG at a time
            list(statements.run(wh, "RECALCULATE STREAM avg1m FROM '2025-01-01 00:01:00' TO '2025-01-01 00:02:00'"))
        wait_for(lambda: all(b["completed_at"] for b in airflow.api(
            "/api/v2/backfills?dag_id=stream__power__avg1m__recalc")["backfills"]), 300, "the first backfill")
        cli = backfill_create(airflow, "stream__power__avg1m__recalc", "2025-01-01T00:01:00+00:00",
                              "2025-01-01T00:01:59+00:00")
        assert cli.returncode == 0, cli.stderr[-2000:]
        # [00:00, 00:01): avg(1, 3, 11) = 5 over 3 rows; [00:01, 00:02): avg(8, 2) = 5 over 2
        expected = {"00:00": (5.0, 3), "00:01": (5.0, 2), "00:02": (4.0, 1)}
        wait_for(lambda: {r["ts"].strftime("%H:%M"): (r["a"], r["n"]) for r in table_rows(wh, "power", "avg1m_out")}
                 == expected, 300, "the recalculation backfills\n" + airflow.log("scheduler"))
        # the outputs are committed before the task ends and its run is marked done
        def ended() -> list[tuple[str, str]]:
            runs = airflow.api("/api/v2/dags/stream__power__avg1m__recalc/dagRuns")["dag_runs"]
            return [] if any(r["state"] in ("queued", "running") for r in runs) else [
                (r["run_type"], r["state"]) for r in runs]

        runs = wait_for(ended, 60, "the recalculation runs to end", every=2)
        assert sorted(runs) == [("backfill", "success")] * 2
        # the request of RECALCULATE STREAM followed its backfill's one run (one 1 min slice) to its end;
        # the refused one and `airflow backfill create` asked for none
        view = list(statements.run(wh, "SELECT stream_name, reason, `start`, `end`, progress, status "
                                       "FROM information_schema.ins_stream_recalculates"))[-1].table.to_pylist()
        assert [tuple(r.values()) for r in view if r["stream_name"] == "avg1m"] == [
            ("avg1m", "RECALCULATE STREAM", datetime(2025, 1, 1, tzinfo=UTC), datetime(2025, 1, 1, 0, 1, tzinfo=UTC),
             "100%", "Finished")]
        # VERIFY ... REPAIR recalculates exactly the windows that differ through a run of the
        # recalculation DAG: the output altered by hand (00:00 deleted, 00:01's average changed, a row
        # no window gives added at 00:30) is reported so, repaired, and verified again
        list(statements.run(wh, "DELETE FROM avg1m_out WHERE ts = '2025-01-01 00:00:00'; INSERT INTO avg1m_out "
                                "VALUES ('2025-01-01 00:01:00', 7.5, 2) ('2025-01-01 00:30:00', 1.5, 1)"))
        said: list[str] = []
        report = verify(wh, "power", "avg1m", repair=True, api=AirflowApi(), progress=said.append)
        assert report.equal and report.removed == 1, report.summary()
        assert sorted((d.status, d.ts.strftime("%H:%M"), d.columns, d.old, d.new) for d in report.repaired) == [
            ("different", "00:01", ("a",), (7.5,), (5.0,)), ("extra", "00:30", ("a", "n"), (1.5, 1), None),
            ("missing", "00:00", ("a", "n"), None, (5.0, 3))]
        assert {r["ts"].strftime("%H:%M"): (r["a"], r["n"]) for r in table_rows(wh, "power", "avg1m_out")} == expected
        (through,) = [line for line in said if line.startswith("recalculating 2 window(s) that differ through run")]
        run_id = through.split()[7]
        assert any(line.startswith(f"run {run_id}: success") for line in said)
        run = airflow.api(f"/api/v2/dags/stream__power__avg1m__recalc/dagRuns/{run_id}")
        assert (run["run_type"], run["state"], run["logical_date"]) == ("manual", "success", None)
        assert sorted(map(tuple, run["conf"]["repair"]["windows"])) == sorted(
            {(d.group_id, d.trigger_id) for d in report.repaired if d.status != "extra"})
        view = rows(wh, "SELECT reason, progress, status FROM information_schema.ins_stream_recalculates "
                        "WHERE stream_name = 'avg1m' AND reason = 'REPAIR'")
        assert view == [{"reason": "REPAIR", "progress": "100%", "status": "Finished"}]
        # the legacy window stream recalculated the same late rows live (IGNORE EXPIRED 0), and the
        # stream without a window wrote the one of them passing WHERE
        wait_for(lambda: {r["_wstart"].strftime("%H:%M"): (r["a"], r["n"])
                          for r in table_rows(wh, "power", "legacy_avg_out")} == expected, 180,
                 "the legacy stream's recalculation")
        wait_for(lambda: sorted(r["d"] for r in table_rows(wh, "power", "doubled_out")) == [6.0, 8.0, 12.0, 16.0, 22.0],
                 180, "the late rows of the stream without a window")

        # an IoTDB continuous query is a DAG of its own timetable; a backfill recomputes a past range:
        # the run whose range starts at 00:00 (its instant 01:00, EVERY 1h, RANGE 1h) writes the
        # maxima of the 1-minute windows with rows, 5 at 00:00 and 9 at 00:01
        cli = backfill_create(airflow, "stream__root__cq_e2e", "2025-01-01T00:00:00+00:00", "2025-01-01T00:00:00+00:00")
        assert cli.returncode == 0, cli.stderr[-2000:]
        maxima = wait_for(lambda: rows(wh, "SELECT temp_max FROM root.farm.t1"), 240, "the continuous query's backfill",
                          every=3)
        assert [(r["Time"].strftime("%H:%M"), r["root.farm.t1.temp_max"]) for r in maxima] == [
            ("00:00", 5.0), ("00:01", 9.0)]
        # the Airflow task's write fired the insert trigger on the CQ's target, in the task's process
        (fired,) = [json.loads(line.removeprefix("fire ")) for line in
                    (stream_home / "maxima.log").read_text().splitlines() if line.startswith("fire ")]
        assert (fired["device"], fired["values"]) == ("root.farm.t1", [[5.0, 9.0]]) and fired["pid"] != os.getpid()
        # the backfill's run (a scheduled run comes too when the test crosses an hour, EVERY 1h)
        (run,) = [r for r in airflow.api("/api/v2/dags/stream__root__cq_e2e/dagRuns")["dag_runs"]
                  if r["run_type"] == "backfill"]
        assert (run["data_interval_start"][:19], run["data_interval_end"][:19]) == (
            "2025-01-01T00:00:00", "2025-01-01T01:00:00")

    finally:
        airflow.stop()
        receiver.stop()
    for name, proc in airflow.processes.items():
        assert proc.returncode is not None, name
