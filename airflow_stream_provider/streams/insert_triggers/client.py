"""A writer's line to the STATEFUL triggers the stream node holds (:class:`NodeClient`), and the
tablets as the protocol carries them: one JSON request per line over the node's trigger port,
answered by one JSON line.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from pathlib import Path
from typing import TextIO

from airflow_stream_provider import model as m
from airflow_stream_provider.spark import endpoint


def tablet_json(tablet: m.Tablet) -> dict:
    return {"device": tablet.device, "schemas": [[s.name, s.type.value] for s in tablet.schemas],
            "micros": list(tablet.micros), "values": [list(v) for v in tablet.values]}


def tablet_from_json(payload: dict) -> m.Tablet:
    micros = tuple(payload["micros"])
    return m.Tablet(payload["device"], tuple(m.Measurement(n, m.SeriesType(t)) for n, t in payload["schemas"]),
                    tuple(t // 1000 for t in micros), tuple(tuple(v) for v in payload["values"]), micros)


def _address_path() -> Path:
    return endpoint.folder() / "triggers.json"


class NodeDown(ConnectionError):
    """No stream node runs for this home."""


class NodeClient:
    """A writer's line to the stateful triggers the stream node holds: one JSON request per line,
    answered by one JSON line, the first carrying the node's token."""

    def __init__(self) -> None:
        self._sock: socket.socket | None = None
        self._reader: TextIO | None = None
        self._port: int | None = None
        self._lock = threading.Lock()  # one request at a time on the connection

    def call(self, request: dict, timeout: float) -> dict:
        """The node's answer; raises ``ConnectionError`` when the node cannot be reached."""
        with self._lock:
            return self._call(request, timeout)

    def _call(self, request: dict, timeout: float) -> dict:
        for attempt in (1, 2):  # a connection the node closed (a restart) is opened again once
            try:
                sock = self._connect()
                sock.settimeout(timeout)
                sock.sendall((json.dumps(request) + "\n").encode())
                assert self._reader is not None  # made with the socket
                line = self._reader.readline()
                if not line:
                    raise ConnectionError("the stream node closed the connection")
                return json.loads(line)
            except (TimeoutError, NodeDown):
                self.close()
                raise
            except (OSError, ConnectionError, json.JSONDecodeError) as err:
                self.close()
                if attempt == 2:
                    raise ConnectionError(f"the stream node's trigger port does not answer ({err})") from None
        raise AssertionError("unreachable")

    def _connect(self) -> socket.socket:
        try:
            port = json.loads(_address_path().read_text(encoding="utf-8"))["port"]
        except (FileNotFoundError, json.JSONDecodeError, KeyError):
            self.close()
            raise NodeDown("the stream node is not running (start it with `airflow-stream node start`)") from None
        if self._sock is not None and port == self._port:
            return self._sock
        self.close()
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        reader = sock.makefile("r", encoding="utf-8")
        self._sock, self._port, self._reader = sock, port, reader
        sock.sendall((json.dumps({"token": endpoint.token() or ""}) + "\n").encode())
        answer = json.loads(reader.readline() or "{}")
        if not answer.get("ok"):
            self.close()
            raise ConnectionError(answer.get("error") or "the stream node refused the connection")
        return sock

    def close(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
        self._sock = self._reader = self._port = None
