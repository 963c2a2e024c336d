"""Streams declared in the DAG folder and their outputs as assets, end to end with real Airflow
components (db migrate, api-server, scheduler, dag-processor, triggerer; LocalExecutor), real Spark
and Delta.

The DAG folder holds a project declaring an INTERVAL(1m) stream (``power.avg1m``), a DAG scheduled on
its output asset and a DAG of a ``PartitionedAssetTimetable`` on it; each records the asset events it
was run for. The deploy DAG creates the stream; rows at 00:00:10, 00:00:50, 00:01:30 and 00:02:05
close [00:00, 00:01) (avg 2, 2 rows) and [00:01, 00:02) (8, 1 row). Every batch the stream commits
is one event of the plain DAG's runs, naming its windows, batches and rows, and each window one
partitioned run; a late row at 00:00:30 recalculated over [00:00, 00:01) (avg 5, 3 rows) is one
event naming exactly that window, and one more run of its partition. The stream's compute task
reports its lineage to OpenLineage's file transport: it reads m1 and writes avg1m_out, whose
columns ts, a and n come from m1's ts, v and nothing (count(*)).
"""

from __future__ import annotations

import json

import pytest

from airflow_stream_provider import statements
from airflow_stream_provider.local_airflow import LocalAirflow
from airflow_stream_provider.processes import wait_for
from airflow_stream_provider.streams.assets import AssetLedger
from airflow_stream_provider.streams.store import StreamStore
from airflow_stream_provider.warehouse import Warehouse
from tests.tables import table_rows

pytestmark = [pytest.mark.spark, pytest.mark.airflow]

URI = "airflow-stream://power/avg1m_out"
STREAM = """CREATE STREAM avg1m INTERVAL(1m) SLIDING(1m) FROM m1 STREAM_OPTIONS(IGNORE_DISORDER) INTO avg1m_out
  AS SELECT _twstart ts, avg(v) AS a, count(*) AS n FROM %%trows;
"""
CONSUMERS = '''
import json
from datetime import datetime
from airflow.sdk import DAG, Asset, PartitionedAssetTimetable, task

OUT = {out!r}
out = Asset({uri!r})


def record(dag, events, key=None):
    with open(OUT, "a") as f:
        for event in events[out]:
            seen = {{"dag": dag, "extra": event.extra, "key": event.partition_key, "run_key": key}}
            f.write(json.dumps(seen) + "\\n")


with DAG("plain", schedule=[out], start_date=datetime(2025, 1, 1), catchup=False, max_active_runs=1,
         is_paused_upon_creation=False):
    @task
    def plain(triggering_asset_events=None):
        record("plain", triggering_asset_events)
    plain()

with DAG("partitioned", schedule=PartitionedAssetTimetable(assets=out), catchup=False,
         is_paused_upon_creation=False):
    @task
    def partitioned(triggering_asset_events=None, dag_run=None):
        record("partitioned", triggering_asset_events, dag_run.partition_key)
    partitioned()
'''


def test_a_declared_stream_is_deployed_and_its_batches_schedule_asset_dags(spark, tmp_path, monkeypatch):
    home = tmp_path / "stream"
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(home))
    wh = Warehouse(home / "warehouse", spark=spark)
    list(statements.run(wh, """CREATE DATABASE power; USE power;
        CREATE STABLE meters (ts TIMESTAMP, v DOUBLE) TAGS (site VARCHAR(16));
        CREATE TABLE m1 USING meters TAGS ('north');"""))
    dags = tmp_path / "dags"
    (dags / "streams" / "power").mkdir(parents=True)
    (dags / "streams" / "power" / "avg1m.sql").write_text(STREAM)
    (dags / "project.py").write_text("from pathlib import Path\nfrom airflow_stream_provider import StreamProject\n"
                                     "globals().update(StreamProject(Path(__file__).parent / 'streams', "
                                     "name='e2e').dags())\n")
    out = tmp_path / "events.jsonl"
    (dags / "consumers.py").write_text(CONSUMERS.format(out=str(out), uri=URI))
    store = StreamStore(home)
    airflow = LocalAirflow(tmp_path / "airflow", home, dags_folder=dags)
    lineage = tmp_path / "lineage.jsonl"
    airflow.env["AIRFLOW__OPENLINEAGE__TRANSPORT"] = json.dumps({"type": "file", "log_file_path": str(lineage),
                                                                 "append": True})
    airflow.env["AIRFLOW__OPENLINEAGE__NAMESPACE"] = "e2e"
    monkeypatch.setenv("AIRFLOW_STREAM_API_URL", airflow.url)

    def seen(dag: str) -> list[dict]:
        lines = out.read_text().splitlines() if out.exists() else []
        return [e for e in map(json.loads, lines) if e["dag"] == dag]

    try:
        airflow.start()
        wait_for(lambda: store.exists("power", "avg1m"), 240, "the deploy DAG to create the stream\n"
                 + airflow.log("scheduler"))
        assert store.load_state("power", "avg1m").declared_by == "e2e"
        list(statements.run(wh, "INSERT INTO m1 VALUES ('2025-01-01 00:00:10', 1) ('2025-01-01 00:00:50', 3) "
                                "('2025-01-01 00:01:30', 8) ('2025-01-01 00:02:05', 4)"))
        wait_for(lambda: len(table_rows(wh, "power", "avg1m_out")) >= 2, 240, "the stream's outputs")
        ledger = AssetLedger(store.state_dir("power", "avg1m"))

        def entries() -> list[dict] | None:
            done = [json.loads(line) for line in ledger.path.read_text().splitlines()] if ledger.path.exists() else []
            return done if done and not ledger.pending() and sum(len(e["windows"]) for e in done) >= 2 else None

        published = wait_for(entries, 60, "the asset events to be published")
        windows = [w for entry in published for w in entry["windows"]]
        assert [(w["start"][11:16], w["end"][11:16]) for w in windows] == [("00:00", "00:01"), ("00:01", "00:02")]
        # every committed batch was one asset event of the plain DAG's runs, as the ledger has it
        plain = wait_for(lambda: seen("plain") if len(seen("plain")) == len(published) else None, 180,
                         "the asset-scheduled DAG\n" + airflow.log("scheduler"))
        for event, entry in zip(plain, published, strict=True):
            extra = event["extra"]
            assert event["key"] is None and extra["from_rest_api"] is True
            assert (extra["id"], extra["stream"], extra["windows"], extra["rows"], extra["recalculation"]) == (
                entry["id"], "power.avg1m", entry["windows"], entry["rows"], False)
            marks = extra["batches"] or extra["versions"]  # detector batches, or table versions detected in batch
            assert marks["from"] <= marks["to"]
        assert sum(e["extra"]["rows"] for e in plain) == 2  # one row per closed window
        # one partitioned run per window, its partition the window's start
        parts = wait_for(lambda: sorted(e["run_key"] for e in seen("partitioned"))
                         if len(seen("partitioned")) >= 2 else None, 180, "the partitioned DAG")
        assert parts == ["2025-01-01T00:00:00", "2025-01-01T00:01:00"]

        # a late row, recalculated: exactly the window [00:00, 00:01) again
        list(statements.run(wh, "INSERT INTO m1 VALUES ('2025-01-01 00:00:30', 11)"))
        message = list(statements.run(wh, "RECALCULATE STREAM avg1m FROM '2025-01-01 00:00:00' "
                                          "TO '2025-01-01 00:01:00'"))[-1].message
        assert "backfill" in message
        wait_for(lambda: any(e["extra"]["recalculation"] for e in seen("plain")), 240,
                 "the recalculation's asset event\n" + airflow.log("scheduler"))
        (recalc,) = [e["extra"] for e in seen("plain") if e["extra"]["recalculation"]]
        assert recalc["windows"] == [{"start": "2025-01-01T00:00:00+00:00", "end": "2025-01-01T00:01:00+00:00"}]
        assert recalc["rows"] == 1 and recalc["batches"] is None
        assert {r["ts"].strftime("%H:%M"): (r["a"], r["n"]) for r in table_rows(wh, "power", "avg1m_out")} == {
            "00:00": (5.0, 3), "00:01": (8.0, 1)}
        again = wait_for(lambda: [e["run_key"] for e in seen("partitioned") if e["extra"]["recalculation"]], 180,
                         "the partitioned DAG's run of the recalculated day")
        assert again == ["2025-01-01T00:00:00"]

        # lineage: the COMPLETE event of a compute that wrote, field by field
        def completed() -> list[dict]:
            events = [json.loads(line) for line in lineage.read_text().splitlines()] if lineage.exists() else []
            return [e for e in events if e["eventType"] == "COMPLETE"
                    and e["job"]["name"] == "stream__power__avg1m.compute" and e["outputs"]]

        event = wait_for(completed, 60, "the compute task's OpenLineage events")[0]
        assert event["job"]["namespace"] == "e2e"
        assert [(d["namespace"], d["name"]) for d in event["inputs"]] == [("airflow-stream://power", "m1")]
        (output,) = event["outputs"]
        assert (output["namespace"], output["name"]) == ("airflow-stream://power", "avg1m_out")
        assert [(f["name"], f["type"]) for f in output["facets"]["schema"]["fields"]] == [
            ("ts", "timestamp"), ("a", "double"), ("n", "long")]
        assert {column: [(i["namespace"], i["name"], i["field"]) for i in lineage_of["inputFields"]]
                for column, lineage_of in output["facets"]["columnLineage"]["fields"].items()} == {
            "ts": [("airflow-stream://power", "m1", "ts")], "a": [("airflow-stream://power", "m1", "v")]}
    finally:
        airflow.stop()
    for name, proc in airflow.processes.items():
        assert proc.returncode is not None, name
