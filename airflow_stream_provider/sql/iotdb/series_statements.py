"""IoTDB's statements on databases, series and points: ``CREATE DATABASE``, ``CREATE [ALIGNED]
TIMESERIES``, ``DELETE``/``DROP`` of both, ``SHOW DATABASES``/``TIMESERIES``/``DEVICES``, ``INSERT INTO
root.ln.wf01.wt01(time, temperature) VALUES ...`` and ``DELETE FROM ... WHERE time ...``."""

from __future__ import annotations

from airflow_stream_provider import model as m
from airflow_stream_provider.sql.grammar.lexer import Kind, Token
from airflow_stream_provider.sql.iotdb.expressions import Expressions

ENCODINGS = frozenset({"PLAIN", "RLE", "TS_2DIFF", "GORILLA", "DICTIONARY", "ZIGZAG", "CHIMP", "SPRINTZ",
                       "RLBE", "FREQ", "DIFF", "BITMAP", "REGULAR", "GORILLA_V1"})
COMPRESSIONS = frozenset({"UNCOMPRESSED", "SNAPPY", "LZ4", "GZIP", "ZSTD", "LZMA2", "SDT", "PAA", "PLA"})
#: the aliases IoTDB accepts for its data types
TYPE_NAMES = {**{t.value: t for t in m.SeriesType}, "INT": m.SeriesType.INT32, "LONG": m.SeriesType.INT64,
              "STRING": m.SeriesType.TEXT, "BOOL": m.SeriesType.BOOLEAN}


class SeriesStatements(Expressions):
    def create_database(self, pos: m.Position) -> m.Statement:
        self.advance()
        self.accept("DATABASE") or self.expect("STORAGE", "GROUP")
        clause = "CREATE DATABASE"
        first = self.tok
        path = self.path("the database", clause, absolute=True, wildcards=False)
        if len(path.nodes) < 2:
            raise self.error("a database is a path under root, as root.ln", first, clause)
        return m.CreateSeriesDatabase(path, position=pos, text="")

    def set_ttl(self, pos: m.Position) -> m.Statement:
        """``SET TTL TO path ms`` / ``UNSET TTL TO path``: ``path`` a database, or ``prefix.**``."""
        unset = self.advance().upper == "UNSET"
        self.expect("TTL")
        clause = "UNSET TTL" if unset else "SET TTL"
        self.expect("TO", clause=clause)
        first = self.tok
        path = self.path("the database", clause, absolute=True, wildcards=True)
        inner = path.nodes[:-1] if path.nodes[-1] == "**" else path.nodes
        if any("*" in node for node in inner) or len(path.nodes) < 2:
            raise self.error(f"{clause}: the path is a database or a prefix ending in .** (root.ln, root.sgcc.**), "
                             f"found {path}", first, clause)
        if unset:
            return m.SetTtl(path, None, position=pos, text="")
        tok = self.tok
        if tok.kind is not Kind.NUMBER or not tok.text.isdigit():
            raise self.error(f"SET TTL takes milliseconds, found {tok.describe()}", tok, clause, syntax=True)
        self.advance()
        ttl = int(tok.text)
        if not 0 < ttl * 1000 <= m.TIMESTAMP_SPAN_MICROS:
            raise self.error(f"SET TTL {ttl}: milliseconds between 1 and the whole range of timestamps", tok, clause)
        return m.SetTtl(path, ttl, position=pos, text="")

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
            if len(path.nodes) < 3:  # the device may be the database itself: root.sg.a
                raise self.error("a series is root.<database>[.<device>].<measurement>, at least three nodes",
                                 first, clause)
            self.check_device(path.parent, first, clause)
            return m.CreateTimeseries((self._series_attributes(path, clause, first, with_keyword=True),),
                                      position=pos, text="")
        self.check_device(path, first, clause)
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


    def insert(self, pos: m.Position) -> m.Statement:
        self.expect("INSERT", "INTO")
        clause = "INSERT"
        first = self.tok
        device = self.path("the device", clause, absolute=True, wildcards=False)
        if len(device.nodes) < 2:  # a database is a device too: INSERT INTO root.sg(time, a)
            raise self.error("a device is a path under root, as root.sg or root.ln.wf01", first, clause)
        self.check_device(device, first, clause)
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
                values.append(self.constant(clause))
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

    def delete(self, pos: m.Position) -> m.Statement:
        self.expect("DELETE", "FROM")
        patterns = self.path_list("a series", "DELETE")
        where = None
        if self.accept("WHERE"):
            tok = self.tok
            where = self.expression("WHERE")
            _check_time_only(self, where, tok)
        return m.DeletePoints(patterns, where, position=pos, text="")


def _check_time_only(p: Expressions, where: m.SeriesExpr, tok) -> None:
    """DELETE's WHERE compares time only (IoTDB: time atoms joined by AND)."""
    for node in m.series.walk(where):
        if isinstance(node, m.Ref):
            raise p.error("DELETE ... WHERE compares time only, as WHERE time >= 1 AND time < 10", tok, "DELETE")
        if isinstance(node, m.Binary) and node.op == "OR":
            raise p.error("DELETE ... WHERE joins time conditions with AND only", tok, "DELETE")
