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
"""

from __future__ import annotations

import functools
import logging
import threading

import pyarrow as pa
import pyarrow.dataset as pds
import sqlglot
from sqlglot import exp

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
