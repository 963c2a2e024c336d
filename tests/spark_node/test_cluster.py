"""The stream node as the driver of a Spark standalone cluster: a master and two workers, each its own
JVM started from the installed pyspark (``dev/cluster``), the node started with ``--master``."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from airflow_stream_provider import statements
from airflow_stream_provider.node import server as node
from airflow_stream_provider.processes import free_port
from airflow_stream_provider.spark import standalone
from airflow_stream_provider.spark.session import spark_session
from airflow_stream_provider.streams.store import StreamStore
from airflow_stream_provider.warehouse import Warehouse
from tests.spark_node.test_node import cli
from tests.tables import table_rows

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


def dev_cluster(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(ROOT / "dev" / "cluster"), *args, "--dir", str(folder)], capture_output=True,
                          text=True, timeout=180)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Two workers of two cores, started and stopped with ``dev/cluster``: the cluster has four cores
    where local[2] has two."""
    folder = tmp_path_factory.mktemp("cluster")
    started = dev_cluster(folder, "start", "--workers", "2", "--cores", "2", "--memory", "1g")
    assert started.returncode == 0, started.stdout + started.stderr
    recorded = standalone.Cluster.load(folder)
    assert recorded is not None and [p.role for p in recorded.processes] == ["master", "worker-1", "worker-2"]
    assert recorded.master_url in started.stdout
    try:
        assert "2 workers alive" in dev_cluster(folder, "status").stdout
        yield recorded
    finally:
        assert dev_cluster(folder, "stop").returncode == 0
        # stopped by pid: none of the recorded processes runs on
        assert not [p.pid for p in recorded.processes if standalone._is_ours(p)]
        assert dev_cluster(folder, "status").returncode == 3


def wait_for(check, what: str, log: Path, timeout: float = 150) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}; node log:\n{log.read_text()[-4000:]}")


def test_node_refuses_an_unknown_master(tmp_path):
    result = cli(tmp_path, "node", "start", "--master", "yarn")
    assert result.returncode == 1
    assert "master 'yarn'" in result.stderr and "spark://host:port" in result.stderr


def test_a_stream_started_on_local_goes_on_on_the_cluster(cluster, tmp_path, spark, monkeypatch):
    """A LOW_LATENCY_CALC stream's detector starts on the local node; the node is restarted as the
    cluster's driver, where the stream goes on from its checkpoint and a new one starts. Both compute
    every window once. A worker that joins later adds its cores to the partitions of the sessions
    opened after it."""
    home = tmp_path / "home"
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(home))
    port = free_port()
    log = home / "node" / "node.log"
    wh = Warehouse(home / "warehouse", spark=spark)
    store = StreamStore()

    def totals(table: str) -> list[tuple]:
        return sorted((str(r["ts"])[:19], r["total"]) for r in table_rows(wh, "mv", table, ["ts", "total"]))

    assert cli(home, "node", "start", "--port", str(port)).returncode == 0
    try:
        list(statements.run(wh, """CREATE DATABASE mv; USE mv; CREATE TABLE m (ts TIMESTAMP, v DOUBLE);
            CREATE STREAM s1 INTERVAL(1m) SLIDING(1m) FROM m STREAM_OPTIONS(LOW_LATENCY_CALC) INTO s1_out
              AS SELECT _twstart ts, sum(v) total FROM %%trows"""))
        list(statements.run(wh, "INSERT INTO m VALUES ('2025-01-01 00:00:10', 1) ('2025-01-01 00:00:50', 3)"))
        list(statements.run(wh, "INSERT INTO m VALUES ('2025-01-01 00:01:30', 8)"))  # closes [00:00, 00:01)
        wait_for(lambda: totals("s1_out") == [("2025-01-01 00:00:00", 4.0)], "the first window on local[2]", log)
        s1 = store.get("mv", "s1").checkpoint
        first = json.loads((s1 / "metadata").read_text())["id"]
    finally:
        assert cli(home, "node", "stop", timeout=120).returncode == 0

    started = cli(home, "node", "start", "--port", str(port), "--master", cluster.master_url, timeout=300)
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        report = node.status()
        assert report is not None and report["master"] == cluster.master_url
        assert f"driver of {cluster.master_url}: 4 executor cores, 4 shuffle partitions" in log.read_text()
        refused = cli(home, "node", "start", "--master", "local[2]")  # asked for another master: refused
        assert refused.returncode == 1 and f"already runs on {cluster.master_url}" in refused.stderr
        assert cli(home, "node", "start").returncode == 0  # no master asked for: the running node
        client = spark_session()  # a Spark Connect session opened after the node started: it follows too
        try:
            assert client.conf.get("spark.sql.shuffle.partitions") == "4"
        finally:
            client.stop()
        list(statements.run(wh, """CREATE STREAM s2 INTERVAL(1m) SLIDING(1m) FROM m
            STREAM_OPTIONS(LOW_LATENCY_CALC) INTO s2_out AS SELECT _twstart ts, sum(v) total FROM %%trows"""))
        list(statements.run(wh, "INSERT INTO m VALUES ('2025-01-01 00:02:01', 2)"))  # closes [00:01, 00:02)
        list(statements.run(wh, "INSERT INTO m VALUES ('2025-01-01 00:03:05', 5)"))  # closes [00:02, 00:03)
        # by hand: [00:00, 00:01) holds 1 + 3, [00:01, 00:02) 8, [00:02, 00:03) 2; s2, created without
        # FILL_HISTORY, sees only the rows written after it
        wait_for(lambda: totals("s1_out") == [("2025-01-01 00:00:00", 4.0), ("2025-01-01 00:01:00", 8.0),
                                              ("2025-01-01 00:02:00", 2.0)]
                 and totals("s2_out") == [("2025-01-01 00:02:00", 2.0)], "both streams on the cluster", log)
        assert json.loads((s1 / "metadata").read_text())["id"] == first  # the same checkpoint went on
        # the work ran on the workers: each has the node's application with an executor's log
        for worker in cluster.workers():
            work = Path(worker.log).with_name(worker.role)
            assert any(work.glob("app-*/*/stderr")), f"no executor ran on {worker.role}"
        # a worker of one core joins the running cluster: the node takes its executor, and the sessions
        # opened from then on have five partitions
        cluster.start_worker(1, "1g")
        wait_for(lambda: "5 executor cores now: 5 shuffle partitions" in log.read_text(),
                 "the node to follow a worker that joined", log)
        client = spark_session()
        try:
            assert client.conf.get("spark.sql.shuffle.partitions") == "5"
        finally:
            client.stop()
    finally:
        assert cli(home, "node", "stop", timeout=120).returncode == 0
