"""Recursive-descent parser of the stream language and the TDengine table statements.

Statement structure (clauses, options, names, durations) is parsed here from the project's own
tokens; every embedded expression or query is handed, with its absolute position, to the TDengine
dialect on sqlglot (:mod:`.dialect`). Each statement grammar is one method, so another language
(legacy TDengine, IoTDB) is more methods, not a rewrite.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from urllib.parse import urlsplit

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import StreamDefinitionError, StreamSyntaxError, did_you_mean
from airflow_stream_provider.sql.dialect import CALENDAR_UNITS, UNIT_MICROS, parse_fragment
from airflow_stream_provider.sql.functions import check_functions
from airflow_stream_provider.sql.lexer import Kind, Lexer, Token
from airflow_stream_provider.sql.timeparse import parse_timestamp

TRIGGER_KEYWORDS = ("PERIOD", "SLIDING", "INTERVAL", "SESSION", "STATE_WINDOW", "EVENT_WINDOW", "COUNT_WINDOW")
STREAM_OPTIONS = (
    "WATERMARK",
    "EXPIRED_TIME",
    "IGNORE_DISORDER",
    "DELETE_RECALC",
    "DELETE_OUTPUT_TABLE",
    "FILL_HISTORY",
    "FILL_HISTORY_FIRST",
    "CALC_NOTIFY_ONLY",
    "LOW_LATENCY_CALC",
    "PRE_FILTER",
    "FORCE_OUTPUT",
    "MAX_DELAY",
    "EVENT_TYPE",
    "IGNORE_NODATA_TRIGGER",
)
NOTIFY_OPTIONS = ("NOTIFY_HISTORY", "ON_FAILURE_PAUSE")
NOTIFY_EVENT_TYPES = (m.WINDOW_OPEN, m.WINDOW_CLOSE, m.ON_TIME)
TYPES_WITH_LENGTH = {"BINARY", "VARCHAR", "NCHAR", "VARBINARY"}
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
DATABASE_OPTIONS = (
    "BUFFER CACHEMODEL CACHESIZE COMP DURATION WAL_FSYNC_PERIOD MAXROWS MINROWS KEEP KEEP_TIME_OFFSET PAGES "
    "PAGESIZE TSDB_PAGESIZE REPLICA WAL_LEVEL VGROUPS SINGLE_STABLE TABLE_PREFIX TABLE_SUFFIX STT_TRIGGER "
    "WAL_RETENTION_PERIOD WAL_RETENTION_SIZE ENCRYPT_ALGORITHM SS_CHUNKPAGES SS_KEEPLOCAL SS_COMPACT DNODES "
    "COMPACT_INTERVAL COMPACT_TIME_RANGE COMPACT_TIME_OFFSET"
).split()


#: the clauses of TDengine's older CREATE STREAM (3.0 to 3.3.6), where 3.3.7 expects the trigger
LEGACY_STREAM_WORDS = frozenset({"TRIGGER", "WATERMARK", "IGNORE", "FILL_HISTORY", "DELETE_MARK", "SUBTABLE",
                                 "INTO", "AS"})

class Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.lexer = Lexer(text)
        self.toks = self.lexer.tokens()
        self.i = 0
        self.default_db: str | None = None

    # --- token helpers -------------------------------------------------------------------------

    @property
    def tok(self) -> Token:
        return self.toks[self.i]

    def peek(self, k: int = 1) -> Token:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def advance(self) -> Token:
        tok = self.tok
        if tok.kind is not Kind.EOF:
            self.i += 1
        return tok

    def at(self, *words: str) -> bool:
        return all(self.peek(k).upper == w for k, w in enumerate(words))

    def at_op(self, op: str) -> bool:
        return self.tok.kind is Kind.OP and self.tok.text == op

    def accept(self, *words: str) -> bool:
        if self.at(*words):
            self.i += len(words)
            return True
        return False

    def accept_op(self, op: str) -> bool:
        if self.at_op(op):
            self.i += 1
            return True
        return False

    def error(self, message: str, tok: Token | None = None, clause: str | None = None, hint: str | None = None,
              syntax: bool = False) -> StreamDefinitionError:
        tok = tok or self.tok
        cls = StreamSyntaxError if syntax else StreamDefinitionError
        return cls(message, line=tok.line, column=tok.column, clause=clause, hint=hint)

    def expect(self, *words: str, clause: str | None = None) -> Token:
        tok = self.tok
        if not self.accept(*words):
            raise self.error(f"expected {' '.join(words)}, found {tok.describe()}", clause=clause, syntax=True)
        return tok

    def expect_op(self, op: str, clause: str | None = None) -> Token:
        tok = self.tok
        if not self.accept_op(op):
            raise self.error(f"expected '{op}', found {tok.describe()}", clause=clause, syntax=True)
        return tok

    def position(self, tok: Token) -> m.Position:
        return m.Position(tok.line, tok.column)

    # --- values --------------------------------------------------------------------------------

    def ident(self, what: str = "name", clause: str | None = None) -> str:
        tok = self.tok
        if tok.kind in (Kind.IDENT, Kind.QUOTED_IDENT):
            self.advance()
            return tok.value
        raise self.error(f"expected a {what}, found {tok.describe()}", clause=clause, syntax=True)

    def table_name(self, what: str = "table name", clause: str | None = None) -> m.TableName:
        first = self.ident(what, clause)
        if self.accept_op("."):
            return m.TableName(self.ident(what, clause), db=first)
        return m.TableName(first)

    def integer(self, what: str, clause: str | None = None) -> int:
        tok = self.tok
        negative = self.accept_op("-")
        tok = self.tok
        if tok.kind is not Kind.NUMBER or not tok.text.isdigit():
            raise self.error(f"{what} must be an integer, found {tok.describe()}", tok, clause, syntax=True)
        self.advance()
        return -int(tok.text) if negative else int(tok.text)

    def duration(self, clause: str, what: str = "duration") -> m.Duration:
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
        if unit in CALENDAR_UNITS:
            raise self.error(
                f"{what} {tok.text}: calendar {CALENDAR_UNITS[unit].lower()}s have no fixed length and are not "
                "supported here; use days (d) or weeks (w)", tok, clause)
        if unit not in UNIT_MICROS:
            raise self.error(f"{what} {tok.text} has an unknown unit {unit!r}; use u, a, s, m, h, d or w", tok, clause)
        if count <= 0:
            raise self.error(f"{what} must be positive, found {tok.text}", tok, clause)
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
            return m.TimePoint(at=datetime.fromtimestamp(int(tok.text) / 1000, tz=UTC))
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
        if not sign == -1:
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

    def name_list(self, clause: str, what: str = "column name") -> tuple[str, ...]:
        self.expect_op("(", clause)
        names = [self.ident(what, clause)]
        while self.accept_op(","):
            names.append(self.ident(what, clause))
        self.expect_op(")", clause)
        return tuple(names)

    # --- spans handed to sqlglot ---------------------------------------------------------------

    def span_until(self, stop: Callable[[], bool], clause: str) -> tuple[int, int]:
        """Token span from here to the first depth-0 token where ``stop()`` holds."""
        depth, first, first_index = 0, self.tok, self.i
        while True:
            tok = self.tok
            if tok.kind is Kind.EOF:
                break
            if depth == 0 and (stop() or (tok.kind is Kind.OP and tok.text in (")", ";", ","))):
                break
            if tok.kind is Kind.OP and tok.text == "(":
                depth += 1
            elif tok.kind is Kind.OP and tok.text == ")":
                depth -= 1
            self.advance()
        if self.i == first_index:
            raise self.error(f"{clause} needs an expression here, found {self.tok.describe()}", clause=clause,
                             syntax=True)
        return first.start, self.toks[self.i - 1].end

    def expression(self, clause: str, stop: Callable[[], bool] = lambda: False) -> m.SqlExpression:
        first = self.tok
        start, end = self.span_until(stop, clause)
        tree = parse_fragment(self.text, start, end, clause=clause)
        return m.SqlExpression(self.text[start:end], tree, self.position(first))

    def query_to_end(self, clause: str) -> m.SqlExpression:
        first = self.tok
        depth = 0
        while not (self.tok.kind is Kind.EOF or (depth == 0 and self.at_op(";"))):
            if self.at_op("("):
                depth += 1
            elif self.at_op(")"):
                depth -= 1
            self.advance()
        if self.tok is first:
            raise self.error(f"{clause} needs a query", clause=clause, syntax=True)
        start, end = first.start, self.toks[self.i - 1].end
        tree = parse_fragment(self.text, start, end, clause=clause, query=True)
        return m.SqlExpression(self.text[start:end], tree, self.position(first))

    # --- statements ----------------------------------------------------------------------------

    def parse(self) -> list[m.Statement]:
        out: list[m.Statement] = []
        while True:
            while self.accept_op(";"):
                pass
            if self.tok.kind is Kind.EOF:
                return out
            first = self.tok
            statements = self.statement()
            if not (self.at_op(";") or self.tok.kind is Kind.EOF):
                raise self.error(f"unexpected {self.tok.describe()}: expected ';' or the end of the statement",
                                 syntax=True)
            text = self.text[first.start : self.toks[self.i - 1].end]
            for stmt in statements:
                object.__setattr__(stmt, "text", text)
            out.extend(statements)

    def statement(self) -> list[m.Statement]:
        tok = self.tok
        pos = {"position": self.position(tok), "text": ""}
        word = tok.upper
        if word == "CREATE":
            nxt = self.peek().upper
            if nxt == "STREAM":
                return [self.create_stream(pos)]
            if nxt == "DATABASE":
                return [self.create_database(pos)]
            if nxt in ("STABLE", "TABLE"):
                return self.create_table(pos)
            if nxt == "SNODE":
                raise self.error("CREATE SNODE is not needed: start the stream node with `airflow-stream node start`")
            if nxt == "CQ" or (nxt in ("CONTINUOUS",) and self.peek(2).upper == "QUERY"):
                raise self.error("IoTDB continuous queries (CREATE CQ) are not supported: write the query as "
                                 "CREATE STREAM ... PERIOD(every) (RESAMPLE EVERY) or INTERVAL(range) SLIDING(every) "
                                 "FROM ...", clause="CREATE CQ")
            if nxt == "TRIGGER" or (nxt in ("STATEFUL", "STATELESS") and self.peek(2).upper == "TRIGGER"):
                raise self.error("IoTDB triggers (CREATE TRIGGER) are not supported: they run Java classes on "
                                 "each insert; a stream with NOTIFY ... ON (WINDOW_OPEN | WINDOW_CLOSE) sends events "
                                 "to a WebSocket instead", clause="CREATE TRIGGER")
        elif word in ("PAUSE", "RESUME") and self.peek().upper == "STREAM":
            raise self.error(f"{word} STREAM is TDengine's older syntax (3.0 to 3.3.6): use "
                             f"{'STOP' if word == 'PAUSE' else 'START'} STREAM", clause=f"{word} STREAM")
        elif word == "DROP":
            return [self.drop(pos)]
        elif word == "SHOW":
            return [self.show(pos)]
        elif word in ("START", "STOP", "RECALCULATE"):
            return [self.stream_control(pos)]
        elif word == "USE":
            self.advance()
            return [m.UseDatabase(self.ident("database name", "USE"), **pos)]
        elif word == "INSERT":
            return [self.insert(pos)]
        elif word == "DELETE":
            return [self.delete(pos)]
        elif word in ("SELECT", "WITH") or self.at_op("("):
            query = self.query_to_end("SELECT")
            check_functions(query.tree, query.text, query.position, "SELECT")
            return [m.Select(query, **pos)]
        known = "CREATE, DROP, SHOW, START, STOP, RECALCULATE, USE, INSERT, DELETE or SELECT"
        raise self.error(f"unknown statement {tok.describe()}: expected {known}", syntax=True)

    # CREATE STREAM ---------------------------------------------------------------------------

    def create_stream(self, pos: dict) -> m.CreateStream:
        from airflow_stream_provider.sql.validate import validate_create_stream

        self.expect("CREATE", "STREAM")
        if_not_exists = self.accept("IF", "NOT", "EXISTS")
        name = self.table_name("stream name", "CREATE STREAM")
        where: dict[str, Token] = {"CREATE STREAM": self.toks[self.i - 1]}
        where["trigger"] = self.tok
        trigger = self.trigger()
        args: dict = {}
        if self.at("FROM"):
            where["FROM"] = self.advance()
            args["trigger_table"] = self.table_name("trigger table", "FROM")
        if self.at("PARTITION", "BY"):
            where["PARTITION BY"] = self.tok
            self.i += 2
            cols = [self.ident("column", "PARTITION BY")]
            while self.accept_op(","):
                cols.append(self.ident("column", "PARTITION BY"))
            args["partition_by"] = tuple(cols)
        if self.at("STREAM_OPTIONS"):
            where["STREAM_OPTIONS"] = self.tok
            args["options"] = self.stream_options(where)
        if self.at("NOTIFY"):
            where["NOTIFY"] = self.tok
            args["notify"] = self.notify(where)
        if self.at("INTO"):
            where["INTO"] = self.advance()
            args["into"] = self.table_name("output table", "INTO")
        if self.at("OUTPUT_SUBTABLE"):
            where["OUTPUT_SUBTABLE"] = self.advance()
            self.expect_op("(", "OUTPUT_SUBTABLE")
            args["output_subtable"] = self.expression("OUTPUT_SUBTABLE")
            self.expect_op(")", "OUTPUT_SUBTABLE")
        if self.at_op("("):
            where["columns"] = self.tok
            args["columns"] = self.output_columns()
        if self.at("TAGS"):
            where["TAGS"] = self.tok
            args["tags"] = self.tag_definitions()
        if self.at("AS"):
            where["AS"] = self.advance()
            args["query"] = self.query_to_end("AS")
        if not (self.at_op(";") or self.tok.kind is Kind.EOF):
            tok = self.tok
            if tok.upper in TRIGGER_KEYWORDS + ("FROM", "PARTITION", "STREAM_OPTIONS", "NOTIFY", "INTO",
                                                "OUTPUT_SUBTABLE", "TAGS"):
                raise self.error(
                    f"{tok.text.upper()} is out of place: CREATE STREAM clauses go in the order trigger, FROM, "
                    "PARTITION BY, STREAM_OPTIONS, NOTIFY, INTO, OUTPUT_SUBTABLE, (columns), TAGS, AS", syntax=True)
            raise self.error(f"unexpected {tok.describe()} in CREATE STREAM", syntax=True)
        stmt = m.CreateStream(name=name, trigger=trigger, if_not_exists=if_not_exists, **args, **pos)
        validate_create_stream(stmt, where)
        return stmt

    def trigger(self) -> m.Trigger:
        tok = self.tok
        word = tok.upper
        if word == "PERIOD":
            return m.PeriodTrigger(*self.duration_and_offset("PERIOD", "period"))
        if word == "INTERVAL":
            interval, offset = self.duration_and_offset("INTERVAL", "interval")
            if not self.at("SLIDING"):
                raise self.error("INTERVAL needs SLIDING(sliding_val), as in INTERVAL(5m) SLIDING(5m)",
                                 clause="INTERVAL", syntax=True)
            sliding_tok = self.tok
            sliding, sliding_offset = self.duration_and_offset("SLIDING", "sliding")
            if sliding_offset is not None:
                raise self.error("SLIDING takes no offset after INTERVAL: put the offset in INTERVAL(interval, offset)",
                                 sliding_tok, "SLIDING")
            return m.IntervalWindow(interval, sliding, offset)
        if word == "SLIDING":
            return m.SlidingTrigger(*self.duration_and_offset("SLIDING", "sliding"))
        if word == "SESSION":
            self.advance()
            self.expect_op("(", "SESSION")
            column = self.ident("timestamp column", "SESSION")
            self.expect_op(",", "SESSION")
            gap = self.duration("SESSION", "session gap")
            self.expect_op(")", "SESSION")
            return m.SessionWindow(column, gap)
        if word == "STATE_WINDOW":
            self.advance()
            self.expect_op("(", "STATE_WINDOW")
            column = self.expression("STATE_WINDOW")
            self.expect_op(")", "STATE_WINDOW")
            return m.StateWindow(column, self.true_for())
        if word == "EVENT_WINDOW":
            self.advance()
            self.expect_op("(", "EVENT_WINDOW")
            self.expect("START", "WITH", clause="EVENT_WINDOW")
            start = self.expression("EVENT_WINDOW START WITH", lambda: self.at("END", "WITH"))
            self.expect("END", "WITH", clause="EVENT_WINDOW")
            end = self.expression("EVENT_WINDOW END WITH")
            self.expect_op(")", "EVENT_WINDOW")
            return m.EventWindow(start, end, self.true_for())
        if word == "COUNT_WINDOW":
            self.advance()
            self.expect_op("(", "COUNT_WINDOW")
            count_tok = self.tok
            count = self.integer("COUNT_WINDOW count", "COUNT_WINDOW")
            if count < 1:
                raise self.error(f"COUNT_WINDOW count must be at least 1, found {count}", count_tok, "COUNT_WINDOW")
            sliding, columns = None, []
            while self.accept_op(","):
                if self.tok.kind is Kind.NUMBER and not columns and sliding is None:
                    slide_tok = self.tok
                    sliding = self.integer("COUNT_WINDOW sliding", "COUNT_WINDOW")
                    if sliding < 1 or sliding > count:
                        raise self.error(
                            f"COUNT_WINDOW sliding must be between 1 and the count {count}, found {sliding}",
                            slide_tok, "COUNT_WINDOW")
                else:
                    columns.append(self.ident("trigger column", "COUNT_WINDOW"))
            self.expect_op(")", "COUNT_WINDOW")
            return m.CountWindow(count, sliding, tuple(columns))
        if tok.upper in LEGACY_STREAM_WORDS:
            raise self.error(
                f"{tok.text} belongs to TDengine's older stream syntax (3.0 to 3.3.6), which is not supported: "
                "write the 3.3.7 form, with the window as the trigger (INTERVAL(...) SLIDING(...) FROM t ...) "
                "and the options in STREAM_OPTIONS(...) (WATERMARK, MAX_DELAY, FILL_HISTORY, ...)",
                clause="CREATE STREAM")
        hint = did_you_mean(tok.text, TRIGGER_KEYWORDS) if tok.kind is Kind.IDENT else None
        raise self.error(
            f"expected a trigger ({', '.join(TRIGGER_KEYWORDS)}), found {tok.describe()}", clause="CREATE STREAM",
            hint=hint, syntax=True)

    def duration_and_offset(self, keyword: str, what: str) -> tuple[m.Duration, m.Duration | None]:
        """``KEYWORD(duration[, offset])``."""
        self.expect(keyword)
        self.expect_op("(", keyword)
        value = self.duration(keyword, what)
        offset = self.duration(keyword, "offset") if self.accept_op(",") else None
        self.expect_op(")", keyword)
        return value, offset

    def true_for(self) -> m.TrueFor | None:
        if not self.accept("TRUE_FOR"):
            return None
        self.expect_op("(", "TRUE_FOR")
        duration: m.Duration | None = None
        count: int | None = None
        op: str | None = None
        for index in range(2):
            if index == 1:
                if not (self.at("AND") or self.at("OR")):
                    break
                op = self.advance().upper
            tok = self.tok
            if self.accept("COUNT"):
                if count is not None:
                    raise self.error("TRUE_FOR gives COUNT twice", tok, "TRUE_FOR")
                count_tok = self.tok
                count = self.integer("TRUE_FOR COUNT", "TRUE_FOR")
                if count < 1:
                    raise self.error(f"TRUE_FOR COUNT must be at least 1, found {count}", count_tok, "TRUE_FOR")
            else:
                if duration is not None:
                    raise self.error("TRUE_FOR gives a duration twice", tok, "TRUE_FOR")
                duration = self.duration("TRUE_FOR")
        self.expect_op(")", "TRUE_FOR")
        return m.TrueFor(duration, count, op)

    def option_word(self, choices: tuple[str, ...], clause: str, what: str) -> Token:
        tok = self.tok
        if tok.kind is not Kind.IDENT:
            raise self.error(f"expected a {what}, found {tok.describe()}", clause=clause, syntax=True)
        if tok.upper not in choices:
            raise self.error(f"unknown {what} {tok.text}", clause=clause, hint=did_you_mean(tok.text, choices))
        return self.advance()

    def event_types(self, clause: str, allowed: tuple[str, ...]) -> tuple[str, ...]:
        self.expect_op("(", clause)
        out: list[str] = []
        while True:
            tok = self.tok
            if tok.kind not in (Kind.IDENT, Kind.STRING):
                raise self.error(f"expected an event type ({', '.join(allowed)}), found {tok.describe()}",
                                 clause=clause, syntax=True)
            self.advance()
            value = tok.value.upper()
            if value not in allowed:
                raise self.error(f"unknown event type {tok.value}; expected one of {', '.join(allowed)}", tok, clause,
                                 hint=did_you_mean(tok.value, allowed))
            if value in out:
                raise self.error(f"event type {value} is given twice", tok, clause)
            out.append(value)
            if not (self.accept_op("|") or self.accept_op(",")):
                break
        self.expect_op(")", clause)
        return tuple(out)

    def stream_options(self, where: dict[str, Token]) -> m.StreamOptions:
        self.expect("STREAM_OPTIONS")
        self.expect_op("(", "STREAM_OPTIONS")
        values: dict = {}
        given: list[str] = []
        while True:
            tok = self.option_word(STREAM_OPTIONS, "STREAM_OPTIONS", "stream option")
            name = tok.upper
            if name in given:
                raise self.error(f"option {name} is given twice", tok, "STREAM_OPTIONS")
            given.append(name)
            where[name] = tok
            if name in ("WATERMARK", "EXPIRED_TIME", "MAX_DELAY"):
                self.expect_op("(", name)
                values[name.lower()] = self.duration(name)
                self.expect_op(")", name)
            elif name in ("FILL_HISTORY", "FILL_HISTORY_FIRST"):
                start = None
                if self.accept_op("("):
                    start = self.time_point(name)
                    self.expect_op(")", name)
                values["fill_history"] = m.FillHistory(start, first=name == "FILL_HISTORY_FIRST")
            elif name == "PRE_FILTER":
                self.expect_op("(", name)
                values["pre_filter"] = self.expression(name)
                self.expect_op(")", name)
            elif name == "EVENT_TYPE":
                values["event_types"] = self.event_types(name, (m.WINDOW_OPEN, m.WINDOW_CLOSE))
            else:
                values[name.lower()] = True
            if not self.accept_op("|"):
                break
        self.expect_op(")", "STREAM_OPTIONS")
        if "FILL_HISTORY" in given and "FILL_HISTORY_FIRST" in given:
            raise self.error("FILL_HISTORY and FILL_HISTORY_FIRST cannot be used together", where["FILL_HISTORY_FIRST"],
                             "STREAM_OPTIONS")
        return m.StreamOptions(**values, given=frozenset(given))

    def notify(self, where: dict[str, Token]) -> m.Notify:
        self.expect("NOTIFY")
        self.expect_op("(", "NOTIFY")
        urls: list[str] = []
        while True:
            tok = self.tok
            if tok.kind is not Kind.STRING:
                raise self.error(f"NOTIFY takes quoted URLs, found {tok.describe()}", clause="NOTIFY", syntax=True)
            self.advance()
            urls.append(self.check_url(tok))
            if not self.accept_op(","):
                break
        self.expect_op(")", "NOTIFY")
        on: tuple[str, ...] = ()
        if self.at("ON"):
            where["ON"] = self.advance()
            on = self.event_types("NOTIFY ON", NOTIFY_EVENT_TYPES)
        where_expr = None
        if self.at("WHERE"):
            where["NOTIFY WHERE"] = self.advance()
            stops = ("NOTIFY_OPTIONS", "INTO", "OUTPUT_SUBTABLE", "TAGS", "AS")
            where_expr = self.expression("NOTIFY WHERE", lambda: self.tok.upper in stops)
        flags: list[str] = []
        if self.at("NOTIFY_OPTIONS"):
            self.advance()
            self.expect_op("(", "NOTIFY_OPTIONS")
            while True:
                tok = self.option_word(NOTIFY_OPTIONS, "NOTIFY_OPTIONS", "notify option")
                if tok.upper in flags:
                    raise self.error(f"option {tok.upper} is given twice", tok, "NOTIFY_OPTIONS")
                flags.append(tok.upper)
                if not self.accept_op("|"):
                    break
            self.expect_op(")", "NOTIFY_OPTIONS")
        return m.Notify(tuple(urls), on, where_expr, "NOTIFY_HISTORY" in flags, "ON_FAILURE_PAUSE" in flags)

    def check_url(self, tok: Token) -> str:
        url = tok.value
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as err:
            raise self.error(f"notification URL {url!r} is malformed: {err}", tok, "NOTIFY") from None
        if parts.scheme not in ("ws", "wss"):
            raise self.error(f"notification URL {url!r} must use ws:// or wss://", tok, "NOTIFY")
        if not parts.hostname:
            raise self.error(f"notification URL {url!r} has no host", tok, "NOTIFY")
        if port is None:
            raise self.error(f"notification URL {url!r} must give a port, as in ws://host:8080/path", tok, "NOTIFY")
        return url

    def output_columns(self) -> tuple[m.OutputColumn, ...]:
        self.expect_op("(", "column list")
        cols: list[m.OutputColumn] = []
        while True:
            tok = self.tok
            name = self.ident("output column name", "column list")
            key = self.accept("COMPOSITE", "KEY") or self.accept("PRIMARY", "KEY")
            if key and len(cols) != 1:
                raise self.error("COMPOSITE KEY can only mark the second column", tok, "column list")
            cols.append(m.OutputColumn(name, key))
            if not self.accept_op(","):
                break
        self.expect_op(")", "column list")
        return tuple(cols)

    def tag_definitions(self) -> tuple[m.TagDefinition, ...]:
        self.expect("TAGS")
        self.expect_op("(", "TAGS")
        tags: list[m.TagDefinition] = []
        while True:
            name = self.ident("tag name", "TAGS")
            dtype = self.data_type("TAGS")
            comment = None
            if self.accept("COMMENT"):
                tok = self.tok
                if tok.kind is not Kind.STRING:
                    raise self.error("COMMENT takes a quoted string", clause="TAGS", syntax=True)
                comment = self.advance().value
            self.expect("AS", clause="TAGS")
            tags.append(m.TagDefinition(name, dtype, self.expression("TAGS"), comment))
            if not self.accept_op(","):
                break
        self.expect_op(")", "TAGS")
        return tuple(tags)

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
            if size < 1:
                raise self.error(f"{word} length must be at least 1", tok, clause)
            return m.DataType(word, (size,))
        if word in SCALAR_TYPES:
            if word in UNSIGNED_TYPES and self.accept("UNSIGNED"):
                return m.DataType(f"{'INT' if word == 'INTEGER' else word} UNSIGNED")
            return m.DataType({"INTEGER": "INT", "BOOLEAN": "BOOL"}.get(word, word))
        choices = sorted(SCALAR_TYPES | TYPES_WITH_LENGTH | {"DECIMAL"})
        raise self.error(f"unknown data type {tok.text}", tok, clause, hint=did_you_mean(tok.text, choices))

    # management --------------------------------------------------------------------------------

    def stream_control(self, pos: dict) -> m.Statement:
        verb = self.advance().upper
        self.expect("STREAM", clause=verb)
        if verb == "RECALCULATE":
            name = self.table_name("stream name", verb)
            self.expect("FROM", clause=verb)
            start = self.time_point(verb)
            end = None
            if self.at("TO"):
                to_tok = self.advance()
                end = self.time_point(verb)
                if not start.is_relative and not end.is_relative and end.at <= start.at:  # type: ignore[operator]
                    raise self.error("RECALCULATE TO must be later than FROM", to_tok, verb)
            return m.RecalculateStream(name, start, end, **pos)
        if_exists = self.accept("IF", "EXISTS")
        ignore = verb == "START" and self.accept("IGNORE", "UNTREATED")
        name = self.table_name("stream name", verb)
        if verb == "START":
            return m.StartStream(name, if_exists, ignore, **pos)
        return m.StopStream(name, if_exists, **pos)

    def show(self, pos: dict) -> m.ShowStreams:
        self.expect("SHOW")
        db = None
        if self.tok.kind in (Kind.IDENT, Kind.QUOTED_IDENT) and self.peek().text == ".":
            db = self.ident("database name", "SHOW")
            self.expect_op(".")
        if not self.accept("STREAMS"):
            raise self.error(f"only SHOW [db.]STREAMS is supported, found {self.tok.describe()}", clause="SHOW")
        return m.ShowStreams(db, **pos)

    def drop(self, pos: dict) -> m.Statement:
        self.expect("DROP")
        what = self.tok.upper
        if what not in ("STREAM", "TABLE", "STABLE", "DATABASE"):
            raise self.error(f"expected STREAM, TABLE, STABLE or DATABASE after DROP, found {self.tok.describe()}",
                             syntax=True)
        self.advance()
        if_exists = self.accept("IF", "EXISTS")
        if what == "STREAM":
            return m.DropStream(self.table_name("stream name", "DROP STREAM"), if_exists, **pos)
        if what == "DATABASE":
            return m.DropDatabase(self.ident("database name", "DROP DATABASE"), if_exists, **pos)
        names = [self.table_name(clause=f"DROP {what}")]
        while self.accept_op(","):
            self.accept("IF", "EXISTS")
            names.append(self.table_name(clause=f"DROP {what}"))
        return m.DropTable(tuple(names), if_exists, stable=what == "STABLE", **pos)

    # table statements --------------------------------------------------------------------------

    def create_database(self, pos: dict) -> m.CreateDatabase:
        self.expect("CREATE", "DATABASE")
        if_not_exists = self.accept("IF", "NOT", "EXISTS")
        name = self.ident("database name", "CREATE DATABASE")
        precision = "ms"
        while self.tok.kind is Kind.IDENT:
            tok = self.advance()
            if tok.upper == "PRECISION":
                value = self.tok
                if value.kind is not Kind.STRING:
                    raise self.error("PRECISION takes 'ms' or 'us'", clause="CREATE DATABASE", syntax=True)
                self.advance()
                precision = value.value.lower()
                if precision == "ns":
                    raise self.error(
                        "PRECISION 'ns' is not supported: Spark timestamps hold microseconds; use 'ms' or 'us'",
                        value, "CREATE DATABASE")
                if precision not in ("ms", "us"):
                    raise self.error(f"PRECISION must be 'ms' or 'us', found {value.text}", value, "CREATE DATABASE")
            elif tok.upper in DATABASE_OPTIONS:
                raise self.error(
                    f"database option {tok.upper} is not supported by the Delta warehouse; remove it", tok,
                    "CREATE DATABASE")
            else:
                raise self.error(f"unknown database option {tok.text}", tok, "CREATE DATABASE",
                                 hint=did_you_mean(tok.text, DATABASE_OPTIONS + ["PRECISION"]))
        return m.CreateDatabase(name, if_not_exists, precision, **pos)

    def column_definitions(self, clause: str, tags: bool = False) -> tuple[m.ColumnDefinition, ...]:
        self.expect_op("(", clause)
        cols: list[m.ColumnDefinition] = []
        seen: set[str] = set()
        while True:
            tok = self.tok
            name = self.ident("column name", clause)
            if name.lower() in seen:
                raise self.error(f"column {name} is defined twice", tok, clause)
            seen.add(name.lower())
            dtype = self.data_type(clause)
            key = not tags and (self.accept("PRIMARY", "KEY") or self.accept("COMPOSITE", "KEY"))
            if key and len(cols) != 1:
                raise self.error("PRIMARY KEY can only mark the second column (the composite key)", tok, clause)
            comment = None
            if self.accept("COMMENT"):
                comment = self.advance().value
            if self.tok.upper in ("ENCODE", "COMPRESS", "LEVEL"):
                raise self.error(f"column option {self.tok.upper} is not supported by the Delta warehouse", clause=clause)
            if not tags and not cols and dtype.name != "TIMESTAMP":
                raise self.error(f"the first column must be a TIMESTAMP, {name} is {dtype}", tok, clause)
            if dtype.name == "JSON" and not tags:
                raise self.error("JSON is only allowed as a tag type", tok, clause)
            cols.append(m.ColumnDefinition(name, dtype, key, comment))
            if not self.accept_op(","):
                break
        self.expect_op(")", clause)
        return tuple(cols)

    def create_table(self, pos: dict) -> list[m.Statement]:
        self.expect("CREATE")
        stable = self.advance().upper == "STABLE"
        clause = "CREATE STABLE" if stable else "CREATE TABLE"
        if_not_exists = self.accept("IF", "NOT", "EXISTS")
        name = self.table_name(clause=clause)
        if not stable and self.at("USING"):
            out: list[m.Statement] = []
            while True:
                self.expect("USING", clause=clause)
                st = self.table_name("supertable name", clause)
                tag_names = self.name_list(clause, "tag name") if self.at_op("(") else None
                self.expect("TAGS", clause=clause)
                values = self.value_list(clause)
                if tag_names is not None and len(tag_names) != len(values):
                    raise self.error(f"{len(tag_names)} tag names but {len(values)} tag values", clause=clause)
                out.append(m.CreateSubTable(name, st, values, tag_names, if_not_exists, **pos))
                if self.at_op(";") or self.tok.kind is Kind.EOF:
                    return out
                if_not_exists = self.accept("IF", "NOT", "EXISTS")
                name = self.table_name(clause=clause)
        columns = self.column_definitions(clause)
        if self.at("TAGS"):
            self.advance()
            tags = self.column_definitions("TAGS", tags=True)
            clash = {c.name.lower() for c in columns} & {t.name.lower() for t in tags}
            if clash:
                raise self.error(f"tag {sorted(clash)[0]} has the name of a column", clause="TAGS")
            self.reject_table_options(clause)
            return [m.CreateSuperTable(name, columns, tags, if_not_exists, **pos)]
        if stable:
            raise self.error("CREATE STABLE needs TAGS (...)", clause=clause, syntax=True)
        self.reject_table_options(clause)
        return [m.CreateTable(name, columns, if_not_exists, **pos)]

    def reject_table_options(self, clause: str) -> None:
        if self.tok.kind is Kind.IDENT:
            raise self.error(f"table option {self.tok.upper} is not supported by the Delta warehouse", clause=clause)

    def insert(self, pos: dict) -> m.Insert:
        self.expect("INSERT", "INTO")
        targets: list[m.InsertTarget] = []
        while True:
            table = self.table_name(clause="INSERT")
            args: dict = {}
            if self.accept("USING"):
                args["using"] = self.table_name("supertable name", "INSERT")
                if self.at_op("("):
                    args["tag_names"] = self.name_list("INSERT", "tag name")
                self.expect("TAGS", clause="INSERT")
                args["tag_values"] = self.value_list("INSERT")
            if self.at_op("("):
                args["columns"] = self.name_list("INSERT")
            if self.at("SELECT") or self.at("FILE"):
                raise self.error(f"INSERT ... {self.tok.upper} is not supported; use `airflow-stream load FILE INTO "
                                 "db.table` for files", clause="INSERT")
            self.expect("VALUES", clause="INSERT")
            rows = [self.value_list("VALUES")]
            while self.at_op("("):
                rows.append(self.value_list("VALUES"))
            width = len(args.get("columns") or rows[0])
            for row in rows:
                if len(row) != width:
                    raise self.error(f"a row of {table} has {len(row)} values, expected {width}", clause="VALUES")
            targets.append(m.InsertTarget(table, tuple(rows), **args))
            if self.at_op(";") or self.tok.kind is Kind.EOF:
                return m.Insert(tuple(targets), **pos)

    def delete(self, pos: dict) -> m.Delete:
        self.expect("DELETE", "FROM")
        table = self.table_name(clause="DELETE")
        where = None
        if self.accept("WHERE"):
            where = self.expression("WHERE", lambda: self.at_op(";"))
            check_functions(where.tree, where.text, where.position, "WHERE")
        return m.Delete(table, where, **pos)


def parse(text: str) -> list[m.Statement]:
    """Parse and validate every statement in ``text``; raises :class:`StreamDefinitionError`."""
    return Parser(text).parse()
