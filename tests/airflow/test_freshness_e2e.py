"""Freshness with real Airflow components (db migrate, api-server, scheduler, dag-processor,
triggerer; LocalExecutor), real Spark and Delta: the freshness DAGs of a late stream and of a
silent one run, their checks fail, and both of Airflow's ways of saying so reach the streams'
``on_stale`` notifier, a WebSocketNotifier whose receiver is a real ``airflow-stream receive``
process: the DAG's ``on_failure_callback`` (run by the dag-processor, ``reason`` ``task_failure``)
and the DAG's ``DeadlineAlert``, missed because the check run did not succeed by the time the next
was due (its callback run by the triggerer, ``reason`` ``deadline missed``).

Worked by hand: d.m gets 00:00:10, 00:00:50, 00:01:30, 00:02:05; s1, INTERVAL(1m), closes
[00:00, 00:01) and [00:01, 00:02), so its progress is 00:02 and its lag 5 s, over its bound of
1 s: late, whatever its DAG computes (no row past 00:03 closes another window). s2,
COUNT_WINDOW(10), has fired nothing (4 rows of 10) since it was created, and the rows came more than
its silent_after of 2 s later: silent (no progress, so no lag, and not late). Both are checked
every 10 s (half the bound, at least 10 s), the interval of their deadlines.
"""

from __future__ import annotations

import time

import pytest

from airflow_stream_provider.local_airflow import LocalAirflow
from airflow_stream_provider.processes import wait_for
from airflow_stream_provider.streams.run import run as run_stream
from tests.conftest import sql
from tests.notify.conftest import ReceiverProcess

pytestmark = [pytest.mark.spark, pytest.mark.airflow]

SILENCE_S = 2.0
STREAMS = ("s1", "s2")


def test_a_late_and_a_silent_stream_fail_their_checks_and_miss_their_deadlines(wh, tmp_path, monkeypatch):
    airflow = LocalAirflow(tmp_path / "airflow", tmp_path)  # the provider's DAG folder: every stream's DAGs
    monkeypatch.setenv("AIRFLOW_STREAM_API_URL", airflow.url)
    receiver = ReceiverProcess(tmp_path).start()
    (tmp_path / "airflow-stream.toml").write_text(
        '[streams.d.s1]\nfreshness = "1s"\non_stale = "ops"\n'
        f'[streams.d.s2]\nfreshness = "20s"\nsilent_after = "{SILENCE_S:g}s"\non_stale = "ops"\n'
        '[notifiers.ops]\nclass = "airflow_stream_provider.notifications.websocket.WebSocketNotifier"\n'
        f'urls = "{receiver.url}"\nresult = {{ reason = "{{{{ reason }}}}" }}\n')
    sql(wh, "CREATE DATABASE d; USE d; CREATE TABLE m (ts TIMESTAMP, v DOUBLE);"
            "CREATE STREAM s1 INTERVAL(1m) SLIDING(1m) FROM m INTO s1_out "
            "AS SELECT _twstart ts, count(*) n FROM %%trows;"
            "CREATE STREAM s2 COUNT_WINDOW(10) FROM m INTO s2_out AS SELECT _twstart ts, count(*) n FROM %%trows")
    time.sleep(SILENCE_S + 0.5)
    sql(wh, "INSERT INTO m VALUES ('2025-01-01 00:00:10', 1) ('2025-01-01 00:00:50', 3) "
            "('2025-01-01 00:01:30', 8) ('2025-01-01 00:02:05', 2)")
    assert run_stream(wh, "d", "s1").triggers == 2
    shown = {r["stream_name"]: r for r in sql(wh, "SHOW d.STREAMS")[-1].table.to_pylist()}
    assert (shown["s1"]["freshness"], shown["s1"]["lag_s"]) == ("late", 5.0)
    assert (shown["s2"]["freshness"], shown["s2"]["lag_s"]) == ("silent", None)


    def said() -> dict[str, dict[str, dict[str, dict]]]:
        """The receiver's notifications: DAG -> reason -> run id -> the event's result."""
        found: dict[str, dict[str, dict[str, dict]]] = {}
        for message in receiver.messages():
            for event in (e for s in message["streams"] for e in s["events"]):
                r = event["result"]
                found.setdefault(r["dag_id"], {}).setdefault(r["reason"], {}).setdefault(r["run_id"], r)
        return found

    def missed_after_failing() -> dict[str, str] | None:
        """Per freshness DAG, a run whose check failed, said by its failure callback and by its
        missed deadline; None until each has one."""
        found = said()
        runs = {}
        for stream in STREAMS:
            by = found.get(f"stream__d__{stream}__fresh", {})
            both = [run for run, r in by.get("deadline missed", {}).items()
                    if r["state"] == "failed" and run in by.get("task_failure", {})]
            if not both:
                return None
            runs[stream] = both[0]
        return runs

    try:
        airflow.start()
        runs = wait_for(missed_after_failing, 90, "the failure callbacks and the missed deadlines of failed checks\n"
                        + airflow.log("scheduler"))
        for stream, run in runs.items():
            dag_id = f"stream__d__{stream}__fresh"
            assert run.startswith("scheduled__")
            (task,) = airflow.api(f"/api/v2/dags/{dag_id}/dagRuns/{run}/taskInstances")["task_instances"]
            assert (task["task_id"], task["state"]) == ("check_freshness", "failed")
            (deadline,) = airflow.api(f"/ui/dags/{dag_id}/dagRuns/{run}/deadlines")["deadlines"]
            assert (deadline["missed"], deadline["alert_name"]) == (True, f"freshness of d.{stream}")
            (alert,) = airflow.api(f"/ui/dags/{dag_id}/deadlineAlerts")["deadline_alerts"]
            assert (alert["reference_type"], alert["interval"]) == ("DagRunQueuedAtDeadline", 10.0)
    finally:
        airflow.stop()
        receiver.stop()
    for name, proc in airflow.processes.items():
        assert proc.returncode is not None, name
