"""The window event a run reads back from the event table: one frozen object per row, its instants
aware, its missing fields None."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pandas as pd
import pytest

from airflow_stream_provider.windows.events import EVENT_COLUMNS, WindowEvent, window_events


def _frame() -> pd.DataFrame:
    rows = [
        {"stream": "s", "trigger_id": "t1", "event_type": "WINDOW_OPEN", "trigger_type": "State", "group_id": "7",
         "group_keys": '{"tbname": "d1"}', "window_start": pd.Timestamp("2025-01-01 00:00:00", tz="UTC"),
         "window_end": pd.NaT, "row_count": float("nan"), "prev_state": None, "cur_state": "1", "batch_id": 3,
         "seq": 0, "event_time": pd.Timestamp("2025-01-01 00:00:05")},
        {"stream": "s", "trigger_id": "t1", "event_type": "WINDOW_CLOSE", "trigger_type": "State", "group_id": "7",
         "group_keys": '{"tbname": "d1"}', "window_start": pd.Timestamp("2025-01-01 00:00:00", tz="UTC"),
         "window_end": pd.Timestamp("2025-01-01 00:00:10", tz="UTC"), "row_count": 4.0, "prev_state": None,
         "cur_state": "1", "next_state": "2", "batch_id": 3, "seq": 1,
         "event_time": pd.Timestamp("2025-01-01 00:00:11", tz="UTC")},
    ]
    return pd.DataFrame(rows)


def test_each_row_becomes_one_event_in_order_with_typed_fields():
    opened, closed = window_events(_frame())
    assert (opened.event_type, closed.event_type) == ("WINDOW_OPEN", "WINDOW_CLOSE")
    assert opened.window_start == datetime(2025, 1, 1, tzinfo=UTC)
    assert opened.window_end is None and opened.row_count is None and opened.next_state is None
    assert closed.window_end == datetime(2025, 1, 1, 0, 0, 10, tzinfo=UTC)
    assert closed.row_count == 4 and isinstance(closed.row_count, int)
    assert (closed.batch_id, closed.seq) == (3, 1)
    # a naive instant is UTC, as the event table writes them
    assert opened.event_time == datetime(2025, 1, 1, 0, 0, 5, tzinfo=UTC)


def test_its_fields_are_the_event_table_s_columns():
    (event, _closed) = window_events(_frame())
    fields = event.fields()
    assert set(fields) == {*EVENT_COLUMNS, "batch_id", "seq", "event_time"}
    assert fields["cur_state"] == "1" and fields["group_keys"] == '{"tbname": "d1"}'


def test_an_event_is_frozen_and_keyword_only():
    (event, _closed) = window_events(_frame())
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.seq = 9  # type: ignore[misc]
    with pytest.raises(TypeError):
        WindowEvent("t", "WINDOW_OPEN")  # type: ignore[misc]


def test_equal_events_are_one_key():
    first, again = window_events(pd.concat([_frame().iloc[:1], _frame().iloc[:1]]))
    assert first == again and len({first, again}) == 1
