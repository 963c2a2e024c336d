"""The ``spark`` detector engine: the windows of every stream on one trigger table, found by one
Structured Streaming query on the Spark cluster.

The query reads the table's Delta change feed once (``readChangeFeed``), gives each row to every
stream on the table that reads it (one copy per stream, keyed by the stream and its PARTITION BY
values), and runs each group through the same window step as the in-process detector
(:class:`.step.Step`) inside ``applyInPandasWithState``: a group's state is the step's JSON text,
kept in Spark's state store (the RocksDB provider), so it is bounded as the in-process detector's
is, by open windows and the WATERMARK span. The state function turns the group's windows into
event rows (:func:`.events.batch_event_rows`); ``foreachBatch`` appends each stream's events to
its event table in one Delta commit recording (app id, batch id) as a transaction, so a batch
that Spark replays after a crash is written once. The query's checkpoint (``offsets/``,
``commits/``, ``state/``) is Structured Streaming's own, and its ``commits/N`` are what the stream
DAG's sensor watches (:func:`airflow_stream_provider.streams.probes.last_commit`).

Given the same table versions in the same batches, the events are the in-process detector's:
the same windows, event types, fields and trigger ids (the group's key values reach the step as
JSON, as the in-process detector keeps them). Within a batch the events are ordered by group,
then window; ``seq`` numbers them in that order.

What the engine does not run (each refused when the stream is created, naming the engine):
MAX_DELAY (a processing-time timer per window), LOW_LATENCY_CALC (results computed inside the
detector's batch), FILL_HISTORY (the table's snapshot read before its changes), and the triggers of
TDengine's engine before 3.3.7.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from airflow_stream_provider.windows.columns import concat_windows
from airflow_stream_provider.windows.events import (
    EVENT_COLUMNS,
    EVENT_SCHEMA,
    batch_event_rows,
    commit_events,
    event_table,
    window_order,
)
from airflow_stream_provider.windows.late import DATA_CHANGES
from airflow_stream_provider.windows.step import Step
from airflow_stream_provider.windows.trigger_plan import TriggerPlan

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

#: the detector engines a stream or a node can name
ENGINES = ("in-process", "spark", "auto")
STATE_STORE_PROVIDER = "spark.sql.streaming.stateStore.providerClass"
#: Spark's RocksDB state store, which keeps the groups' state off the JVM heap
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
#: the state function's state: the step's JSON text
STATE_SCHEMA = "state string"
_STREAM, _KEY, _KEEP = "__stream", "__key", "__keep"
#: what the state function gives beside a group's events: one row per group it ran, its state as
#: the in-process detector keys it, and the last table version among its rows
_STATE_KEY, _STATE, _VERSION = "__state_key", "__state", "__version"
OUTPUT_SCHEMA = f"{EVENT_SCHEMA}, {_STATE_KEY} string, {_STATE} string, {_VERSION} long"
#: as many data files as a batch may read: a batch reads whole table versions, so a version is
#: never split between two batches (what a member caught up with is then a version boundary)
ALL_FILES = str(2**31 - 1)


def spark_refusal(plan: TriggerPlan) -> str | None:
    """Why the ``spark`` engine cannot detect ``plan``'s windows (None: it can)."""
    if plan.incremental is not None:
        return "the triggers of TDengine's engine before 3.3.7 (AT_ONCE, WINDOW_CLOSE, MAX_DELAY, ...)"
    if plan.max_delay is not None:
        return "MAX_DELAY"
    if plan.idle_timeout is not None:
        return "IDLE_TIMEOUT"
    if plan.history:
        return "FILL_HISTORY"
    if plan.nested:
        return "nested windows (WINDOW(...)): the in-process engine detects them"
    if plan.rollup:
        return "ROLLUP BY (its rows are read once per rollup group in the process: use the in-process engine)"
    return None


@dataclass(frozen=True)
class Member:
    """One stream the table's query detects for: its plan, its event table, the table versions it
    reads from (its creation's next one) and the ranges it never reads (IGNORE UNTREATED)."""

    plan: TriggerPlan
    events_path: str
    first_version: int = 0
    skip_versions: tuple[tuple[int, int], ...] = ()
    #: the stream's own detector checkpoint (the in-process format), which the query keeps up to date
    #: batch by batch (:mod:`.spark_mirror`): None, the query's batch ids and no checkpoint of its own
    mirror: str | None = None
    #: the groups' state to start from (the in-process key text -> the step's state text)
    seeds: Mapping[str, str] = field(default_factory=dict)
    #: what the query keys the stream's groups under in its state store (default: the stream's name);
    #: a member joining a query again takes a new one, so no state of an earlier run is read
    tag: str = ""

    @property
    def key(self) -> str:
        return self.tag or self.plan.stream

    @property
    def app_id(self) -> str:
        """The Delta transaction id its event commits record: with a mirror, the in-process
        detector's on the same checkpoint (the stream's batch ids go on across engines)."""
        if self.mirror is not None:
            from airflow_stream_provider.windows.checkpoint import app_id_of

            return app_id_of(self.plan.stream, self.mirror)
        return "airflow-stream-spark-detector-" + hashlib.sha1(
            f"{self.plan.stream}\x1f{self.plan.path}".encode()).hexdigest()[:16]


def _key_json(plan: TriggerPlan, types: dict[str, str]) -> Column:
    """A group's PARTITION BY values as JSON (a time as its microseconds), as the step reads them."""
    from pyspark.sql import functions as F

    if not plan.keys:
        return F.lit("{}")
    parts = []
    for i, name in enumerate(plan.keys):
        column = F.col(f"`{name}`")
        if types[name].startswith("timestamp"):
            column = F.unix_micros(column.cast("timestamp"))
        parts.append(column.alias(str(i)))
    return F.to_json(F.struct(*parts), {"ignoreNullFields": "false"})


def _keeps(member: Member, types: dict[str, str]) -> Column:
    """Which change-feed rows the member reads, as the in-process detector keeps them."""
    from pyspark.sql import functions as F

    plan = member.plan
    kinds = [*DATA_CHANGES, "update_preimage"] + (["delete"] if plan.reads_deletes else [])
    keep = F.col("_change_type").isin(kinds) & (F.col("_commit_version") >= F.lit(member.first_version))
    for lo, hi in member.skip_versions:
        keep = keep & ~F.col("_commit_version").between(lo, hi)
    if plan.subtable is not None:
        keep = keep & (F.col("tbname") == F.lit(plan.subtable))
    if plan.since is not None:
        keep = keep & (F.unix_micros(F.col(f"`{plan.ts_column}`").cast("timestamp")) >= F.lit(plan.since))
    return keep


#: what a member's batches tell: (before its checkpoint commits one, after), as the in-process
#: detector's ``after_batch`` and ``on_batch`` are told
Hooks = tuple[Callable[[Any], None] | None, Callable[[Any], None] | None]


class GroupStep:
    """The state function: one group of one stream through its :class:`.step.Step`, its windows as
    event rows. It runs on the executors, so it holds only plans (plain data)."""

    def __init__(self, members: Sequence[Member]) -> None:
        self.plans = {member.key: member.plan for member in members}
        self.seeds = {member.key: dict(member.seeds) for member in members}

    def __call__(self, key: tuple, frames: Iterator[pd.DataFrame], state: Any) -> Iterator[pd.DataFrame]:
        from airflow_stream_provider.windows.checkpoint import key_text as state_key

        stream, key_text = str(key[0]), str(key[1])
        plan = self.plans[stream]
        raw = pd.concat(list(frames), ignore_index=True)
        # the feed's order: by version, an update's old row before its new one
        rank = raw["_change_type"].map({"update_preimage": 0}).fillna(1).to_numpy(np.int64)
        order = np.lexsort((rank, raw["_commit_version"].to_numpy(np.int64)))
        raw = raw.iloc[order].reset_index(drop=True).drop(columns=[_STREAM, _KEY])
        values = tuple(json.loads(key_text).values())
        text = state_key(values if plan.keys else (0,))  # (the in-process detector's one group is (0,))
        last_version = int(raw["_commit_version"].max())
        saved = state.get[0] if state.exists else self.seeds[stream].get(text)
        done = Step(plan, timeouts=False).advance(values, raw, saved, int(time.time() * 1000))
        state.update((done.state,))
        yield pd.DataFrame({**{name: [None] for name in EVENT_COLUMNS}, "stream": [plan.stream],
                            "row_count": [len(raw)], _STATE_KEY: [text], _STATE: [done.state],
                            _VERSION: [last_version]})
        if not done.parts:
            return
        found: dict[str, list] = {}
        for kind, windows in done.parts:
            found.setdefault(kind, []).append(windows)
        joined = {kind: (concat_windows(parts), np.zeros(sum(len(p) for p in parts), np.int64))
                  for kind, parts in found.items()}
        events = batch_event_rows(plan, [plan.group_keys(values)], joined)
        if len(events):
            yield events[list(EVENT_COLUMNS)].assign(**{_STATE_KEY: None, _STATE: None, _VERSION: None})


class SparkTableDetector:
    """The Structured Streaming query detecting the windows of ``members`` (streams on one table).

    :param checkpoint: the query's checkpoint, a folder or an object-store prefix on the warehouse's
        file system; one per table (its state holds every member's groups).
    :param starting_version: the first table version the query reads when its checkpoint is new.
    """

    def __init__(self, spark: SparkSession, path: str, members: Sequence[Member], checkpoint: str,
                 starting_version: int, hooks: Mapping[str, Hooks] | None = None) -> None:
        if not members:
            raise ValueError("a table's detector query needs at least one stream")
        path = str(path)
        for member in members:
            if str(member.plan.path) != path:
                raise ValueError(f"stream {member.plan.stream} reads {member.plan.path}, not {path}")
            reason = spark_refusal(member.plan)
            if reason is not None:
                raise ValueError(f"stream {member.plan.stream}: the spark detector engine does not run {reason}")
        self.spark = spark
        self.path = path
        self.members = {member.plan.stream: member for member in members}
        self.checkpoint = checkpoint
        self.starting_version = starting_version
        #: per member with a mirror: what is told of each batch of its checkpoint, before and after it commits
        self.hooks = dict(hooks or {})
        self.mirrors: dict[str, Any] = {}
        for member in members:
            if member.mirror is not None:
                from airflow_stream_provider.windows.spark_mirror import Mirror

                self.mirrors[member.plan.stream] = Mirror(member, str(checkpoint))

    def _windows(self) -> DataFrame:
        from pyspark.sql import functions as F

        spark = self.spark
        feed = (spark.readStream.format("delta").option("readChangeFeed", "true")
                .option("startingVersion", str(self.starting_version))
                .option("maxFilesPerTrigger", ALL_FILES).load(self.path))
        types = dict(feed.dtypes)
        columns = list(dict.fromkeys(c for m in self.members.values() for c in m.plan.columns))
        copies = F.explode(F.array(*[
            F.struct(F.lit(m.key).alias(_STREAM), _key_json(m.plan, types).alias(_KEY), _keeps(m, types).alias(_KEEP))
            for m in self.members.values()])).alias("__copy")
        rows = feed.select(*[F.col(f"`{c}`") for c in columns], "_change_type", "_commit_version", copies)
        rows = rows.where(F.col("__copy." + _KEEP)).select(
            F.col("__copy." + _STREAM).alias(_STREAM), F.col("__copy." + _KEY).alias(_KEY),
            *[F.col(f"`{c}`") for c in columns], "_change_type", "_commit_version")
        step = GroupStep(list(self.members.values()))
        return rows.groupBy(_STREAM, _KEY).applyInPandasWithState(
            step, OUTPUT_SCHEMA, STATE_SCHEMA, "append", "NoTimeout")

    def _write(self, events: DataFrame, batch_id: int) -> None:
        """One batch's events, each stream's in one commit of its event table (once per batch)."""
        at_ms = int(time.time() * 1000)
        found = pd.DataFrame(events.toPandas())
        if not len(found):
            return
        states = found[found[_STATE_KEY].notna()]
        found = found[found[_STATE_KEY].isna()]
        for stream, member in self.members.items():
            rows = found[found["stream"] == stream]
            rows = _in_order(rows, member.plan.spec.conditions > 1) if len(rows) else rows[list(EVENT_COLUMNS)]
            mirror = self.mirrors.get(stream)
            if mirror is not None:
                mine = states[states["stream"] == stream]
                after, done = self.hooks.get(stream, (None, None))
                report = mirror.write(batch_id, rows, dict(zip(mine[_STATE_KEY], mine[_STATE], strict=True)),
                                      int(mine[_VERSION].max()) if len(mine) else None,
                                      int(mine["row_count"].sum()), at_ms, after)
                if report is not None and done is not None:
                    done(report)
                continue
            written = event_table([rows], batch_id, at_ms) if len(rows) else None
            if written is not None:
                commit_events(written, member.events_path, member.app_id, batch_id)

    def start(self, *, available_now: bool = False, every_s: float = 0.0) -> StreamingQuery:
        """Start the query: until the table as it is now is read (``available_now``), or for good,
        a batch every ``every_s`` seconds (0: as soon as the last one ends)."""
        writer = self._windows().writeStream.foreachBatch(self._write).option("checkpointLocation", self.checkpoint)
        writer = writer.queryName("airflow-stream-detector-" + hashlib.sha1(self.path.encode()).hexdigest()[:12])
        if available_now:
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=f"{every_s} seconds")
        # the query takes the session's settings as it starts (a copy of its own): the state store
        # provider is set for it alone, and the session's left as it was
        conf = self.spark.conf
        before = conf.get(STATE_STORE_PROVIDER, None)
        conf.set(STATE_STORE_PROVIDER, ROCKSDB_PROVIDER)
        try:
            return writer.start()
        finally:
            if before is None:
                conf.unset(STATE_STORE_PROVIDER)
            else:
                conf.set(STATE_STORE_PROVIDER, before)

    def run_available(self) -> None:
        """Run batches until the table as it is now is read."""
        query = self.start(available_now=True)
        query.awaitTermination()
        error = query.exception()
        if error is not None:
            raise error


_RANK = {"WINDOW_OPEN": 0, "MAX_DELAY": 1, "WINDOW_UPDATE": 1, "WINDOW_INVALIDATION": 2, "WINDOW_CLOSE": 3}


def _in_order(rows: pd.DataFrame, sub_events: bool = False) -> pd.DataFrame:
    """A stream's events of one batch by group, then window, then event kind, as a group's are."""
    rows = rows.assign(_rank=rows["event_type"].map(_RANK).fillna(4),
                       _ordinal=window_order(rows["window_ordinal"].fillna(-1).to_numpy(np.int64), sub_events))
    rows = rows.sort_values(["group_id", "window_start", "_ordinal", "_rank"], kind="stable")
    return rows.drop(columns=["_rank", "_ordinal"]).reset_index(drop=True)[list(EVENT_COLUMNS)]
