"""A stream's AS-subquery, run for a batch of fired triggers as one Spark job.

Each fired trigger carries its placeholder values (reference 000, "Placeholders"). They never
become text: the batch is a small table with one row per trigger and one column per placeholder,
and the query reads them as columns of that row.

- **Batched** (the usual case): ``SELECT ... FROM <triggers> t, LATERAL (<query>) q``. Placeholders
  in WHERE/HAVING become correlated references to ``t``; select items that use placeholders are
  split so that the placeholder part is evaluated beside the subquery and the data part inside it
  (:mod:`.lateral`). Spark decorrelates this into one join of the triggers with the data, one job
  for the batch.
- **Per trigger**, when Spark cannot decorrelate the query (placeholders inside aggregates or in
  GROUP BY, window clauses, set operations): each trigger's query gets its values as typed
  literals, and the per-trigger queries are unioned, still one job per chunk of triggers.

Both give exactly the result of the query run alone with that trigger's values, which is how the
tests check them. ``%%tbname`` reads the group's subtable; ``%%trows`` the group's trigger rows
as captured at the trigger's Delta version (PERIOD: the rows written between the previous and the
current trigger, from the change feed), after PRE_FILTER. Only the span of time the batch's
windows cover is read; a span whose files hold few rows (a live window) is read by delta-rs into a
local relation (:mod:`~airflow_stream_provider.warehouse.snapshots`), which spares Spark rebuilding
the table's snapshot at every new version.

The two paths stay in one module: both must bind every placeholder the same way, and the tests
hold them to the same results. A batch of few rows is computed without Spark by :mod:`.duckdb`.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pds
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from sqlglot import exp

from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.spark.session import arrow_frame
from airflow_stream_provider.sql.ast import PlaceholderTable, StreamPlaceholder, WindowClause
from airflow_stream_provider.sql.spark import Binding
from airflow_stream_provider.storage import is_remote
from airflow_stream_provider.streams.fired import (
    IDX,
    INTEGERS,
    ROLLUP_BELOW,
    TIMESTAMPS,
    TROWS_FROM,
    TROWS_TO,
    Fired,
    TriggerSource,
    base_name,
    column_of,
)
from airflow_stream_provider.streams.lateral import Unbatchable, is_star, named, reads_data, split, trigger_column
from airflow_stream_provider.warehouse import Warehouse, mapping, snapshots
from airflow_stream_provider.warehouse.resolve import table_source
from airflow_stream_provider.windows import select as window_select

log = logging.getLogger(__name__)

#: per-trigger queries unioned into one Spark job
CHUNK = 200
#: %%trows spans whose files hold at most this many rows are read by delta-rs, not by Spark
FEW_ROWS = 200_000


class Compute:
    """The AS-subquery of one stream, ready to run for batches of fired triggers.

    :param warehouse: resolves table names and runs Spark (the node's session when it runs).
    :param placeholders: name -> Spark type for the grouping placeholders (``%%1``: ``string``...).
    """

    def __init__(self, warehouse: Warehouse, query: exp.Expr, source: TriggerSource | None, *,
                 group_types: dict[str, str] | None = None, also: tuple = ()) -> None:
        self.warehouse = warehouse
        self.tree = named(query)
        self.source = source
        self.group_types = dict(group_types or {})
        self.also = also
        self.used = sorted({n.name for n in self.tree.find_all(StreamPlaceholder)})
        self.trows = any(t.name == "%%trows" for t in self.tree.find_all(PlaceholderTable))
        self.batched_reason: str | None = None  # why the last batch ran per trigger, if it did

    @property
    def spark(self) -> SparkSession:
        return self.warehouse.spark

    # --- entry point ----------------------------------------------------------------------------

    def frame(self, fired: Sequence[Fired], *, batched: bool = True) -> DataFrame:
        """The results of ``fired``: column ``__idx`` (the trigger) then the query's columns.

        It reads temporary views: run it inside the warehouse's :meth:`~Warehouse.scratch`."""
        if not fired:
            raise ValueError("no triggers to compute")
        views: dict[object, str] = {}
        adjusted = [t for t in fired if t.adjust is not None]
        if adjusted:  # each of these reads rows of its own: one query per trigger
            plain = [t for t in fired if t.adjust is None]
            parts = [self._per_trigger(adjusted, views)] + ([self.frame(plain, batched=batched)] if plain else [])
            return functools.reduce(DataFrame.unionAll, parts)
        if batched:
            try:
                return self._batched(fired, views)
            except Unbatchable as why:
                self.batched_reason = str(why)
                log.info("computing per trigger: %s", why)
        return self._per_trigger(fired, views)

    # --- %%trows and %%tbname -------------------------------------------------------------------

    def _trows_view(self, trigger: Fired, views: dict[object, str],
                    bounds: tuple[datetime, datetime] | None = None) -> str:
        """A temporary view of the trigger table as trigger ``trigger`` saw it.

        :param bounds: the earliest and latest row time any trigger reading the view takes: rows
            outside are left out before the query runs, so Delta skips the files that hold none.
        """
        src = self.source
        assert src is not None
        key = ("changes", trigger.since_version, trigger.version) if src.changes else \
            ("at", trigger.version, bounds, trigger.adjust)
        if key in views:
            return views[key]
        reader = self.spark.read.format("delta")
        if src.changes:
            start = (trigger.since_version or 0) + 1
            if trigger.version is None or trigger.version < start:
                df = reader.load(src.path).transform(mapping.renamer(src.path)).limit(0)
            else:
                df = (reader.option("readChangeFeed", "true").option("startingVersion", start)
                      .option("endingVersion", trigger.version).load(src.path).transform(mapping.renamer(src.path))
                      .where(F.col("_change_type").isin("insert", "update_postimage"))
                      .drop("_change_type", "_commit_version", "_commit_timestamp"))
        else:
            few = self._few_rows(trigger.version, bounds) if bounds is not None else None
            if few is not None:
                df = few
            else:
                if trigger.version is not None:
                    reader = reader.option("versionAsOf", trigger.version)
                log.debug("%%%%trows of %s at version %s, read by Spark", src.path, trigger.version)
                df = self._without_skipped(reader.load(src.path).transform(mapping.renamer(src.path)), trigger.version)
                if bounds is not None:
                    df = df.where(F.col(src.ts_column).between(F.lit(bounds[0]), F.lit(bounds[1])))
        if trigger.adjust is not None:
            df = self._adjusted(df, json.loads(trigger.adjust))
        if src.subtable is not None:
            df = df.where(F.col("tbname") == src.subtable)
        if src.pre_filter:
            df = df.where(F.expr(src.pre_filter))
        if src.count_columns:
            df = df.where(functools.reduce(lambda a, b: a | b, [F.col(c).isNotNull() for c in src.count_columns]))
        name = self.warehouse.temp_view(df, "_trows_")
        views[key] = name
        return name

    def bounds(self, fired: Sequence[Fired]) -> tuple[datetime, datetime] | None:
        """The span of row times ``fired`` read through ``%%trows`` (None: not a span of time)."""
        if self.source is None or self.source.changes:
            return None
        lows: list[datetime] = []
        highs: list[datetime] = []
        for t in fired:
            low, high = t.values.get(TROWS_FROM), t.values.get(TROWS_TO)
            if low is None or high is None:
                return None
            # the trigger builders set both as aware datetimes (they are TIMESTAMPS)
            assert isinstance(low, datetime) and isinstance(high, datetime)
            lows.append(low)
            highs.append(high)
        return min(lows), max(highs)

    def _few_rows(self, version: int | None, bounds: tuple[datetime, datetime]) -> DataFrame | None:
        """:meth:`few_rows_table` as a local relation of Spark."""
        found = self.few_rows_table(version, bounds)
        return None if found is None else arrow_frame(self.spark, *found)

    def few_rows_table(self, version: int | None, bounds: tuple[datetime, datetime | None],
                       limit: int | None = None) -> tuple[pa.Table, T.StructType] | None:
        """The trigger table's rows in ``bounds`` at ``version`` and its schema, read by delta-rs
        when the files that may hold them have at most ``limit`` rows in all (default :data:`FEW_ROWS`);
        both bounds are included, and an upper bound of None reads every row from the lower one on.

        A live window reads a few rows of a table just written to. Spark would first rebuild the
        table's snapshot at the new version (a job of its own); the files' statistics tell which
        few to read. None: the rows are too many, or the table needs Spark (skipped versions,
        features neither delta-rs nor its kernel scan reads). An attached table's rows are read under
        its own column names and renamed to the model's (:mod:`~airflow_stream_provider.warehouse.mapping`).
        """
        from deltalake.exceptions import DeltaError

        src = self.source
        assert src is not None
        limit = FEW_ROWS if limit is None else limit
        if src.skip_versions:
            return None
        try:
            snapshot = snapshots.snapshot(src.path, version)  # None: the latest
        except DeltaError as err:
            log.info("reading %%trows with Spark: %s", err)
            return None
        (ts,) = mapping.sources(src.path, [src.ts_column])  # (an attached table's own name)
        files, schema, arrow_schema = snapshot.files, snapshot.schema, snapshot.arrow_schema
        kind = arrow_schema.field(ts).type
        lo, hi = (None if b is None else pa.scalar(b if kind.tz else b.astimezone(UTC).replace(tzinfo=None), kind)
                  for b in bounds)
        if f"min.{ts}" in files.column_names and f"max.{ts}" in files.column_names:
            # a file may hold rows in bounds unless its statistics say otherwise (none: it may)
            outside = pc.less(files[f"max.{ts}"], lo)
            if hi is not None:
                outside = pc.or_(pc.greater(files[f"min.{ts}"], hi), outside)
            files = files.filter(pc.invert(pc.fill_null(outside, False)))
        if files.num_rows and (pc.sum(files["num_records"]).as_py() or 0) > limit:
            return None
        if snapshot.files_as_they_are(files) and not is_remote(src.path):
            # the few files the statistics keep, read as they are: plain Parquet files (no partitions to
            # add, no deletion vector to apply), their columns renamed from the names column mapping gave
            names = [str(Path(src.path) / unquote(f)) for f in files["path"].to_pylist()]
            rows = snapshots.file_rows(names, snapshot.file_schema()).rename_columns(arrow_schema.names)
            inside = pc.greater_equal(rows[ts], lo)
            rows = rows.filter(inside if hi is None else pc.and_(inside, pc.less_equal(rows[ts], hi)))
        else:
            try:  # (deletion vectors, column mapping: the kernel's scan reads the span)
                dataset = snapshots.dataset(src.path, snapshot.version, between=(ts, *bounds))
            except DeltaError as err:  # a table feature the kernel cannot read
                log.info("reading %%trows with Spark: %s", err)
                return None
            inside = pds.field(ts) >= lo
            rows = dataset.to_table(filter=inside if hi is None else inside & (pds.field(ts) <= hi))
        log.debug("%%%%trows of %s at version %s in [%s, %s]: %d rows of %d files, read by delta-rs",
                  src.path, version, bounds[0], bounds[1], rows.num_rows, files.num_rows)
        mapped = mapping.of(src.path)
        if mapped is not None:  # the model's columns, in its order, from the table's own
            schema = T.StructType([T.StructField(c.name, schema[c.source].dataType, schema[c.source].nullable)
                                   for c in mapped if c.source in schema.fieldNames()])
            rows = mapping.arrow(src.path, rows)
        columns = [rows[name] for name in schema.fieldNames()]
        # plain values: partitions come as dictionaries, strings as views
        columns = [c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c for c in columns]
        columns = [c.cast(pa.string()) if pa.types.is_string_view(c.type) else c for c in columns]
        return pa.table(columns, names=schema.fieldNames()), schema

    def _adjusted(self, df: DataFrame, adjust: dict) -> DataFrame:
        """The rows ``df`` as a window counts them: without the rows of the ``drop`` keys, with the
        ``add`` rows (values as the detector keeps them: timestamps in microseconds)."""
        schema = df.schema
        keys: list[str] = adjust["keys"]
        if adjust["drop"]:
            dropped = _local_frame(self.spark, [dict(zip(keys, k)) for k in adjust["drop"]],
                                   T.StructType([schema[k] for k in keys]))
            df = df.join(dropped, on=keys, how="left_anti").select(*schema.fieldNames())
        if adjust["add"]:
            df = df.unionByName(_local_frame(self.spark, adjust["add"], schema))
        return df

    def _without_skipped(self, df: DataFrame, version: int | None) -> DataFrame:
        """``df`` without the rows last written in the skipped version ranges."""
        src = self.source
        assert src is not None
        key = [c for c in ("tbname", src.ts_column) if c in df.columns]
        for lo, hi in src.skip_versions:
            if version is not None and lo > version:
                continue
            hi = hi if version is None else min(hi, version)
            written = (self.spark.read.format("delta").option("readChangeFeed", "true")
                       .option("startingVersion", lo).option("endingVersion", hi).load(src.path)
                       .transform(mapping.renamer(src.path))
                       .where(F.col("_change_type").isin("insert", "update_postimage")).select(*key).distinct())
            df = df.join(written, on=key, how="left_anti")
        return df

    def _replace_tables(self, tree: exp.Expr, view_of: Callable[[], str | None]) -> exp.Expr:
        """``FROM %%tbname`` -> the group's subtable; ``FROM %%trows`` -> the group's trigger rows."""
        src = self.source

        def convert(node: exp.Expr) -> exp.Expr:
            if not isinstance(node, PlaceholderTable):
                return node
            if src is None:
                raise StreamDefinitionError(f"{node.name} needs a trigger table (FROM)")
            alias = node.args.get("alias") or exp.TableAlias(this=exp.to_identifier(node.name[2:]))
            if node.name == "%%tbname":
                inner = exp.select("*").from_(table_source(src.path)).where(
                    exp.column("tbname").eq(StreamPlaceholder(this="%%tbname")))
                return exp.Subquery(this=inner, alias=alias)
            view = view_of()
            assert view is not None  # the query reads %%trows, so its caller made the view
            inner = exp.select("*").from_(exp.to_identifier(view, quoted=True))
            conditions: list[exp.Expr] = [_in_group(src, k, i) for i, k in enumerate(src.keys, start=1)]
            if not src.changes:
                ts = exp.column(src.ts_column, quoted=True)
                conditions.append(exp.GTE(this=ts.copy(), expression=StreamPlaceholder(this=TROWS_FROM)))
                upper = exp.LTE if src.end_inclusive else exp.LT
                conditions.append(upper(this=ts.copy(), expression=StreamPlaceholder(this=TROWS_TO)))
            if conditions:
                inner = inner.where(exp.and_(*conditions))
            return exp.Subquery(this=inner, alias=alias)

        return tree.transform(convert)

    # --- per trigger ----------------------------------------------------------------------------

    def _per_trigger(self, fired: Sequence[Fired], views: dict[object, str]) -> DataFrame:
        frames = []
        for trigger in fired:

            def view_of(t: Fired = trigger) -> str:
                return self._trows_view(t, views, self.bounds([t]))

            tree = self._replace_tables(self.tree, view_of)
            bindings = self.bindings(trigger)
            df = window_select.frame(self.warehouse, tree, bindings=bindings, also=self.also)
            frames.append(df.select(F.lit(trigger.idx).cast("bigint").alias(IDX),
                                    *[F.col(f"`{c}`") for c in df.columns]))
        chunks = [functools.reduce(DataFrame.unionAll, frames[i:i + CHUNK]) for i in range(0, len(frames), CHUNK)]
        return functools.reduce(DataFrame.unionAll, chunks)

    def bindings(self, trigger: Fired) -> dict[str, Binding]:
        values = dict(trigger.values)
        for i, _key in enumerate(self.source.keys if self.source else (), start=1):
            values.setdefault(f"%%{i}", None)
        return values

    # --- batched --------------------------------------------------------------------------------

    def _batched(self, fired: Sequence[Fired], views: dict[object, str]) -> DataFrame:
        tree = self.tree
        if not isinstance(tree, exp.Select):
            raise Unbatchable("the query is not a single SELECT")
        if tree.find(WindowClause) is not None:
            raise Unbatchable("the query has a window clause")
        for clause in ("group", "order"):
            part = tree.args.get(clause)
            if part is not None and part.find(StreamPlaceholder) is not None:
                raise Unbatchable(f"a placeholder is used in {clause.upper()} BY")
        if self.trows:
            # %%trows is read at each trigger's version: one lateral query per version, unioned
            by_version: dict[object, list[Fired]] = {}
            for trigger in fired:
                by_version.setdefault((trigger.since_version, trigger.version), []).append(trigger)
            by_view: dict[str, list[Fired]] = {}
            for group in by_version.values():
                bounds = self.bounds(group)
                for trigger in group:
                    by_view.setdefault(self._trows_view(trigger, views, bounds), []).append(trigger)
            parts = [self._lateral(group, view) for view, group in by_view.items()]
            return functools.reduce(DataFrame.unionAll, parts)
        return self._lateral(fired, None)

    def lateral_sql(self, trows_view: str | None, trigger_view: str) -> str:
        """The batched query in Spark SQL: each row of ``trigger_view`` with its query over
        ``trows_view`` (a LATERAL subquery whose placeholders are the trigger row's columns)."""
        select = self._replace_tables(self.tree, lambda: trows_view)
        inner_items, outer_items = split(select.expressions)
        select.set("expressions", inner_items or [exp.alias_(exp.Literal.number(1), "__one")])
        select = select.transform(trigger_column)
        translate, _, _ = self.warehouse.translator(select, also=self.also)
        outer = [translate(item) for item in outer_items]
        return (f"SELECT `__t`.`{IDX}` AS `{IDX}`, {', '.join(outer)} "
                f"FROM `{trigger_view}` AS `__t`, LATERAL ({translate(select)}) AS `__q`")

    def _lateral(self, fired: Sequence[Fired], trows_view: str | None) -> DataFrame:
        from pyspark.errors import AnalysisException

        sql = self.lateral_sql(trows_view, self._trigger_view(fired))
        try:
            df = self.spark.sql(sql)
            _ = df.schema  # analysis happens here on Spark Connect
        except AnalysisException as err:
            raise Unbatchable(f"Spark cannot decorrelate it ({str(err).splitlines()[0][:200]})") from None
        return df

    def _trigger_view(self, fired: Sequence[Fired]) -> str:
        """The batch as a temporary view: ``__idx`` and one column per placeholder it needs."""
        frame, schema = self._trigger_rows(fired)
        return self.warehouse.temp_view(self.spark.createDataFrame(frame, schema=schema), "_triggers_")

    def placeholders(self) -> list[str]:
        """The placeholders a batch's trigger rows carry: those the query uses, and the group's keys
        and bounds that ``%%trows`` and ``%%tbname`` read."""
        names = [n for n in self.used if n != "%%trows"]
        if self.trows or any(t.name == "%%tbname" for t in self.tree.find_all(PlaceholderTable)):
            names += [f"%%{i}" for i in range(1, len(self.source.keys) + 1)] if self.source else []
            names += ["%%tbname"] if "%%tbname" in self.group_types else []
            names += [ROLLUP_BELOW] if self.trows and self.source and self.source.rollup else []
        if self.trows and self.source and not self.source.changes:
            names += [TROWS_FROM, TROWS_TO]
        return list(dict.fromkeys(names))

    def _trigger_rows(self, fired: Sequence[Fired]) -> tuple[pd.DataFrame, str]:
        """The batch as rows, ``__idx`` and one column per placeholder it needs, and their Spark schema."""
        names = self.placeholders()
        data: dict[str, list] = {IDX: [t.idx for t in fired]}
        for name in names:
            data[column_of(name)] = [t.values.get(name) for t in fired]
        frame = pd.DataFrame(data)
        schema = ", ".join([f"`{IDX}` bigint"] + [f"`{column_of(n)}` {self.type_of(n)}" for n in names])
        for name in names:
            if self.type_of(name) == "timestamp":
                frame[column_of(name)] = pd.to_datetime(frame[column_of(name)], utc=True).astype("datetime64[us, UTC]")
        return frame, schema

    def type_of(self, name: str) -> str:
        if base_name(name) in TIMESTAMPS:
            return "timestamp"
        if base_name(name) in INTEGERS:
            return "bigint"
        if name in self.group_types:
            return self.group_types[name]
        raise StreamDefinitionError(f"placeholder {name} has no value here")

    # --- FORCE_OUTPUT ---------------------------------------------------------------------------

    def constants(self, fired: Sequence[Fired], schema: T.StructType) -> DataFrame:
        """FORCE_OUTPUT rows of ``fired``: the items that read no data (constants, placeholders) keep
        their value, every other column is NULL (reference 000, FORCE_OUTPUT)."""
        tree = self.tree
        items = tree.expressions if isinstance(tree, exp.Select) else []
        view = self._trigger_view(fired)
        translate, _, _ = self.warehouse.translator(exp.select("1"))
        df = self.spark.table(f"`{view}`").alias("__t")
        columns = [F.col(f"`{IDX}`")]
        for item, fld in zip(items, schema.fields[1:]):
            body = item.this if isinstance(item, exp.Alias) else item
            if is_star(body) or reads_data(body):
                columns.append(F.lit(None).cast(fld.dataType).alias(fld.name))
                continue
            bound = body.copy().transform(trigger_column)
            columns.append(F.expr(translate(bound)).cast(fld.dataType).alias(fld.name))
        return df.select(*columns)


def _in_group(src: TriggerSource, key: str, index: int) -> exp.Expr:
    """The %%trows condition of group key ``key`` (%%``index``): equal to the trigger's value (NULL
    to NULL); ROLLUP BY: the row's path is the group's or lies below it."""
    column, value = exp.column(key, quoted=True), StreamPlaceholder(this=f"%%{index}")
    if not src.rollup:
        return exp.NullSafeEQ(this=column, expression=value)
    below = exp.StartsWith(this=column.copy(), expression=StreamPlaceholder(this=ROLLUP_BELOW))
    return exp.paren(exp.or_(exp.EQ(this=column, expression=value), below))


def _local_frame(spark: SparkSession, records: list[dict], schema: T.StructType) -> DataFrame:
    """Rows (timestamps as microseconds since the epoch) as a DataFrame of ``schema``."""
    frame = pd.DataFrame(records, columns=schema.fieldNames())
    for f in schema.fields:
        if isinstance(f.dataType, (T.TimestampType, T.TimestampNTZType)):
            frame[f.name] = pd.to_datetime(frame[f.name], unit="us", utc=True)
    return spark.createDataFrame(frame, schema=schema)
