"""``CREATE STABLE|TABLE ... FROM DELTA '<path>' MAP (...)`` as a table of (text, model) and
(text, positioned error) pairs; no Spark."""

from __future__ import annotations

import pytest

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.sql import parse


def col(name: str, source: str, role: str) -> tuple[str, str, str]:
    return (name, source, role)


def shape(stmt: m.AttachTable) -> tuple:
    cols = None if stmt.columns is None else tuple((c.name, c.source, c.role) for c in stmt.columns)
    return (str(stmt.name), stmt.path, (stmt.timestamp.name, stmt.timestamp.source),
            None if stmt.tbname is None else stmt.tbname.source, tuple((t.name, t.source) for t in stmt.tags),
            cols, stmt.writable, stmt.enable_change_feed, stmt.if_not_exists)


@pytest.mark.parametrize(("text", "expected"), [
    ("CREATE STABLE power.meters FROM DELTA '/data/readings' MAP (TIMESTAMP event_time, TBNAME device_id, "
     "TAGS (location = site), COLUMNS (voltage, current))",
     ("power.meters", "/data/readings", ("event_time", "event_time"), "device_id", (("location", "site"),),
      (col("voltage", "voltage", "metric"), col("current", "current", "metric")), False, False, False)),
    ("create stable if not exists m from delta 's3://b/t' map (tbname Dev, timestamp ts = T) writable "
     "enable change feed",
     ("m", "s3://b/t", ("ts", "T"), "Dev", (), None, True, True, True)),
    ("CREATE TABLE shop.totals FROM DELTA '/x' MAP (TIMESTAMP at, COLUMNS (amount, cents = amount_cents))",
     ("shop.totals", "/x", ("at", "at"), None, (),
      (col("amount", "amount", "metric"), col("cents", "amount_cents", "metric")), False, False, False)),
])
def test_attach_statements(text, expected):
    (stmt,) = parse(text)
    assert isinstance(stmt, m.AttachTable) and stmt.kind == "ATTACH TABLE"
    assert shape(stmt) == expected


def test_attach_by_catalog_name():
    (stmt,) = parse("CREATE STABLE power.meters FROM CATALOG iot.readings MAP (TIMESTAMP event_time, TBNAME device_id)")
    assert isinstance(stmt, m.AttachTable)
    assert (stmt.catalog, stmt.path, stmt.tbname and stmt.tbname.source) == ("iot.readings", "", "device_id")
    (by_path,) = parse("CREATE TABLE t FROM DELTA '/x' MAP (TIMESTAMP ts)")
    assert isinstance(by_path, m.AttachTable) and by_path.catalog is None


#: (statement, message, the text the error points at: its last occurrence)
ERRORS = [
    ("CREATE STABLE a FROM DELTA '/x' MAP (TIMESTAMP ts)", "a supertable's MAP needs TBNAME", "MAP"),
    ("CREATE TABLE a FROM DELTA '/x' MAP (TIMESTAMP ts, TAGS (g))", "a regular table has no TBNAME or TAGS", "TAGS"),
    ("CREATE TABLE a FROM DELTA 'http://x' MAP (TIMESTAMP ts)", "a local folder or an s3:// URL", "'http"),
    ("CREATE TABLE a FROM DELTA '' MAP (TIMESTAMP ts)", "names no table", "''"),
    ("CREATE TABLE a FROM DELTA /x MAP (TIMESTAMP ts)", "takes the table's location as a string", "/x"),
    ("CREATE TABLE a FROM DELTA '/x' MAP (TIMESTAMP ts, COLUMS (a))", "did you mean COLUMNS", "COLUMS"),
    ("CREATE TABLE a FROM DELTA '/x' MAP (COLUMNS (a))", "MAP needs TIMESTAMP", "MAP"),
    ("CREATE TABLE a FROM DELTA '/x' MAP (TIMESTAMP ts, COLUMNS (a, b = a))", "reads column a twice", "b ="),
    ("CREATE TABLE a FROM DELTA '/x' MAP (TIMESTAMP ts, COLUMNS (a, ts = b))", "names ts twice", "ts ="),
    ("CREATE STABLE a FROM DELTA '/x' MAP (TIMESTAMP ts, TBNAME d, TAGS (tbname))", "tbname", "tbname"),
    ("CREATE STABLE a FROM DELTA '/x' MAP (TIMESTAMP ts, TBNAME d, TBNAME e)", "names TBNAME twice", "TBNAME"),
    ("CREATE TABLE a FROM DELTA '/x' MAP (TIMESTAMP ts) WRITEABLE", "expected WRITABLE or ENABLE CHANGE FEED",
     "WRITEABLE"),
    ("CREATE TABLE a FROM CATALOG readings MAP (TIMESTAMP ts)", "name the table as database.table", "readings"),
    ("CREATE TABLE a FROM PARQUET '/x' MAP (TIMESTAMP ts)", "expected DELTA '<location>' or CATALOG", "PARQUET"),
]


@pytest.mark.parametrize(("text", "message", "anchor"), ERRORS)
def test_attach_errors_are_positioned(text, message, anchor):
    with pytest.raises(StreamDefinitionError, match=message) as caught:
        parse(text)
    assert caught.value.line == 1 and caught.value.column == text.rindex(anchor) + 1, str(caught.value)


@pytest.mark.parametrize(("text", "kind"), [
    ("SHOW power.STABLES", m.ShowTables(db="power", stable=True, position=m.Position(1, 1), text="")),
    ("SHOW TABLES", m.ShowTables(db=None, stable=False, position=m.Position(1, 1), text="")),
    ("DESCRIBE power.meters", m.Describe(m.TableName("meters", "power"), position=m.Position(1, 1), text="")),
    ("DESC meters", m.Describe(m.TableName("meters"), position=m.Position(1, 1), text="")),
])
def test_show_tables_and_describe(text, kind):
    assert parse(text) == [kind]
