"""ROLLUP BY tag streams end to end (TDengine 3.4.2): windows per rollup group, live and in batch.

Re-expresses TDengine's ``stream_rollup_expand.py`` (subtables at ``A.B.C`` and ``A.B.D`` share the
groups ``A`` and ``A.B``; ``%%trows`` of a group holds the rows of every subtable under its path;
NULL and empty paths make no group; an illegal path fails the stream, SHOW STREAMS says so) and
``stream_rollup_placeholder.py`` (``%%rollup_tag`` is the group's own segment, ``_trollup_tbcount``
its subtables, both usable in the query; ``%%1`` and ``%%rollup_tag`` in OUTPUT_SUBTABLE and TAGS),
with data of our own. Every expected value is worked out by hand below from the rows.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_stream_provider import statements
from airflow_stream_provider.streams import duckdb
from airflow_stream_provider.streams.run import run
from airflow_stream_provider.windows.rollup import RollupPathError
from tests.conftest import sql

pytestmark = pytest.mark.spark

T0 = datetime(2025, 1, 1, tzinfo=UTC)
TEN = timedelta(seconds=10)

SCHEMA = """CREATE DATABASE r; USE r;
CREATE STABLE meters (ts TIMESTAMP, current DOUBLE) TAGS (location NCHAR(64));
CREATE TABLE t1 USING meters TAGS ('A.B.C'); CREATE TABLE t2 USING meters TAGS ('A.B.D');
CREATE TABLE t3 USING meters TAGS ('A.E'); CREATE TABLE t4 USING meters TAGS ('');
CREATE TABLE t5 USING meters TAGS (NULL)"""

# (subtable, second, current); the rows at 25 s close [0, 10) and [10, 20) in every group
ROWS = [("t1", 1, 1), ("t1", 5, 2), ("t1", 12, 4), ("t1", 25, 0.5),
        ("t2", 3, 10), ("t2", 14, 20), ("t2", 25, 0.5),
        ("t3", 7, 100), ("t3", 25, 0.5),
        ("t4", 2, 1000), ("t5", 4, 5000)]  # an empty and a NULL path: no group

STREAM = """CREATE STREAM s INTERVAL(10s) SLIDING(10s) FROM meters ROLLUP BY location {options}
INTO out OUTPUT_SUBTABLE(concat('r_', %%rollup_tag))
TAGS (loc VARCHAR(64) AS %%1, leaf VARCHAR(16) AS %%rollup_tag)
AS SELECT _twstart ws, count(*) n, sum(current) total, %%rollup_tag node, _trollup_tbcount tables FROM %%trows"""

# by hand, per group (path -> its subtables' rows):
#   A.B.C = t1, A.B.D = t2, A.E = t3, A.B = t1 + t2, A = t1 + t2 + t3; t4 and t5 are in none
#   [0, 10):  A.B.C 1 + 2 (2 rows); A.B.D 10; A.E 100; A.B 1 + 2 + 10 (3); A 1 + 2 + 10 + 100 (4)
#   [10, 20): A.B.C 4; A.B.D 20; A.E none (a window of no rows: count 0, sum NULL); A.B 4 + 20; A 4 + 20
# %%rollup_tag is the last segment; _trollup_tbcount the subtables under the path (A: t1, t2, t3)
EXPECTED = {
    ("A", 0): (4, 113.0, "A", 3), ("A", 1): (2, 24.0, "A", 3),
    ("A.B", 0): (3, 13.0, "B", 2), ("A.B", 1): (2, 24.0, "B", 2),
    ("A.B.C", 0): (2, 3.0, "C", 1), ("A.B.C", 1): (1, 4.0, "C", 1),
    ("A.B.D", 0): (1, 10.0, "D", 1), ("A.B.D", 1): (1, 20.0, "D", 1),
    ("A.E", 0): (1, 100.0, "E", 1), ("A.E", 1): (0, None, "E", 1),
}


def insert(wh, rows) -> None:
    values = " ".join(f"{t} VALUES ('{(T0 + timedelta(seconds=s)).strftime('%Y-%m-%d %H:%M:%S')}', {v})"
                      for t, s, v in rows)
    sql(wh, f"INSERT INTO {values}")


def outputs(wh, *, shift: int = 0) -> dict:
    """(path, window number) -> (count, sum, %%rollup_tag, _trollup_tbcount) of the output table;
    ``shift``: the first column is the window's end (a SLIDING instant), not its start."""
    table = sql(wh, "SELECT *, tbname FROM out")[-1].table.to_pylist()
    got = {}
    for row in table:
        window = (row["ws"].astimezone(UTC) - T0) // TEN - shift
        assert row["tbname"] == f"r_{row['leaf'].lower()}" and row["leaf"] == row["node"]
        got[(row["loc"], window)] = (row["n"], row["total"], row["node"], row["tables"])
    return got


@pytest.fixture
def wh(wh):
    sql(wh, SCHEMA)
    return wh


@pytest.mark.parametrize("road", ["aggregates", "duckdb", "spark"])
def test_live_windows_per_rollup_group(wh, road, monkeypatch):
    # the same windows whichever road computes them: aggregates of the rows in the process, DuckDB's
    # SQL (an expression over an aggregate), or Spark's (no local compute)
    if road == "spark":
        monkeypatch.setattr(duckdb, "LOCAL_ROWS", 0)
    text = STREAM.format(options="")
    sql(wh, text if road != "duckdb" else text.replace("sum(current) total", "sum(current) + 0 total"))
    insert(wh, ROWS)
    report = run(wh, "r", "s")
    assert report.written == 10, report
    assert (report.local > 0) == (road != "spark"), report
    assert outputs(wh) == EXPECTED
    # one output subtable per group, tagged with its path and segment
    tags = sql(wh, "SELECT DISTINCT tbname, loc, leaf FROM out")[-1].table.to_pylist()
    assert sorted((t["tbname"], t["loc"], t["leaf"]) for t in tags) == [
        ("r_a", "A", "A"), ("r_b", "A.B", "B"), ("r_c", "A.B.C", "C"), ("r_d", "A.B.D", "D"), ("r_e", "A.E", "E")]


@pytest.mark.parametrize("local", [True, False])
def test_history_and_recalculate_find_the_same_windows(wh, local, monkeypatch):
    if not local:  # batch mode on Spark: the rows expanded there
        monkeypatch.setattr(duckdb, "LOCAL_ROWS", 0)
    insert(wh, ROWS)
    sql(wh, STREAM.format(options="STREAM_OPTIONS(FILL_HISTORY_FIRST)"))
    assert run(wh, "r", "s").written == 10
    assert outputs(wh) == EXPECTED
    sql(wh, "DELETE FROM out")
    list(statements.run(wh, "RECALCULATE STREAM s FROM '2025-01-01 00:00:00' TO '2025-01-01 00:00:20'"))
    assert outputs(wh) == EXPECTED


def test_sliding_instants_per_rollup_group(wh):
    # each group's instants are those its own rows passed: 10 s and 20 s for every group (their latest
    # row is at 25 s); %%trows of an instant holds the group's rows since the previous one, so the
    # values are those of the INTERVAL windows [0, 10) and [10, 20) above
    sql(wh, STREAM.format(options="").replace("INTERVAL(10s) SLIDING(10s)", "SLIDING(10s)")
        .replace("_twstart ws", "_tcurrent_ts ws"))
    insert(wh, ROWS)
    assert run(wh, "r", "s").written == 10
    assert outputs(wh, shift=1) == EXPECTED


def test_a_late_row_recomputes_its_groups_only(wh):
    sql(wh, STREAM.format(options=""))
    insert(wh, ROWS)
    run(wh, "r", "s")
    insert(wh, [("t3", 8, 1000)])  # late, in A.E's [0, 10): A.E and A change, A.B and below do not
    report = run(wh, "r", "s")
    assert report.written == 2, report
    expected = dict(EXPECTED)
    expected[("A.E", 0)] = (2, 1100.0, "E", 1)
    expected[("A", 0)] = (5, 1113.0, "A", 3)
    assert outputs(wh) == expected


def test_an_illegal_path_fails_the_stream(wh):
    sql(wh, "CREATE TABLE bad USING meters TAGS ('A..B')")
    sql(wh, STREAM.format(options=""))  # created all the same, as in TDengine: the run fails
    insert(wh, [("bad", 1, 1.0), ("t1", 1, 1.0)])
    with pytest.raises(RollupPathError, match="the value 'A..B' of subtable bad is not a rollup path"):
        run(wh, "r", "s")
    (row,) = list(statements.run(wh, "SHOW r.STREAMS"))[0].table.to_pylist()
    assert row["status"] == "failed" and "segment 2 is empty" in row["last_error"]


def test_nodelay_create_subtable_makes_every_rollup_group(wh):
    # the subtables' paths A.B.C, A.B.D and A.E make five groups (t4's empty and t5's NULL none)
    (result,) = sql(wh, STREAM.format(options="").replace("INTO out ", "INTO out NODELAY_CREATE_SUBTABLE "))
    assert "5 output subtables created" in result.message
    rows = sql(wh, "SHOW TABLES")[0].table.to_pylist()
    assert sorted(r["table_name"] for r in rows if r["stable_name"] == "out") == ["r_a", "r_b", "r_c", "r_d", "r_e"]
