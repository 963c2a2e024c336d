"""The names of event types and trigger kinds: the one place where these strings are spelled.

Both are ``str`` enums, so a member equals, hashes, formats and serializes (JSON, Arrow, Delta) as
its name: ``EventType.WINDOW_CLOSE == "WINDOW_CLOSE"``.
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
