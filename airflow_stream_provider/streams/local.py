"""Small computations without a Spark job: DuckDB, in the process, over the few rows of ``%%trows``.

A live batch computes a few windows over a few hundred rows. Spark needs a quarter to three quarters
of a second for any job, however small (planning, code generation, scheduling, moving the rows to
the JVM and back); DuckDB needs milliseconds. So a batch whose ``%%trows`` rows are few (at most
:data:`LOCAL_ROWS`) runs the very SQL Spark would run, translated by sqlglot into DuckDB's dialect,
over the same Arrow rows, and its results are cast to the types Spark gives them.

Only SQL whose every part means the same in both engines goes this way: the nodes in
:data:`_NODES` (column references, literals, comparisons, arithmetic, boolean logic, CASE and
COALESCE, the aggregates COUNT, SUM, AVG, MIN and MAX, casts to floating point) and nothing that
depends on the engine's time zone, string formats or function library. Anything else, and any
query reading a table other than ``%%trows``, runs on Spark as before. The differential test
(``tests/streams/test_local_compute.py``) holds the two paths to the same results. The commonest
query, placeholders and plain aggregates, does without DuckDB's query too (:mod:`.aggregates`).
"""

from __future__ import annotations

import functools
import threading

import pyarrow as pa
import sqlglot
from sqlglot import exp

#: a batch whose ``%%trows`` holds at most this many rows is computed in the process
LOCAL_ROWS = 100_000

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


@functools.lru_cache(maxsize=256)
def duckdb_sql(spark_sql: str) -> str | None:
    """``spark_sql`` in DuckDB's dialect when every part of it means the same there; None when
    something in it does not (then Spark runs it)."""
    try:
        tree = sqlglot.parse_one(spark_sql, read="spark")
    except sqlglot.errors.ParseError:
        return None
    for node in tree.walk():
        if type(node) not in _NODES:
            return None
        if isinstance(node, exp.Literal) and node.is_string:
            return None  # a string compared with a time is read in the session's time zone
        if isinstance(node, (exp.Cast, exp.TryCast)) and node.to.this not in _CASTS:
            return None
    # ``/`` divides as a fraction in both (Spark's integer division is ``div``, which is not allowed)
    return tree.sql(dialect="duckdb")


_connections = threading.local()


def run(sql: str, tables: dict[str, pa.Table]) -> pa.Table:
    """Run DuckDB ``sql`` over ``tables`` (name -> rows) on this thread's connection."""
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


def cast_to(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table``'s columns, by position, with ``schema``'s names and types (DuckDB sums integers as
    128-bit decimals where Spark gives a bigint, and so on)."""
    return pa.table([table.column(i).cast(field.type) for i, field in enumerate(schema)], schema=schema)
