"""TDengine window clauses in SELECT, on Spark.

``SELECT ... FROM t [WHERE ...] [PARTITION BY cols] INTERVAL(...) [SLIDING(...)] [FILL(...)]``, and
likewise SESSION, STATE_WINDOW, EVENT_WINDOW and COUNT_WINDOW. The window core assigns each row
to its window(s), per PARTITION BY group, in one ``applyInPandas`` job; Spark then aggregates the
select list per window with ``_wstart``, ``_wend`` and ``_wduration`` as columns. The windows are
the ones a stream over the same rows would close (``scan(..., final=True)``).

FILL (INTERVAL only) covers the windows between each group's first and last row:
``NONE`` (default), ``NULL``/``NULL_F``, ``VALUE[_F], v...`` (one value per select item with an
aggregate), ``PREV``, ``NEXT`` and ``LINEAR``. Only items with an aggregate are filled; the
others (``_wstart``, group columns, constants) are computed for every window.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TypeGuard

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T
from sqlglot import exp

from airflow_stream_provider import config
from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.model.events import TriggerKind
from airflow_stream_provider.sql.ast import DurationLiteral, PartitionClause, WindowClause
from airflow_stream_provider.sql.functions import AGGREGATES
from airflow_stream_provider.sql.tdengine.dialect import TDengine
from airflow_stream_provider.warehouse import SystemView, TableInfo, Warehouse, WarehouseError
from airflow_stream_provider.windows import expr
from airflow_stream_provider.windows.calendar import CalendarGrid
from airflow_stream_provider.windows.core import scan
from airflow_stream_provider.windows.spec import WindowSpec
from airflow_stream_provider.windows.trigger_plan import TriggerPlan

FILL_MODES = ("NONE", "NULL", "NULL_F", "VALUE", "VALUE_F", "PREV", "NEXT", "LINEAR")
_WINDOW_FIELDS = [T.StructField("_wstart", T.TimestampType()), T.StructField("_wend", T.TimestampType()),
                  T.StructField("_wduration", T.LongType()), T.StructField("_wid", T.LongType()),
                  T.StructField("_empty", T.BooleanType())]


def has_window(tree: exp.Expr) -> TypeGuard[exp.Select]:
    return isinstance(tree, exp.Select) and tree.args.get("td_window") is not None


def frame(warehouse: Warehouse, query: m.SqlExpression | exp.Expr, *, bindings: dict | None = None,
          also: tuple[TableInfo, ...] = (), views: Mapping[str, SystemView] | None = None) -> DataFrame:
    """A TDengine query over the warehouse's tables as a Spark DataFrame, window clauses included.

    :param bindings: placeholder values (see :func:`~airflow_stream_provider.sql.to_spark`).
    :param also: tables the query reads through views or Delta paths (for ``_c0``).
    :param views: the ``information_schema`` tables offered to the query.
    """
    tree = query.tree if isinstance(query, m.SqlExpression) else query
    if not has_window(tree):
        return warehouse.frame(tree, bindings=bindings, also=also, views=views)
    translate, ts_column, precision = warehouse.translator(tree, also=also, views=views)
    if bindings is not None:
        translate = functools.partial(translate, bindings=bindings)
    if ts_column is None:
        raise WarehouseError("a window clause needs exactly one table in FROM, to know its timestamp column")
    source = exp.select("*").from_(tree.args["from_"].copy())
    if tree.args.get("where") is not None:
        source.set("where", tree.args["where"].copy())
    return run(warehouse, tree, source=warehouse.spark.sql(translate(source)), ts_column=ts_column,
               precision=precision, translate=translate)


def table(warehouse: Warehouse, query: m.SqlExpression, *,
          views: Mapping[str, SystemView] | None = None) -> pa.Table:
    """The rows of a TDengine query, with timestamp strings read in ``AIRFLOW_STREAM_TIMEZONE``."""
    with warehouse.local_time(), warehouse.scratch():
        return frame(warehouse, query, views=views).toArrow()


#: the arguments a window clause cannot do without: how many, and what they are
_ARGUMENTS = {
    TriggerKind.INTERVAL: (1, "a duration, as INTERVAL(10s)"),
    TriggerKind.SESSION: (2, "the timestamp column and a gap, as SESSION(ts, 10s)"),
    TriggerKind.STATE_WINDOW: (1, "an expression, as STATE_WINDOW(status)"),
    TriggerKind.COUNT_WINDOW: (1, "a count, as COUNT_WINDOW(10)"),
}


def _reject(message: str, clause: str = "window clause") -> StreamDefinitionError:
    return StreamDefinitionError(message, clause=clause)


def _literal_micros(node: exp.Expr, clause: str, *, positive: bool = True) -> int:
    """A window clause's duration literal (``10s``) in microseconds, refused unless it has a fixed length."""
    if not isinstance(node, DurationLiteral):
        raise _reject(f"{clause} needs a duration such as 10s, not {node.sql(dialect=TDengine)}", clause)
    duration = m.Duration(node.count, node.unit)
    if duration.is_calendar or duration.unit == "b":
        raise _reject(f"{clause}({duration}) needs a fixed length in u, a, s, m, h, d or w", clause)
    if positive and duration.micros <= 0:
        raise _reject(f"{clause} must be positive, found {duration}", clause)
    if duration.micros > m.TIMESTAMP_SPAN_MICROS:
        raise _reject(f"{clause}({duration}) is longer than the whole range of timestamps (the years 1 to 9999)",
                      clause)
    return duration.micros


def _calendar(*nodes: exp.Expr | None) -> bool:
    return any(isinstance(n, DurationLiteral) and n.unit in m.CALENDAR_UNITS for n in nodes)


def _calendar_spec(args: list[exp.Expr], sliding_node: exp.Expr | None, *, keep_empty: bool) -> WindowSpec:
    """``INTERVAL(1n[, offset]) [SLIDING(...)]``: calendar months, quarters or years of the home's
    zone (TDengine 3.4.1), from January 1970; a fixed offset or sliding step as TDengine takes them."""

    def part(node: exp.Expr, clause: str) -> m.Duration:
        if isinstance(node, DurationLiteral) and node.unit in m.CALENDAR_UNITS:
            if node.count <= 0:
                raise _reject(f"{clause} must be positive, found {node.count}{node.unit}", clause)
            return m.Duration(node.count, node.unit)
        return m.Duration(_literal_micros(node, clause), "u")

    interval = part(args[0], "INTERVAL")
    sliding = part(sliding_node, "SLIDING") if sliding_node is not None else interval
    offset = m.Duration(_literal_micros(args[1], "INTERVAL offset", positive=False), "u") if len(args) > 1 else None
    if sliding.is_calendar and not interval.is_calendar:
        raise _reject(f"SLIDING({sliding}) is longer than INTERVAL({interval})", "SLIDING")
    shortest = interval.shortest() if interval.is_calendar else interval.to_timedelta()
    if offset is not None and offset.to_timedelta() >= shortest:
        raise _reject(f"the INTERVAL offset must be shorter than the interval ({shortest.days}d at least)", "INTERVAL")
    grid = CalendarGrid.of(interval, sliding, offset, config.timezone_name(), False)
    if grid is None or not grid.step_fits():
        raise _reject(f"SLIDING({sliding}) is longer than INTERVAL({interval})", "SLIDING")
    return WindowSpec.calendar(grid, keep_empty=keep_empty)


def _int(node: exp.Expr, clause: str) -> int:
    if not (isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit()):
        raise _reject(f"{clause} needs a positive whole number, not {node.sql(dialect=TDengine)}", clause)
    return int(node.this)


def plan_of(select: exp.Select, *, columns: list[str], ts_column: str) -> tuple[TriggerPlan, tuple]:
    """The window plan of a SELECT's window clause, and its FILL (mode, values)."""
    clause: WindowClause = select.args["td_window"]
    kind, args = clause.args["kind"], list(clause.args.get("expressions") or [])
    wanted = _ARGUMENTS.get(kind)
    if wanted is not None and len(args) < wanted[0]:
        raise _reject(f"{kind} needs {wanted[1]}", str(kind))
    by_lower = {c.lower(): c for c in columns}

    def column(node: exp.Expr, where: str) -> str:
        if not isinstance(node, exp.Column) or node.name.lower() not in by_lower:
            raise _reject(f"{where}: {node.sql(dialect=TDengine)} is not a column of the table", where)
        return by_lower[node.name.lower()]

    partition: PartitionClause | None = select.args.get("td_partition")
    keys = tuple(column(e, "PARTITION BY") for e in (partition.expressions if partition else []))
    fill = clause.args.get("fill")
    fill_mode, fill_values = "NONE", ()
    if fill is not None:
        items = fill.expressions if isinstance(fill, exp.Tuple) else [fill]
        if not items:
            raise _reject(f"FILL() names no fill mode; use one of {', '.join(FILL_MODES)}", "FILL")
        fill_mode = items[0].name.upper()
        fill_values = tuple(items[1:])
        if fill_mode not in FILL_MODES:
            raise _reject(f"FILL({fill_mode}) is not a fill mode; use one of {', '.join(FILL_MODES)}", "FILL")
        if kind != TriggerKind.INTERVAL:
            raise _reject("FILL applies to INTERVAL windows only", "FILL")
    true_for = clause.args.get("true_for")
    true_for_duration = _literal_micros(true_for, "TRUE_FOR", positive=False) if true_for is not None else None
    texts: dict = {}
    reads: list[str] = []

    def condition(tree: exp.Expr, name: str) -> None:
        """Keep a window condition (checked to be evaluable) and read its columns."""
        expr.check(tree, kind)
        reads.extend(column(exp.column(c), kind) for c in expr.columns_of(tree, ts_column))
        texts[name] = tree.sql(dialect=TDengine)

    if kind == TriggerKind.INTERVAL and _calendar(args[0], clause.args.get("sliding")):
        spec = _calendar_spec(args, clause.args.get("sliding"), keep_empty=fill_mode != "NONE")
    elif kind == TriggerKind.INTERVAL:
        interval = _literal_micros(args[0], "INTERVAL")
        offset = _literal_micros(args[1], "INTERVAL offset", positive=False) if len(args) > 1 else 0
        sliding = _literal_micros(clause.args["sliding"], "SLIDING") if clause.args.get("sliding") else interval
        if sliding > interval:
            raise _reject("SLIDING is longer than INTERVAL", "SLIDING")
        if offset >= interval:
            raise _reject("the INTERVAL offset must be shorter than the interval", "INTERVAL")
        spec = WindowSpec(TriggerKind.INTERVAL, interval=interval, sliding=sliding, offset=offset,
                          keep_empty=fill_mode != "NONE")
    elif kind == TriggerKind.SESSION:
        if column(args[0], "SESSION") != ts_column:
            raise _reject(f"SESSION needs the timestamp column {ts_column}", "SESSION")
        spec = WindowSpec(TriggerKind.SESSION, gap=_literal_micros(args[1], "SESSION"))
    elif kind == TriggerKind.STATE_WINDOW:
        condition(args[0], "state")
        spec = WindowSpec(TriggerKind.STATE_WINDOW, true_for_duration=true_for_duration)
    elif kind == TriggerKind.EVENT_WINDOW:
        fields = {}
        for name in ("start", "end"):
            condition(clause.args[name], name)
            fields[name] = tuple(column(exp.column(c), kind) for c in expr.columns_of(clause.args[name], ts_column))
        spec = WindowSpec(TriggerKind.EVENT_WINDOW, start_fields=fields["start"], end_fields=fields["end"],
                          true_for_duration=true_for_duration)
    elif kind == TriggerKind.COUNT_WINDOW:
        count = _int(args[0], "COUNT_WINDOW")
        slide = _int(args[1], "COUNT_WINDOW") if len(args) > 1 and isinstance(args[1], exp.Literal) else count
        cols = tuple(column(c, "COUNT_WINDOW") for c in args if isinstance(c, exp.Column))
        if not 0 < slide <= count:
            raise _reject(f"COUNT_WINDOW({count}, {slide}): the slide must be between 1 and the count", "COUNT_WINDOW")
        spec = WindowSpec(TriggerKind.COUNT_WINDOW, count=count, count_sliding=slide)
        texts["count_columns"] = cols
    else:
        raise _reject(f"{kind} is not a window clause")
    plan = TriggerPlan(stream="query", spec=spec, table="query", path="", ts_column=ts_column, keys=keys,
                       reads=tuple(dict.fromkeys(reads)), **texts)
    return plan, (fill_mode, fill_values)


def assign(df: DataFrame, plan: TriggerPlan, *, precision: str) -> DataFrame:
    """Each row of ``df`` once per window it belongs to, with ``_wstart``, ``_wend``, ``_wduration``
    (in the database precision) and ``_wid``; windows without rows (kept INTERVAL windows) get one
    row of NULLs with ``_empty``."""
    # nullable: an empty window's row has no values
    schema = T.StructType([T.StructField(f.name, f.dataType, True) for f in df.schema.fields] + _WINDOW_FIELDS)
    columns = df.columns
    unit = 1000 if precision == "ms" else 1

    def fn(raw):  # no type hints: Spark would read them as a UDF eval type
        return _assign_group(plan, raw, columns, unit)

    grouped = df.groupBy(*plan.keys) if plan.keys else df.groupBy(F.lit(0).alias("_all"))
    return grouped.applyInPandas(fn, schema=schema)


def _assign_group(plan: TriggerPlan, raw: pd.DataFrame, columns: list[str], unit: int) -> pd.DataFrame:
    spec = plan.spec
    order = [plan.ts_column, "tbname"] if "tbname" in raw else [plan.ts_column]
    raw = raw.sort_values(order, kind="stable").reset_index(drop=True)
    rows = plan.prepare(raw)  # the same order: prepare sorts stably by the same keys
    windows, _ = scan(spec, rows, None, final=True)
    ts = rows["ts"].to_numpy(np.int64)
    starts, ends = windows["wstart"].to_numpy(np.int64), windows["wend"].to_numpy(np.int64)
    member = np.ones(len(rows), bool)
    if spec.kind is TriggerKind.COUNT_WINDOW:
        member = rows["_valid"].to_numpy(bool) if "_valid" in rows else member
        positions = np.flatnonzero(member)
        first = windows["ordinal"].to_numpy(np.int64) * spec.count_sliding
        lo, hi = first, np.minimum(first + spec.count, len(positions))
        index = [positions[a:b] for a, b in zip(lo.tolist(), hi.tolist())]
    else:
        if spec.kind is TriggerKind.STATE_WINDOW:
            member = rows["_state"].notna().to_numpy(bool)
        lo = np.searchsorted(ts, starts, "left")
        hi = np.searchsorted(ts, ends, "left" if spec.kind is TriggerKind.INTERVAL else "right")
        index = [np.arange(a, b)[member[a:b]] for a, b in zip(lo.tolist(), hi.tolist())]
    sizes = np.array([len(i) for i in index], dtype=np.int64)
    taken = np.concatenate(index) if index else np.empty(0, np.int64)
    wid = np.repeat(np.arange(len(windows)), sizes)
    out = raw.iloc[taken].reset_index(drop=True)[columns]
    out["_wid"], out["_empty"] = wid, False
    empty = np.flatnonzero(sizes == 0)
    if len(empty):
        blank = raw.iloc[np.zeros(len(empty), np.int64)].reset_index(drop=True)[columns]
        for c in columns:  # an empty window's row: its group's keys, no values
            if c not in plan.keys:
                blank[c] = None
        blank["_wid"], blank["_empty"] = empty, True
        out = pd.concat([out, blank], ignore_index=True)
    w = out["_wid"].to_numpy(np.int64)
    out["_wstart"] = pd.to_datetime(starts[w], unit="us", utc=True)
    out["_wend"] = pd.to_datetime(ends[w], unit="us", utc=True)
    out["_wduration"] = (ends[w] - starts[w]) // unit
    return out[[*columns, "_wstart", "_wend", "_wduration", "_wid", "_empty"]]


def run(warehouse: Warehouse, select: exp.Select, *, source: DataFrame, ts_column: str, precision: str,
        translate: Callable[[exp.Expr], str]) -> DataFrame:
    """The result of a SELECT with a window clause over ``source`` (its FROM with WHERE applied).

    :param translate: TDengine tree -> Spark SQL (functions, pseudo-columns) for this table.
    """
    for arg in ("group", "having", "joins", "distinct"):
        if select.args.get(arg):
            raise _reject(f"{arg.upper()} cannot be combined with a window clause")
    plan, (fill_mode, fill_values) = plan_of(select, columns=source.columns, ts_column=ts_column)
    assigned = assign(source, plan, precision=precision)
    spark = warehouse.spark
    view = warehouse.temp_view(assigned, "_window_rows_")
    keys = [exp.column(k, quoted=True) for k in plan.keys]
    window_cols = [exp.column(c) for c in ("_wid", "_wstart", "_wend", "_wduration")]
    # result columns are named as TDengine names them: the item's alias, or its text (``count(*)``)
    items = [e.copy() if isinstance(e, exp.Alias) else
             exp.alias_(e.copy(), e.sql(dialect=TDengine, normalize_functions=False), quoted=True)
             for e in select.expressions]
    order = select.args.get("order")
    limit = select.args.get("limit")
    if fill_mode == "NONE":
        query = exp.select(*items).from_(view).where("NOT _empty").group_by(*keys, *window_cols)
        if order is None:
            query = query.order_by(*keys, exp.column("_wstart"))
        return spark.sql(translate(_finish(query, order, limit)))
    return _filled(warehouse, view, items, keys, window_cols, fill_mode, fill_values, order, limit, translate)


def _finish(query: exp.Select, order: exp.Expr | None, limit: exp.Expr | None) -> exp.Select:
    if order is not None:
        query.set("order", order.copy())
    if limit is not None:
        query.set("limit", limit.copy())
    return query


def has_aggregate(node: exp.Expr) -> bool:
    return any(isinstance(n, exp.Anonymous) and n.name.lower() in AGGREGATES for n in node.walk())


def _filled(warehouse: Warehouse, view: str, items: list[exp.Expr], keys: list[exp.Column],
            window_cols: list[exp.Column], mode: str, values: tuple, order, limit,
            translate: Callable[[exp.Expr], str]) -> DataFrame:
    aggregated = [i for i, e in enumerate(items) if has_aggregate(e)]
    if mode.startswith("VALUE") and len(values) != len(aggregated):
        raise _reject(f"FILL({mode}) needs {len(aggregated)} value(s), one per select item with an aggregate; "
                      f"got {len(values)}", "FILL")
    spark = warehouse.spark
    key_names = [k.name for k in keys]
    # the windows, every one of them, and the aggregates of those with rows
    windows = spark.sql(translate(exp.select(*keys, *window_cols).from_(view).distinct()))
    agg_items = [exp.alias_(items[i].unalias(), f"_a{i}") for i in aggregated]
    present = spark.sql(translate(
        exp.select(*keys, exp.column("_wid"), *agg_items, exp.alias_(exp.true(), "_present"))
        .from_(view).where("NOT _empty").group_by(*keys, exp.column("_wid"))))
    joined = windows.join(present, on=[*key_names, "_wid"], how="left")
    group = F.struct(*[F.col(f"`{k}`") for k in key_names]) if key_names else F.lit(0)
    before = Window.partitionBy(group).orderBy("_wstart").rowsBetween(Window.unboundedPreceding, 0)
    after = Window.partitionBy(group).orderBy("_wstart").rowsBetween(0, Window.unboundedFollowing)
    have = F.col("_present").isNotNull()
    t = F.unix_micros(F.col("_wstart"))
    for n, i in enumerate(aggregated):
        col = F.col(f"_a{i}")
        if mode in ("NULL", "NULL_F"):
            filled = col
        elif mode.startswith("VALUE"):
            value = F.expr(translate(values[n]))
            filled = F.when(have, col).otherwise(value)
        else:
            prev_v = F.last(F.when(have, col), ignorenulls=True).over(before)
            next_v = F.first(F.when(have, col), ignorenulls=True).over(after)
            if mode == "PREV":
                filled = F.when(have, col).otherwise(prev_v)
            elif mode == "NEXT":
                filled = F.when(have, col).otherwise(next_v)
            else:  # LINEAR: on the line between the nearest windows with a value, by window start
                prev_t = F.last(F.when(have & col.isNotNull(), t), ignorenulls=True).over(before)
                next_t = F.first(F.when(have & col.isNotNull(), t), ignorenulls=True).over(after)
                line = prev_v + (next_v - prev_v) * (t - prev_t) / (next_t - prev_t)
                filled = F.when(have, col).otherwise(line)
        joined = joined.withColumn(f"_a{i}", filled)
    filled_view = warehouse.temp_view(joined, f"{view}_filled_")
    final_items = [exp.alias_(exp.column(f"_a{i}"), e.alias, quoted=True) if i in aggregated else e
                   for i, e in enumerate(items)]
    query = exp.select(*final_items).from_(filled_view)
    if order is None:
        query = query.order_by(*keys, exp.column("_wstart"))
    return spark.sql(translate(_finish(query, order, limit)))

