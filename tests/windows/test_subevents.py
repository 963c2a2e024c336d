"""Sub-event windows, ``EVENT_WINDOW(START WITH (c1, c2, ...) [END WITH e])`` (TDengine 3.4.0), from
the statement's text to the windows, their events and their notification fields.

The scenarios are those of TDengine's ``test_event_new.py`` (streams ``s9_1`` to ``s9_4``: two alarm
levels, with and without END WITH and TRUE_FOR) on our own rows. The expected windows are worked
out by hand from TDengine's rules (41-stream.md, "Event Window Trigger (with Sub-Event Window
Support)"): the first condition holding on a row is the effective one; a change of it closes the
sub-window on the row before and opens the next; END WITH, or a row where no condition holds,
closes the last sub-window and the parent, that row included; the parent exists only once a
second sub-window opens, spans its sub-windows, and TRUE_FOR judges every window on its own.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_stream_provider import model as m
from airflow_stream_provider.notify.message import validate, window_fields
from airflow_stream_provider.sql import parse
from airflow_stream_provider.windows.core import scan
from airflow_stream_provider.windows.events import event_rows
from airflow_stream_provider.windows.trigger_plan import TriggerPlan

S = 1_000_000
#: one row a second from 0 s: the current of a machine and its temperature
AMPS = [40, 65, 70, 95, 92, 61, 30, 91, 20, 75, 77, 10, 99]
TEMP = [20, 20, 20, 20, 85, 20, 20, 20, 20, 20, 85, 20, 20]
LEVELS = "START WITH (amps >= 90, amps >= 60)"


def plan_of(window: str, true_for: str = "") -> TriggerPlan:
    stmt = parse(f"CREATE STREAM s EVENT_WINDOW({window}) {true_for} FROM t NOTIFY('ws://h:1') "
                 "ON (WINDOW_OPEN|WINDOW_CLOSE)")[0]
    return TriggerPlan.build(stmt, "db.t", path="/nowhere", columns=["ts", "amps", "temp"], ts_column="ts")


def rows_of(plan: TriggerPlan, amps: list[int] = AMPS, temp: list[int] = TEMP) -> pd.DataFrame:
    raw = pd.DataFrame({"ts": np.arange(len(amps), dtype=np.int64) * S, "amps": amps, "temp": temp})
    return plan.prepare(raw)


def windows(plan: TriggerPlan, rows: pd.DataFrame | None = None) -> list[tuple]:
    """(start s, end s, rows, windowIndex) of the closed windows, in the order the scan closes them."""
    got, _ = scan(plan.spec, rows_of(plan) if rows is None else rows, None, final=True)
    got = got[got["closed"]]
    return [(w.wstart // S, w.wend // S, w.rows, w.ordinal - 1) for w in got.itertuples(index=False)]


def test_the_statement_keeps_each_condition_with_its_position():
    stmt = parse("CREATE STREAM s EVENT_WINDOW(START WITH (amps >= 90, amps >= 60)) TRUE_FOR(2s) FROM t "
                 "NOTIFY('ws://h:1') ON (WINDOW_CLOSE)")[0]
    trigger = stmt.trigger
    assert isinstance(trigger, m.EventWindow) and trigger.sub_events and trigger.end is None
    assert [c.text for c in trigger.starts] == ["amps >= 90", "amps >= 60"]
    assert [c.position.column for c in trigger.starts] == [42, 54]  # 1-based, after "START WITH ("
    assert str(trigger) == "EVENT_WINDOW(START WITH (amps >= 90, amps >= 60)) TRUE_FOR(2s)"
    # a parenthesised single condition is a plain event window, which needs END WITH
    plain = parse("CREATE STREAM s EVENT_WINDOW(START WITH (amps >= 90) AND temp > 1 END WITH temp < 1) FROM t "
                  "NOTIFY('ws://h:1') ON (WINDOW_CLOSE)")[0].trigger
    assert not plain.sub_events and plain.start.text == "(amps >= 90) AND temp > 1"


def test_the_effective_condition_is_the_first_that_holds():
    rows = rows_of(plan_of(LEVELS))
    assert rows["_cond"].tolist() == [-1, 1, 1, 0, 0, 1, -1, 0, -1, 1, 1, -1, 0]


def test_without_end_with_no_condition_holding_closes_the_window():
    # 1-2 s at level 1, 3-4 s at level 0, 5 s at level 1, 6 s none: three sub-windows, then their
    # parent [1, 6]; 7-8 s and 9-11 s keep one level: plain windows; 12 s is still open at the end
    assert windows(plan_of(LEVELS)) == [
        (1, 2, 2, 0), (3, 4, 2, 1), (5, 6, 2, 2), (1, 6, 6, -1), (7, 8, 2, -1), (9, 11, 3, -1)]


def test_end_with_closes_the_last_sub_window_and_the_parent():
    # END WITH holds at 4 s and 10 s: [3, 4] and its parent [1, 4] close there; 5 s opens afresh
    assert windows(plan_of(LEVELS + " END WITH temp > 80")) == [
        (1, 2, 2, 0), (3, 4, 2, 1), (1, 4, 4, -1), (5, 6, 2, -1), (7, 8, 2, -1), (9, 10, 2, -1)]


def test_true_for_judges_parent_and_sub_windows_each_on_its_own():
    # every sub-window lasts 1 s, so none is kept; their parent lasts 5 s and is; [9, 11] lasts 2 s
    assert windows(plan_of(LEVELS, "TRUE_FOR(2s)")) == [(1, 6, 6, -1), (9, 11, 3, -1)]
    assert windows(plan_of(LEVELS, "TRUE_FOR(COUNT 3)")) == [(1, 6, 6, -1), (9, 11, 3, -1)]


def test_a_change_and_end_with_on_one_row():
    # 0 s at level 1, 1 s at level 0 and END WITH: [0, 0], then [1, 1], then the parent [0, 1]
    plan = plan_of(LEVELS + " END WITH temp > 80")
    assert windows(plan, rows_of(plan, [65, 95], [20, 85])) == [(0, 0, 1, 0), (1, 1, 1, 1), (0, 1, 2, -1)]


def test_conditions_say_which_condition_opened_and_closed_each_window():
    plan = plan_of(LEVELS + " END WITH temp > 80")
    got, _ = scan(plan.spec, rows_of(plan), None, final=True)
    first = got[got["closed"]].head(3)
    # opened by level 1 / level 0 (the parent: its first sub-window's); closed by the change to
    # level 0, then by END WITH (index 2, after the two START WITH conditions)
    assert first["open_index"].tolist() == [1, 0, 1]
    assert first["close_index"].tolist() == [0, 2, 2]
    assert [json.loads(f) for f in first["open_fields"]] == [
        {"amps": 65, "temp": 20}, {"amps": 95, "temp": 20}, {"amps": 65, "temp": 20}]
    assert json.loads(first["close_fields"].iloc[0]) == {"amps": 95, "temp": 20}


def test_events_give_each_window_its_own_trigger_id_and_the_parent_closes_last():
    plan = plan_of(LEVELS)
    got, _ = scan(plan.spec, rows_of(plan, AMPS[:7], TEMP[:7]), None, final=True)
    events = event_rows(plan, {}, got)
    shape = [(e.event_type, e.window_start.value // 1000 // S, e.window_ordinal - 1) for e in events.itertuples()]
    assert shape == [("WINDOW_OPEN", 1, 0), ("WINDOW_CLOSE", 1, 0), ("WINDOW_OPEN", 1, -1), ("WINDOW_CLOSE", 1, -1),
                     ("WINDOW_OPEN", 3, 1), ("WINDOW_CLOSE", 3, 1), ("WINDOW_OPEN", 5, 2), ("WINDOW_CLOSE", 5, 2)]
    ids = events.groupby("window_ordinal")["trigger_id"].nunique()
    assert ids.tolist() == [1, 1, 1, 1] and events["trigger_id"].nunique() == 4  # an open and its close share one


def test_notification_fields_carry_window_index():
    row = {"window_start": pd.Timestamp(S, unit="us", tz="UTC"), "window_end": pd.Timestamp(3 * S, unit="us", tz="UTC"),
           "condition_index": 1, "field_values": '{"amps": 65}', "window_ordinal": 1}
    fields = window_fields("Event", "WINDOW_CLOSE", row, "ms", sub_events=True)
    assert fields == {"windowStart": 1000, "windowEnd": 3000, "windowIndex": 0,
                      "triggerCondition": {"conditionIndex": 1, "fieldValue": {"amps": 65}}}
    parent = window_fields("Event", "WINDOW_OPEN", {**row, "window_ordinal": 0}, "ms", sub_events=True)
    assert parent["windowIndex"] == -1
    assert "windowIndex" not in window_fields("Event", "WINDOW_OPEN", row, "ms")  # a plain 3.3.7 stream
    event = {"tableName": "t", "eventType": "WINDOW_CLOSE", "eventTime": 1, "triggerId": "x", "triggerType": "Event",
             "groupId": "0", **fields}
    validate({"messageId": "m", "timestamp": 1, "streams": [{"streamName": "s", "events": [event]}]})


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), end=st.booleans(), cuts=st.lists(st.integers(0, 80), max_size=6))
def test_a_live_scan_in_pieces_finds_what_one_scan_does(seed, end, cuts):
    plan = plan_of(LEVELS + (" END WITH temp > 80" if end else ""), "TRUE_FOR(COUNT 2)")
    rng = np.random.default_rng(seed)
    rows = rows_of(plan, rng.choice([10, 65, 95], 80).tolist(), rng.choice([20, 85], 80, p=[0.8, 0.2]).tolist())
    whole, _ = scan(plan.spec, rows, None)
    pieces, carry = [], None
    bounds = [0, *sorted(cuts), len(rows)]
    for a, b in zip(bounds, bounds[1:], strict=False):
        got, carry = scan(plan.spec, rows.iloc[a:b].reset_index(drop=True), carry)
        pieces.append(got)
        carry = json.loads(json.dumps(carry))  # the carry is JSON, as the detector keeps it
    chunked = pd.concat(pieces, ignore_index=True)
    key = ["wstart", "ordinal", "wend", "rows", "open_index", "close_index", "open_fields", "close_fields"]
    assert chunked.loc[chunked["closed"], key].values.tolist() == whole.loc[whole["closed"], key].values.tolist()


@pytest.mark.parametrize("window", [LEVELS, LEVELS + " END WITH temp > 80"])
def test_a_sub_event_window_prints_back_as_it_parses(window):
    trigger = parse(f"CREATE STREAM s EVENT_WINDOW({window}) FROM t NOTIFY('ws://h:1') ON (WINDOW_CLOSE)")[0].trigger
    assert str(trigger) == f"EVENT_WINDOW({window})"
