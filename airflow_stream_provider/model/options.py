"""Options of a stream and its notification, as each language writes them (the policies they amount
to are in :mod:`.policies`)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from airflow_stream_provider.model.events import EventType
from airflow_stream_provider.model.time import Duration, TimePoint
from airflow_stream_provider.model.types import SqlExpression, Value


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
    #: IDLE_TIMEOUT (TDengine 3.4.1): a group without rows for this long (processing time) is idle
    idle_timeout: Duration | None = None
    event_types: tuple[EventType, ...] = (EventType.WINDOW_CLOSE,)
    ignore_nodata_trigger: bool = False
    #: FLUSH_ON_OUTER_CLOSE (TDengine 3.4.2): when an outer window of a nested WINDOW(...) closes, the
    #: leaf windows still open inside it close with it
    flush_on_outer_close: bool = False
    engine: str | None = None  # ENGINE('in-process' | 'spark' | 'auto'): which detector finds its windows
    #: SEMANTICS('3.3.7' | '3.4'): which TDengine version's behaviour the stream follows where they
    #: differ (None: the home's ``[tdengine] semantics``, recorded at CREATE)
    semantics: str | None = None
    given: frozenset[str] = frozenset()  # option names written in the statement


class TriggerMode(StrEnum):
    """When a stream of TDengine's engine before 3.3.7 writes a window's result (``TRIGGER ...``)."""

    #: at every write that changes a window, open or closed; a window that disappears is retracted
    AT_ONCE = "AT_ONCE"
    #: when the window closes (the watermark passes it)
    WINDOW_CLOSE = "WINDOW_CLOSE"
    #: when it closes, and an open window once MAX_DELAY has passed since its last result, again
    #: only after new rows
    MAX_DELAY = "MAX_DELAY"
    #: at the wall-clock end of each INTERVAL window, once, for every group, empty windows filled
    FORCE_WINDOW_CLOSE = "FORCE_WINDOW_CLOSE"
    #: when the window closes; changes to closed windows are recalculated every RECALCULATE period
    CONTINUOUS_WINDOW_CLOSE = "CONTINUOUS_WINDOW_CLOSE"


#: CONTINUOUS_WINDOW_CLOSE recalculates this often when RECALCULATE is not given (reference 003)
DEFAULT_RECALCULATE = Duration(60, "m")


@dataclass(frozen=True)
class Fill:
    """How a window without rows is written: ``NONE`` (not at all), ``NULL``, ``VALUE`` (the
    constants in ``values``, one per aggregate of the select list) or ``PREV`` (the group's
    previous result)."""

    mode: str
    values: tuple[Value, ...] = ()


@dataclass(frozen=True)
class LegacyOptions:
    """How a stream of TDengine's stream engine before 3.3.7 behaves (references 001 and 003).

    That engine keeps its windows incrementally and writes what they hold: ``trigger`` says when,
    a row older than its table's latest row that falls into a closed window is *expired*
    (``ignore_expired``: dropped, else the window is recalculated from the table), an update of an
    existing timestamp is either one more row (``ignore_update``) or recalculates its window, a
    delete recalculates its windows, and a window that disappears has its result removed. Output
    subtables carry a ``group_id`` tag unless TAGS says otherwise, and named ones end with
    ``_<supertable>_<group id>``. WATERMARK and FILL_HISTORY are the stream options of the same name.
    """

    trigger: TriggerMode = TriggerMode.WINDOW_CLOSE
    max_delay: Duration | None = None
    recalculate: Duration | None = None  # CONTINUOUS_WINDOW_CLOSE RECALCULATE (None: DEFAULT_RECALCULATE)
    ignore_expired: bool = True
    ignore_update: bool = True
    delete_mark: Duration | None = None
    fill_history_async: bool = False  # FILL_HISTORY 1 ASYNC: CREATE returns before history is found
    fill: Fill | None = None  # FILL of the subquery's INTERVAL
    given: frozenset[str] = frozenset()  # option names written in the statement

    @property
    def recalculate_every(self) -> Duration:
        return self.recalculate or DEFAULT_RECALCULATE


@dataclass(frozen=True)
class Notify:
    urls: tuple[str, ...]
    on: tuple[EventType, ...] = ()
    where: SqlExpression | None = None
    history: bool = False  # NOTIFY_HISTORY
    on_failure_pause: bool = False  # ON_FAILURE_PAUSE
    #: the message format: "3.3.7" (reference 000: triggerId, triggerType) or "3.3.6" (reference
    #: 003: windowId, windowType)
    message_format: str = "3.3.7"
