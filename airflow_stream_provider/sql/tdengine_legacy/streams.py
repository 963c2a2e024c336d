"""The stream statements of TDengine's engine before 3.3.7 (references 001 and 003), as written.

``CREATE STREAM [IF NOT EXISTS] name [options] [INTO stb [(cols)] [TAGS (...)] [SUBTABLE(expr)]]
AS subquery [NOTIFY (urls) ON (types) [NOTIFY_HISTORY 0|1] [ON_FAILURE DROP|PAUSE]]``, the options
in any order, each once: ``TRIGGER AT_ONCE | WINDOW_CLOSE | MAX_DELAY t | FORCE_WINDOW_CLOSE |
CONTINUOUS_WINDOW_CLOSE [RECALCULATE t]``, ``WATERMARK t``, ``IGNORE EXPIRED [0|1]``, ``IGNORE
UPDATE [0|1]``, ``DELETE_MARK t``, ``FILL_HISTORY [0|1] [ASYNC]``. The statement is read into
:class:`LegacySyntax`, with the token of every clause, and :mod:`.lower` turns that into the
model. ``PAUSE STREAM [IF EXISTS] s`` and ``RESUME STREAM [IF EXISTS] [IGNORE UNTREATED] s`` are
STOP and START.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from airflow_stream_provider import model as m
from airflow_stream_provider.model import names
from airflow_stream_provider.sql.grammar.lexer import Kind, Token
from airflow_stream_provider.sql.tdengine.streams import StreamStatements

TRIGGER_MODES = tuple(m.TriggerMode)
#: the words that begin an option, and the names options are reported by
OPTION_WORDS = ("TRIGGER", "WATERMARK", "IGNORE", "DELETE_MARK", "FILL_HISTORY")
NOTIFY_EVENT_TYPES = (m.EventType.WINDOW_OPEN, m.EventType.WINDOW_CLOSE)


@dataclass(frozen=True)
class LegacyTag:
    """A tag of ``TAGS (...)``: a new one (``name type [COMMENT 'c']``), or one of an existing
    supertable by name (``type`` None)."""

    name: str
    type: m.DataType | None
    comment: str | None
    token: Token


@dataclass
class LegacySyntax:
    """A legacy CREATE STREAM as written; ``where`` holds the first token of every clause."""

    name: m.TableName
    if_not_exists: bool
    query: m.SqlExpression
    where: dict[str, Token]
    options: dict[str, Any] = field(default_factory=dict)
    into: m.TableName | None = None
    columns: tuple[m.OutputColumn, ...] = ()
    tags: tuple[LegacyTag, ...] = ()
    subtable: m.SqlExpression | None = None
    notify: m.Notify | None = None


class LegacyStreamStatements(StreamStatements):
    """The legacy CREATE STREAM, PAUSE and RESUME STREAM."""

    def legacy_create_stream(self) -> LegacySyntax:
        self.expect("CREATE", "STREAM")
        if_not_exists = self.accept("IF", "NOT", "EXISTS")
        name = self.table_name("stream name", "CREATE STREAM", names.STREAM)
        where: dict[str, Token] = {"CREATE STREAM": self.toks[self.i - 1]}
        options = self.legacy_options(where)
        into: m.TableName | None = None
        columns: tuple[m.OutputColumn, ...] = ()
        tags: tuple[LegacyTag, ...] = ()
        subtable: m.SqlExpression | None = None
        if self.at("INTO"):
            where["INTO"] = self.advance()
            into = self.table_name("output supertable", "INTO")
            if self.at_op("("):
                where["columns"] = self.tok
                columns = self.output_columns()
            if self.at("TAGS"):
                where["TAGS"] = self.tok
                tags = self.legacy_tags()
            if self.at("SUBTABLE"):
                where["SUBTABLE"] = self.advance()
                self.expect_op("(", "SUBTABLE")
                subtable = self.row_expression("SUBTABLE")
                self.expect_op(")", "SUBTABLE")
        if not self.at("AS"):
            tok = self.tok
            if tok.upper in OPTION_WORDS:
                raise self.error(f"{tok.text.upper()} is out of place: the options of CREATE STREAM come before INTO",
                                 syntax=True)
            expected = "AS subquery" if into is not None else "INTO stb_name or AS subquery"
            raise self.error(f"expected {expected}, found {tok.describe()}", clause="CREATE STREAM", syntax=True)
        where["AS"] = self.advance()
        query = self.query_to_end("AS", lambda: self.at("NOTIFY"))
        notify = self.legacy_notify(where) if self.at("NOTIFY") else None
        if not self.at_end():
            raise self.error(f"unexpected {self.tok.describe()} after the subquery: only NOTIFY (...) ON (...) may "
                             "follow it", syntax=True)
        return LegacySyntax(name=name, if_not_exists=if_not_exists, query=query, where=where, options=options,
                            into=into, columns=columns, tags=tags, subtable=subtable, notify=notify)

    # --- options --------------------------------------------------------------------------------

    def legacy_options(self, where: dict[str, Token]) -> dict[str, Any]:
        """The options before INTO, in any order, each at most once: option name -> value."""
        found: dict[str, Any] = {}
        while self.tok.upper in OPTION_WORDS:
            tok = self.advance()
            word = tok.upper
            value: Any
            if word == "TRIGGER":
                mode = m.TriggerMode(self.option_word(TRIGGER_MODES, "TRIGGER", "trigger mode").upper)
                value = {"mode": mode}
                if mode is m.TriggerMode.MAX_DELAY:
                    value["max_delay"] = self.duration("TRIGGER MAX_DELAY", "max delay")
                elif mode is m.TriggerMode.CONTINUOUS_WINDOW_CLOSE and self.at("RECALCULATE"):
                    where["RECALCULATE"] = self.advance()
                    value["recalculate"] = self.duration("RECALCULATE", "recalculation period")
            elif word in ("WATERMARK", "DELETE_MARK"):
                value = self.duration(word)
            elif word == "IGNORE":
                word = f"IGNORE {self.option_word(('EXPIRED', 'UPDATE'), 'IGNORE', 'IGNORE option').upper}"
                value = self.flag(word)
            else:  # FILL_HISTORY
                value = {"on": self.flag(word)}
                if self.at("ASYNC"):
                    where["ASYNC"] = self.advance()
                    value["async"] = True
            if word in found:
                raise self.error(f"option {word} is given twice", tok, word)
            found[word] = value
            where[word] = tok
        return found

    def flag(self, clause: str) -> bool:
        """``[0|1]`` after an option: 1 when left out."""
        tok = self.tok
        if tok.kind is not Kind.NUMBER:
            return True
        if tok.text not in ("0", "1"):
            raise self.error(f"{clause} takes 0 or 1, found {tok.text}", tok, clause)
        self.advance()
        return tok.text == "1"

    # --- output ---------------------------------------------------------------------------------

    def legacy_tags(self) -> tuple[LegacyTag, ...]:
        """``TAGS (name type [COMMENT 'c'], ...)``, or ``TAGS (name, ...)`` naming tags of an existing
        supertable."""
        self.expect("TAGS")
        self.expect_op("(", "TAGS")
        tags: list[LegacyTag] = []
        while True:
            tok = self.tok
            name = self.ident("tag name", "TAGS", names.TAG)
            dtype: m.DataType | None = None
            comment = None
            if not (self.at_op(",") or self.at_op(")")):
                dtype = self.data_type("TAGS")
                if self.accept("COMMENT"):
                    if self.tok.kind is not Kind.STRING:
                        raise self.error("COMMENT takes a quoted string", clause="TAGS", syntax=True)
                    comment = self.advance().value
            if any(t.name.lower() == name.lower() for t in tags):
                raise self.error(f"tag {name} is named twice", tok, "TAGS")
            tags.append(LegacyTag(name, dtype, comment, tok))
            if not self.accept_op(","):
                break
        self.expect_op(")", "TAGS")
        if len({t.type is None for t in tags}) > 1:
            raise self.error("TAGS either defines new tags (name type) or names existing ones (name), not both",
                             tags[0].token, "TAGS")
        return tuple(tags)

    def legacy_notify(self, where: dict[str, Token]) -> m.Notify:
        """``NOTIFY (urls) ON ('WINDOW_OPEN', 'WINDOW_CLOSE') [NOTIFY_HISTORY [0|1]] [ON_FAILURE DROP|PAUSE]``
        (reference 003): delivered in the 3.3.6 format, holding the stream on failure by default."""
        where["NOTIFY"] = self.expect("NOTIFY")
        self.expect_op("(", "NOTIFY")
        urls = [self.check_url(self.notify_url())]
        while self.accept_op(","):
            urls.append(self.check_url(self.notify_url()))
        self.expect_op(")", "NOTIFY")
        where["ON"] = self.expect("ON", clause="NOTIFY")
        on = self.event_types("NOTIFY ON", NOTIFY_EVENT_TYPES)
        history, pause, seen = False, True, set()
        while self.at("NOTIFY_HISTORY") or self.at("ON_FAILURE"):
            tok = self.advance()
            if tok.upper in seen:
                raise self.error(f"option {tok.upper} is given twice", tok, "NOTIFY")
            seen.add(tok.upper)
            if tok.upper == "NOTIFY_HISTORY":
                history = self.flag("NOTIFY_HISTORY")
            else:
                pause = self.option_word(("DROP", "PAUSE"), "ON_FAILURE", "failure policy").upper == "PAUSE"
        return m.Notify(tuple(urls), on, None, history, pause, message_format="3.3.6")

    def notify_url(self) -> Token:
        tok = self.tok
        if tok.kind is not Kind.STRING:
            raise self.error(f"NOTIFY takes quoted URLs, found {tok.describe()}", clause="NOTIFY", syntax=True)
        return self.advance()

    # --- management -----------------------------------------------------------------------------

    def pause_resume(self, pos: dict) -> m.Statement:
        """``PAUSE STREAM [IF EXISTS] s``, ``RESUME STREAM [IF EXISTS] [IGNORE UNTREATED] s``."""
        verb = self.advance().upper
        self.expect("STREAM", clause=f"{verb} STREAM")
        if_exists = self.accept("IF", "EXISTS")
        ignore = verb == "RESUME" and self.accept("IGNORE", "UNTREATED")
        name = self.table_name("stream name", f"{verb} STREAM", names.STREAM)
        if verb == "RESUME":
            return m.StartStream(name, if_exists, ignore, verb="RESUME", **pos)
        return m.StopStream(name, if_exists, verb="PAUSE", **pos)
