"""IoTDB's form of attaching a Delta table: ``CREATE DEVICES root.plant FROM DELTA '/data/readings'
MAP (TIME event_time, DEVICE device_id, MEASUREMENTS (voltage, amps = current))``."""

from __future__ import annotations

from airflow_stream_provider import model as m
from airflow_stream_provider.sql.grammar.lexer import Kind, Token
from airflow_stream_provider.sql.iotdb.expressions import Expressions

MAP_ENTRIES = ("TIME", "DEVICE", "MEASUREMENTS")
_ROLES = {"TIME": "ts", "DEVICE": "tag", "MEASUREMENTS": "metric"}
_NAMES = {"TIME": "ts", "DEVICE": "device"}


class AttachStatements(Expressions):
    def create_devices(self, pos: m.Position) -> m.Statement:
        self.advance()
        self.expect("DEVICES")
        clause = "CREATE DEVICES"
        first = self.tok
        prefix = self.path("the path prefix", clause, absolute=True, wildcards=False)
        if len(prefix.nodes) < 2:
            raise self.error("the devices go under a path below root, as root.plant", first, clause)
        self.expect("FROM", clause=clause)
        clause = "CREATE DEVICES ... FROM DELTA"
        if not self.accept("DELTA"):
            raise self.error(f"expected DELTA '<location>', found {self.tok.describe()}", clause=clause, syntax=True)
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
        entries = self._entries("MAP")
        for word in MAP_ENTRIES:
            if word not in entries:
                what = {"TIME": "the timestamp column", "DEVICE": "the column naming each device",
                        "MEASUREMENTS": "the columns of the measurements"}[word]
                raise self.error(f"MAP needs {word}: {what}", map_tok, "MAP")
        if not self.at_end() and not self.at_op(";"):
            word = self.tok.upper
            why = ("attached devices are read-only here: write to the table with its owner's tools"
                   if word in ("WRITABLE", "ENABLE") else None)
            raise self.error(f"unexpected {self.tok.describe()} after MAP (...)", clause="CREATE DEVICES", hint=why,
                             syntax=True)
        return m.AttachDevices(prefix, path, entries["TIME"][0], entries["DEVICE"][0], entries["MEASUREMENTS"],
                               position=pos, text="")

    def _entries(self, clause: str) -> dict[str, tuple[m.MappedColumn, ...]]:
        self.expect_op("(", clause)
        found: dict[str, tuple[m.MappedColumn, ...]] = {}
        sources: set[str] = set()
        names: set[str] = set()
        while True:
            tok = self.tok
            word = tok.upper
            if word not in MAP_ENTRIES:
                raise self.error(f"expected {', '.join(MAP_ENTRIES)} in MAP, found {tok.describe()}", clause=clause,
                                 syntax=True)
            if word in found:
                raise self.error(f"MAP names {word} twice", tok, clause)
            self.advance()
            where = f"MAP {word}"
            items: list[tuple[m.MappedColumn, Token]] = []
            if word == "MEASUREMENTS":
                self.expect_op("(", where)
                items.append(self._measurement(where))
                while self.accept_op(","):
                    items.append(self._measurement(where))
                self.expect_op(")", where)
            else:
                at = self.tok
                source = self.ident("column of the table", where)
                items.append((m.MappedColumn(_NAMES[word], source, _ROLES[word], self.position(at)), at))
            for item, at in items:
                if item.source.lower() in sources:
                    raise self.error(f"MAP reads column {item.source} twice", at, where)
                if item.name in names:
                    raise self.error(f"MAP names the measurement {item.name} twice", at, where)
                sources.add(item.source.lower())
                names.add(item.name)
            found[word] = tuple(item for item, _ in items)
            if not self.accept_op(","):
                break
        self.expect_op(")", clause)
        return found

    def _measurement(self, clause: str) -> tuple[m.MappedColumn, Token]:
        """``[measurement =] column``: a measurement name obeys IoTDB's node rule."""
        tok = self.tok
        name = None
        if self.peek().kind is Kind.OP and self.peek().text == "=":
            name = self.node("a measurement name", clause)
            self.advance()
        at = self.tok
        source = self.ident("column of the table", clause)
        if name is None:
            self.check_node(source, at, clause)
        measurement = name or source
        if measurement.lower() in ("ts", "time", "tbname", "device"):
            raise self.error(f"{measurement} names the time or the device here: map the column under another "
                             "measurement name, as m = column", at, clause)
        return m.MappedColumn(measurement, source, "metric", self.position(tok)), tok
