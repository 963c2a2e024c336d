"""Trigger expressions (STATE_WINDOW column, EVENT_WINDOW conditions, PRE_FILTER) on pandas.

The window core evaluates these itself, so that batch mode, the streaming detector and a rescan
after late data read the same rows the same way wherever they run, with or without Spark. Columns
use pandas' nullable types, which follow SQL's three-valued logic: a comparison with NULL is NULL,
``NULL AND FALSE`` is FALSE, and a NULL condition does not hold.

The supported subset is what trigger conditions need: columns, literals, arithmetic, comparisons,
``AND``/``OR``/``NOT``, ``IN``, ``BETWEEN``, ``LIKE``, ``IS [NOT] NULL``, ``cast`` to numbers and
BOOL, and a few scalar functions. Anything else is rejected by name when the stream is planned.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pandas as pd
from sqlglot import exp

from airflow_stream_provider import config
from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.sql.ast import PseudoColumn
from airflow_stream_provider.sql.tdengine.dialect import TDengine

_COMPARE = {
    exp.EQ: lambda a, b: a == b,
    exp.NEQ: lambda a, b: a != b,
    exp.GT: lambda a, b: a > b,
    exp.GTE: lambda a, b: a >= b,
    exp.LT: lambda a, b: a < b,
    exp.LTE: lambda a, b: a <= b,
}
_ARITHMETIC = {
    exp.Add: lambda a, b: a + b,
    exp.Sub: lambda a, b: a - b,
    exp.Mul: lambda a, b: a * b,
    exp.Div: lambda a, b: a / b,
    exp.Mod: lambda a, b: a % b,
}
_FUNCTIONS: dict[str, Callable[..., object]] = {
    "abs": lambda a: a.abs(),
    "ceil": lambda a: np.ceil(a),
    "floor": lambda a: np.floor(a),
    "round": lambda a: a.round(),
    "lower": lambda a: a.str.lower(),
    "upper": lambda a: a.str.upper(),
    "length": lambda a: a.str.len(),
    "char_length": lambda a: a.str.len(),
}


def columns_of(tree: exp.Expr, timestamp_column: str) -> list[str]:
    """The table columns an expression reads, in order of first use."""
    names: list[str] = []
    for node in tree.find_all(exp.Column, PseudoColumn):
        name = timestamp_column if isinstance(node, PseudoColumn) else node.name
        if name not in names:
            names.append(name)
    return names


def check(tree: exp.Expr, clause: str) -> None:
    """Reject what :func:`evaluate` cannot do, naming it."""
    for node in tree.walk():
        if isinstance(node, exp.Anonymous):
            if node.name.lower() not in _FUNCTIONS:
                raise StreamDefinitionError(
                    f"{clause}: function {node.name} is not supported in trigger conditions "
                    f"(supported: {', '.join(sorted(_FUNCTIONS))})", clause=clause)
        elif isinstance(node, PseudoColumn):
            if node.name not in ("_c0", "_rowts"):
                raise StreamDefinitionError(f"{clause}: {node.name} has no value in a trigger condition", clause=clause)
        elif isinstance(node, exp.Cast):
            if node.to.this not in _CASTS:
                raise StreamDefinitionError(
                    f"{clause}: cast to {node.to.sql(dialect=TDengine)} is not supported in trigger conditions "
                    "(supported: integer types, FLOAT, DOUBLE, BOOL)", clause=clause)
        elif isinstance(node, exp.DataType):
            continue
        elif not isinstance(node, _SUPPORTED):
            raise StreamDefinitionError(
                f"{clause}: {node.key.upper()} ({node.sql(dialect=TDengine)}) is not supported in trigger conditions",
                clause=clause)


def _nullable(series: pd.Series) -> pd.Series:
    """``series`` with a nullable dtype of the same kind and width (NaN becomes NULL)."""
    dtype = series.dtype
    if isinstance(dtype, pd.api.extensions.ExtensionDtype):  # nullable already, or timestamps with a zone
        return series
    if dtype.kind == "f":  # built directly: astype re-checks every value
        values = series.to_numpy()
        return pd.Series(pd.arrays.FloatingArray(values, np.isnan(values)), index=series.index)
    if dtype.kind in "iu":
        values = series.to_numpy()
        return pd.Series(pd.arrays.IntegerArray(values, np.zeros(len(values), bool)), index=series.index)
    if dtype.kind == "b":
        return series.astype("boolean")
    return series.convert_dtypes()


def evaluate(tree: exp.Expr, frame: pd.DataFrame, timestamp_column: str = "ts") -> pd.Series:
    """The value of ``tree`` for every row of ``frame`` (columns by name, case-insensitive)."""
    lookup = {c.lower(): c for c in frame.columns}
    cache: dict[str, pd.Series] = {}

    def column(name: str) -> pd.Series:
        key = name.lower()
        if key not in cache:
            if key not in lookup:
                raise StreamDefinitionError(f"column {name} is not in the trigger table")
            cache[key] = _nullable(frame[lookup[key]])
        return cache[key]

    def value(node: exp.Expr):
        if isinstance(node, exp.Paren):
            return value(node.this)
        if isinstance(node, exp.Column):
            return column(node.name)
        if isinstance(node, PseudoColumn):
            return column(timestamp_column)
        if isinstance(node, exp.Literal):
            return node.this if node.is_string else _number(node.this)
        if isinstance(node, exp.Boolean):
            return bool(node.this)
        if isinstance(node, exp.Null):
            return pd.NA
        if isinstance(node, exp.Neg):
            return -value(node.this)
        if isinstance(node, exp.Not):
            return ~_boolean(value(node.this), len(frame))
        if isinstance(node, exp.And):
            return _boolean(value(node.left), len(frame)) & _boolean(value(node.right), len(frame))
        if isinstance(node, exp.Or):
            return _boolean(value(node.left), len(frame)) | _boolean(value(node.right), len(frame))
        if isinstance(node, exp.Binary) and type(node) in _COMPARE:
            left, right = _align(value(node.left), value(node.right))
            return _COMPARE[type(node)](left, right)
        if isinstance(node, exp.Binary) and type(node) in _ARITHMETIC:
            return _ARITHMETIC[type(node)](value(node.left), value(node.right))
        if isinstance(node, exp.Is):
            target = value(node.this)
            return _series(target, len(frame)).isna().astype("boolean")
        if isinstance(node, exp.In):
            target = _series(value(node.this), len(frame))
            options = [value(e) for e in node.expressions]
            result = target.isin([o for o in options if o is not pd.NA]).astype("boolean")
            return result.mask(target.isna(), pd.NA)
        if isinstance(node, exp.Between):
            target = value(node.this)
            low, high = value(node.args["low"]), value(node.args["high"])
            a, lo = _align(target, low)
            b, hi = _align(target, high)
            return _boolean(a >= lo, len(frame)) & _boolean(b <= hi, len(frame))
        if isinstance(node, exp.Like):
            target = _series(value(node.this), len(frame)).astype("string")
            pattern = _like_regex(str(value(node.expression)))
            return target.str.fullmatch(pattern).astype("boolean")
        if isinstance(node, exp.Cast):
            return _cast(_series(value(node.this), len(frame)), node.to)
        if isinstance(node, exp.Anonymous):
            return _FUNCTIONS[node.name.lower()](*[_series(value(a), len(frame)) for a in node.expressions])
        raise StreamDefinitionError(f"{node.key.upper()} is not supported in trigger conditions")

    return _series(value(tree), len(frame)).reset_index(drop=True)


def holds(tree: exp.Expr, frame: pd.DataFrame, timestamp_column: str = "ts") -> np.ndarray:
    """Where a condition is TRUE (NULL and FALSE do not hold)."""
    result = _boolean(evaluate(tree, frame, timestamp_column), len(frame))
    return result.fillna(False).to_numpy(bool)


_SUPPORTED = (
    exp.Paren, exp.Column, exp.Identifier, exp.Literal, exp.Boolean, exp.Null, exp.Neg, exp.Not, exp.And,
    exp.Or, exp.Is, exp.In, exp.Between, exp.Like, exp.Anonymous, PseudoColumn, *_COMPARE, *_ARITHMETIC,
)


_T = exp.DataType.Type
_INTEGERS = {_T.TINYINT, _T.SMALLINT, _T.INT, _T.BIGINT, _T.UTINYINT, _T.USMALLINT, _T.UINT, _T.UBIGINT}
_CASTS = {*_INTEGERS, _T.FLOAT, _T.DOUBLE, _T.BOOLEAN}


def _cast(values: pd.Series, to: exp.DataType) -> pd.Series:
    """``cast(values AS to)`` as TDengine does it for numbers: toward zero into integer types,
    any non-zero number is TRUE."""
    kind = to.this
    numbers = pd.to_numeric(values, errors="raise").astype("Float64")
    if kind == _T.BOOLEAN:
        return (numbers != 0).astype("boolean")
    if kind in _INTEGERS:
        whole = np.trunc(numbers.to_numpy(dtype="float64", na_value=np.nan))
        return pd.Series(pd.array(whole, dtype="Float64"), index=numbers.index).astype("Int64")
    return numbers


def _number(text: str) -> int | float:
    return float(text) if re.search(r"[.eE]", text) else int(text)


def _series(v, n: int) -> pd.Series:
    if isinstance(v, pd.Series):
        return v.reset_index(drop=True)
    return pd.Series([v] * n, dtype="object" if v is pd.NA else None).convert_dtypes()


def _boolean(v, n: int) -> pd.Series:
    series = _series(v, n)
    if series.dtype == "boolean":
        return series
    if pd.api.types.is_numeric_dtype(series.dtype):
        return (series != 0).astype("boolean")
    if series.isna().all():
        return pd.Series(pd.array([pd.NA] * n, dtype="boolean"))
    return series.astype("boolean")


def _align(left, right):
    """Compare a timestamp column with a timestamp written as a string, as TDengine does."""
    for a, b in ((left, right), (right, left)):
        if isinstance(a, pd.Series) and isinstance(a.dtype, pd.DatetimeTZDtype) and isinstance(b, str):
            stamp = pd.Timestamp(b)
            stamp = stamp.tz_localize(config.timezone_name()) if stamp.tzinfo is None else stamp
            return (a, stamp) if a is left else (stamp, a)
    return left, right


def _like_regex(pattern: str) -> str:
    out = []
    for ch in pattern:
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
    return "".join(out)
