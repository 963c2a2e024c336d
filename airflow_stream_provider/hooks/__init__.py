"""Hooks to Airflow connections, and :func:`bind`, which lends them to the layers that must not import
Airflow: notification delivery (``stream_ws`` credentials, the notifiers of ``notifier://``
receivers) and the Spark session (the ``spark_connect`` URL) and the warehouse's object store (its
credentials)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from airflow_stream_provider import storage

if TYPE_CHECKING:
    from airflow_stream_provider.notify import delivery


def bind() -> None:
    """Register this package's connection lookups with delivery and the Spark session. Entry points
    that deliver notifications or open sessions call it once (again is harmless). Airflow itself is
    imported only when a connection is read, and delivery's WebSocket client only when bound."""
    from airflow_stream_provider.notify import delivery
    from airflow_stream_provider.spark import session

    delivery.use_credentials(_credentials)
    delivery.use_notifiers(_notify)
    session.use_connection_url(_connection_url)
    storage.use_connection_reader(_storage_variables)


def _credentials(url: str, conn_ids: Sequence[str]) -> delivery.Access | None:
    from airflow_stream_provider.hooks.websocket import credentials

    return credentials(url, conn_ids)


def _notify(name: str, text: str) -> None:
    from airflow_stream_provider.notifications.receivers import send

    send(name, text)


def _connection_url(conn_id: str) -> str:
    from airflow_stream_provider.hooks.spark_connect import connection_url

    return connection_url(conn_id)


def _storage_variables(conn_id: str) -> dict[str, str]:
    from airflow_stream_provider.hooks.storage import aws_variables

    return aws_variables(conn_id)
