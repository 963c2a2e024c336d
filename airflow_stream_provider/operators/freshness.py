"""``StreamFreshnessOperator``: a stream's freshness checked on Airflow's clock, failing when it is
late or silent; and :func:`freshness_deadline_missed`, the callback of the freshness DAG's
``DeadlineAlert``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException

from airflow_stream_provider.operators.base import StreamTask

log = logging.getLogger(__name__)


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


async def freshness_deadline_missed(*, stream: str, notifier: str | None = None, context: dict | None = None) -> None:
    """The callback of a freshness DAG's ``DeadlineAlert``, run by the triggerer, which Airflow's
    scheduler queues when a check run has not succeeded by the time the next is due (the DAG's
    interval after it was queued): the check found the stream late or silent (its run failed), or
    could not say (its run is still queued or running). Logs which, and hands it to the ``on_stale``
    notifier ``notifier`` when one is named, with a context as a DAG callback's (without the DAG
    itself, which Airflow does not hand a deadline callback): ``dag_id``, ``dag_run``, ``run_id``,
    ``logical_date``, ``reason`` (``"deadline missed"``), ``deadline`` and ``stream``.

    :param stream: the stream, written ``db.name``.
    :param notifier: the ``[notifiers.<name>]`` table of ``airflow-stream.toml``; default None: none.
    :param context: what Airflow passes a deadline callback: the run (``dag_run``, as the REST API
        shows it) and the ``deadline`` (``id``, ``deadline_time``).
    """
    from airflow_stream_provider.notifications.receivers import notifier as named_notifier

    context = context or {}
    run = dict(context.get("dag_run") or {})
    deadline = dict(context.get("deadline") or {})
    state = run.get("state")
    why = "its check failed: the stream is late or silent" if state == "failed" else \
        f"its check did not end (the run is {state})"
    log.warning("stream %s: freshness deadline %s missed by run %s of %s: %s", stream,
                deadline.get("deadline_time"), run.get("dag_run_id"), run.get("dag_id"), why)
    if not notifier:
        return
    found = named_notifier(notifier)
    dag_run = SimpleNamespace(dag_id=run.get("dag_id"), run_id=run.get("dag_run_id"), state=state,
                              logical_date=run.get("logical_date"))
    said: Any = {"dag_id": run.get("dag_id"), "dag_run": dag_run, "run_id": dag_run.run_id,
                 "logical_date": run.get("logical_date"), "reason": "deadline missed", "deadline": deadline,
                 "stream": stream}
    found.render_template_fields(said)
    from airflow.sdk import BaseNotifier

    if type(found).async_notify is BaseNotifier.async_notify:  # it notifies synchronously only
        await asyncio.to_thread(found.notify, said)
    else:
        await found.async_notify(said)
