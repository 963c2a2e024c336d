"""``CREATE STABLE|TABLE name FROM DELTA 'path' MAP (...)``: an existing Delta table read as a
TDengine supertable or regular table.

::

    CREATE STABLE [IF NOT EXISTS] power.meters FROM DELTA '/data/readings'
        MAP (TIMESTAMP event_time, TBNAME device_id, TAGS (location = site), COLUMNS (voltage, current))
        [WRITABLE] [ENABLE CHANGE FEED]

``FROM CATALOG iot.readings`` names the table by its name in the shared catalog instead
(:mod:`~airflow_stream_provider.warehouse.metastore`); its location is read there at the attach.

Each mapped column is ``[model_name =] table_column``; without ``COLUMNS (...)`` every column the
map does not name otherwise is a metric. A regular table has no ``TBNAME`` and no ``TAGS``.
"""

from __future__ import annotations

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import did_you_mean
from airflow_stream_provider.model import names
from airflow_stream_provider.sql.grammar.lexer import Kind, Token
from airflow_stream_provider.sql.tdengine.literals import ValueParser

#: the entries of MAP (...)
MAP_ENTRIES = ("TIMESTAMP", "TBNAME", "TAGS", "COLUMNS")


class AttachStatements(ValueParser):
    """The attach form of CREATE STABLE and CREATE TABLE."""

    def attach_table(self, name: m.TableName, stable: bool, if_not_exists: bool, pos: dict) -> m.AttachTable:
        self.expect("FROM", clause=f"CREATE {'STABLE' if stable else 'TABLE'} ... FROM")
        catalog = None
        path = ""
        if self.accept("CATALOG"):  # a table of the shared catalog, by its name there
            clause = f"CREATE {'STABLE' if stable else 'TABLE'} ... FROM CATALOG"
            at = self.tok
            found = self.table_name("catalog table name", clause)
            if found.db is None:
                raise self.error(f"FROM CATALOG {at.text}: name the table as database.table", at, clause)
            catalog = f"{found.db}.{found.name}"
        else:
            clause = f"CREATE {'STABLE' if stable else 'TABLE'} ... FROM DELTA"
            if not self.accept("DELTA"):
                found_tok = self.tok.describe()
                raise self.error(f"expected DELTA '<location>' or CATALOG <database.table>, found {found_tok}",
                                 clause=clause, syntax=True)
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
        map_tok = self.expect("MAP", clause=clause)
        entries, tokens = self._map("MAP")
        if "TIMESTAMP" not in entries:
            raise self.error("MAP needs TIMESTAMP <column>: the table's timestamp column", map_tok, "MAP")
        if stable and "TBNAME" not in entries:
            raise self.error("a supertable's MAP needs TBNAME <column>: the column that names each subtable",
                             map_tok, "MAP")
        if not stable and ("TBNAME" in entries or "TAGS" in entries):
            raise self.error("a regular table has no TBNAME or TAGS: attach it with CREATE STABLE",
                             tokens.get("TBNAME") or tokens["TAGS"], "MAP")
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
                             writable=writable, enable_change_feed=enable, if_not_exists=if_not_exists,
                             catalog=catalog, **pos)

    def _map(self, clause: str) -> tuple[dict[str, tuple[m.MappedColumn, ...]], dict[str, Token]]:
        """The entries of MAP (...), and the token each starts at."""
        self.expect_op("(", clause)
        found: dict[str, tuple[m.MappedColumn, ...]] = {}
        tokens: dict[str, Token] = {}
        seen: dict[str, str] = {}  # model name -> entry
        sources: set[str] = set()
        while True:
            tok = self.tok
            word = tok.upper
            if word not in MAP_ENTRIES:
                raise self.error(f"expected {', '.join(MAP_ENTRIES)} in MAP, found {tok.describe()}", clause=clause,
                                 hint=did_you_mean(tok.text, list(MAP_ENTRIES)), syntax=True)
            if word in found:
                raise self.error(f"MAP names {word} twice", tok, clause)
            self.advance()
            where = f"MAP {word}"
            items: list[tuple[m.MappedColumn, Token]] = []
            if word in ("TAGS", "COLUMNS"):
                role = "tag" if word == "TAGS" else "metric"
                self.expect_op("(", where)
                items.append(self._mapped(role, where))
                while self.accept_op(","):
                    items.append(self._mapped(role, where))
                self.expect_op(")", where)
            else:
                items.append(self._mapped("tbname" if word == "TBNAME" else "ts", where))
            for item, at in items:
                if item.source.lower() in sources:
                    raise self.error(f"MAP reads column {item.source} twice", at, where)
                sources.add(item.source.lower())
                if item.name in seen:
                    raise self.error(f"MAP names {item.name} twice ({seen[item.name]} and {word})", at, where)
                seen[item.name] = word
            found[word], tokens[word] = tuple(item for item, _ in items), tok
            if not self.accept_op(","):
                break
        self.expect_op(")", clause)
        return found, tokens

    def _mapped(self, role: str, clause: str) -> tuple[m.MappedColumn, Token]:
        """``[name =] column`` (TBNAME: ``column``), and the token it starts at."""
        tok = self.tok
        kind = names.TAG if role == "tag" else names.COLUMN
        name = None
        if role != "tbname" and self.peek().kind is Kind.OP and self.peek().text == "=":
            name = self.ident("column name", clause, kind).lower()
            self.advance()
        at = self.tok
        source = self.ident("column of the table", clause, kind if name is None and role != "tbname" else None)
        model = names.TBNAME if role == "tbname" else (name or source.lower())
        if model == names.TBNAME and role != "tbname":
            raise self.error("tbname is the subtable name column: map it with TBNAME <column>", at, clause)
        return m.MappedColumn(model, source, role, self.position(tok)), tok
