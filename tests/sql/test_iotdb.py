"""IoTDB statements: recognised by their shape beside TDengine's, parsed into the model, and every
rule of reference 004 a statement alone can break refused at its position."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import StreamDefinitionError, StreamError
from airflow_stream_provider.sql import parse
from airflow_stream_provider.sql.iotdb import recognises
from airflow_stream_provider.sql.iotdb.lexer import duration_micros

P = lambda text: m.SeriesPath(tuple(text.split(".")))  # noqa: E731


def one(text: str) -> m.Statement:
    (stmt,) = parse(text)
    return stmt


# --- recognition ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "iotdb"), [
    ("CREATE DATABASE root.ln", True),
    ("create database power", False),
    ("insert into root.sg(time,a,b) values (1,1,1)", True),
    ("insert into power.d1001 values (now, 1)", False),
    ("INSERT INTO `root`.t VALUES (now, 1)", False),
    ("select * from root.ln.**", True),
    ("select * from power.meters", False),
    ("SELECT count(s1) FROM root.sg.d GROUP BY(1s)", True),
    ("CREATE TIMESERIES root.ln.wf01.wt01.status WITH DATATYPE=BOOLEAN", True),
    ("CREATE CQ cq1 BEGIN SELECT count(s1) INTO root.x.d(c) FROM root.sg.d GROUP BY(1s) END", True),
    ("show cqs", True), ("SHOW CONTINUOUS QUERIES", True), ("drop cq cq1", True), ("show devices", True),
    ("SHOW STREAMS", False), ("delete from root.ln.** where time < 10", True),
    ("delete from power.meters where ts < now", False),
    ("-- a comment naming root.x\nselect * from power.meters", False),
    ("select 'from root.x' from power.meters", False),
])
def test_a_statement_is_recognised_by_its_shape(text, iotdb):
    assert recognises(text) is iotdb


def test_one_text_holds_both_languages_with_positions_of_the_whole_text():
    text = ("CREATE DATABASE power;\nCREATE DATABASE root.ln;\n"
            "INSERT INTO root.ln.wf01.wt01(time, temperature) VALUES (1, 2.5);\nSHOW STREAMS;")
    kinds = [type(s).__name__ for s in parse(text)]
    assert kinds == ["CreateDatabase", "CreateSeriesDatabase", "InsertPoints", "ShowStreams"]
    with pytest.raises(StreamDefinitionError) as err:
        parse("CREATE DATABASE power;\nINSERT INTO root.ln.wf01(time, s1) VALUES (1, 2, 3)")
    assert (err.value.line, err.value.column) == (2, 43)  # the row's "("


# --- databases, series, points -------------------------------------------------------------------


def test_databases_series_and_their_attributes():
    assert one("CREATE DATABASE root.ln").path == P("root.ln")
    series = one("create timeseries root.ln.wf01.wt01.temperature with datatype=FLOAT,encoding=RLE, "
                 "compressor=SNAPPY")
    assert series.series == (m.TimeseriesDefinition(P("root.ln.wf01.wt01.temperature"), m.SeriesType.FLOAT,
                                                    "RLE", "SNAPPY"),)
    short = one("CREATE TIMESERIES root.ln.wf02.wt02.hardware TEXT encoding=PLAIN")
    assert short.series[0].type is m.SeriesType.TEXT
    aligned = one("CREATE ALIGNED TIMESERIES root.ln.wf01.GPS(latitude FLOAT encoding=PLAIN compressor=SNAPPY, "
                  "longitude DOUBLE)")
    assert aligned.aligned and [s.path.last for s in aligned.series] == ["latitude", "longitude"]
    assert one("DELETE TIMESERIES root.ln.wf01.wt01.*, root.ln.**.status").patterns == (
        P("root.ln.wf01.wt01.*"), P("root.ln.**.status"))
    assert one("show timeseries root.ln.**").pattern == P("root.ln.**")
    assert one("SHOW DEVICES").pattern is None
    assert isinstance(one("SHOW DATABASES"), m.ShowSeriesDatabases)
    assert one("DELETE DATABASE root.ln, root.sg*").patterns == (P("root.ln"), P("root.sg*"))


def test_names_keep_their_case():
    stmt = one("INSERT INTO root.LN.Wf01(time, Temperature, temperature) VALUES (1, 1, 2)")
    assert stmt.device == P("root.LN.Wf01") and stmt.measurements == ("Temperature", "temperature")


def test_insert_values_and_iotdb_time_literals():
    stmt = one("insert into root.ln.wf02.wt02(timestamp, status, hardware, temperature) values "
               "(2021-05-11T22:18:14.598+08:00, true, 'v1', 121.0), (1620742699941, false, \"v2\", -3), "
               "(2021/05/11 22:18:25, null, 'x', 1e2)")
    (t1, v1), (t2, v2), (t3, v3) = stmt.rows
    assert t1 == m.TimePoint(at=datetime(2021, 5, 11, 22, 18, 14, 598000, tzinfo=timezone(timedelta(hours=8))))
    assert v1 == (True, "v1", 121.0)
    assert t2 == 1620742699941 and v2 == (False, "v2", -3)
    assert v3 == (None, "x", 100.0)
    assert t3.at == datetime(2021, 5, 11, 22, 18, 25, tzinfo=UTC)  # no zone: AIRFLOW_STREAM_TIMEZONE (UTC here)
    now = one("insert into root.sg.d(s1) values (1)")
    assert now.rows == ((None, (1,)),)
    aligned = one("insert into root.sg.gps(time, lat) aligned values (now() - 1d2h, 30.5)")
    assert aligned.aligned and aligned.rows[0][0] == m.TimePoint(now_offset_micros=-26 * 3_600_000_000)


@pytest.mark.parametrize(("text", "micros"), [("10s", 10_000_000), ("1d2h", 93_600_000_000), ("500ms", 500_000),
                                              ("3000ns", 3), ("1w", 604_800_000_000), ("2m30s", 150_000_000)])
def test_durations(text, micros):
    assert duration_micros(text) == micros


# --- queries -------------------------------------------------------------------------------------


def test_a_query_with_every_clause():
    stmt = one("select max_value(temperature) as t_max, count(status) from root.ln.*.*, "
               "root.sg.d where temperature > 20 and time >= 2021-05-11T22:18:00+08:00 "
               "group by ([2021-05-11T22:18:00+08:00, 2021-05-11T22:19:00+08:00), 10s, 5s), level = 1 "
               "having count(status) > 1 order by time desc fill(previous) limit 3 offset 1 slimit 2 soffset 0")
    query = stmt.query
    assert [i.alias for i in query.items] == ["t_max", None]
    assert query.items[0].expr == m.Call("max_value", (m.Ref(P("temperature")),))
    assert query.sources == (P("root.ln.*.*"), P("root.sg.d"))
    assert query.group_by.interval == m.Duration(10, "s") and query.group_by.step == m.Duration(5, "s")
    assert query.group_by.start.at == datetime(2021, 5, 11, 14, 18, tzinfo=UTC)
    assert query.levels == (1,) and query.descending and query.fill == m.SeriesFill("previous")
    assert (query.limit, query.offset, query.slimit, query.soffset) == (3, 1, 2, 0)


def test_expressions_and_placeholders():
    query = one("SELECT (s1 + s2) * -3, sin(s1), s1 % 2 INTO root.sg_bk.::(::), root.bk.${2}(${3}_x) "
                "FROM root.sg.d1 WHERE s1 BETWEEN 1 AND 5 OR s2 NOT IN (1, 2) ALIGN BY DEVICE").query
    first = query.items[0].expr
    assert first == m.Binary("*", m.Binary("+", m.Ref(P("s1")), m.Ref(P("s2"))), m.Literal(-3))
    assert query.items[1].expr == m.Call("sin", (m.Ref(P("s1")),))
    assert query.align_by_device
    assert query.into == (m.IntoItem(P("root.sg_bk.::"), ("::",)), m.IntoItem(P("root.bk.${2}"), ("${3}_x",)))
    assert isinstance(query.where, m.Binary) and query.where.op == "OR"
    assert one("select * from root.ln.**").query.items[0].expr == m.Ref(P("*"))
    assert one("select count(*) from root.ln.** group by level = 1, 2").query.levels == (1, 2)
    left_open = one("SELECT count(s1) FROM root.sg.d GROUP BY ((1, 100], 10ms)").query.group_by
    assert left_open.left_open and left_open.interval == m.Duration(10, "a")


@pytest.mark.parametrize(("text", "message", "at"), [
    ("select s1, count(s2) from root.sg.d", "cannot mix aggregates with raw series", "s1,"),
    ("select s1 from root.sg.d group by (1s)", "needs aggregates", "select"),
    ("select foo(s1) from root.sg.d", "unknown function foo", "foo"),
    ("select count(count(s1)) from root.sg.d", "cannot hold another aggregate", "count"),
    ("select s1 from root.sg.d, ln.d", "must be a full path starting with root", "ln.d"),
    ("insert into root.sg.d(time, s1) values (1, 2, 3)", "2 values for 1 measurements", "(1, 2"),
    ("insert into root.sg.d(s1) values (1), (2)", "several rows need their times", "root"),
    ("insert into root.sg.d(time, s*) values (1, 2)", "cannot hold wildcards", "s*"),
    ("create timeseries root.ln.wf01.wt01.t with datatype=FLOAT, encoding=FOO", "unknown ENCODING FOO", "FOO"),
    ("create timeseries root.ln.wf01.wt01.t with encoding=RLE", "needs a data type", "root"),
    ("create timeseries root.wf01 with datatype=FLOAT", "at least three nodes", "root"),
    # the node rule (security review N7): a node is not empty, holds no control character and has at most
    # 64 bytes; a device path, the devices table's tbname, at most 192
    ("insert into root.ln.`" + "a" * 5000 + "`(time, s1) values (1, 2)", "is 5000 bytes long", "`a"),
    ("insert into root.ln.`a\x00b`(time, s1) values (1, 2)", "contains '\\x00'", "`a"),
    ("insert into root.ln.d(time, `s\x1b[2J`) values (1, 2)", "contains '\\x1b'", "`s"),
    ("insert into root.ln.``(time, s1) values (1, 2)", "is empty", "``"),
    ("create timeseries root.ln.d.`" + "m" * 65 + "` with datatype=FLOAT", "is 65 bytes long", "`m"),
    ("select s1 from root.`\x07`", "contains '\\x07'", "`\x07"),
    ("insert into root.ln." + ".".join(["n" * 60] * 4) + "(time, s1) values (1, 2)",
     "a device path has at most 192 bytes", "root"),
    ("select s1 from root.sg.d limit 0", "must be positive", "0"),
    ("select count(s1) from root.sg.d group by ([2, 1), 1ms)", "range is empty", "select"),
    ("select count(s1) from root.sg.d group by ([1, 2), 1mo)", "fixed length", "1mo"),
    ("delete from root.sg.d.s1 where s1 > 1", "compares time only", "s1 >"),
    ("select s1 from root.sg.d fill(previous, 1m)", "one method for every column", ", 1m"),
    ("select 1 from root.sg.d where time > 10msx", "malformed number or duration", "10msx"),
])
def test_query_and_write_rules_are_positioned_errors(text, message, at):
    """``at``: the text the error points at (its first occurrence)."""
    with pytest.raises(StreamDefinitionError) as err:
        parse(text)
    assert message in str(err.value)
    assert (err.value.line, err.value.column) == (1, text.index(at) + 1)


# --- continuous queries --------------------------------------------------------------------------

CQ1 = """CREATE CONTINUOUS QUERY cq1
RESAMPLE EVERY 20s
BEGIN
SELECT max_value(temperature)
  INTO root.ln.wf02.wt02(temperature_max), root.ln.wf02.wt01(temperature_max)
  FROM root.ln.*.*
  GROUP BY(10s)
END"""


def test_a_continuous_query_is_a_stream_with_a_resample_trigger():
    stmt = one(CQ1)
    assert isinstance(stmt, m.CreateStream)
    assert stmt.name == m.TableName("cq1", db="root") and stmt.series.cq_id == "cq1"
    assert stmt.trigger == m.ResampleTrigger(every=m.Duration(20, "s"), start_offset=m.Duration(20, "s"),
                                             end_offset=m.Duration(0, "s"), boundary=0, policy="BLOCKED")
    assert stmt.series.query.group_by.interval == m.Duration(10, "s")
    assert stmt.text == CQ1


_B2022 = int(datetime(2021, 12, 31, 16, tzinfo=UTC).timestamp()) * 1_000_000  # 2022-01-01T00:00+08:00


@pytest.mark.parametrize(("resample", "group", "expected"), [
    # s1_count_cq: EVERY and the RANGE start default to the GROUP BY interval, the end to 0, BOUNDARY to 0
    ("", "30m", (1800, 1800, 0, 0, "BLOCKED")),
    ("RESAMPLE RANGE 40s", "10s", (10, 40, 0, 0, "BLOCKED")),  # cq2
    ("RESAMPLE EVERY 20s RANGE 40s, 20s", "10s", (20, 40, 20, 0, "BLOCKED")),  # cq4
    ("RESAMPLE EVERY 1h BOUNDARY 2022-01-01T00:00:00+08:00 TIMEOUT POLICY DISCARD", "1h",
     (3600, 3600, 0, _B2022, "DISCARD")),
    ("RESAMPLE BOUNDARY 1000", "30m", (1800, 1800, 0, 1_000_000, "BLOCKED")),  # an epoch number is milliseconds
    ("RESAMPLE EVERY 1h RANGE 30m", "10m", (3600, 1800, 0, 0, "BLOCKED")),  # RANGE below EVERY: allowed (the page)
])
def test_resample_defaults_and_values(resample, group, expected):
    stmt = one(f"CREATE CQ c {resample} BEGIN SELECT count(s1) INTO root.sg_count.d(count_s1) FROM root.sg.d "
               f"GROUP BY({group}) END")
    trig = stmt.trigger
    every, start, end, boundary, policy = expected
    assert (trig.every.micros, trig.start_offset.micros, trig.end_offset.micros) == (
        every * 1_000_000, start * 1_000_000, end * 1_000_000)
    assert (trig.boundary, trig.policy) == (boundary, policy)


@pytest.mark.parametrize(("text", "message", "at"), [
    ("CREATE CQ c BEGIN SELECT count(s1) FROM root.sg.d GROUP BY(1s) END", "needs an INTO clause", "SELECT"),
    ("CREATE CQ c BEGIN SELECT count(s1) INTO root.x.d(c) FROM root.sg.d WHERE time > 1 GROUP BY(1s) END",
     "cannot filter on time", "WHERE"),
    ("CREATE CQ c BEGIN SELECT count(s1) INTO root.x.d(c) FROM root.sg.d GROUP BY([1, 10), 1s) END",
     "has no [start, end) range", "GROUP"),
    ("CREATE CQ c BEGIN SELECT s1 INTO root.x.d(c) FROM root.sg.d END", "needs RESAMPLE EVERY", "CREATE"),
    ("CREATE CQ c RESAMPLE EVERY 500ms BEGIN SELECT count(s1) INTO root.x.d(c) FROM root.sg.d GROUP BY(1s) END",
     "below the smallest allowed, 1s", "500ms"),
    ("CREATE CQ c RESAMPLE EVERY 2s RANGE 1s, 2s BEGIN SELECT s1 INTO root.x.d(c) FROM root.sg.d END",
     "must be greater than its end offset", "1s,"),
    ("CREATE CQ c RESAMPLE RANGE 5s BEGIN SELECT count(s1) INTO root.x.d(c) FROM root.sg.d GROUP BY(10s) END",
     "must not exceed RANGE's start offset", "5s"),
    ("CREATE CQ c RESAMPLE RANGE -1s BEGIN SELECT s1 INTO root.x.d(c) FROM root.sg.d END",
     "must be a duration", "-1s"),
    ("CREATE CQ c RESAMPLE EVERY 1s TIMEOUT POLICY UNKNOWN BEGIN SELECT s1 INTO root.x.d(c) FROM root.sg.d END",
     "expected BLOCKED or DISCARD", "UNKNOWN"),
    ("CREATE CQ c RESAMPLE EVERY 1s BOUNDARY now() BEGIN SELECT s1 INTO root.x.d(c) FROM root.sg.d END",
     "BOUNDARY must be a fixed time", "now()"),
    ("CREATE CQ c RESAMPLE EVERY 1mo BEGIN SELECT s1 INTO root.x.d(c) FROM root.sg.d END", "fixed length", "1mo"),
])
def test_continuous_query_rules(text, message, at):
    with pytest.raises(StreamDefinitionError) as err:
        parse(text)
    assert message in str(err.value)
    assert (err.value.line, err.value.column) == (1, text.index(at) + 1)


def test_the_minimum_every_is_configurable(monkeypatch):
    monkeypatch.setenv("AIRFLOW_STREAM_CQ_MIN_EVERY", "100")
    stmt = one("CREATE CQ c RESAMPLE EVERY 500ms BEGIN SELECT s1 INTO root.x.d(c) FROM root.sg.d END")
    assert stmt.trigger.every.micros == 500_000


# --- triggers --------------------------------------------------------------------------------------


def test_create_trigger_with_every_clause_and_its_defaults():
    # reference 004's example statement
    stmt = one("""CREATE STATELESS TRIGGER triggerTest
        BEFORE INSERT
        ON root.sg.**
        AS 'org.apache.iotdb.trigger.ClusterAlertingExample'
        USING URI '/jar/ClusterAlertingExample.jar'
        WITH (
            "name" = "trigger",
            "limit" = "100"
        )""")
    assert stmt == m.CreateInsertTrigger(
        "triggerTest", m.TriggerType.STATELESS, m.TriggerEvent.BEFORE_INSERT, m.SeriesPath(("root", "sg", "**")),
        "org.apache.iotdb.trigger.ClusterAlertingExample", "/jar/ClusterAlertingExample.jar",
        (("name", "trigger"), ("limit", "100")), position=stmt.position, text="")
    bare = one("create trigger `Tr` after insert on root.ln.*.s1 as 'pkg.Cls'")
    assert (bare.name, bare.type, bare.event, bare.uri, bare.attributes) == (
        "Tr", m.TriggerType.STATELESS, m.TriggerEvent.AFTER_INSERT, None, ())
    assert one("CREATE STATEFUL TRIGGER t AFTER INSERT ON root.ln.** AS 'a.B'").type is m.TriggerType.STATEFUL
    assert one("DROP TRIGGER Tr") == m.DropInsertTrigger("Tr", position=m.Position(1, 1), text="")
    assert isinstance(one("show triggers"), m.ShowInsertTriggers)


@pytest.mark.parametrize("text", ["CREATE TRIGGER t AFTER INSERT ON root.ln.** AS 'a.B'",
                                  "create stateful trigger t before insert on root.ln.** as 'a.B'",
                                  "DROP TRIGGER t", "SHOW TRIGGERS"])
def test_trigger_statements_are_recognised_without_a_flag(text):
    assert recognises(text)


@pytest.mark.parametrize(("text", "message", "at"), [
    ("CREATE TRIGGER t INSERT ON root.ln.** AS 'a.B'", "expected BEFORE or AFTER INSERT", "INSERT"),
    ("CREATE TRIGGER t AFTER DELETE ON root.ln.** AS 'a.B'", "a trigger listens to INSERT only", "DELETE"),
    ("CREATE TRIGGER t AFTER INSERT ON root AS 'a.B'", "a path pattern under root", "root"),
    ("CREATE TRIGGER t AFTER INSERT ON root.ln.** AS 'NoModule'", "is not a Python class name", "'NoModule'"),
    ("CREATE TRIGGER t AFTER INSERT ON root.ln.** AS a.B", "expected the trigger's class", "a.B"),
    ("CREATE TRIGGER t AFTER INSERT ON root.ln.** AS 'a.B' USING URI ''", "USING URI needs a file path", "''"),
    ("CREATE TRIGGER t AFTER INSERT ON root.ln.** AS 'a.B' WITH (\"k\" = \"1\", \"k\" = \"2\")",
     "attribute 'k' is given twice", "\"k\" = \"2"),
    ("CREATE TRIGGER `a.b` AFTER INSERT ON root.ln.** AS 'a.B'", "a trigger name is one name", "`a.b`"),
])
def test_trigger_rules_are_positioned_errors(text, message, at):
    with pytest.raises(StreamDefinitionError) as err:
        parse(text)
    assert message in str(err.value)
    assert (err.value.line, err.value.column) == (1, text.index(at) + 1)


# --- IoTDB text never escapes except as the project's errors -------------------------------------

_WORDS = ["SELECT", "INTO", "FROM", "WHERE", "GROUP", "BY", "LEVEL", "=", "(", ")", "[", "]", ",", ".", "root", "ln",
          "wf01", "*", "**", "s1", "count", "max_value", "time", ">", "<", "10s", "1d2h", "FILL", "PREVIOUS",
          "LIMIT", "1", "-1", "2021-05-11T22:18:00+08:00", "ALIGN", "DEVICE", "CREATE", "CQ", "RESAMPLE", "EVERY",
          "RANGE", "BOUNDARY", "BEGIN", "END", "INSERT", "VALUES", "TIMESERIES", "DATABASE", "DELETE", "::",
          "${1}", "'x'", "true", "null", "AND", "OR", "NOT", "HAVING", "SHOW", "DEVICES", "CQS", "DROP", "+", "/",
          "WITH", "DATATYPE", "FLOAT", "ALIGNED", "ORDER", "DESC", "SLIMIT", "OFFSET", ";", "`a.b`", "TRIGGER",
          "TRIGGERS", "STATEFUL", "BEFORE", "AFTER", "ON", "AS", "'a.B'", "USING", "URI", '"k"']


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=25))
def test_random_iotdb_text_gives_statements_or_a_positioned_error(words):
    text = " ".join(words)
    for prefix in ("", "SELECT s1 FROM root.sg.d ", "CREATE CQ c BEGIN SELECT count(s1) INTO root.a.b(c) FROM root."):
        try:
            parse(prefix + text, language="iotdb")
        except StreamDefinitionError as err:
            assert err.line is not None and err.column is not None
        except StreamError:
            pass
