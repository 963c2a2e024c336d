"""What every task of a stream shares, operators and sensors alike."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowException

from airflow_stream_provider.hooks import bind

if TYPE_CHECKING:
    from airflow.triggers.base import StartTriggerArgs

    from airflow_stream_provider.streams.store import StreamStore
    from airflow_stream_provider.triggers.checkpoint import CheckpointCommitTrigger


class StreamTask:
    """What every task of a stream knows: the stream and the home its files live in."""

    stream: str
    home: str | None
    poll_interval: float
    start_from_trigger: bool
    start_trigger_args: StartTriggerArgs | None

    def init_stream(self, stream: str, home: str | None) -> None:
        db, _, name = stream.partition(".")
        if not db or not name:
            raise ValueError(f"stream must be written db.name, not {stream!r}")
        self.stream = stream
        self.home = home

    def stream_store(self) -> StreamStore:
        """The stream's store. It also makes the task's home this process's, and Airflow's
        connections readable by notification delivery and the Spark session."""
        from airflow_stream_provider.streams.store import StreamStore

        if self.home:
            os.environ["AIRFLOW_STREAM_HOME"] = self.home
        bind()
        return StreamStore(Path(self.home) if self.home else None)

    def stream_names(self) -> tuple[str, str]:
        db, _, name = self.stream.partition(".")
        return db, name

    def start_in_triggerer(self, trigger: str, **kwargs: Any) -> None:
        """Start this task in Airflow's triggerer with ``trigger`` (a class of
        :mod:`airflow_stream_provider.triggers`), no worker process; the trigger ends it, or resumes
        it on a worker in ``execute_complete``."""
        from airflow.triggers.base import StartTriggerArgs

        from airflow_stream_provider.triggers.base import CLASSPATH_MODULE

        self.start_from_trigger = True
        self.start_trigger_args = StartTriggerArgs(trigger_cls=f"{CLASSPATH_MODULE}.{trigger}", trigger_kwargs=kwargs,
                                                   next_method="execute_complete", next_kwargs=None, timeout=None)

    def stream_paths(self) -> tuple[str, str]:
        """The stream's state folder and its detector's checkpoint, without touching this process's
        environment (DAG files are parsed with these)."""
        from airflow_stream_provider.storage import join
        from airflow_stream_provider.streams.store import StreamStore

        store, names = StreamStore(Path(self.home) if self.home else None), self.stream_names()
        return str(store.state_dir(*names)), str(join(store.data_dir(*names), "checkpoint"))

    def checkpoint_trigger(self, table: str | None) -> CheckpointCommitTrigger:
        """The trigger that waits for the detector's next committed batch (or, with no live detector,
        for a new version of ``table``)."""
        from airflow_stream_provider.storage import join
        from airflow_stream_provider.triggers.checkpoint import CheckpointCommitTrigger

        store, names = self.stream_store(), self.stream_names()
        return CheckpointCommitTrigger(str(store.state_dir(*names)), table, self.poll_interval,
                                       str(join(store.data_dir(*names), "checkpoint")))

    def report_trigger_failures(self, log: Any) -> int:
        """Log the insert triggers that failed on this task's writes (the data is written: the
        task does not fail for them, as ``airflow-stream sql`` exits 3, not 2); how many."""
        from airflow_stream_provider.warehouse import listeners

        notices = listeners.take_notices()
        for notice in notices:
            log.warning("insert trigger: %s", notice)
        return len(notices)

    def raise_on_error(self, event: dict[str, Any]) -> None:
        """Raise the error a trigger reported as its event (``{"status": "error", "message": ...}``)."""
        if event.get("status") == "error":
            raise AirflowException(f"stream {self.stream}: {event.get('message', 'the trigger failed')}")
