"""Triggers of a stream: the schedules (PERIOD, SLIDING) and the window types.

``keyword`` is the :class:`~.events.TriggerKind`; what drives a stream of each kind and the
``triggerType`` of its notifications are the tables :data:`~.events.STREAM_KINDS` and
:data:`~.events.TRIGGER_TYPES`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from airflow_stream_provider.model.events import TriggerKind
from airflow_stream_provider.model.time import Duration
from airflow_stream_provider.model.types import Position, SqlExpression, Value


@dataclass(frozen=True)
class PeriodTrigger:
    period: Duration
    offset: Duration | None = None
    keyword = TriggerKind.PERIOD

    def __str__(self) -> str:
        return f"PERIOD({self.period}{', ' + str(self.offset) if self.offset else ''})"


@dataclass(frozen=True)
class SlidingTrigger:
    """``SLIDING`` without ``INTERVAL``: fires as event time passes each instant."""

    sliding: Duration
    offset: Duration | None = None
    keyword = TriggerKind.SLIDING

    def __str__(self) -> str:
        return f"SLIDING({self.sliding}{', ' + str(self.offset) if self.offset else ''})"


@dataclass(frozen=True)
class IntervalWindow:
    interval: Duration
    sliding: Duration
    offset: Duration | None = None
    keyword = TriggerKind.INTERVAL

    def __str__(self) -> str:
        off = f", {self.offset}" if self.offset else ""
        return f"INTERVAL({self.interval}{off}) SLIDING({self.sliding})"


@dataclass(frozen=True)
class SessionWindow:
    ts_column: str
    gap: Duration
    keyword = TriggerKind.SESSION

    def __str__(self) -> str:
        return f"SESSION({self.ts_column}, {self.gap})"


@dataclass(frozen=True)
class TrueFor:
    """``TRUE_FOR(10m)``, ``TRUE_FOR(COUNT 5)`` or both joined by ``AND``/``OR``: a window lasting or
    holding less is dropped. An EVENT_WINDOW may also give (TDengine 3.4.2) ``start(limit)``, how long
    START WITH must hold row after row before the window opens, and ``end(limit)``, the same of END
    WITH before it closes, each a TrueFor of its own."""

    duration: Duration | None = None
    count: int | None = None
    op: str | None = None  # "AND" | "OR" when both are given
    start: TrueFor | None = None
    end: TrueFor | None = None

    @property
    def limits(self) -> bool:
        """A duration or a count is given for the window as a whole."""
        return self.duration is not None or self.count is not None

    def limit_text(self) -> str:
        parts = [str(self.duration)] if self.duration else []
        if self.count is not None:
            parts.append(f"COUNT {self.count}")
        return f" {self.op} ".join(parts)

    def __str__(self) -> str:
        parts = [self.limit_text()] if self.limits else []
        streaks = (("start", self.start), ("end", self.end))
        parts += [f"{name}({limit.limit_text()})" for name, limit in streaks if limit]
        return f"TRUE_FOR({', '.join(parts)})"


#: the EXTEND modes of STATE_WINDOW (TDengine 3.3.8): 0 a window spans its first to its last row;
#: 1 its end reaches to just before the next window; 2 its start reaches back to just after the previous one
STATE_EXTENDS = (0, 1, 2)


@dataclass(frozen=True)
class StateWindow:
    """``STATE_WINDOW(k1[, k2 ...]) [EXTEND(n)] [ZEROTH_STATE(v1[, ...])] [TRUE_FOR(...)]``: a window
    closes when any key changes. ``zeroth`` holds one value per key, ``None`` where a key takes no
    part (``NO_ZEROTH``); a window whose keys all equal their zero values is dropped."""

    keys: tuple[SqlExpression, ...]
    true_for: TrueFor | None = None
    extend: int = 0
    zeroth: tuple[Value, ...] | None = None
    keyword = TriggerKind.STATE_WINDOW

    def __post_init__(self) -> None:
        if not self.keys:
            raise ValueError("STATE_WINDOW needs a key")
        if self.extend not in STATE_EXTENDS:
            raise ValueError(f"EXTEND({self.extend}) is not 0, 1 or 2")
        if self.zeroth is not None and len(self.zeroth) != len(self.keys):
            raise ValueError("ZEROTH_STATE needs one value per key")

    @property
    def column(self) -> SqlExpression:
        """The first key (the only one of a 3.3.7 stream)."""
        return self.keys[0]

    def __str__(self) -> str:
        out = f"STATE_WINDOW({', '.join(map(str, self.keys))})"
        if self.extend:
            out += f" EXTEND({self.extend})"
        if self.zeroth is not None:
            out += f" ZEROTH_STATE({', '.join('NO_ZEROTH' if v is None else _literal(v) for v in self.zeroth)})"
        return out + (f" {self.true_for}" if self.true_for else "")


def _literal(value: Value) -> str:
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(value)


@dataclass(frozen=True)
class EventWindow:
    """``EVENT_WINDOW(START WITH start END WITH end)``; with ``more_starts``, the sub-event window of
    TDengine 3.4.0, ``START WITH (start, c2, ...) [END WITH end]``: the first condition that holds on
    a row is the window's effective condition, each change of it closes a sub-window and opens the
    next, and END WITH is optional (``end`` None: the window closes once no condition holds)."""

    start: SqlExpression
    end: SqlExpression | None
    true_for: TrueFor | None = None
    more_starts: tuple[SqlExpression, ...] = ()
    keyword = TriggerKind.EVENT_WINDOW

    def __post_init__(self) -> None:
        if self.end is None and not self.more_starts:
            raise ValueError("EVENT_WINDOW needs END WITH unless START WITH gives several conditions")

    @property
    def starts(self) -> tuple[SqlExpression, ...]:
        """The START WITH conditions, in order (their index is a notification's ``conditionIndex``)."""
        return (self.start, *self.more_starts)

    @property
    def sub_events(self) -> bool:
        """START WITH gives several conditions: a sub-event window (TDengine 3.4.0)."""
        return bool(self.more_starts)

    def __str__(self) -> str:
        tf = f" {self.true_for}" if self.true_for else ""
        start = f"({', '.join(map(str, self.starts))})" if self.more_starts else str(self.start)
        end = f" END WITH {self.end}" if self.end is not None else ""
        return f"EVENT_WINDOW(START WITH {start}{end}){tf}"


@dataclass(frozen=True)
class CountWindow:
    count: int
    sliding: int | None = None
    columns: tuple[str, ...] = ()
    keyword = TriggerKind.COUNT_WINDOW

    def __str__(self) -> str:
        args = [str(self.count)] + ([str(self.sliding)] if self.sliding is not None else []) + list(self.columns)
        return f"COUNT_WINDOW({', '.join(args)})"


@dataclass(frozen=True)
class RowTrigger:
    """Every row written to the trigger table fires once, at once: a stream without a window, whose
    query is evaluated on each row (TDengine before 3.3.7, ``CREATE STREAM ... AS SELECT ts, a * 2
    FROM t WHERE ...``). An update of a row fires it again; a delete removes its result."""

    keyword = TriggerKind.ROW

    def __str__(self) -> str:
        return "every row"


@dataclass(frozen=True)
class ResampleTrigger:
    """IoTDB's ``RESAMPLE EVERY e BOUNDARY b RANGE s[, t]``: instants ``b + k * e`` on the wall
    clock, with no daily restart; the instant ``i`` computes over ``[i - s, i - t)``, from the
    scheduled instant even when it runs late. ``boundary`` is epoch microseconds (``BOUNDARY 0``:
    multiples of EVERY from the epoch). BLOCKED runs every missed instant, one at a time; DISCARD
    runs the pending instant, then skips to the first instant at or after now."""

    every: Duration
    start_offset: Duration
    end_offset: Duration
    boundary: int = 0
    policy: str = "BLOCKED"
    keyword = TriggerKind.RESAMPLE

    def __str__(self) -> str:
        return (f"RESAMPLE EVERY {self.every} BOUNDARY {self.boundary}u RANGE {self.start_offset}, "
                f"{self.end_offset} TIMEOUT POLICY {self.policy}")


#: the window types a layer of a nested ``WINDOW(...)`` may be (TDengine 3.4.2); PERIOD is none
NESTABLE = (TriggerKind.INTERVAL, TriggerKind.SLIDING, TriggerKind.SESSION, TriggerKind.STATE_WINDOW,
            TriggerKind.EVENT_WINDOW, TriggerKind.COUNT_WINDOW)
#: at most this many layers, the outer ones and the leaf (TDengine's STREAM_WINDOW_MAX_LAYERS)
NESTED_MAX_LAYERS = 8


@dataclass(frozen=True)
class OuterWindow:
    """An enclosing layer of a nested ``WINDOW(<trigger> AS w_outer, ..., <leaf>)`` (TDengine 3.4.2):
    the windows of the next layer open and close inside each window of this one, and the query
    reads this one's bounds as ``name._twstart``, ``name._twend``, ``name._twduration``,
    ``name._twrownum``. Its windows never overlap (the validator refuses overlapping ones)."""

    trigger: IntervalWindow | SlidingTrigger | SessionWindow | StateWindow | EventWindow | CountWindow
    name: str
    position: Position | None = field(default=None, compare=False)

    def __str__(self) -> str:
        return f"{self.trigger} AS {self.name}"


Trigger = (PeriodTrigger | SlidingTrigger | IntervalWindow | SessionWindow | StateWindow | EventWindow | CountWindow
           | RowTrigger | ResampleTrigger)
