"""End to end with real Airflow components (db migrate, api-server, scheduler, dag-processor,
triggerer; LocalExecutor, parallelism 4), real Spark and Delta.

A PERIOD stream counts rows every 10 s; an INTERVAL(1m) stream averages meter values and notifies
a real WebSocket receiver of each closed window. The test feeds rows, waits for the outputs and
the notifications, and stops and starts the window stream through SQL (its DAGs paused and
unpaused through Airflow's API). Expected values are worked by hand from the rows written.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

import airflow_stream_provider
from airflow_stream_provider.notify.message import validate
from airflow_stream_provider.warehouse import Warehouse
from tests.notify.conftest import ReceiverProcess, events_of

pytestmark = [pytest.mark.spark, pytest.mark.airflow]

AIRFLOW = Path(sys.executable).with_name("airflow")
COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Airflow:
    """The Airflow components as local processes, each stopped by its PID (process group)."""

    def __init__(self, home: Path, stream_home: Path) -> None:
        self.home = home
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = os.environ | {
            "AIRFLOW_HOME": str(home), "AIRFLOW_STREAM_HOME": str(stream_home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(Path(airflow_stream_provider.__file__).parent / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.url}/execution/",
            "AIRFLOW__API__PORT": str(self.port), "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API_AUTH__JWT_SECRET": "airflow-stream-e2e-secret",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "5",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
            "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "1",
            "AIRFLOW_STREAM_API_URL": self.url,
        }
        self.processes: dict[str, subprocess.Popen] = {}

    def start(self) -> None:
        subprocess.run([str(AIRFLOW), "db", "migrate"], env=self.env, check=True, capture_output=True, timeout=300)
        for name in COMPONENTS:
            log = (self.home / f"{name}.log").open("wb")
            args = [str(AIRFLOW), name] + (["--port", str(self.port)] if name == "api-server" else [])
            self.processes[name] = subprocess.Popen(args, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                                    start_new_session=True)
        wait_for(lambda: self._up(), 180, "the api-server to answer")

    def _up(self) -> bool:
        for name, proc in self.processes.items():
            if proc.poll() is not None:
                raise AssertionError(f"{name} exited with {proc.returncode}:\n{self.log(name)}")
        try:
            with urllib.request.urlopen(f"{self.url}/api/v2/monitor/health", timeout=2):
                return True
        except OSError:
            return False

    def log(self, name: str, lines: int = 40) -> str:
        text = (self.home / f"{name}.log").read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def stop(self) -> None:
        for proc in self.processes.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        for proc in self.processes.values():
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)

    def api(self, path: str) -> dict:
        from airflow_stream_provider.airflow_api import AirflowApi

        return AirflowApi(self.url)._send("GET", path)


def wait_for(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def rows(wh, query: str) -> list[dict]:
    return list(wh.run(query))[-1].table.to_pylist()


def test_streams_run_as_airflow_dags(spark, tmp_path, monkeypatch):
    stream_home = tmp_path / "stream"
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(stream_home))
    wh = Warehouse(stream_home / "warehouse", spark=spark)
    receiver = ReceiverProcess(tmp_path).start()
    list(wh.run(f"""
        CREATE DATABASE power; USE power;
        CREATE STABLE meters (ts TIMESTAMP, v DOUBLE) TAGS (site VARCHAR(16));
        CREATE TABLE m1 USING meters TAGS ('north');
        CREATE STREAM avg1m INTERVAL(1m) SLIDING(1m) FROM m1 NOTIFY('{receiver.url}') ON (WINDOW_CLOSE)
          INTO avg1m_out
          AS SELECT _twstart ts, avg(v) AS a, count(*) AS n FROM %%trows;
        CREATE STREAM tick PERIOD(10s) INTO tick_out
          AS SELECT cast(_tlocaltime / 1000000 AS timestamp) ts, count(*) AS c FROM meters;
    """))
    airflow = Airflow(tmp_path / "airflow", stream_home)
    monkeypatch.setenv("AIRFLOW_STREAM_API_URL", airflow.url)
    try:
        airflow.start()
        list(wh.run("INSERT INTO m1 VALUES ('2025-01-01 00:00:10', 1) ('2025-01-01 00:00:50', 3) "
                    "('2025-01-01 00:01:30', 8) ('2025-01-01 00:02:05', 4)"))
        # [00:00, 00:01): avg(1, 3) = 2 over 2 rows; [00:01, 00:02): 8 over 1; [00:02, 00:03) stays open
        done = wait_for(lambda: len(rows(wh, "SELECT * FROM avg1m_out")) >= 2, 240,
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
        ticks = wait_for(lambda: rows(wh, "SELECT * FROM tick_out"), 120, "the PERIOD stream's output")
        assert all(r["ts"].second % 10 == 0 for r in ticks)  # instants of PERIOD(10s)

        # STOP pauses the DAGs and holds the stream; START resumes it
        message = list(wh.run("STOP STREAM avg1m"))[-1].message
        assert "DAGs paused: stream__power__avg1m, stream__power__avg1m__recalc" in message
        assert airflow.api("/api/v2/dags/stream__power__avg1m")["is_paused"] is True
        list(wh.run("INSERT INTO m1 VALUES ('2025-01-01 00:03:10', 6)"))
        time.sleep(8)
        assert len(rows(wh, "SELECT * FROM avg1m_out")) == 2  # stopped: [00:02, 00:03) is not computed
        message = list(wh.run("START STREAM avg1m"))[-1].message
        assert "unpaused" in message
        wait_for(lambda: len(rows(wh, "SELECT * FROM avg1m_out")) >= 3, 180, "the window after START")
        out = {r["ts"].strftime("%H:%M"): (r["a"], r["n"]) for r in rows(wh, "SELECT * FROM avg1m_out")}
        assert out["00:02"] == (4.0, 1)  # written while stopped, processed as history after START

    finally:
        airflow.stop()
        receiver.stop()
    for name, proc in airflow.processes.items():
        assert proc.returncode is not None, name
