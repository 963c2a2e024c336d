"""Notification messages in the JSON of reference 000, "Notification Mechanism" (and of reference
003 for streams in TDengine's syntax before 3.3.7).

A message is ``{"messageId", "timestamp", "streams": [{"streamName", "events": [...]}]}``. Each
event has the common fields (``tableName``, ``eventType``, ``eventTime``, ``triggerId``,
``triggerType``, ``groupId``) and those of its trigger type: window start and end, the states of a
state window, the ``triggerCondition`` of an event window, and ``result`` (the computation's
columns and values) on the events that ran it. IDLE and RESUME events (TDengine 3.4.1) carry
``idleStart``, ``idleEnd`` and ``idleDurationMs`` instead of a window.

Message ids are derived from the events a message carries, so a message built again from the same
events, after a crash, has the same id as the first time.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from importlib import resources

from airflow_stream_provider.model.events import EventType
from airflow_stream_provider.values import epoch_micros

#: default largest message, in bytes of JSON; a larger batch is split into several messages
MAX_MESSAGE_BYTES = 1 << 20
#: the ``windowType`` of reference 003 for each trigger type (3.3.7's ``triggerType``)
WINDOW_TYPES_3_3_6 = {"Interval": "Time"}
#: the JSON Schema of each message style, shipped with the package
SCHEMAS = {"3.3.7": "message.schema.json", "3.3.6": "message-3.3.6.schema.json"}


@dataclass(frozen=True, kw_only=True)
class NotifyEvent:
    """One event of one stream, ready to send.

    :param key: identifies the event across reruns (the detector batch and position of a window
        event, the group and instant of a scheduled one); message ids are derived from it.
    :param fields: the trigger type's own fields (``windowStart``, ``curState``, ...), JSON-ready.
    :param result: the computation's result row, or None when the event ran no computation.
    """

    stream: str
    key: str
    table_name: str
    event_type: str
    event_time: int  # milliseconds since the epoch
    trigger_id: str
    trigger_type: str
    group_id: str
    fields: dict = field(default_factory=dict)
    result: dict | None = None
    #: "3.3.7" (reference 000) or "3.3.6" (reference 003: ``windowId`` and ``windowType``, with
    #: ``Time`` for INTERVAL windows, and no ``groupId``), as the stream's language sends
    style: str = "3.3.7"
    #: the detector batch of a window event (None for other events): once the stream's progress
    #: has consumed it, its notification is settled and never queued again
    batch: int | None = None

    def to_json(self) -> dict:
        if self.style == "3.3.6":
            body = {"tableName": self.table_name, "eventType": self.event_type, "eventTime": self.event_time,
                    "windowId": self.trigger_id, "windowType": WINDOW_TYPES_3_3_6.get(self.trigger_type,
                                                                                       self.trigger_type),
                    **self.fields}
        else:
            body = {"tableName": self.table_name, "eventType": self.event_type, "eventTime": self.event_time,
                    "triggerId": self.trigger_id, "triggerType": self.trigger_type, "groupId": self.group_id,
                    **self.fields}
        if self.result is not None:
            body["result"] = self.result
        return body


@dataclass(frozen=True)
class Message:
    """One message as sent: its id, the keys of its events, and its JSON text."""

    message_id: str
    keys: tuple[str, ...]
    text: str
    events: int

    @property
    def size(self) -> int:
        return len(self.text.encode("utf-8"))


def message_id(keys: Iterable[str]) -> str:
    digest = hashlib.sha256("\n".join(keys).encode("utf-8")).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def build(events: Sequence[NotifyEvent], timestamp_ms: int) -> Message:
    """One message holding ``events``, grouped by stream in the order the streams first appear."""
    streams: dict[str, list[dict]] = {}
    for ev in events:
        streams.setdefault(ev.stream, []).append(ev.to_json())
    keys = tuple(f"{ev.stream}/{ev.key}" for ev in events)
    mid = message_id(keys)
    body = {"messageId": mid, "timestamp": timestamp_ms,
            "streams": [{"streamName": name, "events": evs} for name, evs in streams.items()]}
    return Message(mid, keys, json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False),
                   len(events))


def pack(events: Sequence[NotifyEvent], timestamp_ms: int, max_bytes: int = MAX_MESSAGE_BYTES) -> list[Message]:
    """Messages of at most ``max_bytes`` holding ``events`` in order. An event too large to share
    a message is sent alone, whatever its size."""
    empty = len(build([], timestamp_ms).text)
    batches: list[list[NotifyEvent]] = []
    batch: list[NotifyEvent] = []
    size = empty
    streams: set[str] = set()
    for ev in events:
        ev_size = len(json.dumps(ev.to_json(), ensure_ascii=False, separators=(",", ":")).encode("utf-8")) + 1
        wrapper = len(ev.stream.encode("utf-8")) + 32  # the stream's {"streamName", "events"} object
        if batch and size + ev_size + (0 if ev.stream in streams else wrapper) > max_bytes:
            batches.append(batch)
            batch, size, streams = [], empty, set()
        if ev.stream not in streams:
            size += wrapper
            streams.add(ev.stream)
        batch.append(ev)
        size += ev_size
    if batch:
        batches.append(batch)
    return [msg for b in batches for msg in _within(b, timestamp_ms, max_bytes)]


def _within(events: list[NotifyEvent], timestamp_ms: int, max_bytes: int) -> list[Message]:
    """``events`` as one message, or halved until each part fits (the estimate is close, not exact)."""
    msg = build(events, timestamp_ms)
    if msg.size <= max_bytes or len(events) == 1:
        return [msg]
    half = len(events) // 2
    return _within(events[:half], timestamp_ms, max_bytes) + _within(events[half:], timestamp_ms, max_bytes)


# --- values ---------------------------------------------------------------------------------


def epoch(value: datetime, precision: str) -> int:
    """An aware or UTC-naive datetime as an integer in the table's precision (ms or us)."""
    micros = epoch_micros(value)
    return micros // 1000 if precision == "ms" else micros


def json_value(value: object, precision: str) -> object:
    """A result value as JSON: timestamps as integers in the precision, like TDengine."""
    if value is None:
        return None
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, datetime):
        return epoch(value, precision)
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    if hasattr(value, "item"):  # numpy scalars
        return json_value(value.item(), precision)
    return str(value)


# --- schema ---------------------------------------------------------------------------------


def schema(style: str = "3.3.7") -> dict:
    """The JSON Schema of a message of ``style``, shipped with the package (``notify/message.schema.json``,
    ``notify/message-3.3.6.schema.json``)."""
    text = resources.files("airflow_stream_provider.notify").joinpath(SCHEMAS[style]).read_text("utf-8")
    return json.loads(text)


def validate(body: dict | str, style: str = "3.3.7") -> None:
    """Raise ``jsonschema.ValidationError`` unless ``body`` is a valid message of ``style``."""
    import jsonschema

    jsonschema.validate(json.loads(body) if isinstance(body, str) else body, schema(style))


# --- events from the detector and from scheduled triggers -----------------------------------


def window_fields(trigger_type: str, event_type: str, row: dict, precision: str, *, sub_events: bool = False) -> dict:
    """The per-type fields of a window event, from an event-table row (see ``windows.events``).

    :param sub_events: the stream's trigger is a sub-event window (TDengine 3.4.0): its events say
        ``windowIndex``, the sub-window's place in its parent (the window's ordinal less one), -1
        for a plain window or a parent.
    """
    if event_type in (EventType.IDLE, EventType.RESUME):
        return idle_fields(row)
    out: dict = {"windowStart": epoch(row["window_start"], precision)}
    if event_type != EventType.WINDOW_OPEN and row.get("window_end") is not None:
        out["windowEnd"] = epoch(row["window_end"], precision)
    if event_type == EventType.WINDOW_INVALIDATION:
        return out
    if trigger_type == "State":
        if event_type == EventType.WINDOW_OPEN:
            out["prevState"] = _state(row.get("prev_state"))
            out["curState"] = _state(row.get("cur_state"))
        else:
            out["curState"] = _state(row.get("cur_state"))
            out["nextState"] = _state(row.get("next_state"))
    elif trigger_type == "Event" and row.get("condition_index") is not None:
        values = row.get("field_values")
        if sub_events:
            out["windowIndex"] = int(row.get("window_ordinal") or 0) - 1
        out["triggerCondition"] = {"conditionIndex": int(row["condition_index"]),
                                   "fieldValue": json.loads(values) if values else {}}
    return out


def idle_fields(row: dict) -> dict:
    """The fields of an IDLE or RESUME event (TDengine 3.4.1): ``idleStart``, when the group last
    received rows, and ``idleEnd``, when the event fired, in epoch nanoseconds whatever the table's
    precision, and ``idleDurationMs`` between them. The event row holds the span (processing time) in
    ``window_start`` and ``window_end``; an idle event has no window fields."""
    start, end = epoch_micros(row["window_start"]), epoch_micros(row["window_end"])
    return {"idleStart": start * 1000, "idleEnd": end * 1000, "idleDurationMs": (end - start) // 1000}


def _state(text: str | None) -> object:
    return None if text is None else json.loads(text)
