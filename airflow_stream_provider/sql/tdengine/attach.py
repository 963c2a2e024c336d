"""``CREATE STABLE|TABLE name FROM DELTA 'path' MAP (...)``: an existing Delta table read as a
TDengine supertable or regular table.

::

    CREATE STABLE [IF NOT EXISTS] power.meters FROM DELTA '/data/readings'
        MAP (TIMESTAMP event_time, TBNAME device_id, TAGS (location = site), COLUMNS (voltage, current))
        [WRITABLE] [ENABLE CHANGE FEED]

Each mapped column is ``[model_name =] table_column``; without ``COLUMNS (...)`` every column the
map does not name otherwise is a metric. A regular table has no ``TBNAME`` and no ``TAGS``.
"""

from __future__ import annotations

from airflow_stream_provider import model as m
from airflow_stream_provider.model import names
from airflow_stream_provider.sql.grammar.lexer import Kind
from airflow_stream_provider.sql.tdengine.literals import ValueParser

#: the entries of MAP (...)
MAP_ENTRIES = ("TIMESTAMP", "TBNAME", "TAGS", "COLUMNS")


class AttachStatements(ValueParser):
    """The attach form of CREATE STABLE and CREATE TABLE."""

    def attach_table(self, name: m.TableName, stable: bool, if_not_exists: bool, pos: dict) -> m.AttachTable:
        clause = f"CREATE {'STABLE' if stable else 'TABLE'} ... FROM DELTA"
        self.expect("FROM", "DELTA", clause=clause)
        tok = self.tok
        if tok.kind is not Kind.STRING:
            raise self.error(f"FROM DELTA takes the table's location as a string, found {tok.describe()}",
                             clause=clause, syntax=True)
        self.advance()
        path = tok.value.strip()
        if not path:
            raise self.error("FROM DELTA '' names no table: give its folder or s3:// URL", tok, clause)
        if "://" in path and not path.startswith("s3://"):
            raise self.error(f"FROM DELTA {tok.text}: a local folder or an s3:// URL", tok, clause)
        self.expect("MAP", clause=clause)
        entries = self._map("MAP")
        if "TIMESTAMP" not in entries:
            raise self.error("MAP needs TIMESTAMP <column>: the table's timestamp column", clause="MAP")
        if stable and "TBNAME" not in entries:
            raise self.error("a supertable's MAP needs TBNAME <column>: the column that names each subtable",
                             clause="MAP")
        if not stable and ("TBNAME" in entries or "TAGS" in entries):
            raise self.error("a regular table has no TBNAME or TAGS: attach it with CREATE STABLE", clause="MAP")
        writable = enable = False
        while not self.at_end() and not self.at_op(";"):
            if self.accept("WRITABLE"):
                writable = True
            elif self.accept("ENABLE", "CHANGE", "FEED"):
                enable = True
            else:
                raise self.error(f"unexpected {self.tok.describe()}: expected WRITABLE or ENABLE CHANGE FEED",
                                 clause=clause, syntax=True)
        (ts,) = entries["TIMESTAMP"]
        tbname = entries.get("TBNAME", (None,))[0]
        return m.AttachTable(name, path, ts, tbname, entries.get("TAGS", ()), entries.get("COLUMNS"),
                             writable=writable, enable_change_feed=enable, if_not_exists=if_not_exists, **pos)

    def _map(self, clause: str) -> dict[str, tuple[m.MappedColumn, ...]]:
        self.expect_op("(", clause)
        found: dict[str, tuple[m.MappedColumn, ...]] = {}
        seen: dict[str, str] = {}  # model name -> entry
        while True:
            tok = self.tok
            word = tok.upper
            if word not in MAP_ENTRIES:
                raise self.error(f"expected {', '.join(MAP_ENTRIES)} in MAP, found {tok.describe()}", clause=clause,
                                 syntax=True)
            if word in found:
                raise self.error(f"MAP names {word} twice", tok, clause)
            self.advance()
            if word in ("TAGS", "COLUMNS"):
                role = "tag" if word == "TAGS" else "metric"
                self.expect_op("(", f"MAP {word}")
                items = [self._mapped(role, f"MAP {word}")]
                while self.accept_op(","):
                    items.append(self._mapped(role, f"MAP {word}"))
                self.expect_op(")", f"MAP {word}")
            elif word == "TBNAME":
                items = [self._source("tbname", "tbname", tok, f"MAP {word}")]
            else:
                items = [self._mapped("ts", f"MAP {word}")]
            for item in items:
                if item.name in seen:
                    raise self.error(f"MAP names {item.name} twice ({seen[item.name]} and {word})",
                                     clause=f"MAP {word}")
                seen[item.name] = word
            found[word] = tuple(items)
            if not self.accept_op(","):
                break
        self.expect_op(")", clause)
        return found

    def _mapped(self, role: str, clause: str) -> m.MappedColumn:
        """``[name =] column``."""
        tok = self.tok
        kind = names.TAG if role == "tag" else names.COLUMN
        if self.peek().kind is Kind.OP and self.peek().text == "=":
            name = self.ident("column name", clause, kind)
            self.advance()
            return self._source(name.lower(), role, tok, clause)
        return self._source(None, role, tok, clause, kind)

    def _source(self, name: str | None, role: str, tok, clause: str,
                kind: names.NameKind | None = None) -> m.MappedColumn:
        """The table's column ``source`` under ``name`` (None: its own name, which must obey ``kind``)."""
        at = self.tok
        source = self.ident("column of the table", clause, kind if name is None else None)
        if (name or source).lower() == names.TBNAME and role != "tbname":
            raise self.error("tbname is the subtable name column: map it with TBNAME <column>", at, clause)
        return m.MappedColumn(name or source.lower(), source, role, self.position(tok))
