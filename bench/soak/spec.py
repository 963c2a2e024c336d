"""What the soak runs: its tables, its streams, and how the oracle reads each stream."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pandas as pd

DB = "soak"
#: event time of the first tick; every tick moves it on by STEP
T0 = datetime(2025, 1, 1, tzinfo=UTC)
STEP = timedelta(seconds=10)
SUBTABLES = ("d0", "d1", "d2", "d3")
#: the subtables that get late rows, updates and deletes; d3 only gets rows in time order
DISORDERED = ("d0", "d1", "d2")
#: ticks on which a subtable writes nothing (tick % period in the set): 40 s gaps, so sessions close
SILENT = {"d0": (11, {5, 6, 7}), "d1": (7, {3, 4, 5})}
#: subtables of ``m`` that clients write through ``airflow-stream serve``'s REST endpoint, one each
REST_SUBTABLES = ("r0", "r1", "r2")
#: the attached supertable: a Delta table outside the warehouse that a writer of the team's own
#: (:mod:`bench.soak.writer`, delta-rs) appends to, MERGEs into and deletes from; its devices
FOREIGN = "fm"
FOREIGN_DEVICES = ("f0", "f1", "f2")
FOREIGN_SILENT = {"f0": (9, {4, 5, 6}), "f2": (13, {7, 8, 9})}
#: the attach: the writer's columns under the names the streams use
FOREIGN_MAP = "MAP (TIMESTAMP ts = event_time, TBNAME device_id, TAGS (loc = site), COLUMNS (v, st))"
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
    #: the supertable the source is (or is a subtable of): ours, or the attached one
    over: str = "m"

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
    # over the attached table, fed by the foreign writer
    Soaked("fint", "interval", FOREIGN, True, "INTERVAL(1m) SLIDING(1m)", notify=True, params=(60_000, 60_000, 0),
           over=FOREIGN),
    Soaked("fsess", "session", FOREIGN, True, "SESSION(ts, 25s)", params=(SESSION_GAP_MS,), over=FOREIGN),
)

#: the EVENT_WINDOW conditions, as the oracle evaluates them on a row
EVENT_CONDITIONS: dict[str, tuple[Callable[[pd.Series], bool], Callable[[pd.Series], bool]]] = {
    "event": (lambda r: r.v >= 8, lambda r: r.v <= 2),
    "event0": (lambda r: r.st == 2 and r.v >= 5, lambda r: r.v < 5),
}


def say(message: str) -> None:
    print(f"[soak {datetime.now(UTC).strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

