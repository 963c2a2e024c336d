"""Message building and the shipped JSON Schema, per trigger type (reference 000, "Notification
Mechanism": the fields each trigger type's events carry)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import jsonschema
import pytest

from airflow_stream_provider.notify.message import (
    NotifyEvent,
    build,
    message_id,
    pack,
    validate,
    window_fields,
)

T = datetime(2024, 12, 4, 4, 0, tzinfo=UTC)  # 1733284800000 ms, the reference example's window start
MS = 1733284800000


def row(**extra) -> dict:
    base = {"window_start": T, "window_end": datetime(2024, 12, 4, 4, 1, tzinfo=UTC), "prev_state": None,
            "cur_state": None, "next_state": None, "condition_index": None, "field_values": None}
    return {**base, **extra}


# (trigger type, event type, event-table row, the fields the reference lists)
CASES = [
    ("Interval", "WINDOW_OPEN", row(), {"windowStart": MS}),
    ("Interval", "WINDOW_CLOSE", row(), {"windowStart": MS, "windowEnd": MS + 60_000}),
    ("Session", "WINDOW_OPEN", row(), {"windowStart": MS}),
    ("Session", "WINDOW_CLOSE", row(), {"windowStart": MS, "windowEnd": MS + 60_000}),
    ("Count", "WINDOW_CLOSE", row(), {"windowStart": MS, "windowEnd": MS + 60_000}),
    ("State", "WINDOW_OPEN", row(prev_state=None, cur_state='"on"'), {"windowStart": MS, "prevState": None,
                                                                        "curState": "on"}),
    ("State", "WINDOW_CLOSE", row(cur_state='"on"', next_state='"off"'),
     {"windowStart": MS, "windowEnd": MS + 60_000, "curState": "on", "nextState": "off"}),
    ("Event", "WINDOW_OPEN", row(condition_index=0, field_values='{"c1": 10, "c2": 15}'),
     {"windowStart": MS, "triggerCondition": {"conditionIndex": 0, "fieldValue": {"c1": 10, "c2": 15}}}),
    ("Event", "WINDOW_CLOSE", row(condition_index=1, field_values='{"c1": 20, "c2": 3}'),
     {"windowStart": MS, "windowEnd": MS + 60_000,
      "triggerCondition": {"conditionIndex": 1, "fieldValue": {"c1": 20, "c2": 3}}}),
    ("State", "WINDOW_INVALIDATION", row(cur_state='"on"'), {"windowStart": MS, "windowEnd": MS + 60_000}),
]


@pytest.mark.parametrize(("trigger_type", "event_type", "source", "expected"), CASES)
def test_window_fields_per_type(trigger_type, event_type, source, expected):
    fields = window_fields(trigger_type, event_type, source, "ms")
    assert fields == expected
    result = {"_wstart": MS, "avg(current)": 1.3} if event_type == "WINDOW_CLOSE" else None
    ev = NotifyEvent(stream="avg_current_stream", key="k", table_name="t_a667", event_type=event_type,
                     event_time=MS + 87_097, trigger_id="w-1", trigger_type=trigger_type, group_id="26509",
                     fields=fields, result=result)
    validate(build([ev], MS + 87_203).text)


@pytest.mark.parametrize("kind", ["Period", "Sliding"])
def test_scheduled_events(kind):
    ev = NotifyEvent(stream="s", key="k", table_name="t", event_type="ON_TIME", event_time=MS, trigger_id="0:1",
                     trigger_type=kind, group_id="0", fields={}, result={"count(*)": 3})
    body = json.loads(build([ev], MS).text)
    validate(body)
    assert body["streams"][0]["events"][0] == {"tableName": "t", "eventType": "ON_TIME", "eventTime": MS,
                                               "triggerId": "0:1", "triggerType": kind, "groupId": "0",
                                               "result": {"count(*)": 3}}


@pytest.mark.parametrize(("trigger_type", "event_type", "fields"), [
    ("Interval", "WINDOW_CLOSE", {"windowStart": MS}),  # a close needs its end
    ("Interval", "WINDOW_OPEN", {"windowStart": MS, "windowEnd": MS}),  # an open has no end yet
    ("Period", "WINDOW_CLOSE", {"windowStart": MS, "windowEnd": MS}),  # scheduled triggers send ON_TIME
    ("Interval", "ON_TIME", {}),
    ("State", "WINDOW_OPEN", {"windowStart": MS, "curState": 1}),  # prevState is required (NULL allowed)
    ("Event", "WINDOW_CLOSE", {"windowStart": MS, "windowEnd": MS}),  # triggerCondition required
    ("Interval", "WINDOW_CLOSE", {"windowStart": MS, "windowEnd": MS, "curState": 1}),
])
def test_schema_rejects_what_the_reference_does_not_allow(trigger_type, event_type, fields):
    ev = NotifyEvent(stream="s", key="k", table_name="t", event_type=event_type, event_time=MS, trigger_id="x",
                     trigger_type=trigger_type, group_id="0", fields=fields)
    with pytest.raises(jsonschema.ValidationError):
        validate(build([ev], MS).text)


def test_one_message_carries_several_streams_and_its_id_follows_its_events():
    evs = [NotifyEvent(stream=s, key=str(i), table_name="t", event_type="ON_TIME", event_time=MS, trigger_id=str(i),
                       trigger_type="Period", group_id="0") for i, s in enumerate("aab")]
    msg = build(evs, MS)
    body = json.loads(msg.text)
    assert [(s["streamName"], len(s["events"])) for s in body["streams"]] == [("a", 2), ("b", 1)]
    assert msg.message_id == build(evs, MS + 5).message_id == message_id(["a/0", "a/1", "b/2"])
    assert msg.message_id != build(evs[:2], MS).message_id


def test_pack_splits_at_the_size_limit_and_keeps_order():
    evs = [NotifyEvent(stream=f"s{i % 3}", key=str(i), table_name="t", event_type="ON_TIME", event_time=MS,
                       trigger_id=str(i), trigger_type="Period", group_id="0", fields={}, result={"v": "y" * 100})
           for i in range(200)]
    messages = pack(evs, MS, max_bytes=1500)
    assert all(m.size <= 1500 for m in messages) and len(messages) > 10
    per_stream: dict = {}
    for m in messages:
        for s in json.loads(m.text)["streams"]:
            per_stream.setdefault(s["streamName"], []).extend(int(ev["triggerId"]) for ev in s["events"])
    assert per_stream == {f"s{k}": list(range(k, 200, 3)) for k in range(3)}  # each stream in order
    assert sum(m.events for m in messages) == 200
    lone = NotifyEvent(stream="s", key="big", table_name="t", event_type="ON_TIME", event_time=MS, trigger_id="b",
                       trigger_type="Period", group_id="0", fields={}, result={"v": "z" * 5000})
    assert [m.events for m in pack([lone], MS, max_bytes=1500)] == [1]  # too big to share: sent alone


def test_idle_and_resume_events_carry_their_span_and_no_window():
    """TDengine 3.4.1's IDLE/RESUME fields: idleStart and idleEnd in epoch nanoseconds (processing time),
    idleDurationMs between them; no windowStart/windowEnd. The span here is 5 min 0.250 s."""
    span = row(window_start=datetime(2025, 10, 9, 8, 53, 20, 122_000, tzinfo=UTC),  # 1760000000.122 s
               window_end=datetime(2025, 10, 9, 8, 58, 20, 372_000, tzinfo=UTC))  # 300.250 s later
    fields = window_fields("Interval", "IDLE", span, "ms")
    assert fields == {"idleStart": 1_760_000_000_122_000_000, "idleEnd": 1_760_000_300_372_000_000,
                      "idleDurationMs": 300_250}
    assert window_fields("State", "RESUME", span, "us") == fields  # whatever the precision and trigger
    for kind in ("IDLE", "RESUME"):
        ev = NotifyEvent(stream="sdb1.dev_offline_alarm", key=kind, table_name="dev_minute_stat_dev001",
                         event_type=kind, event_time=1_760_000_300_372, trigger_id="t-1", trigger_type="Interval",
                         group_id="4321", fields=fields)
        validate(build([ev], 1_760_000_300_400).text)


@pytest.mark.parametrize(("event_type", "fields"), [
    ("IDLE", {"idleStart": 1, "idleEnd": 2}),  # idleDurationMs is required
    ("RESUME", {"idleStart": 1, "idleEnd": 2, "idleDurationMs": 0, "windowStart": MS}),  # no window on idle events
    ("WINDOW_CLOSE", {"windowStart": MS, "windowEnd": MS, "idleDurationMs": 0}),  # idle fields on idle events only
])
def test_schema_rejects_misplaced_idle_fields(event_type, fields):
    ev = NotifyEvent(stream="s", key="k", table_name="t", event_type=event_type, event_time=MS, trigger_id="x",
                     trigger_type="Session", group_id="0", fields=fields)
    with pytest.raises(jsonschema.ValidationError):
        validate(build([ev], MS).text)
