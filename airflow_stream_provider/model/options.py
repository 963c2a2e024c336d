"""Options of a stream, its notification, and the emit policy the options amount to."""

from __future__ import annotations

from dataclasses import dataclass

from airflow_stream_provider.model.events import EventType
from airflow_stream_provider.model.time import Duration, TimePoint
from airflow_stream_provider.model.types import SqlExpression


@dataclass(frozen=True)
class FillHistory:
    start: TimePoint | None = None
    first: bool = False  # FILL_HISTORY_FIRST: real-time processing waits for history


@dataclass(frozen=True)
class StreamOptions:
    watermark: Duration | None = None
    expired_time: Duration | None = None
    ignore_disorder: bool = False
    delete_recalc: bool = False
    delete_output_table: bool = False
    fill_history: FillHistory | None = None
    calc_notify_only: bool = False
    low_latency_calc: bool = False
    pre_filter: SqlExpression | None = None
    force_output: bool = False
    max_delay: Duration | None = None
    event_types: tuple[EventType, ...] = (EventType.WINDOW_CLOSE,)
    ignore_nodata_trigger: bool = False
    given: frozenset[str] = frozenset()  # option names written in the statement


@dataclass(frozen=True)
class EmitPolicy:
    """When a window's results are emitted, apart from where windows start and end.

    A window is emitted when it opens (``on_open``), when it closes (``on_close``: once the
    watermark, the event time of the newest row less ``watermark``, passes it), on every update
    while it is open (``on_update``; no option of the 3.3.7 language asks for it), and every
    ``max_delay`` of processing time while it stays open. ``empty_windows``: INTERVAL windows
    without rows are emitted too (no IGNORE_NODATA_TRIGGER).
    """

    on_open: bool = False
    on_close: bool = True
    on_update: bool = False
    max_delay: Duration | None = None
    watermark: Duration | None = None
    empty_windows: bool = True

    @classmethod
    def of(cls, options: StreamOptions) -> EmitPolicy:
        return cls(
            on_open=EventType.WINDOW_OPEN in options.event_types,
            on_close=EventType.WINDOW_CLOSE in options.event_types,
            max_delay=options.max_delay,
            watermark=options.watermark,
            empty_windows=not options.ignore_nodata_trigger,
        )

    @property
    def event_types(self) -> tuple[EventType, ...]:
        """The window events that emit, in the order they happen to one window."""
        chosen = (
            (EventType.WINDOW_OPEN, self.on_open),
            (EventType.MAX_DELAY, self.max_delay is not None),
            (EventType.WINDOW_CLOSE, self.on_close),
        )
        return tuple(event for event, on in chosen if on)


@dataclass(frozen=True)
class Notify:
    urls: tuple[str, ...]
    on: tuple[EventType, ...] = ()
    where: SqlExpression | None = None
    history: bool = False  # NOTIFY_HISTORY
    on_failure_pause: bool = False  # ON_FAILURE_PAUSE
