"""IoTDB's insert triggers: ``CREATE [STATELESS|STATEFUL] TRIGGER``, ``DROP TRIGGER`` and ``SHOW
TRIGGERS``."""

from __future__ import annotations

import re

from airflow_stream_provider import model as m
from airflow_stream_provider.sql.grammar.lexer import Kind
from airflow_stream_provider.sql.iotdb.expressions import Expressions

_CLASS_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")


class TriggerStatements(Expressions):
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
