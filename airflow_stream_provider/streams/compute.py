"""A stream's AS-subquery, run for a batch of fired triggers as one Spark job.

Each fired trigger carries its placeholder values (reference 000, "Placeholders"). They never
become text: the batch is a small table with one row per trigger and one column per placeholder,
and the query reads them as columns of that row.

- **Batched** (the usual case): ``SELECT ... FROM <triggers> t, LATERAL (<query>) q``. Placeholders
  in WHERE/HAVING become correlated references to ``t``; select items that use placeholders are
  split so that the placeholder part is evaluated beside the subquery and the data part inside it.
  Spark decorrelates this into one join of the triggers with the data, one job for the batch.
- **Per trigger**, when Spark cannot decorrelate the query (placeholders inside aggregates or in
  GROUP BY, window clauses, set operations): each trigger's query gets its values as typed
  literals, and the per-trigger queries are unioned, still one job per chunk of triggers.

Both give exactly the result of the query run alone with that trigger's values, which is how the
tests check them. ``%%tbname`` reads the group's subtable; ``%%trows`` the group's trigger rows
as captured at the trigger's Delta version (PERIOD: the rows written between the previous and the
current trigger, from the change feed), after PRE_FILTER. Only the span of time the batch's
windows cover is read; a span whose files hold few rows (a live window) is read by delta-rs into a
local relation, which spares Spark rebuilding the table's snapshot at every new version.

The two paths stay in one module, though it is long: both must bind every placeholder the same
way, and the tests hold them to the same results.
"""

from __future__ import annotations

import collections
import functools
import json
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
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
from airflow_stream_provider.sql.ast import PlaceholderTable, PseudoColumn, StreamPlaceholder, WindowClause
from airflow_stream_provider.sql.functions import AGGREGATES
from airflow_stream_provider.sql.spark import Binding
from airflow_stream_provider.sql.tdengine.dialect import result_name
from airflow_stream_provider.storage import is_remote
from airflow_stream_provider.streams import aggregates, duckdb
from airflow_stream_provider.warehouse import Warehouse, writer
from airflow_stream_provider.warehouse.resolve import delta_table
from airflow_stream_provider.windows import select as window_select

log = logging.getLogger(__name__)

IDX = "__idx"
#: internal values a trigger carries besides the placeholders: the bounds of %%trows
TROWS_FROM, TROWS_TO = "__trows_from", "__trows_to"
#: per-trigger queries unioned into one Spark job
CHUNK = 200
#: %%trows spans whose files hold at most this many rows are read by delta-rs, not by Spark
FEW_ROWS = 200_000
#: Spark types of the placeholder columns; %%n and %%tbname take the grouping columns' types
TIMESTAMPS = ("_twstart", "_twend", "_tprev_ts", "_tcurrent_ts", "_tnext_ts", TROWS_FROM, TROWS_TO)
INTEGERS = ("_twduration", "_twrownum", "_tgrpid", "_tlocaltime", "_tprev_localtime", "_tnext_localtime")


def column_of(name: str) -> str:
    """The trigger-table column holding placeholder ``name``."""
    if name == "%%tbname":
        return "__tbname"
    if name.startswith("%%") and name[2:].isdigit():
        return f"__k{name[2:]}"
    return name


@dataclass(frozen=True)
class Fired:
    """One fired trigger: its position in the batch and its placeholder values.

    :param values: placeholder name -> value (``_twstart``, ``%%1``, ``%%tbname``, ...); timestamps
        are aware datetimes, ``_tlocaltime``-style values integers in nanoseconds.
    :param version: the trigger table's Delta version the trigger saw (``%%trows``).
    :param since_version: PERIOD: %%trows holds the rows written after this version.
    """

    idx: int
    values: dict[str, Binding]
    version: int | None = None
    since_version: int | None = None
    group: tuple = ()  # the PARTITION BY values
    group_id: str = "0"
    trigger_id: str = ""
    source: int | None = None  # window triggers: the row of the event table that fired it
    #: (JSON) the rows the window counts where they differ from the table's, for a stream of
    #: TDengine's engine before 3.3.7: ``drop`` the table's rows of these ``keys``, ``add`` these rows
    adjust: str | None = None


@dataclass(frozen=True)
class TriggerSource:
    """The trigger table, as ``%%trows`` and ``%%tbname`` read it."""

    path: str  # the Delta table (a supertable's, for a subtable)
    ts_column: str
    keys: tuple[str, ...] = ()  # PARTITION BY columns
    subtable: str | None = None  # the trigger table is this subtable of ``path``
    pre_filter: str | None = None  # PRE_FILTER, as Spark SQL
    count_columns: tuple[str, ...] = ()  # COUNT_WINDOW trigger columns: a row counts if one is not NULL
    end_inclusive: bool = True  # %%trows takes rows up to and including TROWS_TO
    changes: bool = False  # PERIOD: %%trows is what was written between two triggers
    # inclusive ranges of table versions whose rows %%trows leaves out (START ... IGNORE UNTREATED)
    skip_versions: tuple[tuple[int, int], ...] = ()


class _Unbatchable(Exception):
    """The query needs per-trigger evaluation; the message says why."""


def named(tree: exp.Expr) -> exp.Expr:
    """``tree`` with every top-level select item aliased by its TDengine name, so that a bound
    placeholder (a literal) keeps the name it was written with."""
    tree = tree.copy()
    select = tree if isinstance(tree, exp.Select) else None
    if select is None:
        return tree
    items = []
    for item in select.expressions:
        if isinstance(item, exp.Alias) or _is_star(item):
            items.append(item)
        else:
            items.append(exp.alias_(item, result_name(item), quoted=True))
    select.set("expressions", items)
    return tree


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
        self._local: str | None = None  # the query in DuckDB's dialect ("": Spark runs it), once known
        self._local_paths: tuple[str, ...] = ()  # the tables it reads as duckdb.TABLE 0, 1, ...
        self._items: tuple[aggregates.Item, ...] | None = None  # the query as aggregates (empty: it is not)

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
            except _Unbatchable as why:
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
                df = reader.load(src.path).limit(0)
            else:
                df = (reader.option("readChangeFeed", "true").option("startingVersion", start)
                      .option("endingVersion", trigger.version).load(src.path)
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
                df = self._without_skipped(reader.load(src.path), trigger.version)
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

    def _bounds(self, fired: Sequence[Fired]) -> tuple[datetime, datetime] | None:
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
        features delta-rs cannot read).
        """
        from deltalake.exceptions import DeltaError

        src = self.source
        assert src is not None
        limit = FEW_ROWS if limit is None else limit
        if src.skip_versions:
            return None
        try:
            snapshot = _snapshot(src.path, version)  # None: the latest
        except DeltaError as err:
            log.info("reading %%trows with Spark: %s", err)
            return None
        ts = src.ts_column
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
        if snapshot.plain and not is_remote(src.path):
            # the few files the statistics keep, read as they are: a table of plain Parquet files
            # (no partitions, column mapping or deletion vectors: reader version 1) needs no more
            names = [str(Path(src.path) / unquote(f)) for f in files["path"].to_pylist()]
            rows = file_rows(names, arrow_schema)
            inside = pc.greater_equal(rows[ts], lo)
            rows = rows.filter(inside if hi is None else pc.and_(inside, pc.less_equal(rows[ts], hi)))
        else:
            try:
                dataset = _dataset(src.path, snapshot.version)
            except DeltaError as err:  # a table feature the kernel cannot read (deletion vectors)
                log.info("reading %%trows with Spark: %s", err)
                return None
            inside = pds.field(ts) >= lo
            rows = dataset.to_table(filter=inside if hi is None else inside & (pds.field(ts) <= hi))
        log.debug("%%%%trows of %s at version %s in [%s, %s]: %d rows of %d files, read by delta-rs",
                  src.path, version, bounds[0], bounds[1], rows.num_rows, files.num_rows)
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
                inner = exp.select("*").from_(delta_table(src.path)).where(
                    exp.column("tbname").eq(StreamPlaceholder(this="%%tbname")))
                return exp.Subquery(this=inner, alias=alias)
            view = view_of()
            assert view is not None  # the query reads %%trows, so its caller made the view
            inner = exp.select("*").from_(exp.to_identifier(view, quoted=True))
            conditions: list[exp.Expr] = [
                exp.NullSafeEQ(this=exp.column(k, quoted=True), expression=StreamPlaceholder(this=f"%%{i}"))
                for i, k in enumerate(src.keys, start=1)]
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
                return self._trows_view(t, views, self._bounds([t]))

            tree = self._replace_tables(self.tree, view_of)
            bindings = self._bindings(trigger)
            df = window_select.frame(self.warehouse, tree, bindings=bindings, also=self.also)
            frames.append(df.select(F.lit(trigger.idx).cast("bigint").alias(IDX),
                                    *[F.col(f"`{c}`") for c in df.columns]))
        chunks = [functools.reduce(DataFrame.unionAll, frames[i:i + CHUNK]) for i in range(0, len(frames), CHUNK)]
        return functools.reduce(DataFrame.unionAll, chunks)

    def _bindings(self, trigger: Fired) -> dict[str, Binding]:
        values = dict(trigger.values)
        for i, _key in enumerate(self.source.keys if self.source else (), start=1):
            values.setdefault(f"%%{i}", None)
        return values

    # --- batched --------------------------------------------------------------------------------

    def _batched(self, fired: Sequence[Fired], views: dict[object, str]) -> DataFrame:
        tree = self.tree
        if not isinstance(tree, exp.Select):
            raise _Unbatchable("the query is not a single SELECT")
        if tree.find(WindowClause) is not None:
            raise _Unbatchable("the query has a window clause")
        for clause in ("group", "order"):
            part = tree.args.get(clause)
            if part is not None and part.find(StreamPlaceholder) is not None:
                raise _Unbatchable(f"a placeholder is used in {clause.upper()} BY")
        if self.trows:
            # %%trows is read at each trigger's version: one lateral query per version, unioned
            by_version: dict[object, list[Fired]] = {}
            for trigger in fired:
                by_version.setdefault((trigger.since_version, trigger.version), []).append(trigger)
            by_view: dict[str, list[Fired]] = {}
            for group in by_version.values():
                bounds = self._bounds(group)
                for trigger in group:
                    by_view.setdefault(self._trows_view(trigger, views, bounds), []).append(trigger)
            parts = [self._lateral(group, view) for view, group in by_view.items()]
            return functools.reduce(DataFrame.unionAll, parts)
        return self._lateral(fired, None)

    def _lateral_sql(self, trows_view: str | None, trigger_view: str) -> str:
        """The batched query in Spark SQL: each row of ``trigger_view`` with its query over
        ``trows_view`` (a LATERAL subquery whose placeholders are the trigger row's columns)."""
        select = self._replace_tables(self.tree, lambda: trows_view)
        inner_items, outer_items = _split(select.expressions)
        select.set("expressions", inner_items or [exp.alias_(exp.Literal.number(1), "__one")])
        select = select.transform(_trigger_column)
        translate, _, _ = self.warehouse.translator(select, also=self.also)
        outer = [translate(item) for item in outer_items]
        return (f"SELECT `__t`.`{IDX}` AS `{IDX}`, {', '.join(outer)} "
                f"FROM `{trigger_view}` AS `__t`, LATERAL ({translate(select)}) AS `__q`")

    def _lateral(self, fired: Sequence[Fired], trows_view: str | None) -> DataFrame:
        from pyspark.errors import AnalysisException

        sql = self._lateral_sql(trows_view, self._trigger_view(fired))
        try:
            df = self.spark.sql(sql)
            _ = df.schema  # analysis happens here on Spark Connect
        except AnalysisException as err:
            raise _Unbatchable(f"Spark cannot decorrelate it ({str(err).splitlines()[0][:200]})") from None
        return df

    def _trigger_view(self, fired: Sequence[Fired]) -> str:
        """The batch as a temporary view: ``__idx`` and one column per placeholder it needs."""
        frame, schema = self._trigger_rows(fired)
        return self.warehouse.temp_view(self.spark.createDataFrame(frame, schema=schema), "_triggers_")

    def _placeholders(self) -> list[str]:
        """The placeholders a batch's trigger rows carry: those the query uses, and the group's keys
        and bounds that ``%%trows`` and ``%%tbname`` read."""
        names = [n for n in self.used if n != "%%trows"]
        if self.trows or any(t.name == "%%tbname" for t in self.tree.find_all(PlaceholderTable)):
            names += [f"%%{i}" for i in range(1, len(self.source.keys) + 1)] if self.source else []
            names += ["%%tbname"] if "%%tbname" in self.group_types else []
        if self.trows and self.source and not self.source.changes:
            names += [TROWS_FROM, TROWS_TO]
        return list(dict.fromkeys(names))

    def _trigger_rows(self, fired: Sequence[Fired]) -> tuple[pd.DataFrame, str]:
        """The batch as rows, ``__idx`` and one column per placeholder it needs, and their Spark schema."""
        names = self._placeholders()
        data: dict[str, list] = {IDX: [t.idx for t in fired]}
        for name in names:
            data[column_of(name)] = [t.values.get(name) for t in fired]
        frame = pd.DataFrame(data)
        schema = ", ".join([f"`{IDX}` bigint"] + [f"`{column_of(n)}` {self._type_of(n)}" for n in names])
        for name in names:
            if self._type_of(name) == "timestamp":
                frame[column_of(name)] = pd.to_datetime(frame[column_of(name)], utc=True).astype("datetime64[us, UTC]")
        return frame, schema

    # --- in the process, without Spark ---------------------------------------------------------

    def local(self, fired: Sequence[Fired]) -> pa.Table | None:
        """The results of ``fired`` computed in this process by DuckDB (:mod:`.duckdb`), as
        :meth:`frame` gives them but as Arrow; None when Spark must run them: the query has a part
        DuckDB does not evaluate as Spark does, its rows are many, or DuckDB failed (a value out of
        range): Spark then gives the result or the error."""
        src = self.source
        if not fired or any(t.adjust is not None for t in fired) or self._local_sql() is None:
            return None
        if self.trows and (src is None or src.changes or src.skip_versions):
            return None
        tables: dict[str, pa.Table | pds.Dataset] = {}
        for i, path in enumerate(self._local_paths):
            scan = table_scan(path, duckdb.LOCAL_TABLE_ROWS)
            if scan is None:
                return None
            tables[duckdb.TABLE.format(i)] = scan
        if not self.trows:
            return duckdb.try_run(self._local_sql() or "", {"__triggers": self._trigger_table(fired), **tables})
        assert src is not None
        by_version: dict[int | None, list[Fired]] = {}
        for trigger in fired:
            by_version.setdefault(trigger.version, []).append(trigger)
        parts = []
        for version, group in by_version.items():
            bounds = self._bounds(group)
            found = self.few_rows_table(version, bounds, limit=duckdb.LOCAL_ROWS) if bounds is not None else None
            if found is None:
                return None
            rows = self._local_trows(found[0])
            if rows is None:
                return None
            triggers = self._trigger_table(group)
            computed = None if tables else self._aggregated(group, rows, triggers)
            if computed is None:
                computed = duckdb.try_run(self._local_sql() or "", {"__trows": rows, "__triggers": triggers, **tables})
                if computed is None:
                    return None
            parts.append(computed)
        return pa.concat_tables(parts) if len(parts) > 1 else parts[0]

    def _aggregated(self, fired: Sequence[Fired], rows: pa.Table, triggers: pa.Table) -> pa.Table | None:
        """The results of ``fired`` from its ``%%trows`` ``rows`` without SQL when the query is
        placeholders and plain aggregates (:mod:`.aggregates`); None: DuckDB computes them."""
        if self._items is None:
            self._items = aggregates.plan(self.tree) or ()
            log.info("computing %s", "window aggregates from the rows" if self._items else "with DuckDB")
        src = self.source
        if not self._items or src is None:
            return None
        slices = aggregates.window_slices(rows, src.ts_column, src.keys, [self._bindings(t) for t in fired],
                                          end_inclusive=src.end_inclusive, bounds=(TROWS_FROM, TROWS_TO))
        if slices is None:
            return None
        return aggregates.evaluate(self._items, rows, triggers, slices, column_of)

    def _local_sql(self) -> str | None:
        """The batched query in DuckDB's dialect over ``__triggers``, ``__trows`` and the tables it
        names (:attr:`_local_paths`); None: not local. Decided once."""
        if self._local is None:
            self._local = ""
            tree = self.tree
            batchable = isinstance(tree, exp.Select) and tree.find(WindowClause) is None and not any(
                tree.args.get(c) is not None and tree.args[c].find(StreamPlaceholder) is not None
                for c in ("group", "order"))
            typed = all(self._type_of(n) in _ARROW for n in self._placeholders())
            only_trows = all(n.name == "%%trows" for n in tree.find_all(PlaceholderTable))
            if batchable and typed and only_trows:
                types = (("__triggers", tuple((column_of(n), self._type_of(n)) for n in self._placeholders())),)
                try:
                    spark_sql, paths = duckdb.delta_tables(self._lateral_sql("__trows" if self.trows else None,
                                                                            "__triggers"))
                    sql = duckdb.duckdb_sql(spark_sql, types)
                except (_Unbatchable, StreamDefinitionError):
                    sql, paths = None, ()
                pre = self.source.pre_filter if self.source is not None and self.trows else None
                if sql is not None and (pre is None or duckdb.duckdb_sql(f"SELECT * FROM t WHERE {pre}")):
                    self._local, self._local_paths = sql, paths
            log.info("computing %s", "in the process when its rows are few" if self._local else "on Spark")
        return self._local or None

    def _local_trows(self, rows: pa.Table) -> pa.Table | None:
        """``%%trows`` from the table's rows: the subtable's, past PRE_FILTER, counted by COUNT_WINDOW."""
        import pyarrow.compute as pc

        src = self.source
        assert src is not None
        if src.subtable is not None:
            rows = rows.filter(pc.equal(rows["tbname"], src.subtable))
        if src.count_columns:
            rows = rows.filter(functools.reduce(pc.or_, [pc.is_valid(rows[c]) for c in src.count_columns]))
        if src.pre_filter:
            sql = duckdb.duckdb_sql(f"SELECT * FROM `__rows` WHERE {src.pre_filter}")
            if sql is None:
                return None
            rows = duckdb.run(sql, {"__rows": rows})
        return rows

    def _trigger_table(self, fired: Sequence[Fired]) -> pa.Table:
        """The batch's trigger rows (:meth:`_trigger_rows`) as Arrow, typed as Spark types them."""
        arrays = {IDX: pa.array([t.idx for t in fired], pa.int64())}
        for name in self._placeholders():
            arrays[column_of(name)] = pa.array([t.values.get(name) for t in fired], _ARROW[self._type_of(name)])
        return pa.table(arrays)

    def _type_of(self, name: str) -> str:
        if name in TIMESTAMPS:
            return "timestamp"
        if name in INTEGERS:
            return "bigint"
        if name in self.group_types:
            return self.group_types[name]
        raise StreamDefinitionError(f"placeholder {name} has no value here")


@dataclass(frozen=True)
class _Snapshot:
    """What :meth:`Compute.few_rows_table` needs of a table's version: its files (add actions with
    statistics), its schema as Spark and Arrow type it, and whether its files are plain Parquet (no
    partitions, column mapping or deletion vectors: reader version 1)."""

    version: int
    files: pa.Table
    schema: T.StructType
    arrow_schema: pa.Schema
    plain: bool


#: the kernel's table kept per path, at the latest version read, with what identified that
#: version's commit file then (:func:`~airflow_stream_provider.warehouse.writer.commit_identity`)
_tables: dict[str, tuple[Any, tuple | None]] = {}
#: the snapshots of a local table's versions read lately, per (path, version, its commit file's
#: inode and time: a table dropped and made again starts its versions anew): the streams on one
#: table read each of its versions in turn
_snapshots: collections.OrderedDict[tuple, _Snapshot] = collections.OrderedDict()
_SNAPSHOTS_KEPT = 64
_snapshots_lock = threading.Lock()


def _table_at(path: str, version: int | None) -> Any:
    """The kernel's table at ``path`` as of ``version`` (None: the latest); call under the lock.

    The table is kept from call to call: a live stream reads its trigger table at each new version,
    which an open table reaches by reading the log entries since (milliseconds) rather than the whole
    log again. The kernel's table is not shared between threads: it is read under a lock."""
    from deltalake import DeltaTable

    table, seen = _tables.get(path, (None, None))
    if table is not None and not is_remote(path) and writer.commit_identity(path, table.version()) != seen:
        table = None  # the table was dropped and made again since
    if table is None or (version is not None and version < table.version()):
        table = DeltaTable(path, version=version)
    elif version is None:
        table.update_incremental()
    elif version > table.version():
        table.load_as_version(version)
    if version is None or table.version() == version:
        _tables[path] = (table, None if is_remote(path) else writer.commit_identity(path, table.version()))
    else:  # asked for a version before the one kept: a table of its own
        table = DeltaTable(path, version=version)
    return table


def _snapshot(path: str, version: int | None) -> _Snapshot:
    """The Delta table at ``path`` as of ``version`` (None: the latest). A version is read once
    however many streams ask for it: its files and schema never change."""
    identity = () if version is None or is_remote(path) else writer.commit_identity(path, version)
    key = (path, version, *identity) if identity else None
    with _snapshots_lock:
        if key is not None and (found := _snapshots.get(key)) is not None:
            _snapshots.move_to_end(key)
            return found
        table = _table_at(path, version)
        found = _Snapshot(table.version(), pa.table(table.get_add_actions(flatten=True)),
                          T.StructType.fromJson(json.loads(table.schema().to_json())),
                          pa.schema(table.schema().to_arrow()),
                          not table.metadata().partition_columns and table.protocol().min_reader_version < 2)
        if key is not None:
            _snapshots[key] = found
        while len(_snapshots) > _SNAPSHOTS_KEPT:
            _snapshots.popitem(last=False)
        return found


def table_scan(path: str, limit: int) -> pds.Dataset | None:
    """The latest version of the Delta table at ``path``, as a dataset DuckDB scans for the columns
    and rows a query reads, when its files hold at most ``limit`` rows in all; None: they hold
    more (or some file does not say), or the kernel cannot read the table."""
    from deltalake.exceptions import DeltaError

    try:
        snapshot = _snapshot(path, None)
    except DeltaError as err:
        log.info("reading %s with Spark: %s", path, err)
        return None
    records = snapshot.files["num_records"]
    if records.null_count or (pc.sum(records).as_py() or 0) > limit:
        return None
    if snapshot.plain and not is_remote(path):
        names = [str(Path(path) / unquote(f)) for f in snapshot.files["path"].to_pylist()]
        return pds.dataset(names, format="parquet", schema=snapshot.arrow_schema)
    try:
        return _dataset(path, snapshot.version)
    except DeltaError as err:  # a table feature the kernel cannot read (deletion vectors)
        log.info("reading %s with Spark: %s", path, err)
        return None


#: the rows of data files read lately, per (file, the table's schema then), up to this many bytes
#: in all: a Delta data file never changes once written, and the streams on one table read the
#: same recent files for their windows, each batch of each stream
FILES_KEPT_BYTES = 64 * 1024 * 1024
_files: collections.OrderedDict[tuple[str, str], pa.Table] = collections.OrderedDict()
_files_bytes = 0
_files_lock = threading.Lock()


def file_rows(names: Sequence[str], schema: pa.Schema) -> pa.Table:
    """The rows of the local Parquet data files ``names``, in order, as ``schema`` types them (a
    column a file lacks, added to the table since, is NULL), each file read once while kept."""
    global _files_bytes
    typed = schema.to_string()
    parts: list[pa.Table | None] = []
    with _files_lock:
        for name in names:
            found = _files.get((name, typed))
            if found is not None:
                _files.move_to_end((name, typed))
            parts.append(found)
    missing = [name for name, part in zip(names, parts) if part is None]
    if missing:
        fresh = {name: pds.dataset([name], format="parquet", schema=schema).to_table() for name in missing}
        with _files_lock:
            for name, rows in fresh.items():
                if (name, typed) not in _files and rows.nbytes <= FILES_KEPT_BYTES // 8:
                    _files[(name, typed)] = rows
                    _files_bytes += rows.nbytes
            while _files_bytes > FILES_KEPT_BYTES:
                _, dropped = _files.popitem(last=False)
                _files_bytes -= dropped.nbytes
        parts = [fresh[name] if part is None else part for name, part in zip(names, parts)]
    return pa.concat_tables(parts) if parts else schema.empty_table()


def _dataset(path: str, version: int) -> pds.Dataset:
    """The table at ``path`` as of ``version`` as an Arrow dataset, read by the kernel."""
    with _snapshots_lock:
        return _table_at(path, version).to_pyarrow_dataset()


#: the Arrow types of the Spark types placeholders have, for the local path
_ARROW = {"timestamp": pa.timestamp("us", tz="UTC"), "bigint": pa.int64(), "int": pa.int32(), "smallint": pa.int16(),
          "tinyint": pa.int8(), "string": pa.string(), "double": pa.float64(), "float": pa.float32(),
          "boolean": pa.bool_()}


def _local_frame(spark: SparkSession, records: list[dict], schema: T.StructType) -> DataFrame:
    """Rows (timestamps as microseconds since the epoch) as a DataFrame of ``schema``."""
    frame = pd.DataFrame(records, columns=schema.fieldNames())
    for f in schema.fields:
        if isinstance(f.dataType, (T.TimestampType, T.TimestampNTZType)):
            frame[f.name] = pd.to_datetime(frame[f.name], unit="us", utc=True)
    return spark.createDataFrame(frame, schema=schema)


def _trigger_column(node: exp.Expr) -> exp.Expr:
    """A placeholder -> its column of the trigger row ``__t``; any other node as it is."""
    if isinstance(node, StreamPlaceholder):
        return exp.column(column_of(node.name), table="__t", quoted=True)
    return node


def _is_star(item: exp.Expr) -> bool:
    """``*`` or ``t.*``."""
    return isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star))


def _is_aggregate(node: exp.Expr) -> bool:
    return isinstance(node, exp.Anonymous) and node.name.lower() in AGGREGATES


def has_aggregate(item: exp.Expr) -> bool:
    """Whether a select item aggregates (FILL fills these items of an empty window)."""
    return any(_is_aggregate(n) for n in item.walk())


def _split(items: list[exp.Expr]) -> tuple[list[exp.Expr], list[exp.Expr]]:
    """Select items -> (inside the lateral subquery, beside it).

    An item without placeholders is computed inside and passed through. An item with placeholders
    is computed beside the subquery from the trigger row, its placeholder-free parts that read data
    (``avg(v)`` in ``avg(v) * _twduration``) computed inside as hidden columns.
    """
    inner: list[exp.Expr] = []
    outer: list[exp.Expr] = []
    for i, item in enumerate(items):
        if _is_star(item):
            inner.append(item.copy())
            outer.append(exp.Column(this=exp.Star(), table=exp.to_identifier("__q")))
            continue
        name = item.alias if isinstance(item, exp.Alias) else result_name(item)
        body = item.this if isinstance(item, exp.Alias) else item
        if body.find(StreamPlaceholder) is None:
            hidden = f"__c{i}"
            inner.append(exp.alias_(body.copy(), hidden, quoted=True))
            outer.append(exp.alias_(exp.column(hidden, table="__q", quoted=True), name, quoted=True))
            continue
        for ph in body.find_all(StreamPlaceholder):
            if any(_is_aggregate(a) for a in _ancestors(ph, body)):
                raise _Unbatchable(f"placeholder {ph.name} is used inside an aggregate function")
        lifted: list[exp.Expr] = []

        def lift(node: exp.Expr, i: int = i, lifted: list[exp.Expr] = lifted) -> exp.Expr:
            if isinstance(node, StreamPlaceholder):
                return exp.column(column_of(node.name), table="__t", quoted=True)
            if node.find(StreamPlaceholder) is None and _reads_data(node):
                hidden = f"__c{i}_{len(lifted)}"
                lifted.append(exp.alias_(node.copy(), hidden, quoted=True))
                return exp.column(hidden, table="__q", quoted=True)
            return node

        rewritten = body.copy().transform(lift)
        inner.extend(lifted)
        outer.append(exp.alias_(rewritten, name, quoted=True))
    return inner, outer


def _ancestors(node: exp.Expr, stop: exp.Expr) -> Iterator[exp.Expr]:
    parent = node.parent
    while parent is not None and parent is not stop.parent:
        yield parent
        parent = parent.parent


def _reads_data(node: exp.Expr) -> bool:
    return any(isinstance(n, (exp.Column, PseudoColumn, exp.Anonymous, exp.Subquery, exp.Star))
               for n in node.walk())




def constants(compute: Compute, fired: Sequence[Fired], schema: T.StructType) -> DataFrame:
    """FORCE_OUTPUT rows of ``fired``: the items that read no data (constants, placeholders) keep
    their value, every other column is NULL (reference 000, FORCE_OUTPUT)."""
    tree = compute.tree
    items = tree.expressions if isinstance(tree, exp.Select) else []
    view = compute._trigger_view(fired)
    translate, _, _ = compute.warehouse.translator(exp.select("1"))
    df = compute.spark.table(f"`{view}`").alias("__t")
    columns = [F.col(f"`{IDX}`")]
    for item, fld in zip(items, schema.fields[1:]):
        body = item.this if isinstance(item, exp.Alias) else item
        if _is_star(body) or _reads_data(body):
            columns.append(F.lit(None).cast(fld.dataType).alias(fld.name))
            continue
        bound = body.copy().transform(_trigger_column)
        columns.append(F.expr(translate(bound)).cast(fld.dataType).alias(fld.name))
    return df.select(*columns)
