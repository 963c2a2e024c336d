"""What fired for window triggers: the detector's window events, live (since the last batch
consumed) or found again in batch over a range of event time (recalculation)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import StreamError
from airflow_stream_provider.model.events import EventType, TriggerKind
from airflow_stream_provider.plan.state import StreamState
from airflow_stream_provider.sql.tdengine.nested import layer_placeholder
from airflow_stream_provider.streams import duckdb
from airflow_stream_provider.streams.fired import TROWS_FROM, TROWS_TO, Fired
from airflow_stream_provider.streams.probes import checkpoint_id, read_events
from airflow_stream_provider.streams.runtime import StreamRuntime, nanos
from airflow_stream_provider.streams.store import StoredStream, detector_lock
from airflow_stream_provider.values import epoch_micros, instant
from airflow_stream_provider.windows import batch, detector
from airflow_stream_provider.windows.events import (
    EVENT_ARROW_SCHEMA,
    EVENT_COLUMNS,
    IDLE_KINDS,
    WindowEvent,
    empty_events,
    window_events,
)
from airflow_stream_provider.windows.nested import outer_bounds
from airflow_stream_provider.windows.trigger_plan import TriggerPlan, plan_trigger


class CheckpointLost(StreamError):
    """The detector's checkpoint is gone or is not the one the stream's progress was made with."""


def check_checkpoint(stored: StoredStream, state: StreamState) -> None:
    """Refuse to detect when the stream's progress says a checkpoint must exist and it does not,
    or when the checkpoint there is another one than the stream recorded.

    The detector numbers its batches in the checkpoint, and the runs consume events by batch id
    (``consumed_batch``). A new checkpoint starts again at batch 0 from the stream's creation: its
    events would be skipped as consumed (the windows since the loss never computed) and the windows
    before it appended a second time. Rebuilding in place would mean telling every re-detected
    window apart from a recalculation of the same window and holding back notifications already
    delivered, with the event table as the only record; a wrong guess there loses or repeats
    results silently. So the stream stops with this error instead (SHOW STREAMS shows it failed),
    and the way back is explicit: put the checkpoint back, or DROP STREAM and CREATE STREAM again
    (FILL_HISTORY_FIRST recomputes the history; outputs are upserts, so rows already written are
    replaced, not doubled).

    The checkpoint's identity is the query id in its ``metadata`` file, recorded in ``stream.json``
    (``checkpoint_id``) by the first run that detects. A stream whose progress predates that record
    still has ``detected_version`` or ``consumed_batch``, which only a checkpoint can have produced.
    """
    found = checkpoint_id(stored.checkpoint)
    recorded = state.checkpoint_id
    must_exist = recorded is not None or state.detected_version is not None or state.consumed_batch is not None
    if found is None and must_exist:
        problem = f"its detector checkpoint {stored.checkpoint} is missing"
    elif found is not None and recorded is not None and found != recorded:
        problem = f"its detector checkpoint {stored.checkpoint} is not the one it recorded ({found}, not {recorded})"
    else:
        return
    raise CheckpointLost(
        f"stream {stored.qualified} stopped: {problem}, so windows would be skipped and events repeated. "
        f"Restore the checkpoint, or DROP STREAM {stored.qualified} and CREATE it again "
        "(with FILL_HISTORY_FIRST to recompute its history)")


def pending_windows(runtime: StreamRuntime, stored: StoredStream, state: StreamState, say: Callable[[str], None], *,
                     detect: bool = True, upto_batch: int | None = None,
                     detected: detector.DetectedBatch | None = None,
                     locked: bool = False) -> tuple[list[Fired], dict, list[WindowEvent]]:
    """The windows fired since the stream's last consumed batch, up to ``upto_batch``, and the
    progress to record. ``detected``: the last of them as the detector just wrote it; when it is the
    only one waiting, its events are taken as they are instead of read back. ``locked``: the caller
    holds the stream's detector lock."""
    update: dict = {}
    if detect:
        version = runtime.table_version()  # (before detecting: the detector reads at least this far)
        with contextlib.nullcontext(True) if locked else detector_lock(stored) as mine:
            if mine:
                read = detect_windows(runtime, stored, state, say)
                update.update(read_entry(read))
                update["detected_version"] = version
                update["checkpoint_id"] = checkpoint_id(stored.checkpoint)
                if state.failed:
                    update["failed"] = None  # the checkpoint was put back
            else:
                say("the live detector runs elsewhere (the stream node); reading its events")
    consumed = -1 if state.consumed_batch is None else state.consumed_batch
    if detected is not None and detected.id == upto_batch and consumed == detected.id - 1:
        events = detected.events.to_pandas() if detected.events is not None else pd.DataFrame()
    else:
        if detected is not None and detected.store_events is not None:  # (its events go in before the table is read)
            detected.store_events()
        detected = None
        events = read_events(str(stored.events_path), consumed, upto_batch)
    if upto_batch is not None and upto_batch > consumed:
        update["consumed_batch"] = upto_batch  # batches without events are consumed too
    if events.empty:
        return [], update, []
    update["consumed_batch"] = max(update.get("consumed_batch", -1), int(events["batch_id"].max()))
    # %%trows is read at a version taken after the events: the detector read the versions written
    # while it started (and the node's may have committed batches since), so an earlier version can
    # miss the rows of the windows it found
    version = detected.version if detected is not None and detected.version is not None else runtime.table_version()
    found = window_events(events)
    return fired_windows(runtime, found, version), update, found


def detect_windows(runtime: StreamRuntime, stored: StoredStream, state: StreamState,
                   say: Callable[[str], None]) -> int:
    """Run the detector until it has read the trigger table as it is now, and its processing-time
    timeouts that are due have fired (MAX_DELAY, FORCE_WINDOW_CLOSE, CONTINUOUS_WINDOW_CLOSE): a run
    after the delay writes what the live detector would have, new rows or not. How many rows of the
    trigger table its batches read."""
    plan = trigger_plan(runtime)
    say(f"detecting windows on {plan.table}")
    found = detector.Detector(plan, detector_options(stored, state), timeouts=True)
    batches = found.run_available()
    say(f"{batches} detector batch(es) up to version {found.position}, {found.rows_read} row(s) read")
    return found.rows_read


def read_entry(rows: int) -> dict:
    """The progress that records ``rows`` read by a detector now, for the input rate of SHOW STREAMS
    (:data:`~airflow_stream_provider.plan.state.RECENT_KEYS`); nothing when it read none."""
    return {"read": [[datetime.now(UTC).isoformat(), rows]]} if rows else {}


def trigger_plan(runtime: StreamRuntime) -> TriggerPlan:
    return plan_trigger(runtime.stmt, runtime.warehouse.catalog, runtime.db)


def detector_options(stored: StoredStream, state: StreamState) -> detector.DetectorOptions:
    """The detector's paths and start, and the versions START ... IGNORE UNTREATED skipped.
    Raises :class:`CheckpointLost` when the checkpoint the stream's progress needs is gone (the
    node reports it as the detector's error)."""
    check_checkpoint(stored, state)
    return detector.DetectorOptions(
        events_path=str(stored.events_path), checkpoint=str(stored.checkpoint),
        created_version=state.created_version, skip_versions=state.skip_versions)


def fired_windows(runtime: StreamRuntime, events: list[WindowEvent], version: int | None) -> list[Fired]:
    """The events that run the computation as fired triggers: those of EVENT_TYPE, and MAX_DELAY
    (an invalidation is followed by the recomputed close). ``Fired.event`` is the event.

    A stream of incremental windows (TDengine before 3.3.7) computes each window once per run, as
    its latest event has it, at the table version that event was decided at and with the rows it
    counts (``adjust``); its ``_wend`` of a session is the last row plus the gap (reference 003)."""
    incremental = runtime.stmt.rows.incremental
    computed = (*runtime.stmt.options.event_types, EventType.MAX_DELAY)
    if incremental:
        events = latest_of_each_window(events)
        computed += (EventType.WINDOW_CLOSE, EventType.WINDOW_UPDATE)
    events = [ev for ev in events if ev.event_type in computed]
    unit = 1000 if runtime.precision == "ms" else 1  # microseconds per unit of the precision
    trigger = runtime.stmt.trigger
    gap = trigger.gap.to_timedelta() if incremental and isinstance(trigger, m.SessionWindow) else None
    fired = []
    for i, ev in enumerate(events):
        start, end = ev.window_start, ev.window_end
        if gap is not None and end is not None:
            end += gap
        group = runtime.group_values(json.loads(ev.group_keys))
        values = {"_twstart": start, "_twend": end, "_tgrpid": int(ev.group_id),
                  **(_idle_span(start, end) if ev.event_type in IDLE_KINDS else {}),
                  "_twduration": None if end is None else (epoch_micros(end) - epoch_micros(start)) // unit,
                  "_twrownum": ev.row_count,
                  "_tlocaltime": nanos(ev.event_time) if ev.event_time is not None else None,
                  TROWS_FROM: start, TROWS_TO: end, **group, **_outer_values(ev.outer_windows, unit)}
        if ev.outer_windows and end is not None:
            values[TROWS_FROM], values[TROWS_TO] = _inside_outer(runtime, ev.outer_windows, start, end)
        decided_at = ev.table_version if incremental else None
        fired.append(Fired(i, values, version=version if decided_at is None else decided_at,
                           group=runtime.group_key(group), group_id=ev.group_id, trigger_id=ev.trigger_id,
                           event=ev, adjust=ev.adjust if incremental else None))
    return fired


def _outer_values(text: str | None, unit: int) -> dict:
    """Nested windows: the placeholders of the leaf window's outer layers (``w_outer._twstart`` as
    ``_twstart@0``...), from the event's outer windows; the outer window's row count is its rows so
    far while it is open."""
    values: dict = {}
    for depth, (start, end, rows, _) in enumerate(outer_bounds(text)):
        values.update({layer_placeholder("_twstart", depth): instant(start), layer_placeholder("_twend", depth):
                       instant(end), layer_placeholder("_twduration", depth): (end - start) // unit,
                       layer_placeholder("_twrownum", depth): rows})
    return values


def _inside_outer(runtime: StreamRuntime, text: str, start: datetime, end: datetime) -> tuple[datetime, datetime]:
    """The bounds of a leaf window's ``%%trows``: its own, cut at its outer windows' (an INTERVAL leaf
    in a state window holds only the state window's rows), each outer end taken as the leaf's
    convention takes its own (exclusive for INTERVAL, the last row's time for the others)."""
    tick = timedelta(microseconds=1)
    exclusive = isinstance(runtime.stmt.trigger, (m.IntervalWindow, m.SlidingTrigger))
    for layer, (lo, hi, _, _) in zip(runtime.stmt.outer_windows, outer_bounds(text), strict=True):
        outer_exclusive = isinstance(layer.trigger, (m.IntervalWindow, m.SlidingTrigger))
        last = instant(hi) - (tick if outer_exclusive else timedelta(0))  # the outer window's last instant
        start, end = max(start, instant(lo)), min(end, last + tick if exclusive else last)
    return start, end


def _idle_span(start: datetime, end: datetime | None) -> dict[str, int | None]:
    """``_tidlestart`` and ``_tidleend`` of an IDLE or RESUME event, epoch nanoseconds as TDengine binds
    them; the event's span (processing time) also bounds its ``%%trows``, which holds the rows whose
    time falls in it (usually none)."""
    return {"_tidlestart": epoch_micros(start) * 1000, "_tidleend": None if end is None else epoch_micros(end) * 1000}


def latest_of_each_window(events: list[WindowEvent]) -> list[WindowEvent]:
    """The last event of each window (by trigger id), in the order of those last events."""
    last = {ev.trigger_id: i for i, ev in enumerate(events)}
    return [ev for i, ev in enumerate(events) if last[ev.trigger_id] == i]


def retracted_windows(events: list[WindowEvent]) -> list[WindowEvent]:
    """The windows whose latest event is a WINDOW_INVALIDATION: gone, so their results are removed
    (legacy streams)."""
    return [ev for ev in latest_of_each_window(events) if ev.event_type == EventType.WINDOW_INVALIDATION]


def windows_in_range(runtime: StreamRuntime, rows: DataFrame, start: datetime, end: datetime,
                     version: int | None, say: Callable[[str], None]) -> tuple[list[Fired], list[WindowEvent]]:
    """The windows that start in ``[start, end)``, found by the detector's core in batch mode over
    ``rows`` (the trigger table from ``start`` on), and their events."""
    plan = trigger_plan(runtime)
    ts = F.col(f"`{plan.ts_column}`")
    if plan.spec.kind is TriggerKind.INTERVAL:
        rows = rows.where(ts < F.lit(end + timedelta(microseconds=plan.spec.interval)))
    elif plan.spec.kind is TriggerKind.COUNT_WINDOW:
        rows = rows.where(ts < F.lit(end))
    say(f"finding the windows of {plan.table} in [{start.isoformat()}, {end.isoformat()})")
    events: pd.DataFrame = batch.detect(rows, plan).where((F.col("window_start") >= F.lit(start))
                                                          & (F.col("window_start") < F.lit(end))).toPandas()
    return _range_events(runtime, events, version)


def windows_in_range_locally(runtime: StreamRuntime, start: datetime, end: datetime, version: int | None,
                             say: Callable[[str], None]) -> tuple[list[Fired], list[WindowEvent]] | None:
    """:func:`windows_in_range` without Spark when the rows it reads are few: read by delta-rs at
    ``version`` and scanned group by group here (None: the rows are many, or need Spark to read)."""
    plan = trigger_plan(runtime)
    if runtime.compute is None:
        return None
    upper = {TriggerKind.INTERVAL: end + timedelta(microseconds=plan.spec.interval),
             TriggerKind.COUNT_WINDOW: end}.get(plan.spec.kind)
    found = runtime.compute.few_rows_table(version, (start, upper), limit=duckdb.LOCAL_ROWS)
    if found is None:
        return None
    say(f"finding the windows of {plan.table} in [{start.isoformat()}, {end.isoformat()}) in the process: "
        f"{found[0].num_rows} rows")
    table = found[0].select(list(plan.columns))
    ts = table[plan.ts_column]
    if upper is not None:  # (the upper bound read is inclusive; the range's is not)
        table = table.filter(pc.less(ts, _stamp(upper, ts.type)))
    if plan.subtable is not None:
        table = table.filter(pc.equal(table["tbname"], plan.subtable))
    if plan.since is not None:
        table = table.filter(pc.greater_equal(table[plan.ts_column], _stamp(plan.since, ts.type)))
    table = plan.expand(table)  # (ROLLUP BY: once per rollup group)
    # the groups' PARTITION BY values as the live detector takes them, so the trigger ids are its own
    codes, keys = detector.group_codes(table, plan.keys)
    rows = detector.group_slices(table.to_pandas(), codes, len(keys))
    frames = [part for part in (batch.group_events(plan, rows(g), key=key) for g, key in enumerate(keys))
              if len(part)]
    events = pd.concat(frames, ignore_index=True)[list(EVENT_COLUMNS)] if frames else empty_events()
    typed = pa.Table.from_pandas(events, preserve_index=False)
    events = pa.table({f.name: typed[f.name].cast(f.type) for f in EVENT_ARROW_SCHEMA
                       if f.name in typed.column_names}).to_pandas()
    starts = pd.to_datetime(events["window_start"], utc=True)
    events = events[(starts >= pd.Timestamp(start)) & (starts < pd.Timestamp(end))]
    return _range_events(runtime, events, version)


def _stamp(at: datetime | int, kind: pa.DataType) -> pa.Scalar:
    """A time (or microseconds since the epoch) as a scalar of the timestamp type ``kind``."""
    return pa.scalar(at, pa.timestamp("us", tz="UTC")).cast(kind)


def _range_events(runtime: StreamRuntime, events: pd.DataFrame,
                  version: int | None) -> tuple[list[Fired], list[WindowEvent]]:
    """The fired windows of a range's events, and the events in order."""
    if events.empty:
        return [], []
    events["window_start"] = pd.to_datetime(events["window_start"], utc=True)
    events["window_end"] = pd.to_datetime(events["window_end"], utc=True)
    events["event_time"] = pd.Timestamp.now(tz="UTC")
    found = window_events(events.sort_values(["window_start", "group_id"], kind="stable"))
    return fired_windows(runtime, found, version), found
