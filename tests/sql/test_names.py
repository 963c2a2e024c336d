"""The name rule at parse time: every database, table, subtable and stream name, and the column and
tag names a statement defines, with the position of the offending name.

The cases are hostile names (empty, ``..``, ``../../x``,
``/``, ``\\``, NUL, control characters, 300 characters, a tag named ``tbname``) and the names that
TDengine accepts between backquotes (spaces, CJK, emoji, punctuation), which stay legal.
"""

from __future__ import annotations

import pytest

from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.model import names
from airflow_stream_provider.sql import parse

N = "NOTIFY('ws://h:1')"


def q(name: str) -> str:
    """``name`` between backquotes, as TDengine escapes it."""
    return "`" + name.replace("`", "``") + "`"


# (statement, column of the offending name, what the message says, clause)
BAD = [
    (f"CREATE STREAM {q('')} PERIOD(10s) {N}", 15, "stream name '' is empty", "CREATE STREAM"),
    (f"CREATE STREAM {q('..')} PERIOD(10s) {N}", 15, "starts with '.'", "CREATE STREAM"),
    (f"CREATE STREAM {q('.')} PERIOD(10s) {N}", 15, "starts with '.'", "CREATE STREAM"),
    (f"CREATE STREAM {q('.hidden')} PERIOD(10s) {N}", 15, "starts with '.'", "CREATE STREAM"),
    (f"CREATE STREAM {q('a.b')} PERIOD(10s) {N}", 15, "stream name 'a.b' contains '.', which TDengine keeps out",
     "CREATE STREAM"),
    (f"CREATE STREAM p.{q('a..b')} PERIOD(10s) {N}", 17, "contains '.'", "CREATE STREAM"),
    ("CREATE TABLE t (ts TIMESTAMP, " + q("a.b") + " INT)", 31, "column name 'a.b' contains '.'", "CREATE TABLE"),
    (f"CREATE STREAM {q('../../x')} PERIOD(10s) {N}", 15, "contains '/'", "CREATE STREAM"),
    (f"CREATE STREAM {q('../..')}.x PERIOD(10s) {N}", 15, "database name '../..' contains '/'", "CREATE STREAM"),
    (f"CREATE STREAM p.{q('a/b')} PERIOD(10s) {N}", 17, "stream name 'a/b' contains '/'", "CREATE STREAM"),
    (f"CREATE STREAM {q('a' + chr(92) + 'b')} PERIOD(10s) {N}", 15, "contains '\\\\'", "CREATE STREAM"),
    (f"CREATE STREAM {q('a' + chr(0) + 'b')} PERIOD(10s) {N}", 15, "contains '\\x00'", "CREATE STREAM"),
    (f"CREATE STREAM {q('a' + chr(1) + 'b')} PERIOD(10s) {N}", 15, "contains '\\x01'", "CREATE STREAM"),
    (f"CREATE STREAM {q('a' + chr(10) + 'b')} PERIOD(10s) {N}", 15, "contains '\\n'", "CREATE STREAM"),
    (f"CREATE STREAM {q('a' + chr(0x7f))} PERIOD(10s) {N}", 15, "contains '\\x7f'", "CREATE STREAM"),
    (f"CREATE STREAM {'s' * 300} PERIOD(10s) {N}", 15, "is 300 bytes long; a stream name has at most 192",
     "CREATE STREAM"),
    (f"CREATE STREAM {q('流' * 65)} PERIOD(10s) {N}", 15, "is 195 bytes long", "CREATE STREAM"),
    ("DROP STREAM " + q("../x"), 13, "stream name '../x' contains '/'", "DROP STREAM"),
    ("DROP STREAM IF EXISTS " + q(""), 23, "stream name '' is empty", "DROP STREAM"),
    ("STOP STREAM " + q(".."), 13, "starts with '.'", "STOP"),
    ("START STREAM IGNORE UNTREATED " + q("a/b"), 31, "contains '/'", "START"),
    ("RECALCULATE STREAM " + q("..") + " FROM '2025-01-01 00:00:00'", 20, "starts with '.'", "RECALCULATE"),
    ("CREATE DATABASE " + q("a/b"), 17, "database name 'a/b' contains '/'", "CREATE DATABASE"),
    ("CREATE DATABASE " + "d" * 65, 17, "is 65 bytes long; a database name has at most 64", "CREATE DATABASE"),
    ("CREATE DATABASE " + q(""), 17, "database name '' is empty", "CREATE DATABASE"),
    ("DROP DATABASE " + q("../../homec/warehouse/power"), 15, "contains '/'", "DROP DATABASE"),
    ("DROP DATABASE IF EXISTS " + q(".."), 25, "starts with '.'", "DROP DATABASE"),
    ("USE " + q(".."), 5, "starts with '.'", "USE"),
    ("SHOW " + q("a/b") + ".STREAMS", 6, "contains '/'", "SHOW"),
    ("CREATE TABLE " + q("../t") + " (ts TIMESTAMP, v INT)", 14, "table name '../t' contains '/'", "CREATE TABLE"),
    ("CREATE TABLE " + "t" * 193 + " (ts TIMESTAMP, v INT)", 14, "is 193 bytes long; a table name has at most 192",
     "CREATE TABLE"),
    ("CREATE STABLE st (ts TIMESTAMP, v INT) TAGS (tbname INT)", 46, "tag name 'tbname' is reserved",
     "TAGS"),
    ("CREATE TABLE t (ts TIMESTAMP, TBNAME INT)", 31, "column name 'TBNAME' is reserved", "CREATE TABLE"),
    ("CREATE TABLE t (ts TIMESTAMP, " + "c" * 65 + " INT)", 31, "a column name has at most 64", "CREATE TABLE"),
    ("CREATE TABLE " + q("d1") + " USING " + q("../../m") + " TAGS (1)", 25, "contains '/'", "CREATE TABLE"),
    ("INSERT INTO " + q("../../../homec/warehouse/power/reg") + " VALUES ('2025-01-01 00:00:01', 666)", 13,
     "table name '../../../homec/warehouse/power/reg' contains '/'", "INSERT"),
    ("INSERT INTO d1 USING " + q("..") + " TAGS (1) VALUES (now, 1)", 22, "starts with '.'", "INSERT"),
    ("INSERT INTO " + q("a" + chr(0)) + " VALUES (now, 1)", 13, "contains '\\x00'", "INSERT"),
    ("DELETE FROM " + q("..") + ".t", 13, "database name '..' starts with '.'", "DELETE"),
    ("DROP TABLE " + q("../../../homec/warehouse/power/reg"), 12, "contains '/'", "DROP TABLE"),
    ("DROP TABLE t1, " + q(""), 16, "table name '' is empty", "DROP TABLE"),
    (f"CREATE STREAM s INTERVAL(1m) SLIDING(1m) FROM {q('../m')} {N} ON (WINDOW_CLOSE)", 47, "contains '/'",
     "FROM"),
    (f"CREATE STREAM s PERIOD(1h) INTO {q('../o')} AS SELECT cast(_tlocaltime/1000000 as timestamp) ts FROM t",
     33, "table name '../o' contains '/'", "INTO"),
    ("CREATE STREAM s INTERVAL(1m) SLIDING(1m) FROM m PARTITION BY tbname INTO o TAGS (tbname VARCHAR(10) AS "
     "tbname) AS SELECT _twstart, count(*) FROM %%trows", 82, "tag name 'tbname' is reserved", "TAGS"),
    ("CREATE STREAM s INTERVAL(1m) SLIDING(1m) FROM m INTO o (ts, " + q("") + ") AS SELECT _twstart, count(*) "
     "FROM %%trows", 61, "column name '' is empty", "column list"),
]


@pytest.mark.parametrize(("text", "column", "words", "clause"), BAD)
def test_a_bad_name_is_refused_where_it_is_written(text, column, words, clause):
    with pytest.raises(StreamDefinitionError) as caught:
        parse(text)
    err = caught.value
    assert (err.line, err.column, err.clause) == (1, column, clause), str(err)
    assert words in err.message, str(err)


def test_the_position_is_the_line_and_column_of_the_name():
    with pytest.raises(StreamDefinitionError) as caught:
        parse(f"CREATE DATABASE power;\nCREATE STREAM\n   power.{q('../victim')} PERIOD(10s) {N}")
    assert (caught.value.line, caught.value.column) == (3, 10)
    assert str(caught.value).startswith("line 3, col 10: CREATE STREAM: stream name '../victim' contains '/'")


GOOD = [
    ("CREATE STREAM " + q("a b") + f" PERIOD(10s) {N}", "a b"),
    ("CREATE STREAM " + q("流🙂") + f" PERIOD(10s) {N}", "流🙂"),
    ("CREATE STREAM " + q("a;DROP DATABASE x") + f" PERIOD(10s) {N}", "a;DROP DATABASE x"),
    ("CREATE STREAM " + q("q'x") + f" PERIOD(10s) {N}", "q'x"),
    ("CREATE STREAM " + q("a`b") + f" PERIOD(10s) {N}", "a`b"),
    ("CREATE STREAM " + "s" * 192 + f" PERIOD(10s) {N}", "s" * 192),
    ("CREATE STREAM " + q("流" * 64) + f" PERIOD(10s) {N}", "流" * 64),  # 192 bytes
]


@pytest.mark.parametrize(("text", "name"), GOOD)
def test_names_tdengine_accepts_between_backquotes_stay_legal(text, name):
    (stmt,) = parse(text)
    assert stmt.name.name == name


@pytest.mark.parametrize("text", [
    "CREATE DATABASE " + "d" * 64,
    "CREATE DATABASE " + q("数据 库"),
    "CREATE TABLE " + q("my table") + " (ts TIMESTAMP, " + q("a column") + " INT)",
    "CREATE TABLE " + "t" * 192 + " (ts TIMESTAMP, " + "c" * 64 + " INT)",
    "INSERT INTO " + q("q'x") + " USING meters TAGS (4, 'EU/Paris') VALUES ('2025-01-01 00:00:00', 1)",
    "INSERT INTO meters (tbname, ts, v) VALUES ('d1', now, 1)",  # tbname is a column an INSERT names
    "SELECT tbname FROM power.meters",
])
def test_statements_with_legal_names_parse(text):
    assert parse(text)


@pytest.mark.parametrize(("name", "kind", "problem"), [
    ("", names.TABLE, "is empty"),
    ("..", names.DATABASE, "starts with '.'"),
    ("a/b", names.STREAM, "contains '/'"),
    ("a/b", names.COLUMN, None),  # a column is no path
    ("a.b", names.COLUMN, "contains '.'"),
    ("a.b", names.TABLE, "contains '.'"),
    ("a/.b", names.TABLE, "contains '/'"),
    ("a" + chr(0), names.COLUMN, "contains '\\x00'"),
    (chr(0xD800), names.TABLE, "contains '\\ud800'"),  # a lone surrogate cannot be a file name
    ("tbname", names.TAG, "is reserved for the subtable name column"),
    ("tbname", names.TABLE, None),
    ("x" * 64, names.DATABASE, None),
    ("x" * 65, names.DATABASE, "is 65 bytes long; a database name has at most 64"),
])
def test_the_rule_itself(name, kind, problem):
    found = names.name_problem(name, kind)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found, found


def test_path_under_refuses_what_leaves_the_root(tmp_path):
    root = tmp_path / "home" / "state"
    root.mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (root / "link").symlink_to(tmp_path / "outside")
    assert names.path_under(root, "power", "s") == root / "power" / "s"
    (root / "self").symlink_to(root)
    for parts in [("..",), ("", ""), ("power", "..", ".."), ("link",), ("link", "x"), ("/etc",), ("self",), ()]:
        with pytest.raises(names.InvalidName):
            names.path_under(root, *parts)
