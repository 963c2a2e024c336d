"""Running a stream: CREATE/DROP, and ``airflow-stream run``: detection, then compute, then the write.

The same functions serve the CLI, the tests and the Airflow tasks. A run is at-least-once and
idempotent: progress (the last event batch consumed, the last PERIOD/SLIDING instant fired) is
saved only after the outputs are written, and outputs are upserts by key, so a run killed at any
point and started again writes the same rows once.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pandas as pd
import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql import types as T
from sqlglot import exp

from airflow_stream_provider import config
from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import (
    StreamDefinitionError,
    StreamError,
    did_you_mean,
)
from airflow_stream_provider.progress import Progress
from airflow_stream_provider.sql.dialect import StreamPlaceholder
from airflow_stream_provider.streams import output as out
from airflow_stream_provider.streams import status
from airflow_stream_provider.streams.compute import (
    IDX,
    TIMESTAMPS,
    TROWS_FROM,
    TROWS_TO,
    Compute,
    Fired,
    TriggerSource,
    column_of,
    constants,
)
from airflow_stream_provider.plan.schedule import Schedule
from airflow_stream_provider.streams.store import (
    StoredStream,
    StreamStore,
    detector_lock,
)
from airflow_stream_provider.warehouse.catalog import (
    TBNAME,
    Catalog,
    Column,
    SubTable,
    TableInfo,
    WarehouseError,
)
from airflow_stream_provider.warehouse.types import arrow_type, spark_type
from airflow_stream_provider.windows.clause import epoch_micros as _micros

#: fired triggers computed and written together
BATCH = 20_000
#: the most triggers computed in one job without reporting progress
STEP = 2_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _nanos(at: datetime) -> int:
    return _micros(at) * 1_000


_SAMPLE = {"string": "", "timestamp": _EPOCH, "boolean": False, "float": 0.0, "double": 0.0, "binary": b""}


@dataclass
class RunReport:
    stream: str
    triggers: int = 0
    result_rows: int = 0
    written: int = 0
    discarded: int = 0  # result rows with a NULL first column
    forced: int = 0  # FORCE_OUTPUT rows
    skipped: int = 0  # IGNORE_NODATA_TRIGGER
    deleted_subtables: list[str] = field(default_factory=list)
    per_trigger: str | None = None  # why the compute ran per trigger
    notified: int = 0  # events queued for notification
    delivery: object | None = None  # the notify.delivery.DeliveryReport of a run that delivered
    seconds: float = 0.0
    progress: dict = field(default_factory=dict)  # what the run consumed, for commit_progress

    def summary(self) -> str:
        parts = [f"{self.triggers} trigger{'s' if self.triggers != 1 else ''}",
                 f"{self.written} row{'s' if self.written != 1 else ''} written"]
        if self.discarded:
            parts.append(f"{self.discarded} discarded (NULL timestamp)")
        if self.forced:
            parts.append(f"{self.forced} forced (FORCE_OUTPUT)")
        if self.skipped:
            parts.append(f"{self.skipped} skipped (IGNORE_NODATA_TRIGGER)")
        if self.deleted_subtables:
            parts.append(f"output subtables deleted: {', '.join(self.deleted_subtables)}")
        if self.notified:
            parts.append(f"{self.notified} notification event{'s' if self.notified != 1 else ''} queued")
        if self.delivery is not None:
            parts.append(self.delivery.summary())  # type: ignore[attr-defined]
        return f"{self.stream}: " + ", ".join(parts) + f" in {self.seconds:.1f}s"


class StreamRuntime:
    """A stored (or about to be stored) stream resolved against the warehouse."""

    def __init__(self, warehouse, stmt: m.CreateStream, db: str,  # type: ignore[no-untyped-def]
                 skip_versions: tuple[tuple[int, int], ...] = ()) -> None:
        self.warehouse = warehouse
        self.skip_versions = tuple(tuple(r) for r in skip_versions)
        self.stmt = stmt
        self.db = db
        self.name = stmt.name.name.lower()
        self.found: TableInfo | SubTable | None = None
        self.info: TableInfo | None = None
        if stmt.trigger_table is not None:
            tdb = (stmt.trigger_table.db or db).lower()
            self.found = warehouse.catalog.resolve(stmt.trigger_table, tdb, "trigger table")
            self.info = self.found.stable if isinstance(self.found, SubTable) else self.found
        self.group_columns = self._group_columns()
        self.group_types = {f"%%{i}": spark_type(c.dtype) for i, c in enumerate(self.group_columns, start=1)}
        if any(c.name == TBNAME for c in self.group_columns):
            self.group_types["%%tbname"] = "string"
        self.source = self._source()
        self.compute = (Compute(warehouse, stmt.query.tree, self.source, group_types=self.group_types,
                                also=(self.info,) if self.info else ()) if stmt.query is not None else None)
        self._output: out.OutputPlan | None = None
        self.outputs: dict[str, str] = {}  # output subtable -> the trigger subtable it serves
        self.tables: dict[str, str] = {}  # group id -> the output (sub)table it writes
        self.notes = None  # streams.notify.RunNotifications of a stream with NOTIFY

    @property
    def qualified(self) -> str:
        return f"{self.db}.{self.name}"

    @property
    def precision(self) -> str:
        return self.info.precision if self.info else self.warehouse.catalog.precision(self.db)

    def _group_columns(self) -> list[Column]:
        if not self.stmt.partition_by:
            return []
        assert self.info is not None
        cols = []
        for name in self.stmt.partition_by:
            col = self.info.column(name)
            if col is None:
                raise StreamDefinitionError(
                    f"PARTITION BY: column {name} is not in {self.info.qualified}", clause="PARTITION BY",
                    hint=did_you_mean(name, [c.name for c in self.info.columns]))
            if col.role == "ts":
                raise StreamDefinitionError(f"PARTITION BY: {name} is the timestamp column; a group needs a "
                                            "subtable, tag or value column", clause="PARTITION BY")
            cols.append(col)
        return cols

    def _source(self) -> TriggerSource | None:
        if self.info is None:
            return None
        from airflow_stream_provider.sql import to_spark

        opts, trig = self.stmt.options, self.stmt.trigger
        pre = to_spark(opts.pre_filter.tree, timestamp_column=self.info.timestamp_column,
                       precision=self.info.precision) if opts.pre_filter else None
        return TriggerSource(
            path=str(self.info.path), ts_column=self.info.timestamp_column,
            keys=tuple(c.name for c in self.group_columns),
            subtable=self.found.name if isinstance(self.found, SubTable) else None, pre_filter=pre,
            count_columns=tuple(c.lower() for c in trig.columns) if isinstance(trig, m.CountWindow) else (),
            end_inclusive=not isinstance(trig, (m.IntervalWindow, m.SlidingTrigger)),
            changes=isinstance(trig, m.PeriodTrigger), skip_versions=self.skip_versions)

    def table_version(self) -> int | None:
        if self.info is None:
            return None
        from deltalake import DeltaTable

        return DeltaTable(str(self.info.path)).version()

    # --- output ---------------------------------------------------------------------------------

    def sample(self) -> Fired:
        """A trigger with a typed value for every placeholder: enough for Spark to type the results."""
        values: dict = {}
        assert self.compute is not None
        names = set(self.compute.used) | set(self.group_types) | {TROWS_FROM, TROWS_TO}
        for name in names:
            kind = "timestamp" if name in TIMESTAMPS else "bigint" if not name.startswith("%%") else \
                self.group_types.get(name, "string")
            values[name] = _SAMPLE.get(kind, 0)
        return Fired(0, values, version=self.table_version(), since_version=self.table_version())

    def output(self) -> out.OutputPlan | None:
        """The output table plan (None when results are not stored)."""
        stmt = self.stmt
        if stmt.query is None or stmt.into is None or stmt.options.calc_notify_only:
            return None
        if self._output is None:
            assert self.compute is not None
            schema = self.compute.frame([self.sample()]).schema
            self._output = out.OutputPlan.build(stmt, self.db, schema, self.group_columns)
        return self._output

    # --- triggers -> values ---------------------------------------------------------------------

    def group_key(self, values: dict) -> tuple:
        """The PARTITION BY values of a group, in order, from its %%1.. placeholder values."""
        return tuple(values.get(f"%%{j}") for j in range(1, len(self.group_columns) + 1))

    def group_values(self, keys: dict | tuple) -> dict:
        """%%1.., %%tbname of a group given as {column: value} or a tuple in PARTITION BY order."""
        if isinstance(keys, dict):
            lowered = {k.lower(): v for k, v in keys.items()}
            ordered = tuple(lowered.get(c.name) for c in self.group_columns)
        else:
            ordered = tuple(keys)
        values = {}
        for i, (col, value) in enumerate(zip(self.group_columns, ordered), start=1):
            if value is not None and self.group_types[f"%%{i}"] == "timestamp" and not isinstance(value, datetime):
                value = pd.Timestamp(value, tz="UTC").to_pydatetime()
            values[f"%%{i}"] = value
            if col.name == TBNAME:
                values["%%tbname"] = value
        return values


# --- lifecycle ------------------------------------------------------------------------------


def create(warehouse, stmt: m.CreateStream, store: StreamStore | None = None):  # type: ignore[no-untyped-def]
    """CREATE STREAM: check everything, create the output table, then record the stream."""
    from airflow_stream_provider.warehouse.warehouse import Result

    store = store or StreamStore()
    db = warehouse.database_of(stmt.name)
    warehouse.catalog.precision(db)  # the database must exist
    name = stmt.name.name.lower()
    if store.exists(db, name):
        if stmt.if_not_exists:
            return Result(stmt, f"exists: stream {db}.{name}")
        raise WarehouseError(f"stream {db}.{name} already exists")
    runtime = StreamRuntime(warehouse, stmt, db)
    plan = runtime.output()
    target = ""
    if plan is not None:
        plan.ensure_table(warehouse.catalog)
        target = f", output {plan.qualified}"
    now = datetime.now(UTC)
    store.create(db, stmt, stmt.text, {"created": now.isoformat(), "created_version": runtime.table_version()})
    trigger = f" on {runtime.found.qualified}" if runtime.found is not None else ""
    return Result(stmt, f"created stream {db}.{name}: {stmt.trigger}{trigger}{target}")


def drop(warehouse, stmt: m.DropStream, store: StreamStore | None = None):  # type: ignore[no-untyped-def]
    """DROP STREAM: the definition and progress go; the output tables stay."""
    from airflow_stream_provider.warehouse.warehouse import Result

    store = store or StreamStore()
    db = warehouse.database_of(stmt.name)
    name = stmt.name.name.lower()
    if not store.exists(db, name):
        if stmt.if_exists:
            return Result(stmt, "nothing to drop")
        store.get(db, name)  # raises, with a hint
    store.drop(db, name)
    return Result(stmt, f"dropped stream {db}.{name} (its output tables are kept)")


# --- run ------------------------------------------------------------------------------------


class StreamStopped(StreamError):
    """The stream is stopped (STOP STREAM); START STREAM resumes it."""


@contextmanager
def in_database(warehouse, db: str) -> Iterator[None]:  # type: ignore[no-untyped-def]
    """Resolve unqualified names in the stream's database while it runs, whatever the caller USEd."""
    previous = warehouse.database
    warehouse.database = db
    try:
        yield
    finally:
        warehouse.database = previous


def run(warehouse, db: str, name: str, *, store: StreamStore | None = None,  # type: ignore[no-untyped-def]
        now: datetime | None = None, batched: bool = True, progress: Callable[[str], None] | None = None,
        at: datetime | None = None, upto_batch: int | None = None, detect: bool = True,
        commit: bool = True) -> RunReport:
    """Run stream ``db.name``: detect what is pending, compute it, write it, record it.

    The CLI runs everything pending. An Airflow task narrows the run: ``at``, the instant of a
    PERIOD run; ``upto_batch``, the last detector batch a sensor reported; ``detect=False`` when
    the node's live detector did the detection. With ``commit=False`` the progress is returned in
    ``report.progress`` for :func:`commit_progress`, which a later task calls.
    """
    started = time.monotonic()
    store = store or StreamStore()
    stored = store.get(db, name)
    state = store.load_state(stored.db, stored.name)
    if state.get("stopped"):
        raise StreamStopped(f"stream {stored.qualified} is stopped; START STREAM {stored.qualified} resumes it")
    with in_database(warehouse, stored.db):
        report = _run(warehouse, stored, state, store, now=now, batched=batched, progress=progress, at=at,
                      upto_batch=upto_batch, detect=detect, commit=commit)
    report.seconds = time.monotonic() - started
    return report


def _run(warehouse, stored: StoredStream, state: dict, store: StreamStore, *, now: datetime | None,  # type: ignore[no-untyped-def]
         batched: bool, progress: Callable[[str], None] | None, at: datetime | None, upto_batch: int | None,
         detect: bool, commit: bool) -> RunReport:
    from airflow_stream_provider.streams import routing

    runtime = StreamRuntime(warehouse, stored.statement, stored.db, state.get("skip_versions", ()))
    report = RunReport(stored.qualified)
    say = progress or (lambda _msg: None)
    trigger = stored.statement.trigger
    runtime.notes = notify.RunNotifications(runtime, state) if stored.statement.notify is not None else None
    events = None
    if trigger.kind == "window":
        fired, update, events = _window_triggers(runtime, stored, state, say, detect=detect, upto_batch=upto_batch)
    elif isinstance(trigger, m.PeriodTrigger):
        fired, update = _period_triggers(runtime, state, now or datetime.now(UTC), report, at=at)
    else:
        fired, update = _sliding_triggers(runtime, state, report)
    report.triggers = len(fired)
    if fired:
        say(f"{len(fired)} trigger(s) fired; computing")
    history = stored.statement.options.fill_history is not None and trigger.kind == "window" \
        and state.get("consumed_batch") is None
    _compute_all(runtime, fired, report, batched=batched, say=say, stored=stored,
                 what=f"{'history fill' if history else 'compute'} of {stored.qualified}")
    if runtime.outputs:
        update["outputs"] = {**state.get("outputs", {}), **runtime.outputs}
    if stored.statement.options.delete_output_table:
        merged = {**state, **update}
        _delete_outputs(runtime, merged, report)
        update["outputs"] = merged.get("outputs", {})
    if runtime.notes is not None:
        _queue_notifications(runtime, stored, fired, events, report)
    if fired and runtime.compute is not None:
        update["computed"] = len(fired)
    report.progress = update
    if commit:
        if stored.statement.notify is not None:
            report.delivery = notify.deliver(stored, give_up_after=notify_patience(), say=say)
        commit_progress(stored.db, stored.name, update, store=store)
    return report


def notify_patience() -> float:
    """How long a run outside Airflow retries an ON_FAILURE_PAUSE receiver before it stops and
    leaves the messages waiting (``AIRFLOW_STREAM_NOTIFY_PAUSE_SECONDS``, default 60)."""
    return float(os.environ.get("AIRFLOW_STREAM_NOTIFY_PAUSE_SECONDS") or 60)


def _queue_notifications(runtime: StreamRuntime, stored: StoredStream, fired: list[Fired],
                         events: pd.DataFrame | None, report: RunReport) -> None:
    """Turn the run's events and results into notifications, into the stream's outbox."""
    from airflow_stream_provider.notify.delivery import Settings
    from airflow_stream_provider.streams.routing import outbox_of

    notes = runtime.notes
    assert notes is not None
    if events is not None:
        if events.empty:
            return
        names = table_names(runtime, {str(g): runtime.group_key(runtime.group_values(json.loads(k)))
                                      for g, k in zip(events["group_id"], events["group_keys"])})
        notes.add_windows(events, {f.source: f.idx for f in fired}, names)
    else:
        names = table_names(runtime, {f.group_id: f.group for f in fired})
        notes.add_scheduled(fired, names)
    box = outbox_of(stored)
    assert box is not None
    box.enqueue(notes.events, max_bytes=Settings.load().max_message_bytes)
    report.notified += len(notes.events)


def table_names(runtime: StreamRuntime, groups: dict[str, tuple]) -> dict[str, str]:
    """group id -> the name notifications give as ``tableName``: the group's output subtable, the
    output table, or (no output) the name an output subtable would have."""
    plan = runtime.output()
    if plan is None:
        return {gid: f"{runtime.name}_{gid}" for gid in groups}
    if not plan.grouped:
        return {gid: plan.name for gid in groups}
    missing = [Fired(0, {}, group=group, group_id=gid) for gid, group in groups.items() if gid not in runtime.tables]
    if missing:
        _output_groups(runtime, plan, plan.ensure_table(runtime.warehouse.catalog), missing)
    return {gid: runtime.tables[gid] for gid in groups}


def _compute_all(runtime: StreamRuntime, fired: list[Fired], report: RunReport, *, batched: bool,
                 say: Callable[[str], None], what: str, stored: StoredStream | None = None) -> None:
    """Compute and write ``fired`` in Spark jobs of at most :data:`BATCH` triggers. Work of more
    than :data:`STEP` triggers goes in about ten jobs, so that its progress (triggers done, %, ETA)
    is reported to ``say`` and, with ``stored``, recorded in the stream's ``progress.json``."""
    if not fired or runtime.compute is None:
        return
    step = min(BATCH, max(STEP, -(-len(fired) // 10)))
    progress = None
    if len(fired) > step:
        progress = Progress(what, len(fired), "triggers", say, path=stored.progress_path if stored else None)
    for i in range(0, len(fired), step):
        _compute_and_write(runtime, fired[i:i + step], report, batched=batched)
        if progress is not None:
            progress.advance(len(fired[i:i + step]))
    if progress is not None:
        progress.finish()


def commit_progress(db: str, name: str, update: dict, *, store: StreamStore | None = None) -> dict:
    """Record a run's progress. Batch and instant marks only move forward, so a late or repeated
    commit never rewinds a stream; ``computed`` is added to the stream's count. Then the outbox
    lets go of the messages every receiver has."""
    from airflow_stream_provider.streams.routing import outbox_of

    store = store or StreamStore()
    with store.updating(db, name) as state:
        for key, value in update.items():
            if key in ("consumed_batch", "detected_version", "last_version") and state.get(key) is not None \
                    and value is not None:
                state[key] = max(state[key], value)
            elif key == "computed":  # a count: each run adds its own
                state[key] = int(state.get(key, 0)) + int(value)
            elif key == "last_fired" and state.get(key):
                state[key] = max(state[key], value, key=datetime.fromisoformat)
            else:
                state[key] = value
        committed = dict(state)
    if store.exists(db, name):
        stored = store.get(db, name)
        box = outbox_of(stored)
        if box is not None:  # what every receiver has is not needed to rebuild this progress any more
            box.prune()
        try:
            status.record_sample(Catalog(config.warehouse()), stored, committed)
        except (OSError, WarehouseError) as err:  # the chart misses a point; the progress is committed
            logging.getLogger(__name__).warning("stream %s: no lag sample: %s", stored.qualified, err)
    return committed


def _compute_and_write(runtime: StreamRuntime, fired: list[Fired], report: RunReport, *, batched: bool) -> None:
    compute = runtime.compute
    assert compute is not None
    frame = compute.frame(fired, batched=batched)
    if compute.batched_reason:
        report.per_trigger = compute.batched_reason
    with runtime.warehouse.local_time():
        results = frame.toArrow()
    report.result_rows += results.num_rows
    if runtime.stmt.options.force_output:
        have = set(results[IDX].to_pylist())
        missing = [f for f in fired if f.idx not in have]
        if missing:
            forced = constants(compute, missing, frame.schema).toArrow()
            report.forced += forced.num_rows
            results = pa.concat_tables([results, forced.cast(results.schema)])
    if runtime.notes is not None:
        runtime.notes.collect(fired, results)
    plan = runtime.output()
    if plan is None or results.num_rows == 0:
        return
    info = plan.ensure_table(runtime.warehouse.catalog)
    by_idx = {f.idx: f for f in fired}
    names = [c.name for c in plan.columns]
    data = {n: results.column(i + 1) for i, n in enumerate(names)}
    if plan.grouped:
        groups = _output_groups(runtime, plan, info, [by_idx[i] for i in sorted(set(results[IDX].to_pylist()))])
        idx = results[IDX].to_pylist()
        data[TBNAME] = pa.array([groups[by_idx[i].group_id][0] for i in idx], pa.string())
        for j, tag in enumerate(plan.tags):
            data[tag.name] = pa.array([groups[by_idx[i].group_id][1][j] for i in idx],
                                      arrow_type(tag.dtype))
    written, discarded = out.write(info, pa.table(data))
    report.written += written
    report.discarded += discarded


def _output_groups(runtime: StreamRuntime, plan: out.OutputPlan, info: TableInfo,
                   fired: list[Fired]) -> dict[str, tuple[str, list]]:
    """group id -> (output subtable name, tag values), evaluated by Spark over the groups' keys,
    and each output subtable registered."""
    from airflow_stream_provider.sql import to_spark

    seen: dict[str, Fired] = {}
    for f in fired:
        seen.setdefault(f.group_id, f)
    spark = runtime.warehouse.spark
    cols = runtime.group_columns
    rows = []
    for gid, f in seen.items():
        values = runtime.group_values(f.group)
        rows.append([gid] + [values.get(f"%%{i}") for i in range(1, len(cols) + 1)])
    schema = ", ".join(["`__gid` string"] + [f"`{c.name}` {spark_type(c.dtype)}" for c in cols])
    frame = pd.DataFrame(rows, columns=["__gid"] + [c.name for c in cols])
    df = spark.createDataFrame(frame, schema=schema)
    for i, c in enumerate(cols, start=1):
        df = df.withColumn(column_of(f"%%{i}"), F.col(f"`{c.name}`"))
    if any(c.name == TBNAME for c in cols):
        df = df.withColumn("__tbname", F.col(TBNAME))

    def spark_expr(tree) -> str:  # type: ignore[no-untyped-def]
        bound = tree.copy().transform(
            lambda n: exp.column(column_of(n.name), quoted=True) if isinstance(n, StreamPlaceholder) else n)
        return to_spark(bound, precision=runtime.precision)

    exprs = [F.col("__gid")]
    exprs.append(F.expr(spark_expr(plan.subtable)).cast("string").alias("__name") if plan.subtable is not None
                 else F.lit(None).cast("string").alias("__name"))
    for j, tag in enumerate(plan.tags):
        exprs.append(F.expr(spark_expr(tag.expr)).cast(spark_type(tag.dtype)).alias(f"__tag{j}"))
    evaluated = df.select(*exprs).toPandas()
    out_groups: dict[str, tuple[str, list]] = {}
    catalog = runtime.warehouse.catalog
    for row in evaluated.itertuples(index=False):
        gid = row[0]
        name = row[1] if plan.subtable is not None else f"{runtime.name}_{gid}"
        if name is None or not str(name).strip():
            raise StreamError(f"stream {runtime.qualified}: OUTPUT_SUBTABLE gave no name for group "
                              f"{seen[gid].group}")
        name = str(name)[:out.MAX_NAME].lower()
        tags = [None if pd.isna(v) else (v.to_pydatetime() if isinstance(v, pd.Timestamp) else v) for v in row[2:]]
        catalog.create_subtable(info, name, dict(zip([t.name for t in plan.tags], tags)), if_not_exists=True)
        out_groups[gid] = (name, tags)
        runtime.tables[gid] = name
        tbname = runtime.group_values(seen[gid].group).get("%%tbname")
        if tbname is not None:
            runtime.outputs[name] = tbname
    return out_groups


# --- window triggers ------------------------------------------------------------------------

def _window_triggers(runtime: StreamRuntime, stored: StoredStream, state: dict, say, *,  # type: ignore[no-untyped-def]
                     detect: bool = True, upto_batch: int | None = None) -> tuple[list[Fired], dict, pd.DataFrame]:
    update: dict = {}
    version = runtime.table_version()
    if detect:
        with detector_lock(stored) as mine:
            if mine:
                _detect(runtime, stored, state, say)
                update["detected_version"] = version
            else:
                say("the live detector runs elsewhere (the stream node); reading its events")
    consumed = int(state.get("consumed_batch", -1))
    events = _read_events(str(stored.events_path), consumed, upto_batch)
    if upto_batch is not None and upto_batch > consumed:
        update["consumed_batch"] = upto_batch  # batches without events are consumed too
    if events.empty:
        return [], update, events
    update["consumed_batch"] = max(update.get("consumed_batch", -1), int(events["batch_id"].max()))
    return _fired_windows(runtime, events, version), update, events


def _detect(runtime: StreamRuntime, stored: StoredStream, state: dict, say) -> None:  # type: ignore[no-untyped-def]
    """Run the detector until it has read the trigger table as it is now (availableNow)."""
    from airflow_stream_provider.windows import detector

    plan = _trigger_plan(runtime)
    say(f"detecting windows on {plan.table}")
    query = detector.start(runtime.warehouse.spark, plan, detector_options(stored, state), available_now=True)
    query.awaitTermination()
    if query.exception() is not None:
        raise StreamError(f"the detector of {runtime.qualified} failed: {query.exception()}")


def _trigger_plan(runtime: StreamRuntime):  # type: ignore[no-untyped-def]
    from airflow_stream_provider.windows.clause import plan_trigger

    return plan_trigger(runtime.stmt, runtime.warehouse.catalog, runtime.db)


def detector_options(stored: StoredStream, state: dict):  # type: ignore[no-untyped-def]
    """The detector's paths and start, and the versions START ... IGNORE UNTREATED skipped."""
    from airflow_stream_provider.windows import detector

    return detector.DetectorOptions(
        events_path=str(stored.events_path), checkpoint=str(stored.checkpoint),
        created_version=state.get("created_version"),
        skip_versions=tuple(tuple(r) for r in state.get("skip_versions", ())))


def _fired_windows(runtime: StreamRuntime, events: pd.DataFrame, version: int | None) -> list[Fired]:
    """The events that run the computation as fired triggers: those of EVENT_TYPE, and MAX_DELAY
    (an invalidation is followed by the recomputed close). ``Fired.source`` is the event's row."""
    computed = (*runtime.stmt.options.event_types, "MAX_DELAY")
    events = events[events["event_type"].isin(computed)]
    unit = 1000 if runtime.precision == "ms" else 1  # microseconds per unit of the precision
    fired = []
    for i, (pos, ev) in enumerate(zip(events.index, events.itertuples(index=False))):
        start = ev.window_start.to_pydatetime()
        end = None if pd.isna(ev.window_end) else ev.window_end.to_pydatetime()
        group = runtime.group_values(json.loads(ev.group_keys))
        values = {"_twstart": start, "_twend": end, "_tgrpid": int(ev.group_id),
                  "_twduration": None if end is None else (_micros(end) - _micros(start)) // unit,
                  "_twrownum": None if pd.isna(ev.row_count) else int(ev.row_count),
                  "_tlocaltime": _nanos(ev.event_time.to_pydatetime()),
                  TROWS_FROM: start, TROWS_TO: end, **group}
        fired.append(Fired(i, values, version=version, group=runtime.group_key(group),
                           group_id=str(ev.group_id), trigger_id=ev.trigger_id, source=int(pos)))
    return fired


def _read_events(path: str, after_batch: int, upto_batch: int | None = None) -> pd.DataFrame:
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        table = DeltaTable(path)
    except TableNotFoundError:
        return pd.DataFrame()
    filters = [("batch_id", ">", after_batch)] + ([("batch_id", "<=", upto_batch)] if upto_batch is not None else [])
    frame = table.to_pyarrow_table(filters=filters).to_pandas()
    return frame.sort_values(["batch_id", "seq"], kind="stable").reset_index(drop=True)


# --- PERIOD ---------------------------------------------------------------------------------


def _version_at(path: str, at: datetime) -> int | None:
    """The table's version at ``at``: its last commit at or before it (None before the first)."""
    from deltalake import DeltaTable

    found = None
    for entry in DeltaTable(path).history():
        stamp = datetime.fromtimestamp(entry["timestamp"] / 1000, UTC)
        if stamp <= at and (found is None or entry["version"] > found):
            found = entry["version"]
    return found


def _groups(runtime: StreamRuntime, version: int | None) -> list[tuple]:
    """The groups of the trigger table: the distinct PARTITION BY values (one group without)."""
    if not runtime.group_columns or runtime.info is None:
        return [()]
    df = runtime.warehouse.spark.read.format("delta")
    if version is not None:
        df = df.option("versionAsOf", version)
    df = df.load(str(runtime.info.path))
    if runtime.source and runtime.source.subtable:
        df = df.where(F.col(TBNAME) == runtime.source.subtable)
    rows = df.select(*[F.col(f"`{c.name}`") for c in runtime.group_columns]).distinct().collect()
    return sorted((tuple(r) for r in rows), key=lambda t: tuple(str(v) for v in t))


def _changed_groups(runtime: StreamRuntime, since: int | None, until: int | None) -> dict[tuple, list[int]]:
    """group -> the versions in (since, until] that wrote rows of it (inserts and updates)."""
    if runtime.info is None or until is None or (since is not None and since >= until):
        return {}
    df = (runtime.warehouse.spark.read.format("delta").option("readChangeFeed", "true")
          .option("startingVersion", (since if since is not None else -1) + 1).option("endingVersion", until)
          .load(str(runtime.info.path)).where(F.col("_change_type").isin("insert", "update_postimage")))
    if runtime.source and runtime.source.pre_filter:
        df = df.where(F.expr(runtime.source.pre_filter))
    keys = [F.col(f"`{c.name}`") for c in runtime.group_columns]
    out: dict[tuple, list[int]] = {}
    for row in df.select(*keys, "_commit_version").distinct().collect():
        out.setdefault(tuple(row[:-1]), []).append(row[-1])
    return out


def period_schedule(stmt: m.CreateStream, state: dict) -> Schedule:
    trig = stmt.trigger
    assert isinstance(trig, m.PeriodTrigger)
    return Schedule(trig.period.to_timedelta(), trig.offset.to_timedelta() if trig.offset else timedelta(0),
                    config.timezone(), datetime.fromisoformat(state["created"]))


def _period_triggers(runtime: StreamRuntime, state: dict, now: datetime, report: RunReport, *,
                     at: datetime | None = None) -> tuple[list[Fired], dict]:
    """The due instants (all since the last one fired, or the one instant ``at`` of an Airflow run).
    %%trows of an instant is what was written since the previous instant, or since the last
    instant fired when runs were missed (a stop); START ... IGNORE UNTREATED moves that mark on."""
    schedule = period_schedule(runtime.stmt, state)
    created = schedule.created
    path = str(runtime.info.path) if runtime.info else None
    if at is not None:
        due = [at]
        prev = schedule.previous(at)
        since0 = _version_at(path, prev) if path and prev is not None and prev > created else \
            state.get("created_version")
        if state.get("last_version") is not None and since0 is not None:
            since0 = min(since0, state["last_version"])
        if state.get("untreated_version") is not None and since0 is not None:
            since0 = max(since0, state["untreated_version"])
        return _fire_instants(runtime, schedule, due, since0, report)
    last = datetime.fromisoformat(state["last_fired"]) if state.get("last_fired") else None
    due = list(schedule.instants(last or created, now))
    if not due:
        return [], {}
    since0 = state.get("last_version", state.get("created_version"))
    return _fire_instants(runtime, schedule, due, since0, report)


def _fire_instants(runtime: StreamRuntime, schedule: Schedule, due: list[datetime], since0: int | None,
                   report: RunReport) -> tuple[list[Fired], dict]:
    path = str(runtime.info.path) if runtime.info else None
    current = runtime.table_version()
    versions = [(_version_at(path, t) if path else None) for t in due]
    groups = _groups(runtime, current)
    nodata = runtime.stmt.options.ignore_nodata_trigger and path is not None
    changed = _changed_groups(runtime, since0, versions[-1]) if nodata else {}
    fired: list[Fired] = []
    since = since0
    for t, version in zip(due, versions):
        prev = schedule.previous(t)
        nxt = schedule.next_after(t)
        for group in groups:
            if nodata and not any((since is None or v > since) and v <= (version or -1)
                                  for v in changed.get(group, [])):
                report.skipped += 1
                continue
            gid = _group_id(runtime, group)
            values = {"_tlocaltime": _nanos(t), "_tprev_localtime": _nanos(prev) if prev else None,
                      "_tnext_localtime": _nanos(nxt), "_tgrpid": int(gid), **runtime.group_values(group)}
            fired.append(Fired(len(fired), values, version=version, since_version=since, group=group, group_id=gid,
                               trigger_id=f"{gid}:{_micros(t)}"))
        since = version if version is not None else since
    return fired, {"last_fired": due[-1].isoformat(), "last_version": since}


def _group_id(runtime: StreamRuntime, group: tuple) -> str:
    from airflow_stream_provider.windows.clause import TriggerPlan

    return TriggerPlan.group_id({c.name: v for c, v in zip(runtime.group_columns, group)})


# --- SLIDING (event time, no INTERVAL) ------------------------------------------------------


def _sliding_triggers(runtime: StreamRuntime, state: dict, report: RunReport) -> tuple[list[Fired], dict]:
    trig = runtime.stmt.trigger
    assert isinstance(trig, m.SlidingTrigger) and runtime.info is not None
    opts = runtime.stmt.options
    version = runtime.table_version()
    spark = runtime.warehouse.spark
    path = str(runtime.info.path)
    ts = runtime.info.timestamp_column
    created_version = state.get("created_version")
    if opts.fill_history is not None or created_version is None:
        df = spark.read.format("delta").option("versionAsOf", version).load(path)
    elif created_version >= version:
        return [], {}
    else:
        df = (spark.read.format("delta").option("readChangeFeed", "true")
              .option("startingVersion", created_version + 1).option("endingVersion", version).load(path)
              .where(F.col("_change_type").isin("insert", "update_postimage")))
    if runtime.source and runtime.source.subtable:
        df = df.where(F.col(TBNAME) == runtime.source.subtable)
    if runtime.source and runtime.source.pre_filter:
        df = df.where(F.expr(runtime.source.pre_filter))
    keys = [F.col(f"`{c.name}`") for c in runtime.group_columns]
    spans = df.groupBy(*keys).agg(F.min(F.col(f"`{ts}`")).alias("lo"), F.max(F.col(f"`{ts}`")).alias("hi")).collect()
    sliding = trig.sliding.to_timedelta()
    offset = trig.offset.to_timedelta() if trig.offset else timedelta(0)
    watermark = opts.watermark.to_timedelta() if opts.watermark else timedelta(0)
    groups_state: dict = dict(state.get("sliding", {}))
    candidates: list[tuple] = []
    for row in spans:
        group = tuple(row[:-2])
        gid = _group_id(runtime, group)
        lo, hi = row[-2].replace(tzinfo=UTC) if row[-2].tzinfo is None else row[-2], row[-1]
        hi = hi.replace(tzinfo=UTC) if hi.tzinfo is None else hi
        entry = groups_state.get(gid) or {"origin": (lo - timedelta(microseconds=1)).isoformat()}
        origin = datetime.fromisoformat(entry["origin"])
        schedule = Schedule(sliding, offset, config.timezone(), origin)
        last = datetime.fromisoformat(entry["last"]) if entry.get("last") else origin
        due = list(schedule.instants(last, hi - watermark))
        for t in due:
            candidates.append((group, gid, schedule.previous(t) or origin, t, schedule.next_after(t)))
        if due:
            entry = {**entry, "last": due[-1].isoformat()}
        groups_state[gid] = entry
    if opts.ignore_nodata_trigger and candidates:
        candidates, skipped = _with_rows(runtime, df, candidates)
        report.skipped += skipped
    fired = [sliding_fired(runtime, i, group, gid, prev, t, nxt, version)
             for i, (group, gid, prev, t, nxt) in enumerate(candidates)]
    return fired, {"sliding": groups_state}


def sliding_fired(runtime: StreamRuntime, idx: int, group: tuple, gid: str, prev: datetime, t: datetime,
                  nxt: datetime, version: int | None) -> Fired:
    """The SLIDING trigger of ``group`` at instant ``t``; %%trows holds its rows in [prev, t)."""
    values = {"_tprev_ts": prev, "_tcurrent_ts": t, "_tnext_ts": nxt, "_tgrpid": int(gid),
              "_tlocaltime": _nanos(t), TROWS_FROM: prev, TROWS_TO: t, **runtime.group_values(group)}
    return Fired(idx, values, version=version, group=group, group_id=gid, trigger_id=f"{gid}:{_micros(t)}")


def _with_rows(runtime: StreamRuntime, df, candidates: list[tuple]) -> tuple[list[tuple], int]:  # type: ignore[no-untyped-def]
    """IGNORE_NODATA_TRIGGER: keep the candidates whose [previous, current) holds rows."""
    spark = runtime.warehouse.spark
    cols = runtime.group_columns
    ts = runtime.info.timestamp_column  # type: ignore[union-attr]
    schema = T.StructType([T.StructField("__i", T.LongType()), T.StructField("__from", T.TimestampType()),
                           T.StructField("__to", T.TimestampType())]
                          + [T.StructField(f"__g{j}", T.StringType()) for j in range(len(cols))])
    rows = [(i, c[2], c[3], *[None if v is None else str(v) for v in c[0]]) for i, c in enumerate(candidates)]
    cand = spark.createDataFrame(rows, schema)
    cond = (F.col(f"`{ts}`") >= F.col("__from")) & (F.col(f"`{ts}`") < F.col("__to"))
    for j, c in enumerate(cols):
        cond = cond & (F.col(f"`{c.name}`").cast("string").eqNullSafe(F.col(f"__g{j}")))
    hits = {r[0] for r in cand.join(df, cond, "inner").select("__i").distinct().collect()}
    kept = [c for i, c in enumerate(candidates) if i in hits]
    return kept, len(candidates) - len(kept)


# --- DELETE_OUTPUT_TABLE --------------------------------------------------------------------


def _delete_outputs(runtime: StreamRuntime, state: dict, report: RunReport) -> None:
    """Remove the output subtable of each trigger subtable that no longer exists."""
    from airflow_stream_provider.warehouse import writer

    plan = runtime.output()
    outputs: dict[str, str] = dict(state.get("outputs", {}))
    if plan is None or runtime.info is None or not outputs:
        return
    catalog = runtime.warehouse.catalog
    info = plan.ensure_table(catalog)
    existing = set(catalog.subtables(runtime.info))
    for name, source in sorted(outputs.items()):
        if source in existing:
            continue
        found = catalog.lookup(m.TableName(name, info.db), info.db)
        if isinstance(found, SubTable):
            writer.delete_rows(info.path, writer.string_equals(TBNAME, found.name))
            catalog.drop_subtable_entry(found)
            report.deleted_subtables.append(found.qualified)
        del outputs[name]
    state["outputs"] = outputs
