"""``airflow-stream demo``: the whole product working on this machine, from nothing.

It starts the stream node (Spark with Spark Connect), Airflow (``airflow standalone``, SQLite)
and a WebSocket receiver; creates the ``power`` database with a ``meters`` supertable of simulated
smart meters and two minutes of history; creates six streams over it that cover the reference's
examples; then writes live readings (late ones among them) and prints the notifications as they
arrive, with the streams' state every half minute.

It stops on Ctrl-C, SIGTERM or after ``--duration`` seconds: it stops writing, lets the streams
finish what was written (at most ``--drain`` seconds), prints a summary and stops what it started.
Everything lives under ``--home`` (``.demo`` by default), which each run starts afresh.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TextIO

from airflow_stream_provider import statements
from airflow_stream_provider.local_airflow import LocalAirflow
from airflow_stream_provider.model import TableName
from airflow_stream_provider.node import server as node
from airflow_stream_provider.notify.receiver import describe
from airflow_stream_provider.processes import free_port, port_free
from airflow_stream_provider.streams.status import streams_table
from airflow_stream_provider.warehouse import SubTable, Warehouse

MARKER = ".airflow-stream-demo"
#: readings per meter per second
HISTORY_SECONDS = 120
LATE_EVERY = 20  # seconds between late readings
LATE_BY = 25  # how late a late reading is, in seconds
LATE_QUIET = 30  # no late readings in the last seconds of the run, so that all of them are recalculated


def streams_sql(receiver: str, history_from: datetime) -> str:
    """The demo's streams, one per kind of trigger the reference's examples show."""
    start = history_from.strftime("%Y-%m-%d %H:%M:%S")
    return f"""
-- Rows written to the supertable, counted every 10 s (PERIOD: Airflow's PeriodTimetable).
CREATE STREAM power.row_counts PERIOD(10s)
    INTO power.row_counts
    AS SELECT cast(_tlocaltime / 1000000 AS TIMESTAMP) ts, count(*) AS readings FROM power.meters;

-- Per-meter 10 s averages, one output subtable per meter, from the history on; late readings
-- are recalculated. Each closed window is notified.
CREATE STREAM power.avg_voltage INTERVAL(10s) SLIDING(10s) FROM power.meters PARTITION BY tbname
    STREAM_OPTIONS(WATERMARK(2s) | FILL_HISTORY('{start}'))
    NOTIFY('{receiver}') ON (WINDOW_CLOSE)
    INTO power.avg_voltage OUTPUT_SUBTABLE(concat('avg_', tbname)) TAGS (meter VARCHAR(16) AS tbname)
    AS SELECT _twstart ts, avg(voltage) AS voltage, avg(current) AS current, count(*) AS readings FROM %%trows;

-- How long each meter stays in each operating mode.
CREATE STREAM power.modes STATE_WINDOW(mode) FROM power.meters PARTITION BY tbname
    STREAM_OPTIONS(FILL_HISTORY('{start}'))
    INTO power.modes
    AS SELECT _twstart ts, _twend AS until_ts, first(mode) AS mode, count(*) AS readings FROM %%trows;

-- Surges: voltage at 240 V or more for at least 4 s, notified when they start and end.
CREATE STREAM power.surges EVENT_WINDOW(START WITH voltage >= 240 END WITH voltage < 240) TRUE_FOR(4s)
    FROM power.meters PARTITION BY tbname
    STREAM_OPTIONS(FILL_HISTORY('{start}'))
    NOTIFY('{receiver}') ON (WINDOW_OPEN | WINDOW_CLOSE)
    INTO power.surges
    AS SELECT _twstart ts, _twend AS until_ts, max(voltage) AS peak, count(*) AS readings FROM %%trows;

-- Every 20 readings of a meter: a notification with their average current; nothing is stored.
CREATE STREAM power.every_20 COUNT_WINDOW(20) FROM power.meters PARTITION BY tbname
    STREAM_OPTIONS(CALC_NOTIFY_ONLY)
    NOTIFY('{receiver}') ON (WINDOW_CLOSE)
    AS SELECT avg(current) AS avg_current, max(voltage) AS max_voltage FROM %%trows;

-- Sessions of readings no more than 5 s apart (the last meter reports in bursts).
CREATE STREAM power.sessions SESSION(ts, 5s) FROM power.meters PARTITION BY tbname
    STREAM_OPTIONS(FILL_HISTORY('{start}'))
    INTO power.sessions
    AS SELECT _twstart ts, _twend AS until_ts, count(*) AS readings FROM %%trows;
"""


TABLES_SQL = """
CREATE DATABASE power PRECISION 'ms';
CREATE STABLE power.meters (ts TIMESTAMP, current FLOAT, voltage INT, phase FLOAT, mode INT)
    TAGS (groupid INT, location VARCHAR(24));
"""

LOCATIONS = ("California.SanFrancisco", "California.LosAngeles", "California.SanDiego", "California.SanJose",
             "California.PaloAlto", "California.Campbell", "California.Cupertino", "California.Sunnyvale")


@dataclass
class Meter:
    name: str
    groupid: int
    location: str
    bursty: bool  # reports 10 s on, 8 s off
    voltage: float = 225.0
    surge_left: int = 0
    calm: int = 0  # readings at normal voltage since the last surge of 5 s or more began
    mode: int = 0
    mode_left: int = 0


class Meters:
    """Simulated smart meters: one reading a second each, voltage as a random walk with surges to
    240 V and more, an operating mode that changes every 10 to 25 s; the last meter reports in
    bursts (10 s on, 8 s off). Surges come at random, 3 to 9 s long, and a meter that has read
    :attr:`MAX_CALM` normal voltages since its last surge of 5 s or more has one of 5 to 9 s: every
    meter surges long enough for ``surges``' TRUE_FOR(4s) every half minute or so, even in a short
    run."""

    #: readings at normal voltage without a surge of 5 s or more, after which a meter has one
    MAX_CALM = 25

    def __init__(self, count: int, seed: int = 7) -> None:
        self.random = random.Random(seed)
        self.meters = [Meter(f"d{1001 + i}", 1 + i % 3, LOCATIONS[i % len(LOCATIONS)], bursty=(i == count - 1))
                       for i in range(count)]
        self.written = 0
        self.late = 0

    def reading(self, meter: Meter, ts: datetime) -> str:
        r = self.random
        if meter.surge_left > 0:
            meter.surge_left -= 1
            voltage = 240 + r.randint(0, 8)
        else:
            meter.calm += 1
            if r.random() < 0.03:
                meter.surge_left = r.randint(3, 9)
            if meter.calm >= self.MAX_CALM and meter.surge_left < 5:
                meter.surge_left = r.randint(5, 9)
            if meter.surge_left >= 5:
                meter.calm = 0
            meter.voltage = min(236.0, max(214.0, meter.voltage + r.uniform(-2, 2)))
            voltage = round(meter.voltage)
        if meter.mode_left <= 0:
            meter.mode = r.choice([m for m in (0, 1, 2) if m != meter.mode])
            meter.mode_left = r.randint(10, 25)
        meter.mode_left -= 1
        current = round(r.uniform(5, 15), 2)
        phase = round(r.uniform(0.2, 0.4), 3)
        return f"({_ms(ts)}, {current}, {voltage}, {phase}, {meter.mode})"

    def insert(self, seconds: list[datetime], late: datetime | None = None) -> str:
        """An INSERT of one reading per meter for each second of ``seconds``, plus one late reading."""
        parts = []
        for meter in self.meters:
            values = [self.reading(meter, ts) for ts in seconds if not (meter.bursty and ts.timestamp() % 18 >= 10)]
            if late is not None and meter is self.meters[0]:
                values.append(self.reading(meter, late))
                self.late += 1
            if values:
                parts.append(f"power.{meter.name} USING power.meters TAGS ({meter.groupid}, '{meter.location}') "
                             f"VALUES {' '.join(values)}")
                self.written += len(values)
        return "INSERT INTO " + " ".join(parts) if parts else ""


def _ms(ts: datetime) -> int:
    return int(ts.timestamp() * 1000)


class Demo:
    def __init__(self, home: Path, *, duration: float, port: int | None, meters: int, drain: float,
                 out: TextIO = sys.stdout) -> None:
        self.home = home.resolve()
        self.duration = duration
        self.port = port
        self.meters = Meters(meters)
        self.drain = drain
        self.out = out
        self.stop_requested = threading.Event()
        self.receiver: subprocess.Popen | None = None
        self.airflow: LocalAirflow | None = None
        self.node_started = False
        self.warehouse: Warehouse | None = None
        self._tail_stop = threading.Event()

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    # --- the run ---------------------------------------------------------------------------------

    def run(self) -> int:
        self._fresh_home()
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            self._start()
            if not self.stop_requested.is_set():
                self._live()
            self._finish()
            return 0
        finally:
            self._stop_all()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _on_signal(self, signum: int, _frame: object) -> None:
        if self.stop_requested.is_set():
            raise KeyboardInterrupt  # a second Ctrl-C: skip the drain, stop everything now
        self.say(f"\n{signal.Signals(signum).name}: stopping (again to skip waiting for the streams)")
        self.stop_requested.set()

    def _fresh_home(self) -> None:
        if self.home.exists() and any(self.home.iterdir()) and not (self.home / MARKER).exists():
            raise SystemExit(f"error: {self.home} is not empty and not a demo folder; choose another with --home")
        pid_file = self.home / "demo.pid"
        if pid_file.exists():
            try:
                os.kill(int(pid_file.read_text()), 0)
            except (ValueError, ProcessLookupError):
                pass
            else:
                raise SystemExit(f"error: a demo (pid {pid_file.read_text()}) is running in {self.home}; stop it first")
        if self.home.exists():
            shutil.rmtree(self.home)
        self.home.mkdir(parents=True)
        (self.home / MARKER).write_text("made by airflow-stream demo; removed by the next run\n")
        (self.home / "demo.pid").write_text(str(os.getpid()))
        os.environ["AIRFLOW_STREAM_HOME"] = str(self.home / "stream")
        os.environ.pop("AIRFLOW_STREAM_CONFIG", None)

    def _start(self) -> None:
        receiver_port = free_port()
        self.receiver_url = f"ws://127.0.0.1:{receiver_port}/notify"
        self.notifications = self.home / "notifications.jsonl"
        self.say(f"[demo] home {self.home}")
        self.say(f"[demo] starting the WebSocket receiver on {self.receiver_url}")
        self.receiver = subprocess.Popen(
            [sys.executable, "-m", "airflow_stream_provider.cli", "receive", "--port", str(receiver_port),
             "--out", str(self.notifications), "--quiet"],
            stdout=subprocess.DEVNULL, stderr=(self.home / "receiver.log").open("wb"), start_new_session=True)
        self.say("[demo] starting the stream node (Spark with Spark Connect; about 20 s)")
        port = node.default_port()
        info = node.start(port=port if port_free(port) else free_port())
        self.node_started = True
        self.say(f"[demo]   node {info.url}, log {node.folder() / 'node.log'}")

        warehouse = self.warehouse = Warehouse()
        now = datetime.now(UTC).replace(microsecond=0)
        self.history_from = now - timedelta(seconds=HISTORY_SECONDS)
        self.say(f"[demo] creating power.meters with {len(self.meters.meters)} meters and "
                 f"{HISTORY_SECONDS} s of history")
        list(statements.run(warehouse, TABLES_SQL))
        seconds = [self.history_from + timedelta(seconds=s) for s in range(HISTORY_SECONDS)]
        list(statements.run(warehouse, self.meters.insert(seconds)))
        self.written_to = now
        self.say("[demo] creating 6 streams: row_counts (PERIOD), avg_voltage (INTERVAL), modes (STATE_WINDOW), "
                 "surges (EVENT_WINDOW + TRUE_FOR), every_20 (COUNT_WINDOW, notify only), sessions (SESSION)")
        list(statements.run(warehouse, streams_sql(self.receiver_url, self.history_from)))
        if self.stop_requested.is_set():
            return

        port = self.port if self.port else 8080 if self.port is None and port_free(8080) else free_port()
        self.airflow = LocalAirflow(self.home / "airflow", self.home / "stream", standalone=True, port=port)
        self.say(f"[demo] starting Airflow standalone on {self.airflow.url} (SQLite; about 30 s)")
        self.airflow.start(timeout=240)
        self.say("")
        self.say(f"  Airflow UI      {self.airflow.url}/  (no login: every user is admin in the demo)")
        self.say(f"  Streams page    {self.airflow.url}/streams/  (or \"Streams\" in the Airflow menu)")
        self.say(f"  stream DAGs     {self.airflow.url}/dags?tags=stream")
        self.say(f"  SQL             AIRFLOW_STREAM_HOME={self.home / 'stream'} airflow-stream sql -d power "
                 "\"SHOW STREAMS\"")
        self.say(f"  notifications   {self.notifications}")
        self.say("")

    def _live(self) -> None:
        """Write a reading per meter every second (in 2 s batches), a late one every 20 s; print
        notifications as they arrive and the streams' state every 30 s."""
        warehouse = self._warehouse()
        tail = threading.Thread(target=self._tail_notifications, name="notifications", daemon=True)
        tail.start()
        began = time.monotonic()
        until = began + self.duration if self.duration > 0 else float("inf")
        length = f"for {int(self.duration)} s" if self.duration > 0 else "until Ctrl-C"
        self.say(f"[demo] writing live readings {length}")
        next_late = began + LATE_EVERY
        next_status = began + 30
        while not self.stop_requested.is_set() and time.monotonic() < until:
            now = datetime.now(UTC).replace(microsecond=0)
            seconds = []
            while self.written_to < now:
                seconds.append(self.written_to)
                self.written_to += timedelta(seconds=1)
            late = None
            if time.monotonic() >= next_late and until - time.monotonic() > LATE_QUIET:
                late = now - timedelta(seconds=LATE_BY, milliseconds=500)
                next_late += LATE_EVERY
            statement = self.meters.insert(seconds, late)
            if statement:
                list(statements.run(warehouse, statement))
            if late is not None:
                self.say(f"[demo] wrote a late reading for d1001 at {late.strftime('%H:%M:%S.%f')[:-3]} "
                         f"({LATE_BY} s late): avg_voltage recalculates its window")
            if time.monotonic() >= next_status:
                next_status += 30
                self._print_status()
            self.stop_requested.wait(2.0)

    def _finish(self) -> None:
        self.stop_requested.set()
        self.say(f"[demo] stopped writing: {self.meters.written:,} readings ({self.meters.late} late)")
        if self.airflow is not None:
            self._drain()
        self._print_status()
        self._print_outputs()
        self._tail_stop.set()
        time.sleep(0.5)
        count = sum(1 for _ in self.notifications.open(encoding="utf-8")) if self.notifications.exists() else 0
        self.say(f"[demo] {count} notification message(s) received in {self.notifications}")

    def _drain(self) -> None:
        """Wait (at most ``drain`` s) until no stream's counts changed for 10 s and no notification
        is pending. A stream on a schedule (PERIOD) computes at every instant: only its
        notifications count."""
        self.say(f"[demo] letting the streams finish what was written (at most {self.drain:.0f} s)")
        deadline = time.monotonic() + self.drain
        last, steady_since = None, time.monotonic()
        try:
            while time.monotonic() < deadline:
                rows = self._status_rows()
                now = [(r["stream_name"], r["windows_closed"], r["notify_sent"],
                        r["computations"] if r["next_instant"] is None else None) for r in rows]
                if now != last:
                    last, steady_since = now, time.monotonic()
                elif time.monotonic() - steady_since >= 10 and not any(r["notify_pending"] for r in rows):
                    return
                time.sleep(2)
        except KeyboardInterrupt:
            self.say("[demo] not waiting any longer")

    # --- reporting -------------------------------------------------------------------------------

    def _warehouse(self) -> Warehouse:
        """The warehouse :meth:`_start` made; the live writing and the reports come after it."""
        assert self.warehouse is not None, "the demo has started"
        return self.warehouse

    def _status_rows(self) -> list[dict]:
        return streams_table(self._warehouse(), "power").to_pylist()

    def _print_status(self) -> None:
        rows = self._status_rows()
        self.say(f"[demo] {'stream':<12} {'status':<8} {'windows':>8} {'computed':>8} {'recalcs':>7} "
                 f"{'notified':>8} {'lag':>6}")
        for r in rows:
            lag = f"{r['lag_s']:.0f} s" if r["lag_s"] is not None else "-"
            self.say(f"[demo] {r['stream_name']:<12} {r['status']:<8} {r['windows_closed']:>8} {r['computations']:>8} "
                     f"{r['recalculations']:>7} {r['notify_sent']:>8} {lag:>6}")
            if r["last_error"]:
                self.say(f"[demo]   last error: {r['last_error']}")

    def _print_outputs(self) -> None:
        from deltalake import DeltaTable

        for name in ("row_counts", "avg_voltage", "modes", "surges", "sessions"):
            info = self._warehouse().catalog.lookup(TableName(name, "power"), "power")
            assert not isinstance(info, SubTable)  # the streams' output tables, none a subtable
            rows = DeltaTable(str(info.path)).to_pyarrow_table(columns=[]).num_rows if info else 0
            self.say(f"[demo] output power.{name}: {rows} row(s)")

    def _tail_notifications(self) -> None:
        while not self.notifications.exists() and not self._tail_stop.is_set():
            time.sleep(0.2)
        if self._tail_stop.is_set():
            return
        with self.notifications.open(encoding="utf-8") as handle:
            while not self._tail_stop.is_set():
                line = handle.readline()
                if not line:
                    time.sleep(0.2)
                    continue
                for event in describe(line).splitlines():
                    self.say(f"  notify > {event}")

    # --- stopping --------------------------------------------------------------------------------

    def _stop_all(self) -> None:
        self._tail_stop.set()
        if self.airflow is not None:
            self.say("[demo] stopping Airflow")
            self.airflow.stop()
        if self.node_started:
            self.say("[demo] stopping the stream node")
            if self.warehouse is not None and self.warehouse._spark is not None:
                self.warehouse.spark.stop()  # the Connect client's threads would keep this process alive
            node.stop()
        if self.receiver is not None and self.receiver.poll() is None:
            self.receiver.terminate()
            try:
                self.receiver.wait(10)
            except subprocess.TimeoutExpired:
                self.receiver.kill()
        self.say("[demo] stopped")


def main(home: str, duration: float, port: int | None, meters: int, drain: float) -> int:
    return Demo(Path(home), duration=duration, port=port, meters=meters, drain=drain).run()
