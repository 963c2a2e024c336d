"""The soak's processes: the WebSocket receiver, the stream node and Airflow, each killed by its PID
and restarted as a supervisor would."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from airflow_stream_provider.processes import free_port
from bench.soak.spec import COMPONENTS, say

if TYPE_CHECKING:
    from airflow_stream_provider.local_airflow import LocalAirflow

#: how long a task fault looks for a running task process
TASK_SEARCH_S = 60.0


class Receiver:
    """``airflow-stream receive`` on a fixed port, appending every message to one file."""

    def __init__(self, out: Path, port: int | None = None) -> None:
        self.port = port or free_port()
        self.out = out
        self.proc: subprocess.Popen | None = None
        self.pids: list[int] = []

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/notify"

    def start(self, timeout: float = 30.0) -> None:
        cmd = [sys.executable, "-m", "airflow_stream_provider.cli", "receive", "--port", str(self.port),
               "--out", str(self.out), "--quiet"]
        log = self.out.with_suffix(".log")
        with log.open("ab") as handle:
            self.proc = subprocess.Popen(cmd, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)
        self.pids.append(self.proc.pid)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the receiver exited with {self.proc.returncode}; see {log}")
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.1)
        raise RuntimeError("the receiver did not listen in time")

    def kill(self) -> int:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        return self.proc.pid

    def stop(self) -> None:
        for pid in self.pids:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGTERM)
        if self.proc is not None:
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)

    def messages(self) -> tuple[list[dict], int]:
        """The messages received, and how many lines could not be read as JSON."""
        if not self.out.exists():
            return [], 0
        out, bad = [], 0
        for line in self.out.read_text(encoding="utf-8").splitlines():
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    bad += 1
        return out, bad


def _proc_table() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, process group) of every process."""
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                out[int(entry.name)] = (int(fields[1]), int(fields[2]))
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def task_processes(scheduler_groups: list[int]) -> list[int]:
    """The processes running Airflow tasks: with LocalExecutor, the children of the executor's
    workers, which are the children of a scheduler, in its process group (or orphans of a killed
    one, still in its group). A task process leads a process group of its own."""
    table = _proc_table()
    found = []
    for pid, (ppid, group) in table.items():
        if ppid not in table or group == table[ppid][1]:
            continue
        parent_group = table[ppid][1]
        if parent_group in scheduler_groups and ppid != parent_group:
            found.append(pid)
    return found


class Cluster:
    """The node, Airflow and the receiver, each killed by its PID and restarted."""

    def __init__(self, home: Path, airflow: LocalAirflow, receiver: Receiver, node_port: int,
                 rng: random.Random) -> None:
        self.home = home
        self.rng = rng  # which of the running tasks is killed
        self.airflow = airflow
        self.receiver = receiver
        self.node_port = node_port
        self.node_groups: list[int] = []
        self.locks = {name: threading.Lock() for name in COMPONENTS}

    def start_node(self, timeout: float = 240.0) -> None:
        from airflow_stream_provider.node import server as node

        deadline = time.monotonic() + timeout
        while True:
            try:
                info = node.start(self.node_port)
                break
            except node.NodeError as err:  # the killed node's JVM may hold the port a little longer
                if time.monotonic() > deadline:
                    raise
                say(f"node start: {str(err).splitlines()[0]}; again in 2 s")
                time.sleep(2)
        self.node_groups.append(info.pid)

    def node_pid(self) -> int | None:
        from airflow_stream_provider.spark.endpoint import running

        info = running()
        return info.pid if info else None

    def kill(self, component: str) -> str | None:
        """SIGKILL ``component``; what was killed, or None when there was nothing to kill."""
        if component == "node":
            pid = self.node_pid()
            if pid is None:
                return None
            os.kill(pid, signal.SIGKILL)
            return f"node pid {pid}"
        if component in ("scheduler", "triggerer"):
            return f"{component} pid {self.airflow.kill(component)}"
        if component == "receiver":
            return f"receiver pid {self.receiver.kill()}"
        deadline = time.monotonic() + TASK_SEARCH_S
        while time.monotonic() < deadline:
            # every scheduler started so far: one restarted meanwhile runs the tasks that come next
            tasks = task_processes([pid for name, pid in self.airflow.started if name == "scheduler"])
            if tasks:
                pid = self.rng.choice(sorted(tasks))
                title = _cmdline(pid)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                    return f"task pid {pid} ({title[:100]})"
            time.sleep(0.2)
        return None

    def restart(self, component: str) -> None:
        if component == "node":
            self.start_node()
        elif component in ("scheduler", "triggerer"):
            self.airflow.restart(component)
        elif component == "receiver":
            self.receiver.start()
        # a killed task is retried by Airflow itself

    def ensure_running(self) -> None:
        """Restart whatever is down (a fault's restart that failed), before waiting for the catch-up."""
        if self.node_pid() is None:
            self.start_node()
        for name in ("api-server", "scheduler", "dag-processor", "triggerer"):
            if self.airflow.processes[name].poll() is not None:
                say(f"{name} was down; restarting it")
                self.airflow.restart(name)
        if self.receiver.proc is None or self.receiver.proc.poll() is not None:
            self.receiver.start()

    def stop(self) -> None:
        from airflow_stream_provider.node import server as node

        with contextlib.suppress(Exception):
            self.airflow.stop()
        with contextlib.suppress(Exception):
            node.stop()
        for group in self.node_groups:  # a killed node's JVM, had it outlived its driver
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
        self.receiver.stop()

