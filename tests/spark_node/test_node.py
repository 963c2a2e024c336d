"""The stream node: start, status, stop, and the Spark Connect path against the in-process path."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from airflow.sdk.exceptions import TaskDeferred

from airflow_stream_provider import statements
from airflow_stream_provider.node import server as node
from airflow_stream_provider.operators import StreamComputeOperator
from airflow_stream_provider.processes import free_port, wait_for
from airflow_stream_provider.spark import endpoint, session
from airflow_stream_provider.triggers import CheckpointCommitTrigger
from airflow_stream_provider.warehouse import Warehouse
from tests import process_tree
from tests.tables import table_rows

pytestmark = pytest.mark.spark

SCRIPT = Path(sys.executable).with_name("airflow-stream")

STATEMENTS = """
CREATE DATABASE power;
USE power;
CREATE STABLE meters (ts TIMESTAMP, current FLOAT, voltage INT, phase FLOAT) TAGS (location VARCHAR(24), groupid INT);
INSERT INTO d1001 USING meters TAGS ('California.SanFrancisco', 2)
  VALUES ('2018-10-03 14:38:05.000', 10.3, 219, 0.31) ('2018-10-03 14:38:15.000', 12.6, 218, 0.33)
  d1002 USING meters TAGS ('California.LosAngeles', 3) VALUES ('2018-10-03 14:38:16.650', 10.3, 218, 0.25);
INSERT INTO d1001 VALUES ('2018-10-03 14:38:15.000', 13.1, 221, 0.35);
DELETE FROM meters WHERE voltage = 218;
"""
QUERIES = [
    "SELECT tbname, location, groupid, ts, current, voltage, phase FROM power.meters ORDER BY tbname, ts",
    "SELECT tbname, COUNT(*), AVG(voltage), SPREAD(current), LAST(ts) FROM power.meters "
    "GROUP BY tbname ORDER BY tbname",
    "SELECT ts, TIMETRUNCATE(ts, 1m) AS minute, CAST(voltage AS BIGINT) + 1 AS v FROM power.d1001 "
    "WHERE ts >= '2018-10-03 14:38:00' ORDER BY ts",
]


def cli(home: Path, *args: str, timeout: int = 240) -> subprocess.CompletedProcess:
    env = os.environ | {"AIRFLOW_STREAM_HOME": str(home)}
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, env=env)


@pytest.fixture(scope="module")
def running_node(tmp_path_factory, spark):
    home = tmp_path_factory.mktemp("node-home")
    port = free_port()
    started = cli(home, "node", "start", "--port", str(port))
    assert started.returncode == 0, started.stderr + started.stdout
    try:
        yield home, port
    finally:
        from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

        active = RemoteSparkSession.getActiveSession()
        if active is not None:
            active.stop()
        stopped = cli(home, "node", "stop", timeout=120)
        assert stopped.returncode == 0, stopped.stderr


def test_status_shows_uptime_and_streaming_queries_with_progress(running_node, monkeypatch):
    home, port = running_node
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(home))
    assert endpoint.running_url() == f"sc://127.0.0.1:{port}"
    remote = session.spark_session()
    assert type(remote).__module__.startswith("pyspark.sql.connect")
    query = (remote.readStream.format("rate").option("rowsPerSecond", 10).load()
             .writeStream.format("noop").queryName("probe_rate").start())
    try:
        deadline = time.monotonic() + 60
        listed = {}
        while time.monotonic() < deadline:
            report = node.status()
            listed = {q["name"]: q for q in report["queries"]}
            if listed.get("probe_rate", {}).get("last_progress"):
                break
            time.sleep(1)
        assert listed["probe_rate"]["last_progress"]["batchId"] >= 0
        shown = cli(home, "node", "status")
        assert shown.returncode == 0, shown.stderr
        first = shown.stdout.splitlines()[0]
        assert first.startswith(f"stream node: running, pid {report['pid']}, sc://127.0.0.1:{port}, up ")
        assert "streaming queries: 1" in shown.stdout
        assert "- probe_rate: batch " in shown.stdout
        as_json = json.loads(cli(home, "node", "status", "--json").stdout)
        assert as_json["uptime_s"] > 0 and as_json["url"] == f"sc://127.0.0.1:{port}"
    finally:
        query.stop()
    # nothing of Spark's lands in the working directory of the node
    assert not {"spark-warehouse", "metastore_db", "derby.log"} & {p.name for p in (home / "node").iterdir()}


def test_connect_path_and_local_path_give_identical_results(running_node, tmp_path, spark, monkeypatch):
    home, _ = running_node
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(home))
    remote = session.spark_session()
    results = {}
    for label, spark_session, root in (("connect", remote, home / "warehouse"), ("local", spark, tmp_path / "wh")):
        warehouse = Warehouse(root, spark=spark_session)
        list(statements.run(warehouse, STATEMENTS))
        results[label] = [list(statements.run(warehouse, q))[0].table.to_pylist() for q in QUERIES]
    assert results["connect"] == results["local"]
    # and both are right: d1001 keeps its replaced 14:38:15 row, the voltage-218 row of d1002 is gone
    assert [(r["tbname"], r["voltage"]) for r in results["local"][0]] == [("d1001", 219), ("d1001", 221)]


def _forget_connect_sessions() -> None:
    """Stop this process's Connect sessions, so that the next one connects afresh."""
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    for remote in (RemoteSparkSession.getActiveSession(), RemoteSparkSession._get_default_session()):
        if remote is not None:
            remote.stop()


def test_connect_wants_the_node_token(running_node, monkeypatch):
    """Only clients holding the node's token (node/token, 0600) get in, and their sessions read
    `${...}` in SQL text as written."""
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    home, port = running_node
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(home))
    monkeypatch.delenv("SPARK_CONNECT_AUTHENTICATE_TOKEN", raising=False)
    monkeypatch.delenv("AIRFLOW_STREAM_SPARK_REMOTE", raising=False)
    token_file = home / "node" / "token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    token = token_file.read_text()
    assert len(token) >= 32 and endpoint.running_connect_url() == f"sc://127.0.0.1:{port}/;token={token}"
    _forget_connect_sessions()
    try:
        # pyspark's own client without a token: refused by the server
        stranger = RemoteSparkSession.builder.remote(f"sc://127.0.0.1:{port}").create()
        with pytest.raises(Exception, match="UNAUTHENTICATED"):
            stranger.sql("SELECT 1").collect()
        stranger.stop()
        # the project's client with a wrong token: refused, with a clear error
        monkeypatch.setenv("AIRFLOW_STREAM_SPARK_REMOTE", f"sc://127.0.0.1:{port}/;token=not-{token}")
        with pytest.raises(session.ConnectRefused, match=f"sc://127.0.0.1:{port}/? refused this client's token"):
            session.spark_session()
        monkeypatch.delenv("AIRFLOW_STREAM_SPARK_REMOTE")
        # with the token of node/token
        remote = session.spark_session()
        assert type(remote).__module__.startswith("pyspark.sql.connect")
        assert remote.conf.get(session.VARIABLE_SUBSTITUTE) == "false"
        assert remote.sql("SELECT '${system:user.name}' AS v").collect()[0].v == "${system:user.name}"
    finally:
        _forget_connect_sessions()


def test_no_process_of_the_node_has_its_token_on_its_command_line(running_node):
    """``ps`` shows every local user each process's command line: the token goes by the environment
    and node/token, never argv, in the node, its JVM and its workers."""
    home, _ = running_node
    token = (home / "node" / "token").read_text()
    pid = json.loads((home / "node" / "node.json").read_text())["pid"]

    def started() -> list[int] | None:
        pids = process_tree.tree(pid)
        lines = [process_tree.command_line(p) for p in pids]
        workers = [line for line in lines if "airflow_stream_provider.node.worker" in line]
        return pids if any("java" in line for line in lines) and workers else None

    pids = wait_for(started, 60, "the node's JVM and workers")
    assert process_tree.holding(pids, token) == []


def test_node_hosts_the_live_detector_of_each_running_window_stream(running_node, spark, monkeypatch):
    """CREATE STREAM starts its detector on the node, STOP STREAM stops it, START starts it again;
    a run meanwhile reads the node's events instead of detecting itself."""
    from airflow_stream_provider.streams.run import run as run_stream
    from airflow_stream_provider.streams.store import StreamStore, detector_hosted
    from airflow_stream_provider.triggers import check_windows

    home, _ = running_node
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(home))
    monkeypatch.setenv("AIRFLOW_STREAM_API_URL", "http://127.0.0.1:9")  # no Airflow here
    wh = Warehouse(home / "warehouse", spark=spark)
    list(statements.run(wh, """CREATE DATABASE live; USE live; CREATE TABLE m (ts TIMESTAMP, v DOUBLE);
                   CREATE STREAM avg1m INTERVAL(1m) SLIDING(1m) FROM m INTO avg_out
                     AS SELECT _twstart ts, avg(v) a FROM %%trows"""))
    stored = StreamStore().get("live", "avg1m")

    def detector(status: str, timeout: float = 90) -> dict:
        deadline = time.monotonic() + timeout
        report: dict = {}
        while time.monotonic() < deadline:
            if stored.detector_path.exists():
                report = json.loads(stored.detector_path.read_text())
                if report.get("status") == status:
                    return report
            time.sleep(0.5)
        raise AssertionError(f"detector not {status}: {report}\n{(home / 'node' / 'node.log').read_text()[-3000:]}")

    assert detector("running")["host"] == "node"
    assert detector_hosted(stored.state_dir)
    list(statements.run(wh, "INSERT INTO m VALUES ('2025-01-01 00:00:10', 1) ('2025-01-01 00:00:50', 3) "
                "('2025-01-01 00:01:30', 8)"))
    deadline = time.monotonic() + 90
    written = 0
    while time.monotonic() < deadline and not written:
        found = check_windows(str(stored.state_dir), str(home / "warehouse" / "live" / "m"))
        if found:
            assert found["status"] == "committed", found  # the node's checkpoint, never a detection request
            written += run_stream(wh, "live", "avg1m").written  # reads the node's events
        time.sleep(0.5)
    assert written == 1
    assert [(r["a"],) for r in list(statements.run(wh, "SELECT a FROM avg_out"))[-1].table.to_pylist()] == [(2.0,)]

    list(statements.run(wh, "STOP STREAM avg1m"))
    detector("stopped")
    assert not detector_hosted(stored.state_dir)
    list(statements.run(wh, "START STREAM avg1m"))
    assert detector("running")["host"] == "node"
    list(statements.run(wh, "DROP STREAM avg1m"))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and "detector:live.avg1m" in {q["name"] for q in node.status()["queries"]}:
        time.sleep(0.5)
    assert "detector:live.avg1m" not in {q["name"] for q in node.status()["queries"]}


def test_the_node_runs_a_spark_engine_stream_as_its_in_process_twin(running_node, spark, monkeypatch):
    """ENGINE('spark') on the node (local[2]): the table's Structured Streaming query in the node's
    own process detects the windows, the DAG's sensor sees its commits, and the stream writes what
    its in-process twin writes; SHOW STREAMS names the engine of each."""
    from airflow_stream_provider.streams.run import run as run_stream
    from airflow_stream_provider.streams.store import StreamStore
    from airflow_stream_provider.triggers import check_windows

    home, _ = running_node
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(home))
    monkeypatch.setenv("AIRFLOW_STREAM_API_URL", "http://127.0.0.1:9")  # no Airflow here
    wh = Warehouse(home / "warehouse", spark=spark)
    stream = ("CREATE STREAM {name} INTERVAL(10s) SLIDING(10s) FROM m STREAM_OPTIONS(ENGINE('{engine}')) "
              "INTO {name}_out AS SELECT _twstart ts, count(*) n, sum(v) total FROM %%trows;")
    list(statements.run(wh, "CREATE DATABASE twins; USE twins; CREATE TABLE m (ts TIMESTAMP, v INT);"
                        + stream.format(name="ip", engine="in-process") + stream.format(name="sp", engine="spark")))
    store = StreamStore()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        reports = [store.get("twins", n).detector_path for n in ("ip", "sp")]
        if all(p.exists() and json.loads(p.read_text()).get("status") == "running" for p in reports):
            break
        time.sleep(0.5)
    assert json.loads(store.get("twins", "sp").detector_path.read_text())["engine"] == "spark", \
        (home / "node" / "node.log").read_text()[-3000:]
    shown = list(statements.run(wh, "SHOW twins.STREAMS"))[-1].table.to_pylist()
    shown = {r["stream_name"]: r["engine"] for r in shown}
    assert shown == {"ip": "in-process", "sp": "spark"}
    for rows in ("('2025-01-01 00:00:01', 1) ('2025-01-01 00:00:02', 2) ('2025-01-01 00:00:03', 3)",
                 "('2025-01-01 00:00:12', 10) ('2025-01-01 00:00:15', 20)", "('2025-01-01 00:00:25', 5)"):
        list(statements.run(wh, f"INSERT INTO m VALUES {rows}"))
    # by hand: [0s, 10s) holds 1, 2, 3; [10s, 20s) holds 10 and 20; the row at 25 s closes both
    want = [(3, 6), (2, 30)]
    got: dict[str, list] = {}
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and any(got.get(n) != want for n in ("ip", "sp")):
        for name in ("ip", "sp"):
            stored = store.get("twins", name)
            if got.get(name) != want and check_windows(str(stored.state_dir), str(home / "warehouse" / "twins" / "m")):
                run_stream(wh, "twins", name)
                table = list(statements.run(wh, f"SELECT n, total FROM {name}_out ORDER BY ts"))[-1].table
                got[name] = [(r["n"], r["total"]) for r in table.to_pylist()]
        time.sleep(0.5)
    assert got == {"ip": want, "sp": want}, (home / "node" / "node.log").read_text()[-3000:]
    list(statements.run(wh, "DROP STREAM ip; DROP STREAM sp"))


def test_low_latency_calc_computes_and_notifies_inside_the_node_detector(running_node, spark, monkeypatch,
                                                                       tmp_path):
    """LOW_LATENCY_CALC: with no run and no Airflow at all, each closed window is computed, written and
    notified by the node's detector batch that found it."""
    from tests.notify.conftest import ReceiverProcess, events_of

    home, _ = running_node
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(home))
    monkeypatch.setenv("AIRFLOW_STREAM_API_URL", "http://127.0.0.1:9")
    receiver = ReceiverProcess(tmp_path).start()
    try:
        wh = Warehouse(home / "warehouse", spark=spark)
        list(statements.run(wh, f"""CREATE DATABASE fast; USE fast; CREATE TABLE m (ts TIMESTAMP, v DOUBLE);
                        CREATE STREAM s INTERVAL(1m) SLIDING(1m) FROM m STREAM_OPTIONS(LOW_LATENCY_CALC)
                          NOTIFY('{receiver.url}') ON (WINDOW_CLOSE) INTO s_out
                          AS SELECT _twstart ts, sum(v) total FROM %%trows"""))
        list(statements.run(wh, "INSERT INTO m VALUES ('2025-01-01 00:00:10', 1) ('2025-01-01 00:00:50', 3)"))
        list(statements.run(wh, "INSERT INTO m VALUES ('2025-01-01 00:01:30', 8)"))  # closes [00:00, 00:01)
        list(statements.run(wh, "INSERT INTO m VALUES ('2025-01-01 00:02:01', 2)"))  # closes [00:01, 00:02)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(events_of(receiver.messages())) < 2:
            time.sleep(0.5)
        events = events_of(receiver.messages())
        assert [e["result"]["total"] for e in events] == [4.0, 8.0], (home / "node" / "node.log").read_text()[-3000:]
        totals = sorted(r["total"] for r in list(statements.run(wh, "SELECT total FROM s_out"))[-1].table.to_pylist())
        assert totals == [4.0, 8.0]

        # the DAG's compute task supervises: it defers instead of ending (a skipped run would be
        # followed by the next at once, a run a second doing nothing), and its trigger stays quiet
        # while the node computes the next window too
        task = StreamComputeOperator(task_id="compute", stream="fast.s", kind="window", wait=True,
                                     table=str(home / "warehouse" / "fast" / "m"))
        with pytest.raises(TaskDeferred) as deferred:
            task.execute({})
        trigger = deferred.value.trigger
        assert isinstance(trigger, CheckpointCommitTrigger) and trigger.check() is None
        list(statements.run(wh, "INSERT INTO m VALUES ('2025-01-01 00:03:00', 5)"))  # closes [00:02, 00:03)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(events_of(receiver.messages())) < 3:
            assert trigger.check() is None
            time.sleep(0.2)
        assert [e["result"]["total"] for e in events_of(receiver.messages())] == [4.0, 8.0, 2.0]
        assert trigger.check() is None

        # while the node was down, a run on a worker computed a window and queued its notification;
        # the run's notify task, started in the triggerer, has the node deliver it (no batch follows)
        from airflow.triggers.base import TaskSuccessEvent

        from airflow_stream_provider.notify.message import NotifyEvent
        from airflow_stream_provider.streams.notifications import outbox_of
        from airflow_stream_provider.streams.store import StreamStore
        from airflow_stream_provider.triggers import StreamNotifyTrigger

        stored = StreamStore().get("fast", "s")
        box = outbox_of(stored)
        assert box is not None
        box.enqueue([NotifyEvent(stream="fast.s", key="worker:0", table_name="s_out", event_type="WINDOW_CLOSE",
                                 event_time=1_735_689_840_000, trigger_id="worker:0", trigger_type="Interval",
                                 group_id="0", fields={}, result={"total": 6.0})])
        delivered = _first_event(StreamNotifyTrigger(state_dir=str(stored.state_dir)))
        assert isinstance(delivered, TaskSuccessEvent), delivered
        assert [e["result"]["total"] for e in events_of(receiver.messages())] == [4.0, 8.0, 2.0, 6.0]
        assert not box.pending(receiver.url)
    finally:
        receiver.stop()


def _first_event(trigger) -> object:
    """The first event ``trigger`` yields, as the triggerer would take it."""
    import asyncio

    async def first() -> object:
        async for event in trigger.run():
            return event
        raise AssertionError("the trigger ended without an event")

    return asyncio.run(asyncio.wait_for(first(), 120))


def test_the_triggerer_tasks_of_a_window_stream_have_the_node_compute_and_deliver(running_node, spark, monkeypatch,
                                                                                 tmp_path):
    """A window stream's DAG run without a worker: its compute starts in the triggerer, waits for a
    committed batch with events, and the node computes it and answers with the progress the task
    ends with; its notify has the node deliver. The windows are worked out by hand: [00:00, 00:01)
    holds 1 and 3, [00:01, 00:02) holds 8."""
    from airflow.triggers.base import TaskSuccessEvent

    from airflow_stream_provider.operators import StreamCommitOperator, StreamNotifyOperator
    from airflow_stream_provider.streams.run import commit_progress
    from airflow_stream_provider.streams.store import StreamStore
    from airflow_stream_provider.triggers import StreamComputeTrigger, StreamNotifyTrigger
    from airflow_stream_provider.triggers.served import progress_of
    from tests.notify.conftest import ReceiverProcess, events_of

    home, _ = running_node
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(home))
    monkeypatch.setenv("AIRFLOW_STREAM_API_URL", "http://127.0.0.1:9")
    receiver = ReceiverProcess(tmp_path).start()
    try:
        wh = Warehouse(home / "warehouse", spark=spark)
        list(statements.run(wh, f"""CREATE DATABASE viadag; USE viadag; CREATE TABLE m (ts TIMESTAMP, v DOUBLE);
                        CREATE STREAM s INTERVAL(1m) SLIDING(1m) FROM m NOTIFY('{receiver.url}') ON (WINDOW_CLOSE)
                          INTO s_out AS SELECT _twstart ts, sum(v) total FROM %%trows"""))
        table = str(home / "warehouse" / "viadag" / "m")
        compute = StreamComputeOperator(task_id="compute", stream="viadag.s", kind="window", wait=True, table=table,
                                        home=str(home))
        notify = StreamNotifyOperator(task_id="notify", stream="viadag.s", home=str(home), from_trigger=True)
        commit = StreamCommitOperator(task_id="commit", stream="viadag.s", home=str(home), from_trigger=True)
        for task, name in ((compute, "StreamComputeTrigger"), (notify, "StreamNotifyTrigger"),
                           (commit, "StreamCommitTrigger")):
            assert task.start_from_trigger and task.start_trigger_args.trigger_cls.endswith(name)
        stored = StreamStore().get("viadag", "s")
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not stored.detector_path.exists():
            time.sleep(0.5)
        list(statements.run(wh, "INSERT INTO m VALUES ('2025-01-01 00:00:10', 1) ('2025-01-01 00:00:50', 3)"))
        list(statements.run(wh, "INSERT INTO m VALUES ('2025-01-01 00:01:30', 8)"))  # closes [00:00, 00:01)
        list(statements.run(wh, "INSERT INTO m VALUES ('2025-01-01 00:02:01', 2)"))  # closes [00:01, 00:02)

        totals: list[float] = []
        while len(totals) < 2:
            event = _first_event(StreamComputeTrigger(**compute.start_trigger_args.trigger_kwargs))
            assert isinstance(event, TaskSuccessEvent), event
            progress = progress_of(event.xcoms["return_value"])
            assert progress["consumed_batch"] >= 0
            delivered = _first_event(StreamNotifyTrigger(**notify.start_trigger_args.trigger_kwargs))
            assert isinstance(delivered, TaskSuccessEvent), delivered
            commit_progress("viadag", "s", progress)  # what the commit trigger does with the XCom
            written = list(statements.run(wh, "SELECT total FROM s_out"))[-1].table.to_pylist()
            totals = sorted(r["total"] for r in written)
        assert totals == [4.0, 8.0]
        assert sorted(e["result"]["total"] for e in events_of(receiver.messages())) == [4.0, 8.0]
        assert not any((stored.state_dir / "requests").iterdir())  # every request answered and read
    finally:
        receiver.stop()


def _minute_stream(home: Path, spark, db: str):
    """Stream ``<db>.s`` without NOTIFY, INTERVAL(1m) sums of ``<db>.m`` into ``s_out``, hosted by the
    node: its warehouse, its stored definition, its DAG's compute task, and the sums written so far."""
    from airflow_stream_provider.dag_factory import stream_dags
    from airflow_stream_provider.streams.store import StreamStore

    wh = Warehouse(home / "warehouse", spark=spark)
    list(statements.run(wh, f"""CREATE DATABASE {db}; USE {db}; CREATE TABLE m (ts TIMESTAMP, v DOUBLE);
                    CREATE STREAM s INTERVAL(1m) SLIDING(1m) FROM m INTO s_out
                      AS SELECT _twstart ts, sum(v) total FROM %%trows"""))
    store = StreamStore()
    stored = store.get(db, "s")
    (dag,) = [d for d in stream_dags(stored, store.load_state(db, "s"), home) if d.dag_id == f"stream__{db}__s"]
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not stored.detector_path.exists():
        time.sleep(0.5)

    def totals() -> list[float]:  # polled: read with the kernel, sparing this process's JVM
        return sorted(r["total"] for r in table_rows(wh, db, "s_out", ["total"]))

    return wh, stored, dag.get_task("compute"), totals


def test_a_compute_without_notify_goes_on_round_after_round_and_records_each(running_node, spark, monkeypatch):
    """A window stream without NOTIFY: its compute trigger does not end after the first batch but
    records its progress and computes the next one in the same task, until about ``keep_for_s`` passes;
    then the node goes on until the next run asks. By hand: [00:00, 00:01) holds 1 and 3 (total 4),
    [00:01, 00:02) holds 8, [00:02, 00:03) holds 2 (between the runs), [00:03, 00:04) holds 5 (in the
    next run); each window computed and counted once."""
    import asyncio
    import threading

    from airflow.triggers.base import TaskSuccessEvent

    from airflow_stream_provider.plan.stream import KEEP_COMPUTING_S
    from airflow_stream_provider.streams.run import commit_progress
    from airflow_stream_provider.streams.store import StreamStore
    from airflow_stream_provider.triggers import StreamComputeTrigger
    from airflow_stream_provider.triggers.served import progress_of

    home, _ = running_node
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(home))
    monkeypatch.setenv("AIRFLOW_STREAM_API_URL", "http://127.0.0.1:9")
    wh, stored, compute, totals = _minute_stream(home, spark, "rounds")
    store = StreamStore()
    assert compute.keep_computing_s == KEEP_COMPUTING_S  # the DAGs give it to a stream without NOTIFY
    kwargs = {**compute.start_trigger_args.trigger_kwargs, "keep_for_s": 40.0}  # 30 s at least

    ended: list[object] = []

    def run_trigger() -> None:
        async def first() -> object:
            async for event in StreamComputeTrigger(**kwargs).run():
                return event
            raise AssertionError("the trigger ended without an event")

        ended.append(asyncio.run(asyncio.wait_for(first(), 150)))

    list(statements.run(wh, "INSERT INTO m VALUES ('2025-01-01 00:00:10', 1) ('2025-01-01 00:00:50', 3)"))
    list(statements.run(wh, "INSERT INTO m VALUES ('2025-01-01 00:01:30', 8)"))  # closes [00:00, 00:01)
    task = threading.Thread(target=run_trigger)
    task.start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and totals() != [4.0]:
        time.sleep(0.5)
    assert totals() == [4.0] and not ended  # the first round is written, and the task goes on
    assert store.load_state("rounds", "s").computed == 1  # ... its progress recorded by the node
    list(statements.run(wh, "INSERT INTO m VALUES ('2025-01-01 00:02:01', 2)"))  # closes [00:01, 00:02)
    task.join(150)
    assert totals() == [4.0, 8.0]  # nothing but that one task computes: it did both rounds
    (event,) = ended
    assert isinstance(event, TaskSuccessEvent)
    assert progress_of(event.xcoms["return_value"]) == {}  # every round recorded: the run's commit has none
    commit_progress("rounds", "s", progress_of(event.xcoms["return_value"]))  # what the run's commit does
    assert store.load_state("rounds", "s").computed == 2  # each window counted once
    assert not any((stored.state_dir / "requests").iterdir())

    # between two runs (Airflow ends this one and starts the next), the node goes on by itself
    list(statements.run(wh, "INSERT INTO m VALUES ('2025-01-01 00:03:05', 5)"))  # closes [00:02, 00:03)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and totals() != [2.0, 4.0, 8.0]:
        time.sleep(0.5)
    assert totals() == [2.0, 4.0, 8.0] and store.load_state("rounds", "s").computed == 3

    # the next run takes over from there
    kwargs["keep_for_s"] = 4.0  # 3 s at least
    ended.clear()
    task = threading.Thread(target=run_trigger)
    task.start()

    def taken() -> bool:
        return any(p.name.endswith(".taken") for p in (stored.state_dir / "requests").iterdir())

    # the node works for the next run now, not between runs (else it computes the row below)
    assert wait_for(taken, 30, "the node to take the next run's request", every=0.1)
    list(statements.run(wh, "INSERT INTO m VALUES ('2025-01-01 00:04:30', 1)"))  # closes [00:03, 00:04)
    task.join(150)
    (event,) = ended
    assert isinstance(event, TaskSuccessEvent), event
    assert totals() == [2.0, 4.0, 5.0, 8.0] and store.load_state("rounds", "s").computed == 4
    assert not any((stored.state_dir / "requests").iterdir())


def test_a_compute_that_goes_on_is_taken_over_when_its_trigger_starts_again(running_node, spark, monkeypatch):
    """The triggerer stopped during a compute that goes on, and its trigger starts again (as Airflow
    runs a trigger again on another triggerer): it asks the node again. The first ask is taken over
    and ends unanswered, the second computes what follows, and each window is computed and counted
    once. By hand: [00:00, 00:01) holds 1 and 3 (total 4), [00:01, 00:02) holds 8."""
    import asyncio
    import threading

    from airflow.triggers.base import TaskSuccessEvent

    from airflow_stream_provider.streams.store import StreamStore
    from airflow_stream_provider.triggers import StreamComputeTrigger
    from airflow_stream_provider.triggers.served import progress_of

    home, _ = running_node
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(home))
    monkeypatch.setenv("AIRFLOW_STREAM_API_URL", "http://127.0.0.1:9")
    wh, stored, compute, totals = _minute_stream(home, spark, "again")
    store = StreamStore()
    kwargs = compute.start_trigger_args.trigger_kwargs

    def requests_left() -> list[str]:
        return sorted(p.name for p in (stored.state_dir / "requests").iterdir())

    first_loop = asyncio.new_event_loop()
    first = first_loop.create_task(StreamComputeTrigger(**{**kwargs, "keep_for_s": 120.0}).run().__anext__())
    runner = threading.Thread(target=first_loop.run_until_complete, args=(asyncio.wait([first]),))
    runner.start()  # it asks the node at once: the node waits for the stream's batches
    list(statements.run(wh, "INSERT INTO m VALUES ('2025-01-01 00:00:10', 1) ('2025-01-01 00:00:50', 3)"))
    list(statements.run(wh, "INSERT INTO m VALUES ('2025-01-01 00:01:30', 8)"))  # closes [00:00, 00:01)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and totals() != [4.0]:
        time.sleep(0.5)
    assert totals() == [4.0] and store.load_state("again", "s").computed == 1
    first_loop.call_soon_threadsafe(first.cancel)  # the triggerer stops; the node goes on with that ask
    runner.join(30)
    asked = requests_left()
    assert first.cancelled() and len(asked) == 1 and asked[0].endswith(".taken")  # taken, unanswered

    async def second() -> object:
        async for event in StreamComputeTrigger(**{**kwargs, "keep_for_s": 20.0}).run():  # 15 s at least
            return event
        raise AssertionError("the trigger ended without an event")

    ended: list[object] = []
    again = threading.Thread(target=lambda: ended.append(asyncio.run(asyncio.wait_for(second(), 150))))
    again.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (len(requests_left()) != 1 or requests_left() == asked):
        time.sleep(0.1)
    assert len(requests_left()) == 1 and requests_left() != asked  # the second ask took over, the first dropped
    list(statements.run(wh, "INSERT INTO m VALUES ('2025-01-01 00:02:01', 2)"))  # closes [00:01, 00:02)
    again.join(150)
    (event,) = ended
    assert isinstance(event, TaskSuccessEvent), event
    assert totals() == [4.0, 8.0]
    assert progress_of(event.xcoms["return_value"]) == {}  # each round recorded by the node as it went
    assert store.load_state("again", "s").computed == 2  # each window counted once
    assert requests_left() == []


def test_streams_started_together_end_their_computes_that_go_on_at_their_own_instants():
    """A compute that goes on for 60 s lasts at least 45 s, and ends at the stream's own instant in
    every minute: twenty streams asking in the same second end over the minute, a few in any five
    seconds, not together. A stream's next run, asked a few seconds after its last ended, ends 60 s
    after it, whenever the stream started."""
    import collections

    from airflow_stream_provider.node.answers import keep_until

    now = 1_700_000_000.25
    ends = {f"load.s{i}": keep_until(f"load.s{i}", 60.0, now) for i in range(20)}
    assert all(45.0 <= end - now < 105.0 for end in ends.values())
    places = sorted(end % 60.0 for end in ends.values())
    assert max(collections.Counter(int(place // 5) for place in places).values()) <= 5
    assert places[-1] - places[0] > 40.0
    for key, end in ends.items():
        assert keep_until(key, 60.0, end + 3.5) - end == pytest.approx(60.0)
        assert keep_until(key, 60.0, now + 17.0) % 60.0 == pytest.approx(end % 60.0)


def test_the_node_computes_a_period_streams_instant_for_its_triggerer_task(running_node, spark, monkeypatch):
    """A PERIOD stream's DAG run without a worker: its compute starts in the triggerer with the run's
    instant (the data interval's end, which the triggerer renders into the trigger), the node hosting
    the stream computes that instant on its own Spark session, and the trigger ends the task with the
    progress. By hand: three rows are written before the instant, so its count is 3, at the instant's
    time; the instant is recorded as the last fired once the commit records the progress. A
    template the triggerer left as it was sends the task to a worker instead."""
    from datetime import UTC, datetime, timedelta

    from airflow.triggers.base import TaskSuccessEvent

    from airflow_stream_provider.dag_factory import stream_dags
    from airflow_stream_provider.streams.probes import node_hosted
    from airflow_stream_provider.streams.run import commit_progress
    from airflow_stream_provider.streams.store import StreamStore
    from airflow_stream_provider.triggers import StreamInstantTrigger
    from airflow_stream_provider.triggers.served import RESUME, progress_of

    home, _ = running_node
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(home))
    monkeypatch.setenv("AIRFLOW_STREAM_API_URL", "http://127.0.0.1:9")
    wh = Warehouse(home / "warehouse", spark=spark)
    list(statements.run(wh, """CREATE DATABASE ticks; USE ticks; CREATE TABLE m (ts TIMESTAMP, v DOUBLE);
                    CREATE STREAM p PERIOD(10s) INTO p_out
                      AS SELECT cast(_tlocaltime / 1000000 AS TIMESTAMP) ts, count(*) n FROM m"""))
    list(statements.run(wh, "INSERT INTO m VALUES ('2025-01-01 00:00:10', 1) ('2025-01-01 00:00:50', 3)"))
    list(statements.run(wh, "INSERT INTO m VALUES ('2025-01-01 00:01:30', 8)"))
    time.sleep(1.1)  # the instant comes after the last commit's time
    at = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=1)
    store = StreamStore()
    stored = store.get("ticks", "p")
    (dag,) = stream_dags(stored, store.load_state("ticks", "p"), home)  # PERIOD streams have no recalculation DAG
    compute, commit = dag.get_task("compute"), dag.get_task("commit")
    assert compute.start_from_trigger and compute.start_trigger_args.trigger_cls.endswith("StreamInstantTrigger")
    assert commit.start_from_trigger  # the triggerer records the progress, as for window streams
    kwargs = compute.start_trigger_args.trigger_kwargs
    assert kwargs["at"] == "{{ data_interval_end }}" and "at" in compute.template_fields
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not node_hosted(stored.state_dir):
        time.sleep(0.5)
    assert node_hosted(stored.state_dir)
    time.sleep(max(0.0, (at - datetime.now(UTC)).total_seconds()))

    event = _first_event(StreamInstantTrigger(state_dir=kwargs["state_dir"], at=str(at)))  # as rendered
    assert isinstance(event, TaskSuccessEvent), event
    progress = progress_of(event.xcoms["return_value"])
    written = list(statements.run(wh, "SELECT ts, n FROM p_out"))[-1].table.to_pylist()
    assert [(r["ts"].replace(tzinfo=UTC), r["n"]) for r in written] == [(at, 3)]
    assert datetime.fromisoformat(progress["last_fired"]) == at
    commit_progress("ticks", "p", progress)  # what the run's commit does with the XCom
    assert store.load_state("ticks", "p").last_fired == at
    assert not any((stored.state_dir / "requests").iterdir())

    unrendered = _first_event(StreamInstantTrigger(**kwargs))
    assert unrendered.payload == {"status": RESUME}


def test_the_node_computes_legacy_streams_as_their_rows_come(running_node, spark, monkeypatch):
    """Streams in TDengine's syntax before 3.3.7, with no run and no Airflow: AT_ONCE writes an open
    window as its rows come, a stream without a window writes each row, MAX_DELAY writes an open
    session once after its delay (and not again without rows), FORCE_WINDOW_CLOSE writes a row per
    5 s wall-clock window, an empty one filled with NULLs."""
    home, _ = running_node
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(home))
    monkeypatch.setenv("AIRFLOW_STREAM_API_URL", "http://127.0.0.1:9")
    wh = Warehouse(home / "warehouse", spark=spark)

    def rows(query: str) -> list[dict]:
        return list(statements.run(wh, query))[-1].table.to_pylist()

    def out(table: str) -> list[dict]:  # polled: read with the kernel, sparing this process's JVM
        return table_rows(wh, "old", table)

    def wait(check, what: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not check():
            time.sleep(0.5)
        assert check(), f"{what}\n" + (home / "node" / "node.log").read_text()[-3000:]

    list(statements.run(wh, """CREATE DATABASE old; USE old; CREATE TABLE m (ts TIMESTAMP, v INT);
        CREATE STREAM at_once TRIGGER AT_ONCE INTO at_once_out AS SELECT _wstart, count(*) c FROM m INTERVAL(1m);
        CREATE STREAM each_row INTO each_row_out AS SELECT ts, v * 10 v10 FROM m WHERE v > 1;
        CREATE STREAM delayed TRIGGER MAX_DELAY 5s INTO delayed_out AS SELECT _wstart, count(*) c, now() at
          FROM m SESSION(ts, 1h);
        CREATE STREAM clock TRIGGER FORCE_WINDOW_CLOSE INTO clock_out AS SELECT _wstart, count(*) c FROM m
          INTERVAL(5s) FILL(NULL)"""))
    list(statements.run(wh, "INSERT INTO m VALUES ('2025-01-01 00:00:10', 1) ('2025-01-01 00:00:50', 3)"))
    wait(lambda: [r["c"] for r in out("at_once_out")] == [2], "AT_ONCE's open window")
    wait(lambda: [r["v10"] for r in out("each_row_out")] == [30], "the stream without a window")
    wait(lambda: [r["c"] for r in out("delayed_out")] == [2], "MAX_DELAY's open session")
    first = rows("SELECT at FROM delayed_out")[0]["at"]
    time.sleep(8)  # more than the delay, no new rows: not written again
    assert rows("SELECT at FROM delayed_out")[0]["at"] == first
    list(statements.run(wh, "INSERT INTO m VALUES ('2025-01-01 00:00:55', 5)"))
    wait(lambda: [r["c"] for r in out("at_once_out")] == [3], "AT_ONCE's window again")
    wait(lambda: out("delayed_out")[0]["c"] == 3, "MAX_DELAY after new rows")
    # the wall-clock windows: the group appears with the rows above, then each 5 s window closes,
    # empty ones with NULL
    wait(lambda: len(out("clock_out")) >= 3, "FORCE_WINDOW_CLOSE's windows", timeout=90)
    assert None in [r["c"] for r in rows("SELECT c FROM clock_out")]
    starts = sorted(r["_wstart"] for r in rows("SELECT _wstart FROM clock_out"))
    assert all(s.timestamp() % 5 == 0 for s in starts) and len(set(starts)) == len(starts)


def many_streams(db: str, options: str) -> list[str]:
    """Twenty window streams on one supertable: INTERVAL, STATE_WINDOW, EVENT_WINDOW, SESSION (after a
    PRE_FILTER) and COUNT_WINDOW, four of each with different sizes, every one partitioned by meter."""
    out = []
    for i in range(20):
        size, variant = (10, 15, 20, 30)[i // 5], i // 5
        trigger, pre = [
            (f"INTERVAL({size}s) SLIDING({size}s)", ""),
            ("STATE_WINDOW(mode)", ""),
            (f"EVENT_WINDOW(START WITH v >= {7 - variant % 3} END WITH v < 1)", ""),
            (f"SESSION(ts, {2 + variant % 2}s)", "PRE_FILTER(phase < 8)"),
            (f"COUNT_WINDOW({size})", ""),
        ][i % 5]
        opts = " | ".join(filter(None, [pre, options]))
        out.append(f"CREATE STREAM {db}.s{i} {trigger} FROM {db}.meters PARTITION BY tbname "
                   f"{f'STREAM_OPTIONS({opts})' if opts else ''} INTO {db}.o{i} "
                   "AS SELECT _twstart ts, _twend te, count(*) n, sum(v) total FROM %%trows")
    return out


def meter_rows(db: str, seconds: range) -> str:
    """One row per meter per second: ``v`` cycles 0..9, ``mode`` changes every 7 s, ``phase`` cycles 0..11."""
    values = []
    for meter in range(4):
        rows = " ".join(f"('2025-01-01 00:{s // 60:02d}:{s % 60:02d}', {(s + meter) % 10}, {((s + meter) // 7) % 3}, "
                        f"{(s + 3 * meter) % 12})" for s in seconds)
        values.append(f"{db}.d{meter} VALUES {rows}")
    return "INSERT INTO " + " ".join(values)


def test_twenty_streams_on_one_table_write_what_each_writes_alone(running_node, spark, monkeypatch, tmp_path):
    """Twenty LOW_LATENCY_CALC streams on one trigger table, live on the node together, write exactly
    the rows that the same twenty streams write when each is run alone, one after the other, on
    another home with the same rows committed the same way."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    from airflow_stream_provider.streams.run import run as run_stream

    home, _ = running_node
    solo = tmp_path / "solo"
    schema = ("CREATE DATABASE {db}; CREATE STABLE {db}.meters (ts TIMESTAMP, v INT, mode INT, phase INT) "
              "TAGS (meter INT); CREATE TABLE " + " ".join(f"{{db}}.d{m} USING {{db}}.meters TAGS ({m})"
                                                          for m in range(4)))
    commits = [range(50), range(50, 110), range(110, 150)]

    def write(wh: Warehouse, db: str, options: str) -> None:
        list(statements.run(wh, schema.format(db=db)))
        list(statements.run(wh, "; ".join(many_streams(db, options))))
        for seconds in commits:
            list(statements.run(wh, meter_rows(db, seconds)))

    monkeypatch.setenv("AIRFLOW_STREAM_API_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(home))
    together = Warehouse(home / "warehouse", spark=spark)
    write(together, "many", "LOW_LATENCY_CALC")
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(solo))
    alone = Warehouse(solo / "warehouse", spark=spark)
    write(alone, "many", "")

    def rows(root: Path, i: int) -> list[tuple]:
        try:
            table = DeltaTable(str(root / "many" / f"o{i}")).to_pyarrow_table()
        except TableNotFoundError:  # no window closed yet
            return []
        return sorted((r["tag_tbname"], r["ts"], r["te"], r["n"], r["total"]) for r in table.to_pylist())

    for i in range(20):
        run_stream(alone, "many", f"s{i}")
    want = {i: rows(solo / "warehouse", i) for i in range(20)}
    assert all(want.values()), [i for i, found in want.items() if not found]  # every stream closed windows
    # by hand for the first INTERVAL(10s) stream: meter 0 writes v = s % 10 each second, so each closed
    # 10 s window holds ten rows summing to 45; the rows end at 00:02:29, closing windows up to 00:02:20
    assert [(n, total) for g, _, _, n, total in want[0] if g == "d0"] == [(10, 45)] * 14
    deadline = time.monotonic() + 240
    got: dict[int, list[tuple]] = {}
    while time.monotonic() < deadline:
        got = {i: rows(home / "warehouse", i) for i in range(20)}
        if got == want:
            break
        time.sleep(2)
    try:
        assert {i: found for i, found in got.items() if found != want[i]} == {}, \
            (home / "node" / "node.log").read_text()[-3000:]
    finally:
        monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(home))
        list(statements.run(together, "; ".join(f"DROP STREAM many.s{i}" for i in range(20))))


def test_status_and_stop_without_a_node(tmp_path):
    shown = cli(tmp_path, "node", "status")
    assert shown.returncode == 3 and shown.stdout.strip() == "stream node: not running"
    stopped = cli(tmp_path, "node", "stop")
    assert stopped.returncode == 0 and "was not running" in stopped.stdout


def test_start_refuses_a_busy_port(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = cli(tmp_path, "node", "start", "--port", str(port))
    assert result.returncode == 1
    assert f"port {port} on 127.0.0.1 is in use" in result.stderr


def test_airflow_connection_gives_the_connect_url(monkeypatch, tmp_path):
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(tmp_path))
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CONNECT", json.dumps({"conn_type": "spark_connect", "host": "127.0.0.1",
                                                                 "port": 15999}))
    assert session.remote_url() == "sc://127.0.0.1:15999/"
    monkeypatch.setenv("AIRFLOW_STREAM_SPARK_REMOTE", "sc://10.0.0.5:15002")
    assert session.remote_url() == "sc://10.0.0.5:15002"


def test_home_config_names_a_remote_node(monkeypatch, tmp_path):
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(tmp_path))
    monkeypatch.delenv("AIRFLOW_CONN_SPARK_CONNECT", raising=False)
    monkeypatch.delenv("AIRFLOW_STREAM_SPARK_REMOTE", raising=False)
    assert session.remote_url() is None
    (tmp_path / "airflow-stream.toml").write_text('[spark]\nremote = "sc://spark-node.internal:15002"\n')
    assert session.remote_url() == "sc://spark-node.internal:15002"
