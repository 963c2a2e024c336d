"""Legacy TDengine streams (3.0 to 3.3.6) run as the reference documents' own examples describe
(001, 003, ``../shared/reference/legacy-semantics.md``), on real Spark and Delta, through the same
statement runner as ``airflow-stream sql`` and the same run as ``airflow-stream run --until-idle``."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from airflow_stream_provider.streams.run import run as run_stream
from tests.conftest import sql

pytestmark = pytest.mark.spark


def rows(wh, query: str) -> list[tuple]:
    return [tuple(r.values()) for r in sql(wh, query)[-1].table.to_pylist()]


def test_fill_history_where_the_timestamp_is_compared_with_a_date_string(wh):
    """Reference 001, "Stream Computation Processing Historical Data": ``where ts > '2020-01-30'``
    keeps only the rows after that moment. Of the rows, the one of 2020-01-29 is before it, the two of
    2020-01-31 00:00:01 and :05 fall in the 10 s window starting 2020-01-31 00:00:00, which the row at
    :10 closes (WINDOW_CLOSE, the default trigger: latest event time >= the window's end); the
    window of that row stays open."""
    sql(wh, """create database power; use power;
               create table t2 (ts timestamp, v int);
               insert into t2 values ('2020-01-29 00:00:00', 1) ('2020-01-31 00:00:01', 2) ('2020-01-31 00:00:05', 3)
                 ('2020-01-31 00:00:10', 4);
               create stream if not exists count_history_s fill_history 1 into count_history as
                 select _wstart ws, count(*) cnt from t2 where ts > '2020-01-30' interval(10s)""")
    run_stream(wh, "power", "count_history_s")
    assert rows(wh, "select ws, cnt from count_history") == [(datetime(2020, 1, 31, tzinfo=UTC), 2)]


def test_max_delay_writes_the_open_window_when_run_after_the_delay(wh):
    """Reference 003, MAX_DELAY: a window that has not closed is computed once the time since the
    write exceeds the delay. The row at ...223.001 closes [...210, ...220) (sum 1) and opens
    [...220, ...230); a run more than 5 s after the write writes that open window too (sum 2)."""
    sql(wh, """create database md; use md;
               create table t1 (ts timestamp, a int);
               create stream s1 trigger max_delay 5s into out1 as
                 select _wstart, sum(a) s from t1 interval(10s);
               insert into t1 values (1648791213000, 1) (1648791223001, 2)""")
    time.sleep(6)
    run_stream(wh, "md", "s1")
    found = rows(wh, "select `_wstart`, s from out1 order by `_wstart`")
    assert [(int(start.timestamp() * 1000), s) for start, s in found] == [(1648791210000, 1), (1648791220000, 2)]


def test_max_delay_writes_the_open_window_at_a_later_run_without_new_rows(wh):
    """Reference 003, MAX_DELAY, with the runs of a task that runs the stream every few seconds
    (no node): the first run, right after the write, finds the window [...220, ...230) open and
    not yet due; a run after the delay (15 s), with no new row, writes it (sum 2)."""
    sql(wh, """create database md2; use md2;
               create table t1 (ts timestamp, a int);
               create stream s1 trigger max_delay 15s into out1 as
                 select _wstart, sum(a) s from t1 interval(10s);
               insert into t1 values (1648791213000, 1) (1648791223001, 2)""")
    written = time.time()
    run_stream(wh, "md2", "s1")
    assert time.time() - written < 15, "the first run must end before the delay"
    found = rows(wh, "select `_wstart`, s from out1 order by `_wstart`")
    assert [(int(start.timestamp() * 1000), s) for start, s in found] == [(1648791210000, 1)]
    time.sleep(max(0.0, written + 16 - time.time()))
    run_stream(wh, "md2", "s1")
    found = rows(wh, "select `_wstart`, s from out1 order by `_wstart`")
    assert [(int(start.timestamp() * 1000), s) for start, s in found] == [(1648791210000, 1), (1648791220000, 2)]


def test_force_window_close_with_fill_writes_each_group_s_windows_after_their_end(wh):
    """tsim ``streamFwcIntervalFill.sim``, step 1: FORCE_WINDOW_CLOSE with FILL(VALUE, ...) over a
    supertable partitioned by tbname and a tag. The rows are written 3 to 5.3 s ahead of the clock;
    once the wall clock has passed their windows and one more, a run with no node writes each
    group's windows: the first two of each group hold what the batch query over its subtable gives
    (the script's own oracle), and the windows without rows, up to the clock, are filled with the
    FILL values, so the output holds at least 6 rows."""
    sql(wh, """create database fwc; use fwc;
               create stable st (ts timestamp, a int, b int, c int) tags (ta int, tb int, tc int);
               create table t1 using st tags (1, 1, 1);
               create table t2 using st tags (2, 2, 2);
               create stream streams1 trigger force_window_close ignore expired 1 ignore update 1 into streamt as
                 select _wstart, count(a) as ca, ta, sum(b) as cb from st partition by tbname, ta
                 interval(2s) fill(value, 100, 200)""")
    now = int(time.time() * 1000)
    offsets = (3000, 3100, 3200, 5100, 5200, 5300)
    values = {"t1": ((1, 1), (5, 10), (5, 10), (20, 1), (30, 10), (40, 10)),
              "t2": ((1, 1), (2, 10), (30, 10), (10, 1), (40, 10), (7, 10))}
    for table, pairs in values.items():
        listed = " ".join(f"({now + dt}, {a}, {b}, {b})" for dt, (a, b) in zip(offsets, pairs, strict=True))
        sql(wh, f"insert into {table} values {listed}")
    # the last row's window ends by now + 7.3 s, the one after it by now + 9.3 s
    time.sleep(max(0.0, (now + 10_500) / 1000 - time.time()))
    run_stream(wh, "fwc", "streams1")
    written = 0
    for table, tag in (("t1", 1), ("t2", 2)):
        batch = rows(wh, f"select _wstart, count(a), sum(b) from {table} interval(2s)")
        out = rows(wh, f"select `_wstart`, ca, cb from streamt where ta = {tag} order by `_wstart`")
        assert len(batch) >= 2 and len(out) >= 3, (batch, out)
        assert out[:2] == batch[:2]
        with_rows = {start for start, _, _ in batch}
        assert [(ca, cb) for start, ca, cb in out if start not in with_rows] and \
            all((ca, cb) == (100, 200) for start, ca, cb in out if start not in with_rows)
        written += len(out)
    assert written >= 6
