"""``StreamCommitOperator``: records what a run's compute consumed."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperator

from airflow_stream_provider.operators.base import StreamTask
from airflow_stream_provider.plan.ids import COMPUTE_TASK


class StreamCommitOperator(StreamTask, BaseOperator):
    """Records what ``compute`` consumed (the last batch, instant or SLIDING marks).

    :param stream: the stream, written ``db.name``.
    :param home: the stream home its definitions, state and tables live in; default None:
        ``$AIRFLOW_STREAM_HOME``, else ``~/airflow-stream``.
    :param compute_task: the task id of the compute whose progress (its XCom) is recorded; default
        ``compute``.
    :param from_trigger: start in the triggerer, where
        :class:`~airflow_stream_provider.triggers.StreamCommitTrigger` writes the few files (no worker
        process; a worker commits when the trigger cannot); default False.
    :param kwargs: the arguments of Airflow's ``BaseOperator`` (``task_id``, ...).
    """

    def __init__(self, *, stream: str, home: str | None = None, compute_task: str = COMPUTE_TASK,
                 from_trigger: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.init_stream(stream, home)
        self.compute_task = compute_task
        if from_trigger:  # the few files it writes are written in the triggerer: no worker process
            self.start_in_triggerer("StreamCommitTrigger", stream=stream, home=home, compute_task=compute_task)

    def execute_complete(self, context: Any, event: dict) -> None:
        """The trigger could not commit in the triggerer: commit here."""
        self.raise_on_error(event)
        self.execute(context)

    def execute(self, context: Any) -> None:
        from airflow_stream_provider.streams.run import commit_progress
        from airflow_stream_provider.triggers.served import progress_of

        progress = progress_of(context["ti"].xcom_pull(task_ids=self.compute_task))
        state = commit_progress(*self.stream_names(), progress, store=self.stream_store())
        self.log.info("stream %s: committed %s (consumed batch %s)", self.stream, sorted(progress),
                      state.consumed_batch)
