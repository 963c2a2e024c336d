"""What a window scanner is told about a stream's trigger (:class:`WindowSpec`): its kind, and its
lengths, counts, TRUE_FOR and WATERMARK in microseconds and plain values, made from the trigger of
``CREATE STREAM`` (:meth:`WindowSpec.from_trigger`) or from the window clause of a query."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from airflow_stream_provider import model as m
from airflow_stream_provider.exceptions import StreamDefinitionError
from airflow_stream_provider.windows.calendar import CalendarGrid

#: a TRUE_FOR limit: (duration in microseconds or None, count or None, "AND" | "OR" | None)
Limit = tuple[int | None, int | None, str | None]

#: the trigger kinds of windows: those of the streams a detector drives
WINDOW_KINDS = tuple(kind for kind, driven in m.STREAM_KINDS.items() if driven is m.StreamKind.WINDOW)


@dataclass(frozen=True)
class WindowSpec:
    """Everything a scanner needs to know about a trigger, in microseconds and plain values."""

    kind: m.TriggerKind
    interval: int = 0
    sliding: int = 0
    offset: int = 0
    gap: int = 0
    count: int = 0
    count_sliding: int = 0
    true_for_duration: int | None = None
    true_for_count: int | None = None
    true_for_op: str | None = None
    watermark: int = 0
    keep_empty: bool = True  # INTERVAL windows without rows still trigger (no IGNORE_NODATA_TRIGGER)
    start_fields: tuple[str, ...] = ()
    end_fields: tuple[str, ...] = ()
    state_keys: int = 1  # STATE_WINDOW: how many keys (columns ``_state``, ``_state1``, ...)
    extend: int = 0  # STATE_WINDOW EXTEND: 1 a window ends just before the next, 2 starts just after the previous
    zeroth: tuple[Any, ...] | None = None  # STATE_WINDOW ZEROTH_STATE, None where a key takes no part
    start_limit: Limit | None = None  # EVENT_WINDOW TRUE_FOR(start(...)): how long START WITH must hold
    end_limit: Limit | None = None  # EVENT_WINDOW TRUE_FOR(end(...)): how long END WITH must hold
    conditions: int = 1  # EVENT_WINDOW: how many START WITH conditions (more than one: sub-event windows)
    tick: int = 1  # the trigger table's time unit in microseconds (1000 in a database of PRECISION 'ms')
    #: INTERVAL windows in calendar units or local days (``interval``/``sliding`` then hold their
    #: shortest lengths): where window k starts and ends
    grid: CalendarGrid | None = None
    trigger_type: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.kind, m.TriggerKind) or self.kind not in WINDOW_KINDS:
            raise StreamDefinitionError(f"unknown window kind {self.kind!r}")

    @classmethod
    def from_trigger(cls, trigger: m.Trigger, emit: m.EmitPolicy | None = None, *,
                     start_fields: tuple[str, ...] = (), end_fields: tuple[str, ...] = (), tick: int = 1,
                     zone: str | None = None, local_days: bool = False) -> WindowSpec:
        """``zone``: where calendar INTERVAL windows are counted (the stream's TIMEZONE, else the
        home's); ``local_days``: ``d`` and ``w`` windows are days and weeks of ``zone`` (a stream
        with a TIMEZONE clause, TDengine 3.4.3), not fixed 24-hour spans from the epoch."""
        policy = emit or m.EmitPolicy()
        common: dict[str, Any] = {
            "watermark": fixed_micros(policy.watermark, "WATERMARK") if policy.watermark else 0,
            "trigger_type": m.TRIGGER_TYPES[trigger.keyword],
        }
        tf = getattr(trigger, "true_for", None)
        if tf is not None:
            common.update(
                true_for_duration=fixed_micros(tf.duration, "TRUE_FOR") if tf.duration else None,
                true_for_count=tf.count,
                true_for_op=tf.op,
            )
            for name, limit in (("start_limit", tf.start), ("end_limit", tf.end)):
                if limit is not None:
                    common[name] = (fixed_micros(limit.duration, "TRUE_FOR") if limit.duration else None,
                                    limit.count, limit.op)
        if isinstance(trigger, m.IntervalWindow):
            grid = CalendarGrid.of(trigger.interval, trigger.sliding, trigger.offset, zone, local_days)
            if grid is not None:
                return cls.calendar(grid, keep_empty=policy.empty_windows, **common)
            interval = fixed_micros(trigger.interval, "INTERVAL")
            sliding = fixed_micros(trigger.sliding, "SLIDING")
            if sliding > interval:
                raise StreamDefinitionError(f"SLIDING({trigger.sliding}) is longer than INTERVAL({trigger.interval})")
            return cls(m.TriggerKind.INTERVAL, interval=interval, sliding=sliding,
                       offset=fixed_micros(trigger.offset, "INTERVAL offset") if trigger.offset else 0,
                       keep_empty=policy.empty_windows, **common)
        if isinstance(trigger, m.SessionWindow):
            return cls(m.TriggerKind.SESSION, gap=fixed_micros(trigger.gap, "SESSION"), **common)
        if isinstance(trigger, m.StateWindow):
            return cls(m.TriggerKind.STATE_WINDOW, state_keys=len(trigger.keys), extend=trigger.extend,
                       zeroth=trigger.zeroth, tick=tick, **common)
        if isinstance(trigger, m.EventWindow):
            return cls(m.TriggerKind.EVENT_WINDOW, start_fields=start_fields, end_fields=end_fields,
                       conditions=len(trigger.starts), **common)
        if isinstance(trigger, m.CountWindow):
            return cls(m.TriggerKind.COUNT_WINDOW, count=trigger.count, count_sliding=trigger.sliding or trigger.count,
                       **common)
        raise StreamDefinitionError(f"{trigger.keyword} is not a window trigger")

    @classmethod
    def calendar(cls, grid: CalendarGrid, **more: Any) -> WindowSpec:
        """INTERVAL windows on a calendar grid."""
        if not grid.step_fits():
            raise StreamDefinitionError("SLIDING is longer than INTERVAL", clause="SLIDING")
        return cls(m.TriggerKind.INTERVAL, interval=grid.shortest(grid.size), sliding=grid.shortest(grid.step),
                   offset=grid.offset, grid=grid, **more)

    # --- INTERVAL windows: window k spans [start(k), end(k)) -----------------------------------

    def window_starts(self, ks: np.ndarray) -> np.ndarray:
        if self.grid is not None:
            return self.grid.starts(ks)
        return np.asarray(ks, dtype=np.int64) * self.sliding + self.offset

    def window_ends(self, ks: np.ndarray) -> np.ndarray:
        if self.grid is not None:
            return self.grid.ends(ks)
        return np.asarray(ks, dtype=np.int64) * self.sliding + self.offset + self.interval

    def first_window(self, ts: int) -> int:
        """The first INTERVAL window ending after ``ts``: the first that holds it, or the next to open."""
        if self.grid is not None:
            return self.grid.first(ts)
        return (ts - self.offset - self.interval) // self.sliding + 1

    def first_windows(self, ts: np.ndarray) -> np.ndarray:
        """:meth:`first_window` of every time of an array."""
        if self.grid is not None:
            return np.fromiter((self.grid.first(t) for t in ts.tolist()), dtype=np.int64, count=len(ts))
        return (ts - self.offset - self.interval) // self.sliding + 1

    def window_indices(self, ts: np.ndarray) -> np.ndarray:
        """The last INTERVAL window starting at or before each time."""
        if self.grid is not None:
            return self.grid.indices(ts)
        return (ts - self.offset) // self.sliding

    def memberships(self, ts: np.ndarray) -> np.ndarray:
        """The window of every (row, window) pair where an INTERVAL window holds the row's time."""
        if self.grid is not None:
            return self.grid.memberships(ts)
        size, step, offset = self.interval, self.sliding, self.offset
        last_k = (ts - offset) // step
        ks = []
        for j in range(-(-size // step)):
            k = last_k - j
            ks.append(k[k * step + offset + size > ts])
        return np.concatenate(ks) if ks else np.empty(0, np.int64)

    def zeroth_of(self, state: object) -> bool:
        """A STATE_WINDOW window of this state is a zero-state window (ZEROTH_STATE), which is dropped:
        every key given a zero value equals it (an unknown key, NULL, never does)."""
        if self.zeroth is None:
            return False
        values = state if self.state_keys > 1 else (state,)
        if not isinstance(values, (tuple, list)) or len(values) != len(self.zeroth):
            return False
        return all(z is None or _same(v, z) for v, z in zip(values, self.zeroth, strict=True))

    # --- TRUE_FOR -------------------------------------------------------------------------

    @property
    def has_true_for(self) -> bool:
        return self.true_for_duration is not None or self.true_for_count is not None

    def qualifies(self, duration: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Which windows satisfy TRUE_FOR (all of them when there is none)."""
        by_time = duration >= self.true_for_duration if self.true_for_duration is not None else None
        by_count = rows >= self.true_for_count if self.true_for_count is not None else None
        if by_time is not None and by_count is not None:
            return (by_time | by_count) if self.true_for_op == "OR" else (by_time & by_count)
        if by_time is not None:
            return by_time
        if by_count is not None:
            return by_count
        return np.ones(len(duration), dtype=bool)

    def qualifies_one(self, duration: int, rows: int) -> bool:
        """:meth:`qualifies` for one window, without arrays (scanners call it per window)."""
        by_time = None if self.true_for_duration is None else duration >= self.true_for_duration
        by_count = None if self.true_for_count is None else rows >= self.true_for_count
        if by_time is None or by_count is None:
            return (by_count if by_time is None else by_time) in (None, True)
        return (by_time or by_count) if self.true_for_op == "OR" else (by_time and by_count)


def limit_met(limit: Limit, duration: int, rows: int) -> bool:
    """A streak of ``rows`` rows lasting ``duration`` meets ``limit`` (TRUE_FOR's start(...)/end(...))."""
    least, count, op = limit
    by_time = None if least is None else duration >= least
    by_count = None if count is None else rows >= count
    if by_time is None or by_count is None:
        return (by_count if by_time is None else by_time) in (None, True)
    return (by_time or by_count) if op == "OR" else (by_time and by_count)


def _same(value: object, zero: object) -> bool:
    """A key's value equals a ZEROTH_STATE constant, the constant read as the key's type."""
    if value is None:
        return False
    if isinstance(value, str):
        return value == (zero if isinstance(zero, str) else str(zero).lower() if isinstance(zero, bool) else str(zero))
    if isinstance(value, bool) or isinstance(zero, bool):
        return bool(value) == bool(zero) if not isinstance(zero, str) else False
    if isinstance(zero, str):
        return False
    return value == zero


def fixed_micros(duration: m.Duration, clause: str) -> int:
    """A window's duration in microseconds; a calendar unit (no fixed length) or nanoseconds are refused."""
    if duration.is_calendar:
        raise StreamDefinitionError(
            f"{clause}({duration}) uses a calendar unit; windows need a fixed length (u, a, s, m, h, d, w)",
            clause=clause)
    if duration.unit == "b":
        raise StreamDefinitionError(f"{clause}({duration}) is in nanoseconds; windows are exact to microseconds",
                                    clause=clause)
    return duration.micros
