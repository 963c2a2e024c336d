"""Nested windows (TDengine 3.4.2, ``WINDOW(<trigger> AS w_outer, <leaf>)``) run as streams end to end:
CREATE STREAM, the live detector's runs, the outer layer's placeholders in the query, the output
table, a late row's recalculation, notifications, and the live results against the batch ones
(verify). TDengine's scenarios of test_nested_window.py with our own rows; the expected rows are
worked out by hand beside each case."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from airflow_stream_provider.streams import duckdb
from airflow_stream_provider.streams.run import run as run_stream
from airflow_stream_provider.streams.run_request import RunRequest
from airflow_stream_provider.streams.verify import verify
from tests.conftest import sql

pytestmark = pytest.mark.spark


def at(text: str) -> datetime:
    return datetime.fromisoformat(f"2025-03-01 {text}").replace(tzinfo=UTC)


def rows_of(wh, query: str) -> list[tuple]:
    return [tuple(r.values()) for r in sql(wh, query)[-1].table.to_pylist()]


def run(wh, name: str) -> int:
    return run_stream(wh, "d", name, RunRequest.everything()).triggers


SCOPES = """CREATE DATABASE d; USE d;
            CREATE TABLE src (ts TIMESTAMP, scope VARCHAR(8), v INT);"""


def test_flush_on_outer_close_closes_the_short_leaves_with_their_outer_window(wh):
    sql(wh, SCOPES + """
        CREATE STREAM s_flush WINDOW(STATE_WINDOW(scope) EXTEND(1) AS w_scope, COUNT_WINDOW(3, 1)) FROM src
            STREAM_OPTIONS(EVENT_TYPE(WINDOW_CLOSE) | FLUSH_ON_OUTER_CLOSE) INTO r_flush AS
            SELECT _twstart AS ts, count(*) AS members, sum(v) AS total, w_scope._twstart AS outer_start,
                   w_scope._twrownum AS outer_rows, w_scope._twduration AS outer_ms FROM %%trows;
        CREATE STREAM s_default WINDOW(STATE_WINDOW(scope) EXTEND(1) AS w_scope, COUNT_WINDOW(3, 1)) FROM src
            INTO r_default AS SELECT _twstart AS ts, count(*) AS members FROM %%trows""")
    sql(wh, "INSERT INTO src VALUES ('2025-03-01 00:00:00', 'A', 1) ('2025-03-01 00:00:01', 'A', 2) "
            "('2025-03-01 00:00:02', 'B', 3)")
    # scope A holds 0 s and 1 s and closes when B begins (EXTEND(1): its end is the instant before 2 s);
    # its count windows from 0 s ([1, 2]) and from 1 s ([2]) are short of 3 rows: with FLUSH_ON_OUTER_CLOSE
    # they close with A, without it they are dropped; B's window from 2 s is open
    assert run(wh, "s_flush") == 2
    assert run(wh, "s_default") == 0
    assert rows_of(wh, "SELECT ts, members, total, outer_start, outer_rows, outer_ms FROM r_flush ORDER BY ts") == [
        (at("00:00:00"), 2, 3, at("00:00:00"), 2, 1999), (at("00:00:01"), 1, 2, at("00:00:00"), 2, 1999)]
    # B, then C: B (rows 2 s and 3 s) closes with its two short leaves
    sql(wh, "INSERT INTO src VALUES ('2025-03-01 00:00:03', 'B', 4) ('2025-03-01 00:00:04', 'C', 5)")
    assert run(wh, "s_flush") == 2
    assert rows_of(wh, "SELECT ts, members, total, outer_start, outer_rows FROM r_flush "
                       "WHERE ts >= '2025-03-01 00:00:02' ORDER BY ts") == [
        (at("00:00:02"), 2, 7, at("00:00:02"), 2), (at("00:00:03"), 1, 4, at("00:00:02"), 2)]
    verify(wh, "d", "s_flush")  # the live results equal the batch ones


def test_a_leaf_never_crosses_its_outer_window_and_a_late_row_recomputes_it(wh, monkeypatch):
    # (the test above computes in the process, by DuckDB; here no window's rows are few enough: Spark)
    monkeypatch.setattr(duckdb, "LOCAL_ROWS", 0)
    sql(wh, """CREATE DATABASE d; USE d;
        CREATE TABLE src (ts TIMESTAMP, st INT, v INT);
        CREATE STREAM s WINDOW(INTERVAL(1m) SLIDING(1m) AS w_min, STATE_WINDOW(st)) FROM src
            STREAM_OPTIONS(FLUSH_ON_OUTER_CLOSE) INTO r AS
            SELECT _twstart AS ts, _twend AS leaf_end, count(*) AS n, sum(v) AS total,
                   w_min._twstart AS minute, w_min._twend AS minute_end FROM %%trows""")
    sql(wh, "INSERT INTO src VALUES ('2025-03-01 00:00:50', 1, 1) ('2025-03-01 00:00:55', 1, 2) "
            "('2025-03-01 00:01:05', 1, 4) ('2025-03-01 00:01:10', 2, 8)")
    # st = 1 holds from 50 s to 65 s, but the minute [0, 60 s) cuts it at 55 s: the leaf 50-55 s closes
    # with its minute (closed: the group is at 70 s); in the next minute st = 1 at 65 s closes at 70 s
    assert run(wh, "s") == 2
    expected = [(at("00:00:50"), at("00:00:55"), 2, 3, at("00:00:00"), at("00:01:00")),
                (at("00:01:05"), at("00:01:05"), 1, 4, at("00:01:00"), at("00:02:00"))]
    assert rows_of(wh, "SELECT * FROM r ORDER BY ts") == expected
    # a late row in the closed minute, st = 1 at 52 s, v 16: its leaf is recomputed, 3 rows, total 19
    sql(wh, "INSERT INTO src VALUES ('2025-03-01 00:00:52', 1, 16)")
    assert run(wh, "s") == 1
    expected[0] = (at("00:00:50"), at("00:00:55"), 3, 19, at("00:00:00"), at("00:01:00"))
    assert rows_of(wh, "SELECT * FROM r ORDER BY ts") == expected
    verify(wh, "d", "s")
    # RECALCULATE finds the leaf windows of the range in batch and writes them again: the same two
    sql(wh, "DELETE FROM r WHERE ts < '2025-03-01 00:02:00'")
    assert rows_of(wh, "SELECT * FROM r") == []
    sql(wh, "RECALCULATE STREAM d.s FROM '2025-03-01 00:00:00' TO '2025-03-01 00:02:00'")
    assert rows_of(wh, "SELECT * FROM r ORDER BY ts") == expected
