"""``StreamCommitOperator``: records what a run's compute consumed."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperator

from airflow_stream_provider.operators.base import StreamTask
from airflow_stream_provider.plan.ids import COMPUTE_TASK


class StreamCommitOperator(StreamTask, BaseOperator):
    """Records what ``compute`` consumed (the last batch, instant or SLIDING marks)."""

    def __init__(self, *, stream: str, home: str | None = None, compute_task: str = COMPUTE_TASK,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.init_stream(stream, home)
        self.compute_task = compute_task

    def execute(self, context: Any) -> None:
        from airflow_stream_provider.streams.run import commit_progress

        progress = context["ti"].xcom_pull(task_ids=self.compute_task) or {}
        state = commit_progress(*self.stream_names(), progress, store=self.stream_store())
        self.log.info("stream %s: committed %s (consumed batch %s)", self.stream, sorted(progress),
                      state.get("consumed_batch"))
