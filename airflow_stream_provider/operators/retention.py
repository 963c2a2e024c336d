"""``StreamRetentionOperator``: one retention run of the home's warehouse (KEEP and TTL enforced)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator

from airflow_stream_provider.hooks import bind


class StreamRetentionOperator(BaseOperator):
    """Deletes the rows every database's retention no longer keeps, vacuums the tables, and records
    each stream's source horizon (:func:`airflow_stream_provider.streams.retention.run_retention`).

    :param home: the stream home whose warehouse is enforced; default None: ``$AIRFLOW_STREAM_HOME``,
        else ``~/airflow-stream``.
    :param vacuum_hours: remove unreferenced files older than this many hours; default None: each
        table's ``delta.deletedFileRetentionDuration`` (7 days unless set).
    :param kwargs: the arguments of Airflow's ``BaseOperator`` (``task_id``, ...).
    """

    template_fields: Sequence[str] = ()

    def __init__(self, *, home: str | None = None, vacuum_hours: float | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.home = home
        self.vacuum_hours = vacuum_hours

    def execute(self, context: Any) -> dict:
        from airflow_stream_provider.streams.retention import run_retention
        from airflow_stream_provider.streams.store import StreamStore
        from airflow_stream_provider.warehouse.warehouse import Warehouse

        if self.home:
            os.environ["AIRFLOW_STREAM_HOME"] = self.home
        bind()
        report = run_retention(Warehouse(), vacuum_hours=self.vacuum_hours, store=StreamStore(), say=self.log.info)
        return {"tables": len(report.expired), "deleted": sum(e.deleted for e in report.expired),
                "vacuumed": sum(e.vacuumed for e in report.expired), "streams": len(report.streams)}
