"""The tasks of a stream's DAGs: sensors that wait in the triggerer, and the compute, commit and
recalculation steps. Each task calls the same functions as ``airflow-stream run``.

A window DAG run is ``compute [>> notify] >> commit``. ``compute`` waits in the triggerer for the
detector's next batches, writes their results (upserts by key), queues their notifications in the
stream's outbox and returns what it consumed; ``notify`` delivers the outbox; ``commit`` records
the progress. A task killed and retried anywhere recomputes the same batches into the same rows
and queues no event twice, so nothing is lost or duplicated, and a resent message keeps its id.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import UTC
from pathlib import Path
from typing import Any

from airflow.sdk import BaseOperator, BaseSensorOperator, PokeReturnValue
from airflow.sdk.exceptions import AirflowSkipException

from airflow_stream_provider.timetables import utc_datetime
from airflow_stream_provider.triggers import CheckpointCommitTrigger, EventTimeTrigger

WAIT_EVENT_TIME_TASK = "wait_for_event_time"
COMPUTE_TASK = "compute"
NOTIFY_TASK = "notify"


class _StreamTask:
    """What every task of a stream knows: the stream and the home its files live in."""

    def _init_stream(self, stream: str, home: str | None) -> None:
        db, _, name = stream.partition(".")
        if not db or not name:
            raise ValueError(f"stream must be written db.name, not {stream!r}")
        self.stream = stream
        self.home = home

    def _env(self) -> None:
        if self.home:
            os.environ["AIRFLOW_STREAM_HOME"] = self.home

    def _store(self):  # type: ignore[no-untyped-def]
        from airflow_stream_provider.streams.store import StreamStore

        self._env()
        return StreamStore(Path(self.home) if self.home else None)

    def _names(self) -> tuple[str, str]:
        db, _, name = self.stream.partition(".")
        return db, name


class _StreamSensor(_StreamTask, BaseSensorOperator):
    """A sensor whose check is its trigger's: checked once at start, then deferred to the triggerer
    (or poked in reschedule mode with ``deferrable=False``)."""

    def __init__(self, *, stream: str, home: str | None, poll_interval: float, deferrable: bool,
                 **kwargs: Any) -> None:
        kwargs.setdefault("timeout", 365 * 24 * 3600)
        super().__init__(poke_interval=poll_interval, mode="poke" if deferrable else "reschedule", **kwargs)
        self._init_stream(stream, home)
        self.poll_interval = poll_interval
        self.deferrable = deferrable

    def _trigger(self, context: Any) -> CheckpointCommitTrigger | EventTimeTrigger:
        raise TypeError(f"{type(self).__name__} does not name its trigger")

    def execute(self, context: Any) -> Any:
        trigger = self._trigger(context)
        found = trigger.check()
        if found is not None:
            return found
        if self.deferrable:
            self.defer(trigger=trigger, method_name="execute_complete")
        return super().execute(context)

    def poke(self, context: Any) -> PokeReturnValue:
        found = self._trigger(context).check()
        return PokeReturnValue(is_done=found is not None, xcom_value=found)

    def execute_complete(self, context: Any, event: dict) -> dict:
        self.log.info("stream %s: %s", self.stream, event)
        return event


class StreamCheckpointSensor(_StreamSensor):
    """Waits until the stream's detector has committed window events past the last consumed batch
    (or, with no live detector, until the trigger table changed). Deferrable by default."""

    def __init__(self, *, stream: str, home: str | None = None, table: str | None = None,
                 poll_interval: float = 0.5, deferrable: bool = True, **kwargs: Any) -> None:
        super().__init__(stream=stream, home=home, poll_interval=poll_interval, deferrable=deferrable, **kwargs)
        self.table = table

    def _trigger(self, context: Any) -> CheckpointCommitTrigger:
        state_dir = self._store().state_dir(*self._names())
        return CheckpointCommitTrigger(str(state_dir), self.table, self.poll_interval)


class StreamEventTimeSensor(_StreamSensor):
    """SLIDING: waits until the trigger table's event time minus WATERMARK passes the run's
    instant (its data interval's end). Deferrable by default."""

    def __init__(self, *, stream: str, table: str, ts_column: str, watermark_s: float = 0.0,
                 home: str | None = None, poll_interval: float = 1.0, deferrable: bool = True,
                 **kwargs: Any) -> None:
        super().__init__(stream=stream, home=home, poll_interval=poll_interval, deferrable=deferrable, **kwargs)
        self.table, self.ts_column, self.watermark_s = table, ts_column, watermark_s

    def _trigger(self, context: Any) -> EventTimeTrigger:
        instant = context["data_interval_end"].astimezone(UTC).isoformat()
        state_dir = self._store().state_dir(*self._names())
        return EventTimeTrigger(str(state_dir), self.table, self.ts_column, instant, self.watermark_s,
                                self.poll_interval)


class StreamComputeOperator(_StreamTask, BaseOperator):
    """Computes and writes what fired: the batches the detector committed (window triggers), the
    run's instant (PERIOD), or the SLIDING instants the event time passed. Returns the progress to
    commit.

    A window stream's compute waits itself (``wait=True``, the DAGs' way): it checks once, then
    defers to :class:`CheckpointCommitTrigger` and computes when it resumes, which spares the
    scheduling of a separate sensor task. With ``wait_task`` it takes the event a
    :class:`StreamCheckpointSensor` returned instead.
    """

    ui_color = "#e8f1fb"

    def __init__(self, *, stream: str, kind: str, home: str | None = None, wait_task: str | None = None,
                 wait: bool = False, table: str | None = None, poll_interval: float = 0.5, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if kind not in ("window", "period", "sliding"):
            raise ValueError(f"kind must be window, period or sliding, not {kind!r}")
        if wait and (kind != "window" or wait_task):
            raise ValueError("wait=True is for window streams without a wait_task")
        self._init_stream(stream, home)
        self.kind = kind
        self.wait_task = wait_task
        self.wait = wait
        self.table = table
        self.poll_interval = poll_interval

    def execute(self, context: Any) -> dict:
        event = None
        if self.kind == "window":
            self._skip_if_computed_by_node()
            if self.wait:
                trigger = CheckpointCommitTrigger(str(self._store().state_dir(*self._names())), self.table,
                                                  self.poll_interval)
                event = trigger.check()
                if event is None:
                    self.defer(trigger=trigger, method_name="execute_complete")
            elif self.wait_task:
                event = context["ti"].xcom_pull(task_ids=self.wait_task)
        return self._compute(context, event)

    def execute_complete(self, context: Any, event: dict) -> dict:
        self.log.info("stream %s: %s", self.stream, event)
        self._skip_if_computed_by_node()
        return self._compute(context, event)

    def _skip_if_computed_by_node(self) -> None:
        from airflow_stream_provider.streams.store import detector_hosted

        stored = self._store().get(*self._names())
        if stored.statement.options.low_latency_calc and detector_hosted(stored.state_dir):
            raise AirflowSkipException("LOW_LATENCY_CALC: the live detector on the stream node computes and "
                                       "notifies each batch itself; this run only supervises")

    def _compute(self, context: Any, event: dict | None) -> dict:
        from airflow_stream_provider.streams.runner import StreamStopped, run
        from airflow_stream_provider.warehouse.warehouse import Warehouse

        store = self._store()
        db, name = self._names()
        arguments: dict[str, Any] = {}
        if self.kind == "window" and event:
            arguments = {"upto_batch": event.get("to_batch"), "detect": event.get("status") == "detect"}
        elif self.kind == "period":
            arguments = {"at": utc_datetime(context["data_interval_end"])}
        try:
            report = run(Warehouse(), db, name, store=store, commit=False, progress=self.log.info, **arguments)
        except StreamStopped as err:
            raise AirflowSkipException(str(err)) from None
        self.log.info("%s", report.summary())
        if report.per_trigger:
            self.log.info("computed trigger by trigger: %s", report.per_trigger)
        if report.triggers == 0 and report.skipped:
            raise AirflowSkipException(f"IGNORE_NODATA_TRIGGER: no new rows for {report.skipped} trigger(s)")
        return report.progress


class StreamNotifyOperator(_StreamTask, BaseOperator):
    """Delivers the notifications waiting in the stream's outbox. With ON_FAILURE_PAUSE it retries
    until every receiver has them (the run, and so the stream, waits: one run at a time); without
    it, what a receiver cannot take is dropped, logged and counted."""

    ui_color = "#fdf1e0"

    def __init__(self, *, stream: str, home: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._init_stream(stream, home)

    def execute(self, context: Any) -> dict:
        from airflow_stream_provider.streams.routing import deliver

        store = self._store()
        stored = store.get(*self._names())
        report = deliver(stored, say=self.log.info)
        if report is None:
            return {}
        self.log.info("stream %s: %s", self.stream, report.summary())
        if report.dropped_events:
            self.log.warning("stream %s: %d event(s) dropped (no ON_FAILURE_PAUSE)", self.stream,
                             report.dropped_events)
        return {"sent": report.sent_events, "dropped": report.dropped_events}


class StreamCommitOperator(_StreamTask, BaseOperator):
    """Records what ``compute`` consumed (the last batch, instant or SLIDING marks)."""

    def __init__(self, *, stream: str, home: str | None = None, compute_task: str = COMPUTE_TASK,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._init_stream(stream, home)
        self.compute_task = compute_task

    def execute(self, context: Any) -> None:
        from airflow_stream_provider.streams.runner import commit_progress

        progress = context["ti"].xcom_pull(task_ids=self.compute_task) or {}
        state = commit_progress(*self._names(), progress, store=self._store())
        self.log.info("stream %s: committed %s (consumed batch %s)", self.stream, sorted(progress),
                      state.get("consumed_batch"))


class StreamRecalculateOperator(_StreamTask, BaseOperator):
    """Recalculates the windows that start in the run's data interval (a backfill's slice)."""

    template_fields: Sequence[str] = ()

    def __init__(self, *, stream: str, home: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._init_stream(stream, home)

    def execute(self, context: Any) -> dict:
        from airflow_stream_provider.streams.control import recalculate
        from airflow_stream_provider.warehouse.warehouse import Warehouse

        store = self._store()
        start, end = utc_datetime(context["data_interval_start"]), utc_datetime(context["data_interval_end"])
        report = recalculate(Warehouse(), *self._names(), start, end, store=store, progress=self.log.info)
        self.log.info("recalculated [%s, %s): %s", start.isoformat(), end.isoformat(), report.summary())
        return {"triggers": report.triggers, "written": report.written}

