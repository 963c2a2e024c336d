"""STOP STREAM, START STREAM and RECALCULATE STREAM, and the recalculation itself.

- STOP records the stop in the stream's state (so it persists: the node's supervisor stops the
  live detector, and the stream's tasks skip while it lasts) and pauses the stream's DAGs through
  Airflow's API.
- START clears it and unpauses. Data written meanwhile is processed as history; with IGNORE
  UNTREATED it is skipped: the detector never reads the table versions written during the stop,
  and PERIOD's %%trows starts after them.
- RECALCULATE creates a backfill of ``stream__<db>__<name>__recalc`` whose runs call
  :func:`recalculate` for their event-time slice. When Airflow's API cannot be reached it
  recalculates in this process instead, and says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pandas as pd
from pyspark.sql import functions as F

from airflow_stream_provider import config
from airflow_stream_provider import model as m
from airflow_stream_provider.airflow_api import (
    AirflowApi,
    AirflowApiError,
    stream_dag_ids,
)
from airflow_stream_provider.exceptions import StreamError
from airflow_stream_provider.streams import runner
from airflow_stream_provider.streams.compute import Fired
from airflow_stream_provider.plan.schedule import Schedule
from airflow_stream_provider.streams.store import StreamStore


def _target(warehouse, stmt, store: StreamStore):  # type: ignore[no-untyped-def]
    """(db, name, runtime) of the stream START/STOP names; None when it does not exist and the
    statement says IF EXISTS (otherwise the lookup raises, with a hint)."""
    db = warehouse.database_of(stmt.name)
    name = stmt.name.name.lower()
    if not store.exists(db, name):
        if stmt.if_exists:
            return None
        store.get(db, name)  # raises
    return db, name, runner.StreamRuntime(warehouse, store.get(db, name).statement, db)


def _set_paused(db: str, name: str, paused: bool, api: AirflowApi | None) -> str:
    """Pause or unpause the stream's DAGs; a note of what happened, for the statement's result."""
    api = api or AirflowApi()
    verb = "paused" if paused else "unpaused"
    try:
        done = [dag for dag in stream_dag_ids(db, name) if api.set_paused(dag, paused)]
    except AirflowApiError as err:
        return f"; its DAGs were not {verb} ({err}); its tasks see the state and act on it"
    return f"; DAGs {verb}: {', '.join(done)}" if done else "; Airflow has not parsed its DAGs yet"


def stop(warehouse, stmt: m.StopStream, store: StreamStore | None = None,  # type: ignore[no-untyped-def]
         api: AirflowApi | None = None):
    from airflow_stream_provider.warehouse.warehouse import Result

    store = store or StreamStore()
    found = _target(warehouse, stmt, store)
    if found is None:
        return Result(stmt, "nothing to stop")
    db, name, runtime = found
    with store.updating(db, name) as state:
        if state.get("stopped"):
            return Result(stmt, f"stream {db}.{name} is already stopped")
        state.update(stopped=True, stopped_at=datetime.now(UTC).isoformat(),
                     stopped_version=runtime.table_version())
    return Result(stmt, f"stopped stream {db}.{name}" + _set_paused(db, name, True, api))


def start(warehouse, stmt: m.StartStream, store: StreamStore | None = None,  # type: ignore[no-untyped-def]
          api: AirflowApi | None = None):
    from airflow_stream_provider.warehouse.warehouse import Result

    store = store or StreamStore()
    found = _target(warehouse, stmt, store)
    if found is None:
        return Result(stmt, "nothing to start")
    db, name, runtime = found
    note = ""
    with store.updating(db, name) as state:
        if not state.get("stopped"):
            return Result(stmt, f"stream {db}.{name} is already running")
        current = runtime.table_version()
        stopped_version = state.get("stopped_version")
        if stmt.ignore_untreated:
            if current is not None and stopped_version is not None and current > stopped_version:
                state["skip_versions"] = [*state.get("skip_versions", []), [stopped_version + 1, current]]
                note = f"; table versions {stopped_version + 1}..{current} written while stopped are ignored"
            state["untreated_version"] = current
            state["last_fired"] = datetime.now(UTC).isoformat()
        for key in ("stopped", "stopped_at", "stopped_version"):
            state.pop(key, None)
    return Result(stmt, f"started stream {db}.{name}{note}" + _set_paused(db, name, False, api))


def recalculate_statement(warehouse, stmt: m.RecalculateStream, store: StreamStore | None = None,  # type: ignore[no-untyped-def]
                          api: AirflowApi | None = None):
    """RECALCULATE STREAM: a backfill of the stream's recalculation DAG over [FROM, TO]."""
    from airflow_stream_provider.warehouse.warehouse import Result

    store = store or StreamStore()
    db = warehouse.database_of(stmt.name)
    stored = store.get(db, stmt.name.name)
    now = datetime.now(UTC)
    start_at = stmt.start.resolve(now)
    if stmt.end is None and isinstance(stored.statement.trigger, m.CountWindow):
        raise StreamError(f"RECALCULATE STREAM: {stored.qualified} has a COUNT_WINDOW trigger, which needs both "
                          "FROM and TO")
    end_at = stmt.end.resolve(now) if stmt.end is not None else progress_time(stored) or now
    try:
        return Result(stmt, create_recalculation(stored, start_at, end_at, api or AirflowApi()))
    except AirflowApiError as err:
        if err.status is not None:
            raise StreamError(f"RECALCULATE STREAM: Airflow refused the backfill: {err}") from None
        report = recalculate(warehouse, stored.db, stored.name, start_at, end_at, store=store)
        return Result(stmt, f"recalculated here, Airflow not being reachable ({err}): {report.summary()}")


def create_recalculation(stored, start_at: datetime, end_at: datetime, api: AirflowApi) -> str:  # type: ignore[no-untyped-def]
    """Create the backfill of ``stored``'s recalculation DAG over ``[start_at, end_at)``; say what
    was created. StreamError when the range or the stream does not allow it, or a recalculation
    still runs; AirflowApiError when Airflow refuses or cannot be reached."""
    if isinstance(stored.statement.trigger, m.PeriodTrigger):
        raise StreamError(f"RECALCULATE STREAM: {stored.qualified} has a PERIOD trigger; scheduled triggers "
                          "are not recalculated (reference: manual recalculation is not supported for PERIOD)")
    if end_at <= start_at:
        raise StreamError(f"RECALCULATE STREAM: TO ({end_at.isoformat()}) must be after FROM ({start_at.isoformat()})")
    dag_id = stream_dag_ids(stored.db, stored.name)[1]
    try:
        # a backfill takes the runs whose data interval starts in [from, to]: stop short of TO
        backfill = api.create_backfill(dag_id, start_at, end_at - timedelta(microseconds=1))
    except AirflowApiError as err:
        if err.status == 409:
            raise StreamError(f"RECALCULATE STREAM: a recalculation of {stored.qualified} is still running "
                              f"(Airflow runs one backfill of {dag_id} at a time); run it again once that one "
                              "completes") from None
        raise
    return f"backfill {backfill.get('id')} of {dag_id} created over [{start_at.isoformat()}, {end_at.isoformat()}]"


def progress_time(stored) -> datetime | None:  # type: ignore[no-untyped-def]
    """The event time the stream has processed up to: the end of its latest window event."""
    events = runner._read_events(str(stored.events_path), -1)
    if events.empty:
        return None
    latest = events["window_end"].dropna().max()
    if pd.isna(latest):
        latest = events["window_start"].max()
    return latest.to_pydatetime().astimezone(UTC)


def recalc_step(stmt: m.CreateStream) -> timedelta:
    """The event-time slice of one recalculation run: the window's step for INTERVAL and
    SLIDING, an hour for the data-driven windows."""
    trig = stmt.trigger
    if isinstance(trig, m.IntervalWindow):
        return (trig.sliding or trig.interval).to_timedelta()
    if isinstance(trig, m.SlidingTrigger):
        return trig.sliding.to_timedelta()
    return timedelta(hours=1)


def recalculate(warehouse, db: str, name: str, start: datetime, end: datetime, *,  # type: ignore[no-untyped-def]
                store: StreamStore | None = None, batched: bool = True,
                progress: Callable[[str], None] | None = None) -> runner.RunReport:
    """Recompute the windows (or SLIDING instants) that start in ``[start, end)`` from the trigger
    table as it is now, and upsert their results over the earlier ones.

    Windows are found by the same core as the live detector, in batch mode over the rows from
    ``start`` on (for COUNT_WINDOW, ``[start, end)``), so they are re-partitioned from ``start``
    as the reference describes. A recalculation reads every row, those written while the stream
    was stopped and then ignored (START ... IGNORE UNTREATED) included: it was asked for.
    """
    began = time.monotonic()
    store = store or StreamStore()
    stored = store.get(db, name)
    with runner.in_database(warehouse, stored.db):
        report = _recalculate(warehouse, stored, start, end, batched=batched, say=progress or (lambda _msg: None))
    with store.updating(stored.db, stored.name) as state:
        state["recalculations"] = int(state.get("recalculations", 0)) + 1
        state["recalculated_triggers"] = int(state.get("recalculated_triggers", 0)) + report.triggers
    report.seconds = time.monotonic() - began
    return report


def _recalculate(warehouse, stored, start: datetime, end: datetime, *, batched: bool,  # type: ignore[no-untyped-def]
                 say: Callable[[str], None]) -> runner.RunReport:
    stmt = stored.statement
    if isinstance(stmt.trigger, m.PeriodTrigger):
        raise StreamError(f"stream {stored.qualified} has a PERIOD trigger, which is not recalculated")
    runtime = runner.StreamRuntime(warehouse, stmt, stored.db)
    if stmt.notify is not None and stmt.notify.history:  # NOTIFY_HISTORY: recalculations notify too
        from airflow_stream_provider.streams.routing import RunNotifications

        runtime.notes = RunNotifications(runtime, {}, history=True)
    report = runner.RunReport(stored.qualified)
    version = runtime.table_version()
    events = None
    assert runtime.info is not None
    rows = warehouse.spark.read.format("delta").option("versionAsOf", version).load(str(runtime.info.path))
    ts = F.col(f"`{runtime.info.timestamp_column}`")  # after the session exists: F.col needs one
    rows = rows.where(ts >= F.lit(start))
    if stmt.trigger.kind == "window":
        from airflow_stream_provider.windows import batch

        plan = runner._trigger_plan(runtime)
        if plan.spec.kind == "interval":
            rows = rows.where(ts < F.lit(end + timedelta(microseconds=plan.spec.interval)))
        elif plan.spec.kind == "count":
            rows = rows.where(ts < F.lit(end))
        say(f"finding the windows of {plan.table} in [{start.isoformat()}, {end.isoformat()})")
        events = batch.detect(rows, plan).where((F.col("window_start") >= F.lit(start))
                                                & (F.col("window_start") < F.lit(end))).toPandas()
        if not events.empty:
            events["window_start"] = pd.to_datetime(events["window_start"], utc=True)
            events["window_end"] = pd.to_datetime(events["window_end"], utc=True)
            events["event_time"] = pd.Timestamp.now(tz="UTC")
            events = events.sort_values(["window_start", "group_id"], kind="stable").reset_index(drop=True)
        fired = runner._fired_windows(runtime, events, version) if not events.empty else []
    else:
        fired = _sliding_instants(runtime, rows, start, end, version)
    report.triggers = len(fired)
    say(f"recalculating {len(fired)} trigger(s)")
    runner._compute_all(runtime, fired, report, batched=batched, say=say, stored=stored,
                        what=f"recalculation of {stored.qualified}")
    if runtime.notes is not None:
        from airflow_stream_provider.streams.routing import deliver

        runner._queue_notifications(runtime, stored, fired, events, report)
        report.delivery = deliver(stored, give_up_after=runner.notify_patience(), say=say)
    return report


def _sliding_instants(runtime: runner.StreamRuntime, rows, start: datetime, end: datetime,  # type: ignore[no-untyped-def]
                      version: int | None) -> list[Fired]:
    """The SLIDING instants in (start, end] that each group's event time (minus WATERMARK) passed."""
    trig = runtime.stmt.trigger
    assert isinstance(trig, m.SlidingTrigger) and runtime.info is not None
    opts = runtime.stmt.options
    if runtime.source and runtime.source.subtable:
        rows = rows.where(F.col(runner.TBNAME) == runtime.source.subtable)
    if runtime.source and runtime.source.pre_filter:
        rows = rows.where(F.expr(runtime.source.pre_filter))
    keys = [F.col(f"`{c.name}`") for c in runtime.group_columns]
    spans = rows.groupBy(*keys).agg(F.max(F.col(f"`{runtime.info.timestamp_column}`")).alias("hi")).collect()
    watermark = opts.watermark.to_timedelta() if opts.watermark else timedelta(0)
    schedule = Schedule(trig.sliding.to_timedelta(), trig.offset.to_timedelta() if trig.offset else timedelta(0),
                        config.timezone(), start - timedelta(microseconds=1))
    fired: list[Fired] = []
    for row in spans:
        group = tuple(row[:-1])
        hi = row[-1] if row[-1].tzinfo else row[-1].replace(tzinfo=UTC)
        gid = runner._group_id(runtime, group)
        for t in schedule.instants(start - timedelta(microseconds=1), min(end, hi - watermark)):
            fired.append(runner.sliding_fired(runtime, len(fired), group, gid, schedule.previous(t) or start, t,
                                              schedule.next_after(t), version))
    return fired
