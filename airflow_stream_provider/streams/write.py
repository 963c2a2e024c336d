"""Compute fired triggers and write their results: Spark jobs of bounded size with progress,
FORCE_OUTPUT rows, output subtables and their tags, and DELETE_OUTPUT_TABLE."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from decimal import Decimal

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema
from sqlglot import exp

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import StreamError
from airflow_stream_provider.plan.state import StreamState
from airflow_stream_provider.progress import Progress
from airflow_stream_provider.sql import to_spark
from airflow_stream_provider.sql.ast import StreamPlaceholder
from airflow_stream_provider.streams import duckdb
from airflow_stream_provider.streams import output as out
from airflow_stream_provider.streams.fired import IDX, Fired, column_of
from airflow_stream_provider.streams.runtime import BATCH, STEP, RunReport, StreamRuntime
from airflow_stream_provider.streams.store import StoredStream
from airflow_stream_provider.warehouse import writer
from airflow_stream_provider.warehouse.catalog import TBNAME, SubTable, TableInfo
from airflow_stream_provider.warehouse.types import arrow_type, spark_type
from airflow_stream_provider.windows.events import WindowEvent
from airflow_stream_provider.windows.select import has_aggregate
from airflow_stream_provider.windows.turns import elsewhere


def table_names(runtime: StreamRuntime, groups: dict[str, tuple]) -> dict[str, str]:
    """group id -> the name notifications give as ``tableName``: the group's output subtable, the
    output table, or (no output) the name an output subtable would have."""
    plan = runtime.output_plan
    if plan is None:
        return {gid: out.subtable_name(f"{runtime.name}_{gid}") for gid in groups}
    if not plan.grouped:
        return dict.fromkeys(groups, plan.name)
    missing = [Fired(0, {}, group=group, group_id=gid) for gid, group in groups.items() if gid not in runtime.tables]
    if missing:
        _output_groups(runtime, plan, plan.ensure_table(runtime.warehouse.catalog), missing)
    return {gid: runtime.tables[gid] for gid in groups}


#: called with each job's fired triggers and their result rows (the run's notifications collect them)
OnResults = Callable[[list[Fired], pa.Table], None]


def compute_all(runtime: StreamRuntime, fired: list[Fired], report: RunReport, *, batched: bool,
                say: Callable[[str], None], what: str, stored: StoredStream | None = None,
                on_results: OnResults | None = None) -> None:
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
        compute_and_write(runtime, fired[i:i + step], report, batched=batched, on_results=on_results)
        if progress is not None:
            progress.advance(len(fired[i:i + step]))
    if progress is not None:
        progress.finish()


def compute_and_write(runtime: StreamRuntime, fired: list[Fired], report: RunReport, *, batched: bool,
                      on_results: OnResults | None = None) -> None:
    with runtime.warehouse.scratch():  # the views the computation reads go with it
        results, fired = _compute(runtime, fired, report, batched=batched)
    if on_results is not None:
        on_results(fired, results)
    write_results(runtime, fired, results, report)


def _compute(runtime: StreamRuntime, fired: list[Fired], report: RunReport, *,
             batched: bool) -> tuple[pa.Table, list[Fired]]:
    """The result rows of ``fired`` (empty windows filled, FORCE_OUTPUT rows added), and the
    triggers they belong to."""
    compute = runtime.compute
    assert compute is not None
    fill = runtime.stmt.emit.fill
    empty = [f for f in fired if fill is not None and f.values.get("_twrownum") == 0]
    if empty:
        fired = [f for f in fired if f.values.get("_twrownum") != 0]
    assert runtime.duckdb_compute is not None  # made with the compute
    results = runtime.duckdb_compute.results(fired) if fired and batched else None
    if results is not None:  # a few rows: computed in the process, typed as Spark types them
        schema = runtime.result_schema
        results = duckdb.cast_to(results, to_arrow_schema(schema, timezone="UTC"))
        report.local += 1
    else:
        with elsewhere():  # while Spark computes, the other batches of a stream node's worker take their turns
            frame = compute.frame(fired, batched=batched) if fired else None
            if compute.batched_reason:
                report.per_trigger = compute.batched_reason
            schema = frame.schema if frame is not None else runtime.result_schema
            with runtime.warehouse.local_time():
                results = frame.toArrow() if frame is not None else None
    if empty:
        assert fill is not None
        filled = fill_windows(runtime, empty, schema, fill, fired, results)
        if results is not None:  # a filled aggregate may be NULL where a computed one never is (count)
            nullable = pa.schema([f.with_nullable(True) for f in results.schema])
            filled = pa.concat_tables([results.cast(nullable), filled.cast(nullable)])
        results = filled
        fired = [*fired, *empty]
    assert results is not None
    report.result_rows += results.num_rows
    if runtime.stmt.options.force_output:
        have = set(results[IDX].to_pylist())
        missing = [f for f in fired if f.idx not in have]
        if missing:
            forced = compute.constants(missing, schema).toArrow()
            report.forced += forced.num_rows
            results = pa.concat_tables([results, forced.cast(results.schema)])
    return results, fired


def fill_windows(runtime: StreamRuntime, empty: list[Fired], schema: T.StructType, fill: m.Fill,
                 computed: list[Fired], results: pa.Table | None) -> pa.Table:
    """The results of INTERVAL windows without rows, as FILL says (TDengine before 3.3.7): the items
    without an aggregate are computed as for any window; the aggregates are NULL, the VALUE
    constants, or (PREV) the group's previous result, from this batch (``computed`` and their
    ``results``) or else from the output table."""
    compute = runtime.compute
    assert compute is not None
    table = compute.constants(empty, schema).toArrow()
    if fill.mode == "NULL":
        return table
    items = compute.tree.expressions if isinstance(compute.tree, exp.Select) else []
    aggregates = [i + 1 for i, item in enumerate(items) if has_aggregate(item)]  # result columns, after __idx
    columns = {i: table.column(i).to_pylist() for i in aggregates}
    if fill.mode == "VALUE":
        for i, value in zip(aggregates, fill.values):
            columns[i] = [value] * table.num_rows
    else:  # PREV: in window order, each group carries its latest result forward
        history: dict[str, list[tuple[datetime, dict[int, object]]]] = {}
        if results is not None:
            by_idx = {f.idx: f for f in computed}
            for row in results.to_pylist():
                f = by_idx[row[IDX]]
                values = list(row.values())
                at = f.values["_twstart"]
                assert isinstance(at, datetime)  # window triggers have a start
                history.setdefault(f.group_id, []).append((at, {i: values[i] for i in aggregates}))
        by_idx = {f.idx: f for f in empty}
        rows = sorted(range(table.num_rows), key=lambda r: (by_idx[table[IDX][r].as_py()].group_id,
                                                              by_idx[table[IDX][r].as_py()].values["_twstart"]))
        read: set[str] = set()  # groups whose earlier results were read from the output table
        for r in rows:
            f = by_idx[table[IDX][r].as_py()]
            start = f.values["_twstart"]
            assert isinstance(start, datetime)
            if f.group_id not in read:
                history.setdefault(f.group_id, []).extend(_output_history(runtime, f, aggregates))
                read.add(f.group_id)
            earlier = [v for at, v in sorted(history[f.group_id], key=lambda e: e[0]) if at < start]
            for i in aggregates:
                columns[i][r] = earlier[-1][i] if earlier else None
            history[f.group_id].append((start, {i: columns[i][r] for i in aggregates}))
    arrays = [pa.array(columns[i], table.schema.field(i).type) if i in columns else table.column(i)
              for i in range(table.num_columns)]
    return pa.table(arrays, schema=table.schema)


def _output_history(runtime: StreamRuntime, trigger: Fired, aggregates: list[int]
                    ) -> list[tuple[datetime, dict[int, object]]]:
    """The results a group wrote before, from its output subtable: (window start, result columns)."""
    from deltalake import DeltaTable

    plan = runtime.output_plan
    if plan is None:
        return []
    info = plan.ensure_table(runtime.warehouse.catalog)
    names = table_names(runtime, {trigger.group_id: trigger.group})
    found = DeltaTable(str(info.path)).to_pyarrow_table(
        filters=[(TBNAME, "=", names[trigger.group_id])] if plan.grouped else None).to_pylist()
    column_of = {plan.source_of(j): c.name for j, c in enumerate(plan.columns) if plan.source_of(j) is not None}
    first = plan.columns[0].name
    return [(row[first], {i: row.get(column_of[i - 1]) if i - 1 in column_of else None for i in aggregates})
            for row in found]


def compute_results(runtime: StreamRuntime, fired: list[Fired], report: RunReport, *,
                    batched: bool = True) -> tuple[pa.Table, list[Fired]]:
    """The result rows of ``fired`` as a run computes them, written nowhere (VERIFY STREAM), and the
    triggers they belong to (FORCE_OUTPUT and filled windows included)."""
    with runtime.warehouse.scratch():
        return _compute(runtime, fired, report, batched=batched)


def write_results(runtime: StreamRuntime, fired: list[Fired], results: pa.Table, report: RunReport) -> None:
    """Write computed results (``__idx``, the trigger in ``fired``, then the query's columns) to the
    stream's output table, each group into its output subtable."""
    found = output_rows(runtime, fired, results)
    if found is None:
        return
    info, rows, _ = found
    written, discarded = out.write(info, rows)
    report.written += written
    report.discarded += discarded


def output_rows(runtime: StreamRuntime, fired: list[Fired], results: pa.Table
                ) -> tuple[TableInfo, pa.Table, pa.Array] | None:
    """The output table and the rows ``results`` become in it (its columns, each group's subtable
    name and tags), in the order the triggers fired, with each row's trigger (``__idx``); None when
    the stream writes nothing."""
    plan = runtime.output_plan
    if plan is None or results.num_rows == 0:
        return None
    # A run can fire one window more than once: its close, then from a later detector batch its
    # invalidation and new close (late rows, updates, deletes). The upsert keeps the last row of a
    # key, and Spark returns rows in no particular order, so the rows go in the order the triggers
    # fired (a stable sort keeps a trigger's own rows in order): the latest close is what stays.
    results = results.sort_by([(IDX, "ascending")])
    info = plan.ensure_table(runtime.warehouse.catalog)
    by_idx = {f.idx: f for f in fired}
    data = {}
    for i, column in enumerate(plan.columns):
        source = plan.source_of(i)
        data[column.name] = results.column(source + 1) if source is not None else pa.nulls(results.num_rows)
    if plan.grouped:
        present = sorted(pc.unique(results[IDX]).to_pylist())
        groups = _output_groups(runtime, plan, info, [by_idx[i] for i in present])
        # each row's subtable and tags: one value per trigger, taken by the row's trigger
        position = pc.index_in(results[IDX], value_set=pa.array(present, results.schema.field(IDX).type))
        data[TBNAME] = pa.array([groups[by_idx[i].group_id][0] for i in present], pa.string()).take(position)
        for j, tag in enumerate(plan.tags):
            data[tag.name] = pa.array([groups[by_idx[i].group_id][1][j] for i in present],
                                      arrow_type(tag.dtype)).take(position)
    return info, pa.table(data), results[IDX]


def _output_groups(runtime: StreamRuntime, plan: out.OutputPlan, info: TableInfo,
                   fired: list[Fired]) -> dict[str, tuple[str, list]]:
    """group id -> (output subtable name, tag values), from the groups' keys (by Spark when
    OUTPUT_SUBTABLE or a tag is an expression), once per group for the life of ``runtime`` (the node
    keeps a stream's runtime from batch to batch), and each output subtable registered."""
    seen: dict[str, Fired] = {}
    for f in fired:
        seen.setdefault(f.group_id, f)
    out_groups: dict[str, tuple[str, list]] = {}
    catalog = runtime.warehouse.catalog
    for gid in [g for g in seen if g in runtime.groups]:
        name, tags = out_groups[gid] = runtime.groups[gid]
        if not runtime.registered[gid].is_file():  # dropped meanwhile: registered again, as a fresh run would
            catalog.create_subtable(info, name, dict(zip([t.name for t in plan.tags], tags)), if_not_exists=True)
        del seen[gid]
    if not seen:
        return out_groups
    evaluated = _plain_group_rows(runtime, plan, seen)
    if evaluated is None:
        evaluated = _spark_group_rows(runtime, plan, seen)
    for row in evaluated:
        gid = row[0]
        name = row[1] if plan.subtable is not None else f"{runtime.name}_{gid}"
        if name is None or not str(name).strip():
            raise StreamError(f"stream {runtime.qualified}: OUTPUT_SUBTABLE gave no name for group "
                              f"{seen[gid].group}")
        if plan.subtable is not None and plan.subtable_suffix:
            name = f"{name}_{plan.name}_{gid}"
        name = out.subtable_name(str(name))
        tags = list(row[2:])
        catalog.create_subtable(info, name, dict(zip([t.name for t in plan.tags], tags)), if_not_exists=True)
        out_groups[gid] = runtime.groups[gid] = (name, tags)
        runtime.registered[gid] = catalog.subtable_entry(info.db, name)
        runtime.tables[gid] = name
        tbname = runtime.group_values(seen[gid].group).get("%%tbname")
        if tbname is not None:
            runtime.outputs[name] = tbname
    return out_groups


def _plain_group_rows(runtime: StreamRuntime, plan: out.OutputPlan, seen: dict[str, Fired]) -> list[tuple] | None:
    """(group id, subtable name, *tag values) of each group in ``seen`` when the plan names them
    without expressions: the default subtable names, and tags that are the group id, NULL or a
    PARTITION BY column of the tag's type. None: an expression Spark evaluates."""
    if plan.subtable is not None:
        return None
    types = {c.name.lower(): (f"%%{i}", c.dtype) for i, c in enumerate(runtime.group_columns, start=1)}
    picks: list[str | None] = []  # per tag: the placeholder of its value, "" for the group id, None for NULL
    for tag in plan.tags:
        if tag.expr is None:  # the group id, as a cast of its digits gives it
            if spark_type(tag.dtype) != spark_type(out.GROUP_ID_TAG.dtype):
                return None
            picks.append("")
        elif isinstance(tag.expr, exp.Null):
            picks.append(None)
        elif isinstance(tag.expr, exp.Column) and not tag.expr.table and tag.expr.name.lower() in types \
                and spark_type(types[tag.expr.name.lower()][1]) == spark_type(tag.dtype):
            picks.append(types[tag.expr.name.lower()][0])
        else:
            return None
    rows = []
    for gid, f in seen.items():
        values = runtime.group_values(f.group)
        rows.append((gid, None, *((Decimal(gid) if gid.isdigit() else None) if pick == "" else
                                  None if pick is None else values.get(pick) for pick in picks)))
    return rows


def _spark_group_rows(runtime: StreamRuntime, plan: out.OutputPlan, seen: dict[str, Fired]) -> list[tuple]:
    """(group id, subtable name, *tag values) of each group in ``seen``, OUTPUT_SUBTABLE and the tag
    expressions evaluated by Spark over the groups' keys."""
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
    if runtime.stmt.rollup_by is not None:  # %%rollup_tag: the last segment of the group's path
        leaves = {gid: runtime.group_values(f.group).get("%%rollup_tag") for gid, f in seen.items()}
        leaf = F.create_map(*[F.lit(x) for kv in leaves.items() for x in kv]) if leaves else None
        df = df.withColumn(column_of("%%rollup_tag"), leaf[F.col("__gid")] if leaf is not None
                           else F.lit(None).cast("string"))

    def spark_expr(tree: exp.Expr) -> str:
        bound = tree.copy().transform(
            lambda n: exp.column(column_of(n.name), quoted=True) if isinstance(n, StreamPlaceholder) else n)
        return to_spark(bound, precision=runtime.precision)

    exprs = [F.col("__gid")]
    exprs.append(F.expr(spark_expr(plan.subtable)).cast("string").alias("__name") if plan.subtable is not None
                 else F.lit(None).cast("string").alias("__name"))
    for j, tag in enumerate(plan.tags):
        value = F.col("__gid") if tag.expr is None else F.expr(spark_expr(tag.expr))  # None: the group id
        exprs.append(value.cast(spark_type(tag.dtype)).alias(f"__tag{j}"))
    evaluated: pd.DataFrame = df.select(*exprs).toPandas()
    return [(row[0], row[1], *(None if pd.isna(v) else (v.to_pydatetime() if isinstance(v, pd.Timestamp) else v)
                               for v in row[2:]))
            for row in evaluated.itertuples(index=False)]


def retract(runtime: StreamRuntime, gone: list[WindowEvent], report: RunReport) -> None:
    """Remove the results of windows that are gone (a legacy stream's WINDOW_INVALIDATION events
    with no later event): the row of the window's start in its group's output subtable."""
    plan = runtime.output_plan
    if plan is None or not gone:
        return
    groups = {e.group_id: runtime.group_key(runtime.group_values(json.loads(e.group_keys))) for e in gone}
    names = table_names(runtime, groups)
    info = plan.ensure_table(runtime.warehouse.catalog)
    first = plan.columns[0]
    starts = pa.array([e.window_start for e in gone], pa.timestamp("us", tz="UTC"))
    keys = {first.name: starts.cast(arrow_type(first.dtype))}
    if plan.grouped:
        keys = {TBNAME: pa.array([names[e.group_id] for e in gone], pa.string()), **keys}
    writer.delete_matching(info.path, pa.table(keys))
    report.retracted += len(gone)


def delete_outputs(runtime: StreamRuntime, state: StreamState, report: RunReport) -> dict[str, str]:
    """Remove the output subtable of each trigger subtable that no longer exists; the outputs left."""
    plan = runtime.output_plan
    outputs: dict[str, str] = dict(state.outputs)
    if plan is None or runtime.info is None or not outputs:
        return outputs
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
    return outputs
