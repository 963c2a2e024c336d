"""``StreamFreshnessOperator``: a stream's freshness checked on Airflow's clock, failing when it is
late or silent."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException

from airflow_stream_provider.operators.base import StreamTask


class StreamFreshnessOperator(StreamTask, BaseOperator):
    """Checks the stream's freshness as SHOW STREAMS reports it: the task fails, saying why, when
    the stream is late (its realtime lag over its freshness bound) or silent (rows arriving on its
    trigger table, no window fired); a DAG's ``on_failure_callback`` then says so.

    :param stream: the stream, written ``db.name``.
    :param home: the stream home its definitions, state and tables live in; default None:
        ``$AIRFLOW_STREAM_HOME``, else ``~/airflow-stream``.
    :param kwargs: the arguments of Airflow's ``BaseOperator`` (``task_id``, ...).
    """

    template_fields: Sequence[str] = ()

    def __init__(self, *, stream: str, home: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.init_stream(stream, home)

    def execute(self, context: Any) -> dict:
        from airflow_stream_provider.streams.status import FRESH, stream_status
        from airflow_stream_provider.warehouse.warehouse import Warehouse

        store = self.stream_store()
        row = stream_status(Warehouse(), store.get(*self.stream_names()), store)
        verdict = {"freshness": row["freshness"], "bound_s": row["freshness_bound_s"], "lag_s": row["lag_s"]}
        if row["freshness"] not in (FRESH, None):
            raise AirflowException(f"stream {self.stream} is {row['freshness']}: {row['freshness_detail']}")
        self.log.info("stream %s: freshness %s (bound %s s, lag %s s)", self.stream, row["freshness"],
                      row["freshness_bound_s"], row["lag_s"])
        return verdict
