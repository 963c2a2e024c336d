"""Values of the TDengine language: durations, timestamps, literals, data types, embedded SQL.

Statement structure is read from the project's own tokens; every embedded expression or query is
handed, with its absolute position, to the TDengine dialect on sqlglot (:mod:`.dialect`).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import did_you_mean
from airflow_stream_provider.model.time import CALENDAR_UNITS, UNIT_MICROS
from airflow_stream_provider.sql.ast import placeholders
from airflow_stream_provider.sql.grammar.cursor import TokenCursor
from airflow_stream_provider.sql.grammar.lexer import Kind, Token
from airflow_stream_provider.sql.grammar.timestamps import parse_timestamp
from airflow_stream_provider.sql.tdengine.dialect import parse_fragment
from airflow_stream_provider.values import instant

TYPES_WITH_LENGTH = {"BINARY", "VARCHAR", "NCHAR", "VARBINARY"}
#: TDengine's largest lengths: bytes of BINARY/VARCHAR/VARBINARY, characters of NCHAR (4 bytes each)
MAX_LENGTH = {"BINARY": 65517, "VARCHAR": 65517, "VARBINARY": 65517, "NCHAR": 16379}
SCALAR_TYPES = {
    "TIMESTAMP",
    "BOOL",
    "BOOLEAN",
    "TINYINT",
    "SMALLINT",
    "INT",
    "INTEGER",
    "BIGINT",
    "FLOAT",
    "DOUBLE",
    "JSON",
}
UNSIGNED_TYPES = {"TINYINT", "SMALLINT", "INT", "INTEGER", "BIGINT"}


class ValueParser(TokenCursor):
    """The values statements of the TDengine language are built from."""

    def duration(self, clause: str, what: str = "duration", *, calendar: bool = False) -> m.Duration:
        """A duration token; ``calendar``: the clause also takes months, quarters and years (``1n``,
        ``1q``, ``1y``, TDengine 3.4.1), whose length the calendar decides."""
        tok = self.tok
        if tok.kind is Kind.NUMBER:
            raise self.error(f"{what} {tok.text} needs a unit: a, s, m, h, d or w (as in {tok.text}s)", tok, clause)
        if tok.kind is not Kind.DURATION:
            raise self.error(f"expected a {what} such as 10s or 5m, found {tok.describe()}", tok, clause, syntax=True)
        self.advance()
        count, unit = int(tok.text[:-1]), tok.text[-1].lower()
        if unit == "b":
            raise self.error(
                f"{what} {tok.text}: nanosecond durations need PRECISION 'ns', which Spark timestamps "
                "(microseconds) cannot hold", tok, clause)
        if unit in CALENDAR_UNITS and calendar:
            if count <= 0:
                raise self.error(f"{what} must be positive, found {tok.text}", tok, clause)
            return m.Duration(count, unit)
        if unit in CALENDAR_UNITS:
            raise self.error(
                f"{what} {tok.text}: calendar {CALENDAR_UNITS[unit].lower()}s have no fixed length and are not "
                "supported here; use days (d) or weeks (w)", tok, clause)
        if unit not in UNIT_MICROS:
            raise self.error(f"{what} {tok.text} has an unknown unit {unit!r}; use u, a, s, m, h, d or w", tok, clause)
        if count <= 0:
            raise self.error(f"{what} must be positive, found {tok.text}", tok, clause)
        if count * UNIT_MICROS[unit] > m.TIMESTAMP_SPAN_MICROS:
            raise self.error(f"{what} {tok.text} is longer than the whole range of timestamps (the years 1 to "
                             "9999): no window or delay can be that long", tok, clause)
        return m.Duration(count, unit)

    def time_point(self, clause: str) -> m.TimePoint:
        tok = self.tok
        if tok.kind is Kind.STRING:
            self.advance()
            try:
                return m.TimePoint(at=parse_timestamp(tok.value))
            except ValueError as err:
                raise self.error(str(err), tok, clause) from None
        if tok.kind is Kind.NUMBER and tok.text.isdigit():
            self.advance()
            try:
                return m.TimePoint(at=instant(int(tok.text) * 1000))
            except ValueError:
                raise self.error(f"{tok.text} epoch milliseconds is not a time between the years 1 and 9999", tok,
                                 clause) from None
        if tok.upper == "NOW":
            self.advance()
            if self.accept_op("("):
                self.expect_op(")", clause)
            sign = 1 if self.accept_op("+") else -1 if self.accept_op("-") else 0
            offset = self.duration(clause).micros * sign if sign else 0
            return m.TimePoint(now_offset_micros=offset)
        raise self.error(
            f"expected a timestamp ('2025-01-01 00:00:00', epoch milliseconds or now - 1d), found {tok.describe()}",
            tok, clause, syntax=True)

    def literal(self, clause: str) -> m.Value:
        tok = self.tok
        if tok.kind is Kind.STRING:
            self.advance()
            return tok.value
        if tok.upper in ("NULL",):
            self.advance()
            return None
        if tok.upper in ("TRUE", "FALSE"):
            self.advance()
            return tok.upper == "TRUE"
        if tok.upper == "NOW":
            return self.time_point(clause)
        sign = -1 if self.accept_op("-") else 1
        if sign != -1:
            self.accept_op("+")
        tok = self.tok
        if tok.kind is Kind.NUMBER:
            self.advance()
            if tok.text.isdigit():
                return sign * int(tok.text)
            return sign * float(tok.text)
        raise self.error(f"expected a value, found {tok.describe()}", tok, clause, syntax=True)

    def value_list(self, clause: str) -> tuple[m.Value, ...]:
        self.expect_op("(", clause)
        values = [self.literal(clause)]
        while self.accept_op(","):
            values.append(self.literal(clause))
        self.expect_op(")", clause)
        return tuple(values)

    def data_type(self, clause: str) -> m.DataType:
        tok = self.tok
        word = tok.upper
        if tok.kind is not Kind.IDENT:
            raise self.error(f"expected a data type, found {tok.describe()}", clause=clause, syntax=True)
        self.advance()
        if word == "GEOMETRY":
            raise self.error("the GEOMETRY type is not supported", tok, clause)
        if word == "DECIMAL":
            self.expect_op("(", clause)
            precision = self.integer("DECIMAL precision", clause)
            scale = self.integer("DECIMAL scale", clause) if self.accept_op(",") else 0
            self.expect_op(")", clause)
            if not 1 <= precision <= 38 or not 0 <= scale <= precision:
                raise self.error(f"DECIMAL({precision}, {scale}) is out of range (precision 1..38)", tok, clause)
            return m.DataType("DECIMAL", (precision, scale))
        if word in TYPES_WITH_LENGTH:
            self.expect_op("(", clause)
            size = self.integer(f"{word} length", clause)
            self.expect_op(")", clause)
            if not 1 <= size <= MAX_LENGTH[word]:
                raise self.error(f"{word} length must be between 1 and {MAX_LENGTH[word]}, found {size}", tok, clause)
            return m.DataType(word, (size,))
        if word in SCALAR_TYPES:
            if word in UNSIGNED_TYPES and self.accept("UNSIGNED"):
                return m.DataType(f"{'INT' if word == 'INTEGER' else word} UNSIGNED")
            return m.DataType({"INTEGER": "INT", "BOOLEAN": "BOOL"}.get(word, word))
        choices = sorted(SCALAR_TYPES | TYPES_WITH_LENGTH | {"DECIMAL"})
        raise self.error(f"unknown data type {tok.text}", tok, clause, hint=did_you_mean(tok.text, choices))

    def expression(self, clause: str, stop: Callable[[], bool] = lambda: False) -> m.SqlExpression:
        first = self.tok
        start, end = self.span_until(stop, clause)
        tree = parse_fragment(self.text, start, end, clause=clause)
        return self.sql_expression(start, end, tree, first)

    def query_to_end(self, clause: str, stop: Callable[[], bool] = lambda: False) -> m.SqlExpression:
        first, start, end = self.span_to_end(clause, stop)
        tree = parse_fragment(self.text, start, end, clause=clause, query=True)
        return self.sql_expression(start, end, tree, first)

    def sql_expression(self, start: int, end: int, tree: exp.Expr, first: Token) -> m.SqlExpression:
        """The text between ``start`` and ``end`` with its tree, its position and its placeholders."""
        return m.SqlExpression(self.text[start:end], tree, self.position(first), frozenset(placeholders(tree)))
