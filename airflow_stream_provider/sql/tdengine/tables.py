"""The table statements of TDengine: databases, supertables, tables, INSERT, DELETE, DROP, USE, SELECT."""

from __future__ import annotations

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import did_you_mean
from airflow_stream_provider.model import names
from airflow_stream_provider.sql.functions import check_functions
from airflow_stream_provider.sql.grammar.lexer import Kind
from airflow_stream_provider.sql.tdengine.attach import AttachStatements

#: KEEP's range (TDengine: 1 to 365000 days)
KEEP_LEAST, KEEP_MOST = 86_400_000_000, 365_000 * 86_400_000_000

DATABASE_OPTIONS = [
    "BUFFER", "CACHEMODEL", "CACHESIZE", "COMP", "DURATION", "WAL_FSYNC_PERIOD", "MAXROWS", "MINROWS", "KEEP",
    "KEEP_TIME_OFFSET", "PAGES", "PAGESIZE", "TSDB_PAGESIZE", "REPLICA", "WAL_LEVEL", "VGROUPS", "SINGLE_STABLE",
    "TABLE_PREFIX", "TABLE_SUFFIX", "STT_TRIGGER", "WAL_RETENTION_PERIOD", "WAL_RETENTION_SIZE",
    "ENCRYPT_ALGORITHM", "SS_CHUNKPAGES", "SS_KEEPLOCAL", "SS_COMPACT", "DNODES", "COMPACT_INTERVAL",
    "COMPACT_TIME_RANGE", "COMPACT_TIME_OFFSET",
]


class TableStatements(AttachStatements):
    """The statements on databases and tables, and the queries run once."""

    def create_database(self, pos: dict) -> m.CreateDatabase:
        self.expect("CREATE", "DATABASE")
        if_not_exists = self.accept("IF", "NOT", "EXISTS")
        name_tok = self.tok
        name = self.ident("database name", "CREATE DATABASE", names.DATABASE)
        if name.lower() == names.CQ_NAMESPACE:
            raise self.error(f"database name {name} {names.RESERVED_DATABASE}", name_tok, "CREATE DATABASE")
        precision = "ms"
        keep = None
        while self.tok.kind is Kind.IDENT:
            tok = self.advance()
            if tok.upper == "KEEP":
                keep = self.keep("CREATE DATABASE")
            elif tok.upper == "PRECISION":
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
        return m.CreateDatabase(name, if_not_exists, precision, keep, **pos)

    def alter_database(self, pos: dict) -> m.AlterDatabase:
        """``ALTER DATABASE name KEEP value``: the only database option the warehouse changes."""
        self.expect("ALTER", "DATABASE")
        name = self.ident("database name", "ALTER DATABASE", names.DATABASE)
        tok = self.tok
        if tok.upper != "KEEP":
            if tok.upper in DATABASE_OPTIONS or tok.upper == "PRECISION":
                raise self.error(f"ALTER DATABASE changes only KEEP here; {tok.upper} is not supported by the Delta "
                                 "warehouse", tok, "ALTER DATABASE")
            raise self.error(f"expected KEEP, found {tok.describe()}", tok, "ALTER DATABASE", syntax=True)
        self.advance()
        return m.AlterDatabase(name, self.keep("ALTER DATABASE"), **pos)

    def keep(self, clause: str) -> m.Duration:
        """KEEP's value: days (``3650``) or a duration in minutes, hours or days (``30d``); with
        TDengine's three tiers (``KEEP 30d, 180d, 365d``) rows go after the last, the longest."""
        values: list[m.Duration] = []
        while True:
            tok = self.tok
            if tok.kind is Kind.NUMBER and tok.text.isdigit():
                self.advance()
                value = m.Duration(int(tok.text), "d")
            else:
                value = self.duration(clause, "KEEP")
                if value.unit not in ("m", "h", "d"):
                    raise self.error(f"KEEP {value} must be in minutes, hours or days (m, h, d)", tok, clause)
            if not KEEP_LEAST <= value.micros <= KEEP_MOST:
                raise self.error(f"KEEP {value} is outside the allowed range [1d, 365000d]", tok, clause)
            if values and value.micros < values[-1].micros:
                raise self.error(f"KEEP's tiers must not shrink: {value} after {values[-1]}", tok, clause)
            values.append(value)
            if len(values) == 3 or not self.accept_op(","):
                return values[-1]

    def column_definitions(self, clause: str, tags: bool = False) -> tuple[m.ColumnDefinition, ...]:
        self.expect_op("(", clause)
        cols: list[m.ColumnDefinition] = []
        seen: set[str] = set()
        while True:
            tok = self.tok
            name = self.ident("column name", clause, names.TAG if tags else names.COLUMN)
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
                raise self.error(f"column option {self.tok.upper} is not supported by the Delta warehouse",
                                 clause=clause)
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
        if self.at("FROM"):
            return [self.attach_table(name, stable, if_not_exists, pos)]
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
                if self.at_end():
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
            if self.at_end():
                return m.Insert(tuple(targets), **pos)

    def delete(self, pos: dict) -> m.Delete:
        self.expect("DELETE", "FROM")
        table = self.table_name(clause="DELETE")
        where = None
        if self.accept("WHERE"):
            where = self.expression("WHERE", lambda: self.at_op(";"))
            check_functions(where.tree, where.text, where.position, "WHERE")
        return m.Delete(table, where, **pos)

    def drop(self, pos: dict) -> m.Statement:
        self.expect("DROP")
        what = self.tok.upper
        if what not in ("STREAM", "TABLE", "STABLE", "DATABASE"):
            raise self.error(f"expected STREAM, TABLE, STABLE or DATABASE after DROP, found {self.tok.describe()}",
                             syntax=True)
        self.advance()
        if_exists = self.accept("IF", "EXISTS")
        if what == "STREAM":
            return m.DropStream(self.table_name("stream name", "DROP STREAM", names.STREAM), if_exists, **pos)
        if what == "DATABASE":
            return m.DropDatabase(self.ident("database name", "DROP DATABASE", names.DATABASE), if_exists, **pos)
        tables = [self.table_name(clause=f"DROP {what}")]
        while self.accept_op(","):
            self.accept("IF", "EXISTS")
            tables.append(self.table_name(clause=f"DROP {what}"))
        return m.DropTable(tuple(tables), if_exists, stable=what == "STABLE", **pos)

    def describe(self, pos: dict) -> m.Describe:
        self.advance()  # DESCRIBE or DESC
        return m.Describe(self.table_name(clause="DESCRIBE"), **pos)

    def use_database(self, pos: dict) -> m.UseDatabase:
        self.expect("USE")
        return m.UseDatabase(self.ident("database name", "USE", names.DATABASE), **pos)

    def select(self, pos: dict) -> m.Select:
        query = self.query_to_end("SELECT")
        check_functions(query.tree, query.text, query.position, "SELECT")
        return m.Select(query, **pos)
