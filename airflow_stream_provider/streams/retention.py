"""Retention as the streams see it: the retention run (:func:`run_retention`) that expires old rows
and records, in each stream's state, the horizon before which its source rows are gone; and the
rule every path that rewrites or judges windows follows (:func:`outside`).

A window whose start is before its source's horizon has lost some or all of its rows: computing it
again would write a result from part of its rows over the one computed from all of them, and
judging it would report a difference that is only the retention at work. So late rows,
DELETE_RECALC, RECALCULATE STREAM and VERIFY STREAM skip such windows and say so: in their
result, in the task log (their progress messages), and in SHOW STREAMS (``source_horizon``, and
``expired_windows``, how many were skipped).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import StreamError
from airflow_stream_provider.streams.fired import Fired
from airflow_stream_provider.streams.store import StoredStream, StreamStore
from airflow_stream_provider.warehouse import Warehouse, WarehouseError
from airflow_stream_provider.warehouse import retention as tables
from airflow_stream_provider.windows.events import WindowEvent


@dataclass
class RetentionReport:
    expired: list[tables.Expired] = field(default_factory=list)
    streams: dict[str, datetime] = field(default_factory=dict)  # stream -> the source horizon recorded

    def summary(self) -> str:
        deleted = sum(e.deleted for e in self.expired)
        files = sum(e.vacuumed for e in self.expired)
        dbs = sorted({e.db for e in self.expired})
        return (f"retention: {len(self.expired)} table(s) of {len(dbs)} database(s) ({', '.join(dbs) or 'none'}), "
                f"{deleted} row(s) deleted, {files} file(s) vacuumed; horizons recorded for {len(self.streams)} "
                "stream(s)")


def run_retention(warehouse: Warehouse, now: datetime | None = None, *, vacuum_hours: float | None = None,
                  store: StreamStore | None = None, say: Callable[[str], None] | None = None) -> RetentionReport:
    """One retention run: every database's old rows deleted and its tables vacuumed, then each
    stream's source horizon recorded."""
    store = store or StreamStore()
    say = say or (lambda _msg: None)
    report = RetentionReport(tables.enforce(warehouse.catalog, now or datetime.now(UTC), vacuum_hours=vacuum_hours))
    for e in report.expired:
        say(f"{e.db}.{e.table}: {e.deleted} row(s) before {e.horizon.isoformat()} deleted, {e.vacuumed} file(s) "
            "vacuumed")
    for db, name in store.names():
        try:
            stored = store.get(db, name)
        except StreamError:
            continue
        found = source_horizon(warehouse, stored)
        if found is None:
            continue
        with store.updating(db, name) as saving:
            saving.state = saving.state.replace(source_horizon=found)
        report.streams[stored.qualified] = found
    say(report.summary())
    return report


def source_db(warehouse: Warehouse, stored: StoredStream) -> str | None:
    """The warehouse database of the stream's trigger table (None: it has none)."""
    table = stored.statement.trigger_table
    if table is None:
        return None
    return (table.db or stored.db).lower()


def source_horizon(warehouse: Warehouse, stored: StoredStream) -> datetime | None:
    """The time before which the stream's source rows are gone (None: none are)."""
    db = source_db(warehouse, stored)
    if db is None:
        return None
    try:
        return tables.horizon(warehouse.catalog, db)
    except WarehouseError:
        return None


def source_keep(warehouse: Warehouse, stmt: m.CreateStream, db: str) -> timedelta | None:
    """How long the trigger table of ``stmt`` keeps its rows (None: for ever)."""
    if stmt.trigger_table is None:
        return None
    try:
        return tables.retention(warehouse.catalog, (stmt.trigger_table.db or db).lower()).keep
    except (WarehouseError, OSError, ValueError):
        return None


def window_start(fired: Fired) -> datetime | None:
    """Where a trigger's rows begin: a window's start, a SLIDING instant's previous one."""
    at = fired.values.get("_twstart") or fired.values.get("_tprev_ts")
    return at if isinstance(at, datetime) else None


def outside(fired: list[Fired], events: list[WindowEvent] | None, horizon: datetime | None
            ) -> tuple[list[Fired], list[WindowEvent] | None, int]:
    """The triggers (and window events) whose rows are all still there, and how many were left out:
    those that begin before ``horizon``."""
    if horizon is None:
        return fired, events, 0
    kept = [f for f in fired if (window_start(f) or horizon) >= horizon]
    if events is not None:
        events = [e for e in events if e.window_start is None or e.window_start >= horizon]
    return kept, events, len(fired) - len(kept)


def skipped_message(stream: str, count: int, horizon: datetime) -> str:
    return (f"{stream}: {count} window(s) before {horizon.isoformat()} skipped: their source rows are partly "
            "gone (retention)")


def record_skipped(store: StreamStore, stored: StoredStream, count: int) -> None:
    """Count windows left alone because their rows are partly gone (SHOW STREAMS' ``expired_windows``)."""
    if count:
        with store.updating(stored.db, stored.name) as saving:
            saving.state = saving.state.replace(expired_windows=saving.state.expired_windows + count)


def create_warnings(warehouse: Warehouse, stmt: m.CreateStream, db: str, now: datetime) -> list[str]:
    """What CREATE STREAM warns of: FILL_HISTORY reaching before the rows the source keeps, and an
    output kept for less time than one window of the stream spans."""
    found = []
    keep = source_keep(warehouse, stmt, db)
    fill = stmt.options.fill_history
    if fill is not None and keep is not None:
        start = fill.start.resolve(now) if fill.start is not None else None
        if start is None or start < now - keep:
            reach = start.isoformat() if start is not None else "the first row"
            found.append(f"FILL_HISTORY reaches back to {reach}, but the source keeps its rows for {keep} (rows "
                         f"before {(now - keep).isoformat()} are deleted by the retention run): the windows before "
                         "that are computed from what is left, and never again")
    if stmt.into is not None:
        try:
            kept = tables.retention(warehouse.catalog, (stmt.into.db or db).lower()).keep
        except (WarehouseError, OSError, ValueError):
            kept = None
        span = _window_span(stmt.trigger)
        if kept is not None and span is not None and kept < span:
            found.append(f"the output's database keeps rows for {kept}, less than one window of the stream ({span}): "
                         "results are deleted before their window has passed")
    return found


def _window_span(trigger: object) -> timedelta | None:
    """How much event time one trigger of ``trigger`` spans, where its definition says."""
    if isinstance(trigger, m.IntervalWindow):
        return trigger.interval.shortest()
    if isinstance(trigger, m.PeriodTrigger):
        return trigger.period.shortest()
    if isinstance(trigger, m.SlidingTrigger):
        return trigger.sliding.shortest()
    if isinstance(trigger, m.SessionWindow):
        return trigger.gap.to_timedelta()
    return None
