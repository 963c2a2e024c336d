"""SHOW [db.]STREAMS: per stream, its state and how it is doing, from its files alone.

Every figure comes from what the stream keeps under ``state/<db>/<name>/``: ``stream.json``
(progress and counters), the event table (windows opened and closed), ``detector.json`` (the
live detector's host and last error) and the outbox (notifications), plus the trigger table's
latest event time from Delta's file statistics for the lag. Nothing here starts Spark.
"""

from __future__ import annotations

import json
import os
import re
import time
from datetime import UTC, datetime

import pyarrow as pa

from airflow_stream_provider import config
from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import StreamDefinitionError, StreamError
from airflow_stream_provider.files import append_file, write_text
from airflow_stream_provider.model.events import STREAM_KINDS, EventType, StreamKind
from airflow_stream_provider.plan.freshness import Freshness, configured
from airflow_stream_provider.plan.state import RECENT_S, StreamState
from airflow_stream_provider.plan.stream import detector_engine_of, plan_stream
from airflow_stream_provider.streams.notifications import outbox_of
from airflow_stream_provider.streams.probes import last_write_at, max_event_time, open_delta, progress_time
from airflow_stream_provider.streams.store import StoredStream, StreamStore
from airflow_stream_provider.warehouse import Catalog, Result, Warehouse, mapping
from airflow_stream_provider.warehouse.catalog import SubTable

#: (column, Arrow type) of a SHOW STREAMS row
COLUMNS = (
    ("stream_name", pa.string()),
    ("db_name", pa.string()),
    ("status", pa.string()),  # running, stopped, history, failed (before 3.3.7: ready, paused, init, failed)
    ("trigger", pa.string()),
    ("language", pa.string()),  # the syntax it was written in: TDengine 3.3.7, TDengine 3.3.6
    ("engine", pa.string()),  # the detector engine of a window stream: in-process or spark (else NULL)
    ("timezone", pa.string()),  # TDengine 3.4.3: the zone of its instants and calendar windows (TIMEZONE)
    ("semantics", pa.string()),  # the TDengine version whose behaviour it follows: 3.3.7 or 3.4
    ("create_time", pa.timestamp("us", tz="UTC")),
    ("progress", pa.timestamp("us", tz="UTC")),  # event time processed up to (PERIOD: last instant fired)
    ("lag_s", pa.float64()),  # the trigger table's latest event time minus progress; for a CQ, how late it runs
    ("realtime_lag_ms", pa.int64()),  # TDengine 3.4.2.5: the same lag in milliseconds
    ("input_rows_per_sec_1m", pa.float64()),  # TDengine 3.4.2.5: rows the detector read in the last minute, per second
    ("output_rows_per_sec_1m", pa.float64()),  # TDengine 3.4.2.5: rows written in the last minute, per second
    ("runner_result_latency_avg_1m_ms", pa.float64()),  # TDengine 3.4.2.5: mean trigger-to-commit time, last minute
    ("history_progress_pct", pa.float64()),  # TDengine 3.4.2.5: FILL_HISTORY done (100) or not (0); NULL without it
    ("freshness", pa.string()),  # ok, late or silent (:func:`freshness`), or invalid; NULL without a bound
    ("freshness_bound_s", pa.float64()),  # the bound of the realtime lag, in seconds
    ("next_instant", pa.timestamp("us", tz="UTC")),  # PERIOD and continuous queries: the next run
    ("windows_opened", pa.int64()),
    ("windows_closed", pa.int64()),
    ("computations", pa.int64()),
    ("recalculations", pa.int64()),
    ("recalc_ratio", pa.float64()),  # triggers recalculated (RECALCULATE or late rows) per trigger computed
    ("notify_sent", pa.int64()),
    ("notify_dropped", pa.int64()),
    ("notify_pending", pa.int64()),
    ("source_horizon", pa.timestamp("us", tz="UTC")),  # the trigger table's rows before it are gone (retention)
    ("expired_windows", pa.int64()),  # windows left alone since: their source rows are partly gone
    ("last_error", pa.string()),
)


#: the key of :func:`_event_counts` for windows closed again (recalculated live after late rows)
RECLOSED = "reclosed"
#: the statuses of a stream in TDengine's syntax before 3.3.7, as TDengine 3.3.6 reports them
LEGACY_STATUS = {"running": "ready", "stopped": "paused", "history": "init", "failed": "failed"}


def language(stmt: m.CreateStream) -> str:
    """The stream language a stream was written in."""
    if stmt.series is not None:
        return "IoTDB (continuous query)"
    if stmt.legacy is None:
        return "TDengine 3.3.7"
    return f"TDengine 3.3.6 ({stmt.legacy.trigger})" if STREAM_KINDS[stmt.trigger.keyword] is StreamKind.WINDOW \
        else "TDengine 3.3.6"


def engine_of(stmt: m.CreateStream) -> str | None:
    """The detector engine that runs a window stream on this home's node (None: the stream has no
    detector): its ENGINE, else the node's, with ``auto`` resolved by the node's Spark master."""
    return detector_engine_of(stmt, config.node_master())


def _event_counts(stored: StoredStream) -> dict[str, int]:
    """Events per type, and how many WINDOW_CLOSE events closed a window (trigger id) that had
    closed before: the live recalculations of late rows."""
    import pyarrow.compute as pc
    found = open_delta(stored.events_path)
    if found is None:
        return {}
    events = found.to_pyarrow_table(columns=["event_type", "trigger_id"])
    counts = {row["values"]: row["counts"] for row in events.column("event_type").value_counts().to_pylist()}
    closes = events.filter(pc.equal(events.column("event_type"), EventType.WINDOW_CLOSE)).column("trigger_id")
    counts[RECLOSED] = len(closes) - len(pc.unique(closes))
    return counts


def _detector(stored: StoredStream) -> dict:
    try:
        return json.loads(stored.detector_path.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return {}


#: lag samples kept per stream (``samples.jsonl``), for the Streams page's chart
SAMPLES_KEPT = 2_000
#: at most one lag sample per stream per this many seconds (a LOW_LATENCY_CALC stream commits 4 times a second)
SAMPLE_EVERY_S = 15.0


def _trigger_table(catalog: Catalog, stored: StoredStream) -> tuple[str, str] | None:
    """The trigger table's Delta location and timestamp column (None: the stream has none)."""
    stmt = stored.statement
    if stmt.trigger_table is None:
        return None
    info = catalog.resolve(stmt.trigger_table, (stmt.trigger_table.db or stored.db).lower(), "trigger table")
    table = info.stable if isinstance(info, SubTable) else info
    (ts,) = mapping.sources(table.path, [table.timestamp_column])  # an attached table's own column name
    return str(table.path), ts


def _trigger_latest(catalog: Catalog, stored: StoredStream) -> datetime | None:
    """The trigger table's latest event time, from Delta's file statistics."""
    found = _trigger_table(catalog, stored)
    return max_event_time(*found) if found is not None else None


#: the values of the ``freshness`` column (``invalid``: its setting cannot be read)
FRESH, LATE, SILENT, INVALID = "ok", "late", "silent", "invalid"


def freshness(bound: Freshness | None, stmt: m.CreateStream, late_by_s: float | None, last_arrival: datetime | None,
              last_fire: datetime | None) -> tuple[str | None, str | None]:
    """Whether a stream's results are as fresh as its bound says, and why not: ``late`` when
    ``late_by_s`` (its realtime lag; for a PERIOD stream, how long its next instant has been due) is
    over the bound; else ``silent`` when rows were still written to its trigger table
    (``last_arrival``, wall clock) longer than its silence after it last fired (``last_fire``, or
    its creation); else ``ok``. (None, None) for a stream without a bound."""
    if bound is None:
        return None, None
    limit = bound.bound.total_seconds()
    if late_by_s is not None and late_by_s > limit:
        return LATE, f"its realtime lag is {late_by_s:g} s, over its freshness bound of {limit:g} s"
    silence = bound.silence(stmt)
    if last_arrival is not None and last_fire is not None and last_arrival - last_fire > silence:
        quiet = (last_arrival - last_fire).total_seconds()
        since = last_fire.isoformat(timespec="seconds")
        return SILENT, (f"rows kept arriving on its trigger table for {quiet:.0f} s after it last fired "
                        f"(at {since}), longer than its {silence.total_seconds():g} s of silence")
    return FRESH, None


def _freshness_of(warehouse: Warehouse, stored: StoredStream, state: StreamState, lag: float | None,
                  next_instant: datetime | None) -> tuple[Freshness | None, str | None, str | None]:
    try:
        bound = configured(stored.db, stored.name, state)
    except StreamDefinitionError as err:  # a setting that cannot be read: said, and the stream's other figures stay
        return None, INVALID, str(err)
    if bound is None or state.stopped:  # a stopped stream is neither late nor silent: it was told to stop
        return bound, None, None
    if isinstance(stored.statement.trigger, m.PeriodTrigger):
        lag = max(0.0, (datetime.now(UTC) - next_instant).total_seconds()) if next_instant is not None else None
    found = _trigger_table(warehouse.catalog, stored)
    arrival = last_write_at(found[0]) if found is not None else None
    return bound, *freshness(bound, stored.statement, lag, arrival, state.fired_at or state.created)


def sample_due(stored: StoredStream) -> bool:
    """Whether :func:`record_sample` would record one now (a stream's runs commit every second)."""
    if isinstance(stored.statement.trigger, (m.PeriodTrigger, m.ResampleTrigger)):
        return False
    try:
        return time.time() - (stored.state_dir / "samples.jsonl").stat().st_mtime >= SAMPLE_EVERY_S
    except FileNotFoundError:
        return True


def record_sample(catalog: Catalog, stored: StoredStream, state: StreamState) -> None:
    """Append the stream's progress and lag now to its ``samples.jsonl`` (window and SLIDING
    streams; the lag of a PERIOD stream is not defined), at most every :data:`SAMPLE_EVERY_S`.
    Progress comes from the event table's file statistics, so a sample costs two reads of Delta
    logs, not of data."""
    if not sample_due(stored):
        return
    trigger = stored.statement.trigger
    path = stored.state_dir / "samples.jsonl"
    if isinstance(trigger, m.SlidingTrigger):
        marks = [datetime.fromisoformat(g["last"]) for g in state.sliding.values() if g.get("last")]
        progress = max(marks) if marks else None
    else:
        progress = max_event_time(stored.events_path, "window_end")
    latest = _trigger_latest(catalog, stored)
    lag = max(0.0, (latest - progress).total_seconds()) if latest and progress else None
    line = json.dumps({"at": datetime.now(UTC).isoformat(), "progress": progress.isoformat() if progress else None,
                       "lag_s": lag, "computed": state.computed})
    with os.fdopen(append_file(path), "a", encoding="utf-8") as handle:
        handle.write(line + "\n")
    if path.stat().st_size > SAMPLES_KEPT * 2 * len(line):
        kept = path.read_text(encoding="utf-8").splitlines()[-SAMPLES_KEPT:]
        write_text(path, "\n".join(kept) + "\n")


def samples(stored: StoredStream, limit: int = 500) -> list[dict]:
    """The latest ``limit`` lag samples of a stream, oldest first."""
    try:
        lines = (stored.state_dir / "samples.jsonl").read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines[-limit:]:
        try:
            out.append(json.loads(line))
        except ValueError:  # a line cut short by a crash
            continue
    return out


def history_progress_pct(stmt: m.CreateStream, state: StreamState) -> float | None:
    """How much of a FILL_HISTORY stream's history is computed, in percent: 0 until its detector's
    first batch (the history) is computed and recorded, 100 after; None for a stream without one."""
    if stmt.options.fill_history is None or not STREAM_KINDS[stmt.trigger.keyword].detected:
        return None
    return 0.0 if state.consumed_batch is None else 100.0


def _recent(state: StreamState, key: str, now: datetime) -> list[float]:
    """The numbers of the entries ``key`` (:data:`~airflow_stream_provider.plan.state.RECENT_KEYS`)
    of the :data:`RECENT_S` seconds (a minute) before ``now``."""
    entries = state.other.get(key) or []
    return [n for at, n in entries if 0 <= (now - datetime.fromisoformat(at)).total_seconds() < RECENT_S]


def output_rows_per_sec_1m(state: StreamState, now: datetime) -> float:
    """The rows a stream's runs wrote in the :data:`RECENT_S` seconds (a minute) before ``now``, per second."""
    return sum(_recent(state, "written", now)) / RECENT_S


def input_rows_per_sec_1m(stmt: m.CreateStream, state: StreamState, now: datetime) -> float | None:
    """The trigger table's rows a window stream's in-process detector read in the minute before
    ``now``, per second (None: the stream has no such detector: PERIOD, SLIDING, row streams, the
    spark engine)."""
    if STREAM_KINDS[stmt.trigger.keyword] is not StreamKind.WINDOW or engine_of(stmt) != "in-process":
        return None
    return sum(_recent(state, "read", now)) / RECENT_S


def runner_result_latency_avg_1m_ms(state: StreamState, now: datetime) -> float | None:
    """The mean, over what the stream's commits of the minute before ``now`` recorded, of the time
    from a trigger to the commit of its results, in milliseconds: per detector batch whose windows a
    commit wrote, the commit's time minus the batch's (when it detected them); per PERIOD instant,
    the commit's time minus the instant. None when nothing was committed in that minute."""
    found = _recent(state, "latency", now)
    return sum(found) / len(found) if found else None


def stream_status(warehouse: Warehouse, stored: StoredStream, store: StreamStore) -> dict:
    stmt = stored.statement
    state = store.load_state(stored.db, stored.name)
    detector = _detector(stored)
    box = outbox_of(stored)
    notes = box.stats() if box is not None else {"sent": 0, "dropped": 0, "pending": 0, "last_error": None}
    counts = _event_counts(stored)
    scheduled = isinstance(stmt.trigger, (m.PeriodTrigger, m.ResampleTrigger))
    if scheduled:
        progress = state.last_fired
    elif isinstance(stmt.trigger, m.SlidingTrigger):
        marks = [datetime.fromisoformat(g["last"]) for g in state.sliding.values() if g.get("last")]
        progress = max(marks) if marks else None
    else:
        progress = progress_time(stored)
    lag = None
    next_instant = None
    if scheduled and state.created is not None:
        schedule = plan_stream(stmt, stored.db, state).schedule
        assert schedule is not None  # PERIOD and RESAMPLE have one
        next_instant = schedule.next_after(progress or state.created)
        if state.resume_at is not None:  # TIMEOUT POLICY DISCARD skipped to it
            next_instant = max(next_instant, state.resume_at)
        if isinstance(stmt.trigger, m.ResampleTrigger):  # how long its next instant has been due
            lag = max(0.0, (datetime.now(UTC) - next_instant).total_seconds())
    elif progress is not None:
        latest = _trigger_latest(warehouse.catalog, stored)
        if latest is not None:
            lag = max(0.0, (latest - progress).total_seconds())
    history = history_progress_pct(stmt, state)
    now = datetime.now(UTC)
    if state.stopped:
        status = "stopped"
    elif detector.get("status") == "failed" or state.failed:
        status = "failed"
    elif history == 0.0:
        status = "history"
    else:
        status = "running"
    if stmt.legacy is not None:  # the words of TDengine 3.3.6's SHOW STREAMS
        status = LEGACY_STATUS[status]
    bound, fresh, why = _freshness_of(warehouse, stored, state, lag, next_instant)
    computed = state.computed
    reclosed = counts.get(RECLOSED, 0)
    recalculated = state.recalculated_triggers + reclosed
    return {
        "stream_name": stored.name, "db_name": stored.db, "status": status, "trigger": str(stmt.trigger),
        "language": language(stmt),
        # the engine the node runs it on, as it reported it; else the one it would run it on
        "engine": detector.get("engine") if detector.get("status") == "running" and detector.get("engine")
        else engine_of(stmt),
        "timezone": stmt.timezone or config.timezone_name(), "semantics": state.semantics,
        "create_time": state.created,
        "progress": progress, "lag_s": lag, "next_instant": next_instant,
        "realtime_lag_ms": None if lag is None else round(lag * 1000), "history_progress_pct": history,
        "freshness": fresh, "freshness_bound_s": bound.bound.total_seconds() if bound is not None else None,
        "freshness_detail": why,  # (not a column: what a freshness check says when it fails)
        "output_rows_per_sec_1m": output_rows_per_sec_1m(state, now),
        "input_rows_per_sec_1m": input_rows_per_sec_1m(stmt, state, now),
        "runner_result_latency_avg_1m_ms": runner_result_latency_avg_1m_ms(state, now),
        "windows_opened": counts.get(EventType.WINDOW_OPEN, 0), "windows_closed": counts.get(EventType.WINDOW_CLOSE, 0),
        "computations": computed, "recalculations": state.recalculations + reclosed,
        "recalc_ratio": recalculated / computed if computed else None,
        "notify_sent": notes["sent"], "notify_dropped": notes["dropped"], "notify_pending": notes["pending"],
        "source_horizon": state.source_horizon, "expired_windows": state.expired_windows,
        "last_error": state.failed or (detector.get("error") if detector.get("status") == "failed"
                                              else notes["last_error"]),
    }


def streams_table(warehouse: Warehouse, db: str | None = None,
                  store: StreamStore | None = None, like: str | None = None) -> pa.Table:
    """One row per stream (of ``db``, or of every database; named as ``like``, a LIKE pattern, says),
    with :data:`COLUMNS`."""
    store = store or StreamStore()
    rows = []
    named = like_pattern(like) if like is not None else None
    for d, n in store.names(db):
        if named is not None and not named.fullmatch(n):
            continue
        try:
            rows.append(stream_status(warehouse, store.get(d, n), store))
        except StreamError as err:  # one broken stream must not hide the others
            rows.append(broken_status(d, n, err))
    return pa.table({name: pa.array([r[name] for r in rows], kind) for name, kind in COLUMNS})


def broken_status(db: str, name: str, err: Exception) -> dict:
    """The SHOW STREAMS row of a stream whose definition or state cannot be read: ``failed``,
    with the reason (which names the file) as its last error."""
    row: dict = dict.fromkeys(name for name, _ in COLUMNS)
    row.update(stream_name=name, db_name=db, status="failed", last_error=str(err))
    return row


def ins_streams(warehouse: Warehouse) -> pa.Table:
    """``information_schema.ins_streams``: SHOW STREAMS of every database."""
    return streams_table(warehouse)


#: (column, Arrow type) of an ``information_schema.ins_stream_tasks`` row
TASK_COLUMNS = (
    ("stream_name", pa.string()),
    ("db_name", pa.string()),
    ("task", pa.string()),  # detector, dag, recalc_dag
    ("runs_in", pa.string()),  # the stream node, a task, Airflow
    ("status", pa.string()),
    ("detail", pa.string()),
)


def ins_stream_tasks(warehouse: Warehouse, store: StreamStore | None = None) -> pa.Table:
    """``information_schema.ins_stream_tasks``: what executes each stream: its live detector (window
    triggers), where a PERIOD stream's instants are computed, and its Airflow DAGs."""
    store = store or StreamStore()
    rows: list[tuple[str, str, str, str, str, str | None]] = []
    for db, name in store.names():
        try:
            stored = store.get(db, name)
            state = store.load_state(db, name)
            stopped = state.stopped
        except StreamError as err:  # listed, with the reason, rather than failing the whole view
            rows.append((name, db, "stream", "nowhere", "failed", str(err)))
            continue
        plan = plan_stream(stored.statement, db, state)
        main, recalc = plan.dag_id, plan.recalc_dag_id
        det = _detector(stored) if plan.kind.served else {}
        hosted = det.get("host") == "node" and det.get("status") == "running"
        if plan.kind.detected:
            progress = det.get("last_progress") or {}
            detail = det.get("error") if det.get("status") == "failed" else (
                f"batch {progress.get('batchId')}, {progress.get('numInputRows')} rows" if progress else None)
            rows.append((name, db, "detector" if plan.kind is StreamKind.WINDOW else "row query",
                         "stream node" if hosted else "compute task",
                         "stopped" if stopped else det.get("status") or "on demand", detail))
        elif plan.kind is StreamKind.PERIOD:  # its instants, computed where its compute task asks
            last = state.last_fired.isoformat() if state.last_fired is not None else None
            rows.append((name, db, "instants", "stream node" if hosted else "compute task",
                         "stopped" if stopped else "running" if hosted else "on demand",
                         f"last instant {last}" if last else None))
        rows.append((name, db, "dag", "Airflow", "paused" if stopped else "active", main))
        if recalc is not None:
            rows.append((name, db, "recalc_dag", "Airflow", "paused" if stopped else "active", recalc))
    return pa.table({col: pa.array([r[i] for r in rows], kind) for i, (col, kind) in enumerate(TASK_COLUMNS)})


def like_pattern(pattern: str) -> re.Pattern[str]:
    """SQL's LIKE as a regular expression: ``%`` any characters, ``_`` one, ``\\`` the next as it is;
    stream names are compared without regard to case, as they are named."""
    out, chars = [], iter(pattern)
    for ch in chars:
        if ch == "\\":
            out.append(re.escape(next(chars, "\\")))
        else:
            out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
    return re.compile("".join(out), re.IGNORECASE | re.DOTALL)


def show_create_stream(warehouse: Warehouse, stmt: m.ShowCreateStream, store: StreamStore | None = None) -> Result:
    """The CREATE STREAM statement of a stream, as it was written (without its closing ``;``), with
    the zone and the TDengine semantics it follows, as recorded when it was created."""
    store = store or StreamStore()
    stored = store.get(warehouse.database_of(stmt.name), stmt.name.name)
    text = stored.text.strip().removesuffix(";").rstrip()
    state = store.load_state(stored.db, stored.name)
    zone = stored.statement.timezone or config.timezone_name()
    table = pa.table({"stream_name": [stored.name], "db_name": [stored.db], "sql": [text], "timezone": [zone],
                      "semantics": [state.semantics]})
    return Result(stmt, f"stream {stored.qualified}", table)


def show_streams(warehouse: Warehouse, stmt: m.ShowStreams, store: StreamStore | None = None) -> Result:
    db = stmt.db.lower() if stmt.db else warehouse.database
    if stmt.db:
        warehouse.catalog.precision(stmt.db.lower())  # the database must exist
    table = streams_table(warehouse, db, store, stmt.like)
    where = f" in {db}" if db else ""
    return Result(stmt, f"{table.num_rows} stream{'s' if table.num_rows != 1 else ''}{where}", table)
