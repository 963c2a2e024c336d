"""Legacy TDengine streams (3.0 to 3.3.6) against TDengine's own stream tests, on real Spark and Delta.

Each test re-expresses a script of TDengine's legacy suite (``tests/script/tsim/stream/<name>.sim``):
the same tables, statements and rows, and the rows the script expects, checked through the same
statement runner as ``airflow-stream sql`` and the same run as ``airflow-stream run --until-idle``.
Where the script runs with options that were defaults when it was written (``IGNORE EXPIRED 0``,
``IGNORE UPDATE 0``, which the newer copies of the same scripts spell out), the test spells them
out too; the defaults are now ``IGNORE EXPIRED 1`` and ``IGNORE UPDATE 1`` (reference 003).
"""

from __future__ import annotations

import pytest

from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.streams.run import run as run_stream
from tests.conftest import sql

pytestmark = pytest.mark.spark


def rows(wh, query: str) -> list[tuple]:
    """The rows of a query, as tuples of plain values (timestamps dropped from the comparison
    unless selected on purpose)."""
    return [tuple(r.values()) for r in sql(wh, query)[-1].table.to_pylist()]


def step(wh, db: str, text: str, *streams: str) -> None:
    """Run ``text``, then every stream named until it is idle, as TDengine would have by the next check."""
    sql(wh, text)
    for name in streams:
        run_stream(wh, db, name)


def test_basic1_at_once_interval_with_updates(wh):
    """basic1.sim step 1: an AT_ONCE INTERVAL(10s) stream, a late row, rewrites of existing
    timestamps that recompute their window (max and min go down), and duplicates inside one INSERT."""
    sql(wh, """create database test; use test;
               create table t1(ts timestamp, a int, b int , c int, d double);
               create stream streams1 trigger at_once IGNORE EXPIRED 0 IGNORE UPDATE 0 into streamt as
                 select _wstart, count(*) c1, count(d) c2 , sum(a) c3 , max(b) c4, min(c) c5 from t1 interval(10s)""")
    for values in ("(1648791213000,1,2,3,1.0)", "(1648791223001,2,2,3,1.1)", "(1648791233002,3,2,3,2.1)",
                   "(1648791243003,4,2,3,3.1)", "(1648791213004,4,2,3,4.1)"):
        step(wh, "test", f"insert into t1 values{values}", "streams1")
    query = "select `_wstart`, c1, c2, c3, c4, c5 from streamt order by `_wstart`"
    assert [r[1:] for r in rows(wh, query)] == [(2, 2, 5, 2, 3), (1, 1, 2, 2, 3), (1, 1, 3, 2, 3), (1, 1, 4, 2, 3)]
    step(wh, "test", "insert into t1 values(1648791223001,12,14,13,11.1)", "streams1")
    assert rows(wh, query)[1][1:] == (1, 1, 12, 14, 13)
    step(wh, "test", "insert into t1 values(1648791223002,12,14,13,11.1)", "streams1")
    assert rows(wh, query)[1][1:] == (2, 2, 24, 14, 13)
    step(wh, "test", "insert into t1 values(1648791223003,12,14,13,11.1)", "streams1")
    assert rows(wh, query)[1][1:] == (3, 3, 36, 14, 13)
    step(wh, "test", """insert into t1 values(1648791223001,1,1,1,1.1);
                        insert into t1 values(1648791223002,2,2,2,2.1);
                        insert into t1 values(1648791223003,3,3,3,3.1)""", "streams1")
    assert rows(wh, query)[1][1:] == (3, 3, 6, 3, 1)
    step(wh, "test", """insert into t1 values(1648791233003,3,2,3,2.1);
                        insert into t1 values(1648791233002,5,6,7,8.1);
                        insert into t1 values(1648791233002,3,2,3,2.1)""", "streams1")
    assert rows(wh, query)[2][1:] == (2, 2, 6, 2, 3)
    step(wh, "test", "insert into t1 values(1648791213004,4,2,3,4.1) (1648791213006,5,4,7,9.1) "
                     "(1648791213004,40,20,30,40.1) (1648791213005,4,2,3,4.1)", "streams1")
    assert rows(wh, query)[0][1:] == (4, 4, 50, 20, 3)
    step(wh, "test", "insert into t1 values(1648791223004,4,2,3,4.1) (1648791233006,5,4,7,9.1) "
                     "(1648791223004,40,20,30,40.1) (1648791233005,4,2,3,4.1)", "streams1")
    found = rows(wh, query)
    assert found[1][1:] == (4, 4, 46, 20, 1) and found[2][1:] == (4, 4, 15, 4, 3)


def test_basic1_partition_by_tbname_rewrites_do_not_add_rows(wh):
    """basic1.sim step 2: PARTITION BY tbname on a supertable, one row per table and window;
    rewriting a row updates its table's window."""
    sql(wh, """create database test2; use test2;
               create stable st(ts timestamp, a int, b int, c int, d double) tags(ta int,tb int,tc int);
               create table t1 using st tags(1,1,1); create table t2 using st tags(2,2,2);
               create table t3 using st tags(2,2,2); create table t4 using st tags(2,2,2);
               create table t5 using st tags(2,2,2);
               create stream streams2 trigger at_once IGNORE EXPIRED 0 IGNORE UPDATE 0 into streamt as
                 select _wstart, count(*) c1, sum(a) c3, max(b) c4 from st partition by tbname interval(10s)""")
    step(wh, "test2", "insert into t1 values(1648791213000,1,1,1,1.0) t2 values(1648791213000,2,2,2,2.0) "
                      "t3 values(1648791213000,3,3,3,3.0) t4 values(1648791213000,4,4,4,4.0)", "streams2")
    assert len(rows(wh, "select * from streamt")) == 4
    step(wh, "test2", "insert into t1 values(1648791213000,5,5,5,5.0) t2 values(1648791213000,6,6,6,6.0) "
                      "t5 values(1648791213000,7,7,7,7.0)", "streams2")
    found = rows(wh, "select c1, c3 from streamt order by c4 desc")
    assert len(found) == 5 and found[:3] == [(1, 7), (1, 6), (1, 5)]
    step(wh, "test2", "insert into t1 values(1648791213000,8,8,8,8.0)", "streams2")
    assert rows(wh, "select c1, c3 from streamt order by c4 desc")[0] == (1, 8)


def test_basic1_where_filter_and_updates_moving_rows_in_and_out(wh):
    """basic1.sim step 4: a window whose only row stops passing WHERE after an update is removed."""
    sql(wh, """create database test4; use test4;
               create table t1(ts timestamp, a int, b int , c int, d double);
               create stream streams4 trigger at_once IGNORE EXPIRED 0 IGNORE UPDATE 0 into streamt4 as
                 select _wstart, count(*) c1 from t1 where a > 5 interval(10s)""")
    query = "select c1 from streamt4 order by `_wstart`"
    step(wh, "test4", "insert into t1 values(1648791213000,1,2,3,1.0)", "streams4")
    assert rows(wh, query) == []
    step(wh, "test4", "insert into t1 values(1648791213000,6,2,3,1.0)", "streams4")
    assert rows(wh, query) == [(1,)]
    step(wh, "test4", "insert into t1 values(1648791213000,2,2,3,1.0)", "streams4")
    assert rows(wh, query) == []
    step(wh, "test4", """insert into t1 values(1648791223000,2,2,3,1.0);
                         insert into t1 values(1648791223000,10,2,3,1.0);
                         insert into t1 values(1648791233000,10,2,3,1.0)""", "streams4")
    assert len(rows(wh, query)) == 2
    step(wh, "test4", "insert into t1 values(1648791233000,2,2,3,1.0)", "streams4")
    assert len(rows(wh, query)) == 1


def test_basic1_window_start_need_not_come_first_but_is_named_once(wh):
    """basic1.sim step 5: the window start is put first when the select list does not start with
    it; selecting it twice under one name is an error."""
    sql(wh, """create database test5; use test5;
               create stable st(ts timestamp, a int, b int , c int) tags(ta int,tb int,tc int);
               create table ts1 using st tags(1,1,1);
               create stream streams5 trigger at_once into streamt5 as
                 select count(*), _wstart, _wend, max(a) from ts1 interval(10s);
               create stream streams6 trigger at_once into streamt6 as
                 select count(*), _wstart, _wend, max(a), _wstart as ts from ts1 interval(10s)""")
    for bad in ("select _wstart, count(*), _wstart, _wend, max(a) from ts1 interval(10s)",
                "select count(*), _wstart, _wstart, _wend, max(a) from ts1 interval(10s)",
                "select _wstart as ts, count(*), _wstart as ts, _wend, max(a) from ts1 interval(10s)"):
        with pytest.raises(StreamDefinitionError, match="twice"):
            sql(wh, f"create stream streams7 trigger at_once into streamt7 as {bad}")
    step(wh, "test5", "insert into ts1 values(1648791211000,1,2,3)", "streams5", "streams6")
    assert len(rows(wh, "select * from streamt5")) == 1
    assert len(rows(wh, "select * from streamt6")) == 1


@pytest.mark.parametrize("window, step_checks", [
    # ignoreCheckUpdate.sim steps 1 to 3: a timestamp written twice counts 2, three times 3
    ("interval(10s)", [(2, 2), (3, 3)]),
    ("session(ts, 10s)", [(2, 2), (3, 3)]),
    ("state_window(c)", [(2, 2), (3, 3)]),
])
def test_ignore_check_update_counts_rewrites_as_rows(wh, window, step_checks):
    """ignoreCheckUpdate.sim: with IGNORE UPDATE 1, each rewrite of a timestamp is one more row."""
    state = window.startswith("state")
    sql(wh, f"""create database test; use test;
                create table t1(ts timestamp, a int, b int , c int);
                create stream streams0 trigger at_once IGNORE EXPIRED 0 ignore update 1 into streamt as
                  select _wstart c1, count(*) c2, max(b) c3 from t1 {window}""")
    c = (1, 1, 1) if state else (1, 2, 3)
    step(wh, "test", f"insert into t1 values(1648791213000,1,1,{c[0]}); "
                     f"insert into t1 values(1648791213000,2,2,{c[1]})", "streams0")
    assert rows(wh, "select c2, c3 from streamt") == [step_checks[0]]
    step(wh, "test", f"insert into t1 values(1648791213000,3,3,{c[2]})", "streams0")
    assert rows(wh, "select c2, c3 from streamt") == [step_checks[1]]


def test_ignore_check_update_on_a_supertable(wh):
    """ignoreCheckUpdate.sim step 4: rewrites in two subtables of one group all count."""
    sql(wh, """create database test3; use test3;
               create stable st(ts timestamp,a int,b int,c int) tags(ta int,tb int,tc int);
               create table t1 using st tags(1,1,1); create table t2 using st tags(2,2,2);
               create stream streams3 trigger at_once ignore update 1 into streamt3 as
                 select _wstart c1, count(*) c2, max(b) c3 from st interval(10s)""")
    step(wh, "test3", """insert into t1 values(1648791213000,1,1,1); insert into t1 values(1648791213000,2,2,2);
                         insert into t2 values(1648791213000,1,1,1); insert into t2 values(1648791213000,2,2,2)""",
         "streams3")
    assert rows(wh, "select c2, c3 from streamt3") == [(4, 2)]
    step(wh, "test3", "insert into t1 values(1648791213000,3,3,3)", "streams3")
    assert rows(wh, "select c2, c3 from streamt3") == [(5, 3)]
    step(wh, "test3", "insert into t2 values(1648791213000,4,4,4)", "streams3")
    assert rows(wh, "select c2, c3 from streamt3") == [(6, 4)]


def test_ignore_expired_data_drops_late_rows_into_closed_windows(wh):
    """ignoreExpiredData.sim step 1: with IGNORE EXPIRED 1 a row into a closed window is dropped."""
    sql(wh, """create database test; use test;
               create table t1(ts timestamp, a int, b int , c int, d double);
               create stream streams1 trigger at_once IGNORE EXPIRED 1 into streamt1 as
                 select _wstart, count(*) c1, sum(a) c3 from t1 interval(10s);
               create stream streams2 trigger at_once IGNORE EXPIRED 1 into streamt2 as
                 select _wstart, count(*) c1, sum(a) c3 from t1 session(ts,10s);
               create stream streams3 trigger at_once IGNORE EXPIRED 1 into streamt3 as
                 select _wstart, count(*) c1, sum(a) c3 from t1 state_window(a)""")
    names = ("streams1", "streams2", "streams3")
    step(wh, "test", """insert into t1 values(1648791213000,1,2,3,1.0); insert into t1 values(1648791223001,1,2,3,1.1);
                        insert into t1 values(1648791233002,2,2,3,2.1); insert into t1 values(1648791243003,2,2,3,3.1)""",
         *names)
    step(wh, "test", "insert into t1 values(1648791200000,4,2,3,4.1)", *names)
    assert [len(rows(wh, f"select * from streamt{i}")) for i in (1, 2, 3)] == [4, 4, 2]


def test_ignore_expired_data_on_a_supertable(wh):
    """ignoreExpiredData.sim step 2: a row of another subtable that is late for the group but
    not newer than its own table's latest row is dropped."""
    sql(wh, """create database test1; use test1;
               create stable st(ts timestamp,a int,b int,c int) tags(ta int,tb int,tc int);
               create table ts1 using st tags(1,1,1); create table ts2 using st tags(2,2,2);
               create stream stream_t1 trigger at_once IGNORE EXPIRED 1 into streamtST1 as
                 select _wstart, count(*) c1, count(a) c2 , sum(a) c3 , max(b) c5, min(c) c6 from st interval(10s);
               create stream stream_t2 trigger at_once IGNORE EXPIRED 1 into streamtST2 as
                 select _wstart, count(*) c1, count(a) c2 , sum(a) c3 , max(b) c5, min(c) c6 from st session(ts, 10s)""")
    for values in ("ts1 values(1648791211000,1,2,3)", "ts1 values(1648791222001,2,2,3)",
                   "ts2 values(1648791222001,2,2,3)", "ts2 values(1648791211000,1,2,3)"):
        step(wh, "test1", f"insert into {values}", "stream_t1", "stream_t2")
    order = " order by `_wstart`"
    assert rows(wh, "select c1, c2 from streamtST1" + order) == [(1, 1), (2, 2)]
    assert rows(wh, "select c1, c2 from streamtST2" + order) == [(1, 1), (2, 2)]


def test_ignore_expired_data_is_judged_per_source_table(wh):
    """ignoreExpiredData.sim step 3: rows are expired by their own table's latest row, so a table's
    first rows are never expired however late they are for the group."""
    sql(wh, """create database test2; use test2;
               create stable st(ts timestamp,a int,b int,c int) tags(ta int,tb int,tc int);
               create table ts1 using st tags(1,1,1); create table ts2 using st tags(2,2,2);
               create table ts3 using st tags(3,3,3); create table ts4 using st tags(4,4,4);
               create stream streams_21 trigger at_once IGNORE EXPIRED 1 into streamt_21 as
                 select _wstart, count(*) c1 from st interval(10s)""")

    def insert(table: str, *stamps: int) -> str:
        return ";".join(f"insert into {table} values({ts},2,2,3)" for ts in stamps)

    step(wh, "test2", insert("ts1", *range(1648791211000, 1648791211005)), "streams_21")
    step(wh, "test2", insert("ts2", *range(1648791201000, 1648791201005)), "streams_21")
    step(wh, "test2", insert("ts2", *range(1648791101000, 1648791101005)), "streams_21")
    query = "select c1 from streamt_21 order by `_wstart`"
    assert rows(wh, query) == [(5,), (5,)]
    step(wh, "test2", insert("ts3", 1648791241000), "streams_21")
    step(wh, "test2", insert("ts3", *range(1648791231001, 1648791231005)), "streams_21")
    assert rows(wh, query) == [(5,), (5,), (1,)]
    step(wh, "test2", insert("ts4", *range(1648791231001, 1648791231005)), "streams_21")
    step(wh, "test2", insert("ts4", *range(1648791211001, 1648791211005)), "streams_21")
    assert rows(wh, query) == [(5,), (5,), (4,), (1,)]


def test_delete_interval_recomputes_and_removes_emptied_windows(wh):
    """deleteInterval.sim step 1: deleting a window's only row removes its result; a delete across
    windows recomputes each."""
    sql(wh, """create database test; use test;
               create table t1(ts timestamp, a int, b int , c int, d double);
               create stream streams0 trigger at_once IGNORE EXPIRED 0 IGNORE UPDATE 0 into streamt as
                 select _wstart c1, count(*) c2, max(a) c3 from t1 interval(10s)""")
    query = "select c2, c3 from streamt order by c1, c2, c3"
    step(wh, "test", "insert into t1 values(1648791213000,NULL,NULL,NULL,NULL)", "streams0")
    step(wh, "test", "delete from t1 where ts = 1648791213000", "streams0")
    assert rows(wh, query) == []
    step(wh, "test", "insert into t1 values(1648791213000,NULL,NULL,NULL,NULL)", "streams0")
    assert rows(wh, query) == [(1, None)]
    step(wh, "test", """insert into t1 values(1648791213000,1,1,1,1.0); insert into t1 values(1648791213001,2,2,2,2.0);
                        insert into t1 values(1648791213002,3,3,3,3.0); insert into t1 values(1648791213003,4,4,4,4.0)""",
         "streams0")
    step(wh, "test", "delete from t1 where ts >= 1648791213001 and ts <= 1648791213002", "streams0")
    assert rows(wh, query) == [(2, 4)]
    step(wh, "test", """insert into t1 values(1648791223000,1,2,3,1.0); insert into t1 values(1648791223001,1,2,3,1.0);
                        insert into t1 values(1648791223002,3,2,3,1.0); insert into t1 values(1648791223003,3,2,3,1.0)""",
         "streams0")
    assert len(rows(wh, query)) == 2
    step(wh, "test", "delete from t1 where ts >= 1648791223000 and ts <= 1648791223003", "streams0")
    assert rows(wh, query) == [(2, 4)]
    step(wh, "test", """insert into t1 values(1648791213000,1,1,1,1.0); insert into t1 values(1648791213005,2,2,2,2.0);
                        insert into t1 values(1648791213006,3,3,3,3.0); insert into t1 values(1648791213007,4,4,4,4.0);
                        insert into t1 values(1648791223000,1,1,1,1.0); insert into t1 values(1648791223001,2,2,2,2.0);
                        insert into t1 values(1648791223002,3,3,3,3.0); insert into t1 values(1648791223003,4,4,4,4.0);
                        insert into t1 values(1648791233000,1,1,1,1.0); insert into t1 values(1648791233001,2,2,2,2.0);
                        insert into t1 values(1648791233008,3,3,3,3.0); insert into t1 values(1648791233009,4,4,4,4.0);
                        delete from t1 where ts >= 1648791213001 and ts <= 1648791233005""", "streams0")
    assert rows(wh, query) == [(1, 1), (2, 4)]
