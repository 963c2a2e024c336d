"""The window core against the row-at-a-time reference, and chunked scans against one scan."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_stream_provider import model as m
from airflow_stream_provider.model.events import TriggerKind
from airflow_stream_provider.windows.core import scan
from airflow_stream_provider.windows.spec import WindowSpec
from tests.windows import reference as ref

S = 1_000_000  # one second in microseconds


def frame(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows) if rows else pd.DataFrame({"ts": []})
    df["ts"] = df["ts"].astype(np.int64)
    return df


def closed(windows: pd.DataFrame, *cols: str) -> list[tuple]:
    w = windows[windows["closed"]]
    return [tuple(x) for x in w[list(("wstart", "wend", "rows") + cols)].itertuples(index=False)]


def random_rows(rng: np.random.Generator, n: int, states: int = 3, null_rate: float = 0.1) -> list[dict]:
    ts = np.cumsum(rng.integers(1, 20, size=n)) * S
    rows = []
    for t in ts.tolist():
        value = int(rng.integers(0, states))
        rows.append({
            "ts": t,
            "_state": None if rng.random() < null_rate else value,
            "_start": bool(rng.random() < 0.2),
            "_end": bool(rng.random() < 0.2),
            "_valid": bool(rng.random() < 0.8),
            "_f_v": value,
        })
    return rows


@pytest.mark.parametrize("seed", range(5))
def test_interval_and_sliding_match_reference(seed):
    rng = np.random.default_rng(seed)
    rows = random_rows(rng, 300)
    for size, step, offset, keep in [(10, 10, 0, True), (30, 10, 0, True), (20, 5, 3, False), (7, 7, 2, True)]:
        spec = WindowSpec(TriggerKind.INTERVAL, interval=size * S, sliding=step * S, offset=offset * S, keep_empty=keep)
        got, _ = scan(spec, frame(rows), None, final=True)
        assert closed(got) == ref.interval(rows, size * S, step * S, offset * S, keep)


@pytest.mark.parametrize("seed", range(5))
def test_session_matches_reference(seed):
    rows = random_rows(np.random.default_rng(seed), 300)
    for gap in (5, 10, 19):
        got, _ = scan(WindowSpec(TriggerKind.SESSION, gap=gap * S), frame(rows), None, final=True)
        assert closed(got) == ref.session(rows, gap * S)


def test_session_gap_is_inclusive():
    rows = [{"ts": 0}, {"ts": 10 * S}, {"ts": 21 * S}]
    got, _ = scan(WindowSpec(TriggerKind.SESSION, gap=10 * S), frame(rows), None, final=True)
    assert closed(got) == [(0, 10 * S, 2), (21 * S, 21 * S, 1)]


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("true_for", [None, (30, None, None), (None, 3, None), (30, 3, "AND"), (30, 3, "OR")])
def test_state_matches_reference(seed, true_for):
    rows = random_rows(np.random.default_rng(seed), 300)
    d, c, op = true_for or (None, None, None)
    spec = WindowSpec(TriggerKind.STATE_WINDOW, true_for_duration=d and d * S, true_for_count=c, true_for_op=op)
    got, _ = scan(spec, frame(rows), None, final=True)
    assert closed(got, "prev_state", "cur_state", "next_state") == ref.state(rows, d and d * S, c, op)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("true_for", [None, (30, None, None), (None, 4, None), (30, 4, "AND"), (30, 4, "OR")])
def test_event_matches_reference(seed, true_for):
    rows = random_rows(np.random.default_rng(seed), 300)
    d, c, op = true_for or (None, None, None)
    spec = WindowSpec(TriggerKind.EVENT_WINDOW, true_for_duration=d and d * S, true_for_count=c, true_for_op=op,
                      start_fields=("v",), end_fields=("v",))
    got, _ = scan(spec, frame(rows), None, final=True)
    assert closed(got) == ref.event(rows, d and d * S, c, op)


def test_event_start_while_open_does_not_restart_and_records_conditions():
    rows = [
        {"ts": 1 * S, "_start": True, "_end": False, "_f_v": 81},
        {"ts": 2 * S, "_start": True, "_end": False, "_f_v": 90},  # already open: no restart
        {"ts": 3 * S, "_start": False, "_end": True, "_f_v": 70},
        {"ts": 4 * S, "_start": True, "_end": True, "_f_v": 85},  # opens and closes on one row
    ]
    spec = WindowSpec(TriggerKind.EVENT_WINDOW, start_fields=("v",), end_fields=("v",))
    got, _ = scan(spec, frame(rows), None, final=True)
    assert closed(got) == [(1 * S, 3 * S, 3), (4 * S, 4 * S, 1)]
    first = got.iloc[0]
    assert (first.open_index, json.loads(first.open_fields)) == (0, {"v": 81})
    assert (first.close_index, json.loads(first.close_fields)) == (1, {"v": 70})


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("size,step", [(1, 1), (5, 5), (5, 2), (4, 1), (3, 3)])
def test_count_matches_reference(seed, size, step):
    rows = random_rows(np.random.default_rng(seed), 200)
    spec = WindowSpec(TriggerKind.COUNT_WINDOW, count=size, count_sliding=step)
    got, _ = scan(spec, frame(rows), None, final=True)
    assert closed(got, "ordinal") == ref.count_windows(rows, size, step)


def test_count_window_only_counts_rows_with_a_trigger_column():
    rows = [{"ts": i * S, "_valid": i % 2 == 0} for i in range(8)]
    got, _ = scan(WindowSpec(TriggerKind.COUNT_WINDOW, count=2, count_sliding=2), frame(rows), None)
    # counted rows: 0, 2, 4, 6 -> windows [0, 2] and [4, 6], both full and closed
    assert closed(got) == [(0, 2 * S, 2), (4 * S, 6 * S, 2)]


def test_windows_close_only_when_the_watermark_passes_them():
    rows = frame([{"ts": t * S} for t in (1, 5, 12, 14)])
    spec = WindowSpec(TriggerKind.INTERVAL, interval=10 * S, sliding=10 * S, watermark=5 * S)
    got, carry = scan(spec, rows, None)
    assert closed(got) == []  # watermark 9 s has not reached the end (10 s) of window [0, 10)
    got, carry = scan(spec, frame([{"ts": 15 * S}]), carry)
    assert closed(got) == [(0, 10 * S, 2)]
    spec = WindowSpec(TriggerKind.SESSION, gap=3 * S, watermark=2 * S)
    got, carry = scan(spec, rows, None)
    assert closed(got) == [(1 * S, 1 * S, 1), (5 * S, 5 * S, 1)]
    got, carry = scan(spec, frame([]), carry, watermark=17 * S)
    assert closed(got) == []  # 17 - 14 = 3 s is still within the gap
    got, carry = scan(spec, frame([]), carry, watermark=18 * S)
    assert closed(got) == [(12 * S, 14 * S, 2)]


def test_empty_interval_windows_trigger_unless_told_otherwise():
    rows = frame([{"ts": 1 * S}, {"ts": 35 * S}])
    got, _ = scan(WindowSpec(TriggerKind.INTERVAL, interval=10 * S, sliding=10 * S), rows, None, final=True)
    assert closed(got) == [(0, 10 * S, 1), (10 * S, 20 * S, 0), (20 * S, 30 * S, 0), (30 * S, 40 * S, 1)]
    spec = WindowSpec(TriggerKind.INTERVAL, interval=10 * S, sliding=10 * S, keep_empty=False)
    got, _ = scan(spec, rows, None, final=True)
    assert closed(got) == [(0, 10 * S, 1), (30 * S, 40 * S, 1)]


def test_true_for_reports_the_open_window_once_it_qualifies():
    spec = WindowSpec(TriggerKind.STATE_WINDOW, true_for_duration=10 * S)
    got, carry = scan(spec, frame([{"ts": 0, "_state": 1}, {"ts": 5 * S, "_state": 1}]), None)
    assert got.empty
    got, carry = scan(spec, frame([{"ts": 10 * S, "_state": 1}]), carry)
    assert list(got[["wstart", "opened", "closed"]].itertuples(index=False, name=None)) == [(0, True, False)]
    got, carry = scan(spec, frame([{"ts": 11 * S, "_state": 2}]), carry)
    assert list(got[["wstart", "wend", "opened", "closed", "next_state"]].itertuples(index=False, name=None)) == [
        (0, 10 * S, False, True, 2)]


def test_spec_from_trigger_counts_calendar_intervals_in_months():
    trigger = m.IntervalWindow(m.Duration(1, "n"), m.Duration(1, "n"))
    spec = WindowSpec.from_trigger(trigger)  # no zone given: months of UTC
    # window 0 is January 1970, window 1 February (31 days later), window 2 March (28 more)
    day = 86_400 * S
    assert spec.window_starts(np.array([0, 1, 2])).tolist() == [0, 31 * day, 59 * day]


# --- chunked scans give the windows of one scan ----------------------------------------------

SPECS = [
    WindowSpec(TriggerKind.INTERVAL, interval=10 * S, sliding=10 * S),
    WindowSpec(TriggerKind.INTERVAL, interval=30 * S, sliding=10 * S, offset=4 * S, keep_empty=False),
    WindowSpec(TriggerKind.SESSION, gap=12 * S),
    WindowSpec(TriggerKind.STATE_WINDOW),
    WindowSpec(TriggerKind.STATE_WINDOW, true_for_duration=20 * S, true_for_count=3, true_for_op="OR"),
    WindowSpec(TriggerKind.EVENT_WINDOW, start_fields=("v",), end_fields=("v",)),
    WindowSpec(TriggerKind.EVENT_WINDOW, true_for_count=3, start_fields=("v",), end_fields=("v",)),
    WindowSpec(TriggerKind.COUNT_WINDOW, count=4, count_sliding=2),
    WindowSpec(TriggerKind.COUNT_WINDOW, count=3, count_sliding=3),
]


def events_of(windows: pd.DataFrame) -> list[tuple]:
    out = []
    for w in windows.itertuples(index=False):
        if w.opened:
            out.append(("open", w.wstart, w.ordinal))
        if w.closed:
            out.append(("close", w.wstart, w.ordinal, w.wend, w.rows, w.cur_state, w.next_state, w.close_fields))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), spec_index=st.integers(0, len(SPECS) - 1),
       cuts=st.lists(st.integers(0, 120), max_size=8))
def test_chunked_scan_equals_one_scan(seed, spec_index, cuts):
    spec = SPECS[spec_index]
    rows = frame(random_rows(np.random.default_rng(seed), 120))
    whole, _ = scan(spec, rows, None)
    pieces, carry = [], None
    bounds = [0, *sorted(cuts), len(rows)]
    for a, b in zip(bounds, bounds[1:]):
        got, carry = scan(spec, rows.iloc[a:b].reset_index(drop=True), carry)
        pieces.append(got)
    chunked = pd.concat(pieces, ignore_index=True)
    assert sorted(events_of(chunked), key=repr) == sorted(events_of(whole), key=repr)


@given(duration=st.integers(0, 100), rows=st.integers(1, 20),
       true_for=st.sampled_from([(None, None, None), (50, None, None), (None, 5, None),
                                 (50, 5, "AND"), (50, 5, "OR")]))
def test_true_for_of_one_window_agrees_with_the_vector_form(duration, rows, true_for):
    spec = WindowSpec(TriggerKind.STATE_WINDOW, true_for_duration=true_for[0], true_for_count=true_for[1],
                      true_for_op=true_for[2])
    by_hand = ref.true_for(0, duration, rows, *true_for)
    assert spec.qualifies_one(duration, rows) == by_hand
    assert bool(spec.qualifies(np.array([duration]), np.array([rows]))[0]) == by_hand


@pytest.mark.parametrize("values", [
    np.array([14.5, np.nan, -0.1, 1e20], np.float64),
    np.array([14.5, np.nan, 3.25], np.float32),
    np.array([218, -3, 0], np.int32),
    np.array([True, False]),
    np.array(['say "hi", then', None, "ünïcode"], dtype=object),
])
def test_condition_fields_are_the_json_of_their_values(values):
    """Condition fields are encoded a column at a time; each must read as the JSON of its row's
    value (NaN and None as null), one field or several, and entries that are JSON already stay."""
    from airflow_stream_provider.windows.core import _fields_texts

    def value(v):
        v = v.item() if isinstance(v, np.generic) else v
        return None if isinstance(v, float) and np.isnan(v) else v

    columns = {"c": values, "voltage": np.arange(len(values), dtype=np.int64)}
    rows = [*range(len(values)), '{"kept": 1}', None]
    got = _fields_texts(columns, rows)
    for i in range(len(values)):
        assert json.loads(got[i]) == {"c": value(values[i]), "voltage": i}
        assert list(json.loads(got[i])) == ["c", "voltage"]
    assert got[-2:] == ['{"kept": 1}', None]
    assert _fields_texts({"c": values}, [0]) == [json.dumps({"c": value(values[0])})]


def test_state_json_keeps_true_apart_from_one():
    """1 and True are equal as Python keys, but a state of 1 and a state of true are different JSON."""
    from airflow_stream_provider.windows.events import _json

    assert _json(np.array([1, True, None, 1, "1"], dtype=object)).tolist() == ["1", "true", None, "1", '"1"']
    assert _json(np.array([218, None, 219, 218], dtype=object)).tolist() == ["218", None, "219", "218"]
