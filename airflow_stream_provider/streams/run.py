"""``airflow-stream run`` and the Airflow tasks: what fired, then compute, write, notify, record.

The same functions serve the CLI, the tests, the Airflow tasks and the stream node. A run is
at-least-once and idempotent: progress (the last event batch consumed, the last PERIOD/SLIDING
instant fired) is saved only after the outputs are written, and outputs are upserts by key, so a
run killed at any point and started again writes the same rows once. A recalculation
(:mod:`.recalculate`) is the same pipeline (:func:`process`) with another "what fired" step.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime

from airflow_stream_provider import config
from airflow_stream_provider.model.events import EventType, StreamKind
from airflow_stream_provider.notify.delivery import Settings
from airflow_stream_provider.plan.schedule import Schedule
from airflow_stream_provider.plan.state import BATCH_MARKS, StreamState
from airflow_stream_provider.plan.stream import computed_live, plan_stream
from airflow_stream_provider.streams import assets, cq, notifications, recalculations, retention, status
from airflow_stream_provider.streams.fire import rows, schedules, windows
from airflow_stream_provider.streams.fired import Fired
from airflow_stream_provider.streams.notifications import RunNotifications, outbox_of
from airflow_stream_provider.streams.run_request import RunRequest
from airflow_stream_provider.streams.runtime import RunReport, StreamRuntime, StreamStopped, in_database
from airflow_stream_provider.streams.store import StoredStream, StreamStore, detector_lock, run_lock
from airflow_stream_provider.streams.write import compute_all, delete_outputs, retract, table_names
from airflow_stream_provider.warehouse import Warehouse
from airflow_stream_provider.warehouse.catalog import AttachedTableBroken, Catalog, WarehouseError
from airflow_stream_provider.windows.events import WindowEvent
from airflow_stream_provider.windows.rollup import RollupPathError
from airflow_stream_provider.windows.turns import elsewhere


def run(warehouse: Warehouse, db: str, name: str, request: RunRequest | None = None, *,
        store: StreamStore | None = None) -> RunReport:
    """Run stream ``db.name``: detect what is pending, compute it, write it, record it.

    ``request`` says what kind of run this is (:class:`~.run_request.RunRequest`; by default the
    CLI's: everything pending, recorded at the end); ``store``: where the streams are kept.
    """
    started = time.monotonic()
    request = request or RunRequest.everything()
    store = store or StreamStore()
    stored = store.get(db, name)
    with run_lock(stored):
        report = _locked_run(warehouse, stored, store, request)
    report.seconds = time.monotonic() - started
    return report


def _locked_run(warehouse: Warehouse, stored: StoredStream, store: StreamStore, request: RunRequest) -> RunReport:
    state = store.load_state(stored.db, stored.name)
    if state.stopped:
        raise StreamStopped(f"stream {stored.qualified} is stopped; START STREAM {stored.qualified} resumes it")
    # a stream computed in its live detector's batches (LOW_LATENCY_CALC, ...) is computed here only
    # while this run holds its detector lock, from detection to the recorded progress: a node taking
    # the stream over in between would compute later batches first, and this run's results, read at
    # an older version of the table, would then overwrite theirs
    exclusive = request.detect and request.detected is None and computed_live(stored.statement) \
        and plan_stream(stored.statement, stored.db, state).kind is StreamKind.WINDOW
    try:
        with in_database(warehouse, stored.db), \
                (detector_lock(stored) if exclusive else contextlib.nullcontext(True)) as mine:
            if not mine:
                (request.progress or (lambda _msg: None))(
                    f"the stream node hosts {stored.qualified}'s live detector and computes its batches")
                report = RunReport(stored.qualified)
            else:
                report = _run(warehouse, stored, state, store, request, locked=exclusive)
                if exclusive and not request.commit:  # (the batch marks only: a later commit of the rest moves nothing)
                    commit_progress(stored.db, stored.name, {k: v for k, v in report.progress.items()
                                                             if k in BATCH_MARKS}, store=store)
    # SHOW STREAMS says so until it is back (an illegal ROLLUP BY path: until a run passes)
    except (windows.CheckpointLost, AttachedTableBroken, RollupPathError) as err:
        with store.updating(stored.db, stored.name) as saving:
            saving.state = saving.state.replace(failed=str(err))
        raise
    cleared = (AttachedTableBroken.PREFIX, RollupPathError.PREFIX)
    if state.failed and state.failed.startswith(cleared) and request.commit:
        with store.updating(stored.db, stored.name) as saving:  # the attached table fits its mapping again
            saving.state = saving.state.replace(failed=None)
    return report


def _run(warehouse: Warehouse, stored: StoredStream, state: StreamState, store: StreamStore, request: RunRequest, *,
         locked: bool = False) -> RunReport:
    at, attempt, commit, runtime = request.at, request.attempt, request.commit, request.runtime
    now = request.now
    report = RunReport(stored.qualified)
    say = request.progress or (lambda _msg: None)
    if attempt is not None and at is not None and _superseded(state, at, attempt, report):
        say(report.superseded or "")
        return report
    if stored.statement.series is not None:  # an IoTDB continuous query: its instants, its query
        report.progress = cq.run(warehouse, stored, state, store, report, now=now or datetime.now(UTC), at=at,
                                 say=say, commit=commit)
        if commit and report.progress:
            commit_progress(stored.db, stored.name, report.progress, store=store)
        return report
    if runtime is None or runtime.text != stored.text:  # (another definition of the name: resolved afresh)
        runtime = StreamRuntime(warehouse, stored.statement, stored.db, state.skip_versions,
                                text=stored.text, schema=state.result_schema)
    plan = plan_stream(stored.statement, stored.db, state)
    notes = RunNotifications(runtime, state) if stored.statement.notify is not None else None
    if notes is not None and attempt is not None and at is not None:
        # asked again under the outbox's lock just before queuing: a commit records its try before it
        # lets go of the messages every receiver has, so a later try that committed meanwhile either
        # left its messages there (this run's then add nothing) or is recorded (this run queues none)
        tried, instant = attempt, at
        notes.unless = lambda: _superseded(store.load_state(stored.db, stored.name), instant, tried, report)
    events = None
    fired: list[Fired] = []
    if plan.kind is StreamKind.ROW:  # the row query computes and writes as it goes
        update = rows.pending_rows(runtime, stored, state, say, report, detect=request.detect)
    elif plan.kind is StreamKind.WINDOW:
        fired, update, events = windows.pending_windows(runtime, stored, state, say, detect=request.detect,
                                                        upto_batch=request.upto_batch, detected=request.detected,
                                                        locked=locked)
        if request.records_read and request.detected is not None:
            update.update(windows.read_entry(request.detected.rows))
        fired, events, expired = retention.outside(fired, events, state.source_horizon)
        if expired:  # late rows, updates or deletes in windows whose other rows retention took
            assert state.source_horizon is not None
            report.expired += expired
            update["expired_windows"] = state.expired_windows + expired
            say(retention.skipped_message(stored.qualified, expired, state.source_horizon))
    elif plan.kind is StreamKind.PERIOD:
        assert isinstance(plan.schedule, Schedule), "a PERIOD stream's plan has its schedule"
        fired, update = schedules.period_triggers(runtime, plan.schedule, state, now or datetime.now(UTC), report,
                                                  at=at)
        if attempt is not None and at is not None:
            update["committed_tries"] = {attempt[0]: attempt[1]}
    else:
        fired, update = schedules.sliding_triggers(runtime, state, report)
    if fired:
        say(f"{len(fired)} trigger(s) fired; computing")
    history = stored.statement.options.fill_history is not None and plan.kind is StreamKind.WINDOW \
        and state.consumed_batch is None
    process(runtime, stored, fired, events, report, notes, batched=request.batched, say=say,
            what=f"{'history fill' if history else 'compute'} of {stored.qualified}")
    if state.trigger_table is None and runtime.trigger_table is not None:  # streams created before it was kept
        update["trigger_table"] = runtime.trigger_table.to_state()
    if state.result_schema is None and runtime.compute is not None:  # streams created before it was kept
        update["result_schema"] = runtime.schema_json()
    if runtime.outputs:
        update["outputs"] = {**state.outputs, **runtime.outputs}
    if stored.statement.options.delete_output_table:
        update["outputs"] = delete_outputs(runtime, state.replace(**update), report)
    if fired and runtime.compute is not None:
        update["computed"] = len(fired)
    if (fired or plan.kind is StreamKind.ROW and report.written) and not report.superseded:  # for freshness
        update["fired_at"] = datetime.now(UTC).isoformat()
    if report.written and not report.superseded:  # for the output rate of SHOW STREAMS
        update["written"] = [[datetime.now(UTC).isoformat(), report.written]]
    if fired and runtime.compute is not None and not report.superseded:  # for the result latency, at the commit
        update[TRIGGERED_KEY] = trigger_times(fired, plan.kind)
    if events and not report.superseded:  # windows closed again: a recalculation, recorded at the commit
        reclosed = live_recalculation(events, stored.statement.options.delete_recalc)
        if reclosed is not None:
            update[RECLOSED_KEY] = reclosed
    if report.written and stored.statement.into is not None and not report.superseded:
        update[assets.PROGRESS_KEY] = _asset_entry(stored, state, update, report, plan.kind, at)
    report.progress = {} if report.superseded else update  # (a later try's commit has it all)
    if commit:
        if stored.statement.notify is not None:
            with elsewhere():  # the receivers' answers: the other batches of a node's worker go on meanwhile
                report.delivery = notifications.deliver_outbox(stored, give_up_after=notify_patience(), say=say)
        commit_progress(stored.db, stored.name, report.progress, store=store)
    return report


#: the key of a run's progress with the detection times (or instants) of what it computed, which
#: :func:`commit_progress` turns into ``latency`` entries
TRIGGERED_KEY = "triggered"


def trigger_times(fired: list[Fired], kind: StreamKind) -> list[str]:
    """When what fired was triggered, each distinct time once (ISO): a window's detection (its
    event's time: the detector batch that found it), a PERIOD instant; the triggers of SLIDING and
    row streams have no such time."""
    times: set[datetime] = set()
    for f in fired:
        if f.event is not None and f.event.event_time is not None:
            times.add(f.event.event_time)
        elif kind is StreamKind.PERIOD and isinstance(instant := f.values.get("_tlocaltime"), int):
            times.add(datetime.fromtimestamp(instant / 1e9, UTC))
    return [t.isoformat() for t in sorted(times)]


def result_latencies(triggered: list[str], now: datetime) -> list[list]:
    """The ``latency`` entries of a commit at ``now`` of what was triggered at ``triggered``: one
    ``[ISO time, milliseconds from the trigger to the commit]`` per trigger time."""
    at = now.isoformat()
    return [[at, max(0, round((now - datetime.fromisoformat(t)).total_seconds() * 1000))] for t in triggered]


#: the key of a run's progress with the windows its live detector closed again (late rows, deletes)
RECLOSED_KEY = "reclosed"


def live_recalculation(events: list[WindowEvent], deletes: bool) -> dict | None:
    """The recalculation a run's ``events`` hold, as its progress records it: the span of the windows
    invalidated (late rows, updates, or deletes under DELETE_RECALC) and closed again; None if none was."""
    again = [e for e in events if e.event_type == EventType.WINDOW_INVALIDATION]
    if not again:
        return None
    start = min(e.window_start for e in again)
    end = max(e.window_end or e.window_start for e in again)
    reason = recalculations.DELETES if deletes else recalculations.LATE_ROWS
    return {"reason": reason, "start": start.isoformat(), "end": end.isoformat()}


def output_uri(stored: StoredStream) -> str | None:
    """The URI of the asset of the stream's output table (None: it writes none)."""
    into = stored.statement.into
    return assets.output_uri(into.db or stored.db, into.name) if into is not None else None


def _asset_entry(stored: StoredStream, state: StreamState, update: dict, report: RunReport, kind: StreamKind,
                 at: datetime | None) -> dict:
    """The asset ledger entry of what this run wrote: its windows, and the batches or instant it consumed."""
    uri = output_uri(stored)
    assert uri is not None
    batches = versions = None
    if update.get("consumed_batch") is not None:
        first = (-1 if state.consumed_batch is None else state.consumed_batch) + 1
        batches = (first, int(update["consumed_batch"]))
    elif update.get("detected_version") is not None:
        seen = state.detected_version if state.detected_version is not None else state.created_version
        versions = ((-1 if seen is None else seen) + 1, int(update["detected_version"]))
    instant = at if kind is StreamKind.PERIOD else None
    return assets.entry(stored.qualified, uri, report.windows, report.written, batches=batches, versions=versions,
                        instant=instant)


def publish_assets(stored: StoredStream, item: dict | None = None) -> int:
    """Add ``item`` to the stream's asset ledger, then publish what waits there; how many entries went."""
    ledger = assets.AssetLedger(stored.state_dir)
    if item is not None:
        ledger.append(item)
    return ledger.publish()


def process(runtime: StreamRuntime, stored: StoredStream, fired: list[Fired], events: list[WindowEvent] | None,
            report: RunReport, notes: RunNotifications | None, *, batched: bool, say: Callable[[str], None],
            what: str) -> None:
    """The pipeline after "what fired": compute and write the fired triggers, then queue their
    notifications in ``notes`` (``events``: the window events they came from, None for schedule
    triggers)."""
    report.triggers += len(fired)
    report.windows = assets.windows_of(fired, also=report.windows)
    compute_all(runtime, fired, report, batched=batched, say=say, stored=stored, what=what,
                on_results=notes.collect if notes is not None else None)
    if runtime.stmt.rows.incremental and events is not None:  # a window left without rows has no result
        retract(runtime, windows.retracted_windows(events), report)
    if notes is not None:
        queue_notifications(runtime, stored, notes, fired, events, report)


def notify_patience() -> float:
    """How long a run outside Airflow retries an ON_FAILURE_PAUSE receiver before it stops and
    leaves the messages waiting (``AIRFLOW_STREAM_NOTIFY_PAUSE_SECONDS``, default 60)."""
    return float(os.environ.get("AIRFLOW_STREAM_NOTIFY_PAUSE_SECONDS") or 60)


def queue_notifications(runtime: StreamRuntime, stored: StoredStream, notes: RunNotifications, fired: list[Fired],
                         events: list[WindowEvent] | None, report: RunReport) -> None:
    """Turn the run's events and results into notifications, into the stream's outbox."""
    if events is not None:
        if not events:
            return
        names = table_names(runtime, {e.group_id: runtime.group_key(runtime.group_values(json.loads(e.group_keys)))
                                      for e in events})
        notes.add_windows(events, fired, names)
    else:
        names = table_names(runtime, {f.group_id: f.group for f in fired})
        notes.add_scheduled(fired, names)
    box = outbox_of(stored)
    assert box is not None
    queued = box.enqueue(notes.events, max_bytes=Settings.load().max_message_bytes, unless=notes.unless)
    if not queued and report.superseded:
        return
    report.notified += len(notes.events)


def _superseded(state: StreamState, at: datetime, attempt: tuple[str, int], report: RunReport) -> bool:
    """Whether a later try of ``attempt``'s run committed the instant ``at`` (``state``: the
    stream's); if so, the report says it.

    An Airflow task attempt whose supervisor died may still run: Airflow starts the next try, whose
    run computes the instant, notifies and commits, and the first attempt then computes the same
    instant again. Its notifications are no longer waiting in the outbox (they were delivered and
    the progress committed), so they would go out twice; such an attempt does nothing instead. A
    run cleared again (a later try) or another run of the same instant (a backfill) computes it."""
    run_id, tried = attempt
    later = state.committed_tries.get(run_id)
    if later is None or later <= tried:
        return False
    report.superseded = (f"try {later} of run {run_id} computed the instant {at.isoformat()} and "
                         f"committed it; this try ({tried}) leaves it")
    return True


def commit_progress(db: str, name: str, update: dict, *, store: StreamStore | None = None) -> StreamState:
    """Record a run's progress, joined to the stream's by :meth:`StreamState.merged`'s rules (batch and
    instant marks only move forward, so a late or repeated commit never rewinds a stream). Then the
    outbox lets go of the messages every receiver has."""
    store = store or StreamStore()
    update = dict(update)
    written = update.pop(assets.PROGRESS_KEY, None)
    triggered = update.pop(TRIGGERED_KEY, None)
    if triggered:
        update["latency"] = result_latencies(triggered, datetime.now(UTC))
    reclosed = update.pop(RECLOSED_KEY, None)
    with store.updating(db, name) as saving:
        saving.state = committed = saving.state.merged(update)
    if store.exists(db, name):
        stored = store.get(db, name)
        if reclosed:
            recalculations.finished(stored, reclosed["reason"], datetime.fromisoformat(reclosed["start"]),
                                    datetime.fromisoformat(reclosed["end"]))
        publish_assets(stored, written)
        box = outbox_of(stored)
        if box is not None:  # what every receiver has is not needed to rebuild this progress any more
            box.prune(committed.consumed_batch)
        try:
            if status.sample_due(stored):
                status.record_sample(Catalog(config.warehouse()), stored, committed)
        except (OSError, WarehouseError) as err:  # the chart misses a point; the progress is committed
            logging.getLogger(__name__).warning("stream %s: no lag sample: %s", stored.qualified, err)
    return committed


def skip_empty_batch(store: StreamStore, stored: StoredStream, batch_id: int, rows: int = 0) -> bool:
    """Record detector batch ``batch_id``, which found no events, consumed when every batch before it
    is; True when it did. A batch before it still being computed keeps its place: the run computing
    it reads this one too. The ``rows`` it read are recorded either way (the input rate)."""
    with store.updating(stored.db, stored.name) as saving:
        if rows:
            saving.state = saving.state.merged(windows.read_entry(rows))
        consumed = saving.state.consumed_batch
        if (-1 if consumed is None else consumed) != batch_id - 1:
            return False
        saving.state = saving.state.replace(consumed_batch=batch_id)
    return True
