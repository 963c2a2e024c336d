"""Recalculation: the windows (or SLIDING instants) of a range of event time found again from the
trigger table as it is now, then computed and written by the run's own pipeline
(:func:`.run.process`), upserting over the earlier results; the windows it rewrote become asset
events (:mod:`.assets`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime

from pyspark.sql import functions as F

from airflow_stream_provider.exceptions import StreamError
from airflow_stream_provider.model.events import StreamKind
from airflow_stream_provider.plan.state import StreamState
from airflow_stream_provider.plan.stream import plan_stream
from airflow_stream_provider.streams import assets, retention
from airflow_stream_provider.streams.fire import schedules, windows
from airflow_stream_provider.streams.notifications import RunNotifications, deliver_outbox
from airflow_stream_provider.streams.run import notify_patience, output_uri, process, publish_assets
from airflow_stream_provider.streams.runtime import RunReport, StreamRuntime, in_database
from airflow_stream_provider.streams.store import StoredStream, StreamStore
from airflow_stream_provider.warehouse import Warehouse, mapping


def recalculate(warehouse: Warehouse, db: str, name: str, start: datetime, end: datetime, *,
                store: StreamStore | None = None, batched: bool = True,
                progress: Callable[[str], None] | None = None) -> RunReport:
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
    with in_database(warehouse, stored.db):
        report = _recalculate(warehouse, stored, start, end, batched=batched, say=progress or (lambda _msg: None),
                              schema=store.load_state(stored.db, stored.name).result_schema)
    with store.updating(stored.db, stored.name) as saving:
        before = saving.state
        saving.state = before.replace(recalculations=before.recalculations + 1,
                                      recalculated_triggers=before.recalculated_triggers + report.triggers,
                                      expired_windows=before.expired_windows + report.expired)
    uri = output_uri(stored)
    if report.written and uri is not None:  # the windows it rewrote, as asset events
        ident = f"{start.isoformat()}/{end.isoformat()}/{before.recalculations + 1}"
        publish_assets(stored, assets.entry(stored.qualified, uri, report.windows, report.written,
                                            recalculation=ident))
    report.seconds = time.monotonic() - began
    return report


def _recalculate(warehouse: Warehouse, stored: StoredStream, start: datetime, end: datetime, *, batched: bool,
                 say: Callable[[str], None], schema: str | None) -> RunReport:
    stmt = stored.statement
    plan = plan_stream(stmt, stored.db, StreamState())
    if plan.recalc_step is None:
        raise StreamError(f"stream {stored.qualified} has a PERIOD trigger, which is not recalculated")
    runtime = StreamRuntime(warehouse, stmt, stored.db, schema=schema)
    # NOTIFY_HISTORY: recalculations notify too
    history = stmt.notify is not None and stmt.notify.history
    notes = RunNotifications(runtime, StreamState(), history=True) if history else None
    report = RunReport(stored.qualified)
    version = runtime.table_version()
    assert runtime.info is not None
    # a range of few rows is read and scanned in the process; a larger one, or SLIDING instants, by Spark
    found = windows.windows_in_range_locally(runtime, start, end, version, say) \
        if plan.kind is StreamKind.WINDOW else None
    events = None
    if found is not None:
        fired, events = found
    else:
        path = str(runtime.info.path)
        rows = warehouse.spark.read.format("delta").option("versionAsOf", version).load(path) \
            .transform(mapping.renamer(path))
        ts = F.col(f"`{runtime.info.timestamp_column}`")  # after the session exists: F.col needs one
        rows = rows.where(ts >= F.lit(start))
        if plan.kind is StreamKind.WINDOW:
            fired, events = windows.windows_in_range(runtime, rows, start, end, version, say)
        else:
            fired = schedules.sliding_in_range(runtime, rows, start, end, version)
    horizon = retention.source_horizon(warehouse, stored)
    fired, events, expired = retention.outside(fired, events, horizon)
    if expired:
        assert horizon is not None
        report.expired = expired
        say(retention.skipped_message(stored.qualified, expired, horizon))
    say(f"recalculating {len(fired)} trigger(s)")
    process(runtime, stored, fired, events, report, notes, batched=batched, say=say,
            what=f"recalculation of {stored.qualified}")
    if notes is not None:
        report.delivery = deliver_outbox(stored, give_up_after=notify_patience(), say=say)
    return report
