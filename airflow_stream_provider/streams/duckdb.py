"""Small computations without a Spark job: DuckDB, in the process, over few rows.

A live batch computes a few windows over a few hundred rows; a PERIOD stream counts a table of a
few thousand. Spark needs a quarter to three quarters of a second for any job, however small
(planning, code generation, scheduling, moving the rows to the JVM and back), and several seconds of
CPU to rebuild a Delta table's snapshot at each new version before reading it; DuckDB needs
milliseconds. So a batch whose ``%%trows`` rows are few (at most :data:`LOCAL_ROWS`), and whose
other tables hold at most :data:`LOCAL_TABLE_ROWS` rows, runs the very SQL Spark would run,
translated by sqlglot into DuckDB's dialect, over the same rows (the tables' files scanned by
DuckDB through Arrow, only the columns the query reads), and its results are cast to the types
Spark gives them.

Only SQL whose every part means the same in both engines goes this way: the nodes in
:data:`_NODES` (column references, literals, comparisons, arithmetic, boolean logic, CASE and
COALESCE, the aggregates COUNT, SUM, AVG, MIN and MAX, casts to floating point), casts of
floating-point values to integers (truncated, as Spark truncates them), ``TIMESTAMP_MILLIS`` and
``TIMESTAMP_MICROS`` of integers, and nothing that depends on the engine's time zone, string formats
or function library. Anything else runs on Spark as before. The differential tests
(``tests/streams/test_local_compute.py``) hold the two paths to the same results. The commonest
query, placeholders and plain aggregates, does without DuckDB's query too (:mod:`.aggregates`).
:class:`DuckDBCompute` is a stream's query computed this way.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pds
import sqlglot
from sqlglot import exp

from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.sql.ast import PlaceholderTable, StreamPlaceholder, WindowClause
from airflow_stream_provider.streams import aggregates
from airflow_stream_provider.streams.compute import Compute
from airflow_stream_provider.streams.fired import IDX, TROWS_FROM, TROWS_TO, Fired, column_of
from airflow_stream_provider.streams.lateral import Unbatchable
from airflow_stream_provider.warehouse.snapshots import table_scan
from airflow_stream_provider.windows import rollup

log = logging.getLogger(__name__)

#: a batch whose ``%%trows`` holds at most this many rows is computed in the process
LOCAL_ROWS = 100_000
#: ... and whose other tables hold at most this many rows each: DuckDB scans their files itself,
#: only the columns the query reads, so a count of a million rows costs it milliseconds
LOCAL_TABLE_ROWS = 1_000_000
#: the name a query run in the process reads the ``i``-th table it names by (:func:`delta_tables`)
TABLE = "__table{}"

#: the parts of a Spark SQL query that DuckDB evaluates the same way
_NODES: tuple[type[exp.Expr], ...] = (
    exp.Select, exp.From, exp.Join, exp.Lateral, exp.Subquery, exp.Table, exp.TableAlias, exp.Alias,
    exp.Identifier, exp.Column, exp.Star, exp.Literal, exp.Boolean, exp.Null, exp.Where, exp.Group,
    exp.Having, exp.And, exp.Or, exp.Not, exp.Paren, exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE,
    exp.NullSafeEQ, exp.Is, exp.Between, exp.In, exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Neg,
    exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max, exp.Coalesce, exp.Case, exp.If, exp.Abs,
    exp.Cast, exp.TryCast, exp.DataType, exp.Distinct,
    exp.StartsWith,  # (a ROLLUP BY group's rows: a string prefix, compared byte for byte in both)
)
#: casts DuckDB makes as Spark does: to floating point, which never overflows (not to integers, where
#: the two treat a value out of range apart, nor to or from text or time, which depend on formats
#: and the session's time zone); sqlglot reads Spark's CAST as TRY_CAST, which is how Spark casts
_CASTS = {exp.DataType.Type.FLOAT, exp.DataType.Type.DOUBLE}
#: integer types a floating-point value may be cast to: Spark truncates it toward zero (and fails or
#: saturates out of range), DuckDB rounds it, so DuckDB casts its truncation, and fails out of range
#: (then Spark computes the batch)
_INTEGERS = {exp.DataType.Type.BIGINT, exp.DataType.Type.INT, exp.DataType.Type.SMALLINT,
             exp.DataType.Type.TINYINT}
_FLOATING = {exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT}
#: Spark's functions of an integer that DuckDB has under another name: (naive) times from the epoch,
#: as Spark's times are instants in UTC
_TIMES_FROM_EPOCH = {"TIMESTAMP_MILLIS": "EPOCH_MS", "TIMESTAMP_MICROS": "MAKE_TIMESTAMP"}


@functools.lru_cache(maxsize=256)
def duckdb_sql(spark_sql: str, types: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()) -> str | None:
    """``spark_sql`` in DuckDB's dialect when every part of it means the same there; None when
    something in it does not (then Spark runs it).

    :param types: the Spark types of the columns of tables it reads (table -> column -> type), where
        known: a cast of a value to an integer is only taken when the value is known to be
        floating point."""
    try:
        tree = sqlglot.parse_one(spark_sql, read="spark")
    except sqlglot.errors.ParseError:
        return None
    if any(isinstance(n, (exp.Cast, exp.TryCast, exp.Anonymous)) for n in tree.walk()):
        from sqlglot.optimizer.annotate_types import annotate_types

        tree = annotate_types(tree, schema={t: dict(cols) for t, cols in types}, dialect="spark")
    for node in tree.walk():
        if isinstance(node, exp.Anonymous) and node.name.upper() in _TIMES_FROM_EPOCH:
            if len(node.expressions) != 1 or not node.expressions[0].type or \
                    node.expressions[0].type.this not in _INTEGERS:
                return None
            continue
        if type(node) not in _NODES:
            return None
        if isinstance(node, exp.Literal) and node.is_string:
            return None  # a string compared with a time is read in the session's time zone
        if isinstance(node, (exp.Cast, exp.TryCast)) and node.to.this not in _CASTS and not _truncated(node):
            return None
    # ``/`` divides as a fraction in both (Spark's integer division is ``div``, which is not allowed)
    return tree.transform(_as_duckdb).sql(dialect="duckdb")


def _truncated(cast: exp.Cast) -> bool:
    """Whether ``cast`` takes a floating-point value to an integer: a value sqlglot types as floating
    point with no literal of a fraction in it (Spark reads ``1.5`` as a decimal, which it divides
    with a precision of its own)."""
    value = cast.this
    return (cast.to.this in _INTEGERS and value.type is not None and value.type.this in _FLOATING
            and not any(isinstance(n, exp.Literal) and not n.is_string and not n.name.lstrip("-").isdigit()
                        for n in value.walk()))


def _as_duckdb(node: exp.Expr) -> exp.Expr:
    """A node Spark evaluates otherwise than its DuckDB namesake, as DuckDB says it."""
    if isinstance(node, (exp.Cast, exp.TryCast)) and node.to.this in _INTEGERS:
        # a strict cast of the truncation: out of range, DuckDB fails and Spark computes the batch
        return exp.Cast(this=exp.Anonymous(this="TRUNC", expressions=[node.this]), to=node.to)
    if isinstance(node, exp.Anonymous) and node.name.upper() in _TIMES_FROM_EPOCH:
        return exp.Anonymous(this=_TIMES_FROM_EPOCH[node.name.upper()],
                             expressions=[e.transform(_as_duckdb) for e in node.expressions])
    return node


def delta_tables(spark_sql: str) -> tuple[str, tuple[str, ...]]:
    """``spark_sql`` with the ``i``-th Delta table it reads by path (``delta.`/path```) read as
    :data:`TABLE` ``i`` instead, and those paths."""
    tree = sqlglot.parse_one(spark_sql, read="spark")
    paths: list[str] = []

    def rename(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Table) and node.db.lower() == "delta" and not node.catalog:
            if node.name not in paths:
                paths.append(node.name)
            name = exp.to_identifier(TABLE.format(paths.index(node.name)), quoted=True)
            return exp.Table(this=name, alias=node.args.get("alias"))
        return node

    return tree.transform(rename).sql(dialect="spark"), tuple(paths)


_connections = threading.local()


def run(sql: str, tables: dict[str, pa.Table | pds.Dataset]) -> pa.Table:
    """Run DuckDB ``sql`` over ``tables`` (name -> rows, or a dataset DuckDB scans for the columns
    and rows the query reads) on this thread's connection."""
    import duckdb

    con = getattr(_connections, "con", None)
    if con is None:
        con = _connections.con = duckdb.connect(config={"threads": 1})
        con.execute("SET TimeZone = 'UTC'")
    for name, table in tables.items():
        con.register(name, table)
    try:
        return con.sql(sql).to_arrow_table()
    finally:
        for name in tables:
            con.unregister(name)


def try_run(sql: str, tables: dict[str, pa.Table | pds.Dataset]) -> pa.Table | None:
    """:func:`run`, or None when DuckDB fails (a value out of range where Spark fails or saturates):
    then Spark computes the batch, and gives its result or its error."""
    import duckdb

    try:
        return run(sql, tables)
    except duckdb.Error as err:
        log.info("computing with Spark: DuckDB failed: %s", err)
        return None


def cast_to(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table``'s columns, by position, with ``schema``'s names and types (DuckDB sums integers as
    128-bit decimals where Spark gives a bigint, and so on)."""
    return pa.table([table.column(i).cast(field.type) for i, field in enumerate(schema)], schema=schema)


#: the Arrow types of the Spark types placeholders have, for the computation in the process
_ARROW = {"timestamp": pa.timestamp("us", tz="UTC"), "bigint": pa.int64(), "int": pa.int32(), "smallint": pa.int16(),
          "tinyint": pa.int8(), "string": pa.string(), "double": pa.float64(), "float": pa.float32(),
          "boolean": pa.bool_()}


class DuckDBCompute:
    """A stream's :class:`~airflow_stream_provider.streams.compute.Compute`, computed in this process
    by DuckDB when a batch's rows are few; whether its query can be is decided once."""

    def __init__(self, compute: Compute) -> None:
        self.compute = compute
        self._sql: str | None = None  # the query in DuckDB's dialect ("": Spark runs it), once known
        self._paths: tuple[str, ...] = ()  # the tables it reads as TABLE 0, 1, ...
        self._items: tuple[aggregates.Item, ...] | None = None  # the query as aggregates (empty: it is not)

    def results(self, fired: Sequence[Fired]) -> pa.Table | None:
        """The results of ``fired`` computed in this process by DuckDB, as
        :meth:`Compute.frame` gives them but as Arrow; None when Spark must run them: the query has a
        part DuckDB does not evaluate as Spark does, its rows are many, or DuckDB failed (a value out
        of range): Spark then gives the result or the error."""
        compute = self.compute
        src = compute.source
        if not fired or any(t.adjust is not None for t in fired) or self._query() is None:
            return None
        if compute.trows and (src is None or src.changes or src.skip_versions):
            return None
        tables: dict[str, pa.Table | pds.Dataset] = {}
        for i, path in enumerate(self._paths):
            scan = table_scan(path, LOCAL_TABLE_ROWS)
            if scan is None:
                return None
            tables[TABLE.format(i)] = scan
        if not compute.trows:
            return try_run(self._query() or "", {"__triggers": self._trigger_table(fired), **tables})
        assert src is not None
        by_version: dict[int | None, list[Fired]] = {}
        for trigger in fired:
            by_version.setdefault(trigger.version, []).append(trigger)
        parts = []
        for version, group in by_version.items():
            bounds = compute.bounds(group)
            found = compute.few_rows_table(version, bounds, limit=LOCAL_ROWS) if bounds is not None else None
            if found is None:
                return None
            rows = self._trows(found[0])
            if rows is None:
                return None
            triggers = self._trigger_table(group)
            computed = None if tables else self._aggregated(group, rows, triggers)
            if computed is None:
                computed = try_run(self._query() or "", {"__trows": rows, "__triggers": triggers, **tables})
                if computed is None:
                    return None
            parts.append(computed)
        return pa.concat_tables(parts) if len(parts) > 1 else parts[0]

    def _aggregated(self, fired: Sequence[Fired], rows: pa.Table, triggers: pa.Table) -> pa.Table | None:
        """The results of ``fired`` from its ``%%trows`` ``rows`` without SQL when the query is
        placeholders and plain aggregates (:mod:`.aggregates`); None: DuckDB computes them."""
        if self._items is None:
            self._items = aggregates.plan(self.compute.tree) or ()
            log.info("computing %s", "window aggregates from the rows" if self._items else "with DuckDB")
        src = self.compute.source
        if not self._items or src is None:
            return None
        if src.rollup:  # each row once per rollup group, so that a group's rows are those of its path
            if any(item.column is not None and item.column.lower() == src.keys[0].lower() for item in self._items):
                return None  # (an aggregate of the tag itself reads the subtables' own paths: DuckDB)
            rows = rollup.expand_arrow(rows, src.keys[0])
        slices = aggregates.window_slices(rows, src.ts_column, src.keys, [self.compute.bindings(t) for t in fired],
                                          end_inclusive=src.end_inclusive, bounds=(TROWS_FROM, TROWS_TO))
        if slices is None:
            return None
        return aggregates.evaluate(self._items, rows, triggers, slices, column_of)

    def _query(self) -> str | None:
        """The batched query in DuckDB's dialect over ``__triggers``, ``__trows`` and the tables it
        names (:attr:`_paths`); None: not computed here. Decided once."""
        if self._sql is None:
            self._sql = ""
            compute = self.compute
            tree = compute.tree
            batchable = isinstance(tree, exp.Select) and tree.find(WindowClause) is None and not any(
                tree.args.get(c) is not None and tree.args[c].find(StreamPlaceholder) is not None
                for c in ("group", "order"))
            typed = all(compute.type_of(n) in _ARROW for n in compute.placeholders())
            only_trows = all(n.name == "%%trows" for n in tree.find_all(PlaceholderTable))
            if batchable and typed and only_trows:
                types = (("__triggers", tuple((column_of(n), compute.type_of(n)) for n in compute.placeholders())),)
                try:
                    spark_sql, paths = delta_tables(compute.lateral_sql("__trows" if compute.trows else None,
                                                                        "__triggers"))
                    sql = duckdb_sql(spark_sql, types)
                except (Unbatchable, StreamDefinitionError):
                    sql, paths = None, ()
                pre = compute.source.pre_filter if compute.source is not None and compute.trows else None
                if sql is not None and (pre is None or duckdb_sql(f"SELECT * FROM t WHERE {pre}")):
                    self._sql, self._paths = sql, paths
            log.info("computing %s", "in the process when its rows are few" if self._sql else "on Spark")
        return self._sql or None

    def _trows(self, rows: pa.Table) -> pa.Table | None:
        """``%%trows`` from the table's rows: the subtable's, past PRE_FILTER, counted by COUNT_WINDOW."""
        src = self.compute.source
        assert src is not None
        if src.subtable is not None:
            rows = rows.filter(pc.equal(rows["tbname"], src.subtable))
        if src.count_columns:
            rows = rows.filter(functools.reduce(pc.or_, [pc.is_valid(rows[c]) for c in src.count_columns]))
        if src.pre_filter:
            sql = duckdb_sql(f"SELECT * FROM `__rows` WHERE {src.pre_filter}")
            if sql is None:
                return None
            rows = run(sql, {"__rows": rows})
        return rows

    def _trigger_table(self, fired: Sequence[Fired]) -> pa.Table:
        """The batch's trigger rows as Arrow, ``__idx`` and one column per placeholder it needs, typed
        as Spark types them."""
        compute = self.compute
        arrays = {IDX: pa.array([t.idx for t in fired], pa.int64())}
        for name in compute.placeholders():
            arrays[column_of(name)] = pa.array([t.values.get(name) for t in fired], _ARROW[compute.type_of(name)])
        return pa.table(arrays)
