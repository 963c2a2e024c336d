"""TDengine's stream syntax before 3.3.7 (references 001 and 003): parsed beside 3.3.7's without a flag,
lowered into the model 3.3.7 statements parse to, every rule the text shows refused at its position,
and written back as the nearest 3.3.7 statement by ``check --to 3.3.7``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.sql import parse
from airflow_stream_provider.sql.tdengine.dialect import TDengine
from airflow_stream_provider.sql.tdengine_legacy.migrate import to_3_3_7

D = m.Duration
MODE = m.TriggerMode


def one(text: str) -> m.Statement:
    [stmt] = parse(text)
    return stmt


@pytest.mark.parametrize("text, trigger, table, partition", [
    ("create stream s into o as select _wstart, count(*) from t interval(10s)",
     m.IntervalWindow(D(10, "s"), D(10, "s")), "t", ()),
    ("create stream s into o as select _wstart, count(*) from d.t interval(1m, 10s) sliding(30s)",
     m.IntervalWindow(D(1, "m"), D(30, "s"), D(10, "s")), "d.t", ()),
    ("create stream s into o as select _wstart, count(*) from st partition by tbname session(ts, 5s)",
     m.SessionWindow("ts", D(5, "s")), "st", ("tbname",)),
    ("create stream s into o as select _wstart, count(*) from st partition by tbname state_window(c)",
     m.StateWindow((m.SqlExpression("c", None),)), "st", ("tbname",)),
    ("create stream s into o as select _wstart, count(*) from t event_window start with a > 0 end with a < 0",
     m.EventWindow(m.SqlExpression("a > 0", None), m.SqlExpression("a < 0", None)), "t", ()),
    ("create stream s into o as select _wstart, count(*) from t count_window(10, 5)", m.CountWindow(10, 5), "t", ()),
    ("create stream s into o as select ts, a * 2 x from st where a > 0 partition by tbname", m.RowTrigger(), "st",
     ("tbname",)),
    # an expression groups by the columns it reads; its alias names a value
    ("create stream s into o tags(cc varchar(20)) as select _wstart, count(*) from st "
     "partition by concat('tag-', tbname) as cc, ta interval(10s)",
     m.IntervalWindow(D(10, "s"), D(10, "s")), "st", ("tbname", "ta")),
])
def test_the_window_of_the_subquery_becomes_the_trigger(text, trigger, table, partition):
    stmt = one(text)
    assert isinstance(stmt, m.CreateStream) and stmt.legacy is not None
    assert stmt.trigger == trigger
    assert str(stmt.trigger_table) == table and stmt.partition_by == partition


@pytest.mark.parametrize("options, expected", [
    ("", m.LegacyOptions()),
    ("trigger at_once", m.LegacyOptions(MODE.AT_ONCE)),
    ("trigger max_delay 5s", m.LegacyOptions(MODE.MAX_DELAY, max_delay=D(5, "s"))),
    ("trigger continuous_window_close", m.LegacyOptions(MODE.CONTINUOUS_WINDOW_CLOSE)),
    ("trigger continuous_window_close recalculate 10m",
     m.LegacyOptions(MODE.CONTINUOUS_WINDOW_CLOSE, recalculate=D(10, "m"))),
    ("ignore expired 0 ignore update 0", m.LegacyOptions(ignore_expired=False, ignore_update=False)),
    ("ignore update 0 trigger at_once ignore expired", m.LegacyOptions(MODE.AT_ONCE, ignore_update=False)),
    ("delete_mark 1d", m.LegacyOptions(delete_mark=D(1, "d"))),
    ("fill_history 1 async", m.LegacyOptions(fill_history_async=True)),
])
def test_options_in_any_order(options, expected):
    stmt = one(f"create stream s {options} into o as select _wstart, count(*) from t interval(10s)")
    assert isinstance(stmt, m.CreateStream)
    legacy = stmt.legacy
    assert legacy is not None
    assert (legacy.trigger, legacy.max_delay, legacy.recalculate, legacy.ignore_expired, legacy.ignore_update,
            legacy.delete_mark, legacy.fill_history_async) == (
        expected.trigger, expected.max_delay, expected.recalculate, expected.ignore_expired, expected.ignore_update,
        expected.delete_mark, expected.fill_history_async)


def test_watermark_fill_history_where_and_fill_lower_into_stream_options():
    stmt = one("create stream s watermark 10s fill_history 1 into o as select _wstart, sum(a) from t where a > 5 "
               "interval(10s) fill(value, 0)")
    assert isinstance(stmt, m.CreateStream) and stmt.legacy is not None
    assert stmt.options.watermark == D(10, "s")
    assert stmt.options.fill_history == m.FillHistory()
    assert stmt.options.pre_filter is not None and stmt.options.pre_filter.text == "a > 5"
    assert stmt.legacy.fill == m.Fill("VALUE", (0,))
    assert not stmt.options.ignore_nodata_trigger  # empty windows are written (filled)
    plain = one("create stream s into o as select _wstart, sum(a) from t interval(10s)")
    assert isinstance(plain, m.CreateStream) and plain.options.ignore_nodata_trigger


@pytest.mark.parametrize("select, expected", [
    # the window's columns become placeholders; the window start comes first, named as written
    ("select _wstart, count(*) c from t interval(10s)", "SELECT _twstart AS `_wstart`, COUNT(*) AS `c` FROM %%trows"),
    ("select count(*), _wend from t interval(10s)",
     "SELECT _twstart AS `_wstart`, COUNT(*) AS `count(*)`, _twend AS `_wend` FROM %%trows"),
    # a PARTITION BY column outside aggregates is the group's value
    ("select _wstart, tbname, max(tbname) from st partition by tbname interval(10s)",
     "SELECT _twstart AS `_wstart`, %%1 AS `tbname`, MAX(tbname) AS `max(tbname)` FROM %%trows"),
    # without a window: the select list as written, over each written row
    ("select ts, a + 1 b from t where a > 0", "SELECT ts AS `ts`, a + 1 AS `b` FROM %%trows"),
])
def test_the_select_list_becomes_a_computation_over_trows(select, expected):
    stmt = one(f"create stream s into o as {select}")
    assert isinstance(stmt, m.CreateStream) and stmt.query is not None
    assert stmt.query.text == expected


def test_tags_and_subtable_take_partition_aliases():
    stmt = one("create stream s into o tags(tg1 int, tg2 bigint) subtable(concat('t-', cast(tg1 as varchar(8)))) as "
               "select _wstart, count(*) from st partition by ta + 1 as tg1, cast(tb as bigint) as tg2 interval(10s)")
    assert isinstance(stmt, m.CreateStream)
    assert [(t.name, str(t.type), t.expr.text) for t in stmt.tags] == [
        ("tg1", "INT", "ta + 1"), ("tg2", "BIGINT", "CAST(tb AS BIGINT)")]
    assert stmt.output_subtable is not None and stmt.output_subtable.text == "CONCAT('t-', CAST(ta + 1 AS VARCHAR(8)))"
    names_only = one("create stream s into o tags(tg1) as select _wstart, count(*) from st partition by tbname as tg1 "
                     "interval(10s)")
    assert isinstance(names_only, m.CreateStream) and names_only.tags[0].type is None


def test_notify_after_the_subquery_in_the_3_3_6_format_holding_by_default():
    stmt = one("create stream s into o as select _wstart, count(*) from t interval(1m) "
               "notify ('ws://h:1/n', 'wss://h:2') on ('WINDOW_OPEN', 'WINDOW_CLOSE') notify_history 1")
    assert isinstance(stmt, m.CreateStream) and stmt.notify is not None
    assert stmt.notify == m.Notify(("ws://h:1/n", "wss://h:2"), (m.EventType.WINDOW_OPEN, m.EventType.WINDOW_CLOSE),
                                   None, True, True, message_format="3.3.6")
    dropping = one("create stream s into o as select _wstart, count(*) from t interval(1m) notify ('ws://h:1') "
                   "on ('WINDOW_CLOSE') on_failure drop")
    assert isinstance(dropping, m.CreateStream) and dropping.notify is not None
    assert not dropping.notify.on_failure_pause


def test_pause_and_resume_are_stop_and_start():
    assert one("pause stream if exists s") == m.StopStream(m.TableName("s"), True, verb="PAUSE", position=None,
                                                           text="")
    resume = one("resume stream ignore untreated s")
    assert isinstance(resume, m.StartStream) and resume.ignore_untreated and resume.verb == "RESUME"


def test_both_syntaxes_in_one_text_without_a_flag():
    kinds = [type(s).__name__ + ("/legacy" if getattr(s, "legacy", None) else "") for s in parse(
        "create stream a into o as select _wstart, count(*) from t interval(10s);"
        "create stream b interval(10s) sliding(10s) from t into o2 as select _twstart, count(*) from %%trows;"
        "pause stream a; stop stream b")]
    assert kinds == ["CreateStream/legacy", "CreateStream", "StopStream", "StopStream"]


@pytest.mark.parametrize("text, line, column, words", [
    ("create stream s trigger force_window_close into o as select _wstart, count(*) from t interval(10s) "
     "sliding(5s)", 1, 17, "FORCE_WINDOW_CLOSE supports INTERVAL windows only, without SLIDING"),
    ("create stream s trigger force_window_close fill_history 1 into o as select _wstart, count(*) from t "
     "interval(10s)", 1, 44, "FORCE_WINDOW_CLOSE needs FILL_HISTORY 0"),
    ("create stream s trigger force_window_close ignore update 0 into o as select _wstart, count(*) from t "
     "interval(10s)", 1, 44, "needs IGNORE UPDATE 1"),
    ("create stream s trigger force_window_close into o as select _wstart, count(*) from t interval(10s) fill(linear)",
     1, 100, "FILL(LINEAR) is not supported"),
    ("create stream s trigger continuous_window_close into o as select _wstart, count(*) from t state_window(a)",
     1, 17, "CONTINUOUS_WINDOW_CLOSE supports INTERVAL windows only"),
    ("create stream s trigger at_once recalculate 1h into o as select 1", 1, 33, "expected INTO"),
    ("create stream s into o as select _wstart, count(*) from t count_window(1)", 1, 59, "at least 2"),
    ("create stream s into o as\n  select _wstart, top(a, 2) from t interval(10s)", 2, 19, "TOP cannot be used"),
    ("create stream s into o as select _wstart, elapsed(ts) from t interval(10s)", 1, 43, "ELAPSED cannot be used"),
    ("create stream s trigger max_delay 4s into o as select _wstart, count(*) from t interval(10s)", 1, 17,
     "below the minimum of 5s"),
    ("create stream s into o as select _wstart, count(*), _wstart from t interval(10s)", 1, 34, "twice"),
    ("create stream s into o as select _wstart, count(*) from t interval(10s) sliding(20s)", 1, 73,
     "must not be longer"),
    ("create stream s into o as select _wstart, count(*) from t\ninterval(10s) fill(value, 1, 2)", 2, 15,
     "one value per aggregate"),
    ("create stream s ignore expired 2 into o as select 1", 1, 32, "takes 0 or 1"),
    ("create stream s watermark 1s watermark 2s into o as select 1", 1, 30, "given twice"),
    ("create stream s into o as select _wstart, count(*) from t interval(10s) notify ('ftp://h:1') "
     "on ('WINDOW_CLOSE')", 1, 81, "ws://, wss://, http:// or https://"),
    ("create stream s into o as select ts from t notify ('ws://h:1') on ('WINDOW_CLOSE')", 1, 44,
     "NOTIFY needs a window"),
    ("create stream s as select _wstart, count(*) from t interval(10s)", 1, 17, "needs INTO"),
    ("create stream s into o as select _wstart, count(*) from t group by a interval(10s)", 1, 59, "GROUP BY"),
    ("create stream s trigger soon into o as select 1", 1, 25, "unknown trigger mode"),
    ("create stream s into o subtable(x) as select _wstart, count(*) from st partition by tbname interval(10s)",
     1, 33, "x is not a PARTITION BY item"),
    ("create stream s into o as select _wstart, count(*) from t intervl(10s)", 1, 59, "did you mean INTERVAL"),
])
def test_rules_the_text_shows_are_refused_at_their_position(text, line, column, words):
    with pytest.raises(StreamDefinitionError) as info:
        parse(text)
    assert words in str(info.value)
    assert (info.value.line, info.value.column) == (line, column), str(info.value)


# --- the nearest 3.3.7 form --------------------------------------------------------------------


def _model(stmt: m.CreateStream) -> tuple:
    """What a stream computes over what, independent of the syntax it was written in."""
    query = stmt.query.tree.sql(dialect=TDengine).replace("`", "") if stmt.query is not None else None
    return (stmt.trigger, str(stmt.trigger_table), stmt.partition_by, stmt.options.watermark,
            stmt.options.pre_filter.text if stmt.options.pre_filter else None, stmt.options.fill_history,
            str(stmt.into), query)


@pytest.mark.parametrize("legacy", [
    "create stream s ignore expired 0 ignore update 0 into o as select _wstart, count(*) c, max(a) from t "
    "interval(10s)",
    "create stream s watermark 5s ignore expired 0 ignore update 0 fill_history 1 into o as select _wstart, sum(a) s "
    "from st where a > 1 partition by tbname interval(1m, 5s) sliding(30s)",
    "create stream s ignore expired 0 ignore update 0 into o as select _wstart, count(*) from st partition by tbname "
    "state_window(a)",
    "create stream s trigger at_once into o as select _wstart, count(*) from t event_window start with a > 1 end with "
    "a < 0",
    "create stream s watermark 10s into o as select _wstart, count(*) from st partition by tbname count_window(5, 2)",
    "create stream s into o as select ts, a * 2 x from t where a > 0",
])
def test_the_3_3_7_form_parses_to_the_same_stream(legacy):
    """Legacy text -> its 3.3.7 form -> the 3.3.7 parser: the same trigger, table, groups, options and
    computation as the legacy text lowered to."""
    stmt = one(legacy)
    assert isinstance(stmt, m.CreateStream)
    found = to_3_3_7(stmt)
    assert found.statement is not None
    [again] = parse(found.statement, language="tdengine-3.3.7")
    assert isinstance(again, m.CreateStream)
    if isinstance(stmt.trigger, m.RowTrigger):
        assert again.trigger == m.CountWindow(1) and _model(again)[1:] == _model(stmt)[1:]
    else:
        assert _model(again) == _model(stmt)


def test_what_the_3_3_7_form_cannot_reproduce_is_said():
    found = to_3_3_7(one("create stream s trigger at_once into o as select _wstart, count(*) from st "
                         "partition by tbname session(ts, 10s)"))
    said = "\n".join(found.differences)
    for behaviour in ("AT_ONCE", "IGNORE UPDATE 1", "IGNORE EXPIRED 1", "deletes", "merge or split", "group_id"):
        assert behaviour in said, behaviour
    assert not found.exact
    fwc = to_3_3_7(one("create stream s trigger force_window_close into o as select _wstart, avg(a) from st "
                       "partition by tbname interval(10s) fill(prev)"))
    assert fwc.statement is None and "FORCE_WINDOW_CLOSE" in fwc.differences[0]
    assert to_3_3_7(one("resume stream ignore untreated s")).statement == "START STREAM IGNORE UNTREATED s"


def test_check_to_3_3_7_prints_each_statement_in_3_3_7_syntax(tmp_path):
    script = Path(sys.executable).with_name("airflow-stream")
    text = ("create stream s trigger at_once into o as select _wstart, count(*) from t interval(10s);\n"
            "pause stream s;\ncreate table t2 (ts timestamp, v int)")
    done = subprocess.run([str(script), "check", "--to", "3.3.7", text], capture_output=True, text=True, timeout=120,
                          env={"AIRFLOW_STREAM_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.startswith("-- s: nearest TDengine 3.3.7 form\nCREATE STREAM s INTERVAL(10s) SLIDING(10s)\n  FROM t\n")
    assert "STOP STREAM s;" in out and "create table t2 (ts timestamp, v int);" in out
    assert "--   * AT_ONCE: " in out
