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
    assert {"realtime_lag_ms", "history_progress_pct", "output_rows_per_sec_1m"} <= set(names)


def test_output_rate_counts_the_rows_written_in_the_last_minute():
    from datetime import UTC, datetime

    from airflow_stream_provider.streams.status import output_rows_per_sec_1m

    state = StreamState()
    for at, rows in (("2025-01-01T00:00:00+00:00", 600), ("2025-01-01T00:00:30+00:00", 30),
                     ("2025-01-01T00:01:10+00:00", 90)):
        state = state.merged({"written": [[at, rows]]})
    # the commit of 00:00:00 is 70 s before the latest: no longer kept
    assert state.other["written"] == [["2025-01-01T00:00:30+00:00", 30], ["2025-01-01T00:01:10+00:00", 90]]
    now = datetime(2025, 1, 1, 0, 1, 20, tzinfo=UTC)
    assert output_rows_per_sec_1m(state, now) == 2.0  # (30 + 90) rows in the minute before 00:01:20
    later = datetime(2025, 1, 1, 0, 1, 40, tzinfo=UTC)
    assert output_rows_per_sec_1m(state, later) == 1.5  # 00:00:30 is 70 s before: 90 rows / 60 s
    assert output_rows_per_sec_1m(StreamState(), now) == 0.0
