"""The streaming detector: one Structured Streaming query per stream, on the stream node.

It reads the trigger table's Delta change feed, groups rows by the PARTITION BY keys and runs the
window core in ``applyInPandasWithState``. The per-group state is the core's carry (the open
windows and counters) plus the rows not yet behind the watermark, so it is bounded by open windows
and the WATERMARK span, never by history. Events go to the stream's event table through
``foreachBatch``, committed with a Delta transaction marker (app id, batch id) in the same commit: a
batch replayed after a crash is written once.

Time semantics (reference 000, "Atypical Data Ingestion Scenarios"):

- A row is *late* when its time is at or before the group's decided time, the watermark of its
  last scan. Late rows, and updates of rows already scanned, are recalculated
  (:mod:`.late`): changed windows, and closed windows holding a changed row even when their
  bounds and count stand (an update of a value), get ``WINDOW_INVALIDATION`` and a recomputed
  ``WINDOW_CLOSE`` with the same trigger id. Under IGNORE_DISORDER, and always for COUNT_WINDOW,
  they are dropped and counted in the group's state (``dropped``).
- Deletes are read only under DELETE_RECALC, and recalculated like late rows.
- Rows older than the latest event time minus EXPIRED_TIME are dropped and counted.
- MAX_DELAY: every MAX_DELAY of processing time a window stays open, a ``MAX_DELAY`` event
  reports it as it stands (a processing-time timeout fires it when no rows come).
- FILL_HISTORY[_FIRST]: the query starts from the table as it is (Delta's initial snapshot, in
  one micro-batch) and continues with the changes after it, so history is complete before any
  live row is processed.
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from airflow_stream_provider.model import TriggerMode
from airflow_stream_provider.spark.session import setting
from airflow_stream_provider.storage import is_remote
from airflow_stream_provider.windows.clause import TriggerPlan, micros
from airflow_stream_provider.windows.core import empty_windows, open_windows, scan
from airflow_stream_provider.windows.events import (
    EVENT_COLUMNS,
    EVENT_FIELDS,
    EVENT_SCHEMA,
    empty_events,
    event_rows,
)
from airflow_stream_provider.windows.late import DATA_CHANGES, read_group, recalculate
from airflow_stream_provider.windows.legacy import LegacyGroup, as_micros

STATE_SCHEMA = "carry string"
_HISTORY_FILES = 1 << 30  # admit the whole initial snapshot in one micro-batch


@dataclass(frozen=True)
class DetectorOptions:
    """Where a detector keeps its things and where in the table's history it starts."""

    events_path: str
    checkpoint: str
    # where the change feed starts: a Delta version, or "latest" (resolved when the query first
    # plans a batch); FILL_HISTORY plans start from the table's snapshot instead
    starting_version: int | str = "latest"
    # the table's version when the stream was created: changes up to it are history, and are read
    # only with FILL_HISTORY (the feed starts there, since Delta cannot start at a future version)
    created_version: int | None = None
    max_files_per_trigger: int | None = None  # Delta's admission limit per micro-batch (live changes)
    # inclusive ranges of table versions never read (written while the stream was stopped, then
    # started with IGNORE UNTREATED)
    skip_versions: tuple[tuple[int, int], ...] = ()


def change_feed(spark: SparkSession, path: str, options: DetectorOptions, *, history: bool,
                subtable: str | None = None) -> DataFrame:
    """A trigger table's change feed from the stream's creation (with ``history``, from its
    snapshot), without the versions START ... IGNORE UNTREATED skipped, of one subtable if given."""
    reader = spark.readStream.format("delta").option("readChangeFeed", "true")
    if history:
        reader = reader.option("maxFilesPerTrigger", _HISTORY_FILES)
    else:
        start = options.created_version if options.created_version is not None else options.starting_version
        reader = reader.option("startingVersion", str(start))
        if options.max_files_per_trigger:
            reader = reader.option("maxFilesPerTrigger", options.max_files_per_trigger)
    df = reader.load(path)
    if not history and options.created_version is not None:
        df = df.where(F.col("_commit_version") > options.created_version)
    for lo, hi in options.skip_versions:
        df = df.where(~F.col("_commit_version").between(lo, hi))
    if subtable is not None:
        df = df.where(F.col("tbname") == subtable)
    return df


def source(spark: SparkSession, plan: TriggerPlan, options: DetectorOptions) -> DataFrame:
    """The trigger table's change feed: new row values, the old values of updates, and deletes
    under DELETE_RECALC (always for a legacy stream)."""
    df = change_feed(spark, plan.path, options, history=plan.history, subtable=plan.subtable)
    kinds = [*DATA_CHANGES, "update_preimage"] + (["delete"] if plan.reads_deletes else [])
    df = df.where(F.col("_change_type").isin(*kinds))
    if plan.since is not None:
        df = df.where(F.col(plan.ts_column) >= F.timestamp_micros(F.lit(plan.since)))
    return df.select(*plan.columns, "_change_type", "_commit_version")


def events_stream(df: DataFrame, plan: TriggerPlan, *, timeouts: bool = True) -> DataFrame:
    """Window events of a change-feed stream of raw trigger rows.

    :param timeouts: fire MAX_DELAY without new rows (processing-time timeouts). Spark then runs a
        micro-batch every trigger interval, so a query that must end (``availableNow``) goes without.
    """
    timeouts = timeouts and waits(plan)
    if plan.ts_column not in plan.keys:  # the step works in microseconds: no timestamp conversion per row
        df = df.withColumn(plan.ts_column, F.unix_micros(F.col(plan.ts_column)))
    grouped = df.groupBy(*plan.keys) if plan.keys else df.withColumn("_all", F.lit(0)).groupBy("_all")
    step = _LegacyStep(plan, timeouts=timeouts) if plan.legacy is not None else _Step(plan, timeouts=timeouts)
    return grouped.applyInPandasWithState(step, EVENT_SCHEMA, STATE_SCHEMA, "append",
                                          "ProcessingTimeTimeout" if timeouts else "NoTimeout")


def waits(plan: TriggerPlan) -> bool:
    """Whether the detector has something to do when no rows come: MAX_DELAY, or a legacy stream's
    MAX_DELAY, CONTINUOUS_WINDOW_CLOSE recalculation and FORCE_WINDOW_CLOSE windows."""
    legacy = plan.legacy
    return plan.max_delay is not None or (legacy is not None and (
        legacy.max_delay is not None or legacy.recalculate is not None
        or legacy.mode == TriggerMode.FORCE_WINDOW_CLOSE))


def start(spark: SparkSession, plan: TriggerPlan, options: DetectorOptions, *,
          available_now: bool = False, interval: str = "1 second",
          after_batch: Callable[[int, bool], None] | None = None) -> StreamingQuery:
    """Start the detector query of ``plan``; with ``available_now`` it stops once caught up.

    :param after_batch: called with each batch id and whether it had events, once its events are
        written and before the batch is committed to the checkpoint (LOW_LATENCY_CALC computes
        there). If it raises, the query fails and the batch is replayed when it starts again;
        its events are not written twice.
    """
    timeouts = not available_now and waits(plan)
    events = events_stream(source(spark, plan, options), plan, timeouts=timeouts)
    place = options.checkpoint if is_remote(options.checkpoint) else Path(options.checkpoint).resolve()
    app_id = "airflow-stream-detector-" + hashlib.sha1(f"{plan.stream}\x1f{place}".encode()).hexdigest()[:16]

    def write(batch: DataFrame, batch_id: int) -> None:
        # an event row as written: the core's fields plus batch_id, seq and event_time
        rows = (batch.withColumn("batch_id", F.lit(batch_id).cast("bigint"))
                .withColumn("seq", F.monotonically_increasing_id())
                .withColumn("event_time", F.current_timestamp()))
        count = write_events(rows, options.events_path, app_id, batch_id)
        if after_batch is not None:
            after_batch(batch_id, bool(count))

    writer = (events.writeStream.queryName(f"detector:{plan.stream}")
              .option("checkpointLocation", options.checkpoint).foreachBatch(write))
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime=interval)
    return writer.start()


#: the event-table columns Delta keeps file statistics for (the default, every column, costs more than
#: the write itself on the string columns, and trigger ids skip nothing)
EVENT_STATS_COLUMNS = "batch_id,window_start,window_end"
#: at most this many events of a batch are collected to the driver and committed by delta-rs, in one
#: pass and tens of milliseconds; a batch with more (a history fill, a bulk load) is computed again
#: into Spark's cache and written by Spark's Delta writer
LOCAL_EVENTS_MAX = 1_000_000
_TOO_MANY = "airflow-stream: more window events than the driver collects"
#: an event row as stored: the core's fields, then batch_id, seq and event_time
EVENT_ARROW_SCHEMA = pa.schema(
    [pa.field(name, pa.timestamp("us", tz="UTC") if kind == "timestamp" else
              {"string": pa.string(), "bigint": pa.int64(), "int": pa.int32()}[kind]) for name, kind in EVENT_FIELDS]
    + [pa.field("batch_id", pa.int64()), pa.field("seq", pa.int64()),
       pa.field("event_time", pa.timestamp("us", tz="UTC"))])


def write_events(rows: DataFrame, path: str, app_id: str, batch_id: int) -> int:
    """Append a batch's events once, and say how many there were.

    The batch is computed once: its events come to the driver as Arrow and are committed by
    delta-rs. A partition past its share of :data:`LOCAL_EVENTS_MAX` stops that collection (its
    ``seq`` numbers its rows), and the batch is then computed into Spark's cache and written by
    Spark. Both writers record (app id, batch id) as a Delta transaction in the same commit as the
    rows, and skip a batch either of them committed: a replayed batch is not written twice. A batch
    without events makes no commit (MAX_DELAY makes Spark run one every trigger interval, mostly
    empty). An event table has one writer at a time, the detector holding the stream's lock, so
    Spark's writer may commit to one on an object store too: an S3A commit is unsafe only against a
    concurrent writer.
    """
    share = LOCAL_EVENTS_MAX // max(1, int(setting(rows.sparkSession, "spark.sql.shuffle.partitions")))
    guard = F.when(F.col("seq") % F.lit(1 << 33) >= share, F.raise_error(F.lit(_TOO_MANY)))  # row in partition
    try:
        table = rows.withColumn("_guard", guard).toArrow()
    except PySparkException as err:
        if _TOO_MANY not in str(err):
            raise
    else:
        if table.num_rows:
            _commit_arrow(table, path, app_id, batch_id)
        return table.num_rows
    rows = rows.persist()
    try:
        count = rows.count()
        if count:
            (rows.write.format("delta").mode("append").option("mergeSchema", "true")
             .option("delta.dataSkippingStatsColumns", EVENT_STATS_COLUMNS)
             .option("txnAppId", app_id).option("txnVersion", batch_id).save(path))
        return count
    finally:
        rows.unpersist()


def _commit_arrow(table: pa.Table, path: str, app_id: str, batch_id: int) -> None:
    from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
    from deltalake.exceptions import TableNotFoundError

    target: str | DeltaTable
    try:
        target, configuration = DeltaTable(path), None
    except TableNotFoundError:
        target, configuration = path, {"delta.dataSkippingStatsColumns": EVENT_STATS_COLUMNS}
    done = target.transaction_version(app_id) if isinstance(target, DeltaTable) else None
    if done is not None and done >= batch_id:
        return
    events = pa.table([table.column(f.name).cast(f.type) for f in EVENT_ARROW_SCHEMA], schema=EVENT_ARROW_SCHEMA)
    # event tables made before a column was added take it on their next write
    write_deltalake(target, events, mode="append", configuration=configuration, schema_mode="merge",
                    commit_properties=CommitProperties(app_transactions=[Transaction(app_id, batch_id)]))


@functools.cache
def _quiet_state_serializer() -> None:
    """In the Python worker, once: pyspark's state serializer pads each batch's frames with empty
    rows, and pandas warns of that concatenation on every batch (a deprecation of pandas' own)."""
    warnings.filterwarnings("ignore", "The behavior of DataFrame concatenation with empty", FutureWarning)


class _Step:
    """The per-group state function.

    The state (JSON) holds the core's ``carry``; ``pending``, the rows after the decided time that
    wait for the watermark (raw trigger-table values, ``ts`` in microseconds); ``decided``, the
    watermark of the last scan; ``max_ts`` and ``first_ts``, the latest and earliest event times
    scanned; ``due``, the next MAX_DELAY trigger of each open window (processing time); and the
    counters ``dropped`` and ``recalculations``.
    """

    def __init__(self, plan: TriggerPlan, *, timeouts: bool) -> None:
        self.plan = plan
        self.timeouts = timeouts

    def __call__(self, key: tuple, chunks: Iterator[pd.DataFrame], state) -> Iterator[pd.DataFrame]:
        _quiet_state_serializer()
        plan, spec, ts = self.plan, self.plan.spec, self.plan.ts_column
        saved = json.loads(state.get[0]) if state.exists else {}
        frames = [] if state.hasTimedOut else [f for f in chunks if len(f)]
        keys = plan.group_keys(tuple(key) if plan.keys else ())
        carry, decided, max_ts, first_ts = (saved.get(k) for k in ("carry", "decided", "max_ts", "first_ts"))
        pending = _from_records(saved.get("pending"))
        events = []
        if frames:
            raw = pd.concat(frames, ignore_index=True)
            raw[ts] = micros(raw[ts])
            data = raw["_change_type"].isin(DATA_CHANGES)
            if data.any():
                top = int(raw.loc[data, ts].max())
                max_ts = top if max_ts is None else max(max_ts, top)
            late = raw[ts] <= decided if decided is not None else pd.Series(False, index=raw.index)
            drop = pd.Series(False, index=raw.index)
            if plan.expired_time is not None and max_ts is not None:
                drop |= raw[ts] < max_ts - plan.expired_time
            if not plan.recalculates:
                drop |= late
            saved["dropped"] = saved.get("dropped", 0) + int((drop & data).sum())
            if late.any() or drop.any():
                changes, live = raw[late & ~drop], raw[~late & ~drop]
            else:  # the usual batch: every row new and in time
                changes, live = raw.iloc[0:0], raw
            if len(changes):
                assert decided is not None  # rows count as late only once a watermark was decided
                done = recalculate(plan, tuple(key), changes, version=int(raw["_commit_version"].max()),
                                   decided=decided, first_ts=first_ts)
                events.append(event_rows(plan, keys, done.windows, invalidate=done.invalidate))
                carry = done.carry
                low = int(changes[ts].min())
                first_ts = low if first_ts is None else min(first_ts, low)
                saved["recalculations"] = saved.get("recalculations", 0) + 1
            pending = _merge(plan, pending, live)
            watermark = max_ts - spec.watermark if max_ts is not None else None
            if watermark is not None:
                ready = pending[pending[ts] <= watermark]
                pending = pending[pending[ts] > watermark]
                windows, carry = scan(spec, plan.prepare(ready), carry, watermark=watermark)
                events.append(event_rows(plan, keys, windows))
                if len(ready):
                    low = int(ready[ts].min())
                    first_ts = low if first_ts is None else min(first_ts, low)
                decided = watermark
        if plan.max_delay is not None:
            events.append(self._max_delay(saved, keys, carry, state))
        saved.update(carry=carry, decided=decided, max_ts=max_ts, first_ts=first_ts, pending=_records(pending))
        state.update((json.dumps(saved, default=_json_default),))
        events = [e for e in events if len(e)]
        yield pd.concat(events, ignore_index=True)[list(EVENT_COLUMNS)] if events else empty_events()

    def _max_delay(self, saved: dict, keys: dict, carry: dict | None, state) -> pd.DataFrame:
        """MAX_DELAY events of windows open for another delay, and the timeout to the next one."""
        delay, now = self.plan.max_delay, time.time_ns() // 1000
        assert delay is not None  # called only for a plan with MAX_DELAY
        windows = open_windows(self.plan.spec, carry)
        due_before, due, fire = saved.get("due", {}), {}, []
        for i, (start_ts, ordinal) in enumerate(zip(windows["wstart"].tolist(), windows["ordinal"].tolist())):
            name = f"{start_ts}:{ordinal}"
            at = due_before.get(name, now + delay)  # the first trigger comes a delay after the window is seen
            if now >= at:
                fire.append(i)
                at += (now - at) // delay * delay + delay  # triggers missed while busy are skipped
            due[name] = at
        saved["due"] = due
        if due and self.timeouts:
            state.setTimeoutDuration(max(1, (min(due.values()) - now) // 1000))
        if not fire:
            return empty_events()
        return event_rows(self.plan, keys, empty_windows(), delayed=windows.iloc[fire])


class _LegacyStep:
    """The per-group state function of a stream of TDengine's engine before 3.3.7: its state is
    :meth:`.legacy.LegacyGroup.state`, its rows are read back from the trigger table by delta-rs."""

    def __init__(self, plan: TriggerPlan, *, timeouts: bool) -> None:
        self.plan = plan
        self.timeouts = timeouts

    def __call__(self, key: tuple, chunks: Iterator[pd.DataFrame], state) -> Iterator[pd.DataFrame]:
        _quiet_state_serializer()
        plan = self.plan
        saved = json.loads(state.get[0]) if state.exists else {}
        values = tuple(key) if plan.keys else ()

        def read(version: int, lo: int, hi: int) -> pd.DataFrame:
            return as_micros(read_group(plan, values, version, lo, hi))

        group = LegacyGroup(plan, values, saved, read, now=time.time_ns() // 1000)
        frames = [] if state.hasTimedOut else [f for f in chunks if len(f)]
        if frames:
            group.apply(as_micros(pd.concat(frames, ignore_index=True)))
        group.emit()
        state.update((json.dumps(group.state(), default=_json_default),))
        timeout = group.next_timeout() if self.timeouts else None
        if timeout is not None:
            state.setTimeoutDuration(max(1, timeout // 1000))
        events = group.all_events()
        yield events[list(EVENT_COLUMNS)] if events is not None else empty_events()


def _merge(plan: TriggerPlan, pending: pd.DataFrame | None, changes: pd.DataFrame) -> pd.DataFrame:
    """Pending rows with ``changes`` (not late) applied: the last value of each row wins, and a
    delete removes the row."""
    if pending is None and (changes["_change_type"] == "insert").all():
        times = changes[plan.ts_column].to_numpy()
        rising = bool(np.all(times[1:] > times[:-1]))  # rows written in time order: distinct at a glance
        if rising or len(np.unique(times)) == len(times):  # new rows with distinct times: nothing to merge
            return changes[list(plan.columns)].reset_index(drop=True)
    frames = [changes]
    if pending is not None:
        frames.insert(0, pending.assign(_change_type="insert", _commit_version=-1))
    rows = pd.concat(frames, ignore_index=True)
    rows = rows[rows["_change_type"] != "update_preimage"]
    rows = rows.sort_values("_commit_version", kind="stable").drop_duplicates(list(plan.row_key), keep="last")
    return rows.loc[rows["_change_type"] != "delete", list(plan.columns)].reset_index(drop=True)


def _records(frame: pd.DataFrame | None) -> dict | None:
    if frame is None or frame.empty:
        return None
    return {c: [v.item() if hasattr(v, "item") else v for v in frame[c].tolist()] for c in frame.columns}


def _from_records(records: dict | None) -> pd.DataFrame | None:
    return pd.DataFrame(records) if records else None


def _json_default(value: object) -> object:
    if hasattr(value, "item"):
        return value.item()
    return str(value)
