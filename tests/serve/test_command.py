"""``airflow-stream serve`` as a process: it prints its URLs, answers, logs each request in the
home's logs, stops cleanly on SIGTERM, and refuses to start beyond loopback without credentials.
Nothing here needs Spark (the requests are kernel writes and logins)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import requests

from airflow_stream_provider.processes import free_port


def _command(home: Path, *args: str) -> subprocess.Popen:
    env = os.environ | {"AIRFLOW_STREAM_HOME": str(home)}
    return subprocess.Popen([sys.executable, "-m", "airflow_stream_provider.cli", "serve", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_serves_logs_and_stops_on_sigterm(tmp_path):
    tdengine, iotdb, session = free_port(), free_port(), free_port()
    process = _command(tmp_path, "--tdengine-port", str(tdengine), "--iotdb-port", str(iotdb),
                       "--iotdb-session-port", str(session))
    try:
        lines = [process.stdout.readline() for _ in range(3)]
        assert lines == [f"serving tdengine at http://127.0.0.1:{tdengine}\n",
                         f"serving iotdb at http://127.0.0.1:{iotdb}\n",
                         f"serving iotdb-session at 127.0.0.1:{session}\n"]
        # a session left open: the stop below still ends its connection
        from iotdb.Session import Session

        idle = Session("127.0.0.1", session, "root", "root")
        idle.open(False)
        idle.set_storage_group("root.cmd")
        base = f"http://127.0.0.1:{tdengine}"
        made = requests.post(f"{base}/rest/sql?req_id=42", data="CREATE DATABASE power", auth=("root", "taosdata"),
                             timeout=60)
        assert made.json() == {"code": 0, "column_meta": [["affected_rows", "INT", 4]], "data": [[0]], "rows": 1}
        assert requests.get(f"{base}/rest/login/root/wrong", timeout=30).status_code == 401
        assert requests.get(f"http://127.0.0.1:{iotdb}/ping", timeout=30).json()["code"] == 200
        huge = requests.post(f"{base}/rest/sql", data=b"x" * (65 * 1024 * 1024), auth=("root", "taosdata"),
                             timeout=60)
        assert huge.status_code == 413 and huge.json()["code"] == 0x1104
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert "stopping" in out
    log = (tmp_path / "logs" / "serve.log").read_text()
    assert "POST /rest/sql?req_id=42 200" in log and "GET /rest/login/root/wrong 401" in log
    assert "RPC openSession" in log and "RPC setStorageGroup" in log
    assert (tmp_path / "warehouse" / "power" / ".database.json").is_file()


def test_refuses_other_addresses_without_credentials(tmp_path):
    started = time.monotonic()
    process = _command(tmp_path, "--host", "0.0.0.0", "--tdengine-port", str(free_port()))
    out, err = process.communicate(timeout=60)
    assert process.returncode == 2 and "needs credentials" in err and "serving" not in out
    assert time.monotonic() - started < 60
    (tmp_path / "airflow-stream.toml").write_text('[serve.tdengine]\nuser = "w"\npassword = "secret"\n'
                                                  '[serve.iotdb]\nuser = "w"\npassword = "other"\n')
    port = free_port()
    process = _command(tmp_path, "--host", "0.0.0.0", "--tdengine-port", str(port), "--iotdb-port", "0")
    try:
        assert process.stdout.readline().startswith("serving tdengine at http://0.0.0.0:")
        base = f"http://127.0.0.1:{port}"
        assert requests.post(f"{base}/rest/sql", data="SHOW DATABASES", auth=("root", "taosdata"),
                             timeout=30).status_code == 401
        assert requests.get(f"{base}/rest/login/w/secret", timeout=30).json()["code"] == 0
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)
    assert process.returncode == 0
