"""Airflow notifiers as receivers of a stream's notifications (``NOTIFY('notifier://<name>')``).

``airflow-stream.toml`` names each one: ``[notifiers.<name>]`` with ``class``, the import path of a
``BaseNotifier`` subclass, and its keyword arguments beside it::

    [notifiers.ops]
    class = "airflow.providers.smtp.notifications.smtp.SmtpNotifier"
    to = "ops@example.com"
    subject = "{{ message.streams[0].streamName }}: {{ events | length }} event(s)"
    html_content = "{{ message_json }}"

Each message builds the notifier anew (rendering its templates changes it), renders its templated
fields with ``message`` (the notification as a dict), ``message_json`` (its text), ``message_id``
and ``events`` (every event of every stream in it), and calls ``notify``. Delivery
(:mod:`airflow_stream_provider.notify.delivery`) gives it the outbox's guarantees: in order, at least
once with the same ``messageId``, ON_FAILURE_PAUSE holding the stream while it raises.
"""

from __future__ import annotations

import importlib
import json
from typing import Any

from airflow.sdk import BaseNotifier

from airflow_stream_provider import config
from airflow_stream_provider.exceptions import StreamError


def notifier(name: str) -> BaseNotifier:
    """A new notifier of the ``[notifiers.<name>]`` table; StreamError when there is none or its
    class is not a notifier."""
    tables = config.settings().get("notifiers", {})
    spec = dict(tables.get(name) or {})
    if not spec:
        raise StreamError(f"notifier://{name}: airflow-stream.toml has no [notifiers.{name}] table"
                          + (f" (it has {', '.join(sorted(tables))})" if tables else ""))
    path = str(spec.pop("class", ""))
    module, _, attribute = path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), attribute) if module else None
    except (ImportError, AttributeError):
        cls = None
    if not isinstance(cls, type) or not issubclass(cls, BaseNotifier):
        raise StreamError(f"notifier://{name}: class {path!r} is not an importable BaseNotifier subclass")
    return cls(**spec)


def send(name: str, text: str) -> None:
    """Hand one message to the notifier ``name``; whatever it raises, the message waits."""
    message: dict[str, Any] = json.loads(text)
    context: Any = {"message": message, "message_json": text, "message_id": message.get("messageId"),
                    "events": [e for s in message.get("streams", []) for e in s.get("events", [])]}
    found = notifier(name)
    found.render_template_fields(context)
    found.notify(context)
