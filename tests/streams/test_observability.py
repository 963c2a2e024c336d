"""TDengine 3.4.2.5's observability columns of ins_streams, from a stream's state alone."""

from __future__ import annotations

from airflow_stream_provider.plan.state import StreamState
from airflow_stream_provider.sql import parse
from airflow_stream_provider.streams.status import COLUMNS, history_progress_pct


def _stream(text: str):
    (stmt,) = parse(text)
    return stmt


def test_history_progress_is_0_before_fill_history_is_done_and_100_after():
    stmt = _stream("CREATE STREAM s INTERVAL(1m) SLIDING(1m) FROM m STREAM_OPTIONS(FILL_HISTORY) "
                   "INTO o AS SELECT _twstart ts, count(*) n FROM %%trows")
    assert history_progress_pct(stmt, StreamState()) == 0.0  # no detector batch computed yet
    assert history_progress_pct(stmt, StreamState(consumed_batch=0)) == 100.0  # the history batch done


def test_history_progress_is_null_for_a_stream_without_fill_history():
    stmt = _stream("CREATE STREAM s INTERVAL(1m) SLIDING(1m) FROM m "
                   "INTO o AS SELECT _twstart ts, count(*) n FROM %%trows")
    assert history_progress_pct(stmt, StreamState(consumed_batch=3)) is None


def test_ins_streams_has_tdengine_observability_columns():
    names = [name for name, _ in COLUMNS]
    assert {"realtime_lag_ms", "history_progress_pct"} <= set(names)
