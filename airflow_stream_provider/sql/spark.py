"""Canonical query trees to Spark SQL, with placeholders bound as typed AST literals.

Every language lowers into sqlglot trees: TDengine's queries are parsed into one
(:func:`to_spark` binds its placeholders and translates its functions), IoTDB's are built as one
over the devices tables (already in Spark's vocabulary); :func:`write_spark` writes either.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime

from sqlglot import exp

from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.model.time import CALENDAR_UNITS, UNIT_MICROS
from airflow_stream_provider.sql.ast import (
    DurationLiteral,
    PartitionClause,
    PlaceholderTable,
    PseudoColumn,
    StreamPlaceholder,
    WindowClause,
)
from airflow_stream_provider.sql.functions import check_functions, translate_call

_SPARK_UNITS = {"u": "MICROSECOND", "a": "MILLISECOND", "s": "SECOND", "m": "MINUTE", "h": "HOUR", "d": "DAY"}
_TYPES = {
    "BINARY": "STRING",
    "VARCHAR": "STRING",
    "NCHAR": "STRING",
    "VARBINARY": "BINARY",
    "BOOL": "BOOLEAN",
}
_NUMERIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.Neg, exp.IntDiv)

#: a bound placeholder value: a timestamp, a number, a string, or a table name for %%trows/%%tbname
Binding = datetime | int | float | str | None


def timestamp_literal(value: datetime) -> exp.Expr:
    """A Spark TIMESTAMP literal of an aware datetime, exact to the microsecond."""
    if value.tzinfo is None:
        raise StreamDefinitionError(f"placeholder timestamp {value} has no time zone")
    micros = int(value.timestamp()) * 1_000_000 + value.microsecond
    return exp.Anonymous(this="TIMESTAMP_MICROS", expressions=[exp.Literal.number(micros)])


def _literal(name: str, value: Binding) -> exp.Expr:
    if value is None:
        return exp.Null()
    if isinstance(value, datetime):
        return timestamp_literal(value)
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, (int, float)):
        return exp.Literal.number(value)
    if isinstance(value, str):
        return exp.Literal.string(value)
    raise StreamDefinitionError(f"placeholder {name} cannot be bound to {type(value).__name__}")


def _duration(node: DurationLiteral) -> exp.Expr:
    if node.unit == "w":
        return exp.Interval(this=exp.Literal.number(node.count * 7), unit=exp.var("DAY"))
    if node.unit in CALENDAR_UNITS:
        return exp.Interval(this=exp.Literal.number(node.count), unit=exp.var(CALENDAR_UNITS[node.unit]))
    if node.unit not in UNIT_MICROS:
        raise StreamDefinitionError(f"duration {node.count}{node.unit} cannot be expressed in Spark (microseconds)")
    return exp.Interval(this=exp.Literal.number(node.count), unit=exp.var(_SPARK_UNITS[node.unit]))


def _is_numeric(node: exp.Expr) -> bool:
    if isinstance(node, exp.Literal):
        return not node.is_string
    if isinstance(node, exp.Paren):
        return _is_numeric(node.this)
    return isinstance(node, _NUMERIC) and not any(
        isinstance(n, exp.Literal) and n.is_string for n in node.find_all(exp.Literal)
    )


_UNSIGNED = {"UTINYINT": "SMALLINT", "USMALLINT": "INT", "UINT": "BIGINT", "UBIGINT": "DECIMAL(20, 0)"}


def _cast(node: exp.Cast, precision: str) -> exp.Expr:
    to = node.to
    type_name = to.this.name if isinstance(to.this, exp.DType) else to.sql().split("(")[0].upper()
    if type_name == "TIMESTAMP" and _is_numeric(node.this):
        # TDengine reads a number as epoch time in the database precision; Spark would read seconds.
        fn = "TIMESTAMP_MILLIS" if precision == "ms" else "TIMESTAMP_MICROS"
        return exp.Anonymous(this=fn, expressions=[exp.Cast(this=node.this, to=exp.DataType.build("BIGINT"))])
    target = _UNSIGNED.get(type_name) or _TYPES.get(type_name)
    if target:
        return exp.Cast(this=node.this, to=exp.DataType.build(target, dialect="spark"))
    return node


_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)


def _epoch(node: exp.Expr, precision: str) -> exp.Expr:
    fn = "TIMESTAMP_MILLIS" if precision == "ms" else "TIMESTAMP_MICROS"
    return exp.Anonymous(this=fn, expressions=[exp.Cast(this=node.copy(), to=exp.DataType.build("BIGINT"))])


def _whole(node: exp.Expr) -> bool:
    """A whole number written in the query (``1648791213000``, ``-5``)."""
    if isinstance(node, exp.Neg):
        node = node.this
    return isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit()


def epoch_comparisons(tree: exp.Expr, timestamp_column: str | None, precision: str) -> exp.Expr:
    """``ts >= 1648791213000`` (also BETWEEN and IN): TDengine reads a number compared with the
    timestamp column as epoch time in the database precision, where Spark would read seconds."""
    def is_timestamp(node: exp.Expr) -> bool:
        if isinstance(node, PseudoColumn):
            return node.name in ("_c0", "_rowts")
        return isinstance(node, exp.Column) and timestamp_column is not None and \
            node.name.lower() == timestamp_column.lower()

    def convert(node: exp.Expr) -> exp.Expr:
        if isinstance(node, _COMPARISONS):
            if is_timestamp(node.this) and _whole(node.expression):
                node.set("expression", _epoch(node.expression, precision))
            elif is_timestamp(node.expression) and _whole(node.this):
                node.set("this", _epoch(node.this, precision))
        elif isinstance(node, exp.Between) and is_timestamp(node.this):
            for bound in ("low", "high"):
                if _whole(node.args[bound]):
                    node.set(bound, _epoch(node.args[bound], precision))
        elif isinstance(node, exp.In) and is_timestamp(node.this):
            node.set("expressions", [_epoch(e, precision) if _whole(e) else e for e in node.expressions])
        return node

    return tree.transform(convert)


def to_spark(
    tree: exp.Expr,
    *,
    bindings: Mapping[str, Binding] | None = None,
    timestamp_column: str | None = None,
    precision: str = "ms",
    tables: Callable[[exp.Table], exp.Expr] | None = None,
) -> str:
    """Spark SQL for a TDengine expression or query.

    :param bindings: placeholder values by name (``_twstart``, ``%%tbname``, ``%%trows``, ``%%1``);
        ``%%trows`` and ``%%tbname`` in FROM are bound to table references, other values to literals.
    :param timestamp_column: the name ``_c0``/``_rowts`` stand for (the table's first column).
    :param tables: maps each table in FROM (other than CTE names) to what Spark reads instead.
    """
    bindings = dict(bindings or {})
    check_functions(tree)
    window = tree.find(WindowClause)
    if window is not None:
        raise StreamDefinitionError(
            f"the TDengine window clause {window.args['kind']} is not supported in a query run as Spark SQL"
        )
    if tree.find(PartitionClause) is not None:
        raise StreamDefinitionError("PARTITION BY in a SELECT has no Spark SQL form without a window clause")

    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}

    def convert(node: exp.Expr) -> exp.Expr:
        if tables is not None and type(node) is exp.Table and node.name.lower() not in ctes:
            return tables(node)
        if isinstance(node, DurationLiteral):
            return _duration(node)
        if isinstance(node, StreamPlaceholder):
            if node.name not in bindings:
                if not node.name.startswith("%%"):  # outside a stream: a column of that name, as in an output table
                    return exp.column(node.name, quoted=True)
                raise StreamDefinitionError(f"placeholder {node.name} is not bound")
            return _literal(node.name, bindings[node.name])
        if isinstance(node, PlaceholderTable):
            table = bindings.get(node.name)
            if not isinstance(table, str) or not table:
                raise StreamDefinitionError(f"{node.name} is not bound to a table")
            ref = exp.to_table(table, dialect="spark")
            if node.args.get("alias") is not None:
                ref.set("alias", node.args["alias"])
            return ref
        if isinstance(node, PseudoColumn):
            if node.name in ("_c0", "_rowts"):
                if not timestamp_column:
                    raise StreamDefinitionError(
                        f"{node.name} needs the table's timestamp column, which is unknown here")
                return exp.column(timestamp_column, quoted=True)
            if node.name in ("_wstart", "_wend", "_wduration"):
                return exp.column(node.name, quoted=True)
            raise StreamDefinitionError(f"pseudo-column {node.name} is not supported")
        return node

    # A replaced node's children are not visited again, so each rewrite gets its own pass: functions
    # first (their templates hold `_c0`), then TDengine nodes, then casts over the bound literals.
    spark_tree = tree.copy().transform(lambda n: translate_call(n) if isinstance(n, exp.Anonymous) else n)
    spark_tree = epoch_comparisons(spark_tree, timestamp_column, precision)
    spark_tree = spark_tree.transform(convert)
    spark_tree = spark_tree.transform(lambda n: _cast(n, precision) if isinstance(n, exp.Cast) else n)
    return write_spark(spark_tree)


def write_spark(tree: exp.Expr) -> str:
    """The Spark SQL text of a tree in Spark's vocabulary."""
    return tree.sql(dialect="spark")
