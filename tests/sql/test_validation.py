"""Each rule of reference 000 checkable from the text is enforced, with its position and clause."""

from __future__ import annotations

import pytest

from airflow_stream_provider.exceptions import StreamDefinitionError, StreamSyntaxError
from airflow_stream_provider.sql import parse

W = "CREATE STREAM s INTERVAL(1m) SLIDING(1m) FROM meters"

# (statement, words the message must contain, expected clause)
RULES = [
    # STATE_WINDOW and TRUE_FOR of TDengine 3.3.8 / 3.4.x; what of 3.4.x is refused
    # NODELAY_CREATE_SUBTABLE (TDengine 3.4.1) follows INTO, outside STREAM_OPTIONS
    (W + " NODELAY_CREATE_SUBTABLE AS SELECT _twstart, avg(v) FROM meters", "it follows INTO",
     "NODELAY_CREATE_SUBTABLE"),
    (W + " STREAM_OPTIONS(NODELAY_CREATE_SUBTABLE) INTO out AS SELECT _twstart, avg(v) FROM meters",
     "is not a stream option", "NODELAY_CREATE_SUBTABLE"),
    # IDLE_TIMEOUT with IDLE/RESUME (TDengine 3.4.1; the limits of its test_idle_trigger.py)
    (W + " STREAM_OPTIONS(IDLE_TIMEOUT(1m)) NOTIFY('ws://h:1') ON (WINDOW_CLOSE)", "without IDLE or RESUME events",
     "IDLE_TIMEOUT"),
    (W + " NOTIFY('ws://h:1') ON (WINDOW_CLOSE | IDLE)", "IDLE and RESUME events need STREAM_OPTIONS(IDLE_TIMEOUT(d))",
     "NOTIFY ON"),
    (W + " STREAM_OPTIONS(EVENT_TYPE(IDLE)) INTO o AS SELECT _tidlestart, count(*) FROM %%trows",
     "EVENT_TYPE(IDLE) needs IDLE_TIMEOUT(d)", "EVENT_TYPE"),
    (W + " STREAM_OPTIONS(IDLE_TIMEOUT(500a) | EVENT_TYPE(IDLE)) INTO o AS SELECT _tidlestart, count(*) FROM %%trows",
     "IDLE_TIMEOUT(500a) is outside the allowed range [1s, 10d]", "IDLE_TIMEOUT"),
    (W + " STREAM_OPTIONS(IDLE_TIMEOUT(11d) | EVENT_TYPE(IDLE)) INTO o AS SELECT _tidlestart, count(*) FROM %%trows",
     "IDLE_TIMEOUT(11d) is outside the allowed range [1s, 10d]", "IDLE_TIMEOUT"),
    (W + " STREAM_OPTIONS(IDLE_TIMEOUT(1w) | EVENT_TYPE(IDLE)) INTO o AS SELECT _tidlestart, count(*) FROM %%trows",
     "the unit must be a, s, m, h or d", "IDLE_TIMEOUT"),
    (W + " STREAM_OPTIONS(IDLE_TIMEOUT(3s) | EVENT_TYPE(IDLE)) INTO o AS SELECT _twstart, _tidlestart FROM %%trows",
     "placeholder _twstart belongs to window events", "AS"),
    (W + " STREAM_OPTIONS(IDLE_TIMEOUT(3s)) NOTIFY('ws://h:1') ON (IDLE) INTO o AS SELECT _tidlestart, count(*) "
     "FROM %%trows", "placeholder _tidlestart is only defined for IDLE and RESUME events", "AS"),
    ("CREATE STREAM s SLIDING(1s) FROM meters PARTITION BY tbname STREAM_OPTIONS(IDLE_TIMEOUT(3s) | EVENT_TYPE(IDLE)) "
     "INTO o AS SELECT _tidlestart, _tidleend, tbname FROM meters", "IDLE_TIMEOUT watches each group's rows",
     "IDLE_TIMEOUT"),
    (W + " STREAM_OPTIONS(IDLE_TIMEOUT(3s) | IDLE_TIMEOUT(4s) | EVENT_TYPE(IDLE)) INTO o AS SELECT 1",
     "option IDLE_TIMEOUT is given twice", "STREAM_OPTIONS"),
    ("CREATE STREAM s STATE_WINDOW(v) FROM meters ROLLUP BY site NOTIFY('ws://h:1') ON (WINDOW_CLOSE)",
     "ROLLUP BY groups PERIOD, SLIDING, INTERVAL and SESSION triggers", "ROLLUP BY"),
    ("CREATE STREAM s EVENT_WINDOW(START WITH (a > 2, a > 1) END WITH a < 1) TRUE_FOR(start(COUNT 2)) FROM t "
     "PARTITION BY tbname NOTIFY('ws://h:1') ON (WINDOW_CLOSE)", "not to sub-event windows", "TRUE_FOR"),
    ("CREATE STREAM s EVENT_WINDOW(START WITH a > 1) FROM t PARTITION BY tbname NOTIFY('ws://h:1') ON (WINDOW_CLOSE)",
     "expected END WITH", "EVENT_WINDOW"),
    ("CREATE STREAM s STATE_WINDOW(a) TRUE_FOR(start(COUNT 2)) FROM t PARTITION BY tbname NOTIFY('ws://h:1') "
     "ON (WINDOW_CLOSE)", "belong to EVENT_WINDOW", "TRUE_FOR"),
    ("CREATE STREAM s EVENT_WINDOW(START WITH a > 1 END WITH a < 1) TRUE_FOR(end(1s), end(2s)) FROM t "
     "PARTITION BY tbname NOTIFY('ws://h:1') ON (WINDOW_CLOSE)", "TRUE_FOR gives end(...) twice", "TRUE_FOR"),
    ("CREATE STREAM s EVENT_WINDOW(START WITH a > 1 END WITH a < 1) TRUE_FOR(start(COUNT 0)) FROM t "
     "PARTITION BY tbname NOTIFY('ws://h:1') ON (WINDOW_CLOSE)", "COUNT must be at least 1", "TRUE_FOR"),
    ("CREATE STREAM s STATE_WINDOW(a, b) EXTEND(3) FROM t PARTITION BY tbname NOTIFY('ws://h:1') ON (WINDOW_CLOSE)",
     "EXTEND must be 0, 1 or 2, found 3", "EXTEND"),
    ("CREATE STREAM s STATE_WINDOW(a, b) ZEROTH_STATE(1) FROM t PARTITION BY tbname NOTIFY('ws://h:1') "
     "ON (WINDOW_CLOSE)", "ZEROTH_STATE gives 1 values for 2 STATE_WINDOW keys", "ZEROTH_STATE"),
    ("CREATE STREAM s STATE_WINDOW(a) ZEROTH_STATE(1.5) FROM t PARTITION BY tbname NOTIFY('ws://h:1') "
     "ON (WINDOW_CLOSE)", "ZEROTH_STATE takes integers, booleans, strings or NO_ZEROTH", "ZEROTH_STATE"),
    ("CREATE STREAM s STATE_WINDOW(a) ZEROTH_STATE(NO_ZEROTH) FROM t PARTITION BY tbname NOTIFY('ws://h:1') "
     "ON (WINDOW_CLOSE)", "NO_ZEROTH for every key", "ZEROTH_STATE"),
    ("CREATE STREAM s STATE_WINDOW(a, b, 1) FROM t PARTITION BY tbname NOTIFY('ws://h:1') ON (WINDOW_CLOSE)",
     "STATE_WINDOW key 1 is a constant", "STATE_WINDOW"),
    ("CREATE STREAM s STATE_WINDOW(a, A) FROM t PARTITION BY tbname NOTIFY('ws://h:1') ON (WINDOW_CLOSE)",
     "names the key A twice", "STATE_WINDOW"),
    ("CREATE STREAM s STATE_WINDOW(a, 1) EXTEND(1) FROM t PARTITION BY tbname NOTIFY('ws://h:1') ON (WINDOW_CLOSE)",
     "already gives EXTEND", "EXTEND"),
    ("CREATE STREAM s STATE_WINDOW(a) TRUE_FOR(1s) EXTEND(1) FROM t PARTITION BY tbname NOTIFY('ws://h:1') "
     "ON (WINDOW_CLOSE)", "EXTEND is out of place", "EXTEND"),
    ("CREATE STREAM s PERIOD(5a) NOTIFY('ws://h:1')", "outside the allowed range [10a, 3650d]", "PERIOD"),
    ("CREATE STREAM s PERIOD(3651d) NOTIFY('ws://h:1')", "outside the allowed range", "PERIOD"),
    ("CREATE STREAM s PERIOD(2d, 1d) NOTIFY('ws://h:1')", "must be less than 1 day", "PERIOD"),
    ("CREATE STREAM s SLIDING(1m) NOTIFY('ws://h:1')", "need a trigger table", "SLIDING"),
    ("CREATE STREAM s SESSION(ts, 1m) NOTIFY('ws://h:1') ON (WINDOW_CLOSE)", "need a trigger table", "SESSION"),
    ("CREATE STREAM s STATE_WINDOW(st) NOTIFY('ws://h:1') ON (WINDOW_CLOSE)", "need a trigger table",
     "STATE_WINDOW"),
    ("CREATE STREAM s COUNT_WINDOW(0) FROM t NOTIFY('ws://h:1') ON (WINDOW_CLOSE)", "at least 1", "COUNT_WINDOW"),
    ("CREATE STREAM s COUNT_WINDOW(5, 6) FROM t NOTIFY('ws://h:1') ON (WINDOW_CLOSE)",
     "between 1 and the count 5", "COUNT_WINDOW"),
    ("CREATE STREAM s INTERVAL(1m) SLIDING(2m) FROM t NOTIFY('ws://h:1') ON (WINDOW_CLOSE)",
     "must not be greater than interval", "SLIDING"),
    (W + " STREAM_OPTIONS(MAX_DELAY(2s)) NOTIFY('ws://h:1') ON (WINDOW_CLOSE)", "below the minimum of 3s",
     "MAX_DELAY"),
    (W + " STREAM_OPTIONS(FILL_HISTORY | FILL_HISTORY_FIRST) NOTIFY('ws://h:1') ON (WINDOW_CLOSE)",
     "cannot be used together", "STREAM_OPTIONS"),
    ("CREATE STREAM s PERIOD(1h) STREAM_OPTIONS(FILL_HISTORY) NOTIFY('ws://h:1')",
     "not supported with PERIOD", "FILL_HISTORY"),
    (W + " STREAM_OPTIONS(WATERMARK(1s) | WATERMARK(2s)) NOTIFY('ws://h:1') ON (WINDOW_CLOSE)",
     "option WATERMARK is given twice", "STREAM_OPTIONS"),
    (W + " NOTIFY('ws://h:1')", "needs ON (WINDOW_OPEN|WINDOW_CLOSE)", "NOTIFY"),
    (W + " NOTIFY('ftp://h:1/x') ON (WINDOW_CLOSE)", "must use ws://, wss://, http:// or https://", "NOTIFY"),
    (W + " NOTIFY('ws://h/x') ON (WINDOW_CLOSE)", "must give a port", "NOTIFY"),
    (W + " INTO out OUTPUT_SUBTABLE(concat('a', tbname)) AS SELECT _twstart, avg(v) FROM meters",
     "OUTPUT_SUBTABLE needs PARTITION BY", "OUTPUT_SUBTABLE"),
    (W + " INTO out TAGS (g VARCHAR(10) AS 'x') AS SELECT _twstart, avg(v) FROM meters",
     "TAGS needs PARTITION BY", "TAGS"),
    (W + " INTO meters AS SELECT _twstart, avg(v) FROM other", "cannot be the trigger table", "INTO"),
    (W.replace("FROM meters", "FROM db1.meters") + " INTO db1.MeTeRs AS SELECT _twstart FROM x",
     "cannot be the trigger table", "INTO"),
    (W, "needs a computation (AS subquery), a notification (NOTIFY), or both", "CREATE STREAM"),
    ("CREATE STREAM s PERIOD(1h) INTO o AS SELECT _twstart, count(*) FROM t", "placeholder _twstart", "AS"),
    ("CREATE STREAM s PERIOD(1h) INTO o AS SELECT _tcurrent_ts, count(*) FROM t", "placeholder _tcurrent_ts", "AS"),
    (W + " INTO o AS SELECT _tprev_localtime, count(*) FROM t", "placeholder _tprev_localtime", "AS"),
    (W + " STREAM_OPTIONS(EVENT_TYPE(WINDOW_OPEN)) INTO o AS SELECT _twstart, _twend FROM t",
     "only defined at WINDOW_CLOSE", "AS"),
    (W + " INTO o AS SELECT _twstart, avg(v) FROM %%trows WHERE v > 0", "cannot filter it with WHERE", "AS"),
    (W + " INTO o AS SELECT _twstart, avg(a.v) FROM %%trows a JOIN other b ON a.ts = b.ts", "cannot be joined",
     "AS"),
    (W + " STREAM_OPTIONS(LOW_LATENCY | FORCE_OUTPUT) INTO o AS SELECT _twstart FROM t",
     "unknown stream option LOW_LATENCY", "STREAM_OPTIONS"),
    (W + " INTO o AS SELECT _twstart, avgg(v) FROM t", "unknown function AVGG", "AS"),
    (W + " INTO o AS SELECT _twstart, interp(v) FROM t", "function INTERP is not supported", "AS"),
    (W + " NOTIFY('ws://h:1') ON (WINDOW_CLOSE) NOTIFY_OPTIONS(ON_FAILURE_RETRY)",
     "unknown notify option ON_FAILURE_RETRY", "NOTIFY_OPTIONS"),
    (W + " INTO o AS SELECT _twstart, %%tbname FROM t", "%%tbname needs PARTITION BY tbname", "AS"),
    (W + " PARTITION BY tbname INTO o AS SELECT _twstart, %%2 FROM t", "%%2 refers to PARTITION BY column 2", "AS"),
    ("CREATE STREAM s PERIOD(1h) STREAM_OPTIONS(MAX_DELAY(5s)) NOTIFY('ws://h:1')",
     "applies to window triggers only", "MAX_DELAY"),
    (W + " STREAM_OPTIONS(DELETE_OUTPUT_TABLE) INTO o AS SELECT _twstart FROM t",
     "needs PARTITION BY tbname", "DELETE_OUTPUT_TABLE"),
    (W + " STREAM_OPTIONS(CALC_NOTIFY_ONLY) INTO o AS SELECT _twstart FROM t", "add NOTIFY", "CALC_NOTIFY_ONLY"),
    (W + " INTO o AS SELECT _qstart, count(*) FROM t", "pseudo-column _qstart", "AS"),
    (W + " INTO o AS SELECT _twstart, v FROM o", "cannot also be a source table", "INTO"),
    ("CREATE STREAM s SESSION(ts, 0s) FROM t NOTIFY('ws://h:1') ON (WINDOW_CLOSE)", "must be positive", "SESSION"),
    ("CREATE STREAM s STATE_WINDOW(st) TRUE_FOR(COUNT 0) FROM t NOTIFY('ws://h:1') ON (WINDOW_CLOSE)",
     "TRUE_FOR COUNT must be at least 1", "TRUE_FOR"),
    (W + " STREAM_OPTIONS(WATERMARK(10)) NOTIFY('ws://h:1') ON (WINDOW_CLOSE)", "needs a unit", "WATERMARK"),
    (W + " STREAM_OPTIONS(WATERMARK(10b)) NOTIFY('ws://h:1') ON (WINDOW_CLOSE)", "PRECISION 'ns'", "WATERMARK"),
    # out of range: TDengine's largest lengths, COUNT_WINDOW's count, epoch numbers past the year 9999
    ("CREATE TABLE t (ts TIMESTAMP, s VARCHAR(99999999999))", "VARCHAR length must be between 1 and 65517",
     "CREATE TABLE"),
    ("CREATE TABLE t (ts TIMESTAMP, s NCHAR(16380))", "NCHAR length must be between 1 and 16379", "CREATE TABLE"),
    ("CREATE STREAM s COUNT_WINDOW(2147483648) FROM t NOTIFY('ws://h:1') ON (WINDOW_CLOSE)",
     "less than 2147483648, found 2147483648", "COUNT_WINDOW"),
    (W + " STREAM_OPTIONS(FILL_HISTORY(99999999999999999)) NOTIFY('ws://h:1') ON (WINDOW_CLOSE)",
     "is not a time between the years 1 and 9999", "FILL_HISTORY"),
]


@pytest.mark.parametrize("text, words, clause", RULES, ids=[r[1][:40] for r in RULES])
def test_rule_is_enforced(text, words, clause):
    with pytest.raises(StreamDefinitionError) as info:
        parse(text)
    err = info.value
    assert isinstance(err, ValueError)
    assert words in str(err)
    assert err.clause == clause
    assert err.line == 1 and err.column is not None and 1 <= err.column <= len(text)


def test_error_points_at_the_offending_token():
    text = "CREATE STREAM s\n  INTERVAL(1m) SLIDING(1m) FROM t\n  STREAM_OPTIONS(WATERMARK(1s) | BOGUS)\n"
    with pytest.raises(StreamDefinitionError) as info:
        parse(text)
    assert (info.value.line, info.value.column) == (3, 34)
    assert str(info.value).startswith("line 3, col 34: STREAM_OPTIONS: unknown stream option BOGUS")


def test_syntax_error_in_subquery_has_absolute_position():
    text = "CREATE STREAM s PERIOD(1h)\nINTO o AS\nSELECT count(* FROM t"
    with pytest.raises(StreamSyntaxError) as info:
        parse(text)
    assert info.value.line == 3
    assert info.value.clause == "AS"


def test_unknown_function_position_is_inside_the_query():
    text = "CREATE STREAM s PERIOD(1h)\nINTO o AS\nSELECT now(), bogus_fn(1) FROM t"
    with pytest.raises(StreamDefinitionError) as info:
        parse(text)
    assert (info.value.line, info.value.column) == (3, 15)


def test_valid_notify_only_and_period_stream_passes():
    [stmt] = parse("CREATE STREAM IF NOT EXISTS power.s PERIOD(10a, 59m) FROM meters PARTITION BY tbname "
                   "NOTIFY('wss://example.com:443/x') ON (ON_TIME)")
    assert stmt.if_not_exists and stmt.name.db == "power"
    assert stmt.trigger.offset.micros == 59 * 60_000_000


def test_sliding_offset_is_refused_after_interval():
    with pytest.raises(StreamDefinitionError, match="SLIDING takes no offset after INTERVAL") as info:
        parse("CREATE STREAM s INTERVAL(1m) SLIDING(1m, 5s) FROM t NOTIFY('ws://h:1') ON (WINDOW_CLOSE)")
    assert (info.value.line, info.value.column) == (1, 30)


def test_placeholder_error_points_at_the_placeholder():
    text = "CREATE STREAM s PERIOD(1h)\nINTO o AS\nSELECT now(),\n       _twstart FROM t"
    with pytest.raises(StreamDefinitionError, match="placeholder _twstart") as info:
        parse(text)
    assert (info.value.line, info.value.column) == (4, 8)


@pytest.mark.parametrize(("text", "clause", "column", "words"), [
    # reference 001: the older engine's CREATE STREAM, options before INTO
    ("CREATE STREAM s TRIGGER AT_ONCE INTO o AS SELECT _wstart, count(*) FROM t INTERVAL(1m)", "CREATE STREAM", 17,
     "TRIGGER belongs to TDengine's older stream syntax"),
    ("CREATE STREAM s FILL_HISTORY 1 INTO o AS SELECT 1 FROM t", "CREATE STREAM", 17, "FILL_HISTORY belongs"),
    ("PAUSE STREAM s", "PAUSE STREAM", 1, "use STOP STREAM"),
    ("RESUME STREAM s", "RESUME STREAM", 1, "use START STREAM"),
])
def test_the_3_3_7_parser_rejects_legacy_statements_by_name(text, clause, column, words):
    with pytest.raises(StreamDefinitionError) as info:
        parse(text, language="tdengine-3.3.7")
    assert words in str(info.value)
    assert (info.value.clause, info.value.line, info.value.column) == (clause, 1, column)


@pytest.mark.parametrize(("text", "clause", "column", "words"), [
    # reference 004: IoTDB's continuous query is not TDengine's
    ("CREATE CQ cq1 BEGIN SELECT max_value(temperature) INTO root.ln.d(t_max) FROM root.ln.*.* GROUP BY (10s) END",
     "CREATE CQ", 1, "CREATE CQ is an IoTDB continuous query: the TDengine language does not read it"),
])
def test_iotdb_statements_are_rejected_by_the_tdengine_language(text, clause, column, words):
    with pytest.raises(StreamDefinitionError) as info:
        parse(text, language="tdengine")
    assert words in str(info.value)
    assert (info.value.clause, info.value.line, info.value.column) == (clause, 1, column)


def test_iotdb_triggers_are_refused_by_the_tdengine_language():
    with pytest.raises(StreamDefinitionError) as info:
        parse("CREATE STATEFUL TRIGGER t1 AFTER INSERT ON root.sg.** AS 'org.Foo'", language="tdengine")
    assert "CREATE TRIGGER is an IoTDB trigger" in str(info.value)
    assert (info.value.clause, info.value.line, info.value.column) == ("CREATE TRIGGER", 1, 1)


Q = "AS SELECT _twstart, count(*) FROM %%trows"


@pytest.mark.parametrize(("text", "clause", "after"), [
    # the review's inputs: a filter, a subtable name and a tag are computed for each row or group;
    # TDengine evaluates them without a query, and a subquery there would run once per row
    (f"CREATE STREAM s INTERVAL(1m) SLIDING(1m) FROM t STREAM_OPTIONS(PRE_FILTER((SELECT 1) = 1)) INTO o {Q}",
     "PRE_FILTER", "PRE_FILTER"),
    (f"CREATE STREAM s INTERVAL(1m) SLIDING(1m) FROM t PARTITION BY tbname INTO o "
     f"OUTPUT_SUBTABLE(concat('x', tbname, (SELECT 1))) {Q}", "OUTPUT_SUBTABLE", "OUTPUT_SUBTABLE"),
    (f"CREATE STREAM s INTERVAL(1m) SLIDING(1m) FROM t PARTITION BY tbname INTO o "
     f"TAGS (g VARCHAR(8) AS concat(tbname, (SELECT 'x'))) {Q}", "TAGS", "TAGS"),
    (f"CREATE STREAM s EVENT_WINDOW(START WITH v > (SELECT max(v) FROM u) END WITH v < 0) FROM t INTO o {Q}",
     "EVENT_WINDOW START WITH", "START WITH"),
    ("CREATE STREAM s PERIOD(1m) NOTIFY('ws://h:1/') ON (ON_TIME) WHERE n > (SELECT 1) "
     "AS SELECT cast(_tlocaltime / 1000 AS timestamp) ts, count(*) n FROM t", "NOTIFY WHERE", "WHERE"),
    # before 3.3.7: the subquery's WHERE becomes the trigger's filter
    ("CREATE STREAM s INTO o AS SELECT _wstart, count(*) FROM t WHERE v IN (SELECT v FROM u) INTERVAL(1m)",
     "WHERE", "WHERE"),
])
def test_a_subquery_in_a_clause_computed_per_row_is_refused_at_its_select(text, clause, after):
    with pytest.raises(StreamDefinitionError) as info:
        parse(text)
    assert "cannot hold a subquery" in str(info.value)
    column = text.upper().index("SELECT", text.index(after)) + 1  # the subquery's SELECT
    assert (info.value.clause, info.value.line, info.value.column) == (clause, 1, column)


@pytest.mark.parametrize("text", [
    f"CREATE STREAM s INTERVAL(999999999999999999999d) SLIDING(1s) FROM t INTO o {Q}",
    f"CREATE STREAM s INTERVAL(1d) SLIDING(1d) FROM t STREAM_OPTIONS(WATERMARK(3652059d)) INTO o {Q}",
    f"CREATE STREAM s SESSION(ts, 87700000h) FROM t INTO o {Q}",
])
def test_a_duration_longer_than_all_timestamps_is_refused(text):
    # 3,652,059 days is one more than the days from 0001-01-01 to 9999-12-31
    with pytest.raises(StreamDefinitionError, match="longer than the whole range of timestamps") as info:
        parse(text)
    assert info.value.line == 1


def test_the_longest_duration_that_fits_is_accepted():
    (stmt,) = parse(f"CREATE STREAM s INTERVAL(3652058d) SLIDING(1d) FROM t INTO o {Q}")
    assert stmt.trigger.interval.count == 3652058


@pytest.mark.parametrize("text", ["SELECT cast(1 AS GEOMETRY(10))",
                                  "CREATE STREAM s INTERVAL(1m) SLIDING(1m) FROM t INTO o "
                                  "AS SELECT _twstart, cast(count(*) AS GEOMETRY(64)) FROM %%trows"])
def test_a_cast_to_geometry_is_refused_as_the_type_is(text):
    # README: the Geometry type is rejected, in a query as in CREATE STABLE
    with pytest.raises(StreamDefinitionError, match="CAST to GEOMETRY is not supported") as info:
        parse(text)
    assert info.value.column == text.index("GEOMETRY") + 1


IDLE_QUERY = " INTO o AS SELECT cast(_tidlestart / 1000000 AS timestamp), _tidleend, count(*) FROM %%trows"


@pytest.mark.parametrize(("tail", "timeout_us", "event_types", "on"), [
    # TDengine 3.4.1's own statements (test_idle_trigger.py and its functional spec), on our tables
    ("STREAM_OPTIONS(IDLE_TIMEOUT(3s) | EVENT_TYPE(IDLE))" + IDLE_QUERY, 3_000_000, ("IDLE",), ()),
    ("STREAM_OPTIONS(EVENT_TYPE(IDLE | RESUME) | IDLE_TIMEOUT(10d))" + IDLE_QUERY, 864_000_000_000,
     ("IDLE", "RESUME"), ()),
    ("STREAM_OPTIONS(IDLE_TIMEOUT(1000a) | EVENT_TYPE(RESUME)) NOTIFY('ws://h:1') ON (WINDOW_CLOSE | RESUME)"
     + IDLE_QUERY, 1_000_000, ("RESUME",), ("WINDOW_CLOSE", "RESUME")),
    ("STREAM_OPTIONS(IDLE_TIMEOUT(5m) | EVENT_TYPE(WINDOW_CLOSE)) NOTIFY('ws://h:1') ON (IDLE | RESUME) "
     "INTO o AS SELECT _twstart, count(*) FROM %%trows", 300_000_000, ("WINDOW_CLOSE",), ("IDLE", "RESUME")),
])
def test_idle_timeout_statements_parse(tail, timeout_us, event_types, on):
    [stmt] = parse(f"CREATE STREAM s INTERVAL(1m) SLIDING(1m) FROM meters PARTITION BY tbname {tail}")
    assert stmt.options.idle_timeout.micros == timeout_us
    assert stmt.options.event_types == event_types
    assert (stmt.notify.on if stmt.notify else ()) == on
