"""Freshness on real Spark, Delta and Airflow objects: a stream declared with a bound of 5 minutes
falls late when a row 8 minutes past its progress arrives; a stream whose bound comes from
``airflow-stream.toml`` falls silent when rows keep arriving 3 seconds after it last fired (here: was
created) and fires nothing, and is fresh again once a window fires. SHOW STREAMS says so, and the
check task of each stream's freshness DAG, parsed by Airflow's DagBag and run as the worker runs it,
fails saying why.

Worked by hand: d.m gets 00:00:10, 00:00:50, 00:01:30, 00:02:40; s1, INTERVAL(1m), closes
[00:00, 00:01) and [00:01, 00:02), so its progress is 00:02 and its lag 40 s (under 300 s); the row
00:10:00 makes the lag 480 s. s2, COUNT_WINDOW(3), created after those rows, has seen none of them.
"""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

import pytest

from airflow_stream_provider.plan.declaration import declare
from airflow_stream_provider.streams.declared import deploy
from airflow_stream_provider.streams.run import run as run_stream
from airflow_stream_provider.streams.store import StreamStore
from tests.conftest import sql

pytestmark = [pytest.mark.spark, pytest.mark.airflow]

S1 = "CREATE STREAM s1 INTERVAL(1m) SLIDING(1m) FROM m INTO s1_out AS SELECT _twstart ts, count(*) n FROM %%trows"
S2 = "CREATE STREAM s2 COUNT_WINDOW(3) FROM m INTO s2_out AS SELECT _twstart ts, count(*) n FROM %%trows"
SILENCE_S = 3.0


def shown(wh) -> dict[str, dict]:
    return {r["stream_name"]: r for r in sql(wh, "SHOW d.STREAMS")[-1].table.to_pylist()}


def write_project(folder: Path, bound: str) -> None:
    (folder / "project.py").write_text(
        "from airflow_stream_provider import StreamDeclaration, StreamProject\n"
        f"S1 = StreamDeclaration.of({S1!r}, database='d', freshness={bound!r})\n"
        "globals().update(StreamProject(name='demo', streams=[S1]).dags())\n")


def check(folder: Path, stream: str):
    """The freshness check of ``stream``'s DAG, parsed by Airflow, run as a worker runs it."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(folder))
    assert bag.import_errors == {}
    assert "streams__demo__deploy" not in bag.dag_ids  # the declared freshness is the one recorded
    dag = bag.dags[f"stream__d__{stream}__fresh"]
    assert dag.task_ids == ["check_freshness"] and not dag.is_paused_upon_creation
    callbacks = dag.on_failure_callback if isinstance(dag.on_failure_callback, list) else [dag.on_failure_callback]
    assert [type(c).__name__ for c in callbacks if c] == (["WebSocketNotifier"] if stream == "s2" else [])
    # the deadline of each check: the next check's time, half the bound (5 min -> 150 s; 1 h -> 30 min,
    # at most 5 min); its callback, run by the triggerer, names the stream and its on_stale notifier
    (alert,) = dag.deadline
    assert (type(alert.reference).__name__, alert.interval, alert.name) == (
        "DagRunQueuedAtDeadline", timedelta(seconds=300 if stream == "s2" else 150), f"freshness of d.{stream}")
    assert (type(alert.callback).__name__, alert.callback.path, alert.callback.kwargs) == (
        "AsyncCallback", "airflow_stream_provider.operators.freshness.freshness_deadline_missed",
        {"stream": f"d.{stream}", "notifier": "ops" if stream == "s2" else None})
    return dag.get_task("check_freshness").execute({})


def test_a_stream_is_late_over_its_bound_and_silent_when_rows_arrive_and_nothing_fires(wh, tmp_path, monkeypatch):
    from airflow.sdk.exceptions import AirflowException

    monkeypatch.setenv("AIRFLOW_STREAM_API_URL", "http://127.0.0.1:9")  # nothing listens: Airflow is away
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow"))
    (tmp_path / "airflow-stream.toml").write_text(
        f'[streams.d.s2]\nfreshness = "1h"\nsilent_after = "{SILENCE_S:g}s"\non_stale = "ops"\n'
        '[notifiers.ops]\nclass = "airflow_stream_provider.notifications.websocket.WebSocketNotifier"\n'
        'urls = "ws://127.0.0.1:9/stale"\n')
    folder = tmp_path / "dags"  # the project renders its stream and the streams no project declares
    folder.mkdir()
    write_project(folder, "5m")
    store = StreamStore(tmp_path)
    sql(wh, "CREATE DATABASE d; USE d; CREATE TABLE m (ts TIMESTAMP, v DOUBLE)")
    deploy(wh, "d", "s1", declare(S1, database="d", freshness="5m"), project="demo", store=store)
    sql(wh, "INSERT INTO m VALUES ('2025-01-01 00:00:10', 1) ('2025-01-01 00:00:50', 3) "
            "('2025-01-01 00:01:30', 8) ('2025-01-01 00:02:40', 2)")
    assert run_stream(wh, "d", "s1").triggers == 2
    sql(wh, S2)
    created = time.monotonic()
    rows = shown(wh)
    assert (rows["s1"]["freshness"], rows["s1"]["freshness_bound_s"], rows["s1"]["lag_s"]) == ("ok", 300.0, 40.0)
    assert (rows["s2"]["freshness"], rows["s2"]["freshness_bound_s"]) == ("ok", 3600.0)  # no row since it began

    time.sleep(max(0.0, SILENCE_S + 0.5 - (time.monotonic() - created)))
    sql(wh, "INSERT INTO m VALUES ('2025-01-01 00:10:00', 4)")
    rows = shown(wh)
    assert (rows["s1"]["freshness"], rows["s1"]["lag_s"]) == ("late", 480.0)
    assert rows["s2"]["freshness"] == "silent"
    with pytest.raises(AirflowException, match=r"stream d.s1 is late: its realtime lag is 480 s, over its "
                                               r"freshness bound of 300 s"):
        check(folder, "s1")
    with pytest.raises(AirflowException, match=r"stream d.s2 is silent: rows kept arriving on its trigger table"):
        check(folder, "s2")
    assert run_stream(wh, "d", "s2").triggers == 0  # one row of three: it ran, and fired nothing
    assert shown(wh)["s2"]["freshness"] == "silent"

    sql(wh, "INSERT INTO m VALUES ('2025-01-01 00:10:01', 5) ('2025-01-01 00:10:02', 6)")
    assert run_stream(wh, "d", "s2").triggers == 1  # a window of three rows fired after the last row came
    assert run_stream(wh, "d", "s1").triggers == 8  # [00:02, 00:03) ... [00:09, 00:10) closed: lag 2 s
    rows = shown(wh)
    assert (rows["s1"]["freshness"], rows["s2"]["freshness"]) == ("ok", "ok")
    assert check(folder, "s2") == {"freshness": "ok", "bound_s": 3600.0, "lag_s": rows["s2"]["lag_s"]}

    # the declared freshness alone changes: the deploy task records it, the stream stays as it is
    from airflow.dag_processing.dagbag import DagBag

    write_project(folder, "1s")
    bag = DagBag(dag_folder=str(folder))
    assert "is as declared (its freshness now" in bag.dags["streams__demo__deploy"].get_task(
        "deploy__d__s1").execute({})
    assert shown(wh)["s1"]["freshness_bound_s"] == 1.0 and StreamStore(tmp_path).load_state("d", "s1").computed == 10
