"""A Spark standalone cluster of local processes: one master and a few workers.

Each is its own JVM, started with the ``spark-class`` launcher that ships inside the installed
pyspark, bound to 127.0.0.1, with its logs and work folder under one cluster folder. ``cluster.json``
in that folder records the master's URL and every process's pid, so that a later ``stop`` (another
process, ``dev/cluster stop``) ends exactly those processes and nothing else.

This is the scaled-out topology on one machine, for trying it and for the tests: the stream node
runs as the cluster's driver with ``airflow-stream node start --master spark://127.0.0.1:7077``.
On real machines, start the master and workers with Spark's own scripts the same way.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from airflow_stream_provider.files import make_dirs, write_json
from airflow_stream_provider.processes import HOST, accepts, free_port, tail, wait_for
from airflow_stream_provider.spark.session import LOG4J_CONFIG

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
STATE_FILE = "cluster.json"


class ClusterError(RuntimeError):
    """The cluster could not be started or stopped; the message says why and where the logs are."""


def spark_home() -> Path:
    """The installed pyspark's folder: it holds ``bin/spark-class`` and the jars."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


@dataclass
class Process:
    role: str  # "master" or "worker-<n>"
    pid: int
    log: str
    ui_port: int


@dataclass
class Cluster:
    folder: Path
    master_port: int
    processes: list[Process] = field(default_factory=list)

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.master_port}"

    @property
    def master_ui(self) -> str:
        return f"http://{HOST}:{self.processes[0].ui_port}"

    def workers(self) -> list[Process]:
        return [p for p in self.processes if p.role.startswith("worker")]

    def save(self) -> None:
        write_json(self.folder / STATE_FILE, {"master_port": self.master_port,
                                              "processes": [asdict(p) for p in self.processes]})

    @classmethod
    def load(cls, folder: Path) -> Cluster | None:
        try:
            state = json.loads((folder / STATE_FILE).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        return cls(folder, state["master_port"], [Process(**p) for p in state["processes"]])

    def alive_workers(self) -> list[dict]:
        """The workers the master counts as ALIVE, from its JSON status page."""
        with urllib.request.urlopen(f"{self.master_ui}/json/", timeout=5) as reply:
            status = json.load(reply)
        return [w for w in status.get("workers", []) if w.get("state") == "ALIVE"]

    def start_worker(self, cores: int, memory: str) -> Process:
        """Start one more worker registered with this cluster's master."""
        index = len(self.workers()) + 1
        work = self.folder / f"worker-{index}"
        make_dirs(work)
        ui_port = free_port()
        process = _launch(self.folder, f"worker-{index}", ui_port, [
            WORKER_CLASS, self.master_url, "--host", HOST, "--cores", str(cores), "--memory", memory,
            "--work-dir", str(work), "--webui-port", str(ui_port)])
        self.processes.append(process)
        self.save()
        return process

    def kill(self, process: Process) -> None:
        """Kill one process at once (SIGKILL), as a machine failure would."""
        if _is_ours(process):
            with contextlib.suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGKILL)
        _wait_gone(process.pid, 10.0)

    def stop(self, timeout: float = 20.0) -> None:
        """Stop the workers, then the master: SIGTERM, SIGKILL after ``timeout``. Only processes whose
        command line is still the recorded one are signalled."""
        for process in reversed(self.processes):
            if _is_ours(process):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for process in self.processes:
            if not _wait_gone(process.pid, max(0.0, deadline - time.monotonic())) and _is_ours(process):
                # the whole group: a worker's executors too
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
        (self.folder / STATE_FILE).unlink(missing_ok=True)


def start(folder: Path, workers: int = 2, cores: int = 1, memory: str = "1g", timeout: float = 90.0) -> Cluster:
    """Start a master and ``workers`` workers of ``cores`` cores and ``memory`` each, and wait until
    the master counts every worker ALIVE. A cluster already recorded in ``folder`` is stopped first."""
    folder = folder.resolve()
    make_dirs(folder)
    previous = Cluster.load(folder)
    if previous is not None:
        previous.stop()
    ui_port = free_port()
    cluster = Cluster(folder, free_port())
    cluster.processes.append(_launch(folder, "master", ui_port, [
        MASTER_CLASS, "--host", HOST, "--port", str(cluster.master_port), "--webui-port", str(ui_port)]))
    cluster.save()
    try:
        _wait(lambda: accepts(cluster.master_port), timeout, cluster, "the master to accept connections")
        for _ in range(workers):
            cluster.start_worker(cores, memory)
        _wait(lambda: len(cluster.alive_workers()) >= workers, timeout, cluster, f"{workers} workers to register")
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _launch(folder: Path, role: str, ui_port: int, args: list[str]) -> Process:
    home = spark_home()
    conf = folder / "conf"
    make_dirs(conf)
    (conf / "log4j2.properties").write_text(LOG4J_CONFIG.read_text(encoding="utf-8"), encoding="utf-8")
    env = dict(os.environ) | {
        "SPARK_HOME": str(home),
        "SPARK_CONF_DIR": str(conf),
        "SPARK_LOCAL_IP": HOST,
        "SPARK_LOG_DIR": str(folder),
        # the daemons are small: the executors the workers start get the memory
        "SPARK_DAEMON_MEMORY": "512m",
    }
    log = folder / f"{role}.log"
    with log.open("ab") as out:
        # spark-class execs the JVM, so the pid is the JVM's
        process = subprocess.Popen([str(home / "bin" / "spark-class"), *args], env=env, stdout=out,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=folder,
                                   start_new_session=True)
    return Process(role, process.pid, str(log), ui_port)


def _wait(ready: Callable[[], bool], timeout: float, cluster: Cluster, what: str) -> None:
    """Wait until ``ready()`` (an OSError or ValueError counting as not yet); ClusterError when one of
    the cluster's processes exits meanwhile, or after ``timeout`` seconds."""
    def check() -> bool:
        with contextlib.suppress(OSError, ValueError):
            if ready():
                return True
        for process in cluster.processes:
            if not _running(process.pid):
                raise ClusterError(f"the Spark {process.role} (pid {process.pid}) exited; see {process.log}:\n"
                                   f"{tail(Path(process.log))}")
        return False

    wait_for(check, timeout, f"{what}; logs in {cluster.folder}", every=0.5, timed_out=ClusterError)


def _is_ours(process: Process) -> bool:
    """The pid still runs the recorded Spark daemon (not a process that reused the pid)."""
    try:
        cmdline = Path(f"/proc/{process.pid}/cmdline").read_bytes()
    except OSError:
        return False
    cls = MASTER_CLASS if process.role == "master" else WORKER_CLASS
    return cls.encode() in cmdline


def _running(pid: int) -> bool:
    """The process runs: a child of this process that exited is reaped here, and an orphan that
    exited counts as gone while it waits as a zombie for an init that may never reap it."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2:][:1] != "Z"


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _running(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="dev/cluster", description="a local Spark standalone cluster")
    parser.add_argument("action", choices=("start", "stop", "status"))
    parser.add_argument("--dir", default=os.environ.get("AIRFLOW_STREAM_CLUSTER_DIR", "cluster"),
                        help="the cluster's folder: logs, work dirs, cluster.json (default ./cluster)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1, help="cores per worker")
    parser.add_argument("--memory", default="1g", help="memory per worker, for its executors")
    args = parser.parse_args(argv)
    folder = Path(args.dir)
    if args.action == "start":
        try:
            cluster = start(folder, args.workers, args.cores, args.memory)
        except ClusterError as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        print(f"Spark master {cluster.master_url} (UI {cluster.master_ui}), {len(cluster.workers())} workers; "
              f"node: airflow-stream node start --master {cluster.master_url}")
        return 0
    recorded = Cluster.load(folder.resolve())
    if recorded is None:
        print(f"no cluster recorded in {folder}")
        return 3 if args.action == "status" else 0
    if args.action == "stop":
        recorded.stop()
        print("cluster stopped")
        return 0
    try:
        alive = len(recorded.alive_workers())
    except OSError as err:
        print(f"Spark master {recorded.master_url} does not answer ({err}); logs in {folder}", file=sys.stderr)
        return 1
    print(f"Spark master {recorded.master_url}: {alive} workers alive")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
