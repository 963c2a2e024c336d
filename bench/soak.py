"""A soak with faults: streams of every window kind, a PERIOD stream and a notify-only stream, fed at
a steady rate with late rows, updates and deletes, while their processes are killed and restarted.

    .venv/bin/python bench/soak.py [--minutes 10] [--seed N]

It runs the stream node, Airflow's api-server, scheduler, dag-processor and triggerer
(LocalExecutor) and an ``airflow-stream receive`` WebSocket receiver, all as separate processes.
While rows are written, a fault injector sends SIGKILL, at moments drawn from a seeded random
generator, to the node, the scheduler, the triggerer, a running Airflow task process and the
receiver, and restarts each as a supervisor would: the node with ``node.start``, an Airflow
component with its own command, the receiver on the same port, appending to the same file.

When the feed stops and everything has caught up, the checks are exact:

- Window streams: every window of the final table, computed in pandas from the table's rows
  (:func:`oracle_windows`, independent of the window engine), is in the output table with the same
  start, end, average, maximum and count. A row of the output that no window of the final table has
  is a window that late rows, updates or deletes took apart (a SESSION merged, a STATE run split):
  TDengine 3.3.7 semantics keep its result and send ``WINDOW_INVALIDATION``, so such a row must be
  invalidated (its notifications, or the stream's event log when it does not notify), else it is
  counted as stale, a failure. Every stream but COUNT_WINDOW has ``DELETE_RECALC``, so deletes
  recalculate as late rows do. The feed never deletes a subtable's first or latest rows, so each
  group's first window and latest event time stay what the detector saw.
- COUNT_WINDOW ignores late rows, updates and deletes (reference 000, "Atypical Data Ingestion"),
  so the COUNT_WINDOW streams read subtable ``d3``, which only gets rows in time order.
- Notifications, after dropping resent ``messageId``s: every window of the oracle has a
  ``WINDOW_CLOSE`` whose last state (a later ``WINDOW_INVALIDATION`` revokes it) carries the
  oracle's result; a window the oracle no longer has ends invalidated; a ``WINDOW_CLOSE`` sent twice
  for one ``triggerId`` without an invalidation between is a duplicate.
- PERIOD: its instants follow the wall clock, so which instants ran depends on when the scheduler
  was up; what is exact is that each instant is aligned to the period and appears once, and that
  each instant counts the rows written (inserted or updated, from the table's change feed) between
  the table versions at the previous fired instant and at this one (reference 000: the rows written
  since the previous trigger), each row once. A commit stamped just before an instant can land
  after the instant's run looked, and then counts in the next instant: so each boundary may be any
  version stamped up to ``IN_FLIGHT_MS`` before the instant, and the sum over the instants must
  equal the rows written between the first and the last. The first instant is not checked: its
  start is the stream's creation or the instant before it, whichever is later.
- No stream is failed in ``information_schema.ins_streams``, and none has notifications pending.

The checks run every 10 s after the feed until they all pass or ``--settle`` seconds have passed.
The exit status is 1 when then anything is lost, duplicated or stale, a stream failed, a message
could not be read, or a fault's restart failed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from airflow_stream_provider.processes import free_port

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from airflow_stream_provider.local_airflow import LocalAirflow
    from airflow_stream_provider.warehouse import Warehouse

DB = "soak"
#: event time of the first tick; every tick moves it on by STEP
T0 = datetime(2025, 1, 1, tzinfo=UTC)
STEP = timedelta(seconds=10)
SUBTABLES = ("d0", "d1", "d2", "d3")
#: the subtables that get late rows, updates and deletes; d3 only gets rows in time order
DISORDERED = ("d0", "d1", "d2")
#: ticks on which a subtable writes nothing (tick % period in the set): 40 s gaps, so sessions close
SILENT = {"d0": (11, {5, 6, 7}), "d1": (7, {3, 4, 5})}
COMPONENTS = ("node", "scheduler", "triggerer", "task", "receiver")
PERIOD_S = 15
#: how long a commit may take to land after the time it is stamped with (a MERGE on a busy machine)
IN_FLIGHT_MS = 10_000
SESSION_GAP_MS = 25_000

STATS = "avg(v) AS a, max(v) AS mx, count(*) AS n FROM %%trows"


@dataclass(frozen=True)
class Soaked:
    """A stream of the soak: its definition, and how the oracle finds its windows."""

    name: str
    kind: str  # interval, session, state, event, count, period, notify
    source: str  # "m" (the supertable) or a subtable
    by_tbname: bool
    clause: str
    options: tuple[str, ...] = ("DELETE_RECALC",)
    notify: bool = False
    #: interval, sliding, watermark (ms); session gap (ms); count n
    params: tuple[int, ...] = ()

    def sql(self, url: str) -> str:
        partition = " PARTITION BY tbname" if self.by_tbname else ""
        options = f" STREAM_OPTIONS({' | '.join(self.options)})" if self.options else ""
        notify = (f" NOTIFY('{url}') ON (WINDOW_CLOSE) NOTIFY_OPTIONS(ON_FAILURE_PAUSE)"
                  if self.notify or self.kind == "notify" else "")
        if self.kind == "notify":
            return f"CREATE STREAM {DB}.{self.name} {self.clause} FROM {DB}.{self.source}{options}{notify}"
        if self.kind == "period":
            return (f"CREATE STREAM {DB}.{self.name} {self.clause} FROM {DB}.{self.source} INTO {DB}.{self.name}_out "
                    "AS SELECT cast(_tlocaltime / 1000000 AS TIMESTAMP) ts, count(*) AS n FROM %%trows")
        end = "" if self.kind == "interval" else ", _twend AS we"
        return (f"CREATE STREAM {DB}.{self.name} {self.clause} FROM {DB}.{self.source}{partition}{options}{notify} "
                f"INTO {DB}.{self.name}_out AS SELECT _twstart ts{end}, {STATS}")


STREAMS = (
    Soaked("int1m", "interval", "m", True, "INTERVAL(1m) SLIDING(1m)", notify=True, params=(60_000, 60_000, 0)),
    Soaked("slide", "interval", "m", False, "INTERVAL(1m) SLIDING(30s)", ("DELETE_RECALC", "WATERMARK(15s)"),
           params=(60_000, 30_000, 15_000)),
    Soaked("int30", "interval", "m", True, "INTERVAL(30s) SLIDING(30s)", ("DELETE_RECALC", "LOW_LATENCY_CALC"),
           notify=True, params=(30_000, 30_000, 0)),
    Soaked("sess", "session", "m", True, "SESSION(ts, 25s)", notify=True, params=(SESSION_GAP_MS,)),
    Soaked("sess1", "session", "d1", False, "SESSION(ts, 25s)", params=(SESSION_GAP_MS,)),
    Soaked("state", "state", "m", True, "STATE_WINDOW(st)", notify=True),
    Soaked("state2", "state", "d2", False, "STATE_WINDOW(st)", ("DELETE_RECALC", "LOW_LATENCY_CALC")),
    Soaked("event", "event", "m", True, "EVENT_WINDOW(START WITH v >= 8 END WITH v <= 2)", notify=True),
    Soaked("event0", "event", "d0", False, "EVENT_WINDOW(START WITH st = 2 AND v >= 5 END WITH v < 5)"),
    Soaked("count5", "count", "d3", False, "COUNT_WINDOW(5)", (), params=(5,)),
    Soaked("ticks", "period", "m", False, f"PERIOD({PERIOD_S}s)", ()),
    Soaked("count4", "notify", "d3", False, "COUNT_WINDOW(4)", (), params=(4,)),
)

#: the EVENT_WINDOW conditions, as the oracle evaluates them on a row
EVENT_CONDITIONS: dict[str, tuple[Callable[[pd.Series], bool], Callable[[pd.Series], bool]]] = {
    "event": (lambda r: r.v >= 8, lambda r: r.v <= 2),
    "event0": (lambda r: r.st == 2 and r.v >= 5, lambda r: r.v < 5),
}


def say(message: str) -> None:
    print(f"[soak {datetime.now(UTC).strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- the feed ---------------------------------------------------------------------------------


@dataclass
class Feed:
    """Rows written at a steady rate: each tick one row per subtable at the next event time, and
    now and then a late row, an update (an INSERT at an existing timestamp) and a delete, in the
    subtables of :data:`DISORDERED`. It keeps the timestamps each subtable holds, so that updates
    and deletes hit existing rows; it never deletes a subtable's first or latest rows, so each
    group's first window and latest event time stay what the live detector saw."""

    rng: random.Random
    tick: int = 0
    rows: dict[str, list[datetime]] = field(default_factory=lambda: {s: [] for s in SUBTABLES})
    states: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SUBTABLES, 1))
    counts: Counter = field(default_factory=Counter)

    def _value(self) -> int:
        return self.rng.randint(0, 10)

    def _state(self, sub: str) -> int:
        if self.rng.random() < 0.3:
            self.states[sub] = 3 - self.states[sub]
        return self.states[sub]

    def statements(self) -> list[str]:
        """The statements of the next tick."""
        k = self.tick
        self.tick += 1
        at = T0 + k * STEP
        values: dict[str, list[str]] = defaultdict(list)
        for sub in SUBTABLES:
            period, silent = SILENT.get(sub, (1, set()))
            if k % period in silent:
                continue
            values[sub].append(f"('{stamp(at)}', {self._value()}, {self._state(sub)})")
            self.rows[sub].append(at)
            self.counts["inserts"] += 1
        out = []
        if k >= 4 and self.rng.random() < 0.5:  # a late row, between existing ones
            sub = self.rng.choice(DISORDERED)
            late = T0 + self.rng.randint(max(1, k - 12), k - 2) * STEP + timedelta(seconds=self.rng.choice((3, 5, 7)))
            if late not in self.rows[sub] and late > self.rows[sub][0]:
                values[sub].append(f"('{stamp(late)}', {self._value()}, {self.rng.randint(1, 2)})")
                self.rows[sub].append(late)
                self.rows[sub].sort()
                self.counts["late"] += 1
        if k >= 4 and self.rng.random() < 0.5:  # an update of an earlier row
            sub = self.rng.choice(DISORDERED)
            held = [t for t in self.rows[sub][1:-2] if t >= at - 15 * STEP]
            if held:
                target = self.rng.choice(held)
                values[sub].append(f"('{stamp(target)}', {self._value()}, {self.rng.randint(1, 2)})")
                self.counts["updates"] += 1
        if values:
            out.append("INSERT INTO " + " ".join(f"{DB}.{sub} VALUES {' '.join(rows)}" for sub, rows in values.items()))
        if k >= 6 and self.rng.random() < 0.25:  # a delete of an earlier row
            sub = self.rng.choice(DISORDERED)
            held = [t for t in self.rows[sub][1:-3] if t >= at - 15 * STEP]
            if held:
                target = self.rng.choice(held)
                self.rows[sub].remove(target)
                out.append(f"DELETE FROM {DB}.{sub} WHERE ts = '{stamp(target)}'")
                self.counts["deletes"] += 1
        return out


def stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%S")


# --- the processes ------------------------------------------------------------------------------


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


# --- faults -------------------------------------------------------------------------------------


@dataclass
class Fault:
    at: float  # seconds after the feed starts
    component: str
    delay: float  # seconds from the kill to the restart
    done: str | None = None
    error: str | None = None
    #: a fault whose kill the restart waits for, besides ``delay`` (the node's, for the task's)
    holds_for: Fault | None = None
    #: set once this fault's kill was made or given up
    tried: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)


#: seconds from a node's kill to the task process kill that follows it
TASK_AFTER_NODE_S = 3.0
#: how long a task fault looks for a running task process
TASK_SEARCH_S = 60.0


def plan_faults(rng: random.Random, seconds: float) -> list[Fault]:
    """Each component killed ``max(1, 0.75 x minutes)`` times, at random moments between 10% and 75%
    of the feed (the rest shows that the streams recover while rows still come), each restarted 1 to
    5 s after its kill; a component's kills are at least 20 s apart.

    A task process is killed :data:`TASK_AFTER_NODE_S` after each kill of the node: while the node
    hosts the streams their tasks run in the triggerer, the node working, and no task process runs;
    while it is down, their tasks resume on workers, which do the work themselves. That node stays
    down until the task process is killed (or none was found in :data:`TASK_SEARCH_S`): a triggerer
    restarted just before takes the triggers over only once the old one is deemed dead (10 s
    without a heartbeat here), and until then no task resumes anywhere."""
    times = max(1, int(0.75 * seconds / 60))
    faults = []
    for component in COMPONENTS:
        if component == "task":
            continue
        slots = sorted(rng.uniform(0.1, 0.75) * seconds for _ in range(times))
        for i in range(1, len(slots)):
            slots[i] = max(slots[i], slots[i - 1] + 20)
        faults += [Fault(at, component, rng.uniform(1, 5)) for at in slots if at < seconds]
    for node in [f for f in faults if f.component == "node"]:
        node.holds_for = Fault(node.at + TASK_AFTER_NODE_S, "task", 0.0)
        faults.append(node.holds_for)
    return sorted(faults, key=lambda f: f.at)


class Injector(threading.Thread):
    """Runs the planned faults, each in a thread of its own, so a slow restart delays no other fault."""

    def __init__(self, cluster: Cluster, faults: list[Fault], started: float) -> None:
        super().__init__(daemon=True, name="soak-faults")
        self.cluster = cluster
        self.faults = faults
        self.started = started
        self.workers: list[threading.Thread] = []

    def run(self) -> None:
        for fault in self.faults:
            time.sleep(max(0.0, self.started + fault.at - time.monotonic()))
            worker = threading.Thread(target=self._one, args=(fault,), daemon=True)
            worker.start()
            self.workers.append(worker)

    def _one(self, fault: Fault) -> None:
        with self.cluster.locks[fault.component]:
            try:
                try:
                    fault.done = self.cluster.kill(fault.component)
                finally:
                    fault.tried.set()
                if fault.done is None:
                    fault.error = "nothing to kill"
                    return
                say(f"fault: SIGKILL {fault.done}; restart in {fault.delay:.1f} s"
                    + (f", once the {fault.holds_for.component} fault is done" if fault.holds_for else ""))
                time.sleep(fault.delay)
                if fault.holds_for is not None:
                    fault.holds_for.tried.wait(fault.holds_for.at - fault.at + TASK_SEARCH_S + 5)
                self.cluster.restart(fault.component)
                if fault.component != "task":
                    say(f"fault: {fault.component} restarted")
            except Exception as err:
                fault.error = f"{type(err).__name__}: {err}"
                say(f"fault on {fault.component} failed: {fault.error}\n{traceback.format_exc()}")

    def finish(self, timeout: float) -> None:
        self.join(timeout)
        for worker in list(self.workers):
            worker.join(timeout)


# --- the oracle ---------------------------------------------------------------------------------

#: a window: (group, start in ms) -> (end in ms, or None for INTERVAL; average; maximum; count)
Windows = dict[tuple[str | None, int], tuple[int | None, float | None, float | None, int]]


def epoch_ms(column: pd.Series) -> pd.Series:
    return (pd.to_datetime(column, utc=True) - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(milliseconds=1)


def _stats(v: pd.Series) -> tuple[float | None, float | None, int]:
    if v.empty:
        return None, None, 0
    return float(v.mean()), float(v.max()), len(v)


def _interval(ts: list[int], v: pd.Series, interval: int, sliding: int, watermark: int) -> dict[int, tuple]:
    """The closed windows ``[k·sliding, k·sliding + interval)`` from the first that holds the first row
    to the last whose end the group's latest row minus the watermark reached; empty ones included."""
    out: dict[int, tuple] = {}
    first, decided = ts[0], ts[-1] - watermark
    arr = pd.Series(ts)
    for k in range((first - interval) // sliding + 1, (decided - interval) // sliding + 1):
        start = k * sliding
        inside = (arr >= start) & (arr < start + interval)
        out[start] = (None, *_stats(v[inside.values]))
    return out


def _runs(ts: list[int], v: pd.Series, bounds: list[tuple[int, int]]) -> dict[int, tuple]:
    """Windows of rows ``[i, j]`` (positions, inclusive)."""
    return {ts[i]: (ts[j], *_stats(v.iloc[i:j + 1])) for i, j in bounds}


def window_bounds(spec: Soaked, rows: pd.DataFrame) -> list[tuple[int, int]]:
    """The closed windows of one group's rows (in time order), as (first, last) row positions."""
    ts = rows["t"].tolist()
    bounds: list[tuple[int, int]] = []
    if spec.kind == "session":
        (gap,) = spec.params
        start = 0
        for i in range(1, len(ts)):
            if ts[i] - ts[i - 1] > gap:
                bounds.append((start, i - 1))
                start = i
        return bounds  # the last session closes only when the watermark passes its last row by the gap
    if spec.kind == "state":
        st = rows["st"].tolist()
        start = 0
        for i in range(1, len(st)):
            if st[i] != st[i - 1]:
                bounds.append((start, i - 1))
                start = i
        return bounds  # the last run is still open
    if spec.kind == "event":
        opens, closes = EVENT_CONDITIONS[spec.name]
        begun = None
        for i, row in enumerate(rows.itertuples()):
            if begun is None:
                if opens(row):
                    begun = i
            elif closes(row):
                bounds.append((begun, i))
                begun = None
        return bounds
    if spec.kind in ("count", "notify"):
        (n,) = spec.params
        return [(i, i + n - 1) for i in range(0, len(ts) - n + 1, n)]
    raise ValueError(spec.kind)


def oracle_windows(spec: Soaked, table: pd.DataFrame) -> Windows:
    """The closed windows of ``spec`` over the final rows of the supertable ``table`` (columns ``t``
    in ms, ``v``, ``st``, ``tbname``), with the values the stream's query computes."""
    rows = table if spec.source == "m" else table[table["tbname"] == spec.source]
    groups = rows.groupby("tbname") if spec.by_tbname else [(None, rows)]
    out: Windows = {}
    for group, part in groups:
        part = part.sort_values("t").reset_index(drop=True)
        if part.empty:
            continue
        ts = part["t"].tolist()
        if spec.kind == "interval":
            windows = _interval(ts, part["v"], *spec.params)
        else:
            windows = _runs(ts, part["v"], window_bounds(spec, part))
        out |= {(group, start): value for start, value in windows.items()}
    return out


# --- the checks ---------------------------------------------------------------------------------


@dataclass
class Findings:
    windows: int = 0  # oracle windows checked in output tables
    notifications: int = 0  # oracle windows checked in notifications
    instants: int = 0  # PERIOD instants checked
    lost: int = 0
    duplicated: int = 0
    stale: int = 0  # results of windows that are gone, never invalidated
    invalidated: int = 0  # output rows of windows that are gone, correctly invalidated
    resent: int = 0  # messages received again (same messageId)
    unreadable: int = 0
    failed: list[str] = field(default_factory=list)
    pending: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.stale or self.failed or self.pending or self.unreadable)


def _delta(path: Path) -> pd.DataFrame:
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return DeltaTable(str(path)).to_pandas()
    except TableNotFoundError:
        return pd.DataFrame()


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None or (isinstance(a, float) and math.isnan(a)) or (isinstance(b, float) and math.isnan(b)):
        return (a is None or math.isnan(a)) and (b is None or math.isnan(b))
    return abs(a - b) <= 1e-9 * max(1.0, abs(b))


def _matches(got: tuple, want: tuple) -> bool:
    return got[0] == want[0] and _same(got[1], want[1]) and _same(got[2], want[2]) and int(got[3]) == want[3]


def _group_names(home: Path, spec: Soaked) -> dict[str, str | None]:
    """group id -> the group (a subtable name, or None without PARTITION BY), from the stream's
    event log."""
    events = _delta(home / "state" / DB / spec.name / "events")
    if events.empty or not spec.by_tbname:
        return {}
    out = {}
    for gid, keys in zip(events["group_id"].astype(str), events["group_keys"]):
        value = json.loads(keys) if isinstance(keys, str) else keys
        if isinstance(value, dict):
            value = list(value.values())
        out[gid] = value[0] if isinstance(value, list) and value else value
    return out


def _invalidated_in_log(home: Path, spec: Soaked, groups: dict[str, str | None]) -> set[tuple]:
    """(group, start) of the windows whose latest event in the stream's event log is an invalidation."""
    events = _delta(home / "state" / DB / spec.name / "events")
    if events.empty:
        return set()
    events = events.sort_values(["batch_id", "seq"]).drop_duplicates("trigger_id", keep="last")
    gone = events[events["event_type"] == "WINDOW_INVALIDATION"]
    return {(groups.get(str(g)) if spec.by_tbname else None, int(s))
            for g, s in zip(gone["group_id"], epoch_ms(gone["window_start"]))}


def notified(messages: list[dict], spec: Soaked, groups: dict[str, str | None],
             findings: Findings) -> dict[tuple, tuple[str, dict | None]]:
    """(group, start) -> (the last event type, its result) of every window of ``spec`` notified;
    a WINDOW_CLOSE repeated for one triggerId without an invalidation between counts as duplicated."""
    last: dict[str, tuple[str, tuple, dict | None]] = {}
    for msg in messages:
        for stream in msg["streams"]:
            if stream["streamName"].split(".")[-1] != spec.name:
                continue
            for ev in stream["events"]:
                key = (groups.get(str(ev.get("groupId"))) if spec.by_tbname else None, int(ev["windowStart"]))
                before = last.get(ev["triggerId"])
                if before is not None and before[0] == ev["eventType"] == "WINDOW_CLOSE":
                    findings.duplicated += 1
                    findings.problems.append(f"{spec.name}: WINDOW_CLOSE of {key} sent twice ({ev['triggerId']})")
                last[ev["triggerId"]] = (ev["eventType"], key, ev.get("result"))
    return {key: (kind, result) for kind, key, result in last.values()}


def check(home: Path, receiver: Receiver, status: list[dict]) -> Findings:
    """Every check of the module's docstring, on the tables and the notifications as they are now."""
    findings = Findings()
    table = _delta(home / "warehouse" / DB / "m")
    table["t"] = epoch_ms(table["ts"])
    raw, findings.unreadable = receiver.messages()
    messages, seen = [], set()
    for msg in raw:
        if msg["messageId"] in seen:
            findings.resent += 1
            continue
        seen.add(msg["messageId"])
        messages.append(msg)
    for spec in STREAMS:
        if spec.kind == "period":
            _check_period(home, spec, findings)
            continue
        want = oracle_windows(spec, table)
        groups = _group_names(home, spec)
        sent = notified(messages, spec, groups, findings) if spec.notify or spec.kind == "notify" else None
        if spec.kind != "notify":
            _check_output(home, spec, want, sent, groups, findings)
        if sent is not None:
            _check_notified(spec, want, sent, findings)
    for row in status:
        if row["status"] == "failed":
            findings.failed.append(f"{row['stream_name']}: {row.get('last_error')}")
        findings.pending += int(row.get("notify_pending") or 0)
    return findings


def _check_output(home: Path, spec: Soaked, want: Windows, sent: dict | None, groups: dict,
                  findings: Findings) -> None:
    out = _delta(home / "warehouse" / DB / f"{spec.name}_out")
    got: dict[tuple, tuple] = {}
    if not out.empty:
        group = out["tag_tbname"] if spec.by_tbname else pd.Series([None] * len(out))
        ends = epoch_ms(out["we"]) if "we" in out else pd.Series([None] * len(out))
        for g, start, end, a, mx, n in zip(group, epoch_ms(out["ts"]), ends, out["a"], out["mx"], out["n"]):
            key = (g, int(start))
            if key in got:
                findings.duplicated += 1
                findings.problems.append(f"{spec.name}: two output rows for {key}")
            got[key] = (None if end is None or pd.isna(end) else int(end), None if pd.isna(a) else float(a),
                        None if pd.isna(mx) else float(mx), int(n))
    for key, value in want.items():
        findings.windows += 1
        if key not in got:
            findings.lost += 1
            findings.problems.append(f"{spec.name}: window {_show(key)} missing from the output, expected {value}")
        elif not _matches(got[key], value):
            findings.lost += 1
            findings.problems.append(f"{spec.name}: window {_show(key)} is {got[key]}, expected {value}")
    extra = set(got) - set(want)
    if extra:
        gone = ({k for k, (kind, _r) in sent.items() if kind == "WINDOW_INVALIDATION"} if sent is not None
                else _invalidated_in_log(home, spec, groups))
        for key in sorted(extra, key=str):
            if key in gone:
                findings.invalidated += 1
            else:
                findings.stale += 1
                findings.problems.append(f"{spec.name}: output row {_show(key)} {got[key]} is no window of the "
                                         "final table, and was not invalidated")


def _check_notified(spec: Soaked, want: Windows, sent: dict, findings: Findings) -> None:
    for key, value in want.items():
        findings.notifications += 1
        kind, result = sent.get(key, (None, None))
        if kind != "WINDOW_CLOSE":
            findings.lost += 1
            findings.problems.append(f"{spec.name}: window {_show(key)} not notified as closed (last: {kind})")
            continue
        if result is not None and not _matches((value[0], result.get("a"), result.get("mx"), result.get("n")),
                                               (value[0], *value[1:])):
            findings.lost += 1
            findings.problems.append(f"{spec.name}: window {_show(key)} notified with {result}, expected {value}")
    for key, (kind, _result) in sent.items():
        if kind == "WINDOW_CLOSE" and key not in want:
            findings.stale += 1
            findings.problems.append(f"{spec.name}: window {_show(key)} notified closed, but the final table has "
                                     "no such window and it was not invalidated")


def _check_period(home: Path, spec: Soaked, findings: Findings) -> None:
    from deltalake import DeltaTable

    out = _delta(home / "warehouse" / DB / f"{spec.name}_out")
    if out.empty:
        findings.problems.append(f"{spec.name}: no instant computed")
        findings.lost += 1
        return
    instants = sorted(int(t) for t in epoch_ms(out["ts"]))
    if len(set(instants)) != len(instants):
        findings.duplicated += len(instants) - len(set(instants))
        findings.problems.append(f"{spec.name}: an instant was written twice")
    for t in instants:
        if t % (PERIOD_S * 1000):
            findings.lost += 1
            findings.problems.append(f"{spec.name}: instant {t} is not on the period")
    path = str(home / "warehouse" / DB / "m")
    history = [(int(h["version"]), int(h["timestamp"])) for h in DeltaTable(path).history()]

    def version_at(ms: int) -> int:
        return max((v for v, at in history if at <= ms), default=-1)

    import pyarrow as pa

    changes = pa.RecordBatchReader.from_stream(DeltaTable(path).load_cdf(starting_version=0)).read_all().to_pandas()
    written = changes[changes["_change_type"].isin(["insert", "update_postimage"])]
    per_version = written.groupby("_commit_version").size()
    counts = {int(t): int(n) for t, n in zip(epoch_ms(out["ts"]), out["n"])}

    def rows(lo: int, hi: int) -> int:
        """Rows written in versions (lo, hi]."""
        return int(per_version[(per_version.index > lo) & (per_version.index <= hi)].sum())

    def bounds(at: int) -> tuple[int, int]:
        """The versions an instant's run may have seen last: a commit stamped up to IN_FLIGHT_MS before
        the instant may have landed after the run looked."""
        return version_at(at - IN_FLIGHT_MS), version_at(at)

    for prev, t in zip(instants, instants[1:]):
        (lo_early, lo_late), (hi_early, hi_late) = bounds(prev), bounds(t)
        findings.instants += 1
        if not rows(lo_late, hi_early) <= counts[t] <= rows(lo_early, hi_late):
            findings.lost += 1
            findings.problems.append(
                f"{spec.name}: instant {_show((None, t))} counted {counts[t]} rows; versions ({lo_early}..{lo_late}, "
                f"{hi_early}..{hi_late}] wrote {rows(lo_late, hi_early)} to {rows(lo_early, hi_late)}")
    if len(instants) > 2:  # the instants after the first count each row written between them once
        total = sum(counts[t] for t in instants[1:])
        (lo_early, lo_late), (hi_early, hi_late) = bounds(instants[0]), bounds(instants[-1])
        if not rows(lo_late, hi_early) <= total <= rows(lo_early, hi_late):
            findings.lost += 1
            findings.problems.append(f"{spec.name}: the instants after the first counted {total} rows in all; "
                                     f"{rows(lo_late, hi_early)} to {rows(lo_early, hi_late)} were written")


def _show(key: tuple) -> str:
    group, start = key
    at = datetime.fromtimestamp(start / 1000, UTC).strftime("%m-%d %H:%M:%S")
    return f"{group}@{at}" if group else at


def stream_status(wh: Warehouse) -> list[dict]:
    from airflow_stream_provider import statements

    result = list(statements.run(wh, f"SELECT * FROM information_schema.ins_streams WHERE db_name = '{DB}'"))[-1]
    assert result.table is not None
    return result.table.to_pylist()


# --- the run ------------------------------------------------------------------------------------


@dataclass
class Report:
    seed: int
    seconds: float
    faults: list[Fault]
    rows: Counter
    findings: Findings
    caught_up: bool  # everything matched the oracle within the time allowed after the feed
    catch_up: float  # seconds from the feed's end until it did (or until the time ran out)
    wall: float

    @property
    def ok(self) -> bool:
        return self.caught_up and self.findings.ok and not any(f.error for f in self.faults)

    def table(self) -> str:
        f = self.findings
        killed = Counter(fault.component for fault in self.faults if fault.done)
        missed = Counter(fault.component for fault in self.faults if not fault.done)
        lines = [f"soak of {self.seconds / 60:.1f} min, seed {self.seed}, {self.wall:.0f} s wall time",
                 f"{'component':<12} {'killed':>7} {'missed':>7}"]
        lines += [f"{c:<12} {killed[c]:>7} {missed[c]:>7}" for c in COMPONENTS]
        lines += [f"{'rows':<28} {'count':>8}"]
        lines += [f"{k:<28} {self.rows[k]:>8,}" for k in ("inserts", "late", "updates", "deletes", "statements")]
        lines += [f"{k:<28} {v:>8,}" for k, v in (
            ("windows checked", f.windows), ("notifications checked", f.notifications),
            ("PERIOD instants checked", f.instants), ("invalidated results", f.invalidated),
            ("messages resent (dropped)", f.resent), ("lost", f.lost), ("duplicated", f.duplicated),
            ("stale, not invalidated", f.stale), ("notifications pending", f.pending),
            ("unreadable messages", f.unreadable), ("failed streams", len(f.failed)))]
        lines.append(f"matched the oracle {self.catch_up:.0f} s after the feed stopped" if self.caught_up
                     else f"did NOT match the oracle within {self.catch_up:.0f} s after the feed stopped")
        lines += [f"fault on {fault.component} at {fault.at:.0f} s: {fault.error}"
                  for fault in self.faults if fault.error]
        lines += [f"failed: {name}" for name in f.failed]
        lines += f.problems[:40]
        return "\n".join(lines)


def run_soak(home: Path, seconds: float, seed: int, spark: SparkSession, *, tick: float = 1.5,
             settle: float = 300.0) -> Report:
    """The soak in ``home`` (the process's ``AIRFLOW_STREAM_HOME``): ``seconds`` of feed and faults
    (a tick every ``tick`` seconds, and at least two thirds of ``seconds / tick`` ticks), then up to
    ``settle`` seconds for the streams to catch up, then the checks."""
    from airflow_stream_provider import statements
    from airflow_stream_provider.airflow_api import AirflowApiError
    from airflow_stream_provider.local_airflow import LocalAirflow
    from airflow_stream_provider.warehouse import Warehouse

    began = time.monotonic()
    say(f"seed {seed}; home {home}")
    rng = random.Random(seed)
    wh = Warehouse(home / "warehouse", spark=spark)
    receiver = Receiver(home / "received.jsonl")
    airflow = LocalAirflow(home / "airflow", home)
    # a supervisor's Airflow notices a dead scheduler or triggerer in seconds, not Airflow's default
    # half a minute, and resets the tasks a dead scheduler had queued within 15 s, not 5 minutes
    airflow.env |= {"AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_THRESHOLD": "10",
                    "AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL": "15",
                    "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "10",
                    "AIRFLOW__SCHEDULER__TRIGGERER_HEALTH_CHECK_THRESHOLD": "10"}
    cluster = Cluster(home, airflow, receiver, free_port(), random.Random(rng.random()))
    feed = Feed(rng)
    faults = plan_faults(rng, seconds)
    injector = None
    try:
        receiver.start()
        tables = f"CREATE DATABASE {DB}; CREATE STABLE {DB}.m (ts TIMESTAMP, v DOUBLE, st INT) TAGS (loc VARCHAR(8));"
        tables += "".join(f"CREATE TABLE {DB}.{s} USING {DB}.m TAGS ('{s}');" for s in SUBTABLES)
        list(statements.run(wh, tables))
        for spec in STREAMS:
            list(statements.run(wh, spec.sql(receiver.url)))
        os.environ["AIRFLOW_STREAM_API_URL"] = airflow.url
        cluster.start_node()
        airflow.start()
        dags = {f"stream__{DB}__{spec.name}" for spec in STREAMS}

        def registered() -> bool:
            try:
                known = {d["dag_id"] for d in airflow.api("/api/v2/dags?limit=100")["dags"] if not d["is_paused"]}
            except AirflowApiError:
                return False
            return dags <= known

        from airflow_stream_provider.processes import wait_for

        wait_for(registered, 180, "the streams' DAGs", every=2)
        say(f"node and Airflow up after {time.monotonic() - began:.0f} s; feeding for {seconds:.0f} s, "
            f"{len(faults)} faults planned")
        started = time.monotonic()
        injector = Injector(cluster, faults, started)
        injector.start()
        # a busy machine writes a tick's statements slower than one per ``tick``: the feed goes on
        # past ``seconds`` until two thirds of its ticks are written, so the checks see as many
        # windows, late rows, updates and deletes on any machine
        least = int(seconds / tick * 2 / 3)
        while time.monotonic() < started + seconds or feed.tick < least:
            due = started + feed.tick * tick
            time.sleep(max(0.0, due - time.monotonic()))
            for text in feed.statements():
                list(statements.run(wh, text))
                feed.counts["statements"] += 1
        say(f"feed stopped after {feed.tick} ticks: {dict(feed.counts)}")
        fed = time.monotonic()
        injector.finish(300)
        cluster.ensure_running()
        settle_until = time.monotonic() + settle
        findings = Findings()
        while True:
            findings = check(home, receiver, stream_status(wh))
            if findings.ok or time.monotonic() > settle_until:
                break
            say(f"catching up: {findings.lost} lost, {findings.stale} stale, {findings.pending} pending so far")
            time.sleep(10)
        return Report(seed, seconds, faults, feed.counts, findings, findings.ok, time.monotonic() - fed,
                      time.monotonic() - began)
    finally:
        if injector is not None:
            injector.finish(60)
        cluster.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0, help="how long rows are fed and faults injected")
    parser.add_argument("--seed", type=int, default=None, help="the fault and feed generator's seed (default: random)")
    parser.add_argument("--settle", type=float, default=600.0, help="seconds allowed to catch up after the feed")
    parser.add_argument("--home", type=Path, default=None, help="the folder to run in (default: a new temporary one)")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    home = (args.home or Path(tempfile.mkdtemp(prefix="airflow-stream-soak-"))).resolve()
    home.mkdir(parents=True, exist_ok=True)
    os.environ["AIRFLOW_STREAM_HOME"] = str(home)
    os.environ.setdefault("AIRFLOW_STREAM_TIMEZONE", "UTC")
    os.environ["AIRFLOW_STREAM_API_URL"] = "http://127.0.0.1:9"  # no Airflow until run_soak starts its own
    os.environ["TZ"] = "UTC"
    time.tzset()
    print(f"seed {seed}", flush=True)
    from airflow_stream_provider.spark.session import local_session

    spark = local_session("airflow-stream-soak")
    try:
        report = run_soak(home, args.minutes * 60, seed, spark, settle=args.settle)
    finally:
        spark.stop()
    print(report.table())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
