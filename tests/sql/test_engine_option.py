"""STREAM_OPTIONS(ENGINE(...)): the detector engine a window stream names, each refusal with its
position (the column of the word it points at, counted by hand in the statement's text)."""

from __future__ import annotations

import pytest

from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.sql import parse

HEAD = "CREATE STREAM s INTERVAL(10s) SLIDING(10s) FROM m STREAM_OPTIONS("
TAIL = ") INTO o AS SELECT _twstart, count(*) FROM m"
AT = len(HEAD) + 1  # the column just after STREAM_OPTIONS(


def test_a_window_stream_names_the_in_process_engine():
    (stmt,) = parse(HEAD + "ENGINE('in-process')|WATERMARK(1s)" + TAIL)
    assert stmt.options.engine == "in-process"
    assert "ENGINE" in stmt.options.given
    (plain,) = parse(HEAD + "WATERMARK(1s)" + TAIL)
    assert plain.options.engine is None


@pytest.mark.parametrize(("options", "column", "message"), [
    ("ENGINE('sprak')", AT + 7, "unknown detector engine 'sprak'"),
    ("ENGINE(spark)", AT + 7, "ENGINE takes a quoted engine name"),
    ("ENGINE('spark')|MAX_DELAY(5s)", AT + 16, "the spark detector engine does not run MAX_DELAY"),
    ("ENGINE('spark')|LOW_LATENCY_CALC", AT + 16, "does not run LOW_LATENCY_CALC"),
    ("FILL_HISTORY|ENGINE('spark')", AT, "does not run FILL_HISTORY"),
    ("ENGINE('spark')|IDLE_TIMEOUT(1m)|EVENT_TYPE(IDLE)", AT + 16, "does not run IDLE_TIMEOUT"),
    ("ENGINE('in-process')|ENGINE('in-process')", AT + 21, "option ENGINE is given twice"),
])
def test_engine_refusals_are_positioned(options, column, message):
    with pytest.raises(StreamDefinitionError) as err:
        parse(HEAD + options + TAIL)
    assert (err.value.line, err.value.column) == (1, column)
    assert message in str(err.value)


def test_a_trigger_without_a_detector_takes_no_engine():
    text = "CREATE STREAM s PERIOD(10s) STREAM_OPTIONS(ENGINE('in-process')) INTO o AS SELECT now(), 1"
    with pytest.raises(StreamDefinitionError, match="a PERIOD trigger has none") as err:
        parse(text)
    assert err.value.column == text.index("ENGINE") + 1


def test_show_streams_names_the_engine_of_a_window_stream(monkeypatch):
    from airflow_stream_provider.streams.status import COLUMNS, engine_of

    assert "engine" in dict(COLUMNS)
    monkeypatch.delenv("AIRFLOW_STREAM_DETECTOR_ENGINE", raising=False)
    (window,) = parse(HEAD + "WATERMARK(1s)" + TAIL)
    (named,) = parse(HEAD + "ENGINE('in-process')" + TAIL)
    (period,) = parse("CREATE STREAM s PERIOD(10s) INTO o AS SELECT now(), 1")
    assert (engine_of(window), engine_of(named), engine_of(period)) == ("in-process", "in-process", None)
    monkeypatch.setenv("AIRFLOW_STREAM_DETECTOR_ENGINE", "spark")
    assert (engine_of(window), engine_of(named)) == ("spark", "in-process")
    monkeypatch.setenv("AIRFLOW_STREAM_DETECTOR_ENGINE", "sprak")
    with pytest.raises(ValueError, match="expected one of in-process, spark, auto"):
        engine_of(window)


def test_auto_is_spark_on_a_cluster_for_what_the_spark_engine_runs(monkeypatch):
    from airflow_stream_provider.plan.stream import detector_engine_of

    monkeypatch.delenv("AIRFLOW_STREAM_DETECTOR_ENGINE", raising=False)
    (auto,) = parse(HEAD + "ENGINE('auto')" + TAIL)
    (spark,) = parse(HEAD + "ENGINE('spark')" + TAIL)
    (timed,) = parse(HEAD + "ENGINE('auto')|MAX_DELAY(5s)" + TAIL)
    cluster, local = "spark://10.0.0.1:7077", "local[2]"
    assert [detector_engine_of(s, local) for s in (auto, spark, timed)] == ["in-process", "spark", "in-process"]
    assert [detector_engine_of(s, cluster) for s in (auto, spark, timed)] == ["spark", "spark", "in-process"]
    # the node's setting: a stream naming no engine follows it, unless the spark engine cannot run it
    monkeypatch.setenv("AIRFLOW_STREAM_DETECTOR_ENGINE", "auto")
    (plain,) = parse(HEAD + "WATERMARK(1s)" + TAIL)
    (legacy,) = parse("CREATE STREAM s TRIGGER AT_ONCE INTO o AS SELECT _wstart, count(*) FROM m INTERVAL(10s)")
    assert [detector_engine_of(s, cluster) for s in (plain, legacy)] == ["spark", "in-process"]
    assert detector_engine_of(plain, local) == "in-process"
    monkeypatch.setenv("AIRFLOW_STREAM_NODE_MASTER", cluster)
    from airflow_stream_provider.streams.status import engine_of

    assert engine_of(plain) == "spark"
