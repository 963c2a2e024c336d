"""The names of event types, trigger kinds and stream kinds: the one place where these strings are
spelled, with the two tables keyed by trigger kind (:data:`STREAM_KINDS`, :data:`TRIGGER_TYPES`).

All are ``str`` enums, so a member equals, hashes, formats and serializes (JSON, Arrow, Delta) as
its value: ``EventType.WINDOW_CLOSE == "WINDOW_CLOSE"``, ``StreamKind.WINDOW == "window"``.
"""

from __future__ import annotations

from enum import StrEnum


class EventType(StrEnum):
    """What a trigger reports: a window opening, closing, withdrawn, still open, or a scheduled tick."""

    WINDOW_OPEN = "WINDOW_OPEN"
    WINDOW_CLOSE = "WINDOW_CLOSE"
    #: a closed window withdrawn because late rows changed it; a new WINDOW_CLOSE follows
    WINDOW_INVALIDATION = "WINDOW_INVALIDATION"
    #: an intermediate trigger of a window still open after MAX_DELAY (processing time)
    MAX_DELAY = "MAX_DELAY"
    #: an open window's result as it stands after rows changed it: TDengine's engine before 3.3.7
    #: emits these with TRIGGER AT_ONCE; never notified, only written
    WINDOW_UPDATE = "WINDOW_UPDATE"
    #: the event of PERIOD and SLIDING triggers
    ON_TIME = "ON_TIME"
    #: a group that received no rows for IDLE_TIMEOUT of processing time (TDengine 3.4.1)
    IDLE = "IDLE"
    #: an idle group's rows came back; it shares the trigger id of the IDLE before it
    RESUME = "RESUME"


class TriggerKind(StrEnum):
    """The trigger of a stream, named by the keyword that introduces it."""

    PERIOD = "PERIOD"
    SLIDING = "SLIDING"
    INTERVAL = "INTERVAL"
    SESSION = "SESSION"
    STATE_WINDOW = "STATE_WINDOW"
    EVENT_WINDOW = "EVENT_WINDOW"
    COUNT_WINDOW = "COUNT_WINDOW"
    #: no window: every row written to the trigger table fires (the window-less streams of TDengine
    #: before 3.3.7); it has no keyword of its own
    ROW = "ROW"
    #: IoTDB's continuous query: instants BOUNDARY + k * EVERY, each computing a range before it
    RESAMPLE = "RESAMPLE"


class StreamKind(StrEnum):
    """How a stream is driven: the wall clock, event time passing instants, or a window detector."""

    PERIOD = "period"
    SLIDING = "sliding"
    WINDOW = "window"
    #: every row written fires at once (a row trigger); a query over the change feed drives it, as
    #: the detector drives a window stream
    ROW = "row"
    #: an IoTDB continuous query: the wall clock, at BOUNDARY + k * EVERY
    RESAMPLE = "resample"

    @property
    def detected(self) -> bool:
        """Driven by a streaming query over the trigger table (the live detector, or the row query)."""
        return self in (StreamKind.WINDOW, StreamKind.ROW)

    @property
    def served(self) -> bool:
        """The stream node does its tasks' work while it hosts the stream: the detected streams, and
        PERIOD streams, whose instants the node computes on its warm Spark session."""
        return self.detected or self is StreamKind.PERIOD


#: what drives a stream of each trigger kind
STREAM_KINDS: dict[TriggerKind, StreamKind] = {
    TriggerKind.PERIOD: StreamKind.PERIOD,
    TriggerKind.SLIDING: StreamKind.SLIDING,
    TriggerKind.INTERVAL: StreamKind.WINDOW,
    TriggerKind.SESSION: StreamKind.WINDOW,
    TriggerKind.STATE_WINDOW: StreamKind.WINDOW,
    TriggerKind.EVENT_WINDOW: StreamKind.WINDOW,
    TriggerKind.COUNT_WINDOW: StreamKind.WINDOW,
    TriggerKind.ROW: StreamKind.ROW,
    TriggerKind.RESAMPLE: StreamKind.RESAMPLE,
}

#: the ``triggerType`` of each trigger kind's notifications and event rows
TRIGGER_TYPES: dict[TriggerKind, str] = {
    TriggerKind.PERIOD: "Period",
    TriggerKind.SLIDING: "Sliding",
    TriggerKind.INTERVAL: "Interval",
    TriggerKind.SESSION: "Session",
    TriggerKind.STATE_WINDOW: "State",
    TriggerKind.EVENT_WINDOW: "Event",
    TriggerKind.COUNT_WINDOW: "Count",
    TriggerKind.ROW: "Row",
    TriggerKind.RESAMPLE: "Resample",
}
