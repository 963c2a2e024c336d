"""The ``stream_ws`` connection: headers and credentials for notification receivers.

Stream SQL names only URLs; anything secret lives in an Airflow connection of type ``stream_ws``:

- ``host`` (and ``port``): the receivers it serves; empty serves every URL, which only a connection
  without credentials may do;
- ``login``/``password``: HTTP basic auth; a password without a login is sent as a bearer token;
- ``extra``: ``{"headers": {"X-Key": "..."}, "verify": true, "ca_bundle": "/path/ca.pem",
  "allow_plaintext": false}``. ``wss://`` certificates are verified unless ``verify`` is false.

Credentials (a login, a password or extra headers) go only to the connection's host, and only over
``wss://`` unless ``allow_plaintext`` is true; otherwise delivery stops with
:class:`~airflow_stream_provider.notify.delivery.CredentialsRefused` rather than send them. Delivery
follows no redirects, so they never reach another host.
"""

from __future__ import annotations

import base64
import ssl
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from airflow.sdk import BaseHook, Connection

from airflow_stream_provider.notify.delivery import Access, CredentialsRefused


class WebSocketHook(BaseHook):
    """The headers and credentials of one ``stream_ws`` connection (see the module's text), for the
    receivers it serves.

    :param stream_ws_conn_id: the connection's id; default ``stream_ws_default``.
    :param kwargs: the arguments of Airflow's ``BaseHook``.
    """

    conn_name_attr = "stream_ws_conn_id"
    default_conn_name = "stream_ws_default"
    conn_type = "stream_ws"
    hook_name = "Stream notification receiver (WebSocket)"

    def __init__(self, stream_ws_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.stream_ws_conn_id = stream_ws_conn_id
        self._conn: Connection | None = None

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        return {
            "hidden_fields": ["schema"],
            "relabeling": {"host": "Receiver host (empty: every receiver; required with credentials)",
                           "login": "User (basic auth)",
                           "password": "Password, or bearer token without a user"},
            "placeholders": {"extra": '{"headers": {"X-Api-Key": "..."}, "verify": true, "ca_bundle": null}',
                             "host": "receiver.example.com", "port": "8080"},
        }

    @classmethod
    def find(cls, conn_id: str) -> WebSocketHook | None:
        """The hook of ``conn_id``, or None when no such connection is defined."""
        from airflow.sdk.exceptions import AirflowNotFoundException

        hook = cls(conn_id)
        try:
            hook.get_conn()
        except AirflowNotFoundException:
            return None
        return hook

    def get_conn(self) -> Connection:
        if self._conn is None:
            self._conn = self.get_connection(self.stream_ws_conn_id)
        return self._conn

    def has_credentials(self) -> bool:
        conn = self.get_conn()
        return bool(conn.login or conn.password or conn.extra_dejson.get("headers"))

    def serves(self, url: str) -> bool:
        conn = self.get_conn()
        if not conn.host:
            if self.has_credentials():
                raise CredentialsRefused(
                    f"connection {self.stream_ws_conn_id!r} holds credentials but names no host, so they would go "
                    "to any receiver a stream names: set the connection's host (and port) to the receiver's")
            return True
        parts = urlsplit(url)
        return (parts.hostname or "").lower() == conn.host.lower() and (not conn.port or parts.port == conn.port)

    def access(self, url: str | None = None) -> Access:
        """What the connection adds to a request to ``url``; credentials only over ``wss://`` (or
        ``https://``) unless the extra sets ``allow_plaintext``."""
        conn = self.get_conn()
        extra = conn.extra_dejson
        if url is not None and self.has_credentials() and urlsplit(url).scheme not in ("wss", "https") \
                and extra.get("allow_plaintext") is not True:
            raise CredentialsRefused(
                f"connection {self.stream_ws_conn_id!r} sends credentials only over wss://, and a stream names "
                f"{urlsplit(url).scheme}://{conn.host}: use wss://, or set \"allow_plaintext\": true in the "
                "connection's extra")
        headers = [f"{k}: {v}" for k, v in (extra.get("headers") or {}).items()]
        if conn.login:
            token = base64.b64encode(f"{conn.login}:{conn.password or ''}".encode()).decode()
            headers.append(f"Authorization: Basic {token}")
        elif conn.password:
            headers.append(f"Authorization: Bearer {conn.password}")
        if extra.get("verify", True) is False:
            sslopt: dict = {"cert_reqs": ssl.CERT_NONE, "check_hostname": False}
        else:
            sslopt = {"cert_reqs": ssl.CERT_REQUIRED}
            if extra.get("ca_bundle"):
                sslopt["ca_certs"] = extra["ca_bundle"]
        return Access(tuple(headers), sslopt)


def credentials(url: str, conn_ids: Sequence[str]) -> Access | None:
    """What the first of the ``stream_ws`` connections ``conn_ids`` that serves ``url`` adds to a
    request, or None when none does (the lookup delivery uses, see ``hooks.bind``)."""
    for conn_id in conn_ids:
        hook = WebSocketHook.find(conn_id)
        if hook is not None and hook.serves(url):
            return hook.access(url)
    return None
