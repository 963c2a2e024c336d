"""``WebSocketNotifier``: send a TDengine-format notification from any DAG's callbacks.

    from airflow_stream_provider.notifications.websocket import WebSocketNotifier

    with DAG(..., on_failure_callback=WebSocketNotifier(urls="ws://alerts:8080/notify")):
        ...

Each call sends one message with one ``ON_TIME`` event: ``streamName`` is ``stream_name`` (default
the DAG id), ``tableName`` the task id (or the DAG id), and ``result`` the run's identity and
state plus the templated ``result`` given. The ids derive from the DAG run, task and try, so a
resend of the same callback carries the same ``messageId`` and ``triggerId``. Headers and
credentials come from ``stream_ws`` connections, as for streams.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from airflow.sdk import BaseNotifier

from airflow_stream_provider.hooks import bind
from airflow_stream_provider.model.events import TRIGGER_TYPES, EventType, TriggerKind
from airflow_stream_provider.notify import delivery
from airflow_stream_provider.notify.message import (
    NotifyEvent,
    build,
    json_value,
)


class WebSocketNotifier(BaseNotifier):
    """Sends one TDengine-format notification per call to every receiver in ``urls`` (see the
    module's text); raises :class:`~airflow_stream_provider.notify.delivery.ReceiverError` naming the
    receivers that did not confirm it.

    :param urls: the receivers, one ``ws://`` or ``wss://`` URL or a sequence of them; templated.
    :param stream_name: the message's ``streamName``; default None, the DAG id; templated.
    :param result: values added to the event's ``result``, after the run's identity and state;
        default None, nothing added; templated.
    :param conn_ids: the ids of the ``stream_ws`` connections holding the receivers' headers and
        credentials; default None: ``AIRFLOW_STREAM_NOTIFY_CONN_IDS`` (or ``[notify] conn_ids``),
        else ``stream_ws_default``.
    :param timeout: the seconds to connect to a receiver and to wait for its confirmation; default
        None: ``AIRFLOW_STREAM_NOTIFY_TIMEOUT`` (or ``[notify] timeout``), else 10.
    """

    template_fields: Sequence[str] = ("urls", "stream_name", "result")

    def __init__(self, *, urls: str | Sequence[str], stream_name: str | None = None,
                 result: dict[str, Any] | None = None, conn_ids: Sequence[str] | None = None,
                 timeout: float | None = None) -> None:
        super().__init__()
        self.urls = [urls] if isinstance(urls, str) else list(urls)
        if not self.urls or any(not u.startswith(("ws://", "wss://")) for u in self.urls):
            raise ValueError(f"WebSocketNotifier needs ws:// or wss:// URLs, not {self.urls!r}")
        self.stream_name = stream_name
        self.result = result or {}
        self.conn_ids = tuple(conn_ids) if conn_ids is not None else None
        self.timeout = timeout

    def event(self, context: Any) -> NotifyEvent:
        dag = context.get("dag")
        ti = context.get("ti") or context.get("task_instance")
        run = context.get("dag_run")
        dag_id = getattr(dag, "dag_id", None) or getattr(ti, "dag_id", None) or getattr(run, "dag_id", None) \
            or context.get("dag_id") or "dag"
        task_id = getattr(ti, "task_id", None)
        run_id = context.get("run_id") or getattr(run, "run_id", None) or ""
        try_number = getattr(ti, "try_number", None)
        state = getattr(ti, "state", None) if ti is not None else getattr(run, "state", None)
        logical = context.get("logical_date")
        result = {"dag_id": dag_id, "run_id": run_id, "task_id": task_id, "try_number": try_number,
                  "state": str(state.value if hasattr(state, "value") else state) if state is not None else None,
                  "logical_date": logical.isoformat() if isinstance(logical, datetime) else logical}
        result.update({k: json_value(v, "ms") for k, v in self.result.items()})
        key = f"{dag_id}/{run_id}/{task_id or ''}/{try_number or ''}"
        now = int(datetime.now(UTC).timestamp() * 1000)
        return NotifyEvent(stream=self.stream_name or dag_id, key=key, table_name=task_id or dag_id,
                           event_type=EventType.ON_TIME, event_time=now, trigger_id=key,
                           trigger_type=TRIGGER_TYPES[TriggerKind.PERIOD], group_id="0", fields={}, result=result)

    def notify(self, context: Any) -> None:
        bind()
        settings = delivery.Settings.load()
        if self.conn_ids is not None:
            settings = replace(settings, conn_ids=self.conn_ids)
        if self.timeout is not None:
            settings = replace(settings, timeout=self.timeout)
        message = build([self.event(context)], int(datetime.now(UTC).timestamp() * 1000))
        failures = []
        for url in self.urls:
            try:
                delivery.receiver(url, settings).send([message.text])
            except delivery.ReceiverError as err:
                failures.append(str(err))
        if failures:
            raise delivery.ReceiverError("; ".join(failures))
        self.log.info("sent notification %s to %d receiver(s)", message.message_id, len(self.urls))

    async def async_notify(self, context: Any) -> None:
        await asyncio.to_thread(self.notify, context)
