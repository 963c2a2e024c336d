"""Which process is this home's stream node: the one holding ``node/node.lock`` with the instance id
``node.json`` records. A copy of a home taken while its node ran, a stale ``node.json`` and a
decoy that names the node's module are never reported as running, and never signalled."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import pytest

from airflow_stream_provider.node import server as node
from airflow_stream_provider.processes import free_port
from airflow_stream_provider.spark import endpoint

from .test_node import cli

DECOY = [sys.executable, "-c", "import time; time.sleep(120)", endpoint.NODE_MODULE, "--instance"]


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW_STREAM_HOME", str(tmp_path))
    return tmp_path


def decoy(instance: str) -> subprocess.Popen:
    return subprocess.Popen([*DECOY, instance], stdin=subprocess.DEVNULL)


def record(home: Path, pid: int, instance: str) -> None:
    (home / "node").mkdir(exist_ok=True)
    (home / "node" / "node.json").write_text(json.dumps({
        "pid": pid, "port": 1, "started": datetime.now(UTC).isoformat(), "instance": instance,
        "home": str(home.resolve())}))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_stale_record_of_a_decoy_is_not_a_node_and_is_never_signalled(home):
    """No process holds the lock: whatever node.json says, no node runs, and stop signals no one."""
    process = decoy("abc")
    try:
        record(home, process.pid, "abc")
        assert endpoint.running() is None
        assert node.stop() is None
        time.sleep(0.2)
        assert process.poll() is None  # the decoy still runs
        assert not (home / "node" / "node.json").exists()  # stop removed the stale record
    finally:
        process.kill()
        process.wait()


def test_a_held_lock_does_not_make_another_pid_or_instance_the_node(home):
    """The lock is held (by this test), but the recorded process is not the node started as that
    instance: a decoy with another instance id, or a pid that has gone."""
    process = decoy("other")
    (home / "node").mkdir()
    fd = os.open(endpoint.lock_path(), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert endpoint.held()
        record(home, process.pid, "abc")
        assert endpoint.running() is None
        assert node.stop() is None
        time.sleep(0.2)
        assert process.poll() is None
        record(home, process.pid, "other")  # the same instance id, but another home: a copied record
        data = json.loads((home / "node" / "node.json").read_text())
        (home / "node" / "node.json").write_text(json.dumps(data | {"home": "/elsewhere"}))
        assert endpoint.running() is None
    finally:
        os.close(fd)
        process.kill()
        process.wait()


@pytest.mark.spark
def test_one_node_per_home_found_by_its_lock_not_by_a_copy(tmp_path, spark):
    home, copy = tmp_path / "home", tmp_path / "copy"
    port = free_port()
    started = cli(home, "node", "start", "--port", str(port))
    assert started.returncode == 0, started.stderr + started.stdout
    pid = json.loads((home / "node" / "node.json").read_text())["pid"]
    try:
        # a copy of the home taken while its node runs: its node.json names the original's pid
        shutil.copytree(home, copy, ignore=shutil.ignore_patterns("spark*", "*.sock"))
        assert cli(copy, "node", "status").stdout.strip() == "stream node: not running"
        stopped = cli(copy, "node", "stop")
        assert stopped.returncode == 0 and "was not running" in stopped.stdout
        assert alive(pid)
        shown = cli(home, "node", "status")
        assert shown.returncode == 0 and str(pid) in shown.stdout

        # two starts at once in the home: both find the running node, neither starts another
        with ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(lambda _: cli(home, "node", "start", "--port", str(free_port())), range(2)))
        assert all(a.returncode == 0 for a in answers), [a.stderr for a in answers]
        assert json.loads((home / "node" / "node.json").read_text())["pid"] == pid

        # a node process started by hand for the same home refuses to run beside it
        env = os.environ | {"AIRFLOW_STREAM_HOME": str(home)}
        second = subprocess.run([sys.executable, "-m", endpoint.NODE_MODULE, "--port", str(free_port())],
                                env=env, capture_output=True, text=True, timeout=60)
        assert second.returncode == 1
        assert f"another stream node of this home runs (pid {pid})" in second.stderr

        # killed outright, it leaves the lock to the kernel: the next start takes it
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        restarted = cli(home, "node", "start", "--port", str(port))
        assert restarted.returncode == 0, restarted.stderr + restarted.stdout
        assert json.loads((home / "node" / "node.json").read_text())["pid"] != pid
    finally:
        final = cli(home, "node", "stop", timeout=120)
        assert final.returncode == 0, final.stderr
