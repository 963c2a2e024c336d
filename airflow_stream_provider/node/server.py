"""The stream node: one long-running Spark application serving Spark Connect on 127.0.0.1, to clients
that hold its token.

``airflow-stream node start`` spawns ``python -m airflow_stream_provider.node.server`` detached,
with its log and state under ``$AIRFLOW_STREAM_HOME/node/``. The node holds an exclusive ``flock``
on ``node/node.lock`` while it runs, so a home has one node; ``node start`` and ``node stop`` take
``node/control.lock`` in turn, and find the node by the lock, its pid and its instance id. Every
few seconds the node starts or stops the live detectors of the window streams (:mod:`.host`) and writes
``status.json`` with the detectors and streaming queries it runs (its own and those started over
Connect) and their last progress, which ``node status`` prints.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from types import FrameType
from typing import TYPE_CHECKING

from airflow_stream_provider import config
from airflow_stream_provider.files import append_file, held_lock, make_dirs, write_json
from airflow_stream_provider.hooks import bind
from airflow_stream_provider.node.logs import log_to_console
from airflow_stream_provider.processes import accepts, exit_process, port_free, tail
from airflow_stream_provider.spark.endpoint import (
    HOST,
    NODE_MODULE,
    TOKEN_ENV,
    NodeInfo,
    alive,
    control,
    default_port,
    folder,
    held,
    home_key,
    lock_path,
    new_token,
    running,
    serving_token,
)
from airflow_stream_provider.spark.session import LOG4J_CONFIG, child_environ, local_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_stream_provider.node.attached_triggers import AttachedTriggers
    from airflow_stream_provider.node.host import DetectorHost
    from airflow_stream_provider.node.stateful_triggers import StatefulHost
    from airflow_stream_provider.node.worker import WorkerPool

log = logging.getLogger(NODE_MODULE)  # (by name: the node process runs this module as __main__)

#: seconds between two status reports of the node
STATUS_EVERY_S = 2.0
#: seconds between two looks at the requests the streams' tasks leave for the node
REQUESTS_EVERY_S = 0.02
LOCAL_MASTER = "local[2]"
#: how long the node waits for a cluster's workers to give it executors
EXECUTORS_TIMEOUT_S = 120.0


def configured_master() -> str | None:
    """``AIRFLOW_STREAM_NODE_MASTER``, else ``[node] master`` of ``airflow-stream.toml``; None when
    neither names one (the node then runs on local[2])."""
    value = os.environ.get("AIRFLOW_STREAM_NODE_MASTER") or config.settings().get("node", {}).get("master")
    return str(value) if value else None


def checked_master(master: str) -> str:
    if re.fullmatch(r"local(\[(\d+|\*)\])?|spark://[^/\s:]+:\d+", master) is None:
        raise NodeError(f"master {master!r}: the node runs on local[N] or on a standalone cluster's "
                        "spark://host:port (start one for trying with dev/cluster start)")
    return master


def cluster_conf() -> dict[str, str]:
    """Settings of a node that drives a standalone cluster: the executors run this Python (the
    detectors' functions are pickled by reference to this package) and log like the node."""
    return {
        "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
        "spark.executor.extraJavaOptions": f"-Dlog4j2.configurationFile={LOG4J_CONFIG}",
        # a lost executor's tasks are retried on the others, and a stage survives a lost worker
        "spark.task.maxFailures": "8",
    }


def follow_cluster_cores(session: SparkSession, timeout: float = EXECUTORS_TIMEOUT_S) -> int:
    """Wait until the cluster's executors have registered, then make the shuffle partitions (and
    with them the state store partitions of a new detector) one per executor core, for the node's
    session and for every Spark Connect session opened after it. Returns the core count.

    A detector's checkpoint keeps the count it started with, so a stream created on ``local[2]``
    goes on with two partitions on the cluster."""
    context = session.sparkContext
    deadline = time.monotonic() + timeout
    seen, stable_since = 0, time.monotonic()
    while time.monotonic() < deadline:
        executors = len(context._jsc.sc().statusTracker().getExecutorInfos()) - 1  # less the driver
        if executors != seen:
            seen, stable_since = executors, time.monotonic()
        elif executors > 0 and time.monotonic() - stable_since >= 3.0:
            cores = int(context.defaultParallelism)
            use_partitions(session, cores)
            return cores
        time.sleep(0.5)
    raise NodeError(f"no executors registered with the node within {timeout:.0f} s: is a worker of "
                    f"{context.master} alive, with free cores and memory?")


def use_partitions(session: SparkSession, count: int) -> None:
    """Make ``count`` the shuffle partitions of the node's session and of the Connect sessions opened from now."""
    for conf in (session.conf, session.sparkContext._jsc.sc().conf()):
        conf.set("spark.sql.shuffle.partitions", str(count))


def grown_cores(session: SparkSession, cores: int) -> int:
    """The executor cores now, after a worker that registered late or joined since: the partitions
    follow when they grew (not when a worker is lost: it is expected back, and fewer partitions would
    not make the running detectors' checkpoints smaller)."""
    now = int(session.sparkContext.defaultParallelism)
    if now <= cores:
        return cores
    use_partitions(session, now)
    log.info("%s executor cores now: %s shuffle partitions for new sessions and streams", now, now)
    return now


class NodeError(RuntimeError):
    """The node could not be started or stopped; the message says why and where the log is."""


def start(port: int | None = None, timeout: float = 180.0, memory: str | None = None,
          master: str | None = None) -> NodeInfo:
    """Start the node and wait until Spark Connect accepts connections; return it when already running.

    :param master: the Spark master the node is the driver of: ``local[2]`` by default
        (``AIRFLOW_STREAM_NODE_MASTER``, ``[node] master``), or a standalone cluster's ``spark://host:port``.
    """
    wanted = master or configured_master()
    with control():
        return _start(port, timeout, memory, checked_master(wanted) if wanted else None)


def _start(port: int | None, timeout: float, memory: str | None, wanted: str | None) -> NodeInfo:
    """:param wanted: the master asked for; None takes a running node on any master, or starts one on local[2]."""
    current = running()
    if current is not None:
        serving = _master_of_running()
        if wanted is not None and serving is not None and serving != wanted:
            raise NodeError(f"the stream node already runs on {serving}, not {wanted}: "
                            "airflow-stream node stop first")
        return current
    master = wanted or LOCAL_MASTER
    port = port or default_port()
    if not port_free(port, HOST):
        raise NodeError(f"port {port} on {HOST} is in use; choose another with --port or AIRFLOW_STREAM_NODE_PORT")
    node_dir = folder()
    make_dirs(node_dir)
    for name in ("node.json", "status.json", "triggers.json", "node.pid"):
        (node_dir / name).unlink(missing_ok=True)
    new_token()  # a new token each start: clients of an earlier node lose access
    log_path = node_dir / "node.log"
    instance = secrets.token_hex(8)
    command = [sys.executable, "-m", NODE_MODULE, "--port", str(port), "--instance", instance]
    if memory:
        command += ["--memory", memory]
    command += ["--master", master]
    with os.fdopen(append_file(log_path), "ab") as log:
        log.write(f"--- starting {' '.join(command)} at {datetime.now(UTC).isoformat()}\n".encode())
        log.flush()
        # the home as an absolute path: the node runs in node/, where a relative one means another folder
        env = child_environ() | {"AIRFLOW_STREAM_HOME": home_key()}
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL,
                                   cwd=node_dir, start_new_session=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = process.poll()
        if code is not None:
            raise NodeError(f"the stream node exited with code {code} while starting:\n{tail(log_path, 30)}")
        info = running()
        if info is not None and info.pid == process.pid and accepts(port, HOST):
            return info
        time.sleep(0.25)
    _terminate(process.pid, instance, 10.0)
    raise NodeError(f"the stream node did not accept connections on {HOST}:{port} within {timeout:.0f} s:\n"
                    f"{tail(log_path, 30)}")


def _master_of_running() -> str | None:
    try:
        return json.loads((folder() / "status.json").read_text(encoding="utf-8")).get("master")
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def stop(timeout: float = 60.0) -> int | None:
    """Stop this home's node; return the pid stopped, or None when none ran. Only the process that
    holds the home's node lock with the recorded instance id is signalled."""
    with control():
        info = running()
        if info is not None:
            _terminate(info.pid, info.instance, timeout)
        if not held():  # no node of this home is left: its files describe nothing
            for name in ("node.pid", "node.json", "status.json"):
                (folder() / name).unlink(missing_ok=True)
        return info.pid if info else None


def _terminate(pid: int, instance: str, timeout: float) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(pid, instance):
            return
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


def status() -> dict | None:
    """What the node last reported, with its pid, URL and uptime; None when it does not run."""
    info = running()
    if info is None:
        return None
    try:
        report = json.loads((folder() / "status.json").read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        report = {"queries": []}
    now = datetime.now(UTC)
    return report | {
        "pid": info.pid,
        "url": info.url,
        "started": info.started.isoformat(),
        "uptime_s": round((now - info.started).total_seconds(), 1),
        "log": str(folder() / "node.log"),
    }


# --- the node process --------------------------------------------------------------------------


def _queries(session: SparkSession) -> list[dict]:
    """Active streaming queries of the node's session and of every Spark Connect session."""
    managers = [session._jsparkSession.streams()]
    jvm = session._jvm
    assert jvm is not None  # the node's own session is a classic one, with the JVM in process
    try:
        service = getattr(getattr(jvm.org.apache.spark.sql.connect.service, "SparkConnectService$"), "MODULE$")
        manager = service.sessionManager()
        infos = manager.listActiveSessions()
        for i in range(infos.size()):
            info = infos.apply(i)
            key = jvm.org.apache.spark.sql.connect.service.SessionKey(info.userId(), info.sessionId())
            holder = manager.getIsolatedSessionIfPresent(key)
            if holder.isDefined():
                managers.append(holder.get().session().streams())
    except Exception as err:  # the Connect internals moved: report the node's own queries only
        log.error("cannot list Spark Connect sessions: %s", err)
    out = []
    for streams in managers:
        for query in streams.active():
            progress = query.lastProgress()
            out.append({
                "id": query.id().toString(),
                "run_id": query.runId().toString(),
                "name": query.name(),
                "active": query.isActive(),
                "last_progress": json.loads(progress.json()) if progress is not None else None,
            })
    return out


def _hold_lock(wait_s: float = 10.0) -> int:
    """Take this home's node lock for the life of the process; NodeError when another node holds it.
    A checker's shared lock lasts an instant, so a busy lock is retried for ``wait_s`` seconds."""
    make_dirs(folder())
    deadline = time.monotonic() + wait_s
    while (fd := held_lock(lock_path())) is None:
        other = running()
        if other is not None or time.monotonic() >= deadline:
            holder = f" (pid {other.pid})" if other else ""
            raise NodeError(f"another stream node of this home runs{holder}; one home has one node")
        time.sleep(0.05)
    return fd


class Node:
    """The node process, from :meth:`start` to :meth:`stop`: its Spark session serving Spark Connect
    (the driver of ``master``), the stateful insert triggers, the workers and the detectors it hosts
    itself, the requests of their tasks, and the status it reports."""

    session: SparkSession
    triggers: StatefulHost
    attached: AttachedTriggers
    pool: WorkerPool | None
    host: DetectorHost

    def __init__(self, port: int, instance: str, memory: str | None = None, master: str = LOCAL_MASTER) -> None:
        self.port = port
        self.instance = instance
        self.memory = memory
        self.master = master
        self.folder = folder()
        self.stopping = threading.Event()  # (set by SIGTERM and SIGINT)
        self.cores = 0  # a cluster's executor cores, which the shuffle partitions follow (0: local[N])

    @property
    def on_cluster(self) -> bool:
        return self.master.startswith("spark://")

    def start(self) -> None:
        """Take this home's node lock, start the Spark session (on a cluster, once its executors have
        registered), then the stateful triggers, the status and ``node.json``, the workers, the
        detector host and the thread that takes its streams' requests. NodeError when the node cannot
        run: another holds the lock, or the cluster gives it no executors."""
        from airflow_stream_provider.node.attached_triggers import AttachedTriggers
        from airflow_stream_provider.node.host import DetectorHost, every_stream, node_keeps
        from airflow_stream_provider.node.stateful_triggers import StatefulHost
        from airflow_stream_provider.node.worker import WorkerPool, default_workers

        # its descriptor stays open until the process ends; the kernel releases it even on SIGKILL
        self.lock_fd = _hold_lock()
        bind()  # LOW_LATENCY_CALC detectors deliver notifications with Airflow's connections
        # a Connect client runs any code as this process's user: only holders of the token (node/token,
        # 0600; `node start` writes a new one) may connect. Spark Connect reads it from the environment,
        # which the JVM inherits: a setting would go on the JVM's command line, which `ps` shows anyone
        token = serving_token()
        os.environ[TOKEN_ENV] = token
        self.session = local_session("airflow-stream-node", master=self.master, extra=self._spark_conf())
        if self.on_cluster:
            self._follow_cluster()
        signal.signal(signal.SIGTERM, self._request_stop)
        signal.signal(signal.SIGINT, self._request_stop)
        started = datetime.now(UTC)
        self.triggers = StatefulHost(token)
        self.triggers.start()  # before node.json: a started node serves its stateful triggers
        self.attached = AttachedTriggers(self.triggers)
        self.attached.start()  # the AFTER INSERT triggers on the owners' commits to attached tables
        self.report([])  # before node.json too: a started node has a status
        write_json(self.folder / "node.json", {"pid": os.getpid(), "port": self.port, "started": started.isoformat(),
                                               "instance": self.instance, "home": home_key()})
        log.info("stream node serving Spark Connect on sc://%s:%s", HOST, self.port)
        # the node's master tells the node, its workers and SHOW STREAMS which streams ENGINE('auto')
        # puts on the spark engine
        os.environ["AIRFLOW_STREAM_NODE_MASTER"] = self.master
        slots = default_workers()
        self.pool = WorkerPool(slots) if slots else None
        self.host = DetectorHost(self.session, selects=every_stream if self.pool is None else node_keeps,
                                 master=self.master)
        threading.Thread(target=self._serve_requests, name="stream-requests", daemon=True).start()

    def _spark_conf(self) -> dict[str, str | None]:
        extra: dict[str, str | None] = {
            "spark.plugins": "org.apache.spark.sql.connect.SparkConnectPlugin",
            # 127.0.0.1 unless AIRFLOW_STREAM_NODE_BIND opens it to other hosts (a container, a cluster)
            "spark.connect.grpc.binding.address": os.environ.get("AIRFLOW_STREAM_NODE_BIND", HOST),
            "spark.connect.grpc.binding.port": str(self.port),
        }
        if self.memory:
            os.environ["PYSPARK_SUBMIT_ARGS"] = f"--driver-memory {self.memory} pyspark-shell"
        if self.on_cluster:
            # set once the executors are known (follow_cluster_cores); a count given to the builder would
            # be copied into every Spark Connect session as it opens
            extra |= cluster_conf() | {"spark.sql.shuffle.partitions": None}
        return extra

    def _follow_cluster(self) -> None:
        try:
            self.cores = follow_cluster_cores(self.session)
        except NodeError:
            self.session.stop()
            raise
        log.info("driver of %s: %s executor cores, %s shuffle partitions", self.master, self.cores, self.cores)

    def _request_stop(self, signum: int, frame: FrameType | None) -> None:
        self.stopping.set()

    def _serve_requests(self) -> None:
        """The streams' tasks wait on these: looked at every few tens of ms."""
        while not self.stopping.is_set():
            try:
                self.host.serve_requests()
            except Exception as err:  # a stream dropped while its folder was read: the next pass goes on
                log.warning("requests: %s", err)
            self.stopping.wait(REQUESTS_EVERY_S)

    def report(self, queries: list[dict]) -> None:
        write_json(self.folder / "status.json", {"reported": datetime.now(UTC).isoformat(),
                                                 "spark_version": self.session.version, "master": self.master,
                                                 "queries": queries}, default=str)

    def loop(self) -> None:
        """Until stopped: every :data:`STATUS_EVERY_S`, follow a cluster's cores, keep the workers running,
        reconcile the detectors with the streams folder, and report."""
        while not self.stopping.is_set():
            if self.cores:
                self.cores = grown_cores(self.session, self.cores)
            if self.pool is not None:
                self.pool.keep_running()
            self.host.reconcile()
            self.report(_queries(self.session) + self.host.queries()
                        + (self.pool.queries() if self.pool is not None else []))
            self.stopping.wait(STATUS_EVERY_S)

    def stop(self) -> None:
        log.info("stream node stopping")
        self.attached.stop()
        self.triggers.stop()
        if self.pool is not None:
            self.pool.stop()
        self.host.stop_all()
        for query in self.session.streams.active:
            query.stop()
        self.session.stop()
        (self.folder / "node.json").unlink(missing_ok=True)


def serve(port: int, instance: str, memory: str | None = None, master: str = LOCAL_MASTER) -> int:
    """Run the node until SIGTERM or SIGINT; 1 when it cannot start."""
    log_to_console()
    node = Node(port, instance, memory, master)
    try:
        node.start()
    except NodeError as err:
        log.error("error: %s", err)
        return 1
    try:
        node.loop()
    finally:
        node.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {NODE_MODULE}")
    parser.add_argument("--port", type=int, default=default_port())
    parser.add_argument("--instance", default=secrets.token_hex(8),
                        help="the random id node.json records, which tells this process from any other")
    parser.add_argument("--memory", help="driver memory, such as 2g")
    parser.add_argument("--master", default=LOCAL_MASTER, help="local[2], or a standalone cluster's spark://host:port")
    args = parser.parse_args(argv)
    return serve(args.port, args.instance, args.memory, args.master)


if __name__ == "__main__":
    exit_process(main)
