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
    ("ENGINE('spark')", AT, "the stream node hosts window detectors on the in-process engine only"),
    ("WATERMARK(1s)|ENGINE('auto')", AT + 14, "ENGINE('auto')"),
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
    with pytest.raises(ValueError, match="the stream node hosts the in-process engine only"):
        engine_of(window)
