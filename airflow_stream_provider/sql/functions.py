"""TDengine functions and their Spark SQL equivalents: one registry for checking and translating.

Each entry builds the Spark expression from the already-translated arguments, as AST: a template
written in Spark SQL whose ``__aN`` columns are replaced by argument trees, never by text.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import sqlglot
from sqlglot import exp

from airflow_stream_provider.exceptions import StreamDefinitionError, did_you_mean
from airflow_stream_provider.model.time import UNIT_MICROS
from airflow_stream_provider.sql.ast import DurationLiteral, PseudoColumn

Builder = Callable[[list[exp.Expr]], exp.Expr]


@dataclass(frozen=True)
class Function:
    name: str
    min_args: int
    max_args: int | None
    build: Builder | None = None
    unsupported: str | None = None  # why Spark cannot express it


@cache
def _template(sql: str) -> exp.Expr:
    return sqlglot.parse_one(sql, read="spark")


def template(sql: str) -> Builder:
    """``template("MAX(__a0) - MIN(__a0)")``: the arguments replace the ``__aN`` columns."""

    def build(args: list[exp.Expr]) -> exp.Expr:
        def fill(node: exp.Expr) -> exp.Expr:
            if isinstance(node, exp.Column) and node.name.startswith("__a") and not node.table:
                return args[int(node.name[3:])].copy()
            if isinstance(node, exp.Column) and node.name == "__ts" and not node.table:
                return PseudoColumn(this="_c0")
            return node

        return _template(sql).copy().transform(fill)

    return build


def rename(spark_name: str) -> Builder:
    return lambda args: exp.Anonymous(this=spark_name, expressions=[a.copy() for a in args])


def _unit_micros(arg: exp.Expr | None, default: int, fn: str) -> int:
    if arg is None:
        return default
    if isinstance(arg, DurationLiteral) and arg.unit in UNIT_MICROS:
        return arg.count * UNIT_MICROS[arg.unit]
    raise StreamDefinitionError(f"{fn}: the time unit must be a duration such as 1s or 1m, not {arg.sql()}")


def _elapsed(args: list[exp.Expr]) -> exp.Expr:
    unit = _unit_micros(args[1] if len(args) > 1 else None, 1_000, "ELAPSED")
    return template(f"(UNIX_MICROS(MAX(__a0)) - UNIX_MICROS(MIN(__a0))) / {unit}")(args)


def _timediff(args: list[exp.Expr]) -> exp.Expr:
    unit = _unit_micros(args[2] if len(args) > 2 else None, 1_000, "TIMEDIFF")
    return template(f"(UNIX_MICROS(CAST(__a0 AS TIMESTAMP)) - UNIX_MICROS(CAST(__a1 AS TIMESTAMP))) DIV {unit}")(args)


def _timetruncate(args: list[exp.Expr]) -> exp.Expr:
    unit = _unit_micros(args[1], 1_000, "TIMETRUNCATE")
    return template(
        f"TIMESTAMP_MICROS(UNIX_MICROS(CAST(__a0 AS TIMESTAMP)) - PMOD(UNIX_MICROS(CAST(__a0 AS TIMESTAMP)), {unit}))"
    )(args)


def _percentile(args: list[exp.Expr]) -> exp.Expr:
    if len(args) > 2:
        raise StreamDefinitionError("PERCENTILE with several percentages is not supported; call it once per value")
    return template("PERCENTILE(__a0, __a1 / 100.0)")(args)


def _log(args: list[exp.Expr]) -> exp.Expr:
    # TDengine LOG(x[, base]); Spark LOG(base, x) and LN(x)
    return template("LN(__a0)")(args) if len(args) == 1 else template("LOG(__a1, __a0)")(args)


# Time-weighted average: one fold over the group's non-NULL points sorted by row time, adding the
# trapezoid area between consecutive points; the area over the covered time, or the single value.
_TWA = (
    "AGGREGATE(ARRAY_SORT(COLLECT_LIST(IF(__a0 IS NULL, NULL, STRUCT(UNIX_MICROS(__ts) AS t, "
    "CAST(__a0 AS DOUBLE) AS v)))), NAMED_STRUCT('first_t', CAST(NULL AS BIGINT), 'last_t', CAST(NULL AS BIGINT), "
    "'last_v', CAST(NULL AS DOUBLE), 'area', CAST(0 AS DOUBLE)), (twa_acc__, twa_p__) -> NAMED_STRUCT("
    "'first_t', COALESCE(twa_acc__.first_t, twa_p__.t), 'last_t', twa_p__.t, 'last_v', twa_p__.v, "
    "'area', twa_acc__.area + IF(twa_acc__.last_t IS NULL, CAST(0 AS DOUBLE), "
    "(twa_acc__.last_v + twa_p__.v) / 2 * (twa_p__.t - twa_acc__.last_t))), "
    "twa_acc__ -> IF(twa_acc__.last_t IS NULL, NULL, IF(twa_acc__.last_t = twa_acc__.first_t, twa_acc__.last_v, "
    "twa_acc__.area / (twa_acc__.last_t - twa_acc__.first_t))))"
)


def _f(name: str, lo: int, hi: int | None, build: Builder | str) -> Function:
    return Function(name, lo, hi, rename(build) if isinstance(build, str) else build)


def _no(name: str, reason: str) -> Function:
    return Function(name, 0, None, unsupported=reason)


_MULTI_ROW = "returns several rows per group, which a stream computation cannot place in one output row"
_ORDERED = "depends on the row order of each subtable and has no Spark SQL aggregate equivalent"

#: TDengine aggregate functions: one value per group or window
AGGREGATES = frozenset({
    "avg", "sum", "count", "min", "max", "stddev", "stddev_pop", "var_pop", "mode", "hyperloglog", "spread",
    "first", "last", "last_row", "apercentile", "percentile", "elapsed", "twa",
})

REGISTRY: dict[str, Function] = {
    f.name: f
    for f in [
        # aggregates
        _f("avg", 1, 1, "AVG"),
        _f("sum", 1, 1, "SUM"),
        _f("count", 1, 1, "COUNT"),
        _f("min", 1, 1, "MIN"),
        _f("max", 1, 1, "MAX"),
        _f("stddev", 1, 1, "STDDEV_POP"),
        _f("stddev_pop", 1, 1, "STDDEV_POP"),
        _f("var_pop", 1, 1, "VAR_POP"),
        _f("mode", 1, 1, "MODE"),
        _f("hyperloglog", 1, 1, "APPROX_COUNT_DISTINCT"),
        _f("spread", 1, 1, template("MAX(__a0) - MIN(__a0)")),
        _f("first", 1, 1, template("MIN_BY(__a0, IF(__a0 IS NULL, NULL, __ts))")),
        _f("last", 1, 1, template("MAX_BY(__a0, IF(__a0 IS NULL, NULL, __ts))")),
        _f("last_row", 1, 1, template("MAX_BY(__a0, __ts)")),
        _f("apercentile", 2, 3, template("APPROX_PERCENTILE(__a0, __a1 / 100.0)")),
        _f("percentile", 2, 11, _percentile),
        _f("elapsed", 1, 2, _elapsed),
        _f("twa", 1, 1, template(_TWA)),
        # math
        _f("abs", 1, 1, "ABS"),
        _f("acos", 1, 1, "ACOS"),
        _f("asin", 1, 1, "ASIN"),
        _f("atan", 1, 1, "ATAN"),
        _f("ceil", 1, 1, "CEIL"),
        _f("cos", 1, 1, "COS"),
        _f("floor", 1, 1, "FLOOR"),
        _f("log", 1, 2, _log),
        _f("ln", 1, 1, "LN"),
        _f("exp", 1, 1, "EXP"),
        _f("pow", 2, 2, "POWER"),
        _f("round", 1, 2, "ROUND"),
        _f("sign", 1, 1, "SIGN"),
        _f("sin", 1, 1, "SIN"),
        _f("sqrt", 1, 1, "SQRT"),
        _f("tan", 1, 1, "TAN"),
        _f("degrees", 1, 1, "DEGREES"),
        _f("radians", 1, 1, "RADIANS"),
        _f("pi", 0, 0, "PI"),
        _f("mod", 2, 2, "MOD"),
        _f("greatest", 1, None, "GREATEST"),
        _f("least", 1, None, "LEAST"),
        # strings
        _f("char_length", 1, 1, "CHAR_LENGTH"),
        _f("length", 1, 1, "OCTET_LENGTH"),
        _f("concat", 1, None, "CONCAT"),
        _f("concat_ws", 2, None, "CONCAT_WS"),
        _f("lower", 1, 1, "LOWER"),
        _f("upper", 1, 1, "UPPER"),
        _f("ltrim", 1, 1, "LTRIM"),
        _f("rtrim", 1, 1, "RTRIM"),
        _f("trim", 1, 1, "TRIM"),
        _f("substr", 2, 3, "SUBSTRING"),
        _f("substring", 2, 3, "SUBSTRING"),
        _f("replace", 3, 3, "REPLACE"),
        _f("repeat", 2, 2, "REPEAT"),
        _f("ascii", 1, 1, "ASCII"),
        _f("char", 1, 1, "CHAR"),
        # conditionals
        _f("coalesce", 1, None, "COALESCE"),
        _f("ifnull", 2, 2, "COALESCE"),
        _f("nvl", 2, 2, "NVL"),
        _f("nullif", 2, 2, "NULLIF"),
        _f("if", 3, 3, "IF"),
        _f("isnull", 1, 1, "ISNULL"),
        _f("isnotnull", 1, 1, "ISNOTNULL"),
        # time
        _f("now", 0, 0, template("CURRENT_TIMESTAMP()")),
        _f("today", 0, 0, template("CAST(CURRENT_DATE() AS TIMESTAMP)")),
        _f("timezone", 0, 0, "CURRENT_TIMEZONE"),
        _f("timediff", 2, 3, _timediff),
        _f("timetruncate", 2, 3, _timetruncate),
        _f("to_iso8601", 1, 2, template("DATE_FORMAT(CAST(__a0 AS TIMESTAMP), \"yyyy-MM-dd'T'HH:mm:ss.SSSxxx\")")),
        _f("to_unixtimestamp", 1, 2, template("UNIX_MILLIS(CAST(__a0 AS TIMESTAMP))")),
        _f("weekday", 1, 1, template("(DAYOFWEEK(CAST(__a0 AS TIMESTAMP)) + 5) % 7")),
        _f("dayofweek", 1, 1, template("DAYOFWEEK(CAST(__a0 AS TIMESTAMP))")),
        _f("week", 1, 2, template("WEEKOFYEAR(CAST(__a0 AS TIMESTAMP))")),
        # rejected, each with its reason
        _no("top", _MULTI_ROW),
        _no("bottom", _MULTI_ROW),
        _no("sample", _MULTI_ROW),
        _no("tail", _MULTI_ROW),
        _no("unique", _MULTI_ROW),
        _no("histogram", "builds TDengine's bucket JSON, which Spark SQL has no function for"),
        _no("leastsquares", "returns TDengine's fitted-line text, which Spark SQL has no function for"),
        _no("interp", "interpolates over TDengine's RANGE/EVERY/FILL clauses, which Spark SQL does not have"),
        _no("diff", _ORDERED),
        _no("derivative", _ORDERED),
        _no("irate", _ORDERED),
        _no("csum", _ORDERED),
        _no("mavg", _ORDERED),
        _no("statecount", _ORDERED),
        _no("stateduration", _ORDERED),
        _no("forecast", "needs TDengine's TDgpt analysis node"),
        _no("to_char", "uses TDengine's format codes; use DATE_FORMAT-like to_iso8601 instead"),
        _no("to_timestamp", "uses TDengine's format codes; compare with a timestamp string instead"),
        _no("to_json", "has no Spark equivalent for TDengine's JSON tag type"),
    ]
}


def position_in(name: str, text: str, position) -> tuple[int | None, int | None]:
    """Line and column of ``name`` (preferably called, as ``name(``) in ``text`` starting at ``position``."""
    if position is None:
        return None, None
    lowered = text.lower()
    at = lowered.find(name.lower() + "(")
    if at < 0:
        at = lowered.find(name.lower())
    if at < 0:
        return position.line, position.column
    before = text[:at]
    line = position.line + before.count("\n")
    column = (at - before.rfind("\n")) if "\n" in before else position.column + at
    return line, column


def check_functions(tree: exp.Expr, text: str = "", position=None, clause: str | None = None) -> None:
    """Reject unknown functions, functions Spark cannot express, wrong argument counts, and casts to
    GEOMETRY (a type TDengine has and the tables here cannot hold)."""
    for cast in tree.find_all(exp.Cast):
        if cast.to.this in (exp.DataType.Type.GEOMETRY, exp.DataType.Type.GEOGRAPHY):
            line, column = position_in(cast.to.this.value, text, position)
            raise StreamDefinitionError(f"CAST to {cast.to.this.value} is not supported: Spark tables here hold no "
                                        "geometry type", line=line, column=column, clause=clause)
    for call in tree.find_all(exp.Anonymous):
        name = call.name.lower()
        fn = REGISTRY.get(name)
        line, column = position_in(call.name, text, position)
        if fn is None:
            raise StreamDefinitionError(f"unknown function {call.name.upper()}", line=line, column=column,
                                        clause=clause, hint=did_you_mean(name, (n.upper() for n in REGISTRY)))
        if fn.unsupported:
            raise StreamDefinitionError(f"function {call.name.upper()} is not supported: it {fn.unsupported}",
                                        line=line, column=column, clause=clause)
        count = len(call.expressions)
        if count < fn.min_args or (fn.max_args is not None and count > fn.max_args):
            expected = str(fn.min_args) if fn.min_args == fn.max_args else (
                f"{fn.min_args} or more" if fn.max_args is None else f"{fn.min_args} to {fn.max_args}")
            raise StreamDefinitionError(f"{call.name.upper()} takes {expected} argument(s), found {count}",
                                        line=line, column=column, clause=clause)


def reject_subqueries(tree: exp.Expr, text: str = "", position=None, clause: str | None = None) -> None:
    """Refuse a subquery in an expression evaluated for each row or group (a filter, a trigger
    condition, a tag or a subtable name), at the subquery's SELECT."""
    if tree.find(exp.Query) is None:
        return
    line, column = position_in("select", text, position)
    raise StreamDefinitionError(f"{clause or 'this clause'} is computed for each row or group and cannot hold a "
                                "subquery", line=line, column=column, clause=clause,
                                hint="compute the value in the AS query, or filter the trigger table with a "
                                     "plain condition")


def translate_call(call: exp.Anonymous) -> exp.Expr:
    fn = REGISTRY[call.name.lower()]
    assert fn.build is not None
    return fn.build(list(call.expressions))
