"""The scaled-out topology at once, every piece a real server started here as local processes on
127.0.0.1: a Spark standalone master with two workers, the stream node as the cluster's driver,
MinIO holding the warehouse, PostgreSQL as Airflow's metadata database, Redis as the Celery broker,
and Airflow's api-server, scheduler, dag-processor, triggerer and two Celery workers, with users of
Airflow's simple auth manager. None of these processes carries a secret on its command line (the
stream node's own are checked in tests/spark_node/test_node.py).

A window stream (INTERVAL(1m) per meter, notifying a WebSocket receiver) and a PERIOD(30s) stream run
their DAGs with their tasks in the triggerer, the node computing; a recalculation of the window
stream (RECALCULATE STREAM: backfill runs) runs its tasks on the Celery workers, which reach the node
over Spark Connect and start no JVM. Rows are written; in the middle one Spark worker is killed
(SIGKILL), and one Celery worker with its task processes while it runs a recalculation task, whose
retry must run on the other worker; more rows are written. The outputs and the notifications must
then equal an oracle computed here from the rows written: every window once, none lost, none
duplicated.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from airflow_stream_provider import statements
from airflow_stream_provider.local_airflow import LocalAirflow
from airflow_stream_provider.local_servers import Minio, Postgres, Redis
from airflow_stream_provider.processes import free_port, wait_for
from airflow_stream_provider.spark import standalone
from airflow_stream_provider.warehouse import Warehouse
from tests import process_tree
from tests.notify.conftest import ReceiverProcess, events_of
from tests.spark_node.test_node import cli
from tests.tables import delta_rows

pytestmark = [pytest.mark.spark, pytest.mark.airflow, pytest.mark.topology]

METERS = ("m1", "m2", "m3")
START = datetime(2025, 1, 1, tzinfo=UTC)


def readings(minutes: range) -> list[tuple[str, datetime, float]]:
    """Three readings per meter per minute, at :05, :25 and :45, with values that tell them apart."""
    out = []
    for minute in minutes:
        for i, meter in enumerate(METERS):
            for second in (5, 25, 45):
                out.append((meter, START + timedelta(minutes=minute, seconds=second), minute * 10 + i + second / 100))
    return out


def insert(wh: Warehouse, batch: list[tuple[str, datetime, float]]) -> None:
    values = " ".join(f"{meter} VALUES ('{ts:%Y-%m-%d %H:%M:%S}', {v})" for meter, ts, v in batch)
    list(statements.run(wh, f"INSERT INTO {values}"))


def oracle(written: list[tuple[str, datetime, float]]) -> dict[tuple[str, str], tuple[float, int]]:
    """Each closed minute per meter: its average and row count. A meter's window closes when a row
    of that meter at or after the window's end arrives."""
    last = {meter: max(ts for m, ts, _ in written if m == meter) for meter in METERS}
    groups: dict[tuple[str, datetime], list[float]] = {}
    for meter, ts, v in written:
        groups.setdefault((meter, ts.replace(second=0)), []).append(v)
    return {(meter, f"{start:%H:%M}"): (round(sum(vs) / len(vs), 6), len(vs))
            for (meter, start), vs in groups.items() if last[meter] >= start + timedelta(minutes=1)}


def outputs(url: str) -> list[tuple[str, str, float, int]]:
    # tag_tbname: the partition's tbname, the tag of the output's subtables
    return [(r["tag_tbname"], r["ts"].strftime("%H:%M"), round(r["a"], 6), r["n"])
            for r in delta_rows(url, ["tag_tbname", "ts", "a", "n"])]


def jvms_of(airflow: LocalAirflow) -> list[int]:
    """Java processes started by this Airflow's components or their tasks."""
    return [pid for pid in airflow._leftovers()
            if Path(f"/proc/{pid}/exe").exists() and "java" in os.path.basename(os.readlink(f"/proc/{pid}/exe"))]


def kill_mid_task(airflow: LocalAirflow, workers: set[str], timeout: float = 240) -> tuple[dict, str]:
    """Kill the first of the Celery ``workers`` seen running a task, with its task processes (SIGKILL,
    as its machine dies); the task instance it held, as it was, and the worker. The worker is frozen
    (SIGSTOP) first, then the task is read again: it is killed only when still running, so that it is
    surely cut mid-run."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        running = [ti for ti in airflow.api("/api/v2/dags/~/dagRuns/~/taskInstances?state=running")["task_instances"]
                   if ti["hostname"] in workers]
        if running:
            held = running[0]
            worker = held["hostname"]
            pids = airflow.tree(worker)
            signal_all(pids, signal.SIGSTOP)
            path = f"/api/v2/dags/{held['dag_id']}/dagRuns/{held['dag_run_id']}/taskInstances/{held['task_id']}"
            now = airflow.api(path)
            if now["state"] == "running" and now["try_number"] == held["try_number"]:
                signal_all(airflow.tree(worker), signal.SIGKILL)
                airflow.processes[worker].wait(30)
                return held, worker
            signal_all(pids, signal.SIGCONT)  # it finished meanwhile: let the worker go on, and look again
        time.sleep(0.2)
    raise AssertionError(f"no Celery worker ran a task within {timeout:.0f} s\n"
                         + "".join(airflow.log(worker) for worker in sorted(workers)))


def signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def test_the_scaled_out_topology_loses_and_duplicates_nothing(tmp_path, monkeypatch):
    stream_home = tmp_path / "stream"
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(stream_home))
    servers: list = []
    cluster = receiver = airflow = None
    node_started = False
    try:
        cluster = standalone.start(tmp_path / "cluster", workers=2, cores=1, memory="1g")
        receiver = ReceiverProcess(tmp_path).start()
        for server in (Postgres(tmp_path / "postgres"), Redis(tmp_path / "redis"), Minio(tmp_path / "minio")):
            servers.append(server.start())
        postgres, redis, minio = servers
        # the warehouse on the object store, for the node, Airflow's processes and this one
        for key, value in (minio.environ | {"AIRFLOW_STREAM_WAREHOUSE": minio.url("topology")}).items():
            monkeypatch.setenv(key, value)
        avg_out, tick_out = minio.url("topology/power/avg_out"), minio.url("topology/power/tick_out")
        # the node (waiting for the cluster's executors) and Airflow start side by side
        users = {"admin": ("admin", "admin-pw-7f3a"), "viewer": ("viewer", "v-pw-91c2")}
        airflow = LocalAirflow(tmp_path / "airflow", stream_home, database=postgres.url, celery=redis.url,
                               workers=2, parallelism=6, users=users)
        # this process's calls to Airflow's API (RECALCULATE STREAM) go as the admin
        monkeypatch.setenv("AIRFLOW_STREAM_API_USER", "admin")
        monkeypatch.setenv("AIRFLOW_STREAM_API_PASSWORD", users["admin"][1])
        # a task whose worker was killed is failed (and retried) after this long without a heartbeat
        airflow.env["AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT"] = "30"
        monkeypatch.setenv("AIRFLOW_STREAM_API_URL", airflow.url)
        with ThreadPoolExecutor(1) as pool:
            node = pool.submit(cli, stream_home, "node", "start", "--port", str(free_port()), "--master",
                               cluster.master_url, timeout=300)
            try:
                airflow.start(timeout=300)
            finally:
                started = node.result()
                node_started = started.returncode == 0
        assert node_started, started.stdout + started.stderr
        # no process started here carries a secret on its command line, which `ps` shows every local user
        secrets = [minio.secret_key, airflow.env["AIRFLOW__API_AUTH__JWT_SECRET"], *(pw for _, pw in users.values())]
        pids = [p for server in servers if server.process for p in process_tree.tree(server.process.pid)]
        pids += [p for process in cluster.processes for p in process_tree.tree(process.pid)]
        pids += [p for name in airflow.processes for p in airflow.tree(name)]
        assert len(pids) >= 3 + 3 + 7
        assert process_tree.holding(pids, *secrets) == []
        made = cli(stream_home, "sql", f"""
            CREATE DATABASE power; USE power;
            CREATE STABLE meters (ts TIMESTAMP, v DOUBLE) TAGS (site VARCHAR(16));
            CREATE TABLE m1 USING meters TAGS ('north'); CREATE TABLE m2 USING meters TAGS ('south');
            CREATE TABLE m3 USING meters TAGS ('east');
            CREATE STREAM avg1m INTERVAL(1m) SLIDING(1m) FROM meters PARTITION BY tbname
              NOTIFY('{receiver.url}') ON (WINDOW_CLOSE) INTO avg_out
              AS SELECT _twstart ts, avg(v) AS a, count(*) AS n FROM %%trows;
            CREATE STREAM tick PERIOD(30s) INTO tick_out
              AS SELECT cast(_tlocaltime / 1000000 AS timestamp) ts, count(*) AS c FROM meters;
        """)
        assert made.returncode == 0, made.stdout + made.stderr
        # the inserts commit through the kernel, without Spark
        wh = Warehouse(stream_home / "warehouse", database="power")

        written = readings(range(3))
        insert(wh, written)  # closes minutes 0 and 1 of each meter
        want = oracle(written)
        wait_for(lambda: len(outputs(avg_out)) >= len(want), 300, "the first windows\n" + airflow.log("scheduler"))

        # a machine of the Spark cluster dies, then a Celery worker's, in the middle of a task of a
        # recalculation of the closed windows (backfill runs, their tasks on the Celery workers; not
        # notified: recalculations are history)
        cluster.kill(cluster.workers()[0])
        recalc = cli(stream_home, "sql",
                     "RECALCULATE STREAM power.avg1m FROM '2025-01-01 00:00:00' TO '2025-01-01 00:02:00'")
        assert recalc.returncode == 0, recalc.stdout + recalc.stderr
        workers = {"celery-worker-1", "celery-worker-2"}
        held, killed = kill_mid_task(airflow, workers)
        (survivor,) = workers - {killed}
        batch = readings(range(3, 6))
        for minute in range(3, 6):  # three commits, a minute of readings each
            insert(wh, [r for r in batch if r[1].minute == minute])
        written += batch
        want = oracle(written)
        wait_for(lambda: len(outputs(avg_out)) >= len(want), 420,
                 "the windows after the kills\n" + airflow.log("scheduler") + airflow.log(survivor))

        got = outputs(avg_out)
        assert Counter((m, t) for m, t, _a, _n in got) == Counter(want.keys()), "a window lost or written twice"
        assert {(m, t): (a, n) for m, t, a, n in got} == want
        events = wait_for(lambda: events_of(receiver.messages()) if len(events_of(receiver.messages())) >= len(want)
                          else None, 120, "the notifications")
        messages = Counter(msg["messageId"] for msg in receiver.messages())
        assert max(messages.values()) == 1, "a message delivered twice"
        closes = Counter((e["groupId"], datetime.fromtimestamp(e["windowStart"] / 1000, UTC).strftime("%H:%M"))
                         for e in events)
        assert len(closes) == len(want) and max(closes.values()) == 1, closes

        # the PERIOD stream's instants, computed by the node
        ticks = wait_for(lambda: delta_rows(tick_out, ["ts"]), 240, "the PERIOD instants\n" + airflow.log("scheduler"))
        assert all(r["ts"].second % 30 == 0 for r in ticks)  # instants of PERIOD(30s)
        assert len({r["ts"] for r in ticks}) == len(ticks)

        # the recalculation's tasks ran on the Celery workers, and none started a JVM: they reach the
        # node over Connect; the window and PERIOD streams' ran in the triggerer, the node computing:
        # on no worker
        def hosts(dag_id: str) -> set[str]:
            found = set()
            for run in airflow.api(f"/api/v2/dags/{dag_id}/dagRuns?limit=100")["dag_runs"]:
                tis = airflow.api(f"/api/v2/dags/{dag_id}/dagRuns/{run['dag_run_id']}/taskInstances")
                found |= {ti["hostname"] for ti in tis["task_instances"] if ti["state"] == "success"}
            return found

        recalc_hosts = hosts("stream__power__avg1m__recalc")
        assert recalc_hosts and recalc_hosts <= workers and survivor in recalc_hosts, recalc_hosts
        assert not hosts("stream__power__tick") & workers
        assert not hosts("stream__power__avg1m") & workers
        # the task the killed worker held failed once it sent no heartbeat, and its retry ran on the other
        path = f"/api/v2/dags/{held['dag_id']}/dagRuns/{held['dag_run_id']}/taskInstances/{held['task_id']}"
        retried = wait_for(lambda: (ti := airflow.api(path))["state"] == "success" and ti, 240,
                           f"the retry of {held['task_id']}\n" + airflow.log("scheduler"))
        assert retried["try_number"] > held["try_number"] and retried["hostname"] == survivor, retried
        assert jvms_of(airflow) == []
        alive = cluster.alive_workers()
        assert len(alive) == 1  # the killed worker stayed dead: the streams went on with one
    finally:
        if airflow is not None:
            airflow.stop()
        if receiver is not None:
            receiver.stop()
        if node_started:
            cli(stream_home, "node", "stop", timeout=120)
        for server in reversed(servers):
            server.stop()
        if cluster is not None:
            cluster.stop()
