"""``StreamNotifyOperator``: delivers the notifications waiting in a stream's outbox."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperator

from airflow_stream_provider.operators.base import StreamTask


class StreamNotifyOperator(StreamTask, BaseOperator):
    """Delivers the notifications waiting in the stream's outbox. With ON_FAILURE_PAUSE it retries
    until every receiver has them (the run, and so the stream, waits: one run at a time); without
    it, what a receiver cannot take is dropped, logged and counted.

    :param stream: the stream, written ``db.name``.
    :param home: the stream home its definitions, state and tables live in; default None:
        ``$AIRFLOW_STREAM_HOME``, else ``~/airflow-stream``.
    :param from_trigger: start in the triggerer, where
        :class:`~airflow_stream_provider.triggers.StreamNotifyTrigger` has the stream node deliver (no
        worker process; a worker delivers when no node hosts the stream); default False.
    :param kwargs: the arguments of Airflow's ``BaseOperator`` (``task_id``, ...).
    """

    ui_color = "#fdf1e0"

    def __init__(self, *, stream: str, home: str | None = None, from_trigger: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.init_stream(stream, home)
        if from_trigger:  # the stream node delivers while it hosts the stream: no worker process
            self.start_in_triggerer("StreamNotifyTrigger", state_dir=self.stream_paths()[0])

    def execute_complete(self, context: Any, event: dict) -> dict:
        """No node hosts the stream: deliver here."""
        self.raise_on_error(event)
        return self.execute(context)

    def execute(self, context: Any) -> dict:
        from airflow_stream_provider.streams.notifications import deliver_outbox

        store = self.stream_store()
        stored = store.get(*self.stream_names())
        report = deliver_outbox(stored, say=self.log.info)
        if report is None:
            return {}
        self.log.info("stream %s: %s", self.stream, report.summary())
        if report.dropped_events:
            self.log.warning("stream %s: %d event(s) dropped (no ON_FAILURE_PAUSE)", self.stream,
                             report.dropped_events)
        return {"sent": report.sent_events, "dropped": report.dropped_events}
