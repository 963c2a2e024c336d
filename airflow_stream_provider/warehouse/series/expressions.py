"""IoTDB expressions lowered into sqlglot trees over the devices tables (Spark's functions, which
:func:`airflow_stream_provider.sql.spark.write_spark` writes as Spark SQL), their headers as IoTDB
prints them, and their time constants in epoch microseconds.

Arithmetic and math functions give DOUBLE, as in IoTDB; an aggregate has IoTDB's meaning and result
type. A bare number compared with time is epoch milliseconds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from sqlglot import exp

from airflow_stream_provider import model as m
from airflow_stream_provider.model.series import walk
from airflow_stream_provider.sql.iotdb.validate import SCALAR_FUNCTIONS
from airflow_stream_provider.values import epoch_micros
from airflow_stream_provider.warehouse.catalog import WarehouseError
from airflow_stream_provider.warehouse.series.store import TS

_ARITHMETIC: dict[str, type[exp.Binary]] = {"+": exp.Add, "-": exp.Sub, "*": exp.Mul, "/": exp.Div, "%": exp.Mod}
_LOGIC: dict[str, type[exp.Binary]] = {"=": exp.EQ, "!=": exp.NEQ, "<": exp.LT, "<=": exp.LTE, ">": exp.GT,
                                       ">=": exp.GTE, "AND": exp.And, "OR": exp.Or}
#: the functions whose result keeps its type; every other scalar function gives DOUBLE, as in IoTDB
_TYPED = ("length", "upper", "lower", "trim")


def literal(value: object) -> exp.Expr:
    """``value`` as a Spark SQL literal."""
    if value is None:
        return exp.null()
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, int):
        return exp.Literal.number(value)
    if isinstance(value, float):
        return exp.Literal.number(repr(value)) if math.isfinite(value) else double(exp.Literal.string(str(value)))
    return exp.Literal.string(str(value))


def column(name: str) -> exp.Column:
    """The column ``name``, quoted."""
    return exp.column(name, quoted=True)


def call(name: str, *args: exp.Expr) -> exp.Expr:
    """``name(args)``, a Spark function called by its name."""
    return exp.Anonymous(this=name, expressions=list(args))


def double(value: exp.Expr) -> exp.Expr:
    return exp.Cast(this=value, to=exp.DataType.build("DOUBLE"))


def bigint(value: exp.Expr) -> exp.Expr:
    return exp.Cast(this=value, to=exp.DataType.build("BIGINT"))


def aliased(value: exp.Expr, name: str) -> exp.Expr:
    """``value AS `name```."""
    return exp.alias_(value, name, quoted=True)


def delta_table(path: object) -> exp.Table:
    """The Delta table at ``path`` as Spark SQL reads it (``delta.`path```)."""
    return exp.Table(this=exp.to_identifier(str(path), quoted=True), db=exp.to_identifier("delta"))


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


def aggregate(name: str, value: exp.Expr) -> exp.Expr:
    """An aggregate of ``value``, with IoTDB's meaning and result type."""
    ts = exp.column(TS)

    def present(of: exp.Expr) -> exp.Expr:  # over the rows where the series has a value
        return exp.Filter(this=of, expression=exp.Where(this=exp.Not(this=exp.Is(this=value.copy(),
                                                                                   expression=exp.null()))))

    made: dict[str, Callable[[], exp.Expr]] = {
        "count": lambda: call("count", value.copy()),
        "sum": lambda: call("sum", double(value.copy())),
        "avg": lambda: call("avg", double(value.copy())),
        "max_value": lambda: call("max", value.copy()),
        "min_value": lambda: call("min", value.copy()),
        "extreme": lambda: present(call("max_by", value.copy(),
                                        call("struct", call("abs", value.copy()), value.copy()))),
        "first_value": lambda: present(call("min_by", value.copy(), ts)),
        "last_value": lambda: present(call("max_by", value.copy(), ts)),
        "max_time": lambda: call("unix_millis", present(call("max", ts))),
        "min_time": lambda: call("unix_millis", present(call("min", ts))),
        "stddev": lambda: call("stddev_samp", double(value.copy())),
        "stddev_samp": lambda: call("stddev_samp", double(value.copy())),
        "stddev_pop": lambda: call("stddev_pop", double(value.copy())),
        "variance": lambda: call("var_samp", double(value.copy())),
        "var_samp": lambda: call("var_samp", double(value.copy())),
        "var_pop": lambda: call("var_pop", double(value.copy())),
    }
    return made[name]()


def to_tree(expr: m.SeriesExpr, ref: Callable[[m.Ref], exp.Expr], *,
            aggregates: bool | Callable[[m.Call], exp.Expr] = False, now: int = 0) -> exp.Expr:
    """The sqlglot tree of ``expr`` in Spark's vocabulary: ``ref(r)`` gives a series' column;
    ``aggregates`` is True (aggregates over the series' column), a function giving an aggregate's
    tree, or False (no aggregate goes here)."""
    def go(node: m.SeriesExpr) -> exp.Expr:
        if isinstance(node, m.Ref):
            return ref(node)
        if isinstance(node, m.Literal):
            if isinstance(node.value, m.TimePoint):
                return exp.Literal.number(time_micros(node.value, now))
            return literal(node.value)
        if isinstance(node, m.TimeRef):
            return call("unix_micros", exp.column(TS))
        if isinstance(node, m.Call):
            if node.name in m.AGGREGATES:
                if callable(aggregates):
                    return aggregates(node)
                if aggregates:
                    return aggregate(node.name, go(node.args[0]))
                raise WarehouseError(f"{node.name} is an aggregate; it does not go here")
            inner = call(SCALAR_FUNCTIONS[node.name], *(go(a) for a in node.args))
            return inner if node.name in _TYPED else double(inner)
        if isinstance(node, m.Unary):
            if node.op == "NOT":
                return exp.Paren(this=exp.Not(this=go(node.operand)))
            return double(exp.Neg(this=go(node.operand))) if node.op == "-" else go(node.operand)
        if isinstance(node, m.Binary):
            left, right = go(node.left), go(node.right)
            if node.op in _ARITHMETIC:
                return exp.Paren(this=_ARITHMETIC[node.op](this=double(left), expression=double(right)))
            return exp.Paren(this=_LOGIC[node.op](this=left, expression=right))
        if isinstance(node, m.Between):
            between = exp.Between(this=go(node.operand), low=go(node.low), high=go(node.high))
            return _negated(between, node.negated)
        if isinstance(node, m.InList):
            return _negated(exp.In(this=go(node.operand), expressions=[go(v) for v in node.values]), node.negated)
        raise AssertionError(node)

    return go(expr)


def _negated(condition: exp.Expr, negated: bool) -> exp.Expr:
    return exp.Paren(this=exp.Not(this=exp.Paren(this=condition)) if negated else condition)


def measurement(columns: dict[str, tuple[str, m.SeriesType]], ref: m.Ref) -> exp.Expr:
    """The column of a measurement in one database; NULL when the database has no such measurement."""
    name = ref.path.nodes[-1]
    found = columns.get(name)
    return column(found[0]) if found else exp.null()


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


def time_part(where: m.SeriesExpr, now: int) -> exp.Expr | None:
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

    return exp.and_(*(to_tree(convert(p), lambda r: exp.null(), now=now) for p in parts))


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
