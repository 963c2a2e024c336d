"""IoTDB expressions written as Spark SQL text over the devices tables, their headers as IoTDB prints
them, and their time constants in epoch microseconds.

Arithmetic and math functions give DOUBLE, as in IoTDB; an aggregate has IoTDB's meaning and result
type. A bare number compared with time is epoch milliseconds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime

from sqlglot import exp

from airflow_stream_provider import model as m
from airflow_stream_provider.model.series import walk
from airflow_stream_provider.sql.iotdb.validate import SCALAR_FUNCTIONS
from airflow_stream_provider.values import epoch_micros
from airflow_stream_provider.warehouse.catalog import WarehouseError
from airflow_stream_provider.warehouse.series.store import TS

_ARITHMETIC = {"+", "-", "*", "/", "%"}
_SQL_OPS = {"=": "=", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">=", "AND": "AND", "OR": "OR",
            "+": "+", "-": "-", "*": "*", "/": "/", "%": "%"}


def literal(value: object) -> str:
    """``value`` as a Spark SQL literal."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else f"CAST('{value}' AS DOUBLE)"
    return exp.Literal.string(str(value)).sql(dialect="spark")


def quoted(name: str) -> str:
    """``name`` as a Spark SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def sql_table(path: object) -> str:
    """The Delta table at ``path`` as Spark SQL reads it."""
    return "delta.`" + str(path).replace("`", "``") + "`"


def now_micros() -> int:
    return epoch_micros(datetime.now(UTC))


def time_micros(value: object, now: int) -> int:
    """A time constant in epoch microseconds: a time point, or an epoch number in milliseconds."""
    if isinstance(value, m.TimePoint):
        if value.at is not None:
            return epoch_micros(value.at)
        return now + (value.now_offset_micros or 0)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise WarehouseError(f"{value!r} is not a time")
    return int(value * 1000)


def aggregate_sql(name: str, value: str) -> str:
    """An aggregate of ``value`` in Spark SQL, with IoTDB's meaning and result type."""
    present = f"FILTER (WHERE {value} IS NOT NULL)"
    return {
        "count": f"count({value})",
        "sum": f"sum(CAST({value} AS DOUBLE))",
        "avg": f"avg(CAST({value} AS DOUBLE))",
        "max_value": f"max({value})",
        "min_value": f"min({value})",
        "extreme": f"max_by({value}, struct(abs({value}), {value})) {present}",
        "first_value": f"min_by({value}, {TS}) {present}",
        "last_value": f"max_by({value}, {TS}) {present}",
        "max_time": f"unix_millis(max({TS}) {present})",
        "min_time": f"unix_millis(min({TS}) {present})",
        "stddev": f"stddev_samp(CAST({value} AS DOUBLE))",
        "stddev_samp": f"stddev_samp(CAST({value} AS DOUBLE))",
        "stddev_pop": f"stddev_pop(CAST({value} AS DOUBLE))",
        "variance": f"var_samp(CAST({value} AS DOUBLE))",
        "var_samp": f"var_samp(CAST({value} AS DOUBLE))",
        "var_pop": f"var_pop(CAST({value} AS DOUBLE))",
    }[name]


def to_sql(expr: m.SeriesExpr, ref_sql, *, aggregate=None, now: int = 0) -> str:
    """Spark SQL of ``expr``: ``ref_sql(ref)`` gives a series' SQL; ``aggregate`` is True (SQL
    aggregates over the series' column), a function giving an aggregate's SQL, or None (none here)."""
    def go(node: m.SeriesExpr) -> str:
        if isinstance(node, m.Ref):
            return ref_sql(node)
        if isinstance(node, m.Literal):
            if isinstance(node.value, m.TimePoint):
                return str(time_micros(node.value, now))
            return literal(node.value)
        if isinstance(node, m.TimeRef):
            return f"unix_micros({TS})"
        if isinstance(node, m.Call):
            if node.name in m.AGGREGATES:
                if callable(aggregate):
                    return aggregate(node)
                if aggregate is True:
                    return aggregate_sql(node.name, go(node.args[0]))
                raise WarehouseError(f"{node.name} is an aggregate; it does not go here")
            args = ", ".join(go(a) for a in node.args)
            inner = f"{SCALAR_FUNCTIONS[node.name]}({args})"
            return inner if node.name in ("length", "upper", "lower", "trim") else f"CAST({inner} AS DOUBLE)"
        if isinstance(node, m.Unary):
            if node.op == "NOT":
                return f"(NOT {go(node.operand)})"
            return f"CAST({node.op}{go(node.operand)} AS DOUBLE)" if node.op == "-" else go(node.operand)
        if isinstance(node, m.Binary):
            left, right = go(node.left), go(node.right)
            if node.op in _ARITHMETIC:
                op = "%" if node.op == "%" else node.op
                return f"(CAST({left} AS DOUBLE) {op} CAST({right} AS DOUBLE))"
            return f"({left} {_SQL_OPS[node.op]} {right})"
        if isinstance(node, m.Between):
            inner = f"{go(node.operand)} BETWEEN {go(node.low)} AND {go(node.high)}"
            return f"(NOT ({inner}))" if node.negated else f"({inner})"
        if isinstance(node, m.InList):
            inner = f"{go(node.operand)} IN ({', '.join(go(v) for v in node.values)})"
            return f"(NOT ({inner}))" if node.negated else f"({inner})"
        raise AssertionError(node)

    return go(expr)


def measurement(columns: dict[str, tuple[str, m.SeriesType]], ref: m.Ref) -> str:
    """The column of a measurement in one database; NULL when the database has no such measurement."""
    name = ref.path.nodes[-1]
    found = columns.get(name)
    return quoted(found[0]) if found else "NULL"


def _is_time_condition(node: m.SeriesExpr) -> bool:
    return any(isinstance(n, m.TimeRef) for n in walk(node))


def _conjuncts(node: m.SeriesExpr) -> list[m.SeriesExpr]:
    if isinstance(node, m.Binary) and node.op == "AND":
        return _conjuncts(node.left) + _conjuncts(node.right)
    return [node]


def _and(parts: Sequence[m.SeriesExpr]) -> m.SeriesExpr | None:
    out: m.SeriesExpr | None = None
    for part in parts:
        out = part if out is None else m.Binary("AND", out, part)
    return out


def value_part(where: m.SeriesExpr) -> m.SeriesExpr | None:
    """The conditions on values: the WHERE without its time conditions (which must be ANDed)."""
    parts = _conjuncts(where)
    for part in parts:
        if _is_time_condition(part) and any(isinstance(n, m.Ref) for n in walk(part)):
            raise WarehouseError("a WHERE condition compares time or values, not both in one condition")
    return _and([p for p in parts if not _is_time_condition(p)])


def time_part(where: m.SeriesExpr, now: int) -> str | None:
    """The time conditions of WHERE in SQL over ``ts``; a bare number is epoch milliseconds."""
    parts = [p for p in _conjuncts(where) if _is_time_condition(p)]
    if not parts:
        return None

    def convert(node: m.SeriesExpr) -> m.SeriesExpr:
        if isinstance(node, m.Literal) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return m.Literal(time_micros(node.value, now))
        if isinstance(node, m.Binary):
            return m.Binary(node.op, convert(node.left), convert(node.right))
        if isinstance(node, m.Between):
            return m.Between(convert(node.operand), convert(node.low), convert(node.high), node.negated)
        if isinstance(node, m.InList):
            return m.InList(convert(node.operand), tuple(convert(v) for v in node.values), node.negated)
        if isinstance(node, m.Unary):
            return m.Unary(node.op, convert(node.operand))
        return node

    return " AND ".join(to_sql(convert(p), lambda r: "NULL", now=now) for p in parts)


def replace_ref(expr: m.SeriesExpr, new: m.Ref) -> m.SeriesExpr:
    if isinstance(expr, m.Ref):
        return new
    if isinstance(expr, m.Call):
        return m.Call(expr.name, tuple(replace_ref(a, new) for a in expr.args), expr.attributes)
    if isinstance(expr, m.Unary):
        return m.Unary(expr.op, replace_ref(expr.operand, new))
    if isinstance(expr, m.Binary):
        return m.Binary(expr.op, replace_ref(expr.left, new), replace_ref(expr.right, new))
    return expr


def header_of(expr: m.SeriesExpr, names: dict) -> str:
    """An expression's header as IoTDB prints it: full series paths, spaces around binary operators,
    parentheses around a binary operand."""

    def go(node: m.SeriesExpr, nested: bool) -> str:
        if isinstance(node, m.Ref):
            return names.get(node, str(node.path))
        if isinstance(node, m.Literal):
            value = node.value
            if isinstance(value, bool):
                return "true" if value else "false"
            if isinstance(value, str):
                return f"'{value}'"
            return "null" if value is None else str(value)
        if isinstance(node, m.TimeRef):
            return "Time"
        if isinstance(node, m.Call):
            return f"{node.name}({', '.join(go(a, False) for a in node.args)})"
        if isinstance(node, m.Unary):
            inner = go(node.operand, True)
            return f"!{inner}" if node.op == "NOT" else f"{node.op}{inner}"
        if isinstance(node, m.Binary):
            text = f"{go(node.left, True)} {node.op} {go(node.right, True)}"
            return f"({text})" if nested else text
        return str(node)

    return go(expr, False)
