"""What a stream's options amount to, whichever language wrote them: its emit policy, its row
acceptance and its output naming. The expected policies follow the references: 000 (TDengine
3.3.7: EVENT_TYPE, MAX_DELAY, LOW_LATENCY_CALC, IGNORE_DISORDER, DELETE_RECALC, EXPIRED_TIME,
IGNORE_NODATA_TRIGGER) and 003 (before 3.3.7: the TRIGGER modes, RECALCULATE's default of 60
minutes, IGNORE EXPIRED and IGNORE UPDATE on by default, deletes always recalculated)."""

from __future__ import annotations

import pytest

from airflow_stream_provider import model as m
from airflow_stream_provider.sql import parse

D = m.Duration
E = m.EventType


def stream(text: str) -> m.CreateStream:
    [stmt] = parse(text)
    assert isinstance(stmt, m.CreateStream)
    return stmt


def legacy(options: str, window: str = "interval(10s)") -> m.CreateStream:
    return stream(f"create stream s {options} into o as select _wstart, count(*) from t {window}")


def current(options: str) -> m.CreateStream:
    return stream(f"CREATE STREAM s INTERVAL(10s) SLIDING(10s) FROM t {options} INTO o AS "
                  "SELECT _twstart, count(*) FROM t")


@pytest.mark.parametrize("options, emit", [
    ("", m.EmitPolicy()),
    ("STREAM_OPTIONS(EVENT_TYPE(WINDOW_OPEN|WINDOW_CLOSE))", m.EmitPolicy(on_open=True)),
    ("STREAM_OPTIONS(EVENT_TYPE(WINDOW_OPEN))", m.EmitPolicy(on_open=True, on_close=False)),
    ("STREAM_OPTIONS(MAX_DELAY(5s))", m.EmitPolicy(max_delay=D(5, "s"))),
    ("STREAM_OPTIONS(WATERMARK(3s)|IGNORE_NODATA_TRIGGER)", m.EmitPolicy(watermark=D(3, "s"), empty_windows=False)),
    ("STREAM_OPTIONS(LOW_LATENCY_CALC)", m.EmitPolicy(in_batch=True)),
])
def test_the_options_of_3_3_7_say_when_windows_emit(options, emit):
    stmt = current(options)
    assert stmt.emit == emit
    assert stmt.output_naming is m.OutputNaming.GROUP


@pytest.mark.parametrize("options, rows", [
    ("", m.RowAcceptance()),
    ("STREAM_OPTIONS(IGNORE_DISORDER)", m.RowAcceptance(ignore_disorder=True)),
    ("STREAM_OPTIONS(DELETE_RECALC)", m.RowAcceptance(delete_recalc=True)),
    ("STREAM_OPTIONS(EXPIRED_TIME(1h))", m.RowAcceptance(expired_time=D(1, "h"))),
])
def test_the_options_of_3_3_7_say_which_rows_recompute_windows(options, rows):
    stmt = current(options)
    assert stmt.rows == rows
    assert stmt.rows.recalculated_on_request  # RECALCULATE STREAM is the 3.3.7 language's


@pytest.mark.parametrize("options, emit, mode", [
    ("", m.EmitPolicy(), m.TriggerMode.WINDOW_CLOSE),
    ("trigger at_once", m.EmitPolicy(on_update=True, in_batch=True), m.TriggerMode.AT_ONCE),
    ("trigger max_delay 5s", m.EmitPolicy(max_delay=D(5, "s"), in_batch=True), m.TriggerMode.MAX_DELAY),
    ("trigger force_window_close", m.EmitPolicy(wall_clock_close=True, in_batch=True),
     m.TriggerMode.FORCE_WINDOW_CLOSE),
    ("trigger continuous_window_close", m.EmitPolicy(recalculate_every=D(60, "m")),
     m.TriggerMode.CONTINUOUS_WINDOW_CLOSE),
    ("trigger continuous_window_close recalculate 10m", m.EmitPolicy(recalculate_every=D(10, "m")),
     m.TriggerMode.CONTINUOUS_WINDOW_CLOSE),
    ("watermark 10s", m.EmitPolicy(watermark=D(10, "s")), m.TriggerMode.WINDOW_CLOSE),
])
def test_each_trigger_mode_before_3_3_7_is_an_emit_policy(options, emit, mode):
    stmt = legacy(options)
    # an INTERVAL without FILL writes no empty window (reference 003)
    assert stmt.emit == m.EmitPolicy(**{**emit.__dict__, "empty_windows": False})
    assert stmt.emit.mode is mode
    assert stmt.output_naming is m.OutputNaming.GROUP_ID


def test_fill_of_the_interval_is_how_an_empty_window_is_written():
    stmt = legacy("", "interval(10s) fill(value, 0)")
    assert stmt.emit.fill == m.Fill("VALUE", (0,)) and stmt.emit.empty_windows
    assert legacy("", "interval(10s) fill(none)").emit.fill is None


def test_a_stream_without_a_window_writes_in_the_batch():
    stmt = stream("create stream s into o as select ts, a * 2 x from st where a > 0 partition by tbname")
    assert stmt.emit.in_batch


@pytest.mark.parametrize("options, rows", [
    ("", m.RowAcceptance(incremental=True, delete_recalc=True)),
    ("ignore expired 0 ignore update 0",
     m.RowAcceptance(incremental=True, delete_recalc=True, ignore_expired=False, ignore_update=False)),
    ("delete_mark 1d", m.RowAcceptance(incremental=True, delete_recalc=True, delete_mark=D(1, "d"))),
])
def test_the_options_before_3_3_7_keep_windows_incrementally(options, rows):
    stmt = legacy(options)
    assert stmt.rows == rows
    assert not stmt.rows.recalculated_on_request  # that engine has no RECALCULATE
