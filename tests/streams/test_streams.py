"""Streams end to end: CREATE STREAM, `run --until-idle`, and the output tables, on real Spark and Delta.

Expected values are computed by hand from the rows each test writes (reference 000's examples).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from airflow_stream_provider.exceptions import StreamDefinitionError, StreamError
from airflow_stream_provider.streams.fired import TROWS_FROM, TROWS_TO, Fired
from airflow_stream_provider.streams.run import run as run_stream
from airflow_stream_provider.streams.run_request import RunRequest
from airflow_stream_provider.streams.runtime import RunReport, StreamRuntime
from airflow_stream_provider.streams.store import StreamStore
from tests.conftest import sql

pytestmark = pytest.mark.spark

T0 = datetime(2025, 1, 1, tzinfo=UTC)


@pytest.fixture
def wh(wh):
    sql(wh, "CREATE DATABASE d; USE d")
    return wh


def select(wh, text: str) -> list[dict]:
    return sql(wh, text)[-1].table.to_pylist()


def run(wh, name: str, **kwargs) -> RunReport:
    return run_stream(wh, "d", name, RunRequest.everything(**kwargs))


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


METERS = """
CREATE STABLE stb1 (ts TIMESTAMP, col1 INT) TAGS (loc VARCHAR(20));
CREATE TABLE t1 USING stb1 TAGS ('a');
CREATE TABLE t2 USING stb1 TAGS ('b');
"""
ROWS = """
INSERT INTO t1 VALUES ('2025-01-01 00:00:00', 1) ('2025-01-01 00:01:00', 3) ('2025-01-01 00:06:00', 10)
                      ('2025-01-01 00:11:00', 5);
INSERT INTO t2 VALUES ('2025-01-01 00:02:00', 7) ('2025-01-01 00:07:00', 8) ('2025-01-01 00:12:00', 1);
"""


def by_tag(rows: list[dict], tag: str = "tag_tbname") -> dict:
    out: dict = {}
    for r in rows:
        out.setdefault(r[tag], []).append(r)
    return out


def test_sm1_interval_per_subtable_with_tbname(wh):
    """Reference example sm1: per subtable of stb1, the average of each closed 5-minute window."""
    sql(wh, METERS)
    sql(wh, """CREATE STREAM sm1 INTERVAL(5m) SLIDING(5m) FROM stb1 PARTITION BY tbname INTO stb2 AS
               SELECT _twstart, avg(col1) FROM %%tbname WHERE _c0 >= _twstart AND _c0 < _twend""")
    sql(wh, ROWS)
    report = run(wh, "sm1")
    # t1: [00:00,00:05) {1,3}, [00:05,00:10) {10}; [00:10,...) stays open. t2: {7}, {8}.
    assert report.triggers == 4 and report.written == 4
    out = by_tag(select(wh, "SELECT * FROM stb2"))
    assert {r["_twstart"]: r["avg_col1"] for r in out["t1"]} == {at(0): 2.0, at(5): 10.0}
    assert {r["_twstart"]: r["avg_col1"] for r in out["t2"]} == {at(0): 7.0, at(5): 8.0}
    # one output subtable per group, named the same way on every run
    names = {g: {r["tbname"] for r in rs} for g, rs in out.items()}
    assert all(len(n) == 1 for n in names.values()) and names["t1"] != names["t2"]
    sub = names["t1"].pop()
    assert select(wh, f"SELECT count(*) AS n FROM {sub}") == [{"n": 2}]
    # the output's key column is named _twstart, as the query's first column: a query outside a
    # stream reads it as that column
    assert select(wh, "SELECT tag_tbname, avg_col1 FROM stb2 WHERE _twstart = '2025-01-01 00:05:00' "
                      "ORDER BY tag_tbname") == [{"tag_tbname": "t1", "avg_col1": 10.0},
                                                 {"tag_tbname": "t2", "avg_col1": 8.0}]
    # nothing pending: a second run fires nothing
    assert run(wh, "sm1").triggers == 0


def test_sm2_max_delay_fill_history_first(wh):
    """Reference example sm2: FILL_HISTORY_FIRST reads the rows written before the stream."""
    sql(wh, METERS)
    sql(wh, ROWS)
    sql(wh, """CREATE STREAM sm2 INTERVAL(5m) SLIDING(5m) FROM stb1 PARTITION BY tbname
               STREAM_OPTIONS(MAX_DELAY(1m) | FILL_HISTORY_FIRST) INTO stb2 AS
               SELECT _twstart, avg(col1) FROM %%tbname WHERE _c0 >= _twstart AND _c0 < _twend""")
    report = run(wh, "sm2")
    assert report.written == 4
    out = by_tag(select(wh, "SELECT * FROM stb2"))
    assert {r["_twstart"]: r["avg_col1"] for r in out["t1"]} == {at(0): 2.0, at(5): 10.0}


def test_trows_without_grouping_writes_a_regular_table(wh):
    """The avg_stream example over %%trows: window placeholders and the captured rows."""
    sql(wh, METERS)
    sql(wh, """CREATE STREAM avg_stream INTERVAL(5m) SLIDING(5m) FROM stb1 INTO avg_tb AS
               SELECT _twstart, _twend, _twduration, _twrownum, AVG(col1), count(*) FROM %%trows""")
    sql(wh, ROWS)
    run(wh, "avg_stream")
    got = {r["_twstart"]: r for r in select(wh, "SELECT * FROM avg_tb")}
    # all subtables together: [00:00,00:05) {1,3,7}, [00:05,00:10) {10,8}; [00:10,..) is open
    assert sorted(got) == [at(0), at(5)]
    first = got[at(0)]
    assert first["_twend"] == at(5) and first["_twduration"] == 300_000 and first["_twrownum"] == 3
    assert first["avg_col1"] == pytest.approx(11 / 3) and first["count"] == 3
    assert got[at(5)]["avg_col1"] == 9.0 and got[at(5)]["_twrownum"] == 2


def test_count_window_computes_over_another_table(wh):
    """Reference example: each row written to tb1 averages tb2's col1 over the 5 minutes before it."""
    sql(wh, """CREATE TABLE tb1 (ts TIMESTAMP, v INT); CREATE TABLE tb2 (ts TIMESTAMP, col1 DOUBLE);
               INSERT INTO tb2 VALUES ('2025-01-01 00:00:00', 1) ('2025-01-01 00:03:00', 2) ('2025-01-01 00:07:00', 4)
                                      ('2025-01-01 00:09:00', 8)""")
    sql(wh, """CREATE STREAM cw count_window(1) FROM tb1 INTO tb3 AS
               SELECT _twstart, avg(col1) FROM tb2 WHERE _c0 >= _twend - 5m AND _c0 <= _twend""")
    sql(wh, "INSERT INTO tb1 VALUES ('2025-01-01 00:04:00', 1) ('2025-01-01 00:10:00', 1)")
    run(wh, "cw")
    got = {r["_twstart"]: r["avg_col1"] for r in select(wh, "SELECT * FROM tb3")}
    # 00:04 -> tb2 rows in [23:59, 00:04] = {1, 2}; 00:10 -> [00:05, 00:10] = {4, 8}
    assert got == {at(4): 1.5, at(10): 6.0}


def test_count_window_trows_after_pre_filter(wh):
    """sm2's count window: %%trows holds the window's rows that passed PRE_FILTER, with a valid trigger column."""
    sql(wh, "CREATE TABLE tb1 (ts TIMESTAMP, col1 INT, col2 INT)")
    sql(wh, """CREATE STREAM cw3 count_window(3, 3, col1) FROM tb1 STREAM_OPTIONS(PRE_FILTER(col2 > 0)) INTO out AS
               SELECT _twstart, avg(col1), count(*) FROM %%trows""")
    sql(wh, """INSERT INTO tb1 VALUES ('2025-01-01 00:00:00', 1, 1) ('2025-01-01 00:01:00', 100, -1)
               ('2025-01-01 00:02:00', NULL, 1) ('2025-01-01 00:03:00', 3, 1) ('2025-01-01 00:04:00', 5, 1)
               ('2025-01-01 00:05:00', 7, 1)""")
    run(wh, "cw3")
    # valid rows: 00:00 (1), 00:03 (3), 00:04 (5) -> one window; 00:01 fails PRE_FILTER, 00:02 has NULL col1
    assert select(wh, "SELECT * FROM out") == [{"_twstart": at(0), "avg_col1": 3.0, "count": 3}]


def test_period_placeholders_and_trows(wh):
    """PERIOD(1h): _tlocaltime (ns), _tprev/_tnext_localtime, and %%trows = rows written between triggers."""
    sql(wh, "CREATE TABLE tb1 (ts TIMESTAMP, v INT)")
    sql(wh, """CREATE STREAM hourly PERIOD(1h) FROM tb1 INTO tb2 AS
               SELECT cast(_tlocaltime/1000000 AS TIMESTAMP) ts, _tprev_localtime, _tnext_localtime, count(*) n
               FROM %%trows""")
    store = StreamStore()
    state = store.load_state("d", "hourly")
    wall = datetime.now(UTC)
    created = wall.replace(minute=0, second=0, microsecond=0) - timedelta(hours=2, minutes=30)
    store.save_state("d", "hourly", state.replace(created=created))
    sql(wh, "INSERT INTO tb1 VALUES ('2025-01-01 00:00:00', 1) ('2025-01-01 00:01:00', 2)")
    written = datetime.now(UTC)
    now = written + timedelta(hours=1)
    report = run(wh, "hourly", now=now)
    hour = timedelta(hours=1)
    first = created.replace(minute=0) + hour
    instants = []
    t = first
    while t <= now:
        instants.append(t)
        t += hour
    assert report.triggers == len(instants)
    rows = {r["ts"]: r for r in select(wh, "SELECT * FROM tb2")}
    assert sorted(rows) == instants
    ns = 1_000_000_000
    for t in instants:
        r = rows[t]
        assert r["_tprev_localtime"] == int((t - hour).timestamp()) * ns
        assert r["_tnext_localtime"] == int((t + hour).timestamp()) * ns
        # the two rows were committed at `written`: only the first instant after it sees them
        assert r["n"] == (2 if t - hour < written <= t else 0)


def test_sliding_trigger_over_event_time(wh):
    sql(wh, METERS)
    sql(wh, """CREATE STREAM sl SLIDING(1m) FROM stb1 PARTITION BY tbname INTO slout AS
               SELECT _tcurrent_ts, _tprev_ts, _tnext_ts, count(*) n, %%tbname tb FROM %%trows""")
    sql(wh, "INSERT INTO t1 VALUES ('2025-01-01 00:00:30', 1) ('2025-01-01 00:01:10', 2) "
            "('2025-01-01 00:02:20', 3)")
    run(wh, "sl")
    rows = sorted(select(wh, "SELECT * FROM slout"), key=lambda r: r["_tcurrent_ts"])
    # event time passed 00:01 and 00:02; each instant's %%trows is [previous, current)
    assert [(r["_tcurrent_ts"], r["_tprev_ts"], r["_tnext_ts"], r["n"], r["tb"]) for r in rows] == [
        (at(1), at(0), at(2), 1, "t1"), (at(2), at(1), at(3), 1, "t1")]
    sql(wh, "INSERT INTO t1 VALUES ('2025-01-01 00:03:05', 4)")
    run(wh, "sl")
    assert len(select(wh, "SELECT * FROM slout")) == 3


def test_tbname_and_tags_with_quotes_do_not_alter_the_query(wh):
    sql(wh, "CREATE STABLE s (ts TIMESTAMP, v INT) TAGS (note VARCHAR(60))")
    evil = "x' OR '1'='1"
    sql(wh, f"""CREATE TABLE `a'b` USING s TAGS ('{evil.replace("'", "''")}');
                CREATE TABLE c USING s TAGS ('plain')""")
    sql(wh, """CREATE STREAM inj INTERVAL(1m) SLIDING(1m) FROM s PARTITION BY tbname, note
               INTO o OUTPUT_SUBTABLE(concat('o_', %%1)) TAGS (src VARCHAR(60) AS note) AS
               SELECT _twstart, count(*) n, %%tbname tb, %%2 note FROM %%tbname
               WHERE note = %%2 AND _c0 >= _twstart AND _c0 < _twend""")
    sql(wh, """INSERT INTO `a'b` VALUES ('2025-01-01 00:00:10', 1) ('2025-01-01 00:02:00', 1);
               INSERT INTO c VALUES ('2025-01-01 00:00:20', 1) ('2025-01-01 00:00:30', 1) ('2025-01-01 00:02:00', 1)""")
    run(wh, "inj")
    got = {r["tb"]: r for r in select(wh, "SELECT * FROM o") if r["_twstart"] == at(0)}
    assert got["a'b"]["n"] == 1 and got["a'b"]["note"] == evil and got["a'b"]["src"] == evil
    assert got["a'b"]["tbname"] == "o_a'b"
    assert got["c"]["n"] == 2 and got["c"]["tbname"] == "o_c"
    assert len(select(wh, "SELECT * FROM s")) == 5  # the source is untouched


def test_rerun_of_the_same_triggers_is_idempotent(wh):
    sql(wh, METERS)
    sql(wh, """CREATE STREAM idem INTERVAL(5m) SLIDING(5m) FROM stb1 PARTITION BY tbname INTO o AS
               SELECT _twstart, sum(col1) FROM %%tbname WHERE _c0 >= _twstart AND _c0 < _twend""")
    sql(wh, ROWS)
    run(wh, "idem")
    before = sorted(json.dumps(r, default=str) for r in select(wh, "SELECT * FROM o"))
    store = StreamStore()
    state = store.load_state("d", "idem")
    store.save_state("d", "idem", state.replace(consumed_batch=-1))  # as if killed before recording progress
    again = run(wh, "idem")
    assert again.triggers == 4
    after = sorted(json.dumps(r, default=str) for r in select(wh, "SELECT * FROM o"))
    assert after == before and len(after) == 4


def test_batched_and_per_trigger_compute_agree(wh):
    sql(wh, METERS)
    sql(wh, ROWS)
    sql(wh, """CREATE STREAM ag INTERVAL(5m) SLIDING(5m) FROM stb1 PARTITION BY tbname INTO o AS
               SELECT _twstart + 1s, avg(col1) * _twduration, count(*), max(col1) + length(%%1), %%1 FROM stb1
               WHERE ts >= _twstart AND ts < _twend AND tbname = %%tbname""")
    stored = StreamStore().get("d", "ag")
    rt = StreamRuntime(wh, stored.statement, "d")
    fired = [Fired(i, {"_twstart": at(5 * i), "_twend": at(5 * i + 5), "_twduration": 300_000,
                              "%%1": name, "%%tbname": name}, group=(name,), group_id=str(i))
             for i, name in enumerate(["t1", "t2", "t1", "nope"])]
    batched = sorted(map(tuple, rt.compute.frame(fired).toPandas().itertuples(index=False)), key=str)
    assert rt.compute.batched_reason is None
    single = sorted(map(tuple, rt.compute.frame(fired, batched=False).toPandas().itertuples(index=False)), key=str)
    assert str(batched) == str(single)
    assert len(batched) == 4  # an aggregate over no rows still gives its one row, as the query alone does


@pytest.mark.parametrize("reader", ["delta-rs", "spark"])
def test_trows_holds_the_rows_of_the_window_at_the_triggers_version(wh, monkeypatch, reader):
    """%%trows of a few rows is read by delta-rs into a local relation, of many by Spark: either way
    it holds the window's rows as the trigger's table version had them."""
    from airflow_stream_provider.streams import compute

    if reader == "spark":
        monkeypatch.setattr(compute, "FEW_ROWS", 0)
    sql(wh, METERS)
    sql(wh, ROWS)
    sql(wh, """CREATE STREAM tr INTERVAL(5m) SLIDING(5m) FROM stb1 PARTITION BY tbname INTO o AS
               SELECT _twstart, sum(col1) total, count(*) n FROM %%trows""")
    rt = StreamRuntime(wh, StreamStore().get("d", "tr").statement, "d")
    version = rt.table_version()
    sql(wh, "INSERT INTO t1 VALUES ('2025-01-01 00:02:00', 100)")  # written after the triggers fired
    windows = [("t1", 0), ("t1", 5), ("t1", 10), ("t2", 0), ("t2", 10), ("t2", 15)]
    fired = [Fired(i, {"_twstart": at(start), "_twend": at(start + 5), TROWS_FROM: at(start),
                              TROWS_TO: at(start + 5), **rt.group_values((name,))},
                          version=version, group=(name,), group_id=name)
             for i, (name, start) in enumerate(windows)]
    frame = rt.compute.frame(fired)
    plan = frame._jdf.queryExecution().optimizedPlan().toString()
    assert ("] parquet" in plan) == (reader == "spark")  # Spark scans the table's files, delta-rs hands over rows
    got = {r["__idx"]: (r["total"], r["n"]) for r in frame.toArrow().to_pylist()}
    # by hand from ROWS: t1 has 1, 3 in [00:00, 00:05), 10 in [00:05, 00:10), 5 in [00:10, 00:15);
    # t2 has 7, 8, 1 at 00:02, 00:07, 00:12, and nothing from 00:15
    assert got == {0: (4, 2), 1: (10, 1), 2: (5, 1), 3: (7, 1), 4: (1, 1), 5: (None, 0)}


def test_trows_of_a_table_with_deletion_vectors_comes_from_the_kernels_scan(wh, spark):
    """A trigger table with deletion vectors (set up outside the warehouse) is read by the kernel's
    scan, which honours them: the deleted rows are not in %%trows (pyarrow's dataset of its files would
    still hold them)."""
    sql(wh, METERS)
    sql(wh, ROWS)
    sql(wh, """CREATE STREAM dv INTERVAL(5m) SLIDING(5m) FROM stb1 PARTITION BY tbname INTO o AS
               SELECT _twstart, sum(col1) total, count(*) n FROM %%trows""")
    rt = StreamRuntime(wh, StreamStore().get("d", "dv").statement, "d")
    path = rt.compute.source.path
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    spark.sql(f"DELETE FROM delta.`{path}` WHERE col1 = 3")  # t1's row at 00:01
    fired = [Fired(0, {"_twstart": at(0), "_twend": at(5), TROWS_FROM: at(0), TROWS_TO: at(5),
                              **rt.group_values(("t1",))}, version=rt.table_version(), group=("t1",), group_id="t1")]
    frame = rt.compute.frame(fired)
    assert "] parquet" not in frame._jdf.queryExecution().optimizedPlan().toString()  # rows handed over
    # by hand: t1 keeps only its row of 1 in [00:00, 00:05)
    assert [(r["total"], r["n"]) for r in frame.toArrow().to_pylist()] == [(1, 1)]


def test_placeholder_inside_an_aggregate_runs_per_trigger(wh):
    sql(wh, METERS)
    sql(wh, """CREATE STREAM pa INTERVAL(5m) SLIDING(5m) FROM stb1 PARTITION BY tbname INTO o AS
               SELECT _twstart, sum(col1 * _twrownum) FROM %%tbname WHERE _c0 >= _twstart AND _c0 < _twend""")
    sql(wh, ROWS)
    report = run(wh, "pa")
    assert "aggregate" in (report.per_trigger or "")
    got = {(r["tag_tbname"], r["_twstart"]): r["sum_col1__twrownum"] for r in select(wh, "SELECT * FROM o")}
    assert got == {("t1", at(0)): (1 + 3) * 2, ("t1", at(5)): 10, ("t2", at(0)): 7, ("t2", at(5)): 8}


def test_force_output_and_null_first_column(wh):
    sql(wh, "CREATE TABLE src (ts TIMESTAMP, v INT)")
    sql(wh, """CREATE STREAM fo PERIOD(1h) STREAM_OPTIONS(FORCE_OUTPUT) INTO fo_out AS
               SELECT cast(_tlocaltime/1000000 AS TIMESTAMP) ts, v, 'k' tag FROM src WHERE v > 100""")
    sql(wh, """CREATE STREAM nul PERIOD(1h) INTO nul_out AS SELECT max(ts) ts, count(*) n FROM src""")
    store = StreamStore()
    created = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(minutes=30)
    for name in ("fo", "nul"):
        store.save_state("d", name, store.load_state("d", name).replace(created=created))
    report = run(wh, "fo", now=created + timedelta(hours=1))
    assert report.triggers == 1 and report.forced == 1
    assert select(wh, "SELECT * FROM fo_out") == [{"ts": created + timedelta(minutes=30), "v": None, "tag": "k"}]
    # max(ts) of an empty table is NULL: the row is discarded and counted
    report = run(wh, "nul", now=created + timedelta(hours=1))
    assert report.discarded == 1 and report.written == 0


def test_output_rules_checked_at_create(wh):
    sql(wh, "CREATE TABLE src (ts TIMESTAMP, v INT)")
    with pytest.raises(StreamDefinitionError, match="first output column .* must be a TIMESTAMP"):
        sql(wh, "CREATE STREAM bad1 PERIOD(1h) INTO o1 AS SELECT count(*), max(ts) FROM src")
    sql(wh, "CREATE TABLE taken (ts TIMESTAMP, total DOUBLE)")
    with pytest.raises(StreamError, match="column total is DOUBLE"):
        sql(wh, "CREATE STREAM bad2 PERIOD(1h) INTO taken (ts, total) AS SELECT max(ts), count(*) FROM src")
    with pytest.raises(StreamDefinitionError, match="names 3 columns, but the computation returns 2"):
        sql(wh, "CREATE STREAM bad3 PERIOD(1h) INTO o3 (a, b, c) AS SELECT max(ts), count(*) FROM src")
    assert not StreamStore().names("d")  # nothing was recorded
    sql(wh, "CREATE TABLE fits (ts TIMESTAMP, total BIGINT)")
    sql(wh, "CREATE STREAM ok PERIOD(1h) INTO fits (ts, total) AS SELECT max(ts), count(*) FROM src")
    assert StreamStore().names("d") == [("d", "ok")]


def test_rename_composite_key_and_tags(wh):
    sql(wh, METERS)
    sql(wh, """CREATE STREAM ck INTERVAL(5m) SLIDING(5m) FROM stb1 PARTITION BY tbname, loc
               INTO ck_out (wstart, k COMPOSITE KEY, total) TAGS (place VARCHAR(30) AS concat(loc, '!')) AS
               SELECT _twstart, 1, sum(col1) FROM %%tbname WHERE _c0 >= _twstart AND _c0 < _twend""")
    sql(wh, ROWS)
    run(wh, "ck")
    rows = select(wh, "SELECT * FROM ck_out")
    assert {(r["place"], r["wstart"], r["k"], r["total"]) for r in rows} == {
        ("a!", at(0), 1, 4), ("a!", at(5), 1, 10), ("b!", at(0), 1, 7), ("b!", at(5), 1, 8)}


def test_group_by_a_regular_column(wh):
    """TDengine cannot group by a regular column yet; a stream here can."""
    sql(wh, "CREATE TABLE ev (ts TIMESTAMP, kind VARCHAR(10), v INT)")
    sql(wh, """CREATE STREAM rg INTERVAL(1m) SLIDING(1m) FROM ev PARTITION BY kind INTO rg_out AS
               SELECT _twstart, sum(v) FROM %%trows""")
    sql(wh, """INSERT INTO ev VALUES ('2025-01-01 00:00:01', 'a', 1) ('2025-01-01 00:00:02', 'b', 10)
               ('2025-01-01 00:00:03', 'a', 2) ('2025-01-01 00:01:30', 'a', 0) ('2025-01-01 00:01:31', 'b', 0)""")
    run(wh, "rg")
    got = {(r["kind"], r["_twstart"]): r["sum_v"] for r in select(wh, "SELECT * FROM rg_out")}
    assert got == {("a", at(0)): 3, ("b", at(0)): 10}


def test_nested_stream_reads_another_streams_output(wh):
    sql(wh, METERS)
    sql(wh, """CREATE STREAM inner_s INTERVAL(5m) SLIDING(5m) FROM stb1 PARTITION BY tbname INTO lvl1 AS
               SELECT _twstart, sum(col1) FROM %%trows""")
    sql(wh, """CREATE STREAM outer_s COUNT_WINDOW(2) FROM lvl1 PARTITION BY tbname INTO lvl2 AS
               SELECT _twstart, sum(sum_col1) FROM %%trows""")
    sql(wh, ROWS)
    run(wh, "inner_s")
    run(wh, "outer_s")
    got = {r["tag_tbname"]: r["sum_sum_col1"] for r in select(wh, "SELECT * FROM lvl2")}
    # lvl1 per group: t1 -> 4, 10; t2 -> 7, 8; two rows per count window
    assert sorted(got.values()) == [14, 15] and len(got) == 2


def test_delete_output_table_when_the_trigger_subtable_is_dropped(wh):
    sql(wh, METERS)
    sql(wh, """CREATE STREAM dot INTERVAL(5m) SLIDING(5m) FROM stb1 PARTITION BY tbname
               STREAM_OPTIONS(DELETE_OUTPUT_TABLE) INTO dot_out AS SELECT _twstart, count(*) FROM %%trows""")
    sql(wh, ROWS)
    run(wh, "dot")
    assert {r["tag_tbname"] for r in select(wh, "SELECT * FROM dot_out")} == {"t1", "t2"}
    sql(wh, "DROP TABLE t2")
    report = run(wh, "dot")
    assert len(report.deleted_subtables) == 1
    assert {r["tag_tbname"] for r in select(wh, "SELECT * FROM dot_out")} == {"t1"}


def test_drop_stream_keeps_outputs_and_cli_run(wh, capsys):
    from airflow_stream_provider import cli

    sql(wh, METERS)
    sql(wh, """CREATE STREAM cl INTERVAL(5m) SLIDING(5m) FROM stb1 INTO cl_out AS
               SELECT _twstart, count(*) FROM %%trows""")
    sql(wh, ROWS)
    assert cli.main(["run", "d.cl", "--until-idle"]) == 0
    assert "2 triggers, 2 rows written" in capsys.readouterr().out
    sql(wh, "DROP STREAM cl")
    assert len(select(wh, "SELECT * FROM cl_out")) == 2
    assert cli.main(["run", "d.cl", "--until-idle"]) == 2
    assert "stream d.cl does not exist" in capsys.readouterr().err
    sql(wh, "DROP STREAM IF EXISTS cl")
    with pytest.raises(StreamError, match="does not exist"):
        sql(wh, "DROP STREAM cl")
