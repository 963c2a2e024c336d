"""A stream node's worker ends with its node, even when the node died before the worker could ask
Linux to kill it along with the node (its parent-death signal)."""

from __future__ import annotations

import os
import subprocess
import sys
import time


def _worker(home, *extra: str) -> subprocess.Popen:
    env = os.environ | {"AIRFLOW_STREAM_HOME": str(home), "AIRFLOW_STREAM_NODE_WORKERS": "1"}
    return subprocess.Popen([sys.executable, "-m", "airflow_stream_provider.node.worker", "--slot", "0", "--slots",
                             "1", *extra], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_a_worker_whose_node_is_already_gone_exits(tmp_path):
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid that is no one's parent any more
    worker = _worker(tmp_path, "--parent", str(gone.pid))
    out, _ = worker.communicate(timeout=60)
    assert worker.returncode == 0, out
    assert "hosting the window streams" not in out  # it never started hosting


def test_a_worker_ends_when_its_parent_ends(tmp_path):
    # a parent that starts a worker, then exits at once: the worker must not outlive it
    script = ("import subprocess, sys, os; "
              "p = subprocess.Popen([sys.executable, '-m', 'airflow_stream_provider.node.worker', '--slot', '0', "
              "'--slots', '1', '--parent', str(os.getpid())]); print(p.pid, flush=True)")
    env = os.environ | {"AIRFLOW_STREAM_HOME": str(tmp_path)}
    parent = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    pid = int(parent.stdout.split()[0])
    for _ in range(300):  # at most 30 s
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        with open(f"/proc/{pid}/stat") as stat:
            if stat.read().split()[2] == "Z":  # ended, not yet reaped (its parent is init now)
                return
        time.sleep(0.1)
    os.kill(pid, 9)
    raise AssertionError(f"worker {pid} outlived its parent")
