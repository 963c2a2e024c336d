"""SHOW [db.]STREAMS: per stream, its state and how it is doing, from its files alone.

Every figure comes from what the stream keeps under ``state/<db>/<name>/``: ``stream.json``
(progress and counters), the event table (windows opened and closed), ``detector.json`` (the
live detector's host and last error) and the outbox (notifications), plus the trigger table's
latest event time from Delta's file statistics for the lag. Nothing here starts Spark.
"""

from __future__ import annotations

import json
from datetime import datetime

import pyarrow as pa

from airflow_stream_provider import model as m
from airflow_stream_provider.streams.store import StoredStream, StreamStore

#: (column, Arrow type) of a SHOW STREAMS row
COLUMNS = (
    ("stream_name", pa.string()),
    ("db_name", pa.string()),
    ("status", pa.string()),  # running, stopped, history, failed
    ("trigger", pa.string()),
    ("create_time", pa.timestamp("us", tz="UTC")),
    ("progress", pa.timestamp("us", tz="UTC")),  # event time processed up to (PERIOD: last instant fired)
    ("lag_s", pa.float64()),  # the trigger table's latest event time minus progress
    ("windows_opened", pa.int64()),
    ("windows_closed", pa.int64()),
    ("computations", pa.int64()),
    ("recalculations", pa.int64()),
    ("recalc_ratio", pa.float64()),  # triggers recalculated per trigger computed
    ("notify_sent", pa.int64()),
    ("notify_dropped", pa.int64()),
    ("notify_pending", pa.int64()),
    ("last_error", pa.string()),
)


def _event_counts(stored: StoredStream) -> dict[str, int]:
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        kinds = DeltaTable(str(stored.events_path)).to_pyarrow_table(columns=["event_type"]).column(0)
    except TableNotFoundError:
        return {}
    return {row["values"]: row["counts"] for row in kinds.value_counts().to_pylist()}


def _detector(stored: StoredStream) -> dict:
    try:
        return json.loads(stored.detector_path.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return {}


def stream_status(warehouse, stored: StoredStream, store: StreamStore) -> dict:  # type: ignore[no-untyped-def]
    from airflow_stream_provider.streams.control import progress_time
    from airflow_stream_provider.streams.notify import outbox_of
    from airflow_stream_provider.triggers import max_event_time

    stmt = stored.statement
    state = store.load_state(stored.db, stored.name)
    detector = _detector(stored)
    box = outbox_of(stored)
    notes = box.stats() if box is not None else {"sent": 0, "dropped": 0, "pending": 0, "last_error": None}
    counts = _event_counts(stored)
    if isinstance(stmt.trigger, m.PeriodTrigger):
        progress = datetime.fromisoformat(state["last_fired"]) if state.get("last_fired") else None
    elif isinstance(stmt.trigger, m.SlidingTrigger):
        marks = [datetime.fromisoformat(g["last"]) for g in state.get("sliding", {}).values() if g.get("last")]
        progress = max(marks) if marks else None
    else:
        progress = progress_time(stored)
    lag = None
    if stmt.trigger_table is not None and progress is not None and not isinstance(stmt.trigger, m.PeriodTrigger):
        info = warehouse.catalog.resolve(stmt.trigger_table, (stmt.trigger_table.db or stored.db).lower(),
                                         "trigger table")
        table = info.stable if hasattr(info, "stable") else info
        latest = max_event_time(table.path, table.timestamp_column)
        if latest is not None:
            lag = max(0.0, (latest - progress).total_seconds())
    if state.get("stopped"):
        status = "stopped"
    elif detector.get("status") == "failed":
        status = "failed"
    elif stmt.options.fill_history is not None and state.get("consumed_batch") is None and \
            stmt.trigger.kind == "window":
        status = "history"
    else:
        status = "running"
    computed = int(state.get("computed", 0))
    recalculated = int(state.get("recalculated_triggers", 0))
    return {
        "stream_name": stored.name, "db_name": stored.db, "status": status, "trigger": str(stmt.trigger),
        "create_time": datetime.fromisoformat(state["created"]) if state.get("created") else None,
        "progress": progress, "lag_s": lag,
        "windows_opened": counts.get(m.WINDOW_OPEN, 0), "windows_closed": counts.get(m.WINDOW_CLOSE, 0),
        "computations": computed, "recalculations": int(state.get("recalculations", 0)),
        "recalc_ratio": recalculated / computed if computed else None,
        "notify_sent": notes["sent"], "notify_dropped": notes["dropped"], "notify_pending": notes["pending"],
        "last_error": detector.get("error") if detector.get("status") == "failed" else notes["last_error"],
    }


def show_streams(warehouse, stmt: m.ShowStreams, store: StreamStore | None = None):  # type: ignore[no-untyped-def]
    from airflow_stream_provider.warehouse.warehouse import Result

    store = store or StreamStore()
    db = stmt.db.lower() if stmt.db else warehouse.database
    if stmt.db:
        warehouse.catalog.precision(db)  # the database must exist
    rows = [stream_status(warehouse, store.get(d, n), store) for d, n in store.names(db)]
    table = pa.table({name: pa.array([r[name] for r in rows], kind) for name, kind in COLUMNS})
    where = f" in {db}" if db else ""
    return Result(stmt, f"{len(rows)} stream{'s' if len(rows) != 1 else ''}{where}", table)
