"""IoTDB's queries: ``SELECT ... [INTO ...] FROM root... [WHERE] [GROUP BY] [HAVING] [ORDER BY TIME]
[FILL] [LIMIT] [SLIMIT] [ALIGN BY DEVICE]``, as a statement and as the body of a continuous query.
Each clause after FROM has its method in :data:`_CLAUSES`, by its first word."""

from __future__ import annotations

from collections.abc import Callable

from airflow_stream_provider import model as m
from airflow_stream_provider.sql.grammar.lexer import Kind
from airflow_stream_provider.sql.iotdb.expressions import Expressions
from airflow_stream_provider.sql.iotdb.lexer import to_duration
from airflow_stream_provider.sql.iotdb.validate import check_query
from airflow_stream_provider.values import instant


class QueryStatements(Expressions):
    def select(self, pos: m.Position) -> m.Statement:
        return m.QuerySeries(self.query(), position=pos, text="")

    def query(self) -> m.SeriesQuery:
        select = self.expect("SELECT")
        clause = "SELECT"
        if self.at("LAST") and self.peek().kind is not Kind.OP:
            raise self.error("SELECT LAST is not supported: use last_value(...) with GROUP BY, or ORDER BY TIME "
                             "DESC LIMIT 1", clause=clause)
        starts = [self.tok]
        items = [self._item()]
        while self.accept_op(","):
            starts.append(self.tok)
            items.append(self._item())
        into: tuple[m.IntoItem, ...] = ()
        if self.accept("INTO"):
            into = self._into()
        self.expect("FROM", clause=clause)
        sources = self.path_list("a path after FROM", "FROM")
        parts: dict = {}
        while not self.at_end() and not self.at("END"):
            tok = self.tok
            word = tok.upper
            handler = _CLAUSES.get(word)
            if handler is None:
                raise self.error(f"unexpected {tok.describe()}: expected WHERE, GROUP BY, HAVING, ORDER BY, FILL, "
                                 "LIMIT, OFFSET, SLIMIT, SOFFSET or ALIGN BY", syntax=True)
            key = _CLAUSE_KEYS.get(word, word)
            if key in parts:
                raise self.error(f"{word} is given twice", tok)
            parts[key] = True
            handler(self, parts)
        query = m.SeriesQuery(items=tuple(items), sources=sources, into=into,
                              **{k: v for k, v in parts.items() if k.islower()})
        check_query(self, query, select, starts)
        return query

    def _item(self) -> m.SelectItem:
        expr = self.expression("SELECT")
        alias = None
        if self.accept("AS"):
            alias = self.node("an alias", "SELECT")
        return m.SelectItem(expr, alias)

    def _into(self) -> tuple[m.IntoItem, ...]:
        items = []
        while True:
            aligned = self.accept("ALIGNED")
            first = self.tok
            nodes = [self._into_node()]
            while self.accept_op("."):
                nodes.append(self._into_node())
            device = m.SeriesPath(tuple(nodes))
            if not device.absolute and device.nodes != ("::",):
                raise self.error(f"an INTO device is a full path starting with root, found {device}", first, "INTO")
            self.check_device(device, first, "INTO")
            self.expect_op("(", "INTO")
            measurements = [self._into_node()]
            while self.accept_op(","):
                measurements.append(self._into_node())
            self.expect_op(")", "INTO")
            items.append(m.IntoItem(device, tuple(measurements), aligned))
            if not self.accept_op(","):
                return tuple(items)

    def _into_node(self) -> str:
        """A node of an INTO path: a name, ``::``, or a name holding ``${i}`` placeholders."""
        if self.accept_op("::"):
            return "::"
        parts: list[str] = []
        first = self.tok
        while True:
            tok = self.tok
            if tok.kind is Kind.OP and tok.text == "$" and self.peek().text == "{":
                self.advance()
                self.advance()
                index = self.integer("a placeholder's node number", "INTO")
                self.expect_op("}", "INTO")
                parts.append(f"${{{index}}}")
            elif tok.kind in (Kind.IDENT, Kind.QUOTED_IDENT, Kind.NUMBER):
                parts.append(self.advance().value)
            else:
                break
            if self.tok.start != self.toks[self.i - 1].end:
                break
        if not parts:
            raise self.error(f"expected a node of an INTO path, found {self.tok.describe()}", clause="INTO",
                             syntax=True)
        self.check_node("".join(parts), first, "INTO")
        return "".join(parts)

    def _where(self, parts: dict) -> None:
        self.advance()
        parts["where"] = self.expression("WHERE")

    def _group_by(self, parts: dict) -> None:
        self.expect("GROUP", "BY")
        clause = "GROUP BY"
        if self.at("LEVEL"):
            parts["levels"] = self._levels(clause)
            return
        self.expect_op("(", clause)
        start = end = None
        left_open = False
        if self.at_op("[") or self.at_op("("):
            left_open = self.advance().text == "("
            start = self.time_constant("the start of the GROUP BY range", clause)
            self.expect_op(",", clause)
            end = self.time_constant("the end of the GROUP BY range", clause)
            self.expect_op("]" if left_open else ")", clause)
            self.expect_op(",", clause)
        interval = self._window_duration("the GROUP BY interval", clause)
        step = self._window_duration("the sliding step", clause) if self.accept_op(",") else None
        self.expect_op(")", clause)
        parts["group_by"] = m.GroupByTime(interval, step, _point(start), _point(end), left_open)
        if self.accept_op(","):
            parts["levels"] = self._levels(clause)

    def _window_duration(self, what: str, clause: str) -> m.Duration:
        tok = self.tok
        micros = self.duration_micros(what, clause)
        duration = to_duration(tok.text)
        assert duration is not None and duration.micros == micros
        return duration

    def _levels(self, clause: str) -> tuple[int, ...]:
        self.expect("LEVEL", clause=clause)
        self.expect_op("=", clause)
        levels = [self.integer("a level", clause)]
        while self.accept_op(","):
            levels.append(self.integer("a level", clause))
        if any(level < 0 for level in levels):
            raise self.error("a level is 0 (root) or more", clause=clause)
        return tuple(levels)

    def _having(self, parts: dict) -> None:
        self.advance()
        parts["having"] = self.expression("HAVING")

    def _order(self, parts: dict) -> None:
        self.expect("ORDER", "BY")
        if not (self.accept("TIME") or self.accept("TIMESTAMP")):
            raise self.error(f"ORDER BY orders by TIME here, found {self.tok.describe()}", clause="ORDER BY")
        parts["descending"] = self.accept("DESC")
        if not parts["descending"]:
            self.accept("ASC")

    def _fill(self, parts: dict) -> None:
        self.advance()
        self.expect_op("(", "FILL")
        tok = self.tok
        if self.accept("PREVIOUS"):
            fill = m.SeriesFill("previous")
        elif self.accept("LINEAR"):
            fill = m.SeriesFill("linear")
        else:
            value = self.constant("FILL")
            if value is None:
                raise self.error("FILL takes PREVIOUS, LINEAR or a constant, not null", tok, "FILL")
            fill = m.SeriesFill("constant", value)
        if self.at_op(","):
            raise self.error("FILL takes one method for every column (IoTDB 1.2 has no time bound for PREVIOUS)",
                             clause="FILL")
        self.expect_op(")", "FILL")
        parts["fill"] = fill

    def _limit(self, parts: dict) -> None:
        word = self.advance().upper
        count = self._count(word)
        if word == "LIMIT":
            parts["limit"] = count
            if self.accept("OFFSET"):
                parts["offset"] = self._count("OFFSET", zero=True)
        else:
            parts["slimit"] = count
            if self.accept("SOFFSET"):
                parts["soffset"] = self._count("SOFFSET", zero=True)

    def _offset(self, parts: dict) -> None:
        word = self.advance().upper
        parts["offset" if word == "OFFSET" else "soffset"] = self._count(word, zero=True)

    def _count(self, clause: str, zero: bool = False) -> int:
        tok = self.tok
        value = self.integer(f"{clause}'s count", clause)
        if value < (0 if zero else 1) or value >= 2 ** 63:
            raise self.error(f"{clause} {value}: it must be {'0 or more' if zero else 'positive'} and an Int64",
                             tok, clause)
        return value

    def _align(self, parts: dict) -> None:
        self.expect("ALIGN", "BY")
        if self.accept("DEVICE"):
            parts["align_by_device"] = True
        elif not self.accept("TIME"):
            raise self.error(f"expected ALIGN BY DEVICE or ALIGN BY TIME, found {self.tok.describe()}",
                             clause="ALIGN BY", syntax=True)


def _point(value: m.TimePoint | int | None) -> m.TimePoint | None:
    """A GROUP BY bound: epoch numbers are milliseconds here (IoTDB's default precision)."""
    if value is None or isinstance(value, m.TimePoint):
        return value
    return m.TimePoint(at=instant(value * 1000))


_CLAUSES: dict[str, Callable[[QueryStatements, dict], None]] = {
    "WHERE": QueryStatements._where, "GROUP": QueryStatements._group_by, "HAVING": QueryStatements._having,
    "ORDER": QueryStatements._order, "FILL": QueryStatements._fill, "LIMIT": QueryStatements._limit,
    "SLIMIT": QueryStatements._limit, "OFFSET": QueryStatements._offset, "SOFFSET": QueryStatements._offset,
    "ALIGN": QueryStatements._align,
}
#: clauses counted as one for "given twice"
_CLAUSE_KEYS = {"OFFSET": "OFFSET_ONLY", "SOFFSET": "SOFFSET_ONLY"}
