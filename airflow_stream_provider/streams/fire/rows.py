"""What fired for a row trigger: every row written to the trigger table, computed at once.

A stream without a window (TDengine before 3.3.7: ``CREATE STREAM s INTO o AS SELECT ts, a * 2
FROM t WHERE a > 0 PARTITION BY tbname``) writes one output row per source row that passes WHERE,
keyed by its group's output subtable and the row's timestamp. A Structured Streaming query reads
the trigger table's change feed; each micro-batch takes every row key as the batch leaves it,
computes the select list over those rows in one Spark job and upserts the results, after removing
the earlier output row of every row that was deleted, moved to another group or rewritten. Writes
are by key, so a batch replayed after a crash writes the same rows once.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from sqlglot import exp

from airflow_stream_provider.exceptions import StreamError
from airflow_stream_provider.plan.state import StreamState
from airflow_stream_provider.sql.ast import PlaceholderTable
from airflow_stream_provider.streams.fire.windows import detector_options
from airflow_stream_provider.streams.fired import IDX, Fired
from airflow_stream_provider.streams.lateral import named
from airflow_stream_provider.streams.probes import checkpoint_id, last_commit
from airflow_stream_provider.streams.runtime import RunReport, StreamRuntime, group_id
from airflow_stream_provider.streams.store import StoredStream, detector_lock
from airflow_stream_provider.streams.write import table_names, write_results
from airflow_stream_provider.warehouse import mapping, writer
from airflow_stream_provider.warehouse.catalog import TBNAME
from airflow_stream_provider.warehouse.types import arrow_type
from airflow_stream_provider.windows.core import json_safe
from airflow_stream_provider.windows.detector import DetectorOptions

#: a history fill admits the table's whole snapshot in one micro-batch
_HISTORY_FILES = 1 << 30


def change_feed(spark: SparkSession, path: str, options: DetectorOptions, *, history: bool,
                subtable: str | None = None) -> DataFrame:
    """A trigger table's change feed as a Structured Streaming source, from the stream's creation
    (with ``history``, from its snapshot), without the versions START ... IGNORE UNTREATED skipped,
    of one subtable if given."""
    reader = spark.readStream.format("delta").option("readChangeFeed", "true")
    if history:
        reader = reader.option("maxFilesPerTrigger", _HISTORY_FILES)
    else:
        start = options.created_version if options.created_version is not None else options.starting_version
        reader = reader.option("startingVersion", str(start))
        if options.max_files_per_trigger:
            reader = reader.option("maxFilesPerTrigger", options.max_files_per_trigger)
    df = reader.load(path).transform(mapping.renamer(path))
    if not history and options.created_version is not None:
        df = df.where(F.col("_commit_version") > options.created_version)
    for lo, hi in options.skip_versions:
        df = df.where(~F.col("_commit_version").between(lo, hi))
    if subtable is not None:
        df = df.where(F.col("tbname") == subtable)
    return df


def pending_rows(runtime: StreamRuntime, stored: StoredStream, state: StreamState, say: Callable[[str], None],
                 report: RunReport, *, detect: bool = True) -> dict:
    """Run the row query until it has read the trigger table as it is now, unless the stream node
    runs it; the progress to record."""
    update: dict = {}
    if not detect:
        return update
    with detector_lock(stored) as mine:
        if not mine:
            say("the stream node writes this stream's rows as they come")
            return update
        options = detector_options(stored, state)  # refuses a lost checkpoint
        say(f"writing the rows of {runtime.found.qualified if runtime.found else runtime.qualified}")
        query = start(runtime, stored, options, available_now=True, report=report)
        query.awaitTermination()
        if query.exception() is not None:
            raise StreamError(f"the row query of {runtime.qualified} failed: {query.exception()}")
    update.update(detected_version=runtime.table_version(), checkpoint_id=checkpoint_id(stored.checkpoint))
    committed = last_commit(stored.checkpoint)
    if committed is not None:
        update["consumed_batch"] = committed[0]
    if state.failed:
        update["failed"] = None
    return update


def start(runtime: StreamRuntime, stored: StoredStream, options: DetectorOptions, *, available_now: bool,
          interval: str = "1 second", report: RunReport | None = None,
          after_batch: Callable[[int], None] | None = None) -> StreamingQuery:
    """Start the stream's row query over the trigger table's change feed (the detector's options:
    checkpoint, start, skipped versions); with ``available_now`` it stops once caught up."""
    assert runtime.info is not None, "a row trigger has a trigger table"
    report = report or RunReport(stored.qualified)
    subtable = runtime.source.subtable if runtime.source is not None else None
    changes = change_feed(runtime.warehouse.spark, str(runtime.info.path), options,
                          history=runtime.stmt.options.fill_history is not None, subtable=subtable)

    def batch(rows: DataFrame, batch_id: int) -> None:
        process(runtime, rows.drop("_commit_timestamp"), report)
        if after_batch is not None:
            after_batch(batch_id)

    query = (changes.writeStream.queryName(f"rows:{stored.qualified}")
             .option("checkpointLocation", options.checkpoint).foreachBatch(batch))
    query = query.trigger(availableNow=True) if available_now else query.trigger(processingTime=interval)
    return query.start()


def process(runtime: StreamRuntime, changes: DataFrame, report: RunReport) -> None:
    """One micro-batch of the change feed: remove the outputs of rows as they were, write those of
    rows as they are."""
    assert runtime.info is not None
    if changes.where(F.col("_change_type") != "insert").isEmpty():
        # new rows only: each key once, no earlier output to remove (a cheap scan of the change kind)
        compute_rows(runtime, changes.drop("_change_type", "_commit_version"), report)
        return
    key = list(runtime.info.key_columns)
    version = F.col("_commit_version")
    # within a version, the old row (pre-image, delete) comes before the new one
    order = F.when(F.col("_change_type").isin("update_preimage", "delete"), 0).otherwise(1)
    ordered = changes.withColumn("__first", F.row_number().over(Window.partitionBy(*key).orderBy(version, order)))
    ordered = ordered.withColumn("__last", F.row_number().over(
        Window.partitionBy(*key).orderBy(version.desc(), order.desc())))
    ordered = ordered.persist()
    try:
        before = ordered.where((F.col("__first") == 1) & F.col("_change_type").isin("update_preimage", "delete"))
        retract_rows(runtime, before, report)
        after = ordered.where((F.col("__last") == 1) & F.col("_change_type").isin("insert", "update_postimage"))
        compute_rows(runtime, after.drop("__first", "__last", "_change_type", "_commit_version"), report)
    finally:
        ordered.unpersist()


def retract_rows(runtime: StreamRuntime, before: DataFrame, report: RunReport) -> None:
    """Remove the output row of each of ``before`` (rows as they were): its group's output subtable,
    at its timestamp."""
    plan = runtime.output_plan
    assert runtime.info is not None
    if plan is None:
        return
    keys = [c.name for c in runtime.group_columns]
    ts = runtime.info.timestamp_column
    gone: pd.DataFrame = before.select(*[F.col(f"`{c}`") for c in [*keys, ts]]).toPandas()
    if gone.empty:
        return
    groups = {}
    gids = []
    for values in gone[keys].itertuples(index=False, name=None) if keys else [()] * len(gone):
        group = tuple(None if pd.isna(v) else v for v in values)
        gid = group_id(runtime, group)
        groups[gid] = group
        gids.append(gid)
    names = table_names(runtime, groups)
    info = plan.ensure_table(runtime.warehouse.catalog)
    first = plan.columns[0]
    doomed = {first.name: pa.array(pd.to_datetime(gone[ts], utc=True)).cast(arrow_type(first.dtype))}
    if plan.grouped:
        doomed = {TBNAME: pa.array([names[g] for g in gids], pa.string()), **doomed}
    writer.delete_matching(info.path, pa.table(doomed))
    report.retracted += len(gone)


def compute_rows(runtime: StreamRuntime, after: DataFrame, report: RunReport) -> None:
    """Compute the select list over ``after`` (rows as they are, before WHERE) and write the results,
    each into its group's output subtable."""
    source, query = runtime.source, runtime.stmt.query
    assert source is not None and query is not None
    if source.pre_filter:
        after = after.where(F.expr(source.pre_filter))
    keys = [c.name for c in runtime.group_columns]
    spark = after.sparkSession  # a micro-batch's rows live in its own session, with its temporary views
    view = f"_rows_{uuid.uuid4().hex[:12]}"
    after.createOrReplaceTempView(view)

    def from_view(node: exp.Expr) -> exp.Expr:
        if not isinstance(node, PlaceholderTable):
            return node
        alias = node.args.get("alias") or exp.TableAlias(this=exp.to_identifier("trows"))
        return exp.Subquery(this=exp.select("*").from_(exp.to_identifier(view, quoted=True)), alias=alias)

    tree = named(query.tree).transform(from_view)
    assert isinstance(tree, exp.Select)
    # the group's columns ride along, hidden, so each row finds its group without a join
    hidden = [exp.alias_(exp.column(k, quoted=True), f"__g{i}", quoted=True) for i, k in enumerate(keys)]
    tree.set("expressions", [*tree.expressions, *hidden])
    translate, _, _ = runtime.warehouse.translator(tree, also=(runtime.info,) if runtime.info else ())
    try:
        with runtime.warehouse.local_time():
            results = spark.sql(translate(tree)).toArrow()
    finally:
        with contextlib.suppress(Exception):  # the batch's session outlives the batch, unless it failed
            spark.catalog.dropTempView(view)
    if results.num_rows == 0:
        return
    width = results.num_columns - len(keys)
    codes, firsts = _groups(results.columns[width:], results.num_rows)
    groups = list(zip(*[_values(results.column(width + i).take(firsts)) for i in range(len(keys))])) \
        if keys else [()]
    fired = [Fired(i, runtime.group_values(g), group=g, group_id=group_id(runtime, g)) for i, g in enumerate(groups)]
    results = pa.table([pa.array(codes, pa.int64()), *results.columns[:width]],
                       names=[IDX, *results.column_names[:width]])
    report.triggers += results.num_rows
    report.result_rows += results.num_rows
    write_results(runtime, fired, results, report)


def _values(column: pa.ChunkedArray) -> list:
    """A key column's values as group values: timestamps in epoch microseconds, as elsewhere."""
    if pa.types.is_timestamp(column.type):
        column = column.cast(pa.timestamp("us", column.type.tz)).cast(pa.int64())
    return [json_safe(v) for v in column.to_pylist()]


def _groups(keys: list[pa.ChunkedArray], rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's group number, and for each group the first row that has it. A group is one
    combination of the key columns' values, NULL a value of its own; groups are numbered in the
    order they first appear."""
    codes = np.zeros(rows, np.int64)
    for column in keys:
        encoded = pc.dictionary_encode(column.combine_chunks(), null_encoding="encode")
        values = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        # compact after each column, so the combined code stays below rows * distinct values
        codes = np.unique(codes * max(len(encoded.dictionary), 1) + values, return_inverse=True)[1]
    _, firsts, inverse = np.unique(codes, return_index=True, return_inverse=True)
    order = np.argsort(firsts)  # number the groups as they first appear
    number = np.empty(len(order), np.int64)
    number[order] = np.arange(len(order))
    return number[inverse], firsts[order]
