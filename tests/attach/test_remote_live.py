"""An attached table on an object store, followed live by the stream node: a delta-rs process of the
team's own (it imports nothing of this project) writes ``s3://warehouse/owner/readings`` on a real
MinIO server; the table is attached by its ``s3://`` URL, and a LOW_LATENCY_CALC stream over it is
hosted by a node started with ``airflow-stream node start``. The team's appends fire the windows
through the node's detector, which computes and writes them: no ``run`` of ours in between. The
outputs must equal the windows pandas computes from the table's final rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from deltalake import DeltaTable

from airflow_stream_provider.local_servers import Minio
from airflow_stream_provider.processes import free_port
from tests.attach.oracle import closed_windows
from tests.attach.test_foreign_writers import FIRST, LATER, MAP, WRITERS
from tests.spark_node.test_node import SCRIPT
from tests.tables import delta_rows

pytestmark = pytest.mark.spark

STREAM = """CREATE STREAM power.s1 INTERVAL(10s) SLIDING(10s) FROM power.meters PARTITION BY tbname
            STREAM_OPTIONS(LOW_LATENCY_CALC) INTO power.out AS
            SELECT _twstart, avg(voltage) AS v, sum(current) AS c, count(*) AS n FROM %%trows"""


def cli(env: dict[str, str], *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    done = subprocess.run([str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def write(env: dict[str, str], url: str, steps: list[dict], cwd: Path) -> None:
    """The team's delta-rs writer, a process of its own with none of this project on its path."""
    own = {k: v for k, v in env.items() if k not in ("PYTHONPATH", "AIRFLOW_STREAM_HOME")}
    done = subprocess.run([sys.executable, str(WRITERS / "delta_rs_writer.py"), url, json.dumps(steps)], cwd=cwd,
                          env=own, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def utc(value) -> pd.Timestamp:
    at = pd.Timestamp(value)
    return at.tz_localize("UTC") if at.tz is None else at.tz_convert("UTC")


def test_an_attached_s3_table_fires_through_the_node_detector(tmp_path):
    minio = Minio(tmp_path / "minio").start()
    home = tmp_path / "home"
    env = os.environ | minio.environ | {"AIRFLOW_STREAM_HOME": str(home)}
    url = minio.url("owner/readings")
    try:
        write(env, url, [{"create": {"delta.enableChangeDataFeed": "true"}}], tmp_path)
        cli(env, "node", "start", "--port", str(free_port()))
        cli(env, "sql", f"CREATE DATABASE power; CREATE STABLE power.meters FROM DELTA '{url}' {MAP}; {STREAM}")
        write(env, url, [{"append": FIRST}], tmp_path)
        write(env, url, [{"append": LATER}], tmp_path)
        final = DeltaTable(url, storage_options=minio.environ).to_pandas()
        want = closed_windows(final)
        # by hand: d1's rows at 1, 4, 12, 21, 33 s close its [0, 10), [10, 20) and [20, 30); d2's at 3,
        # 15, 27, 41 s close those and its [30, 40), empty (an empty window triggers too)
        assert len(want) == 7 and want[("d2", pd.Timestamp("2025-03-01 00:00:30", tz="UTC"))] == (None, None, 0)
        out = home / "warehouse" / "power" / "out"
        got: dict = {}
        deadline = time.monotonic() + 180
        while got != want and time.monotonic() < deadline:
            time.sleep(1)
            got = {(r["tag_tbname"], utc(r["_twstart"])): (r["v"], r["c"], r["n"]) for r in delta_rows(out)}
        assert got == want
        report = json.loads((home / "state" / "power" / "s1" / "detector.json").read_text())
        assert report["host"] == "node" and report["status"] == "running", report
    finally:
        subprocess.run([str(SCRIPT), "node", "stop"], env=env, capture_output=True, timeout=120)
        minio.stop()
