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

from airflow_stream_provider.exceptions import StreamDefinitionError, StreamError
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
                        insert into t1 values(1648791233002,2,2,3,2.1);
                        insert into t1 values(1648791243003,2,2,3,3.1)""",
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
                 select _wstart, count(*) c1, count(a) c2 , sum(a) c3 , max(b) c5, min(c) c6
                 from st session(ts, 10s)""")
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
                        insert into t1 values(1648791213002,3,3,3,3.0);
                        insert into t1 values(1648791213003,4,4,4,4.0)""",
         "streams0")
    step(wh, "test", "delete from t1 where ts >= 1648791213001 and ts <= 1648791213002", "streams0")
    assert rows(wh, query) == [(2, 4)]
    step(wh, "test", """insert into t1 values(1648791223000,1,2,3,1.0); insert into t1 values(1648791223001,1,2,3,1.0);
                        insert into t1 values(1648791223002,3,2,3,1.0);
                        insert into t1 values(1648791223003,3,2,3,1.0)""",
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


def test_delete_interval_on_a_supertable_into_another_database(wh):
    """deleteInterval.sim step 2: a supertable without PARTITION BY, the output in another database."""
    sql(wh, """create database test2; create database test; use test2;
               create stable st(ts timestamp, a int, b int, c int, d double) tags(ta int,tb int,tc int);
               create table t1 using st tags(1,1,1); create table t2 using st tags(2,2,2);
               create stream streams2 trigger at_once IGNORE EXPIRED 0 IGNORE UPDATE 0 into test.streamt2 as
                 select _wstart c1, count(*) c2, max(a) c3 from st interval(10s)""")
    query = "select c2, c3 from test.streamt2 order by c1, c2, c3"
    step(wh, "test2", "insert into t1 values(1648791213000,NULL,NULL,NULL,NULL); "
                      "insert into t2 values(1648791213000,NULL,NULL,NULL,NULL)", "streams2")
    assert len(rows(wh, query)) == 1
    step(wh, "test2", "delete from t1 where ts = 1648791213000", "streams2")
    assert rows(wh, query) == [(1, None)]
    inserts = ";".join(f"insert into {t} values({ts},{a},2,3,1.0)" for t in ("t1", "t2")
                       for ts, a in ((1648791223000, 1), (1648791223001, 1), (1648791223002, 3), (1648791223003, 3)))
    step(wh, "test2", inserts + "; delete from t2 where ts >= 1648791223000 and ts <= 1648791223001", "streams2")
    assert rows(wh, query) == [(1, None), (6, 3)]
    step(wh, "test2", "delete from st where ts >= 1648791223000 and ts <= 1648791223003", "streams2")
    assert rows(wh, query) == [(1, None)]
    inserts = ";".join(f"insert into {t} values({ts},{a},2,3,1.0)" for t in ("t1", "t2")
                       for ts, a in ((1648791213004, 3), (1648791213005, 3), (1648791213006, 3), (1648791223004, 1)))
    step(wh, "test2", inserts + "; delete from t2 where ts >= 1648791213004 and ts <= 1648791213006", "streams2")
    assert rows(wh, query) == [(4, 3), (2, 1)]
    inserts = ";".join(f"insert into {t} values({ts},{a},2,3,1.0)" for t, ts, a in (
        ("t1", 1648791223005, 1), ("t1", 1648791223006, 1), ("t2", 1648791223005, 1), ("t2", 1648791223006, 1),
        ("t1", 1648791233005, 4), ("t1", 1648791233006, 2), ("t2", 1648791233005, 5), ("t2", 1648791233006, 3)))
    step(wh, "test2", inserts + "; delete from st where ts >= 1648791213001 and ts <= 1648791233005", "streams2")
    assert rows(wh, query) == [(1, None), (2, 3)]


def test_delete_whole_tables_of_a_supertable(wh):
    """deleteInterval.sim step 3: deleting every row of one subtable, then of the supertable."""
    sql(wh, """create database test3; create database test; use test3;
               create stable st(ts timestamp, a int, b int, c int, d double) tags(ta int,tb int,tc int);
               create table t1 using st tags(1,1,1); create table t2 using st tags(2,2,2);
               create stream streams3 trigger at_once IGNORE EXPIRED 0 IGNORE UPDATE 0 into test.streamt3 as
                 select _wstart c1, count(*) c2, max(a) c3 from st interval(10s)""")
    step(wh, "test3", "insert into t1 values(1648791213000,NULL,NULL,NULL,NULL); "
                      "insert into t2 values(1648791213000,NULL,NULL,NULL,NULL); delete from t1", "streams3")
    assert len(rows(wh, "select * from test.streamt3")) == 1
    step(wh, "test3", "delete from t1 where ts > 100", "streams3")
    assert len(rows(wh, "select * from test.streamt3")) == 1
    step(wh, "test3", "delete from st", "streams3")
    assert rows(wh, "select * from test.streamt3") == []


def test_session0_nulls_and_a_bridging_row_merging_sessions(wh):
    """session0.sim steps 1 and 2: NULL rows count in count(*) only; rows and updates that bridge
    the gap merge two sessions into one, whose old result goes."""
    sql(wh, """create database test; use test;
               create table t1(ts timestamp, a int, b int , c int, d double,id int);
               create stream streams1 trigger at_once IGNORE EXPIRED 0 IGNORE UPDATE 0 into streamt as
                 select _wstart, count(*) c1, sum(a), max(a), min(d), stddev(a), last(a), first(d), max(id) s
                 from t1 session(ts,10s)""")
    step(wh, "test", """insert into t1 values(1648791213000,NULL,NULL,NULL,NULL,1);
                        insert into t1 values(1648791223001,10,2,3,1.1,2);
                        insert into t1 values(1648791233002,3,2,3,2.1,3);
                        insert into t1 values(1648791243003,NULL,NULL,NULL,NULL,4);
                        insert into t1 values(1648791213002,NULL,NULL,NULL,NULL,5)
                                             (1648791233012,NULL,NULL,NULL,NULL,6)""",
         "streams1")
    found = rows(wh, "select c1, sum_a, max_a, min_d, stddev_a, last_a, first_d, s from streamt order by s desc")
    assert found[:2] == [(3, 3, 3, 2.1, 0.0, 3, 2.1, 6), (3, 10, 10, 1.1, 0.0, 10, 1.1, 5)]
    step(wh, "test", """insert into t1 values(1648791213000,1,2,3,1.0,7);
                        insert into t1 values(1648791223001,2,2,3,1.1,8);
                        insert into t1 values(1648791233002,3,2,3,2.1,9);
                        insert into t1 values(1648791243003,4,2,3,3.1,10);
                        insert into t1 values(1648791213002,4,2,3,4.1,11);
                        insert into t1 values(1648791213002,4,2,3,4.1,12) (1648791223009,4,2,3,4.1,13)""", "streams1")
    found = rows(wh, "select c1, sum_a, max_a, min_d, stddev_a, last_a, first_d, s from streamt order by s desc")
    assert len(found) == 1
    c1, total, top, low, dev, last, first, s = found[0]
    assert (c1, total, top, low, last, first, s) == (7, 18, 4, 1.0, 4, 1.0, 13)
    assert dev == pytest.approx(1.154700538, abs=1e-8)


def test_session1_gap_equal_to_the_tolerance_stays_in_the_session(wh):
    """session1.sim steps 1 to 4: rows exactly 10 s apart share a session, 10.001 s do not;
    out-of-order rows and rewrites merge, split and rebuild sessions."""
    sql(wh, """create database test; use test;
               create table t1(ts timestamp, a int, b int , c int, d double,id int);
               create stream streams2 trigger at_once IGNORE EXPIRED 0 IGNORE UPDATE 0 into streamt as
                 select _wstart, count(*) c1, sum(a), min(b), max(id) s from t1 session(ts,10s)""")
    query = "select c1, sum_a, min_b, s from streamt order by s desc"
    step(wh, "test", """insert into t1 values(1648791210000,1,1,1,1.1,1);
                        insert into t1 values(1648791220000,2,2,2,2.1,2);
                        insert into t1 values(1648791230000,3,3,3,3.1,3);
                        insert into t1 values(1648791240000,4,4,4,4.1,4)""",
         "streams2")
    assert rows(wh, query) == [(4, 10, 1, 4)]
    step(wh, "test", """insert into t1 values(1648791250005,5,5,5,5.1,5);
                        insert into t1 values(1648791260006,6,6,6,6.1,6);
                        insert into t1 values(1648791270007,7,7,7,7.1,7);
                        insert into t1 values(1648791240005,5,5,5,5.1,8) (1648791250006,6,6,6,6.1,9)""", "streams2")
    assert rows(wh, query) == [(8, 32, 1, 9), (1, 7, 7, 7)]
    step(wh, "test", """insert into t1 values(1648791280008,7,7,7,7.1,10) (1648791300009,8,8,8,8.1,11);
                        insert into t1 values(1648791260007,7,7,7,7.1,12) (1648791290008,7,7,7,7.1,13)
                                             (1648791290009,8,8,8,8.1,14);
                        insert into t1 values(1648791500000,7,7,7,7.1,15) (1648791520000,8,8,8,8.1,16)
                                             (1648791540000,8,8,8,8.1,17);
                        insert into t1 values(1648791530000,8,8,8,8.1,18);
                        insert into t1 values(1648791220000,10,10,10,10.1,19) (1648791290008,2,2,2,2.1,20)
                                             (1648791540000,17,17,17,17.1,21) (1648791500001,22,22,22,22.1,22)""",
         "streams2")
    assert rows(wh, query)[:4] == [(2, 29, 7, 22), (3, 33, 8, 21), (4, 25, 2, 20), (10, 54, 1, 19)]
    step(wh, "test", "insert into t1 values(1648791000000,1,1,1,1.1,23)", "streams2")
    assert rows(wh, query)[0][0] == 1


def test_state0_splits_and_merges_by_out_of_order_rows_and_updates(wh):
    """state0.sim step 1: a row of another state inserted between rows of one state splits its
    window; updates of the middle rows split and merge windows, each with its exact aggregates."""
    sql(wh, """create database test; use test;
               create table t1(ts timestamp, a int, b int , c int, d double, id int);
               create stream streams1 trigger at_once IGNORE EXPIRED 0 IGNORE UPDATE 0 into streamt1 as
                 select _wstart, count(*) c1, count(d) c2 , sum(a) c3 , max(a) c4, min(c) c5, max(id) c
                 from t1 state_window(a)""")
    columns = "c1, c2, c3, c4, c5, c"
    step(wh, "test", "insert into t1 values(1648791213000,1,2,3,1.0,1); "
                     "insert into t1 values(1648791213000,1,2,3,1.0,2)", "streams1")
    assert len(rows(wh, "select * from streamt1")) == 1
    step(wh, "test", "insert into t1 values(1648791214000,1,2,3,1.0,3)", "streams1")
    assert len(rows(wh, "select * from streamt1")) == 1
    step(wh, "test", """insert into t1 values(1648791213010,2,2,3,1.0,4);
                        insert into t1 values(1648791213000,1,2,3,1.0,5);
                        insert into t1 values(1648791214000,1,2,3,1.0,6)""", "streams1")
    assert rows(wh, f"select {columns} from streamt1 where c >= 4 order by `_wstart`") == [
        (1, 1, 1, 1, 3, 5), (1, 1, 2, 2, 3, 4), (1, 1, 1, 1, 3, 6)]
    step(wh, "test", "insert into t1 values(1648791213011,1,2,3,1.0,7)", "streams1")
    assert rows(wh, f"select {columns} from streamt1 where c in (5,4,7) order by `_wstart`")[2] == (2, 2, 2, 1, 3, 7)
    step(wh, "test", "insert into t1 values(1648791213011,1,2,3,1.0,8)", "streams1")
    assert rows(wh, f"select {columns} from streamt1 where c in (5,4,8) order by `_wstart`")[2][5] == 8
    step(wh, "test", """insert into t1 values(1648791213020,1,2,3,1.0,9);
                        insert into t1 values(1648791213020,3,2,3,1.0,10);
                        insert into t1 values(1648791214000,1,2,3,1.0,11);
                        insert into t1 values(1648791213011,10,20,10,10.0,12)""", "streams1")
    assert rows(wh, f"select {columns} from streamt1 where c in (5,4,10,11,12) order by `_wstart`")[2:] == [
        (1, 1, 10, 10, 10, 12), (1, 1, 3, 3, 3, 10), (1, 1, 1, 1, 3, 11)]
    step(wh, "test", """insert into t1 values(1648791213030,3,12,12,12.0,13);
                        insert into t1 values(1648791214040,1,13,13,13.0,14);
                        insert into t1 values(1648791213030,3,14,14,14.0,15) (1648791214020,15,15,15,15.0,16)""",
         "streams1")
    assert rows(wh, f"select {columns} from streamt1 where c in (14,15,16) order by `_wstart`") == [
        (2, 2, 6, 3, 3, 15), (1, 1, 15, 15, 15, 16), (1, 1, 1, 1, 13, 14)]


def test_state0_update_of_a_value_in_the_second_window(wh):
    """state0.sim step 2."""
    sql(wh, """create database test1; use test1;
               create table t1(ts timestamp, a int, b int , c int, d double, id int);
               create stream streams2 trigger at_once IGNORE EXPIRED 0 IGNORE UPDATE 0 into streamt1 as
                 select _wstart, count(*) c1, count(d) c2 , sum(a) c3 , max(a) c4, min(c) c5, max(id) c
                 from t1 state_window(a)""")
    step(wh, "test1", """insert into t1 values(1648791212000,2,2,3,1.0,1);
                         insert into t1 values(1648791213000,1,2,3,1.0,1);
                         insert into t1 values(1648791213000,1,2,4,1.0,2)""", "streams2")
    assert rows(wh, "select c1, c5 from streamt1 order by c desc") == [(1, 4), (1, 3)]


def test_state0_window_close_with_deletes_and_a_split_open_window(wh):
    """state0.sim step 4: WINDOW_CLOSE writes a state window once another state closes it; deletes
    in a closed window recompute it; an update in the open window splits it into closed pieces."""
    sql(wh, """create database test4 precision 'ms'; use test4;
               create table st (ts timestamp, c1 tinyint, c2 smallint) tags (t1 tinyint);
               create table t1 using st tags (-81); create table t2 using st tags (-81);
               create stream if not exists streams4 trigger window_close IGNORE EXPIRED 0 IGNORE UPDATE 0 into streamt4
                 as select _wstart AS startts, min(c1),count(c1) from t1 state_window(c1)""")
    query = "select min_c1, count_c1 from streamt4 order by startts"
    step(wh, "test4", ";".join(f"insert into t1 (ts, c1) values ({1668073288209 + i}, {29 if i == 6 else 11})"
                               for i in range(7)), "streams4")
    assert rows(wh, query) == [(11, 6)]
    deletes = []
    for i in range(5):
        deletes.append(f"delete from t1 where ts = cast({1668073288214 + i} as timestamp)")
        deletes.append(f"insert into t1 (ts, c1) values ({1668073288216 + i}, 29)")
    deletes.append("delete from t1 where ts = cast(1668073288219 as timestamp)")
    step(wh, "test4", ";".join(deletes), "streams4")
    assert rows(wh, query) == [(11, 5)]
    step(wh, "test4", ";".join(f"insert into t1 (ts, c1) values ({1668073288221 + i}, 65)" for i in range(6)),
         "streams4")
    assert rows(wh, query) == [(11, 5), (29, 1)]
    step(wh, "test4", "insert into t1 (ts, c1) values (1668073288224, 64)", "streams4")
    assert rows(wh, query) == [(11, 5), (29, 1), (65, 3), (64, 1)]


def test_event0_windows_written_once_their_end_condition_holds(wh):
    """event0.sim steps 1 to 3: an event window is written only after its end row (even AT_ONCE);
    a row meeting both conditions is a window of its own; out-of-order rows land in their window."""
    sql(wh, """create database test; use test;
               create table t1(ts timestamp, a int, b int , c int, d double);
               create stream streams1 trigger at_once IGNORE EXPIRED 0 IGNORE UPDATE 0 into streamt as
                 select _wstart as s, count(*) c1, sum(b), max(c) from t1 event_window start with a = 0 end with a = 9;
               create table t2(ts timestamp, a int, b int , c int, d double);
               create stream streams2 trigger at_once IGNORE EXPIRED 0 IGNORE UPDATE 0 into streamt2 as
                 select _wstart as s, count(*) c1, sum(b), max(c) from t2 event_window start with a = 0 end with b = 9;
               create table t3(ts timestamp, a int, b int , c int, d double);
               create stream streams3 trigger at_once IGNORE EXPIRED 0 IGNORE UPDATE 0 into streamt3 as
                 select _wstart as s, count(*) c1, sum(b), max(c) from t3
                 event_window start with a = 0 end with b = 9""")
    query = "select c1, sum_b, max_c from streamt order by s"
    step(wh, "test", """insert into t1 values(1648791213000,0,1,1,1.0); insert into t1 values(1648791223001,9,2,2,1.1);
                        insert into t1 values(1648791213009,0,3,3,1.0)""", "streams1")
    assert rows(wh, query) == [(3, 6, 3)]
    step(wh, "test", "insert into t1 values(1648791243006,1,1,1,1.1); insert into t1 values(1648791253000,2,2,2,1.1)",
         "streams1")
    assert len(rows(wh, query)) == 1
    step(wh, "test", "insert into t1 values(1648791243000,0,3,3,1.1)", "streams1")
    assert len(rows(wh, query)) == 1
    step(wh, "test", "insert into t1 values(1648791253009,9,4,4,1.1)", "streams1")
    assert rows(wh, query) == [(3, 6, 3), (4, 10, 4)]
    step(wh, "test", """insert into t2 values(1648791213000,0,1,1,1.0); insert into t2 values(1648791213009,1,2,2,2.1);
                        insert into t2 values(1648791223000,0,9,9,9.0);
                        insert into t2 values(1648791233000,0,9,9,9.0)""",
         "streams2")
    assert rows(wh, "select c1 from streamt2 order by s") == [(3,), (1,)]
    step(wh, "test", """insert into t3 values(1648791233009,1,2,2,2.1); insert into t3 values(1648791233000,0,1,1,1.0);
                        insert into t3 values(1648791243000,0,9,9,9.0)""", "streams3")
    assert rows(wh, "select c1 from streamt3 order by s") == [(3,)]
    step(wh, "test", "insert into t3 values(1648791223000,0,9,9,9.0)", "streams3")
    assert rows(wh, "select c1 from streamt3 order by s") == [(1,), (3,)]
    step(wh, "test", "insert into t3 values(1648791213000,0,1,1,1.0)", "streams3")
    step(wh, "test", "insert into t3 values(1648791213001,1,9,9,9.0)", "streams3")
    assert rows(wh, "select c1 from streamt3 order by s") == [(2,), (1,), (3,)]


COUNT_STREAM = """create database test; use test;
    create stable st(ts timestamp, a int, b int , c int, d double) tags(ta int,tb int,tc int);
    create table t1 using st tags(1,1,1);
    create stream streams1 trigger at_once IGNORE EXPIRED 1 IGNORE UPDATE 0 WATERMARK 100s into streamt as
      select _wstart as s, count(*) c1, sum(b), max(c) from {source} count_window(3)"""


@pytest.mark.parametrize("source", ["t1", "st partition by tbname"])
def test_count2_partial_windows_and_an_earlier_row_shifting_them(wh, source):
    """count2.sim: AT_ONCE writes a count window before it is full; an earlier row shifts every window."""
    sql(wh, COUNT_STREAM.format(source=source))
    query = "select c1 from streamt order by s"
    step(wh, "test", "insert into t1 values(1648791213001,9,2,2,1.1); insert into t1 values(1648791213009,0,3,3,1.0)",
         "streams1")
    assert rows(wh, query) == [(2,)]
    step(wh, "test", "insert into t1 values(1648791213000,0,1,1,1.0)", "streams1")
    assert rows(wh, query) == [(3,)]
    step(wh, "test", """insert into t1 values(1648791223000,0,1,1,1.0); insert into t1 values(1648791223001,9,2,2,1.1);
                        insert into t1 values(1648791223009,0,3,3,1.0)""", "streams1")
    assert len(rows(wh, query)) == 2
    step(wh, "test", "insert into t1 values(1648791212000,0,1,1,1.0)", "streams1")
    assert rows(wh, query) == [(3,), (3,), (1,)]


def test_count3_an_update_keeps_count_windows_a_delete_shrinks_one(wh):
    """count3.sim: rewriting a row keeps the windows; deleting a row of the last window shrinks it."""
    sql(wh, COUNT_STREAM.format(source="t1"))
    query = "select c1 from streamt order by s"
    step(wh, "test", ";".join(f"insert into t1 values({ts},0,1,1,1.0)" for ts in (
        1648791213000, 1648791213001, 1648791213009, 1648791223000, 1648791223001, 1648791223009)), "streams1")
    assert len(rows(wh, query)) == 2
    step(wh, "test", "insert into t1 values(1648791213000,4,4,4,4.0)", "streams1")
    assert rows(wh, query) == [(3,), (3,)]
    step(wh, "test", "delete from t1 where ts = 1648791223001", "streams1")
    assert rows(wh, query) == [(3,), (2,)]


def test_count_window_sliding_writes_overlapping_windows(wh):
    """countSliding0.sim step 1: COUNT_WINDOW(4, 2) starts a window every second row."""
    sql(wh, """create database test; use test;
               create table t1(ts timestamp, a int, b int , c int, d double);
               create stream streams1 trigger at_once IGNORE EXPIRED 1 IGNORE UPDATE 0 WATERMARK 100s into streamt as
                 select _wstart as s, count(*) c1, sum(b), max(c) from t1 count_window(4, 2)""")
    query = "select c1 from streamt order by s"
    step(wh, "test", ";".join(f"insert into t1 values({ts},0,1,1,1.0)" for ts in
                              (1648791213000, 1648791213001, 1648791213002, 1648791213009)), "streams1")
    assert rows(wh, query) == [(4,), (2,)]
    step(wh, "test", ";".join(f"insert into t1 values({ts},0,1,1,1.0)" for ts in
                              (1648791223000, 1648791223001, 1648791223002, 1648791223009)), "streams1")
    assert rows(wh, query) == [(4,), (4,), (4,), (2,)]
    step(wh, "test", "insert into t1 values(1648791233000,0,1,1,1.0) (1648791233001,9,2,2,1.1) "
                     "(1648791233002,9,2,2,1.1) (1648791233009,0,3,3,1.0)", "streams1")
    assert len(rows(wh, query)) == 6
    step(wh, "test", "insert into t1 values(1648791243000,0,1,1,1.0) (1648791243001,9,2,2,1.1)", "streams1")
    assert len(rows(wh, query)) == 7
    step(wh, "test", "insert into t1 values(1648791253000,0,1,1,1.0) (1648791253001,9,2,2,1.1) "
                     "(1648791253002,9,2,2,1.1)", "streams1")
    assert len(rows(wh, query)) == 9
    step(wh, "test", "insert into t1 values(1648791263000,0,1,1,1.0)", "streams1")
    assert len(rows(wh, query)) == 9


def test_count1_rules_for_count_window_streams(wh):
    """count1.sim: a COUNT_WINDOW over a supertable needs PARTITION BY tbname, and IGNORE EXPIRED 1;
    the count is at least 2 and below 2147483648. (TDengine's extra demand for a WATERMARK is an
    implementation limit, not a rule of the language: not required here.)"""
    sql(wh, """create database test; use test;
               create stable st(ts timestamp,a int,b int,c int) tags(ta int,tb int,tc int);
               create table t1 using st tags(1,1,1); create table t2 using st tags(2,2,2)""")
    head = "create stream streams1 trigger at_once"
    body = "into streamt as select _wstart as s, count(*) c1, sum(b), max(c) from"
    for text, words in (
            (f"{head} IGNORE EXPIRED 1 IGNORE UPDATE 0 WATERMARK 10s {body} st count_window(3)", "PARTITION BY tbname"),
            (f"{head} IGNORE EXPIRED 0 IGNORE UPDATE 0 WATERMARK 10s {body} t1 count_window(3)", "IGNORE EXPIRED 1"),
            (f"{head} IGNORE EXPIRED 1 IGNORE UPDATE 0 {body} t1 count_window(1)", "at least 2"),
            (f"{head} IGNORE EXPIRED 1 IGNORE UPDATE 0 {body} t1 count_window(2147483648)", "less than 2147483648")):
        with pytest.raises(StreamDefinitionError, match=words):
            sql(wh, text)
    sql(wh, """create stream streams2 trigger at_once IGNORE EXPIRED 1 IGNORE UPDATE 0 WATERMARK 10s
                  into streamt2 as select _wstart as s, count(*) c1, sum(b), max(c) from t1 count_window(2);
                create stream streams3 trigger at_once IGNORE EXPIRED 1 IGNORE UPDATE 0 into streamt3 as
                  select _wstart as s, count(*) c1, sum(b), max(c) from t1 count_window(2147483647)""")


def test_scalar_streams_write_a_row_per_source_row(wh):
    """scalar.sim: streams without a window write one row per source row; a rewrite overwrites it,
    also when it moves the row to another group."""
    sql(wh, """create database test; use test;
               create stable st(ts timestamp,a int,b int,c int, d double) tags(ta int,tb int,tc int);
               create table t1 using st tags(1,1,1); create table t2 using st tags(2,2,2);
               create stream streams0 into streamt0 as select ts c1, a, abs(b) c4 from t1 partition by a;
               create stream streams1 into streamt1 as select ts c1, a, abs(b) c4 from t1;
               create stream streams2 into streamt2 as select ts c1, a, abs(b) c4 from st partition by tbname""")
    names = ("streams0", "streams1", "streams2")
    step(wh, "test", """insert into t1 values(1648791213000,1,1,1,1); insert into t1 values(1648791213001,1,1,1,1);
                        insert into t1 values(1648791213002,1,1,1,1); insert into t2 values(1648791213000,1,2,2,2);
                        insert into t2 values(1648791213001,1,1,1,1); insert into t2 values(1648791213002,1,1,1,1)""",
         *names)
    step(wh, "test", "insert into t1 values(1648791213001,2,11,11,11)", *names)
    for table, count in (("streamt0", 3), ("streamt1", 3), ("streamt2", 6)):
        found = rows(wh, f"select a, c4 from {table} order by a desc")
        assert len(found) == count and found[0] == (2, 11), table


@pytest.mark.parametrize("output", ["", "subtable(concat('aaa-', cast(a as varchar(10))))", "subtable('aaa-a')"])
def test_delete_scalar_removes_output_rows(wh, output):
    """deleteScalar.sim: deleting source rows deletes their output rows, in every group."""
    partition = "" if "aaa-a'" in output else " partition by a"
    sql(wh, f"""create database test; use test;
                create table t1(ts timestamp, a int, b int , c int, d double);
                create stream streams0 trigger at_once IGNORE EXPIRED 0 IGNORE UPDATE 0 into streamt {output}
                  as select ts, a, b from t1{partition}""")
    step(wh, "test", ";".join(f"insert into t1 values({1648791213000 + i},{i % 3},2,3,1.0)" for i in range(6)),
         "streams0")
    assert len(rows(wh, "select * from streamt")) == 6
    step(wh, "test", "delete from t1 where ts <= 1648791213002", "streams0")
    assert rows(wh, "select a from streamt order by ts") == [(0,), (1,), (2,)]


def subtables(wh, table: str) -> list[str]:
    return sorted(r[0] for r in rows(wh, f"select distinct tbname from {table}"))


def test_ud_table_and_tag0_subtable_names_and_tags_from_partition_aliases(wh):
    """udTableAndTag0.sim: SUBTABLE names each group's output subtable; TAGS take the values of the
    PARTITION BY items of the same name, converted to the tag's type. Since TDengine 3.2.3.0 a
    named subtable ends with ``_<supertable>_<group id>`` (reference 003); the script predates it."""
    sql(wh, """create database result; create database test; use test;
               create stable st(ts timestamp,a int,b int,c int) tags(ta varchar(20),tb int,tc int);
               create table t1 using st tags('1',1,1); create table t2 using st tags('2',2,2);
               create table t3 using st tags('3',3,3);
               create stream streams1 trigger at_once IGNORE EXPIRED 0 IGNORE UPDATE 0 into result.streamt
                 SUBTABLE(concat('aaa-', tbname)) as
                 select _wstart, count(*) c1 from st partition by tbname interval(10s);
               create stream streams2 trigger at_once IGNORE EXPIRED 0 IGNORE UPDATE 0 into result.streamt2
                 TAGS(cc varchar(100)) as select _wstart, count(*) c1 from st partition by concat('tag-', tbname) as cc
                 interval(10s);
               create stream streams4 trigger at_once IGNORE EXPIRED 0 IGNORE UPDATE 0 into result.streamt4
                 TAGS(dd varchar(100)) SUBTABLE(concat('tbn-', tbname)) as select _wstart, count(*) c1 from st
                 partition by concat('tag-', tbname) as dd, tbname interval(10s);
               create stream streams6 trigger at_once IGNORE EXPIRED 0 IGNORE UPDATE 0 into result.streamt6
                 TAGS(dd int) as select _wstart, count(*) c1 from st partition by concat(ta, '0') as dd, tbname
                 interval(10s)""")
    step(wh, "test", "insert into t1 values(1648791213000,1,1,1) t2 values(1648791213000,2,2,2) "
                     "t3 values(1648791213000,3,3,3)", "streams1", "streams2", "streams4", "streams6")
    names = subtables(wh, "result.streamt")
    assert [n.split("_streamt_")[0] for n in names] == ["aaa-t1", "aaa-t2", "aaa-t3"]
    assert all(n.split("_streamt_")[1].isdigit() for n in names)
    assert rows(wh, "select cc from result.streamt2 order by cc") == [("tag-t1",), ("tag-t2",), ("tag-t3",)]
    assert rows(wh, "select c1, dd from result.streamt4 order by dd") == [(1, "tag-t1"), (1, "tag-t2"), (1, "tag-t3")]
    assert [n.split("_streamt4_")[0] for n in subtables(wh, "result.streamt4")] == ["tbn-t1", "tbn-t2", "tbn-t3"]
    assert rows(wh, "select dd from result.streamt6 order by dd") == [(10,), (20,), (30,)]


def test_ud_table_and_tag1_groups_by_a_column(wh):
    """udTableAndTag1.sim: PARTITION BY a data column, its value naming subtables and tags."""
    sql(wh, """create database result; create database test; use test;
               create stable st(ts timestamp,a int,b int,c int) tags(ta int,tb int,tc int);
               create table t1 using st tags(1,1,1); create table t2 using st tags(2,2,2);
               create stream streams1 trigger at_once IGNORE EXPIRED 0 into result.streamt
                 SUBTABLE(concat('aaa-', cast(a as varchar(10)))) as select _wstart, count(*) c1 from st partition by a
                 interval(10s);
               create stream streams2 trigger at_once IGNORE EXPIRED 0 into result.streamt2 TAGS(cc varchar(100)) as
                 select _wstart, count(*) c1 from st partition by concat('col-', cast(a as varchar(10))) as cc
                 interval(10s)""")
    step(wh, "test", "insert into t1 values(1648791213000,1,2,3); insert into t2 values(1648791213000,2,2,3)",
         "streams1", "streams2")
    assert [n.split("_streamt_")[0] for n in subtables(wh, "result.streamt")] == ["aaa-1", "aaa-2"]
    assert rows(wh, "select cc from result.streamt2 order by cc") == [("col-1",), ("col-2",)]


def test_ud_table_and_tag2_tags_without_partition_are_null(wh):
    """udTableAndTag2.sim steps 2 and 3: without PARTITION BY there is one subtable, its TAGS NULL."""
    sql(wh, """create database result2; create database test2; use test2;
               create stable st(ts timestamp,a int,b int,c int) tags(ta int,tb int,tc int);
               create table t1 using st tags(1,1,1); create table t2 using st tags(2,2,2);
               create stream streams2 trigger at_once IGNORE EXPIRED 0 IGNORE UPDATE 0 into result2.streamt2
                 TAGS(cc varchar(100)) as select _wstart, count(*) c1 from st interval(10s);
               create stream streams3 trigger at_once IGNORE EXPIRED 0 IGNORE UPDATE 0 into result2.streamt3
                 TAGS(dd varchar(100)) SUBTABLE(concat('tbn-', '1')) as
                 select _wstart, count(*) c1 from st interval(10s)""")
    step(wh, "test2", "insert into t1 values(1648791213000,1,2,3); insert into t2 values(1648791213000,2,2,3)",
         "streams2", "streams3")
    assert rows(wh, "select c1, cc from result2.streamt2") == [(2, None)]
    assert rows(wh, "select c1, dd from result2.streamt3") == [(2, None)]
    [name] = subtables(wh, "result2.streamt3")
    assert name.startswith("tbn-1_streamt3_")


def test_check_stream_stable_writes_into_existing_supertables(wh):
    """checkStreamSTable.sim steps 1 to 4: into an existing supertable by position or by a column
    list (columns not named stay NULL), TAGS naming existing tags; mismatched counts are refused."""
    sql(wh, """create database result; create database test; use test;
               create stable st(ts timestamp,a int,b int,c int) tags(ta int,tb int,tc int);
               create table t1 using st tags(1,1,1); create table t2 using st tags(2,2,2);
               create stable result.streamt0(ts timestamp,a int,b int) tags(ta int,tb varchar(100),tc int);
               create stream streams0 trigger at_once into result.streamt0 tags(tb) as
                 select _wstart, count(*) c1, max(a) c2 from st partition by tbname tb interval(10s);
               create stable result.streamt1(ts timestamp,a int,b int,c int) tags(ta varchar(100),tb int,tc int);
               create stream streams1 trigger at_once into result.streamt1(ts,c,a,b) tags(ta) as
                 select _wstart, count(*) c1, max(a),min(b) c2 from st partition by tbname as ta interval(10s);
               create stable result.streamt3(ts timestamp,a int,b int,c int, d int) tags(ta int,tb int,tc int);
               create stream streams3 trigger at_once into result.streamt3(ts,c,a,b) as
                 select _wstart, count(*) c1, max(a),min(b) c2 from st interval(10s)""")
    step(wh, "test", "insert into t1 values(1648791213000,10,20,30); insert into t2 values(1648791213000,40,50,60)",
         "streams0", "streams1", "streams3")
    assert rows(wh, "select a, b, ta, tb from result.streamt0 order by tb") == [
        (1, 10, None, "t1"), (1, 40, None, "t2")]
    assert rows(wh, "select a, b, c from result.streamt1 order by ta") == [(10, 20, 1), (40, 50, 1)]
    assert rows(wh, "select a, b, c, d from result.streamt3") == [(40, 20, 2, None)]
    sql(wh, "create stable result.streamt2(ts timestamp, a int , b int) tags(ta varchar(20))")
    for bad in ("into result.streamt2 TAGS(aa varchar(100), ta int) as select _wstart, count(*) c1, max(a) from st "
                "partition by tbname as aa, ta interval(10s)",
                "into result.streamt2 as select _wstart, count(*) c1, max(a), max(b) from st partition by tbname "
                "interval(10s)",
                "into result.streamt2(ts, a, b) as select _wstart, count(*) c1, max(a), max(b) from st "
                "partition by tbname interval(10s)",
                "into result.streamt2 as select _wstart, count(*) c1 from st partition by tbname interval(10s)"):
        with pytest.raises((StreamDefinitionError, StreamError)):
            sql(wh, f"create stream streams2 trigger at_once {bad}")
    sql(wh, "create stream streams2 trigger at_once into result.streamt2(ts, a) tags(ta) as "
            "select _wstart, count(*) c1 from st partition by tbname as ta interval(10s)")


def test_check_stream_stable_tags_from_partition_expressions(wh):
    """checkStreamSTable.sim step 5: TAGS naming existing tags in another order, from PARTITION BY
    expressions, and SUBTABLE over an alias."""
    sql(wh, """create database result4; create database test4; use test4;
               create stable st(ts timestamp,a int,b int,c int) tags(ta int,tb int,tc int);
               create table t1 using st tags(1,2,3); create table t2 using st tags(4,5,6);
               create stable result4.streamt4(ts timestamp,a int,b int,c int, d int) tags(tg1 int,tg2 int,tg3 int);
               create stream streams4 trigger at_once into result4.streamt4(ts,c,a,b) tags(tg2, tg3, tg1)
                 subtable(concat('tbl-', cast(tg1 as varchar(10)))) as
                 select _wstart, count(*) c1, max(a),min(b) c2 from st
                 partition by ta+1 as tg1, cast(tb as bigint) as tg2, tc as tg3 interval(10s)""")
    step(wh, "test4", "insert into t1 values(1648791213000,10,20,30); insert into t2 values(1648791213000,40,50,60)",
         "streams4")
    assert rows(wh, "select a, b, c, d, tg1, tg2, tg3 from result4.streamt4 order by tg1") == [
        (10, 20, 1, None, 2, 2, 3), (40, 50, 1, None, 5, 5, 6)]
    assert [n.split("_streamt4_")[0] for n in subtables(wh, "result4.streamt4")] == ["tbl-2", "tbl-5"]


def test_pause_and_resume(wh):
    """pauseAndResume.sim steps 1, 2 and 4: writes while paused are processed on RESUME, or never
    with RESUME IGNORE UNTREATED; PAUSE and RESUME of an unknown stream fail unless IF EXISTS."""
    sql(wh, """create database test; use test;
               create stable st(ts timestamp, a int, b int , c int, d double) tags(ta int,tb int,tc int);
               create table ts1 using st tags(1,1,1); create table ts2 using st tags(2,2,2);
               create table ts3 using st tags(3,2,2); create table ts4 using st tags(4,2,2);
               create stream streams1 trigger at_once IGNORE EXPIRED 0 IGNORE UPDATE 0 watermark 1d into streamt1 as
                 select _wstart, count(*) c1, sum(a) c3 from st interval(10s);
               create table t1(ts timestamp, a int, b int , c int, d double);
               create stream streams2 trigger at_once IGNORE EXPIRED 0 IGNORE UPDATE 0 watermark 1d into streamt2 as
                 select _wstart, count(*) c1, sum(a) c3 from t1 interval(10s)""")
    [paused] = sql(wh, "pause stream streams1")
    assert paused.message.startswith("paused stream test.streams1")
    sql(wh, ";".join(f"insert into ts{i} values(1648791213001,1,12,3,1.0)" for i in range(1, 5)))
    with pytest.raises(StreamError, match="stopped"):
        run_stream(wh, "test", "streams1")
    assert rows(wh, "select * from streamt1") == []
    [resumed] = sql(wh, "resume stream streams1")
    assert resumed.message.startswith("resumed stream test.streams1")
    step(wh, "test", "select 1", "streams1")
    assert rows(wh, "select c1 from streamt1") == [(4,)]
    step(wh, "test", ";".join(f"insert into ts{i} values(1648791223002,{i},2,3,1.1)" for i in range(1, 5)),
         "streams1")
    assert rows(wh, "select c1 from streamt1 order by `_wstart`") == [(4,), (4,)]

    sql(wh, "pause stream streams2; insert into t1 values(1648791213001,1,12,3,1.0)")
    step(wh, "test", "resume stream streams2", "streams2")
    assert rows(wh, "select c1 from streamt2") == [(1,)]
    step(wh, "test", "insert into t1 values(1648791223002,2,2,3,1.1)", "streams2")
    assert rows(wh, "select c1 from streamt2 order by `_wstart`") == [(1,), (1,)]
    step(wh, "test", """pause stream streams2; insert into t1 values(1648791223003,2,2,3,1.1);
                        insert into t1 values(1648791233003,2,2,3,1.1); resume stream IGNORE UNTREATED streams2""",
         "streams2")
    assert rows(wh, "select c1 from streamt2 order by `_wstart`") == [(1,), (1,)]

    for bad in ("pause stream streams3333333", "resume stream streams5555555"):
        with pytest.raises(StreamError):
            sql(wh, bad)
    sql(wh, "pause stream IF EXISTS streams44444; resume stream IF EXISTS streams66666666")


def test_fill_history_basic4_history_then_live_rows(wh):
    """fillHistoryBasic4.sim step 1: rows written before the stream are its history; then live
    rewrites recompute their windows as in basic1."""
    sql(wh, """create database test2; use test2;
               create table t1(ts timestamp, a int, b int , c int, d double);
               insert into t1 values(1648791213000,1,2,3,1.0); insert into t1 values(1648791223001,2,2,3,1.1);
               insert into t1 values(1648791233002,3,2,3,2.1); insert into t1 values(1648791243003,4,2,3,3.1);
               insert into t1 values(1648791213004,4,2,3,4.1);
               create stream stream2 trigger at_once fill_history 1 IGNORE EXPIRED 0 IGNORE UPDATE 0 into streamt as
                 select _wstart, count(*) c1, count(d) c2 , sum(a) c3 , max(b) c4, min(c) c5 from t1 interval(10s)""")
    run_stream(wh, "test2", "stream2")
    query = "select c1, c2, c3, c4, c5 from streamt order by `_wstart`"
    assert rows(wh, query) == [(2, 2, 5, 2, 3), (1, 1, 2, 2, 3), (1, 1, 3, 2, 3), (1, 1, 4, 2, 3)]
    step(wh, "test2", "insert into t1 values(1648791223001,12,14,13,11.1)", "stream2")
    assert rows(wh, query)[1] == (1, 1, 12, 14, 13)
    step(wh, "test2", "insert into t1 values(1648791223002,12,14,13,11.1)", "stream2")
    assert rows(wh, query)[1] == (2, 2, 24, 14, 13)


def test_fill_history_basic3_history_rows_moving_between_groups(wh):
    """fillHistoryBasic3.sim steps 1 to 4: history with a NULL group key, then rewrites that move
    its rows into another group, whose old result goes."""
    sql(wh, """create database test; create database test2; use test2;
               create stable st(ts timestamp, a int, b int, c int, d double) tags(ta int,tb int,tc int);
               create table t1 using st tags(1,1,1); create table t2 using st tags(2,2,2);
               insert into t1 values(1648791213000,NULL,NULL,NULL,NULL);
               insert into t2 values(1648791213000,NULL,NULL,NULL,NULL);
               create stream streams2 trigger at_once fill_history 1 IGNORE EXPIRED 0 IGNORE UPDATE 0 into
                 test.streamt2 as select _wstart c1, count(*) c2, max(a) c3 from st partition by a interval(10s)""")
    query = "select c2, c3 from test.streamt2 order by c1, c2, c3"
    run_stream(wh, "test2", "streams2")
    assert rows(wh, query) == [(2, None)]
    step(wh, "test2", "insert into t1 values(1648791213000,1,2,3,1.0); "
                      "insert into t2 values(1648791213000,1,2,3,1.0)", "streams2")
    assert rows(wh, query) == [(2, 1)]
    step(wh, "test2", "insert into t1 values(1648791213000,2,2,3,1.0); "
                      "insert into t2 values(1648791213000,2,2,3,1.0)", "streams2")
    assert rows(wh, query) == [(2, 2)]
    step(wh, "test2", ";".join(f"insert into {t} values({ts},{a},2,3,1.0)" for t in ("t1", "t2") for ts, a in (
        (1648791213000, 2), (1648791213001, 2), (1648791213002, 2), (1648791213002, 1))), "streams2")
    assert rows(wh, query) == [(2, 1), (4, 2)]


@pytest.mark.parametrize("fill, expected", [
    # by hand: rows in [10, 20) and [40, 50) only; windows [20, 30) and [30, 40) are empty between them
    ("fill(null)", [(2, 3), (None, None), (None, None), (1, 7)]),
    ("fill(value, 100, 200)", [(2, 3), (100, 200), (100, 200), (1, 7)]),
    ("fill(prev)", [(2, 3), (2, 3), (2, 3), (1, 7)]),
    ("fill(none)", [(2, 3), (1, 7)]),
])
def test_fill_writes_the_empty_windows_between_a_groups_rows(wh, fill, expected):
    """FILL in a stream's INTERVAL (reference 003; TDengine's fillIntervalValue/Prev scripts): the
    empty windows between a group's rows are written with NULLs, constants or the previous result."""
    sql(wh, f"""create database test; use test;
                create table t1(ts timestamp, a int);
                create stream s1 trigger at_once into o as select _wstart, count(*) c, sum(a) s from t1
                  interval(10s) {fill}""")
    step(wh, "test", "insert into t1 values(1648791211000,1) (1648791212000,2)", "s1")
    step(wh, "test", "insert into t1 values(1648791241000,7)", "s1")
    assert rows(wh, "select c, s from o order by `_wstart`") == expected


def test_show_streams_lists_legacy_streams_in_the_words_of_3_3_6(wh):
    """SHOW STREAMS says which syntax a stream is written in; a legacy stream is ``init`` while its
    history waits (FILL_HISTORY 1 ASYNC returns at once), then ``ready``, and ``paused`` after PAUSE
    (reference 003). RECALCULATE STREAM does not exist in that syntax."""
    sql(wh, """create database test; use test;
               create table t1(ts timestamp, a int);
               insert into t1 values(1648791213000,1);
               create stream s1 trigger at_once fill_history 1 async into o as select _wstart, count(*) c from t1
                 interval(10s);
               create stream s2 interval(10s) sliding(10s) from t1 into o2 as
                 select _twstart, count(*) c from %%trows""")

    def show() -> dict:
        return {r["stream_name"]: (r["status"], r["language"]) for r in sql(wh, "show streams")[-1].table.to_pylist()}

    assert show() == {"s1": ("init", "TDengine 3.3.6 (AT_ONCE)"), "s2": ("running", "TDengine 3.3.7")}
    run_stream(wh, "test", "s1")
    assert show()["s1"] == ("ready", "TDengine 3.3.6 (AT_ONCE)")
    assert rows(wh, "select c from o") == [(1,)]
    sql(wh, "pause stream s1")
    assert show()["s1"][0] == "paused"
    with pytest.raises(StreamError, match="no RECALCULATE"):
        sql(wh, "recalculate stream s1 from '2022-04-01 00:00:00'")


def test_delete_session_splits_and_removes_sessions(wh):
    """deleteSession.sim steps 3 and 4: deleting the rows that bridged sessions splits one session
    into several; deleting rows of one subtable's sessions removes them."""
    sql(wh, """create database test3; create database test; use test3;
               create stable st(ts timestamp, a int, b int, c int, d double) tags(ta int,tb int,tc int);
               create table t1 using st tags(1,1,1); create table t2 using st tags(2,2,2);
               create stream streams3 trigger at_once IGNORE EXPIRED 0 IGNORE UPDATE 0 into test.streamt3 as
                 select _wstart c1, count(*) c2, max(a) c3 from st session(ts,5s)""")
    writes = [("t1", 1648791210000, 1), ("t1", 1648791210001, 2), ("t2", 1648791213001, 3), ("t2", 1648791213003, 4),
              ("t1", 1648791216000, 5), ("t1", 1648791216002, 6), ("t1", 1648791216004, 7), ("t2", 1648791218001, 8),
              ("t2", 1648791218003, 9), ("t1", 1648791222000, 10), ("t1", 1648791222003, 11),
              ("t1", 1648791222005, 12), ("t1", 1648791232005, 13), ("t2", 1648791242005, 14)]
    step(wh, "test3", ";".join(f"insert into {t} values({ts},{a},{a},{a},NULL)" for t, ts, a in writes), "streams3")
    query = "select c2, c3 from test.streamt3 order by c1, c2, c3"
    assert len(rows(wh, query)) == 3
    step(wh, "test3", "delete from t2 where ts >= 1648791213001 and ts <= 1648791218003", "streams3")
    assert rows(wh, query) == [(2, 2), (3, 7), (3, 12), (1, 13), (1, 14)]

    sql(wh, """create database test4; use test4;
               create stable st(ts timestamp,a int,b int,c int) tags(ta int,tb int,tc int);
               create table t1 using st tags(1,1,1); create table t2 using st tags(2,2,2);
               create stream streams4 trigger at_once IGNORE EXPIRED 0 IGNORE UPDATE 0 into streamt4 as
                 select _wstart, count(*) c1 from st partition by tbname session(ts, 2s)""")
    stamps = {"t1": (1648791210000, 1648791220000, 1648791221000, 1648791222000, 1648791223000, 1648791231000),
              "t2": (1648791210000, 1648791220000, 1648791221000, 1648791231000)}
    step(wh, "test4", ";".join(f"insert into {t} values({ts},2,2,3)" for t, times in stamps.items() for ts in times),
         "streams4")
    assert rows(wh, "select c1 from streamt4 order by c1 desc") == [(4,), (2,), (1,), (1,), (1,), (1,)]
    step(wh, "test4", "delete from st where ts >= 1648791220000 and ts <=1648791223000", "streams4")
    assert rows(wh, "select c1 from streamt4 order by c1 desc") == [(1,), (1,), (1,), (1,)]
