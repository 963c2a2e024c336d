"""WebSocket delivery of a stream's outbox: in order, at least once, with stable message ids.

A receiver has a message once the WebSocket layer confirmed it: after a run of text frames the
sender sends a ping and waits for its pong, which the receiver's side returns only after reading
every frame before it. Messages not confirmed are sent again (same id, same bytes) on the next
attempt, so a receiver may see a message twice and can drop the second by ``messageId``.

Failures follow the stream's ``NOTIFY_OPTIONS``: by default the messages a receiver could not take
are dropped, logged and counted; with ``ON_FAILURE_PAUSE`` delivery retries with exponential
backoff until they are delivered, and the stream does not move on meanwhile.

Settings (environment, or the ``[notify]`` table of ``airflow-stream.toml``):
``AIRFLOW_STREAM_NOTIFY_TIMEOUT`` (seconds to connect and to wait for a confirmation, default 10),
``AIRFLOW_STREAM_NOTIFY_MAX_MESSAGE_BYTES`` (default 1 MiB), ``AIRFLOW_STREAM_NOTIFY_MAX_BACKOFF``
(seconds, default 30) and ``AIRFLOW_STREAM_NOTIFY_CONN_IDS`` (Airflow connections of type
``stream_ws`` holding headers and credentials, default ``stream_ws_default``). Connections are read
through the lookup the Airflow side registers with :func:`use_credentials`; without one, naming a
connection is an error.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import websocket

from airflow_stream_provider import config
from airflow_stream_provider.exceptions import StreamError
from airflow_stream_provider.notify.message import MAX_MESSAGE_BYTES
from airflow_stream_provider.notify.outbox import Outbox, Queued

log = logging.getLogger(__name__)

#: messages sent between two confirmations
CHUNK = 64


class ReceiverError(StreamError):
    """A receiver could not be reached or did not confirm what it was sent."""


class CredentialsUnavailable(StreamError):
    """Delivery is to read connections, and no credentials lookup was registered."""


class DeliveryPaused(StreamError):
    """ON_FAILURE_PAUSE: messages are still waiting for a receiver; the stream holds until they go."""


def _setting(name: str, default: str) -> str:
    return os.environ.get(f"AIRFLOW_STREAM_NOTIFY_{name.upper()}") or \
        str(config.settings().get("notify", {}).get(name, default))


@dataclass(frozen=True)
class Settings:
    timeout: float = 10.0
    max_message_bytes: int = MAX_MESSAGE_BYTES
    max_backoff: float = 30.0
    conn_ids: tuple[str, ...] = ("stream_ws_default",)

    @classmethod
    def load(cls) -> Settings:
        return cls(timeout=float(_setting("timeout", "10")),
                   max_message_bytes=int(_setting("max_message_bytes", str(MAX_MESSAGE_BYTES))),
                   max_backoff=float(_setting("max_backoff", "30")),
                   conn_ids=tuple(c.strip() for c in _setting("conn_ids", "stream_ws_default").split(",") if c.strip()))


# --- receivers ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Access:
    """What a connection adds to a request: headers, and TLS settings for ``wss://``."""

    headers: tuple[str, ...] = ()
    sslopt: dict = field(default_factory=dict)


#: looks up what the first of the connections ``conn_ids`` that serves ``url`` adds to a request to
#: it, or None when none does: ``credentials(url, conn_ids)``
Credentials = Callable[[str, Sequence[str]], Access | None]

_credentials: Credentials | None = None


def use_credentials(lookup: Credentials | None) -> None:
    """Make ``lookup`` the process's way to read connections (None forgets it). The Airflow side
    registers one (``airflow_stream_provider.hooks.bind``); delivery itself never imports Airflow."""
    global _credentials
    _credentials = lookup


def access_for(url: str, conn_ids: Sequence[str]) -> Access:
    """Headers and TLS options for ``url`` from the first ``stream_ws`` connection that serves it."""
    found = None
    if conn_ids:
        if _credentials is None:
            raise CredentialsUnavailable(
                f"{_safe(url)}: delivery reads the connections {', '.join(conn_ids)}, but this process "
                "registered no credentials lookup (airflow_stream_provider.hooks.bind() registers Airflow's)")
        found = _credentials(url, conn_ids)
    if found is not None:
        return found
    return Access(sslopt={"cert_reqs": ssl.CERT_REQUIRED} if url.startswith("wss://") else {})


class Receiver:
    """One persistent connection to one URL."""

    def __init__(self, url: str, access: Access, timeout: float) -> None:
        self.url = url
        self.access = access
        self.timeout = timeout
        self._ws: websocket.WebSocket | None = None
        self._lock = threading.Lock()

    def _connect(self) -> websocket.WebSocket:
        if self._ws is None or not self._ws.connected:
            self._ws = websocket.create_connection(self.url, timeout=self.timeout, header=list(self.access.headers),
                                                   sslopt=dict(self.access.sslopt), enable_multithread=True)
        return self._ws

    def send(self, texts: Sequence[str]) -> None:
        """Send ``texts`` in order and wait until the receiver confirmed all of them."""
        with self._lock:
            try:
                ws = self._connect()
                for text in texts:
                    ws.send(text)
                self._confirm(ws)
            except (OSError, websocket.WebSocketException) as err:
                self.close()
                raise ReceiverError(f"{_safe(self.url)}: {type(err).__name__}: {err}") from None

    def _confirm(self, ws: websocket.WebSocket) -> None:
        token = os.urandom(8).hex().encode()
        ws.ping(token)
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            opcode, frame = ws.recv_data_frame(control_frame=True)
            if opcode == websocket.ABNF.OPCODE_PONG and frame.data == token:
                return
            if opcode == websocket.ABNF.OPCODE_CLOSE:
                raise websocket.WebSocketConnectionClosedException("the receiver closed the connection")
        raise websocket.WebSocketTimeoutException("no confirmation (pong) from the receiver")

    def close(self) -> None:
        ws, self._ws = self._ws, None
        if ws is not None:
            with contextlib.suppress(OSError, websocket.WebSocketException):
                ws.close(timeout=1)


def _safe(url: str) -> str:
    """A URL without its query string, which may carry a key."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path}"


_POOL: dict[str, Receiver] = {}
_POOL_LOCK = threading.Lock()


def receiver(url: str, settings: Settings) -> Receiver:
    """The process's connection to ``url``, reused by every delivery (persistent connections)."""
    with _POOL_LOCK:
        found = _POOL.get(url)
        if found is None:
            found = _POOL[url] = Receiver(url, access_for(url, settings.conn_ids), settings.timeout)
        return found


@atexit.register
def close_all() -> None:
    with _POOL_LOCK:
        for rec in _POOL.values():
            rec.close()
        _POOL.clear()


# --- delivering an outbox -------------------------------------------------------------------


@dataclass
class DeliveryReport:
    sent_messages: int = 0
    sent_events: int = 0
    dropped_messages: int = 0
    dropped_events: int = 0
    retries: int = 0

    def summary(self) -> str:
        text = f"{self.sent_events} event(s) in {self.sent_messages} message(s) delivered"
        if self.dropped_events:
            text += f", {self.dropped_events} event(s) dropped"
        if self.retries:
            text += f", {self.retries} retr{'y' if self.retries == 1 else 'ies'}"
        return text


def deliver(outbox: Outbox, *, pause: bool, settings: Settings | None = None, give_up_after: float | None = None,
            say: Callable[[str], None] | None = None, sleep: Callable[[float], None] = time.sleep) -> DeliveryReport:
    """Deliver everything waiting in ``outbox`` to each of its receivers.

    :param pause: ON_FAILURE_PAUSE: retry until delivered (or ``give_up_after`` seconds, then raise
        :class:`DeliveryPaused` with the messages still waiting); otherwise drop what fails.
    """
    settings = settings or Settings.load()
    say = say or log.info
    report = DeliveryReport()
    started = time.monotonic()
    backoff = 0.5
    with outbox.delivering():
        waiting = list(outbox.targets)
        while waiting:
            still = []
            for url in waiting:
                if not _deliver_to(outbox, url, pause, settings, report, say):
                    still.append(url)
            waiting = still
            if not waiting:
                break
            if give_up_after is not None and time.monotonic() - started + backoff > give_up_after:
                pending = sum(len(outbox.pending(u)) for u in waiting)
                raise DeliveryPaused(f"{pending} message(s) wait for {', '.join(_safe(u) for u in waiting)} "
                                     "(ON_FAILURE_PAUSE); the stream holds until they are delivered")
            say(f"ON_FAILURE_PAUSE: retrying {', '.join(_safe(u) for u in waiting)} in {backoff:.1f}s")
            sleep(backoff)
            report.retries += 1
            backoff = min(backoff * 2, settings.max_backoff)
    return report


def _deliver_to(outbox: Outbox, url: str, pause: bool, settings: Settings, report: DeliveryReport,
                say: Callable[[str], None]) -> bool:
    """Send ``url`` its pending messages; False when some must wait (ON_FAILURE_PAUSE)."""
    pending = outbox.pending(url)
    rec = receiver(url, settings)
    i = 0
    while i < len(pending):
        chunk = _chunk(pending, i, settings.max_message_bytes)
        try:
            try:
                rec.send([m.text for m in chunk])
            except ReceiverError:
                rec.send([m.text for m in chunk])  # a stale connection: one fresh try
        except ReceiverError as err:
            outbox.mark(url, [], delivered=False, error=str(err))
            if pause:
                log.warning("notification to %s failed, will retry: %s", _safe(url), err)
                return False
            rest = pending[i:]
            outbox.mark(url, rest, delivered=False)
            report.dropped_messages += len(rest)
            report.dropped_events += sum(m.events for m in rest)
            say(f"dropped {sum(m.events for m in rest)} event(s) for {_safe(url)}: {err}")
            return True
        outbox.mark(url, chunk, delivered=True)
        report.sent_messages += len(chunk)
        report.sent_events += sum(m.events for m in chunk)
        i += len(chunk)
    return True


def _chunk(pending: list[Queued], start: int, max_bytes: int) -> list[Queued]:
    """Messages from ``start``: at most CHUNK of them and about ``max_bytes`` (at least one)."""
    out: list[Queued] = []
    size = 0
    for m in pending[start:start + CHUNK]:
        if out and size + len(m.text) > max_bytes:
            break
        out.append(m)
        size += len(m.text)
    return out
