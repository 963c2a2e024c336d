"""Many streams at once: how lag and cost grow with the number of streams.

    .venv/bin/python bench/load.py [--streams 1,5,20] [--paths low_latency,airflow] [--minutes 5] [--meters 100]

A supertable of ``--meters`` meters receives one row per meter per second, in real time (the row's
``ts`` is the second it is written in, one commit per second), for ``--minutes`` minutes per phase.
Each phase runs N streams on a fresh stream node (``local[2]``) beside one set of Airflow components
(api-server, scheduler, dag-processor, triggerer; LocalExecutor) whose metadata database is a
PostgreSQL server the script starts (``--database sqlite``: Airflow's SQLite file, which Airflow
supports for development only: its writes take turns, and twenty DAGs running continuously wait on
them): with N = 1 an INTERVAL stream per
meter; with more, a mix of INTERVAL per meter, STATE_WINDOW, EVENT_WINDOW, SESSION and COUNT_WINDOW
windows, all partitioned by meter, plus one PERIOD(10s) stream. Every phase runs once with every
stream on the Airflow path (the node detects; a DAG run computes each batch of windows) and once
with ``STREAM_OPTIONS(LOW_LATENCY_CALC)`` (the node computes in the detector's batch; the DAGs only
supervise).

Measured per phase, over the feed after its first minute:

- lag, from the commit of the row that closes a window to the commit of the window's output row
  (Delta commit timestamps of the trigger table and of the output table's change feed). The closing
  row follows from the window's rule and the data: INTERVAL, the first row at the window's end; COUNT
  and EVENT, the window's last row; STATE, the row after it; SESSION, the first row more than the gap
  past its last row. PERIOD: from the instant to the output's commit;
- whether a stream falls behind: how much its lag grows over the measured feed, the slope of a
  least-squares line through its lags (one point per closing second: the median of the windows that
  close in it) times the measured span, with a 95% interval (two standard errors). A stream falls
  behind when its growth is above 1 s with that confidence (the interval's low end above 1 s); the
  table's ``growth`` is that of all the streams together (each about its own mean lag). Streams
  whose windows all close in the same second every 20 or 30 s have a point per 20 or 30 s, so a
  difference of two one-minute medians (what this column used to be) compares two or three points
  and swings by seconds without any trend;
- CPU seconds per stream per minute of the node (its JVM and Python workers), of Airflow's
  components (with the PostgreSQL server), and of the task processes (from ``/proc``: every
  process's own time and that of the children it reaped, so short task processes are counted);
- resident memory of the node and of Airflow (largest sum over their processes, sampled every 5 s);
- Airflow task runs per minute.

Targets (2 cores): one stream, LOW_LATENCY_CALC p50 <= 0.5 s and the Airflow path p50 <= 3 s; 20
streams, LOW_LATENCY_CALC p50 <= 2 s and the Airflow path p50 <= 10 s with no stream falling behind;
from 5 to 20 streams the p50 grows at most 2x and the CPU per stream falls.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow_stream_provider.local_airflow import LocalAirflow
    from airflow_stream_provider.warehouse import Warehouse

PATHS = {"low_latency": "STREAM_OPTIONS(LOW_LATENCY_CALC)", "airflow": ""}
LABELS = {"low_latency": "LOW_LATENCY_CALC", "airflow": "Airflow path"}
PERIOD = "period"


@dataclass(frozen=True)
class Kind:
    """A kind of window stream: its trigger and when its window closes, in seconds after ``_twend``
    (the window's end for INTERVAL, its last row for the others)."""

    name: str
    trigger: str
    close_after: int


def kinds(variant: int) -> list[Kind]:
    """The five window kinds, their sizes varied with ``variant`` so that repeated kinds differ."""
    size = (10, 15, 20, 30)[variant % 4]
    return [
        Kind("interval", f"INTERVAL({size}s) SLIDING({size}s)", 0),
        Kind("state", "STATE_WINDOW(mode)", 1),
        Kind("event", f"EVENT_WINDOW(START WITH v >= {7 - variant % 3} END WITH v < 1)", 0),
        # a meter's rows pass the filter 8 s in 12: a session ends at the filter's gap, and closes when
        # the table's event time is more than the gap past its last row
        Kind("session", f"SESSION(ts, {2 + variant % 2}s)", 3 + variant % 2),
        Kind("count", f"COUNT_WINDOW({size})", 0),
    ]


def stream_kinds(count: int) -> list[Kind | None]:
    """The kinds of ``count`` streams: one INTERVAL alone; otherwise the five kinds in turn and one
    PERIOD stream (None)."""
    if count == 1:
        return [kinds(0)[0]]
    return [kinds(i // 5)[i % 5] for i in range(count - 1)] + [None]


def streams_sql(db: str, count: int, options: str) -> list[str]:
    out = []
    for i, kind in enumerate(stream_kinds(count)):
        if kind is None:
            out.append(f"CREATE STREAM {db}.s{i} PERIOD(10s) INTO {db}.out{i} "
                       f"AS SELECT cast(_tlocaltime / 1000000 AS TIMESTAMP) ts, count(*) n FROM {db}.meters")
            continue
        pre = "PRE_FILTER(phase < 8)" if kind.name == "session" else ""
        opts = " | ".join(filter(None, [pre, options.removeprefix("STREAM_OPTIONS(").removesuffix(")")]))
        out.append(f"CREATE STREAM {db}.s{i} {kind.trigger} FROM {db}.meters PARTITION BY tbname "
                   f"{f'STREAM_OPTIONS({opts})' if opts else ''} INTO {db}.out{i} "
                   "AS SELECT _twstart ts, _twend te, count(*) n FROM %%trows")
    return out


def row_values(meter: int, second: int) -> str:
    """A meter's reading at ``second`` (epoch seconds): ``v`` cycles 0..9, ``mode`` changes every 7 s,
    ``phase`` cycles 0..11; each meter is offset from the others."""
    at = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%d %H:%M:%S")
    return (f"('{at}', {(second + meter) % 10}, {((second + meter) // 7) % 3}, {(second + 3 * meter) % 12})")


# --- processes: CPU and memory from /proc ------------------------------------------------------

TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class Proc:
    ppid: int
    own: int  # clock ticks: user + system
    reaped: int  # clock ticks of the children it waited for
    rss: int  # bytes
    cmd: str


def processes() -> dict[int, Proc]:
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            rss = int((entry / "statm").read_text().split()[1]) * PAGE
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after the command's name, from the state on
        own, reaped = int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])
        out[int(entry.name)] = Proc(int(fields[1]), own, reaped, rss, cmd)
    return out


def tree(table: dict[int, Proc], roots: list[int]) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, proc in table.items():
        children.setdefault(proc.ppid, []).append(pid)
    found = [pid for pid in roots if pid in table]
    for pid in found:
        found.extend(children.get(pid, []))
    return found


EXECUTOR_WORKER = "airflow worker -- LocalExecutor"


def usage(node_pid: int, airflow_roots: dict[str, int]) -> dict[str, float]:
    """CPU seconds so far of the node, Airflow's components (in all, and each: ``airflow:<name>``)
    and the task processes, and the resident bytes of the node and of Airflow. The LocalExecutor's
    workers run each task in a child process: what those children used (live, or reaped by the
    worker) is the tasks'."""
    table = processes()
    node = tree(table, [node_pid])
    airflow = tree(table, list(airflow_roots.values()))
    executors = [pid for pid in airflow if table[pid].cmd.startswith(EXECUTOR_WORKER)]
    tasks = set(tree(table, executors)) - set(executors)
    def total(pids: list[int] | set[int]) -> int:
        return sum(table[p].own + table[p].reaped for p in pids)

    by_executors = sum(table[p].reaped for p in executors)
    each = {}
    for name, root in airflow_roots.items():
        own = [p for p in tree(table, [root]) if p not in tasks]
        each[f"airflow:{name}"] = (total(own) - sum(table[p].reaped for p in own if p in executors)) / TICK
    return each | {"node": total(node) / TICK,
            "tasks": (total(tasks) + by_executors) / TICK,
            "components": (total([p for p in airflow if p not in tasks]) - by_executors) / TICK,
            "node_rss": sum(table[p].rss for p in node), "airflow_rss": sum(table[p].rss for p in airflow)}


class Sampler(threading.Thread):
    """Memory every few seconds while a phase runs: the largest sums seen."""

    def __init__(self, node_pid: int, airflow_roots: dict[str, int], every: float = 5.0) -> None:
        super().__init__(daemon=True)
        self.node_pid, self.roots, self.every = node_pid, airflow_roots, every
        self.peak = {"node_rss": 0.0, "airflow_rss": 0.0}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.every):
            now = usage(self.node_pid, self.roots)
            for key in self.peak:
                self.peak[key] = max(self.peak[key], now[key])


# --- the feed and the lags -----------------------------------------------------------------------


def feed(wh: Warehouse, db: str, meters: int, seconds: int, say: Callable[[str], None]) -> list[int]:
    """Write one row per meter per second for ``seconds`` seconds, each second's rows in one commit
    at the start of that second; the seconds written."""
    from airflow_stream_provider import statements

    written = []
    second = int(time.time()) + 1
    end = second + seconds
    while second < end:
        time.sleep(max(0.0, second - time.time()))
        values = " ".join(f"{db}.d{m} VALUES {row_values(m, second)}" for m in range(meters))
        list(statements.run(wh, f"INSERT INTO {values}"))
        written.append(second)
        if len(written) % 60 == 0:
            say(f"{len(written)} s of rows written, {time.time() - second:.2f} s after the last second began")
        second += 1  # behind after a slow commit, the next rows go at once
    return written


def row_commits(path: Path, since_version: int) -> dict[int, float]:
    """Each second written after ``since_version`` (a row's ``ts``, epoch seconds) and the commit
    time of its rows, from the table's change feed (the table's compactions commit no rows, so
    they are not counted as the feed's commits)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    feed = DeltaTable(str(path)).load_cdf(starting_version=since_version + 1)
    read = pa.RecordBatchReader.from_stream(feed).read_all()
    seconds = read.column("ts").cast(pa.timestamp("s", tz="UTC")).cast(pa.int64()).to_pylist()
    at = pc.divide(read.column("_commit_timestamp").cast(pa.timestamp("ms")).cast(pa.int64()), 1000.0).to_pylist()
    out: dict[int, float] = {}
    for second, when in zip(seconds, at, strict=True):
        out[second] = min(out.get(second, when), when)
    return out


def first_commits(path: Path) -> dict[tuple, float]:
    """Each output row's key (group, ts) and the commit time at which it first appeared, from the
    table's change feed."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        feed = DeltaTable(str(path)).load_cdf(starting_version=0)
    except TableNotFoundError:
        return {}
    read = pa.RecordBatchReader.from_stream(feed).read_all()
    group = "tag_tbname" if "tag_tbname" in read.column_names else None
    columns = {"kind": read.column("_change_type").cast(pa.string()), "ts": read.column("ts"),
               # the commit's time in milliseconds since the epoch (a timestamp without a zone, in UTC)
               "at": read.column("_commit_timestamp").cast(pa.timestamp("ms")).cast(pa.int64())}
    if "te" in read.column_names:
        columns["te"] = read.column("te")
    if group:
        columns["group"] = read.column(group).cast(pa.string())
    changes = pa.table(columns)
    changes = changes.filter(pc.is_in(changes.column("kind"), value_set=pa.array(["insert", "update_postimage"])))
    out: dict[tuple, float] = {}
    for row in changes.to_pylist():
        key = (row.get("group"), row["ts"], row.get("te"))
        out[key] = min(out.get(key, row["at"] / 1000), row["at"] / 1000)
    return out


@dataclass
class Phase:
    path: str
    count: int
    lags: dict[int, list[tuple[float, float]]] = field(default_factory=dict)  # stream -> (close second, lag)
    cpu: dict[str, float] = field(default_factory=dict)
    components: dict[str, float] = field(default_factory=dict)  # CPU seconds of each Airflow component
    peak: dict[str, float] = field(default_factory=dict)
    task_runs: int = 0
    minutes: float = 0.0
    missing: int = 0

    def all_lags(self, streams: Callable[[int], bool] = lambda i: True) -> list[float]:
        return [lag for i, samples in self.lags.items() if streams(i) for _, lag in samples]

    def growth(self, stream: int | None = None) -> Growth | None:
        """How much the lag of ``stream`` (None: of all the streams, each about its own mean) grows
        over the measured feed; None with fewer than three closing seconds."""
        series = [points(self.lags[stream])] if stream is not None else [points(s) for s in self.lags.values()]
        return fit([s for s in series if len(s) >= 3])

    def grown(self) -> list[tuple[int, Growth]]:
        """Each stream's growth (those with three closing seconds or more), the largest first."""
        found = [(i, g) for i in self.lags if (g := self.growth(i)) is not None]
        return sorted(found, key=lambda item: -item[1].seconds)


#: a stream falls behind when its lag grows by more than this over the measured feed
BEHIND_S = 1.0


@dataclass(frozen=True)
class Growth:
    """A lag's growth over the measured feed and its 95% interval, in seconds."""

    seconds: float
    margin: float

    @property
    def low(self) -> float:
        return self.seconds - self.margin

    def __str__(self) -> str:
        return f"{self.seconds:+.2f} ± {self.margin:.2f} s"


def points(samples: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """One point per closing second: the median lag of the windows that close in it."""
    by: dict[float, list[float]] = {}
    for at, lag in samples:
        by.setdefault(at, []).append(lag)
    return sorted((at, statistics.median(lags)) for at, lags in by.items())


def fit(series: list[list[tuple[float, float]]]) -> Growth | None:
    """The least-squares slope through the series, each about its own means (one slope for all),
    times the longest series' span, with two standard errors."""
    if not series:
        return None
    centred = []
    for s in series:
        mt, ml = statistics.fmean(t for t, _ in s), statistics.fmean(lag for _, lag in s)
        centred += [(t - mt, lag - ml) for t, lag in s]
    sxx = sum(t * t for t, _ in centred)
    sxy = sum(t * lag for t, lag in centred)
    freedom = len(centred) - len(series) - 1
    if sxx == 0 or freedom <= 0:
        return None
    slope = sxy / sxx
    residual = sum((lag - slope * t) ** 2 for t, lag in centred) / freedom
    span = max(s[-1][0] - s[0][0] for s in series)
    return Growth(slope * span, 2 * (residual / sxx) ** 0.5 * span)


def measure(home: Path, db: str, phase: Phase, base_version: int, kinds_of: list[Kind | None],
            measured_from: int) -> None:
    """The lag of every window closed by a row written from ``measured_from`` on."""
    table = home / "warehouse" / db / "meters"
    commit_at = row_commits(table, base_version)
    for i, kind in enumerate(kinds_of):
        outputs = first_commits(home / "warehouse" / db / f"out{i}")
        samples = []
        for (_group, ts, te), at in outputs.items():
            if kind is None:  # PERIOD: the instant, then the output's commit
                instant = ts.timestamp()
                if instant >= measured_from:
                    samples.append((instant, at - instant))
                continue
            close = int(te.timestamp()) + kind.close_after
            if close < measured_from or close not in commit_at:
                continue
            samples.append((close, at - commit_at[close]))
        phase.lags[i] = sorted(samples)


def quantile(values: list[float], q: int) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def task_runs(airflow: LocalAirflow, db: str, count: int, since: datetime) -> int:
    total = 0
    for i in range(count):
        found = airflow.api(f"/api/v2/dags/stream__{db}__s{i}/dagRuns/~/taskInstances"
                            f"?start_date_gte={since.isoformat().replace('+00:00', 'Z')}&limit=1")
        total += int(found.get("total_entries", 0))
    return total


def run_phase(home: Path, airflow: LocalAirflow, path: str, count: int, args: argparse.Namespace,
              say: Callable[[str], None], extra_roots: dict[str, int] | None = None) -> Phase:
    """One phase; ``extra_roots``: processes whose CPU and memory count as Airflow's (its database)."""
    extra_roots = extra_roots or {}
    from latency import _dag_known as dag_known  # bench/latency.py: the DAG is parsed and unpaused

    from airflow_stream_provider import statements
    from airflow_stream_provider.node import server as node
    from airflow_stream_provider.processes import free_port, wait_for
    from airflow_stream_provider.spark.session import spark_session
    from airflow_stream_provider.warehouse import Warehouse

    db = f"{'l' if path == 'low_latency' else 'a'}{count}"
    phase = Phase(path, count)
    info = node.start(free_port())
    try:
        wh = Warehouse(spark=spark_session())
        tags = " ".join(f"{db}.d{m} USING {db}.meters TAGS ({m})" for m in range(args.meters))
        list(statements.run(wh, f"CREATE DATABASE {db} PRECISION 'ms'; "
                                f"CREATE STABLE {db}.meters (ts TIMESTAMP, v INT, mode INT, phase INT) "
                                "TAGS (meter INT); "
                                f"CREATE TABLE {tags}"))
        list(statements.run(wh, "; ".join(streams_sql(db, count, PATHS[path]))))
        dag_ids = [f"stream__{db}__s{i}" for i in range(count)]
        wait_for(lambda: all(dag_known(airflow, d) for d in dag_ids), 300, "the streams' DAGs", every=2)
        windows = sum(k is not None for k in stream_kinds(count))
        wait_for(lambda: len((node.status() or {}).get("queries", [])) >= windows, 180, "the detectors", every=2)
        from deltalake import DeltaTable

        base = DeltaTable(str(home / "warehouse" / db / "meters")).version()
        say(f"{LABELS[path]}, {count} stream(s): feeding {args.meters} meters for {args.minutes} min")
        roots = {name: proc.pid for name, proc in airflow.processes.items()} | extra_roots
        before = usage(info.pid, roots)
        sampler = Sampler(info.pid, roots)
        sampler.start()
        began = time.time()
        since = datetime.now(UTC)
        written = feed(wh, db, args.meters, int(args.minutes * 60), say)
        after = usage(info.pid, roots)
        phase.minutes = (time.time() - began) / 60
        sampler.done.set()
        phase.peak = sampler.peak
        phase.cpu = {key: after[key] - before[key] for key in ("node", "components", "tasks")}
        phase.components = {key.removeprefix("airflow:"): after[key] - before.get(key, 0.0)
                            for key in after if key.startswith("airflow:")}
        phase.task_runs = task_runs(airflow, db, count, since)
        time.sleep(args.drain)  # windows closed by the last rows: their outputs come in
        measure(home, db, phase, base, stream_kinds(count), written[0] + 60)
        list(statements.run(wh, "; ".join(f"DROP STREAM {db}.s{i}" for i in range(count))))
    finally:
        spark_session().stop()
        node.stop()
    return phase


def report(phases: list[Phase]) -> None:
    print()
    print("lag: seconds from the commit of the row closing a window to its output's commit (PERIOD: from "
          "its instant); CPU: seconds per stream per minute")
    header = (f"{'path':<17} {'N':>3} {'p50':>6} {'p99':>6} {'growth':>13} {'cpu node':>9} {'cpu airflow':>12} "
              f"{'cpu tasks':>10} {'node MB':>8} {'airflow MB':>11} {'runs/min':>9} {'windows':>8}")
    print(header)
    for p in phases:
        lags = p.all_lags()
        per = p.count * p.minutes
        print(f"{LABELS[p.path]:<17} {p.count:>3} {quantile(lags, 50):>6.2f} {quantile(lags, 99):>6.2f} "
              f"{str(p.growth() or '-'):>13} {p.cpu['node'] / per:>9.2f} {p.cpu['components'] / per:>12.2f} "
              f"{p.cpu['tasks'] / per:>10.2f} {p.peak['node_rss'] / 2**20:>8.0f} "
              f"{p.peak['airflow_rss'] / 2**20:>11.0f} "
              f"{p.task_runs / p.minutes:>9.1f} {len(lags):>8}")
    print("\nAirflow's components: cores used (CPU seconds per second), the task processes apart")
    names = sorted({name for p in phases for name in p.components})
    print(f"{'path':<17} {'N':>3} " + " ".join(f"{name:>13}" for name in names))
    for p in phases:
        print(f"{LABELS[p.path]:<17} {p.count:>3} " + " ".join(
            f"{p.components.get(name, 0.0) / (60 * p.minutes):>13.3f}" for name in names))
    print()
    by = {(p.path, p.count): p for p in phases}
    checks = [("low_latency", 1, 0.5), ("airflow", 1, 3.0), ("low_latency", 20, 2.0), ("airflow", 20, 10.0)]
    for path, count, target in checks:
        if (path, count) in by:
            p50 = quantile(by[path, count].all_lags(), 50)
            print(f"{LABELS[path]}, {count} stream(s): p50 {p50:.2f} s {'meets' if p50 <= target else 'MISSES'} "
                  f"the target of {target} s")
    for path in PATHS:
        if (path, 5) in by and (path, 20) in by:
            five, twenty = by[path, 5], by[path, 20]
            growth = quantile(twenty.all_lags(), 50) / quantile(five.all_lags(), 50)
            cpu5 = sum(five.cpu.values()) / (5 * five.minutes)
            cpu20 = sum(twenty.cpu.values()) / (20 * twenty.minutes)
            print(f"{LABELS[path]}, 5 -> 20 streams: p50 x{growth:.2f} ({'meets' if growth <= 2 else 'MISSES'} "
                  f"x2), CPU per stream {cpu5:.2f} -> {cpu20:.2f} s/min "
                  f"({'falls' if cpu20 < cpu5 else 'DOES NOT FALL'})")
        if (path, 20) in by:
            grown = by[path, 20].grown()
            behind = [f"s{i}" for i, g in grown if g.low > BEHIND_S]
            print(f"{LABELS[path]}, 20 streams: "
                  + (f"the lag of s{grown[0][0]} grew most, {grown[0][1]}; " if grown else "")
                  + (f"FALLING BEHIND: {', '.join(behind)}" if behind else
                     f"none measurably falls behind (a growth above {BEHIND_S:.0f} s with 95% confidence)"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", default="1,5,20", help="the numbers of streams, one phase each")
    parser.add_argument("--paths", default="low_latency,airflow", help="low_latency, airflow or both")
    parser.add_argument("--minutes", type=float, default=5.0, help="minutes of feed per phase")
    parser.add_argument("--meters", type=int, default=100)
    parser.add_argument("--drain", type=float, default=20.0, help="seconds to wait for outputs after the feed")
    parser.add_argument("--parallelism", type=int, default=8, help="Airflow's task slots")
    parser.add_argument("--samples", type=Path, help="also write every lag measured to this JSON file: "
                        "{path: {N: {stream: [[close second, lag], ...]}}}")
    parser.add_argument("--database", choices=("postgres", "sqlite"), default="postgres",
                        help="Airflow's metadata database: a PostgreSQL server started here, or a SQLite file")
    parser.add_argument("--keep", action="store_true", help="keep the run's folder (tables, stream state, "
                        "Airflow's logs) instead of removing it at the end")
    args = parser.parse_args()
    # a run stopped by SIGTERM stops what it started (Airflow, the node, PostgreSQL) as one ended by ^C
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    home = Path(tempfile.mkdtemp(prefix="airflow-stream-bench-load-"))
    os.environ["AIRFLOW_STREAM_HOME"] = str(home)
    os.environ.setdefault("AIRFLOW_STREAM_TIMEZONE", "UTC")
    from airflow_stream_provider.local_airflow import LocalAirflow

    def say(message: str) -> None:
        print(f"[{datetime.now(UTC):%H:%M:%S}] {message}", file=sys.stderr, flush=True)

    database = None
    if args.database == "postgres":
        from airflow_stream_provider.local_servers import Postgres

        database = Postgres(home / "postgres").start()
    airflow = LocalAirflow(home / "airflow", home, parallelism=args.parallelism,
                           database=database.url if database else None)
    os.environ["AIRFLOW_STREAM_API_URL"] = airflow.url
    phases = []
    extra = {"database": database.process.pid} if database and database.process else {}
    try:
        airflow.start()
        for path in args.paths.split(","):
            for count in (int(n) for n in args.streams.split(",")):
                phases.append(run_phase(home, airflow, path, count, args, say, extra))
                report(phases[-1:])
                if args.samples:  # after each phase, so that a run cut short keeps what it measured
                    found: dict = {}
                    for p in phases:
                        found.setdefault(p.path, {})[p.count] = p.lags
                    args.samples.write_text(json.dumps(found))
    finally:
        airflow.stop()
        if database is not None:
            database.stop()
        if args.keep:
            say(f"kept: {home}")
        else:
            shutil.rmtree(home, ignore_errors=True)
    report(phases)
    return 0


if __name__ == "__main__":
    sys.exit(main())
