"""``StreamVerifyOperator``: the periodic verification of a stream (VERIFY STREAM in a DAG)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException

from airflow_stream_provider.operators.base import StreamTask


class StreamVerifyOperator(StreamTask, BaseOperator):
    """Verifies the stream: its triggers computed again in batch and compared with its output; the
    task fails, naming the differences, when there are any.

    :param stream: the stream, written ``db.name``.
    :param home: the stream home its definitions, state and tables live in; default None:
        ``$AIRFLOW_STREAM_HOME``, else ``~/airflow-stream``.
    :param lookback: verify the event time this long before the stream's progress; default None:
        its whole history.
    :param repair: recalculate the windows that differ (and verify again) instead of failing.
    :param kwargs: the arguments of Airflow's ``BaseOperator`` (``task_id``, ...).
    """

    template_fields: Sequence[str] = ()

    def __init__(self, *, stream: str, home: str | None = None, lookback: timedelta | None = None,
                 repair: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.init_stream(stream, home)
        self.lookback = lookback
        self.repair = repair

    def execute(self, context: Any) -> dict:
        from airflow_stream_provider.streams.probes import progress_time
        from airflow_stream_provider.streams.verify import verify
        from airflow_stream_provider.warehouse.warehouse import Warehouse

        store = self.stream_store()
        db, name = self.stream_names()
        start = None
        if self.lookback is not None:
            reached = progress_time(store.get(db, name))
            start = reached - self.lookback if reached is not None else None
        report = verify(Warehouse(), db, name, start, repair=self.repair, store=store, progress=self.log.info)
        for d in report.differences:
            self.log.warning("%s %s at %s (trigger %s, group %s): %s were %s, batch gives %s", d.status, d.table,
                             d.ts.isoformat(), d.trigger_id, d.group_id, ",".join(d.columns), d.old, d.new)
        if not report.equal:
            raise AirflowException(report.summary())
        return report.to_json()
