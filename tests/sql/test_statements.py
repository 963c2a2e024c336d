"""Stream management, table statements, TRUE_FOR forms and time syntax parse to their models."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.sql import parse

D = m.Duration
T = m.TableName


def one(text):
    [stmt] = parse(text)
    return stmt


@pytest.mark.parametrize(
    "clause, expected",
    [
        ("TRUE_FOR(10m)", m.TrueFor(D(10, "m"))),
        ("TRUE_FOR(COUNT 5)", m.TrueFor(None, 5)),
        ("TRUE_FOR(10m AND COUNT 5)", m.TrueFor(D(10, "m"), 5, "AND")),
        ("TRUE_FOR(COUNT 5 OR 10s)", m.TrueFor(D(10, "s"), 5, "OR")),
        ("", None),
    ],
)
def test_true_for_forms(clause, expected):
    stmt = one(f"CREATE STREAM s STATE_WINDOW(status) {clause} FROM t PARTITION BY tbname "
               "NOTIFY('ws://h:9') ON (WINDOW_OPEN | WINDOW_CLOSE)")
    assert stmt.trigger.true_for == expected


@pytest.mark.parametrize(
    "clause, expected",
    [  # TDengine 3.4.2: streaks before an event window opens and closes, in any order
        ("TRUE_FOR(start(COUNT 2))", m.TrueFor(start=m.TrueFor(None, 2))),
        ("TRUE_FOR(end(3s))", m.TrueFor(end=m.TrueFor(D(3, "s")))),
        ("TRUE_FOR(end(COUNT 3), 5s, start(2s OR COUNT 2))",
         m.TrueFor(D(5, "s"), start=m.TrueFor(D(2, "s"), 2, "OR"), end=m.TrueFor(None, 3))),
    ],
)
def test_true_for_streaks_of_event_windows(clause, expected):
    stmt = one(f"CREATE STREAM s EVENT_WINDOW(START WITH v > 1 END WITH v < 0) {clause} FROM t PARTITION BY tbname "
               "NOTIFY('ws://h:9') ON (WINDOW_CLOSE)")
    assert stmt.trigger.true_for == expected
    again = one(f"CREATE STREAM s {stmt.trigger} FROM t PARTITION BY tbname NOTIFY('ws://h:9') ON (WINDOW_CLOSE)")
    assert again.trigger.true_for == expected


def _keys(*texts: str) -> tuple:
    return tuple(m.SqlExpression(t, None) for t in texts)


@pytest.mark.parametrize(
    "trigger, keys, extend, zeroth, text",
    [  # the forms of TDengine 3.3.8 / 3.4.x, and the single-key form of 3.3.6 (key, extend[, zeroth])
        ("STATE_WINDOW(s1, s2) EXTEND(0) ZEROTH_STATE(1, NO_ZEROTH)", ("s1", "s2"), 0, (1, None),
         "STATE_WINDOW(s1, s2) ZEROTH_STATE(1, NO_ZEROTH)"),
        ("STATE_WINDOW(c_int, CASE WHEN v > 1 THEN 1 ELSE 0 END) EXTEND(2)",
         ("c_int", "CASE WHEN v > 1 THEN 1 ELSE 0 END"), 2, None, None),
        ("STATE_WINDOW(voltage >= 220 + groupId)", ("voltage >= 220 + groupId",), 0, None, None),
        ("STATE_WINDOW(mode, flag, 'x' || name) ZEROTH_STATE('idle', FALSE, NO_ZEROTH) TRUE_FOR(COUNT 2)",
         ("mode", "flag", "'x' || name"), 0, ("idle", False, None), None),
        ("STATE_WINDOW(c1, 1)", ("c1",), 1, None, "STATE_WINDOW(c1) EXTEND(1)"),
        ("STATE_WINDOW(c1, 2, 0)", ("c1",), 2, (0,), "STATE_WINDOW(c1) EXTEND(2) ZEROTH_STATE(0)"),
    ],
)
def test_state_window_of_several_keys(trigger, keys, extend, zeroth, text):
    stmt = one(f"CREATE STREAM s {trigger} FROM t PARTITION BY tbname NOTIFY('ws://h:9') ON (WINDOW_CLOSE)")
    assert (stmt.trigger.keys, stmt.trigger.extend, stmt.trigger.zeroth) == (_keys(*keys), extend, zeroth)
    assert str(stmt.trigger) == (text or trigger)


@pytest.mark.parametrize(
    "trigger, expected",
    [
        ("PERIOD(1d, 1h)", m.PeriodTrigger(D(1, "d"), D(1, "h"))),
        ("SLIDING(1h, 5m)", m.SlidingTrigger(D(1, "h"), D(5, "m"))),
        ("INTERVAL(1h, 10m) SLIDING(30m)", m.IntervalWindow(D(1, "h"), D(30, "m"), D(10, "m"))),
        ("SESSION(ts, 30s)", m.SessionWindow("ts", D(30, "s"))),
        ("SESSION(ts, 30S)", m.SessionWindow("ts", D(30, "s"))),
        ("INTERVAL(1H) SLIDING(5M)", m.IntervalWindow(D(1, "h"), D(5, "m"))),
        ("COUNT_WINDOW(100)", m.CountWindow(100)),
        ("COUNT_WINDOW(100, 50)", m.CountWindow(100, 50)),
        ("COUNT_WINDOW(100, 50, c1, c2)", m.CountWindow(100, 50, ("c1", "c2"))),
        ("COUNT_WINDOW(100, c1)", m.CountWindow(100, None, ("c1",))),
    ],
)
def test_every_trigger_type(trigger, expected):
    stmt = one(f"CREATE STREAM s {trigger} FROM t NOTIFY('ws://h:9') ON (WINDOW_CLOSE)"
               if "PERIOD" not in trigger and "SLIDING(1h" not in trigger
               else f"CREATE STREAM s {trigger} FROM t NOTIFY('ws://h:9')")
    assert stmt.trigger == expected


def test_event_window_conditions_and_full_output_clause():
    stmt = one("""CREATE STREAM IF NOT EXISTS db.s
      EVENT_WINDOW(START WITH (v > 10 AND CASE WHEN w > 1 THEN 1 END = 1) END WITH v < 5) TRUE_FOR(1m)
      FROM db.meters PARTITION BY tbname, location
      STREAM_OPTIONS(WATERMARK(10s) | EXPIRED_TIME(1d) | IGNORE_DISORDER | DELETE_RECALC | DELETE_OUTPUT_TABLE
                     | FILL_HISTORY('2025-01-01 00:00:00') | LOW_LATENCY_CALC | PRE_FILTER(v IS NOT NULL)
                     | FORCE_OUTPUT | MAX_DELAY(10s) | EVENT_TYPE(WINDOW_OPEN|WINDOW_CLOSE))
      NOTIFY('ws://127.0.0.1:8080/a', "wss://h:443/b") ON (WINDOW_CLOSE) WHERE avg_v > 3
        NOTIFY_OPTIONS(ON_FAILURE_PAUSE)
      INTO db.out OUTPUT_SUBTABLE(concat('o_', tbname, '_', location))
      (ws, loc COMPOSITE KEY, avg_v)
      TAGS (dev VARCHAR(64) COMMENT 'device' AS tbname, place NCHAR(32) AS upper(location))
      AS SELECT _twstart, %%2, avg(v) FROM %%tbname WHERE ts >= _twstart""")
    assert stmt.trigger.start.text == "(v > 10 AND CASE WHEN w > 1 THEN 1 END = 1)"
    assert stmt.trigger.end.text == "v < 5"
    assert stmt.partition_by == ("tbname", "location")
    opts = stmt.options
    assert opts.watermark == D(10, "s") and opts.expired_time == D(1, "d")
    assert opts.ignore_disorder and opts.delete_recalc and opts.delete_output_table and opts.low_latency_calc
    assert opts.fill_history == m.FillHistory(m.TimePoint(at=datetime(2025, 1, 1, tzinfo=UTC)))
    assert opts.event_types == (m.EventType.WINDOW_OPEN, m.EventType.WINDOW_CLOSE)
    assert opts.force_output and opts.max_delay == D(10, "s")
    assert len(opts.given) == 11
    assert stmt.notify.where.text == "avg_v > 3" and stmt.notify.on_failure_pause and not stmt.notify.history
    assert stmt.columns == (m.OutputColumn("ws"), m.OutputColumn("loc", True), m.OutputColumn("avg_v"))
    assert stmt.tags[0] == m.TagDefinition("dev", m.DataType("VARCHAR", (64,)), stmt.tags[0].expr, "device")
    assert stmt.tags[1].expr.text == "upper(location)"
    assert stmt.placeholders == {"_twstart", "%%2"}


@pytest.mark.parametrize(
    "text, expected",
    [
        ("DROP STREAM IF EXISTS db.s", m.DropStream(T("s", "db"), True, position=None, text="")),
        ("SHOW db.STREAMS", m.ShowStreams("db", position=None, text="")),
        ("SHOW STREAMS", m.ShowStreams(None, position=None, text="")),
        ("START STREAM IF EXISTS IGNORE UNTREATED s", m.StartStream(T("s"), True, True, position=None, text="")),
        ("STOP STREAM db.s", m.StopStream(T("s", "db"), False, position=None, text="")),
        ("CREATE DATABASE IF NOT EXISTS power PRECISION 'us'",
         m.CreateDatabase("power", True, "us", position=None, text="")),
        ("USE power", m.UseDatabase("power", position=None, text="")),
        ("DROP DATABASE IF EXISTS power", m.DropDatabase("power", True, position=None, text="")),
        ("DROP TABLE IF EXISTS d1, power.d2", m.DropTable((T("d1"), T("d2", "power")), True, position=None, text="")),
        ("DROP STABLE meters", m.DropTable((T("meters"),), False, True, position=None, text="")),
    ],
)
def test_management_and_ddl_statements(text, expected):
    assert one(text) == expected


def test_recalculate_with_absolute_and_relative_times():
    stmt = one("RECALCULATE STREAM db.s FROM '2025-01-01 08:00:00+08:00' TO now - 1h")
    assert stmt.start.at == datetime(2025, 1, 1, tzinfo=UTC)
    now = datetime(2025, 6, 1, 12, tzinfo=UTC)
    assert stmt.end.resolve(now) == now - timedelta(hours=1)
    with pytest.raises(StreamDefinitionError, match="TO must be later than FROM"):
        parse("RECALCULATE STREAM s FROM '2025-01-02' TO '2025-01-01'")


def test_naive_timestamps_use_the_configured_zone(monkeypatch):
    monkeypatch.setenv("AIRFLOW_STREAM_TIMEZONE", "Asia/Shanghai")
    stmt = one("RECALCULATE STREAM s FROM '2025-01-01 08:00:00' TO 1735693200000")
    assert stmt.start.at == datetime(2025, 1, 1, 0, 0, tzinfo=UTC)
    assert stmt.start.at.utcoffset() == timedelta(hours=8)
    assert stmt.end.at == datetime(2025, 1, 1, 1, tzinfo=UTC)


def test_supertable_subtables_and_regular_tables():
    st, sub1, sub2, reg = parse("""
        CREATE STABLE IF NOT EXISTS power.meters (ts TIMESTAMP, current FLOAT, voltage INT UNSIGNED,
            phase DOUBLE) TAGS (groupid INT, location VARCHAR(24));
        CREATE TABLE d1 USING power.meters TAGS (2, 'California.SanFrancisco')
                     IF NOT EXISTS d2 USING power.meters (location) TAGS ("LA");
        CREATE TABLE log (ts TIMESTAMP, seq BIGINT PRIMARY KEY, msg NCHAR(100) COMMENT 'text');
    """)
    assert st.columns[2] == m.ColumnDefinition("voltage", m.DataType("INT UNSIGNED"))
    assert [t.name for t in st.tags] == ["groupid", "location"]
    assert sub1 == m.CreateSubTable(T("d1"), T("meters", "power"), (2, "California.SanFrancisco"),
                                    position=None, text="")
    assert sub2.tag_names == ("location",) and sub2.if_not_exists
    assert reg.columns[1].primary_key and reg.columns[2].comment == "text"
    # CREATE TABLE ... TAGS is also a supertable
    assert isinstance(one("CREATE TABLE st (ts TIMESTAMP, v INT) TAGS (t INT)"), m.CreateSuperTable)


def test_multi_row_multi_table_insert():
    stmt = one("""INSERT INTO d1 USING meters TAGS (2, 'SF') VALUES ('2025-01-01 00:00:00', 10.3, 219, 0.31)
                  (now, -1.5, NULL, 1e-3) d2 (ts, current) VALUES (1735689600000, true) (now + 1s, false)""")
    d1, d2 = stmt.targets
    assert d1.using == T("meters") and d1.tag_values == (2, "SF")
    assert d1.rows[0] == ("2025-01-01 00:00:00", 10.3, 219, 0.31)
    assert d1.rows[1][0] == m.TimePoint(now_offset_micros=0) and d1.rows[1][1:] == (-1.5, None, 0.001)
    assert d2.columns == ("ts", "current") and d2.rows[1] == (m.TimePoint(now_offset_micros=1_000_000), False)
    assert stmt.row_count == 4


def test_delete_and_select():
    delete, select = parse("DELETE FROM d1 WHERE ts < '2025-01-01'; SELECT avg(current) FROM power.meters")
    assert delete.where.text == "ts < '2025-01-01'"
    assert isinstance(select, m.Select) and select.text == "SELECT avg(current) FROM power.meters"


@pytest.mark.parametrize(
    "text, words",
    [
        ("CREATE DATABASE d PRECISION 'ns'", "PRECISION 'ns' is not supported"),
        ("CREATE DATABASE d REPLICA 3", "database option REPLICA is not supported"),
        ("CREATE STABLE st (v INT, ts TIMESTAMP) TAGS (t INT)", "the first column must be a TIMESTAMP"),
        ("CREATE STABLE st (ts TIMESTAMP, g GEOMETRY(100)) TAGS (t INT)", "GEOMETRY type is not supported"),
        ("CREATE STABLE st (ts TIMESTAMP, v INT)", "CREATE STABLE needs TAGS"),
        ("CREATE TABLE t (ts TIMESTAMP, v VARCHR(10))", "unknown data type VARCHR"),
        ("INSERT INTO d1 VALUES (now, 1) (now, 1, 2)", "has 3 values, expected 2"),
        ("INSERT INTO d1 SELECT * FROM d2", "INSERT ... SELECT is not supported"),
        ("SHOW VNODES", "only SHOW [db.]STREAMS, STABLES or TABLES"),
        ("UPDATE t SET v = 1", "unknown statement 'UPDATE'"),
        ("SELECT 'unclosed FROM t", "string starting here is not closed"),
        ("SELECT avgg(current) FROM meters", "unknown function AVGG"),
        ("DELETE FROM d1 WHERE tail(v) > 1", "function TAIL is not supported"),
    ],
)
def test_bad_table_statements(text, words):
    with pytest.raises(StreamDefinitionError) as info:
        parse(text)
    assert words in str(info.value)
    assert info.value.line == 1


@pytest.mark.parametrize("text, kind, fields", [
    ("SHOW STREAMS LIKE 'mode%'", m.ShowStreams, {"db": None, "like": "mode%"}),
    ("SHOW power.STREAMS LIKE 'a\\_b'", m.ShowStreams, {"db": "power", "like": "a\\_b"}),
    ("SHOW CREATE STREAM power.modes", m.ShowCreateStream, {"name": m.TableName("modes", "power")}),
])
def test_show_streams_like_and_show_create_stream(text, kind, fields):
    stmt = one(text)
    assert type(stmt) is kind and {k: getattr(stmt, k) for k in fields} == fields
