"""What a stream's options amount to, whatever language wrote them: when its windows are emitted
(:class:`EmitPolicy`), which written rows change them and how (:class:`RowAcceptance`), and how its
output subtables are named (:class:`OutputNaming`).

:class:`~airflow_stream_provider.model.CreateStream` derives its policies from its options
(``emit``, ``rows``, ``output_naming``): the engine reads the policies, not the language a stream
was written in.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from airflow_stream_provider.model.events import EventType
from airflow_stream_provider.model.options import DEFAULT_RECALCULATE, Fill, LegacyOptions, StreamOptions, TriggerMode
from airflow_stream_provider.model.time import Duration


@dataclass(frozen=True)
class EmitPolicy:
    """When a window's results are emitted, apart from where windows start and end.

    A window is emitted when it opens (``on_open``), when it closes (``on_close``: once the
    watermark, the event time of the newest row less ``watermark``, passes it), on every change
    while it is open or closed (``on_update``: AT_ONCE), and every ``max_delay`` of processing time
    while it stays open. ``empty_windows``: INTERVAL windows without rows are emitted too (no
    IGNORE_NODATA_TRIGGER).

    :param recalculate_every: changes to closed windows are recalculated this often instead of when
        they come (CONTINUOUS_WINDOW_CLOSE)
    :param wall_clock_close: windows close at their wall-clock end, once, for every group, empty
        ones filled (FORCE_WINDOW_CLOSE)
    :param in_batch: the results are computed inside the detector's batch that found them, where it
        runs (LOW_LATENCY_CALC; the streams written at every change or on the wall clock)
    :param fill: how a window without rows is written (the query's FILL); None: it is not
    """

    on_open: bool = False
    on_close: bool = True
    on_update: bool = False
    max_delay: Duration | None = None
    watermark: Duration | None = None
    empty_windows: bool = True
    recalculate_every: Duration | None = None
    wall_clock_close: bool = False
    in_batch: bool = False
    fill: Fill | None = None

    @classmethod
    def of(cls, options: StreamOptions) -> EmitPolicy:
        """The policy of TDengine 3.3.7's options (EVENT_TYPE, MAX_DELAY, WATERMARK, ...)."""
        return cls(
            on_open=EventType.WINDOW_OPEN in options.event_types,
            on_close=EventType.WINDOW_CLOSE in options.event_types,
            max_delay=options.max_delay,
            watermark=options.watermark,
            empty_windows=not options.ignore_nodata_trigger,
            in_batch=options.low_latency_calc,
        )

    @classmethod
    def of_legacy(cls, legacy: LegacyOptions, options: StreamOptions, *, row_trigger: bool) -> EmitPolicy:
        """The policy of a stream of TDengine's engine before 3.3.7 (``TRIGGER ...``, reference 003):
        every window is emitted when it closes, and as its mode says before; ``row_trigger``: the
        stream has no window and writes a row per row."""
        mode = legacy.trigger
        return cls(
            on_update=mode is TriggerMode.AT_ONCE,
            max_delay=legacy.max_delay if mode is TriggerMode.MAX_DELAY else None,
            watermark=options.watermark,
            empty_windows=not options.ignore_nodata_trigger,
            recalculate_every=legacy.recalculate or DEFAULT_RECALCULATE
            if mode is TriggerMode.CONTINUOUS_WINDOW_CLOSE else None,
            wall_clock_close=mode is TriggerMode.FORCE_WINDOW_CLOSE,
            in_batch=row_trigger or mode in (TriggerMode.AT_ONCE, TriggerMode.MAX_DELAY,
                                             TriggerMode.FORCE_WINDOW_CLOSE),
            fill=legacy.fill if legacy.fill is not None and legacy.fill.mode != "NONE" else None,
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

    @property
    def mode(self) -> TriggerMode:
        """The one ``TRIGGER`` mode of TDengine's engine before 3.3.7 this policy is."""
        if self.on_update:
            return TriggerMode.AT_ONCE
        if self.wall_clock_close:
            return TriggerMode.FORCE_WINDOW_CLOSE
        if self.recalculate_every is not None:
            return TriggerMode.CONTINUOUS_WINDOW_CLOSE
        return TriggerMode.MAX_DELAY if self.max_delay is not None else TriggerMode.WINDOW_CLOSE


@dataclass(frozen=True)
class RowAcceptance:
    """Which written rows change a stream's windows, and how.

    **Recomputed** windows (TDengine 3.3.7): a window's result is computed from the table when it
    fires. Late rows and updates close their windows again (not under ``ignore_disorder``), deletes
    do only under ``delete_recalc``, and rows older than ``expired_time`` are not read. Rows written
    while the stream was paused and started again with IGNORE UNTREATED fire nothing and are skipped.

    **Incremental** windows (TDengine's engine before 3.3.7, reference 003): the windows are kept as
    rows come, and a result is what its window holds. A row older than its table's latest row that
    falls into a closed window is *expired*: dropped (``ignore_expired``), else its window is
    recalculated from the table; a row before the latest less ``delete_mark`` is always dropped. An
    update of an existing timestamp is one more row (``ignore_update``) or recalculates its window.
    Every delete recalculates its windows, and a window left without rows has its result removed.
    Rows written while paused count in a later window's computation.
    """

    incremental: bool = False
    ignore_disorder: bool = False
    delete_recalc: bool = False
    expired_time: Duration | None = None
    ignore_expired: bool = True
    ignore_update: bool = True
    delete_mark: Duration | None = None

    @classmethod
    def of(cls, options: StreamOptions) -> RowAcceptance:
        """The rows of TDengine 3.3.7's options (IGNORE_DISORDER, DELETE_RECALC, EXPIRED_TIME)."""
        return cls(ignore_disorder=options.ignore_disorder, delete_recalc=options.delete_recalc,
                   expired_time=options.expired_time)

    @classmethod
    def of_legacy(cls, legacy: LegacyOptions) -> RowAcceptance:
        """The rows of the options of TDengine's engine before 3.3.7 (IGNORE EXPIRED, IGNORE UPDATE,
        DELETE_MARK)."""
        return cls(incremental=True, delete_recalc=True, ignore_expired=legacy.ignore_expired,
                   ignore_update=legacy.ignore_update, delete_mark=legacy.delete_mark)

    @property
    def recalculated_on_request(self) -> bool:
        """RECALCULATE STREAM recomputes a range of its windows: incremental windows are recalculated
        only as their options say."""
        return not self.incremental


class OutputNaming(StrEnum):
    """How a stream's output subtables are named and tagged."""

    #: one subtable per group, named by OUTPUT_SUBTABLE or after the group, tagged by TAGS or the
    #: group's columns (TDengine 3.3.7)
    GROUP = "group"
    #: a ``group_id`` tag unless TAGS says otherwise; named subtables end with
    #: ``_<supertable>_<group id>``; INTO names an existing or new supertable (before 3.3.7)
    GROUP_ID = "group_id"
