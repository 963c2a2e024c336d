"""The streaming detector: one Structured Streaming query per stream, on the stream node.

It reads the trigger table's Delta change feed, groups rows by the PARTITION BY keys and runs the
window core in ``applyInPandasWithState``. The per-group state is the core's carry (the open
windows and counters) plus the rows not yet behind the watermark, so it is bounded by open windows
and the WATERMARK span, never by history. Events go to the stream's event table through
``foreachBatch`` with Delta's idempotent writes (``txnAppId`` + ``txnVersion`` = batch id): a batch
replayed after a crash is written once.

Rows at or before the time the group has already scanned (late rows, and rewrites of an existing
timestamp) cannot change windows here: they are dropped and counted in the group's state
(``dropped``), as IGNORE_DISORDER asks and as reference 000 prescribes for COUNT_WINDOW. Rows older
than the latest event time minus EXPIRED_TIME are dropped the same way.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from airflow_stream_provider.windows.core import scan
from airflow_stream_provider.windows.events import EVENT_COLUMNS, EVENT_SCHEMA, empty_events, event_rows
from airflow_stream_provider.windows.trigger import TriggerPlan

STATE_SCHEMA = "carry string"
_DATA_CHANGES = ("insert", "update_postimage")


@dataclass(frozen=True)
class DetectorOptions:
    """Where a detector keeps its things and how it treats late rows."""

    events_path: str
    checkpoint: str
    starting_version: int | str = "latest"  # a Delta version, or "latest" for new changes only
    expired_time: int | None = None  # EXPIRED_TIME in microseconds


def source(spark: SparkSession, plan: TriggerPlan, options: DetectorOptions) -> DataFrame:
    """The trigger table's change feed: data rows only (deletes are ignored without DELETE_RECALC)."""
    df = (spark.readStream.format("delta").option("readChangeFeed", "true")
          .option("startingVersion", str(options.starting_version)).load(plan.path))
    df = df.where(F.col("_change_type").isin(*_DATA_CHANGES))
    if plan.subtable is not None:
        df = df.where(F.col("tbname") == plan.subtable)
    return df.select(*plan.columns, "_commit_version")


def events_stream(df: DataFrame, plan: TriggerPlan, options: DetectorOptions) -> DataFrame:
    """Window events of a change-feed stream of raw trigger rows."""
    step = _Step(plan, options)
    grouped = df.groupBy(*plan.keys) if plan.keys else df.groupBy(F.lit(0).alias("_all"))
    return grouped.applyInPandasWithState(step, EVENT_SCHEMA, STATE_SCHEMA, "append", "NoTimeout")


def start(spark: SparkSession, plan: TriggerPlan, options: DetectorOptions, *,
          available_now: bool = False, interval: str = "1 second") -> StreamingQuery:
    """Start the detector query of ``plan``; with ``available_now`` it stops once caught up."""
    events = events_stream(source(spark, plan, options), plan, options)
    app_id = "airflow-stream-detector-" + hashlib.sha1(
        f"{plan.stream}\x1f{Path(options.checkpoint).resolve()}".encode()).hexdigest()[:16]

    def write(batch: DataFrame, batch_id: int) -> None:
        # an event row as written: the core's fields plus batch_id, seq and event_time
        rows = (batch.withColumn("batch_id", F.lit(batch_id).cast("bigint"))
                .withColumn("seq", F.monotonically_increasing_id())
                .withColumn("event_time", F.current_timestamp()))
        (rows.write.format("delta").mode("append")
         .option("txnAppId", app_id).option("txnVersion", batch_id)
         .save(options.events_path))

    writer = (events.writeStream.queryName(f"detector:{plan.stream}")
              .option("checkpointLocation", options.checkpoint).foreachBatch(write))
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime=interval)
    return writer.start()


class _Step:
    """The per-group state function: the core's carry plus rows waiting for the watermark."""

    def __init__(self, plan: TriggerPlan, options: DetectorOptions) -> None:
        self.plan = plan
        self.options = options

    def __call__(self, key: tuple, chunks: Iterator[pd.DataFrame], state) -> Iterator[pd.DataFrame]:  # noqa: ANN001
        plan = self.plan
        saved = json.loads(state.get[0]) if state.exists else {}
        raw = pd.concat(list(chunks), ignore_index=True)
        keys = plan.group_keys(tuple(key) if plan.keys else ())
        rows = plan.prepare(raw)
        frontier = saved.get("frontier")  # the latest time the core has scanned
        max_ts = saved.get("max_ts")
        if len(rows):
            top = int(rows["ts"].iat[-1])
            max_ts = top if max_ts is None else max(max_ts, top)
        late = rows["ts"] <= frontier if frontier is not None else pd.Series(False, index=rows.index)
        dropped = int(late.sum())
        rows = rows[~late]
        if self.options.expired_time is not None and max_ts is not None:
            expired = rows["ts"] < max_ts - self.options.expired_time
            dropped += int(expired.sum())
            rows = rows[~expired]
        pending = _from_records(saved.get("pending"), rows)
        waiting = pd.concat([pending, rows], ignore_index=True).sort_values("ts", kind="stable")
        watermark = None if max_ts is None else max_ts - plan.spec.watermark
        ready = waiting[waiting["ts"] <= watermark] if watermark is not None else waiting.iloc[0:0]
        waiting = waiting[waiting["ts"] > watermark] if watermark is not None else waiting
        windows, carry = scan(plan.spec, ready.reset_index(drop=True), saved.get("carry"), watermark=watermark)
        if len(ready):
            frontier = int(ready["ts"].iat[-1])
        saved.update(carry=carry, frontier=frontier, max_ts=max_ts, pending=_records(waiting),
                     dropped=saved.get("dropped", 0) + dropped)
        state.update((json.dumps(saved, default=_json_default),))
        out = event_rows(plan, keys, windows)
        yield out[list(EVENT_COLUMNS)] if len(out) else empty_events()


def _records(frame: pd.DataFrame) -> dict | None:
    if frame.empty:
        return None
    return {c: [v.item() if hasattr(v, "item") else v for v in frame[c].tolist()] for c in frame.columns}


def _from_records(records: dict | None, like: pd.DataFrame) -> pd.DataFrame:
    if not records:
        return like.iloc[0:0]
    frame = pd.DataFrame(records)
    frame["ts"] = frame["ts"].astype("int64")
    return frame


def _json_default(value: object) -> object:
    if hasattr(value, "item"):
        return value.item()
    return str(value)
