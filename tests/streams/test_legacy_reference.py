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
