"""IoTDB expressions and paths: series references, constants, times, functions and operators.

Precedence, loosest first: ``OR`` (``||``), ``AND`` (``&&``), ``NOT`` (``!``), comparisons
(``= == != <> < <= > >=``, ``[NOT] BETWEEN``, ``[NOT] IN``), ``+ -``, ``* / %``, unary ``- +``.
A ``*`` where an operand is expected is a wildcard path (``count(*)``, ``select * from ...``).
A timestamp or ``now()`` followed by ``± duration`` terms is folded into one time constant.
"""

from __future__ import annotations

from datetime import timedelta

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.model.names import shown
from airflow_stream_provider.model.series import device_problem, node_problem
from airflow_stream_provider.sql.grammar.cursor import TokenCursor
from airflow_stream_provider.sql.grammar.lexer import Kind, Token
from airflow_stream_provider.sql.grammar.timestamps import parse_timestamp
from airflow_stream_provider.sql.iotdb.lexer import DurationError, IotdbLexer, duration_micros
from airflow_stream_provider.values import FIRST_MICROS, LAST_MICROS

_COMPARISONS = {"=": "=", "==": "=", "!=": "!=", "<>": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
#: words that end an expression where a path node could otherwise be read
CLAUSE_WORDS = frozenset({
    "FROM", "WHERE", "GROUP", "HAVING", "ORDER", "FILL", "LIMIT", "OFFSET", "SLIMIT", "SOFFSET", "ALIGN",
    "INTO", "AS", "AND", "OR", "NOT", "BETWEEN", "IN", "END", "LIKE", "REGEXP", "ASC", "DESC", "VALUES",
    "ALIGNED", "LEVEL",
})


class Expressions(TokenCursor):
    """The expression and path reader of the IoTDB parser."""

    LEXER = IotdbLexer

    # --- paths -----------------------------------------------------------------------------------

    def at_node(self) -> bool:
        tok = self.tok
        return tok.kind in (Kind.IDENT, Kind.QUOTED_IDENT) or (tok.kind is Kind.OP and tok.text == "*")

    def node(self, what: str, clause: str | None) -> str:
        """One node: a name, a backquoted name, ``*``, ``**``, or a name with ``*`` in it (``d*``),
        written without spaces."""
        first = self.tok
        if not self.at_node():
            raise self.error(f"expected {what}, found {first.describe()}", clause=clause, syntax=True)
        parts = [self._node_part()]
        while self.at_node() and self.tok.start == self.toks[self.i - 1].end and self.tok.kind is not Kind.QUOTED_IDENT:
            parts.append(self._node_part())
        text = "".join(parts)
        if "*" in text and text.strip("*") == "" and len(text) > 2:
            raise self.error(f"{text} is not a wildcard: * is one node, ** one or more", first, clause)
        self.check_node(text, first, clause)
        return text

    def check_node(self, node: str, at: Token, clause: str | None) -> None:
        """The node rule (:func:`~airflow_stream_provider.model.series.node_problem`), with ``at``'s position."""
        problem = node_problem(node)
        if problem is not None:
            raise self.error(f"the node {shown(node)} {problem}", at, clause)

    def check_device(self, device: m.SeriesPath, at: Token, clause: str | None) -> None:
        """The length rule of a device path, with ``at``'s position."""
        problem = device_problem(device)
        if problem is not None:
            raise self.error(f"the device path {shown(str(device))}: {problem}", at, clause)

    def _node_part(self) -> str:
        tok = self.advance()
        return tok.value

    def path(self, what: str, clause: str | None, *, absolute: bool = False,
             wildcards: bool = True) -> m.SeriesPath:
        """``node.node...``; ``absolute``: it must start with ``root``; without ``wildcards``, a
        concrete path."""
        first = self.tok
        nodes = [self.node(what, clause)]
        while self.at_op(".") and self.peek().start == self.tok.end:
            self.advance()
            nodes.append(self.node(f"a node after '.' in {what}", clause))
        path = m.SeriesPath(tuple(nodes))
        if absolute and not path.absolute:
            raise self.error(f"{what} must be a full path starting with root, as root.ln.wf01, found {path}",
                             first, clause)
        if not wildcards and path.is_pattern:
            raise self.error(f"{what} cannot hold wildcards (* or **): {path}", first, clause)
        return path

    def path_list(self, what: str, clause: str | None, *, absolute: bool = True) -> tuple[m.SeriesPath, ...]:
        found = [self.path(what, clause, absolute=absolute)]
        while self.accept_op(","):
            found.append(self.path(what, clause, absolute=absolute))
        return tuple(found)

    # --- times -----------------------------------------------------------------------------------

    def duration_micros(self, what: str, clause: str | None, *, positive: bool = True) -> int:
        """A fixed-length duration token (``10s``, ``1d2h``, ``500ms``), in microseconds."""
        tok = self.tok
        if tok.kind is not Kind.DURATION:
            raise self.error(f"{what} must be a duration such as 10s or 1h30m, found {tok.describe()}",
                             clause=clause, syntax=True)
        try:
            micros = duration_micros(tok.text)
        except DurationError as err:
            raise self.error(str(err), tok, clause) from None
        if micros is None:
            raise self.error(f"{what} must have a fixed length: months (mo) and years (y) have none", tok, clause)
        if positive and micros <= 0:
            raise self.error(f"{what} must be greater than 0, found {tok.text}", tok, clause)
        self.advance()
        return micros

    def time_constant(self, what: str, clause: str | None) -> m.TimePoint | int:
        """A timestamp, ``now()`` or an epoch number (in the database's precision), each
        optionally followed by ``+ duration`` / ``- duration`` terms."""
        tok = self.tok
        negative = False
        if tok.kind is Kind.NUMBER or (tok.kind is Kind.OP and tok.text == "-" and self.peek().kind is Kind.NUMBER):
            negative = self.accept_op("-")
            tok = self.tok
            if not tok.text.isdigit():
                raise self.error(f"{what}: an epoch time is a whole number, found {tok.text}", tok, clause)
            self.advance()
            value = -int(tok.text) if negative else int(tok.text)
            if not FIRST_MICROS <= value * 1000 <= LAST_MICROS:  # an epoch number is milliseconds
                raise self.error(f"{what}: {value} milliseconds since 1970 is outside the years 1 to 9999, the "
                                 "times a series can hold", tok, clause)
            return value
        point = self._time_point(what, clause)
        if point is None:
            raise self.error(f"{what} must be a time: a timestamp such as 2021-05-11T22:18:40+08:00, an "
                             f"epoch number or now(), found {tok.describe()}", clause=clause, syntax=True)
        return point

    def _time_point(self, what: str, clause: str | None) -> m.TimePoint | None:
        """A timestamp or ``now()`` here, with its ``± duration`` terms; None when neither is here."""
        tok = self.tok
        if tok.kind is Kind.DATETIME:
            self.advance()
            try:
                at = parse_timestamp(_iso(tok.text))
            except ValueError as err:
                raise self.error(f"{what}: {err}", tok, clause) from None
            return self._shifted(m.TimePoint(at=at), what, clause)
        if self.at("NOW") and self.peek().text == "(":
            self.advance()
            self.expect_op("(", clause)
            self.expect_op(")", clause)
            return self._shifted(m.TimePoint(now_offset_micros=0), what, clause)
        return None

    def _shifted(self, point: m.TimePoint, what: str, clause: str | None) -> m.TimePoint:
        offset = 0
        while (self.at_op("+") or self.at_op("-")) and self.peek().kind is Kind.DURATION:
            sign = 1 if self.advance().text == "+" else -1
            offset += sign * self.duration_micros(what, clause, positive=False)
        if not offset:
            return point
        if point.at is not None:
            try:
                return m.TimePoint(at=point.at + timedelta(microseconds=offset))
            except OverflowError:
                raise self.error(f"{what}: {point.at.isoformat()} shifted by {offset} microseconds is outside the "
                                 "years 1 to 9999", clause=clause) from None
        return m.TimePoint(now_offset_micros=(point.now_offset_micros or 0) + offset)

    # --- expressions -----------------------------------------------------------------------------

    def expression(self, clause: str) -> m.SeriesExpr:
        return self._or(clause)

    def _or(self, clause: str) -> m.SeriesExpr:
        left = self._and(clause)
        while self.accept("OR") or self.accept_op("||"):
            left = m.Binary("OR", left, self._and(clause))
        return left

    def _and(self, clause: str) -> m.SeriesExpr:
        left = self._not(clause)
        while self.accept("AND") or (self.at_op("&") and self.peek().text == "&" and self._skip(2)):
            left = m.Binary("AND", left, self._not(clause))
        return left

    def _skip(self, n: int) -> bool:
        self.i += n
        return True

    def _not(self, clause: str) -> m.SeriesExpr:
        if self.accept("NOT") or self.accept_op("!"):
            return m.Unary("NOT", self._not(clause))
        return self._comparison(clause)

    def _comparison(self, clause: str) -> m.SeriesExpr:
        left = self._additive(clause)
        tok = self.tok
        if tok.kind is Kind.OP and tok.text in _COMPARISONS:
            self.advance()
            return m.Binary(_COMPARISONS[tok.text], left, self._additive(clause))
        if tok.kind is Kind.OP and tok.text == "=" and self.peek().text == "=":
            self._skip(2)
            return m.Binary("=", left, self._additive(clause))
        negated = self.at("NOT") and self.peek().upper in ("BETWEEN", "IN")
        if negated:
            self.advance()
        if self.accept("BETWEEN"):
            low = self._additive(clause)
            self.expect("AND", clause=clause)
            return m.Between(left, low, self._additive(clause), negated)
        if self.accept("IN"):
            self.expect_op("(", clause)
            values = [self._additive(clause)]
            while self.accept_op(","):
                values.append(self._additive(clause))
            self.expect_op(")", clause)
            return m.InList(left, tuple(values), negated)
        if self.at("LIKE") or self.at("REGEXP"):
            raise self.error(f"{self.tok.upper} is not supported here: compare values with =, <, >, IN or BETWEEN",
                             clause=clause)
        return left

    def _additive(self, clause: str) -> m.SeriesExpr:
        left = self._multiplicative(clause)
        while self.tok.kind is Kind.OP and self.tok.text in ("+", "-"):
            op = self.advance().text
            left = m.Binary(op, left, self._multiplicative(clause))
        return left

    def constant(self, clause: str) -> int | float | str | bool | None:
        """A constant value: a number, a string, true, false or null."""
        tok = self.tok
        expr = self._unary(clause)
        if isinstance(expr, m.Literal) and not isinstance(expr.value, m.TimePoint):
            return expr.value
        raise self.error(f"a value must be a number, a string, true, false or null, found {tok.describe()}",
                         tok, clause)

    def _multiplicative(self, clause: str) -> m.SeriesExpr:
        left = self._unary(clause)
        while self.tok.kind is Kind.OP and self.tok.text in ("*", "/", "%"):
            op = self.advance().text
            left = m.Binary(op, left, self._unary(clause))
        return left

    def _unary(self, clause: str) -> m.SeriesExpr:
        if self.tok.kind is Kind.OP and self.tok.text in ("-", "+") and not self.at_op("*"):
            op = self.advance().text
            operand = self._unary(clause)
            if isinstance(operand, m.Literal) and isinstance(operand.value, (int, float)) \
                    and not isinstance(operand.value, bool):
                return m.Literal(-operand.value if op == "-" else operand.value)
            return m.Unary(op, operand)
        return self._primary(clause)

    def _primary(self, clause: str) -> m.SeriesExpr:
        tok = self.tok
        if tok.kind is Kind.NUMBER:
            self.advance()
            return m.Literal(_number(tok))
        if tok.kind is Kind.STRING:
            self.advance()
            return m.Literal(tok.value)
        point = self._time_point(clause, clause)
        if point is not None:
            return m.Literal(point)
        if tok.kind is Kind.DURATION:
            raise self.error(f"a duration ({tok.text}) is only a time offset, as in now() - {tok.text}", tok, clause)
        if self.accept_op("("):
            inner = self.expression(clause)
            self.expect_op(")", clause)
            return inner
        if tok.upper in ("TRUE", "FALSE") and not self._continues_path():
            self.advance()
            return m.Literal(tok.upper == "TRUE")
        if tok.upper == "NULL" and not self._continues_path():
            self.advance()
            return m.Literal(None)
        if tok.upper in ("TIME", "TIMESTAMP") and not self._continues_path():
            self.advance()
            return m.TimeRef()
        if tok.kind is Kind.IDENT and self.peek().kind is Kind.OP and self.peek().text == "(":
            return self._call(clause)
        if self.at_node():
            if tok.kind is Kind.IDENT and tok.upper in CLAUSE_WORDS:
                raise self.error(f"expected an expression, found {tok.describe()}", clause=clause, syntax=True)
            return m.Ref(self.path("a series", clause))
        raise self.error(f"expected an expression, found {tok.describe()}", clause=clause, syntax=True)

    def _continues_path(self) -> bool:
        return self.peek().kind is Kind.OP and self.peek().text == "." and self.peek().start == self.tok.end

    def _call(self, clause: str) -> m.SeriesExpr:
        name = self.advance().text.lower()
        self.expect_op("(", clause)
        args: list[m.SeriesExpr] = []
        attributes: list[tuple[str, str]] = []
        if not self.at_op(")"):
            while True:
                if self.tok.kind is Kind.STRING and self.peek().text == "=":
                    key = self.advance().value
                    self.advance()
                    value = self.tok
                    if value.kind not in (Kind.STRING, Kind.NUMBER):
                        raise self.error(f"the attribute {key!r} of {name} needs a quoted value, found "
                                         f"{value.describe()}", clause=clause, syntax=True)
                    self.advance()
                    attributes.append((key, value.value))
                else:
                    args.append(self.expression(clause))
                if not self.accept_op(","):
                    break
        self.expect_op(")", clause)
        return m.Call(name, tuple(args), tuple(attributes))


def _number(tok: Token) -> int | float:
    text = tok.text
    return float(text) if any(c in text for c in ".eE") else int(text)


def _iso(text: str) -> str:
    """An IoTDB timestamp in ISO 8601: ``/`` or ``.`` between the date's parts become ``-``."""
    date, _, rest = text.partition("T") if "T" in text else text.partition(" ")
    date = date.replace("/", "-").replace(".", "-")
    return f"{date}T{rest}" if rest else date


def definition_error(message: str, tok: Token, clause: str) -> StreamDefinitionError:
    return StreamDefinitionError(message, line=tok.line, column=tok.column, clause=clause)
