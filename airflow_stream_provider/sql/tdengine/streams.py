"""The stream statements of TDengine 3.3.7: CREATE STREAM with its clauses, and stream management.

Each clause is one method, so a language that differs in some clauses (TDengine before 3.3.7)
subclasses :class:`StreamStatements` and overrides those only.
"""

from __future__ import annotations

from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from airflow_stream_provider import model as m
from airflow_stream_provider.config import TDENGINE_SEMANTICS
from airflow_stream_provider.exceptions import did_you_mean
from airflow_stream_provider.model import names
from airflow_stream_provider.sql.grammar.lexer import Kind, Token
from airflow_stream_provider.sql.tdengine import nested
from airflow_stream_provider.sql.tdengine.validate import validate_create_stream
from airflow_stream_provider.sql.tdengine.window_clauses import WindowClauses

#: the keywords that begin a trigger (a row trigger has none)
TRIGGER_KEYWORDS = tuple(k for k in m.TriggerKind if k is not m.TriggerKind.ROW)
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
    "IDLE_TIMEOUT",
    "EVENT_TYPE",
    "IGNORE_NODATA_TRIGGER",
    "FLUSH_ON_OUTER_CLOSE",
    "ENGINE",
    "SEMANTICS",
)
#: the detector engines ENGINE(...) names (:mod:`airflow_stream_provider.windows.spark_detector`)
DETECTOR_ENGINES = ("in-process", "spark", "auto")
NOTIFY_OPTIONS = ("NOTIFY_HISTORY", "ON_FAILURE_PAUSE")
#: words of TDengine's stream language after 3.3.7 that this project refuses by name, and their version
LATER_WORDS: dict[str, str] = {}
#: the events of a group going idle and coming back (IDLE_TIMEOUT, TDengine 3.4.1)
IDLE_EVENT_TYPES = (m.EventType.IDLE, m.EventType.RESUME)
NOTIFY_EVENT_TYPES = (m.EventType.WINDOW_OPEN, m.EventType.WINDOW_CLOSE, m.EventType.ON_TIME, *IDLE_EVENT_TYPES)

#: the clauses of TDengine's older CREATE STREAM (3.0 to 3.3.6), where 3.3.7 expects the trigger
LEGACY_STREAM_WORDS = frozenset({"TRIGGER", "WATERMARK", "IGNORE", "FILL_HISTORY", "DELETE_MARK", "SUBTABLE",
                                 "INTO", "AS"})


class StreamStatements(WindowClauses):
    """CREATE STREAM, and START, STOP, RECALCULATE, VERIFY and SHOW of streams."""

    def create_stream(self, pos: dict) -> m.CreateStream:
        self.expect("CREATE", "STREAM")
        if_not_exists = self.accept("IF", "NOT", "EXISTS")
        name = self.table_name("stream name", "CREATE STREAM", names.STREAM)
        where: dict[str, Token] = {"CREATE STREAM": self.toks[self.i - 1]}
        where["trigger"] = self.tok
        args: dict = {}
        if self.at("WINDOW") and self.peek().text == "(":
            where["WINDOW"] = self.tok
            outer, trigger, args["leaf_name"] = self.nested_window(where)
            args["outer_windows"] = outer
        else:
            trigger = self.trigger()
        if self.at("FROM"):
            where["FROM"] = self.advance()
            args["trigger_table"] = self.table_name("trigger table", "FROM")
        if self.at("ROLLUP", "BY"):
            where["ROLLUP BY"] = self.tok
            self.i += 2
            args["rollup_by"] = self.ident("tag column", "ROLLUP BY")
            if self.at_op(","):
                raise self.error("ROLLUP BY takes one tag column, whose dotted values (A.B.C) are the groups",
                                 clause="ROLLUP BY", hint=f"write ROLLUP BY {args['rollup_by']}")
            if self.at("PARTITION", "BY"):
                raise self.error("ROLLUP BY and PARTITION BY exclude each other: a stream groups by one of them",
                                 clause="ROLLUP BY")
        if self.at("PARTITION", "BY"):
            where["PARTITION BY"] = self.tok
            self.i += 2
            cols = [self.ident("column", "PARTITION BY")]
            while self.accept_op(","):
                cols.append(self.ident("column", "PARTITION BY"))
            args["partition_by"] = tuple(cols)
            if self.at("ROLLUP", "BY"):
                raise self.error("ROLLUP BY and PARTITION BY exclude each other: a stream groups by one of them",
                                 clause="ROLLUP BY")
        if self.at("TIMEZONE"):
            where["TIMEZONE"] = self.tok
            args["timezone"] = self.timezone_name()
        if self.at("STREAM_OPTIONS"):
            where["STREAM_OPTIONS"] = self.tok
            args["options"] = self.stream_options(where)
        if self.at("NOTIFY"):
            where["NOTIFY"] = self.tok
            args["notify"] = self.notify(where)
        if self.at("INTO"):
            where["INTO"] = self.advance()
            args["into"] = self.table_name("output table", "INTO")
        if self.at("NODELAY_CREATE_SUBTABLE"):
            where["NODELAY_CREATE_SUBTABLE"] = tok = self.advance()
            if "into" not in args:
                raise self.error("NODELAY_CREATE_SUBTABLE creates the output subtables of INTO's table: it follows "
                                 "INTO [db.]table", tok, "NODELAY_CREATE_SUBTABLE",
                                 hint="write INTO out NODELAY_CREATE_SUBTABLE")
            args["nodelay_create_subtable"] = True
        if self.at("OUTPUT_SUBTABLE"):
            where["OUTPUT_SUBTABLE"] = self.advance()
            self.expect_op("(", "OUTPUT_SUBTABLE")
            args["output_subtable"] = self.row_expression("OUTPUT_SUBTABLE")
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
        if not self.at_end():
            tok = self.tok
            if tok.upper in TRIGGER_KEYWORDS + ("FROM", "PARTITION", "ROLLUP", "TIMEZONE", "STREAM_OPTIONS", "NOTIFY",
                                                "INTO", "NODELAY_CREATE_SUBTABLE", "OUTPUT_SUBTABLE", "TAGS"):
                raise self.error(
                    f"{tok.text.upper()} is out of place: CREATE STREAM clauses go in the order trigger, FROM, "
                    "PARTITION BY or ROLLUP BY, TIMEZONE, STREAM_OPTIONS, NOTIFY, INTO, NODELAY_CREATE_SUBTABLE, "
                    "OUTPUT_SUBTABLE, (columns), TAGS, AS", syntax=True)
            raise self.error(f"unexpected {tok.describe()} in CREATE STREAM", syntax=True)
        stmt = m.CreateStream(name=name, trigger=trigger, if_not_exists=if_not_exists, **args, **pos)
        validate_create_stream(stmt, where)
        return stmt

    def trigger(self) -> m.Trigger:
        tok = self.tok
        word = tok.upper
        if word == m.TriggerKind.PERIOD:
            return m.PeriodTrigger(*self.duration_and_offset("PERIOD", "period", calendar=True))
        if word == m.TriggerKind.INTERVAL:
            interval, offset = self.duration_and_offset("INTERVAL", "interval", calendar=True)
            if not self.at("SLIDING"):
                raise self.error("INTERVAL needs SLIDING(sliding_val), as in INTERVAL(5m) SLIDING(5m)",
                                 clause="INTERVAL", syntax=True)
            sliding_tok = self.tok
            sliding, sliding_offset = self.duration_and_offset("SLIDING", "sliding", calendar=True)
            if sliding_offset is not None:
                raise self.error("SLIDING takes no offset after INTERVAL: put the offset in INTERVAL(interval, offset)",
                                 sliding_tok, "SLIDING")
            return m.IntervalWindow(interval, sliding, offset)
        if word == m.TriggerKind.SLIDING:
            return m.SlidingTrigger(*self.duration_and_offset("SLIDING", "sliding", calendar=True))
        if word == m.TriggerKind.SESSION:
            self.advance()
            self.expect_op("(", "SESSION")
            column = self.ident("timestamp column", "SESSION")
            self.expect_op(",", "SESSION")
            gap = self.duration("SESSION", "session gap")
            self.expect_op(")", "SESSION")
            return m.SessionWindow(column, gap)
        if word == m.TriggerKind.STATE_WINDOW:
            return self.state_window()
        if word == m.TriggerKind.EVENT_WINDOW:
            return self.event_window()
        if word == m.TriggerKind.COUNT_WINDOW:
            self.advance()
            self.expect_op("(", "COUNT_WINDOW")
            count_tok = self.tok
            count = self.integer("COUNT_WINDOW count", "COUNT_WINDOW")
            if not 1 <= count < 2**31:
                raise self.error(f"COUNT_WINDOW count must be at least 1 and less than 2147483648, found {count}",
                                 count_tok, "COUNT_WINDOW")
            count_sliding: int | None = None
            columns: list[str] = []
            while self.accept_op(","):
                if self.tok.kind is Kind.NUMBER and not columns and count_sliding is None:
                    slide_tok = self.tok
                    count_sliding = self.integer("COUNT_WINDOW sliding", "COUNT_WINDOW")
                    if count_sliding < 1 or count_sliding > count:
                        raise self.error(
                            f"COUNT_WINDOW sliding must be between 1 and the count {count}, found {count_sliding}",
                            slide_tok, "COUNT_WINDOW")
                else:
                    columns.append(self.ident("trigger column", "COUNT_WINDOW"))
            self.expect_op(")", "COUNT_WINDOW")
            return m.CountWindow(count, count_sliding, tuple(columns))
        if tok.upper == "WINDOW" and self.peek().text == "(":
            raise self.error("a layer of WINDOW(...) is a window trigger, not another WINDOW(...): list every layer "
                             "in the one WINDOW(...), outermost first", tok, "WINDOW")
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

    def nested_window(self, where: dict[str, Token]) -> tuple[tuple[m.OuterWindow, ...], m.Trigger, str | None]:
        """``WINDOW(<trigger> AS name, ..., <leaf> [AS name])`` (TDengine 3.4.2): the outer layers,
        outermost first, the leaf and the leaf's name."""
        start = self.advance()
        self.expect_op("(", "WINDOW")
        layers: list[tuple[m.Trigger, str | None, Token]] = []
        names: list[str] = []
        while True:
            tok = self.tok
            trigger = self.trigger()
            name = None
            if self.accept("AS"):
                name_tok = self.tok
                name = self.ident("window name", "WINDOW")
                nested.check_name(name, name_tok, names)
                names.append(name)
            layers.append((trigger, name, tok))
            if not self.accept_op(","):
                break
        end = self.expect_op(")", "WINDOW")
        nested.check_layers(len(layers), start if len(layers) < 2 else end)
        outer: list[m.OuterWindow] = []
        for i, (trigger, name, tok) in enumerate(layers):
            leaf = i == len(layers) - 1
            nested.check_layer(trigger, tok, leaf=leaf)
            if leaf:
                break
            if name is None:
                raise self.error(f"the outer window {trigger} needs a name: write {trigger} AS w{i + 1}", tok, "WINDOW")
            if isinstance(trigger, nested.OUTER_TYPES):  # (check_layer refused every other type)
                outer.append(m.OuterWindow(trigger, name, self.position(tok)))
        where["leaf"] = layers[-1][2]
        return tuple(outer), layers[-1][0], layers[-1][1]

    def duration_and_offset(self, keyword: str, what: str, *, calendar: bool = False
                            ) -> tuple[m.Duration, m.Duration | None]:
        """``KEYWORD(duration[, offset])``; ``calendar``: the duration may be in months, quarters or
        years (PERIOD, SLIDING and INTERVAL, TDengine 3.4.1), never the offset."""
        self.expect(keyword)
        self.expect_op("(", keyword)
        value = self.duration(keyword, what, calendar=calendar)
        offset = self.duration(keyword, "offset") if self.accept_op(",") else None
        self.expect_op(")", keyword)
        return value, offset

    def option_word(self, choices: tuple[str, ...], clause: str, what: str) -> Token:
        tok = self.tok
        if tok.kind is not Kind.IDENT:
            raise self.error(f"expected a {what}, found {tok.describe()}", clause=clause, syntax=True)
        if tok.upper in LATER_WORDS:
            raise self.later(tok)
        if tok.upper == "NODELAY_CREATE_SUBTABLE" and clause == "STREAM_OPTIONS":
            raise self.error("NODELAY_CREATE_SUBTABLE is not a stream option: it follows INTO [db.]table", tok,
                             "NODELAY_CREATE_SUBTABLE", hint="write INTO out NODELAY_CREATE_SUBTABLE")
        if tok.upper not in choices:
            raise self.error(f"unknown {what} {tok.text}", clause=clause, hint=did_you_mean(tok.text, choices))
        return self.advance()

    def later(self, tok: Token) -> Exception:
        """The error for a word of TDengine's stream language after 3.3.7 that is not supported."""
        word = tok.upper
        return self.error(f"{word} (TDengine {LATER_WORDS[word]}) is not supported", tok, word)

    def event_types(self, clause: str, allowed: tuple[m.EventType, ...]) -> tuple[m.EventType, ...]:
        self.expect_op("(", clause)
        out: list[m.EventType] = []
        while True:
            tok = self.tok
            if tok.kind not in (Kind.IDENT, Kind.STRING):
                raise self.error(f"expected an event type ({', '.join(allowed)}), found {tok.describe()}",
                                 clause=clause, syntax=True)
            self.advance()
            value = tok.value.upper()
            if value in LATER_WORDS:
                raise self.later(tok)
            if value not in allowed:
                raise self.error(f"unknown event type {tok.value}; expected one of {', '.join(allowed)}", tok, clause,
                                 hint=did_you_mean(tok.value, allowed))
            if value in out:
                raise self.error(f"event type {value} is given twice", tok, clause)
            out.append(m.EventType(value))
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
            if name in ("WATERMARK", "EXPIRED_TIME", "MAX_DELAY", "IDLE_TIMEOUT"):
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
                values["pre_filter"] = self.row_expression(name)
                self.expect_op(")", name)
            elif name == "ENGINE":
                values["engine"] = self.engine_name(name)
            elif name == "SEMANTICS":
                values["semantics"] = self.semantics_name(name)
            elif name == "EVENT_TYPE":
                values["event_types"] = self.event_types(name, (m.EventType.WINDOW_OPEN, m.EventType.WINDOW_CLOSE,
                                                                *IDLE_EVENT_TYPES))
            else:
                values[name.lower()] = True
            if not self.accept_op("|"):
                break
        self.expect_op(")", "STREAM_OPTIONS")
        if "EVENT_TYPE" in given and "IDLE_TIMEOUT" not in given:
            for kind in IDLE_EVENT_TYPES:
                if kind in values["event_types"]:
                    raise self.error(f"EVENT_TYPE({kind}) needs IDLE_TIMEOUT(d): a group is idle once no rows came for "
                                     "d", where["EVENT_TYPE"], "EVENT_TYPE", hint="add IDLE_TIMEOUT(5m) | to "
                                     "STREAM_OPTIONS")
        if "FILL_HISTORY" in given and "FILL_HISTORY_FIRST" in given:
            raise self.error("FILL_HISTORY and FILL_HISTORY_FIRST cannot be used together", where["FILL_HISTORY_FIRST"],
                             "STREAM_OPTIONS")
        return m.StreamOptions(**values, given=frozenset(given))

    def quoted_choice(self, clause: str, what: str, *, fold: bool = False) -> tuple[str, Token]:
        """The quoted value of ``CLAUSE('value')``, stripped (lower case with ``fold``), and its token,
        the closing parenthesis read; ``what`` says what the clause takes when no quoted value is there."""
        self.expect_op("(", clause)
        tok = self.tok
        if tok.kind is not Kind.STRING:
            raise self.error(f"{clause} takes {what}, found {tok.describe()}", clause=clause, syntax=True)
        self.advance()
        self.expect_op(")", clause)
        value = tok.value.strip()
        return (value.lower() if fold else value), tok

    def semantics_name(self, clause: str) -> str:
        """SEMANTICS('3.3.7' | '3.4'): the TDengine version whose behaviour the stream follows."""
        versions = ", ".join(map(repr, TDENGINE_SEMANTICS))
        value, tok = self.quoted_choice(clause, f"a quoted TDengine version ({versions})")
        if value not in TDENGINE_SEMANTICS:
            raise self.error(f"SEMANTICS('{tok.value}') names no TDengine version this project follows; expected "
                             f"{' or '.join(map(repr, TDENGINE_SEMANTICS))}", tok, clause)
        return value

    def timezone_name(self) -> str:
        """``TIMEZONE 'Area/City'`` (TDengine 3.4.3): an IANA zone, checked against the zone database."""
        self.expect("TIMEZONE")
        tok = self.tok
        if tok.kind is not Kind.STRING:
            raise self.error(f"TIMEZONE takes a quoted IANA zone such as 'Asia/Shanghai', found {tok.describe()}",
                             clause="TIMEZONE", syntax=True)
        name = tok.value.strip()
        try:
            ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            raise self.error(f"TIMEZONE '{tok.value}' is not a known IANA time zone", tok, "TIMEZONE",
                             hint="name a zone as Area/City, such as 'Europe/Berlin' or 'UTC'") from None
        self.advance()
        return name

    def engine_name(self, clause: str) -> str:
        """ENGINE('in-process' | 'spark' | 'auto'): the detector engine, a quoted name."""
        value, tok = self.quoted_choice(clause, "a quoted engine name ('in-process', 'spark' or 'auto')", fold=True)
        if value not in DETECTOR_ENGINES:
            raise self.error(f"unknown detector engine {value!r}: ENGINE takes 'in-process', 'spark' or 'auto'",
                             tok, clause, hint=did_you_mean(value, DETECTOR_ENGINES))
        return value

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
        on: tuple[m.EventType, ...] = ()
        if self.at("ON"):
            where["ON"] = self.advance()
            on = self.event_types("NOTIFY ON", NOTIFY_EVENT_TYPES)
        where_expr = None
        if self.at("WHERE"):
            where["NOTIFY WHERE"] = self.advance()
            stops = ("NOTIFY_OPTIONS", "INTO", "OUTPUT_SUBTABLE", "TAGS", "AS")
            where_expr = self.row_expression("NOTIFY WHERE", lambda: self.tok.upper in stops)
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
        if parts.scheme == "notifier":  # an Airflow notifier that airflow-stream.toml names
            if not parts.hostname or parts.port is not None or parts.path not in ("", "/") or parts.query \
                    or parts.username is not None:
                raise self.error(f"notification URL {url!r}: a notifier is named notifier://<name>, the name of a "
                                 "[notifiers.<name>] table of airflow-stream.toml", tok, "NOTIFY")
            return url
        if parts.scheme not in ("ws", "wss", "http", "https"):
            raise self.error(f"notification URL {url!r} must use ws://, wss://, http:// or https:// (POST), or "
                             "name a notifier (notifier://<name>)", tok, "NOTIFY")
        if parts.username is not None or parts.password is not None:
            raise self.error(f"notification URL {parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path} "
                             "carries a user or password: put credentials in a stream_ws connection (Airflow), "
                             "never in stream SQL", tok, "NOTIFY")
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
            name = self.ident("output column name", "column list", names.COLUMN)
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
            name = self.ident("tag name", "TAGS", names.TAG)
            dtype = self.data_type("TAGS")
            comment = None
            if self.accept("COMMENT"):
                tok = self.tok
                if tok.kind is not Kind.STRING:
                    raise self.error("COMMENT takes a quoted string", clause="TAGS", syntax=True)
                comment = self.advance().value
            self.expect("AS", clause="TAGS")
            tags.append(m.TagDefinition(name, dtype, self.row_expression("TAGS"), comment))
            if not self.accept_op(","):
                break
        self.expect_op(")", "TAGS")
        return tuple(tags)

    def stream_control(self, pos: dict) -> m.Statement:
        verb = self.advance().upper
        self.expect("STREAM", clause=verb)
        if verb == "RECALCULATE":
            name = self.table_name("stream name", verb, names.STREAM)
            self.expect("FROM", clause=verb)
            start = self.time_point(verb)
            end = None
            if self.at("TO"):
                to_tok = self.advance()
                end = self.time_point(verb)
                if start.at is not None and end.at is not None and end.at <= start.at:  # both absolute
                    raise self.error("RECALCULATE TO must be later than FROM", to_tok, verb)
            return m.RecalculateStream(name, start, end, **pos)
        if verb == "VERIFY":
            return self.verify_stream(pos)
        if_exists = self.accept("IF", "EXISTS")
        ignore = verb == "START" and self.accept("IGNORE", "UNTREATED")
        name = self.table_name("stream name", verb, names.STREAM)
        if verb == "START":
            return m.StartStream(name, if_exists, ignore, **pos)
        return m.StopStream(name, if_exists, **pos)

    def verify_stream(self, pos: dict) -> m.VerifyStream:
        """``VERIFY STREAM [db.]name [FROM ts] [TO ts] [REPAIR]``, after its first two words."""
        name = self.table_name("stream name", "VERIFY", names.STREAM)
        start = self.time_point("VERIFY") if self.accept("FROM") else None
        end = None
        if self.at("TO"):
            to_tok = self.advance()
            end = self.time_point("VERIFY")
            if start is not None and start.at is not None and end.at is not None and end.at <= start.at:
                raise self.error("VERIFY TO must be later than FROM", to_tok, "VERIFY")
        repair = bool(self.accept("REPAIR"))
        return m.VerifyStream(name, start, end, repair, **pos)

    def show(self, pos: dict) -> m.ShowStreams | m.ShowTables | m.ShowCreateStream:
        self.expect("SHOW")
        if self.accept("CREATE"):
            self.expect("STREAM", clause="SHOW CREATE")
            return m.ShowCreateStream(self.table_name("stream name", "SHOW CREATE STREAM", names.STREAM), **pos)
        db = None
        if self.tok.kind in (Kind.IDENT, Kind.QUOTED_IDENT) and self.peek().text == ".":
            db = self.ident("database name", "SHOW", names.DATABASE)
            self.expect_op(".")
        if self.accept("STABLES") or self.accept("TABLES"):
            return m.ShowTables(db, stable=self.toks[self.i - 1].upper == "STABLES", **pos)
        if not self.accept("STREAMS"):
            raise self.error(f"only SHOW [db.]STREAMS, STABLES or TABLES and SHOW CREATE STREAM are supported, found "
                             f"{self.tok.describe()}", clause="SHOW")
        like = None
        if self.accept("LIKE"):
            tok = self.tok
            if tok.kind is not Kind.STRING:
                raise self.error(f"LIKE takes a quoted pattern, as LIKE 'meter%', found {tok.describe()}",
                                 clause="LIKE", syntax=True)
            # as written: TDengine keeps \\% and \\_ for LIKE to read (a quote doubled is one quote)
            like = self.advance().text[1:-1].replace(tok.text[0] * 2, tok.text[0])
        return m.ShowStreams(db, like, **pos)
