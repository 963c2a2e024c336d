"""A run's notifications: which events a stream sends, with which results, to its outbox.

Routing follows the stream's ``NOTIFY`` clause:

- ``ON (...)`` picks the window events sent (``WINDOW_INVALIDATION`` goes with ``WINDOW_CLOSE``,
  since it withdraws a window already closed); PERIOD and SLIDING triggers send ``ON_TIME``;
- an event that ran the computation carries its result: one event per result row, each row
  checked against ``WHERE`` (evaluated by Spark, with SQL's NULL rules); an event whose
  computation returned no row is sent without ``result``, unless there is a ``WHERE``;
- without ``NOTIFY_HISTORY``, events of history (``FILL_HISTORY``: windows that ended, or instants
  that passed, before the stream was created; every recalculation) are not sent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime

import pyarrow as pa

from airflow_stream_provider import model as m
from airflow_stream_provider.model.events import TRIGGER_TYPES, EventType, TriggerKind
from airflow_stream_provider.notify import delivery
from airflow_stream_provider.notify.message import (
    NotifyEvent,
    epoch,
    json_value,
    window_fields,
)
from airflow_stream_provider.notify.outbox import Outbox
from airflow_stream_provider.plan.state import StreamState
from airflow_stream_provider.spark.session import arrow_frame
from airflow_stream_provider.sql import to_spark
from airflow_stream_provider.streams.fired import Fired
from airflow_stream_provider.streams.runtime import StreamRuntime
from airflow_stream_provider.streams.store import StoredStream
from airflow_stream_provider.windows.events import WindowEvent


def outbox_of(stored: StoredStream) -> Outbox | None:
    notify = stored.statement.notify
    return Outbox(stored.state_dir / "outbox", notify.urls) if notify is not None else None


def deliver_outbox(stored: StoredStream, *, give_up_after: float | None = None,
                   say: Callable[[str], None] | None = None) -> delivery.DeliveryReport | None:
    """Deliver what waits in the stream's outbox (None for a stream without NOTIFY)."""
    box = outbox_of(stored)
    if box is None:
        return None
    assert stored.statement.notify is not None
    return delivery.deliver(box, pause=stored.statement.notify.on_failure_pause, give_up_after=give_up_after, say=say)


class RunNotifications:
    """Collects a run's results by trigger, then turns its events into :class:`NotifyEvent`."""

    def __init__(self, runtime: StreamRuntime, state: StreamState, *, history: bool = False) -> None:
        notify = runtime.stmt.notify
        assert notify is not None
        self.runtime = runtime
        self.notify = notify
        self.stream = runtime.name
        self.precision = runtime.precision
        self.recalculating = history
        self.created = state.created
        self.results: dict[int, list[dict]] = {}
        self.computed: set[int] = set()
        self.events: list[NotifyEvent] = []
        #: asked under the outbox's lock before the events are queued: when true, none is
        #: (:meth:`~airflow_stream_provider.notify.outbox.Outbox.enqueue`)
        self.unless: Callable[[], bool] | None = None

    # --- results --------------------------------------------------------------------------------

    def collect(self, fired: list[Fired], results: pa.Table) -> None:
        """Keep the result rows of ``fired`` that pass NOTIFY WHERE (``results`` starts with IDX)."""
        self.computed.update(f.idx for f in fired)
        if results.num_rows == 0:
            return
        keep = self._where(results) if self.notify.where is not None else None
        names = results.schema.names[1:]
        idx = results.column(0).to_pylist()
        columns = [results.column(i + 1).to_pylist() for i in range(len(names))]
        for r, i in enumerate(idx):
            if keep is not None and not keep[r]:
                continue
            self.results.setdefault(i, []).append(
                {name: json_value(col[r], self.precision) for name, col in zip(names, columns)})

    def _where(self, results: pa.Table) -> list[bool]:
        from pyspark.sql import functions as F

        assert self.notify.where is not None
        spark = self.runtime.warehouse.spark
        table = results.append_column("__row", pa.array(range(results.num_rows), pa.int64()))
        condition = to_spark(self.notify.where.tree.copy(), precision=self.precision)
        rows = arrow_frame(spark, table).select("__row", F.expr(condition).alias("__ok")).collect()
        ok = {r[0]: bool(r[1]) for r in rows}
        return [ok.get(r, False) for r in range(results.num_rows)]

    def _rows_of(self, fired_idx: int | None) -> list[dict | None]:
        """The results an event carries: its rows; [None] for no result; [] when WHERE drops it."""
        if fired_idx is None or fired_idx not in self.computed:
            return [None]
        rows = self.results.get(fired_idx)
        if rows:
            return list(rows)
        return [] if self.notify.where is not None else [None]

    # --- events ---------------------------------------------------------------------------------

    def _history(self, end: datetime | None, start: datetime | None = None) -> bool:
        if self.recalculating:
            return True
        if self.created is None or self.runtime.stmt.options.fill_history is None:
            return False
        if end is not None:
            return end <= self.created
        return start is not None and start < self.created

    def add_windows(self, events: list[WindowEvent], fired: list[Fired], table_names: dict[str, str]) -> None:
        """Window events (the detector's, in order) and the triggers they fired; ``table_names``:
        group id to table name."""
        wanted = set(self.notify.on)
        if EventType.WINDOW_CLOSE in wanted:
            wanted.add(EventType.WINDOW_INVALIDATION)
        fired_by = {f.event: f.idx for f in fired if f.event is not None}
        trigger = self.runtime.stmt.trigger
        sub_events = isinstance(trigger, m.EventWindow) and trigger.sub_events
        for event in events:
            kind = event.event_type
            if kind not in wanted:
                continue
            start, end = event.window_start, event.window_end
            if not self.notify.history and self._history(end if kind != EventType.WINDOW_OPEN else None, start):
                continue
            fields = window_fields(event.trigger_type, kind, event.fields(), self.precision, sub_events=sub_events)
            batch = event.batch_id
            key = f"{batch}:{event.seq}" if batch is not None else f"recalc:{event.trigger_id}:{kind}"
            when = epoch(event.event_time, "ms") if event.event_time is not None else _now_ms()
            self._add(key, table_names.get(event.group_id, ""), kind, when, event.trigger_id, event.trigger_type,
                      event.group_id, fields, self._rows_of(fired_by.get(event)), batch)

    def add_scheduled(self, fired: Iterable[Fired], table_names: dict[str, str]) -> None:
        """ON_TIME events of PERIOD and SLIDING triggers."""
        keyword = self.runtime.stmt.trigger.keyword
        kind, sliding = TRIGGER_TYPES[keyword], keyword is TriggerKind.SLIDING
        for f in fired:
            at = f.values.get("_tcurrent_ts") if sliding else None
            if at is None:
                local = f.values["_tlocaltime"]
                assert isinstance(local, int)  # schedule triggers set it, in epoch nanoseconds
                instant = datetime.fromtimestamp(local / 1e9, UTC)
            else:
                assert isinstance(at, datetime)  # a timestamp placeholder (TIMESTAMPS)
                instant = at
            if not self.notify.history and sliding and self._history(instant):
                continue
            self._add(f.trigger_id, table_names.get(f.group_id, ""), EventType.ON_TIME, epoch(instant, "ms"),
                      f.trigger_id, kind, f.group_id, {}, self._rows_of(f.idx))

    def _add(self, key: str, table: str, kind: str, when: int, trigger_id: str, trigger_type: str, group_id: str,
             fields: dict, rows: list[dict | None], batch: int | None = None) -> None:
        for r, result in enumerate(rows):
            self.events.append(NotifyEvent(stream=self.stream, key=key if r == 0 else f"{key}#{r}", table_name=table,
                                           event_type=kind, event_time=when, trigger_id=trigger_id,
                                           trigger_type=trigger_type, group_id=group_id, fields=fields, result=result,
                                           style=self.notify.message_format, batch=batch))


def _now_ms() -> int:
    return int(datetime.now(UTC).timestamp() * 1000)

