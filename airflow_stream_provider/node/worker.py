"""A stream node's worker: a process of its own hosting the live detectors of a share of the window
streams, so that detection and the computations done in process (Python, one core per process) use
every core of the machine.

The node starts ``workers`` of these (``AIRFLOW_STREAM_NODE_WORKERS`` or ``[node] workers``,
by default one per core the node may use) and keeps them running: a worker that dies is started
again within a few seconds, and its streams resume from their checkpoints. Worker ``i`` of ``n``
hosts the in-process window streams whose name falls in slot ``i`` (:func:`~.host.slot_of`), so
that many streams on one table use every core, each worker reading the table's change feed once
for its streams; the node itself keeps the row streams and the spark engine's window streams,
whose queries run on its Spark session. A worker reaches Spark, when a computation needs it,
through the node's Spark Connect endpoint, and answers the requests of its streams' tasks. It reports its
detectors in ``node/workers/<i>.json``, which the node's status merges, and ends with the node: it
asks the kernel to be killed when its parent dies, and looks every second.

    python -m airflow_stream_provider.node.worker --slot 0 --slots 2 --parent <node pid>
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType

from airflow_stream_provider.files import make_dirs, write_json
from airflow_stream_provider.hooks import bind
from airflow_stream_provider.node.logs import log_to_console
from airflow_stream_provider.processes import exit_process
from airflow_stream_provider.spark.endpoint import folder

log = logging.getLogger("airflow_stream_provider.node.worker")  # (by name: a worker runs this module as __main__)

#: seconds between two reconciliations of a worker's streams with the streams folder
RECONCILE_EVERY_S = 2.0
#: seconds between two looks at the requests of its streams' tasks
REQUESTS_EVERY_S = 0.02
_PR_SET_PDEATHSIG = 1


def default_workers() -> int:
    """``AIRFLOW_STREAM_NODE_WORKERS`` or ``[node] workers``, else one per core the process may use
    (0: the node hosts every detector itself)."""
    from airflow_stream_provider import config

    configured = config.node_workers()
    return max(1, usable_cores()) if configured is None else configured


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, which containers and ``taskset`` narrow)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # (not Linux)
        return os.cpu_count() or 1


def status_path(slot: int) -> Path:
    return folder() / "workers" / f"{slot}.json"


def _die_with_parent() -> None:
    """Ask Linux to kill this process when its parent (the node) dies, even by SIGKILL."""
    with contextlib.suppress(OSError):  # not Linux: the loop's parent check ends it within a second
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def serve(slot: int, slots: int, parent: int | None = None) -> int:
    """Host the slot's streams until stopped or until ``parent`` (the node; default: this
    process's parent now) is gone."""
    from airflow_stream_provider.model.events import StreamKind
    from airflow_stream_provider.node.host import DetectorHost, slot_of
    from airflow_stream_provider.spark.session import spark_session

    parent = os.getppid() if parent is None else parent
    _die_with_parent()
    if os.getppid() != parent:  # the node died before the line above could take effect
        return 0
    bind()  # LOW_LATENCY_CALC detectors deliver notifications with Airflow's connections
    stopping = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)

    def selects(kind: StreamKind, key: str, engine: str | None) -> bool:
        # (the spark engine's streams run on the node's own Spark session)
        return kind is StreamKind.WINDOW and engine != "spark" and slot_of(key, slots) == slot

    log_to_console(f"[worker {slot}] ")
    host = DetectorHost(spark_session, selects=selects)
    make_dirs(status_path(slot).parent)

    def serve_requests() -> None:
        while not stopping.is_set():
            try:
                host.serve_requests()
            except Exception as err:  # a stream dropped while its folder was read: the next pass goes on
                log.warning("requests: %s", err)
            stopping.wait(REQUESTS_EVERY_S)

    threading.Thread(target=serve_requests, name="stream-requests", daemon=True).start()
    log.info("hosting the window streams of slot %s of %s", slot, slots)
    try:
        while not stopping.is_set() and os.getppid() == parent:
            host.reconcile()
            write_json(status_path(slot), {"slot": slot, "pid": os.getpid(), "at": datetime.now(UTC).isoformat(),
                                           "queries": host.queries()})
            deadline = time.monotonic() + RECONCILE_EVERY_S
            while not stopping.is_set() and time.monotonic() < deadline and os.getppid() == parent:
                stopping.wait(0.2)
    finally:
        host.stop_all()
        status_path(slot).unlink(missing_ok=True)
        log.info("stopped")
    return 0


class WorkerPool:
    """The node's side: its workers started, kept running, and stopped."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.processes: dict[int, subprocess.Popen] = {}
        self.restarts = 0

    def keep_running(self) -> None:
        """Start the workers that do not run (the first time, or after one died)."""
        for slot in range(self.slots):
            process = self.processes.get(slot)
            if process is not None and process.poll() is None:
                continue
            if process is not None:
                self.restarts += 1
                log.warning("worker %s exited with %s: starting it again", slot, process.returncode)
            self.processes[slot] = subprocess.Popen(
                [sys.executable, "-m", __name__, "--slot", str(slot), "--slots", str(self.slots),
                 "--parent", str(os.getpid())],
                stdin=subprocess.DEVNULL)

    def queries(self) -> list[dict]:
        """The detectors the workers reported."""
        out = []
        for slot in range(self.slots):
            try:
                out += json.loads(status_path(slot).read_text(encoding="utf-8")).get("queries", [])
            except (FileNotFoundError, ValueError):
                continue
        return out

    def stop(self, timeout: float = 60.0) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for process in self.processes.values():
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m airflow_stream_provider.node.worker")
    parser.add_argument("--slot", type=int, required=True)
    parser.add_argument("--slots", type=int, required=True)
    parser.add_argument("--parent", type=int, help="the node's pid: the worker ends when it is gone")
    args = parser.parse_args(argv)
    return serve(args.slot, args.slots, args.parent)


if __name__ == "__main__":
    exit_process(main)
