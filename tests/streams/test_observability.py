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


def test_input_rate_counts_the_rows_the_detector_read_in_the_last_minute():
    from datetime import UTC, datetime

    from airflow_stream_provider.streams.status import input_rows_per_sec_1m

    stmt = _stream("CREATE STREAM s INTERVAL(1m) SLIDING(1m) FROM m "
                   "INTO o AS SELECT _twstart ts, count(*) n FROM %%trows")
    state = StreamState()
    for at, rows in (("2025-01-01T00:00:00+00:00", 1000), ("2025-01-01T00:00:40+00:00", 120),
                     ("2025-01-01T00:01:05+00:00", 60)):
        state = state.merged({"read": [[at, rows]]})
    assert state.other["read"] == [["2025-01-01T00:00:40+00:00", 120], ["2025-01-01T00:01:05+00:00", 60]]
    now = datetime(2025, 1, 1, 0, 1, 10, tzinfo=UTC)
    assert input_rows_per_sec_1m(stmt, state, now) == 3.0  # (120 + 60) rows / 60 s
    assert input_rows_per_sec_1m(stmt, StreamState(), now) == 0.0  # a detector that read nothing
    period = _stream("CREATE STREAM p PERIOD(10s) INTO o AS SELECT cast(_tlocaltime / 1000000 AS timestamp) ts, "
                     "count(*) n FROM m")
    assert input_rows_per_sec_1m(period, state, now) is None  # no detector reads a PERIOD stream's rows


def test_result_latency_is_the_mean_trigger_to_commit_time_of_the_last_minute():
    from datetime import UTC, datetime

    from airflow_stream_provider.streams.run import result_latencies
    from airflow_stream_provider.streams.status import runner_result_latency_avg_1m_ms

    commit = datetime(2025, 1, 1, 0, 1, 0, tzinfo=UTC)
    # one commit of the windows of two detector batches, found 1.5 s and 0.25 s before it
    entries = result_latencies(["2025-01-01T00:00:58.500000+00:00", "2025-01-01T00:00:59.750000+00:00"], commit)
    assert entries == [["2025-01-01T00:01:00+00:00", 1500], ["2025-01-01T00:01:00+00:00", 250]]
    state = StreamState().merged({"latency": [["2025-01-01T00:00:10+00:00", 2000]]}).merged({"latency": entries})
    # (2000 + 1500 + 250) / 3
    assert runner_result_latency_avg_1m_ms(state, datetime(2025, 1, 1, 0, 1, 5, tzinfo=UTC)) == 1250.0
    # 70 s after the first commit only the later two count
    assert runner_result_latency_avg_1m_ms(state, datetime(2025, 1, 1, 0, 1, 20, tzinfo=UTC)) == 875.0
    assert runner_result_latency_avg_1m_ms(StreamState(), commit) is None  # nothing committed: NULL, as TDengine


def test_trigger_times_are_the_detection_of_windows_and_the_period_instants():
    from datetime import UTC, datetime

    from airflow_stream_provider.model.events import StreamKind
    from airflow_stream_provider.streams.fired import Fired
    from airflow_stream_provider.streams.run import trigger_times
    from airflow_stream_provider.windows.events import WindowEvent

    found = datetime(2025, 1, 1, 0, 0, 5, tzinfo=UTC)
    event = WindowEvent(trigger_id="0:1", event_type="WINDOW_CLOSE", trigger_type="INTERVAL", group_id="0",
                        group_keys="[]", window_start=datetime(2025, 1, 1, tzinfo=UTC), event_time=found)
    # two windows of one batch: one detection time
    assert trigger_times([Fired(0, {}, event=event), Fired(1, {}, event=event)], StreamKind.WINDOW) == [
        "2025-01-01T00:00:05+00:00"]
    instant = int(datetime(2025, 1, 1, 0, 0, 10, tzinfo=UTC).timestamp()) * 10**9
    assert trigger_times([Fired(0, {"_tlocaltime": instant})], StreamKind.PERIOD) == ["2025-01-01T00:00:10+00:00"]
    assert trigger_times([Fired(0, {"_tlocaltime": instant})], StreamKind.SLIDING) == []  # event time, not a trigger's


def test_ins_streams_has_the_rate_and_latency_columns():
    names = [name for name, _ in COLUMNS]
    assert {"input_rows_per_sec_1m", "runner_result_latency_avg_1m_ms"} <= set(names)
