"""The statements of IoTDB's SQL (reference 004 and the IoTDB 1.2 manual it belongs to).

Databases and series (``CREATE DATABASE root.ln``, ``CREATE [ALIGNED] TIMESERIES``,
``DELETE``/``DROP`` of both, ``SHOW DATABASES``/``TIMESERIES``/``DEVICES``), points (``INSERT INTO
root.ln.wf01.wt01(time, temperature) VALUES ...``, ``DELETE FROM ... WHERE time ...``), queries
(``SELECT ... [INTO ...] FROM root... [WHERE] [GROUP BY] [HAVING] [ORDER BY TIME] [FILL] [LIMIT]
[SLIMIT] [ALIGN BY DEVICE]``), continuous queries (``CREATE CQ``, ``SHOW CQS``, ``DROP CQ``) and
triggers (``CREATE TRIGGER``, ``DROP TRIGGER``, ``SHOW TRIGGERS``).
Every rule of reference 004 that a statement alone can break is a positioned error here.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from airflow_stream_provider import model as m
from airflow_stream_provider.sql.grammar.lexer import Kind, Token
from airflow_stream_provider.sql.iotdb.expressions import Expressions
from airflow_stream_provider.sql.iotdb.lexer import to_duration
from airflow_stream_provider.sql.iotdb.validate import check_query, lower_cq
from airflow_stream_provider.values import instant

ENCODINGS = frozenset({"PLAIN", "RLE", "TS_2DIFF", "GORILLA", "DICTIONARY", "ZIGZAG", "CHIMP", "SPRINTZ",
                       "RLBE", "FREQ", "DIFF", "BITMAP", "REGULAR", "GORILLA_V1"})
COMPRESSIONS = frozenset({"UNCOMPRESSED", "SNAPPY", "LZ4", "GZIP", "ZSTD", "LZMA2", "SDT", "PAA", "PLA"})
#: the aliases IoTDB accepts for its data types
TYPE_NAMES = {**{t.value: t for t in m.SeriesType}, "INT": m.SeriesType.INT32, "LONG": m.SeriesType.INT64,
              "STRING": m.SeriesType.TEXT, "BOOL": m.SeriesType.BOOLEAN}

ParseMethod = Callable[["Parser", m.Position], m.Statement]


class Parser(Expressions):
    STATEMENTS: dict[tuple[str, ...], ParseMethod] = {
        ("CREATE", "DATABASE"): lambda p, pos: p.create_database(pos),
        ("CREATE", "STORAGE", "GROUP"): lambda p, pos: p.create_database(pos),
        ("CREATE", "TIMESERIES"): lambda p, pos: p.create_timeseries(pos),
        ("CREATE", "ALIGNED", "TIMESERIES"): lambda p, pos: p.create_timeseries(pos),
        ("CREATE", "CQ"): lambda p, pos: p.create_cq(pos),
        ("CREATE", "CONTINUOUS", "QUERY"): lambda p, pos: p.create_cq(pos),
        ("DROP", "DATABASE"): lambda p, pos: p.drop_database(pos),
        ("DELETE", "DATABASE"): lambda p, pos: p.drop_database(pos),
        ("DROP", "TIMESERIES"): lambda p, pos: p.drop_timeseries(pos),
        ("DELETE", "TIMESERIES"): lambda p, pos: p.drop_timeseries(pos),
        ("DROP", "CQ"): lambda p, pos: p.drop_cq(pos),
        ("DROP", "CONTINUOUS", "QUERY"): lambda p, pos: p.drop_cq(pos),
        ("SHOW", "DATABASES"): lambda p, pos: p.show(pos, m.ShowSeriesDatabases),
        ("SHOW", "STORAGE", "GROUP"): lambda p, pos: p.show(pos, m.ShowSeriesDatabases),
        ("SHOW", "TIMESERIES"): lambda p, pos: p.show(pos, m.ShowTimeseries),
        ("SHOW", "DEVICES"): lambda p, pos: p.show(pos, m.ShowDevices),
        ("CREATE", "TRIGGER"): lambda p, pos: p.create_trigger(pos),
        ("CREATE", "STATELESS", "TRIGGER"): lambda p, pos: p.create_trigger(pos),
        ("CREATE", "STATEFUL", "TRIGGER"): lambda p, pos: p.create_trigger(pos),
        ("DROP", "TRIGGER"): lambda p, pos: p.drop_trigger(pos),
        ("SHOW", "TRIGGERS"): lambda p, pos: p.show_triggers(pos),
        ("SHOW", "CQS"): lambda p, pos: p.show_cqs(pos),
        ("SHOW", "CONTINUOUS", "QUERIES"): lambda p, pos: p.show_cqs(pos),
        ("INSERT", "INTO"): lambda p, pos: p.insert(pos),
        ("DELETE", "FROM"): lambda p, pos: p.delete(pos),
        ("SELECT",): lambda p, pos: p.select(pos),
    }
    KNOWN = ("CREATE DATABASE, CREATE [ALIGNED] TIMESERIES, CREATE CQ, CREATE TRIGGER, DROP/DELETE DATABASE or "
             "TIMESERIES, DROP CQ, DROP TRIGGER, SHOW DATABASES/TIMESERIES/DEVICES/CQS/TRIGGERS, INSERT, DELETE "
             "or SELECT")

    def parse(self) -> list[m.Statement]:
        return self.statements(lambda: [self.statement()])

    def statement(self) -> m.Statement:
        first = self.tok
        method = next((self.STATEMENTS[w] for w in sorted(self.STATEMENTS, key=len, reverse=True) if self.at(*w)),
                      None)
        if method is None:
            raise self.error(f"unknown IoTDB statement {first.describe()}: expected {self.KNOWN}", syntax=True)
        return method(self, self.position(first))

    # --- databases and series --------------------------------------------------------------------

    def create_database(self, pos: m.Position) -> m.Statement:
        self.advance()
        self.accept("DATABASE") or self.expect("STORAGE", "GROUP")
        clause = "CREATE DATABASE"
        first = self.tok
        path = self.path("the database", clause, absolute=True, wildcards=False)
        if len(path.nodes) < 2:
            raise self.error("a database is a path under root, as root.ln", first, clause)
        return m.CreateSeriesDatabase(path, position=pos, text="")

    def drop_database(self, pos: m.Position) -> m.Statement:
        self.advance()
        self.expect("DATABASE")
        return m.DropSeriesDatabases(self.path_list("a database", "DELETE DATABASE"), position=pos, text="")

    def create_timeseries(self, pos: m.Position) -> m.Statement:
        self.advance()
        aligned = self.accept("ALIGNED")
        self.expect("TIMESERIES")
        clause = "CREATE TIMESERIES"
        first = self.tok
        path = self.path("the series", clause, absolute=True, wildcards=False)
        if not aligned:
            if len(path.nodes) < 4:
                raise self.error("a series is root.<database>.<device>.<measurement>, at least four nodes",
                                 first, clause)
            return m.CreateTimeseries((self._series_attributes(path, clause, first, with_keyword=True),),
                                      position=pos, text="")
        self.expect_op("(", clause)
        series = []
        while True:
            at = self.tok
            name = self.node("a measurement", clause)
            series.append(self._series_attributes(path.child(name), clause, at, with_keyword=False))
            if not self.accept_op(","):
                break
        self.expect_op(")", clause)
        names = [s.path.last for s in series]
        if len(set(names)) != len(names):
            raise self.error(f"a measurement is named twice in {path}", first, clause)
        return m.CreateTimeseries(tuple(series), aligned=True, position=pos, text="")

    def _series_attributes(self, path: m.SeriesPath, clause: str, at: Token, *,
                           with_keyword: bool) -> m.TimeseriesDefinition:
        """``WITH DATATYPE=T[, ENCODING=E][, COMPRESSOR=C]`` or ``T [ENCODING=E] [COMPRESSOR=C]``."""
        values: dict[str, tuple[str, object]] = {}
        if with_keyword and self.accept("WITH"):
            self._attribute(values, clause)
            while self.accept_op(","):
                self._attribute(values, clause)
        else:
            tok = self.tok
            if tok.kind is Kind.IDENT and tok.upper in TYPE_NAMES:
                self.advance()
                values["DATATYPE"] = (tok.upper, tok)
            while self.tok.kind is Kind.IDENT and self.tok.upper in ("ENCODING", "COMPRESSOR", "COMPRESSION"):
                self._attribute(values, clause)
        if self.at("TAGS") or self.at("ATTRIBUTES"):
            raise self.error(f"the {self.tok.upper} of a series are not kept here: create it without them",
                             clause=clause)
        if self.at_op("("):
            raise self.error("an alias of a series is not supported: name the measurement itself", clause=clause)
        if "DATATYPE" not in values:
            raise self.error(f"{path} needs a data type: WITH DATATYPE=<{'|'.join(t.value for t in m.SeriesType)}>",
                             at, clause=clause, syntax=True)
        dtype = TYPE_NAMES[values["DATATYPE"][0]]
        encoding = values.get("ENCODING", (None, None))[0]
        compression = (values.get("COMPRESSOR") or values.get("COMPRESSION") or (None, None))[0]
        return m.TimeseriesDefinition(path, dtype, encoding, compression)

    def _attribute(self, values: dict, clause: str) -> None:
        key_tok = self.tok
        key = self.ident("an attribute", clause).upper()
        if key == "TYPE":
            key = "DATATYPE"
        self.expect_op("=", clause)
        tok = self.tok
        value = self.ident(f"a value of {key}", clause).upper()
        allowed = {"DATATYPE": TYPE_NAMES, "ENCODING": ENCODINGS, "COMPRESSOR": COMPRESSIONS,
                   "COMPRESSION": COMPRESSIONS}.get(key)
        if allowed is None:
            raise self.error(f"unknown attribute {key}: expected DATATYPE, ENCODING or COMPRESSOR", key_tok, clause)
        if value not in allowed:
            raise self.error(f"unknown {key} {value}: expected one of {', '.join(sorted(allowed))}", tok, clause)
        if key in values:
            raise self.error(f"{key} is given twice", key_tok, clause)
        values[key] = (value, tok)

    def drop_timeseries(self, pos: m.Position) -> m.Statement:
        self.advance()
        self.expect("TIMESERIES")
        return m.DropTimeseries(self.path_list("a series", "DELETE TIMESERIES"), position=pos, text="")

    def show(self, pos: m.Position, kind: type[m.ShowSeriesDatabases | m.ShowTimeseries | m.ShowDevices]
             ) -> m.Statement:
        self.advance()
        if not (self.accept("DATABASES") or self.accept("TIMESERIES") or self.accept("DEVICES")):
            self.expect("STORAGE", "GROUP")
        pattern = None
        if not self.at_end():
            pattern = self.path("a path pattern", kind.kind, absolute=True)
        return kind(pattern, position=pos, text="")

    # --- points ----------------------------------------------------------------------------------

    def insert(self, pos: m.Position) -> m.Statement:
        self.expect("INSERT", "INTO")
        clause = "INSERT"
        first = self.tok
        device = self.path("the device", clause, absolute=True, wildcards=False)
        if len(device.nodes) < 3:
            raise self.error("a device is a path under a database, as root.ln.wf01", first, clause)
        self.expect_op("(", clause)
        with_time = self.accept("TIME") or self.accept("TIMESTAMP")
        if with_time and not self.at_op(")"):
            self.expect_op(",", clause)
        measurements: list[str] = []
        while not self.at_op(")"):
            tok = self.tok
            name = self.node("a measurement", clause)
            if "*" in name:
                raise self.error(f"a measurement of an INSERT cannot hold wildcards: {name}", tok, clause)
            if name in measurements:
                raise self.error(f"measurement {name} is listed twice", tok, clause)
            measurements.append(name)
            if not self.accept_op(","):
                break
        self.expect_op(")", clause)
        if not measurements:
            raise self.error("an INSERT names at least one measurement", clause=clause)
        aligned = self.accept("ALIGNED")
        self.expect("VALUES", clause=clause)
        rows = []
        while True:
            row_tok = self.expect_op("(", clause)
            time = self.time_constant("the time of a row", clause) if with_time else None
            values: list[int | float | str | bool | None] = []
            while not self.at_op(")"):
                if with_time or values:
                    self.expect_op(",", clause)
                values.append(self._value(clause))
            self.expect_op(")", clause)
            if len(values) != len(measurements):
                raise self.error(f"{len(values)} values for {len(measurements)} measurements "
                                 f"({', '.join(measurements)})", row_tok, clause)
            rows.append((time, tuple(values)))
            if not self.accept_op(","):
                break
        if not with_time and len(rows) > 1:
            raise self.error("several rows need their times: INSERT INTO device(time, ...) VALUES (t, ...), ...",
                             first, clause)
        return m.InsertPoints(device, tuple(measurements), tuple(rows), aligned, position=pos, text="")

    def _value(self, clause: str) -> int | float | str | bool | None:
        tok = self.tok
        expr = self._unary(clause)
        if isinstance(expr, m.Literal) and not isinstance(expr.value, m.TimePoint):
            return expr.value
        raise self.error(f"a value must be a number, a string, true, false or null, found {tok.describe()}",
                         tok, clause)

    def delete(self, pos: m.Position) -> m.Statement:
        self.expect("DELETE", "FROM")
        patterns = self.path_list("a series", "DELETE")
        where = None
        if self.accept("WHERE"):
            tok = self.tok
            where = self.expression("WHERE")
            _check_time_only(self, where, tok)
        return m.DeletePoints(patterns, where, position=pos, text="")

    # --- queries ---------------------------------------------------------------------------------

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
            value = self._value("FILL")
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

    # --- continuous queries ----------------------------------------------------------------------

    def create_cq(self, pos: m.Position) -> m.Statement:
        start_tok = self.tok
        self.advance()
        self.accept("CQ") or self.expect("CONTINUOUS", "QUERY")
        clause = "CREATE CQ"
        id_tok = self.tok
        cq_id = self.ident("a continuous query id", clause)
        if "." in cq_id or not cq_id.strip():
            raise self.error(f"a continuous query id is one name, found {cq_id!r}", id_tok, clause)
        every = boundary = start = end = None
        tokens: dict[str, object] = {}
        if self.accept("RESAMPLE"):
            if self.accept("EVERY"):
                tokens["EVERY"] = self.tok
                every = self.duration_micros("EVERY", "RESAMPLE")
            if self.accept("BOUNDARY"):
                tokens["BOUNDARY"] = self.tok
                boundary = self.time_constant("BOUNDARY", "RESAMPLE")
            if self.accept("RANGE"):
                tokens["RANGE"] = self.tok
                start = self.duration_micros("RANGE's start offset", "RESAMPLE")
                if self.accept_op(","):
                    tokens["RANGE_END"] = self.tok
                    end = self.duration_micros("RANGE's end offset", "RESAMPLE", positive=False)
            if not tokens:
                raise self.error(f"RESAMPLE needs EVERY, BOUNDARY or RANGE (in that order), found "
                                 f"{self.tok.describe()}", clause="RESAMPLE", syntax=True)
        policy = "BLOCKED"
        if self.accept("TIMEOUT"):
            self.expect("POLICY", clause="TIMEOUT POLICY")
            tok = self.tok
            if tok.upper not in ("BLOCKED", "DISCARD"):
                raise self.error(f"expected BLOCKED or DISCARD, found {tok.describe()}", clause="TIMEOUT POLICY",
                                 syntax=True)
            policy = self.advance().upper
        self.expect("BEGIN", clause=clause)
        body_tok = self.tok
        query = self.query()
        self.expect("END", clause=clause)
        return lower_cq(self, pos, cq_id, every, boundary, start, end, policy, query, body_tok, tokens, start_tok)

    def drop_cq(self, pos: m.Position) -> m.Statement:
        self.advance()
        self.accept("CQ") or self.expect("CONTINUOUS", "QUERY")
        return m.DropContinuousQuery(self.ident("a continuous query id", "DROP CQ"), position=pos, text="")

    def show_cqs(self, pos: m.Position) -> m.Statement:
        self.advance()
        self.accept("CQS") or self.expect("CONTINUOUS", "QUERIES")
        return m.ShowContinuousQueries(position=pos, text="")

    # --- triggers --------------------------------------------------------------------------------

    def create_trigger(self, pos: m.Position) -> m.Statement:
        """``CREATE [STATELESS|STATEFUL] TRIGGER name BEFORE|AFTER INSERT ON pattern AS 'pkg.mod.Class'
        [USING URI 'uri'] [WITH ("k" = "v", ...)]``; the name keeps its case."""
        self.advance()
        kind = m.TriggerType.STATELESS
        if self.at("STATELESS") or self.at("STATEFUL"):
            kind = m.TriggerType(self.advance().upper)
        self.expect("TRIGGER")
        clause = "CREATE TRIGGER"
        name_tok = self.tok
        name = self.ident("a trigger name", clause)
        if not name.strip() or "." in name:
            raise self.error(f"a trigger name is one name, found {name!r}", name_tok, clause)
        if not (self.at("BEFORE") or self.at("AFTER")):
            raise self.error(f"expected BEFORE or AFTER INSERT, found {self.tok.describe()}", clause=clause,
                             syntax=True)
        event = m.TriggerEvent(f"{self.advance().upper}_INSERT")
        if not self.at("INSERT"):
            raise self.error(f"a trigger listens to INSERT only, found {self.tok.describe()}", clause=clause,
                             syntax=True)
        self.advance()
        self.expect("ON", clause=clause)
        pattern_tok = self.tok
        pattern = self.path("the path pattern the trigger listens on", clause, absolute=True)
        if len(pattern.nodes) < 2:
            raise self.error("a trigger listens on a path pattern under root, as root.ln.**", pattern_tok, clause)
        self.expect("AS", clause=clause)
        class_tok = self.tok
        class_name = self._string("the trigger's class, as 'package.module.Class'", clause)
        if not _CLASS_NAME.fullmatch(class_name):
            raise self.error(f"{class_name!r} is not a Python class name: write it as 'package.module.Class'",
                             class_tok, clause)
        uri = None
        if self.accept("USING"):
            self.expect("URI", clause=clause)
            uri_tok = self.tok
            uri = self._string("the URI of the trigger's file or package", "USING URI")
            if not uri.strip():
                raise self.error("USING URI needs a file path, a file:// or an http(s):// URI", uri_tok, "USING URI")
        attributes: dict[str, str] = {}
        if self.accept("WITH"):
            self.expect_op("(", "WITH")
            while True:
                key_tok = self.tok
                key = self._string("an attribute name in double quotes", "WITH", idents=True)
                self.expect_op("=", "WITH")
                value = self._string("an attribute value in double quotes", "WITH", idents=True)
                if key in attributes:
                    raise self.error(f"attribute {key!r} is given twice", key_tok, "WITH")
                attributes[key] = value
                if not self.accept_op(","):
                    break
            self.expect_op(")", "WITH")
        return m.CreateInsertTrigger(name, kind, event, pattern, class_name, uri, tuple(attributes.items()),
                                     position=pos, text="")

    def _string(self, what: str, clause: str, *, idents: bool = False) -> str:
        tok = self.tok
        if tok.kind is Kind.STRING or (idents and tok.kind in (Kind.IDENT, Kind.QUOTED_IDENT, Kind.NUMBER)):
            self.advance()
            return tok.value
        raise self.error(f"expected {what}, found {tok.describe()}", clause=clause, syntax=True)

    def drop_trigger(self, pos: m.Position) -> m.Statement:
        self.advance()
        self.expect("TRIGGER")
        return m.DropInsertTrigger(self.ident("a trigger name", "DROP TRIGGER"), position=pos, text="")

    def show_triggers(self, pos: m.Position) -> m.Statement:
        self.advance()
        self.expect("TRIGGERS")
        return m.ShowInsertTriggers(position=pos, text="")


_CLASS_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")


def _point(value: m.TimePoint | int | None) -> m.TimePoint | None:
    """A GROUP BY bound: epoch numbers are milliseconds here (IoTDB's default precision)."""
    if value is None or isinstance(value, m.TimePoint):
        return value
    return m.TimePoint(at=instant(value * 1000))


def _check_time_only(p: Parser, where: m.SeriesExpr, tok) -> None:
    """DELETE's WHERE compares time only (IoTDB: time atoms joined by AND)."""
    for node in m.series.walk(where):
        if isinstance(node, m.Ref):
            raise p.error("DELETE ... WHERE compares time only, as WHERE time >= 1 AND time < 10", tok, "DELETE")
        if isinstance(node, m.Binary) and node.op == "OR":
            raise p.error("DELETE ... WHERE joins time conditions with AND only", tok, "DELETE")


_CLAUSES: dict[str, Callable[[Parser, dict], None]] = {
    "WHERE": Parser._where, "GROUP": Parser._group_by, "HAVING": Parser._having, "ORDER": Parser._order,
    "FILL": Parser._fill, "LIMIT": Parser._limit, "SLIMIT": Parser._limit, "OFFSET": Parser._offset,
    "SOFFSET": Parser._offset, "ALIGN": Parser._align,
}
#: clauses counted as one for "given twice"
_CLAUSE_KEYS = {"OFFSET": "OFFSET_ONLY", "SOFFSET": "SOFFSET_ONLY"}


def parse(text: str, span: tuple[int, int] | None = None) -> list[m.Statement]:
    """Parse and validate the IoTDB statements of ``text`` (or of its ``span``)."""
    return Parser(text, span).parse()
